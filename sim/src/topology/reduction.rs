//! In-network reduction trees: the network switches that add up a collective's streams as they
//! pass, as InfiniBand switches with SHARP do for NCCL's CollNet algorithms.
//!
//! For the devices that take part (CollNet's heads of one NIC rail: one GPU per node), the
//! tree is:
//! - each member's *leaf*: the first network switch on its route to the next member (the
//!   switch its NIC is cabled to);
//! - the *root*: the reducing switch nearest to all leaves (fewest hops to the farthest leaf,
//!   then to all of them together, then the lowest id), or the leaf itself when every member
//!   hangs off the same one (a rail-optimized cluster's rail leaf);
//! - each leaf's way up: breadth-first from the root over links between reducing switches, so
//!   leaves whose ways meet share the switch above, which reduces both: a tree, not a set of
//!   paths. Every stream crosses each tree link once up and once down.
//!
//! Every switch of the tree must reduce (`in_network_reduction`); otherwise there is no tree
//! and the error says which switch is missing. SHARP's aggregation manager builds its trees
//! over the fabric's switches in the same spirit (a spanning tree rooted high in the fabric);
//! where it roots them is a setting of the manager, so dtsim takes the most central switch.

use std::collections::{BTreeSet, VecDeque};

use super::routing::Router;
use super::{DeviceId, DeviceKind, Topology};

/// Who sends up one edge of a [`ReductionTree`]: a member (by index into the members given)
/// or a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Child {
    Member(usize),
    Switch(DeviceId),
}

/// One in-network reduction tree over a set of members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReductionTree {
    /// The switch where the last sum is made and turned back down.
    pub root: DeviceId,
    /// The edges bottom-up, as (child, parent switch): level 0 is every member to its leaf,
    /// then the switches' edges, the deepest first. Down is the same edges in reverse.
    pub levels: Vec<Vec<(Child, DeviceId)>>,
}

fn reduces(topo: &Topology, d: DeviceId) -> bool {
    let dev = topo.device(d);
    dev.kind == DeviceKind::Switch && dev.in_network_reduction
}

/// Hops from `from` to every device over links between reducing switches (`u32::MAX`: not
/// reached).
fn hops_over_reducing(topo: &Topology, from: DeviceId) -> (Vec<u32>, Vec<Option<DeviceId>>) {
    let n = topo.devices().len();
    let (mut hops, mut parent) = (vec![u32::MAX; n], vec![None; n]);
    hops[from.index()] = 0;
    let mut queue = VecDeque::from([from]);
    while let Some(s) = queue.pop_front() {
        for &l in topo.out_links(s) {
            let t = topo.link(l).to;
            if reduces(topo, t) && hops[t.index()] == u32::MAX {
                hops[t.index()] = hops[s.index()] + 1;
                parent[t.index()] = Some(s);
                queue.push_back(t);
            }
        }
    }
    (hops, parent)
}

/// The reduction tree over `members` (at least two devices), or why there is none.
pub fn tree(
    topo: &Topology,
    router: &mut Router,
    members: &[DeviceId],
) -> Result<ReductionTree, String> {
    if members.len() < 2 {
        return Err("at least two members to reduce across".into());
    }
    let name = |d: DeviceId| topo.device(d).name.clone();
    let mut leaf_of = Vec::with_capacity(members.len());
    for (i, &m) in members.iter().enumerate() {
        let next = members[(i + 1) % members.len()];
        let path = router.path(topo, m, next).map_err(|e| e.to_string())?;
        let leaf = path
            .iter()
            .map(|&l| topo.link(l).to)
            .find(|&d| topo.device(d).kind == DeviceKind::Switch)
            .ok_or_else(|| {
                format!(
                    "{} reaches {} without a network switch in between",
                    name(m),
                    name(next)
                )
            })?;
        if !reduces(topo, leaf) {
            return Err(format!(
                "switch {} (where {} enters the network) does not reduce in the network \
                 (in_network_reduction)",
                name(leaf),
                name(m)
            ));
        }
        leaf_of.push(leaf);
    }
    let leaves: BTreeSet<DeviceId> = leaf_of.iter().copied().collect();
    let level0: Vec<(Child, DeviceId)> = leaf_of
        .iter()
        .enumerate()
        .map(|(i, &leaf)| (Child::Member(i), leaf))
        .collect();
    if leaves.len() == 1 {
        return Ok(ReductionTree {
            root: leaf_of[0],
            levels: vec![level0],
        });
    }
    // The most central reducing switch: every leaf's distance to it, over reducing switches.
    let from_leaves: Vec<Vec<u32>> = leaves
        .iter()
        .map(|&l| hops_over_reducing(topo, l).0)
        .collect();
    let root = (0..topo.devices().len())
        .map(|i| DeviceId(i as u32))
        .filter(|&d| reduces(topo, d))
        .filter_map(|d| {
            let far = from_leaves.iter().map(|h| h[d.index()]).max()?;
            let sum: u64 = from_leaves.iter().map(|h| h[d.index()] as u64).sum();
            (far != u32::MAX).then_some((far, sum, d))
        })
        .min()
        .map(|(_, _, d)| d)
        .ok_or_else(|| {
            format!(
                "a switch that reduces and reaches all of {} through switches that reduce; \
                 there is none",
                leaves
                    .iter()
                    .map(|&l| name(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    let (depth, parent) = hops_over_reducing(topo, root);
    let mut edges: BTreeSet<(u32, DeviceId, DeviceId)> = BTreeSet::new();
    for &leaf in &leaves {
        let mut child = leaf;
        while child != root {
            let Some(up) = parent[child.index()] else {
                unreachable!("the root was chosen among switches every leaf reaches")
            };
            edges.insert((depth[child.index()], child, up));
            child = up;
        }
    }
    let mut levels = vec![level0];
    let deepest = edges.iter().map(|e| e.0).max().unwrap_or(0);
    for d in (1..=deepest).rev() {
        levels.push(
            edges
                .iter()
                .filter(|e| e.0 == d)
                .map(|&(_, c, p)| (Child::Switch(c), p))
                .collect(),
        );
    }
    Ok(ReductionTree { root, levels })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::file::parse_str;

    /// `leaves` leaf switches of `per_leaf` hosts each, under `spines` spines.
    fn leaf_spine(leaves: u32, per_leaf: u32, spines: u32, reducing: bool) -> Topology {
        let mut t = format!("name = \"ls\"\nin_network_reduction = {reducing}\n");
        for l in 0..leaves {
            t += &format!("[[device]]\nname = \"leaf{l}\"\nkind = \"switch\"\n");
            for h in 0..per_leaf {
                let host = l * per_leaf + h;
                t += &format!("[[device]]\nname = \"gpu{host}\"\nkind = \"gpu\"\nnode = {host}\n");
                t += &format!(
                    "[[link]]\na = \"gpu{host}\"\nb = \"leaf{l}\"\nbandwidth = \"50GB/s\"\nclass = \"ib\"\n"
                );
            }
        }
        for s in 0..spines {
            t += &format!("[[device]]\nname = \"spine{s}\"\nkind = \"switch\"\n");
            for l in 0..leaves {
                t += &format!(
                    "[[link]]\na = \"leaf{l}\"\nb = \"spine{s}\"\nbandwidth = \"50GB/s\"\nclass = \"ib\"\n"
                );
            }
        }
        parse_str(&t, "test").unwrap()
    }

    fn gpus(t: &Topology) -> Vec<DeviceId> {
        t.gpus().to_vec()
    }

    #[test]
    fn members_on_one_leaf_reduce_there_in_one_level() {
        let t = leaf_spine(1, 4, 0, true);
        let tree = tree(&t, &mut Router::new(&t, 0), &gpus(&t)).unwrap();
        assert_eq!(tree.root, t.find("leaf0").unwrap());
        assert_eq!(tree.levels.len(), 1);
        assert_eq!(tree.levels[0].len(), 4);
    }

    #[test]
    fn leaves_meet_at_one_spine_and_each_leaf_sends_up_once() {
        let t = leaf_spine(3, 2, 2, true);
        let tree = tree(&t, &mut Router::new(&t, 0), &gpus(&t)).unwrap();
        // Both spines are as central; the lower id is the root.
        assert_eq!(tree.root, t.find("spine0").unwrap());
        assert_eq!(tree.levels.len(), 2);
        let leaves: Vec<_> = tree.levels[1].iter().map(|&(c, p)| (c, p)).collect();
        assert_eq!(leaves.len(), 3, "one stream up per leaf: {leaves:?}");
        assert!(leaves.iter().all(|&(_, p)| p == tree.root));
        // Level 0: each GPU to its own leaf.
        for &(c, p) in &tree.levels[0] {
            let Child::Member(i) = c else {
                panic!("level 0 is members")
            };
            assert_eq!(t.device(p).name, format!("leaf{}", i / 2));
        }
    }

    #[test]
    fn a_switch_that_does_not_reduce_is_named() {
        let t = leaf_spine(2, 2, 1, false);
        let e = tree(&t, &mut Router::new(&t, 0), &gpus(&t)).unwrap_err();
        assert!(e.contains("leaf0") && e.contains("does not reduce"), "{e}");
    }

    #[test]
    fn the_file_key_marks_every_network_switch_and_only_switches_take_the_device_key() {
        let t = leaf_spine(2, 1, 1, true);
        let reducing = t
            .devices()
            .iter()
            .filter(|d| d.in_network_reduction)
            .count();
        assert_eq!(reducing, 3);
        let bad =
            "name = \"x\"\n[[device]]\nname = \"g\"\nkind = \"gpu\"\nin_network_reduction = true\n\
                   [[device]]\nname = \"s\"\nkind = \"switch\"\n\
                   [[link]]\na = \"g\"\nb = \"s\"\nbandwidth = \"1GB/s\"\nclass = \"ib\"\n";
        let e = parse_str(bad, "x.toml").unwrap_err();
        assert_eq!(e.field, "device[0].in_network_reduction");
        let none =
            "name = \"x\"\nin_network_reduction = true\n[[device]]\nname = \"g\"\nkind = \"gpu\"\n\
                    [[device]]\nname = \"h\"\nkind = \"gpu\"\n\
                    [[link]]\na = \"g\"\nb = \"h\"\nbandwidth = \"1GB/s\"\nclass = \"nvlink\"\n";
        let e = parse_str(none, "x.toml").unwrap_err();
        assert_eq!(e.field, "in_network_reduction");
    }
}
