//! `dtsim validate` on the command line: its flags and gates as given, the replay with its
//! progress, the tables printed and written, what moved against a baseline, and the exit that
//! fails naming every group outside the gates.

use std::path::{Path, PathBuf};

use super::baseline::{compare, Scores};
use super::{validate_with_progress, Filter, Options, RowProgress};

/// The limits `dtsim validate` holds every scored group to, in percent (none: it only reports).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gates {
    /// `--max-median-error`: a group's median |error|.
    pub max_median_error_pct: Option<f64>,
    /// `--max-error`: a group's largest |error|.
    pub max_error_pct: Option<f64>,
}

impl Gates {
    /// Whether any limit is given.
    pub fn any(&self) -> bool {
        self.max_median_error_pct.is_some() || self.max_error_pct.is_some()
    }

    /// Whether a group of these errors (percent) is within every limit given.
    pub fn admits(&self, median_abs_pct: f64, max_abs_pct: f64) -> bool {
        let within = |v: f64, limit: Option<f64>| limit.is_none_or(|l| v <= l);
        within(median_abs_pct, self.max_median_error_pct) && within(max_abs_pct, self.max_error_pct)
    }

    /// The limits in words: "median |error| <= 3% and max |error| <= 10%".
    pub fn describe(&self) -> String {
        let limits: Vec<String> = [
            self.max_median_error_pct
                .map(|l| format!("median |error| <= {l}%")),
            self.max_error_pct.map(|l| format!("max |error| <= {l}%")),
        ]
        .into_iter()
        .flatten()
        .collect();
        limits.join(" and ")
    }
}

/// `dtsim validate`'s flags that say how rows are replayed, scored and compared, as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags<'a> {
    /// `--calibrate-on`, `--score-on`: filters of rows.
    pub calibrate_on: Option<&'a str>,
    pub score_on: Option<&'a str>,
    /// `--leave-one-out`: `system` or nothing.
    pub leave_one_out: Option<&'a str>,
    /// `--set`: scenario keys every testbed row is replayed with after its own.
    pub set: &'a [String],
    /// `--baseline`: an earlier `--out` folder to compare the run with.
    pub baseline: Option<&'a Path>,
}

/// `dtsim validate`: parses the filters, reads the baseline (before the replay, which may take
/// minutes), validates, prints the tables, writes `--out`, prints what moved against the
/// baseline, and fails when a scored group is outside the `gates` (naming every such group), or
/// when a gate is given and no row was scored. `progress` hears of each row before it is replayed, then
/// `None` once the replay is over (before anything is printed).
pub fn run_cli(
    datasets: &[PathBuf],
    flags: Flags,
    gates: Gates,
    out: Option<&Path>,
    progress: &dyn Fn(Option<RowProgress>),
) -> anyhow::Result<()> {
    let Flags {
        calibrate_on,
        score_on,
        leave_one_out,
        set,
        baseline,
    } = flags;
    if datasets.is_empty() {
        anyhow::bail!("validate: at least one dataset (CSV) to replay");
    }
    let parse = |f: Option<&str>, flag: &str| {
        f.map(Filter::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let opts = Options {
        calibrate_on: parse(calibrate_on, "calibrate-on")?,
        set: set.to_vec(),
        score_on: parse(score_on, "score-on")?,
        out: out.map(Path::to_path_buf),
        leave_one_out_system: match leave_one_out {
            None => false,
            Some("system") => true,
            Some(other) => anyhow::bail!(
                "--leave-one-out: \"system\" (fit on every other system's table, predict this one), got {other:?}"
            ),
        },
    };
    // `--baseline` the same as `--out` compares with the folder's previous contents; on the
    // first run there are none, and this run becomes the baseline.
    let first_of_its_own =
        baseline.is_some_and(|b| out.is_some_and(|o| o == b) && !b.join("errors.csv").exists());
    if first_of_its_own {
        eprintln!("--baseline: no earlier run in the --out folder yet; this run becomes it");
    }
    let baseline = baseline
        .filter(|_| !first_of_its_own)
        .map(Scores::read)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--baseline: {e}"))?;
    let report = validate_with_progress(datasets, &opts, &|at| progress(Some(at)));
    progress(None);
    let report = report.map_err(|e| anyhow::anyhow!(e))?;
    println!("{report}");
    if let Some(dir) = &opts.out {
        report
            .write_dir(dir)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", dir.display()))?;
        println!("wrote predictions.csv and errors.csv to {}", dir.display());
    }
    let compared = match baseline {
        Some(b) => Some(compare(
            &b,
            &Scores::of(&report).map_err(|e| anyhow::anyhow!("--baseline: this run's {e}"))?,
            gates,
        )),
        None => None,
    };
    if !gates.any() {
        if let Some(c) = compared {
            print!("\n{c}");
        }
        return Ok(());
    }
    let (outside, scored) = report.outside(gates.max_median_error_pct, gates.max_error_pct);
    let limits = gates.describe();
    println!(
        "{} of {scored} scored groups within {limits}",
        scored - outside.len()
    );
    if let Some((expected, rarely)) = report.exact_model_within(&gates) {
        println!(
            "re-recorded from their own launches ({} bootstrap draws per group), a model exact to \
             every row's median would be within {limits} in {expected:.1} of {scored} groups on \
             average; {} within less than half the time{}{}",
            super::launch_noise::REPLICATES,
            rarely.len(),
            if rarely.is_empty() { "" } else { ": " },
            rarely.join("; ")
        );
    }
    if scored == 0 {
        anyhow::bail!("no rows were scored, so none is within {limits}");
    }
    if let Some(row_limit) = gates.max_median_error_pct.or(gates.max_error_pct) {
        let spread = report.within_launch_spread(&outside, row_limit);
        if !spread.is_empty() {
            println!(
                "{} of the {} outside miss only within their launches' spread (every row off by \
                 more than {row_limit}% predicts between its fastest and slowest launch's \
                 median): {}",
                spread.len(),
                outside.len(),
                spread.join("; ")
            );
        }
    }
    if let Some(c) = compared {
        print!("\n{c}");
    }
    if !outside.is_empty() {
        anyhow::bail!(
            "{} of {scored} groups outside {limits}: {}",
            outside.len(),
            outside.join("; ")
        );
    }
    Ok(())
}
