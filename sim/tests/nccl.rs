//! NCCL library model: the tuner's choices on documented cases, protocol limits, and clear
//! errors for what a system cannot run.

use std::path::Path;

/// An all-reduce of `bytes` on `topology` with `extra` `[collective]` lines.
fn run(topology: &str, bytes: &str, extra: &str) -> Result<sim::metrics::Summary, String> {
    run_set(topology, &[], bytes, extra)
}

/// [`run`] with `--set` overrides (e.g. the topology's node count).
fn run_set(
    topology: &str,
    set: &[&str],
    bytes: &str,
    extra: &str,
) -> Result<sim::metrics::Summary, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"all_reduce\"\nbytes = \"{bytes}\"\n{extra}",
        root.join("topologies").join(topology).display().to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s)
        .map(|r| r.summary)
        .map_err(|e| e.to_string())
}

#[test]
fn a_gpu_topology_runs_nccl_by_default_and_a_plain_fabric_runs_the_templates() {
    let s = run("hgx_h100.toml", "1MiB", "").unwrap();
    assert!(s.library.starts_with("NCCL 2.27"), "{}", s.library);
    let s = run("ring10_10GBps.toml", "1MiB", "").unwrap();
    assert!(s.library.starts_with("ideal"), "{}", s.library);
}

#[test]
fn nccl_picks_ll_rings_for_tiny_messages_and_nvls_from_a_few_mib_on_h100() {
    // NCCL's tuner on an 8x H100 NVSwitch node (tuning.cc): LL rings win below a few KiB
    // (lowest latency); NVLS (Simple) wins from a few MiB (NVIDIA's NVLS announcement for
    // 2.17+: NVLink SHARP for large all-reduce on H100).
    let tiny = run("hgx_h100.toml", "1KiB", "").unwrap();
    assert!(tiny.library.contains("ring/ll,"), "{}", tiny.library);
    for size in ["16MiB", "1GiB"] {
        let big = run("hgx_h100.toml", size, "").unwrap();
        assert!(
            big.library.contains("nvls/simple"),
            "{size}: {}",
            big.library
        );
    }
    // No NVLS on A100 (no NVLink SHARP): rings.
    let a100 = run("dgx_a100.toml", "1GiB", "").unwrap();
    assert!(a100.library.contains("ring/"), "{}", a100.library);
}

#[test]
fn ll_never_carries_more_than_half_the_link_bandwidth() {
    // LL puts 8 bytes on the wire per 4 of data: bus bandwidth <= 50% of the 450 GB/s link.
    for size in ["64MiB", "1GiB"] {
        let s = run(
            "hgx_h100.toml",
            size,
            "algorithm = \"ring\"\nprotocol = \"ll\"\nmin_channels = 32\n",
        )
        .unwrap();
        assert!(
            s.busbw_gbytes_per_s <= 0.5 * 450.0,
            "{size}: {}",
            s.busbw_gbytes_per_s
        );
        assert!(s.busbw_gbytes_per_s > 0.0);
    }
    // Simple on the same rings may use the whole link.
    let simple = run(
        "hgx_h100.toml",
        "1GiB",
        "algorithm = \"ring\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    assert!(
        simple.busbw_gbytes_per_s > 0.5 * 450.0,
        "{}",
        simple.busbw_gbytes_per_s
    );
}

#[test]
fn what_a_system_cannot_run_is_a_clear_error_naming_the_field() {
    let e = run("dgx_a100.toml", "1GiB", "algorithm = \"nvls\"\n").unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("NVSwitch"),
        "{e}"
    );
    let e = run("hgx_h100.toml", "1GiB", "protocol = \"ll64\"\n").unwrap_err();
    assert!(e.contains("collective.protocol"), "{e}");
    assert!(
        e.contains("as NCCL_PROTO takes them") && !e.contains("  "),
        "one line of prose, not the source's indentation: {e}"
    );
    let e = run("hgx_h100.toml", "1GiB", "algorithm = \"collnet_direct\"\n").unwrap_err();
    assert!(e.contains("collnet = true"), "{e}");
    let e = run("hgx_h100.toml", "1GiB", "library = \"gloo\"\n").unwrap_err();
    assert!(e.contains("collective.library"), "{e}");
    let e = run("hgx_h100.toml", "1GiB", "library = \"nccl\"\nslices = 4\n").unwrap_err();
    assert!(e.contains("collective.slices"), "{e}");
    let e = run(
        "hgx_h100.toml",
        "1GiB",
        "library = \"ideal\"\nprotocol = \"ll\"\n",
    )
    .unwrap_err();
    assert!(e.contains("collective.protocol"), "{e}");
    let e = run("hgx_h100.toml", "1GiB", "library_version = \"2.12\"\n").unwrap_err();
    assert!(e.contains("library_version"), "{e}");
}

#[test]
fn nvls_sends_n_plus_1_over_n_of_the_message_each_way_per_gpu() {
    // 8 GPUs, 64 MiB, no profile, Simple: each GPU's NVLink carries 64 MiB x 9/8 in each
    // direction. Link bytes count occupancy, payload over efficiency, and the default
    // efficiency is NCCL's own per-link NVLink rate on Hopper (20.6 GB/s, 2.20+) over the
    // datasheet 25 GB/s.
    let s = run("hgx_h100.toml", "64MiB", "algorithm = \"nvls\"\n").unwrap();
    let nvlink = s.bytes_by_class["nvlink"];
    let expect = 2.0 * 8.0 * (64u64 << 20) as f64 * 9.0 / 8.0 / (20.6 / 25.0);
    assert!((nvlink / expect - 1.0).abs() < 0.01, "{nvlink} vs {expect}");
}

#[test]
fn same_scenario_same_result() {
    let a = run("hgx_h100.toml", "3MiB", "").unwrap();
    let b = run("hgx_h100.toml", "3MiB", "").unwrap();
    assert_eq!(a.time_ps, b.time_ps);
}

#[test]
fn with_no_profile_links_move_what_nccl_itself_assumes_they_do() {
    // DGX A100, 1 GiB ring Simple, no profile: NCCL models each NVLink3 at SM80_NVLINK_BW =
    // 20 GB/s (topo.h), 12 links = 240 GB/s per GPU, not the datasheet 300. A large ring's
    // busbw approaches that (measured on Azure ND A100 v4: 231 GB/s at 8 GiB).
    let s = run(
        "dgx_a100.toml",
        "1GiB",
        "algorithm = \"ring\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    let busbw = s.busbw_gbytes_per_s;
    assert!(busbw > 0.95 * 240.0 && busbw <= 240.0 * 1.001, "{busbw}");
}

#[test]
fn one_scenario_reproduces_the_shape_of_an_nccl_tests_sweep() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let s = sim::scenario::load(&root.join("scenarios/hgx_h100_allreduce.toml"), &[]).unwrap();
    let range = sim::scenario::size_sweep::Range {
        min_bytes: 8,
        max_bytes: 8 << 30,
        factor: 2,
    };
    let points = sim::scenario::size_sweep::run(&s, &range).unwrap();
    assert_eq!(points.len(), 31);
    // Latency-bound at the bottom (time nearly flat), bandwidth-bound at the top (time
    // doubles with size), LL rings first and NVLS last, as NCCL's tuner chooses.
    assert!(points[1].time_us / points[0].time_us < 1.05);
    let (a, b) = (&points[29], &points[30]);
    assert!((b.time_us / a.time_us - 2.0).abs() < 0.05);
    assert!(
        points[0].library.contains("ring/ll,"),
        "{}",
        points[0].library
    );
    assert!(b.library.contains("nvls/simple"), "{}", b.library);
    // busbw never falls as the size grows by 2x.
    for w in points.windows(2) {
        assert!(
            w[1].busbw_gbytes_per_s >= 0.99 * w[0].busbw_gbytes_per_s,
            "{} B: {} then {}",
            w[1].bytes,
            w[0].busbw_gbytes_per_s,
            w[1].busbw_gbytes_per_s
        );
    }
    // Beside a measured table: an unknown system is named with the ones there are.
    let table = root.join("../shared/validation/azure_nd_single_node_allreduce.csv");
    if table.exists() {
        let all_reduce = sim::collective::Collective::AllReduce;
        let e = sim::validate::nccl::measured_us(&table, "ND X", all_reduce).unwrap_err();
        assert!(e.contains("--system") && e.contains("ND H100 v5"), "{e}");
        let m = sim::validate::nccl::measured_us(&table, "ND H100 v5", all_reduce).unwrap();
        let t = sim::scenario::size_sweep::table(&points, Some(&m));
        assert!(t.contains("24 sizes measured"), "{t}");
    }
}

#[test]
fn nccl_2_18_nvls_leaves_channels_idle_below_one_loop_and_2_20_does_not() {
    use sim::library::nccl::{emit::nvls_busy_channels, Version};
    let v = |s| Version::parse(s).unwrap();
    // 8 GPUs (8 heads), 16 channels, 16 KiB chunks: one loop is 16 x 8 x 16 KiB = 2 MiB.
    let busy = |ver, bytes: u64| nvls_busy_channels(v(ver), bytes, 16, 8, 16 << 10);
    // Up to 2.19 (all_reduce.h runNvls): channel b takes the 128 KiB at b x 128 KiB.
    assert_eq!(busy("2.18", 64 << 10), 1.0);
    assert_eq!(busy("2.18", 1 << 20), 8.0);
    assert_eq!(busy("2.19", 3 << 20), 12.0); // 2 MiB loop + 1 MiB: busiest has 256 KiB
    assert_eq!(busy("2.18", 4 << 20), 16.0);
    // From 2.20 (enqueue.cc): the count split over all channels in 4 KiB-aligned shares.
    assert_eq!(busy("2.20", 64 << 10), 16.0);
    assert_eq!(busy("2.27", 1 << 10), 1.0);
    assert_eq!(busy("2.20", 4 << 20), 16.0);
}

/// A profile with NVLS's call latency and one channel's rate set, as `calibrate` fits them.
fn nvls_profile(dir: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut prof =
        sim::profile::Profile::load(&root.join("data/profiles/h100_sxm_node.json")).unwrap();
    let p = |v: f64| sim::profile::FittedParameter {
        value: v,
        ci95: None,
        provenance: sim::profile::Provenance {
            source: "assumed".into(),
            detail: "test".into(),
            date: None,
        },
    };
    let mut c = sim::profile::NcclCalibration::default();
    c.base_latency_us.insert("nvls/simple".into(), p(25.0));
    c.channel_gbps.insert("nvls/simple".into(), p(20.0));
    prof.network.nccl = Some(c);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("nvls.json");
    std::fs::write(&path, serde_json::to_string_pretty(&prof).unwrap()).unwrap();
    path
}

#[test]
fn a_channel_rate_makes_nccl_2_18_nvls_slower_than_2_20_only_below_one_loop() {
    let dir = std::env::temp_dir().join(format!("dtsim-nvls-{}", std::process::id()));
    let prof = nvls_profile(&dir);
    let at = |version: &str, bytes: &str| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = format!(
            "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[collective]\n\
             op = \"all_reduce\"\nbytes = \"{bytes}\"\nalgorithm = \"nvls\"\n\
             library_version = \"{version}\"\n",
            prof.display().to_string(),
            root.join("topologies/hgx_h100.toml").display().to_string()
        );
        let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap();
        let r = sim::scenario::run::run(&s).unwrap().summary;
        (r.time_ps as f64 * 1e-6, r.library)
    };
    // 256 KiB: 2 of 16 channels have work under 2.18, all 16 under 2.20. Each GPU pushes
    // and then pulls 256 KiB x 9/8 at 20 GB/s per busy channel: 2.18 takes that much longer.
    let (old, lib) = at("2.18", "256KiB");
    let (new, _) = at("2.20", "256KiB");
    assert!(lib.contains("2.00 with work"), "{lib}");
    let bytes = 2.0 * (256u64 << 10) as f64 * 9.0 / 8.0;
    let expect_us = bytes * (1.0 / (2.0 * 20e9) - 1.0 / (16.0 * 20e9)) * 1e6;
    let diff = old - new;
    assert!(
        (diff / expect_us - 1.0).abs() < 0.05,
        "{old} vs {new} us: {diff} longer, expected {expect_us}"
    );
    // 4 MiB fills every channel in both.
    let (old, _) = at("2.18", "4MiB");
    let (new, _) = at("2.20", "4MiB");
    assert!((old / new - 1.0).abs() < 1e-4, "{old} vs {new}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A row of an nccl-tests table (the 2080 Ti table's columns), as `validate` reads it.
fn nccl_tests_row(collective: &str, bytes: u64, time_us: f64) -> sim::validate::Row {
    [
        ("system", "AutoDL container, 2x RTX 2080 Ti"),
        ("num_nodes", "1"),
        ("num_gpus", "2"),
        ("collective", collective),
        ("root", if collective == "broadcast" { "0" } else { "-1" }),
        ("size_bytes", &bytes.to_string()),
        ("oop_time_us", &time_us.to_string()),
        ("command", "./build/x_perf -b 8 -e 1024M -f 2 -g2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn nccl_tests_rows_of_every_collective_nccl_runs_are_replayed_and_grouped_apart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let all_reduce =
        sim::validate::nccl::case(&nccl_tests_row("all_reduce", 1 << 24, 4210.0), &root).unwrap();
    assert_eq!(all_reduce.op, sim::collective::Collective::AllReduce);
    assert_eq!(all_reduce.group, "AutoDL container, 2x RTX 2080 Ti");
    for (name, expect_root) in [
        ("broadcast", true),
        ("reduce", false),
        ("all_gather", false),
    ] {
        let row = nccl_tests_row(name, 1 << 24, 1539.1);
        let c = sim::validate::nccl::case(&row, &root).unwrap();
        assert_ne!(c.op, sim::collective::Collective::AllReduce);
        assert_eq!(
            c.group,
            format!("AutoDL container, 2x RTX 2080 Ti · {name}")
        );
        assert!(c.text.contains(&format!("op = \"{name}\"")), "{}", c.text);
        assert_eq!(c.text.contains("root = 0"), expect_root, "{}", c.text);
        // Played by NCCL with the system's bundled profile.
        let sim::validate::Replay {
            group,
            measured_secs: measured,
            simulated_secs: simulated,
            ..
        } = sim::validate::nccl::replay(&row, &root).unwrap();
        assert_eq!(group, c.group);
        assert!((measured - 1539.1e-6).abs() < 1e-12);
        assert!(simulated > 0.0 && simulated.is_finite());
    }
    // nccl-tests' alltoall runs NCCL's point-to-point sends, every pair at once.
    let row = nccl_tests_row("alltoall", 1 << 24, 1886.6);
    let c = sim::validate::nccl::case(&row, &root).unwrap();
    assert_eq!(c.op, sim::collective::Collective::AllToAll);
    assert!(c.text.contains("op = \"all_to_all\""), "{}", c.text);
    let simulated = sim::validate::nccl::replay(&row, &root)
        .unwrap()
        .simulated_secs;
    assert!(simulated > 0.0 && simulated.is_finite());
    // sendrecv_perf's ring shift is not replayed: said, not guessed.
    let e = sim::validate::nccl::case(&nccl_tests_row("sendrecv", 1 << 24, 1060.7), &root)
        .err()
        .unwrap();
    assert!(e.contains("sendrecv rows are not replayed"), "{e}");
    // `dtsim nccl-tests --measured` reads the rows of the scenario's collective.
    let table = root.join("../shared/validation/autodl_2x2080ti_pcie_noP2P_nccl.csv");
    if table.exists() {
        let system = "AutoDL container, 2x RTX 2080 Ti";
        let broadcast = sim::collective::Collective::Broadcast;
        let m = sim::validate::nccl::measured_us(&table, system, broadcast).unwrap();
        assert_eq!(m.len(), 28);
        assert_eq!(m.get(&1073741824), Some(&96800.0));
        let all_to_all = sim::collective::Collective::AllToAll;
        let m = sim::validate::nccl::measured_us(&table, system, all_to_all).unwrap();
        assert_eq!(m.get(&1073741824), Some(&116573.0));
        let scatter = sim::collective::Collective::ReduceScatter;
        let e = sim::validate::nccl::measured_us(&table, system, scatter).unwrap_err();
        assert!(e.contains("--system"), "{e}");
    }
}

/// A tuner rules file in a fresh folder; its path as the scenario line naming it.
fn tuner_config(tag: &str, rules: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("dtsim-tuner-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nccl_tuner.conf");
    std::fs::write(&path, rules).unwrap();
    let line = format!("tuner_config = {:?}\n", path.display().to_string());
    (dir, line)
}

#[test]
fn a_tuner_rules_file_overrides_nccls_choice_as_the_example_plugin_does() {
    let (dir, line) = tuner_config(
        "ok",
        "# 8 ranks on one node: rings from 1 MiB on 8 channels\n\
         allreduce,1048576,4294967295,nvls,simple,-1,1,8\n\
         allreduce,1048576,4294967295,ring,simple,8,1,8\n",
    );
    // H100 node: NVLS runs, so the first matching rule wins; -1 means the plugin's 1 channel.
    let s = run("hgx_h100.toml", "1GiB", &line).unwrap();
    assert!(
        s.library.contains("nvls/simple, 1 channels"),
        "{}",
        s.library
    );
    assert!(s.library.contains("nccl_tuner.conf:2)"), "{}", s.library);
    // A100 node: no NVLS, so that rule is passed over and the ring rule applies.
    let s = run("dgx_a100.toml", "1GiB", &line).unwrap();
    assert!(
        s.library.contains("ring/simple, 8 channels"),
        "{}",
        s.library
    );
    assert!(s.library.contains("nccl_tuner.conf:3)"), "{}", s.library);
    // No rule for 1 KiB: NCCL's own choice, on the one channel the plugin answers.
    let s = run("dgx_a100.toml", "1KiB", &line).unwrap();
    assert!(s.library.contains("ring/ll, 1 channels"), "{}", s.library);
    assert!(s.library.contains("no rule matched"), "{}", s.library);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_bad_tuner_rules_file_is_an_error_naming_the_field_the_file_and_the_line() {
    let (dir, line) = tuner_config("bad", "\nallreduce,0,1024,rung,simple,-1,-1,-1\n");
    let e = run("hgx_h100.toml", "1MiB", &line).unwrap_err();
    assert!(
        e.contains("collective.tuner_config") && e.contains("line 2") && e.contains("algorithm"),
        "{e}"
    );
    let e = run("ring10_10GBps.toml", "1MiB", &line).unwrap_err();
    assert!(e.contains("collective.tuner_config"), "{e}");
    let e = run(
        "hgx_h100.toml",
        "1MiB",
        "tuner_config = \"/no/such/tuner.conf\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("collective.tuner_config") && e.contains("does not exist"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_nccl_fit_replays_every_row_as_the_runs_tuner_rules_steered_it() {
    // calibrate import nccl-tests --tuner-config: a row measured under a rule is simulated
    // under the same rule, so the fit sees the algorithm that actually ran.
    let (dir, _) = tuner_config("fit", "allreduce,0,18446744073709551615,ring,ll128,8,1,8\n");
    let rules = dir.join("nccl_tuner.conf");
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/hgx_h100.toml");
    let measured = |tuner_config| sim::scenario::fit_nccl::Measured {
        topology: &topology,
        collective: "all_reduce",
        bytes: 1 << 30,
        ranks: 8,
        algorithm: None,
        protocol: None,
        version: None,
        tuner_config,
        collnet: false,
        measured_secs: 1e-3,
        file: "all_reduce.log".into(),
        row: 1,
    };
    let library = |m: sim::scenario::fit_nccl::Measured| {
        let row = m.fit_row().unwrap();
        sim::scenario::run::run(&row.scenario)
            .unwrap()
            .summary
            .library
    };
    let steered = library(measured(Some(&rules)));
    assert!(
        steered.contains("ring/ll128, 8 channels (tuner rule"),
        "{steered}"
    );
    let own = library(measured(None));
    assert!(own.contains("nvls/simple"), "{own}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn across_h100_nodes_nccl_picks_nvls_tree_for_large_all_reduces() {
    // NVLS-Tree (NCCL 2.18+): NVLS inside each HGX H100 node, the double binary tree between
    // the nodes' NIC heads. NCCL's tuner prefers it to rings for large all-reduces across
    // nodes (tuning.cc: 5/6 of heads x NIC speed against n / 2(n-1) of the ring's channels);
    // GCP's recommended A3 Mega environment tunes it (NCCL_NVLSTREE_MAX_CHUNKSIZE).
    let two = ["topology.generator.nodes=2"];
    let s = run_set("h100_rail_cluster.toml", &two, "1GiB", "").unwrap();
    assert!(s.library.contains("nvls_tree/simple"), "{}", s.library);
    // Each byte crosses the node boundary once each way, split over the 8 NICs of 400 Gb/s:
    // algbw at most 8 x 50 GB/s, where a 16-rank ring carries 1.875 x the message across and
    // stays under 400 / 1.875 = 213 GB/s. (NVLink bounds NVLS-Tree lower: every GPU pushes
    // the message to its switch, a head 1/8 more, at 18 x 20.6 GB/s: 330 GB/s.)
    let ring = run_set(
        "h100_rail_cluster.toml",
        &two,
        "1GiB",
        "algorithm = \"ring\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    assert!(s.algbw_gbytes_per_s <= 400.0, "{}", s.algbw_gbytes_per_s);
    assert!(
        s.algbw_gbytes_per_s > 1.25 * ring.algbw_gbytes_per_s,
        "nvls_tree {} GB/s, ring {} GB/s",
        s.algbw_gbytes_per_s,
        ring.algbw_gbytes_per_s
    );
    // One node is NVLS; A100 nodes have no NVLink SHARP.
    let one = run_set(
        "h100_rail_cluster.toml",
        &["topology.generator.nodes=1"],
        "1GiB",
        "",
    );
    assert!(one.unwrap().library.contains("nvls/simple"));
    let a100 = run_set(
        "h100_rail_cluster.toml",
        &[
            "topology.generator.nodes=2",
            "topology.gpu=\"A100-SXM4-80GB\"",
        ],
        "1GiB",
        "",
    )
    .unwrap();
    assert!(!a100.library.contains("nvls"), "{}", a100.library);
}

#[test]
fn nvls_tree_where_a_system_cannot_run_it_is_a_clear_error() {
    let forced = "algorithm = \"nvls_tree\"\n";
    let e = run("hgx_h100.toml", "1GiB", forced).unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("one node"),
        "{e}"
    );
    let e = run_set(
        "h100_rail_cluster.toml",
        &[
            "topology.generator.nodes=2",
            "topology.gpu=\"A100-SXM4-80GB\"",
        ],
        "1GiB",
        forced,
    )
    .unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("older than Hopper"),
        "{e}"
    );
}

#[test]
fn nccl_proto_takes_a_list_or_an_exclusion_as_nccl_does() {
    // 1 KiB on 8 H100s: NCCL's own choice is an LL ring (above). With LL not enabled, as
    // NCCL_PROTO=Simple,LL128 (GCP's A3 Mega environment) or NCCL_PROTO=^LL leave it, another
    // protocol runs.
    let own = run("hgx_h100.toml", "1KiB", "").unwrap();
    assert!(own.library.contains("/ll,"), "{}", own.library);
    for list in ["simple,ll128", "^ll", "Simple, LL128"] {
        let s = run("hgx_h100.toml", "1KiB", &format!("protocol = {list:?}\n")).unwrap();
        assert!(!s.library.contains("/ll,"), "{list}: {}", s.library);
    }
    for bad in ["simple,ll64", "^ll,ll128,simple"] {
        let e = run("hgx_h100.toml", "1KiB", &format!("protocol = {bad:?}\n")).unwrap_err();
        assert!(e.contains("collective.protocol"), "{bad}: {e}");
    }
}

#[test]
fn a_trees_steps_inside_a_node_pay_nvlinks_latency_and_only_its_network_steps_the_networks() {
    // 2 HGX H100 nodes, 8 B, tree/LL128 forced, no profile: 7 chain steps up and 7 down inside
    // each node (hwLat NVLink 1.25 us) and one network step each way (hwLat net 8.5 us) after
    // the call's 14 us: NCCL's own estimate, 48.5 us, is a floor (paths add their latency).
    // Charging all 16 steps the network's latency would take 14 + 16 x 8.5 = 150 us.
    let s = run_set(
        "h100_rail_cluster.toml",
        &["topology.generator.nodes=2"],
        "8B",
        "algorithm = \"tree\"\nprotocol = \"ll128\"\n",
    )
    .unwrap();
    let us = s.time_ps as f64 * 1e-6;
    assert!((48.5..100.0).contains(&us), "{us} us");
}

#[test]
fn rings_across_rail_optimized_nodes_stay_on_their_rails() {
    // NCCL keeps each ring on one NIC rail (same NIC in and out of a node), so its bus
    // bandwidth across H100 nodes is the nodes' 8 NICs (8 x 50 GB/s) whatever the node count;
    // rings that changed rails at every node boundary went through the spines and lost half
    // of it from 4 nodes on.
    let busbw = |nodes: &str| {
        run_set(
            "h100_rail_cluster.toml",
            &[&format!("topology.generator.nodes={nodes}")],
            "1GiB",
            "algorithm = \"ring\"\nprotocol = \"simple\"\n",
        )
        .unwrap()
        .busbw_gbytes_per_s
    };
    let (two, four) = (busbw("2"), busbw("4"));
    assert!(two > 0.8 * 400.0 && two <= 400.0, "2 nodes: {two}");
    assert!(four > 0.8 * 400.0 && four <= 400.0, "4 nodes: {four}");
}

#[test]
fn a_ring_across_nodes_pays_network_latency_only_on_the_hops_that_cross_the_network() {
    // 2 HGX H100 nodes, 16 ranks: of a ring's 15 hops one crosses the network. NCCL's ranks
    // step on as their own input arrives, so a small all-reduce's 30 steps cost the hops' mean
    // latency each (NCCL's Simple ring: 3.4 us over NVLink, 14 us over the network; tuning.cc
    // charges 2 (nodes - 1) network hops), not the network's on every step (420 us).
    let s = run_set(
        "h100_rail_cluster.toml",
        &["topology.generator.nodes=2"],
        "64KiB",
        "algorithm = \"ring\"\nprotocol = \"simple\"\n",
    )
    .unwrap();
    let mean_hop_us = 3.4 + (14.0 - 3.4) / 15.0;
    assert!(s.library.contains("step 4.11 us"), "{}", s.library);
    // Each step also waits for its slowest pair's wires (a few µs across the network).
    assert!(
        s.time_us > 30.0 * mean_hop_us && s.time_us < 30.0 * 14.0,
        "{} us",
        s.time_us
    );
}

#[test]
fn on_a_dgx1_hybrid_cube_mesh_nccl_rings_stay_on_nvlink() {
    // 8 V100 on DGX-1's mesh: GPU 3 and GPU 4 share no NVLink, so the ranks' own order would
    // cross the CPUs' PCIe. NCCL's search finds six rings over the six NVLinks of every GPU
    // (search.rs); 1 GiB then moves at most 6 x 25 GB/s per GPU and direction (the links'
    // datasheet rate) and far more than PCIe Gen3's 15.75 GB/s: it moved 12 GB/s of bus
    // bandwidth on the ranks' order before the search was modelled.
    let s = run_set("dgx1_v100.toml", &["topology.gpu=V100-SXM2"], "1GiB", "").unwrap();
    assert!(
        s.library.contains("ring/simple, 12 channels"),
        "{}",
        s.library
    );
    assert!(
        (80.0..150.0).contains(&s.busbw_gbytes_per_s),
        "{} GB/s",
        s.busbw_gbytes_per_s
    );
    // No byte crosses PCIe.
    assert_eq!(
        s.bytes_by_class.get("pcie").copied().unwrap_or(0.0),
        0.0,
        "{:?}",
        s.bytes_by_class
    );
}

#[test]
fn across_dgx1_nodes_each_ring_runs_its_nvlink_cycle_in_every_node() {
    // Two DGX-1 (4 EDR NICs of 100 Gb/s each): the rings cross nodes through the NICs, so the
    // bus bandwidth is bounded by the node's 4 x 12.5 GB/s; inside each node every ring stays
    // on NVLink. The ranks' order (GPU 3 to GPU 4 over PCIe and the CPUs' link) gave 12.5 GB/s.
    let s = run_set(
        "dgx1_v100_x2.toml",
        &["topology.gpu=V100-SXM2", "placement.ranks=16"],
        "1GiB",
        "",
    )
    .unwrap();
    assert!(
        (30.0..=50.0).contains(&s.busbw_gbytes_per_s),
        "{} GB/s, {}",
        s.busbw_gbytes_per_s,
        s.library
    );
    // Nothing crosses the link between a node's two CPUs.
    assert_eq!(
        s.bytes_by_class.get("smp").copied().unwrap_or(0.0),
        0.0,
        "{:?}",
        s.bytes_by_class
    );
    // NCCL's trees (small sizes) chain each node's GPUs over the same NVLink cycles.
    let small = run_set(
        "dgx1_v100_x2.toml",
        &["topology.gpu=V100-SXM2", "placement.ranks=16"],
        "32KiB",
        "",
    )
    .unwrap();
    assert!(small.library.contains("tree/"), "{}", small.library);
    assert_eq!(
        small.bytes_by_class.get("smp").copied().unwrap_or(0.0),
        0.0,
        "{:?}",
        small.bytes_by_class
    );
}

#[test]
fn nccl_sees_a_pcie_link_at_its_generations_rate() {
    // topo.cc: a PCIe link is width x per-lane speed / 80 GB/s to NCCL, 12 for Gen3 x16 and
    // 24 for Gen4: its own estimate of a 1 GiB ring over four Gen4 cards with P2P is half the
    // Gen3 one (it was 12 GB/s at every generation).
    let estimate_us = |bw: &str| {
        let set = [
            "topology.gpu=L40S".to_string(),
            "topology.generator.gpus=4".to_string(),
            "topology.generator.p2p=true".to_string(),
            format!("topology.generator.pcie.bandwidth={bw}"),
            format!("topology.generator.switch_uplink.bandwidth={bw}"),
        ];
        let set: Vec<&str> = set.iter().map(String::as_str).collect();
        let s = run_set("pcie_box_2gpu.toml", &set, "1GiB", "").unwrap();
        let tail = s
            .library
            .split("NCCL's own estimate ")
            .nth(1)
            .unwrap()
            .to_string();
        tail.trim_end_matches(" us").parse::<f64>().unwrap()
    };
    let (gen3, gen4) = (estimate_us("15.75GB/s"), estimate_us("31.5GB/s"));
    assert!((gen3 / gen4 - 2.0).abs() < 0.01, "{gen3} {gen4}");
}

#[test]
fn nccl_all_to_all_sends_every_pair_at_once_at_the_rings_link_efficiency() {
    // 8 H100 on NVSwitch, 1 GiB: each GPU sends 7/8 of it over its 450 GB/s of NVLink at the
    // ring's efficiency (NCCL's 20.6 GB/s per link x 18 = 371 GB/s): bus bandwidth just under.
    let a2a = ["collective.op=all_to_all"];
    let big = run_set("hgx_h100.toml", &a2a, "1GiB", "").unwrap();
    assert!(big.library.contains("p2p/simple"), "{}", big.library);
    assert!(
        (340.0..=371.0).contains(&big.busbw_gbytes_per_s),
        "{}",
        big.busbw_gbytes_per_s
    );
    // Blocks of at most 16 KiB (NCCL_P2P_LL_THRESHOLD) go LL.
    let small = run_set("hgx_h100.toml", &a2a, "128KiB", "").unwrap();
    assert!(small.library.contains("p2p/ll"), "{}", small.library);
}

#[test]
fn an_nccl_send_recv_is_one_p2p_block_at_the_rings_link_costs() {
    // ncclSend/ncclRecv between two H100s of a node: no tuner, LL up to 16 KiB
    // (NCCL_P2P_LL_THRESHOLD), Simple above, the ring's latency and NVLink efficiency; the
    // bare transfer (library = "ideal") is faster at every size.
    let pair = ["collective.op=send_recv", "collective.peer=1"];
    let ideal = "library = \"ideal\"\n";
    for (bytes, proto) in [("8KiB", "p2p/ll"), ("64MiB", "p2p/simple")] {
        let nccl = run_set("hgx_h100.toml", &pair, bytes, "").unwrap();
        assert!(nccl.library.contains(proto), "{bytes}: {}", nccl.library);
        assert!(
            nccl.library.contains("one send/recv pair"),
            "{}",
            nccl.library
        );
        let bare = run_set("hgx_h100.toml", &pair, bytes, ideal).unwrap();
        assert!(
            nccl.time_us > bare.time_us,
            "{bytes}: {} vs {}",
            nccl.time_us,
            bare.time_us
        );
    }
    // 64 MiB over one GPU's NVLink (450 GB/s) at the ring's efficiency (20.6 of 25 GB/s per
    // link): about 181 us, plus microseconds of latency.
    let big = run_set("hgx_h100.toml", &pair, "64MiB", "").unwrap();
    let at_efficiency_us = 64.0 * 1048576.0 / (450e9 * 20.6 / 25.0) * 1e6;
    assert!(
        (big.time_us - at_efficiency_us).abs() < 20.0,
        "{} us vs {at_efficiency_us} us",
        big.time_us
    );
}
