//! A profile round-trips: parameters → simulated nccl-tests log → `calibrate import
//! nccl-tests --topology` → a fitted profile that reproduces the same table within 1%.

use std::path::{Path, PathBuf};
use std::process::Command;

use calibrate::import::nccl_tests::{self, NcclTestsRun, RankDevice, Row, Timing};
use sim::profile::{FittedParameter, NcclCalibration, Profile, Provenance};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory for one test (emptied first: a process id can come back).
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("calibrate-rt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `calibrate import nccl-tests LOG --topology topologies/<topology> --out OUT`, through the
/// binary.
fn import_on(topology: &str, log: &Path, out: &Path) -> std::process::Output {
    import_on_with(topology, log, out, &[])
}

/// [`import_on`] with more options.
fn import_on_with(topology: &str, log: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_calibrate"))
        .args(["import", "nccl-tests"])
        .arg(log)
        .arg("--topology")
        .arg(root().join("topologies").join(topology))
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn import_on_hgx(log: &Path, out: &Path) -> std::process::Output {
    import_on("hgx_h100.toml", log, out)
}

/// Simulated seconds of an all-reduce of `bytes` over every GPU of `topologies/<topology>`
/// under `profile`.
fn simulate_on(topology: &str, profile: &Path, bytes: u64) -> f64 {
    simulate_on_with(topology, profile, bytes, "")
}

/// [`simulate_on`] with `extra` `[collective]` lines.
fn simulate_on_with(topology: &str, profile: &Path, bytes: u64, extra: &str) -> f64 {
    let q = |p: &Path| format!("{:?}", p.display().to_string());
    let text = format!(
        "name = \"rt\"\nprofile = {}\n[topology]\nfile = {}\n[collective]\nop = \"all_reduce\"\n\
         bytes = \"{bytes}B\"\nlibrary = \"nccl\"\nlibrary_version = \"2.20\"\n{extra}",
        q(profile),
        q(&root().join("topologies").join(topology))
    );
    let s = sim::scenario::parse(&text, Path::new("rt.toml"), &[]).unwrap();
    sim::scenario::run::run(&s).unwrap().summary.time_ps as f64 * 1e-12
}

/// The nccl-tests all-reduce log `profile` predicts on `topologies/<topology>` (`gpus` GPUs
/// named `gpu_name`) at `sizes`.
fn predicted_log_at(
    topology: &str,
    profile: &Path,
    gpus: u32,
    gpu_name: &str,
    sizes: &[u64],
) -> NcclTestsRun {
    predicted_log_with(topology, profile, (gpus, gpu_name), sizes, "")
}

/// [`predicted_log_at`] with `extra` `[collective]` lines in every simulated row.
fn predicted_log_with(
    topology: &str,
    profile: &Path,
    (gpus, gpu_name): (u32, &str),
    sizes: &[u64],
    extra: &str,
) -> NcclTestsRun {
    let mut run = NcclTestsRun {
        collective: Some("all_reduce".into()),
        nccl_version: Some("2.20.5".into()),
        gpus_per_process: Some(gpus),
        ..NcclTestsRun::default()
    };
    run.devices = (0..gpus)
        .map(|r| RankDevice {
            rank: r,
            host: "box".into(),
            device: r,
            name: gpu_name.into(),
        })
        .collect();
    for &b in sizes {
        let us = simulate_on_with(topology, profile, b, extra) * 1e6;
        let algbw = b as f64 / us / 1e3;
        let t = Timing {
            time_us: us,
            algbw_gbps: algbw,
            busbw_gbps: algbw * nccl_tests::busbw_factor("all_reduce", gpus),
            wrong: Some(0.0),
        };
        run.rows.push(Row {
            size_bytes: b,
            count: b / 4,
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            out_of_place: Some(t),
            in_place: Some(t),
        });
    }
    run
}

/// A known parameter of a round trip's truth.
fn assumed(value: f64) -> FittedParameter {
    FittedParameter {
        value,
        ci95: None,
        provenance: Provenance {
            source: "assumed".into(),
            detail: "round-trip test truth".into(),
            date: None,
        },
    }
}

/// What a round trip gave back: the log it fitted, the fitted profile and the command's output.
struct RoundTrip {
    run: NcclTestsRun,
    fitted: NcclCalibration,
    out: String,
}

/// `base` (a bundled profile) with `truth` as its NCCL parameters -> the nccl-tests log it
/// predicts on `topologies/<topology>` -> `calibrate import nccl-tests --topology` -> a
/// fitted profile, which must predict every row of that log within 1%.
fn round_trip(
    name: &str,
    topology: &str,
    base: &str,
    truth: NcclCalibration,
    gpus: u32,
    gpu_name: &str,
) -> RoundTrip {
    let sizes: Vec<u64> = (0..11).map(|i| 1024u64 << (2 * i)).collect();
    round_trip_with(name, topology, base, truth, (gpus, gpu_name), &sizes, &[])
}

/// [`round_trip`] with the log at `sizes` and `extra` options to the import.
fn round_trip_with(
    name: &str,
    topology: &str,
    base: &str,
    truth: NcclCalibration,
    (gpus, gpu_name): (u32, &str),
    sizes: &[u64],
    extra: &[&str],
) -> RoundTrip {
    let dir = tmp(name);
    let mut prof = Profile::load(&root().join("data/profiles").join(base)).unwrap();
    prof.network.nccl = Some(truth);
    let truth_path = dir.join("truth.json");
    std::fs::write(&truth_path, serde_json::to_string_pretty(&prof).unwrap()).unwrap();

    let run = predicted_log_at(topology, &truth_path, gpus, gpu_name, sizes);
    let log = dir.join("all_reduce.log");
    std::fs::write(&log, nccl_tests::to_text(&run)).unwrap();

    let fitted_path = dir.join("fitted.json");
    let o = import_on_with(topology, &log, &fitted_path, extra);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for r in &run.rows {
        let logged = r.out_of_place.unwrap().time_us;
        let again = simulate_on(topology, &fitted_path, r.size_bytes) * 1e6;
        assert!(
            (again / logged - 1.0).abs() < 0.01,
            "{} B: log {logged:.2} us, fitted profile {again:.2} us\n{out}",
            r.size_bytes
        );
    }
    let fitted = Profile::load(&fitted_path).unwrap().network.nccl.unwrap();
    RoundTrip { run, fitted, out }
}

fn truth() -> NcclCalibration {
    let p = assumed;
    let mut c = NcclCalibration::default();
    for (k, v) in [
        ("ring/ll", 9.0),
        ("ring/ll128", 14.0),
        ("ring/simple", 11.0),
        ("nvls/simple", 31.0),
    ] {
        c.base_latency_us.insert(k.into(), p(v));
    }
    for k in ["ring/ll/nvlink", "ring/ll128/nvlink", "ring/simple/nvlink"] {
        c.step_latency_us.insert(k.into(), p(1.3));
    }
    c.efficiency.insert("ring/nvlink".into(), p(0.74));
    // NVLS: one channel's rate and a per-chunk latency (its link efficiency is not fitted).
    c.channel_gbps.insert("nvls/simple".into(), p(17.0));
    c.step_latency_us
        .insert("nvls/simple/nvlink".into(), p(0.3));
    c
}

#[test]
fn a_profile_round_trips_through_an_nccl_tests_log_within_one_percent() {
    let rt = round_trip(
        "round-trip",
        "hgx_h100.toml",
        "h100_sxm_node.json",
        truth(),
        8,
        "NVIDIA H100 80GB HBM3",
    );
    assert_eq!(rt.fitted.fitted_on[0].file, "all_reduce.log");
    assert_eq!(rt.fitted.fitted_on[0].rows.len(), rt.run.rows.len());
    assert!(
        rt.fitted.channel_gbps["nvls/simple"]
            .provenance
            .detail
            .contains("--topology hgx_h100.toml"),
        "{}",
        rt.out
    );
}

#[test]
fn a_pcie_box_without_p2p_round_trips_with_its_efficiency_shared_on_the_switch_uplink() {
    // Two GPUs behind one PCIe switch, staged through host memory: both ring directions share
    // the uplink, so the efficiency fitted back must be the one that made the log, not half
    // or twice it (the key means payload share of the link, in calibrate as in the simulator).
    let p = assumed;
    let mut truth = NcclCalibration::default();
    // One rank count fits call and step latency as one factor on NCCL's own pair (6.6 and 1.0
    // us for LL, 8.4 and 5.7 us for Simple on PCIe), so the truth keeps NCCL's ratio.
    for (proto, base, step) in [("ll", 6.6, 1.0), ("simple", 8.4, 5.7)] {
        truth
            .base_latency_us
            .insert(format!("ring/{proto}"), p(0.6 * base));
        truth
            .step_latency_us
            .insert(format!("ring/{proto}/pcie"), p(0.6 * step));
    }
    truth.efficiency.insert("ring/pcie".into(), p(0.55));
    let rt = round_trip(
        "pcie-round-trip",
        "pcie_box_2gpu.toml",
        "rtx2080ti_pcie_box.json",
        truth,
        2,
        "NVIDIA GeForce RTX 2080 Ti",
    );
    let efficiency = rt.fitted.efficiency["ring/pcie"].value;
    assert!(
        (efficiency / 0.55 - 1.0).abs() < 0.01,
        "{efficiency}\n{}",
        rt.out
    );
}

#[test]
fn an_nccl_fit_needs_a_collective_nccl_runs_and_names_the_log() {
    let dir = tmp("bad-collective");
    let log = dir.join("alltoall.log");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl_tests_multinode.txt"),
    )
    .unwrap()
    .replace("all_gather_perf", "alltoall_perf");
    std::fs::write(&log, text).unwrap();
    let o = import_on_hgx(&log, &dir.join("p.json"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("alltoall.log") && e.contains("collective"),
        "{e}"
    );
}

#[test]
fn channel_rates_per_ring_protocol_round_trip_when_asked() {
    // An A100 node whose LL128 and Simple channels copy at different rates (what one NVLink
    // efficiency cannot say): the log they predict, imported with --ring-channel-rates, gives
    // back a profile that predicts every row within 1%, with a channel rate per protocol and
    // no ring efficiency.
    let p = assumed;
    let mut truth = NcclCalibration::default();
    for (k, v) in [
        ("ring/ll", 12.0),
        ("ring/ll128", 24.0),
        ("ring/simple", 30.0),
    ] {
        truth.base_latency_us.insert(k.into(), p(v));
    }
    for (k, v) in [
        ("ring/ll/nvlink", 1.1),
        ("ring/ll128/nvlink", 3.3),
        ("ring/simple/nvlink", 12.5),
    ] {
        truth.step_latency_us.insert(k.into(), p(v));
    }
    truth.channel_gbps.insert("ring/ll".into(), p(4.0));
    truth.channel_gbps.insert("ring/ll128".into(), p(8.0));
    truth.channel_gbps.insert("ring/simple".into(), p(11.0));
    // Every factor of two from 1 KiB to 1 GiB: LL128 runs at a few sizes only, and its
    // call latency, step latency and channel rate need more rows than three.
    let sizes: Vec<u64> = (0..21).map(|i| 1024u64 << i).collect();
    let rt = round_trip_with(
        "channel-rates",
        "dgx_a100.toml",
        "a100_sxm_node.json",
        truth,
        (8, "NVIDIA A100-SXM4-80GB"),
        &sizes,
        &["--ring-channel-rates"],
    );
    assert!(
        rt.fitted.channel_gbps.contains_key("ring/simple"),
        "{}",
        rt.out
    );
    assert!(
        !rt.fitted.efficiency.contains_key("ring/nvlink"),
        "{}",
        rt.out
    );
    assert!(
        rt.fitted.channel_gbps["ring/simple"]
            .provenance
            .detail
            .contains("channel rates fitted per protocol"),
        "{}",
        rt.out
    );
}

#[test]
fn a_collnet_system_round_trips_when_the_import_is_told_collnet_was_on() {
    // 2 HGX H100 nodes whose NDR switches reduce (SHARP), runs with NCCL_COLLNET_ENABLE=1:
    // NCCL runs NVLS across nodes (the NVSwitch inside, SHARP between) from a few hundred KiB.
    // `--collnet` replays the log that way, and the fitted profile gives the log back.
    let dir = tmp("collnet");
    let text = std::fs::read_to_string(root().join("topologies/h100_rail_cluster.toml"))
        .unwrap()
        .replacen("\nnodes = 32\n", "\nnodes = 2\n", 1)
        .replacen(
            "\n[generator]",
            "\nin_network_reduction = true\n[generator]",
            1,
        );
    assert!(text.contains("nodes = 2") && text.contains("in_network_reduction"));
    let topology = dir.join("sharp2.toml");
    std::fs::write(&topology, text).unwrap();
    let topo = topology.display().to_string();
    let profile = root().join("data/profiles/h100_sxm_node.json");
    let sizes = [1u64 << 20, 4 << 20, 16 << 20, 64 << 20];
    let run = predicted_log_with(
        &topo,
        &profile,
        (16, "NVIDIA H100 80GB HBM3"),
        &sizes,
        "collnet = true\n",
    );
    let log = dir.join("all_reduce.log");
    std::fs::write(&log, nccl_tests::to_text(&run)).unwrap();
    let fitted = dir.join("fitted.json");
    let o = import_on_with(&topo, &log, &fitted, &["--collnet"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("nvls/simple/ib"), "{out}");
    for r in &run.rows {
        let logged = r.out_of_place.unwrap().time_us;
        let again = simulate_on_with(&topo, &fitted, r.size_bytes, "collnet = true\n") * 1e6;
        assert!(
            (again / logged - 1.0).abs() < 0.01,
            "{} B: log {logged:.2} us, fitted profile {again:.2} us\n{out}",
            r.size_bytes
        );
    }
}
