//! `dtsim validate --baseline DIR`: what moved against an earlier validation.
//!
//! Every model change and every recalibrated profile is judged the same way: replay the same
//! measured runs, then count the groups that came within the gates or left them, the rows whose
//! |error| shrank or grew, and the mean |error| before and after. This module reads an earlier
//! run's `--out` folder (`errors.csv`, `predictions.csv`) into [`Scores`], reads the run in hand
//! through the same two tables ([`Scores::of`], so both sides carry the same rounding), and
//! compares them ([`compare`], printed by [`Comparison`]'s `Display`).
//!
//! Groups are matched by dataset and group, rows by dataset, row number and label (a dataset
//! whose rows were re-recorded or reordered shows as rows only in one of the two). Only scored
//! rows count: calibration rows and rows `--score-on` left out are in neither.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::{num, parse_rows, Gates, Report, Row};

/// A row's |error| moves when it changes by more than this many percentage points; smaller
/// changes are the replay's own noise (a stratified draw landing elsewhere) and count as none.
pub const MOVED_POINTS: f64 = 0.5;

/// Rows listed by how far they moved, at most.
pub const LISTED_ROWS: usize = 8;

/// A scored group's errors, percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupScore {
    pub median_abs_pct: f64,
    pub max_abs_pct: f64,
}

/// A scored row: its group and signed error, percent.
#[derive(Debug, Clone, PartialEq)]
pub struct RowScore {
    pub group: String,
    pub error_pct: f64,
}

/// (dataset, row number, label): what identifies a row across two validations.
pub type RowKey = (String, usize, String);

/// The scored groups and rows of one validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scores {
    /// Where they were read from (the run in hand: none).
    pub source: Option<PathBuf>,
    pub groups: BTreeMap<(String, String), GroupScore>,
    pub rows: BTreeMap<RowKey, RowScore>,
}

impl Scores {
    /// The scores of an earlier `dtsim validate --out DIR`: `DIR/errors.csv` and
    /// `DIR/predictions.csv` (`dir` may also name either file).
    pub fn read(dir: &Path) -> Result<Scores, String> {
        let dir = if dir.is_file() {
            dir.parent().unwrap_or(Path::new("."))
        } else {
            dir
        };
        let text = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map(|t| (t, path.display().to_string()))
                .map_err(|e| {
                    format!(
                        "{}: a readable CSV file, as `dtsim validate --out` writes ({e})",
                        path.display()
                    )
                })
        };
        let (errors, errors_file) = text("errors.csv")?;
        let (predictions, predictions_file) = text("predictions.csv")?;
        let mut scores = Scores::parse((&errors, &errors_file), (&predictions, &predictions_file))?;
        scores.source = Some(dir.to_path_buf());
        Ok(scores)
    }

    /// The scores of the run in hand, through the tables it writes (an error only if those
    /// lost a column this reads).
    pub fn of(report: &Report) -> Result<Scores, String> {
        Scores::parse(
            (&report.errors_csv(), "errors.csv"),
            (&report.predictions_csv(), "predictions.csv"),
        )
    }

    /// Scores from the text of `errors.csv` and `predictions.csv`, each with the name its
    /// errors give it.
    fn parse(errors: (&str, &str), predictions: (&str, &str)) -> Result<Scores, String> {
        let mut scores = Scores::default();
        for (i, r) in parse_rows(errors.0, errors.1)?.iter().enumerate() {
            let at = |e: String| format!("{}: row {}: {e}", errors.1, i + 1);
            if number(r, "scored_rows").map_err(at)? == 0.0 {
                continue;
            }
            scores.groups.insert(
                (
                    text(r, "dataset").map_err(at)?,
                    text(r, "group").map_err(at)?,
                ),
                GroupScore {
                    median_abs_pct: number(r, "median_abs_error_pct").map_err(at)?,
                    max_abs_pct: number(r, "max_abs_error_pct").map_err(at)?,
                },
            );
        }
        for (i, r) in parse_rows(predictions.0, predictions.1)?.iter().enumerate() {
            let at = |e: String| format!("{}: row {}: {e}", predictions.1, i + 1);
            let scored = flag(r, "scored").map_err(at)? && !flag(r, "calibration").map_err(at)?;
            if !scored {
                continue;
            }
            let row = number(r, "row").map_err(at)?;
            if row < 0.0 || row.fract() != 0.0 {
                return Err(at(format!("column \"row\": a row number, got {row}")));
            }
            scores.rows.insert(
                (
                    text(r, "dataset").map_err(at)?,
                    row as usize,
                    text(r, "label").map_err(at)?,
                ),
                RowScore {
                    group: text(r, "group").map_err(at)?,
                    error_pct: number(r, "error_pct").map_err(at)?,
                },
            );
        }
        Ok(scores)
    }
}

fn text(r: &Row, col: &str) -> Result<String, String> {
    r.get(col)
        .cloned()
        .ok_or_else(|| format!("column {col:?}: missing"))
}

/// A finite number (validate's own [`num`], which lets NaN and infinities through).
fn number(r: &Row, col: &str) -> Result<f64, String> {
    let v = num(r, col)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("column {col:?}: a number, got {:?}", r[col]))
    }
}

fn flag(r: &Row, col: &str) -> Result<bool, String> {
    match text(r, col)?.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(format!("column {col:?}: true or false, got {other:?}")),
    }
}

/// A group that crossed the gates, with its errors before and now.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    pub dataset: String,
    pub group: String,
    pub before: GroupScore,
    pub now: GroupScore,
}

/// A row matched in both, with its signed error before and now.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub key: RowKey,
    pub group: String,
    pub before_pct: f64,
    pub now_pct: f64,
}

impl Moved {
    /// How much its |error| grew, points (negative: it shrank).
    pub fn change_points(&self) -> f64 {
        self.now_pct.abs() - self.before_pct.abs()
    }
}

/// Counts of groups or rows: in the baseline only, now only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unmatched {
    pub only_before: usize,
    pub only_now: usize,
}

/// What moved between a baseline and the run in hand.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub baseline: Option<PathBuf>,
    pub gates: Gates,
    /// Groups within the gates (of all scored groups) in the baseline and now; `None` without
    /// gates.
    pub within: Option<((usize, usize), (usize, usize))>,
    /// Groups in both that came within the gates, and that left them.
    pub came_in: Vec<Crossing>,
    pub went_out: Vec<Crossing>,
    /// Groups in both whose median |error| fell or rose by more than [`MOVED_POINTS`], and
    /// how many are in both.
    pub group_medians: (usize, usize, usize),
    /// Rows in both, each with its errors.
    pub rows: Vec<Moved>,
    pub groups_unmatched: Unmatched,
    pub rows_unmatched: Unmatched,
}

/// Compares the run in hand (`now`) with a `baseline` under `gates`.
pub fn compare(baseline: &Scores, now: &Scores, gates: Gates) -> Comparison {
    let admits = |g: &GroupScore| gates.admits(g.median_abs_pct, g.max_abs_pct);
    let count = |s: &Scores| {
        (
            s.groups.values().filter(|g| admits(g)).count(),
            s.groups.len(),
        )
    };
    let mut came_in = Vec::new();
    let mut went_out = Vec::new();
    let (mut lower, mut higher, mut both) = (0, 0, 0);
    for (key, before) in &baseline.groups {
        let Some(after) = now.groups.get(key) else {
            continue;
        };
        both += 1;
        let change = after.median_abs_pct - before.median_abs_pct;
        lower += usize::from(change < -MOVED_POINTS);
        higher += usize::from(change > MOVED_POINTS);
        let crossing = || Crossing {
            dataset: key.0.clone(),
            group: key.1.clone(),
            before: *before,
            now: *after,
        };
        if gates.any() && admits(after) && !admits(before) {
            came_in.push(crossing());
        } else if gates.any() && admits(before) && !admits(after) {
            went_out.push(crossing());
        }
    }
    let rows: Vec<Moved> = baseline
        .rows
        .iter()
        .filter_map(|(key, before)| {
            now.rows.get(key).map(|after| Moved {
                key: key.clone(),
                group: after.group.clone(),
                before_pct: before.error_pct,
                now_pct: after.error_pct,
            })
        })
        .collect();
    let unmatched = |a: usize, b: usize, matched: usize| Unmatched {
        only_before: a - matched,
        only_now: b - matched,
    };
    Comparison {
        baseline: baseline.source.clone(),
        gates,
        within: gates.any().then(|| (count(baseline), count(now))),
        came_in,
        went_out,
        group_medians: (lower, higher, both),
        groups_unmatched: unmatched(baseline.groups.len(), now.groups.len(), both),
        rows_unmatched: unmatched(baseline.rows.len(), now.rows.len(), rows.len()),
        rows,
    }
}

impl Comparison {
    /// Rows in both whose |error| shrank and grew by more than [`MOVED_POINTS`].
    pub fn closer_further(&self) -> (usize, usize) {
        let closer = self
            .rows
            .iter()
            .filter(|m| m.change_points() < -MOVED_POINTS)
            .count();
        let further = self
            .rows
            .iter()
            .filter(|m| m.change_points() > MOVED_POINTS)
            .count();
        (closer, further)
    }

    /// Mean |error| over the rows in both, before and now (`None`: no row in both).
    pub fn mean_abs_pct(&self) -> Option<(f64, f64)> {
        let n = self.rows.len() as f64;
        (!self.rows.is_empty()).then(|| {
            let sum = |f: fn(&Moved) -> f64| self.rows.iter().map(f).sum::<f64>() / n;
            (sum(|m| m.before_pct.abs()), sum(|m| m.now_pct.abs()))
        })
    }

    /// The rows whose |error| moved most (by more than [`MOVED_POINTS`]), largest first, at
    /// most [`LISTED_ROWS`]; ties in the order rows are keyed.
    pub fn moved_most(&self) -> Vec<&Moved> {
        let mut moved: Vec<&Moved> = self
            .rows
            .iter()
            .filter(|m| m.change_points().abs() > MOVED_POINTS)
            .collect();
        moved.sort_by(|a, b| {
            b.change_points()
                .abs()
                .total_cmp(&a.change_points().abs())
                .then_with(|| a.key.cmp(&b.key))
        });
        moved.truncate(LISTED_ROWS);
        moved
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors = |g: &GroupScore| format!("{:.2}% / {:.2}%", g.median_abs_pct, g.max_abs_pct);
        match &self.baseline {
            Some(dir) => writeln!(f, "against the baseline {}", dir.display())?,
            None => writeln!(f, "against the baseline")?,
        }
        if let Some(((before, of_before), (now, of_now))) = self.within {
            writeln!(
                f,
                "  groups within {}: {before} of {of_before} before, {now} of {of_now} now",
                self.gates.describe()
            )?;
            for (what, list) in [("in ", &self.came_in), ("out", &self.went_out)] {
                for c in list {
                    writeln!(
                        f,
                        "    {what} {} {}: {} -> {} (median / max |error|)",
                        c.dataset,
                        c.group,
                        errors(&c.before),
                        errors(&c.now)
                    )?;
                }
            }
        }
        let (lower, higher, both) = self.group_medians;
        writeln!(
            f,
            "  groups' median |error|: lower in {lower}, higher in {higher}, within \
             {MOVED_POINTS} points in {} ({both} groups in both)",
            both - lower - higher
        )?;
        let (closer, further) = self.closer_further();
        match self.mean_abs_pct() {
            Some((before, now)) => writeln!(
                f,
                "  rows in both: {}; |error| smaller by more than {MOVED_POINTS} points in \
                 {closer}, larger in {further}; mean |error| {before:.2}% -> {now:.2}%",
                self.rows.len()
            )?,
            None => writeln!(f, "  no scored row in both")?,
        }
        let most = self.moved_most();
        if !most.is_empty() {
            writeln!(f, "  rows that moved most (error before -> now):")?;
            for m in most {
                writeln!(
                    f,
                    "    {} {}: {}: {:+.2}% -> {:+.2}%",
                    m.key.0, m.group, m.key.2, m.before_pct, m.now_pct
                )?;
            }
        }
        let (g, r) = (self.groups_unmatched, self.rows_unmatched);
        if g != Unmatched::default() || r != Unmatched::default() {
            writeln!(
                f,
                "  not in both: {} groups and {} rows only in the baseline, {} groups and {} \
                 rows only now",
                g.only_before, r.only_before, g.only_now, r.only_now
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GroupError, Prediction};
    use super::*;

    const GATES: Gates = Gates {
        max_median_error_pct: Some(3.0),
        max_error_pct: Some(10.0),
    };

    fn group(median: f64, max: f64) -> GroupScore {
        GroupScore {
            median_abs_pct: median,
            max_abs_pct: max,
        }
    }

    fn scores(groups: &[(&str, GroupScore)], rows: &[(usize, &str, f64)]) -> Scores {
        Scores {
            source: None,
            groups: groups
                .iter()
                .map(|(g, s)| (("d".to_string(), g.to_string()), *s))
                .collect(),
            rows: rows
                .iter()
                .map(|(row, label, error)| {
                    (
                        ("d".to_string(), *row, label.to_string()),
                        RowScore {
                            group: "g".into(),
                            error_pct: *error,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn gates_admit_a_group_within_every_limit_given_and_none_given_admits_all() {
        assert!(GATES.admits(3.0, 10.0));
        assert!(!GATES.admits(3.1, 4.0));
        assert!(!GATES.admits(1.0, 10.5));
        assert!(Gates::default().admits(50.0, 90.0));
        assert!(!Gates::default().any());
        assert_eq!(
            GATES.describe(),
            "median |error| <= 3% and max |error| <= 10%"
        );
    }

    #[test]
    fn a_group_that_comes_within_the_gates_is_listed_in_and_one_that_leaves_them_out() {
        let before = scores(
            &[
                ("rings", group(4.0, 12.0)),
                ("trees", group(1.0, 2.0)),
                ("steady", group(2.0, 5.0)),
            ],
            &[],
        );
        let now = scores(
            &[
                ("rings", group(2.5, 9.0)),
                ("trees", group(1.2, 11.0)),
                ("steady", group(2.1, 5.0)),
            ],
            &[],
        );
        let c = compare(&before, &now, GATES);
        assert_eq!(c.within, Some(((2, 3), (2, 3))));
        assert_eq!(c.came_in.len(), 1);
        assert_eq!(c.came_in[0].group, "rings");
        assert_eq!(c.came_in[0].before, group(4.0, 12.0));
        assert_eq!(c.went_out.len(), 1);
        assert_eq!(c.went_out[0].group, "trees");
        // Median |error|: rings fell 1.5 points, trees and steady moved 0.2 and 0.1.
        assert_eq!(c.group_medians, (1, 0, 3));
        let text = c.to_string();
        assert!(text.contains("2 of 3 before, 2 of 3 now"), "{text}");
        assert!(
            text.contains("in  d rings: 4.00% / 12.00% -> 2.50% / 9.00%"),
            "{text}"
        );
        assert!(text.contains("out d trees"), "{text}");
    }

    #[test]
    fn without_gates_no_group_crosses_and_only_the_medians_are_compared() {
        let before = scores(&[("rings", group(4.0, 12.0))], &[]);
        let now = scores(&[("rings", group(2.0, 9.0))], &[]);
        let c = compare(&before, &now, Gates::default());
        assert_eq!(c.within, None);
        assert!(c.came_in.is_empty() && c.went_out.is_empty());
        assert_eq!(c.group_medians, (1, 0, 1));
        assert!(!c.to_string().contains("groups within"), "{c}");
    }

    #[test]
    fn rows_move_only_beyond_the_noise_and_the_mean_is_over_rows_in_both() {
        let before = scores(
            &[],
            &[
                (0, "a", 10.0),
                (1, "b", -2.0),
                (2, "c", 1.0),
                (3, "gone", 50.0),
            ],
        );
        let now = scores(
            &[],
            &[
                (0, "a", -4.0),
                (1, "b", -3.0),
                (2, "c", 1.3),
                (4, "new", 70.0),
            ],
        );
        let c = compare(&before, &now, GATES);
        assert_eq!(c.rows.len(), 3);
        // a: 10 -> 4 points (closer); b: 2 -> 3 (further); c: 0.3 points, within the noise.
        assert_eq!(c.closer_further(), (1, 1));
        let (mean_before, mean_now) = c.mean_abs_pct().unwrap();
        assert!((mean_before - 13.0 / 3.0).abs() < 1e-12, "{mean_before}");
        assert!((mean_now - 8.3 / 3.0).abs() < 1e-12, "{mean_now}");
        let most: Vec<&str> = c.moved_most().iter().map(|m| m.key.2.as_str()).collect();
        assert_eq!(most, ["a", "b"]);
        assert_eq!(
            c.rows_unmatched,
            Unmatched {
                only_before: 1,
                only_now: 1
            }
        );
        assert!(c.to_string().contains("1 rows only in the baseline"), "{c}");
    }

    #[test]
    fn a_row_whose_label_changed_is_not_matched_with_the_old_one() {
        let before = scores(&[], &[(0, "all_reduce 1 MiB 4 ranks", 5.0)]);
        let now = scores(&[], &[(0, "all_reduce 1 MiB 8 ranks", 5.0)]);
        let c = compare(&before, &now, GATES);
        assert!(c.rows.is_empty());
        assert_eq!(c.mean_abs_pct(), None);
        assert!(c.to_string().contains("no scored row in both"), "{c}");
    }

    fn report() -> Report {
        let prediction = |row: usize, label: &str, predicted: f64, scored: bool| Prediction {
            dataset: "d".into(),
            group: "g".into(),
            row,
            label: label.into(),
            measured_secs: 0.1,
            simulated_secs: predicted,
            predicted_secs: predicted,
            calibration: false,
            scored,
            measured_range_secs: None,
            exchange_modes_secs: None,
            plays_secs: None,
            launch_range_secs: None,
            launch_medians_secs: Vec::new(),
            call: None,
        };
        Report {
            predictions: vec![
                prediction(0, "small", 0.104, true),
                prediction(1, "large", 0.09, true),
                prediction(2, "left out", 0.5, false),
            ],
            groups: vec![GroupError {
                dataset: "d".into(),
                group: "g".into(),
                rows: 2,
                calibration_rows: 0,
                median_abs_pct: 7.0,
                max_abs_pct: 10.0,
                fit: None,
                within_range: None,
                launch_noise: None,
            }],
            skipped: Vec::new(),
            replayed_on: Vec::new(),
        }
    }

    #[test]
    fn an_out_folder_reads_back_as_the_run_that_wrote_it_scored_rows_only() {
        let dir = std::env::temp_dir().join(format!("dtsim-baseline-{}", std::process::id()));
        let report = report();
        report.write_dir(&dir).unwrap();
        let read = Scores::read(&dir).unwrap();
        assert_eq!(read.source.as_deref(), Some(dir.as_path()));
        assert_eq!(
            Scores {
                source: None,
                ..read.clone()
            },
            Scores::of(&report).unwrap()
        );
        assert_eq!(
            read.rows.len(),
            2,
            "the row --score-on left out is in neither"
        );
        let small = &read.rows[&("d".to_string(), 0, "small".to_string())];
        assert!((small.error_pct - 4.0).abs() < 1e-9, "{small:?}");
        // Naming a file of the folder reads the folder.
        assert_eq!(Scores::read(&dir.join("errors.csv")).unwrap(), read);
        let c = compare(&read, &Scores::of(&report).unwrap(), GATES);
        assert_eq!(c.closer_further(), (0, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_without_the_tables_or_with_a_column_missing_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("dtsim-baseline-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = Scores::read(&dir).unwrap_err();
        assert!(e.contains("errors.csv: a readable CSV file"), "{e}");
        report().write_dir(&dir).unwrap();
        let predictions = std::fs::read_to_string(dir.join("predictions.csv")).unwrap();
        std::fs::write(
            dir.join("predictions.csv"),
            predictions.replacen("error_pct", "err", 1),
        )
        .unwrap();
        let e = Scores::read(&dir).unwrap_err();
        assert!(
            e.contains("predictions.csv: row 1: column \"error_pct\": missing"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
