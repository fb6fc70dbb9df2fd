//! The ports section of a run report: per-port buffer statistics and buffer-overflow detection,
//! for network models that have buffers (the packet model).
//!
//! "Overflow" means a buffer filled: in lossless mode it crossed its high-water mark and paused
//! the ports feeding it, in lossy mode it dropped a packet. For each such port the report says
//! when it first and last filled and which transfers' packets triggered it, as (op, phase,
//! step, source endpoint, destination endpoint).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RunReport;
use crate::collective::Schedule;
use crate::net::packet::{PortReport, SwitchMode};
use crate::topology::{DeviceId, Topology};

/// One output port (directed link) over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortRow {
    pub link: u32,
    pub from: String,
    pub to: String,
    pub class: String,
    pub capacity_bytes: u64,
    pub max_occupancy_bytes: u64,
    pub avg_occupancy_bytes: f64,
    /// Lossless: time the buffer held its feeders paused.
    pub paused_us: f64,
    pub pause_events: u64,
    /// Time the port waited for room downstream with a packet to send.
    pub blocked_us: f64,
    pub drops: u64,
    pub dropped_bytes: u64,
    pub retransmitted_bytes: u64,
    pub packets: u64,
}

/// A transfer whose packets filled a buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverflowCause {
    pub op: u32,
    pub phase: String,
    pub step: u32,
    pub src: String,
    pub dst: String,
    pub events: u64,
}

/// A port whose buffer filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverflowRow {
    pub link: u32,
    pub from: String,
    pub to: String,
    /// "pause" (lossless) or "drop" (lossy).
    pub kind: String,
    pub capacity_bytes: u64,
    pub max_occupancy_bytes: u64,
    pub first_us: f64,
    pub last_us: f64,
    pub events: u64,
    pub causes: Vec<OverflowCause>,
    /// Events triggered by transfers beyond those listed.
    pub other_events: u64,
}

/// Totals and buffer-overflow detection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortsSummary {
    pub mode: String,
    /// The senders' congestion control (`none`, `aimd`, `cubic`).
    pub congestion_control: String,
    pub packets: u64,
    pub packet_hops: u64,
    pub pause_events: u64,
    pub drops: u64,
    pub dropped_bytes: u64,
    pub retransmitted_bytes: u64,
    pub max_occupancy_fraction: f64,
    pub deadlocks_broken: u64,
    /// Ports whose buffer filled.
    pub overflowing_ports: usize,
    /// The first [`MAX_OVERFLOW_ROWS`] of them, by when they first filled.
    pub overflow: Vec<OverflowRow>,
}

pub const MAX_OVERFLOW_ROWS: usize = 20;

impl RunReport {
    /// Adds the ports section from a model's port statistics.
    pub fn attach_ports(
        &mut self,
        report: &PortReport,
        topo: &Topology,
        schedule: &Schedule,
        endpoints: &[DeviceId],
    ) {
        let mut names: BTreeMap<DeviceId, String> = BTreeMap::new();
        for (i, d) in endpoints.iter().enumerate().rev() {
            let name = if (i as u32) < schedule.ranks {
                format!("rank{i}")
            } else {
                schedule.extra_endpoints[i - schedule.ranks as usize].clone()
            };
            names.insert(*d, name);
        }
        let name_of = |d: DeviceId| {
            names
                .get(&d)
                .cloned()
                .unwrap_or_else(|| topo.device(d).name.clone())
        };
        let mut rows = Vec::with_capacity(report.ports.len());
        let mut overflow = Vec::new();
        let mut max_fraction: f64 = 0.0;
        for (i, (p, l)) in report.ports.iter().zip(topo.links()).enumerate() {
            let from = topo.device(l.from).name.clone();
            let to = topo.device(l.to).name.clone();
            max_fraction = max_fraction.max(p.max_occupancy_bytes as f64 / p.capacity_bytes as f64);
            rows.push(PortRow {
                link: i as u32,
                from: from.clone(),
                to: to.clone(),
                class: l.class.to_string(),
                capacity_bytes: p.capacity_bytes,
                max_occupancy_bytes: p.max_occupancy_bytes,
                avg_occupancy_bytes: p.avg_occupancy_bytes,
                paused_us: p.paused_ps as f64 * 1e-6,
                pause_events: p.pause_events,
                blocked_us: p.blocked_ps as f64 * 1e-6,
                drops: p.drops,
                dropped_bytes: p.dropped_bytes,
                retransmitted_bytes: p.retransmitted_bytes,
                packets: p.packets,
            });
            if let Some(fill) = &p.fill {
                let causes = fill
                    .causes
                    .iter()
                    .map(|c| {
                        let op = schedule.ops.get(c.tag as usize);
                        OverflowCause {
                            op: c.tag as u32,
                            phase: op.map_or("", |o| o.phase.as_str()).to_string(),
                            step: op.map_or(0, |o| o.step),
                            src: name_of(c.src),
                            dst: name_of(c.dst),
                            events: c.events,
                        }
                    })
                    .collect();
                overflow.push(OverflowRow {
                    link: i as u32,
                    from,
                    to,
                    kind: match report.mode {
                        SwitchMode::Lossless => "pause",
                        SwitchMode::Lossy => "drop",
                    }
                    .to_string(),
                    capacity_bytes: p.capacity_bytes,
                    max_occupancy_bytes: p.max_occupancy_bytes,
                    first_us: fill.first.as_us_f64(),
                    last_us: fill.last.as_us_f64(),
                    events: fill.events,
                    causes,
                    other_events: fill.other_events,
                });
            }
        }
        overflow.sort_by(|a, b| a.first_us.total_cmp(&b.first_us).then(a.link.cmp(&b.link)));
        let overflowing_ports = overflow.len();
        overflow.truncate(MAX_OVERFLOW_ROWS);
        let sum = |f: fn(&PortRow) -> u64| rows.iter().map(f).sum::<u64>();
        self.summary.ports = Some(PortsSummary {
            mode: report.mode.as_str().to_string(),
            congestion_control: report.congestion_control.as_str().to_string(),
            packets: report.packets,
            packet_hops: report.packet_hops,
            pause_events: sum(|r| r.pause_events),
            drops: sum(|r| r.drops),
            dropped_bytes: sum(|r| r.dropped_bytes),
            retransmitted_bytes: sum(|r| r.retransmitted_bytes),
            max_occupancy_fraction: max_fraction,
            deadlocks_broken: report.deadlocks_broken,
            overflowing_ports,
            overflow,
        });
        self.ports = Some(rows);
    }
}

/// `ports.csv`: one row per directed link.
pub fn ports_csv(rows: &[PortRow]) -> String {
    let mut t = super::output::CsvText::new([
        "link",
        "from",
        "to",
        "class",
        "capacity_bytes",
        "max_occupancy_bytes",
        "avg_occupancy_bytes",
        "paused_us",
        "pause_events",
        "blocked_us",
        "drops",
        "dropped_bytes",
        "retransmitted_bytes",
        "packets",
    ]);
    for r in rows {
        t.row([
            r.link.to_string(),
            r.from.clone(),
            r.to.clone(),
            r.class.to_string(),
            r.capacity_bytes.to_string(),
            r.max_occupancy_bytes.to_string(),
            r.avg_occupancy_bytes.to_string(),
            r.paused_us.to_string(),
            r.pause_events.to_string(),
            r.blocked_us.to_string(),
            r.drops.to_string(),
            r.dropped_bytes.to_string(),
            r.retransmitted_bytes.to_string(),
            r.packets.to_string(),
        ]);
    }
    t.finish()
}
