//! gloo's schedules against what its sources say: segments, orders of posts, bytes on the
//! wire, copies, and what the plan refuses.
#![cfg(test)]

use super::ring::longest_segment;
use super::*;

fn payload_bytes(s: &Schedule) -> u128 {
    crate::library::testing::payload_bytes(s, PREAMBLE_BYTES)
}

#[test]
fn all_reduce_segments_follow_gloo_allreduce_cc() {
    // At least two segments per rank, a multiple of the ranks, at most 1 MiB each.
    assert_eq!(ring_segments(256 << 10, 4), (8, 32 << 10));
    assert_eq!(ring_segments(16 << 20, 4), (16, 1 << 20));
    assert_eq!(ring_segments(16 << 20, 3), (18, 932_068));
    assert_eq!(ring_segments(100, 4), (8, 16));
}

#[test]
fn the_longest_segment_of_an_iteration_is_the_max_over_every_ranks_segment() {
    // Slow reference: rank r sends segment ((r + first) * per_rank + i) mod segments.
    for (bytes, n) in [
        (100u64, 4u64),
        (1000, 3),
        (4 << 20, 4),
        (5_000_011, 7),
        (40, 8),
    ] {
        let (segments, seg) = ring_segments(bytes, n);
        let per_rank = segments / n;
        let len = |k: u64| bytes.saturating_sub(k * seg).min(seg);
        for first in [0, 1] {
            for i in 0..segments - per_rank {
                let every = (0..n)
                    .map(|r| len(((r + first) * per_rank + i) % segments))
                    .max()
                    .unwrap();
                assert_eq!(
                    longest_segment(bytes, per_rank, seg, i),
                    every,
                    "{bytes} B, {n}"
                );
            }
        }
    }
}

#[test]
fn ring_all_reduce_moves_two_n_minus_one_over_n_of_the_buffer_per_rank() {
    for (bytes, n) in [
        (256u64 << 10, 4u32),
        (16 << 20, 4),
        (48 << 20, 6),
        (64 << 20, 8),
    ] {
        let s = all_reduce(bytes, n);
        s.validate().unwrap();
        let per_rank = payload_bytes(&s) / u128::from(n);
        assert_eq!(
            per_rank,
            u128::from(2 * bytes * u64::from(n - 1) / u64::from(n))
        );
    }
}

#[test]
fn ring_messages_wait_for_their_notification_and_leave_the_socket_in_order() {
    // Rank by rank: every payload waits for its receiver's notification, and for the
    // previous payload on its connection (or, across the two loops, for its write).
    let s = all_reduce(4 << 20, 4);
    let mut previous: std::collections::BTreeMap<(Endpoint, Endpoint), usize> = Default::default();
    let mut payloads = 0;
    for (i, op) in s.ops.iter().enumerate() {
        let OpKind::Transfer { pattern, bytes } = op.kind else {
            continue;
        };
        if bytes == PREAMBLE_BYTES {
            continue;
        }
        payloads += 1;
        let dep = &s.ops[op.deps[0].0 as usize];
        assert!(
            matches!(
                dep.kind,
                OpKind::Transfer {
                    bytes: PREAMBLE_BYTES,
                    ..
                }
            ),
            "op {i}"
        );
        let pairs = &s.patterns[pattern.0 as usize].pairs;
        assert_eq!(pairs.len(), 1, "op {i} is one rank's segment");
        if let Some(&p) = previous.get(&pairs[0]) {
            let follows = op.deps.iter().any(|d| {
                d.0 as usize == p || s.ops[d.0 as usize].pushed_of == Some(OpId(p as u32))
            });
            assert!(follows, "op {i} after op {p} on {:?}", pairs[0]);
        }
        previous.insert(pairs[0], i);
    }
    // 8 segments of 512 KiB, 2 per rank: 6 iterations per loop, two loops, four ranks.
    assert_eq!(payloads, 6 * 2 * 4);
}

#[test]
fn a_ranks_all_gather_loop_starts_when_its_own_reduce_scatter_is_done() {
    // gloo's ranks run their two loops on their own (`allreduce.cc` has no barrier between
    // them): the first all-gather payload waits for its own rank's reduce-scatter and, through
    // the ring, for what fed it, but not for every reduction of the call, as a lockstep play
    // (the all-gather after every rank's reduce-scatter) would have it. On 4 ranks of 8
    // segments, rank 2's last reduction feeds nothing rank 0 sends first.
    let s = all_reduce(256 << 10, 4);
    s.validate().unwrap();
    let last_reduce: Vec<usize> = (0..s.ops.len())
        .filter(|&i| matches!(s.ops[i].kind, OpKind::Reduce { .. }))
        .collect();
    let first_gather = (0..s.ops.len())
        .find(|&i| {
            s.ops[i].phase == Phase::AllGather
                && matches!(s.ops[i].kind, OpKind::Transfer { bytes, .. } if bytes != PREAMBLE_BYTES)
        })
        .unwrap();
    // Everything the first all-gather payload waits for, transitively.
    let mut seen = vec![false; s.ops.len()];
    let mut stack = vec![first_gather];
    while let Some(i) = stack.pop() {
        for d in &s.ops[i].deps {
            if !seen[d.0 as usize] {
                seen[d.0 as usize] = true;
                stack.push(d.0 as usize);
            }
        }
    }
    let waited = last_reduce.iter().filter(|&&i| seen[i]).count();
    assert!(
        waited < last_reduce.len(),
        "the first all-gather payload waits for {waited} of {} reductions",
        last_reduce.len()
    );
}

#[test]
fn an_all_reduce_iterations_receivers_share_a_wake_up_and_reduces_receivers_do_not() {
    // The all-reduce keeps one wake-up per iteration, as when each was one batch: its payloads
    // carry their iteration's group (one per loop and iteration, 4 ranks each). reduce's
    // receivers each draw their own.
    let groups = |s: &Schedule| -> Vec<Option<u32>> {
        s.ops
            .iter()
            .filter(
                |op| matches!(op.kind, OpKind::Transfer { bytes, .. } if bytes != PREAMBLE_BYTES),
            )
            .map(|op| op.wake_up_group)
            .collect()
    };
    let all_reduce_groups = groups(&all_reduce(256 << 10, 4));
    assert_eq!(all_reduce_groups.len(), 48);
    let mut distinct: std::collections::BTreeMap<u32, usize> = Default::default();
    for g in &all_reduce_groups {
        *distinct
            .entry(g.expect("every payload in a group"))
            .or_default() += 1;
    }
    assert_eq!(distinct.len(), 12, "6 iterations in each of the two loops");
    assert!(distinct.values().all(|&members| members == 4));
    assert!(groups(&reduce(256 << 10, 4, 0)).iter().all(Option::is_none));
}

#[test]
fn past_the_by_rank_limit_the_all_reduce_runs_in_lockstep_batches() {
    let n = ALL_REDUCE_BY_RANK_MAX + 1;
    let s = all_reduce(256 << 10, n);
    s.validate().unwrap();
    let payload = s
        .ops
        .iter()
        .find_map(|op| match op.kind {
            OpKind::Transfer { pattern, bytes } if bytes != PREAMBLE_BYTES => {
                Some(s.patterns[pattern.0 as usize].pairs.len())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(payload, n as usize, "one batch of every rank's segment");
    let by_rank = all_reduce(256 << 10, ALL_REDUCE_BY_RANK_MAX);
    assert!(by_rank.patterns.iter().all(|p| p.pairs.len() == 1));
}

#[test]
fn reduce_segments_as_reduce_cc_cuts_them() {
    // min(⌈M / 2n⌉, 1 MiB) rounded to elements; their count a multiple of n, at least 2n.
    assert_eq!(reduce_segments(256 << 10, 4), (8, 32 << 10));
    assert_eq!(reduce_segments(16 << 20, 4), (16, 1 << 20));
    assert_eq!(reduce_segments(16 << 20, 6), (18, 1 << 20));
    assert_eq!(reduce_segments(1000, 3), (6, 168));
}

#[test]
fn reduce_runs_segments_minus_two_iterations_then_gathers_to_the_root() {
    // 16 MiB on 4 ranks: 16 segments of 1 MiB, 4 per rank; the ring sends 14 of them per
    // rank (two more than a reduce-scatter needs, as reduce.cc does), then ranks 0, 1 and
    // 3 send their 4 MiB chunk to root 2.
    let s = reduce(16 << 20, 4, 2);
    s.validate().unwrap();
    let ring: u128 = 14 * 4 * (1 << 20);
    let gather: u128 = 3 * (4 << 20);
    assert_eq!(payload_bytes(&s), ring + gather);
    let gathers = |s: &Schedule| -> Vec<(Vec<(Endpoint, Endpoint)>, u64)> {
        s.ops
            .iter()
            .filter(|op| op.phase == Phase::Reduce)
            .filter_map(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } if bytes != PREAMBLE_BYTES => {
                    Some((s.patterns[pattern.0 as usize].pairs.to_vec(), bytes))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        gathers(&s),
        [
            (vec![(0, 2)], 4 << 20),
            (vec![(1, 2)], 4 << 20),
            (vec![(3, 2)], 4 << 20)
        ]
    );
    // 16 MiB on 6 ranks: 18 segments of 1 MiB, 3 per rank; rank 5's chunk starts at
    // 15 MiB and holds one, so it sends 1 MiB where the others send 3.
    let s = reduce(16 << 20, 6, 0);
    let sizes: Vec<u64> = gathers(&s).into_iter().map(|(_, b)| b).collect();
    assert_eq!(sizes, [3 << 20, 3 << 20, 3 << 20, 3 << 20, 1 << 20]);
    // Its last two segments lie past the buffer's end: in 16 iterations ranks 0-4 each meet
    // them twice (rank 0 at iterations 13 and 14, rank 4 at 1 and 2) and send nothing then,
    // rank 5 never: 86 segments in the loop, not 96.
    let ring: u128 = 86 * (1 << 20);
    assert_eq!(payload_bytes(&s), ring + (13 << 20));
    let loop_sends_of = |r: u32| {
        s.ops
            .iter()
            .filter(|op| op.phase == Phase::ReduceScatter)
            .filter(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } => {
                    bytes != PREAMBLE_BYTES && s.patterns[pattern.0 as usize].pairs[0].0 == r
                }
                _ => false,
            })
            .count()
    };
    assert_eq!(loop_sends_of(0), 14);
    assert_eq!(loop_sends_of(5), 16);
    // 256 KiB: two segments per rank, so exactly the reduce-scatter's 6 sends per rank.
    let s = reduce(256 << 10, 4, 0);
    assert_eq!(payload_bytes(&s), 6 * 4 * (32 << 10) + 3 * (64 << 10));
}

#[test]
fn broadcast_is_binomial_with_concurrent_sends() {
    // 8 ranks, root 0: 0 sends to 1, 2, 4 with no dependency among them; 1 forwards to
    // 3 and 5 after it received; 3 forwards to 7.
    let s = broadcast(1 << 20, 8, 0, &root_children(8));
    s.validate().unwrap();
    type Send = ((u32, u32), Vec<(u32, u32)>);
    let sends: Vec<Send> = s
        .ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Transfer { bytes, .. } if bytes == 1 << 20))
        .map(|op| {
            let OpKind::Transfer { pattern, .. } = op.kind else {
                unreachable!()
            };
            let pair = s.patterns[pattern.0 as usize].pairs[0];
            let after: Vec<(u32, u32)> = op
                .deps
                .iter()
                .filter_map(|d| match s.ops[d.0 as usize].kind {
                    OpKind::Transfer { pattern, bytes } if bytes == 1 << 20 => {
                        Some(s.patterns[pattern.0 as usize].pairs[0])
                    }
                    _ => None,
                })
                .collect();
            (pair, after)
        })
        .collect();
    let after = |p: (u32, u32)| sends.iter().find(|(q, _)| *q == p).unwrap().1.clone();
    assert_eq!(sends.len(), 7);
    for child in [1, 2, 4] {
        assert!(after((0, child)).is_empty());
    }
    assert_eq!(after((1, 3)), vec![(0, 1)]);
    assert_eq!(after((1, 5)), vec![(0, 1)]);
    assert_eq!(after((2, 6)), vec![(0, 2)]);
    assert_eq!(after((3, 7)), vec![(1, 3)]);
    // A root other than 0 shifts the tree.
    let s = broadcast(1 << 20, 4, 2, &root_children(4));
    let first: Vec<(u32, u32)> = s.patterns.iter().map(|p| p.pairs[0]).collect();
    assert!(first.contains(&(2, 3)) && first.contains(&(2, 0)) && first.contains(&(3, 1)));
}

/// The compute ops of `s` that are not the posts' own timing (a late entry, a call's gap).
/// The staging copies of a plan: host work (on the cores the hosts share), with its core time.
fn copies(s: &Schedule) -> Vec<(usize, crate::engine::SimTime)> {
    s.ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match op.kind {
            OpKind::HostWork { core_time, .. } => Some((i, core_time)),
            _ => None,
        })
        .collect()
}

#[test]
fn all_gather_sends_halves_to_the_right() {
    let s = all_gather(4 << 20, 4, None);
    s.validate().unwrap();
    assert_eq!(payload_bytes(&s), 3 * (4 << 20));
    let payloads: Vec<&crate::collective::Op> = s
        .ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::Transfer { bytes, .. } if bytes == 512 << 10))
        .collect();
    // 2(n − 1) iterations, every rank one half each.
    assert_eq!(payloads.len(), 6 * 4);
    for op in payloads {
        let OpKind::Transfer { pattern, .. } = op.kind else {
            unreachable!()
        };
        let (from, to) = s.patterns[pattern.0 as usize].pairs[0];
        assert_eq!(to, (from + 1) % 4);
    }
    assert!(copies(&s).is_empty(), "no copy rate: no copies");
}

#[test]
fn all_gather_copies_its_block_in_first_and_each_rank_its_buffer_out_when_done() {
    // 4 MiB gathered on 4 ranks: 1 MiB primed into fresh pages at 1 GB/s before the ring,
    // every rank's first posts waiting for it; then each rank copies the 4 MiB out at 8 GB/s
    // once its own last two sends were written and its last two receives arrived.
    let rates = StagingCopies {
        prime_bytes_per_s: 1e9,
        out_bytes_per_s: 8e9,
    };
    let s = all_gather(4 << 20, 4, Some(rates));
    s.validate().unwrap();
    let copies = copies(&s);
    let secs = |b: u64, rate: f64| crate::engine::SimTime::from_secs_f64(b as f64 / rate);
    assert_eq!(copies.len(), 1 + 4);
    assert_eq!(copies[0], (0, secs(1 << 20, 1e9)));
    assert!(matches!(
        s.ops[0].kind,
        OpKind::HostWork { endpoints: 4, .. }
    ));
    let unblocked: Vec<usize> = (0..s.ops.len())
        .filter(|&i| s.ops[i].deps.is_empty())
        .collect();
    assert_eq!(unblocked, [0], "everything waits for the priming");
    for (rank, &(i, core_time)) in copies[1..].iter().enumerate() {
        assert_eq!(core_time, secs(4 << 20, 8e9));
        let out = &s.ops[i];
        assert!(matches!(out.kind, OpKind::HostWork { endpoints: 1, .. }));
        assert_eq!(
            out.deps.len(),
            4,
            "rank {rank}: two notifications, two receives"
        );
        for d in &out.deps {
            let OpKind::Transfer { pattern, .. } = s.ops[d.0 as usize].kind else {
                panic!(
                    "rank {rank} waits for a transfer, not {:?}",
                    s.ops[d.0 as usize].kind
                )
            };
            let (_, to) = s.patterns[pattern.0 as usize].pairs[0];
            assert_eq!(
                to as usize, rank,
                "rank {rank} waits only for what arrives at it"
            );
        }
    }
    assert_eq!(
        payload_bytes(&s),
        3 * (4 << 20),
        "copies move nothing on the wire"
    );
}

#[test]
fn gloo_refuses_what_it_does_not_have() {
    let sys = crate::library::testing::cpu_hosts(4);
    let req = |c| Request {
        collective: c,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    let none = LibraryOptions::default();
    let hosts = crate::library::testing::Nodes { per: 1 };
    let plan = |r: &Request, o: &LibraryOptions| super::plan(r, &sys, o, &hosts);
    let e = plan(&req(Collective::ReduceScatter), &none).unwrap_err();
    assert_eq!(e.field, "collective.op");
    let forced = LibraryOptions {
        algorithm: Some("tree".into()),
        ..Default::default()
    };
    let e = plan(&req(Collective::AllReduce), &forced).unwrap_err();
    assert_eq!(e.field, "collective.algorithm");
    let p = plan(&req(Collective::AllReduce), &none).unwrap();
    assert!(
        p.decision.starts_with("gloo ring, 8 segments"),
        "{}",
        p.decision
    );
}

#[test]
fn send_recv_all_reduces_take_orders_or_hierarchical_and_refuse_what_does_not_fit() {
    let sys = crate::library::testing::cpu_hosts(4);
    let two_nodes = crate::library::testing::Nodes { per: 2 };
    let req = |c| Request {
        collective: c,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    let orders = LibraryOptions {
        ring_orders: vec![vec![0, 1, 2, 3], vec![0, 2, 1, 3]],
        ..Default::default()
    };
    let p = plan(&req(Collective::AllReduce), &sys, &orders, &two_nodes).unwrap();
    assert!(
        p.decision.starts_with("send/recv rings (2)"),
        "{}",
        p.decision
    );
    // Orders are rings of an all-reduce, over every rank once.
    let e = plan(&req(Collective::Broadcast), &sys, &orders, &two_nodes).unwrap_err();
    assert_eq!(e.field, "collective.orders");
    let short = LibraryOptions {
        ring_orders: vec![vec![0, 1, 2]],
        ..Default::default()
    };
    let e = plan(&req(Collective::AllReduce), &sys, &short, &two_nodes).unwrap_err();
    assert_eq!(e.field, "collective.orders");
    let hier = LibraryOptions {
        algorithm: Some("hierarchical".into()),
        ..Default::default()
    };
    let p = plan(&req(Collective::AllReduce), &sys, &hier, &two_nodes).unwrap();
    assert!(p.decision.contains("2 nodes of 2"), "{}", p.decision);
    let uneven = crate::library::testing::Nodes { per: 3 };
    let e = plan(&req(Collective::AllReduce), &sys, &hier, &uneven).unwrap_err();
    assert_eq!(e.field, "collective.algorithm");
}

#[test]
fn a_broadcast_root_serves_its_children_in_every_order_they_may_enter_in() {
    // Posting order (the largest subtree first) leads; then every other permutation.
    assert_eq!(root_orders(2), vec![vec![1]]);
    let eight = root_orders(8);
    assert_eq!(eight[0], vec![1, 2, 4]);
    let mut distinct = eight.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((eight.len(), distinct.len()), (6, 6));
    assert!(eight.iter().all(|o| {
        let mut o = o.clone();
        o.sort();
        o == [1, 2, 4]
    }));
    // Past entry_orders::ORDERS_MAX permutations (5! = 120 on 32 ranks), the rotations.
    assert_eq!(root_orders(16).len(), 24);
    let rotations = root_orders(32);
    assert_eq!(rotations.len(), 5);
    assert_eq!(rotations[1], vec![2, 4, 8, 16, 1]);
    // Each order is a plan's alternative: the root's payloads in that order, then the rest.
    let req = Request {
        collective: Collective::Broadcast,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    let hosts = crate::library::testing::Nodes { per: 1 };
    let sys = crate::library::testing::cpu_hosts(8);
    let p = plan(&req, &sys, &LibraryOptions::default(), &hosts).unwrap();
    assert_eq!(p.alternatives.len(), 5);
    let root_sends = |s: &Schedule| -> Vec<u32> {
        s.ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } if bytes == 1 << 20 => {
                    let (from, to) = s.patterns[pattern.0 as usize].pairs[0];
                    (from == 0).then_some(to)
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(root_sends(&p.schedule), vec![1, 2, 4]);
    assert_eq!(root_sends(&p.alternatives[0]), eight[1]);
}

#[test]
fn with_wake_ups_a_call_is_played_at_least_101_times_every_entry_order_as_often() {
    let hosts = crate::library::testing::Nodes { per: 1 };
    let sys = crate::library::testing::cpu_hosts(8);
    let opts = LibraryOptions {
        message_cpu: Some(super::host_cpu::MessageCpus::same(
            super::host_cpu::MessageCpu {
                per_message_secs: 1e-4,
                per_byte_secs: 1e-9,
            },
        )),
        wake_ups: Some(super::host_cpu::WakeUps {
            extra_secs_quantiles: vec![0.0, 4e-3].into(),
            seed: 1,
            plays: super::host_cpu::WAKE_UP_PLAYS,
        }),
        ..LibraryOptions::default()
    };
    let req = |collective| Request {
        collective,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    // An all-reduce runs one way: 101 plays, each its own wake-ups.
    let p = plan(&req(Collective::AllReduce), &sys, &opts, &hosts).unwrap();
    assert_eq!(1 + p.alternatives.len(), 101);
    assert_eq!(p.alternatives_vary, "the hosts' wake-ups");
    let waits = |s: &Schedule| -> Vec<crate::engine::SimTime> {
        s.ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Compute {
                    endpoints: 0,
                    duration,
                } => Some(duration),
                _ => None,
            })
            .collect()
    };
    assert_ne!(waits(&p.schedule), waits(&p.alternatives[0]));
    // The root of 8 serves its 3 children in 6 orders: 17 plays of each, 102 in all.
    let p = plan(&req(Collective::Broadcast), &sys, &opts, &hosts).unwrap();
    assert_eq!(1 + p.alternatives.len(), 102);
    assert_eq!(
        p.alternatives_vary,
        "the ranks' entry order and the hosts' wake-ups"
    );
}

#[test]
fn messages_inside_gloos_collectives_cost_the_cores_less_than_over_send_recv() {
    // The profile's two costs: 100 µs + 1 ns/B over isend/irecv, 50 µs + 0.5 ns/B inside
    // gloo's own algorithms. gloo's ring charges every payload the second, the all-reduce
    // written over send/recv (ring orders) and a send_recv the first.
    let sys = crate::library::testing::cpu_hosts(4);
    let hosts = crate::library::testing::Nodes { per: 1 };
    let cpus = super::host_cpu::MessageCpus {
        send_recv: super::host_cpu::MessageCpu {
            per_message_secs: 1e-4,
            per_byte_secs: 1e-9,
        },
        in_collectives: super::host_cpu::MessageCpu {
            per_message_secs: 5e-5,
            per_byte_secs: 5e-10,
        },
    };
    let opts = |orders: Vec<Vec<u32>>| LibraryOptions {
        message_cpu: Some(cpus),
        ring_orders: orders,
        ..LibraryOptions::default()
    };
    let req = |collective| Request {
        collective,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    // Each payload's core time, with its bytes.
    let work = |s: &Schedule| -> Vec<(f64, u64)> {
        let bytes: Vec<u64> = s
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Transfer { bytes, .. } if bytes != super::PREAMBLE_BYTES => Some(bytes),
                _ => None,
            })
            .collect();
        let core: Vec<f64> = s
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::HostWork { core_time, .. } => Some(core_time.as_secs_f64()),
                _ => None,
            })
            .collect();
        assert_eq!(bytes.len(), core.len());
        core.into_iter().zip(bytes).collect()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let ring = plan(&req(Collective::AllReduce), &sys, &opts(vec![]), &hosts).unwrap();
    for (core, bytes) in work(&ring.schedule) {
        assert!(
            close(core, 5e-5 + 5e-10 * bytes as f64),
            "{core} for {bytes} B"
        );
    }
    let orders = opts(vec![vec![0, 1, 2, 3]]);
    let over_send_recv = plan(&req(Collective::AllReduce), &sys, &orders, &hosts).unwrap();
    let one = plan(&req(Collective::SendRecv), &sys, &opts(vec![]), &hosts).unwrap();
    for s in [&over_send_recv.schedule, &one.schedule] {
        let charged = work(s);
        assert!(!charged.is_empty());
        for (core, bytes) in charged {
            assert!(
                close(core, 1e-4 + 1e-9 * bytes as f64),
                "{core} for {bytes} B"
            );
        }
    }
}

#[test]
fn a_ring_all_reduce_sends_4n_n_minus_1_payloads_of_a_2n_th_of_the_buffer() {
    // gloo's ring up to 2n MiB: 2n segments, each rank sending 2(n - 1) in each phase.
    let p = super::payload_bytes(Collective::AllReduce, 1 << 18, 4).unwrap();
    assert_eq!(p.len(), 48);
    assert!(p.iter().all(|&b| b == 32768), "{p:?}");
    let p = super::payload_bytes(Collective::AllReduce, 1 << 18, 10).unwrap();
    assert_eq!(p.len(), 360);
    // 20 segments of 13,108 B (whole fp32 elements) and the last one 13,092: each rank sends
    // each segment's bytes as they are, 2(n - 1) buffers' worth in all.
    assert!(p.iter().all(|&b| b == 13108 || b == 13092), "{p:?}");
    assert_eq!(p.iter().filter(|&&b| b == 13092).count(), 18);
    assert_eq!(p.iter().sum::<u64>(), 2 * 9 * (1 << 18));
    assert!(super::payload_bytes(Collective::Barrier, 4, 4).is_err());
    assert!(super::payload_bytes(Collective::AllReduce, 1 << 18, 1).is_err());
}
