//! `calibrate gpu`: measures this machine's GPUs (copies, p2p, GEMMs, catalog layers, NCCL),
//! prints what it found and writes the profile.

use super::*;

/// `calibrate gpu`'s `--layer-*` values as given.
pub(super) struct LayerArgs {
    pub(super) models: String,
    pub(super) batches: String,
    pub(super) dtypes: String,
}

fn comma_list(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The layer GEMMs `--layer-models/--layer-batches/--layer-dtypes` ask for.
fn layer_plan(a: &LayerArgs) -> Result<Vec<gpu::layers::PlannedGemm>, Failure> {
    let bad = |flag: &str, e: String| Failure(EXIT_INPUT, format!("{flag}: {e}"));
    let models = comma_list(&a.models)
        .into_iter()
        .map(|m| sim::workload::catalog::by_name(m).map_err(|e| bad("--layer-models", e.expected)))
        .collect::<Result<Vec<_>, _>>()?;
    let batches = comma_list(&a.batches)
        .into_iter()
        .map(|b| match b.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(bad(
                "--layer-batches",
                format!("positive whole numbers, got {b:?}"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtypes = comma_list(&a.dtypes)
        .into_iter()
        .map(|d| match gpu::cublas::gemm_type(d) {
            Some(t) => Ok(t.name.to_string()),
            None => Err(bad(
                "--layer-dtypes",
                format!("fp32, tf32, fp16 or bf16, got {d:?}"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(gpu::layers::plan(&models, &batches, &dtypes))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn command(
    out: Option<PathBuf>,
    logs: Option<PathBuf>,
    min_bytes: &str,
    max_bytes: &str,
    warmup: u32,
    reps: u32,
    skip: &str,
    layers: &LayerArgs,
) -> Result<(), Failure> {
    let parse = |flag: &str, v: &str| {
        sim::units::parse_bytes(v).map_err(|e| Failure(EXIT_INPUT, format!("{flag}: {e}")))
    };
    let skip = comma_list(skip);
    if let Some(bad) = skip
        .iter()
        .find(|s| !["copies", "p2p", "gemm", "layers", "nccl"].contains(s))
    {
        return Err(Failure(
            EXIT_INPUT,
            format!("--skip: copies, p2p, gemm, layers or nccl, got {bad:?}"),
        ));
    }
    let layers = if skip.contains(&"layers") {
        Vec::new()
    } else {
        layer_plan(layers)?
    };
    let o = gpu::measure::Options {
        min_bytes: parse("--min-bytes", min_bytes)?,
        max_bytes: parse("--max-bytes", max_bytes)?,
        warmup,
        reps,
        copies: !skip.contains(&"copies"),
        p2p: !skip.contains(&"p2p"),
        gemm: !skip.contains(&"gemm"),
        nccl: !skip.contains(&"nccl"),
        layers,
    };
    // Libraries first: one sentence and exit 3 on a machine without a GPU.
    let found = gpu::libs::check().map_err(|e| Failure(EXIT_NO_GPU, e))?;
    let launch = gpu::launch::Launch::from_env(|k| std::env::var(k).ok())?;
    let cublas = gpu::cublas::Cublas::load();
    let nccl = gpu::nccl::Nccl::load();
    let loaded = |lib: &str, version: Result<String, String>| {
        format!("{lib} (version {})", version.unwrap_or_else(|e| e))
    };
    eprintln!(
        "driver {}, {} GPU(s); {} rank {} of {}",
        found.driver, found.devices, launch.launcher, launch.rank, launch.world_size
    );
    match &cublas {
        Ok(c) => eprintln!("cuBLAS: {}", loaded(&c.library, c.version())),
        Err(e) => eprintln!("cuBLAS: not loaded: {e}"),
    }
    match &nccl {
        Ok(n) => eprintln!("NCCL: {}", loaded(&n.library, n.version())),
        Err(e) => eprintln!("NCCL: not loaded: {e}"),
    }
    let mut log = |s: &str| eprintln!("measuring: {s}");
    let report = gpu::libs::no_panic("measuring", || {
        gpu::measure::run(
            &o,
            &launch,
            nccl.as_ref().ok(),
            cublas.as_ref().ok(),
            &mut log,
        )
    })
    .and_then(|r| r)
    .map_err(|e| Failure(EXIT_GPU_FAILED, e))?;
    if launch.rank != 0 {
        return Ok(());
    }
    print!("{}", describe_gpu(&report));
    for run in &report.collectives {
        println!();
        print!("{}", nccl_tests::to_text(run));
    }
    if let Some(dir) = &logs {
        sim::metrics::output::write_atomic(
            &dir.join("gpu_measurements.json"),
            serde_json::to_string_pretty(&report)?.as_bytes(),
        )?;
        for run in &report.collectives {
            sim::metrics::output::write_atomic(
                &dir.join(format!(
                    "{}_perf.txt",
                    run.collective.as_deref().unwrap_or("x")
                )),
                nccl_tests::to_text(run).as_bytes(),
            )?;
        }
    }
    if out.is_some() {
        save(&gpu_profile(&report, &out)?, &out)?;
    }
    Ok(())
}

fn describe_gpu(r: &gpu::measure::GpuReport) -> String {
    let mut s = format!(
        "host {} driver {} cuBLAS {} NCCL {} ({})\n",
        r.host,
        r.driver_version,
        r.cublas_version.as_deref().unwrap_or("-"),
        r.nccl_version.as_deref().unwrap_or("-"),
        r.launch
    );
    for (what, lib) in [("cuBLAS", &r.cublas_library), ("NCCL", &r.nccl_library)] {
        if let Some(l) = lib {
            s += &format!("  {what} from {l}\n");
        }
    }
    for d in &r.devices {
        s += &format!(
            "  GPU {} {} sm_{}{} {} SMs {} clocks {} / {} MHz\n",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sms,
            fmt_bytes(d.memory_bytes as f64),
            d.sm_clock_khz / 1000,
            d.memory_clock_khz / 1000
        );
    }
    for c in &r.copies {
        s += &format!(
            "  {} gpu{} {:>10}: {:>12} (median {:.2} us, min {:.2}, max {:.2})\n",
            c.kind,
            c.device,
            fmt_bytes(c.bytes as f64),
            sim::units::fmt_gbytes_per_s(c.bytes as f64 / c.time.median_secs),
            c.time.median_secs * 1e6,
            c.time.min_secs * 1e6,
            c.time.max_secs * 1e6
        );
    }
    for p in &r.p2p {
        s += &format!(
            "  p2p {}->{} (peer {}): uni {} bi {} latency {:.2} us\n",
            p.src,
            p.dst,
            p.peer_access,
            sim::units::fmt_gbytes_per_s(p.bytes as f64 / p.unidirectional.median_secs),
            sim::units::fmt_gbytes_per_s(2.0 * p.bytes as f64 / p.bidirectional.median_secs),
            p.latency.median_secs * 1e6
        );
    }
    for g in &r.gemms {
        s += &format!(
            "  gemm {} {}x{}x{}: {:.1} TFLOP/s (median {:.1} us)\n",
            g.dtype,
            g.m,
            g.n,
            g.k,
            g.flops() / g.time.median_secs / 1e12,
            g.time.median_secs * 1e6
        );
    }
    if !r.layer_gemms.is_empty() {
        s += &gpu::layers::summary_table(&gpu::layers::summarize(&r.layer_gemms));
    }
    s
}

/// The profile of a `calibrate gpu` run.
fn gpu_profile(r: &gpu::measure::GpuReport, out: &Option<PathBuf>) -> Result<Profile, Failure> {
    let when = build::today();
    let machine = format!(
        "calibrate gpu on {} ({} x {}), driver {}, {}",
        r.host,
        r.devices.len(),
        r.devices.first().map(|d| d.name.as_str()).unwrap_or("?"),
        r.driver_version,
        when
    );
    let prov = |detail: String| Provenance {
        source: "measured".into(),
        detail: format!("{detail}; {machine}"),
        date: Some(when.clone()),
    };
    let name = out
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "measured".into());
    let mut p = build::empty_profile(
        &name,
        &format!("Measured by calibrate gpu on {}", r.host),
        prov("device inventory, copies, P2P, cuBLAS GEMM and NCCL collectives".into()),
    );
    let largest = |kind: &str| {
        r.copies
            .iter()
            .filter(|c| c.kind == kind)
            .max_by_key(|c| c.bytes)
    };
    for kind in ["h2d", "d2h", "d2d"] {
        if let Some(c) = largest(kind) {
            p.network.paths.push(PathMeasurement {
                kind: kind.into(),
                link_class: (kind != "d2d").then_some(LinkClass::Pcie),
                src: None,
                dst: Some(format!("gpu{}", c.device)),
                bandwidth: Some(Bandwidth(c.bytes as f64 * 8.0 / c.time.median_secs)),
                latency_secs: None,
                provenance: prov(format!(
                    "{} copy of {} B, median of the repetitions",
                    kind, c.bytes
                )),
            });
        }
    }
    for e in &r.p2p {
        p.network.paths.push(PathMeasurement {
            kind: "p2p unidirectional".into(),
            link_class: None,
            src: Some(format!("gpu{}", e.src)),
            dst: Some(format!("gpu{}", e.dst)),
            bandwidth: Some(Bandwidth(
                e.bytes as f64 * 8.0 / e.unidirectional.median_secs,
            )),
            latency_secs: Some(e.latency.median_secs),
            provenance: prov(format!(
                "cuMemcpyPeerAsync of {} B (peer access {}), latency of a 4-byte copy",
                e.bytes, e.peer_access
            )),
        });
    }
    let o = FitOptions::default();
    let fits: Vec<FittedRun> = r
        .collectives
        .iter()
        .filter_map(|run| {
            build::fit_run(
                run,
                &format!(
                    "calibrate gpu {}_perf",
                    run.collective.as_deref().unwrap_or("?")
                ),
                &o,
            )
            .ok()
        })
        .collect();
    build::merge_fits(&mut p, &fits);
    // Compute: per dtype, GEMM time = (FLOPs + F½) / peak, fitted to the layer-shape GEMMs
    // when there are any, else to the grid.
    if let Some(dev) = r.devices.first() {
        p.compute = crate::compute::compute_section(
            &r.gemm_timings(),
            largest("d2d").map(|c| c.bytes as f64 / c.time.median_secs),
            &dev.name,
            dev.memory_bytes,
            &prov,
        );
    }
    Ok(p)
}
