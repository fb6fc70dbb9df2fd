//! The `dtsim` binary on real files: outputs, determinism, and one clear error per bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::dtsim;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("cli", name)
}

/// Writes a scenario and its topology into `dir`; returns the scenario path.
fn write_case(dir: &Path, topology: &str, scenario: &str) -> PathBuf {
    std::fs::write(dir.join("topo.toml"), topology).unwrap();
    let p = dir.join("scenario.toml");
    std::fs::write(&p, scenario).unwrap();
    p
}

const GOOD_TOPOLOGY: &str = r#"
name = "two"
[[device]]
name = "gpu{i}"
count = 2
kind = "gpu"
[[device]]
name = "sw"
kind = "switch"
[[link]]
a = "gpu0"
b = "sw"
bandwidth = "100Gbps"
latency = "1us"
class = "ethernet"
[[link]]
a = "gpu1"
b = "sw"
bandwidth = "100Gbps"
latency = "1us"
class = "ethernet"
"#;

const GOOD_SCENARIO: &str = r#"
name = "case"
[topology]
file = "topo.toml"
[collective]
op = "all_reduce"
bytes = "16MiB"
"#;

#[test]
fn quickstart_runs_and_reports_the_closed_form_time() {
    let o = dtsim(&["run", "scenarios/quickstart.toml", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // 2(n-1)(a + M/(nB)) = 18 × (1 us + 2^30 B / (10 × 10 GB/s)) = 193,291.528 us.
    let t = v["time_us"].as_f64().unwrap();
    assert!((t - 193_291.528).abs() / 193_291.528 < 1e-6, "{t}");
    assert!((v["busbw_gbytes_per_s"].as_f64().unwrap() - 10.0).abs() < 0.01);
}

#[test]
fn the_bundled_openmpi_scenario_plays_the_median_call_between_its_bounds() {
    // Rabenseifner on the testbed star's 4 hosts, 4 MiB: its first step's two pairs run slow
    // 181 times in 320, so the median call is slow from there, the slow bound; forced both
    // ways at once, the fast bound and no bounds said.
    let json = |extra: &[&str]| {
        let mut args = vec!["run", "scenarios/testbed_openmpi_allreduce.toml", "--json"];
        args.extend_from_slice(extra);
        let o = dtsim(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let median = json(&[]);
    let library = median["library"].as_str().unwrap();
    assert!(library.contains("rabenseifner (fixed rules)") && library.contains("median call"));
    let bounds = median["exchange_modes_ps"].as_array().unwrap();
    let (fast, slow) = (bounds[0].as_u64().unwrap(), bounds[1].as_u64().unwrap());
    assert_eq!(median["time_ps"].as_u64().unwrap(), slow);
    assert!(fast < slow, "{fast} {slow}");
    let both = json(&["--set", "collective.exchanges=both_ways"]);
    assert_eq!(both["time_ps"].as_u64().unwrap(), fast);
    assert!(both["exchange_modes_ps"].is_null());
}

#[test]
fn the_same_scenario_and_seed_write_byte_identical_files() {
    let (a, b) = (scratch("det-a"), scratch("det-b"));
    for dir in [&a, &b] {
        let o = dtsim(&[
            "run",
            "scenarios/leaf_spine_oversubscribed.toml",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let names = [
        "summary.json",
        "links.csv",
        "traffic.csv",
        "timeline.csv",
        "rank_timeline.csv",
        "endpoints.csv",
    ];
    for name in names {
        let (x, y) = (
            std::fs::read(a.join(name)).unwrap(),
            std::fs::read(b.join(name)).unwrap(),
        );
        assert!(!x.is_empty(), "{name} is empty");
        assert_eq!(x, y, "{name} differs between two runs");
    }
    // A different seed draws another random placement and gives another result.
    let c = scratch("det-c");
    let o = dtsim(&[
        "run",
        "scenarios/leaf_spine_oversubscribed.toml",
        "--set",
        "seed=8",
        "--out",
        c.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(
        std::fs::read(a.join("endpoints.csv")).unwrap(),
        std::fs::read(c.join("endpoints.csv")).unwrap()
    );
}

#[test]
fn the_rank_timeline_names_each_send_and_receive_peer() {
    // The quickstart's ring all-reduce on 10 ranks: every rank sends to the next and receives
    // from the one before, 18 steps each way.
    let dir = scratch("rank-timeline");
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("rank_timeline.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("endpoint,op,role,peer,phase,start_us,end_us")
    );
    let (mut sends, mut recvs) = (0, 0);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let (rank, peer): (u32, u32) = (f[0].parse().unwrap(), f[3].parse().unwrap());
        match f[2] {
            "send" => {
                assert_eq!(peer, (rank + 1) % 10, "{line}");
                sends += 1;
            }
            "recv" => {
                assert_eq!(peer, (rank + 9) % 10, "{line}");
                recvs += 1;
            }
            other => panic!("role {other} in {line}"),
        }
    }
    assert_eq!((sends, recvs), (10 * 18, 10 * 18));
}

#[test]
fn an_openmpi_run_is_told_how_far_off_dtsim_was_on_the_testbeds_runs_of_its_call() {
    // OpenMPI's ring all-reduce on three hosts of the star, 1 MiB: the testbed recorded it on
    // 3-8 ranks; the run prints the errors and writes them beside its other files.
    let dir = scratch("track-record");
    let o = dtsim(&[
        "run",
        "scenarios/testbed_openmpi_allreduce.toml",
        "--set",
        "collective.algorithm=ring",
        "--set",
        "topology.generator.n=3",
        "--set",
        "collective.bytes=1MiB",
        "--force",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("track record  mpi ring all_reduce: measured runs in"),
        "{out}"
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("track_record.json")).unwrap())
            .unwrap();
    assert_eq!(t["call"], "mpi ring all_reduce");
    assert_eq!(t["all"]["ranks_min"], 3);
    assert!(t["nearest"]["rows"].as_u64().unwrap() >= 10);
    let complete = std::fs::read_to_string(dir.join("complete.json")).unwrap();
    assert!(complete.contains("track_record.json"));
    // --json carries it in the summary.
    let o = dtsim(&[
        "run",
        "scenarios/testbed_openmpi_allreduce.toml",
        "--json",
        "--set",
        "collective.algorithm=ring",
        "--set",
        "topology.generator.n=3",
        "--set",
        "collective.bytes=1MiB",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["track_record"], t);
    // The quickstart's ideal ring is no library's: nothing said, no file.
    let dir = scratch("no-track-record");
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--force",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("track record"));
    assert!(!dir.join("track_record.json").exists());
}

#[test]
fn a_training_step_is_told_how_far_off_dtsim_was_on_measured_steps_like_it() {
    // ResNet-50 in bf16 on H100s, eager and fused: the lent H100's one-GPU eager steps were
    // measured with the same profile, its fused ones were not.
    let dir = scratch("step-track-record");
    let o = dtsim(&[
        "run",
        "scenarios/resnet50_eager_vs_compiled_h100.toml",
        "--force",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("eager, batch 16:\ntrack record  training step resnet50 bf16 eager (profile h100_sxm_node)"),
        "{out}"
    );
    assert!(!out.contains("fused, batch 16:"), "{out}");
    let t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("eager, batch 16/track_record.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(t["all"]["ranks_max"], 1);
    assert!(t["all"]["rows"].as_u64().unwrap() >= 4);
    // Eight GPUs against one-GPU rows: none is near.
    assert!(t["nearest"].is_null());
    assert!(!dir.join("fused, batch 16/track_record.json").exists());
    // --json: each variant's, null where none.
    let o = dtsim(&[
        "run",
        "scenarios/resnet50_eager_vs_compiled_h100.toml",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["track_record"], t);
    assert!(v[1]["track_record"].is_null());
    let complete = std::fs::read_to_string(dir.join("complete.json")).unwrap();
    assert!(complete.contains("track_record.json"));
}

#[test]
fn overrides_change_the_run() {
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--json",
        "--set",
        "collective.bytes=64MiB",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bytes"].as_u64(), Some(64 << 20));
}

#[test]
fn topo_show_prints_bisection_and_dot_exports_graphviz() {
    let o = dtsim(&["topo", "show", "topologies/ring10_10GBps.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("bisection"), "{text}");
    assert!(
        text.contains("160 Gbps"),
        "two cut links of 80 Gbps: {text}"
    );
    let o = dtsim(&["topo", "show", "topologies/dgx1_v100.toml", "--dot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("graph"));
}

/// Runs a broken case and checks for one clear error naming the file, field and expectation.
fn expect_error(name: &str, topology: &str, scenario: &str, must_mention: &[&str]) {
    let dir = scratch(name);
    let path = write_case(&dir, topology, scenario);
    let o = dtsim(&["run", path.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{name}: should fail");
    assert_eq!(o.status.code(), Some(2), "{name}: exit code, stderr: {err}");
    assert!(!err.contains("panicked"), "{name}: panicked: {err}");
    assert!(err.starts_with("error: "), "{name}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line: {err}");
    for m in must_mention {
        assert!(err.contains(m), "{name}: error should mention {m:?}: {err}");
    }
}

#[test]
fn malformed_toml_names_the_line() {
    expect_error(
        "malformed",
        GOOD_TOPOLOGY,
        "name = \"x\"\n[topology\nfile = 1\n",
        &["scenario.toml", "line 2"],
    );
}

#[test]
fn an_unknown_field_is_named() {
    let s = GOOD_SCENARIO.replace("bytes = \"16MiB\"", "bytes = \"16MiB\"\nbytez = 3");
    expect_error("unknown", GOOD_TOPOLOGY, &s, &["scenario.toml", "bytez"]);
}

#[test]
fn a_wrong_unit_says_which_units_are_accepted() {
    let t = GOOD_TOPOLOGY.replacen("100Gbps", "100Gbit", 1);
    expect_error(
        "unit",
        &t,
        GOOD_SCENARIO,
        &["topo.toml", "link[0].bandwidth", "100Gbit", "Gbps"],
    );
    let s = GOOD_SCENARIO.replace("16MiB", "16 parsecs");
    expect_error(
        "unit-size",
        GOOD_TOPOLOGY,
        &s,
        &["scenario.toml", "16 parsecs", "MiB"],
    );
}

#[test]
fn a_link_to_a_missing_device_names_it() {
    let t = GOOD_TOPOLOGY.replacen("b = \"sw\"", "b = \"sw9\"", 1);
    expect_error("missing", &t, GOOD_SCENARIO, &["topo.toml", "sw9"]);
}

#[test]
fn a_disconnected_topology_is_refused() {
    let t = GOOD_TOPOLOGY.replace(
        "[[link]]\na = \"gpu1\"\nb = \"sw\"\nbandwidth = \"100Gbps\"\nlatency = \"1us\"\nclass = \"ethernet\"\n",
        "",
    );
    expect_error(
        "disconnected",
        &t,
        GOOD_SCENARIO,
        &["topo.toml", "connected"],
    );
}

#[test]
fn more_ranks_than_gpus_is_refused() {
    let s = format!("{GOOD_SCENARIO}\n[placement]\nranks = 3\n");
    expect_error(
        "ranks",
        GOOD_TOPOLOGY,
        &s,
        &["scenario.toml", "placement.ranks", "at most 2"],
    );
}

#[test]
fn zero_bandwidth_is_refused() {
    let t = GOOD_TOPOLOGY.replacen("100Gbps", "0Gbps", 1);
    expect_error(
        "zero",
        &t,
        GOOD_SCENARIO,
        &["topo.toml", "bandwidth", "from 1 Kbps to 10 Pbps"],
    );
}

#[test]
fn a_missing_topology_file_and_a_bad_algorithm_are_named() {
    let s = GOOD_SCENARIO.replace("topo.toml", "nope.toml");
    expect_error(
        "nofile",
        GOOD_TOPOLOGY,
        &s,
        &["scenario.toml", "topology.file", "nope.toml"],
    );
    let s = GOOD_SCENARIO.replace(
        "op = \"all_reduce\"",
        "op = \"all_to_all\"\nalgorithm = \"hierarchical\"",
    );
    expect_error("alg", GOOD_TOPOLOGY, &s, &["scenario.toml", "algorithm"]);
    let s = GOOD_SCENARIO.replace(
        "op = \"all_reduce\"",
        "op = \"all_reduce\"\nalgorithm = \"parameter_server\"",
    );
    expect_error(
        "ps",
        GOOD_TOPOLOGY,
        &s,
        &["scenario.toml", "placement.endpoints.ps0"],
    );
}

#[test]
fn group_size_regroups_ranks_for_hierarchical_and_must_divide_them() {
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--json",
        "--set",
        "collective.algorithm=hierarchical",
        "--set",
        "placement.group_size=5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["algorithm"], "hierarchical");
    let flat = dtsim(&["run", "scenarios/quickstart.toml", "--json"]);
    let flat: serde_json::Value = serde_json::from_slice(&flat.stdout).unwrap();
    assert_ne!(
        v["time_ps"], flat["time_ps"],
        "two groups of five is not the flat ring"
    );
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "placement.group_size=3",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("placement.group_size"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_training_step_run_writes_its_link_utilization_over_time() {
    let dir = scratch("workload-series");
    let o = dtsim(&[
        "run",
        "scenarios/resnet50_pcie4_ddp_vs_ps.toml",
        "--set",
        "compare=[]",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("link_series.csv")).unwrap();
    let utilization: Vec<f64> = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(!utilization.is_empty());
    assert!(utilization.iter().all(|&u| (0.0..=1.0 + 1e-9).contains(&u)));
    assert!(
        utilization.iter().any(|&u| u > 0.5),
        "the gradient all-reduces load some link"
    );
}

#[test]
fn printing_into_a_pipe_closed_early_ends_quietly() {
    // `dtsim run ... | head -1`: the reader is gone before the summary is printed.
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .args(["run", "scenarios/quickstart.toml"])
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn nccl_tests_sweeps_a_measured_tables_system_without_a_scenario_of_its_own() {
    // The system comes from the table's columns, as `dtsim validate` replays it.
    let dir = scratch("nccl-tests-measured");
    let table = dir.join("a100.csv");
    std::fs::write(
        &table,
        "system,gpu,num_gpus,num_nodes,intra_node_interconnect,collective,size_bytes,busbw_GBps,nccl_version\n\
         my A100 box,NVIDIA A100-SXM4-80GB,8,1,NVLink3 via NVSwitch,all_reduce,1048576,36.2,2.18.5\n\
         my A100 box,NVIDIA A100-SXM4-80GB,8,1,NVLink3 via NVSwitch,all_reduce,4194304,71.4,2.18.5\n",
    )
    .unwrap();
    let t = table.to_string_lossy().into_owned();
    let o = dtsim(&[
        "nccl-tests",
        "--measured",
        &t,
        "--system",
        "my A100 box",
        "-b",
        "1M",
        "-e",
        "4M",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Three sizes, two of them measured; NCCL's rings on A100 (no NVLS).
    assert!(out.contains("2 sizes measured"), "{out}");
    assert!(out.contains("ring/"), "{out}");
    let o = dtsim(&["nccl-tests", "--measured", &t, "--system", "another box"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("my A100 box"), "{}", stderr(&o));
}

#[test]
fn topo_show_prints_the_rings_nccls_search_finds_on_an_nvlink_mesh() {
    let o = dtsim(&[
        "topo",
        "show",
        "topologies/dgx1_v100.toml",
        "--set",
        "gpu=V100-SXM2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("NCCL rings  6 over NVLink at 20 GB/s"),
        "{out}"
    );
    // On an NVSwitch any order is a ring: nothing to print.
    let o = dtsim(&["topo", "show", "topologies/hgx_h100.toml"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("NCCL rings"));
}

#[test]
fn validate_against_a_baseline_says_what_moved_and_refuses_a_missing_one_before_replaying() {
    let dir = scratch("validate-baseline");
    let before = dir.to_string_lossy().into_owned();
    let dataset = "data/runs/testbed_mpi_reduce_heldout.csv";
    // The first run into its own baseline folder becomes the baseline.
    let o = dtsim(&["validate", dataset, "--out", &before, "--baseline", &before]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("this run becomes it"), "{}", stderr(&o));
    // The same model again: nothing moves.
    let o = dtsim(&["validate", dataset, "--baseline", &before]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("rows in both: 18; |error| smaller by more than 0.5 points in 0, larger in 0"),
        "{out}"
    );
    // Each call timed alone instead of in its loop: the 256 KiB rows lose the loop's warm-up.
    let o = dtsim(&[
        "validate",
        dataset,
        "--baseline",
        &before,
        "--set",
        "collective.timing=alone",
        "--max-median-error",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("groups within median |error| <= 3%: 6 of 6 before"),
        "{out}"
    );
    assert!(out.contains("rows that moved most"), "{out}");
    assert!(!out.contains("larger in 0;"), "{out}");
    // A baseline that is not there fails at once, naming the file it looked for.
    let missing = dir.join("nothing here").to_string_lossy().into_owned();
    let o = dtsim(&["validate", dataset, "--baseline", &missing]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("nothing here/errors.csv: a readable CSV file"),
        "{}",
        stderr(&o)
    );
}
