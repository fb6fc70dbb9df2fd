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
    let has = |c: &str| cols.iter().any(|x| x == c);
    let labels = if has("group") && has("label") {
        // `dtsim validate`'s predictions.csv: the method and system, then the row.
        let (g, l) = (strings(&df, "group"), strings(&df, "label"));
        g.into_iter()
            .zip(l)
            .map(|(g, l)| format!("{g}: {l}"))
            .collect()
    } else {
        match &label_col {
            Some(c) => strings(&df, c),
            None => (1..=df.height()).map(|i| format!("run {i}")).collect(),
        }
    };
    let (p, m) = (f64s(&df, &pc), f64s(&df, &mc));
    // Ranges where the CSV has them (`dtsim validate`'s predictions.csv): the measured runs'
    // fastest and slowest, and the model's plays'.
    let range = |lo: &str, hi: &str| -> Vec<Option<(f64, f64)>> {
        if !(has(lo) && has(hi)) {
            return vec![None; df.height()];
        }
        let (a, b) = (f64s(&df, lo), f64s(&df, hi));
        a.into_iter().zip(b).map(|(a, b)| Some((a?, b?))).collect()
    };
    let runs = range("measured_min_secs", "measured_max_secs");
    let plays = range("plays_fastest_secs", "plays_slowest_secs");
    let kept: Vec<usize> = (0..df.height())
        .filter(|&i| m[i].is_some() && p[i].is_some())
        .collect();
    let rows: Vec<(String, f64, f64)> = kept
        .iter()
        .filter_map(|&i| Some((labels[i].clone(), m[i]?, p[i]?)))
        .collect();
    let spans: Vec<figures::PointSpans> = kept
        .iter()
        .map(|&i| figures::PointSpans {
            measured: runs[i],
            predicted: plays[i],
        })
        .collect();
    let bars = if spans
        .iter()
        .any(|s| s.measured.is_some() || s.predicted.is_some())
    {
        " Bars: the measured runs' range (across) and the model's plays' (up)."
    } else {
        ""
    };
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
        &format!("Each point is one run; the band is ±10% around predicted = measured.{bars} Mean absolute error {}, worst {}.", fmt::pct(mean), fmt::pct(worst)),
        &unit,
        &rows,
        &spans,
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
