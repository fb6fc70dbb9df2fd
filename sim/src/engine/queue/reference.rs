//! The previous implementation, a binary heap with lazy cancellation, kept as the slow and
//! obviously correct model the radix heap must match exactly (property tests) and beat
//! (benchmark `event_queue`). Not part of the supported API.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::{ScheduleError, SimTime};

/// A handle of the reference queue: the event's sequence number, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(u64);

/// Events ordered by (time, sequence number) in a binary heap; cancelled entries stay in the
/// heap and are skipped when they reach the top.
#[derive(Debug)]
pub struct BinaryHeapQueue<E> {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    /// Payloads indexed by `seq - base_seq`; `None` once delivered or cancelled.
    payloads: VecDeque<Option<E>>,
    base_seq: u64,
    next_seq: u64,
    now: SimTime,
    live: usize,
}

impl<E> Default for BinaryHeapQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> BinaryHeapQueue<E> {
    pub fn new() -> Self {
        BinaryHeapQueue {
            heap: BinaryHeap::new(),
            payloads: VecDeque::new(),
            base_seq: 0,
            next_seq: 0,
            now: SimTime::ZERO,
            live: 0,
        }
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn schedule(&mut self, at: SimTime, event: E) -> Result<Handle, ScheduleError> {
        if at < self.now {
            return Err(ScheduleError::InThePast { at, now: self.now });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((at.as_ps(), seq)));
        self.payloads.push_back(Some(event));
        self.live += 1;
        Ok(Handle(seq))
    }

    pub fn schedule_in(&mut self, delay: SimTime, event: E) -> Handle {
        let at = self.now.saturating_add(delay);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((at.as_ps(), seq)));
        self.payloads.push_back(Some(event));
        self.live += 1;
        Handle(seq)
    }

    pub fn cancel(&mut self, handle: Handle) -> bool {
        let Some(idx) = handle.0.checked_sub(self.base_seq) else {
            return false;
        };
        match self.payloads.get_mut(idx as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        while let Some(Reverse((t, seq))) = self.heap.pop() {
            // Entries below `base_seq` were cancelled and compacted away.
            let Some(idx) = seq.checked_sub(self.base_seq) else {
                continue;
            };
            if let Some(ev) = self.payloads[idx as usize].take() {
                self.live -= 1;
                self.now = SimTime::from_ps(t);
                self.compact();
                return Some((self.now, ev));
            }
        }
        None
    }

    pub fn peek_time(&mut self) -> Option<SimTime> {
        while let Some(&Reverse((t, seq))) = self.heap.peek() {
            if seq
                .checked_sub(self.base_seq)
                .is_some_and(|i| self.payloads[i as usize].is_some())
            {
                return Some(SimTime::from_ps(t));
            }
            self.heap.pop();
        }
        None
    }

    fn compact(&mut self) {
        while let Some(None) = self.payloads.front() {
            self.payloads.pop_front();
            self.base_seq += 1;
        }
    }
}
