//! What a run reports, and writing it out.
//!
//! A [`RunReport`] holds the summary (time, algbw/busbw with the nccl-tests definitions, bytes
//! per link class, busiest links), per-link statistics, the endpoint×endpoint traffic matrix
//! split by phase, and the per-op and per-rank timeline. Everything in it is a pure function of
//! (scenario, seed): no wall-clock times, ordered maps only, so two runs write byte-identical
//! files. Files are written atomically (temporary file + rename).

pub mod nccl_tests;
pub mod output;
pub mod ports;
pub mod run_dir;
pub mod trace;
pub mod workload;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::collective::play::PlayOutcome;
use crate::collective::{bus_factor, OpKind, Phase, Schedule};
use crate::net::{LinkTraffic, NetCounters};
use crate::topology::{DeviceId, Topology};
use crate::units::{fmt_bits_per_s, fmt_bytes, fmt_gbytes_per_s};

/// Bytes from one endpoint to another in one phase of the algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrafficKey {
    pub src: u32,
    pub dst: u32,
    pub phase: Phase,
}

/// One directed link's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkRow {
    pub link: u32,
    pub from: String,
    pub to: String,
    pub class: String,
    pub bandwidth_bps: f64,
    pub bytes: f64,
    /// Bytes carried over (bandwidth × run time).
    pub utilization: f64,
}

/// One op of the schedule as it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineRow {
    pub op: u32,
    pub kind: &'static str,
    pub phase: &'static str,
    pub channel: u16,
    pub step: u32,
    pub pairs: u32,
    pub bytes_per_pair: u64,
    pub start_us: f64,
    pub end_us: f64,
}

/// The plays of a call that runs several ways: their count and the fastest and slowest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlaysSpan {
    pub count: u32,
    pub fastest_ps: u64,
    pub slowest_ps: u64,
}

/// Headline numbers of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub topology: String,
    pub network_model: String,
    pub profile: String,
    pub seed: u64,
    pub collective: String,
    pub algorithm: String,
    /// The library that ran it and what it decided (`"ideal"` for the templates).
    #[serde(default)]
    pub library: String,
    /// The library's profile parameters this run's costs were looked up under, as
    /// `table[key]` (e.g. `"efficiency[ring/nvlink]"`); empty for `ideal`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub library_parameters: Vec<String>,
    /// OpenMPI (`library = "mpi"`, exchanges in their expected mode) where exchanges between
    /// partners decide the time: the run's time with every one both ways at once and with
    /// every one one way after the other, in ps (what one launch or another does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange_modes_ps: Option<[u64; 2]>,
    /// Where the call was played several ways (a root's entry orders, the hosts' wake-ups
    /// drawn) and the time is the median play's: how many plays and the fastest and slowest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plays: Option<PlaysSpan>,
    pub ranks: u32,
    pub bytes: u64,
    pub time_ps: u64,
    pub time_us: f64,
    /// nccl-tests algorithm bandwidth: bytes / time, GB/s (10^9).
    pub algbw_gbytes_per_s: f64,
    /// nccl-tests bus bandwidth: algbw × bus factor, GB/s.
    pub busbw_gbytes_per_s: f64,
    pub ops: usize,
    pub bytes_by_class: BTreeMap<String, f64>,
    pub busiest_links: Vec<LinkRow>,
    pub events: u64,
    pub net: NetCounters,
    /// Buffer statistics and overflow detection (packet model only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<ports::PortsSummary>,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub summary: Summary,
    pub links: Vec<LinkRow>,
    /// Endpoint names (ranks first, then extra endpoints) with their device names.
    pub endpoints: Vec<(String, String)>,
    pub traffic: BTreeMap<TrafficKey, u128>,
    pub timeline: Vec<TimelineRow>,
    /// The per-rank timeline's rows: (endpoint, op, its role there, the peer it sent to or
    /// received from), or `None` when too large to write.
    pub rank_timeline: Option<Vec<(u32, u32, &'static str, u32)>>,
    /// Per-port buffer statistics (packet model only).
    pub ports: Option<Vec<ports::PortRow>>,
    /// The per-rank timeline as a Chrome / Perfetto trace.
    pub trace: trace::Trace,
    /// Utilization (and buffer occupancy) over time of the busiest links, when the network
    /// model records it.
    pub link_series: Option<crate::net::series::LinkSeries>,
    /// The library that ran the collective, as scenarios name it (`ideal`, `nccl`, `gloo`,
    /// `mpi`): what a track record matches the run against.
    pub library: &'static str,
    /// The GPU model of the topology, by the name dtsim's table gives it (`H100`), where it
    /// names one.
    pub gpu: Option<String>,
}

/// The per-rank timeline is skipped above this many rows (it grows as ranks × steps).
pub const MAX_RANK_TIMELINE_ROWS: usize = 2_000_000;

/// What names a run in its report: the caller's scenario, as plain values (so that metrics
/// need not know what a scenario is).
#[derive(Debug, Clone, Copy)]
pub struct RunIdentity<'a> {
    pub scenario: &'a str,
    /// `flow` or `packet`.
    pub network_model: &'a str,
    pub seed: u64,
    pub topology: &'a Topology,
    pub profile: &'a str,
}

impl RunReport {
    pub fn new(
        run: RunIdentity<'_>,
        schedule: &Schedule,
        endpoints: &[DeviceId],
        outcome: &PlayOutcome,
        traffic: &[LinkTraffic],
        pairs: BTreeMap<TrafficKey, u128>,
    ) -> RunReport {
        let topo = run.topology;
        let secs = outcome.end.as_secs_f64();
        let links: Vec<LinkRow> = topo
            .links()
            .iter()
            .enumerate()
            .map(|(i, l)| LinkRow {
                link: i as u32,
                from: topo.device(l.from).name.clone(),
                to: topo.device(l.to).name.clone(),
                class: l.class.to_string(),
                bandwidth_bps: l.bandwidth_bps,
                bytes: traffic[i].bytes,
                utilization: if secs > 0.0 {
                    traffic[i].bytes * 8.0 / (l.bandwidth_bps * secs)
                } else {
                    0.0
                },
            })
            .collect();
        let mut bytes_by_class = BTreeMap::new();
        for row in &links {
            *bytes_by_class.entry(row.class.clone()).or_insert(0.0) += row.bytes;
        }
        let mut busiest: Vec<LinkRow> = links.iter().filter(|l| l.bytes > 0.0).cloned().collect();
        busiest.sort_by(|a, b| {
            b.utilization
                .total_cmp(&a.utilization)
                .then(a.link.cmp(&b.link))
        });
        busiest.truncate(10);

        let algbw = if secs > 0.0 {
            schedule.bytes as f64 / secs
        } else {
            0.0
        };
        let summary = Summary {
            scenario: run.scenario.to_string(),
            topology: topo.name.clone(),
            network_model: run.network_model.to_string(),
            profile: run.profile.to_string(),
            seed: run.seed,
            collective: schedule.collective.to_string(),
            algorithm: schedule.algorithm.clone(),
            library: "ideal".into(),
            library_parameters: Vec::new(),
            exchange_modes_ps: None,
            plays: None,
            ranks: schedule.ranks,
            bytes: schedule.bytes,
            time_ps: outcome.end.as_ps(),
            time_us: outcome.end.as_us_f64(),
            algbw_gbytes_per_s: algbw / 1e9,
            busbw_gbytes_per_s: algbw * bus_factor(schedule.collective, schedule.ranks) / 1e9,
            ops: schedule.ops.len(),
            bytes_by_class,
            busiest_links: busiest,
            events: outcome.events,
            net: outcome.net,
            ports: None,
        };

        let timeline: Vec<TimelineRow> = schedule
            .ops
            .iter()
            .zip(&outcome.ops)
            .enumerate()
            .map(|(i, (op, t))| {
                let (kind, pairs, bytes) = match op.kind {
                    OpKind::Transfer { pattern, bytes } => (
                        "transfer",
                        schedule.patterns[pattern.0 as usize].pairs.len() as u32,
                        bytes,
                    ),
                    OpKind::Reduce { endpoints, bytes } => ("reduce", endpoints, bytes),
                    OpKind::Compute { endpoints, .. } => ("compute", endpoints, 0),
                    OpKind::HostWork { endpoints, .. } => ("host", endpoints, 0),
                };
                TimelineRow {
                    op: i as u32,
                    kind,
                    phase: op.phase.as_str(),
                    channel: op.channel,
                    step: op.step,
                    pairs,
                    bytes_per_pair: bytes,
                    start_us: t.start.as_us_f64(),
                    end_us: t.end.as_us_f64(),
                }
            })
            .collect();

        let rows: usize = schedule
            .ops
            .iter()
            .map(|op| match op.kind {
                OpKind::Transfer { pattern, .. } => {
                    2 * schedule.patterns[pattern.0 as usize].pairs.len()
                }
                OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => 0,
            })
            .sum();
        let rank_timeline = (rows <= MAX_RANK_TIMELINE_ROWS).then(|| {
            let mut v = Vec::with_capacity(rows);
            for (i, op) in schedule.ops.iter().enumerate() {
                if let OpKind::Transfer { pattern, .. } = op.kind {
                    for &(a, b) in schedule.patterns[pattern.0 as usize].pairs.iter() {
                        v.push((a, i as u32, "send", b));
                        v.push((b, i as u32, "recv", a));
                    }
                }
            }
            v.sort();
            v
        });

        let endpoint_names = endpoints
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let name = if (i as u32) < schedule.ranks {
                    format!("rank{i}")
                } else {
                    schedule.extra_endpoints[i - schedule.ranks as usize].clone()
                };
                (name, topo.device(*d).name.clone())
            })
            .collect::<Vec<(String, String)>>();
        let trace = trace::Trace::from_schedule(
            &format!(
                "{} ({} {})",
                run.scenario, schedule.collective, schedule.algorithm
            ),
            schedule,
            &outcome.ops,
            endpoint_names
                .iter()
                .map(|(n, d)| format!("{n} ({d})"))
                .collect(),
            None,
        );
        RunReport {
            summary,
            links,
            endpoints: endpoint_names,
            traffic: pairs,
            timeline,
            rank_timeline,
            ports: None,
            trace,
            link_series: None,
            library: "ideal",
            gpu: None,
        }
    }
}

/// A duration in microseconds for people, to the nanosecond: `193.291 ms`, `12.345 us`.
pub fn fmt_time_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.6} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3} ms", us / 1e3)
    } else {
        format!("{us:.3} us")
    }
}

impl RunReport {
    /// Reports `time` as the run's time (and the bandwidths it gives): the median of several
    /// equally likely plays of one call, of which this report is one.
    pub fn set_median_time(&mut self, time: crate::engine::SimTime) {
        let s = &mut self.summary;
        let secs = time.as_secs_f64();
        let algbw = if secs > 0.0 {
            s.bytes as f64 / secs
        } else {
            0.0
        };
        let factor = if s.algbw_gbytes_per_s > 0.0 {
            s.busbw_gbytes_per_s / s.algbw_gbytes_per_s
        } else {
            0.0
        };
        s.time_ps = time.as_ps();
        s.time_us = time.as_us_f64();
        s.algbw_gbytes_per_s = algbw / 1e9;
        s.busbw_gbytes_per_s = algbw / 1e9 * factor;
    }
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        writeln!(f, "scenario   {}", s.scenario)?;
        writeln!(
            f,
            "topology   {}  ({} network model, profile {}, seed {})",
            s.topology, s.network_model, s.profile, s.seed
        )?;
        // A barrier carries nothing: no size to print.
        let what = match s.collective.as_str() {
            "barrier" => "barrier".to_string(),
            op => format!("{op} of {}", fmt_bytes(s.bytes as f64)),
        };
        writeln!(
            f,
            "collective {what} over {} ranks, algorithm {}",
            s.ranks, s.algorithm
        )?;
        // The templates' line only when it says more than that they are the templates (a
        // call timed in its loop).
        if !s.library.starts_with("ideal") || s.library.contains(';') {
            writeln!(f, "library    {}", s.library)?;
        }
        writeln!(f)?;
        writeln!(f, "  time    {:>15}", fmt_time_us(s.time_us))?;
        if s.time_us > 0.0 && s.bytes > 0 && s.ranks > 1 {
            writeln!(
                f,
                "  algbw   {:>15}   (size / time)",
                fmt_gbytes_per_s(s.algbw_gbytes_per_s * 1e9)
            )?;
            writeln!(
                f,
                "  busbw   {:>15}   (algbw x bus factor, as nccl-tests)",
                fmt_gbytes_per_s(s.busbw_gbytes_per_s * 1e9)
            )?;
        } else {
            // One rank or zero bytes: nothing was sent, and size / time is no bandwidth.
            writeln!(f, "  algbw   {:>15}   (nothing was sent)", "n/a")?;
            writeln!(f, "  busbw   {:>15}", "n/a")?;
        }
        writeln!(f)?;
        writeln!(f, "  bytes on links by class")?;
        for (class, bytes) in &s.bytes_by_class {
            if *bytes > 0.0 {
                writeln!(f, "    {class:<10} {:>12}", fmt_bytes(*bytes))?;
            }
        }
        writeln!(f)?;
        writeln!(f, "  busiest links")?;
        writeln!(
            f,
            "    {:<36} {:<9} {:>10} {:>12} {:>6}",
            "link", "class", "bandwidth", "bytes", "util"
        )?;
        for l in &s.busiest_links {
            writeln!(
                f,
                "    {:<36} {:<9} {:>10} {:>12} {:>5.1}%",
                format!("{} -> {}", l.from, l.to),
                l.class,
                fmt_bits_per_s(l.bandwidth_bps),
                fmt_bytes(l.bytes),
                l.utilization * 100.0
            )?;
        }
        writeln!(f)?;
        if let Some(p) = &s.ports {
            ports_display(f, p)?;
        }
        write!(
            f,
            "  {} ops, {} events, {} flows in {} batches, {} max-min solves ({} reused)",
            s.ops, s.events, s.net.flows, s.net.batches, s.net.solves, s.net.solution_reuses
        )
    }
}

fn ports_display(f: &mut fmt::Formatter<'_>, p: &ports::PortsSummary) -> fmt::Result {
    writeln!(
        f,
        "  buffers ({} switches{}): {} packets, {} packet-hops, fullest buffer {:.1}%",
        p.mode,
        match p.congestion_control.as_str() {
            "cubic" => ", TCP CUBIC senders",
            "aimd" => ", AIMD senders",
            _ => "",
        },
        p.packets,
        p.packet_hops,
        p.max_occupancy_fraction * 100.0
    )?;
    writeln!(
        f,
        "    {} pause events, {} drops ({} retransmitted)",
        p.pause_events,
        p.drops,
        fmt_bytes(p.retransmitted_bytes as f64)
    )?;
    if p.deadlocks_broken > 0 {
        writeln!(
            f,
            "    WARNING: {} lossless deadlocks (cyclic buffer dependencies) broken by letting a packet through",
            p.deadlocks_broken
        )?;
    }
    if p.overflowing_ports == 0 {
        writeln!(f, "  buffer overflow: none")?;
    } else {
        writeln!(
            f,
            "  buffer overflow: {} ports filled{}",
            p.overflowing_ports,
            if p.overflowing_ports > p.overflow.len() {
                format!(" (first {} shown)", p.overflow.len())
            } else {
                String::new()
            }
        )?;
        for o in &p.overflow {
            writeln!(
                f,
                "    {} -> {}: {} {}s from {:.3} us to {:.3} us, max {} of {}",
                o.from,
                o.to,
                o.events,
                o.kind,
                o.first_us,
                o.last_us,
                fmt_bytes(o.max_occupancy_bytes as f64),
                fmt_bytes(o.capacity_bytes as f64)
            )?;
            let causes: Vec<String> = o
                .causes
                .iter()
                .map(|c| {
                    format!(
                        "op {} ({} step {}) {}->{}",
                        c.op, c.phase, c.step, c.src, c.dst
                    )
                })
                .collect();
            writeln!(
                f,
                "      caused by {}{}",
                causes.join(", "),
                if o.other_events > 0 {
                    format!(" and others ({} events)", o.other_events)
                } else {
                    String::new()
                }
            )?;
        }
    }
    writeln!(f)
}
