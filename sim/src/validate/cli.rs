//! `dtsim validate` on the command line: its flags and gates as given, the replay with its
//! progress, the tables printed and written, and the exit that fails naming every group outside
//! the gates.

use std::path::{Path, PathBuf};

use super::{validate_with_progress, Filter, Options, RowProgress};

/// The limits `dtsim validate` holds every scored group to, in percent (none: it only reports).
#[derive(Debug, Clone, Copy, Default)]
pub struct Gates {
    /// `--max-median-error`: a group's median |error|.
    pub max_median_error_pct: Option<f64>,
    /// `--max-error`: a group's largest |error|.
    pub max_error_pct: Option<f64>,
}

/// `dtsim validate`'s flags that say how rows are replayed and scored, as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags<'a> {
    /// `--calibrate-on`, `--score-on`: filters of rows.
    pub calibrate_on: Option<&'a str>,
    pub score_on: Option<&'a str>,
    /// `--leave-one-out`: `system` or nothing.
    pub leave_one_out: Option<&'a str>,
    /// `--set`: scenario keys every testbed row is replayed with after its own.
    pub set: &'a [String],
}

/// `dtsim validate`: parses the filters, validates, prints the tables, writes `--out`, and
/// fails when a scored group is outside the `gates` (naming every such group), or when a gate
/// is given and no row was scored. `progress` hears of each row before it is replayed, then
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
    if gates.max_median_error_pct.is_none() && gates.max_error_pct.is_none() {
        return Ok(());
    }
    let (outside, scored) = report.outside(gates.max_median_error_pct, gates.max_error_pct);
    let limits: Vec<String> = [
        gates
            .max_median_error_pct
            .map(|l| format!("median |error| <= {l}%")),
        gates.max_error_pct.map(|l| format!("max |error| <= {l}%")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let limits = limits.join(" and ");
    println!(
        "{} of {scored} scored groups within {limits}",
        scored - outside.len()
    );
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
    if !outside.is_empty() {
        anyhow::bail!(
            "{} of {scored} groups outside {limits}: {}",
            outside.len(),
            outside.join("; ")
        );
    }
    Ok(())
}
