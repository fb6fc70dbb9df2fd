//! The generators' tests: what each family builds, its parameter checks and its routes.
#![cfg(test)]

use super::*;
use crate::topology::routing::Router;

fn params(bandwidth: &str, class: LinkClass) -> LinkParams {
    LinkParams {
        bandwidth: Bandwidth(crate::units::parse_bandwidth(bandwidth).unwrap()),
        latency: Duration::default(),
        buffer: None,
        class,
    }
}
fn eth(bandwidth: &str) -> LinkParams {
    params(bandwidth, LinkClass::Ethernet)
}

fn count(t: &Topology, kind: DeviceKind) -> usize {
    t.devices().iter().filter(|d| d.kind == kind).count()
}

fn hops(t: &Topology, a: &str, b: &str) -> u32 {
    let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
    Router::new(t, 0).hops(t, a, b).unwrap()
}

/// Names of the devices on the route from `a` to `b`, both ends included.
fn route(t: &Topology, a: &str, b: &str) -> Vec<String> {
    let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
    let mut r = Router::new(t, 0);
    let path = r.path(t, a, b).unwrap();
    let mut names = vec![t.device(a).name.clone()];
    names.extend(path.iter().map(|&l| t.device(t.link(l).to).name.clone()));
    names
}

/// Bandwidth (bits/s, one direction) of the link between two named devices.
fn link_bps(t: &Topology, a: &str, b: &str) -> Option<f64> {
    let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
    t.out_links(a)
        .iter()
        .map(|&l| t.link(l))
        .find(|l| l.to == b)
        .map(|l| l.bandwidth_bps)
}

fn gpus_are_rank_ordered_by_node(t: &Topology) {
    let nodes: Vec<u32> = t
        .gpus()
        .iter()
        .map(|&g| t.device(g).node.unwrap())
        .collect();
    assert!(nodes.windows(2).all(|w| w[0] <= w[1]), "{nodes:?}");
}

#[test]
fn ring_links_each_gpu_to_its_two_neighbours() {
    let t = ring("r", 5, &eth("10GB/s")).unwrap();
    assert_eq!(t.gpus().len(), 5);
    assert_eq!(t.duplex_link_count(), 5);
    assert_eq!(ring("r", 2, &eth("10GB/s")).unwrap().duplex_link_count(), 1);
    let mut router = crate::topology::routing::Router::new(&t, 0);
    assert_eq!(
        router.hops(&t, t.gpus()[0], t.gpus()[2]),
        Some(2),
        "ring nodes forward"
    );
    assert_eq!(
        ring("r", 1, &eth("10GB/s")).unwrap_err().field,
        "generator.n"
    );
}

#[test]
fn star_puts_every_gpu_one_hop_from_the_switch() {
    let t = Star {
        n: 8,
        link: eth("100Gbps"),
    }
    .build("s")
    .unwrap();
    assert_eq!(t.gpus().len(), 8);
    assert_eq!(count(&t, DeviceKind::Switch), 1);
    assert_eq!(t.duplex_link_count(), 8);
    assert_eq!(hops(&t, "gpu0", "gpu7"), 2);
    gpus_are_rank_ordered_by_node(&t);
}

fn leaf_spine(oversubscription: Option<f64>, uplink_bw: Option<&str>) -> LeafSpine {
    LeafSpine {
        leaves: 4,
        hosts_per_leaf: 8,
        spines: 2,
        uplinks_per_spine: 2,
        host_link: eth("100Gbps"),
        uplink: UplinkParams {
            bandwidth: uplink_bw.map(|s| Bandwidth(crate::units::parse_bandwidth(s).unwrap())),
            latency: Duration::default(),
            buffer: None,
            class: LinkClass::Ethernet,
        },
        oversubscription,
    }
}

#[test]
fn leaf_spine_has_hosts_leaves_spines_and_full_leaf_to_spine_mesh() {
    let t = leaf_spine(None, Some("100Gbps")).build("ls").unwrap();
    assert_eq!(t.gpus().len(), 32);
    assert_eq!(count(&t, DeviceKind::Switch), 6);
    assert_eq!(t.duplex_link_count(), 32 + 4 * 2 * 2);
    assert_eq!(hops(&t, "gpu0", "gpu1"), 2);
    assert_eq!(hops(&t, "gpu0", "gpu31"), 4);
    gpus_are_rank_ordered_by_node(&t);
}

#[test]
fn leaf_spine_two_to_one_gives_each_leaf_half_its_downlink_capacity_upward() {
    let t = leaf_spine(Some(2.0), None).build("ls").unwrap();
    let leaf = t.find("leaf1").unwrap();
    let (mut down, mut up) = (0.0, 0.0);
    for &l in t.out_links(leaf) {
        let link = t.link(l);
        match t.device(link.to).kind {
            DeviceKind::Gpu => down += link.bandwidth_bps,
            _ => up += link.bandwidth_bps,
        }
    }
    assert_eq!(down, 800e9);
    assert!((up - down / 2.0).abs() < 1.0, "up {up} down {down}");
    // 8 × 100 Gb/s / (2 × 2 spines × 2 uplinks each) = 100 Gb/s per uplink.
    assert_eq!(link_bps(&t, "leaf1", "spine0"), Some(100e9));
}

#[test]
fn leaf_spine_wants_exactly_one_of_uplink_bandwidth_and_oversubscription() {
    let both = leaf_spine(Some(2.0), Some("100Gbps"))
        .build("ls")
        .unwrap_err();
    assert_eq!(both.field, "generator.uplink.bandwidth");
    let neither = leaf_spine(None, None).build("ls").unwrap_err();
    assert!(neither.expected.contains("neither"), "{neither}");
    let bad = leaf_spine(Some(0.0), None).build("ls").unwrap_err();
    assert_eq!(bad.field, "generator.oversubscription");
}

fn fat_tree(k: u32, hosts_per_edge: Option<u32>, hosts: Option<u32>) -> FatTree {
    FatTree {
        k,
        hosts_per_edge,
        hosts,
        link: eth("100Gbps"),
        host_link: None,
    }
}

#[test]
fn fat_tree_k4_has_16_hosts_20_switches_and_48_links() {
    let t = fat_tree(4, None, None).build("ft").unwrap();
    assert_eq!(t.gpus().len(), 16);
    assert_eq!(count(&t, DeviceKind::Switch), 20);
    assert_eq!(t.duplex_link_count(), 48);
    gpus_are_rank_ordered_by_node(&t);
}

#[test]
fn fat_tree_hops_are_2_under_an_edge_4_in_a_pod_and_6_across_pods() {
    let t = fat_tree(4, None, None).build("ft").unwrap();
    assert_eq!(hops(&t, "gpu0", "gpu1"), 2);
    assert_eq!(hops(&t, "gpu0", "gpu2"), 4);
    assert_eq!(hops(&t, "gpu0", "gpu4"), 6);
    assert_eq!(hops(&t, "gpu3", "gpu15"), 6);
    let r = route(&t, "gpu0", "gpu15");
    assert!(r[3].starts_with("core"), "{r:?}");
}

#[test]
fn fat_tree_every_core_reaches_every_pod_once() {
    let t = fat_tree(6, None, None).build("ft").unwrap();
    for c in 0..9 {
        let core = t.find(&format!("core{c}")).unwrap();
        let mut pods: Vec<String> = t
            .out_links(core)
            .iter()
            .map(|&l| {
                t.device(t.link(l).to)
                    .name
                    .split('.')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        pods.sort();
        pods.dedup();
        assert_eq!(pods.len(), 6);
        assert_eq!(t.out_links(core).len(), 6);
    }
}

#[test]
fn fat_tree_hosts_and_hosts_per_edge_change_the_population_only() {
    let t = fat_tree(4, None, Some(10)).build("ft").unwrap();
    assert_eq!(t.gpus().len(), 10);
    assert_eq!(count(&t, DeviceKind::Switch), 20);
    let t = fat_tree(4, Some(4), None).build("ft").unwrap();
    assert_eq!(t.gpus().len(), 32);
    assert_eq!(t.out_links(t.find("pod3.edge1").unwrap()).len(), 4 + 2);
    let e = fat_tree(4, None, Some(17)).build("ft").unwrap_err();
    assert_eq!(e.field, "generator.hosts");
    assert_eq!(
        fat_tree(5, None, None).build("ft").unwrap_err().field,
        "generator.k"
    );
    assert_eq!(
        fat_tree(4000, None, None).build("ft").unwrap_err().field,
        "generator.k"
    );
}

#[test]
fn fat_tree_k32_with_32_hosts_per_edge_has_16384_gpus_and_routes() {
    // Not timed (speed targets live in benchmarks), but it must stay linear: this builds
    // 17,664 devices and 32,768 links.
    let t = fat_tree(32, Some(32), None).build("ft16k").unwrap();
    assert_eq!(t.gpus().len(), 16_384);
    assert_eq!(count(&t, DeviceKind::Switch), 32 * 32 + 16 * 16);
    assert_eq!(t.duplex_link_count(), 16_384 + 2 * 32 * 16 * 16);
    let mut r = Router::new(&t, 1);
    let (a, b) = (t.gpus()[0], t.gpus()[16_383]);
    assert_eq!(r.hops(&t, a, b), Some(6));
}

fn rail(nodes: u32, nodes_per_rail_leaf: Option<u32>) -> RailOptimized {
    RailOptimized {
        nodes,
        gpus_per_node: Some(8),
        nvswitches: Some(1),
        nvlink: Some(params("450GB/s", LinkClass::Nvlink)),
        pcie: Some(params("63GB/s", LinkClass::Pcie)),
        node_file: None,
        nic_link: params("400Gbps", LinkClass::Ib),
        spine_link: params("400Gbps", LinkClass::Ib),
        nodes_per_rail_leaf,
        spines: 2,
        uplinks_per_spine: 2,
    }
}

#[test]
fn rail_optimized_counts_devices_and_links() {
    let t = rail(4, Some(2)).build("rail").unwrap();
    assert_eq!(t.gpus().len(), 32);
    assert_eq!(count(&t, DeviceKind::Nic), 32);
    assert_eq!(count(&t, DeviceKind::Nvswitch), 4);
    // 8 rails × 2 leaves + 2 spines.
    assert_eq!(count(&t, DeviceKind::Switch), 18);
    // Per node 8 NVLink + 8 PCIe + 8 NIC links; 16 leaves × 2 spines × 2 uplinks.
    assert_eq!(t.duplex_link_count(), 4 * 24 + 16 * 2 * 2);
    gpus_are_rank_ordered_by_node(&t);
    assert_eq!(t.device(t.gpus()[9]).name, "n1.gpu1");
    assert_eq!(t.device(t.find("n3.nic5").unwrap()).node, Some(3));
}

#[test]
fn rail_optimized_routes_inside_nodes_on_rails_and_across_rails() {
    let t = rail(4, Some(2)).build("rail").unwrap();
    assert_eq!(hops(&t, "n0.gpu0", "n0.gpu7"), 2, "over the NVSwitch");
    assert_eq!(
        route(&t, "n0.gpu3", "n1.gpu3"),
        ["n0.gpu3", "n0.nic3", "rail3.leaf0", "n1.nic3", "n1.gpu3"]
    );
    assert_eq!(hops(&t, "n0.gpu3", "n2.gpu3"), 6, "same rail, other leaf");
    let r = route(&t, "n0.gpu0", "n1.gpu1");
    assert_eq!(r.len(), 7, "{r:?}");
    assert!(r[3].starts_with("spine"), "{r:?}");
}

#[test]
fn copied_servers_keep_their_gpus_staging_through_their_own_host() {
    // Per node: gpu0, gpu1 and nic0 behind one PCIe switch, no P2P between the GPUs.
    let mut b = Topology::builder("node");
    let gpus = [
        b.add_device("gpu0", DeviceKind::Gpu, Some(0)),
        b.add_device("gpu1", DeviceKind::Gpu, Some(0)),
    ];
    let sw = b.add_device("sw", DeviceKind::PcieSwitch, Some(0));
    let host = b.add_device("host", DeviceKind::Host, Some(0));
    let nic = b.add_device("nic0", DeviceKind::Nic, Some(0));
    let pcie = params("15.75GB/s", LinkClass::Pcie).spec();
    for d in [gpus[0], gpus[1], host, nic] {
        b.add_link(d, sw, pcie);
    }
    for g in gpus {
        b.set_staged_via(g, host);
    }
    let node = b.build().unwrap();
    let cluster = RailOptimized {
        node_file: Some("node.toml".into()),
        gpus_per_node: None,
        nvswitches: None,
        nvlink: None,
        pcie: None,
        ..rail(2, None)
    };
    let t = cluster.build_with_node("two", Some(&node)).unwrap();
    assert_eq!(
        route(&t, "n1.gpu0", "n1.gpu1"),
        ["n1.gpu0", "n1.sw", "n1.host", "n1.sw", "n1.gpu1"]
    );
    assert_eq!(
        hops(&t, "n0.gpu0", "n1.gpu0"),
        6,
        "across nodes: NIC to NIC, not staged"
    );
}

#[test]
fn nvswitch_node_splits_gpu_bandwidth_over_switches() {
    let one = NvswitchNode {
        gpus: 8,
        nvswitches: 1,
        nvlink: params("300GB/s", LinkClass::Nvlink),
        pcie: None,
        nics: 0,
    };
    let t = one.build("dgx").unwrap();
    assert_eq!((t.devices().len(), t.duplex_link_count()), (9, 8));
    assert_eq!(link_bps(&t, "n0.gpu0", "n0.nvswitch0"), Some(2400e9));
    assert_eq!(hops(&t, "n0.gpu0", "n0.gpu5"), 2);

    let six = NvswitchNode {
        nvswitches: 6,
        ..one.clone()
    }
    .build("dgx")
    .unwrap();
    assert_eq!(count(&six, DeviceKind::Nvswitch), 6);
    assert_eq!(six.duplex_link_count(), 48);
    assert_eq!(link_bps(&six, "n0.gpu0", "n0.nvswitch5"), Some(400e9));
}

#[test]
fn nvswitch_node_adds_host_and_one_nic_per_gpu() {
    let spec = NvswitchNode {
        gpus: 8,
        nvswitches: 1,
        nvlink: params("450GB/s", LinkClass::Nvlink),
        pcie: Some(params("63GB/s", LinkClass::Pcie)),
        nics: 8,
    };
    let t = spec.build("hgx").unwrap();
    assert_eq!(count(&t, DeviceKind::Host), 1);
    assert_eq!(count(&t, DeviceKind::Nic), 8);
    assert_eq!(t.duplex_link_count(), 8 * 3);
    assert_eq!(hops(&t, "n0.gpu2", "n0.host"), 1);
    assert_eq!(hops(&t, "n0.gpu2", "n0.gpu3"), 2);
    let e = NvswitchNode {
        nics: 3,
        ..spec.clone()
    }
    .build("x")
    .unwrap_err();
    assert_eq!(e.field, "generator.nics");
    let e = NvswitchNode { pcie: None, ..spec }.build("x").unwrap_err();
    assert_eq!(e.field, "generator.pcie");
}

fn dgx1_spec(nodes: u32, nic_link: Option<LinkParams>) -> HybridCubeMesh {
    HybridCubeMesh {
        nvlink: params("25GB/s", LinkClass::Nvlink),
        pcie: params("15.75GB/s", LinkClass::Pcie),
        smp: params("38.4GB/s", LinkClass::Smp),
        nics: 4,
        nodes,
        nic_link,
    }
}

fn dgx1() -> Topology {
    dgx1_spec(1, None).build("dgx1").unwrap()
}

fn two_dgx1() -> Topology {
    let edr = params("100Gbps", LinkClass::Ib);
    dgx1_spec(2, Some(edr)).build("dgx1x2").unwrap()
}

#[test]
fn hybrid_cube_mesh_has_the_measured_double_and_single_nvlink_pairs() {
    let t = dgx1();
    let nv = |a: u32, b: u32| link_bps(&t, &format!("n0.gpu{a}"), &format!("n0.gpu{b}"));
    // Rows of the V100 P2P matrix: ~45 GiB/s = two links, ~22.5 = one, ~7-8 = none.
    assert_eq!(nv(0, 2), Some(400e9));
    assert_eq!(nv(0, 4), Some(400e9));
    assert_eq!(nv(6, 7), Some(400e9));
    assert_eq!(nv(0, 1), Some(200e9));
    assert_eq!(nv(2, 6), Some(200e9));
    assert_eq!(nv(7, 4), Some(200e9));
    assert_eq!(nv(0, 5), None);
    assert_eq!(nv(3, 4), None);
    for g in 0..8 {
        let gpu = t.find(&format!("n0.gpu{g}")).unwrap();
        let nvlinks: f64 = t
            .out_links(gpu)
            .iter()
            .map(|&l| t.link(l))
            .filter(|l| l.class == LinkClass::Nvlink)
            .map(|l| l.bandwidth_bps / 200e9)
            .sum();
        assert_eq!(nvlinks, 6.0, "gpu{g} has six NVLink2 links");
    }
    assert_eq!(t.duplex_link_count(), 16 + 8 + 4 + 4 + 1);
}

#[test]
fn hybrid_cube_mesh_pairs_without_nvlink_cross_the_cpus() {
    let t = dgx1();
    assert_eq!(hops(&t, "n0.gpu0", "n0.gpu1"), 1);
    assert_eq!(
        route(&t, "n0.gpu0", "n0.gpu5"),
        [
            "n0.gpu0",
            "n0.pcie_sw0",
            "n0.cpu0",
            "n0.cpu1",
            "n0.pcie_sw2",
            "n0.gpu5"
        ]
    );
}

#[test]
fn two_hybrid_cube_mesh_nodes_have_16_rank_ordered_gpus_and_eight_nics_on_one_ib_switch() {
    let t = two_dgx1();
    assert_eq!(t.gpus().len(), 16);
    gpus_are_rank_ordered_by_node(&t);
    assert_eq!(t.device(t.gpus()[8]).name, "n1.gpu0");
    assert_eq!(count(&t, DeviceKind::Nic), 8);
    assert_eq!(count(&t, DeviceKind::Switch), 1);
    assert_eq!(t.device(t.find("ib_switch").unwrap()).node, None);
    for n in 0..2 {
        for j in 0..4 {
            let nic = format!("n{n}.nic{j}");
            assert_eq!(link_bps(&t, &nic, "ib_switch"), Some(100e9), "{nic}");
            assert_eq!(link_bps(&t, &nic, &format!("n{n}.pcie_sw{j}")), Some(126e9));
        }
    }
    assert_eq!(t.duplex_link_count(), 2 * (16 + 8 + 4 + 4 + 1) + 8);
}

#[test]
fn gpus_on_different_nodes_meet_through_their_own_pcie_switch_nic_and_the_ib_switch() {
    let t = two_dgx1();
    assert_eq!(
        route(&t, "n0.gpu0", "n1.gpu5"),
        [
            "n0.gpu0",
            "n0.pcie_sw0",
            "n0.nic0",
            "ib_switch",
            "n1.nic2",
            "n1.pcie_sw2",
            "n1.gpu5"
        ]
    );
    assert_eq!(
        route(&t, "n1.gpu7", "n0.gpu6"),
        [
            "n1.gpu7",
            "n1.pcie_sw3",
            "n1.nic3",
            "ib_switch",
            "n0.nic3",
            "n0.pcie_sw3",
            "n0.gpu6"
        ]
    );
}

#[test]
fn second_hybrid_cube_mesh_node_keeps_the_nvlink_pairs_and_cpu_paths() {
    let t = two_dgx1();
    for n in 0..2 {
        let nv = |a: u32, b: u32| link_bps(&t, &format!("n{n}.gpu{a}"), &format!("n{n}.gpu{b}"));
        assert_eq!(nv(0, 2), Some(400e9));
        assert_eq!(nv(0, 1), Some(200e9));
        assert_eq!(nv(0, 5), None);
        assert_eq!(hops(&t, &format!("n{n}.gpu6"), &format!("n{n}.gpu7")), 1);
    }
    assert_eq!(
        route(&t, "n1.gpu0", "n1.gpu5"),
        [
            "n1.gpu0",
            "n1.pcie_sw0",
            "n1.cpu0",
            "n1.cpu1",
            "n1.pcie_sw2",
            "n1.gpu5"
        ],
        "the CPU path (5 hops) stays shorter than a detour over the IB switch (6)"
    );
    assert_eq!(link_bps(&t, "n0.gpu0", "n1.gpu0"), None);
}

#[test]
fn one_hybrid_cube_mesh_node_without_nic_link_is_the_single_server() {
    let t = dgx1();
    assert_eq!(count(&t, DeviceKind::Switch), 0);
    let names: Vec<&str> = t.devices().iter().map(|d| d.name.as_str()).collect();
    assert_eq!(&names[..3], ["n0.gpu0", "n0.gpu1", "n0.gpu2"]);
    assert_eq!(names.len(), 8 + 4 + 2 + 4);
    assert!(names.iter().all(|n| n.starts_with("n0.")));
}

#[test]
fn several_hybrid_cube_mesh_nodes_need_a_nic_link_and_four_nics() {
    let e = dgx1_spec(2, None).build("x").unwrap_err();
    assert_eq!(e.field, "generator.nic_link");
    let e = HybridCubeMesh {
        nics: 0,
        ..dgx1_spec(2, Some(params("100Gbps", LinkClass::Ib)))
    }
    .build("x")
    .unwrap_err();
    assert_eq!(e.field, "generator.nics");
    let e = dgx1_spec(0, None).build("x").unwrap_err();
    assert_eq!(e.field, "generator.nodes");
}

#[test]
fn pcie_box_sends_gpu_to_gpu_traffic_through_the_host() {
    let t = PcieBox {
        gpus: 2,
        pcie: params("15.75GB/s", LinkClass::Pcie),
        switch_uplink: None,
        p2p: false,
    }
    .build("box")
    .unwrap();
    assert_eq!(t.devices().len(), 3);
    assert_eq!(t.duplex_link_count(), 2);
    assert_eq!(
        route(&t, "n0.gpu0", "n0.gpu1"),
        ["n0.gpu0", "n0.host", "n0.gpu1"]
    );
}

#[test]
fn pcie_box_with_p2p_turns_gpu_to_gpu_traffic_at_the_switch() {
    let t = PcieBox {
        gpus: 4,
        pcie: params("31.5GB/s", LinkClass::Pcie),
        switch_uplink: Some(params("31.5GB/s", LinkClass::Pcie)),
        p2p: true,
    }
    .build("box")
    .unwrap();
    assert_eq!(
        route(&t, "n0.gpu0", "n0.gpu3"),
        ["n0.gpu0", "n0.pcie_sw", "n0.gpu3"]
    );
    let (gpu0, gpu3) = (t.find("n0.gpu0").unwrap(), t.find("n0.gpu3").unwrap());
    assert_eq!(t.staged_via(gpu0, gpu3), None);
}

#[test]
fn pcie_box_behind_one_switch_stages_through_the_host_across_its_uplink_twice() {
    let t = PcieBox {
        gpus: 2,
        pcie: params("15.75GB/s", LinkClass::Pcie),
        switch_uplink: Some(params("15.75GB/s", LinkClass::Pcie)),
        p2p: false,
    }
    .build("box")
    .unwrap();
    assert_eq!(t.devices().len(), 4);
    assert_eq!(t.duplex_link_count(), 3);
    // The switch would carry gpu0 -> gpu1 in two hops; without P2P the data goes up to
    // host memory and back down, one direction of the uplink each way.
    assert_eq!(
        route(&t, "n0.gpu0", "n0.gpu1"),
        ["n0.gpu0", "n0.pcie_sw", "n0.host", "n0.pcie_sw", "n0.gpu1"]
    );
    assert_eq!(
        route(&t, "n0.gpu1", "n0.host"),
        ["n0.gpu1", "n0.pcie_sw", "n0.host"]
    );
    let (gpu0, gpu1, host) = (
        t.find("n0.gpu0").unwrap(),
        t.find("n0.gpu1").unwrap(),
        t.find("n0.host").unwrap(),
    );
    assert_eq!(t.staged_via(gpu0, gpu1), Some(host));
    assert_eq!(
        t.staged_via(gpu0, host),
        None,
        "the host itself is reached directly"
    );
}

#[test]
fn torus_4x4_has_32_links_and_wraps_around() {
    let t = Torus {
        dims: vec![4, 4],
        link: eth("100GB/s"),
    }
    .build("t")
    .unwrap();
    assert_eq!(t.gpus().len(), 16);
    assert_eq!(t.duplex_link_count(), 32);
    assert!(t.devices().iter().all(|d| d.forwards));
    assert_eq!(hops(&t, "gpu0-0", "gpu3-0"), 1, "wraparound in x");
    assert_eq!(hops(&t, "gpu0-0", "gpu0-3"), 1, "wraparound in y");
    assert_eq!(hops(&t, "gpu0-0", "gpu2-2"), 4, "through other GPUs");
    assert_eq!(t.device(t.gpus()[5]).name, "gpu1-1");
}

#[test]
fn torus_3d_and_size_two_dimensions() {
    let t = Torus {
        dims: vec![2, 3, 4],
        link: eth("100GB/s"),
    }
    .build("t")
    .unwrap();
    assert_eq!(t.gpus().len(), 24);
    // x (size 2): 12 pairs once; y (size 3): 24; z (size 4): 24.
    assert_eq!(t.duplex_link_count(), 12 + 24 + 24);
    assert_eq!(t.device(t.gpus()[23]).name, "gpu1-2-3");
    let e = Torus {
        dims: vec![4],
        link: eth("1GB/s"),
    }
    .build("t")
    .unwrap_err();
    assert_eq!(e.field, "generator.dims");
    let e = Torus {
        dims: vec![4, 1],
        link: eth("1GB/s"),
    }
    .build("t")
    .unwrap_err();
    assert_eq!(e.field, "generator.dims[1]");
}

#[test]
fn generator_tables_deserialize_by_kind_and_refuse_unknown_fields() {
    let table: toml::Table = toml::from_str(
        r#"
        kind = "fat_tree"
        k = 4
        hosts = 12
        [link]
        bandwidth = "100Gbps"
        latency = "500ns"
        class = "ethernet"
        "#,
    )
    .unwrap();
    let g = GeneratorSpec::deserialize(toml::Value::Table(table)).unwrap();
    assert_eq!(g.build("ft").unwrap().gpus().len(), 12);

    let typo: toml::Table =
        toml::from_str("kind = \"star\"\nnn = 3\n[link]\nbandwidth = \"1Gbps\"\nclass = \"ib\"")
            .unwrap();
    let e = GeneratorSpec::deserialize(toml::Value::Table(typo)).unwrap_err();
    assert!(e.to_string().contains("nn"), "{e}");
}

/// Every file in `topologies/` with a `[generator]` table has a name and builds, and the
/// real-system files have the GPU counts they claim.
#[test]
fn topology_files_with_generators_build() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let expected_gpus = [
        ("dgx1_v100.toml", 8),
        ("dgx1_v100_x2.toml", 16),
        ("dgx_a100.toml", 8),
        ("hgx_h100.toml", 8),
        ("h100_rail_cluster.toml", 256),
        ("pcie_box_2gpu.toml", 2),
        ("ring10_10GBps.toml", 10),
        ("fat_tree_k8.toml", 128),
        ("fat_tree_16k.toml", 16_384),
        ("leaf_spine_2to1.toml", 64),
        ("torus_4x4.toml", 16),
        ("star8_100g.toml", 8),
    ];
    let mut built = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let table: toml::Table =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = table["name"].as_str().expect("name is a string");
        let Some(generator) = table.get("generator") else {
            continue;
        };
        let spec = GeneratorSpec::deserialize(generator.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let t = spec
            .build(name)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = path.file_name().unwrap().to_str().unwrap();
        if let Some(&(_, gpus)) = expected_gpus.iter().find(|(f, _)| *f == file) {
            assert_eq!(t.gpus().len(), gpus, "{file}");
            built += 1;
        } else {
            assert!(!t.gpus().is_empty(), "{file}");
        }
    }
    assert_eq!(
        built,
        expected_gpus.len(),
        "files missing from {}",
        dir.display()
    );
}
