//! The section of a what-if scored: the same calls measured and predicted on two systems (a
//! topology and its changed copy, e.g. the 2:1 leaves and the same leaves with their uplinks
//! doubled), from two `dtsim validate --out` `predictions.csv` files.
//!
//! A study asks "how much faster would it run if ...?". Its answer is the ratio of the two
//! predictions, and what it is worth is how far that ratio is from the measured one: per row,
//! `predicted before/after ÷ measured before/after − 1`. Rows pair up by method (a group's
//! name before ` @ `) and row label (`all_reduce 262144 B 4 ranks`); a topology (the group's
//! name after ` @ `) picks one system's rows where a file holds several.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Section;
use crate::data::{f64s, has, read_table, strings};
use crate::figures::Table;

/// One side of a what-if: a `predictions.csv` (or the folder holding one) and, optionally,
/// the topology whose rows to take.
#[derive(Debug, Clone)]
pub struct Side {
    pub path: PathBuf,
    pub topology: Option<String>,
}

/// One row of a side: measured and predicted seconds.
#[derive(Debug, Clone, Copy)]
struct Times {
    measured_secs: f64,
    predicted_secs: f64,
}

/// A row's key: its method and its label.
type Key = (String, String);

/// The rows of `side` by (method, label), in file order.
fn rows(side: &Side) -> Result<Vec<(Key, Times)>, String> {
    let path = if side.path.is_dir() {
        side.path.join("predictions.csv")
    } else {
        side.path.clone()
    };
    let df = read_table(&path)?;
    for c in ["group", "label", "measured_secs", "predicted_secs"] {
        if !has(&df, c) {
            return Err(format!(
                "{}: no column {c:?}; expected dtsim validate's predictions.csv (--out)",
                path.display()
            ));
        }
    }
    let (groups, labels) = (strings(&df, "group"), strings(&df, "label"));
    let (measured, predicted) = (f64s(&df, "measured_secs"), f64s(&df, "predicted_secs"));
    let mut out = Vec::new();
    for i in 0..df.height() {
        let (method, topology) = groups[i]
            .split_once(" @ ")
            .unwrap_or((groups[i].as_str(), ""));
        if side.topology.as_deref().is_some_and(|t| t != topology) {
            continue;
        }
        if let (Some(m), Some(p)) = (measured[i], predicted[i]) {
            out.push((
                (method.to_string(), labels[i].clone()),
                Times {
                    measured_secs: m,
                    predicted_secs: p,
                },
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some((key, _)) = out.iter().find(|(k, _)| !seen.insert(k.clone())) {
        return Err(format!(
            "{}: {} \"{}\" is on more than one topology; name one as {}@TOPOLOGY",
            path.display(),
            key.0,
            key.1,
            side.path.display()
        ));
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no rows{}",
            path.display(),
            side.topology
                .as_deref()
                .map(|t| format!(" on topology {t:?} (a group's name after \" @ \")"))
                .unwrap_or_default()
        ));
    }
    Ok(out)
}

/// The what-if from `before` to `after`: per paired row both measured times, the measured and
/// predicted ratios and the predicted ratio's error; the mean and worst of those errors.
pub fn whatif_section(before: &Side, after: &Side) -> Result<Section, String> {
    let after_rows: BTreeMap<Key, Times> = rows(after)?.into_iter().collect();
    let ms = |s: f64| format!("{:.1} ms", s * 1e3);
    let mut table = Vec::new();
    let mut errors = Vec::new();
    for (key, b) in rows(before)? {
        let Some(a) = after_rows.get(&key) else {
            continue;
        };
        let measured = b.measured_secs / a.measured_secs;
        let predicted = b.predicted_secs / a.predicted_secs;
        let error = (predicted / measured - 1.0) * 100.0;
        errors.push(error.abs());
        table.push(vec![
            key.0,
            key.1,
            ms(b.measured_secs),
            ms(a.measured_secs),
            format!("{measured:.3}"),
            format!("{predicted:.3}"),
            format!("{error:+.1}%"),
        ]);
    }
    if errors.is_empty() {
        return Err(format!(
            "{} and {}: no row on both sides (rows pair by method and label)",
            before.path.display(),
            after.path.display()
        ));
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let worst = errors.iter().copied().fold(0.0, f64::max);
    let name = |s: &Side| {
        format!(
            "{}{}",
            s.path.display(),
            s.topology
                .as_deref()
                .map(|t| format!(" @ {t}"))
                .unwrap_or_default()
        )
    };
    Ok(Section {
        heading: format!("What-if: {} -> {}", name(before), name(after)),
        text: format!(
            "{} rows on both sides. The predicted before/after ratio is {mean:.1}% from the \
             measured one on average, {worst:.1}% at worst.",
            errors.len()
        ),
        figures: Vec::new(),
        tables: vec![(
            "What-if, row by row".to_string(),
            Table {
                columns: [
                    "method",
                    "row",
                    "before measured",
                    "after measured",
                    "measured before / after",
                    "predicted before / after",
                    "error of the predicted ratio",
                ]
                .map(String::from)
                .to_vec(),
                rows: table,
            },
        )],
    })
}

/// `PATH` or `PATH@TOPOLOGY` as a [`Side`] (a topology name has no `@`, a path may).
pub fn parse_side(s: &str) -> Side {
    match s.rsplit_once('@') {
        Some((p, t)) if !t.is_empty() && !t.contains('/') && !Path::new(s).exists() => Side {
            path: PathBuf::from(p),
            topology: Some(t.to_string()),
        },
        _ => Side {
            path: PathBuf::from(s),
            topology: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predictions(name: &str, rows: &[(&str, &str, f64, f64)]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dtsim-whatif-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let mut text = String::from("dataset,group,row,label,measured_secs,predicted_secs\n");
        for (i, (g, l, m, p)) in rows.iter().enumerate() {
            text += &format!("d,{g},{i},{l},{m},{p}\n");
        }
        std::fs::write(d.join("predictions.csv"), text).unwrap();
        d
    }

    #[test]
    fn a_what_if_is_scored_by_how_far_its_predicted_ratio_is_from_the_measured_one() {
        // Before: the 2:1 leaves (and a star row the topology leaves out); after: 1:1.
        let before = predictions(
            "before",
            &[
                (
                    "ring @ two_level_2to1",
                    "all_reduce 1 B 4 ranks",
                    0.12,
                    0.15,
                ),
                ("ring @ star", "all_reduce 1 B 4 ranks", 9.0, 9.0),
                ("tree @ two_level_2to1", "all_reduce 1 B 4 ranks", 0.2, 0.2),
            ],
        );
        let after = predictions(
            "after",
            &[
                (
                    "ring @ two_level_1to1",
                    "all_reduce 1 B 4 ranks",
                    0.10,
                    0.10,
                ),
                ("tree @ two_level_1to1", "all_reduce 1 B 4 ranks", 0.2, 0.22),
            ],
        );
        let s = whatif_section(
            &parse_side(&format!("{}@two_level_2to1", before.display())),
            &parse_side(after.to_str().unwrap()),
        )
        .unwrap();
        let t = &s.tables[0].1;
        assert_eq!(t.rows.len(), 2);
        // Measured 1.2x, predicted 1.5x: the predicted ratio 25% too high.
        assert_eq!(
            t.rows[0],
            vec![
                "ring",
                "all_reduce 1 B 4 ranks",
                "120.0 ms",
                "100.0 ms",
                "1.200",
                "1.500",
                "+25.0%"
            ]
        );
        assert_eq!(t.rows[1][6], "-9.1%");
        assert!(
            s.text
                .contains("17.0% from the measured one on average, 25.0% at worst"),
            "{}",
            s.text
        );
    }

    #[test]
    fn sides_that_share_no_row_or_name_no_file_are_refused_by_name() {
        let a = predictions("a", &[("ring @ x", "r1", 1.0, 1.0)]);
        let b = predictions("b", &[("ring @ y", "r2", 1.0, 1.0)]);
        let e = whatif_section(
            &parse_side(a.to_str().unwrap()),
            &parse_side(b.to_str().unwrap()),
        )
        .unwrap_err();
        assert!(e.contains("no row on both sides"), "{e}");
        let e = whatif_section(
            &parse_side(&format!("{}@z", a.display())),
            &parse_side(b.to_str().unwrap()),
        )
        .unwrap_err();
        assert!(e.contains("no rows on topology \"z\""), "{e}");
        let e = rows(&parse_side("/nonexistent/predictions.csv")).unwrap_err();
        assert!(e.contains("/nonexistent/predictions.csv"), "{e}");
    }
}
