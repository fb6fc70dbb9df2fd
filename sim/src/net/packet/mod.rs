//! The packet-level network model: finite buffers, backpressure, drops.
//!
//! Every transfer is cut into packets of its path MTU (the smallest MTU of the link classes it
//! crosses). Every directed link is an *output port* with a FIFO queue and a finite buffer
//! ([`Link::buffer_bytes`](crate::topology::Link)); a port serializes one packet at a time at
//! link rate (integer picoseconds, rounded per packet), then the packet propagates for the
//! link's latency and is stored at the next hop's output port (store-and-forward) or delivered.
//!
//! A link whose profile measured a shaper (tc's htb, the testbed's links: `shaper_burst`) has
//! a token bucket at its port instead of serializing at its rate: a packet leaves at once while
//! the bucket's level is not below zero and is charged whole, else it waits until the level,
//! refilling at the link's rate up to the bucket's depth, is back at zero (`Port::transmit_ps`).
//! So a stream leaves at the rate, and after idle time its first bucket's worth at once.
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
//! With `congestion_control = "cubic"` senders are TCP connections instead ([`tcp`]): one
//! per (source, destination) pair, kept across transfers, carrying its flows one after the
//! other as one byte stream; each delivered packet turns into a 64-byte acknowledgement that
//! travels the reverse route through the same FIFO queues (behind the data going that way),
//! and the sender's CUBIC window grows by what comes back. A receiver may acknowledge several
//! packets at once (`ack_every_bytes`: the testbed's receivers get whole GSO packets and
//! acknowledge each), and does at a message's end and once all its sender sent is in. A connection keeps at most
//! `host_queue` bytes queued at its own first link (Linux's TCP small queues), so flows from
//! one host interleave there in bursts, and data a receiver is sending delays the
//! acknowledgements it sends.
//!
//! State lives in flat tables indexed by `u32`: packets in a slab with a free list, port queues
//! as intrusive linked lists through the packets, flows and batches in slabs; nothing is
//! allocated per packet. Two events per packet and hop: the end of its serialization at a port
//! and its arrival at the far end of the link (except the arrival at the destination, which
//! only the flow's last packet reports when no window waits for acknowledgements).
//!
//! Here: the model's tables and its event handling, one state machine over them (ports,
//! packets, flows and batches change together on every event, so they stay in one file, ~900
//! lines).
//! [`config`]: the scenario's options; `lossless`: admission, pauses and waiting ports (PFC
//! backpressure and its deadlocks); [`stats`]: what it reports per port; [`tcp`]: the CUBIC
//! sender; `conn`: the connections that carry flows under it (sending, acknowledging).

use std::sync::Arc;

use conn::Conn;

use super::series::{self, LinkSeries, LinkSeriesEntry, OccupancySeries, PortBins, SeriesOptions};
use super::{
    LinkTraffic, NetContext, NetCounters, NetEvent, NetPatternId, NetworkModel, PacketEventKind,
};
use crate::engine::SimTime;
use crate::topology::routing::Router;
use crate::topology::{DeviceId, LinkClass, Topology, TopologyError};

pub mod config;
mod conn;
mod lossless;
pub mod stats;
pub mod tcp;

pub use config::{
    default_mtu_bytes, CongestionControl, PacketConfig, SwitchMode, DEFAULT_AIMD_WINDOW_BYTES,
};
pub use stats::{FillCause, FillRecord, PortReport, PortStats, MAX_FILL_CAUSES};

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Packet {
    /// The flow it carries data of; for a TCP acknowledgement, its connection.
    flow: u32,
    /// Next packet in the queue it sits in (or in the free list).
    next: u32,
    bytes: u32,
    /// Index in its route's path of the link it is at (or travelling over).
    hop: u16,
    /// A TCP acknowledgement (travelling the flow's reverse route).
    ack: bool,
    /// The route it travels: its flow's, or for an acknowledgement the reverse of it.
    route: u32,
    /// TCP: when the data left its sender (an acknowledgement echoes it).
    stamp_ps: u64,
    /// TCP acknowledgement: the connection's bytes delivered so far.
    acked: u64,
}

#[derive(Debug, Clone, Copy)]
struct Route {
    off: u32,
    len: u32,
    packet_bytes: u32,
    src: u32,
    dst: u32,
    /// CUBIC: the route back (dst → src) its acknowledgements take; `NONE` otherwise.
    rev: u32,
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
    /// CUBIC: its connection (`NONE` otherwise).
    conn: u32,
}

impl Flow {
    /// The size of the flow's next packet to send: a full one, or the remainder last.
    fn next_packet_bytes(&self) -> u32 {
        if self.next_seq + 1 < self.packets {
            self.packet_bytes
        } else {
            (self.bytes - (self.packets - 1) * self.packet_bytes as u64) as u32
        }
    }
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
    /// A shaper's token bucket (module doc): depth in bytes (0: no shaper, packets serialize at
    /// the link's rate), its level (below zero while in debt) and when that level was taken.
    bucket_bytes: f64,
    level_bytes: f64,
    level_at_ps: u64,
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

impl Port {
    /// How long from `now` a packet of `bytes` that starts at this port takes to leave it. An
    /// unshaped port serializes it at the link's rate. A shaped one (tc's htb) lets it go at
    /// once (at line rate, far above the shaped one) when its level is not below zero and
    /// charges all of it, which may leave the level below zero; otherwise it holds the packet
    /// until the level, refilling at the link's rate up to the bucket's depth, is back at zero.
    /// A stream thus leaves at the link's rate, and after idle time its first bucket's worth
    /// (and one packet) at once.
    fn transmit_ps(&mut self, now_ps: u64, bytes: u32) -> u64 {
        if self.bucket_bytes <= 0.0 {
            return (bytes as f64 * self.ps_per_byte).round() as u64;
        }
        let refilled = now_ps.saturating_sub(self.level_at_ps) as f64 / self.ps_per_byte;
        let level = (self.level_bytes + refilled).min(self.bucket_bytes);
        let wait_ps = if level < 0.0 {
            (-level * self.ps_per_byte).ceil() as u64
        } else {
            0
        };
        self.level_bytes = level.max(0.0) - bytes as f64;
        self.level_at_ps = now_ps + wait_ps;
        wait_ps
    }
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
    /// CUBIC: connections, and which one each (source, destination) pair has.
    conns: Vec<Conn>,
    conn_of: std::collections::HashMap<(u32, u32), u32>,
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
            let bucket_bytes = config.shaper_burst_secs(l.class) * l.bandwidth_bps / 8.0;
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
                bucket_bytes,
                level_bytes: bucket_bytes,
                level_at_ps: 0,
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
            conns: Vec::new(),
            conn_of: std::collections::HashMap::new(),
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

    /// The link at `hop` of `route`.
    fn link_at(&self, route: u32, hop: u16) -> u32 {
        let r = &self.routes[route as usize];
        self.route_links[(r.off + hop as u32) as usize]
    }

    fn route_len(&self, route: u32) -> u32 {
        self.routes[route as usize].len
    }

    fn link_of(&self, flow: u32, hop: u16) -> u32 {
        self.link_at(self.flows[flow as usize].route, hop)
    }

    /// Whether `pkt` takes room in the buffers it waits in: all but acknowledgements at lossy
    /// switches, which are never dropped (the model has no duplicate acknowledgements to
    /// recover a lost one) and so take none (64 B each). Lossless, they are admitted like data.
    fn takes_room(&self, pkt: &Packet) -> bool {
        !pkt.ack || self.lossless
    }

    fn cubic(&self) -> bool {
        self.config.congestion_control == CongestionControl::Cubic
    }

    /// The flow a packet's fill events are charged to (`NONE` for an acknowledgement).
    fn cause_of(pkt: &Packet) -> u32 {
        if pkt.ack {
            NONE
        } else {
            pkt.flow
        }
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

    /// Starts transmitting the head packet of `port` if the port is idle and (lossless) the
    /// next port has room.
    fn try_start(&mut self, ctx: &mut dyn NetContext, port: u32) {
        let p = &self.ports[port as usize];
        if p.busy || p.head == NONE {
            return;
        }
        let pkt_id = p.head;
        let pkt = self.packets[pkt_id as usize];
        if self.lossless && (pkt.hop as u32 + 1) < self.route_len(pkt.route) {
            let next = self.link_at(pkt.route, pkt.hop + 1);
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
            self.reserve(next, pkt.bytes, Self::cause_of(&pkt));
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
        let ser_ps = p.transmit_ps(now, pkt.bytes);
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
        if pkt.hop == 0 && !pkt.ack && self.flows[pkt.flow as usize].queued == pkt_id {
            self.flows[pkt.flow as usize].queued = NONE;
            self.inject(ctx, pkt.flow);
        }
    }

    /// Queues the flow's next packet at its first port if it has none waiting there and its
    /// window allows.
    fn inject(&mut self, ctx: &mut dyn NetContext, flow: u32) {
        let f = &self.flows[flow as usize];
        if f.conn != NONE {
            self.pump(ctx, f.conn);
            return;
        }
        if f.queued != NONE || f.next_seq == f.packets {
            return;
        }
        let bytes = f.next_packet_bytes();
        if f.in_flight_bytes > 0 && (f.in_flight_bytes + bytes as u64) as f64 > f.window_bytes {
            return;
        }
        let route = f.route;
        let id = self.alloc_packet(Packet {
            flow,
            next: NONE,
            bytes,
            hop: 0,
            ack: false,
            route,
            stamp_ps: 0,
            acked: 0,
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
        if pkt.hop > 0 && self.takes_room(&pkt) {
            let occ = self.ports[port as usize].occupancy - pkt.bytes as u64;
            self.set_occupancy(port, occ);
            if self.lossless {
                self.released(ctx, port);
            }
        }
        if pkt.hop == 0 && !pkt.ack && self.cubic() {
            let c = self.flows[pkt.flow as usize].conn;
            self.conns[c as usize].host_queued -= pkt.bytes as u64;
            self.pump(ctx, c);
        }
        let last_hop = pkt.hop as u32 + 1 == self.routes[pkt.route as usize].len;
        if last_hop && !pkt.ack && self.flows[pkt.flow as usize].window_bytes == f64::INFINITY {
            // Nothing waits for this arrival but the flow's end: packets of a flow leave its
            // last link in delivery order, so the flow is done `latency` after its last one.
            let flow = &mut self.flows[pkt.flow as usize];
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
        if pkt.hop as u32 == self.route_len(pkt.route) {
            self.deliver(ctx, pkt_id);
            return;
        }
        let port = self.link_at(pkt.route, pkt.hop);
        if self.takes_room(&pkt) && !self.lossless {
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
        let conn = self.flows[flow as usize].conn;
        if conn != NONE {
            let c = &mut self.conns[conn as usize];
            c.sender.on_loss();
            c.host_queued += self.packets[pkt_id as usize].bytes as u64;
            self.packets[pkt_id as usize].stamp_ps = self.now_ps;
        }
        self.packets_sent += 1;
        let first = self.link_of(flow, 0);
        self.enqueue(first, pkt_id);
        self.try_start(ctx, first);
    }

    fn deliver(&mut self, ctx: &mut dyn NetContext, pkt_id: u32) {
        let pkt = self.packets[pkt_id as usize];
        if pkt.ack {
            self.free_packet(pkt_id);
            let now = self.now_ps;
            let c = &mut self.conns[pkt.flow as usize];
            c.sender.on_ack(pkt.acked, now - pkt.stamp_ps, now);
            self.pump(ctx, pkt.flow);
            return;
        }
        let conn = self.flows[pkt.flow as usize].conn;
        if conn != NONE {
            let f = &self.flows[pkt.flow as usize];
            let message_end = f.delivered + 1 == f.packets;
            self.acknowledge(ctx, pkt_id, conn, message_end);
        } else {
            self.free_packet(pkt_id);
        }
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
            (CongestionControl::None | CongestionControl::Cubic, None) => f64::INFINITY,
        }
    }
}

impl NetworkModel for PacketModel {
    /// About four events per packet lossless (serialization and arrival on each of two hops,
    /// as on a star), eight lossy (drops and retransmissions: the bundled 64-to-1 incast
    /// measured 4.0 and 9.5), twice that with CUBIC's acknowledgements, at the smallest MTU
    /// of the classes the topology's links use.
    fn estimate_state_bytes(&self) -> u64 {
        self.router.estimate_cache_bytes(&self.topo)
    }
    fn smaller_run_advice(&self) -> &'static str {
        "Use the flow model instead of the packet model (every packet is events here), fewer \
         ranks or smaller sizes, or a larger MTU"
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
        let mut per_packet = match self.config.mode {
            SwitchMode::Lossless => 4,
            SwitchMode::Lossy => 8,
        };
        if self.cubic() {
            per_packet *= 2; // every packet's acknowledgement makes the trip back
        }
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
                rev: NONE,
            });
        }
        if self.cubic() {
            // The acknowledgements' routes, after the pattern's own.
            for (i, &(src, dst)) in pairs.iter().enumerate() {
                if src == dst {
                    continue;
                }
                let path = self.router.path(&self.topo, dst, src)?;
                let off = self.route_links.len() as u32;
                self.route_links.extend(path.iter().map(|l| l.0));
                self.routes.push(Route {
                    off,
                    len: path.len() as u32,
                    packet_bytes: tcp::ACK_BYTES,
                    src: dst.0,
                    dst: src.0,
                    rev: NONE,
                });
                let rev = self.routes.len() as u32 - 1;
                self.routes[first as usize + i].rev = rev;
            }
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
            // The connection's window governs; NaN keeps the flow off the window-free paths.
            CongestionControl::Cubic => f64::NAN,
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
                conn: NONE,
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
            if self.cubic() {
                let c = self.conn_for(r);
                self.flows[id as usize].conn = c;
                let conn = &mut self.conns[c as usize];
                if conn.sending.is_empty() {
                    conn.sender.restart_if_idle(self.now_ps);
                }
                conn.sending.push_back(id);
            }
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
        Some(self.report())
    }
}

#[cfg(test)]
mod tests;
