//! The all-reduce's rules and algorithms as specifications: the fixed rules' choices, the
//! bytes each algorithm moves, and the order its ranks post their messages in.

#![cfg(test)]

use super::super::exchanges::{head_bytes, Partners, StepPairs};
use super::super::Exchanges;
use super::*;
use AllReduceAlg::*;

fn sys(n: u32) -> System {
    crate::library::testing::cpu_hosts(n)
}

fn req(bytes: u64) -> Request {
    Request {
        collective: Collective::AllReduce,
        bytes,
        root: 0,
        peer: 1,
    }
}

fn forced(a: &str) -> LibraryOptions {
    LibraryOptions {
        algorithm: Some(a.into()),
        ..Default::default()
    }
}

/// Payload bytes each pair direction carries, requests and acknowledgements left out.
fn data_bytes(s: &Schedule) -> u128 {
    crate::library::testing::payload_bytes(s, ACK_BYTES)
        - crate::library::testing::transfer_bytes(s, REQUEST_BYTES)
}

#[test]
fn fixed_rules_at_the_documented_thresholds() {
    // coll_tuned_decision_fixed.c (v4.1.4), commutative operations.
    assert_eq!(allreduce_fixed(2, 4), Ring);
    assert_eq!(allreduce_fixed(2, 4095), RecursiveDoubling);
    assert_eq!(allreduce_fixed(3, 65535), Ring);
    assert_eq!(allreduce_fixed(3, 65536), SegmentedRing);
    assert_eq!(allreduce_fixed(3, 262144), Rabenseifner);
    assert_eq!(allreduce_fixed(4, 8191), RecursiveDoubling);
    assert_eq!(allreduce_fixed(4, 8192), Rabenseifner);
    assert_eq!(allreduce_fixed(7, 16 << 20), Rabenseifner);
    assert_eq!(allreduce_fixed(16, 100), RecursiveDoubling);
    assert_eq!(allreduce_fixed(32, 64), SegmentedRing);
    assert_eq!(allreduce_fixed(100, 262143), RecursiveDoubling);
    assert_eq!(allreduce_fixed(128, 131071), Nonoverlapping);
    assert_eq!(allreduce_fixed(128, 200_000), RecursiveDoubling);
    assert_eq!(allreduce_fixed(1024, 8192), RecursiveDoubling);
    assert_eq!(allreduce_fixed(3000, 3000), SegmentedRing);
    assert_eq!(allreduce_fixed(8192, 10000), SegmentedRing);
    assert_eq!(allreduce_fixed(8192, 20000), RecursiveDoubling);
    assert_eq!(allreduce_fixed(8192, 1 << 20), Rabenseifner);
}

#[test]
fn algorithms_by_name_or_number() {
    assert_eq!(AllReduceAlg::parse("6"), Some(Rabenseifner));
    assert_eq!(AllReduceAlg::parse("Ring"), Some(Ring));
    assert_eq!(AllReduceAlg::parse("7"), None);
    let e = plan(&req(1 << 20), &sys(4), &forced("tree")).unwrap_err();
    assert_eq!(e.field, "collective.algorithm");
}

#[test]
fn every_algorithm_moves_what_it_should() {
    let m: u64 = 16 << 20;
    // Per-rank data sent, over the 4 ranks of a power of two.
    for (alg, per_rank) in [
        ("ring", 2 * m * 3 / 4),
        ("segmented_ring", 2 * m * 3 / 4),
        ("rabenseifner", 2 * (m / 2 + m / 4)),
        ("recursive_doubling", 2 * m),
    ] {
        let p = plan(&req(m), &sys(4), &forced(alg)).unwrap();
        p.schedule.validate().unwrap();
        assert_eq!(data_bytes(&p.schedule), 4 * u128::from(per_rank), "{alg}");
    }
    // basic_linear: n − 1 buffers in, n − 1 out.
    let p = plan(&req(m), &sys(4), &forced("basic_linear")).unwrap();
    assert_eq!(data_bytes(&p.schedule), 6 * u128::from(m));
}

#[test]
fn the_ring_moves_the_same_bytes_rank_by_rank_and_step_by_step() {
    let m: u64 = 64 << 20;
    for n in [4, RANK_BY_RANK_MAX, RANK_BY_RANK_MAX + 1] {
        let p = plan(&req(m), &sys(n), &forced("ring")).unwrap();
        p.schedule.validate().unwrap();
        let block = split_even(m / ELEMENT_BYTES, u64::from(n))[0] * ELEMENT_BYTES;
        let want = u128::from(n) * 2 * u128::from(n - 1) * u128::from(block);
        assert_eq!(data_bytes(&p.schedule), want, "{n} ranks");
    }
}

#[test]
fn rank_by_rank_only_the_last_rank_waits_to_enter() {
    let p = plan(&req(1 << 20), &sys(4), &forced("ring")).unwrap();
    let s = &p.schedule;
    let lags: Vec<usize> = (0..s.ops.len())
        .filter(
            |&i| matches!(s.ops[i].kind, OpKind::Compute { duration, .. } if duration == ENTRY_LAG),
        )
        .collect();
    assert_eq!(lags.len(), 1);
    let firsts: Vec<&crate::collective::Op> = s
        .ops
        .iter()
        .filter(|op| {
            matches!(
                op.kind,
                OpKind::Transfer {
                    bytes: REQUEST_BYTES,
                    ..
                }
            )
        })
        .take(4)
        .collect();
    // The first requests, by rank: the last rank's waits for the lag, the others' for
    // nothing.
    assert_eq!(firsts[3].deps, vec![OpId(lags[0] as u32)]);
    assert!(firsts[..3].iter().all(|op| op.deps.is_empty()));
}

#[test]
fn the_reduce_scatter_posts_a_steps_receive_once_the_receivers_send_before_is_done() {
    // coll/base's ring posts the receive for a block at the top of the iteration, after
    // the blocking send of the iteration before: rank r + 1 answers rank r's request of
    // step k (>= 1) only once its own send of step k - 1 is done, its first before it sends.
    let n = 4usize;
    let p = plan(&req(1 << 20), &sys(n as u32), &forced("ring")).unwrap();
    let s = &p.schedule;
    let bytes_of = |op: &crate::collective::Op| match op.kind {
        OpKind::Transfer { bytes, .. } => Some(bytes),
        _ => None,
    };
    let ids = |b: u64| -> Vec<OpId> {
        (0..s.ops.len())
            .filter(|&i| bytes_of(&s.ops[i]) == Some(b))
            .map(|i| OpId(i as u32))
            .collect()
    };
    let (acks, requests) = (ids(ACK_BYTES), ids(REQUEST_BYTES));
    let block = split_even((1 << 20) / ELEMENT_BYTES, n as u64)[0] * ELEMENT_BYTES;
    let data = ids(block);
    assert_eq!(acks.len(), 2 * (n - 1) * n);
    for k in 0..n - 1 {
        for r in 0..n {
            let ack = &s.ops[acks[k * n + r].0 as usize];
            let mut want = vec![requests[k * n + r]];
            if k > 0 {
                want.push(data[(k - 1) * n + (r + 1) % n]);
            }
            assert_eq!(ack.deps, want, "step {k}, rank {r}");
        }
    }
}

#[test]
fn odd_communicators_fold_ranks_in_and_out() {
    let m: u64 = 1 << 20;
    for alg in ["recursive_doubling", "rabenseifner", "ring", "basic_linear"] {
        for n in [3, 5, 6, 7] {
            let p = plan(&req(m), &sys(n), &forced(alg)).unwrap();
            p.schedule.validate().unwrap();
            let touched: std::collections::BTreeSet<u32> = p
                .schedule
                .patterns
                .iter()
                .flat_map(|pat| pat.pairs.iter().flat_map(|&(a, b)| [a, b]))
                .collect();
            assert_eq!(touched.len() as u32, n, "{alg} on {n}");
        }
    }
}

#[test]
fn library_fallbacks_are_openmpis() {
    // Segmented ring with the segment size the rules pass (0) is the ring.
    let p = plan(&req(1 << 20), &sys(4), &forced("5")).unwrap();
    assert!(p.decision.contains("runs ring"), "{}", p.decision);
    // Fewer elements than ranks: the ring runs recursive doubling.
    let p = plan(&req(8), &sys(4), &forced("ring")).unwrap();
    assert!(
        p.decision.contains("runs recursive_doubling"),
        "{}",
        p.decision
    );
    // Nonoverlapping, the rules' choice on 200 ranks at 1 KiB: the communicator's reduce
    // to rank 0 (binomial by its rules), then its broadcast (binary tree): every other
    // rank sends one vector up and gets one down.
    let p = plan(&req(1024), &sys(200), &LibraryOptions::default()).unwrap();
    assert_eq!(
        p.decision,
        "OpenMPI 4.1 nonoverlapping (fixed rules): reduce binomial to rank 0, then \
         broadcast binary_tree"
    );
    p.schedule.validate().unwrap();
    let data = crate::library::testing::payload_bytes(&p.schedule, ACK_BYTES);
    assert_eq!(data, 2 * 199 * 1024);
}

#[test]
fn the_median_call_is_fast_through_a_lone_pairs_fold_and_slow_from_the_step_after() {
    // Rabenseifner of 4 MiB on five ranks: 0 and 1 swap halves (2 MiB each way), one pair
    // entering: slow a third of the time, so both ways at once in the median call. The
    // halving's first step (2 MiB each way; two pairs, 0-2 coming to it apart) makes it
    // over half: slow heads from there to the call's end, the all-gather's last step
    // (2 MiB) and both 1 MiB steps included.
    let tail = super::super::SLOW_EXCHANGE_TAIL_BYTES;
    let p = plan(&req(4 << 20), &sys(5), &forced("rabenseifner")).unwrap();
    let heads = |bytes: u64| {
        crate::library::testing::transfer_bytes(&p.schedule, bytes - tail)
            / u128::from(bytes - tail)
    };
    assert_eq!(
        heads(2 << 20),
        4,
        "the halving's first and the gather's last, not the fold"
    );
    assert_eq!(heads(1 << 20), 4, "both 1 MiB steps'");
    // Rabenseifner without the chain: the fold's step plays at its own share.
    let expected = LibraryOptions {
        mpi_exchanges: Exchanges::Expected,
        ..forced("rabenseifner")
    };
    let p = plan(&req(4 << 20), &sys(5), &expected).unwrap();
    let fold = head_bytes(
        5,
        2 << 20,
        Exchanges::Expected,
        StepPairs::all(Partners::Entering, 1),
    );
    assert!(crate::library::testing::transfer_bytes(&p.schedule, fold) > 0);
}

#[test]
fn the_step_after_a_fold_waits_for_the_polling_share() {
    // 4 MiB on six ranks: 0-1 and 2-3 fold while 4 and 5 go on, so the halving's second
    // step (1 MiB each way) pairs partners that come to it apart: both its pairs polling
    // (without the fold, no 1 MiB step of rabenseifner's is: its all-gather's is entering).
    let expected = |algorithm: Option<&str>| LibraryOptions {
        algorithm: algorithm.map(Into::into),
        mpi_exchanges: Exchanges::Expected,
        ..Default::default()
    };
    let p = plan(&req(4 << 20), &sys(6), &expected(None)).unwrap();
    let polling = StepPairs::all(Partners::Polling, 2);
    let head = head_bytes(6, 1 << 20, Exchanges::Expected, polling);
    let has = |s: &Schedule, bytes| crate::library::testing::transfer_bytes(s, bytes) > 0;
    assert!(has(&p.schedule, head), "a head of {head} B");
    // Recursive doubling folds 0 into 1 and 2 into 3 while 4 and 5 go on: its second step
    // (1-4, 3-5, the whole 4 MiB each way) too.
    let p = plan(
        &req(4 << 20),
        &sys(6),
        &expected(Some("recursive_doubling")),
    )
    .unwrap();
    let head = head_bytes(6, 4 << 20, Exchanges::Expected, polling);
    assert!(has(&p.schedule, head), "a head of {head} B");
}

#[test]
fn the_ranks_rabenseifners_fold_leaves_out_start_halving_at_once() {
    // Six ranks: 0-1 and 2-3 swap halves and 1, 3 send theirs back while 4 and 5, which
    // the fold leaves out, already run the halving's first step (OpenMPI's sendrecvs do
    // not wait for each other); 0 and 2 meet once both their folds are done.
    use super::super::exchanges::tests::{ancestors, between};
    let p = plan(&req(4 << 20), &sys(6), &forced("rabenseifner")).unwrap();
    let s = &p.schedule;
    s.validate().unwrap();
    assert!(s.ops[between(s, 4, 5)[0]].deps.is_empty());
    let waits = ancestors(s, between(s, 0, 2)[0]);
    let fold = |a, b| between(s, a, b).into_iter().filter(|&o| s.ops[o].step == 0);
    for (a, b) in [(0, 1), (2, 3)] {
        assert!(fold(a, b).all(|o| waits.contains(&o)), "{a}-{b}");
    }
    assert!(between(s, 4, 5).iter().all(|o| !waits.contains(o)));
}
