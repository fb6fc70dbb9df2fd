//! `calibrate import ...`: measurements made elsewhere (nccl-tests logs, published tables,
//! profiler traces, p2p and iperf3 runs, PyTorch-measured GEMMs and layers) into a profile.

use super::*;

mod compute;

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
        ImportCmd::Fanout {
            file,
            at:
                LinkMeasurementArgs {
                    link_class,
                    measured_on,
                    out,
                },
        } => {
            let mut pooled: Option<fanout::FanoutLog> = None;
            for f in &file {
                let log = fanout::load(f)?;
                match &mut pooled {
                    Some(p) => p.runs.extend(log.runs),
                    None => pooled = Some(log),
                }
            }
            let Some(log) = pooled else {
                return Err(Failure(EXIT_INPUT, "a fanout.py log".into()));
            };
            let fit = fanout::fit(&log).map_err(|e| Failure(EXIT_INPUT, e))?;
            let sizes: Vec<String> = fit
                .sizes_used
                .iter()
                .map(|&b| fmt_bytes(b as f64))
                .collect();
            let detail = format!(
                "FIFO head {:.0} B (interquartile {:.0}-{:.0}) = 2S - t1 x C over {} repetitions of \
                 the sizes at which the first-posted of two sends always finished first, but \
                 not alone ({}; {} repetitions went alone, {} of other sizes left out), C = {} \
                 from the largest size's last answer; {}calibrate import fanout {}",
                fit.head_bytes,
                fit.head_iqr.0,
                fit.head_iqr.1,
                fit.used,
                sizes.join(", "),
                fit.alone,
                fit.reordered,
                fmt_bits_per_s(fit.rate_bytes_per_s * 8.0),
                measured_on_phrase(&measured_on),
                list(&file)
            );
            save_link_measurement(link_class, &measured_on, &out, detail, |p, prov| {
                p.network.fifo_head_bytes.insert(
                    link_class,
                    sim::profile::MeasuredBytes {
                        value: sim::units::Bytes(fit.head_bytes.round() as u64),
                        provenance: prov,
                    },
                );
            })
        }
        ImportCmd::Shaper {
            file,
            at:
                LinkMeasurementArgs {
                    link_class,
                    measured_on,
                    out,
                },
        } => {
            let log = shaper::load(&file)?;
            let fit = shaper::fit(&log).map_err(|e| Failure(EXIT_INPUT, e))?;
            let secs = fit.depth_bytes / fit.rate_bytes_per_s;
            let probes: Vec<String> = fit
                .probes
                .iter()
                .map(|(p, rows)| {
                    let sizes: Vec<String> = rows
                        .iter()
                        .map(|(b, after, without)| {
                            format!(
                                "{} {:.2} ms ({:.2} without)",
                                fmt_bytes(*b as f64),
                                after * 1e3,
                                without * 1e3
                            )
                        })
                        .collect();
                    format!(
                        "after a {} message: {}",
                        fmt_bytes(*p as f64),
                        sizes.join(", ")
                    )
                })
                .collect();
            let gaps: Vec<String> = fit
                .full_gaps
                .iter()
                .map(|g| format!("{:.1} ms", g * 1e3))
                .collect();
            let detail = format!(
                "token bucket {:.0} B (interquartile {:.0}-{:.0}) = {:.3} ms at {} (the rate back \
                 to back), S - C x (t - T0) over {} sends of the largest size after idle gaps of {} \
                 (T0 = {:.3} ms, the answer's round trip){}{}; {}calibrate import shaper {}",
                fit.depth_bytes,
                fit.depth_iqr.0,
                fit.depth_iqr.1,
                secs * 1e3,
                fmt_bits_per_s(fit.rate_bytes_per_s * 8.0),
                fit.used,
                gaps.join(", "),
                fit.round_trip_secs * 1e3,
                if probes.is_empty() { "" } else { "; medians over those gaps " },
                probes.join("; "),
                measured_on_phrase(&measured_on),
                file.display()
            );
            save_link_measurement(link_class, &measured_on, &out, detail, |p, prov| {
                p.network.shaper_burst.insert(
                    link_class,
                    sim::profile::MeasuredDuration {
                        value: sim::units::Duration(sim::engine::SimTime::from_secs_f64(secs)),
                        provenance: prov,
                    },
                );
            })
        }
        ImportCmd::PacketWait {
            file,
            at:
                LinkMeasurementArgs {
                    link_class,
                    measured_on,
                    out,
                },
        } => {
            let fit = packet_wait::fit(&packet_wait::load_all(&file)?);
            let detail = format!(
                "mean wait of a 1-byte ping at a shaped link another connection streams \
                 through, beyond its round trip beside the stream: {:.3} ms (through {:.3} ms, \
                 beside {:.3}, idle {:.3}; {} pings per phase over {} launches, each launch's \
                 own {} ms); {}calibrate import packet-wait {}",
                fit.wait_secs * 1e3,
                fit.through_secs * 1e3,
                fit.beside_secs * 1e3,
                fit.idle_secs * 1e3,
                fit.pings_per_phase,
                fit.per_launch_secs.len(),
                millis(&fit.per_launch_secs),
                measured_on_phrase(&measured_on),
                list(&file)
            );
            save_link_measurement(link_class, &measured_on, &out, detail, |p, prov| {
                p.network.shaper_packet_wait.insert(
                    link_class,
                    sim::profile::MeasuredDuration {
                        value: sim::units::Duration(sim::engine::SimTime::from_secs_f64(
                            fit.wait_secs,
                        )),
                        provenance: prov,
                    },
                );
            })
        }
        ImportCmd::OwnEgress {
            file,
            nominal_bw,
            at:
                LinkMeasurementArgs {
                    link_class,
                    measured_on,
                    out,
                },
        } => {
            let nominal_bps = sim::units::parse_bandwidth(&nominal_bw)
                .map_err(|e| Failure(EXIT_INPUT, format!("--nominal-bw: {e}")))?;
            let efficiency = match &out.out {
                Some(p) if p.exists() => Profile::load(p)?
                    .network
                    .link_efficiency
                    .get(&link_class)
                    .map(|e| e.value),
                _ => None,
            }
            .ok_or_else(|| {
                Failure(
                    EXIT_INPUT,
                    format!(
                        "--out: a profile with network.link_efficiency.{link_class} (the link's \
                         payload rate over its nominal one; `calibrate import iperf3 \
                         --nominal-bw` writes it), to turn the wait into bytes"
                    ),
                )
            })?;
            let fit = packet_wait::own_egress(&packet_wait::load_all(&file)?)
                .map_err(|e| Failure(EXIT_INPUT, format!("{}: {e}", list(&file))))?;
            let rate_bps = nominal_bps * efficiency;
            let head_bytes = fit.wait_secs * rate_bps / 8.0;
            let detail = format!(
                "FIFO head {head_bytes:.0} B = a host's 1-byte ping waiting a mean {:.3} ms \
                 behind its own stream (round trip {:.3} ms streaming, {:.3} idle; {} pings over \
                 {} launches, each launch's own {} ms) at the link's payload rate {} ({} x \
                 efficiency {efficiency}); {}calibrate import own-egress {}",
                fit.wait_secs * 1e3,
                fit.streaming_secs * 1e3,
                fit.idle_secs * 1e3,
                fit.pings,
                fit.per_launch_secs.len(),
                millis(&fit.per_launch_secs),
                fmt_bits_per_s(rate_bps),
                fmt_bits_per_s(nominal_bps),
                measured_on_phrase(&measured_on),
                list(&file)
            );
            save_link_measurement(link_class, &measured_on, &out, detail, |p, prov| {
                p.network.fifo_head_bytes.insert(
                    link_class,
                    sim::profile::MeasuredBytes {
                        value: sim::units::Bytes(head_bytes.round() as u64),
                        provenance: prov,
                    },
                );
            })
        }
        ImportCmd::CpuCosts {
            file,
            shared_cores,
            measured_on,
            out,
        } => {
            let log = cpu_costs::load(&file)?;
            let cost = cpu_costs::fit(&log);
            let cores = shared_cores.unwrap_or(f64::from(log.cpus));
            let on = measured_on_phrase(&measured_on);
            let sizes: std::collections::BTreeSet<u64> =
                log.results.iter().map(|r| r.bytes).collect();
            let detail = format!(
                "the machine's busy core-seconds per gloo message, {} streams of {} sizes \
                 ({} B) between two hosts, fitted as per message + per byte (least squares \
                 on the relative error); {cores} cores shared by every host; {on}calibrate \
                 import cpu-costs {}",
                log.results.len(),
                sizes.len(),
                sizes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                file.display()
            );
            println!(
                "host CPU: {:.1} core-µs per message + {:.2} core-ns per byte on {cores} shared \
                 cores ({detail})",
                cost.per_message_secs * 1e6,
                cost.per_byte_secs * 1e9
            );
            let source = source_of(&measured_on);
            let mut p = open_profile(&out, build::provenance(source, detail.clone()))?;
            p.network.host_cpu = Some(sim::profile::HostCpu {
                shared_cores: cores,
                per_message: sim::units::Duration(sim::engine::SimTime::from_secs_f64(
                    cost.per_message_secs,
                )),
                per_byte_ns: cost.per_byte_secs * 1e9,
                provenance: build::provenance(source, detail),
            });
            save(&p, &out.out)
        }
        ImportCmd::WakeUps {
            files,
            measured_on,
            out,
        } => {
            let mut extra = Vec::new();
            let mut parts = Vec::new();
            for file in &files {
                let log = wake_ups::load(file)?;
                let (delays, median) = wake_ups::extra_delays(&log);
                let busy = log.results[log.unloaded].busy_cores;
                parts.push(format!(
                    "{} calls on {} hosts (median {:.3} ms, {busy:.2} cores busy)",
                    delays.len(),
                    log.ranks,
                    median * 1e3
                ));
                extra.extend(delays);
            }
            let q = wake_ups::quantiles(&extra, wake_ups::QUANTILES);
            let at = |p: f64| q[((p * q.len() as f64) as usize).min(q.len() - 1)] * 1e3;
            let mean = extra.iter().sum::<f64>() / extra.len() as f64;
            let detail = format!(
                "a 4-byte gloo all-reduce between two hosts with nothing else running, each \
                 call's time over its log's median: {} quantiles of {}; extra median {:.3} ms, \
                 90th percentile {:.3} ms, 99th {:.3} ms, mean {:.3} ms; {}calibrate import \
                 wake-ups {}",
                q.len(),
                parts.join(" and "),
                at(0.5),
                at(0.9),
                at(0.99),
                mean * 1e3,
                measured_on_phrase(&measured_on),
                list(&files)
            );
            println!("host wake-ups: {detail}");
            let source = source_of(&measured_on);
            let mut p = open_profile(&out, build::provenance(source, detail.clone()))?;
            p.network.host_wake_up = Some(sim::profile::HostWakeUp {
                extra_secs_quantiles: q,
                provenance: build::provenance(source, detail),
            });
            save(&p, &out.out)
        }
        ImportCmd::HostCosts {
            file,
            measured_on,
            out,
        } => {
            let log = host_costs::load(&file)?;
            let rates = host_costs::fit(&log);
            let on = measured_on_phrase(&measured_on);
            let sizes = format!(
                "{} sizes ({} B gathered)",
                log.copy.len(),
                log.copy
                    .iter()
                    .map(|r| r.gathered_bytes.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let copies = match rates.copy_out_bytes_per_s {
                Some(_) => {
                    "the priming copy, its block into a fresh flat buffer (first touch \
                            of its pages), timed apart from the copy out"
                }
                None => {
                    "its block into a fresh flat buffer, the buffer out to the caller's \
                         tensors"
                }
            };
            let copy_detail = format!(
                "one process's staging copies as ProcessGroupGloo's all_gather makes them \
                 ({copies}), all bytes over all time of {sizes}; {on}calibrate import \
                 host-costs {}",
                file.display()
            );
            let out_detail = format!(
                "one process's copy of ProcessGroupGloo's flat all_gather buffer out to the \
                 caller's tensors (reused, warm pages), timed apart from the priming copy, all \
                 bytes over all time of {sizes}; {on}calibrate import host-costs {}",
                file.display()
            );
            let reduce_detail = format!(
                "one process's float32 sum of a received segment into the local one, all bytes \
                 over all time of {} segment sizes; {on}calibrate import host-costs {}",
                log.reduce.len(),
                file.display()
            );
            println!(
                "host copy {} ({copy_detail})\nreduction {} ({reduce_detail})",
                fmt_bits_per_s(rates.copy_bytes_per_s * 8.0),
                fmt_bits_per_s(rates.reduce_bytes_per_s * 8.0)
            );
            if let Some(out) = rates.copy_out_bytes_per_s {
                println!("copy out {} ({out_detail})", fmt_bits_per_s(out * 8.0));
            }
            let source = source_of(&measured_on);
            let mut p = open_profile(&out, build::provenance(source, copy_detail.clone()))?;
            let measured = |bytes_per_s: f64, detail: String| sim::profile::MeasuredBandwidth {
                value: sim::units::Bandwidth(bytes_per_s * 8.0),
                provenance: build::provenance(source, detail),
            };
            p.network.host_copy_bandwidth = Some(measured(rates.copy_bytes_per_s, copy_detail));
            // A log without the split leaves no copy-out rate: the one rate stands for both.
            p.network.host_copy_out_bandwidth =
                rates.copy_out_bytes_per_s.map(|r| measured(r, out_detail));
            p.network.reduce_bandwidth = Some(measured(rates.reduce_bytes_per_s, reduce_detail));
            save(&p, &out.out)
        }
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

/// Prints a link class's measurement, then writes it into the profile at `out` (opened, or
/// created) with its provenance: `set` puts the value in, given that provenance.
fn save_link_measurement(
    link_class: LinkClass,
    measured_on: &Option<String>,
    out: &OutArgs,
    detail: String,
    set: impl FnOnce(&mut Profile, Provenance),
) -> Result<(), Failure> {
    println!("{link_class}: {detail}");
    let prov = build::provenance(source_of(measured_on), detail);
    let mut p = open_profile(out, prov.clone())?;
    set(&mut p, prov);
    save(&p, &out.out)
}

/// Seconds as milliseconds to two decimals, comma-separated (a log's launches, in provenance).
fn millis(secs: &[f64]) -> String {
    let ms: Vec<String> = secs.iter().map(|s| format!("{:.2}", s * 1e3)).collect();
    ms.join(", ")
}
