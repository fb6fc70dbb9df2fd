//! Hierarchical all-reduce: intra-node ring reduce-scatter → inter-node ring all-reduce →
//! intra-node ring all-gather.
//!
//! Nodes come from `fabric.node_of`, in increasing node id; every node must hold the same
//! number L of ranks, and a node's ranks in increasing order form its intra-node ring (local
//! index = position in that ring). With M bytes and N nodes:
//! 1. intra-node reduce-scatter of M in L chunks, all nodes stepping together: L-1 ops, each
//!    with every node's ring pairs, `ceil(M/L)` per pair (channel 0, phase `ReduceScatter`);
//! 2. for each local index l, a ring all-reduce of that chunk over the N ranks with local index
//!    l (in node order): 2(N-1) ops of `ceil(ceil(M/L)/N)` per pair on channel l, the L rings
//!    running in parallel (phase `InterNode`);
//! 3. intra-node all-gather, the mirror of 1 (channel 0, phase `AllGather`), after every
//!    inter-node ring finished.
//!
//! One node degenerates to a flat ring over its ranks, one rank per node to a flat ring over
//! the nodes. Slices pipeline every stage like a ring's steps.

use std::collections::BTreeMap;

use super::ring::{cyclic_steps, successor_pairs};
use super::steps::{chain, channel};
use super::{Collective, CollectiveError, CollectiveSpec, Fabric, Phase, Schedule};

pub(crate) fn generate(
    spec: &CollectiveSpec,
    ranks: u32,
    fabric: &dyn Fabric,
) -> Result<Schedule, CollectiveError> {
    let mut nodes: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for r in 0..ranks {
        nodes.entry(fabric.node_of(r)).or_default().push(r);
    }
    let groups: Vec<Vec<u32>> = nodes.into_values().collect();
    let local = groups[0].len();
    if let Some(other) = groups.iter().find(|g| g.len() != local) {
        return Err(CollectiveError::new(
            "algorithm",
            format!(
                "the same number of ranks on every node for hierarchical, but the node of rank {} \
                 has {} ranks and the node of rank {} has {}",
                groups[0][0],
                local,
                other[0],
                other.len()
            ),
        ));
    }
    channel(local - 1, "algorithm")?;
    let mut schedule = Schedule::new(spec.collective, "hierarchical", ranks, spec.bytes);
    let node_count = groups.len() as u32;
    let local = local as u32;
    if node_count == 1 || local == 1 {
        let order: Vec<u32> = groups.concat();
        let steps = cyclic_steps(
            &mut schedule,
            successor_pairs(&order),
            ranks,
            spec.bytes,
            Collective::AllReduce,
            Phase::ReduceScatter,
            Phase::AllGather,
        );
        chain(&mut schedule, &steps, spec.slices, 0, 0, &[]);
        return Ok(schedule);
    }

    let intra_pairs: Vec<(u32, u32)> = groups.iter().flat_map(|g| successor_pairs(g)).collect();
    let intra_rs = cyclic_steps(
        &mut schedule,
        intra_pairs.clone(),
        local,
        spec.bytes,
        Collective::ReduceScatter,
        Phase::ReduceScatter,
        Phase::AllGather,
    );
    let after_rs = chain(&mut schedule, &intra_rs, spec.slices, 0, 0, &[]);

    let chunk = spec.bytes.div_ceil(u64::from(local));
    let first_inter = local - 1;
    let mut after_inter = Vec::new();
    for l in 0..local as usize {
        let across: Vec<u32> = groups.iter().map(|g| g[l]).collect();
        let steps = cyclic_steps(
            &mut schedule,
            successor_pairs(&across),
            node_count,
            chunk,
            Collective::AllReduce,
            Phase::InterNode,
            Phase::InterNode,
        );
        after_inter.extend(chain(
            &mut schedule,
            &steps,
            spec.slices,
            l as u16,
            first_inter,
            &after_rs,
        ));
    }

    let intra_ag = cyclic_steps(
        &mut schedule,
        intra_pairs,
        local,
        spec.bytes,
        Collective::AllGather,
        Phase::ReduceScatter,
        Phase::AllGather,
    );
    let first_ag = first_inter + 2 * (node_count - 1);
    chain(
        &mut schedule,
        &intra_ag,
        spec.slices,
        0,
        first_ag,
        &after_inter,
    );
    Ok(schedule)
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::{Algorithm, OpKind};
    use super::*;

    fn hierarchical(bytes: u64) -> super::super::CollectiveSpec {
        spec(Collective::AllReduce, Algorithm::Hierarchical, bytes)
    }

    #[test]
    fn phases_run_intra_reduce_scatter_then_inter_node_then_intra_all_gather() {
        // 4 nodes of 2 ranks.
        let m = 8 * 1000;
        let s = generate(&hierarchical(m), 8, &Uniform { per_node: 2 }).unwrap();
        assert!(s.validate().is_ok());
        let phases: Vec<Phase> = s
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Transfer { .. }))
            .map(|op| op.phase)
            .collect();
        let mut seen: Vec<Phase> = phases.clone();
        seen.dedup();
        assert_eq!(
            seen,
            vec![Phase::ReduceScatter, Phase::InterNode, Phase::AllGather]
        );
        // (L-1) + L rings × 2(N-1) + (L-1) transfer ops.
        assert_eq!(phases.len(), 1 + 2 * 6 + 1);
        // The intra-node all-gather waits for both inter-node rings.
        let first_ag = s
            .ops
            .iter()
            .position(|op| op.phase == Phase::AllGather)
            .unwrap();
        let waited: Vec<u16> = s.ops[first_ag]
            .deps
            .iter()
            .map(|d| s.ops[d.0 as usize].channel)
            .collect();
        assert_eq!(waited, vec![0, 1]);
        // Inter-node rings connect ranks with the same local index.
        let inter = s
            .ops
            .iter()
            .find(|op| op.phase == Phase::InterNode && op.channel == 1)
            .unwrap();
        let OpKind::Transfer { pattern, bytes } = inter.kind else {
            panic!("not a transfer")
        };
        assert_eq!(
            s.patterns[pattern.0 as usize].pairs.to_vec(),
            vec![(1, 3), (3, 5), (5, 7), (7, 1)]
        );
        assert_eq!(bytes, m / 8);
    }

    #[test]
    fn each_rank_moves_the_two_level_textbook_amount() {
        // N = 3 nodes of L = 4: 2(L-1)/L·M + 2(N-1)/N·M/L per rank.
        let m = 12 * 500;
        let s = generate(&hierarchical(m), 12, &Uniform { per_node: 4 }).unwrap();
        let (sent, received) = sent_received(&s);
        let expected = (2 * 3 * m / 4 + 2 * 2 * m / 12) as u128;
        assert!(sent.iter().all(|&b| b == expected));
        assert!(received.iter().all(|&b| b == expected));
    }

    #[test]
    fn unequal_nodes_are_rejected() {
        struct Lopsided;
        impl super::super::Fabric for Lopsided {
            fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
                1e9
            }
            fn node_of(&self, rank: u32) -> u32 {
                u32::from(rank >= 3)
            }
        }
        let e = generate(&hierarchical(64), 4, &Lopsided).unwrap_err();
        assert_eq!(e.field, "algorithm");
        assert!(e.expected.contains("same number of ranks"));
    }

    #[test]
    fn one_node_or_one_rank_per_node_is_a_flat_ring() {
        for per_node in [1, 6] {
            let s = generate(&hierarchical(6 * 10), 6, &Uniform { per_node }).unwrap();
            assert_eq!(transfers(&s), 10);
            assert_eq!(s.patterns.len(), 1);
            assert_eq!(
                s.patterns[0].pairs.to_vec(),
                vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)]
            );
        }
    }
}
