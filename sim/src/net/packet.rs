//! The packet-level network model: finite buffers, backpressure, drops.
//!
//! Every transfer is cut into packets of its path MTU (the smallest MTU of the link classes it
//! crosses). Every directed link is an *output port* with a FIFO queue and a finite buffer
//! ([`Link::buffer_bytes`](crate::topology::Link)); a port serializes one packet at a time at
//! link rate (integer picoseconds, rounded per packet), then the packet propagates for the
//! link's latency and is stored at the next hop's output port (store-and-forward) or delivered.
//!
//! Sources inject lazily: each flow keeps at most one packet waiting at its first port (it
//! queues the next one when the previous starts transmitting), so flows sharing a port are
//! served round-robin, which approximates the fair sharing of the flow model. Packets waiting
//! at their source port sit in the sender's memory and do not count against that port's buffer.
//!
//! Two switch behaviours ([`SwitchMode`]):
//! - *lossless* (credit/PFC-style): a port starts sending a packet only when the next port can
//!   take it; the space is reserved at that moment, so a buffer never overflows. A buffer whose
//!   occupancy reaches the high-water mark pauses every port that feeds it until it drains to
//!   the low-water mark. A port whose head packet waits blocks the packets behind it
//!   (head-of-line blocking), so pauses spread upstream to the sources. A cycle of ports that
//!   all wait on each other (a PFC deadlock) is detected and broken by letting one packet
//!   through; the break is counted and reported.
//! - *lossy*: a packet that arrives at a full buffer is dropped; its sender retransmits it one
//!   retransmission timeout after the drop (the timer is modelled, not the acknowledgements).
//!   AIMD congestion control (optional) halves a sender's window on every timeout.
//!
//! In both modes an optional per-flow window limits the bytes a sender has in flight (sent,
//! not yet delivered; delivery acknowledges at once, the return path is not modelled).
//!
//! State lives in flat tables indexed by `u32`: packets in a slab with a free list, port queues
//! as intrusive linked lists through the packets, flows and batches in slabs; nothing is
//! allocated per packet. Two events per packet and hop: the end of its serialization at a port
//! and its arrival at the far end of the link (except the arrival at the destination, which
//! only the flow's last packet reports when no window waits for acknowledgements).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::series::{self, LinkSeries, LinkSeriesEntry, OccupancySeries, PortBins, SeriesOptions};
use super::{
    LinkTraffic, NetContext, NetCounters, NetEvent, NetPatternId, NetworkModel, PacketEventKind,
};
use crate::engine::SimTime;
use crate::topology::routing::Router;
use crate::topology::{DeviceId, LinkClass, Topology, TopologyError};

const NONE: u32 = u32::MAX;

/// What a switch does when a buffer fills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchMode {
    /// Credit/PFC-style backpressure: never drops.
    #[default]
    Lossless,
    /// Drop on overflow, retransmit after a timeout.
    Lossy,
}

impl SwitchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchMode::Lossless => "lossless",
            SwitchMode::Lossy => "lossy",
        }
    }
}

/// How lossy-mode senders limit what they have in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CongestionControl {
    /// A fixed window (when one is given), otherwise line rate.
    #[default]
    None,
    /// Additive increase (one packet per window delivered), multiplicative decrease (halve on
    /// every retransmission timeout), capped by the window.
    Aimd,
}

/// The MTU a link class gets when the scenario names none: 1500 B for Ethernet, 4 KiB for
/// NVLink, PCIe, InfiniBand and the rest.
pub fn default_mtu_bytes(class: LinkClass) -> u32 {
    match class {
        LinkClass::Ethernet => 1500,
        _ => 4096,
    }
}

/// Options of the packet model (the scenario's `[network]` table).
#[derive(Debug, Clone, PartialEq)]
pub struct PacketConfig {
    pub mode: SwitchMode,
    /// Per link class, in the order of [`LinkClass::ALL`].
    pub mtu_bytes: [u32; LinkClass::ALL.len()],
    /// Lossless: a buffer at or above this fraction of its capacity pauses its feeders...
    pub high_water: f64,
    /// ...until it drains to this fraction.
    pub low_water: f64,
    /// Lossy: time from a drop to its retransmission.
    pub retransmit_timeout: SimTime,
    /// Most bytes a flow may have in flight (sent, not yet delivered), in both modes.
    pub window_bytes: Option<u64>,
    pub congestion_control: CongestionControl,
}

/// Window AIMD starts from (and is capped by) when the scenario gives none.
pub const DEFAULT_AIMD_WINDOW_BYTES: u64 = 64 << 10;

impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            mode: SwitchMode::Lossless,
            mtu_bytes: LinkClass::ALL.map(default_mtu_bytes),
            high_water: 0.9,
            low_water: 0.7,
            retransmit_timeout: SimTime::from_us(100),
            window_bytes: None,
            congestion_control: CongestionControl::None,
        }
    }
}

impl PacketConfig {
    pub fn mtu(&self, class: LinkClass) -> u32 {
        self.mtu_bytes[class_index(class)]
    }
}

fn class_index(c: LinkClass) -> usize {
    LinkClass::ALL.iter().position(|&x| x == c).unwrap_or(0)
}

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
    pub ports: Vec<PortStats>,
    pub packets: u64,
    pub packet_hops: u64,
    /// Lossless deadlocks (cycles of waiting ports) broken by letting a packet through.
    pub deadlocks_broken: u64,
}

#[derive(Debug, Clone, Copy)]
struct Packet {
    flow: u32,
    /// Next packet in the queue it sits in (or in the free list).
    next: u32,
    bytes: u32,
    /// Index in the flow's path of the link it is at (or travelling over).
    hop: u16,
}

#[derive(Debug, Clone, Copy)]
struct Route {
    off: u32,
    len: u32,
    packet_bytes: u32,
    src: u32,
    dst: u32,
}

#[derive(Debug, Clone, Copy)]
struct Flow {
    batch: u32,
    route: u32,
    packet_bytes: u32,
    /// The packet this flow keeps waiting at its first port, if any.
    queued: u32,
    bytes: u64,
    packets: u64,
    next_seq: u64,
    delivered: u64,
    in_flight_bytes: u64,
    window_bytes: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Batch {
    tag: u64,
    remaining: u32,
}

#[derive(Debug, Clone)]
struct Port {
    busy: bool,
    paused: bool,
    in_waitlist: bool,
    current: u32,
    head: u32,
    tail: u32,
    occupancy: u64,
    capacity: u64,
    high: u64,
    low: u64,
    ps_per_byte: f64,
    latency_ps: u64,
    /// Ports waiting for room here (FIFO through `waiter_next`).
    waiters_head: u32,
    waiters_tail: u32,
    waiter_next: u32,
    /// The port whose room this one waits for.
    blocked_on: u32,
    blocked_since: u64,
    paused_since: u64,
    last_change: u64,
    area_byte_ps: f64,
    stats: PortStats,
}

/// The packet-level model over one topology.
pub struct PacketModel {
    topo: Arc<Topology>,
    router: Router,
    config: PacketConfig,
    lossless: bool,
    routes: Vec<Route>,
    route_links: Vec<u32>,
    /// Per pattern: its first route and how many.
    patterns: Vec<(u32, u32)>,
    ports: Vec<Port>,
    packets: Vec<Packet>,
    free_packet: u32,
    flows: Vec<Flow>,
    free_flows: Vec<u32>,
    batches: Vec<Batch>,
    free_batches: Vec<u32>,
    link_bytes: Vec<u64>,
    /// Bytes sent and occupancy per port over time, in fine bins.
    series: PortBins,
    now_ps: u64,
    counters: NetCounters,
    packets_sent: u64,
    packet_hops: u64,
    deadlocks_broken: u64,
}

impl PacketModel {
    /// A model over `topo`. Every buffer must hold at least one packet of its link's class.
    pub fn new(
        topo: Arc<Topology>,
        config: PacketConfig,
        ecmp_salt: u64,
    ) -> Result<Self, TopologyError> {
        let mut ports = Vec::with_capacity(topo.links().len());
        for (i, l) in topo.links().iter().enumerate() {
            let mtu = config.mtu(l.class) as u64;
            if l.buffer_bytes < mtu {
                return Err(TopologyError::new(
                    format!(
                        "link {i} ({} -> {}) buffer",
                        topo.device(l.from).name,
                        topo.device(l.to).name
                    ),
                    format!(
                        "at least one {} packet ({mtu} B) for the packet model, got {} B; raise the buffer or lower network.mtu.{}",
                        l.class, l.buffer_bytes, l.class
                    ),
                ));
            }
            if l.bandwidth_bps.is_nan() || l.bandwidth_bps <= 0.0 {
                return Err(TopologyError::new(
                    format!("link {i} bandwidth"),
                    "a positive bandwidth for the packet model",
                ));
            }
            let cap = l.buffer_bytes;
            let high = ((cap as f64 * config.high_water) as u64).clamp(1, cap);
            let low = ((cap as f64 * config.low_water) as u64).min(high - 1);
            ports.push(Port {
                busy: false,
                paused: false,
                in_waitlist: false,
                current: NONE,
                head: NONE,
                tail: NONE,
                occupancy: 0,
                capacity: cap,
                high,
                low,
                ps_per_byte: 8e12 / l.bandwidth_bps,
                latency_ps: l.latency.as_ps(),
                waiters_head: NONE,
                waiters_tail: NONE,
                waiter_next: NONE,
                blocked_on: NONE,
                blocked_since: 0,
                paused_since: 0,
                last_change: 0,
                area_byte_ps: 0.0,
                stats: PortStats {
                    capacity_bytes: cap,
                    max_occupancy_bytes: 0,
                    avg_occupancy_bytes: 0.0,
                    paused_ps: 0,
                    pause_events: 0,
                    blocked_ps: 0,
                    drops: 0,
                    dropped_bytes: 0,
                    retransmitted_bytes: 0,
                    packets: 0,
                    fill: None,
                },
            });
        }
        let router = Router::new(&topo, ecmp_salt);
        let n = topo.links().len();
        Ok(PacketModel {
            topo,
            router,
            lossless: config.mode == SwitchMode::Lossless,
            config,
            routes: Vec::new(),
            route_links: Vec::new(),
            patterns: Vec::new(),
            ports,
            packets: Vec::new(),
            free_packet: NONE,
            flows: Vec::new(),
            free_flows: Vec::new(),
            batches: Vec::new(),
            free_batches: Vec::new(),
            link_bytes: vec![0; n],
            series: PortBins::new(n),
            now_ps: 0,
            counters: NetCounters::default(),
            packets_sent: 0,
            packet_hops: 0,
            deadlocks_broken: 0,
        })
    }

    pub fn config(&self) -> &PacketConfig {
        &self.config
    }

    /// Packets allocated at the high-water mark of the run (the slab's size).
    pub fn packet_slab_len(&self) -> usize {
        self.packets.len()
    }

    fn alloc_packet(&mut self, p: Packet) -> u32 {
        if self.free_packet != NONE {
            let id = self.free_packet;
            self.free_packet = self.packets[id as usize].next;
            self.packets[id as usize] = p;
            id
        } else {
            self.packets.push(p);
            self.packets.len() as u32 - 1
        }
    }

    fn free_packet(&mut self, id: u32) {
        self.packets[id as usize].next = self.free_packet;
        self.free_packet = id;
    }

    fn link_of(&self, flow: u32, hop: u16) -> u32 {
        let r = &self.routes[self.flows[flow as usize].route as usize];
        self.route_links[(r.off + hop as u32) as usize]
    }

    fn path_len(&self, flow: u32) -> u32 {
        self.routes[self.flows[flow as usize].route as usize].len
    }

    fn set_occupancy(&mut self, port: u32, occupancy: u64) {
        let now = self.now_ps;
        let p = &mut self.ports[port as usize];
        p.area_byte_ps += p.occupancy as f64 * (now - p.last_change) as f64;
        self.series
            .add_occupancy(port, p.last_change, now, p.occupancy);
        self.series.touch_max(port, now, occupancy);
        p.last_change = now;
        p.occupancy = occupancy;
        if occupancy > p.stats.max_occupancy_bytes {
            p.stats.max_occupancy_bytes = occupancy;
        }
    }

    fn enqueue(&mut self, port: u32, pkt: u32) {
        self.packets[pkt as usize].next = NONE;
        let p = &mut self.ports[port as usize];
        if p.tail == NONE {
            p.head = pkt;
        } else {
            self.packets[p.tail as usize].next = pkt;
        }
        p.tail = pkt;
    }

    /// Records a fill event (pause or drop) at `port` triggered by a packet of `flow`.
    fn record_fill(&mut self, port: u32, flow: u32) {
        let f = self.flows[flow as usize];
        let tag = self.batches[f.batch as usize].tag;
        let route = self.routes[f.route as usize];
        let (src, dst) = (DeviceId(route.src), DeviceId(route.dst));
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

    /// Whether `port` can take `bytes` more now (lossless admission).
    fn admits(&self, port: u32, bytes: u32) -> bool {
        let p = &self.ports[port as usize];
        !p.paused && p.occupancy + bytes as u64 <= p.capacity
    }

    /// Lossless: reserves room for `bytes` at `port`, pausing it when it crosses high water.
    fn reserve(&mut self, port: u32, bytes: u32, flow: u32) {
        let occ = self.ports[port as usize].occupancy + bytes as u64;
        self.set_occupancy(port, occ);
        let p = &mut self.ports[port as usize];
        if !p.paused && occ >= p.high {
            p.paused = true;
            p.paused_since = self.now_ps;
            p.stats.pause_events += 1;
            self.record_fill(port, flow);
        }
    }

    /// Lossless: `port`'s occupancy went down; resume or wake its waiters.
    fn released(&mut self, ctx: &mut dyn NetContext, port: u32) {
        let p = &mut self.ports[port as usize];
        if p.paused {
            if p.occupancy > p.low {
                return;
            }
            p.paused = false;
            p.stats.paused_ps += self.now_ps - p.paused_since;
        }
        if p.waiters_head == NONE {
            return;
        }
        let mut w = p.waiters_head;
        p.waiters_head = NONE;
        p.waiters_tail = NONE;
        while w != NONE {
            let next = self.ports[w as usize].waiter_next;
            self.ports[w as usize].waiter_next = NONE;
            self.ports[w as usize].in_waitlist = false;
            self.try_start(ctx, w);
            w = next;
        }
    }

    /// Takes `port` out of the waiters of `owner`.
    fn remove_waiter(&mut self, owner: u32, port: u32) {
        let mut prev = NONE;
        let mut cur = self.ports[owner as usize].waiters_head;
        while cur != NONE && cur != port {
            prev = cur;
            cur = self.ports[cur as usize].waiter_next;
        }
        if cur == NONE {
            return;
        }
        let next = self.ports[port as usize].waiter_next;
        if prev == NONE {
            self.ports[owner as usize].waiters_head = next;
        } else {
            self.ports[prev as usize].waiter_next = next;
        }
        if self.ports[owner as usize].waiters_tail == port {
            self.ports[owner as usize].waiters_tail = prev;
        }
        let p = &mut self.ports[port as usize];
        p.waiter_next = NONE;
        p.in_waitlist = false;
    }

    /// Whether the ports that `from` waits on, followed transitively, come back to `from`
    /// (every one of them idle and blocked: nothing in the cycle can ever move).
    fn waits_in_cycle(&self, from: u32) -> bool {
        let mut cur = self.ports[from as usize].blocked_on;
        for _ in 0..self.ports.len() {
            if cur == NONE {
                return false;
            }
            if cur == from {
                return true;
            }
            cur = self.ports[cur as usize].blocked_on;
        }
        false
    }

    /// Starts transmitting the head packet of `port` if the port is idle and (lossless) the
    /// next port has room.
    fn try_start(&mut self, ctx: &mut dyn NetContext, port: u32) {
        let p = &self.ports[port as usize];
        if p.busy || p.head == NONE {
            return;
        }
        let pkt_id = p.head;
        let pkt = self.packets[pkt_id as usize];
        if self.lossless && (pkt.hop as u32 + 1) < self.path_len(pkt.flow) {
            let next = self.link_of(pkt.flow, pkt.hop + 1);
            if !self.admits(next, pkt.bytes) {
                let now = self.now_ps;
                let p = &mut self.ports[port as usize];
                if p.blocked_on == NONE {
                    p.blocked_since = now;
                }
                p.blocked_on = next;
                if !self.waits_in_cycle(port) {
                    if !self.ports[port as usize].in_waitlist {
                        self.ports[port as usize].in_waitlist = true;
                        let d = &mut self.ports[next as usize];
                        if d.waiters_tail == NONE {
                            d.waiters_head = port;
                        } else {
                            let t = d.waiters_tail;
                            self.ports[t as usize].waiter_next = port;
                        }
                        self.ports[next as usize].waiters_tail = port;
                    }
                    return;
                }
                // A PFC deadlock: every port of the cycle waits on the next. Let this packet
                // through anyway (counted and reported).
                self.deadlocks_broken += 1;
                if self.ports[port as usize].in_waitlist {
                    self.remove_waiter(next, port);
                }
            }
            self.reserve(next, pkt.bytes, pkt.flow);
        }
        let now = self.now_ps;
        let p = &mut self.ports[port as usize];
        if p.blocked_on != NONE {
            p.stats.blocked_ps += now - p.blocked_since;
            p.blocked_on = NONE;
        }
        p.head = pkt.next;
        if p.head == NONE {
            p.tail = NONE;
        }
        p.busy = true;
        p.current = pkt_id;
        p.stats.packets += 1;
        let ser_ps = (pkt.bytes as f64 * p.ps_per_byte).round() as u64;
        self.link_bytes[port as usize] += pkt.bytes as u64;
        self.series
            .add_bytes(port, now, now + ser_ps, pkt.bytes as f64);
        self.packet_hops += 1;
        let _ = ctx.schedule(
            SimTime::from_ps(now.saturating_add(ser_ps)),
            NetEvent::Packet {
                kind: PacketEventKind::TxEnd,
                id: port,
            },
        );
        if pkt.hop == 0 && self.flows[pkt.flow as usize].queued == pkt_id {
            self.flows[pkt.flow as usize].queued = NONE;
            self.inject(ctx, pkt.flow);
        }
    }

    /// Queues the flow's next packet at its first port if it has none waiting there and its
    /// window allows.
    fn inject(&mut self, ctx: &mut dyn NetContext, flow: u32) {
        let f = &self.flows[flow as usize];
        if f.queued != NONE || f.next_seq == f.packets {
            return;
        }
        let bytes = if f.next_seq + 1 < f.packets {
            f.packet_bytes
        } else {
            (f.bytes - (f.packets - 1) * f.packet_bytes as u64) as u32
        };
        if f.in_flight_bytes > 0 && (f.in_flight_bytes + bytes as u64) as f64 > f.window_bytes {
            return;
        }
        let id = self.alloc_packet(Packet {
            flow,
            next: NONE,
            bytes,
            hop: 0,
        });
        let f = &mut self.flows[flow as usize];
        f.next_seq += 1;
        f.in_flight_bytes += bytes as u64;
        f.queued = id;
        self.packets_sent += 1;
        let first = self.link_of(flow, 0);
        self.enqueue(first, id);
        self.try_start(ctx, first);
    }

    fn on_tx_end(&mut self, ctx: &mut dyn NetContext, port: u32) {
        let p = &mut self.ports[port as usize];
        let pkt_id = p.current;
        p.busy = false;
        p.current = NONE;
        let latency = p.latency_ps;
        let pkt = self.packets[pkt_id as usize];
        if pkt.hop > 0 {
            let occ = self.ports[port as usize].occupancy - pkt.bytes as u64;
            self.set_occupancy(port, occ);
            if self.lossless {
                self.released(ctx, port);
            }
        }
        let flow = &mut self.flows[pkt.flow as usize];
        let last_hop = pkt.hop as u32 + 1 == self.routes[flow.route as usize].len;
        if last_hop && flow.window_bytes == f64::INFINITY {
            // Nothing waits for this arrival but the flow's end: packets of a flow leave its
            // last link in delivery order, so the flow is done `latency` after its last one.
            flow.delivered += 1;
            flow.in_flight_bytes -= pkt.bytes as u64;
            if flow.delivered == flow.packets {
                let _ = ctx.schedule(
                    SimTime::from_ps(self.now_ps.saturating_add(latency)),
                    NetEvent::Packet {
                        kind: PacketEventKind::FlowDelivered,
                        id: pkt.flow,
                    },
                );
            }
            self.free_packet(pkt_id);
        } else {
            let _ = ctx.schedule(
                SimTime::from_ps(self.now_ps.saturating_add(latency)),
                NetEvent::Packet {
                    kind: PacketEventKind::Arrive,
                    id: pkt_id,
                },
            );
        }
        self.try_start(ctx, port);
    }

    fn on_arrive(&mut self, ctx: &mut dyn NetContext, pkt_id: u32) {
        let pkt = &mut self.packets[pkt_id as usize];
        pkt.hop += 1;
        let pkt = *pkt;
        if pkt.hop as u32 == self.path_len(pkt.flow) {
            self.deliver(ctx, pkt_id);
            return;
        }
        let port = self.link_of(pkt.flow, pkt.hop);
        if !self.lossless {
            let p = &self.ports[port as usize];
            if p.occupancy + pkt.bytes as u64 > p.capacity {
                let p = &mut self.ports[port as usize];
                p.stats.drops += 1;
                p.stats.dropped_bytes += pkt.bytes as u64;
                p.stats.retransmitted_bytes += pkt.bytes as u64;
                self.record_fill(port, pkt.flow);
                self.packets[pkt_id as usize].hop = 0;
                let _ = ctx.schedule(
                    SimTime::from_ps(
                        self.now_ps
                            .saturating_add(self.config.retransmit_timeout.as_ps()),
                    ),
                    NetEvent::Packet {
                        kind: PacketEventKind::Retransmit,
                        id: pkt_id,
                    },
                );
                return;
            }
            let occ = p.occupancy + pkt.bytes as u64;
            self.set_occupancy(port, occ);
        }
        self.enqueue(port, pkt_id);
        self.try_start(ctx, port);
    }

    fn on_retransmit(&mut self, ctx: &mut dyn NetContext, pkt_id: u32) {
        let flow = self.packets[pkt_id as usize].flow;
        if self.config.congestion_control == CongestionControl::Aimd {
            let f = &mut self.flows[flow as usize];
            f.window_bytes = (f.window_bytes / 2.0).max(f.packet_bytes as f64);
        }
        self.packets_sent += 1;
        let first = self.link_of(flow, 0);
        self.enqueue(first, pkt_id);
        self.try_start(ctx, first);
    }

    fn deliver(&mut self, ctx: &mut dyn NetContext, pkt_id: u32) {
        let pkt = self.packets[pkt_id as usize];
        self.free_packet(pkt_id);
        let aimd = self.config.congestion_control == CongestionControl::Aimd;
        let cap = self.window_cap();
        let f = &mut self.flows[pkt.flow as usize];
        f.delivered += 1;
        f.in_flight_bytes -= pkt.bytes as u64;
        if aimd {
            let mss = f.packet_bytes as f64;
            f.window_bytes = (f.window_bytes + mss * mss / f.window_bytes).min(cap);
        }
        if f.delivered < f.packets {
            self.inject(ctx, pkt.flow);
            return;
        }
        self.flow_done(ctx, pkt.flow);
    }

    fn flow_done(&mut self, ctx: &mut dyn NetContext, flow: u32) {
        let batch = self.flows[flow as usize].batch;
        self.free_flows.push(flow);
        let b = &mut self.batches[batch as usize];
        b.remaining -= 1;
        if b.remaining == 0 {
            let tag = b.tag;
            self.free_batches.push(batch);
            ctx.batch_done(tag);
        }
    }

    fn window_cap(&self) -> f64 {
        match (self.config.congestion_control, self.config.window_bytes) {
            (_, Some(w)) => w as f64,
            (CongestionControl::Aimd, None) => DEFAULT_AIMD_WINDOW_BYTES as f64,
            (CongestionControl::None, None) => f64::INFINITY,
        }
    }
}

impl NetworkModel for PacketModel {
    /// About four events per packet lossless (serialization and arrival on each of two hops,
    /// as on a star), eight lossy (drops and retransmissions: the bundled 64-to-1 incast
    /// measured 4.0 and 9.5), at the smallest MTU of the classes the topology's links use.
    fn estimate_state_bytes(&self) -> u64 {
        self.router.estimate_cache_bytes(&self.topo)
    }
    fn estimate_events(&self, batches: u64, pair_bytes: u128) -> u64 {
        let mtu = self
            .topo
            .links()
            .iter()
            .map(|l| self.config.mtu(l.class))
            .min()
            .unwrap_or(1500)
            .max(1) as u128;
        let packets = pair_bytes.div_ceil(mtu);
        let per_packet = match self.config.mode {
            SwitchMode::Lossless => 4,
            SwitchMode::Lossy => 8,
        };
        u64::try_from(packets.saturating_mul(per_packet))
            .unwrap_or(u64::MAX)
            .saturating_add(batches.saturating_mul(2))
    }
    fn add_pattern(
        &mut self,
        pairs: &[(DeviceId, DeviceId)],
    ) -> Result<NetPatternId, TopologyError> {
        let first = self.routes.len() as u32;
        for &(src, dst) in pairs {
            let path = self.router.path(&self.topo, src, dst)?;
            let off = self.route_links.len() as u32;
            let mut mtu = u32::MAX;
            for &l in path {
                mtu = mtu.min(self.config.mtu(self.topo.link(l).class));
                self.route_links.push(l.0);
            }
            if path.len() > u16::MAX as usize {
                return Err(TopologyError::new(
                    "routing",
                    "paths of at most 65535 hops for the packet model",
                ));
            }
            self.routes.push(Route {
                off,
                len: path.len() as u32,
                packet_bytes: mtu.max(1),
                src: src.0,
                dst: dst.0,
            });
        }
        self.patterns.push((first, pairs.len() as u32));
        Ok(NetPatternId(self.patterns.len() as u32 - 1))
    }

    fn start_batch(
        &mut self,
        ctx: &mut dyn NetContext,
        pattern: NetPatternId,
        bytes: u64,
        _max_flow_bps: f64,
        tag: u64,
    ) {
        // Packets leave at link rate: this model does not pace flows, so scenarios refuse a
        // library whose transports cap flow rates (scenario::run::network_model).
        self.now_ps = ctx.now().as_ps();
        let (first, n) = self.patterns[pattern.0 as usize];
        self.counters.batches += 1;
        self.counters.flows += n as u64;
        let batch = match self.free_batches.pop() {
            Some(b) => b,
            None => {
                self.batches.push(Batch::default());
                self.batches.len() as u32 - 1
            }
        };
        self.batches[batch as usize] = Batch { tag, remaining: n };
        // A pair on one device has nothing to cross: it is delivered at once.
        let mut live = 0;
        for r in first..first + n {
            if self.routes[r as usize].len > 0 {
                live += 1;
            }
        }
        self.batches[batch as usize].remaining = live;
        if live == 0 {
            self.free_batches.push(batch);
            ctx.batch_done(tag);
            return;
        }
        let window = match self.config.congestion_control {
            CongestionControl::Aimd => self.window_cap(),
            CongestionControl::None => self.config.window_bytes.map_or(f64::INFINITY, |w| w as f64),
        };
        for r in first..first + n {
            let route = self.routes[r as usize];
            if route.len == 0 {
                continue;
            }
            let pb = route.packet_bytes as u64;
            let flow = Flow {
                batch,
                route: r,
                packet_bytes: route.packet_bytes,
                queued: NONE,
                bytes,
                packets: bytes.div_ceil(pb).max(1),
                next_seq: 0,
                delivered: 0,
                in_flight_bytes: 0,
                window_bytes: window,
            };
            let id = match self.free_flows.pop() {
                Some(id) => {
                    self.flows[id as usize] = flow;
                    id
                }
                None => {
                    self.flows.push(flow);
                    self.flows.len() as u32 - 1
                }
            };
            self.inject(ctx, id);
        }
    }

    fn on_event(&mut self, ctx: &mut dyn NetContext, event: NetEvent) {
        self.counters.events += 1;
        self.now_ps = ctx.now().as_ps();
        if let NetEvent::Packet { kind, id } = event {
            match kind {
                PacketEventKind::TxEnd => self.on_tx_end(ctx, id),
                PacketEventKind::Arrive => self.on_arrive(ctx, id),
                PacketEventKind::Retransmit => self.on_retransmit(ctx, id),
                PacketEventKind::FlowDelivered => self.flow_done(ctx, id),
            }
        }
    }

    fn link_traffic(&mut self) -> Vec<LinkTraffic> {
        self.link_bytes
            .iter()
            .map(|&b| LinkTraffic { bytes: b as f64 })
            .collect()
    }

    fn counters(&self) -> NetCounters {
        self.counters
    }

    fn path_bottleneck(
        &mut self,
        src: DeviceId,
        dst: DeviceId,
    ) -> Result<(f64, LinkClass), TopologyError> {
        let path = self.router.path(&self.topo, src, dst)?;
        Ok(self.topo.bottleneck(path))
    }

    /// Buffers are empty when a run ends (every packet delivered), so the fine bins hold the
    /// whole occupancy history.
    fn link_series(&mut self, end: SimTime, options: SeriesOptions) -> Option<LinkSeries> {
        let caps: Vec<f64> = self.topo.links().iter().map(|l| l.bandwidth_bps).collect();
        let busy: Vec<f64> = self
            .link_bytes
            .iter()
            .zip(&caps)
            .map(|(&b, &c)| b as f64 / c)
            .collect();
        let full: Vec<f64> = self
            .ports
            .iter()
            .map(|p| p.stats.max_occupancy_bytes as f64)
            .collect();
        let mut chosen = series::top_k(&busy, options.top_links);
        chosen.extend(series::top_k(&full, options.top_links));
        chosen.sort_unstable();
        chosen.dedup();
        let edges = series::bin_edges(end.as_ps(), options.bins);
        let links = chosen
            .into_iter()
            .map(|l| {
                let (bytes, avg_bytes, max_bytes) = self.series.rebin(l as u32, &edges);
                let utilization = bytes
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        // Serialization times are whole picoseconds: a bin of back-to-back
                        // packets may show a few parts per million above the line rate.
                        super::flow::utilization(b * 8.0, caps[l], edges[i + 1] - edges[i]).min(1.0)
                    })
                    .collect();
                LinkSeriesEntry {
                    link: l as u32,
                    utilization,
                    occupancy: Some(OccupancySeries {
                        avg_bytes,
                        max_bytes,
                    }),
                }
            })
            .collect();
        Some(LinkSeries {
            edges_ps: edges,
            links,
        })
    }

    fn port_stats(&mut self) -> Option<PortReport> {
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
        Some(PortReport {
            mode: self.config.mode,
            ports,
            packets: self.packets_sent,
            packet_hops: self.packet_hops,
            deadlocks_broken: self.deadlocks_broken,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::play::{play, PlayOptions, PlayOutcome};
    use crate::collective::Schedule;

    use crate::net::testing::{assert_series_matches_traffic, schedule, star, GBPS};

    fn run(topo: &Arc<Topology>, s: &Schedule, config: PacketConfig) -> (PlayOutcome, PortReport) {
        let mut m = PacketModel::new(topo.clone(), config, 0).unwrap();
        let eps: Vec<DeviceId> = topo.gpus()[..s.endpoints() as usize].to_vec();
        let out = play(
            s,
            &eps,
            &mut m,
            PlayOptions {
                reduce_bytes_per_s: None,
                shared_cores: None,
            },
        )
        .unwrap();
        let report = m.port_stats().unwrap();
        (out, report)
    }

    fn port(t: &Topology, from: &str, to: &str) -> usize {
        let (a, b) = (t.find(from).unwrap(), t.find(to).unwrap());
        t.out_links(a)
            .iter()
            .find(|&&l| t.link(l).to == b)
            .unwrap()
            .index()
    }

    #[test]
    fn a_single_flow_takes_size_over_bandwidth_plus_hops_latency_plus_store_and_forward() {
        // g0 → sw → g1 at 100 Gb/s, 1 us per hop, 1500 B packets: 1.5 MB takes
        // 120 us + 2 us + one packet's 120 ns at the switch.
        let t = star(
            2,
            100.0 * GBPS,
            SimTime::from_us(1),
            1 << 20,
            LinkClass::Ethernet,
        );
        let (out, ports) = run(
            &t,
            &schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]),
            PacketConfig::default(),
        );
        assert_eq!(out.end.as_ps(), 120_000_000 + 2_000_000 + 120_000);
        assert_eq!(ports.packets, 1000);
        assert_eq!(ports.packet_hops, 2000);
    }

    #[test]
    fn the_last_packet_is_the_remainder_and_an_empty_transfer_takes_the_latency() {
        // 1600 B = 1500 + 100: 128 ns at the source; the 100 B packet then waits at the switch
        // behind the first one, so the end is still size/B + 2 latencies + one full packet.
        let t = star(
            2,
            100.0 * GBPS,
            SimTime::from_us(1),
            1 << 20,
            LinkClass::Ethernet,
        );
        let (out, _) = run(
            &t,
            &schedule(
                2,
                &[(vec![(0, 1)], 1600, vec![]), (vec![(0, 1)], 0, vec![0])],
            ),
            PacketConfig::default(),
        );
        assert_eq!(out.ops[0].end.as_ps(), 128_000 + 2_000_000 + 120_000);
        assert_eq!(out.ops[1].end.as_ps() - out.ops[1].start.as_ps(), 2_000_000);
    }

    #[test]
    fn two_flows_into_one_port_get_half_each() {
        // g0 → g2 and g1 → g2 share sw → g2: 2 × 1.5 MB at 100 Gb/s ≈ 240 us. The queue at
        // the switch grows to 1.5 MB, within its 4 MiB.
        let t = star(3, 100.0 * GBPS, SimTime::ZERO, 4 << 20, LinkClass::Ethernet);
        let (out, ports) = run(
            &t,
            &schedule(3, &[(vec![(0, 2), (1, 2)], 1_500_000, vec![])]),
            PacketConfig::default(),
        );
        let secs = out.end.as_secs_f64();
        assert!((secs - 240e-6).abs() / 240e-6 < 1e-3, "{secs}");
        // The switch port queued packets from both senders but never dropped or paused.
        let p = &ports.ports[port(&t, "sw", "g2")];
        assert!(p.max_occupancy_bytes > 1500);
        assert_eq!((p.drops, p.pause_events), (0, 0));
    }

    #[test]
    fn lossless_incast_pauses_senders_and_never_drops_or_overflows() {
        // 7 senders into g7 through a 64 KiB switch port.
        let t = star(
            8,
            100.0 * GBPS,
            SimTime::from_ns(500),
            64 << 10,
            LinkClass::Ethernet,
        );
        let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
        let (out, ports) = run(
            &t,
            &schedule(8, &[(pairs, 1_000_000, vec![])]),
            PacketConfig::default(),
        );
        let p = &ports.ports[port(&t, "sw", "g7")];
        assert!(p.pause_events > 0 && p.paused_ps > 0);
        assert!(p.max_occupancy_bytes <= p.capacity_bytes);
        assert!(ports.ports.iter().all(|p| p.drops == 0));
        let blocked: u64 = (0..7)
            .map(|i| ports.ports[port(&t, &format!("g{i}"), "sw")].blocked_ps)
            .sum();
        assert!(blocked > 0, "senders were held back");
        // Still the port's full rate: 7 MB at 100 Gb/s = 560 us, plus a little.
        let secs = out.end.as_secs_f64();
        assert!(secs > 560e-6 && secs < 570e-6, "{secs}");
        let fill = p.fill.as_ref().unwrap();
        assert_eq!(fill.causes.len(), 7, "{fill:?}");
        assert_eq!(ports.deadlocks_broken, 0);
    }

    #[test]
    fn lossy_incast_drops_and_retransmits_until_everything_arrives() {
        let t = star(
            8,
            100.0 * GBPS,
            SimTime::from_ns(500),
            64 << 10,
            LinkClass::Ethernet,
        );
        let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
        let config = PacketConfig {
            mode: SwitchMode::Lossy,
            retransmit_timeout: SimTime::from_us(20),
            ..Default::default()
        };
        let (out, ports) = run(&t, &schedule(8, &[(pairs, 1_000_000, vec![])]), config);
        let p = &ports.ports[port(&t, "sw", "g7")];
        assert!(p.drops > 0);
        assert_eq!(p.retransmitted_bytes, p.dropped_bytes);
        assert!(p.max_occupancy_bytes <= p.capacity_bytes);
        assert_eq!(p.pause_events, 0);
        // Every byte arrived exactly once: the port into g7 carried 7 MB.
        assert_eq!(
            ports.ports[port(&t, "sw", "g7")].packets,
            7 * 1_000_000u64.div_ceil(1500)
        );
        assert!(out.end.as_secs_f64() > 560e-6);
    }

    #[test]
    fn aimd_senders_lose_less_than_line_rate_senders() {
        let t = star(
            8,
            100.0 * GBPS,
            SimTime::from_ns(500),
            64 << 10,
            LinkClass::Ethernet,
        );
        let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
        let s = schedule(8, &[(pairs, 1_000_000, vec![])]);
        let lossy = PacketConfig {
            mode: SwitchMode::Lossy,
            retransmit_timeout: SimTime::from_us(20),
            ..Default::default()
        };
        let aimd = PacketConfig {
            congestion_control: CongestionControl::Aimd,
            window_bytes: Some(16 << 10),
            ..lossy.clone()
        };
        let (_, plain) = run(&t, &s, lossy);
        let (_, controlled) = run(&t, &s, aimd);
        let drops = |r: &PortReport| r.ports.iter().map(|p| p.drops).sum::<u64>();
        assert!(drops(&controlled) < drops(&plain));
    }

    #[test]
    fn bigger_buffers_make_the_pauses_disappear() {
        let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
        let s = schedule(8, &[(pairs, 1_000_000, vec![])]);
        let t = star(
            8,
            100.0 * GBPS,
            SimTime::from_ns(500),
            16 << 20,
            LinkClass::Ethernet,
        );
        let (_, ports) = run(&t, &s, PacketConfig::default());
        assert!(ports.ports.iter().all(|p| p.pause_events == 0));
    }

    #[test]
    fn a_buffer_smaller_than_a_packet_is_refused() {
        let t = star(2, 100.0 * GBPS, SimTime::ZERO, 1000, LinkClass::Ethernet);
        let err = PacketModel::new(t, PacketConfig::default(), 0)
            .err()
            .unwrap();
        assert!(err.expected.contains("1500 B"), "{err}");
    }

    #[test]
    fn the_series_integrates_to_each_ports_bytes_and_shows_the_incast_queue() {
        let t = star(
            8,
            100.0 * GBPS,
            SimTime::from_ns(500),
            64 << 10,
            LinkClass::Ethernet,
        );
        let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
        let s = schedule(8, &[(pairs, 1_000_000, vec![])]);
        let mut m = PacketModel::new(t.clone(), PacketConfig::default(), 0).unwrap();
        let eps: Vec<DeviceId> = t.gpus().to_vec();
        let out = play(
            &s,
            &eps,
            &mut m,
            PlayOptions {
                reduce_bytes_per_s: None,
                shared_cores: None,
            },
        )
        .unwrap();
        let series = m
            .link_series(
                out.end,
                SeriesOptions {
                    bins: 40,
                    top_links: 16,
                },
            )
            .unwrap();
        let traffic = m.link_traffic();
        let stats = m.port_stats().unwrap();
        let into_g7 = port(&t, "sw", "g7") as u32;
        // Serialization is rounded to whole picoseconds: within a part in 10^5.
        assert_series_matches_traffic(&t, &series, &traffic, 1e-5);
        let g7 = series.links.iter().find(|e| e.link == into_g7).unwrap();
        let occ = g7.occupancy.as_ref().unwrap();
        let p = &stats.ports[into_g7 as usize];
        assert_eq!(*occ.max_bytes.iter().max().unwrap(), p.max_occupancy_bytes);
        // The per-bin averages integrate to the run's average occupancy.
        let area: f64 = occ
            .avg_bytes
            .iter()
            .enumerate()
            .map(|(i, a)| a * (series.edges_ps[i + 1] - series.edges_ps[i]) as f64)
            .sum();
        // (port statistics average over the time of the model's last event)
        let want = p.avg_occupancy_bytes * m.now_ps as f64;
        assert!((area - want).abs() <= 1e-9 * want, "{area} vs {want}");
        // The port into g7 is busy nearly all the run.
        assert!(
            g7.utilization[5..35].iter().all(|&u| u > 0.95),
            "{:?}",
            g7.utilization
        );
    }
}
