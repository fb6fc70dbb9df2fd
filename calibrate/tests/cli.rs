//! Every command through the real `calibrate` binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn calibrate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calibrate"))
        .args(args)
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap()
}
fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}
/// A fresh directory for one test: emptied first, since a process id can come back and find
/// an earlier run's files (a profile that an import would merge into).
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("calibrate-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn help_documents_the_exit_codes() {
    let o = calibrate(&["--help"]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    assert!(
        s.contains("3 `calibrate gpu` found no NVIDIA driver or GPU"),
        "{s}"
    );
    assert!(
        s.contains("4 `calibrate gpu` failed while measuring"),
        "{s}"
    );
}

/// This machine has no NVIDIA driver: `calibrate gpu` says so in one sentence and exits 3.
/// (On a GPU machine this test checks nothing and says so.)
#[test]
fn gpu_without_a_driver_fails_with_one_sentence_and_exit_code_3() {
    if calibrate::gpu::libs::first_loadable(&["libcuda.so.1", "libcuda.so"]).is_ok() {
        eprintln!("skipped: this machine has an NVIDIA driver");
        return;
    }
    let o = calibrate(&[
        "gpu",
        "--out",
        &tmp("gpu").join("p.json").display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: no NVIDIA driver here"), "{err}");
    assert!(!err.contains("panicked"));
    assert!(o.stdout.is_empty());
    assert!(!tmp("gpu").join("p.json").exists());
}

#[test]
fn gpu_rejects_bad_options_before_looking_for_a_gpu() {
    let o = calibrate(&["gpu", "--skip", "everything"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--skip"));
}

#[test]
fn import_nccl_tests_writes_a_profile_that_show_prints() {
    let out = tmp("nccl").join("p.json");
    let o = calibrate(&[
        "import",
        "nccl-tests",
        &fixture("nccl_tests_old.txt"),
        &fixture("nccl_tests_report.json"),
        "--collective",
        "all_reduce",
        "--nominal-bw",
        "50GB/s",
        "--holdout",
        "every:3",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    assert!(
        table.contains("all_reduce") && table.contains("hold-out"),
        "{table}"
    );
    let p = sim::profile::Profile::load(&out).unwrap();
    assert_eq!(p.network.collective_fits.len(), 2);
    assert!(p
        .network
        .factors
        .contains_key(&sim::topology::LinkClass::Nvlink));
    assert!(p.network.collective_fits[0].holdout.is_some());
    let o = calibrate(&["show", &out.display().to_string()]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    assert!(
        s.contains("all_reduce over 4 ranks") && s.contains("link factors for nvlink"),
        "{s}"
    );
    // A second import merges into the same profile.
    let o = calibrate(&[
        "import",
        "iperf3",
        &fixture("iperf3_tcp.json"),
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = sim::profile::Profile::load(&out).unwrap();
    assert_eq!(
        (p.network.collective_fits.len(), p.network.paths.len()),
        (2, 1)
    );
}

#[test]
fn fit_reports_hold_out_errors_as_json() {
    let o = calibrate(&[
        "fit",
        &fixture("nccl_tests_multinode.txt"),
        "--link-class",
        "ib",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["fit"]["collective"], "all_gather");
    assert_eq!(v[0]["fit"]["nodes"], 2);
    assert_eq!(v[0]["fit"]["holdout"]["rule"], "every:3");
    assert!(v[0]["holdout"]["mean_abs_rel_error"].as_f64().unwrap() >= 0.0);
}

#[test]
fn broken_logs_exit_2_naming_file_and_line() {
    let o = calibrate(&["import", "nccl-tests", &fixture("nccl_tests_truncated.txt")]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("nccl_tests_truncated.txt:17: expected"), "{e}");
    let o = calibrate(&["fit", &fixture("nccl_tests_multinode.txt")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--link-class"));
    let o = calibrate(&[
        "fit",
        &fixture("nccl_tests_multinode.txt"),
        "--link-class",
        "ib",
        "--holdout",
        "often",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("every:K"));
}

#[test]
fn import_kineto_p2p_and_iperf3_print_summaries() {
    let o = calibrate(&["import", "kineto", &fixture("kineto_trace.json")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(
        s.contains("1 steps") && s.contains("nccl all_reduce") && s.contains("nn.Module: Conv2d_0"),
        "{s}"
    );
    let o = calibrate(&["import", "kineto", &fixture("kineto_trace.json"), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"][0]["number"], 4);
    let out = tmp("p2p").join("p.json");
    let o = calibrate(&[
        "import",
        "p2p",
        &fixture("nvbandwidth.txt"),
        "--link-class",
        "nvlink",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("off-diagonal mean 390.05 GB/s"));
    assert_eq!(
        sim::profile::Profile::load(&out)
            .unwrap()
            .network
            .paths
            .len(),
        12
    );
    let o = calibrate(&["import", "iperf3", &fixture("iperf3_tcp.json")]);
    assert!(o.status.success());
    assert!(
        text(&o.stdout).contains("TCP 4 stream(s) to 10.0.0.1"),
        "{}",
        text(&o.stdout)
    );
    let o = calibrate(&["import", "iperf3", &fixture("iperf3_error.json")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("Connection refused"));
}

#[test]
fn every_shipped_profile_loads_and_shows() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/profiles");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let o = calibrate(&["show", &p.display().to_string()]);
            assert!(o.status.success(), "{}: {}", p.display(), text(&o.stderr));
            assert!(text(&o.stdout).contains("from "), "{}", p.display());
            // A fitted NCCL model is listed with the rows it was fitted on.
            let loaded = sim::profile::Profile::load(&p).unwrap();
            if let Some(nccl) = &loaded.network.nccl {
                let shown = text(&o.stdout);
                assert!(shown.contains("NCCL model"), "{}", p.display());
                for key in nccl.base_latency_us.keys().chain(nccl.channel_gbps.keys()) {
                    assert!(shown.contains(key.as_str()), "{}: {key}", p.display());
                }
                if !nccl.fitted_on.is_empty() {
                    assert!(shown.contains("fitted on"), "{}", p.display());
                }
            }
            n += 1;
        }
    }
    assert!(n >= 3);
}

#[test]
fn iperf3_with_nominal_rate_and_latencies_writes_a_factor_table_the_simulator_reads() {
    // The fixture received 93.8 Gbit/s; a 100 Gbit/s link and a path of 10 us nominal, 4 us measured.
    let out = tmp("iperf3-factors").join("p.json");
    let o = calibrate(&[
        "import",
        "iperf3",
        &fixture("iperf3_tcp.json"),
        "--nominal-bw",
        "100Gbps",
        "--latency",
        "4us",
        "--nominal-latency",
        "10us",
        "--latency-source",
        "ping-pong median RTT / 2",
        "--measured-on",
        "a two-host test rig",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = sim::profile::Profile::load(&out).unwrap();
    let f = p.efficiency_factors();
    assert_eq!(
        f.lookup(sim::topology::LinkClass::Ethernet, 1 << 20),
        (0.938, 0.4)
    );
    let t = &p.network.factors[&sim::topology::LinkClass::Ethernet];
    assert!(
        t.provenance.detail.contains("iperf3_tcp.json")
            && t.provenance.detail.contains("ping-pong median RTT / 2"),
        "{}",
        t.provenance.detail
    );
    assert_eq!(p.network.paths[0].latency_secs, Some(4e-6));
    assert_eq!(p.provenance.source, "measured");
    assert!(
        p.provenance
            .detail
            .starts_with("measured on a two-host test rig; calibrate import iperf3"),
        "{}",
        p.provenance.detail
    );
    assert_eq!(t.provenance.source, "measured");
    // A nominal latency alone has nothing to divide.
    let o = calibrate(&[
        "import",
        "iperf3",
        &fixture("iperf3_tcp.json"),
        "--nominal-bw",
        "100Gbps",
        "--nominal-latency",
        "10us",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--latency"), "{}", text(&o.stderr));
}

/// The CPU run recorded with calibrate/scripts/torch_bench.py, imported the way
/// calibrate/scripts/gpu_session.sh imports a GPU's.
#[test]
fn a_recorded_torch_bench_run_becomes_a_profile_with_layer_times() {
    let run = format!(
        "{}/../data/runs/compute/epyc_2vcpu",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = tmp("torch").join("profile.json");
    let o = calibrate(&[
        "import",
        "torch-device",
        &format!("{run}/device.json"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = calibrate(&[
        "import",
        "layer-times",
        &format!("{run}/layer_times.csv"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Every layer of both models at every batch size (ResNet-50: 158 module calls, 5 batches;
    // AlexNet: 21 modules less 2 dropouts, 4 batches).
    assert!(text(&o.stderr).contains(&format!("{} layer times", 158 * 5 + 19 * 4)));
    let p = sim::profile::Profile::load(&out).unwrap();
    let c = p.compute.unwrap();
    assert!(c.peak_flops_per_s["fp32"].value > 1e9);
    assert!(c
        .layer_times
        .iter()
        .any(|t| t.model == "resnet50" && t.layer == "layer4.2.conv3" && t.batch == 16));
    // A layer-times file into a profile without a compute section is refused, naming it.
    let bare = tmp("torch").join("bare.json");
    std::fs::copy(
        format!(
            "{}/../data/profiles/default.json",
            env!("CARGO_MANIFEST_DIR")
        ),
        &bare,
    )
    .unwrap();
    let o = calibrate(&[
        "import",
        "layer-times",
        &format!("{run}/layer_times.csv"),
        "--out",
        bare.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("compute"), "{}", text(&o.stderr));
}

#[test]
fn a_measured_compute_section_replaces_a_clusters_and_keeps_what_was_not_measured() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let measured = format!("{root}/data/runs/gpu/h200_vm/calibrate/nvidia_h200_measured.json");
    let out = tmp("compute").join("cluster.json");
    std::fs::copy(format!("{root}/data/profiles/h100_sxm_node.json"), &out).unwrap();
    let before = sim::profile::Profile::load(&out).unwrap();
    let o = calibrate(&[
        "import",
        "compute",
        &measured,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let after = sim::profile::Profile::load(&out).unwrap();
    // The network section is the cluster's, untouched.
    assert_eq!(after.network, before.network);
    let (old, new) = (before.compute.unwrap(), after.compute.unwrap());
    let src = sim::profile::Profile::load(std::path::Path::new(&measured))
        .unwrap()
        .compute
        .unwrap();
    assert_eq!(
        new.peak_flops_per_s["bf16"].value,
        src.peak_flops_per_s["bf16"].value
    );
    assert_eq!(new.memory_bandwidth.value, src.memory_bandwidth.value);
    // fp8 was not measured: it is kept, rescaled so it plays at the rate it did
    // (datasheet peak x nominal efficiency = measured-section peak x efficiency 1).
    let played = |c: &sim::profile::ComputeCalibration| {
        c.peak_flops_per_s["fp8"].value * c.matmul_efficiency.value
    };
    assert!((played(&new) - played(&old)).abs() / played(&old) < 1e-12);
    assert!(new.peak_flops_per_s["fp8"]
        .provenance
        .detail
        .contains("plays at the rate"));
    // A source without a compute section is refused, naming the file and the field.
    let o = calibrate(&[
        "import",
        "compute",
        &format!("{root}/data/profiles/default.json"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("default.json") && e.contains("compute"), "{e}");
}

#[test]
fn two_runs_on_one_gpu_join_into_the_bundled_h100_compute_section_and_two_gpus_do_not() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let run = |name: &str| format!("{root}/data/runs/gpu/{name}/gpu_measurements.json.gz");
    let out = tmp("gpu-measurements-join").join("h100.json");
    let _ = std::fs::remove_file(&out);
    // The four models' run, then CIFAR ResNet-18 and BERT-base measured minutes later.
    let o = calibrate(&[
        "import",
        "gpu-measurements",
        &run("h100_vm/calibrate"),
        &run("h100_vm/calibrate_cifar_bert"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rebuilt = sim::profile::Profile::load(&out).unwrap().compute.unwrap();
    let bundled = sim::profile::Profile::load(std::path::Path::new(&format!(
        "{root}/data/profiles/h100_sxm_node.json"
    )))
    .unwrap()
    .compute
    .unwrap();
    assert_eq!(
        rebuilt.peak_flops_per_s["bf16"].value,
        bundled.peak_flops_per_s["bf16"].value
    );
    let times = rebuilt.gemm_times.unwrap().times;
    assert_eq!(times, bundled.gemm_times.unwrap().times);
    // 804 distinct layer GEMMs of the first run's four models, 460 of the second's two.
    assert_eq!(times.len(), 1264);
    // An H200's run does not join an H100's: the error names the file and the field.
    let o = calibrate(&[
        "import",
        "gpu-measurements",
        &run("h100_vm/calibrate"),
        &run("h200_vm/calibrate"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("h200_vm/calibrate/gpu_measurements.json.gz") && e.contains("devices[0].name"),
        "{e}"
    );
}

#[test]
fn a_gpu_runs_measurements_rebuild_the_bundled_h200_compute_section() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let out = tmp("gpu-measurements").join("h200.json");
    let _ = std::fs::remove_file(&out);
    let o = calibrate(&[
        "import",
        "gpu-measurements",
        &format!("{root}/data/runs/gpu/h200_vm/calibrate/gpu_measurements.json.gz"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rebuilt = sim::profile::Profile::load(&out).unwrap().compute.unwrap();
    let bundled = sim::profile::Profile::load(std::path::Path::new(&format!(
        "{root}/data/profiles/h200_sxm_node.json"
    )))
    .unwrap()
    .compute
    .unwrap();
    for dtype in ["fp32", "tf32", "fp16", "bf16"] {
        assert_eq!(
            rebuilt.peak_flops_per_s[dtype].value, bundled.peak_flops_per_s[dtype].value,
            "{dtype}"
        );
    }
    assert_eq!(
        rebuilt.memory_bandwidth.value,
        bundled.memory_bandwidth.value
    );
    let (r, b) = (rebuilt.gemm_times.unwrap(), bundled.gemm_times.unwrap());
    assert_eq!(r.times, b.times);
    // Every layer GEMM of the four models in tf32 and bf16, each distinct shape once.
    assert_eq!(r.times.len(), 804);
}

/// `import own-egress` turns a host's ping behind its own stream into the FIFO head: the
/// committed star5 log (3 launches of 2 x 400 pings at 100 Mbit/s) rebuilds the bundled
/// profile's value, and a profile without the link's efficiency or a log of another host's
/// stream is refused, naming what is missing.
#[test]
fn import_own_egress_rebuilds_the_testbed_profiles_fifo_head() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let log =
        format!("{root}/data/runs/calibration/testbed_star5_100mbit.packet_wait_own_egress.json");
    let bundled = format!("{root}/data/profiles/testbed_star5_100mbit.json");
    let dir = tmp("own-egress");
    let out = dir.join("star5.json");
    std::fs::copy(&bundled, &out).unwrap();
    let import = |log: &str, out: &std::path::Path| {
        let out = out.to_str().unwrap();
        calibrate(&[
            "import",
            "own-egress",
            log,
            "--nominal-bw",
            "100Mbps",
            "--out",
            out,
        ])
    };
    let o = import(&log, &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let head = |p: &std::path::Path| {
        let prof = sim::profile::Profile::load(p).unwrap();
        let m = &prof.network.fifo_head_bytes[&sim::topology::LinkClass::Ethernet];
        (m.value.0, m.provenance.detail.clone())
    };
    let (rebuilt, detail) = head(&out);
    assert_eq!(rebuilt, head(std::path::Path::new(&bundled)).0);
    // 10.84 ms at 95.65 Mbit/s (the link's efficiency 0.9565 of 100).
    assert!((129_000..130_200).contains(&rebuilt), "{rebuilt}");
    assert!(detail.contains("calibrate import own-egress"), "{detail}");

    // No link efficiency to make the wait bytes: refused, naming the field.
    let fresh = dir.join("fresh.json");
    let o = import(&log, &fresh);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("network.link_efficiency.ethernet"), "{e}");

    // A log where another host streams (the shaped link's packet) is not this measurement.
    let other = format!("{root}/data/runs/calibration/testbed_star5_100mbit.packet_wait.json");
    let o = import(&other, &out);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("packet_wait.json") && e.contains("launches[0]"),
        "{e}"
    );
}

/// `import shaper-packet` reads the largest packet TCP handed the shapers out of the committed
/// captures and rebuilds the bundled profiles' value; a capture that lists no packets (made
/// before suite.py listed them) is refused, naming the file and the field.
#[test]
fn import_shaper_packet_rebuilds_the_testbed_profiles_packet() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let cal = format!("{root}/data/runs/calibration");
    let captures = [
        "testbed_star4_200mbit.capture_mpi_ring_ar_256k.json",
        "testbed_two_leaf_mixed.capture_mpi_ring_ar_4m.json",
        "testbed_star5_100mbit.capture_gloo_bc256k.json",
    ]
    .map(|c| format!("{cal}/{c}"));
    let dir = tmp("shaper-packet");
    let out = dir.join("p.json");
    let mut args = vec!["import", "shaper-packet"];
    args.extend(captures.iter().map(String::as_str));
    args.extend(["--out", out.to_str().unwrap()]);
    let o = calibrate(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let packet = |p: &std::path::Path| {
        let prof = sim::profile::Profile::load(p).unwrap();
        let m = &prof.network.shaper_packet[&sim::topology::LinkClass::Ethernet];
        (m.value.0, m.provenance.detail.clone())
    };
    let (bytes, detail) = packet(&out);
    let bundled = format!("{root}/data/profiles/testbed_star4_200mbit.json");
    assert_eq!(bytes, packet(std::path::Path::new(&bundled)).0);
    assert_eq!(bytes, 65_160);
    assert!(detail.contains("43714, 65160, 65160"), "{detail}");

    let without = format!("{cal}/testbed_star4_200mbit.capture_mpi_rd_4m.json");
    let o = calibrate(&[
        "import",
        "shaper-packet",
        &without,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("capture_mpi_rd_4m.json") && e.contains("packets"),
        "{e}"
    );
}
