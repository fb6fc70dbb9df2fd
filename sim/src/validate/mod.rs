//! `dtsim validate`: replays measured runs in the simulator and states the error.
//!
//! A dataset is a CSV of real measurements. These layouts are recognised by their header:
//! - **testbed runs** (`data/runs/*.csv`, written by `testbed/workloads/suite.py`): each row
//!   names its topology file and overrides, ranks, collective size or model, the profile, and
//!   `sim_set` (the scenario `--set` lines that describe the same configuration). Collectives
//!   are timed with [`crate::scenario::run::run`], training steps with
//!   [`crate::scenario::workload::run_workload`]; rows with an empty `sim_set` (an algorithm
//!   dtsim does not have) are skipped and counted.
//! - **nccl-tests tables** (`size_bytes` with a time or bandwidth column, see
//!   [`nccl::TIME_COLUMNS`]): all-reduce (and all-gather, reduce-scatter, broadcast, reduce) on
//!   the system the row's own columns describe ([`system`]: GPU, GPUs and nodes, the
//!   interconnects), with that GPU's bundled profile.
//! - **GPU copy bandwidth tables** (`direction_or_metric`, `src_gpu`, `value`): each GPU pair's
//!   copy on the system the row describes, at the topology's link rates (`p2p`).
//! - **DDP step times** (`sec_per_iter`, `model`, `num_gpus`): p50 rows, DDP with the row's
//!   bucket cap and NCCL's choice per bucket, on the system its columns describe (the shared
//!   table: one DGX-1, `topologies/dgx1_v100.toml`, or more, `dgx1_v100_x2.toml`), with the
//!   GPU's bundled compute profile.
//!
//! Calibration is opt-in and honest: `--calibrate-on FILTER` selects rows whose measurements
//! fit `measured = a + b × simulated` (per group, least squares on relative error; `b` alone
//! when the selected rows' predictions barely differ). Those rows are then left out of the
//! error: only the other rows (further narrowed by `--score-on`) are scored. Without it, the
//! prediction is the simulation itself (testbed rows carry their own measured profile).
//!
//! A filter is `;`-separated conditions `column OP value` with OP one of `= != < <= > >=`;
//! `=` accepts alternatives `a|b|c`; numbers compare numerically.
//!
//! Here: reading datasets, filters, calibration and the run over every row; [`system`] reads
//! what system a row ran on, [`nccl`] replays nccl-tests tables (and leave-one-system-out),
//! `datasets` the other layouts, `tables` writes the outputs, [`launch_noise`] says how far a re-recording of
//! the rows' launches would move them, [`baseline`] compares them with an earlier run's; [`track_record`] reads them back to
//! tell a run how far off dtsim has been on measured runs of its call or step; `cli` is the
//! command (`dtsim validate`: its flags, gates and printing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::scenario;

pub mod baseline;
mod cli;
mod datasets;
pub mod launch_noise;
pub mod nccl;
mod p2p;
pub mod system;
mod tables;
pub mod track_record;

pub use cli::{run_cli, Flags, Gates};

use datasets::{ddp_row, single_device_rows, testbed_row, tf_cnn_row};

/// One row as replayed, or why it was skipped.
pub type Replayed = Result<Replay, String>;

/// One replayed row: its group and label, its measured and simulated times, and for an
/// OpenMPI row whose exchanges between partners decide the time, the simulated time with every
/// exchange both ways at once and with every one one way after the other (the run's
/// `exchange_modes_ps`).
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub group: String,
    pub label: String,
    pub measured_secs: f64,
    pub simulated_secs: f64,
    pub exchange_modes_secs: Option<(f64, f64)>,
    /// Where the run played the call several ways: its fastest and slowest play (the run's
    /// `plays`).
    pub plays_secs: Option<(f64, f64)>,
    /// The collective call the row measured, where the replayer knows it (testbed collectives,
    /// nccl-tests rows).
    pub call: Option<RowCall>,
}

impl Replay {
    fn new(group: String, label: String, measured_secs: f64, simulated_secs: f64) -> Self {
        Replay {
            group,
            label,
            measured_secs,
            simulated_secs,
            exchange_modes_secs: None,
            plays_secs: None,
            call: None,
        }
    }
}

/// One condition of a row filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub column: String,
    pub op: String,
    pub values: Vec<String>,
}

/// Rows for which every condition holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter(pub Vec<Condition>);

impl Filter {
    /// Parses `col=v1|v2; col2>=3`.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut out = Vec::new();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let ops = ["<=", ">=", "!=", "=", "<", ">"];
            let (i, op) = ops
                .iter()
                .filter_map(|op| part.find(op).map(|i| (i, *op)))
                .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))
                .ok_or_else(|| {
                    format!("{part:?}: a condition `column OP value` with OP one of = != < <= > >=")
                })?;
            let column = part[..i].trim().to_string();
            let value = part[i + op.len()..].trim();
            if column.is_empty() || value.is_empty() {
                return Err(format!("{part:?}: a column and a value"));
            }
            out.push(Condition {
                column,
                op: op.to_string(),
                values: value.split('|').map(|v| v.trim().to_string()).collect(),
            });
        }
        Ok(Filter(out))
    }

    /// Whether the row matches; an unknown column is an error naming it.
    pub fn matches(&self, row: &Row) -> Result<bool, String> {
        for c in &self.0 {
            let v = row.get(&c.column).ok_or_else(|| {
                format!("filter column {:?}: not a column of this dataset", c.column)
            })?;
            let cmp = |want: &str| -> Option<std::cmp::Ordering> {
                match (v.parse::<f64>(), want.parse::<f64>()) {
                    (Ok(a), Ok(b)) => a.partial_cmp(&b),
                    _ => Some(v.as_str().cmp(want)),
                }
            };
            let ok = match c.op.as_str() {
                "=" => c
                    .values
                    .iter()
                    .any(|w| cmp(w) == Some(std::cmp::Ordering::Equal)),
                "!=" => c
                    .values
                    .iter()
                    .all(|w| cmp(w) != Some(std::cmp::Ordering::Equal)),
                "<" => cmp(&c.values[0]) == Some(std::cmp::Ordering::Less),
                "<=" => cmp(&c.values[0]).is_some_and(|o| o != std::cmp::Ordering::Greater),
                ">" => cmp(&c.values[0]) == Some(std::cmp::Ordering::Greater),
                _ => cmp(&c.values[0]).is_some_and(|o| o != std::cmp::Ordering::Less),
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// One CSV row by column name.
pub type Row = BTreeMap<String, String>;

/// What `validate` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub calibrate_on: Option<Filter>,
    /// Scenario overrides every testbed row is replayed with after its own `sim_set`
    /// (`--set network.model=packet`: what another model predicts for the same runs).
    pub set: Vec<String>,
    pub score_on: Option<Filter>,
    pub out: Option<PathBuf>,
    /// Also score nccl-tests tables leave-one-system-out (`--leave-one-out system`).
    pub leave_one_out_system: bool,
}

/// One replayed row.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub dataset: String,
    pub group: String,
    pub row: usize,
    pub label: String,
    pub measured_secs: f64,
    pub simulated_secs: f64,
    /// After calibration (equal to `simulated_secs` without it).
    pub predicted_secs: f64,
    /// Used to fit the calibration, not scored.
    pub calibration: bool,
    /// Left out of the error by `--score-on`.
    pub scored: bool,
    /// The fastest and slowest repetition behind `measured_secs`, where the dataset gives them
    /// (`measured_min_secs`, `measured_max_secs`: the testbed's runs).
    pub measured_range_secs: Option<(f64, f64)>,
    /// OpenMPI rows whose exchanges between partners decide their time: the prediction with
    /// every exchange both ways at once and with every one one way first
    /// (`collective.exchanges`), the bounds of what a launch can do in the model.
    pub exchange_modes_secs: Option<(f64, f64)>,
    /// Where the model played the call several ways (a root's entry orders, the hosts'
    /// wake-ups drawn) and predicts the median play: its fastest and slowest play, the spread
    /// the model itself gives the call.
    pub plays_secs: Option<(f64, f64)>,
    /// The fastest and slowest launch's median where the row pools several launches
    /// (`launch_medians_secs`: the testbed's rows since 2026-11-29): how far apart launches
    /// land, which a row's pooled median hides.
    pub launch_range_secs: Option<(f64, f64)>,
    /// Every launch's median where the row pools two or more (else empty): what
    /// [`launch_noise`] re-records the row from.
    pub launch_medians_secs: Vec<f64>,
    /// The collective call or training step the row measured (`None` for copies and the
    /// calibrated tables' steps): what [`track_record`] matches a run against.
    pub call: Option<RowCall>,
}

/// A measured collective call: the scenario keys it is replayed with (a testbed row's
/// `sim_set`: library, algorithm, ...; `collective.library=nccl` for nccl-tests rows), op, rank
/// count, bytes, and the GPU model where it ran on GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct RowCall {
    pub sim_set: String,
    pub op: String,
    pub ranks: u32,
    /// A collective's bytes; `None` for a training step.
    pub bytes: Option<u64>,
    /// A training step's batch per GPU.
    pub batch: Option<u64>,
    /// The GPU model's name as dtsim's table has it (`H100`, `2080`), where it ran on GPUs.
    pub gpu: Option<String>,
}

impl Prediction {
    /// (predicted − measured) / measured, percent.
    pub fn error_pct(&self) -> f64 {
        (self.predicted_secs - self.measured_secs) / self.measured_secs * 100.0
    }

    /// Whether the prediction lies between the fastest and the slowest repetition measured:
    /// a miss of the median that the run itself spans (`None`: no range given).
    pub fn within_measured_range(&self) -> Option<bool> {
        self.measured_range_secs
            .map(|(lo, hi)| (lo..=hi).contains(&self.predicted_secs))
    }
}

/// The row's launch medians (`launch_medians_secs`, `;`-separated seconds), when it pools two
/// or more launches (else none).
fn launch_medians(row: &Row) -> Vec<f64> {
    let medians: Vec<f64> = row
        .get("launch_medians_secs")
        .map(|v| {
            v.split(';')
                .filter_map(|v| v.trim().parse::<f64>().ok())
                .filter(|v| *v > 0.0 && v.is_finite())
                .collect()
        })
        .unwrap_or_default();
    if medians.len() >= 2 {
        medians
    } else {
        Vec::new()
    }
}

/// The fastest and slowest of some launch medians (none: fewer than two).
fn launch_range(medians: &[f64]) -> Option<(f64, f64)> {
    let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = medians.iter().copied().fold(0.0, f64::max);
    (medians.len() >= 2).then_some((lo, hi))
}

/// The row's range of repetitions, when it gives a consistent one around its `measured`.
fn measured_range(row: &Row, measured: f64) -> Option<(f64, f64)> {
    let lo = num(row, "measured_min_secs").ok()?;
    let hi = num(row, "measured_max_secs").ok()?;
    (lo <= measured && measured <= hi && lo > 0.0).then_some((lo, hi))
}

/// Error statistics of one dataset × method group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupError {
    pub dataset: String,
    pub group: String,
    pub rows: usize,
    pub calibration_rows: usize,
    pub median_abs_pct: f64,
    pub max_abs_pct: f64,
    /// `a + b × simulated`, when calibrated.
    pub fit: Option<(f64, f64)>,
    /// Scored rows whose prediction lies within their measured range, of the scored rows that
    /// give one (`None`: none does).
    pub within_range: Option<(usize, usize)>,
    /// What re-recording its scored rows' launches does to a model exact to their medians
    /// ([`launch_noise`]; `None`: no scored row names its launches).
    pub launch_noise: Option<launch_noise::LaunchNoise>,
}

/// [`GroupError::within_range`] over some scored predictions.
fn within_range<'p>(scored: impl Iterator<Item = &'p Prediction>) -> Option<(usize, usize)> {
    let flags: Vec<bool> = scored
        .filter_map(Prediction::within_measured_range)
        .collect();
    (!flags.is_empty()).then(|| (flags.iter().filter(|&&w| w).count(), flags.len()))
}

/// Everything `validate` found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub predictions: Vec<Prediction>,
    pub groups: Vec<GroupError>,
    /// (dataset, why) for rows that could not be replayed.
    pub skipped: Vec<(String, String)>,
    /// (dataset, group, what its rows were replayed on) for nccl-tests and DDP tables, each once.
    pub replayed_on: Vec<(String, String, String)>,
}

/// Reads a CSV file (RFC 4180 quoting) into rows.
pub fn read_csv(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: a readable CSV file ({e})", path.display()))?;
    parse_rows(&text, &path.display().to_string())
}

/// Rows of CSV `text` as header → value maps; `file` names it in errors.
fn parse_rows(text: &str, file: &str) -> Result<Vec<Row>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| format!("{file}: a header line ({e})"))?
        .iter()
        .map(String::from)
        .collect();
    if header.is_empty() {
        return Err(format!("{file}: a header line"));
    }
    let mut rows = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| format!("{file}: row {}: CSV ({e})", i + 1))?;
        if rec.len() != header.len() {
            return Err(format!(
                "{file}: row {}: {} fields like the header, got {}",
                i + 1,
                header.len(),
                rec.len()
            ));
        }
        rows.push(
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(String::from))
                .collect(),
        );
    }
    Ok(rows)
}

/// The repository root: the nearest ancestor of `start` with a `topologies/` directory.
fn repo_root(start: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    let cwd = std::env::current_dir().unwrap_or_default();
    let found = |p: &Path| {
        p.ancestors()
            .find(|a| a.join("topologies").is_dir())
            .map(Path::to_path_buf)
    };
    // The dataset's own repository, else the one the command runs in (a dataset in /tmp).
    found(&abs).or_else(|| found(&cwd)).unwrap_or(cwd)
}

/// A path from a dataset row: as given if it exists, else relative to the repository root.
fn resolve(p: &str, root: &Path) -> PathBuf {
    let given = PathBuf::from(p);
    if given.is_absolute() || given.exists() {
        return std::fs::canonicalize(&given).unwrap_or(given);
    }
    root.join(p)
}

fn num(row: &Row, col: &str) -> Result<f64, String> {
    let v = row
        .get(col)
        .ok_or_else(|| format!("column {col:?}: missing"))?;
    v.trim()
        .parse::<f64>()
        .map_err(|_| format!("column {col:?}: a number, got {v:?}"))
}

fn toml_str(p: &Path) -> String {
    toml::Value::String(p.display().to_string()).to_string()
}

/// Simulates a scenario given as text (paths absolute) with `set` overrides; seconds.
fn simulate(text: &str, set: &[String], workload: bool) -> Result<f64, String> {
    if workload {
        simulate_step(text, set).map(|(secs, _)| secs)
    } else {
        simulate_collective(text, set).map(|(secs, _, _)| secs)
    }
}

/// [`simulate`] of a training step, with the step as a track record matches it (its keys,
/// rank count and batch per GPU; `gpu` left for the caller, who knows what the row ran on).
fn simulate_step(text: &str, set: &[String]) -> Result<(f64, Option<RowCall>), String> {
    let s =
        scenario::parse(text, Path::new("validate-row.toml"), set).map_err(|e| e.to_string())?;
    let r = scenario::workload::run_workload(&s, Default::default()).map_err(|e| e.to_string())?;
    let call = track_record::step_keys(&s).map(|keys| RowCall {
        sim_set: track_record::keys_column(&keys),
        op: track_record::STEP_OP.to_string(),
        ranks: r.summary.ranks,
        bytes: None,
        batch: Some(r.summary.batch_per_gpu),
        gpu: None,
    });
    Ok((r.summary.metrics.step_secs, call))
}

/// What [`simulate_collective`] gives: seconds, OpenMPI's exchange modes and the plays' span.
type CollectiveSim = (f64, Option<(f64, f64)>, Option<(f64, f64)>);

/// [`simulate`] of a collective, with the run's OpenMPI exchange modes (seconds with every
/// exchange both ways at once, and one way after the other) and its fastest and slowest play
/// where it gives them.
fn simulate_collective(text: &str, set: &[String]) -> Result<CollectiveSim, String> {
    let s =
        scenario::parse(text, Path::new("validate-row.toml"), set).map_err(|e| e.to_string())?;
    let r = scenario::run::run(&s).map_err(|e| e.to_string())?;
    let secs = |ps: u64| ps as f64 * 1e-12;
    let modes = r.summary.exchange_modes_ps.map(|[a, b]| (secs(a), secs(b)));
    let plays = r
        .summary
        .plays
        .map(|p| (secs(p.fastest_ps), secs(p.slowest_ps)));
    Ok((secs(r.summary.time_ps), modes, plays))
}

/// Fits `measured = a + b × simulated` minimising squared relative error; `b` alone when the
/// simulated values are nearly equal (a and b would not be identifiable).
pub fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.is_empty() {
        return None;
    }
    // Weighted least squares with weights 1/measured^2.
    let (mut s_w, mut s_x, mut s_y, mut s_xx, mut s_xy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(sim, meas) in points {
        let w = 1.0 / (meas * meas);
        s_w += w;
        s_x += w * sim;
        s_y += w * meas;
        s_xx += w * sim * sim;
        s_xy += w * sim * meas;
    }
    let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let det = s_w * s_xx - s_x * s_x;
    if points.len() >= 2 && hi > 1.5 * lo && det > 0.0 {
        let b = (s_w * s_xy - s_x * s_y) / det;
        let a = (s_y - b * s_x) / s_w;
        if b > 0.0 && a >= 0.0 {
            return Some((a, b));
        }
    }
    (s_xx > 0.0).then(|| (0.0, s_xy / s_xx))
}

/// How a dataset's rows are replayed (a row can stand for several, as a single-device table's).
type ReplayFn<'a> = dyn Fn(&Row, &Path) -> Vec<Replayed> + 'a;

/// Where a replay stands, reported before each row is replayed ([`validate_with_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowProgress<'a> {
    /// The dataset's name, as its rows' `dataset` column will say.
    pub dataset: &'a str,
    /// 1-based: which dataset of `datasets`, and which of its rows.
    pub dataset_index: usize,
    pub datasets: usize,
    pub row: usize,
    pub rows: usize,
}

/// Replays every row of every dataset, calibrates if asked, and computes the errors.
pub fn validate(datasets: &[PathBuf], opts: &Options) -> Result<Report, String> {
    validate_with_progress(datasets, opts, &|_| {})
}

/// [`validate`], calling `progress` before each row is replayed: a packet-model replay of
/// every testbed dataset takes minutes, and the command line shows where it is.
pub fn validate_with_progress(
    datasets: &[PathBuf],
    opts: &Options,
    progress: &dyn Fn(RowProgress),
) -> Result<Report, String> {
    let mut report = Report::default();
    let stem = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    for (dataset_index, path) in datasets.iter().enumerate() {
        let rows = read_csv(path)?;
        // A dataset is named by its file; files of one name (torch_bench.py's step_times.csv
        // of several runs) by their folder too.
        let name = match datasets.iter().filter(|d| stem(d) == stem(path)).count() {
            1 => stem(path),
            _ => match path.parent().and_then(Path::file_name) {
                Some(dir) => format!("{}/{}", dir.to_string_lossy(), stem(path)),
                None => stem(path),
            },
        };
        let root = repo_root(path);
        let header: Vec<&String> = rows.first().map(|r| r.keys().collect()).unwrap_or_default();
        let has = |c: &str| header.iter().any(|h| h.as_str() == c);
        let is_nccl_table = nccl::is_table(has);
        let file_name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !opts.set.is_empty() && !has("sim_set") {
            return Err(format!(
                "{}: --set replays testbed datasets (a sim_set column) with other scenario \
                 keys; this is not one",
                path.display()
            ));
        }
        let replay: Box<ReplayFn> = if has("sim_set") {
            Box::new(|r, p| vec![testbed_row(r, p, &opts.set)])
        } else if has("sec_per_iter") {
            Box::new(|r, p| vec![ddp_row(r, p)])
        } else if is_nccl_table {
            Box::new(|r, p| vec![nccl::replay(r, p)])
        } else if has("direction_or_metric") && has("src_gpu") {
            Box::new(|r, p| vec![p2p::p2p_row(r, p)])
        } else if has("step_secs_median") {
            Box::new(single_device_rows)
        } else if has("variable_update / local_parameter_device") {
            Box::new(|r, p| vec![tf_cnn_row(r, p)])
        } else {
            return Err(format!(
                "{}: a testbed run (sim_set column), an nccl-tests table (size_bytes with \
                 a time or bandwidth column: oop_time_us, ip_time_us, time_us, busbw_GBps, \
                 algbw_GBps, ...), a GPU copy bandwidth table (direction_or_metric, src_gpu), \
                 a DDP table (sec_per_iter), single-device \
                 training steps (step_secs_median, from calibrate/scripts/torch_bench.py) or \
                 the tf_cnn_benchmarks table (variable_update / local_parameter_device)",
                path.display()
            ));
        };
        let mut preds: Vec<Prediction> = Vec::new();
        let mut fitted_rows = nccl::FittedOn::default();
        for (i, row) in rows.iter().enumerate() {
            progress(RowProgress {
                dataset: &name,
                dataset_index: dataset_index + 1,
                datasets: datasets.len(),
                row: i + 1,
                rows: rows.len(),
            });
            // Never score (nor simulate) a row the row's profile was fitted on.
            if is_nccl_table && fitted_rows.contains(row, &root, &file_name, i + 1) {
                report.skipped.push((
                    name.clone(),
                    format!("row {}: its profile was fitted on it; not scored", i + 1),
                ));
                continue;
            }
            let on = if is_nccl_table {
                nccl::case(row, &root)
                    .ok()
                    .map(|c| (c.group, c.replayed_on))
            } else if has("sec_per_iter") {
                datasets::ddp_replayed_on(row)
            } else {
                None
            };
            if let Some((group, how)) = on {
                let entry = (name.clone(), group, how);
                if !report.replayed_on.contains(&entry) {
                    report.replayed_on.push(entry);
                }
            }
            for replayed in replay(row, &root) {
                match replayed {
                    Ok(Replay {
                        group,
                        label,
                        measured_secs: measured,
                        simulated_secs: sim,
                        exchange_modes_secs,
                        plays_secs,
                        call,
                    }) => {
                        let calibration = match &opts.calibrate_on {
                            Some(f) => f
                                .matches(row)
                                .map_err(|e| format!("{}: {e}", path.display()))?,
                            None => false,
                        };
                        let scored = match &opts.score_on {
                            Some(f) => f
                                .matches(row)
                                .map_err(|e| format!("{}: {e}", path.display()))?,
                            None => true,
                        };
                        if !(measured > 0.0 && measured.is_finite()) {
                            report.skipped.push((
                                name.clone(),
                                format!("row {}: measured time {measured}", i + 1),
                            ));
                            continue;
                        }
                        let launches = launch_medians(row);
                        preds.push(Prediction {
                            dataset: name.clone(),
                            group,
                            row: i + 1,
                            label,
                            measured_secs: measured,
                            simulated_secs: sim,
                            predicted_secs: sim,
                            calibration,
                            scored,
                            measured_range_secs: measured_range(row, measured),
                            launch_range_secs: launch_range(&launches),
                            launch_medians_secs: launches,
                            call,
                            // The bounds where the prediction lies between them.
                            exchange_modes_secs: exchange_modes_secs
                                .filter(|&(both, serial)| both <= sim && sim <= serial),
                            plays_secs,
                        });
                    }
                    Err(why) => report
                        .skipped
                        .push((name.clone(), format!("row {}: {why}", i + 1))),
                }
            }
        }
        let mut groups: Vec<String> = preds.iter().map(|p| p.group.clone()).collect();
        groups.sort();
        groups.dedup();
        for g in groups {
            let pts: Vec<(f64, f64)> = preds
                .iter()
                .filter(|p| p.group == g && p.calibration)
                .map(|p| (p.simulated_secs, p.measured_secs))
                .collect();
            let fitted = if opts.calibrate_on.is_some() {
                fit(&pts)
            } else {
                None
            };
            if opts.calibrate_on.is_some() && fitted.is_none() {
                report.skipped.push((
                    name.clone(),
                    format!("group {g}: no calibration rows match; predictions uncalibrated"),
                ));
            }
            for p in preds.iter_mut().filter(|p| p.group == g) {
                if let Some((a, b)) = fitted {
                    p.predicted_secs = a + b * p.simulated_secs;
                }
            }
            let errs: Vec<f64> = preds
                .iter()
                .filter(|p| p.group == g && !p.calibration && p.scored)
                .map(|p| p.error_pct().abs())
                .collect();
            report.groups.push(GroupError {
                dataset: name.clone(),
                group: g.clone(),
                rows: errs.len(),
                calibration_rows: pts.len(),
                median_abs_pct: crate::stats::median(&errs),
                max_abs_pct: errs.iter().cloned().fold(f64::NAN, f64::max),
                fit: fitted,
                within_range: within_range(
                    preds
                        .iter()
                        .filter(|p| p.group == g && !p.calibration && p.scored),
                ),
                launch_noise: launch_noise::of_group(
                    &preds
                        .iter()
                        .filter(|p| p.group == g && !p.calibration && p.scored)
                        .map(|p| p.launch_medians_secs.as_slice())
                        .collect::<Vec<_>>(),
                    &format!("{name} {g}"),
                ),
            });
        }
        report.predictions.extend(preds);
    }
    if opts.leave_one_out_system {
        let preds = nccl::leave_one_out(datasets)?;
        let mut groups: Vec<(String, String)> = preds
            .iter()
            .map(|p| (p.dataset.clone(), p.group.clone()))
            .collect();
        groups.sort();
        groups.dedup();
        for (dataset, g) in groups {
            let errs: Vec<f64> = preds
                .iter()
                .filter(|p| p.group == g)
                .map(|p| p.error_pct().abs())
                .collect();
            report.groups.push(GroupError {
                dataset,
                group: g,
                rows: errs.len(),
                calibration_rows: 0,
                median_abs_pct: crate::stats::median(&errs),
                max_abs_pct: errs.iter().cloned().fold(f64::NAN, f64::max),
                fit: None,
                within_range: None,
                launch_noise: None,
            });
        }
        report.predictions.extend(preds);
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
