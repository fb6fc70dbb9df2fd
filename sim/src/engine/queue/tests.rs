#![cfg(test)]

use super::reference::{BinaryHeapQueue, Handle};
use super::*;
use proptest::prelude::*;

fn drain<E>(q: &mut EventQueue<E>) -> Vec<(SimTime, E)> {
    std::iter::from_fn(|| q.pop()).collect()
}

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

#[test]
fn same_time_events_stay_fifo_across_redistributions() {
    // Three interleaved streams at times far apart in bit patterns, so every event moves
    // through several buckets before it reaches the front.
    let times_ps = [1u64 << 40, (1 << 40) + 3, 1 << 20];
    let mut q = EventQueue::new();
    for i in 0..300u32 {
        let _ = q
            .schedule(SimTime::from_ps(times_ps[i as usize % 3]), i)
            .unwrap();
    }
    let out = drain(&mut q);
    let mut expected: Vec<(SimTime, u32)> = (0..300)
        .map(|i| (SimTime::from_ps(times_ps[i as usize % 3]), i))
        .collect();
    expected.sort_by_key(|&(t, i)| (t, i));
    assert_eq!(out, expected);
}

#[test]
fn events_scheduled_at_now_while_delivering_come_after_earlier_ones() {
    let mut q = EventQueue::new();
    let _ = q.schedule(SimTime::from_ns(7), 0).unwrap();
    let _ = q.schedule(SimTime::from_ns(7), 1).unwrap();
    assert_eq!(q.pop(), Some((SimTime::from_ns(7), 0)));
    let _ = q.schedule_in(SimTime::ZERO, 2);
    assert_eq!(q.pop(), Some((SimTime::from_ns(7), 1)));
    assert_eq!(q.pop(), Some((SimTime::from_ns(7), 2)));
}

#[test]
fn peeking_then_scheduling_before_the_peeked_event_delivers_the_new_one_first() {
    let mut q = EventQueue::new();
    let _ = q.schedule(SimTime::from_ns(10), "early").unwrap();
    let _ = q.schedule(SimTime::from_us(900), "late").unwrap();
    assert_eq!(q.pop(), Some((SimTime::from_ns(10), "early")));
    assert_eq!(q.peek_time(), Some(SimTime::from_us(900)));
    let _ = q.schedule(SimTime::from_ns(11), "inserted").unwrap();
    assert_eq!(q.peek_time(), Some(SimTime::from_ns(11)));
    assert_eq!(q.pop(), Some((SimTime::from_ns(11), "inserted")));
    assert_eq!(q.pop(), Some((SimTime::from_us(900), "late")));
}

#[test]
fn peek_skips_cancelled_events() {
    let mut q = EventQueue::new();
    let a = q.schedule(SimTime::from_ns(3), 'a').unwrap();
    let _ = q.schedule(SimTime::from_ns(8), 'b').unwrap();
    assert_eq!(q.peek_time(), Some(SimTime::from_ns(3)));
    assert!(q.cancel(a));
    assert_eq!(q.peek_time(), Some(SimTime::from_ns(8)));
    assert_eq!(q.len(), 1);
}

#[test]
fn a_stale_handle_does_not_cancel_the_event_that_reused_its_slot() {
    let mut q = EventQueue::new();
    let old = q.schedule(SimTime::from_ns(1), "old").unwrap();
    assert_eq!(q.pop(), Some((SimTime::from_ns(1), "old")));
    let new = q.schedule(SimTime::from_ns(2), "new").unwrap();
    assert_eq!(new.slot, old.slot, "the delivered event's slot is reused");
    assert!(!q.cancel(old));
    assert_eq!(q.len(), 1);
    assert_eq!(q.pop(), Some((SimTime::from_ns(2), "new")));
    let cancelled = q.schedule(SimTime::from_ns(3), "cancelled").unwrap();
    assert!(q.cancel(cancelled));
    assert_eq!(q.pop(), None, "the tombstone surfaces and frees its slot");
    let newer = q.schedule(SimTime::from_ns(4), "newer").unwrap();
    assert_eq!(newer.slot, cancelled.slot);
    assert!(!q.cancel(cancelled));
    assert_eq!(q.pop(), Some((SimTime::from_ns(4), "newer")));
}

#[test]
fn a_slot_whose_generation_would_wrap_is_retired() {
    let mut slots = SlotTable::default();
    let (slot, _) = slots.acquire();
    slots.generations[slot as usize] = u32::MAX;
    let last = EventHandle {
        slot,
        generation: u32::MAX,
    };
    assert!(slots.is_pending(last));
    slots.release_delivered(slot, u32::MAX);
    assert!(!slots.is_pending(last));
    assert!(slots.free.is_empty(), "the wrapped slot is not reused");
    let (next, generation) = slots.acquire();
    assert_ne!(next, slot);
    assert_eq!(generation, 1);
}

#[test]
fn constant_rescheduling_keeps_memory_bounded() {
    // A flow model that moves its completion event on every rate change: one far event
    // rescheduled 100 000 times while nearby events are delivered.
    let mut q = EventQueue::new();
    let mut completion = q.schedule(SimTime::from_us(1_000_000), 0u64).unwrap();
    for step in 1..=100_000u64 {
        let _ = q.schedule_in(SimTime::from_ns(1), step);
        assert!(q.cancel(completion));
        completion = q.schedule_in(SimTime::from_us(1_000_000 + step), 0);
        assert_eq!(q.pop().map(|(_, e)| e), Some(step));
    }
    assert_eq!(q.len(), 1);
    assert!(q.stored_entries() <= 2 * MIN_TOMBSTONES_BEFORE_SWEEP + 2);
    assert!(
        q.slots.generations.len() <= 2 * MIN_TOMBSTONES_BEFORE_SWEEP + 3,
        "slots are reused"
    );
    assert_eq!(q.pop().map(|(_, e)| e), Some(0));
    assert!(q.is_empty());
}

#[test]
fn memory_follows_pending_events_not_past_bucket_peaks() {
    // Hold model: 20 000 pending events, each delivered one rescheduled up to 1 µs later.
    // Every bucket in turn holds a large share of them; none may keep that capacity.
    let pending = 20_000u64;
    let mut q = EventQueue::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut increment_ps = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 1_000_000
    };
    for k in 0..pending {
        let _ = q.schedule(SimTime::from_ps(increment_ps()), k).unwrap();
    }
    for _ in 0..200_000 {
        let (now, k) = q.pop().unwrap();
        let _ = q
            .schedule(now + SimTime::from_ps(increment_ps()), k)
            .unwrap();
    }
    assert_eq!(q.stored_entries(), pending as usize);
    let slack = UPPER_BUCKETS * CHUNK_ENTRIES + DIGIT_VALUES * EXACT_KEPT_CAPACITY;
    assert!(
        q.stored_capacity() <= pending as usize + slack,
        "capacity {} for {pending} events",
        q.stored_capacity()
    );
}

#[test]
fn times_near_the_end_of_time_are_ordered() {
    let mut q = EventQueue::new();
    let _ = q.schedule(SimTime::MAX, 2).unwrap();
    let _ = q.schedule(SimTime::from_ps(u64::MAX - 1), 1).unwrap();
    let _ = q.schedule_in(SimTime::MAX, 3);
    assert_eq!(q.pop(), Some((SimTime::from_ps(u64::MAX - 1), 1)));
    assert_eq!(q.pop(), Some((SimTime::MAX, 2)));
    assert_eq!(q.pop(), Some((SimTime::MAX, 3)));
    assert_eq!(q.pop(), None);
    assert_eq!(q.now(), SimTime::MAX);
}

/// One step of a random workload, applied to both queues.
#[derive(Debug, Clone)]
enum Op {
    /// Schedule at `now + delay_ps` (absolute `schedule`).
    At {
        delay_ps: u64,
    },
    /// Schedule `delay_ps` after now (`schedule_in`).
    In {
        delay_ps: u64,
    },
    /// Schedule `before_ps` before now (an error unless zero).
    Past {
        before_ps: u64,
    },
    /// Cancel the `pick`-th handle issued so far (modulo their number), stale or not.
    Cancel {
        pick: usize,
    },
    Pop,
    Peek,
}

fn delay_ps() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..4u64,                  // many exact duplicates
        3 => 0..1_000u64,
        2 => 0..(1u64 << 40),
        1 => Just(u64::MAX),           // saturates at the end of time
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => delay_ps().prop_map(|delay_ps| Op::At { delay_ps }),
        3 => delay_ps().prop_map(|delay_ps| Op::In { delay_ps }),
        1 => (0..3u64).prop_map(|before_ps| Op::Past { before_ps }),
        3 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        6 => Just(Op::Pop),
        1 => Just(Op::Peek),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn radix_heap_matches_the_binary_heap_reference(ops in prop::collection::vec(op(), 0..400)) {
        let mut fast = EventQueue::new();
        let mut slow = BinaryHeapQueue::new();
        let mut handles: Vec<(EventHandle, Handle)> = Vec::new();
        for (id, op) in ops.into_iter().enumerate() {
            match op {
                Op::At { delay_ps } => {
                    let at = fast.now().saturating_add(SimTime::from_ps(delay_ps));
                    let f = fast.schedule(at, id).unwrap();
                    let s = slow.schedule(at, id).unwrap();
                    handles.push((f, s));
                }
                Op::In { delay_ps } => {
                    let delay = SimTime::from_ps(delay_ps);
                    handles.push((fast.schedule_in(delay, id), slow.schedule_in(delay, id)));
                }
                Op::Past { before_ps } => {
                    let at = SimTime::from_ps(fast.now().as_ps().saturating_sub(before_ps));
                    match (fast.schedule(at, id), slow.schedule(at, id)) {
                        (Ok(f), Ok(s)) => handles.push((f, s)),
                        (Err(f), Err(s)) => prop_assert_eq!(f, s),
                        (f, s) => prop_assert!(false, "fast {:?} vs reference {:?}", f, s),
                    }
                }
                Op::Cancel { pick } => {
                    if !handles.is_empty() {
                        let (f, s) = handles[pick % handles.len()];
                        prop_assert_eq!(fast.cancel(f), slow.cancel(s));
                    }
                }
                Op::Pop => prop_assert_eq!(fast.pop(), slow.pop()),
                Op::Peek => prop_assert_eq!(fast.peek_time(), slow.peek_time()),
            }
            prop_assert_eq!(fast.len(), slow.len());
            prop_assert_eq!(fast.is_empty(), slow.is_empty());
            prop_assert_eq!(fast.now(), slow.now());
        }
        prop_assert_eq!(drain(&mut fast), std::iter::from_fn(|| slow.pop()).collect::<Vec<_>>());
        prop_assert!(fast.is_empty());
    }

    #[test]
    fn equal_times_come_out_in_scheduling_order(
        times_ps in prop::collection::vec(prop_oneof![0..3u64, 0..(1u64 << 50)], 1..300),
    ) {
        let mut q = EventQueue::new();
        for (i, &t) in times_ps.iter().enumerate() {
            let _ = q.schedule(SimTime::from_ps(t), i).unwrap();
        }
        let out = drain(&mut q);
        let mut expected: Vec<(SimTime, usize)> =
            times_ps.iter().enumerate().map(|(i, &t)| (SimTime::from_ps(t), i)).collect();
        expected.sort();
        prop_assert_eq!(out, expected);
    }
}
