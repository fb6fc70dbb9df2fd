//! `calibrate import` of what the testbed measures on its hosts: the cores they share and a
//! gloo message's core time (`cpu-costs`), their wake-up delays (`wake-ups`), gloo's staging
//! copies and reductions (`host-costs`).

use std::path::PathBuf;

use super::super::*;
use super::{measured_on_phrase, source_of};

/// `calibrate import cpu-costs`: `suite.py cpu_costs` logs: the cores the hosts share and a gloo message's core time.
pub(super) fn import_cpu_costs(
    file: PathBuf,
    shared_cores: Option<f64>,
    measured_on: Option<String>,
    out: OutArgs,
) -> Result<(), Failure> {
    let log = cpu_costs::load(&file)?;
    let cost = cpu_costs::fit(&log);
    let cores = shared_cores.unwrap_or(f64::from(log.cpus));
    let on = measured_on_phrase(&measured_on);
    let sizes: std::collections::BTreeSet<u64> = log.results.iter().map(|r| r.bytes).collect();
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
        in_collectives: None,
    });
    save(&p, &out.out)
}

/// `calibrate import collective-cpu-costs`: `suite.py cpu_costs --collective` logs: a gloo
/// message's core time inside gloo's own collectives, fitted over every row of `files`
/// (`cpu_costs::fit_collectives`), into the profile's `network.host_cpu`, which must be there.
pub(super) fn import_collective_cpu_costs(
    files: Vec<PathBuf>,
    measured_on: Option<String>,
    out: OutArgs,
) -> Result<(), Failure> {
    let logs = files
        .iter()
        .map(|f| cpu_costs::load_collectives(f))
        .collect::<Result<Vec<_>, _>>()?;
    let names = files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let measured_on = &measured_on;
    let cost = cpu_costs::fit_collectives(&logs).ok_or_else(|| {
        Failure(
            EXIT_INPUT,
            format!("{names}: rows of at least two payload sizes (results[].bytes / ranks)"),
        )
    })?;
    let rows: Vec<String> = logs
        .iter()
        .flat_map(|l| &l.results)
        .map(|r| format!("{} B on {}", r.bytes, r.ranks))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let detail = format!(
        "the machine's busy core-seconds per call of gloo collectives run back to back, \
         spread over the payload messages gloo sends per call (sim::library::gloo::\
         payload_bytes), fitted as per message + per byte (least squares on the relative \
         error) over {} rows ({}); {}calibrate import collective-cpu-costs {names}",
        logs.iter().map(|l| l.results.len()).sum::<usize>(),
        rows.join(", "),
        measured_on_phrase(measured_on),
    );
    println!(
        "host CPU in collectives: {:.1} core-µs per message + {:.2} core-ns per byte ({detail})",
        cost.per_message_secs * 1e6,
        cost.per_byte_secs * 1e9
    );
    let source = source_of(measured_on);
    let mut p = open_profile(&out, build::provenance(source, detail.clone()))?;
    let Some(host_cpu) = p.network.host_cpu.as_mut() else {
        return Err(Failure(
            EXIT_INPUT,
            "--out: a profile with network.host_cpu (`calibrate import cpu-costs` first: the \
             cores shared and the costs of messages over send/recv)"
                .into(),
        ));
    };
    host_cpu.in_collectives = Some(sim::profile::MessageCost {
        per_message: sim::units::Duration(sim::engine::SimTime::from_secs_f64(
            cost.per_message_secs,
        )),
        per_byte_ns: cost.per_byte_secs * 1e9,
        provenance: build::provenance(source, detail),
    });
    save(&p, &out.out)
}

/// `calibrate import wake-ups`: `suite.py wakeup_load` logs: the hosts' wake-up delays as quantiles.
pub(super) fn import_wake_ups(
    files: Vec<PathBuf>,
    measured_on: Option<String>,
    out: OutArgs,
) -> Result<(), Failure> {
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

/// `calibrate import host-costs`: `host_costs.py` logs: gloo's staging-copy and reduction rates on one host.
pub(super) fn import_host_costs(
    file: PathBuf,
    measured_on: Option<String>,
    out: OutArgs,
) -> Result<(), Failure> {
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
    p.network.host_copy_out_bandwidth = rates.copy_out_bytes_per_s.map(|r| measured(r, out_detail));
    p.network.reduce_bandwidth = Some(measured(rates.reduce_bytes_per_s, reduce_detail));
    save(&p, &out.out)
}
