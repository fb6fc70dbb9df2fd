//! The section of a validation CSV: predicted vs measured.

use super::*;

pub(super) fn validation_section(path: &Path, tag: &str) -> Result<Section, String> {
    let df = read_table(path)?;
    let cols = column_names(&df);
    let pc = cols
        .iter()
        .find(|c| c.contains("predicted"))
        .cloned()
        .unwrap_or_default();
    let mc = cols
        .iter()
        .find(|c| c.contains("measured"))
        .cloned()
        .unwrap_or_default();
    let unit = mc
        .rsplit('_')
        .next()
        .filter(|u| *u != mc)
        .unwrap_or("value")
        .to_string();
    let label_col = cols
        .iter()
        .find(|c| *c != &pc && *c != &mc && f64s(&df, c).iter().all(|x| x.is_none()))
        .cloned();
    let labels = match &label_col {
        Some(c) => strings(&df, c),
        None => (1..=df.height()).map(|i| format!("run {i}")).collect(),
    };
    let (p, m) = (f64s(&df, &pc), f64s(&df, &mc));
    let rows: Vec<(String, f64, f64)> = (0..df.height())
        .filter_map(|i| Some((labels[i].clone(), m[i]?, p[i]?)))
        .collect();
    let errs: Vec<f64> = rows
        .iter()
        .filter(|r| r.1 != 0.0)
        .map(|r| ((r.2 - r.1) / r.1).abs() * 100.0)
        .collect();
    let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
    let worst = errs.iter().copied().fold(0.0, f64::max);
    let fig = figures::predicted_vs_measured(
        &format!("{tag}-validation"),
        "Predicted vs measured",
        &format!("Each point is one run; the band is ±10% around predicted = measured. Mean absolute error {}, worst {}.", fmt::pct(mean), fmt::pct(worst)),
        &unit,
        &rows,
        10.0,
    )?;
    Ok(Section {
        heading: format!("Validation ({})", path.display()),
        text: format!(
            "{} runs; mean absolute error {}, worst {}.",
            rows.len(),
            fmt::pct(mean),
            fmt::pct(worst)
        ),
        figures: vec![fig],
        tables: Vec::new(),
    })
}
