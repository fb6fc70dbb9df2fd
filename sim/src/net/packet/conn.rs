//! CUBIC connections in the packet model: one per (source, destination) pair, the flows it
//! carries one after the other as one byte stream, what it sends as its window and host queue
//! allow, and the acknowledgement each delivered packet turns into.

use std::collections::VecDeque;

use super::{tcp, NetContext, Packet, PacketModel, NONE};
use crate::topology::DeviceId;

/// CUBIC: one TCP connection (a source → destination pair) and the flows it carries in turn.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub(super) sender: tcp::Sender,
    /// Flows with packets left to send, first posted first: one byte stream.
    pub(super) sending: VecDeque<u32>,
    /// Bytes queued or being sent at the sender's own link (TCP small queues).
    pub(super) host_queued: u64,
    /// Bytes the receiver has got so far.
    pub(super) delivered: u64,
    /// Of those, bytes it has not acknowledged yet.
    pub(super) unacknowledged: u64,
}

impl PacketModel {
    /// CUBIC: every connection's (source, destination) and sender state now.
    pub fn tcp_connections(&self) -> Vec<(DeviceId, DeviceId, &tcp::Sender)> {
        let mut v: Vec<_> = self
            .conn_of
            .iter()
            .map(|(&(s, d), &c)| (DeviceId(s), DeviceId(d), &self.conns[c as usize].sender))
            .collect();
        v.sort_by_key(|x| (x.0 .0, x.1 .0));
        v
    }

    /// CUBIC: the receiver got data packet `pkt_id` of a flow of `conn` (`message_end`: its
    /// flow's last). The packet turns into an acknowledgement of everything delivered so far,
    /// sent back at once through the receiver's own link, when the receiver acknowledges every
    /// packet, when `ack_every_bytes` have arrived since its last one, at a message's end, or
    /// when nothing the sender has sent is still on its way; otherwise it is consumed.
    pub(super) fn acknowledge(
        &mut self,
        ctx: &mut dyn NetContext,
        pkt_id: u32,
        conn: u32,
        message_end: bool,
    ) {
        let every = self.config.ack_every_bytes;
        let c = &mut self.conns[conn as usize];
        let pkt = &mut self.packets[pkt_id as usize];
        c.delivered += pkt.bytes as u64;
        c.unacknowledged += pkt.bytes as u64;
        if c.unacknowledged < every && !message_end && c.delivered < c.sender.sent {
            self.free_packet(pkt_id);
            return;
        }
        c.unacknowledged = 0;
        let rev = self.routes[pkt.route as usize].rev;
        *pkt = Packet {
            flow: conn,
            next: NONE,
            bytes: tcp::ACK_BYTES,
            hop: 0,
            ack: true,
            route: rev,
            stamp_ps: pkt.stamp_ps,
            acked: c.delivered,
        };
        let first = self.link_at(rev, 0);
        self.enqueue(first, pkt_id);
        self.try_start(ctx, first);
    }

    /// CUBIC: sends what `conn`'s window and its host queue allow, its flows in turn.
    pub(super) fn pump(&mut self, ctx: &mut dyn NetContext, conn: u32) {
        let host_queue = self.config.host_queue_bytes;
        let window = self.config.window_bytes.unwrap_or(u64::MAX);
        while let Some(&flow) = self.conns[conn as usize].sending.front() {
            let f = &self.flows[flow as usize];
            let bytes = u64::from(f.next_packet_bytes());
            let route = f.route;
            let c = &self.conns[conn as usize];
            let in_flight = c.sender.in_flight();
            if !c.sender.may_send(bytes)
                || (in_flight > 0 && in_flight + bytes > window)
                || (c.host_queued > 0 && c.host_queued + bytes > host_queue)
            {
                return;
            }
            let now = self.now_ps;
            let id = self.alloc_packet(Packet {
                flow,
                next: NONE,
                bytes: bytes as u32,
                hop: 0,
                ack: false,
                route,
                stamp_ps: now,
                acked: 0,
            });
            let f = &mut self.flows[flow as usize];
            f.next_seq += 1;
            f.in_flight_bytes += bytes;
            let last = f.next_seq == f.packets;
            let c = &mut self.conns[conn as usize];
            c.sender.on_sent(bytes, now);
            c.host_queued += bytes;
            if last {
                c.sending.pop_front();
            }
            self.packets_sent += 1;
            let first = self.link_at(route, 0);
            self.enqueue(first, id);
            self.try_start(ctx, first);
        }
    }

    /// CUBIC: the connection from `route`'s source to its destination (new ones start with
    /// the initial window).
    pub(super) fn conn_for(&mut self, route: u32) -> u32 {
        let r = self.routes[route as usize];
        let next = self.conns.len() as u32;
        let id = *self.conn_of.entry((r.src, r.dst)).or_insert(next);
        if id == next {
            self.conns.push(Conn {
                sender: tcp::Sender::new(r.packet_bytes),
                sending: VecDeque::new(),
                host_queued: 0,
                delivered: 0,
                unacknowledged: 0,
            });
        }
        id
    }
}
