//! The exchanges' specification: modes, heads, orientation and the pair-by-pair play.

#![cfg(test)]
use super::*;
use crate::collective::{Collective, OpKind};

/// Payload bytes each pair direction carries, requests and acknowledgements left out.
fn data_bytes(s: &Schedule) -> u128 {
    crate::library::testing::payload_bytes(s, ACK_BYTES)
        - crate::library::testing::transfer_bytes(s, REQUEST_BYTES)
}

/// Op `at` of `s` is the way back's rendezvous request, and waits for op `after` alone.
fn assert_back_request(s: &Schedule, at: usize, after: u32, why: &str) {
    let op = &s.ops[at];
    assert!(
        matches!(op.kind, OpKind::Transfer { bytes, .. } if bytes == REQUEST_BYTES),
        "op {at} is a request"
    );
    assert_eq!(op.deps, vec![OpId(after)], "{why}");
}

/// One pairwise exchange of `bytes` each way between ranks 0 and 1 of a communicator of
/// `ranks`, alone in its schedule.
fn one_exchange(ranks: u32, bytes: u64) -> Schedule {
    let mut s = Schedule::new(Collective::AllReduce, "t", ranks, bytes);
    exchange(
        &mut s,
        &[(0, 1)],
        bytes,
        ranks,
        (&CallExchanges::new(Exchanges::Expected), Partners::Entering),
        vec![],
        Phase::ReduceScatter,
        0,
    );
    s
}

#[test]
fn a_slow_exchanges_first_way_goes_from_the_partner_that_posts_first() {
    // Step 1: pairs 0-1 and 2-3 enter alike, coins decide (0, then 1): 0 -> 1 and 3 -> 2
    // go first, so 1 and 2, who send the ways back, post their next requests first. Step
    // 2 meets an early and a late partner in each pair: 2 -> 0 and 1 -> 3 go first,
    // opposite ways (the 2:1 leaves' capture: 2 -> 0 first where 0 -> 1 had gone first).
    let x = CallExchanges::with_coins(Exchanges::OneWayFirst, Coins::Bits(0b10));
    assert_eq!(x.oriented(&[(0, 1), (2, 3)]), vec![(0, 1), (3, 2)]);
    assert_eq!(x.oriented(&[(0, 2), (1, 3)]), vec![(2, 0), (1, 3)]);
    // Partners who crossed both ways at once stand alike again: the next coin decides.
    x.even(&[(0, 2)]);
    assert_eq!(x.oriented(&[(2, 0)]), vec![(2, 0)]);
    let y = CallExchanges::with_coins(Exchanges::OneWayFirst, Coins::Bits(1 << 4));
    let _ = y.oriented(&[(0, 1), (2, 3)]);
    let _ = y.oriented(&[(0, 2), (1, 3)]);
    y.even(&[(0, 2)]);
    assert_eq!(y.oriented(&[(2, 0)]), vec![(0, 2)]);
}

/// Recursive doubling's two slow steps on four ranks, 4 MiB each way, under `x`.
fn doubling(x: &CallExchanges) -> Schedule {
    let mut s = Schedule::new(Collective::AllGather, "t", 4, 4 << 20);
    let mut last = Vec::new();
    for (step, pairs) in [[(0, 1), (2, 3)], [(0, 2), (1, 3)]].iter().enumerate() {
        let partners = Partners::at_step(step as u32);
        let step = step as u32;
        let done = exchange(
            &mut s,
            pairs,
            4 << 20,
            4,
            (x, partners),
            last,
            Phase::AllGather,
            step,
        );
        last = vec![done];
    }
    s
}

#[test]
fn a_call_plays_every_way_its_coins_fall_a_sample_of_many_and_one_way_past_the_limit() {
    // Four coins (two slow steps of two pairs): all sixteen ways. In a quarter of them the
    // second step's first ways cross from ranks 0-1 to 2-3 together or back together
    // (partners that stand alike in both pairs, and the coins send them the same way);
    // in the others they go opposite ways, as the 2:1 leaves' capture shows.
    let (first, others) = oriented_ways(Exchanges::OneWayFirst, 4, doubling);
    assert_eq!(others.len(), 15);
    let head = (4 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
    let together = std::iter::once(&first)
        .chain(&others)
        .filter(|s| {
            let firsts: Vec<bool> = s
                .ops
                .iter()
                .filter(|o| o.step == 1)
                .filter_map(|o| match o.kind {
                    OpKind::Transfer { pattern, bytes } if bytes == head => Some(pattern),
                    _ => None,
                })
                .flat_map(|p| s.patterns[p.0 as usize].pairs.to_vec())
                .map(|(from, _)| from < 2)
                .collect();
            assert_eq!(firsts.len(), 2);
            firsts[0] == firsts[1]
        })
        .count();
    assert_eq!(together, 4);
    // Both ways at once: nothing to orient, one way.
    let (_, none) = oriented_ways(Exchanges::BothWays, 4, doubling);
    assert!(none.is_empty());
    // Past the communicators a call is played every way for: one way.
    let (_, none) = oriented_ways(Exchanges::OneWayFirst, ORIENTED_RANKS_MAX + 1, doubling);
    assert!(none.is_empty());
}

#[test]
fn rendezvous_exchanges_start_the_second_direction_after_the_expected_head() {
    // Two ranks: the way back starts once the first way has all but the tail delivered.
    let s = one_exchange(2, 1 << 20);
    let head = (1 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
    assert!(matches!(s.ops[2].kind, OpKind::Transfer { bytes, .. } if bytes == head));
    assert_back_request(
        &s,
        3,
        2,
        "two ranks: the way back waits for all but the tail",
    );
    assert_eq!(data_bytes(&s), 2 << 20);
    // Four ranks: the way back starts once the first way has delivered its expected head.
    let s = one_exchange(4, 1 << 20);
    let head = head_bytes(
        4,
        1 << 20,
        Exchanges::Expected,
        StepPairs::all(Partners::Entering, 1),
    );
    assert!(matches!(s.ops[2].kind, OpKind::Transfer { bytes, .. } if bytes == head));
    assert_back_request(&s, 3, 2, "the way back waits for the head");
    assert_eq!(
        data_bytes(&s),
        2 << 20,
        "each way carries the whole message once"
    );
    let s = one_exchange(2, 16 << 10);
    assert_eq!(s.ops.len(), 1, "eager messages cross at once");
}

#[test]
fn the_median_call_runs_slow_from_the_step_by_which_half_the_calls_have_gone_slow() {
    // One pair entering runs slow 34% of the time: fast in the median call. A second such
    // step makes it 57% that one of the two ran slow: the median call is slow from there,
    // and stays slow through a third step that alone would run fast.
    let x = CallExchanges::new(Exchanges::Median);
    let one = StepPairs::all(Partners::Entering, 1);
    let slow_head = (4 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
    let head = |step: u32| x.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, step));
    // Exchanges within the tail are never slow: not a step of the chain.
    assert_eq!(
        x.head_bytes(4, 80 << 10, one, (Phase::AllGather, 9)),
        0,
        "within the tail"
    );
    assert_eq!(head(0), 0, "34% slow");
    assert_eq!(head(0), 0, "the same step again: counted once");
    assert_eq!(head(1), slow_head, "57% slow by now");
    assert_eq!(head(2), slow_head, "slow to the call's end");
    // Each call its own chain; two ranks run slow whatever the chain.
    let y = CallExchanges::new(Exchanges::Median);
    assert_eq!(y.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, 1)), 0);
    assert_eq!(
        y.head_bytes(2, 4 << 20, one, (Phase::AllGather, 0)),
        slow_head
    );
    // The expected mode keeps each step at its own share.
    let e = CallExchanges::new(Exchanges::Expected);
    let expected = head_bytes(4, 4 << 20, Exchanges::Expected, one);
    for step in 0..3 {
        assert_eq!(
            e.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, step)),
            expected
        );
    }
}

#[test]
fn partners_that_come_to_a_step_apart_run_it_at_the_polling_share() {
    // Rabenseifner on six ranks folds 0-1 and 2-3 into 0 and 2 while 4 and 5 go on: the
    // halving's first step pairs 0-2 (both folded) and 4-5 (neither): alike, entering; its
    // second pairs 0-4 and 2-5, whose partners come to it apart: polling.
    let mut h = Histories::new(6, [0, 2]);
    let entering = StepPairs::all(Partners::Entering, 2);
    let polling = StepPairs::all(Partners::Polling, 2);
    assert_eq!(h.step(&[(0, 2), (4, 5)], Partners::Entering), entering);
    assert_eq!(h.step(&[(0, 4), (2, 5)], Partners::Entering), polling);
    // After an exchange its partners are alike.
    assert_eq!(h.step(&[(0, 4), (2, 5)], Partners::Entering), entering);
    // With no fold every rank does the same: recursive doubling on four ranks.
    let mut h = Histories::new(4, []);
    assert_eq!(h.step(&[(0, 1), (2, 3)], Partners::Entering), entering);
    assert_eq!(h.step(&[(0, 2), (1, 3)], Partners::Entering), entering);
}

#[test]
fn the_expected_head_is_the_slow_modes_head_times_how_often_the_step_ran_slow() {
    // The slow mode delivers all but the measured tail before the way back starts. Partners
    // entering together: 181 of 320 four-rank repetitions (two pairs at once) ran slow.
    // Partners that had just waited on the call's previous step: 95 of 106 captured
    // exchanges, counted pair by pair.
    let two_pairs_entering = 181.0 / 320.0;
    let one_pair_entering = 1.0 - (1.0f64 - two_pairs_entering).sqrt();
    let one_pair_polling = 95.0 / 106.0;
    for (partners, step_pairs, share) in [
        (Partners::Entering, 2, two_pairs_entering),
        (Partners::Entering, 1, one_pair_entering),
        (Partners::Polling, 1, one_pair_polling),
        (Partners::Polling, 2, 1.0 - (1.0 - one_pair_polling).powi(2)),
    ] {
        for bytes in [128u64 << 10, 256 << 10, 1 << 20, 16 << 20] {
            let slow_head = bytes - SLOW_EXCHANGE_TAIL_BYTES;
            let expected = (slow_head as f64 * share).round() as u64;
            let step = StepPairs::all(partners, step_pairs);
            let head = head_bytes(4, bytes, Exchanges::Expected, step);
            assert_eq!(
                head, expected,
                "{bytes} B, {partners:?}, {step_pairs} pairs"
            );
            assert_eq!(
                head_bytes(2, bytes, Exchanges::Expected, StepPairs::all(partners, 1)),
                slow_head,
                "two ranks: the slow mode every time"
            );
        }
    }
    // A step is as slow as its slowest pair: eight ranks' four pairs ran slow in 120 of
    // 150 repetitions, which the two-pair share says within two points.
    let four_pairs = slow_share(StepPairs::all(Partners::Entering, 4));
    assert!((four_pairs - 120.0 / 150.0).abs() < 0.02, "{four_pairs}");
    assert!(slow_share(StepPairs::all(Partners::Entering, 8)) > four_pairs);
    // A forced mode holds whatever the partners did and however many pairs.
    for partners in [Partners::Entering, Partners::Polling] {
        let two = StepPairs::all(partners, 2);
        assert_eq!(head_bytes(4, 1 << 20, Exchanges::BothWays, two), 0);
        assert_eq!(
            head_bytes(
                8,
                1 << 20,
                Exchanges::OneWayFirst,
                StepPairs::all(partners, 4)
            ),
            (1 << 20) - SLOW_EXCHANGE_TAIL_BYTES
        );
    }
    // A message just above the eager limit fits in the tail: both ways at once, on two
    // ranks too.
    assert_eq!(
        head_bytes(
            4,
            80 << 10,
            Exchanges::Expected,
            StepPairs::all(Partners::Polling, 2)
        ),
        0
    );
    assert_eq!(
        head_bytes(
            2,
            80 << 10,
            Exchanges::Expected,
            StepPairs::all(Partners::Entering, 1)
        ),
        0
    );
    let s = one_exchange(4, 80 << 10);
    assert_back_request(&s, 2, 1, "the way back waits only for the answer");
    assert_eq!(data_bytes(&s), 2 * (80 << 10));
}

/// Every op `op` waits for, directly or not.
pub(in crate::library::mpi) fn ancestors(
    s: &Schedule,
    op: usize,
) -> std::collections::BTreeSet<usize> {
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![op];
    while let Some(o) = todo.pop() {
        for d in &s.ops[o].deps {
            if seen.insert(d.0 as usize) {
                todo.push(d.0 as usize);
            }
        }
    }
    seen
}

/// The ops that move bytes between ranks `a` and `b`, either way, in order.
pub(in crate::library::mpi) fn between(s: &Schedule, a: Endpoint, b: Endpoint) -> Vec<usize> {
    (0..s.ops.len())
        .filter(|&i| match s.ops[i].kind {
            OpKind::Transfer { pattern, .. } => s.patterns[pattern.0 as usize]
                .pairs
                .iter()
                .any(|&p| p == (a, b) || p == (b, a)),
            _ => false,
        })
        .collect()
}

#[test]
fn pairs_exchange_once_both_partners_are_ready_not_once_the_whole_step_is() {
    // Three steps of recursive doubling on eight ranks, pair by pair: the second step's
    // pair 0-2 waits for 0-1 and 2-3 (its partners' first steps), never for 4-5 or 6-7.
    let x = CallExchanges::new(Exchanges::Median);
    let mut s = Schedule::new(Collective::AllGather, "t", 8, 1 << 20);
    let mut ready = Ready::new(8);
    for (step, distance) in [1u32, 2, 4].into_iter().enumerate() {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..8)
            .filter(|r| r & distance == 0)
            .map(|r| (r, r ^ distance))
            .collect();
        let mix = StepPairs::all(Partners::at_step(step as u32), pairs.len() as u32);
        let reduced = Some(1 << 20);
        exchanges_pair_by_pair(
            &mut s,
            &mut ready,
            (&pairs, mix),
            1 << 20,
            8,
            &x,
            reduced,
            Phase::ReduceScatter,
            step as u32,
        );
    }
    s.validate().unwrap();
    let first_of_0_2 = between(&s, 0, 2)[0];
    let waits = ancestors(&s, first_of_0_2);
    for (a, b) in [(0, 1), (2, 3)] {
        assert!(
            between(&s, a, b).iter().all(|o| waits.contains(o)),
            "{a}-{b}"
        );
    }
    for (a, b) in [(4, 5), (6, 7)] {
        assert!(
            between(&s, a, b).iter().all(|o| !waits.contains(o)),
            "{a}-{b}"
        );
    }
    // The last step's pair 0-4 waits for everything 0 and 4 did, so for all four pairs
    // of the first step, but not for 1-3, which it never met.
    let waits = ancestors(&s, between(&s, 0, 4)[0]);
    assert!(between(&s, 4, 5).iter().all(|o| waits.contains(o)));
    assert!(between(&s, 1, 3).iter().all(|o| !waits.contains(o)));
    // Both partners reduce what they received: one reduction of two ranks per pair and step.
    let reductions = s
        .ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Reduce { endpoints: 2, .. }))
        .count();
    assert_eq!(reductions, 3 * 4);
}
