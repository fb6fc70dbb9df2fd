//! Ring algorithms over k rings: all-reduce (reduce-scatter then all-gather), reduce-scatter,
//! all-gather, broadcast and reduce as a pipelined chain, and send/recv.
//!
//! A ring is a sequence of positions holding ranks ([`RingOrder`]). One step of a cyclic
//! collective is one op whose pattern is "every position sends to its successor" with
//! `ceil(ring bytes / n)` per pair: all-reduce is n-1 reduce-scatter steps (each followed by a
//! reduction of the received chunk) and n-1 all-gather steps; reduce-scatter and all-gather are
//! n-1 steps each. Broadcast runs along the ring from the root to the root's predecessor and
//! reduce from the root's successor to the root, one op per hop, the data cut into `slices`
//! chunks that follow each other down the chain (chunk c of hop h waits for chunk c of hop h-1
//! and chunk c-1 of hop h). Send/recv is one op from `root` to `peer`.
//!
//! Rings are independent channels (channel = ring index). The bytes are split across rings in
//! proportion to each ring's bottleneck bandwidth, the smallest `fabric.bottleneck_bps` over the
//! hops the collective uses (all n hops for cyclic collectives, the n-1 chain hops for
//! broadcast and reduce); a ring whose share is zero bytes is left out.

use super::steps::{ceil_div, chain, channel, split_weighted, ChainStep};
use super::{
    Collective, CollectiveError, CollectiveSpec, Endpoint, Fabric, OpKind, Phase, RingOrder,
    Schedule,
};

/// The ranks at ring positions `0..ranks` of ring `index` (for error messages).
pub(crate) fn positions(
    order: &RingOrder,
    ranks: u32,
    index: usize,
) -> Result<Vec<u32>, CollectiveError> {
    let field = || format!("algorithm.rings[{index}]");
    match order {
        RingOrder::Explicit(order) => {
            if order.len() != ranks as usize {
                return Err(CollectiveError::new(
                    field(),
                    format!(
                        "a permutation of ranks 0..{ranks} ({ranks} entries), got {} entries",
                        order.len()
                    ),
                ));
            }
            let mut seen = vec![false; ranks as usize];
            for &r in order {
                if r >= ranks || seen[r as usize] {
                    let what = if r >= ranks {
                        "out of range"
                    } else {
                        "repeated"
                    };
                    return Err(CollectiveError::new(
                        field(),
                        format!("a permutation of ranks 0..{ranks}, but rank {r} is {what}"),
                    ));
                }
                seen[r as usize] = true;
            }
            Ok(order.clone())
        }
        RingOrder::Generated {
            offset,
            stride,
            reverse,
        } => {
            if gcd(u64::from(*stride), u64::from(ranks)) != 1 {
                return Err(CollectiveError::new(
                    format!("{}.stride", field()),
                    format!("a stride coprime with {ranks} ranks, got {stride}"),
                ));
            }
            let n = u64::from(ranks);
            let mut order: Vec<u32> = (0..n)
                .map(|i| ((u64::from(*offset) + i * u64::from(*stride)) % n) as u32)
                .collect();
            if *reverse {
                order.reverse();
            }
            Ok(order)
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// "Every position sends to its successor" pairs of a ring.
pub(crate) fn successor_pairs(order: &[u32]) -> Vec<(Endpoint, Endpoint)> {
    let n = order.len();
    (0..n).map(|i| (order[i], order[(i + 1) % n])).collect()
}

/// The steps of a cyclic ring collective (`AllReduce`, `ReduceScatter` or `AllGather`) over `n`
/// positions with pattern `pairs` (one or several disjoint rings that step together) and
/// `bytes` per ring.
pub(crate) fn cyclic_steps(
    schedule: &mut Schedule,
    pairs: Vec<(Endpoint, Endpoint)>,
    n: u32,
    bytes: u64,
    collective: Collective,
    reduce_phase: Phase,
    gather_phase: Phase,
) -> Vec<ChainStep> {
    let reducers = pairs.len() as u32;
    let pattern = schedule.add_pattern(pairs);
    let chunk = ceil_div(bytes, u64::from(n));
    let rs = ChainStep {
        pattern,
        bytes: chunk,
        phase: reduce_phase,
        reducers,
    };
    let ag = ChainStep {
        pattern,
        bytes: chunk,
        phase: gather_phase,
        reducers: 0,
    };
    let steps = n as usize - 1;
    match collective {
        Collective::AllReduce => [vec![rs; steps], vec![ag; steps]].concat(),
        Collective::ReduceScatter => vec![rs; steps],
        _ => vec![ag; steps],
    }
}

pub(crate) fn generate(
    spec: &CollectiveSpec,
    ranks: u32,
    orders: &[RingOrder],
    fabric: &dyn Fabric,
) -> Result<Schedule, CollectiveError> {
    let mut schedule = Schedule::new(
        spec.collective,
        format!("ring({})", orders.len()),
        ranks,
        spec.bytes,
    );
    if spec.collective == Collective::SendRecv {
        let pattern = schedule.add_pattern(vec![(spec.root, spec.peer)]);
        schedule.push(
            OpKind::Transfer {
                pattern,
                bytes: spec.bytes,
            },
            Vec::new(),
            Phase::SendRecv,
            0,
            0,
        );
        return Ok(schedule);
    }
    if orders.is_empty() {
        return Err(CollectiveError::new("algorithm.rings", "at least one ring"));
    }
    // Each ring as the sequence of ranks its data visits: the cycle for cyclic collectives,
    // the chain from (broadcast) or to (reduce) the root otherwise.
    let mut walks = Vec::with_capacity(orders.len());
    for (i, order) in orders.iter().enumerate() {
        channel(i, "algorithm.rings")?;
        let order = positions(order, ranks, i)?;
        let root_at = order.iter().position(|&r| r == spec.root).unwrap_or(0);
        let walk: Vec<u32> = match spec.collective {
            Collective::Broadcast => (0..ranks as usize)
                .map(|h| order[(root_at + h) % order.len()])
                .collect(),
            Collective::Reduce => (1..=ranks as usize)
                .map(|h| order[(root_at + h) % order.len()])
                .collect(),
            _ => order,
        };
        walks.push(walk);
    }
    let cyclic = !matches!(spec.collective, Collective::Broadcast | Collective::Reduce);
    let mut weights = Vec::with_capacity(walks.len());
    for (i, walk) in walks.iter().enumerate() {
        let hops: Vec<(u32, u32)> = if cyclic {
            successor_pairs(walk)
        } else {
            walk.windows(2).map(|w| (w[0], w[1])).collect()
        };
        let mut slowest = f64::INFINITY;
        for (a, b) in hops {
            let bps = fabric.bottleneck_bps(a, b);
            if !(bps.is_finite() && bps > 0.0) {
                return Err(CollectiveError::new(
                    format!("algorithm.rings[{i}]"),
                    format!(
                        "a ring whose every hop has bandwidth, but rank {a} -> rank {b} has {bps} bit/s"
                    ),
                ));
            }
            slowest = slowest.min(bps);
        }
        weights.push(slowest);
    }
    let shares = split_weighted(spec.bytes, &weights);
    for (i, (walk, &share)) in walks.iter().zip(&shares).enumerate() {
        if share == 0 && !(spec.bytes == 0 && i == 0) {
            continue;
        }
        let steps = if cyclic {
            cyclic_steps(
                &mut schedule,
                successor_pairs(walk),
                ranks,
                share,
                spec.collective,
                Phase::ReduceScatter,
                Phase::AllGather,
            )
        } else {
            let (phase, reducers) = if spec.collective == Collective::Reduce {
                (Phase::Reduce, 1)
            } else {
                (Phase::Broadcast, 0)
            };
            walk.windows(2)
                .map(|w| ChainStep {
                    pattern: schedule.push_pattern(vec![(w[0], w[1])]),
                    bytes: share,
                    phase,
                    reducers,
                })
                .collect()
        };
        chain(&mut schedule, &steps, spec.slices, i as u16, 0, &[]);
    }
    Ok(schedule)
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::{Algorithm, Fabric, Op, OpId};
    use super::*;

    fn rings(orders: Vec<RingOrder>) -> Algorithm {
        Algorithm::Ring { rings: orders }
    }

    fn plain() -> RingOrder {
        RingOrder::Generated {
            offset: 0,
            stride: 1,
            reverse: false,
        }
    }

    fn transfer_bytes(op: &Op) -> Option<u64> {
        match op.kind {
            OpKind::Transfer { bytes, .. } => Some(bytes),
            OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => None,
        }
    }

    #[test]
    fn all_reduce_on_eight_ranks_is_fourteen_steps_per_ring() {
        let m = 8 * 2 * 1024;
        let s = generate(
            &spec(Collective::AllReduce, rings(vec![plain(), plain()]), m),
            8,
            &FLAT,
        )
        .unwrap();
        assert!(s.validate().is_ok());
        assert_eq!(s.algorithm, "ring(2)");
        for ring in 0..2u16 {
            let steps: Vec<&Op> = s
                .ops
                .iter()
                .filter(|op| op.channel == ring && transfer_bytes(op).is_some())
                .collect();
            assert_eq!(steps.len(), 14);
            assert!(steps[..7].iter().all(|op| op.phase == Phase::ReduceScatter));
            assert!(steps[7..].iter().all(|op| op.phase == Phase::AllGather));
        }
        let (sent, received) = sent_received(&s);
        // 2(n-1)/n · M per rank, summed over both rings.
        for r in 0..8 {
            assert_eq!(sent[r], 2 * 7 * m as u128 / 8);
            assert_eq!(received[r], 2 * 7 * m as u128 / 8);
        }
    }

    #[test]
    fn ring_steps_depend_only_on_the_same_rings_previous_step() {
        let s = generate(
            &spec(Collective::AllGather, rings(vec![plain(), plain()]), 4096),
            4,
            &FLAT,
        )
        .unwrap();
        for (i, op) in s.ops.iter().enumerate() {
            for d in &op.deps {
                assert_eq!(s.ops[d.0 as usize].channel, op.channel, "op {i}");
                assert_eq!(s.ops[d.0 as usize].step + 1, op.step, "op {i}");
            }
        }
        // The first step of each ring starts at time 0.
        assert_eq!(s.ops.iter().filter(|op| op.deps.is_empty()).count(), 2);
    }

    #[test]
    fn reduce_scatter_steps_reduce_what_they_received() {
        let s = generate(
            &spec(Collective::ReduceScatter, rings(vec![plain()]), 4000),
            4,
            &FLAT,
        )
        .unwrap();
        let kinds: Vec<bool> = s
            .ops
            .iter()
            .map(|op| transfer_bytes(op).is_some())
            .collect();
        assert_eq!(kinds, vec![true, false, true, false, true, false]);
        assert_eq!(
            s.ops[1].kind,
            OpKind::Reduce {
                endpoints: 4,
                bytes: 1000
            }
        );
        assert_eq!(s.ops[2].deps, vec![OpId(1)]);
        let (sent, _) = sent_received(&s);
        assert!(sent.iter().all(|&b| b == 3000));
    }

    #[test]
    fn slices_split_each_step_exactly_and_pipeline() {
        let mut sp = spec(Collective::AllReduce, rings(vec![plain()]), 4 * 10);
        sp.slices = 3;
        let s = generate(&sp, 4, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        let step0: Vec<u64> = s
            .ops
            .iter()
            .filter(|op| op.step == 0)
            .filter_map(transfer_bytes)
            .collect();
        assert_eq!(step0, vec![4, 3, 3]);
        assert_eq!(
            s.ops
                .iter()
                .filter(|op| transfer_bytes(op).is_some())
                .count(),
            6 * 3
        );
        let (sent, _) = sent_received(&s);
        assert!(sent.iter().all(|&b| b == 2 * 3 * 10));
    }

    struct SlowPair;
    impl Fabric for SlowPair {
        fn bottleneck_bps(&self, src: u32, dst: u32) -> f64 {
            if (src, dst) == (1, 2) {
                25e9
            } else {
                100e9
            }
        }
        fn node_of(&self, rank: u32) -> u32 {
            rank
        }
    }

    #[test]
    fn a_ring_over_a_slow_pair_gets_a_smaller_share() {
        // Ring 0 visits 1 -> 2 (25 Gb/s); ring 1 runs the other way round (100 Gb/s).
        let forward = plain();
        let backward = RingOrder::Generated {
            offset: 0,
            stride: 1,
            reverse: true,
        };
        let m = 1_000_003;
        let s = generate(
            &spec(Collective::AllGather, rings(vec![forward, backward]), m),
            4,
            &SlowPair,
        )
        .unwrap();
        let per_ring: Vec<u64> = (0..2u16)
            .map(|r| {
                s.ops
                    .iter()
                    .find(|op| op.channel == r)
                    .and_then(transfer_bytes)
                    .unwrap()
            })
            .collect();
        // Shares 200,001 : 800,002 (exact split of 1,000,003 in ratio 1:4), a quarter each.
        assert_eq!(per_ring, vec![ceil_div(200_001, 4), ceil_div(800_002, 4)]);
        let shares = split_weighted(m, &[25e9, 100e9]);
        assert_eq!(shares.iter().sum::<u64>(), m);
        assert_eq!(shares, vec![200_001, 800_002]);
    }

    #[test]
    fn explicit_orders_must_be_permutations() {
        for bad in [vec![0, 1, 2], vec![0, 1, 1, 3], vec![0, 1, 2, 4]] {
            let e = generate(
                &spec(
                    Collective::AllReduce,
                    rings(vec![plain(), RingOrder::Explicit(bad)]),
                    64,
                ),
                4,
                &FLAT,
            )
            .unwrap_err();
            assert_eq!(e.field, "algorithm.rings[1]");
        }
        let s = generate(
            &spec(
                Collective::AllReduce,
                rings(vec![RingOrder::Explicit(vec![3, 1, 0, 2])]),
                64,
            ),
            4,
            &FLAT,
        )
        .unwrap();
        let pairs = s.patterns[0].pairs.to_vec();
        assert_eq!(pairs, vec![(3, 1), (1, 0), (0, 2), (2, 3)]);
    }

    #[test]
    fn generated_stride_must_be_coprime_with_ranks() {
        let stride = |stride| RingOrder::Generated {
            offset: 1,
            stride,
            reverse: false,
        };
        let e = generate(
            &spec(Collective::AllReduce, rings(vec![stride(2)]), 64),
            8,
            &FLAT,
        )
        .unwrap_err();
        assert_eq!(e.field, "algorithm.rings[0].stride");
        assert_eq!(
            positions(&stride(3), 8, 0).unwrap(),
            vec![1, 4, 7, 2, 5, 0, 3, 6]
        );
        let reversed = RingOrder::Generated {
            offset: 0,
            stride: 1,
            reverse: true,
        };
        assert_eq!(positions(&reversed, 3, 0).unwrap(), vec![2, 1, 0]);
    }

    #[test]
    fn broadcast_is_a_pipelined_chain_from_the_root() {
        let mut sp = spec(Collective::Broadcast, rings(vec![plain()]), 90);
        sp.root = 2;
        sp.slices = 3;
        let s = generate(&sp, 4, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        let hops: Vec<(u32, u32)> = s.patterns.iter().map(|p| p.pairs[0]).collect();
        assert_eq!(hops, vec![(2, 3), (3, 0), (0, 1)]);
        assert_eq!(s.ops.len(), 9);
        // chunk 1 of hop 1 waits for chunk 1 of hop 0 and chunk 0 of hop 1.
        assert_eq!(s.ops[4].deps, vec![OpId(1), OpId(3)]);
        let (sent, received) = sent_received(&s);
        assert_eq!(received, vec![90, 90, 0, 90]);
        assert_eq!(sent, vec![90, 0, 90, 90]);
    }

    #[test]
    fn reduce_is_a_chain_ending_at_the_root_with_a_reduction_per_hop() {
        let mut sp = spec(Collective::Reduce, rings(vec![plain()]), 60);
        sp.root = 1;
        let s = generate(&sp, 4, &FLAT).unwrap();
        let hops: Vec<(u32, u32)> = s.patterns.iter().map(|p| p.pairs[0]).collect();
        assert_eq!(hops, vec![(2, 3), (3, 0), (0, 1)]);
        assert_eq!(
            s.ops.last().unwrap().kind,
            OpKind::Reduce {
                endpoints: 1,
                bytes: 60
            }
        );
        assert!(s.ops.iter().all(|op| op.phase == Phase::Reduce));
    }

    #[test]
    fn send_recv_is_one_transfer_from_root_to_peer() {
        let mut sp = spec(Collective::SendRecv, rings(vec![plain()]), 77);
        sp.root = 3;
        sp.peer = 1;
        let s = generate(&sp, 4, &FLAT).unwrap();
        assert_eq!(s.ops.len(), 1);
        assert_eq!(s.patterns[0].pairs.to_vec(), vec![(3, 1)]);
        assert_eq!(s.total_transfer_bytes(), 77);
    }

    #[test]
    fn all_to_all_is_not_a_ring_collective() {
        let e = generate(
            &spec(Collective::AllToAll, rings(vec![plain()]), 64),
            4,
            &FLAT,
        )
        .unwrap_err();
        assert_eq!(e.field, "algorithm");
    }
}
