//! The packet model against the flow model and its own invariants.
//!
//! - cross-model agreement: ring, hierarchical and double-binary-tree all-reduces of 64 MiB on
//!   the bundled topologies (16 MiB staged through host memory on the PCIe box) finish within
//!   3% of the flow model's time (the larger cases, 64 to
//!   256 ranks, take 10 s to minutes in a debug build and are `#[ignore]`d: run them with
//!   `cargo test --release -p sim --test packet -- --ignored`);
//! - a single flow through an idle path takes size/B + hops·latency + (hops−1)·packet/B;
//! - lossless never drops, lossy delivers every byte after retransmission, no buffer ever holds
//!   more than its capacity (property tests on random topologies and traffic);
//! - determinism: the same input gives identical results.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use sim::collective::play::{play, PlayOptions, PlayOutcome};
use sim::collective::{
    generate, Algorithm, Collective, CollectiveSpec, Fabric, OpId, OpKind, Phase, RingOrder,
    Schedule,
};
use sim::engine::SimTime;
use sim::net::flow::FlowModel;
use sim::net::packet::{CongestionControl, PacketConfig, PacketModel, PortReport, SwitchMode};
use sim::net::NetworkModel;
use sim::topology::routing::Router;
use sim::topology::{file, DeviceId, DeviceKind, LinkClass, LinkSpec, Topology};

fn topology(name: &str, overrides: &str) -> Arc<Topology> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../topologies")
        .join(name);
    let over: toml::Table = toml::from_str(overrides).unwrap();
    Arc::new(file::load_with_overrides(&path, &over).unwrap())
}

struct TopoFabric<'a> {
    topo: &'a Topology,
    ranks: &'a [DeviceId],
    router: RefCell<Router>,
}

impl Fabric for TopoFabric<'_> {
    fn bottleneck_bps(&self, a: u32, b: u32) -> f64 {
        let mut r = self.router.borrow_mut();
        let path = r
            .path(self.topo, self.ranks[a as usize], self.ranks[b as usize])
            .unwrap();
        path.iter()
            .map(|&l| self.topo.link(l).bandwidth_bps)
            .fold(f64::INFINITY, f64::min)
    }
    fn node_of(&self, rank: u32) -> u32 {
        self.topo
            .device(self.ranks[rank as usize])
            .node
            .unwrap_or(rank)
    }
}

fn all_reduce(topo: &Topology, ranks: &[DeviceId], algorithm: Algorithm, bytes: u64) -> Schedule {
    let fabric = TopoFabric {
        topo,
        ranks,
        router: RefCell::new(Router::new(topo, 1)),
    };
    let spec = CollectiveSpec {
        collective: Collective::AllReduce,
        bytes,
        root: 0,
        peer: 1,
        algorithm,
        slices: 1,
    };
    generate(&spec, ranks.len() as u32, &fabric).unwrap()
}

fn play_on(s: &Schedule, eps: &[DeviceId], model: &mut dyn NetworkModel) -> PlayOutcome {
    play(
        s,
        eps,
        model,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap()
}

/// Plays `algorithm` on both models; returns the packet model's relative error.
fn agreement(topo: Arc<Topology>, n: usize, algorithm: Algorithm, bytes: u64) -> f64 {
    let ranks = topo.gpus()[..n].to_vec();
    let s = all_reduce(&topo, &ranks, algorithm, bytes);
    let flow = play_on(
        &s,
        &ranks,
        &mut FlowModel::new(topo.clone(), Default::default(), 1),
    );
    let mut pm = PacketModel::new(topo.clone(), PacketConfig::default(), 1).unwrap();
    let packet = play_on(&s, &ranks, &mut pm);
    let err = (packet.end.as_secs_f64() - flow.end.as_secs_f64()) / flow.end.as_secs_f64();
    let ports = pm.port_stats().unwrap();
    println!(
        "{} {n} ranks {}: flow {} packet {} error {:+.3}% ({} packet-hops, {} pauses)",
        topo.name,
        s.algorithm,
        flow.end,
        packet.end,
        err * 100.0,
        ports.packet_hops,
        ports.ports.iter().map(|p| p.pause_events).sum::<u64>()
    );
    err
}

fn ring() -> Algorithm {
    Algorithm::Ring {
        rings: vec![RingOrder::Generated {
            offset: 0,
            stride: 1,
            reverse: false,
        }],
    }
}

const MIB: u64 = 1 << 20;

#[test]
fn packet_and_flow_models_agree_on_a_ring_all_reduce_over_an_hgx_h100() {
    let err = agreement(topology("hgx_h100.toml", ""), 8, ring(), 64 * MIB);
    assert!(err.abs() < 0.03, "{err}");
}

#[test]
fn packet_and_flow_models_agree_on_a_ring_staged_through_host_memory_behind_one_switch() {
    // No P2P: each ring step goes up the switch's uplink to host memory and back down, both
    // directions of the 2-GPU ring sharing the uplink (a path that visits the switch twice).
    let err = agreement(topology("pcie_box_2gpu.toml", ""), 2, ring(), 16 * MIB);
    assert!(err.abs() < 0.03, "{err}");
}

#[test]
fn packet_and_flow_models_agree_on_a_ring_all_reduce_over_16_ranks_of_a_fat_tree() {
    let err = agreement(topology("fat_tree_k8.toml", ""), 16, ring(), 64 * MIB);
    assert!(err.abs() < 0.03, "{err}");
}

#[test]
fn packet_and_flow_models_agree_on_a_tree_all_reduce_over_16_ranks_of_a_fat_tree() {
    let err = agreement(
        topology("fat_tree_k8.toml", ""),
        16,
        Algorithm::DoubleBinaryTree,
        64 * MIB,
    );
    assert!(err.abs() < 0.03, "{err}");
}

/// 4 HGX nodes (32 GPUs), two rail leaves per rail, so inter-node traffic crosses the spines.
const SMALL_RAIL: &str = "[generator]\nnodes = 4\nnodes_per_rail_leaf = 2";

#[test]
fn packet_and_flow_models_agree_on_a_hierarchical_all_reduce_over_a_rail_cluster() {
    let err = agreement(
        topology("h100_rail_cluster.toml", SMALL_RAIL),
        32,
        Algorithm::Hierarchical,
        64 * MIB,
    );
    assert!(err.abs() < 0.03, "{err}");
}

#[test]
#[ignore = "slow in debug builds (about a minute); run with --release -- --ignored"]
fn packet_and_flow_models_agree_on_ring_and_tree_all_reduces_over_128_ranks_of_a_fat_tree() {
    for alg in [ring(), Algorithm::DoubleBinaryTree] {
        let err = agreement(topology("fat_tree_k8.toml", ""), 128, alg, 64 * MIB);
        assert!(err.abs() < 0.03, "{err}");
    }
}

#[test]
#[ignore = "slow in debug builds; run with --release -- --ignored"]
fn packet_and_flow_models_agree_on_a_hierarchical_all_reduce_over_128_gpus_of_the_rail_cluster() {
    let err = agreement(
        topology(
            "h100_rail_cluster.toml",
            "[generator]\nnodes = 16\nnodes_per_rail_leaf = 8",
        ),
        128,
        Algorithm::Hierarchical,
        64 * MIB,
    );
    assert!(err.abs() < 0.03, "{err}");
}

/// Time of one flow of `bytes` alone on an idle path, against the store-and-forward formula.
fn single_flow_error(topo: Arc<Topology>, src: usize, dst: usize, bytes: u64) -> f64 {
    let eps = vec![topo.gpus()[src], topo.gpus()[dst]];
    let mut s = Schedule::new(Collective::SendRecv, "one", 2, bytes);
    let p = s.add_pattern(vec![(0, 1)]);
    s.push(
        OpKind::Transfer { pattern: p, bytes },
        vec![],
        Phase::SendRecv,
        0,
        0,
    );
    let config = PacketConfig::default();
    let mut router = Router::new(&topo, 1);
    let path = router.path(&topo, eps[0], eps[1]).unwrap().to_vec();
    let bw = topo.link(path[0]).bandwidth_bps;
    assert!(path.iter().all(|&l| topo.link(l).bandwidth_bps == bw));
    let packet = path
        .iter()
        .map(|&l| config.mtu(topo.link(l).class))
        .min()
        .unwrap() as f64;
    let hops = path.len() as f64;
    let latency: f64 = path
        .iter()
        .map(|&l| topo.link(l).latency.as_secs_f64())
        .sum();
    let expected = bytes as f64 * 8.0 / bw + latency + (hops - 1.0) * packet * 8.0 / bw;
    let mut m = PacketModel::new(topo.clone(), config, 1).unwrap();
    let got = play_on(&s, &eps, &mut m).end.as_secs_f64();
    (got - expected) / expected
}

#[test]
fn a_single_flow_through_an_idle_fat_tree_takes_size_over_b_plus_hops_latency_plus_packets() {
    // Host 0 to host 127 crosses the core: 6 hops of 100 GbE with 1500 B packets.
    let err = single_flow_error(topology("fat_tree_k8.toml", ""), 0, 127, 64 * MIB);
    assert!(err.abs() < 1e-3, "{err}");
    let err = single_flow_error(topology("fat_tree_k8.toml", ""), 0, 1, 1_234_567);
    assert!(err.abs() < 1e-3, "{err}");
}

#[test]
fn a_single_flow_over_nvlink_takes_size_over_b_plus_hops_latency_plus_one_packet() {
    let err = single_flow_error(topology("hgx_h100.toml", ""), 0, 5, 64 * MIB);
    assert!(err.abs() < 1e-3, "{err}");
}

/// A random two-level tree: `leaves` switches under one root, GPUs spread over the leaves;
/// random bandwidths, latencies and buffers (each at least one 1500 B packet).
fn random_tree(gpus: u32, leaves: u32, seeds: &[u64]) -> Arc<Topology> {
    let mut b = Topology::builder("random");
    let g: Vec<_> = (0..gpus)
        .map(|i| b.add_device(format!("g{i}"), DeviceKind::Gpu, Some(i)))
        .collect();
    let root = b.add_device("root", DeviceKind::Switch, None);
    let l: Vec<_> = (0..leaves)
        .map(|i| b.add_device(format!("leaf{i}"), DeviceKind::Switch, None))
        .collect();
    let spec = |k: usize| {
        let s = seeds[k % seeds.len()];
        LinkSpec {
            bandwidth_bps: (10 + s % 90) as f64 * 1e9,
            latency: SimTime::from_ns((s >> 8) % 2000),
            buffer_bytes: 1500 + (s >> 20) % (64 << 10),
            class: LinkClass::Ethernet,
        }
    };
    for (i, &leaf) in l.iter().enumerate() {
        b.add_link(leaf, root, spec(i));
    }
    for (i, &gpu) in g.iter().enumerate() {
        b.add_link(gpu, l[i % l.len()], spec(i + 7));
    }
    Arc::new(b.build().unwrap())
}

type OpSpec = (Vec<(u32, u32)>, u64, Vec<u32>);

fn random_schedule(gpus: u32, ops: &[OpSpec]) -> Schedule {
    let mut s = Schedule::new(Collective::SendRecv, "random", gpus, 0);
    for (i, (pairs, bytes, deps)) in ops.iter().enumerate() {
        let mut pairs: Vec<(u32, u32)> = pairs
            .iter()
            .map(|&(a, b)| (a % gpus, b % gpus))
            .filter(|(a, b)| a != b)
            .collect();
        if pairs.is_empty() {
            pairs.push((0, 1));
        }
        let p = s.add_pattern(pairs);
        let deps = if i == 0 {
            vec![]
        } else {
            deps.iter().map(|&d| OpId(d % i as u32)).collect()
        };
        s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: *bytes,
            },
            deps,
            Phase::SendRecv,
            0,
            i as u32,
        );
    }
    s
}

fn ops_strategy() -> impl Strategy<Value = Vec<OpSpec>> {
    prop::collection::vec(
        (
            prop::collection::vec((0u32..64, 0u32..64), 1..8),
            prop_oneof![Just(0u64), 1u64..5_000, 5_000u64..300_000],
            prop::collection::vec(0u32..64, 0..3),
        ),
        1..10,
    )
}

fn config_strategy() -> impl Strategy<Value = PacketConfig> {
    (
        any::<bool>(),
        0.3f64..1.0,
        0.05f64..0.95,
        prop_oneof![Just(None), (1500u64..200_000).prop_map(Some)],
        0u8..3,
        1u64..50,
    )
        .prop_map(|(lossy, high, low_frac, window, cc, rto_us)| PacketConfig {
            mode: if lossy {
                SwitchMode::Lossy
            } else {
                SwitchMode::Lossless
            },
            high_water: high,
            low_water: high * low_frac,
            window_bytes: window,
            congestion_control: match cc {
                0 => CongestionControl::None,
                1 => CongestionControl::Aimd,
                _ => CongestionControl::Cubic,
            },
            retransmit_timeout: SimTime::from_us(rto_us),
            ..PacketConfig::default()
        })
}

fn run_packet(
    topo: &Arc<Topology>,
    s: &Schedule,
    config: PacketConfig,
) -> (PlayOutcome, PortReport, Vec<f64>) {
    let mut m = PacketModel::new(topo.clone(), config, 3).unwrap();
    let out = play_on(s, topo.gpus(), &mut m);
    let traffic = m.link_traffic().iter().map(|t| t.bytes).collect();
    (out, m.port_stats().unwrap(), traffic)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lossless_never_drops_lossy_delivers_everything_and_no_buffer_overflows(
        gpus in 2u32..10, leaves in 1u32..4, seeds in prop::collection::vec(any::<u64>(), 4),
        ops in ops_strategy(), config in config_strategy(),
    ) {
        let topo = random_tree(gpus, leaves, &seeds);
        let s = random_schedule(gpus, &ops);
        let lossless = config.mode == SwitchMode::Lossless;
        let cubic = config.congestion_control == CongestionControl::Cubic;
        let (out, ports, traffic) = run_packet(&topo, &s, config);
        // Every op ran to completion.
        prop_assert!(out.ops.iter().all(|t| t.end >= t.start));
        prop_assert_eq!(ports.deadlocks_broken, 0);
        for p in &ports.ports {
            prop_assert!(p.max_occupancy_bytes <= p.capacity_bytes,
                "{} > {}", p.max_occupancy_bytes, p.capacity_bytes);
            if lossless {
                prop_assert_eq!(p.drops, 0);
            } else {
                prop_assert_eq!(p.pause_events, 0);
                prop_assert_eq!(p.retransmitted_bytes, p.dropped_bytes);
            }
        }
        // Delivered bytes equal sent bytes: the link into each GPU carried exactly what was
        // addressed to it (GPUs do not forward), and the GPUs' uplinks carried what was sent
        // plus what was dropped and sent again; with CUBIC, plus 64-byte acknowledgements
        // both ways.
        let mut to = vec![0f64; gpus as usize];
        let mut sent = 0f64;
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                for &(_, d) in s.patterns[pattern.0 as usize].pairs.iter() {
                    to[d as usize] += bytes as f64;
                    sent += bytes as f64;
                }
            }
        }
        let dropped: u64 = ports.ports.iter().map(|p| p.dropped_bytes).sum();
        let mut up = 0f64;
        for (g, &dev) in topo.gpus().iter().enumerate() {
            let out_link = topo.out_links(dev)[0];
            up += traffic[out_link.index()];
            let into = traffic[out_link.reverse().index()];
            if cubic {
                prop_assert!(into >= to[g] && (into - to[g]) % 64.0 == 0.0, "{} {}", into, to[g]);
            } else {
                prop_assert_eq!(into, to[g]);
            }
        }
        let extra = up - (sent + dropped as f64);
        if cubic {
            prop_assert!(extra >= 0.0 && extra % 64.0 == 0.0, "{}", extra);
        } else {
            prop_assert_eq!(extra, 0.0);
        }
    }
}

#[test]
fn the_packet_model_is_deterministic() {
    let topo = random_tree(8, 2, &[7, 12345678901, 99, 4242424242]);
    let pairs: Vec<(u32, u32)> = (1..8).map(|i| (i, 0)).chain([(0, 3), (2, 5)]).collect();
    let s = random_schedule(
        8,
        &[(pairs.clone(), 200_000, vec![]), (pairs, 50_000, vec![0])],
    );
    for mode in [SwitchMode::Lossless, SwitchMode::Lossy] {
        let config = PacketConfig {
            mode,
            ..PacketConfig::default()
        };
        let (a, pa, ta) = run_packet(&topo, &s, config.clone());
        let (b, pb, tb) = run_packet(&topo, &s, config);
        assert_eq!(a.ops, b.ops);
        assert_eq!(pa, pb);
        assert_eq!(ta, tb);
        assert!(
            pa.ports.iter().any(|p| p.drops > 0 || p.pause_events > 0),
            "the case fills a buffer in {mode:?} mode"
        );
    }
}

fn dtsim(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .output()
        .unwrap()
}

fn summary(args: &[&str]) -> serde_json::Value {
    let out = dtsim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_ps_incast_scenarios_pause_when_lossless_drop_when_lossy_and_neither_with_deep_buffers() {
    let s = summary(&["run", "scenarios/ps_incast_lossless.toml", "--json"]);
    let p = &s["ports"];
    assert_eq!(s["network_model"], "packet");
    assert!(p["pause_events"].as_u64().unwrap() > 0);
    assert_eq!(p["drops"], 0);
    assert_eq!(p["overflow"][0]["to"], "gpu64");
    assert_eq!(p["overflow"][0]["kind"], "pause");
    assert_eq!(p["overflow"][0]["causes"][0]["dst"], "ps0");

    let s = summary(&["run", "scenarios/ps_incast_lossy.toml", "--json"]);
    let p = &s["ports"];
    assert!(p["drops"].as_u64().unwrap() > 0);
    assert_eq!(p["retransmitted_bytes"], p["dropped_bytes"]);
    assert_eq!(p["overflow"][0]["kind"], "drop");
    assert_eq!(p["congestion_control"], "none");
    // TCP CUBIC senders back off: fewer drops, every byte still delivered.
    let cubic = summary(&[
        "run",
        "scenarios/ps_incast_lossy.toml",
        "--set",
        "network.congestion_control=cubic",
        "--json",
    ]);
    let c = &cubic["ports"];
    assert_eq!(c["congestion_control"], "cubic");
    assert!(c["drops"].as_u64().unwrap() < p["drops"].as_u64().unwrap());
    assert_eq!(c["retransmitted_bytes"], c["dropped_bytes"]);

    for mode in ["lossless", "lossy"] {
        let set = format!("network.mode={mode}");
        let s = summary(&[
            "run",
            "scenarios/ps_incast_deep_buffers.toml",
            "--set",
            &set,
            "--json",
        ]);
        let p = &s["ports"];
        assert_eq!((&p["pause_events"], &p["drops"]), (&0.into(), &0.into()));
        assert_eq!(p["overflowing_ports"], 0);
    }
}

#[test]
fn any_scenario_runs_on_the_packet_model_with_set_and_writes_ports_csv() {
    let dir = std::env::temp_dir().join(format!("dtsim-packet-{}", std::process::id()));
    let out = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "network.model=packet",
        "--set",
        "collective.bytes=8MiB",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("buffer overflow: none"), "{text}");
    let csv = std::fs::read_to_string(dir.join("ports.csv")).unwrap();
    assert!(csv.starts_with("link,from,to,class,capacity_bytes,max_occupancy_bytes"));
    assert_eq!(
        csv.lines().count(),
        1 + 20,
        "one row per directed link of the 10-ring"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_packet_options_are_refused_naming_the_field() {
    // Schema errors after --set point at the merged file's line and say what was expected;
    // value errors name the field.
    for (set, needle) in [
        (
            "network.mode=lossless_ish",
            "expected `lossless` or `lossy`",
        ),
        (
            "network.mtu.ethernet=0",
            "network.mtu.ethernet: a packet size",
        ),
        ("network.mtu.warp=9000", "unknown variant `warp`"),
        (
            "network.low_water=0.95",
            "network.low_water: a fraction below high_water",
        ),
        (
            "network.high_water=1.5",
            "network.high_water: a fraction of the buffer",
        ),
        ("network.window=0", "network.window: a positive size"),
        ("network.retransmit_timeout=5", "a bare number has no unit"),
    ] {
        let out = dtsim(&["run", "scenarios/ps_incast_lossless.toml", "--set", set]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{set} accepted");
        assert!(err.contains(needle), "{set}: {err}");
    }
}

#[test]
fn a_testbed_profile_plays_in_the_packet_model_and_a_size_table_is_refused() {
    // gloo's ring all-reduce of 4 MiB on the testbed star with its measured profile: the
    // packet model plays each link at its measured payload rate (95.65% of 200 Mbit/s), within
    // 2% of the flow model, where the nominal rate would be 4% faster. (Both play the shapers'
    // 2 ms buckets; each reports the median of its own 101 plays of the hosts' wake-ups.)
    let dir = std::env::temp_dir().join(format!("dtsim-packet-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scenario = |profile: &Path| {
        let path = dir.join("s.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[placement]\nranks = 4\n\
                 [collective]\nop = \"all_reduce\"\nbytes = \"4MiB\"\n",
                profile.display().to_string(),
                root.join("testbed/topologies/star4_200mbit.toml")
                    .display()
                    .to_string()
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let measured = root.join("data/profiles/testbed_star4_200mbit.json");
    let s = scenario(&measured);
    let time = |extra: &[&str]| {
        let mut args = vec!["run", s.as_str(), "--json"];
        args.extend_from_slice(extra);
        summary(&args)["time_ps"].as_f64().unwrap()
    };
    let flow = time(&[]);
    let packet = time(&["--set", "network.model=packet"]);
    assert!((packet / flow - 1.0).abs() < 0.02, "{packet} vs {flow}");
    let wire = 1.5 * 4.0 * 8.0 * 1048576.0 / 200e6 * 1e12;
    assert!(packet > wire / 0.9565 * 0.99, "{packet} vs {wire}");

    // A 32 KiB message between two idle hosts fits the shapers' buckets (47.2 KB, 1.98 ms
    // of the link's rate): in both models it crosses in about its path's latency, where its
    // bytes at the rate would take 1.37 ms.
    let small = |model: &str| {
        time(&[
            "--set",
            &format!("network.model={model}"),
            "--set",
            "collective.op=broadcast",
            "--set",
            "collective.bytes=32KiB",
            "--set",
            "placement.ranks=2",
        ])
    };
    let at_rate = 32768.0 * 8.0 / (200e6 * 0.9565) * 1e12;
    for model in ["flow", "packet"] {
        let t = small(model);
        assert!(
            t < 0.2 * at_rate,
            "{model}: {t} ps vs {at_rate} at the rate"
        );
    }

    // The same profile with a bandwidth factor that depends on the size.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&measured).unwrap()).unwrap();
    let rows = &mut p["network"]["factors"]["ethernet"]["rows"];
    let mut big = rows[0].clone();
    big["min_bytes"] = 1048576.into();
    big["bandwidth_factor"] = 0.9.into();
    rows.as_array_mut().unwrap().push(big);
    let sized = dir.join("sized.json");
    std::fs::write(&sized, p.to_string()).unwrap();
    let s = scenario(&sized);
    let out = dtsim(&["run", &s, "--set", "network.model=packet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("network.model") && err.contains("ethernet factors do not depend"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
