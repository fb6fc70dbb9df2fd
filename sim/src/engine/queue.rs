//! The event queue: events ordered by (time, insertion sequence), with cancellation handles.
//!
//! Ties in time are broken by a sequence number assigned at scheduling, so events at the same
//! time come out first-in first-out. Cancellation is lazy: a cancelled entry stays in the heap
//! and is skipped when it reaches the top. Handles carry the sequence number, which is never
//! reused, so cancelling a handle whose event already fired (or was already cancelled) is a
//! harmless no-op.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::SimTime;

/// Identifies one scheduled event, for cancelling it.
#[must_use = "an event handle is the only way to cancel the event; drop it explicitly if unused"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventHandle(u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("cannot schedule an event at {at} before the current time {now}")]
    InThePast { at: SimTime, now: SimTime },
}

/// A priority queue of events of type `E`, delivered in (time, sequence) order.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    /// Payloads indexed by `seq - base_seq`; `None` once delivered or cancelled.
    payloads: std::collections::VecDeque<Option<E>>,
    base_seq: u64,
    next_seq: u64,
    now: SimTime,
    live: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            payloads: Default::default(),
            base_seq: 0,
            next_seq: 0,
            now: SimTime::ZERO,
            live: 0,
        }
    }

    /// The time of the last delivered event (zero before the first).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Number of scheduled, not yet delivered or cancelled events.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Schedules `event` at absolute time `at` (which may equal `now`).
    pub fn schedule(&mut self, at: SimTime, event: E) -> Result<EventHandle, ScheduleError> {
        if at < self.now {
            return Err(ScheduleError::InThePast { at, now: self.now });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((at.as_ps(), seq)));
        self.payloads.push_back(Some(event));
        self.live += 1;
        Ok(EventHandle(seq))
    }

    /// Schedules `event` `delay` after now.
    pub fn schedule_in(&mut self, delay: SimTime, event: E) -> EventHandle {
        let at = self.now.saturating_add(delay);
        self.schedule(at, event)
            .expect("now + delay is never in the past")
    }

    /// Cancels a scheduled event. Returns true if it was still pending.
    pub fn cancel(&mut self, handle: EventHandle) -> bool {
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

    /// Removes and returns the next event, advancing `now` to its time.
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

    /// The time of the next pending event without removing it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_come_out_in_scheduling_order() {
        let mut q = EventQueue::new();
        let _ = q.schedule(SimTime::from_ns(5), "b").unwrap();
        let _ = q.schedule(SimTime::from_ns(1), "a").unwrap();
        let _ = q.schedule(SimTime::from_ns(5), "c").unwrap();
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn cancelling_is_always_safe() {
        let mut q = EventQueue::new();
        let h = q.schedule(SimTime::from_ns(1), 1).unwrap();
        let h2 = q.schedule(SimTime::from_ns(2), 2).unwrap();
        assert!(q.cancel(h2));
        assert!(!q.cancel(h2), "second cancel is a no-op");
        assert_eq!(q.pop(), Some((SimTime::from_ns(1), 1)));
        assert!(!q.cancel(h), "cancelling a delivered event is a no-op");
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn scheduling_in_the_past_is_an_error() {
        let mut q = EventQueue::new();
        let _ = q.schedule(SimTime::from_ns(10), ()).unwrap();
        q.pop();
        assert!(matches!(
            q.schedule(SimTime::from_ns(3), ()),
            Err(ScheduleError::InThePast { .. })
        ));
    }
}
