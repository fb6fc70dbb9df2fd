//! `calibrate import ...`: measurements made elsewhere (nccl-tests logs, published tables,
//! profiler traces, p2p and iperf3 runs, PyTorch-measured GEMMs and layers) into a profile.
//! The GPU compute imports are in `compute`, the testbed's link and host measurements in
//! `links` and `hosts`.

use super::*;

mod compute;
mod hosts;
mod links;

use compute::{
    import_compute, import_eager, import_gpu_measurements, import_layer_times, import_torch_device,
};

/// Runs one `calibrate import` subcommand.
pub(super) fn run(cmd: ImportCmd) -> Result<(), Failure> {
    match cmd {
        ImportCmd::NcclTests {
            files,
            topology: Some(topology),
            algorithm,
            protocol,
            tuner_config,
            collnet,
            date,
            ring_channel_rates,
            out,
            ..
        } => {
            let path = out.out.clone().ok_or_else(|| {
                Failure(
                    EXIT_INPUT,
                    "--out: the profile to write the NCCL fit into (needed with --topology)".into(),
                )
            })?;
            let mut runs = Vec::new();
            for f in &files {
                runs.push((f.clone(), nccl_tests::load(f)?));
            }
            let name = out.name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "nccl-fit".into())
            });
            let sys = crate::fit_nccl::LogSystem {
                topology: &topology,
                algorithm: algorithm.as_deref(),
                protocol: protocol.as_deref(),
                tuner_config: tuner_config.as_deref(),
                collnet,
            };
            let summary = crate::fit_nccl::from_logs(
                &runs,
                &sys,
                &path,
                &name,
                date.or_else(|| Some(build::today())),
                sim::scenario::fit_nccl::FitChoices { ring_channel_rates },
            )
            .map_err(|e| Failure(EXIT_INPUT, e))?;
            print!("{summary}");
            Ok(())
        }
        ImportCmd::NcclTests {
            files,
            topology: None,
            fit,
            out,
            json,
            ..
        } => {
            let fits = fit_files(&files, &fit)?;
            report_fits(&fits, json);
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!("calibrate import nccl-tests {}", list(&files)),
                ),
            )?;
            build::merge_fits(
                &mut p,
                &fits.iter().map(|f| f.1.clone()).collect::<Vec<_>>(),
            );
            save(&p, &out.out)
        }
        ImportCmd::ValidationCsv {
            file,
            system,
            fit,
            out,
            write_logs,
        } => {
            let o = fit_options(&fit)?;
            let runs: Vec<_> = validation_csv::load(&file)?
                .into_iter()
                .filter(|r| system.as_ref().is_none_or(|s| &r.system == s))
                .collect();
            if runs.is_empty() {
                return Err(Failure(
                    EXIT_INPUT,
                    format!(
                        "{}: no rows for system {:?}",
                        file.display(),
                        system.unwrap_or_default()
                    ),
                ));
            }
            let mut fits = Vec::new();
            for r in &runs {
                let origin = format!(
                    "{} rows {}-{} ({}, {}; source: {})",
                    file.display(),
                    r.lines.first().unwrap_or(&0),
                    r.lines.last().unwrap_or(&0),
                    r.system,
                    r.run.collective.as_deref().unwrap_or("?"),
                    r.source
                );
                if let Some(dir) = &write_logs {
                    let name = format!(
                        "{}_{}.txt",
                        r.system.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
                        r.run.collective.as_deref().unwrap_or("x")
                    );
                    sim::metrics::output::write_atomic(
                        &dir.join(name),
                        nccl_tests::to_text(&r.run).as_bytes(),
                    )?;
                }
                match build::fit_run(&r.run, &origin, &o) {
                    Ok(f) => fits.push((origin, f)),
                    Err(e) => eprintln!("skipped: {e}"),
                }
            }
            report_fits(&fits, false);
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!(
                        "calibrate import validation-csv {}{}",
                        file.display(),
                        system
                            .map(|s| format!(" --system {s:?}"))
                            .unwrap_or_default()
                    ),
                ),
            )?;
            build::merge_fits(
                &mut p,
                &fits.iter().map(|f| f.1.clone()).collect::<Vec<_>>(),
            );
            save(&p, &out.out)
        }
        ImportCmd::TorchDevice { file, out } => import_torch_device(&file, &out),
        ImportCmd::Compute { source, out } => import_compute(&source, &out),
        ImportCmd::GpuMeasurements { files, out } => import_gpu_measurements(&files, &out),
        ImportCmd::Eager { files, out } => import_eager(&files, &out),
        ImportCmd::LayerTimes {
            file,
            out,
            measured_on,
        } => import_layer_times(&file, &out, measured_on.as_deref()),
        ImportCmd::Kineto { trace, top, json } => {
            let s = kineto::load(&trace)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
                return Ok(());
            }
            println!(
                "{} steps, {} kernel names, {} layers, {} NCCL kernels",
                s.steps.len(),
                s.kernels.len(),
                s.layers.len(),
                s.collectives.len()
            );
            for st in &s.steps {
                println!(
                    "  step {:>4}: cpu {:>10.3} ms, gpu kernels {:>10.3} ms",
                    st.number,
                    st.cpu_secs * 1e3,
                    st.gpu_kernel_secs * 1e3
                );
            }
            for (title, rows) in [("kernels", &s.kernels), ("layers", &s.layers)] {
                println!("GPU time by {title} (top {top}):");
                for r in rows.iter().take(top) {
                    println!(
                        "  {:>10.3} ms {:>6}x  {}",
                        r.total_secs * 1e3,
                        r.count,
                        short(&r.name, 90)
                    );
                }
            }
            for c in s.collectives.iter().take(top) {
                println!(
                    "  nccl {:<15} {:>12} group {:<8} size {:<4} {:>9.1} us",
                    c.collective,
                    c.bytes
                        .map(|b| fmt_bytes(b as f64))
                        .unwrap_or_else(|| "?".into()),
                    c.group.as_deref().unwrap_or("?"),
                    c.group_size
                        .map(|g| g.to_string())
                        .unwrap_or_else(|| "?".into()),
                    c.secs * 1e6
                );
            }
            Ok(())
        }
        ImportCmd::P2p {
            file,
            link_class,
            out,
        } => {
            let ms = p2p::load(&file)?;
            for m in &ms {
                println!(
                    "{} ({}x{}, line {}): off-diagonal mean {:.2} {}",
                    m.title,
                    m.values.len(),
                    m.values.len(),
                    m.line,
                    m.off_diagonal_mean().unwrap_or(f64::NAN),
                    m.unit
                );
            }
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!("calibrate import p2p {}", file.display()),
                ),
            )?;
            let origin = file.display().to_string();
            p.network
                .paths
                .retain(|m| !m.provenance.detail.starts_with(&origin));
            p.network
                .paths
                .extend(build::p2p_paths(&ms, &origin, link_class));
            save(&p, &out.out)
        }
        ImportCmd::Fanout { file, at } => links::import_fanout(file, at),
        ImportCmd::Shaper { file, at } => links::import_shaper(file, at),
        ImportCmd::PacketWait { file, at } => links::import_packet_wait(file, at),
        ImportCmd::ShaperPacket { file, at } => links::import_shaper_packet(file, at),
        ImportCmd::OwnEgress {
            file,
            nominal_bw,
            at,
        } => links::import_own_egress(file, nominal_bw, at),
        ImportCmd::CpuCosts {
            file,
            shared_cores,
            measured_on,
            out,
        } => hosts::import_cpu_costs(file, shared_cores, measured_on, out),
        ImportCmd::CollectiveCpuCosts {
            files,
            measured_on,
            out,
        } => hosts::import_collective_cpu_costs(files, measured_on, out),
        ImportCmd::WakeUps {
            files,
            measured_on,
            out,
        } => hosts::import_wake_ups(files, measured_on, out),
        ImportCmd::HostCosts {
            file,
            measured_on,
            out,
        } => hosts::import_host_costs(file, measured_on, out),
        ImportCmd::Iperf3 {
            file,
            link_class,
            nominal_bw,
            latency,
            nominal_latency,
            latency_source,
            measured_on,
            shaper_burst,
            shaper_burst_source,
            out,
        } => {
            let secs = |flag: &str, v: &Option<String>| {
                v.as_deref()
                    .map(sim::units::parse_duration)
                    .transpose()
                    .map(|d| d.map(|d| d.as_secs_f64()))
                    .map_err(|e| Failure(EXIT_INPUT, format!("--{flag}: {e}")))
            };
            let latency_secs = secs("latency", &latency)?;
            let burst_secs = secs("shaper-burst", &shaper_burst)?;
            if burst_secs.is_some_and(|b| !(0.0..=1.0).contains(&b)) {
                return Err(Failure(
                    EXIT_INPUT,
                    format!(
                        "--shaper-burst: a token bucket of 0 to 1 s at the link's rate, got {}",
                        shaper_burst.as_deref().unwrap_or("")
                    ),
                ));
            }
            let nominal_latency_secs = secs("nominal-latency", &nominal_latency)?;
            if nominal_latency_secs.is_some() && latency_secs.is_none() {
                return Err(Failure(
                    EXIT_INPUT,
                    "--nominal-latency: needs --latency (the measured one-way latency)".into(),
                ));
            }
            let nominal_bits_per_s = nominal_bw
                .as_deref()
                .map(sim::units::parse_bandwidth)
                .transpose()
                .map_err(|e| Failure(EXIT_INPUT, format!("--nominal-bw: {e}")))?;
            let mut runs = Vec::new();
            for f in &file {
                let r = iperf3::load(f)?;
                println!(
                    "{} {} stream(s) to {}: sent {}, received {}{}",
                    r.protocol,
                    r.streams,
                    r.remote_host.as_deref().unwrap_or("?"),
                    fmt_bits_per_s(r.sent_bits_per_s),
                    fmt_bits_per_s(r.received_bits_per_s),
                    r.retransmits
                        .map(|x| format!(", {x} retransmits"))
                        .unwrap_or_default()
                );
                runs.push((f.display().to_string(), r));
            }
            // The path measurement: the single-stream run (else the first).
            let k = runs.iter().position(|(_, r)| r.streams == 1).unwrap_or(0);
            let (origin, r) = (runs[k].0.clone(), runs[k].1.clone());
            let names: Vec<&str> = runs.iter().map(|(o, _)| o.as_str()).collect();
            let mut prov = build::provenance(
                "imported",
                format!("calibrate import iperf3 {}", names.join(" ")),
            );
            if let Some(on) = &measured_on {
                prov.source = "measured".into();
                prov.detail = format!("measured on {on}; {}", prov.detail);
            }
            let mut p = open_profile(&out, prov.clone())?;
            if measured_on.is_some() && p.network.factors.is_empty() && p.network.paths.is_empty() {
                p.provenance.source = prov.source.clone();
            }
            let mut path = build::iperf3_path(&r, &origin, Some(link_class));
            if measured_on.is_some() {
                path.provenance.source = prov.source.clone();
                path.provenance.detail = format!("{}; {}", prov.detail, path.provenance.detail);
            }
            if let Some(l) = latency_secs {
                path.latency_secs = Some(l);
                let _ = write!(
                    path.provenance.detail,
                    "; one-way latency {:.1} us{}",
                    l * 1e6,
                    if latency_source.is_empty() {
                        String::new()
                    } else {
                        format!(" ({latency_source})")
                    }
                );
            }
            if let Some(nominal) = nominal_bits_per_s {
                let mut table = build::iperf3_factors(
                    &r,
                    nominal,
                    latency_secs.zip(nominal_latency_secs),
                    &path.provenance,
                )
                .map_err(|e| Failure(EXIT_INPUT, e))?;
                match build::iperf3_link_efficiency(&runs, nominal, &prov) {
                    Ok(e) => {
                        println!(
                            "{link_class} link efficiency {:.4}: the total rate does not depend \
                             on the stream count (shared by the flows on a link)",
                            e.value
                        );
                        // The rate is the link's; each flow keeps only the latency factor.
                        for row in &mut table.rows {
                            row.bandwidth_factor = 1.0;
                        }
                        table.provenance.detail = format!(
                            "bandwidth factor 1: the link efficiency carries the rate; {}",
                            table.provenance.detail
                        );
                        p.network.link_efficiency.insert(link_class, e);
                    }
                    Err(why) if runs.len() > 1 => {
                        println!("{link_class}: no link efficiency: {why}");
                    }
                    Err(_) => {}
                }
                println!(
                    "{link_class} factors: bandwidth {:.4}, latency {:.4}",
                    table.rows[0].bandwidth_factor, table.rows[0].latency_factor
                );
                p.network.factors.insert(link_class, table);
            }
            if let Some(b) = burst_secs {
                let detail = format!(
                    "the shaper's token bucket on the {link_class} links of these runs, {:.3} ms \
                     at the link's rate: a setting, not a fit{}",
                    b * 1e3,
                    if shaper_burst_source.is_empty() {
                        String::new()
                    } else {
                        format!(" ({shaper_burst_source})")
                    }
                );
                println!("{link_class} shaper burst {:.3} ms", b * 1e3);
                p.network.shaper_burst.insert(
                    link_class,
                    sim::profile::MeasuredDuration {
                        value: sim::units::Duration(sim::engine::SimTime::from_secs_f64(b)),
                        provenance: Provenance {
                            source: "nominal".into(),
                            detail,
                            date: Some(build::today()),
                        },
                    },
                );
            }
            p.network.paths.push(path);
            save(&p, &out.out)
        }
    }
}

/// "measured on WHERE; " for a provenance detail, or nothing when `--measured-on` was not given.
fn measured_on_phrase(measured_on: &Option<String>) -> String {
    measured_on
        .as_ref()
        .map(|on| format!("measured on {on}; "))
        .unwrap_or_default()
}

/// A provenance source: "measured" where `--measured-on` says where, else "imported".
fn source_of(measured_on: &Option<String>) -> &'static str {
    if measured_on.is_some() {
        "measured"
    } else {
        "imported"
    }
}
