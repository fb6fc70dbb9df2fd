//! `dtsim validate`'s behaviour: filters, fits, which rows are scored, where rows are replayed.
#![cfg(test)]

use super::*;
use std::fmt::Write as _;

fn row(pairs: &[(&str, &str)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Validates a table written (as `text`) inside the repository's `target/`, so that its
/// topology and profile paths resolve; the file is removed again.
fn validate_table(tag: &str, text: &str) -> Report {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = repo
        .join("target")
        .join(format!("{tag}-{}.csv", std::process::id()));
    let _ = std::fs::create_dir_all(csv.parent().unwrap());
    std::fs::write(&csv, text).unwrap();
    let r = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    std::fs::remove_file(&csv).unwrap();
    r
}

#[test]
fn filters_compare_numbers_numerically_and_accept_alternatives() {
    let f = Filter::parse("size_bytes>=1048576; system=ND H100 v5|ND H200 v5").unwrap();
    assert!(f
        .matches(&row(&[("size_bytes", "4194304"), ("system", "ND H200 v5")]))
        .unwrap());
    assert!(!f
        .matches(&row(&[("size_bytes", "524288"), ("system", "ND H100 v5")]))
        .unwrap());
    assert!(!f
        .matches(&row(&[("size_bytes", "4194304"), ("system", "ND A100 v4")]))
        .unwrap());
}

#[test]
fn a_filter_on_a_missing_column_is_an_error_naming_it() {
    let f = Filter::parse("num_gpus=1").unwrap();
    assert!(f
        .matches(&row(&[("gpus", "1")]))
        .unwrap_err()
        .contains("num_gpus"));
    assert!(Filter::parse("no operator here").is_err());
}

#[test]
fn fit_recovers_latency_and_efficiency_from_exact_points() {
    // measured = 10 us + 1.25 x simulated
    let pts: Vec<(f64, f64)> = [1e-5, 1e-4, 1e-3, 1e-2]
        .iter()
        .map(|&s| (s, 1e-5 + 1.25 * s))
        .collect();
    let (a, b) = fit(&pts).unwrap();
    assert!((a - 1e-5).abs() < 1e-9, "{a}");
    assert!((b - 1.25).abs() < 1e-9, "{b}");
}

#[test]
fn fit_uses_a_factor_alone_when_predictions_do_not_spread() {
    let (a, b) = fit(&[(0.1, 0.2), (0.1, 0.2)]).unwrap();
    assert_eq!(a, 0.0);
    assert!((b - 2.0).abs() < 1e-12);
}

#[test]
fn csv_fields_with_quotes_and_commas_survive() {
    let rows = parse_rows("a,b\n\"x, y\",\"say \"\"hi\"\"\"\n\n", "t.csv").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["a"], "x, y");
    assert_eq!(rows[0]["b"], "say \"hi\"");
    let e = parse_rows("a,b\n1,2,3\n", "t.csv").unwrap_err();
    assert_eq!(e, "t.csv: row 1: 2 fields like the header, got 3");
}

#[test]
fn calibration_rows_are_never_scored() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let topo = root.join("topologies/star8_100g.toml");
    let csv = dir.join("runs.csv");
    // Four all-reduce sizes on a star, "measured" exactly 2x the simulation + 1 ms.
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n",
    );
    for bytes in [1u64 << 20, 1 << 22, 1 << 24, 1 << 26] {
        let scen = format!(
            "name = \"t\"\n[topology]\nfile = {}\n[placement]\nranks = 4\n[collective]\nop = \"all_reduce\"\nbytes = \"{bytes}B\"\n",
            toml_str(&topo)
        );
        let sim = simulate(&scen, &["collective.algorithm=ring".into()], false).unwrap();
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,{bytes},collective.algorithm=ring,,{}",
            topo.display(),
            1e-3 + 2.0 * sim
        );
    }
    std::fs::write(&csv, text).unwrap();
    let plain = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    assert_eq!(plain.groups[0].rows, 4);
    assert!(plain.groups[0].median_abs_pct > 40.0);
    let opts = Options {
        calibrate_on: Some(Filter::parse("bytes=1048576|67108864").unwrap()),
        ..Options::default()
    };
    let cal = validate(&[csv], &opts).unwrap();
    assert_eq!(cal.groups[0].rows, 2);
    assert_eq!(cal.groups[0].calibration_rows, 2);
    assert!(
        cal.groups[0].max_abs_pct < 0.01,
        "{}",
        cal.groups[0].max_abs_pct
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The topology and simulated seconds of the rows the range tests build: a ring all-reduce of
/// 4 MiB on 4 ranks of `topologies/star8_100g.toml`.
fn ring_all_reduce_on_star8() -> (std::path::PathBuf, f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let topo = root.join("topologies/star8_100g.toml");
    let scen = format!(
        "name = \"t\"\n[topology]\nfile = {}\n[placement]\nranks = 4\n[collective]\nop = \"all_reduce\"\nbytes = \"4194304B\"\n",
        toml_str(&topo)
    );
    let sim = simulate(&scen, &["collective.algorithm=ring".into()], false).unwrap();
    (topo, sim)
}

#[test]
fn rows_say_whether_the_prediction_lies_within_their_measured_repetitions() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-range-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (topo, sim) = ring_all_reduce_on_star8();
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs,\
         measured_min_secs,measured_max_secs\n",
    );
    // Median 20% above the prediction: the fastest run reached it, then no run did, then
    // no range given.
    for (lo, hi) in [
        (format!("{}", 0.9 * sim), format!("{}", 1.5 * sim)),
        (format!("{}", 1.1 * sim), format!("{}", 1.5 * sim)),
        (String::new(), String::new()),
    ] {
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,4194304,collective.algorithm=ring,,{},{lo},{hi}",
            topo.display(),
            1.2 * sim
        );
    }
    let csv = dir.join("runs.csv");
    std::fs::write(&csv, text).unwrap();
    let r = validate(&[csv], &Options::default()).unwrap();
    let within: Vec<Option<bool>> = r
        .predictions
        .iter()
        .map(Prediction::within_measured_range)
        .collect();
    assert_eq!(within, [Some(true), Some(false), None]);
    assert_eq!(r.groups[0].within_range, Some((1, 2)));
    assert!((r.groups[0].median_abs_pct - 100.0 / 6.0).abs() < 1e-6);
    let rows = r.predictions_csv();
    assert!(rows.lines().next().unwrap().ends_with(
        "measured_min_secs,measured_max_secs,within_measured_range,both_ways_secs,\
             one_way_first_secs,launch_median_min_secs,launch_median_max_secs,\
             plays_fastest_secs,plays_slowest_secs"
    ));
    // The ideal template exchanges nothing OpenMPI's way: no modes; nor launches given; one
    // play.
    assert!(rows.lines().nth(1).unwrap().ends_with(",true,,,,,,"));
    assert!(rows.lines().nth(3).unwrap().ends_with(",,,,,,,"));
    assert!(r.errors_csv().lines().nth(1).unwrap().ends_with(",1"));
    assert!(r.to_string().contains("1/2"), "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_single_device_step_is_predicted_once_per_profile_the_row_names() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-1dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/profiles");
    let both = format!(
        "{};{}",
        profiles.join("v100_dgx1_public.json").display(),
        profiles.join("v100_dgx1_ddp_calibrated.json").display()
    );
    let csv = dir.join("step_times.csv");
    let text = format!(
        "model,batch,dtype,machine,step_secs_median,profile\n\
         resnet50,16,fp32,V100,0.06,{both}\n\
         resnet50,32,fp32,V100,0.10,{both}\n\
         resnet50,64,fp32,V100,0.19,\n"
    );
    std::fs::write(&csv, text).unwrap();
    let r = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    assert_eq!(r.predictions.len(), 4, "{:?}", r.skipped);
    let groups: Vec<&str> = r.groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(
        groups,
        [
            "V100 resnet50 fp32 · v100_dgx1_ddp_calibrated",
            "V100 resnet50 fp32 · v100_dgx1_public"
        ]
    );
    // Twice the batch, about twice the step, under either profile.
    for g in &groups {
        let t: Vec<f64> = r
            .predictions
            .iter()
            .filter(|p| p.group == *g)
            .map(|p| p.simulated_secs)
            .collect();
        assert!(t[1] > 1.7 * t[0] && t[1] < 2.1 * t[0], "{g}: {t:?}");
    }
    assert!(r.skipped[0].1.contains("profile"), "{:?}", r.skipped);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ddp_rows_of_two_and_more_dgx1_are_replayed_on_that_many_nodes() {
    // Inside the repository, so that the topology and profile paths resolve.
    let r = validate_table(
        "ddp",
        "model,batch_per_gpu,num_gpus,num_machines,gpus_per_machine,config_label,bucket_cap_mb,percentile,sec_per_iter,system,intra_node,inter_node\n\
         resnet50,32,8,1,8,1M/8G,25,p50,0.104,DGX-1 8x V100,NVLink hybrid cube mesh,n/a\n\
         resnet50,32,16,2,8,2M/8G,25,p50,0.104,DGX-1 8x V100,NVLink hybrid cube mesh,\"InfiniBand, 4x 100Gb per machine\"\n\
         resnet50,32,64,8,8,8M/8G,25,p50,0.105,DGX-1 8x V100,NVLink hybrid cube mesh,\"InfiniBand, 4x 100Gb per machine\"\n\
         resnet50,32,8,1,8,1M/8G,25,p50,0.104,8x RTX 4090,PCIe,n/a\n",
    );
    assert_eq!(r.predictions.len(), 3, "{:?}", r.skipped);
    let (one, two, eight) = (&r.predictions[0], &r.predictions[1], &r.predictions[2]);
    assert!(two.label.contains("16 GPUs"), "{}", two.label);
    assert!(eight.label.contains("64 GPUs"), "{}", eight.label);
    // More nodes add InfiniBand hops: never faster than one node, and still DDP-bound by
    // compute (within a factor 2 of the 8-GPU step).
    for more in [two, eight] {
        assert!(
            more.simulated_secs >= one.simulated_secs,
            "{one:?} {more:?}"
        );
        assert!(
            more.simulated_secs < 2.0 * one.simulated_secs,
            "{one:?} {more:?}"
        );
    }
    // A GPU without a bundled compute profile is refused, naming the column.
    assert_eq!(r.skipped.len(), 1);
    assert!(
        r.skipped[0].1.contains("compute profile"),
        "{:?}",
        r.skipped
    );
}

#[test]
fn the_2080_ti_table_is_replayed_on_the_pcie_box_not_an_nvlink_node() {
    let r = validate_table(
        "nccl",
        "system,num_nodes,num_gpus,collective,size_bytes,oop_time_us\n\
         \"AutoDL container, 2x RTX 2080 Ti\",1,2,all_reduce,268435456,67137\n\
         ND H100 v5,1,2,all_reduce,268435456,1000\n",
    );
    assert_eq!(r.predictions.len(), 2, "{:?}", r.skipped);
    let pcie = r
        .predictions
        .iter()
        .find(|p| p.group.contains("2080"))
        .unwrap();
    let nvlink = r
        .predictions
        .iter()
        .find(|p| p.group.contains("H100"))
        .unwrap();
    // 256 MiB between two GPUs staged through host memory over PCIe Gen3 x16 (15.75 GB/s)
    // takes milliseconds; over NVLink a fraction of that.
    assert!(pcie.simulated_secs > 1e-2, "{pcie:?}");
    assert!(
        pcie.simulated_secs > 10.0 * nvlink.simulated_secs,
        "{pcie:?} {nvlink:?}"
    );
}

#[test]
fn tf_cnn_nccl_rows_all_reduce_over_nvlink_and_calibration_rows_are_not_scored() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = repo
        .join("target")
        .join(format!("tf-cnn-{}.csv", std::process::id()));
    let _ = std::fs::create_dir_all(csv.parent().unwrap());
    let cols = "system,model,batch_per_gpu,num_gpus,num_nodes,data,throughput,\
                variable_update / local_parameter_device";
    let (dgx, nccl) = (
        "NVIDIA DGX-1 (8x Tesla P100)",
        "replicated (with NCCL) / n/a",
    );
    std::fs::write(
        &csv,
        format!(
            "{cols}\n{dgx},AlexNet,512,1,1,synthetic,2987,{nccl}\n\
             {dgx},AlexNet,512,8,1,synthetic,17822,{nccl}\n\
             AWS p2.8xlarge cluster (up to 8 instances),ResNet-50,64,16,2,synthetic,751,\
             distributed_replicated / n/a / True\n"
        ),
    )
    .unwrap();
    let opts = Options {
        calibrate_on: Some(Filter::parse("num_gpus=1").unwrap()),
        ..Options::default()
    };
    let r = validate(std::slice::from_ref(&csv), &opts).unwrap();
    std::fs::remove_file(&csv).unwrap();
    assert_eq!(r.predictions.len(), 2, "{:?}", r.skipped);
    assert_eq!(r.skipped.len(), 1);
    assert!(
        r.skipped[0].1.contains("network not stated"),
        "{:?}",
        r.skipped
    );
    let (one, eight) = (&r.predictions[0], &r.predictions[1]);
    assert!(one.group.starts_with("DGX-1 P100 AlexNet"), "{}", one.group);
    assert_eq!(one.group, eight.group);
    // images/s are over all GPUs: 512 x 8 / 17822 s per step.
    assert!((eight.measured_secs - 512.0 * 8.0 / 17822.0).abs() < 1e-12);
    // The 1-GPU row fits the group's calibration and is not scored; the 8-GPU row is.
    assert!(one.calibration && !eight.calibration);
    assert_eq!((r.groups[0].rows, r.groups[0].calibration_rows), (1, 1));
    // 8 GPUs add one ring all-reduce of AlexNet's fp32 gradients after the backward pass,
    // over single NVLink1 links (20 GB/s): 2 x 7/8 x bytes / 20 GB/s. Through PCIe and the
    // CPUs (15.75 GB/s) it would take over a quarter longer.
    let bytes = crate::workload::catalog::alexnet().params() as f64 * 4.0;
    let ring = 2.0 * 7.0 / 8.0 * bytes / 20e9;
    let added = eight.simulated_secs - one.simulated_secs;
    assert!(
        added > 0.95 * ring && added < 1.1 * ring,
        "{added} s vs {ring} s"
    );
}

/// A row of an nccl-tests table in the shared layout, with the columns that describe its system.
fn nccl_row(gpu: &str, nodes: u32, gpus: u32, intra: &str, inter: &str) -> Row {
    let (nodes, gpus) = (nodes.to_string(), gpus.to_string());
    row(&[
        ("system", "a system dtsim has never seen"),
        ("gpu", gpu),
        ("num_nodes", &nodes),
        ("total_gpus", &gpus),
        ("intra_node_interconnect", intra),
        ("inter_node_interconnect", inter),
        ("collective", "all_reduce"),
        ("size_bytes", "1073741824"),
        ("oop_time_us", "10000"),
    ])
}

fn replay_of(r: &Row) -> system::Replay {
    system::read(r).and_then(|s| s.replay()).unwrap()
}

#[test]
fn a_multi_node_infiniband_table_runs_on_rails_at_its_stated_nic_rate_not_on_tcpxo() {
    let r = replay_of(&nccl_row(
        "NVIDIA H100 80GB HBM3",
        4,
        32,
        "NVLink4 via NVSwitch",
        "8x 400 Gb/s InfiniBand NDR per node",
    ));
    assert_eq!(r.topology, "h100_rail_cluster");
    assert_eq!(r.profile, "h100_sxm_node");
    assert!(r.set.contains(&"topology.generator.nodes=4".to_string()));
    assert!(r
        .set
        .contains(&"topology.generator.nic_link.bandwidth=400Gbps".to_string()));
    assert!(r
        .set
        .contains(&"topology.generator.nic_link.class=ib".to_string()));
    assert!(r.collective.is_empty(), "no TCPXO settings: {r:?}");
    assert!(r.assumed.is_empty(), "{r:?}");
    // GPUDirect-TCPXO is what selects GCP's A3 Mega build and its NCCL environment.
    let gcp = replay_of(&nccl_row(
        "NVIDIA H100 80GB HBM3",
        2,
        16,
        "NVLink/NVSwitch",
        "GPUDirect-TCPXO over 8 GPU NICs per VM",
    ));
    assert_eq!(gcp.topology, "gcp_a3mega");
    assert_eq!(gcp.profile, "gcp_a3mega_2node_h100");
    assert_eq!(gcp.collective, system::GCP_TCPXO_NCCL);
}

#[test]
fn what_a_row_leaves_out_comes_from_its_gpu_generation_and_is_reported_as_assumed() {
    let r = replay_of(&nccl_row("NVIDIA A100-SXM4-80GB", 2, 16, "", "not stated"));
    assert_eq!(r.topology, "h100_rail_cluster");
    assert_eq!(r.profile, "a100_sxm_node");
    for key in [
        "topology.generator.nvlink.bandwidth=300GB/s",
        "topology.generator.nic_link.bandwidth=200Gbps",
        "topology.gpu=\"A100\"",
    ] {
        assert!(r.set.contains(&key.to_string()), "{key}: {r:?}");
    }
    let said = r.assumed.join("; ");
    for what in ["NVSwitch", "InfiniBand", "200 Gb/s", "8 NICs"] {
        assert!(said.contains(what), "{what}: {said}");
    }
    // Four NICs of 200 Gb/s for eight GPUs: the node's total, one NIC per GPU.
    let r = replay_of(&nccl_row(
        "H100 SXM5",
        2,
        16,
        "NVSwitch",
        "4 x 200 Gbps RoCE",
    ));
    assert!(r
        .set
        .contains(&"topology.generator.nic_link.bandwidth=100Gbps".to_string()));
    assert!(r
        .set
        .contains(&"topology.generator.nic_link.class=ethernet".to_string()));
    assert!(r.assumed.join(" ").contains("4 NICs of 200 Gb/s"), "{r:?}");
}

#[test]
fn pre_nvswitch_boards_and_pcie_cards_get_their_own_topologies() {
    let v100 = replay_of(&nccl_row("Tesla V100-SXM2-32GB", 1, 8, "", "none"));
    assert_eq!(v100.topology, "dgx1_v100");
    assert_eq!(v100.profile, "default");
    assert!(v100.set.contains(&"topology.gpu=\"V100\"".to_string()));
    assert!(v100.assumed.join(" ").contains("hybrid cube mesh"));
    let two = replay_of(&nccl_row(
        "Tesla V100-SXM2-16GB",
        2,
        16,
        "NVLink hybrid cube mesh",
        "4x EDR 100Gb InfiniBand",
    ));
    assert_eq!(two.topology, "dgx1_v100_x2");
    assert!(two.set.contains(&"topology.generator.nodes=2".to_string()));
    // GeForce cards: no P2P unless the row says so; datacenter PCIe cards have it.
    let geforce = replay_of(&nccl_row(
        "NVIDIA GeForce RTX 4090",
        1,
        4,
        "PCIe Gen4 x16",
        "",
    ));
    assert_eq!(geforce.topology, "pcie_box_2gpu");
    assert!(
        !geforce.set.iter().any(|s| s.contains("p2p")),
        "{geforce:?}"
    );
    assert!(geforce
        .set
        .contains(&"topology.generator.pcie.bandwidth=31.51GB/s".to_string()));
    let l40s = replay_of(&nccl_row("NVIDIA L40S", 1, 4, "PCIe Gen4 switch", ""));
    assert!(l40s
        .set
        .contains(&"topology.generator.p2p=true".to_string()));
    // The shared 2080 Ti box states that P2P is not supported; its profile is the staged path's.
    let box2 = replay_of(&nccl_row(
        "NVIDIA GeForce RTX 2080 Ti (11GB)",
        1,
        2,
        "PCIe Gen3 x16, PIX; P2P NOT supported; no NVLink",
        "",
    ));
    assert_eq!(
        (box2.topology, box2.profile),
        ("pcie_box_2gpu", "rtx2080ti_pcie_box")
    );
    assert!(box2.set.is_empty(), "{box2:?}");
}

#[test]
fn a_switched_board_of_another_generation_takes_its_own_link_rates() {
    // DGX-2: 16 V100 on NVSwitches, six NVLink2 bricks (150 GB/s) and PCIe Gen3 each.
    let r = replay_of(&nccl_row("Tesla V100-SXM3-32GB", 1, 16, "NVSwitch", ""));
    assert_eq!(r.topology, "hgx_h100");
    for key in [
        "topology.generator.nvlink.bandwidth=150GB/s",
        "topology.generator.pcie.bandwidth=15.75GB/s",
        "topology.generator.gpus=16",
        "topology.gpu=\"V100\"",
    ] {
        assert!(r.set.contains(&key.to_string()), "{key}: {r:?}");
    }
    assert!(!r.nvls_capable);
}

#[test]
fn the_system_comes_from_the_gpu_column_not_from_the_system_name() {
    let mut r = nccl_row("Tesla V100-SXM2-32GB", 1, 8, "NVLink2 hybrid cube mesh", "");
    r.insert("system".into(), "ND H100 v5".into());
    assert_eq!(replay_of(&r).topology, "dgx1_v100");
}

#[test]
fn systems_dtsim_cannot_build_are_refused_naming_the_column() {
    let e = system::read(&nccl_row("Intel Gaudi2", 1, 8, "", ""))
        .and_then(|s| s.replay())
        .unwrap_err();
    assert!(e.starts_with("gpu:"), "{e}");
    let e = system::read(&nccl_row("NVIDIA L40S", 2, 8, "PCIe", "100 Gb/s Ethernet"))
        .and_then(|s| s.replay())
        .unwrap_err();
    assert!(e.starts_with("num_nodes:"), "{e}");
    let e = system::read(&nccl_row("H100", 3, 16, "NVSwitch", "NDR")).unwrap_err();
    assert!(e.starts_with("num_nodes:"), "{e}");
}

#[test]
fn an_unseen_multi_node_table_is_replayed_end_to_end_and_says_on_what() {
    let r = validate_table(
        "nccl-unseen",
        "system,num_nodes,gpus_per_node,total_gpus,gpu,intra_node_interconnect,\
         inter_node_interconnect,collective,size_bytes,oop_time_us\n\
         IB cluster,2,8,16,H100 SXM5,NVSwitch,8 x 400 Gb/s InfiniBand,all_reduce,1073741824,10000\n\
         TCPXO cluster,2,8,16,H100 SXM5,NVSwitch,GPUDirect-TCPXO,all_reduce,1073741824,10000\n",
    );
    assert_eq!(r.predictions.len(), 2, "{:?}", r.skipped);
    let secs = |g: &str| {
        r.predictions
            .iter()
            .find(|p| p.group == g)
            .unwrap()
            .simulated_secs
    };
    // 1 GiB over 16 GPUs on two nodes: NCCL's trees send each byte across the network once
    // where a ring sends it twice, so the bus bandwidth stays below twice the node's NICs
    // (8 x 50 GB/s); and it is more than a quarter of them.
    let busbw_ib = 2.0 * 15.0 / 16.0 * 1073741824.0 / secs("IB cluster") / 1e9;
    assert!((100.0..800.0).contains(&busbw_ib), "{busbw_ib}");
    // Twice the NIC rate is faster than GCP's 200 Gb/s TCPXO NICs.
    assert!(secs("IB cluster") < secs("TCPXO cluster"));
    let on: Vec<&str> = r
        .replayed_on
        .iter()
        .map(|(_, _, how)| how.as_str())
        .collect();
    assert!(on.iter().any(|h| h.contains("h100_rail_cluster")), "{on:?}");
    assert!(on.iter().any(|h| h.contains("gcp_a3mega")), "{on:?}");
}

#[test]
fn a_row_names_its_nccl_release_in_any_common_spelling_and_older_ones_play_as_the_oldest_modelled()
{
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let with_version = |v: &str| {
        let mut r = nccl_row("H100 SXM5", 1, 8, "NVSwitch", "");
        r.insert("nccl_version".into(), v.into());
        nccl::case(&r, &root).unwrap()
    };
    for spelled in ["2.21.5", "NCCL 2.21.5-1", "v2.21"] {
        let c = with_version(spelled);
        assert!(
            c.text.contains("library_version = \"2.21\""),
            "{spelled}: {}",
            c.text
        );
        assert!(!c.replayed_on.contains("nearest"), "{}", c.replayed_on);
    }
    let old = with_version("2.12.12");
    assert!(
        old.text.contains("library_version = \"2.18\""),
        "{}",
        old.text
    );
    assert!(
        old.replayed_on.contains("NCCL 2.12 played as 2.18"),
        "{}",
        old.replayed_on
    );
    // CUDA's version is not NCCL's.
    let unstated = with_version("not stated (CUDA 12.4, driver 550.90.07)");
    assert!(
        !unstated.text.contains("library_version"),
        "{}",
        unstated.text
    );
}

#[test]
fn a_rows_time_comes_from_whichever_time_or_bandwidth_column_the_table_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let secs = |column: &str, value: &str| {
        let mut r = nccl_row("H100 SXM5", 1, 8, "NVSwitch", "");
        r.remove("oop_time_us");
        r.insert(column.into(), value.into());
        nccl::case(&r, &root).unwrap().measured_secs
    };
    let gib = 1073741824.0;
    assert!((secs("ip_time_us", "5000") - 5e-3).abs() < 1e-12);
    assert!((secs("time_us", "5000") - 5e-3).abs() < 1e-12);
    // 8 GPUs: bus bandwidth is 2 x 7/8 of the algorithm bandwidth.
    assert!((secs("algbw_GBps", "100") - gib / 100e9).abs() < 1e-12);
    assert!((secs("busbw_GBps", "175") - gib / 100e9).abs() < 1e-12);
    let mut r = nccl_row("H100 SXM5", 1, 8, "NVSwitch", "");
    r.remove("oop_time_us");
    let e = nccl::case(&r, &root).err().unwrap();
    assert!(e.contains("oop_time_us / ip_time_us"), "{e}");
}

#[test]
fn gpu_copy_tables_replay_each_pair_at_the_topologys_link_rates() {
    let head =
        "system,gpu,topology,test,direction_or_metric,src_gpu,dst_gpu,value,unit,transfer_size";
    let v100 = "\"node, 8x V100-SXM2-32GB\",Tesla V100-SXM2-32GB,DGX-1-like hybrid cube mesh,p2p_bandwidth_all";
    let a100 =
        "DGX A100 (8x A100 + NVSwitch),NVIDIA A100-SXM4-40GB,DGX A100: NVSwitch,p2p_bandwidth_all";
    let r = validate_table(
        "p2p",
        &format!(
            "{head}\n\
             {v100},unidirectional,0,2,45.0,GiB/s,\"40,000,000 B\"\n\
             {v100},unidirectional,0,5,8.1,GiB/s,\"40,000,000 B\"\n\
             {v100},unidirectional,3,3,700,GiB/s,\"40,000,000 B\"\n\
             {a100},bidirectional,0,1,460,GiB/s,\"40,000,000 B\"\n\
             {a100},\"latency, P2P enabled\",0,1,2.1,us,\n\
             {a100},Host to Device,host,0,24,GB/s,\n"
        ),
    );
    assert_eq!(r.predictions.len(), 3, "{:?}", r.skipped);
    let gbps = |label: &str, moved: f64| {
        let p = r.predictions.iter().find(|p| p.label == label).unwrap();
        moved / p.simulated_secs / 1e9
    };
    // Two NVLink2 bricks between GPUs 0 and 2: 50 GB/s each way, as the topology says.
    let two_links = gbps("GPU 0 -> 2", 4e7);
    assert!((two_links - 50.0).abs() < 1.0, "{two_links}");
    // GPUs 0 and 5 share no NVLink: GPUs do not forward, so the copy crosses PCIe.
    let no_link = gbps("GPU 0 -> 5", 4e7);
    assert!(no_link <= 15.75 + 1e-6, "{no_link}");
    // Both ways at once over NVSwitch: twice one direction's 300 GB/s, scored on the total.
    let both = gbps("GPU 0 -> 1", 8e7);
    assert!((both - 600.0).abs() < 10.0, "{both}");
    let why: Vec<&str> = r.skipped.iter().map(|(_, w)| w.as_str()).collect();
    assert!(why.iter().any(|w| w.contains("latency")), "{why:?}");
    assert!(why.iter().any(|w| w.contains("own memory")), "{why:?}");
    assert!(why.iter().any(|w| w.contains("host to device")), "{why:?}");
}

#[test]
fn rows_pooling_launches_show_the_range_of_their_launch_medians() {
    // The same row three ways: launches around the prediction, launches all above it, one
    // launch only (nothing to show).
    let (topo, sim) = ring_all_reduce_on_star8();
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs,\
         launch_medians_secs\n",
    );
    for launches in [
        format!("{};{};{}", 0.8 * sim, 1.2 * sim, 1.3 * sim),
        format!("{};{}", 1.1 * sim, 1.3 * sim),
        format!("{}", 1.2 * sim),
    ] {
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,4194304,collective.algorithm=ring,,{},{launches}",
            topo.display(),
            1.2 * sim
        );
    }
    let r = validate_table("launch-medians", &text);
    let ranges: Vec<Option<(f64, f64)>> =
        r.predictions.iter().map(|p| p.launch_range_secs).collect();
    let close = |a: Option<(f64, f64)>, lo: f64, hi: f64| {
        a.is_some_and(|(a, b)| {
            (a / (lo * sim) - 1.0).abs() < 1e-9 && (b / (hi * sim) - 1.0).abs() < 1e-9
        })
    };
    assert!(close(ranges[0], 0.8, 1.3), "{ranges:?}");
    assert!(close(ranges[1], 1.1, 1.3), "{ranges:?}");
    assert_eq!(ranges[2], None);
    let shown = r.to_string();
    assert_eq!(shown.matches("launch medians").count(), 2, "{shown}");
    assert_eq!(shown.matches("ms: within)").count(), 1, "{shown}");
}

/// A validation table of collective rows on the testbed's star with its profile: one row per
/// `(method, sim_set)`, all with `topology_set`, `ranks`, `op_bytes` ("op,bytes") and
/// `measured_secs`.
fn star_rows(
    topology_set: &str,
    ranks: u32,
    op_bytes: &str,
    measured_secs: f64,
    methods: &[(&str, &str)],
) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let star = root.join("testbed/topologies/star4_200mbit.toml");
    let profile = root.join("data/profiles/testbed_star4_200mbit.json");
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n",
    );
    for (method, set) in methods {
        let _ = writeln!(
            text,
            "collective,{},{topology_set},{ranks},{method},{op_bytes},{set},{},{measured_secs}",
            star.display(),
            profile.display()
        );
    }
    text
}

#[test]
fn openmpi_rows_give_the_bounds_of_their_exchange_modes() {
    // A 16 MiB all_gather by recursive doubling on the testbed's star: both ways at once its
    // exchanges move 12 MiB one way (~0.53 s at the star's measured rate), one way after the
    // other nearly twice that; the median call, slow from its first step (two pairs entering
    // run slow 181 times in 320), is the slow bound. A ring exchanges with no partner: no
    // modes.
    let text = star_rows(
        "",
        4,
        "all_gather,16777216",
        1.0,
        &[
            ("rd", "collective.library=mpi"),
            ("ring", "collective.library=mpi;collective.algorithm=ring"),
        ],
    );
    let r = validate_table("exchange-modes", &text);
    let (both, serial) = r.predictions[0].exchange_modes_secs.unwrap();
    let median = r.predictions[0].simulated_secs;
    assert!(both < median, "{both} {median}");
    assert!((median - serial).abs() < 1e-9 * serial, "{median} {serial}");
    assert!((0.5..0.6).contains(&both), "{both}");
    assert!(serial > 1.9 * both, "{serial} vs {both}");
    assert_eq!(r.predictions[1].exchange_modes_secs, None);
    assert!(r.to_string().contains("exchange modes"), "{r}");
}

#[test]
fn gloo_rows_on_a_profile_with_wake_ups_give_the_span_of_their_plays() {
    // gloo on the testbed's star draws the hosts' wake-ups: the call is played 25 times and
    // predicted at the median play, which lies within the plays' span (wider than nothing
    // at 256 KiB on 8 hosts, where a drawn stall of milliseconds is a third of the call). An
    // ideal ring draws nothing: no span.
    let text = star_rows(
        "generator.n=8",
        8,
        "all_gather,262144",
        0.0134,
        &[
            ("gloo", "collective.library=gloo"),
            ("ideal", "collective.library=ideal"),
        ],
    );
    let r = validate_table("plays", &text);
    let (fastest, slowest) = r.predictions[0].plays_secs.unwrap();
    let predicted = r.predictions[0].simulated_secs;
    assert!(
        fastest <= predicted && predicted <= slowest,
        "{fastest} {predicted} {slowest}"
    );
    assert!(slowest > fastest + 1e-3, "{fastest} {slowest}");
    assert_eq!(r.predictions[1].plays_secs, None);
    assert!(r.to_string().contains("(plays "), "{r}");
    assert!(r
        .predictions_csv()
        .lines()
        .next()
        .unwrap()
        .contains("plays_fastest_secs"));
}

#[test]
fn the_gates_name_every_scored_group_outside_them_and_ignore_unscored_ones() {
    let group = |name: &str, rows: usize, median: f64, max: f64| GroupError {
        dataset: "d".into(),
        group: name.into(),
        rows,
        calibration_rows: 0,
        median_abs_pct: median,
        max_abs_pct: max,
        fit: None,
        within_range: None,
    };
    let report = Report {
        predictions: Vec::new(),
        groups: vec![
            group("tight", 4, 1.0, 4.0),
            group("spread", 4, 2.0, 12.0),
            group("biased", 4, 5.0, 6.0),
            group("only fitted", 0, 50.0, 90.0),
        ],
        skipped: Vec::new(),
        replayed_on: Vec::new(),
    };
    assert_eq!(
        report.outside(Some(3.0), Some(10.0)),
        (vec!["d spread".to_string(), "d biased".to_string()], 3)
    );
    assert_eq!(report.outside(Some(3.0), None).0, vec!["d biased"]);
    assert_eq!(report.outside(None, Some(10.0)).0, vec!["d spread"]);
    assert!(report.outside(None, None).0.is_empty());
}

#[test]
fn set_replays_testbed_rows_with_more_scenario_keys_and_nothing_else() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (topo, sim) = ring_all_reduce_on_star8();
    let csv = dir.join("runs.csv");
    std::fs::write(
        &csv,
        format!(
            "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n\
             collective,{},,4,ring,all_reduce,4194304,collective.algorithm=ring,,{sim}\n",
            topo.display()
        ),
    )
    .unwrap();
    let flow = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    let opts = Options {
        set: vec!["network.model=packet".into()],
        ..Options::default()
    };
    let packet = validate(std::slice::from_ref(&csv), &opts).unwrap();
    let (f, p) = (&flow.predictions[0], &packet.predictions[0]);
    assert_eq!(f.simulated_secs, sim);
    // Packets stored and forwarded at every hop: a little slower than the fluid flows.
    assert!(
        p.simulated_secs > sim && p.simulated_secs < 1.05 * sim,
        "{} vs {sim}",
        p.simulated_secs
    );
    let ddp = dir.join("ddp.csv");
    std::fs::write(&ddp, "sec_per_iter\n1.0\n").unwrap();
    let err = validate(&[ddp], &opts).unwrap_err();
    assert!(err.contains("--set replays testbed datasets"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
