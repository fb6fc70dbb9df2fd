//! Lossless (credit/PFC-style) backpressure: admission against a port's buffer, pausing at
//! the high-water mark, the ports waiting for room, and the cycles of waiting ports that
//! are PFC deadlocks.

use super::{NetContext, PacketModel, NONE};

impl PacketModel {
    /// Whether `port` can take `bytes` more now (lossless admission).
    pub(super) fn admits(&self, port: u32, bytes: u32) -> bool {
        let p = &self.ports[port as usize];
        !p.paused && p.occupancy + bytes as u64 <= p.capacity
    }

    /// Lossless: reserves room for `bytes` at `port`, pausing it when it crosses high water.
    pub(super) fn reserve(&mut self, port: u32, bytes: u32, flow: u32) {
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
    pub(super) fn released(&mut self, ctx: &mut dyn NetContext, port: u32) {
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
    pub(super) fn remove_waiter(&mut self, owner: u32, port: u32) {
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
    pub(super) fn waits_in_cycle(&self, from: u32) -> bool {
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
}
