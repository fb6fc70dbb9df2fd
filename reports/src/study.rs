//! A study: the inputs given on the command line turned into sections of figures.
//!
//! Inputs, recognised by what they are:
//! - a sweep directory (`results.parquet`, `results.csv` or `points/`), or a results file:
//!   scaling curves, method comparisons, compute vs communication, the results table;
//! - a `[[compare]]` run directory (one folder per variant): the variants compared, then each
//!   variant as a run directory;
//! - a run directory (`summary.json` from `dtsim run --out`): traffic heatmaps per phase
//!   (collective) or per epoch and class (workload), link utilization, buffer occupancy
//!   (`ports.csv`), utilization and occupancy over time (`link_series.csv`), the per-rank
//!   timeline (`trace.json`);
//! - a scenario file (`.toml`): the configured GPU×GPU bandwidth (routing bottlenecks);
//! - a validation CSV (columns named `predicted…` and `measured…`): predicted vs measured.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::data::{column_names, f64s, has, read_table, strings};
use crate::figures::{self, Figure, Span, Table};
use crate::fmt;

/// A part of the page: one input (or the scaling curves across inputs).
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    pub text: String,
    pub figures: Vec<Figure>,
    /// Tables shown without a figure (e.g. all sweep points).
    pub tables: Vec<(String, Table)>,
}

/// Heatmaps are drawn up to this many endpoints.
pub const MAX_HEATMAP: usize = 128;
/// Timelines show at most this many ranks.
pub const MAX_TIMELINE_TRACKS: usize = 32;

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Workload rows collected across inputs for the scaling curves.
#[derive(Debug, Clone)]
struct ScalingRow {
    study: String,
    ranks: f64,
    samples_per_s: f64,
    global_batch: f64,
}

/// Builds every section for `inputs`.
pub fn build(inputs: &[PathBuf]) -> Result<Vec<Section>, String> {
    let mut sections = Vec::new();
    let mut scaling: Vec<ScalingRow> = Vec::new();
    for (k, input) in inputs.iter().enumerate() {
        let tag = format!("{}{}", k + 1, {
            let s = slug(
                &input
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            if s.is_empty() {
                String::new()
            } else {
                format!("-{s}")
            }
        });
        let sec = if input.is_dir() {
            if let Some(r) = results_file(input) {
                sweep_section(&r, &tag, &mut scaling)?
            } else if input.join("points").is_dir() {
                let (_, _, files) =
                    crate::data::merge_to_parquet(std::slice::from_ref(input), input)?;
                sweep_section(&files[1], &tag, &mut scaling)?
            } else if input.join("summary.json").is_file() {
                run_section(input, &tag)?
            } else if let Some(variants) = compare_variants(input)? {
                sections.extend(compare_sections(input, &variants, &tag)?);
                continue;
            } else {
                return Err(format!(
                    "{}: not a sweep directory (results.csv, results.parquet or points/), a run directory (summary.json) nor a [[compare]] run directory (complete.json of kind compare, or variant folders with summary.json)",
                    input.display()
                ));
            }
        } else if input.extension().is_some_and(|x| x == "toml") {
            bandwidth_section(input, &tag)?
        } else if input
            .extension()
            .is_some_and(|x| x == "csv" || x == "parquet")
        {
            let df = read_table(input)?;
            let cols = column_names(&df);
            if cols.iter().any(|c| c.contains("predicted"))
                && cols.iter().any(|c| c.contains("measured"))
            {
                validation_section(input, &tag)?
            } else {
                sweep_section(input, &tag, &mut scaling)?
            }
        } else {
            return Err(format!(
                "{}: expected a sweep or run directory, a results/validation .csv or .parquet, or a scenario .toml",
                input.display()
            ));
        };
        sections.push(sec);
    }
    if scaling
        .iter()
        .map(|r| r.ranks as u64)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1
    {
        sections.insert(0, scaling_section(&scaling)?);
    }
    Ok(sections)
}

/// The variant folders of a `dtsim run --out DIR` of a scenario with `[[compare]]` variants:
/// in the order `complete.json` lists them, else every sub-folder holding a `summary.json`
/// (sorted); `None` when `dir` is no such folder.
fn compare_variants(dir: &Path) -> Result<Option<Vec<PathBuf>>, String> {
    let marker = dir.join("complete.json");
    if marker.is_file() {
        let m = read_json(&marker)?;
        if m["kind"].as_str() != Some("compare") {
            return Ok(None);
        }
        let mut variants: Vec<PathBuf> = Vec::new();
        for f in m["files"].as_array().into_iter().flatten() {
            let Some(f) = f.as_str() else { continue };
            let p = Path::new(f);
            if p.file_name().is_some_and(|n| n == "summary.json") {
                if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
                    variants.push(dir.join(parent));
                }
            }
        }
        if variants.is_empty() {
            return Err(format!(
                "{}: lists no variant's summary.json",
                marker.display()
            ));
        }
        return Ok(Some(variants));
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut variants: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    variants.sort();
    Ok((!variants.is_empty()).then_some(variants))
}

/// A `[[compare]]` run: one section comparing the variants (throughput, step time, compute vs
/// exposed communication), then each variant's own run section.
fn compare_sections(dir: &Path, variants: &[PathBuf], tag: &str) -> Result<Vec<Section>, String> {
    let mut labels = Vec::new();
    let mut m = Variants {
        samples_per_s: Vec::new(),
        step_secs: Vec::new(),
        compute_secs: Vec::new(),
        exposed_secs: Vec::new(),
        overhead_pct: Vec::new(),
    };
    let mut study = String::new();
    for v in variants {
        let s = read_json(&v.join("summary.json"))?;
        if s.get("metrics").is_none() {
            return Err(format!(
                "{}: a [[compare]] variant of a workload (summary.json with metrics)",
                v.join("summary.json").display()
            ));
        }
        if study.is_empty() {
            study = s["scenario"].as_str().unwrap_or("compare").to_string();
        }
        labels.push(
            v.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let x = &s["metrics"];
        m.samples_per_s.push(x["samples_per_s"].as_f64());
        m.step_secs.push(x["step_secs"].as_f64());
        m.compute_secs.push(x["compute_secs"].as_f64());
        m.exposed_secs
            .push(x["exposed_communication_secs"].as_f64());
        m.overhead_pct
            .push(x["communication_overhead_pct"].as_f64());
    }
    let mut head = Section {
        heading: format!("Variants of {study}"),
        text: format!(
            "{} variants of one run ({}), compared.",
            variants.len(),
            dir.display()
        ),
        ..Section::default()
    };
    variant_figures(&study, tag, &labels, &m, &mut head)?;
    let mut out = vec![head];
    for (k, v) in variants.iter().enumerate() {
        let mut sec = run_section(v, &format!("{tag}-v{}", k + 1))?;
        sec.heading = format!("{} — variant {}", sec.heading, labels[k]);
        out.push(sec);
    }
    Ok(out)
}

fn results_file(dir: &Path) -> Option<PathBuf> {
    ["results.parquet", "results.csv"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Scaling curves of every workload sweep: throughput and efficiency vs GPUs, one series per
/// study, marked weak (global batch grows with the GPUs) or strong (global batch fixed).
fn scaling_section(rows: &[ScalingRow]) -> Result<Section, String> {
    let mut by_study: BTreeMap<String, Vec<&ScalingRow>> = BTreeMap::new();
    for r in rows {
        by_study.entry(r.study.clone()).or_default().push(r);
    }
    let mut thr = Vec::new();
    let mut eff = Vec::new();
    for (study, mut v) in by_study {
        v.sort_by(|a, b| a.ranks.total_cmp(&b.ranks));
        v.dedup_by(|a, b| a.ranks == b.ranks);
        if v.len() < 2 {
            continue;
        }
        let weak = v.last().map(|l| l.global_batch).unwrap_or(0.0) > v[0].global_batch;
        let name = format!("{study} ({})", if weak { "weak" } else { "strong" });
        let (n0, t0) = (v[0].ranks, v[0].samples_per_s);
        thr.push((
            name.clone(),
            v.iter().map(|r| (r.ranks, r.samples_per_s)).collect(),
        ));
        eff.push((
            name,
            v.iter()
                .map(|r| (r.ranks, 100.0 * (r.samples_per_s / t0) / (r.ranks / n0)))
                .collect(),
        ));
    }
    let mut sec = Section {
        heading: "Scaling".into(),
        text: "Throughput and scaling efficiency against the number of GPUs. Efficiency = speedup over the smallest run / (GPUs / its GPUs); weak scaling keeps the batch per GPU, strong scaling the global batch.".into(),
        ..Section::default()
    };
    if thr.is_empty() {
        return Ok(sec);
    }
    sec.figures.push(figures::lines(
        "scaling-throughput",
        "Throughput vs GPUs",
        "Training throughput of one step, per study.",
        "GPUs",
        "throughput (samples/s)",
        &thr,
        true,
        &|v| format!("{v:.0}"),
        &|v| fmt::num(v),
    )?);
    sec.figures.push(figures::lines(
        "scaling-efficiency",
        "Scaling efficiency vs GPUs",
        "100% = linear scaling from the smallest run of each study.",
        "GPUs",
        "scaling efficiency (%)",
        &eff,
        true,
        &|v| format!("{v:.0}"),
        &|v| fmt::pct(v),
    )?);
    Ok(sec)
}

/// A label per row from its axis values (the `variant` axis alone when present).
fn row_labels(df: &polars::prelude::DataFrame) -> Vec<String> {
    if has(df, "variant") {
        return strings(df, "variant");
    }
    let axes: Vec<String> = column_names(df)
        .into_iter()
        .filter(|c| c.contains('.'))
        .collect();
    let cols: Vec<Vec<String>> = axes.iter().map(|a| strings(df, a)).collect();
    (0..df.height())
        .map(|i| {
            let parts: Vec<String> = cols.iter().map(|c| c[i].clone()).collect();
            if parts.is_empty() {
                format!("point {i}")
            } else {
                parts.join(" / ")
            }
        })
        .collect()
}

fn sweep_section(path: &Path, tag: &str, scaling: &mut Vec<ScalingRow>) -> Result<Section, String> {
    let df = read_table(path)?;
    let study = if has(&df, "scenario") {
        strings(&df, "scenario")
            .first()
            .cloned()
            .unwrap_or_default()
    } else {
        path.display().to_string()
    };
    let mut sec = Section {
        heading: format!("Sweep {study}"),
        text: format!("{} points from {}.", df.height(), path.display()),
        ..Section::default()
    };
    let kinds = strings(&df, "kind");
    let all: Table = {
        let cols = column_names(&df);
        let data: Vec<Vec<String>> = cols.iter().map(|c| strings(&df, c)).collect();
        Table {
            columns: cols.clone(),
            rows: (0..df.height())
                .map(|i| data.iter().map(|c| c[i].clone()).collect())
                .collect(),
        }
    };
    if kinds.iter().any(|k| k == "workload") {
        workload_sweep(&df, &study, tag, &mut sec, scaling)?;
    } else if has(&df, "busbw_gbytes_per_s") {
        collective_sweep(&df, tag, &mut sec)?;
    }
    sec.tables
        .push((format!("All points ({})", path.display()), all));
    Ok(sec)
}

fn collective_sweep(
    df: &polars::prelude::DataFrame,
    tag: &str,
    sec: &mut Section,
) -> Result<(), String> {
    let alg = strings(df, "algorithm");
    // the generators name algorithms with their options ("ring(1)"); group by the name
    let alg: Vec<String> = alg
        .iter()
        .map(|a| a.split('(').next().unwrap_or(a).to_string())
        .collect();
    let bytes = f64s(df, "bytes");
    let ranks = f64s(df, "ranks");
    let busbw = f64s(df, "busbw_gbytes_per_s");
    let time = f64s(df, "time_us");
    let n = df.height();
    let max_ranks = ranks.iter().flatten().copied().fold(0.0, f64::max);
    let max_bytes = bytes.iter().flatten().copied().fold(0.0, f64::max);
    let mut algs: Vec<String> = Vec::new();
    for a in &alg {
        if !algs.contains(a) {
            algs.push(a.clone());
        }
    }
    let series = |x: &[Option<f64>], y: &[Option<f64>], keep: &dyn Fn(usize) -> bool| {
        algs.iter()
            .map(|a| {
                let mut p: Vec<(f64, f64)> = (0..n)
                    .filter(|&i| &alg[i] == a && keep(i))
                    .filter_map(|i| Some((x[i]?, y[i]?)))
                    .collect();
                p.sort_by(|a, b| a.0.total_cmp(&b.0));
                (a.clone(), p)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect::<Vec<_>>()
    };
    let at_max_ranks = |i: usize| ranks[i] == Some(max_ranks);
    let at_max_bytes = |i: usize| bytes[i] == Some(max_bytes);
    let s = series(&bytes, &busbw, &at_max_ranks);
    if s.iter().any(|(_, p)| p.len() > 1) {
        sec.figures.push(figures::lines(
            &format!("{tag}-busbw-vs-size"),
            &format!(
                "Bus bandwidth vs message size, {} GPUs",
                fmt::num(max_ranks)
            ),
            "nccl-tests bus bandwidth of each algorithm.",
            "message size per rank (bytes)",
            "bus bandwidth (GB/s)",
            &s,
            true,
            &|v| fmt::bytes(v),
            &|v| fmt::num(v),
        )?);
    }
    let ms: Vec<Option<f64>> = time.iter().map(|t| t.map(|t| t / 1e3)).collect();
    let s = series(&ranks, &ms, &at_max_bytes);
    if s.iter().any(|(_, p)| p.len() > 1) {
        sec.figures.push(figures::lines(
            &format!("{tag}-time-vs-gpus"),
            &format!(
                "Collective time vs GPUs, {} per rank",
                fmt::bytes(max_bytes)
            ),
            "Strong scaling of one collective: its time as the GPU count grows.",
            "GPUs",
            "time (ms)",
            &s,
            true,
            &|v| format!("{v:.0}"),
            &|v| fmt::num(v),
        )?);
        let eff: Vec<(String, Vec<(f64, f64)>)> = series(&ranks, &busbw, &at_max_bytes)
            .into_iter()
            .map(|(a, p)| {
                let b0 = p[0].1;
                (
                    a,
                    p.iter()
                        .map(|&(x, y)| (x, if b0 > 0.0 { 100.0 * y / b0 } else { 0.0 }))
                        .collect(),
                )
            })
            .collect();
        sec.figures.push(figures::lines(
            &format!("{tag}-busbw-efficiency"),
            &format!(
                "Bus bandwidth efficiency vs GPUs, {} per rank",
                fmt::bytes(max_bytes)
            ),
            "Bus bandwidth relative to the smallest GPU count of each algorithm (100% = no loss).",
            "GPUs",
            "bus bandwidth efficiency (%)",
            &eff,
            true,
            &|v| format!("{v:.0}"),
            &|v| fmt::pct(v),
        )?);
    }
    // method comparison at the largest point
    let pick: Vec<usize> = (0..n)
        .filter(|&i| at_max_ranks(i) && at_max_bytes(i))
        .collect();
    if pick.len() > 1 {
        let cats: Vec<String> = pick.iter().map(|&i| alg[i].clone()).collect();
        sec.figures.push(figures::bars(
            &format!("{tag}-methods"),
            &format!(
                "Algorithms compared: {} over {} GPUs",
                fmt::bytes(max_bytes),
                fmt::num(max_ranks)
            ),
            "Time of the collective per algorithm (lower is better).",
            "algorithm",
            "time (ms)",
            &cats,
            &[(
                "time".into(),
                pick.iter().map(|&i| ms[i].unwrap_or(0.0)).collect(),
            )],
            &|v| fmt::num(v),
        )?);
    }
    Ok(())
}

fn workload_sweep(
    df: &polars::prelude::DataFrame,
    study: &str,
    tag: &str,
    sec: &mut Section,
    scaling: &mut Vec<ScalingRow>,
) -> Result<(), String> {
    let labels = row_labels(df);
    let ranks = f64s(df, "ranks");
    let thr = f64s(df, "samples_per_s");
    let step = f64s(df, "step_secs");
    let comp = f64s(df, "compute_secs");
    let exposed = f64s(df, "exposed_communication_secs");
    let ovh = f64s(df, "communication_overhead_pct");
    let gb = f64s(df, "global_batch");
    for i in 0..df.height() {
        if let (Some(r), Some(t), Some(g)) = (ranks[i], thr[i], gb[i]) {
            scaling.push(ScalingRow {
                study: study.to_string(),
                ranks: r,
                samples_per_s: t,
                global_batch: g,
            });
        }
    }
    variant_figures(
        study,
        tag,
        &labels,
        &Variants {
            samples_per_s: thr,
            step_secs: step,
            compute_secs: comp,
            exposed_secs: exposed,
            overhead_pct: ovh,
        },
        sec,
    )
}

/// Per-variant metrics of a workload study, one entry per variant (`None` where missing).
struct Variants {
    samples_per_s: Vec<Option<f64>>,
    step_secs: Vec<Option<f64>>,
    compute_secs: Vec<Option<f64>>,
    exposed_secs: Vec<Option<f64>>,
    overhead_pct: Vec<Option<f64>>,
}

/// The figures comparing a workload study's variants: throughput, step time, communication
/// overhead, and compute vs exposed communication.
fn variant_figures(
    study: &str,
    tag: &str,
    labels: &[String],
    m: &Variants,
    sec: &mut Section,
) -> Result<(), String> {
    let (thr, step, ovh, comp, exposed) = (
        &m.samples_per_s,
        &m.step_secs,
        &m.overhead_pct,
        &m.compute_secs,
        &m.exposed_secs,
    );
    let v =
        |c: &[Option<f64>], k: f64| c.iter().map(|x| x.unwrap_or(0.0) * k).collect::<Vec<f64>>();
    sec.figures.push(figures::bars(
        &format!("{tag}-throughput"),
        &format!("{study}: throughput"),
        "Training throughput per variant (higher is better).",
        "variant",
        "throughput (samples/s)",
        labels,
        &[("samples/s".into(), v(thr, 1.0))],
        &|x| fmt::num(x),
    )?);
    sec.figures.push(figures::bars(
        &format!("{tag}-step-time"),
        &format!("{study}: total time of one step"),
        "Step time per variant (lower is better).",
        "variant",
        "step time (ms)",
        labels,
        &[("step time".into(), v(step, 1e3))],
        &|x| fmt::num(x),
    )?);
    sec.figures.push(figures::bars(
        &format!("{tag}-comm-overhead"),
        &format!("{study}: communication overhead"),
        "Exposed (not overlapped) communication as a share of the step.",
        "variant",
        "communication overhead (% of step)",
        labels,
        &[("exposed communication".into(), v(ovh, 1.0))],
        &|x| fmt::pct(x),
    )?);
    sec.figures.push(figures::bars(
        &format!("{tag}-compute-vs-comm"),
        &format!("{study}: compute vs communication"),
        "Busiest GPU's compute time and the communication that is not hidden behind it, stacked: together about one step.",
        "variant",
        "time per step (ms)",
        labels,
        &[
            ("compute".into(), v(comp, 1e3)),
            ("exposed communication".into(), v(exposed, 1e3)),
        ],
        &|x| fmt::num(x),
    )?);
    Ok(())
}

/// Endpoint×endpoint matrices from rows (src, dst, key, bytes).
fn matrices(rows: &[(usize, usize, String, f64)], n: usize) -> BTreeMap<String, Vec<Vec<f64>>> {
    let mut m: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for (s, d, k, b) in rows {
        if *s < n && *d < n {
            m.entry(k.clone()).or_insert_with(|| vec![vec![0.0; n]; n])[*s][*d] += b;
        }
    }
    m
}

fn run_section(dir: &Path, tag: &str) -> Result<Section, String> {
    let summary = read_json(&dir.join("summary.json"))?;
    let workload = summary.get("metrics").is_some();
    let name = summary["scenario"].as_str().unwrap_or("run").to_string();
    let mut sec = Section {
        heading: format!("Run {name}"),
        ..Section::default()
    };
    if workload {
        let m = &summary["metrics"];
        sec.text = format!(
            "{} on {} ({} ranks, {}): step {}, {} samples/s, communication overhead {}.",
            summary["model"].as_str().unwrap_or("?"),
            summary["topology"].as_str().unwrap_or("?"),
            summary["ranks"],
            summary["parallelism"].as_str().unwrap_or("?"),
            fmt::time_us(m["step_secs"].as_f64().unwrap_or(0.0) * 1e6),
            fmt::num(m["samples_per_s"].as_f64().unwrap_or(0.0)),
            fmt::pct(m["communication_overhead_pct"].as_f64().unwrap_or(0.0)),
        );
    } else {
        sec.text = format!(
            "{} of {} over {} ranks on {}, algorithm {}: {} (bus bandwidth {}).",
            summary["collective"].as_str().unwrap_or("?"),
            fmt::bytes(summary["bytes"].as_f64().unwrap_or(0.0)),
            summary["ranks"],
            summary["topology"].as_str().unwrap_or("?"),
            summary["algorithm"].as_str().unwrap_or("?"),
            fmt::time_us(summary["time_us"].as_f64().unwrap_or(0.0)),
            fmt::gbytes_per_s(summary["busbw_gbytes_per_s"].as_f64().unwrap_or(0.0)),
        );
    }
    // traffic heatmaps
    let (file, key_col, bytes_col, what) = if workload {
        (
            "traffic_per_epoch.csv",
            "class",
            "bytes_per_epoch",
            "per epoch",
        )
    } else {
        ("traffic.csv", "phase", "bytes", "in the run")
    };
    let tp = dir.join(file);
    if tp.is_file() {
        let df = read_table(&tp)?;
        let (s, d, k, b) = (
            f64s(&df, "src"),
            f64s(&df, "dst"),
            strings(&df, key_col),
            f64s(&df, bytes_col),
        );
        let rows: Vec<(usize, usize, String, f64)> = (0..df.height())
            .filter_map(|i| Some((s[i]? as usize, d[i]? as usize, k[i].clone(), b[i]?)))
            .collect();
        let n = rows.iter().map(|r| r.0.max(r.1) + 1).max().unwrap_or(0);
        if n > 0 && n <= MAX_HEATMAP {
            let labels: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let mats = matrices(&rows, n);
            // reduce-scatter and all-gather first
            let mut keys: Vec<&String> = mats.keys().collect();
            keys.sort_by_key(|k| match k.as_str() {
                "reduce-scatter" => 0,
                "all-gather" => 1,
                _ => 2,
            });
            for k in keys.into_iter().take(4) {
                sec.figures.push(figures::heatmap(
                    &format!("{tag}-traffic-{}", slug(k)),
                    &format!("{k} traffic {what} (GB)"),
                    &format!("Bytes each endpoint (row) sends to each other endpoint (column) in the {k} phase, {what}."),
                    ("sender rank", "receiver rank"),
                    &labels,
                    &mats[k],
                    "bytes sent (GB)",
                    &|v| format!("{} GB", fmt::num(v / 1e9)),
                )?);
            }
        }
    }
    // link utilization
    let lp = dir.join("links.csv");
    if lp.is_file() {
        let df = read_table(&lp)?;
        let (from, to, util) = (
            strings(&df, "from"),
            strings(&df, "to"),
            f64s(&df, "utilization"),
        );
        let mut idx: Vec<usize> = (0..df.height())
            .filter(|&i| util[i].unwrap_or(0.0) > 0.0)
            .collect();
        idx.sort_by(|&a, &b| {
            util[b]
                .unwrap_or(0.0)
                .total_cmp(&util[a].unwrap_or(0.0))
                .then(a.cmp(&b))
        });
        idx.truncate(16);
        if !idx.is_empty() {
            sec.figures.push(figures::bars(
                &format!("{tag}-link-utilization"),
                "Busiest links: average utilization over the run",
                "Bytes carried over (bandwidth × run time), the 16 busiest directed links.",
                "link",
                "utilization (%)",
                &idx.iter()
                    .map(|&i| format!("{}→{}", from[i], to[i]))
                    .collect::<Vec<_>>(),
                &[(
                    "utilization".into(),
                    idx.iter()
                        .map(|&i| util[i].unwrap_or(0.0) * 100.0)
                        .collect(),
                )],
                &|x| fmt::pct(x),
            )?);
        }
    }
    // utilization and buffer occupancy over time
    let sp = dir.join("link_series.csv");
    if sp.is_file() {
        sec.figures.extend(series_figures(&sp, tag)?);
    }
    // buffer occupancy
    let pp = dir.join("ports.csv");
    if pp.is_file() {
        let df = read_table(&pp)?;
        let (from, to) = (strings(&df, "from"), strings(&df, "to"));
        let (cap, max, avg) = (
            f64s(&df, "capacity_bytes"),
            f64s(&df, "max_occupancy_bytes"),
            f64s(&df, "avg_occupancy_bytes"),
        );
        let frac = |v: &[Option<f64>], i: usize| match (v[i], cap[i]) {
            (Some(x), Some(c)) if c > 0.0 => 100.0 * x / c,
            _ => 0.0,
        };
        let mut idx: Vec<usize> = (0..df.height()).filter(|&i| frac(&max, i) > 0.0).collect();
        idx.sort_by(|&a, &b| frac(&max, b).total_cmp(&frac(&max, a)).then(a.cmp(&b)));
        idx.truncate(16);
        if !idx.is_empty() {
            sec.figures.push(figures::bars(
                &format!("{tag}-buffer-occupancy"),
                "Fullest output buffers",
                "Average occupancy, and the rest up to the maximum, as a share of each port's buffer (the 16 fullest ports).",
                "output port",
                "buffer occupancy (% of capacity)",
                &idx.iter().map(|&i| format!("{}→{}", from[i], to[i])).collect::<Vec<_>>(),
                &[
                    ("average".into(), idx.iter().map(|&i| frac(&avg, i)).collect()),
                    ("maximum (above average)".into(), idx.iter().map(|&i| (frac(&max, i) - frac(&avg, i)).max(0.0)).collect()),
                ],
                &|x| fmt::pct(x),
            )?);
        }
    }
    // per-rank timeline
    let trp = dir.join("trace.json");
    if trp.is_file() {
        let t = read_json(&trp)?;
        let mut tracks: Vec<String> = Vec::new();
        let mut spans = Vec::new();
        for ev in t["traceEvents"].as_array().into_iter().flatten() {
            let tid = ev["tid"].as_u64().unwrap_or(0) as usize;
            if ev["ph"] == "M" && ev["name"] == "thread_name" && tid < MAX_TIMELINE_TRACKS {
                if tracks.len() <= tid {
                    tracks.resize(tid + 1, String::new());
                }
                tracks[tid] = ev["args"]["name"].as_str().unwrap_or("").to_string();
            } else if ev["ph"] == "X" && tid < MAX_TIMELINE_TRACKS {
                let ts = ev["ts"].as_f64().unwrap_or(0.0);
                let role = ev["args"]["role"].as_str().unwrap_or("");
                let cat = ev["cat"].as_str().unwrap_or("").to_string();
                spans.push(Span {
                    track: tid,
                    start_us: ts,
                    end_us: ts + ev["dur"].as_f64().unwrap_or(0.0),
                    category: if role == "recv" {
                        format!("{cat} (recv)")
                    } else {
                        cat
                    },
                });
            }
        }
        if !spans.is_empty() {
            // sends carry the same interval as the matching receives: keep sends and compute
            spans.retain(|s| !s.category.ends_with("(recv)"));
            sec.figures.push(figures::timeline(
                &format!("{tag}-timeline"),
                if workload { "Per-rank timeline of one training step" } else { "Per-rank timeline of the collective" },
                &format!(
                    "What each rank does over time, coloured by phase (sends and compute; first {MAX_TIMELINE_TRACKS} ranks). The same timeline is in trace.json for chrome://tracing or ui.perfetto.dev."
                ),
                &tracks,
                &spans,
            )?);
        }
    }
    Ok(sec)
}

/// A link's name, utilization (%) and occupancy (bytes) per bin.
type LinkBins = (String, Vec<f64>, Vec<f64>);

/// Series shown per over-time chart.
pub const MAX_SERIES: usize = 16;

/// `link_series.csv`: utilization over time of the busiest links, and buffer occupancy over
/// time of the fullest ports when the file has it.
fn series_figures(path: &Path, tag: &str) -> Result<Vec<Figure>, String> {
    let df = read_table(path)?;
    let (link, from, to) = (f64s(&df, "link"), strings(&df, "from"), strings(&df, "to"));
    let (start, end, util) = (
        f64s(&df, "bin_start_us"),
        f64s(&df, "bin_end_us"),
        f64s(&df, "utilization"),
    );
    let buffers = has(&df, "occupancy_bytes");
    let occ = f64s(&df, "occupancy_bytes");
    // Rows come link by link, bins in order.
    let mut links: Vec<LinkBins> = Vec::new();
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut last = None;
    for i in 0..df.height() {
        if link[i] != last {
            last = link[i];
            links.push((format!("{}→{}", from[i], to[i]), Vec::new(), Vec::new()));
        }
        if links.len() == 1 {
            bins.push((start[i].unwrap_or(0.0), end[i].unwrap_or(0.0)));
        }
        let l = links.last_mut().expect("a link was pushed");
        l.1.push(util[i].unwrap_or(0.0) * 100.0);
        l.2.push(occ[i].unwrap_or(0.0));
    }
    let mut figs = Vec::new();
    let pick = |score: &dyn Fn(&LinkBins) -> f64| {
        let mut idx: Vec<usize> = (0..links.len())
            .filter(|&i| score(&links[i]) > 0.0)
            .collect();
        idx.sort_by(|&a, &b| {
            score(&links[b])
                .total_cmp(&score(&links[a]))
                .then(a.cmp(&b))
        });
        idx.truncate(MAX_SERIES);
        idx
    };
    let busiest = pick(&|l| l.1.iter().sum());
    if !busiest.is_empty() {
        figs.push(figures::over_time(
            &format!("{tag}-link-utilization-over-time"),
            "Link utilization over time",
            &format!(
                "Load over capacity of the busiest directed links ({} shown), averaged per time bin.",
                busiest.len()
            ),
            "utilization (%)",
            &bins,
            &busiest.iter().map(|&i| (links[i].0.clone(), links[i].1.clone())).collect::<Vec<_>>(),
            Some(105.0),
            &|x| fmt::pct(x),
        )?);
    }
    if buffers {
        let fullest = pick(&|l| l.2.iter().copied().fold(0.0, f64::max));
        if !fullest.is_empty() {
            figs.push(figures::over_time(
                &format!("{tag}-buffer-occupancy-over-time"),
                "Buffer occupancy over time",
                &format!(
                    "Bytes queued at the fullest output ports ({} shown), averaged per time bin.",
                    fullest.len()
                ),
                "buffer occupancy (bytes)",
                &bins,
                &fullest
                    .iter()
                    .map(|&i| (links[i].0.clone(), links[i].2.clone()))
                    .collect::<Vec<_>>(),
                None,
                &|x| fmt::bytes(x),
            )?);
        }
    }
    Ok(figs)
}

/// The configured GPU×GPU bandwidth: the bottleneck of each routed path on an idle network.
fn bandwidth_section(path: &Path, tag: &str) -> Result<Section, String> {
    use sim::scenario::run::{network_model, prepare};
    let s = sim::scenario::load(path, &[]).map_err(|e| e.to_string())?;
    let prep = prepare(&s).map_err(|e| e.to_string())?;
    let mut model = network_model(&s, &prep).map_err(|e| e.to_string())?;
    let n = prep.ranks.len().min(MAX_HEATMAP);
    let mut m = vec![vec![0.0; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if i != j {
                *cell = model
                    .path_bottleneck(prep.ranks[i], prep.ranks[j])
                    .map(|(bps, _)| bps / 8.0)
                    .unwrap_or(0.0);
            }
        }
    }
    let labels: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let fig = figures::heatmap(
        &format!("{tag}-bandwidth"),
        &format!("GPU×GPU bandwidth, {} (configured)", prep.topology.name),
        "Bottleneck link bandwidth of the routed path between each pair of ranks on an idle network.",
        ("source rank", "destination rank"),
        &labels,
        &m,
        "bandwidth (GB/s)",
        &|v| fmt::gbytes_per_s(v / 1e9),
    )?;
    Ok(Section {
        heading: format!("Topology {} ({})", prep.topology.name, path.display()),
        text: format!("{n} ranks placed by scenario {}.", s.file.name),
        figures: vec![fig],
        tables: Vec::new(),
    })
}

fn validation_section(path: &Path, tag: &str) -> Result<Section, String> {
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
    let labels = match &label_col {
        Some(c) => strings(&df, c),
        None => (1..=df.height()).map(|i| format!("run {i}")).collect(),
    };
    let (p, m) = (f64s(&df, &pc), f64s(&df, &mc));
    let rows: Vec<(String, f64, f64)> = (0..df.height())
        .filter_map(|i| Some((labels[i].clone(), m[i]?, p[i]?)))
        .collect();
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
        &format!("Each point is one run; the band is ±10% around predicted = measured. Mean absolute error {}, worst {}.", fmt::pct(mean), fmt::pct(worst)),
        &unit,
        &rows,
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
