//! Sweeps: a `[sweep]` table turns one scenario into many points, run in parallel, one result
//! directory per point, resumable, shardable across machines, merged into one results table.
//!
//! ```toml
//! [sweep]
//! mode = "product"                        # product (default) | zip
//! "collective.algorithm" = ["ring", "double_binary_tree"]
//! "collective.bytes" = ["1MiB", "16MiB"]  # any --set key path, each with a list of values
//! "placement.ranks" = [8, 16, 32]
//! ```
//!
//! Axes keep the order they are written in; in `product` mode the first axis varies slowest, the
//! last fastest; `zip` takes the i-th value of every axis (all lists the same length). A
//! workload scenario's `[[compare]]` variants are one more axis, `variant`, in front of the others.
//!
//! A point is identified by its *key* (scenario name, the `--set` overrides of the whole sweep and
//! the point's own assignments); its results go to `points/<index>-<hash of key>/`, and
//! `summary.json` is written last, atomically, with the key inside: a point is done iff that file
//! exists and holds the point's key. Re-running a sweep skips done points, so an interrupted
//! sweep resumes without redoing or losing any.

use crate::collective::play::Watch;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Deserialize;

use super::{load, Scenario, ScenarioError};
use crate::metrics::output::write_atomic;

/// How the axes combine into points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SweepMode {
    /// Every combination of values (cartesian product).
    #[default]
    Product,
    /// The i-th value of every axis together.
    Zip,
}

/// One varied key with its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// A `--set` key path such as `collective.bytes`, or `variant` for `[[compare]]` labels.
    pub key: String,
    pub values: Vec<toml::Value>,
}

/// The parsed `[sweep]` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepSpec {
    pub mode: SweepMode,
    pub axes: Vec<Axis>,
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Position in the expanded order (0-based).
    pub index: usize,
    /// (axis key, value) in axis order.
    pub values: Vec<(String, toml::Value)>,
    /// The `--set` overrides that make this point: the sweep's own, then the point's.
    pub overrides: Vec<String>,
    /// What identifies the point across runs.
    pub key: String,
    /// FNV-1a 64 of `key`.
    pub hash: u64,
}

impl Point {
    /// `points/<index>-<hash>` relative to the sweep's output directory.
    pub fn dir_name(&self) -> String {
        format!("{:05}-{:016x}", self.index, self.hash)
    }
    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join("points").join(self.dir_name())
    }
}

/// A value as people write it in a table: strings without quotes.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// FNV-1a, 64 bits: a stable hash (std's hashers are seeded per process).
pub fn fnv1a64(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A scenario expanded into its points.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub scenario_path: PathBuf,
    pub name: String,
    pub spec: SweepSpec,
    /// `--set` overrides applied to every point.
    pub base_overrides: Vec<String>,
    pub points: Vec<Point>,
    /// The validation outputs the points' track records read, read once for the whole sweep
    /// at its first point of a library's collective (`None` inside: there are none).
    pub track_source: std::sync::OnceLock<Option<crate::validate::track_record::Source>>,
}

#[derive(Deserialize)]
struct SweepOnly {
    #[serde(default)]
    sweep: Option<BTreeMap<String, toml::Spanned<toml::Value>>>,
}

/// Parses the `[sweep]` table of a scenario text (axes in the order written).
pub fn parse_spec(file: &str, text: &str) -> Result<SweepSpec, ScenarioError> {
    let only: SweepOnly = toml::from_str(text).map_err(|e| super::toml_error(file, text, &e))?;
    let Some(table) = only.sweep else {
        return Ok(SweepSpec::default());
    };
    let mut spec = SweepSpec::default();
    let mut axes: Vec<(usize, Axis)> = Vec::new();
    for (key, value) in table {
        let start = value.span().start;
        let value = value.into_inner();
        if key == "mode" {
            spec.mode = match value.as_str() {
                Some("product") => SweepMode::Product,
                Some("zip") => SweepMode::Zip,
                _ => {
                    return Err(ScenarioError::new(
                        file,
                        "sweep.mode",
                        format!("\"product\" or \"zip\", got {value}"),
                    ))
                }
            };
            continue;
        }
        let field = format!("sweep.\"{key}\"");
        if key.split('.').any(|k| k.trim().is_empty()) || key.starts_with("sweep") {
            return Err(ScenarioError::new(
                file,
                field,
                "a dotted key of the scenario such as \"collective.bytes\"",
            ));
        }
        let values = match value {
            toml::Value::Array(a) if !a.is_empty() => a,
            other => {
                return Err(ScenarioError::new(
                    file,
                    field,
                    format!("a non-empty list of values, got {other}"),
                ))
            }
        };
        axes.push((start, Axis { key, values }));
    }
    axes.sort_by_key(|(start, _)| *start);
    spec.axes = axes.into_iter().map(|(_, a)| a).collect();
    if spec.mode == SweepMode::Zip {
        if let Some(first) = spec.axes.first() {
            let n = first.values.len();
            if let Some(bad) = spec.axes.iter().find(|a| a.values.len() != n) {
                return Err(ScenarioError::new(
                    file,
                    format!("sweep.\"{}\"", bad.key),
                    format!(
                        "{n} values like sweep.\"{}\" (mode = \"zip\"), got {}",
                        first.key,
                        bad.values.len()
                    ),
                ));
            }
        }
    }
    Ok(spec)
}

/// The points of `axes` in stable order: (axis index, value index) per point.
fn combinations(mode: SweepMode, lens: &[usize]) -> Vec<Vec<usize>> {
    if lens.is_empty() {
        return vec![Vec::new()];
    }
    match mode {
        SweepMode::Zip => (0..lens[0]).map(|i| vec![i; lens.len()]).collect(),
        SweepMode::Product => {
            let total: usize = lens.iter().product();
            (0..total)
                .map(|mut i| {
                    let mut c = vec![0; lens.len()];
                    for (slot, &len) in c.iter_mut().zip(lens).rev() {
                        *slot = i % len;
                        i /= len;
                    }
                    c
                })
                .collect()
        }
    }
}

/// Reads the scenario at `path` and expands its `[sweep]` (and `[[compare]]`) into points.
/// `overrides` apply to every point. Each point is checked by loading it.
pub fn expand(path: &Path, overrides: &[String]) -> Result<Sweep, ScenarioError> {
    let file = path.display().to_string();
    if let Some(o) = overrides
        .iter()
        .find(|o| o.trim_start().starts_with("sweep"))
    {
        return Err(ScenarioError::new(
            &file,
            format!("--set {o}"),
            "a scenario key; edit the [sweep] table to change the axes",
        ));
    }
    let base = load(path, overrides)?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        ScenarioError::new(&file, "(file)", format!("a readable scenario file ({e})"))
    })?;
    let mut spec = parse_spec(&file, &text)?;
    // [[compare]] variants: one more axis in front, whose values carry their own overrides.
    let variants = &base.file.compare;
    let mut axes = spec.axes.clone();
    if !variants.is_empty() {
        axes.insert(
            0,
            Axis {
                key: "variant".into(),
                values: variants
                    .iter()
                    .map(|v| toml::Value::String(v.label.clone()))
                    .collect(),
            },
        );
    }
    let lens: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
    let mode = spec.mode;
    let combos = if variants.is_empty() || mode == SweepMode::Product {
        combinations(mode, &lens)
    } else {
        // zip the sweep's own axes, then cross with the variants
        let inner = combinations(SweepMode::Zip, &lens[1..]);
        (0..lens[0])
            .flat_map(|v| {
                inner.iter().map(move |c| {
                    let mut x = vec![v];
                    x.extend(c);
                    x
                })
            })
            .collect()
    };
    let mut points = Vec::with_capacity(combos.len());
    for (index, combo) in combos.into_iter().enumerate() {
        let mut values = Vec::new();
        let mut point_sets = Vec::new();
        for (axis, &vi) in axes.iter().zip(&combo) {
            let v = axis.values[vi].clone();
            if axis.key == "variant" && !variants.is_empty() {
                point_sets.extend(variants[vi].set.iter().cloned());
            } else {
                point_sets.push(format!("{}={}", axis.key, v));
            }
            values.push((axis.key.clone(), v));
        }
        let mut all = overrides.to_vec();
        all.extend(point_sets);
        let mut key = format!("scenario={}\n", base.file.name);
        for o in &all {
            let _ = writeln!(key, "set {o}");
        }
        let hash = fnv1a64(&key);
        points.push(Point {
            index,
            values,
            overrides: all,
            key,
            hash,
        });
    }
    spec.axes = axes;
    Ok(Sweep {
        scenario_path: path.to_path_buf(),
        name: base.file.name.clone(),
        spec,
        base_overrides: overrides.to_vec(),
        points,
        track_source: std::sync::OnceLock::new(),
    })
}

/// Which share of the points a process runs: points with `index % count == shard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// `"i/n"` with `i < n`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("a shard as i/n with 0 <= i < n, e.g. 0/4; got {s:?}");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard of a Slurm job-array task: `SLURM_ARRAY_TASK_ID` (minus `SLURM_ARRAY_TASK_MIN`)
    /// of `SLURM_ARRAY_TASK_COUNT`; `None` outside a job array.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        let (Some(id), Some(count)) = (var("SLURM_ARRAY_TASK_ID"), var("SLURM_ARRAY_TASK_COUNT"))
        else {
            return Ok(None);
        };
        let num = |name: &str, v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("{name} to be a number, got {v:?}"))
        };
        let id = num("SLURM_ARRAY_TASK_ID", &id)?;
        let count = num("SLURM_ARRAY_TASK_COUNT", &count)?;
        let min = match var("SLURM_ARRAY_TASK_MIN") {
            Some(m) => num("SLURM_ARRAY_TASK_MIN", &m)?,
            None => 0,
        };
        let index = id
            .checked_sub(min)
            .ok_or("SLURM_ARRAY_TASK_ID below SLURM_ARRAY_TASK_MIN")?;
        Shard::parse(&format!("{index}/{count}")).map(Some)
    }

    pub fn contains(&self, point_index: usize) -> bool {
        point_index % self.count as usize == self.index as usize
    }
}

/// What `run` does besides running points.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    pub out: PathBuf,
    pub jobs: usize,
    pub shard: Shard,
    /// Run at most this many pending points, then stop (the rest run on the next call).
    pub limit: Option<usize>,
    /// Write every result file of each point (links.csv, traffic.csv, trace.json ...), not only
    /// summary.json.
    pub all_files: bool,
    /// Reuse an output folder that holds another sweep, dropping its points.
    pub force: bool,
}

/// What a call to [`run`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepOutcome {
    /// Points of this shard.
    pub in_shard: usize,
    /// Found done and skipped.
    pub already_done: usize,
    /// Run now.
    pub ran: usize,
    /// (point index, error) of points that failed (not done: a re-run tries them again).
    pub failed: Vec<(usize, String)>,
    /// Pending points left for a later call (only with a limit).
    pub left: usize,
}

/// True iff the point's `summary.json` exists and holds its key.
pub fn is_done(out: &Path, p: &Point) -> bool {
    let Ok(text) = std::fs::read_to_string(p.dir(out).join("summary.json")) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("sweep_point")
                .and_then(|s| s.get("key"))
                .and_then(|k| k.as_str())
                .map(|k| k == p.key)
        })
        .unwrap_or(false)
}

/// The `sweep_point` object written into each point's summary.
fn point_json(sweep: &Sweep, p: &Point) -> serde_json::Value {
    let values: serde_json::Map<String, serde_json::Value> = p
        .values
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(value_text(v))))
        .collect();
    serde_json::json!({
        "sweep": sweep.name,
        "index": p.index,
        "hash": format!("{:016x}", p.hash),
        "key": p.key,
        "axes": sweep.spec.axes.iter().map(|a| a.key.clone()).collect::<Vec<_>>(),
        "values": values,
    })
}

/// Runs one point and writes its directory; `summary.json` last.
pub fn run_point(sweep: &Sweep, p: &Point, out: &Path, all_files: bool) -> anyhow::Result<()> {
    let s: Scenario = load(&sweep.scenario_path, &p.overrides)?;
    let dir = p.dir(out);
    // How far off dtsim has been on measured runs of the point's call or step: merged into its
    // summary, so results.csv has them as columns.
    use crate::validate::track_record as tr;
    let track_of = |call: Option<tr::Call>| {
        let call = call?;
        let (source, rows) = sweep
            .track_source
            .get_or_init(|| tr::load(&sweep.scenario_path))
            .as_ref()?;
        tr::of(&call, rows, source)
    };
    let (kind, mut summary, track) = if s.file.workload.is_some() {
        let report = super::workload::run_workload(&s, Watch::default())?;
        if all_files {
            report.write_dir(&dir)?;
        }
        let track = track_of(tr::step_call_of(&s, &report));
        ("workload", serde_json::to_value(&report.summary)?, track)
    } else {
        let report = super::run::run(&s)?;
        if all_files {
            report.write_dir(&dir)?;
        }
        let track = track_of(tr::call_of(&s, &report));
        ("collective", serde_json::to_value(&report.summary)?, track)
    };
    if let (Some(t), serde_json::Value::Object(m)) = (track, &mut summary) {
        m.insert("track_record".into(), serde_json::to_value(t)?);
    }
    if let serde_json::Value::Object(m) = &mut summary {
        m.insert("kind".into(), kind.into());
        m.insert("sweep_point".into(), point_json(sweep, p));
    }
    let text = serde_json::to_string_pretty(&summary)? + "\n";
    write_atomic(&dir.join("summary.json"), text.as_bytes())?;
    Ok(())
}

/// The sweep's manifest (`sweep.json`): what the points are, for merges and reports.
pub fn manifest(sweep: &Sweep) -> serde_json::Value {
    serde_json::json!({
        "sweep": sweep.name,
        "scenario": sweep.scenario_path.display().to_string(),
        "set": sweep.base_overrides,
        "mode": match sweep.spec.mode { SweepMode::Product => "product", SweepMode::Zip => "zip" },
        "axes": sweep.spec.axes.iter().map(|a| serde_json::json!({
            "key": a.key,
            "values": a.values.iter().map(value_text).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "points": sweep.points.iter().map(|p| serde_json::json!({
            "index": p.index, "dir": p.dir_name(), "key": p.key,
        })).collect::<Vec<_>>(),
    })
}

/// Runs the shard's pending points on `jobs` threads (one simulation per thread at a time),
/// calling `progress` after each finished point. Writes `sweep.json` first.
pub fn run(
    sweep: &Sweep,
    opts: &SweepOptions,
    progress: &(dyn Fn(&Point) + Sync),
) -> anyhow::Result<SweepOutcome> {
    claim_folder(sweep, &opts.out, opts.force)?;
    crate::metrics::run_dir::remove_stale_temps(&opts.out)?;
    let text = serde_json::to_string_pretty(&manifest(sweep))? + "\n";
    write_atomic(&opts.out.join("sweep.json"), text.as_bytes())?;
    let mine: Vec<&Point> = sweep
        .points
        .iter()
        .filter(|p| opts.shard.contains(p.index))
        .collect();
    let pending: Vec<&Point> = mine
        .iter()
        .copied()
        .filter(|p| !is_done(&opts.out, p))
        .collect();
    let mut outcome = SweepOutcome {
        in_shard: mine.len(),
        already_done: mine.len() - pending.len(),
        ..SweepOutcome::default()
    };
    let limit = opts.limit.unwrap_or(usize::MAX);
    let claimed = AtomicUsize::new(0);
    let ran = AtomicUsize::new(0);
    let failed = Mutex::new(Vec::new());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()?;
    // Each worker takes the next pending point in order (a shared counter), so the points
    // finish roughly in order and the last ones are not stuck behind one slow worker's share.
    let workers = opts.jobs.max(1).min(pending.len().max(1));
    pool.scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| loop {
                let i = claimed.fetch_add(1, Ordering::SeqCst);
                if i >= limit || i >= pending.len() {
                    return;
                }
                let p = pending[i];
                match run_point(sweep, p, &opts.out, opts.all_files) {
                    Ok(()) => {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((p.index, format!("{e:#}"))),
                }
                progress(p);
            });
        }
    });
    outcome.ran = ran.into_inner();
    let mut failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    failed.sort();
    outcome.failed = failed;
    outcome.left = pending.len() - outcome.ran - outcome.failed.len();
    Ok(outcome)
}

/// Refuses an output folder that holds another sweep (another scenario or other `--set`
/// overrides: other point keys), unless `force`, which removes the points that are not this
/// sweep's. The same sweep's folder is resumed; an empty or new one is created.
fn claim_folder(sweep: &Sweep, out: &Path, force: bool) -> anyhow::Result<()> {
    let manifest_path = out.join("sweep.json");
    let Ok(text) = std::fs::read_to_string(&manifest_path) else {
        if out.join("points").is_dir() && !force {
            anyhow::bail!(
                "{}: holds points/ but no sweep.json (not a sweep folder dtsim finished setting \
                 up); choose another --out, or pass --force to reuse it",
                out.display()
            );
        }
        return Ok(());
    };
    let old: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", manifest_path.display()))?;
    let old_keys: std::collections::BTreeSet<&str> = old["points"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["key"].as_str())
        .collect();
    let new_dirs: std::collections::BTreeSet<String> =
        sweep.points.iter().map(|p| p.dir_name()).collect();
    let same = sweep
        .points
        .iter()
        .all(|p| old_keys.contains(p.key.as_str()))
        && old_keys.len() == sweep.points.len();
    if same {
        return Ok(());
    }
    if !force {
        anyhow::bail!(
            "{}: holds another sweep ({} with --set {:?}); choose another --out, or pass \
             --force to drop its points",
            out.display(),
            old["sweep"].as_str().unwrap_or("?"),
            old["set"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>())
                .unwrap_or_default()
        );
    }
    if let Ok(rd) = std::fs::read_dir(out.join("points")) {
        for e in rd.flatten() {
            if !new_dirs.contains(&*e.file_name().to_string_lossy()) {
                std::fs::remove_dir_all(e.path())?;
            }
        }
    }
    for stale in ["results.csv", "results.parquet"] {
        let _ = std::fs::remove_file(out.join(stale));
    }
    Ok(())
}

mod merge;
mod slurm;

pub use merge::{merge, results_csv, MergeOutcome, ResultRow};
pub use slurm::{slurm_scripts, SlurmScripts};

#[cfg(test)]
mod tests;
