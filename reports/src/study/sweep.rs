//! Sections of sweep results and `[[compare]]` runs: scaling curves across inputs, method
//! comparisons, compute vs communication, the variants side by side.

use super::*;

/// The variant folders of a `dtsim run --out DIR` of a scenario with `[[compare]]` variants:
/// in the order `complete.json` lists them, else every sub-folder holding a `summary.json`
/// (sorted); `None` when `dir` is no such folder.
pub(super) fn compare_variants(dir: &Path) -> Result<Option<Vec<PathBuf>>, String> {
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
pub(super) fn compare_sections(
    dir: &Path,
    variants: &[PathBuf],
    tag: &str,
) -> Result<Vec<Section>, String> {
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

/// Scaling curves of every workload sweep: throughput and efficiency vs GPUs, one series per
/// study, marked weak (global batch grows with the GPUs) or strong (global batch fixed).
pub(super) fn scaling_section(rows: &[ScalingRow]) -> Result<Section, String> {
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

pub(super) fn sweep_section(
    path: &Path,
    tag: &str,
    scaling: &mut Vec<ScalingRow>,
) -> Result<Section, String> {
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
