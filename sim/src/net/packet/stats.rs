//! What the packet model reports per port: occupancy, pauses, drops, and which transfers
//! filled a buffer.

use super::{PacketModel, SwitchMode, NONE};
use crate::engine::SimTime;
use crate::topology::DeviceId;

/// One transfer that contributed to a buffer filling up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillCause {
    /// The tag of the batch (the player's op index).
    pub tag: u64,
    pub src: DeviceId,
    pub dst: DeviceId,
    /// Fill events (pauses or drops) this transfer's packets triggered.
    pub events: u64,
}

/// When and by whom one port's buffer filled: a pause (lossless) or a drop (lossy) is one
/// fill event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillRecord {
    pub first: SimTime,
    pub last: SimTime,
    pub events: u64,
    /// The first [`MAX_FILL_CAUSES`] distinct transfers whose packets triggered fill events.
    pub causes: Vec<FillCause>,
    /// Fill events triggered by transfers beyond those listed.
    pub other_events: u64,
}

pub const MAX_FILL_CAUSES: usize = 8;

/// Statistics of one output port (directed link) over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PortStats {
    pub capacity_bytes: u64,
    pub max_occupancy_bytes: u64,
    /// Occupancy averaged over the run (bytes).
    pub avg_occupancy_bytes: f64,
    /// Lossless: time this buffer held its feeders paused.
    pub paused_ps: u64,
    /// Lossless: times this buffer crossed its high-water mark.
    pub pause_events: u64,
    /// Time this port had a packet to send but waited for room downstream.
    pub blocked_ps: u64,
    pub drops: u64,
    pub dropped_bytes: u64,
    /// Bytes retransmitted because this port dropped them.
    pub retransmitted_bytes: u64,
    /// Packets this port transmitted.
    pub packets: u64,
    pub fill: Option<FillRecord>,
}

/// What the packet model measured, per directed link (indexed by `LinkId`).
#[derive(Debug, Clone, PartialEq)]
pub struct PortReport {
    pub mode: SwitchMode,
    /// How senders limit what they send (CUBIC: TCP connections).
    pub congestion_control: super::CongestionControl,
    pub ports: Vec<PortStats>,
    pub packets: u64,
    pub packet_hops: u64,
    /// Lossless deadlocks (cycles of waiting ports) broken by letting a packet through.
    pub deadlocks_broken: u64,
}

impl PacketModel {
    /// Records a fill event (pause or drop) at `port` triggered by a packet of `flow`
    /// (`NONE`: a TCP acknowledgement, counted among the other events).
    pub(super) fn record_fill(&mut self, port: u32, flow: u32) {
        let cause = (flow != NONE).then(|| {
            let f = self.flows[flow as usize];
            let route = self.routes[f.route as usize];
            (
                self.batches[f.batch as usize].tag,
                DeviceId(route.src),
                DeviceId(route.dst),
            )
        });
        let now = SimTime::from_ps(self.now_ps);
        let rec = self.ports[port as usize]
            .stats
            .fill
            .get_or_insert_with(|| FillRecord {
                first: now,
                last: now,
                events: 0,
                causes: Vec::new(),
                other_events: 0,
            });
        rec.last = now;
        rec.events += 1;
        let Some((tag, src, dst)) = cause else {
            rec.other_events += 1;
            return;
        };
        if let Some(c) = rec
            .causes
            .iter_mut()
            .find(|c| c.tag == tag && c.src == src && c.dst == dst)
        {
            c.events += 1;
        } else if rec.causes.len() < MAX_FILL_CAUSES {
            rec.causes.push(FillCause {
                tag,
                src,
                dst,
                events: 1,
            });
        } else {
            rec.other_events += 1;
        }
    }

    /// Per-port statistics up to now (buffers still paused or blocked count until now).
    pub(super) fn report(&self) -> PortReport {
        let now = self.now_ps;
        let ports = self
            .ports
            .iter()
            .map(|p| {
                let mut s = p.stats.clone();
                let area = p.area_byte_ps + p.occupancy as f64 * (now - p.last_change) as f64;
                s.avg_occupancy_bytes = if now > 0 { area / now as f64 } else { 0.0 };
                if p.paused {
                    s.paused_ps += now - p.paused_since;
                }
                if p.blocked_on != NONE {
                    s.blocked_ps += now - p.blocked_since;
                }
                s
            })
            .collect();
        PortReport {
            mode: self.config.mode,
            congestion_control: self.config.congestion_control,
            ports,
            packets: self.packets_sent,
            packet_hops: self.packet_hops,
            deadlocks_broken: self.deadlocks_broken,
        }
    }
}
