//! The section of `dtsim validate --out` error tables (`errors.csv`): which method groups are
//! within a bar, dataset by dataset.
//!
//! A group (a method on a system or topology) is within the bar when its median |error| is at
//! most `median_pct` and its largest at most `max_pct` (the testbed's bar is 3% and 10%, as
//! `dtsim validate --max-median-error 3 --max-error 10` checks it). One table over every
//! `errors.csv` given: per dataset the groups within, the rows scored and their mean |error|
//! (from the `predictions.csv` beside each `errors.csv`, where there is one), and the groups
//! outside with their median and largest error; then a total per family of datasets (a
//! dataset's name up to its second `_`, e.g. `testbed_gloo`) where there are several, and one
//! over all. A group outside is marked "within launches" where every scored row off by more
//! than the bar's median predicts between its fastest and its slowest launch's median (the
//! `launch_median_*_secs` columns), as `dtsim validate` names them: misses that more launches
//! might settle but a better model of the mean call cannot. Where the rows name their launches'
//! medians (`launch_medians_secs`), each dataset also says how many of its groups a model exact
//! to every row's median would have within the bar on average when the launches are recorded
//! again (`sim::validate::launch_noise`, the same draws as `dtsim validate`'s; a row without
//! launches counts as exact): how much of the bar the recordings themselves allow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sim::validate::launch_noise;
use sim::validate::Gates;

use super::Section;
use crate::data::{f64s, has, read_table, strings};
use crate::figures::Table;

/// A group is within when its median |error| is at most `median_pct` and its largest at most
/// `max_pct` (percent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub median_pct: f64,
    pub max_pct: f64,
}

impl Default for Bar {
    /// The testbed's bar (issue 11): 3% median, 10% at worst.
    fn default() -> Self {
        Bar {
            median_pct: 3.0,
            max_pct: 10.0,
        }
    }
}

impl Bar {
    /// `"MEDIAN,MAX"` in percent, e.g. `"3,10"`.
    pub fn parse(s: &str) -> Result<Bar, String> {
        let bad = || format!("--bar {s:?}: expected MEDIAN,MAX in percent, e.g. 3,10");
        let pct = |p: &str| -> Result<f64, String> {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(bad)
        };
        match s.split(',').collect::<Vec<_>>()[..] {
            [m, x] => Ok(Bar {
                median_pct: pct(m)?,
                max_pct: pct(x)?,
            }),
            _ => Err(bad()),
        }
    }

    fn holds(self, g: &Group) -> bool {
        g.median_pct <= self.median_pct && g.max_pct <= self.max_pct
    }

    fn gates(self) -> Gates {
        Gates {
            max_median_error_pct: Some(self.median_pct),
            max_error_pct: Some(self.max_pct),
        }
    }
}

/// True when `cols` are those of `dtsim validate`'s `errors.csv`.
pub(super) fn is_errors_table(cols: &[String]) -> bool {
    [
        "dataset",
        "group",
        "median_abs_error_pct",
        "max_abs_error_pct",
    ]
    .iter()
    .all(|c| cols.iter().any(|x| x == c))
}

/// One scored group of one dataset.
#[derive(Debug, Clone)]
struct Group {
    name: String,
    median_pct: f64,
    max_pct: f64,
}

/// A scored row: its |error|, whether the prediction lies between the fastest and the slowest
/// launch's median (`None`: no launches recorded apart), and its launches' medians (seconds;
/// empty where not named).
#[derive(Debug, Clone)]
struct RowEntry {
    error_pct: f64,
    within_launches: Option<bool>,
    launches: Vec<f64>,
}

/// A dataset's groups, in the order met, and its scored rows.
#[derive(Debug, Default)]
struct Dataset {
    name: String,
    groups: Vec<Group>,
    rows_by_group: BTreeMap<String, Vec<RowEntry>>,
    /// [`Dataset::exact_model_within`] under the section's bar, drawn once.
    exact_within: Option<f64>,
}

impl Dataset {
    /// Every scored row's |error|.
    fn row_errors_pct(&self) -> impl Iterator<Item = f64> + '_ {
        self.rows_by_group.values().flatten().map(|r| r.error_pct)
    }

    /// How many of its groups a model exact to every row's median would have within `bar` on
    /// average over re-recordings of the launches (a group whose rows name none counts whole);
    /// `None` where no row names its launches.
    fn exact_model_within(&self, bar: Bar) -> Option<f64> {
        let mut any = false;
        let within = self
            .groups
            .iter()
            .map(|g| {
                let rows: Vec<&[f64]> = self
                    .rows_by_group
                    .get(&g.name)
                    .map(|rows| rows.iter().map(|r| r.launches.as_slice()).collect())
                    .unwrap_or_default();
                let label = format!("{} {}", self.name, g.name);
                launch_noise::of_group(&rows, &label).map_or(1.0, |n| {
                    any = true;
                    n.within_share(&bar.gates())
                })
            })
            .sum();
        any.then_some(within)
    }

    /// Whether `group` misses only within its launches' spread: a row off by more than
    /// `row_limit_pct` exists and every such row predicts between its launches' medians.
    fn within_launches(&self, group: &str, row_limit_pct: f64) -> bool {
        let Some(rows) = self.rows_by_group.get(group) else {
            return false;
        };
        let mut off = rows
            .iter()
            .filter(|r| r.error_pct > row_limit_pct)
            .peekable();
        off.peek().is_some() && off.all(|r| r.within_launches == Some(true))
    }
}

/// The bar table over every `errors.csv` of `paths` (datasets in the order met).
pub(super) fn groups_section(paths: &[PathBuf], bar: Bar) -> Result<Section, String> {
    let mut datasets: Vec<(String, Dataset)> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for path in paths {
        let df = read_table(path)?;
        let (names, groups) = (strings(&df, "dataset"), strings(&df, "group"));
        let (medians, maxes) = (
            f64s(&df, "median_abs_error_pct"),
            f64s(&df, "max_abs_error_pct"),
        );
        let scored = f64s(&df, "scored_rows");
        for i in 0..df.height() {
            // Groups with no scored row (every row fitted on) have no error to hold to a bar.
            if has(&df, "scored_rows") && scored[i].unwrap_or(0.0) == 0.0 {
                continue;
            }
            let (Some(median_pct), Some(max_pct)) = (medians[i], maxes[i]) else {
                return Err(format!(
                    "{}: row {}: median_abs_error_pct and max_abs_error_pct must be numbers",
                    path.display(),
                    i + 2
                ));
            };
            let k = *index.entry(names[i].clone()).or_insert_with(|| {
                datasets.push((
                    names[i].clone(),
                    Dataset {
                        name: names[i].clone(),
                        ..Dataset::default()
                    },
                ));
                datasets.len() - 1
            });
            datasets[k].1.groups.push(Group {
                name: groups[i].clone(),
                median_pct,
                max_pct,
            });
        }
        for (name, rows) in scored_rows(&path.with_file_name("predictions.csv"))? {
            if let Some(&k) = index.get(&name) {
                let d = &mut datasets[k].1;
                for (group, entry) in rows {
                    d.rows_by_group.entry(group).or_default().push(entry);
                }
            }
        }
    }
    if datasets.is_empty() {
        return Err(format!(
            "{}: no scored groups in the error tables",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (_, d) in &mut datasets {
        d.exact_within = d.exact_model_within(bar);
    }
    let table = bar_table(&datasets, bar);
    let (within, all) = count(datasets.iter().map(|(_, d)| d), bar);
    let members: Vec<&Dataset> = datasets.iter().map(|(_, d)| d).collect();
    let exact = match exact_total(&members) {
        Some(exact) => format!(
            " Re-recorded from their launches, a model exact to every row's median would have \
             {exact:.1} of them within on average (the recordings' own spread)."
        ),
        None => String::new(),
    };
    Ok(Section {
        heading: "Validation groups".to_string(),
        text: format!(
            "{within} of {all} method groups within median |error| <= {}% and max |error| <= \
             {}%, over {} datasets (a group is a method on a system or topology).{exact}",
            bar.median_pct,
            bar.max_pct,
            datasets.len()
        ),
        figures: Vec::new(),
        tables: vec![("Groups within the bar, by dataset".to_string(), table)],
    })
}

/// Per dataset, each scored row of `predictions` (none where it is absent): its group and its
/// [`RowEntry`].
type ScoredRow = (String, RowEntry);

fn scored_rows(predictions: &Path) -> Result<BTreeMap<String, Vec<ScoredRow>>, String> {
    let mut out: BTreeMap<String, Vec<ScoredRow>> = BTreeMap::new();
    if !predictions.is_file() {
        return Ok(out);
    }
    let df = read_table(predictions)?;
    if !has(&df, "dataset") || !has(&df, "error_pct") {
        return Ok(out);
    }
    let names = strings(&df, "dataset");
    let groups = if has(&df, "group") {
        strings(&df, "group")
    } else {
        vec![String::new(); df.height()]
    };
    let errors = f64s(&df, "error_pct");
    let scored = has(&df, "scored").then(|| strings(&df, "scored"));
    let column = |name: &str| has(&df, name).then(|| f64s(&df, name));
    let (predicted, lo, hi) = (
        column("predicted_secs"),
        column("launch_median_min_secs"),
        column("launch_median_max_secs"),
    );
    let launches = has(&df, "launch_medians_secs").then(|| strings(&df, "launch_medians_secs"));
    for i in 0..df.height() {
        if scored.as_ref().is_some_and(|s| s[i] != "true") {
            continue;
        }
        let at = |c: &Option<Vec<Option<f64>>>| c.as_ref().and_then(|v| v[i]);
        let within = match (at(&predicted), at(&lo), at(&hi)) {
            (Some(p), Some(lo), Some(hi)) => Some((lo..=hi).contains(&p)),
            _ => None,
        };
        let launches = launches
            .as_ref()
            .map(|l| {
                l[i].split(';')
                    .filter_map(|v| v.trim().parse::<f64>().ok())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(e) = errors[i] {
            out.entry(names[i].clone()).or_default().push((
                groups[i].clone(),
                RowEntry {
                    error_pct: e.abs(),
                    within_launches: within,
                    launches,
                },
            ));
        }
    }
    Ok(out)
}

/// What an exact model would have within over `members` (a dataset whose rows name no
/// launches counts whole), where any of them names its launches.
fn exact_total(members: &[&Dataset]) -> Option<f64> {
    members.iter().any(|d| d.exact_within.is_some()).then(|| {
        members
            .iter()
            .map(|d| d.exact_within.unwrap_or(d.groups.len() as f64))
            .sum()
    })
}

/// (groups within, groups) over `datasets`.
fn count<'a>(datasets: impl Iterator<Item = &'a Dataset>, bar: Bar) -> (usize, usize) {
    datasets.fold((0, 0), |(w, n), d| {
        (
            w + d.groups.iter().filter(|g| bar.holds(g)).count(),
            n + d.groups.len(),
        )
    })
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// A dataset's family: its name up to the second `_` (`testbed_gloo_star5` -> `testbed_gloo`).
fn family(name: &str) -> &str {
    match name.match_indices('_').nth(1) {
        Some((i, _)) => &name[..i],
        None => name,
    }
}

fn bar_table(datasets: &[(String, Dataset)], bar: Bar) -> Table {
    let pct = |v: f64| format!("{v:.1}%");
    let rows_and_mean = |errors: &[f64]| match mean(errors) {
        Some(m) => (errors.len().to_string(), pct(m)),
        None => (String::new(), String::new()),
    };
    let exact = |members: &[&Dataset]| {
        let all: usize = members.iter().map(|d| d.groups.len()).sum();
        exact_total(members)
            .map(|w| format!("{w:.1} of {all}"))
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    for (name, d) in datasets {
        let (within, all) = count(std::iter::once(d), bar);
        let (n, m) = rows_and_mean(&d.row_errors_pct().collect::<Vec<_>>());
        let outside: Vec<String> = d
            .groups
            .iter()
            .filter(|g| !bar.holds(g))
            .map(|g| {
                let spread = if d.within_launches(&g.name, bar.median_pct) {
                    ", within launches"
                } else {
                    ""
                };
                format!(
                    "{} ({} / {}{spread})",
                    g.name,
                    pct(g.median_pct),
                    pct(g.max_pct)
                )
            })
            .collect();
        rows.push(vec![
            name.clone(),
            format!("{within} of {all}"),
            exact(&[d]),
            n,
            m,
            outside.join("; "),
        ]);
    }
    let mut families: Vec<&str> = Vec::new();
    for (name, _) in datasets {
        if !families.contains(&family(name)) {
            families.push(family(name));
        }
    }
    let mut total = |label: String, members: Vec<&Dataset>| {
        let (within, all) = count(members.iter().copied(), bar);
        let errors: Vec<f64> = members.iter().flat_map(|d| d.row_errors_pct()).collect();
        let (n, m) = rows_and_mean(&errors);
        rows.push(vec![
            label,
            format!("{within} of {all}"),
            exact(&members),
            n,
            m,
            String::new(),
        ]);
    };
    if families.len() > 1 {
        for f in &families {
            let members: Vec<&Dataset> = datasets
                .iter()
                .filter(|(name, _)| family(name) == *f)
                .map(|(_, d)| d)
                .collect();
            total(format!("all {} ({})", f, members.len()), members);
        }
    }
    total(
        format!("all datasets ({})", datasets.len()),
        datasets.iter().map(|(_, d)| d).collect(),
    );
    Table {
        columns: [
            "dataset",
            "groups within",
            "an exact model's, re-recorded",
            "rows",
            "mean |error|",
            "groups outside (median / max)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dtsim-groups-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A validation directory as `dtsim validate --out` writes it: `errors` rows are
    /// (dataset, group, scored rows, median, max), `predictions` rows (dataset, error, scored).
    fn validation_dir(
        name: &str,
        errors: &[(&str, &str, u32, f64, f64)],
        predictions: &[(&str, f64, bool)],
    ) -> PathBuf {
        let d = scratch(name);
        let mut e = String::from(
            "dataset,group,scored_rows,calibration_rows,median_abs_error_pct,max_abs_error_pct\n",
        );
        for (ds, g, n, med, max) in errors {
            e += &format!("{ds},{g},{n},0,{med},{max}\n");
        }
        std::fs::write(d.join("errors.csv"), e).unwrap();
        let mut p = String::from("dataset,group,row,error_pct,scored\n");
        for (i, (ds, err, scored)) in predictions.iter().enumerate() {
            p += &format!("{ds},g,{i},{err},{scored}\n");
        }
        std::fs::write(d.join("predictions.csv"), p).unwrap();
        d.join("errors.csv")
    }

    #[test]
    fn a_group_is_within_when_both_its_median_and_its_worst_error_are() {
        let gloo = validation_dir(
            "gloo",
            &[
                ("testbed_gloo_a", "ring @ star", 4, 1.0, 4.0),
                ("testbed_gloo_a", "tree @ star", 4, 3.5, 4.0),
                ("testbed_gloo_a", "bcast @ star", 4, 1.0, 12.0),
                ("testbed_gloo_a", "fitted @ star", 0, 0.0, 0.0),
            ],
            &[
                ("testbed_gloo_a", -2.0, true),
                ("testbed_gloo_a", 4.0, true),
                ("testbed_gloo_a", 50.0, false),
            ],
        );
        let mpi = validation_dir(
            "mpi",
            &[("testbed_mpi_b", "ring @ star", 2, 2.0, 2.5)],
            &[("testbed_mpi_b", 1.0, true), ("testbed_mpi_b", -3.0, true)],
        );
        let s = groups_section(&[gloo, mpi], Bar::default()).unwrap();
        assert!(
            s.text.starts_with("2 of 4 method groups within"),
            "{}",
            s.text
        );
        let t = &s.tables[0].1;
        // The fitted group (no scored row) is left out; the unscored prediction too.
        assert_eq!(
            t.rows[0],
            vec![
                "testbed_gloo_a",
                "1 of 3",
                "",
                "2",
                "3.0%",
                "tree @ star (3.5% / 4.0%); bcast @ star (1.0% / 12.0%)"
            ]
        );
        // No row names its launches: nothing to say of an exact model.
        assert_eq!(
            t.rows[1],
            vec!["testbed_mpi_b", "1 of 1", "", "2", "2.0%", ""]
        );
        // A total per family, then over all.
        assert_eq!(
            t.rows[2][..5],
            ["all testbed_gloo (1)", "1 of 3", "", "2", "3.0%"]
        );
        assert_eq!(
            t.rows[3][..5],
            ["all testbed_mpi (1)", "1 of 1", "", "2", "2.0%"]
        );
        assert_eq!(
            t.rows[4][..5],
            ["all datasets (2)", "2 of 4", "", "4", "2.5%"]
        );
        // A looser bar lets the tree in.
        let loose = Bar::parse("4, 10").unwrap();
        let s = groups_section(
            &[validation_dir(
                "loose",
                &[("d_x", "tree @ star", 4, 3.5, 4.0)],
                &[],
            )],
            loose,
        )
        .unwrap();
        assert_eq!(s.tables[0].1.rows[0][..2], ["d_x", "1 of 1"]);
    }

    #[test]
    fn a_group_outside_is_marked_where_every_row_off_lies_between_its_launches() {
        let d = scratch("launches");
        std::fs::write(
            d.join("errors.csv"),
            "dataset,group,scored_rows,median_abs_error_pct,max_abs_error_pct\n\
             t_x,noisy,2,4.5,8.0\nt_x,biased,2,6.5,8.0\nt_x,pooled,1,8.0,8.0\n",
        )
        .unwrap();
        // Measured 100 ms each; launches' medians where the row gives them.
        std::fs::write(
            d.join("predictions.csv"),
            "dataset,group,row,predicted_secs,error_pct,scored,launch_median_min_secs,\
             launch_median_max_secs\n\
             t_x,noisy,1,0.108,8.0,true,0.095,0.110\n\
             t_x,noisy,2,0.101,1.0,true,,\n\
             t_x,biased,3,0.108,8.0,true,0.095,0.110\n\
             t_x,biased,4,0.105,5.0,true,0.095,0.104\n\
             t_x,pooled,5,0.108,8.0,true,,\n",
        )
        .unwrap();
        let s = groups_section(&[d.join("errors.csv")], Bar::default()).unwrap();
        assert_eq!(
            s.tables[0].1.rows[0][5],
            "noisy (4.5% / 8.0%, within launches); biased (6.5% / 8.0%); pooled (8.0% / 8.0%)"
        );
    }

    #[test]
    fn a_bad_bar_or_table_is_refused_by_name() {
        for bad in ["3", "3,x", "-1,10", "3,10,20"] {
            let e = Bar::parse(bad).unwrap_err();
            assert!(e.contains("MEDIAN,MAX"), "{bad}: {e}");
        }
        let d = scratch("bad");
        std::fs::write(
            d.join("errors.csv"),
            "dataset,group,scored_rows,median_abs_error_pct,max_abs_error_pct\nd,g,3,,2\n",
        )
        .unwrap();
        let e = groups_section(&[d.join("errors.csv")], Bar::default()).unwrap_err();
        assert!(
            e.contains("errors.csv: row 2") && e.contains("median_abs_error_pct"),
            "{e}"
        );
    }

    #[test]
    fn families_are_a_datasets_first_two_words() {
        assert_eq!(family("testbed_gloo_star5_heldout"), "testbed_gloo");
        assert_eq!(family("azure_nd"), "azure_nd");
        assert_eq!(family("single"), "single");
    }
}
