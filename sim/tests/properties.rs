//! Invariants of the flow-level model on random topologies and random schedules.

use std::sync::Arc;

use proptest::prelude::*;

use sim::collective::play::{play, PlayOptions, PlayOutcome};
use sim::collective::{Collective, OpId, OpKind, Phase, Schedule};
use sim::engine::SimTime;
use sim::net::flow::FlowModel;
use sim::net::{LinkTraffic, NetworkModel};
use sim::topology::routing::Router;
use sim::topology::{DeviceKind, LinkClass, LinkSpec, Topology};

/// A random two-level tree: `leaves` switches under one root, GPUs spread over the leaves, with
/// random bandwidths and latencies.
fn topology(gpus: u32, leaves: u32, seeds: &[u64]) -> Arc<Topology> {
    let mut b = Topology::builder("random");
    let g: Vec<_> = (0..gpus)
        .map(|i| b.add_device(format!("g{i}"), DeviceKind::Gpu, Some(i)))
        .collect();
    let root = b.add_device("root", DeviceKind::Switch, None);
    let l: Vec<_> = (0..leaves)
        .map(|i| b.add_device(format!("leaf{i}"), DeviceKind::Switch, None))
        .collect();
    let spec = |k: usize| LinkSpec {
        bandwidth_bps: (10 + seeds[k % seeds.len()] % 90) as f64 * 1e9,
        latency: SimTime::from_ns(seeds[(k + 1) % seeds.len()] % 2000),
        buffer_bytes: 1 << 20,
        class: LinkClass::Ethernet,
    };
    for (i, &leaf) in l.iter().enumerate() {
        b.add_link(leaf, root, spec(i));
    }
    for (i, &gpu) in g.iter().enumerate() {
        b.add_link(gpu, l[i % l.len()], spec(i + 7));
    }
    Arc::new(b.build().unwrap())
}

/// One transfer op: its (src, dst) pairs, bytes per pair, and the ops it waits for.
type OpSpec = (Vec<(u32, u32)>, u64, Vec<u32>);

/// Random transfer ops: each a few random pairs, random sizes, random earlier dependencies.
fn schedule(gpus: u32, ops: &[OpSpec]) -> Schedule {
    let mut s = Schedule::new(Collective::SendRecv, "random", gpus, 0);
    for (i, (pairs, bytes, deps)) in ops.iter().enumerate() {
        let pairs: Vec<(u32, u32)> = pairs
            .iter()
            .map(|&(a, b)| (a % gpus, b % gpus))
            .filter(|(a, b)| a != b)
            .collect();
        let pairs = if pairs.is_empty() {
            vec![(0, 1)]
        } else {
            pairs
        };
        let p = s.add_pattern(pairs);
        let deps: Vec<OpId> = if i == 0 {
            vec![]
        } else {
            deps.iter().map(|&d| OpId(d % i as u32)).collect()
        };
        s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: *bytes,
            },
            deps,
            Phase::SendRecv,
            0,
            i as u32,
        );
    }
    s
}

fn run(topo: &Arc<Topology>, s: &Schedule, replay: bool) -> (PlayOutcome, Vec<LinkTraffic>) {
    let m = FlowModel::new(topo.clone(), Default::default(), 3);
    let mut m = if replay { m } else { m.without_replay() };
    let out = play(
        s,
        topo.gpus(),
        &mut m,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    let t = m.link_traffic();
    (out, t)
}

/// Ops drawn from a small pool of patterns and sizes, so that batches repeat (and replay
/// recorded trajectories) and sometimes overlap (and interrupt replays).
fn ops_strategy() -> impl Strategy<Value = Vec<OpSpec>> {
    let pool = prop::collection::vec(prop::collection::vec((0u32..64, 0u32..64), 1..6), 3);
    let sizes = prop::collection::vec(
        prop_oneof![Just(0u64), 1u64..10_000, 100_000u64..5_000_000],
        3,
    );
    (pool, sizes).prop_flat_map(|(pool, sizes)| {
        prop::collection::vec(
            (0usize..3, 0usize..3, prop::collection::vec(0u32..64, 0..3)),
            1..24,
        )
        .prop_map(move |ops| {
            ops.into_iter()
                .map(|(p, b, deps)| (pool[p].clone(), sizes[b], deps))
                .collect()
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn replaying_trajectories_changes_nothing_and_runs_are_deterministic(
        gpus in 2u32..12, leaves in 1u32..4, seeds in prop::collection::vec(any::<u64>(), 4),
        ops in ops_strategy(),
    ) {
        let topo = topology(gpus, leaves, &seeds);
        let s = schedule(gpus, &ops);
        let (a, ta) = run(&topo, &s, true);
        let (b, tb) = run(&topo, &s, false);
        let (c, tc) = run(&topo, &s, true);
        prop_assert_eq!(&a.ops, &b.ops, "replays: {}, interrupted: {}", a.net.replays, a.net.replays_interrupted);
        prop_assert_eq!(&a.ops, &c.ops);
        for ((x, y), z) in ta.iter().zip(&tb).zip(&tc) {
            prop_assert!((x.bytes - y.bytes).abs() <= 1e-6 * y.bytes.max(1.0));
            prop_assert_eq!(x.bytes.to_bits(), z.bytes.to_bits());
        }
    }

    #[test]
    fn every_byte_crosses_every_hop_and_no_link_exceeds_its_capacity(
        gpus in 2u32..12, leaves in 1u32..4, seeds in prop::collection::vec(any::<u64>(), 4),
        ops in ops_strategy(),
    ) {
        let topo = topology(gpus, leaves, &seeds);
        let s = schedule(gpus, &ops);
        let (out, traffic) = run(&topo, &s, true);
        // Bytes conserved: what the links carried is what was sent, once per hop of its path.
        let mut router = Router::new(&topo, 3);
        let mut expected = 0.0;
        let mut flow_hops = 0.0;
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    let hops = router.path(&topo, topo.gpus()[a as usize], topo.gpus()[b as usize]).unwrap().len();
                    expected += bytes as f64 * hops as f64;
                    flow_hops += hops as f64;
                }
            }
        }
        let carried: f64 = traffic.iter().map(|l| l.bytes).sum();
        // Event times are rounded up to whole picoseconds: at most 1 ps at <= 100 Gb/s, 0.0125
        // bytes, per flow and hop and per rate change; allow a few of those.
        let slack = 1e-9 * expected + 0.1 * flow_hops;
        prop_assert!((carried - expected).abs() <= slack, "{} vs {}", carried, expected);
        // No link carried more than its bandwidth allows over the run.
        let secs = out.end.as_secs_f64();
        for (l, t) in topo.links().iter().zip(&traffic) {
            prop_assert!(t.bytes * 8.0 <= l.bandwidth_bps * secs * (1.0 + 1e-9) + 8.0);
        }
        // Every op ran, after its dependencies.
        for (i, op) in s.ops.iter().enumerate() {
            for d in &op.deps {
                prop_assert!(out.ops[d.0 as usize].end <= out.ops[i].start);
            }
        }
    }
}
