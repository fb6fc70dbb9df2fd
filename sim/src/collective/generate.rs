//! The generator entry point: checks a [`CollectiveSpec`] and dispatches to the algorithm's
//! generator. What the generators share (exact byte splitting, the pipelined chain builder)
//! lives in [`super::steps`], so the algorithms never import this dispatcher.
//!
//! Which algorithm implements which collective:
//!
//! | algorithm | all_reduce | reduce_scatter | all_gather | broadcast | reduce | all_to_all | send_recv |
//! |---|---|---|---|---|---|---|---|
//! | ring | ✓ | ✓ | ✓ | ✓ (chain) | ✓ (chain) | | ✓ |
//! | hierarchical | ✓ | | | | | | |
//! | double_binary_tree | ✓ | | | ✓ | ✓ | | |
//! | halving_doubling | ✓ | ✓ | ✓ | | | | |
//! | parameter_server | ✓ | | | | | | |
//! | direct | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//!
//! The barrier has one template, direct (every rank tells every other at once).
//!
//! Defaults ([`default_algorithm`]): one ring in rank order for everything a ring implements
//! (NCCL's choice for large messages), direct for all-to-all and the barrier.
//!
//! Rounding: a step whose chunk is `bytes / parts` moves `ceil(bytes / parts)` per pair (the
//! largest chunk of the step, which is what the step's time depends on), so totals equal the
//! closed-form amounts exactly when `bytes` divides evenly and exceed them by less than one
//! byte per pair per step otherwise. Splits that are not per-pair (across rings, trees, server
//! shards, pipeline slices) are exact: the parts sum to the whole.
//!
//! `slices` pipelines the step-by-step algorithms (ring, hierarchical, double binary tree); the
//! halving-doubling, parameter-server and direct schedules have no slice-aligned pipeline and
//! ignore it.
//!
//! A communicator of one rank has nothing to send: its schedule has no ops (except a
//! parameter server on extra endpoints, which still pushes and pulls).

use super::{
    direct, halving_doubling, hierarchical, parameter_server, ring, tree, Algorithm, Collective,
    CollectiveError, CollectiveSpec, Fabric, RingOrder, Schedule,
};

/// Builds the schedule of `spec` over `ranks` ranks; `fabric` answers what the algorithm needs
/// to know about the network (ring bandwidths, which node a rank is on).
pub fn generate(
    spec: &CollectiveSpec,
    ranks: u32,
    fabric: &dyn Fabric,
) -> Result<Schedule, CollectiveError> {
    check_spec(spec, ranks)?;
    if !spec.algorithm.supports(spec.collective) {
        return Err(CollectiveError::new(
            "algorithm",
            format!(
                "an algorithm that implements {}; {} implements {}",
                spec.collective,
                spec.algorithm.kind_name(),
                spec.algorithm
                    .supported()
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let servers_outside = matches!(
        spec.algorithm,
        Algorithm::ParameterServer {
            colocated: false,
            ..
        }
    );
    if ranks == 1 && !servers_outside {
        return Ok(Schedule::new(
            spec.collective,
            spec.algorithm.report_name(),
            ranks,
            spec.bytes,
        ));
    }
    match &spec.algorithm {
        Algorithm::Ring { rings } => ring::generate(spec, ranks, rings, fabric),
        Algorithm::Hierarchical => hierarchical::generate(spec, ranks, fabric),
        Algorithm::DoubleBinaryTree => tree::generate(spec, ranks),
        Algorithm::HalvingDoubling => halving_doubling::generate(spec, ranks),
        Algorithm::ParameterServer { servers, colocated } => {
            parameter_server::generate(spec, ranks, *servers, *colocated)
        }
        Algorithm::Direct => direct::generate(spec, ranks),
    }
}

/// The algorithm a scenario gets when it names none: one ring in rank order for all-reduce,
/// reduce-scatter, all-gather, broadcast, reduce and send/recv; direct for all-to-all.
pub fn default_algorithm(collective: Collective) -> Algorithm {
    match collective {
        Collective::AllToAll | Collective::Barrier => Algorithm::Direct,
        _ => Algorithm::Ring {
            rings: vec![RingOrder::Generated {
                offset: 0,
                stride: 1,
                reverse: false,
            }],
        },
    }
}

impl Algorithm {
    /// The collectives this algorithm can generate.
    pub fn supported(&self) -> &'static [Collective] {
        use Collective::*;
        match self {
            Algorithm::Ring { .. } => &[
                AllReduce,
                ReduceScatter,
                AllGather,
                Broadcast,
                Reduce,
                SendRecv,
            ],
            Algorithm::Hierarchical => &[AllReduce],
            Algorithm::DoubleBinaryTree => &[AllReduce, Broadcast, Reduce],
            Algorithm::HalvingDoubling => &[AllReduce, ReduceScatter, AllGather],
            Algorithm::ParameterServer { .. } => &[AllReduce],
            Algorithm::Direct => &[
                AllReduce,
                ReduceScatter,
                AllGather,
                Broadcast,
                Reduce,
                AllToAll,
                SendRecv,
                Barrier,
            ],
        }
    }

    pub fn supports(&self, collective: Collective) -> bool {
        self.supported().contains(&collective)
    }

    /// The algorithm's name as scenario files spell it (`name = "..."`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Algorithm::Ring { .. } => "ring",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::DoubleBinaryTree => "double_binary_tree",
            Algorithm::HalvingDoubling => "halving_doubling",
            Algorithm::ParameterServer { .. } => "parameter_server",
            Algorithm::Direct => "direct",
        }
    }

    /// The name reports print, with the options that matter: `"ring(2)"`,
    /// `"parameter_server(4, colocated)"`.
    pub fn report_name(&self) -> String {
        match self {
            Algorithm::Ring { rings } => format!("ring({})", rings.len()),
            Algorithm::ParameterServer { servers, colocated } => {
                if *colocated {
                    format!("parameter_server({servers}, colocated)")
                } else {
                    format!("parameter_server({servers})")
                }
            }
            other => other.kind_name().to_string(),
        }
    }
}

fn check_spec(spec: &CollectiveSpec, ranks: u32) -> Result<(), CollectiveError> {
    if ranks == 0 {
        return Err(CollectiveError::new("ranks", "at least 1 rank"));
    }
    if spec.slices == 0 {
        return Err(CollectiveError::new("slices", "at least 1 slice"));
    }
    let rooted = matches!(
        spec.collective,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv
    );
    if rooted && spec.root >= ranks {
        return Err(CollectiveError::new(
            "root",
            format!("a rank below {ranks}, got {}", spec.root),
        ));
    }
    if spec.collective == Collective::SendRecv {
        if spec.peer >= ranks {
            return Err(CollectiveError::new(
                "peer",
                format!("a rank below {ranks}, got {}", spec.peer),
            ));
        }
        if spec.peer == spec.root {
            return Err(CollectiveError::new(
                "peer",
                format!("a rank other than the root {}", spec.root),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testing {
    //! A uniform test fabric and byte accounting shared by the generators' tests.

    use super::super::{Algorithm, Collective, CollectiveSpec, Fabric, OpKind, Schedule};

    /// Every pair has the same bandwidth; ranks `k·per_node .. (k+1)·per_node` are node k.
    pub struct Uniform {
        pub per_node: u32,
    }

    impl Fabric for Uniform {
        fn bottleneck_bps(&self, _src: u32, _dst: u32) -> f64 {
            100e9
        }
        fn node_of(&self, rank: u32) -> u32 {
            rank / self.per_node
        }
    }

    pub const FLAT: Uniform = Uniform { per_node: 1 };

    pub fn spec(collective: Collective, algorithm: Algorithm, bytes: u64) -> CollectiveSpec {
        CollectiveSpec {
            collective,
            bytes,
            root: 0,
            peer: 1,
            algorithm,
            slices: 1,
        }
    }

    /// Bytes each endpoint sends and receives over the whole schedule.
    pub fn sent_received(s: &Schedule) -> (Vec<u128>, Vec<u128>) {
        let n = s.endpoints() as usize;
        let mut sent = vec![0u128; n];
        let mut received = vec![0u128; n];
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    sent[a as usize] += bytes as u128;
                    received[b as usize] += bytes as u128;
                }
            }
        }
        (sent, received)
    }

    /// Number of transfer ops.
    pub fn transfers(s: &Schedule) -> usize {
        s.ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Transfer { .. }))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn unsupported_combination_names_the_algorithm_field() {
        let e = generate(
            &spec(Collective::AllToAll, Algorithm::HalvingDoubling, 64),
            4,
            &FLAT,
        )
        .unwrap_err();
        assert_eq!(e.field, "algorithm");
        assert!(e
            .expected
            .contains("halving_doubling implements all_reduce"));
    }

    #[test]
    fn zero_slices_and_bad_roots_are_rejected() {
        let mut s = spec(Collective::Broadcast, Algorithm::Direct, 64);
        s.slices = 0;
        assert_eq!(generate(&s, 4, &FLAT).unwrap_err().field, "slices");
        s.slices = 1;
        s.root = 4;
        assert_eq!(generate(&s, 4, &FLAT).unwrap_err().field, "root");
        let mut p2p = spec(Collective::SendRecv, Algorithm::Direct, 64);
        p2p.peer = 0;
        assert_eq!(generate(&p2p, 4, &FLAT).unwrap_err().field, "peer");
    }

    #[test]
    fn one_rank_has_nothing_to_send() {
        let s = generate(
            &spec(
                Collective::AllReduce,
                default_algorithm(Collective::AllReduce),
                64,
            ),
            1,
            &FLAT,
        )
        .unwrap();
        assert!(s.ops.is_empty());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn defaults_are_ring_and_direct_for_all_to_all() {
        assert_eq!(default_algorithm(Collective::AllToAll), Algorithm::Direct);
        for c in [
            Collective::AllReduce,
            Collective::ReduceScatter,
            Collective::AllGather,
            Collective::Broadcast,
            Collective::Reduce,
            Collective::SendRecv,
        ] {
            let a = default_algorithm(c);
            assert!(a.supports(c));
            assert_eq!(a.report_name(), "ring(1)");
        }
    }
}

#[cfg(test)]
mod properties {
    //! Invariants over random rank counts, collectives and algorithms, and a symbolic
    //! data-flow check that ring and halving-doubling all-reduce really reduce everything.

    use super::super::{OpKind, Phase};
    use super::testing::*;
    use super::*;
    use proptest::prelude::*;

    const COLLECTIVES: [Collective; 7] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::SendRecv,
    ];

    fn algorithm(pick: usize, n: u32, rings: u32, servers: u32, colocated: bool) -> Algorithm {
        match pick {
            0 => Algorithm::Ring {
                rings: (0..rings)
                    .map(|i| RingOrder::Generated {
                        offset: i * 7 % n,
                        stride: if i % 2 == 0 { 1 } else { n - 1 },
                        reverse: i == 2,
                    })
                    .collect(),
            },
            1 => Algorithm::Hierarchical,
            2 => Algorithm::DoubleBinaryTree,
            3 => Algorithm::HalvingDoubling,
            4 => Algorithm::ParameterServer {
                servers: if colocated { servers.min(n) } else { servers },
                colocated,
            },
            _ => Algorithm::Direct,
        }
    }

    /// Bytes the schedule must put on the network, where a closed form is textbook.
    fn closed_form(c: Collective, a: &Algorithm, n: u32, per_node: u32, m: u64) -> Option<u128> {
        let (n, m) = (n as u128, m as u128);
        let p = 1u128 << (127 - n.leading_zeros());
        Some(match (a, c) {
            (_, Collective::SendRecv) => m,
            (Algorithm::Hierarchical, _) => {
                let (l, nodes) = (per_node as u128, n / per_node as u128);
                n * (2 * (l - 1) * m / l + 2 * (nodes - 1) * m / n)
            }
            (Algorithm::HalvingDoubling, Collective::AllReduce) => {
                2 * (p - 1) * m + 2 * (n - p) * m
            }
            (Algorithm::HalvingDoubling, _) if p != n => return None,
            (Algorithm::ParameterServer { colocated, .. }, _) => {
                2 * if *colocated { n - 1 } else { n } * m
            }
            (_, Collective::AllReduce) => 2 * (n - 1) * m,
            _ => (n - 1) * m,
        })
    }

    /// Checks one random case. With `exact`, `m` divides evenly everywhere and totals must
    /// equal the closed forms; otherwise they may exceed them by less than n bytes per pair per
    /// op, from rounding chunks up.
    #[allow(clippy::too_many_arguments)]
    fn check(
        n: u32,
        divisor_pick: usize,
        collective: usize,
        pick: usize,
        (rings, servers, colocated): (u32, u32, bool),
        slices: u32,
        m: u64,
        exact: bool,
        root_pick: u32,
    ) -> Result<(), TestCaseError> {
        let divisors: Vec<u32> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
        let per_node = divisors[divisor_pick % divisors.len()];
        let c = COLLECTIVES[collective];
        let a = algorithm(pick, n, rings, servers, colocated);
        let root = root_pick % n;
        let sp = CollectiveSpec {
            collective: c,
            bytes: m,
            root,
            peer: (root + 1) % n,
            algorithm: a.clone(),
            slices,
        };
        let result = generate(&sp, n, &Uniform { per_node });
        if !a.supports(c) {
            prop_assert_eq!(result.unwrap_err().field, "algorithm");
            return Ok(());
        }
        let s = result.unwrap();
        prop_assert_eq!(s.validate(), Ok(()));
        prop_assert!(!s.ops.is_empty());
        let mut pair_ops = 0u128;
        for op in &s.ops {
            if let OpKind::Transfer { pattern, .. } = op.kind {
                let pairs = s.patterns[pattern.0 as usize].pairs.len();
                prop_assert!(pairs > 0);
                pair_ops += pairs as u128;
            }
            if matches!(op.kind, OpKind::Reduce { .. }) {
                prop_assert!(!op.deps.is_empty());
            }
        }
        if let Some(total) = closed_form(c, &a, n, per_node, m) {
            if exact {
                prop_assert_eq!(s.total_transfer_bytes(), total);
            } else {
                prop_assert!(s.total_transfer_bytes() >= total);
                prop_assert!(s.total_transfer_bytes() < total + pair_ops * n as u128 + 1);
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn schedules_are_valid_and_move_the_closed_form_bytes(
            n in 2u32..40,
            divisor_pick in 0usize..8,
            collective in 0usize..7,
            pick in 0usize..6,
            options in (1u32..4, 1u32..5, any::<bool>()),
            slices in 1u32..5,
            units in 1u64..4,
            root_pick in 0u32..1000,
        ) {
            let m = units * u64::from(n) * 64 * 6;
            check(n, divisor_pick, collective, pick, options, slices, m, true, root_pick)?;
        }

        #[test]
        fn any_byte_count_rounds_up_by_less_than_n_per_pair(
            n in 2u32..40,
            divisor_pick in 0usize..8,
            collective in 0usize..7,
            pick in 0usize..6,
            options in (1u32..4, 1u32..5, any::<bool>()),
            slices in 1u32..5,
            bytes in 0u64..100_000,
            root_pick in 0u32..1000,
        ) {
            check(n, divisor_pick, collective, pick, options, slices, bytes, false, root_pick)?;
        }
    }

    fn full(n: u32) -> u64 {
        (1u64 << n) - 1
    }

    #[test]
    fn ring_all_reduce_leaves_every_chunk_fully_reduced_everywhere() {
        for n in 2..=12u32 {
            let order = RingOrder::Generated {
                offset: 3 % n,
                stride: if n % 2 == 1 { 2 } else { 1 },
                reverse: true,
            };
            let sp = spec(
                Collective::AllReduce,
                Algorithm::Ring { rings: vec![order] },
                u64::from(n) * 8,
            );
            let s = generate(&sp, n, &FLAT).unwrap();
            // hold[rank][chunk] = set of ranks whose contribution is in that chunk.
            let mut hold: Vec<Vec<u64>> = (0..n).map(|r| vec![1u64 << r; n as usize]).collect();
            let mut step = 0u32;
            for op in &s.ops {
                let OpKind::Transfer { pattern, .. } = op.kind else {
                    continue;
                };
                let pairs = &s.patterns[pattern.0 as usize].pairs;
                // Ring position of each rank, read from the "send to successor" pattern.
                let mut pos = vec![0u32; n as usize];
                let mut r = pairs[0].0;
                for i in 0..n {
                    pos[r as usize] = i;
                    r = pairs.iter().find(|&&(a, _)| a == r).unwrap().1;
                }
                let before = hold.clone();
                for &(a, b) in pairs.iter() {
                    if op.phase == Phase::ReduceScatter {
                        let chunk = ((pos[a as usize] + n - step) % n) as usize;
                        hold[b as usize][chunk] |= before[a as usize][chunk];
                    } else {
                        // All-gather step t = step - (n-1) forwards chunk pos + 1 - t.
                        let chunk = ((pos[a as usize] + 2 * n - step) % n) as usize;
                        hold[b as usize][chunk] = before[a as usize][chunk];
                    }
                }
                step += 1;
            }
            assert_eq!(step, 2 * (n - 1));
            assert!(hold.iter().flatten().all(|&h| h == full(n)), "n = {n}");
        }
    }

    #[test]
    fn halving_doubling_all_reduce_leaves_every_block_fully_reduced_everywhere() {
        for n in [2u32, 4, 8, 16, 32] {
            let m = u64::from(n) * 16;
            let sp = spec(Collective::AllReduce, Algorithm::HalvingDoubling, m);
            let s = generate(&sp, n, &FLAT).unwrap();
            let mut hold: Vec<Vec<u64>> = (0..n).map(|r| vec![1u64 << r; n as usize]).collect();
            // Blocks [lo, hi) each rank is responsible for.
            let mut range: Vec<(u32, u32)> = vec![(0, n); n as usize];
            for op in &s.ops {
                let OpKind::Transfer { pattern, bytes } = op.kind else {
                    continue;
                };
                let before = hold.clone();
                let ranges = range.clone();
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    let (lo, hi) = ranges[a as usize];
                    let sent = if op.phase == Phase::ReduceScatter {
                        // a sends the half of its range that b keeps (the half holding b).
                        let mid = (lo + hi) / 2;
                        let half = if b < mid { (lo, mid) } else { (mid, hi) };
                        for blk in half.0..half.1 {
                            hold[b as usize][blk as usize] |= before[a as usize][blk as usize];
                        }
                        range[b as usize] = half;
                        half.1 - half.0
                    } else {
                        for blk in lo..hi {
                            hold[b as usize][blk as usize] = before[a as usize][blk as usize];
                        }
                        let (blo, bhi) = ranges[b as usize];
                        range[b as usize] = (lo.min(blo), hi.max(bhi));
                        hi - lo
                    };
                    assert_eq!(bytes, u64::from(sent) * m / u64::from(n));
                }
            }
            assert!(hold.iter().flatten().all(|&h| h == full(n)), "n = {n}");
            assert!(range.iter().all(|&r| r == (0, n)));
        }
    }
}
