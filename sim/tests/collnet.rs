//! NCCL's CollNet on switches that reduce in the network (SHARP): when NCCL's tuner takes it,
//! what it puts through the network, and clear errors where it cannot run.

use std::path::Path;

/// An all-reduce of `bytes` on `topology` with `set` overrides and `extra` `[collective]` lines.
fn run(
    topology: &str,
    set: &[&str],
    bytes: &str,
    extra: &str,
) -> Result<sim::metrics::Summary, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = format!(
        "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[collective]\nop = \"all_reduce\"\nbytes = \"{bytes}\"\n{extra}",
        root.join("data/profiles/h100_sxm_node.json").display().to_string(),
        root.join("topologies").join(topology).display().to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s)
        .map(|r| r.summary)
        .map_err(|e| e.to_string())
}

/// 4 HGX H100 nodes on the rail-optimized NDR cluster, its switches reducing (SHARPv3).
const SHARP_RAILS: [&str; 2] = [
    "topology.generator.nodes=4",
    "topology.in_network_reduction=true",
];

#[test]
fn with_collnet_enabled_nccl_runs_nvls_across_nodes_for_large_all_reduces() {
    // tuning.cc (2.27): NVLS across nodes is enabled only with CollNet; with it, NVLS's
    // estimate beats the rest at large sizes on H100 NVSwitch nodes.
    let s = run(
        "h100_rail_cluster.toml",
        &SHARP_RAILS,
        "1GiB",
        "collnet = true\n",
    )
    .unwrap();
    assert!(s.library.contains(" nvls/simple"), "{}", s.library);
    // Without it, the same system runs NVLS-Tree or a tree, never CollNet or NVLS.
    let s = run("h100_rail_cluster.toml", &SHARP_RAILS, "1GiB", "").unwrap();
    assert!(
        !s.library.contains("collnet") && !s.library.contains(" nvls/"),
        "{}",
        s.library
    );
}

#[test]
fn collnet_direct_moves_a_nics_share_once_each_way_and_is_bound_by_nvlink() {
    // Each of the 8 heads' NICs (400 Gb/s) carries 1/8 of the message up and down: 400 GB/s
    // of algorithm bandwidth; each GPU writes 7/8 of it to the other heads and, as a head, 7/8
    // back out: 1.75 x the message over its 450 GB/s of NVLink, 257 GB/s. So the played
    // all-reduce stays under the NVLink bound, and near it once pipelined (1 GiB).
    let s = run(
        "h100_rail_cluster.toml",
        &SHARP_RAILS,
        "1GiB",
        "collnet = true\nalgorithm = \"collnet_direct\"\n",
    )
    .unwrap();
    assert!(s.library.contains("collnet_direct/simple"), "{}", s.library);
    let nvlink_bound = 450.0 / 1.75;
    assert!(
        s.algbw_gbytes_per_s < nvlink_bound && s.algbw_gbytes_per_s > 0.6 * nvlink_bound,
        "{} GB/s against {nvlink_bound:.0}",
        s.algbw_gbytes_per_s
    );
    // A ring across the 32 ranks sends 2 x 31/32 of the message through the NICs; CollNet half.
    let ring = run(
        "h100_rail_cluster.toml",
        &SHARP_RAILS,
        "1GiB",
        "algorithm = \"ring\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    assert!(
        s.time_us < ring.time_us,
        "collnet {} us, ring {} us",
        s.time_us,
        ring.time_us
    );
}

#[test]
fn collnet_direct_needs_an_nvswitch_and_chain_runs_without() {
    // Two DGX-1 V100 (NVLink mesh, no NVSwitch), their network switch reducing: NCCL turns
    // CollNet Direct off (no NVSwitch), Chain stays.
    let set = [
        "topology.in_network_reduction=true",
        "topology.gpu=V100-SXM2",
    ];
    let e = run(
        "dgx1_v100_x2.toml",
        &set,
        "1GiB",
        "collnet = true\nalgorithm = \"collnet_direct\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("NVSwitch"),
        "{e}"
    );
    let s = run(
        "dgx1_v100_x2.toml",
        &set,
        "1GiB",
        "collnet = true\nalgorithm = \"collnet_chain\"\n",
    )
    .unwrap();
    assert!(s.library.contains("collnet_chain/simple"), "{}", s.library);
}

#[test]
fn collnet_where_nothing_reduces_or_not_enabled_is_an_error_naming_the_field() {
    let e = run("hgx_h100.toml", &[], "1GiB", "collnet = true\n").unwrap_err();
    assert!(
        e.contains("collective.collnet") && e.contains("in_network_reduction"),
        "{e}"
    );
    let e = run(
        "h100_rail_cluster.toml",
        &SHARP_RAILS,
        "1GiB",
        "algorithm = \"collnet_chain\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("collnet = true"),
        "{e}"
    );
    let e = run(
        "h100_rail_cluster.toml",
        &SHARP_RAILS,
        "1GiB",
        "library = \"ideal\"\ncollnet = true\n",
    )
    .unwrap_err();
    assert!(e.contains("collective.collnet"), "{e}");
}

#[test]
fn nvls_across_nodes_shrinks_its_chunk_for_mid_sizes_so_its_stages_pipeline() {
    // enqueue.cc: NVLS's chunk shrinks while the message is small against channels x heads x
    // chunk, so a 16 MiB all-reduce runs in several chunks per (channel, head) and its six
    // stages (into the switch, to the head, up, down, back, multicast) overlap: 4x the bytes
    // of 4 MiB cost less than 3x the time (one 128 KiB chunk each played them one after
    // another: 3.2x).
    let time = |bytes: &str| {
        let s = run(
            "h100_rail_cluster.toml",
            &[
                "topology.generator.nodes=2",
                "topology.in_network_reduction=true",
            ],
            bytes,
            "collnet = true\nalgorithm = \"nvls\"\n",
        )
        .unwrap();
        s.time_us
    };
    let (small, big) = (time("4MiB"), time("16MiB"));
    assert!(big < 3.0 * small, "4 MiB {small} us, 16 MiB {big} us");
}
