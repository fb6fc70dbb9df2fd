//! Ordered connections: what a TCP socket does to the messages a library writes into it.
//!
//! A library that keeps one connection per (sender, receiver) — gloo's TCP pairs, OpenMPI's
//! TCP BTL — delivers what one side writes to the other in the order it was written: a small
//! control message written after a large payload arrives after all of the payload. Ops marked
//! [`Op::in_order`](super::Op) get that here. Every pair of an in-order transfer is a message
//! on the connection (sender, receiver); among the in-order ops on one connection, an op starts
//! only once every op that became ready before it there has finished, so the order they are
//! written in is the order they became ready (ties: the play loop's order, op order). An op
//! on several connections (a batch of many pairs) waits until it leads each of them. An op
//! lets the next one go once its bytes have all left their senders, when the network model
//! says so (`NetContext::batch_sent`: a stream's next bytes follow its last ones onto the
//! wire, they do not wait for them to arrive), else once it finished.
//!
//! Ops that are not in order ignore connections entirely: the ideal templates, and the
//! libraries' ops that do not ask for it, play exactly as before.

use std::collections::{HashMap, VecDeque};

use super::{OpKind, Schedule};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not ready yet (or not in order).
    Idle,
    /// Queued on its connections, waiting to lead all of them.
    Waiting,
    /// Started, and still holding its connections.
    Started,
    /// Its bytes have left (or it finished): the next ops on its connections may start.
    Released,
}

/// The in-order ops of one schedule and, per connection, the ones written and not finished.
#[derive(Debug)]
pub struct Connections {
    /// Op `i`'s connections are `conns[offsets[i]..offsets[i + 1]]` (none: not in order).
    offsets: Vec<u32>,
    conns: Vec<u32>,
    /// Per connection: ready ops in the order they became ready; the front one is running.
    queues: Vec<VecDeque<u32>>,
    state: Vec<State>,
}

impl Connections {
    /// The connections of `schedule`'s in-order transfer ops (one per distinct sender and
    /// receiver of their patterns); nothing at all for a schedule without them (the ideal
    /// templates, NCCL), so those pay no per-op table.
    pub fn new(schedule: &Schedule) -> Self {
        if !schedule.ops.iter().any(|op| op.in_order) {
            return Connections {
                offsets: Vec::new(),
                conns: Vec::new(),
                queues: Vec::new(),
                state: Vec::new(),
            };
        }
        let mut ids: HashMap<(u32, u32), u32> = HashMap::new();
        let mut offsets = Vec::with_capacity(schedule.ops.len() + 1);
        let mut conns = Vec::new();
        offsets.push(0);
        for op in &schedule.ops {
            if let (true, &OpKind::Transfer { pattern, .. }) = (op.in_order, &op.kind) {
                let mut mine: Vec<u32> = schedule.patterns[pattern.0 as usize]
                    .pairs
                    .iter()
                    .map(|&pair| {
                        let next = ids.len() as u32;
                        *ids.entry(pair).or_insert(next)
                    })
                    .collect();
                // Each connection once per op (a pattern may name a pair twice).
                mine.sort_unstable();
                mine.dedup();
                conns.extend(mine);
            }
            offsets.push(conns.len() as u32);
        }
        Connections {
            offsets,
            conns,
            queues: vec![VecDeque::new(); ids.len()],
            state: vec![State::Idle; schedule.ops.len()],
        }
    }

    fn of(&self, op: u32) -> &[u32] {
        if self.offsets.is_empty() {
            return &[];
        }
        &self.conns[self.offsets[op as usize] as usize..self.offsets[op as usize + 1] as usize]
    }

    fn leads_all(&self, op: u32) -> bool {
        self.of(op)
            .iter()
            .all(|&c| self.queues[c as usize].front() == Some(&op))
    }

    /// `op` is ready (all its dependencies finished), or was handed back by
    /// [`finished`](Self::finished): true when it may start now. An in-order op is queued on its
    /// connections the first time and starts once it leads every one of them.
    pub fn admit(&mut self, op: u32) -> bool {
        if self.of(op).is_empty() {
            return true;
        }
        if self.state[op as usize] == State::Idle {
            for i in self.offsets[op as usize]..self.offsets[op as usize + 1] {
                let c = self.conns[i as usize];
                self.queues[c as usize].push_back(op);
            }
            self.state[op as usize] = State::Waiting;
        }
        let go = self.leads_all(op);
        if go {
            self.state[op as usize] = State::Started;
        }
        go
    }

    /// Every byte of `op` has left its senders: what follows it on its connections may leave
    /// (a stream's next bytes follow its last ones onto the wire). The waiting ops that now
    /// lead all of theirs are pushed onto `start` (each once) to be admitted.
    pub fn sent(&mut self, op: u32, start: &mut VecDeque<u32>) {
        self.release(op, start);
    }

    /// `op` finished (delivered): released here if the network model did not say when it was
    /// sent ([`sent`](Self::sent)).
    pub fn finished(&mut self, op: u32, start: &mut VecDeque<u32>) {
        self.release(op, start);
    }

    fn release(&mut self, op: u32, start: &mut VecDeque<u32>) {
        // Not in order (or no in-order op at all): nothing to release.
        if self.state.get(op as usize) != Some(&State::Started) {
            return;
        }
        self.state[op as usize] = State::Released;
        let first = start.len();
        for i in self.offsets[op as usize]..self.offsets[op as usize + 1] {
            let c = self.conns[i as usize] as usize;
            let front = self.queues[c].pop_front();
            debug_assert_eq!(front, Some(op), "a running op leads its connections");
            if let Some(&next) = self.queues[c].front() {
                if self.state[next as usize] == State::Waiting
                    && self.leads_all(next)
                    && !start.range(first..).any(|&s| s == next)
                {
                    start.push_back(next);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, Phase};

    fn transfer(s: &mut Schedule, pairs: &[(u32, u32)], in_order: bool) -> u32 {
        let pattern = s.push_pattern(pairs.to_vec());
        let id = s.push(
            OpKind::Transfer { pattern, bytes: 1 },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        s.ops[id.0 as usize].in_order = in_order;
        id.0
    }

    #[test]
    fn messages_on_one_connection_start_in_the_order_they_became_ready() {
        let mut s = Schedule::new(Collective::SendRecv, "t", 3, 1);
        let a = transfer(&mut s, &[(0, 1)], true);
        let b = transfer(&mut s, &[(0, 1)], true);
        let other_way = transfer(&mut s, &[(1, 0)], true);
        let other_peer = transfer(&mut s, &[(0, 2)], true);
        let mut c = Connections::new(&s);
        // b became ready first: it is written first, a waits behind it.
        assert!(c.admit(b));
        assert!(!c.admit(a));
        // The other direction and another receiver are other connections.
        assert!(c.admit(other_way));
        assert!(c.admit(other_peer));
        let mut start = VecDeque::new();
        c.finished(b, &mut start);
        assert_eq!(start, [a]);
        assert!(c.admit(a));
    }

    #[test]
    fn a_batch_waits_until_it_leads_every_connection_it_writes_to() {
        let mut s = Schedule::new(Collective::SendRecv, "t", 3, 1);
        let first = transfer(&mut s, &[(0, 1)], true);
        let second = transfer(&mut s, &[(1, 2)], true);
        let batch = transfer(&mut s, &[(0, 1), (1, 2)], true);
        let mut c = Connections::new(&s);
        assert!(c.admit(first));
        assert!(c.admit(second));
        assert!(!c.admit(batch));
        let mut start = VecDeque::new();
        c.finished(first, &mut start);
        assert!(start.is_empty(), "still behind the second op on (1, 2)");
        c.finished(second, &mut start);
        assert_eq!(start, [batch]);
        assert!(c.admit(batch));
    }

    #[test]
    fn the_next_message_leaves_once_the_last_bytes_of_the_one_before_have_left() {
        let mut s = Schedule::new(Collective::SendRecv, "t", 2, 1);
        let data = transfer(&mut s, &[(0, 1)], true);
        let notify = transfer(&mut s, &[(0, 1)], true);
        let mut c = Connections::new(&s);
        assert!(c.admit(data));
        assert!(!c.admit(notify));
        let mut start = VecDeque::new();
        c.sent(data, &mut start);
        assert_eq!(
            start,
            [notify],
            "released when sent, before the data arrives"
        );
        assert!(c.admit(notify));
        start.clear();
        c.finished(data, &mut start);
        assert!(start.is_empty(), "its delivery releases nothing twice");
    }

    #[test]
    fn a_schedule_without_ordered_ops_admits_everything_and_releases_nothing() {
        let mut s = Schedule::new(Collective::SendRecv, "t", 2, 1);
        let a = transfer(&mut s, &[(0, 1)], false);
        let b = transfer(&mut s, &[(0, 1)], false);
        let mut c = Connections::new(&s);
        assert!(c.admit(a) && c.admit(b));
        let mut start = VecDeque::new();
        c.sent(a, &mut start);
        c.finished(b, &mut start);
        assert!(start.is_empty());
    }

    #[test]
    fn ops_not_in_order_ignore_connections() {
        let mut s = Schedule::new(Collective::SendRecv, "t", 2, 1);
        let ordered = transfer(&mut s, &[(0, 1)], true);
        let free = transfer(&mut s, &[(0, 1)], false);
        let mut c = Connections::new(&s);
        assert!(c.admit(ordered));
        assert!(
            c.admit(free),
            "an ideal transfer shares no queue with a library's message"
        );
    }
}
