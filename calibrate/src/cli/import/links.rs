//! `calibrate import` of what the testbed measures on a shaped link: the FIFO head a host's
//! connections keep queued (`fanout`, `own-egress`), the shaper's token bucket (`shaper`), the
//! packet another connection has in service (`packet-wait`). Each writes one value for the
//! link class with its provenance ([`save_link_measurement`]).

use std::path::PathBuf;

use super::super::*;
use super::{measured_on_phrase, source_of};

/// `calibrate import fanout`: fanout.py logs (two sends at once): the FIFO head a host's connections keep queued at its link.
pub(super) fn import_fanout(file: Vec<PathBuf>, at: LinkMeasurementArgs) -> Result<(), Failure> {
    let LinkMeasurementArgs {
        link_class,
        measured_on,
        out,
    } = at;
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

/// `calibrate import shaper`: `suite.py shaper_gap` logs: the depth of the link's token bucket.
pub(super) fn import_shaper(file: PathBuf, at: LinkMeasurementArgs) -> Result<(), Failure> {
    let LinkMeasurementArgs {
        link_class,
        measured_on,
        out,
    } = at;
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
        if probes.is_empty() {
            ""
        } else {
            "; medians over those gaps "
        },
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

/// `calibrate import packet-wait`: `suite.py packet_wait` logs: what a small message waits for the packet another connection has in service.
pub(super) fn import_packet_wait(
    file: Vec<PathBuf>,
    at: LinkMeasurementArgs,
) -> Result<(), Failure> {
    let LinkMeasurementArgs {
        link_class,
        measured_on,
        out,
    } = at;
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
                value: sim::units::Duration(sim::engine::SimTime::from_secs_f64(fit.wait_secs)),
                provenance: prov,
            },
        );
    })
}

/// `calibrate import shaper-packet`: tcpdump captures of the testbed's hosts: the largest packet.
pub(super) fn import_shaper_packet(
    file: Vec<PathBuf>,
    at: LinkMeasurementArgs,
) -> Result<(), Failure> {
    let LinkMeasurementArgs {
        link_class,
        measured_on,
        out,
    } = at;
    let fit = shaper_packet::load_all(&file)?;
    let per_capture: Vec<String> = fit.per_capture.iter().map(u64::to_string).collect();
    let detail = format!(
        "largest packet TCP handed the shaper: {} B ({} of the {} data packets the captures \
         list; each capture's largest {} B); {}calibrate import shaper-packet {}",
        fit.bytes,
        fit.at_largest,
        fit.packets,
        per_capture.join(", "),
        measured_on_phrase(&measured_on),
        list(&file)
    );
    save_link_measurement(link_class, &measured_on, &out, detail, |p, prov| {
        p.network.shaper_packet.insert(
            link_class,
            sim::profile::MeasuredBytes {
                value: sim::units::Bytes(fit.bytes),
                provenance: prov,
            },
        );
    })
}

/// `calibrate import own-egress`: `suite.py packet_wait` logs of a host pinging behind its own stream: the FIFO head.
pub(super) fn import_own_egress(
    file: Vec<PathBuf>,
    nominal_bw: String,
    at: LinkMeasurementArgs,
) -> Result<(), Failure> {
    let LinkMeasurementArgs {
        link_class,
        measured_on,
        out,
    } = at;
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
