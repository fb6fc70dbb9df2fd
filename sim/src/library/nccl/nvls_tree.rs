//! NCCL's NVLS-Tree all-reduce (multi-node NVLS, 2.18+), as `all_reduce.h`
//! (`RunWorkElement<..., NCCL_ALGO_NVLS_TREE, ...>`) and `graph/connect.cc` (`connectNvls`)
//! run it on Hopper nodes whose GPUs hang off an NVSwitch:
//!
//! - the NVLS graph has one *head* per NIC, the GPU next to it; every loop of a channel cuts
//!   its data into one chunk per head;
//! - inside a node, every GPU writes each chunk to the switch (multicast memory), the switch
//!   reduces, and the chunk's head reads the node's sum back;
//! - the heads of one index form NCCL's double binary tree over the nodes (`ncclGetDtree`), the
//!   even channels on tree 0 and the odd ones on tree 1: each head reduces its tree children's
//!   sums into its node's and sends it up, the root turns it round, and each head passes the
//!   result down to its children;
//! - each head writes the result to the switch, which multicasts it to every GPU of its node.
//!
//! So every GPU moves the whole message to and from its switch, a head `1 / heads` more, and
//! each NIC carries `bytes / heads` each way (half on each tree): the network sees the message
//! once per direction, as NCCL's tree does, while NVLink does the intra-node reduction.
//! Played as one lane per (head, tree), each a pipelined chain of those six steps: push to the
//! switch, the head's read, the tree up, the tree down, the head's write, the multicast.

use crate::collective::steps::{chain, split_even, ChainStep};
use crate::collective::{Collective, Fabric, Phase, Schedule};

/// The NVLS-Tree all-reduce of `bytes` over `ranks` ranks (grouped into nodes by `fabric`)
/// with `heads` heads per node (NICs), pipelined in `slices`: the schedule, whose extra
/// endpoint `k` (endpoint `ranks + k`, named `nvswitch{k}`) is node `k`'s switch, nodes
/// numbered in order of their first rank. `None` unless there are at least two nodes, all with
/// the same number (over two) of ranks.
pub fn all_reduce(
    bytes: u64,
    ranks: u32,
    heads: u32,
    slices: u64,
    fabric: &dyn Fabric,
) -> Option<Schedule> {
    let nodes = super::ranks_by_node(ranks, fabric)?;
    let per = nodes[0].len();
    if nodes.len() < 2 || per <= 2 {
        return None;
    }
    let n_nodes = nodes.len() as u32;
    let heads = (heads.max(1) as usize).min(per);
    let mut s = Schedule::new(Collective::AllReduce, "nccl_nvls_tree", ranks, bytes);
    s.extra_endpoints = (0..n_nodes).map(|k| format!("nvswitch{k}")).collect();
    let switch = |node: usize| ranks + node as u32;
    let lanes = heads * 2;
    let shares = split_even(bytes, lanes as u64);
    // Every GPU to its switch and back, the same for every lane.
    let (push, multicast) = super::node_switch_patterns(&mut s, &nodes, ranks);
    for (lane, &share) in shares.iter().enumerate() {
        if share == 0 && !(bytes == 0 && lane == 0) {
            continue;
        }
        let (h, t) = (lane / 2, (lane % 2) as u32);
        let head_of = |node: u32| nodes[node as usize][h];
        let read: Vec<(u32, u32)> = (0..n_nodes)
            .map(|k| (switch(k as usize), head_of(k)))
            .collect();
        let write: Vec<(u32, u32)> = read.iter().map(|&(sw, h)| (h, sw)).collect();
        let (read, write) = (s.add_pattern(read), s.add_pattern(write));
        let step = |pattern, phase, reducers| ChainStep {
            pattern,
            bytes: share,
            phase,
            reducers,
        };
        let mut steps = vec![
            step(push, Phase::ReduceScatter, 0),
            step(read, Phase::Reduce, 0),
        ];
        // Between the nodes' heads: up the tree, then back down.
        let (up, down) = super::head_tree_steps(t, n_nodes, head_of);
        for (pairs, parents) in up {
            let pattern = s.add_pattern(pairs);
            steps.push(step(pattern, Phase::Reduce, parents));
        }
        for pairs in down {
            let pattern = s.add_pattern(pairs);
            steps.push(step(pattern, Phase::Broadcast, 0));
        }
        steps.push(step(write, Phase::AllGather, 0));
        steps.push(step(multicast, Phase::AllGather, 0));
        chain(&mut s, &steps, slices as u32, lane as u16, 0, &[]);
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::OpKind;
    use crate::library::testing::{bytes_to_ranks_and_switches as sent, Nodes};

    #[test]
    fn each_nic_carries_the_message_once_each_way_split_over_its_heads() {
        // 2 nodes x 8 GPUs, 8 heads (NICs): each head's NIC sends 1/8 of the message (half on
        // each tree: up on the tree where its node is the child, down on the other).
        let bytes = 1u64 << 30;
        let s = all_reduce(bytes, 16, 8, 4, &Nodes { per: 8 }).unwrap();
        assert_eq!(s.extra_endpoints, vec!["nvswitch0", "nvswitch1"]);
        let (net, _, _) = sent(&s);
        assert!(net.iter().all(|&b| b == bytes / 8), "{net:?}");
    }

    #[test]
    fn every_gpu_moves_the_message_to_its_switch_and_back_a_head_one_share_more() {
        // 3 nodes x 4 GPUs, 2 heads per node (GPUs 0 and 1 of each node).
        let bytes = 12u64 << 20;
        let s = all_reduce(bytes, 12, 2, 1, &Nodes { per: 4 }).unwrap();
        let (_, up, down) = sent(&s);
        for r in 0..12usize {
            let extra = if r % 4 < 2 { bytes / 2 } else { 0 };
            assert_eq!(up[r], bytes + extra, "rank {r} to its switch");
            assert_eq!(down[r], bytes + extra, "rank {r} from its switch");
        }
        // Each node's GPUs talk to their own switch only.
        for op in &s.ops {
            if let OpKind::Transfer { pattern, .. } = op.kind {
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    if a >= 12 {
                        assert_eq!(a - 12, b / 4, "switch {a} to rank {b}");
                    } else if b >= 12 {
                        assert_eq!(b - 12, a / 4, "rank {a} to switch {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_node_or_two_gpus_per_node_is_not_nvls_tree() {
        assert!(all_reduce(1 << 20, 8, 8, 1, &Nodes { per: 8 }).is_none());
        assert!(all_reduce(1 << 20, 8, 2, 1, &Nodes { per: 2 }).is_none());
    }
}
