//! Where `dtsim validate` replays each published table's rows: the system a row names (its GPU,
//! nodes, links and library release), what it assumes, what it refuses.
#![cfg(test)]

use super::*;

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
