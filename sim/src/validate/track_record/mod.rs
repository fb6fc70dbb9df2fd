//! dtsim's track record: how far off it has been on measured runs of the call (or training
//! step) it just played.
//!
//! `dtsim validate --out DIR` writes, for every collective row it replays (the testbed's runs,
//! nccl-tests tables), the call the row measured (`sim_set`: the library, algorithm and other
//! scenario keys it is replayed with; `op`, `ranks`, `bytes`, and `gpu` on GPUs; a training
//! step's `op` is [`STEP_OP`], its `sim_set` its [`step_keys`] and it has a `batch`) beside its
//! error in `predictions.csv`. The repository keeps those folders (`data/runs/validation/`,
//! regenerated with the model of the commit). A run whose call has the same library, algorithm
//! and op as rows there is told their errors: over all of them (every system, rank count and
//! size measured) and over the nearest (the same GPU model where the run has one, rank count
//! within a factor of 2, bytes within a factor of 4), so that a what-if comes with the error
//! dtsim has shown on real runs of the same call.
//!
//! Training steps the same way: a row of measured steps (the testbed's, one GPU's
//! `torch_bench.py` steps) names its step ([`step_keys`]: the model, dtype, execution, fused
//! attention and the profile it is predicted with) and its batch per GPU, and a `dtsim run` of
//! a training step is told the errors over the rows of the same step, the nearest being on the
//! same GPU model with rank counts within 2x and batches within 4x.
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
use crate::metrics::workload::WorkloadReport;
use crate::metrics::RunReport;
use crate::scenario::Scenario;

/// The call a run played, as a track record matches it against the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub played: Played,
    pub ranks: u32,
    /// The GPU model's name in dtsim's table (`H100`), where the run's topology names one.
    pub gpu: Option<String>,
}

/// What a run played: a library's collective, or a training step.
#[derive(Debug, Clone, PartialEq)]
pub enum Played {
    Collective {
        /// `gloo`, `mpi`, `nccl` or `ideal`.
        library: String,
        /// The scenario's `collective.algorithm`, where it forces one.
        algorithm: Option<String>,
        /// Whether the scenario gives explicit ring orders (`collective.orders`: gloo's
        /// multiring).
        orders: bool,
        /// `all_reduce`, `all_gather`, ...
        op: String,
        bytes: u64,
    },
    /// A training step: what it is ([`step_keys`]) and its batch per GPU.
    Step {
        keys: BTreeMap<String, String>,
        batch: u64,
    },
}

/// The `op` of a measured training step's row in `predictions.csv`.
pub const STEP_OP: &str = "training_step";

/// One measured row's call and dtsim's error on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub dataset: String,
    /// The row's scenario keys (`collective.library` = `mpi`, ...).
    pub keys: BTreeMap<String, String>,
    pub op: String,
    pub ranks: u32,
    /// A collective's bytes (0 for a training step).
    pub bytes: u64,
    /// A training step's batch per GPU.
    pub batch: Option<u64>,
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
    /// Collectives' sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_min: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_max: Option<u64>,
    /// Training steps' batches per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_min: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_max: Option<u64>,
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
    /// (a step's batch) within a factor of 4 of the run's.
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
            let (Some(set), Some(op), Some(ranks), Some(err)) = (
                get("sim_set"),
                get("op"),
                get("ranks").and_then(|v| v.parse().ok()),
                get("error_pct").and_then(|v| v.parse::<f64>().ok()),
            ) else {
                continue;
            };
            // A collective has its bytes, a training step its batch per GPU.
            let batch: Option<u64> = get("batch").and_then(|v| v.parse().ok());
            let bytes = match (op == STEP_OP, get("bytes").and_then(|v| v.parse().ok())) {
                (false, Some(b)) => b,
                (true, _) if batch.is_some() => 0,
                _ => continue,
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
                batch: batch.filter(|_| op == STEP_OP),
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

/// Whether a row measured the same call as `call` (any rank count and size): for a
/// collective the same op, library and forced algorithm (or none), and explicit ring orders on
/// both or neither; for a training step the same step ([`step_keys`]).
pub fn same_call(row: &Row, call: &Call) -> bool {
    match &call.played {
        Played::Collective {
            library,
            algorithm,
            orders,
            op,
            ..
        } => {
            row.op == *op
                && row.keys.get("collective.library") == Some(library)
                && row.keys.get("collective.algorithm") == algorithm.as_ref()
                && row.keys.contains_key("collective.orders") == *orders
        }
        Played::Step { keys, .. } => row.op == STEP_OP && row.keys == *keys,
    }
}

/// Whether a row is near the call: the same GPU model (or neither on GPUs), rank count within a
/// factor of 2, bytes (a step's batch per GPU) within 4.
fn near(row: &Row, call: &Call) -> bool {
    let within = |a: f64, b: f64, f: f64| (1.0 / f..=f).contains(&(a / b.max(1.0)));
    let size = match &call.played {
        Played::Collective { bytes, .. } => within(row.bytes as f64, *bytes as f64, 4.0),
        Played::Step { batch, .. } => row
            .batch
            .is_some_and(|b| within(b as f64, *batch as f64, 4.0)),
    };
    row.gpu == call.gpu && within(f64::from(row.ranks), f64::from(call.ranks), 2.0) && size
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
    let collectives = rows.iter().filter(|r| r.op != STEP_OP).map(|r| r.bytes);
    let mut datasets: Vec<&str> = rows.iter().map(|r| r.dataset.as_str()).collect();
    datasets.sort_unstable();
    datasets.dedup();
    Some(Errors {
        rows: n,
        datasets: datasets.len(),
        ranks_min: rows.iter().map(|r| r.ranks).min().unwrap_or(0),
        ranks_max: rows.iter().map(|r| r.ranks).max().unwrap_or(0),
        bytes_min: collectives.clone().min(),
        bytes_max: collectives.max(),
        batch_min: rows.iter().filter_map(|r| r.batch).min(),
        batch_max: rows.iter().filter_map(|r| r.batch).max(),
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
    Some(TrackRecord {
        call: describe(&call.played),
        all,
        nearest: errors(&nearest),
        source: source.to_path_buf(),
    })
}

/// `mpi ring all_reduce`, `training step resnet50 bf16 eager (profile h100_sxm_node)`.
fn describe(played: &Played) -> String {
    match played {
        Played::Collective {
            library,
            algorithm,
            orders,
            op,
            ..
        } => {
            let algorithm = match (algorithm, orders) {
                (Some(a), _) => format!(" {a}"),
                (None, true) => " (given ring orders)".into(),
                (None, false) => " (the library's own choice)".into(),
            };
            format!("{library}{algorithm} {op}")
        }
        Played::Step { keys, .. } => {
            let key = |k: &str| keys.get(k).map(String::as_str).unwrap_or("?");
            let attention = if keys.contains_key(FUSED_ATTENTION) {
                " fused-attention"
            } else {
                ""
            };
            format!(
                "training step {}{attention} {} {} (profile {})",
                key(MODEL),
                key(DTYPE),
                key(EXECUTION),
                key(PROFILE)
            )
        }
    }
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
        played: Played::Collective {
            library: report.library.to_string(),
            algorithm: c.algorithm.clone(),
            orders: c.orders.is_some(),
            op: report.summary.collective.clone(),
            bytes: report.summary.bytes,
        },
        ranks: report.summary.ranks,
        gpu: report.gpu.clone(),
    })
}

/// The training step `report` played, as a track record matches it (`None`: a step
/// [`step_keys`] does not name, as a trace's).
pub fn step_call_of(s: &Scenario, report: &WorkloadReport) -> Option<Call> {
    Some(Call {
        played: Played::Step {
            keys: step_keys(s)?,
            batch: report.summary.batch_per_gpu,
        },
        ranks: report.summary.ranks,
        gpu: report
            .topology
            .gpu
            .as_deref()
            .and_then(crate::topology::gpu_models::by_name)
            .map(|g| g.name.to_string()),
    })
}

/// How far off dtsim has been on measured steps like the one `report` played; `None` where
/// no validation outputs are found or none measured it.
pub fn for_step(s: &Scenario, report: &WorkloadReport) -> Option<TrackRecord> {
    let call = step_call_of(s, report)?;
    let (source, rows) = load(&s.path)?;
    of(&call, &rows, &source)
}

/// The keys of a step's identity (see [`step_keys`]).
const MODEL: &str = "workload.model";
const DTYPE: &str = "workload.dtype";
const EXECUTION: &str = "workload.execution";
const FUSED_ATTENTION: &str = "workload.transformer.flash_attention";
const PROFILE: &str = "profile";

/// What a training step is, as its track record matches it: the model (its catalog name, its
/// transformer's name, or its model file's stem), dtype, execution (eager or fused), fused
/// attention where the transformer has it, and the stem of the profile whose measurements
/// predict it; the rank count, batch and GPU model say how near a row is. `None` without a
/// workload, for a step replayed from a trace, and without a profile.
pub fn step_keys(s: &Scenario) -> Option<BTreeMap<String, String>> {
    let w = s.file.workload.as_ref()?;
    let stem = |p: &Path| Some(p.file_stem()?.to_string_lossy().into_owned());
    let model = match (&w.model, &w.transformer, &w.model_file) {
        (Some(m), _, _) => m.clone(),
        (None, Some(t), _) => t.name.clone(),
        (None, None, Some(f)) => stem(Path::new(f))?,
        _ => return None,
    };
    let name = |v: serde_json::Value| v.as_str().map(str::to_string);
    let mut keys = BTreeMap::from([
        (MODEL.to_string(), model),
        (
            DTYPE.to_string(),
            name(serde_json::to_value(w.dtype).ok()?)?,
        ),
        (
            EXECUTION.to_string(),
            name(serde_json::to_value(w.execution).ok()?)?,
        ),
        (PROFILE.to_string(), stem(s.profile_path.as_deref()?)?),
    ]);
    if w.transformer.as_ref().is_some_and(|t| t.flash_attention) {
        keys.insert(FUSED_ATTENTION.to_string(), "true".into());
    }
    Some(keys)
}

/// `keys` as a row's `sim_set` column (`a=x;b=y`), which [`read`] reads back.
pub fn keys_column(keys: &BTreeMap<String, String>) -> String {
    keys.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
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
            "{} ({}, {}): |error| median {:.1}%, 90% within {:.1}%, max {:.1}%; \
             mean {:+.1}% ({})",
            count(self.rows, "row"),
            match (self.ranks_min, self.ranks_max) {
                (1, 1) => "1 rank".to_string(),
                (lo, hi) => format!("{} ranks", span(lo.to_string(), hi.to_string())),
            },
            match (
                self.bytes_min,
                self.bytes_max,
                self.batch_min,
                self.batch_max
            ) {
                (Some(lo), Some(hi), _, _) => span(size(lo), size(hi)),
                (_, _, Some(lo), Some(hi)) =>
                    format!("batch {}", span(lo.to_string(), hi.to_string())),
                _ => String::new(),
            },
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
                "  nearest  none on the same GPU model within 2x the ranks and 4x the bytes (a step's batch): \
                 the error above may not hold"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
