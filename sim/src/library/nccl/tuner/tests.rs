//! NCCL's tuner's specification: CollNet and NVLS-tree estimates and when they run, per
//! release, as read from each release's tuning.cc and enqueue.cc.

#![cfg(test)]
use super::*;

/// `nodes` HGX H100 nodes of 8 GPUs with 8 NICs of `nic_gbps`, as `tuner_input` sees
/// them (rings: 16 channels at half a NIC each; NVLS-Tree: a head per NIC at `speed`).
fn h100_nodes(minor: u32, nodes: u32, nic_gbps: f64, speed: f64) -> TunerInput {
    let ring = Graph {
        search_channels: 16,
        channels: 32,
        bw_intra_gbps: nic_gbps / 2.0,
        bw_inter_gbps: nic_gbps / 2.0,
        nvlink: true,
    };
    TunerInput {
        version: Version { minor },
        arch: Arch::Hopper,
        compute_capability: 90,
        ranks: 8 * nodes,
        nodes,
        ring,
        tree: ring,
        nvls_channels: None,
        nvls_tree: Some(Graph {
            search_channels: 8,
            channels: 16,
            bw_intra_gbps: speed,
            bw_inter_gbps: speed,
            nvlink: true,
        }),
        collnet: None,
        mesh_rings: Vec::new(),
        force_algo: Some(Algo::NvlsTree),
        protocols: None,
        min_channels: None,
        max_channels: None,
    }
}

/// [`h100_nodes`] with CollNet enabled (8 heads, NVSwitch nodes) and `force` forced.
fn with_collnet(minor: u32, nodes: u32, force: Option<Algo>) -> TunerInput {
    let mut t = h100_nodes(minor, nodes, 50.0, 45.0);
    t.collnet = Some(CollnetGraph {
        graph: t.ring,
        heads: 8,
        direct: true,
    });
    t.force_algo = force;
    t
}

fn only(t: &TunerInput) -> Estimate {
    let e = estimates(t, Collective::AllReduce, 1 << 30);
    assert_eq!(e.len(), 1, "{e:?}");
    e[0]
}

#[test]
fn collnet_estimates_follow_each_releases_tuning_cc() {
    // 4 nodes x 8 H100, 16 channels at 25 GB/s. Direct: bus 16 x 25 = 400 divided by
    // f - (f - 1)/2 with f = 8/16, x 0.85 (Hopper), algorithm bandwidth half of it.
    let d = only(&with_collnet(27, 4, Some(Algo::CollnetDirect)));
    assert_eq!(d.proto, Proto::Simple, "CollNet runs Simple only");
    assert!(
        (d.algbw_gbps - 400.0 / 0.75 * 0.85 * 0.5).abs() < 1e-9,
        "{d:?}"
    );
    // 2.19+: 2 (min(1, 7) x 3.7 + 7 x 0.4) + 31 us.
    assert!(
        (d.latency_us - (2.0 * (3.7 + 7.0 * 0.4) + 31.0)).abs() < 1e-9,
        "{d:?}"
    );
    // 2.18: NVLink 8.0, arity 0.5, network 10.7.
    let d = only(&with_collnet(18, 4, Some(Algo::CollnetDirect)));
    assert!(
        (d.latency_us - (2.0 * (8.0 + 7.0 * 0.5) + 10.7)).abs() < 1e-9,
        "{d:?}"
    );
    // Chain: bus 400, halved; 2 (ppn - 1) intraLat + interLat.
    let c = only(&with_collnet(27, 4, Some(Algo::CollnetChain)));
    assert!((c.algbw_gbps - 200.0).abs() < 1e-9, "{c:?}");
    assert!(
        (c.latency_us - (2.0 * 7.0 * 2.8 + 30.0)).abs() < 1e-9,
        "{c:?}"
    );
    let c = only(&with_collnet(18, 4, Some(Algo::CollnetChain)));
    assert!(
        (c.latency_us - (2.0 * 7.0 * 4.75 + 14.0)).abs() < 1e-9,
        "{c:?}"
    );
}

#[test]
fn collnet_runs_only_enabled_across_nodes_and_direct_only_on_nvswitch_nodes() {
    let mut t = with_collnet(27, 4, None);
    assert!(runnable(&t, Algo::CollnetDirect) && runnable(&t, Algo::CollnetChain));
    // NVLS across nodes comes with CollNet (2.27: off without it).
    assert!(runnable(&t, Algo::Nvls));
    t.collnet = t.collnet.map(|c| CollnetGraph { direct: false, ..c });
    assert!(!runnable(&t, Algo::CollnetDirect) && runnable(&t, Algo::CollnetChain));
    t.collnet = None;
    assert!(!runnable(&t, Algo::CollnetChain) && !runnable(&t, Algo::Nvls));
    let mut one = with_collnet(27, 1, None);
    one.ranks = 8;
    assert!(!runnable(&one, Algo::CollnetChain));
}

#[test]
fn collnet_direct_sheds_channels_by_enqueues_switch_loop() {
    // 32 channels, 8 heads, 640 threads, threshold 512 (halved at 24 and at 12 channels):
    // 16 MiB goes down to 16, then to 12, where 12 x 640 x 8 x 256 B no longer exceeds it.
    let t = with_collnet(27, 4, None);
    let e = Estimate {
        algo: Algo::CollnetDirect,
        proto: Proto::Simple,
        latency_us: 0.0,
        algbw_gbps: 1.0,
        time_us: 0.0,
    };
    assert_eq!(nccl_channels(&t, &e, 32, 16 << 20), 12);
    assert_eq!(nccl_channels(&t, &e, 32, 1 << 30), 32);
    assert_eq!(nccl_channels(&t, &e, 32, 1 << 10), 1);
}

fn nvls_tree(t: &TunerInput) -> Estimate {
    let e = estimates(t, Collective::AllReduce, 1 << 30);
    assert_eq!(e.len(), 1, "{e:?}");
    e[0]
}

#[test]
fn nvls_tree_estimate_follows_each_releases_tuning_cc() {
    // 2.18.5: bwIntra up to two nodes, x 0.70 x n / 2(n - 1); latency baseLat 23 + 2(n - 1)
    // network hops of 19 us.
    let e = nvls_tree(&h100_nodes(18, 2, 25.0, 24.0));
    assert!((e.algbw_gbps - 8.0 * 24.0 * 0.70).abs() < 1e-9, "{e:?}");
    assert!((e.latency_us - (23.0 + 2.0 * 19.0)).abs() < 1e-9, "{e:?}");
    let e = nvls_tree(&h100_nodes(18, 4, 25.0, 24.0));
    assert!(
        (e.algbw_gbps - 8.0 * 24.0 * 0.70 * 4.0 / 6.0).abs() < 1e-9,
        "{e:?}"
    );
    // 2.19+: min(bwIntra, bwInter), half bwInter beyond two nodes, x 5/6; latency the
    // NVLink one-shot (25 us in dtsim's table from 2.20) + 2 log2(n) hops of 14 us.
    let e = nvls_tree(&h100_nodes(27, 2, 25.0, 24.0));
    assert!(
        (e.algbw_gbps - 8.0 * 24.0 * 5.0 / 6.0).abs() < 1e-9,
        "{e:?}"
    );
    assert!((e.latency_us - (25.0 + 2.0 * 14.0)).abs() < 1e-9, "{e:?}");
    let e = nvls_tree(&h100_nodes(27, 8, 25.0, 24.0));
    assert!(
        (e.algbw_gbps - 8.0 * 12.0 * 5.0 / 6.0).abs() < 1e-9,
        "{e:?}"
    );
    assert!(
        (e.latency_us - (25.0 + 2.0 * 3.0 * 14.0)).abs() < 1e-9,
        "{e:?}"
    );
}

#[test]
fn nvls_tree_needs_several_nodes_and_its_graph() {
    let mut t = h100_nodes(27, 2, 25.0, 24.0);
    assert!(runnable(&t, Algo::NvlsTree));
    t.nodes = 1;
    assert!(!runnable(&t, Algo::NvlsTree));
    t.nodes = 2;
    t.nvls_tree = None;
    assert!(!runnable(&t, Algo::NvlsTree));
}

#[test]
fn the_nvls_search_takes_the_fastest_speed_the_nic_and_every_gpus_nvlinks_carry() {
    let v = Version { minor: 27 };
    // 200 Gb/s NICs (25 GB/s): 24. 400 Gb/s (50 GB/s) with 8 heads over 18 NVLinks of
    // 20.6 GB/s (46.4 GB/s per head): 45, not 48.
    assert_eq!(nvls_search_speed(v, 25.0, 46.35), Some(24.0));
    assert_eq!(nvls_search_speed(v, 50.0, 18.0 * 20.6 / 8.0), Some(45.0));
    assert_eq!(nvls_search_speed(v, 1.0, 46.0), None);
}
