//! NCCL's CollNet all-reduce: the sum across nodes made by the network's switches (SHARP,
//! through NCCL's CollNet plugin), as `all_reduce.h` (`runCollNetDirect`, `runCollNetChain`
//! at 2.18–2.27) and `init.cc` (`collNetTrySetup`) run it:
//!
//! - every node has one *head* per NIC (the GPU next to it; the CollNet graph's first GPU of
//!   each channel), and each head's NIC joins one in-network reduction tree with the other
//!   nodes' heads of its index ([`crate::topology::reduction`]);
//! - **CollNet Direct** (NVSwitch nodes): every GPU writes each head's share of the message
//!   straight to that head, which adds the node's contributions; the head sends the node's sum
//!   up its tree and gets the total back; it writes the total straight to every GPU of its
//!   node. Each GPU moves `(heads − 1) / heads` of the message out and in twice over NVLink;
//! - **CollNet Chain**: inside each node a chain from the head (as the tree's chains: local GPU
//!   `h, h+1, ...`) reduces up to the head, the head goes through the network, and the result
//!   comes back down the chain;
//! - in the network each tree link carries the head's share once up and once down: a NIC sends
//!   `bytes / heads` each way, half of what a ring across two nodes and far less than one across
//!   many sends, with no GPU work for the sum.
//!
//! Played as one lane per head, a pipelined chain of those steps; the switches of the trees are
//! the schedule's extra endpoints (`innet<device>`), placed on the switch devices. NVLS across
//! nodes, which NCCL runs only with CollNet, is here too ([`nvls_all_reduce`]).

use crate::collective::steps::{chain, split_even, ChainStep};
use crate::collective::{Collective, Fabric, Phase, Schedule};
use crate::topology::reduction::{Child, ReductionTree};
use crate::topology::DeviceId;

/// Which of NCCL's two CollNet algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Direct,
    Chain,
}

/// The switches of some reduction trees as a schedule's extra endpoints (`innet<device>`),
/// numbered from `first` in order of first appearance.
struct Switches {
    first: u32,
    devices: Vec<DeviceId>,
}

impl Switches {
    fn of(trees: &[ReductionTree], first: u32) -> Switches {
        let mut devices: Vec<DeviceId> = Vec::new();
        for level in trees.iter().flat_map(|t| &t.levels) {
            for &(c, p) in level {
                let child = match c {
                    Child::Switch(d) => Some(d),
                    Child::Member(_) => None,
                };
                for d in std::iter::once(p).chain(child) {
                    if !devices.contains(&d) {
                        devices.push(d);
                    }
                }
            }
        }
        Switches { first, devices }
    }
    fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.devices.iter().map(|d| format!("innet{}", d.0))
    }
    fn endpoint(&self, d: DeviceId) -> u32 {
        let i = self.devices.iter().position(|&x| x == d);
        self.first + i.expect("every tree switch is listed") as u32
    }
}

/// The network part of one lane: up `tree` from the heads (`head_of(node)`), then back down.
fn through_the_network(
    tree: &ReductionTree,
    switches: &Switches,
    head_of: impl Fn(usize) -> u32,
    mut step: impl FnMut(Vec<(u32, u32)>, Phase),
) {
    let hop = |c: Child| match c {
        Child::Member(k) => head_of(k),
        Child::Switch(d) => switches.endpoint(d),
    };
    for level in &tree.levels {
        step(
            level
                .iter()
                .map(|&(c, p)| (hop(c), switches.endpoint(p)))
                .collect(),
            Phase::Reduce,
        );
    }
    for level in tree.levels.iter().rev() {
        step(
            level
                .iter()
                .map(|&(c, p)| (switches.endpoint(p), hop(c)))
                .collect(),
            Phase::Broadcast,
        );
    }
}

/// A lane's steps being collected: each a pattern over `share` bytes.
struct Lane<'a> {
    s: &'a mut Schedule,
    steps: Vec<ChainStep>,
    share: u64,
}

impl Lane<'_> {
    fn step(&mut self, pairs: Vec<(u32, u32)>, phase: Phase, reducers: u32) {
        if !pairs.is_empty() {
            let pattern = self.s.add_pattern(pairs);
            self.steps.push(ChainStep {
                pattern,
                bytes: self.share,
                phase,
                reducers,
            });
        }
    }
}

/// The CollNet all-reduce of `bytes` over `ranks` ranks (grouped into nodes by `fabric`), with
/// one reduction tree per head (`trees[h]` over the nodes' local rank `h`), pipelined in
/// `slices`: the schedule and the switches its extra endpoints stand for (endpoint
/// `ranks + i` is `switches[i]`). `None` unless there are at least two nodes holding the same
/// number of ranks, and at least one tree.
pub fn all_reduce(
    kind: Kind,
    bytes: u64,
    ranks: u32,
    trees: &[ReductionTree],
    slices: u64,
    fabric: &dyn Fabric,
) -> Option<(Schedule, Vec<DeviceId>)> {
    let nodes = super::ranks_by_node(ranks, fabric)?;
    let per = nodes[0].len();
    if nodes.len() < 2 || trees.is_empty() {
        return None;
    }
    let heads = trees.len().min(per);
    let name = match kind {
        Kind::Direct => "nccl_collnet_direct",
        Kind::Chain => "nccl_collnet_chain",
    };
    let mut s = Schedule::new(Collective::AllReduce, name, ranks, bytes);
    let switches = Switches::of(&trees[..heads], ranks);
    s.extra_endpoints = switches.names().collect();
    let n_nodes = nodes.len() as u32;
    for (h, &share) in split_even(bytes, heads as u64).iter().enumerate() {
        if share == 0 && !(bytes == 0 && h == 0) {
            continue;
        }
        // Local GPU i of head h's chain on node v (the head is i = 0).
        let at = |v: &Vec<u32>, i: usize| v[(h + i) % per];
        let mut lane = Lane {
            s: &mut s,
            steps: Vec::new(),
            share,
        };
        // Into the head: straight from every GPU, or up the chain.
        match kind {
            Kind::Direct => {
                let scatter = nodes
                    .iter()
                    .flat_map(|v| (1..per).map(move |i| (at(v, i), at(v, 0))))
                    .collect();
                lane.step(scatter, Phase::ReduceScatter, n_nodes);
            }
            Kind::Chain => {
                for i in (1..per).rev() {
                    let up = nodes.iter().map(|v| (at(v, i), at(v, i - 1))).collect();
                    lane.step(up, Phase::Reduce, n_nodes);
                }
            }
        }
        through_the_network(
            &trees[h],
            &switches,
            |k| at(&nodes[k], 0),
            |pairs, phase| lane.step(pairs, phase, 0),
        );
        // Out of the head: straight to every GPU, or down the chain.
        match kind {
            Kind::Direct => {
                let gather = nodes
                    .iter()
                    .flat_map(|v| (1..per).map(move |i| (at(v, 0), at(v, i))))
                    .collect();
                lane.step(gather, Phase::AllGather, 0);
            }
            Kind::Chain => {
                for i in 1..per {
                    let down = nodes.iter().map(|v| (at(v, i - 1), at(v, i))).collect();
                    lane.step(down, Phase::Broadcast, 0);
                }
            }
        }
        let steps = lane.steps;
        chain(&mut s, &steps, slices as u32, h as u16, 0, &[]);
    }
    Some((s, switches.devices))
}

/// NVLS across nodes with CollNet ("NVLS + SHARP", multi-node `NCCL_ALGO_NVLS` where CollNet
/// is enabled): inside each node NVLS as in NVLS-Tree (every GPU writes each head's chunk to
/// its NVSwitch, which reduces; the head reads the node's sum), across nodes each head's
/// reduction tree in place of NVLS-Tree's double binary tree, then the head writes the total
/// to its switch, which multicasts it. Extra endpoints: node `k`'s NVSwitch is `ranks + k`
/// (`nvswitch{k}`), then the trees' switches, which are returned. Same `None` cases as
/// [`all_reduce`], and nodes of at most two ranks (no NVLS).
pub fn nvls_all_reduce(
    bytes: u64,
    ranks: u32,
    trees: &[ReductionTree],
    slices: u64,
    fabric: &dyn Fabric,
) -> Option<(Schedule, Vec<DeviceId>)> {
    let nodes = super::ranks_by_node(ranks, fabric)?;
    let per = nodes[0].len();
    if nodes.len() < 2 || per <= 2 || trees.is_empty() {
        return None;
    }
    let heads = trees.len().min(per);
    let n_nodes = nodes.len() as u32;
    let mut s = Schedule::new(Collective::AllReduce, "nccl_nvls_collnet", ranks, bytes);
    let switches = Switches::of(&trees[..heads], ranks + n_nodes);
    s.extra_endpoints = (0..n_nodes)
        .map(|k| format!("nvswitch{k}"))
        .chain(switches.names())
        .collect();
    let nvswitch = |k: usize| ranks + k as u32;
    let (push, multicast) = super::node_switch_patterns(&mut s, &nodes, ranks);
    for (h, &share) in split_even(bytes, heads as u64).iter().enumerate() {
        if share == 0 && !(bytes == 0 && h == 0) {
            continue;
        }
        let head_of = |k: usize| nodes[k][h];
        let read = (0..nodes.len())
            .map(|k| (nvswitch(k), head_of(k)))
            .collect();
        let write = (0..nodes.len())
            .map(|k| (head_of(k), nvswitch(k)))
            .collect();
        let mut lane = Lane {
            s: &mut s,
            steps: Vec::new(),
            share,
        };
        lane.steps.push(ChainStep {
            pattern: push,
            bytes: share,
            phase: Phase::ReduceScatter,
            reducers: 0,
        });
        lane.step(read, Phase::Reduce, 0);
        through_the_network(&trees[h], &switches, head_of, |pairs, phase| {
            lane.step(pairs, phase, 0)
        });
        lane.step(write, Phase::AllGather, 0);
        lane.steps.push(ChainStep {
            pattern: multicast,
            bytes: share,
            phase: Phase::AllGather,
            reducers: 0,
        });
        let steps = lane.steps;
        chain(&mut s, &steps, slices as u32, h as u16, 0, &[]);
    }
    Some((s, switches.devices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::OpKind;
    use crate::library::testing::{bytes_to_ranks_and_switches as sent, Nodes};

    /// One tree per head over `nodes` nodes, every head on leaf switch `100 + h` (a rail leaf).
    fn rail_trees(nodes: usize, heads: usize) -> Vec<ReductionTree> {
        (0..heads)
            .map(|h| {
                let leaf = DeviceId(100 + h as u32);
                ReductionTree {
                    root: leaf,
                    levels: vec![(0..nodes).map(|k| (Child::Member(k), leaf)).collect()],
                }
            })
            .collect()
    }

    #[test]
    fn direct_sends_each_heads_share_through_its_nic_once_each_way() {
        // 2 nodes x 4 GPUs, 4 heads: a NIC carries a quarter of the message up and down; every
        // GPU writes the other heads' shares to them and each head writes its total to the
        // other three: 3/4 of the message out, twice.
        let bytes = 64u64 << 20;
        let (s, switches) = all_reduce(
            Kind::Direct,
            bytes,
            8,
            &rail_trees(2, 4),
            2,
            &Nodes { per: 4 },
        )
        .unwrap();
        assert_eq!(switches.len(), 4);
        assert_eq!(s.extra_endpoints[0], "innet100");
        let (gpu, up, down) = sent(&s);
        for r in 0..8 {
            assert_eq!(up[r], bytes / 4, "rank {r} up");
            assert_eq!(down[r], bytes / 4, "rank {r} down");
            assert_eq!(gpu[r], 2 * 3 * bytes / 4, "rank {r} over NVLink");
        }
    }

    #[test]
    fn chain_runs_each_heads_share_up_and_down_its_chain() {
        let bytes = 12u64 << 20;
        let (s, _) = all_reduce(
            Kind::Chain,
            bytes,
            6,
            &rail_trees(2, 3),
            1,
            &Nodes { per: 3 },
        )
        .unwrap();
        let (gpu, up, down) = sent(&s);
        // Three lanes of a third: each GPU sends up its chain for the lanes where it is not the
        // head, and down for those where it is not the tail (2 x 2 thirds in all).
        for r in 0..6 {
            assert_eq!(up[r], bytes / 3);
            assert_eq!(down[r], bytes / 3);
            assert_eq!(gpu[r], 4 * bytes / 3, "rank {r}");
        }
    }

    #[test]
    fn a_two_level_tree_crosses_each_of_its_links_once_each_way() {
        // 4 nodes of 1 GPU: leaves 10 (nodes 0, 1) and 11 (nodes 2, 3) under root 20.
        let (l0, l1, root) = (DeviceId(10), DeviceId(11), DeviceId(20));
        let tree = ReductionTree {
            root,
            levels: vec![
                vec![
                    (Child::Member(0), l0),
                    (Child::Member(1), l0),
                    (Child::Member(2), l1),
                    (Child::Member(3), l1),
                ],
                vec![(Child::Switch(l0), root), (Child::Switch(l1), root)],
            ],
        };
        let bytes = 1u64 << 20;
        let (s, switches) =
            all_reduce(Kind::Chain, bytes, 4, &[tree], 1, &Nodes { per: 1 }).unwrap();
        assert_eq!(switches, vec![l0, l1, root]);
        let mut switch_to_switch = 0;
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes: b } = op.kind {
                for &(a, c) in s.patterns[pattern.0 as usize].pairs.iter() {
                    if a >= 4 && c >= 4 {
                        switch_to_switch += b;
                    }
                }
            }
        }
        assert_eq!(
            switch_to_switch,
            2 * 2 * bytes,
            "two leaf uplinks, up and down"
        );
    }

    #[test]
    fn nvls_with_collnet_sums_in_the_nvswitch_and_in_the_network() {
        // 2 nodes x 4 GPUs, 4 heads: each GPU moves the message to its NVSwitch and back (a
        // head a quarter more), each head's NIC a quarter of it each way, and GPUs never talk
        // to each other directly.
        let bytes = 64u64 << 20;
        let (s, switches) =
            nvls_all_reduce(bytes, 8, &rail_trees(2, 4), 2, &Nodes { per: 4 }).unwrap();
        assert_eq!(switches.len(), 4);
        assert_eq!(
            &s.extra_endpoints[..3],
            ["nvswitch0", "nvswitch1", "innet100"]
        );
        let (mut nvswitch_up, mut net_up, mut gpu_to_gpu) = (vec![0u64; 8], vec![0u64; 8], 0);
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes: b } = op.kind {
                for &(a, c) in s.patterns[pattern.0 as usize].pairs.iter() {
                    match (a < 8, c) {
                        (true, 8 | 9) => nvswitch_up[a as usize] += b,
                        (true, c) if c >= 10 => net_up[a as usize] += b,
                        (true, _) => gpu_to_gpu += b,
                        _ => {}
                    }
                }
            }
        }
        assert_eq!(gpu_to_gpu, 0);
        for r in 0..8 {
            assert_eq!(nvswitch_up[r], bytes + bytes / 4, "rank {r} to its switch");
            assert_eq!(net_up[r], bytes / 4, "rank {r} up its tree");
        }
    }

    #[test]
    fn one_node_has_no_collnet() {
        assert!(all_reduce(
            Kind::Direct,
            1 << 20,
            8,
            &rail_trees(1, 8),
            1,
            &Nodes { per: 8 }
        )
        .is_none());
    }
}
