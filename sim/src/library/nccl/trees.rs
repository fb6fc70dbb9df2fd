//! NCCL's tree all-reduce as it is laid over nodes (`graph/trees.cc`, `enqueue.cc`): inside
//! each node the GPUs form a chain from a head GPU (the one next to the channel's NIC) to the
//! last; across nodes the heads form NCCL's double binary tree over the nodes (`ncclGetBtree`:
//! tree 1 the mirror of tree 0). Each channel reduces up its chains and the inter-node tree to
//! the root, then broadcasts back down, pipelined in tree chunks.
//!
//! Channels are rail-aligned as NCCL's tree search makes them on NVSwitch nodes with a NIC per
//! GPU: the chains of head `h` start at local GPU `h` and run `h, h+1, ...` round the node, so
//! the channels' inter-node traffic leaves through every NIC instead of one. Channels with the
//! same head and tree take the same links; under max-min they are one lane carrying all of
//! them (the caller caps its flows at their channels' rate). Inside one node the tree is the
//! chain alone.

use crate::collective::steps::{chain, split_even, ChainStep};
use crate::collective::{Collective, Fabric, Phase, Schedule};

/// The tree all-reduce of `bytes` over `ranks` ranks (grouped into nodes by `fabric`), for
/// `channels` channels on nodes with `nics` NICs each, pipelined in `slices` chunks: the
/// schedule and how many channels each lane carries. `None` when nodes hold different
/// numbers of the ranks (NCCL's trees assume the same on every node). `mesh_order`, on nodes
/// whose GPUs share NVLinks without a switch, is a cycle over a node's positions that stays on
/// NVLink (NCCL's search finds its chains over those links): chains follow it instead of the
/// ranks' order.
pub fn all_reduce(
    bytes: u64,
    ranks: u32,
    channels: u64,
    nics: u32,
    slices: u64,
    fabric: &dyn Fabric,
    mesh_order: Option<&[u32]>,
) -> Option<(Schedule, f64)> {
    let nodes = super::ranks_by_node(ranks, fabric)?;
    let per = nodes[0].len();
    let n_nodes = nodes.len() as u32;
    let trees = if n_nodes > 1 { 2 } else { 1 };
    let heads = (nics.max(1) as usize)
        .min(per)
        .min((channels as usize / trees).max(1));
    let lanes = heads * trees;
    let mut s = Schedule::new(Collective::AllReduce, "nccl_tree", ranks, bytes);
    let shares = split_even(bytes, lanes as u64);
    for (lane, &share) in shares.iter().enumerate() {
        if share == 0 && !(bytes == 0 && lane == 0) {
            continue;
        }
        let (h, t) = (lane / trees, (lane % trees) as u32);
        // Local GPU i of chain h on node v.
        let at = |v: &Vec<u32>, i: usize| match mesh_order {
            Some(order) if order.len() == per => v[order[(h + i) % per] as usize],
            _ => v[(h + i) % per],
        };
        let head_of = |node: u32| at(&nodes[node as usize], 0);
        // Between the nodes' heads (none inside one node).
        let (tree_up, tree_down) = if n_nodes > 1 {
            super::head_tree_steps(t, n_nodes, head_of)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut steps = Vec::new();
        let mut step = |s: &mut Schedule, pairs: Vec<(u32, u32)>, phase: Phase, reducers: u32| {
            steps.push(ChainStep {
                pattern: s.add_pattern(pairs),
                bytes: share,
                phase,
                reducers,
            });
        };
        // Up: each node's chain towards its head, then the inter-node tree towards the root.
        for i in (1..per).rev() {
            let up = nodes.iter().map(|v| (at(v, i), at(v, i - 1))).collect();
            step(&mut s, up, Phase::Reduce, n_nodes);
        }
        for (up, parents) in tree_up {
            step(&mut s, up, Phase::Reduce, parents);
        }
        // Down: the inter-node tree from the root, then each chain from its head.
        for down in tree_down {
            step(&mut s, down, Phase::Broadcast, 0);
        }
        for i in 1..per {
            let down = nodes.iter().map(|v| (at(v, i - 1), at(v, i))).collect();
            step(&mut s, down, Phase::Broadcast, 0);
        }
        chain(&mut s, &steps, slices as u32, lane as u16, 0, &[]);
    }
    Some((s, channels as f64 / lanes as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::OpKind;
    use crate::library::testing::Nodes;

    /// Bytes sent by each rank, and by each rank to another node.
    fn sent(s: &Schedule, per: u32) -> (Vec<u64>, Vec<u64>) {
        let mut all = vec![0u64; s.ranks as usize];
        let mut across = vec![0u64; s.ranks as usize];
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    all[a as usize] += bytes;
                    if a / per != b / per {
                        across[a as usize] += bytes;
                    }
                }
            }
        }
        (all, across)
    }

    #[test]
    fn every_nic_carries_an_equal_share_across_nodes() {
        // 2 nodes x 8 GPUs, 16 channels, 8 NICs: 8 heads x 2 trees. Each tree moves its lane's
        // share up once and down once between the two nodes, each through its head's NIC.
        let bytes = 1u64 << 30;
        let (s, per_lane) = all_reduce(bytes, 16, 16, 8, 4, &Nodes { per: 8 }, None).unwrap();
        assert_eq!(per_lane, 1.0);
        let (_, across) = sent(&s, 8);
        let total: u64 = across.iter().sum();
        assert_eq!(total, 2 * bytes, "up and down, each byte once");
        // Every GPU (so every NIC) sends the same across the node boundary.
        assert!(across.iter().all(|&b| b == across[0]), "{across:?}");
    }

    #[test]
    fn inside_one_node_the_tree_is_a_chain_there_and_back() {
        // 8 GPUs, 2 channels on 8 NICs: 2 chains (0, 1, ..., 7 and 1, 2, ..., 7, 0), each of
        // 7 hops up and 7 down. A GPU inside a chain sends its share up and down; a head only
        // down, a chain's last GPU only up.
        let (s, per_lane) = all_reduce(1 << 20, 8, 2, 8, 1, &Nodes { per: 8 }, None).unwrap();
        assert_eq!(per_lane, 1.0);
        let (all, _) = sent(&s, 8);
        let share = (1u64 << 20) / 2;
        assert_eq!(all.iter().sum::<u64>(), 2 * 2 * 7 * share);
        assert_eq!(all[0], 2 * share, "head of one chain, last of the other");
        assert_eq!(all[1], 3 * share, "inside one chain, head of the other");
        assert_eq!(all[4], 4 * share, "inside both");
    }

    #[test]
    fn nodes_of_different_sizes_leave_the_tree_to_the_caller() {
        struct Uneven;
        impl Fabric for Uneven {
            fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
                1e11
            }
            fn node_of(&self, r: u32) -> u32 {
                u32::from(r >= 3)
            }
        }
        assert!(all_reduce(1 << 20, 8, 2, 8, 1, &Uneven, None).is_none());
    }
}
