//! dtsim's track record: how far off it has been on measured runs of the call it just played.
//!
//! `dtsim validate --out DIR` writes, for every collective row it replays (the testbed's runs,
//! nccl-tests tables), the call the row measured (`sim_set`: the library, algorithm and other
//! scenario keys it is replayed with; `op`, `ranks`, `bytes`, and `gpu` on GPUs) beside its
//! error in `predictions.csv`. The repository keeps those folders (`data/runs/validation/`,
//! regenerated with the model of the commit). A run whose call has the same library, algorithm
//! and op as rows there is told their errors: over all of them (every system, rank count and
//! size measured) and over the nearest (the same GPU model where the run has one, rank count
//! within a factor of 2, bytes within a factor of 4), so that a what-if comes with the error
//! dtsim has shown on real runs of the same call.
//!
//! What the numbers are: today's model on rows it was not fitted to (testbed profiles are
//! measured by `calibrate`; the nccl-tests rows a bundled profile was fitted on are not
//! scored), but the model was developed looking at most of them; the testbed's held-out sets,
//! recorded after the model that first scored them, scored worse at first (README, "Where
//! dtsim stands"). They say how far off dtsim was on the systems measured, not on another.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::read_csv;
use crate::metrics::RunReport;
use crate::scenario::Scenario;

/// The call a run played, as a track record matches it against the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `gloo`, `mpi`, `nccl` or `ideal`.
    pub library: String,
    /// The scenario's `collective.algorithm`, where it forces one.
    pub algorithm: Option<String>,
    /// Whether the scenario gives explicit ring orders (`collective.orders`: gloo's multiring).
    pub orders: bool,
    /// `all_reduce`, `all_gather`, ...
    pub op: String,
    pub ranks: u32,
    pub bytes: u64,
    /// The GPU model's name in dtsim's table (`H100`), where the run's topology names one.
    pub gpu: Option<String>,
}

/// One measured row's call and dtsim's error on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub dataset: String,
    /// The row's scenario keys (`collective.library` = `mpi`, ...).
    pub keys: BTreeMap<String, String>,
    pub op: String,
    pub ranks: u32,
    pub bytes: u64,
    pub gpu: Option<String>,
    /// (predicted − measured) / measured, percent.
    pub error_pct: f64,
}

/// The errors over a set of rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Errors {
    pub rows: usize,
    pub datasets: usize,
    pub ranks_min: u32,
    pub ranks_max: u32,
    pub bytes_min: u64,
    pub bytes_max: u64,
    pub median_abs_error_pct: f64,
    /// The 90th percentile of |error| (nearest rank).
    pub p90_abs_error_pct: f64,
    pub max_abs_error_pct: f64,
    /// The signed errors' mean: positive where dtsim predicts slower than measured.
    pub mean_error_pct: f64,
}

/// What a run is told: its call, the errors over every row of the same call and over the
/// nearest ones, and where they were read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackRecord {
    pub call: String,
    pub all: Errors,
    /// The same GPU model where the run has one, rank count within a factor of 2 and bytes
    /// within a factor of 4 of the run's.
    pub nearest: Option<Errors>,
    pub source: PathBuf,
}

/// Reads every `*/predictions.csv` under `dir` that describes its rows' calls; folders written
/// before the columns existed, and rows that are not scored collectives, are left out.
pub fn read(dir: &Path) -> Result<Vec<Row>, String> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path().join("predictions.csv")))
        .filter(|p| p.is_file())
        .collect();
    // Directory order is the file system's: sort for the same output everywhere.
    folders.sort();
    let mut out = Vec::new();
    for file in folders {
        for r in read_csv(&file)? {
            let get = |c: &str| r.get(c).map(|v| v.trim()).filter(|v| !v.is_empty());
            let (Some(set), Some(op), Some(ranks), Some(bytes), Some(err)) = (
                get("sim_set"),
                get("op"),
                get("ranks").and_then(|v| v.parse().ok()),
                get("bytes").and_then(|v| v.parse().ok()),
                get("error_pct").and_then(|v| v.parse::<f64>().ok()),
            ) else {
                continue;
            };
            // Scored rows of a plain replay only: a prediction calibrated on other rows of its
            // group (`--calibrate-on`) is not what a run predicts.
            if get("scored") != Some("true")
                || get("calibration") == Some("true")
                || get("predicted_secs") != get("simulated_secs")
            {
                continue;
            }
            out.push(Row {
                dataset: get("dataset").unwrap_or_default().to_string(),
                keys: scenario_keys(set),
                op: op.to_string(),
                ranks,
                bytes,
                gpu: get("gpu").map(str::to_string),
                error_pct: err,
            });
        }
    }
    Ok(out)
}

/// `a.b=x;c=y` as a map (whitespace trimmed; an entry without `=` is left out).
fn scenario_keys(set: &str) -> BTreeMap<String, String> {
    set.split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Whether a row measured the same call as `call` (any rank count and size): the same op,
/// library and forced algorithm (or none), and explicit ring orders on both or neither.
pub fn same_call(row: &Row, call: &Call) -> bool {
    row.op == call.op
        && row.keys.get("collective.library").map(String::as_str) == Some(call.library.as_str())
        && row.keys.get("collective.algorithm") == call.algorithm.as_ref()
        && row.keys.contains_key("collective.orders") == call.orders
}

/// Whether a row is near the call: the same GPU model (or neither on GPUs), rank count within a
/// factor of 2, bytes within 4.
fn near(row: &Row, call: &Call) -> bool {
    let ranks = f64::from(row.ranks) / f64::from(call.ranks.max(1));
    let bytes = row.bytes as f64 / (call.bytes.max(1) as f64);
    row.gpu == call.gpu && (0.5..=2.0).contains(&ranks) && (0.25..=4.0).contains(&bytes)
}

/// The errors over `rows` (`None` when there are none).
pub fn errors(rows: &[&Row]) -> Option<Errors> {
    if rows.is_empty() {
        return None;
    }
    let mut abs: Vec<f64> = rows.iter().map(|r| r.error_pct.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let n = abs.len();
    // Nearest rank: the smallest value with at least 90% of the rows at or below it.
    let p90 = abs[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
    let mut datasets: Vec<&str> = rows.iter().map(|r| r.dataset.as_str()).collect();
    datasets.sort_unstable();
    datasets.dedup();
    Some(Errors {
        rows: n,
        datasets: datasets.len(),
        ranks_min: rows.iter().map(|r| r.ranks).min().unwrap_or(0),
        ranks_max: rows.iter().map(|r| r.ranks).max().unwrap_or(0),
        bytes_min: rows.iter().map(|r| r.bytes).min().unwrap_or(0),
        bytes_max: rows.iter().map(|r| r.bytes).max().unwrap_or(0),
        median_abs_error_pct: crate::stats::median(&abs),
        p90_abs_error_pct: p90,
        max_abs_error_pct: abs[n - 1],
        mean_error_pct: rows.iter().map(|r| r.error_pct).sum::<f64>() / n as f64,
    })
}

/// The track record of `call` over `rows` read from `source` (`None`: no row measured it).
pub fn of(call: &Call, rows: &[Row], source: &Path) -> Option<TrackRecord> {
    let same: Vec<&Row> = rows.iter().filter(|r| same_call(r, call)).collect();
    let all = errors(&same)?;
    let nearest: Vec<&Row> = same.iter().copied().filter(|r| near(r, call)).collect();
    let algorithm = call
        .algorithm
        .as_deref()
        .map(|a| format!(" {a}"))
        .unwrap_or_else(|| {
            if call.orders {
                " (given ring orders)".into()
            } else {
                " (the library's own choice)".into()
            }
        });
    Some(TrackRecord {
        call: format!("{}{algorithm} {}", call.library, call.op),
        all,
        nearest: errors(&nearest),
        source: source.to_path_buf(),
    })
}

/// The validation outputs a track record reads: the folder [`find_source`] found, and its
/// rows ([`read`]).
pub type Source = (PathBuf, Vec<Row>);

/// How far off dtsim has been on measured runs of the call `report` played (a library's
/// collective: NCCL, gloo, OpenMPI), from the validation outputs found for the scenario;
/// `None` where there are none.
pub fn for_run(s: &Scenario, report: &RunReport) -> Option<TrackRecord> {
    let call = call_of(s, report)?;
    let (source, rows) = load(&s.path)?;
    of(&call, &rows, &source)
}

/// The call `report` played, as a track record matches it (`None`: no library's collective).
pub fn call_of(s: &Scenario, report: &RunReport) -> Option<Call> {
    let c = s.file.collective.as_ref()?;
    if report.library == "ideal" {
        return None;
    }
    Some(Call {
        library: report.library.to_string(),
        algorithm: c.algorithm.clone(),
        orders: c.orders.is_some(),
        op: report.summary.collective.clone(),
        ranks: report.summary.ranks,
        bytes: report.summary.bytes,
        gpu: report.gpu.clone(),
    })
}

/// The validation outputs for a run of `scenario`, read: `None` where there are none. A folder
/// that cannot be read is said on stderr and does not fail the run.
pub fn load(scenario: &Path) -> Option<Source> {
    let source = find_source(scenario)?;
    let rows = read(&source)
        .map_err(|e| eprintln!("warning: no track record: {e}"))
        .ok()?;
    Some((source, rows))
}

/// The folder of validation outputs for a run of `scenario`: `data/runs/validation` in the
/// nearest ancestor of the scenario file, or of the working directory, that has one; relative
/// to the working directory where it lies under it (the run's files then name it the same on
/// every machine).
pub fn find_source(scenario: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(scenario).unwrap_or_else(|_| scenario.to_path_buf());
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .unwrap_or_default();
    let found = |p: &Path| {
        p.ancestors()
            .map(|a| a.join("data/runs/validation"))
            .find(|d| d.is_dir())
    };
    let dir = found(&abs).or_else(|| found(&cwd))?;
    Some(match dir.strip_prefix(&cwd) {
        Ok(rel) if !cwd.as_os_str().is_empty() => rel.to_path_buf(),
        _ => dir,
    })
}

fn size(bytes: u64) -> String {
    crate::units::fmt_bytes(bytes as f64)
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// `lo-hi`, or `lo` alone where they are equal.
fn span(lo: String, hi: String) -> String {
    if lo == hi {
        lo
    } else {
        format!("{lo}-{hi}")
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} ranks, {}): |error| median {:.1}%, 90% within {:.1}%, max {:.1}%; \
             mean {:+.1}% ({})",
            count(self.rows, "row"),
            span(self.ranks_min.to_string(), self.ranks_max.to_string()),
            span(size(self.bytes_min), size(self.bytes_max)),
            self.median_abs_error_pct,
            self.p90_abs_error_pct,
            self.max_abs_error_pct,
            self.mean_error_pct,
            if self.mean_error_pct >= 0.0 {
                "dtsim slower on average"
            } else {
                "dtsim faster on average"
            }
        )
    }
}

impl fmt::Display for TrackRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\ntrack record  {}: measured runs in {} ({}):",
            self.call,
            count(self.all.datasets, "dataset"),
            self.source.display()
        )?;
        writeln!(f, "  all      {}", self.all)?;
        match &self.nearest {
            Some(n) => writeln!(f, "  nearest  {n}"),
            None => writeln!(
                f,
                "  nearest  none on the same GPU model within 2x the ranks and 4x the bytes: \
                 the error above may not hold"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(set: &str, op: &str, ranks: u32, bytes: u64, err: f64) -> Row {
        Row {
            dataset: format!("d{ranks}"),
            keys: scenario_keys(set),
            op: op.into(),
            ranks,
            bytes,
            gpu: None,
            error_pct: err,
        }
    }

    fn mpi_ring(ranks: u32, bytes: u64) -> Call {
        Call {
            library: "mpi".into(),
            algorithm: Some("ring".into()),
            orders: false,
            op: "all_reduce".into(),
            ranks,
            bytes,
            gpu: None,
        }
    }

    #[test]
    fn a_call_matches_rows_of_its_library_algorithm_and_op_only() {
        let rows = [
            row(
                "collective.library=mpi;collective.algorithm=ring",
                "all_reduce",
                4,
                1 << 20,
                5.0,
            ),
            row("collective.library=mpi", "all_reduce", 4, 1 << 20, 50.0),
            row(
                "collective.library=mpi;collective.algorithm=ring",
                "all_gather",
                4,
                1 << 20,
                50.0,
            ),
            row("collective.library=gloo", "all_reduce", 4, 1 << 20, 50.0),
        ];
        let t = of(&mpi_ring(4, 1 << 20), &rows, Path::new("v")).unwrap();
        assert_eq!(t.all.rows, 1);
        assert_eq!(t.all.max_abs_error_pct, 5.0);
        let rules = Call {
            algorithm: None,
            ..mpi_ring(4, 1 << 20)
        };
        assert_eq!(of(&rules, &rows, Path::new("v")).unwrap().all.rows, 1);
        let gloo_multiring = Call {
            library: "gloo".into(),
            algorithm: None,
            orders: true,
            ..mpi_ring(4, 1 << 20)
        };
        assert!(of(&gloo_multiring, &rows, Path::new("v")).is_none());
    }

    #[test]
    fn the_errors_are_the_median_90th_percentile_max_and_signed_mean() {
        let set = "collective.library=mpi;collective.algorithm=ring";
        // |errors| 1..=10, signs alternating: median 5.5, nearest-rank p90 9, max 10.
        let rows: Vec<Row> = (1..=10)
            .map(|i| {
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                row(set, "all_reduce", 4, 1 << 20, sign * f64::from(i))
            })
            .collect();
        let t = of(&mpi_ring(4, 1 << 20), &rows, Path::new("v")).unwrap();
        assert_eq!(t.all.median_abs_error_pct, 5.5);
        assert_eq!(t.all.p90_abs_error_pct, 9.0);
        assert_eq!(t.all.max_abs_error_pct, 10.0);
        assert!((t.all.mean_error_pct - 0.5).abs() < 1e-12);
        assert_eq!(t.all.datasets, 1);
    }

    #[test]
    fn the_repositorys_validation_outputs_describe_every_collective_row() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/runs/validation");
        let rows = read(&dir).unwrap();
        // Every testbed collective row scored in the folders, none left out for want of its
        // call (a folder written before the columns would be).
        let mut collective_rows = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let file = entry.unwrap().path().join("predictions.csv");
            let name = file
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy();
            if !name.starts_with("testbed_") || name == "testbed_training" || !file.is_file() {
                continue;
            }
            collective_rows += read_csv(&file).unwrap().len();
        }
        assert!(
            collective_rows > 600,
            "{collective_rows} testbed collective rows"
        );
        let testbed = rows.iter().filter(|r| r.dataset.starts_with("testbed_"));
        assert_eq!(testbed.count(), collective_rows);
        // The nccl-tests tables' scored rows, each on its GPU model.
        let nccl: Vec<&Row> = rows
            .iter()
            .filter(|r| r.keys["collective.library"] == "nccl")
            .collect();
        assert!(nccl.len() > 100 && nccl.iter().all(|r| r.gpu.is_some()));
        // OpenMPI's ring all-reduce was recorded on 3 to 8 ranks; the three-host star's 1 MiB
        // row is among the nearest to a 3-rank 1 MiB call.
        let t = of(&mpi_ring(3, 1 << 20), &rows, &dir).unwrap();
        assert!(t.all.rows >= 40 && t.all.ranks_min == 3, "{:?}", t.all);
        let n = t.nearest.unwrap();
        assert!(n.rows >= 10 && n.max_abs_error_pct <= t.all.max_abs_error_pct);
    }

    #[test]
    fn folders_without_the_call_columns_are_left_out_and_a_broken_file_is_named() {
        let dir = std::env::temp_dir().join(format!("dtsim-track-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (folder, text) in [
            // Written before the columns: nothing to match, no error.
            (
                "old",
                "dataset,group,row,error_pct,scored\nd,g,1,5.0,true\n",
            ),
            (
                "new",
                "dataset,simulated_secs,predicted_secs,error_pct,scored,calibration,sim_set,op,\
                 ranks,bytes,gpu\n\
                 d,1e-3,1e-3,-2.5,true,false,collective.library=gloo,all_reduce,4,1024,\n\
                 d,1e-3,1e-3,9.0,false,false,collective.library=gloo,all_reduce,4,1024,\n\
                 d,1e-3,2e-3,7.0,true,false,collective.library=gloo,all_reduce,4,1024,\n",
            ),
        ] {
            std::fs::create_dir_all(dir.join(folder)).unwrap();
            std::fs::write(dir.join(folder).join("predictions.csv"), text).unwrap();
        }
        // The scored, uncalibrated row only.
        let rows = read(&dir).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].error_pct, rows[0].gpu.clone()), (-2.5, None));
        std::fs::write(dir.join("new/predictions.csv"), "a,b\n1,2,3\n").unwrap();
        let err = read(&dir).unwrap_err();
        assert!(
            err.contains("new/predictions.csv") && err.contains("row 1"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nccl_calls_are_nearest_on_their_own_gpu_model() {
        let set = "collective.library=nccl";
        let on = |gpu: &str, err: f64| Row {
            gpu: Some(gpu.into()),
            ..row(set, "all_reduce", 8, 1 << 20, err)
        };
        let rows = [on("H100", 3.0), on("2080", 30.0), on("H100", 5.0)];
        let call = Call {
            library: "nccl".into(),
            algorithm: None,
            gpu: Some("H100".into()),
            ..mpi_ring(8, 1 << 20)
        };
        let t = of(&call, &rows, Path::new("v")).unwrap();
        assert_eq!(t.all.rows, 3);
        let n = t.nearest.unwrap();
        assert_eq!((n.rows, n.max_abs_error_pct), (2, 5.0));
    }

    #[test]
    fn the_nearest_rows_are_within_twice_the_ranks_and_four_times_the_bytes() {
        let set = "collective.library=mpi;collective.algorithm=ring";
        let rows = [
            row(set, "all_reduce", 8, 4 << 20, 1.0),
            row(set, "all_reduce", 4, 1 << 20, 2.0),
            row(set, "all_reduce", 17, 1 << 20, 30.0),
            row(set, "all_reduce", 8, 64 << 10, 40.0),
        ];
        let t = of(&mpi_ring(8, 1 << 20), &rows, Path::new("v")).unwrap();
        assert_eq!(t.all.rows, 4);
        let n = t.nearest.unwrap();
        assert_eq!(n.rows, 2);
        assert_eq!(n.max_abs_error_pct, 2.0);
        assert_eq!((n.ranks_min, n.ranks_max), (4, 8));
        let far = of(&mpi_ring(64, 1 << 30), &rows, Path::new("v")).unwrap();
        assert!(far.nearest.is_none());
    }
}
