//! The topology summary's specification: bisection cuts, max flow, hop counts and how it
//! prints.

#![cfg(test)]
use super::*;
use crate::engine::SimTime;
use crate::topology::routing::Router;
use crate::topology::{LinkSpec, TopologyBuilder};

fn link(bps: f64) -> LinkSpec {
    LinkSpec {
        bandwidth_bps: bps,
        latency: SimTime::from_ns(100),
        buffer_bytes: 1 << 20,
        class: LinkClass::Ethernet,
    }
}

fn gpus(b: &mut TopologyBuilder, n: u32, node: impl Fn(u32) -> u32) -> Vec<DeviceId> {
    (0..n)
        .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(node(i))))
        .collect()
}

/// ```text
///   gpu0   gpu1   gpu2   gpu3      every link 100 Gbps
///      \     \     /     /
///       `-------sw------'
/// ```
fn star4() -> Topology {
    let mut b = Topology::builder("star4");
    let g = gpus(&mut b, 4, |i| i);
    let sw = b.add_device("sw", DeviceKind::Switch, None);
    for &x in &g {
        b.add_link(x, sw, link(100e9));
    }
    b.build().unwrap()
}

#[test]
fn star_of_four_has_bisection_of_two_links_and_diameter_two() {
    let s = summarize(&star4());
    assert_eq!(s.bisection_bps, 200e9);
    assert_eq!(s.diameter_hops, 2);
    assert!(!s.diameter_sampled);
    assert_eq!(s.gpu_pairs_examined, 12);
    assert_eq!(s.unreachable_gpu_pairs, 0);
    assert_eq!(s.gpu_pair_bottleneck_bps, Some((100e9, 100e9)));
    assert_eq!(
        s.devices_by_kind,
        vec![(DeviceKind::Gpu, 4), (DeviceKind::Switch, 1)]
    );
    assert_eq!(s.nodes, 4);
    let c = &s.links_by_class[0];
    assert_eq!((c.class, c.duplex_links), (LinkClass::Ethernet, 4));
    assert_eq!(c.total_bps, 800e9);
}

/// ```text
///   gpu0 ─ gpu1 ─ ... ─ gpu9 ─ (back to gpu0)      every link 10 GB/s = 80 Gbps
///   halves {0..4} and {5..9} meet on 4─5 and 9─0
/// ```
#[test]
fn ring_of_ten_is_cut_on_two_links() {
    let mut b = Topology::builder("ring10");
    let g = gpus(&mut b, 10, |i| i);
    for i in 0..10 {
        b.add_link(g[i], g[(i + 1) % 10], link(80e9));
    }
    let s = summarize(&b.build().unwrap());
    assert_eq!(s.bisection_bps, 160e9);
    // GPUs do not forward: only neighbours reach each other.
    assert_eq!(s.diameter_hops, 1);
    assert_eq!(s.unreachable_gpu_pairs, 90 - 20);
}

/// ```text
///   node 0: gpu0 gpu1 ─ sw0 ═══ 100 Gbps ═══ sw1 ─ gpu2 gpu3 : node 1
///                  (400 Gbps)               (400 Gbps)
/// ```
fn two_nodes() -> Topology {
    let mut b = Topology::builder("two-nodes");
    let g = gpus(&mut b, 4, |i| i / 2);
    let sw0 = b.add_device("sw0", DeviceKind::Switch, Some(0));
    let sw1 = b.add_device("sw1", DeviceKind::Switch, Some(1));
    b.add_link(g[0], sw0, link(400e9));
    b.add_link(g[1], sw0, link(400e9));
    b.add_link(g[2], sw1, link(400e9));
    b.add_link(g[3], sw1, link(400e9));
    b.add_link(sw0, sw1, link(100e9));
    b.build().unwrap()
}

#[test]
fn two_nodes_joined_by_one_link_have_that_links_bisection() {
    let s = summarize(&two_nodes());
    assert_eq!(s.bisection_bps, 100e9);
    assert_eq!(s.diameter_hops, 3);
    assert_eq!(s.nodes, 2);
    assert_eq!(s.gpu_pair_bottleneck_bps, Some((100e9, 400e9)));
}

/// ```text
///   gpu0 ── gpu1 ── gpu2 ── gpu3      100 Gbps links; GPUs do not forward
///   (+ gpu0 ── gpu3)
///
///   gpu0 ── nic ── gpu1               nic forwards, or not
/// ```
#[test]
fn devices_that_do_not_forward_carry_no_transit_flow() {
    // Halves {gpu0, gpu1} → {gpu2, gpu3}: only links that cross directly count.
    let mut b = Topology::builder("chain");
    let g = gpus(&mut b, 4, |_| 0);
    b.add_link(g[0], g[1], link(100e9));
    b.add_link(g[1], g[2], link(100e9));
    b.add_link(g[2], g[3], link(100e9));
    assert_eq!(bisection_bps(&b.clone().build().unwrap()), 100e9);
    b.add_link(g[0], g[3], link(100e9));
    assert_eq!(bisection_bps(&b.build().unwrap()), 200e9);

    let mut b = Topology::builder("nic-relay");
    let g = gpus(&mut b, 2, |_| 0);
    let nic = b.add_device("nic", DeviceKind::Nic, Some(0));
    b.add_link(g[0], nic, link(100e9));
    b.add_link(nic, g[1], link(100e9));
    b.set_forwards(nic, false);
    assert_eq!(bisection_bps(&b.clone().build().unwrap()), 0.0);
    b.set_forwards(nic, true);
    assert_eq!(bisection_bps(&b.build().unwrap()), 100e9);
}

/// ```text
///   s ─┬─ a (10) ─┬─ t        Two disjoint paths of 10 and 5, plus a cross link that a
///      │    │ 7   │           greedy first path could waste: max flow is 15 (Gbit/s).
///      └─ b (5) ──┘
/// ```
#[test]
fn max_flow_finds_the_optimum_not_the_first_paths() {
    let mut b = Topology::builder("flow");
    let s = b.add_device("s", DeviceKind::Gpu, None);
    let t = b.add_device("t", DeviceKind::Gpu, None);
    let x = b.add_device("a", DeviceKind::Switch, None);
    let y = b.add_device("b", DeviceKind::Switch, None);
    b.add_link(s, x, link(10e9));
    b.add_link(x, t, link(10e9));
    b.add_link(s, y, link(5e9));
    b.add_link(y, t, link(5e9));
    b.add_link(x, y, link(7e9));
    let topo = b.build().unwrap();
    assert_eq!(max_flow_bps(&topo, &[s], &[t]), 15e9);
    // Asymmetric: more than the cut capacity is impossible.
    let mut b = Topology::builder("asym");
    let s = b.add_device("s", DeviceKind::Gpu, None);
    let t = b.add_device("t", DeviceKind::Gpu, None);
    b.add_asymmetric_link(s, t, link(30e9), link(70e9));
    let topo = b.build().unwrap();
    assert_eq!(max_flow_bps(&topo, &[s], &[t]), 30e9);
    assert_eq!(max_flow_bps(&topo, &[t], &[s]), 70e9);
}

#[test]
fn hop_counts_agree_with_the_router() {
    let topo = two_nodes();
    let mut search = RoutedSearch::new(topo.devices().len());
    let mut router = Router::new(&topo, 7);
    for &src in topo.gpus() {
        search.run(&topo, src);
        for &dst in topo.gpus() {
            assert_eq!(
                Some(search.hops[dst.index()]),
                router.hops(&topo, src, dst),
                "{src:?} -> {dst:?}"
            );
        }
    }
}

#[test]
fn gpus_without_p2p_are_as_far_apart_as_their_route_through_the_host() {
    let topo = crate::topology::file::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topologies/pcie_box_2gpu.toml"
    )))
    .unwrap();
    let (a, b) = (topo.gpus()[0], topo.gpus()[1]);
    let routed = Router::new(&topo, 0).hops(&topo, a, b);
    assert_eq!(routed, Some(4), "gpu -> switch -> host -> switch -> gpu");
    assert_eq!(summarize(&topo).diameter_hops, 4);
}

#[test]
fn display_names_the_definitions_and_units() {
    let text = summarize(&two_nodes()).to_string();
    assert!(text.contains("first half of GPUs -> second half"), "{text}");
    assert!(text.contains("100 Gbps = 12.50 GB/s"), "{text}");
    assert!(text.contains("3 hops"), "{text}");
    assert!(text.contains("exact"), "{text}");
    assert!(text.contains("gpu 4, switch 2"), "{text}");
}

#[test]
fn dot_groups_nodes_and_labels_links() {
    let dot = to_dot(&two_nodes());
    assert!(dot.starts_with("graph \"two-nodes\" {"), "{dot}");
    assert!(dot.contains("subgraph cluster_0 {"), "{dot}");
    assert!(dot.contains("subgraph cluster_1 {"), "{dot}");
    assert!(dot.contains("\"gpu0\" [shape=box"), "{dot}");
    assert!(dot.contains("\"sw0\" [shape=octagon"), "{dot}");
    assert!(
        dot.contains("\"sw0\" -- \"sw1\" [label=\"ethernet 100 Gbps\"];"),
        "{dot}"
    );
    assert_eq!(dot.matches(" -- ").count(), 5);
}
