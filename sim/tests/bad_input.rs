//! Inputs that once panicked, hung or misled (issue 16's reproducers), each now a clear error
//! naming the file and field, or a correct result; and run folders that cannot mislead.

mod common;

use std::path::PathBuf;

use common::{dtsim, repo};

/// Runs `dtsim args`, expects exit code 2 (a clear error, not a panic's 101) and returns stderr.
fn error_of(args: &[&str]) -> String {
    let o = dtsim(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("bad", name)
}

#[test]
fn a_step_past_the_horizon_of_simulated_time_names_the_batch() {
    let e = error_of(&[
        "run",
        "scenarios/gpt_1_3b_v100_parallelism.toml",
        "--set",
        "workload.batch_per_gpu=4294967296",
    ]);
    assert!(e.contains("exceeds 213 days at 1 ps resolution"), "{e}");
    assert!(e.contains("workload.batch_per_gpu (4294967296)"), "{e}");
}

#[test]
fn sizes_beyond_a_petabyte_are_refused_with_the_maximum() {
    for bytes in [
        "18446744073709551615",
        "9223372036854775807",
        "\"4294967296GiB\"",
    ] {
        let set = format!("collective.bytes={bytes}");
        let e = error_of(&["run", "scenarios/quickstart.toml", "--set", &set]);
        assert!(e.contains("collective.bytes"), "{e}");
        assert!(e.contains("at most 1 PiB"), "{e}");
    }
}

#[test]
fn a_collective_that_takes_longer_than_the_horizon_is_an_error_not_a_hang() {
    // 1 TiB over 1 kbit/s links: 2.5 x 10^8 years, far past the 213 days u64 picoseconds hold.
    let dir = scratch("slow-link");
    let topo = std::fs::read_to_string(repo().join("topologies/ring10_10GBps.toml"))
        .unwrap()
        .replace("bandwidth = \"10GB/s\"", "bandwidth = \"1Kbps\"");
    std::fs::write(dir.join("ring.toml"), topo).unwrap();
    let scenario = std::fs::read_to_string(repo().join("scenarios/quickstart.toml"))
        .unwrap()
        .replace("../topologies/ring10_10GBps.toml", "ring.toml")
        .replace(
            "../data/profiles/",
            &format!("{}/data/profiles/", repo().display()),
        );
    let path = dir.join("q.toml");
    std::fs::write(&path, scenario).unwrap();
    let e = error_of(&[
        "run",
        path.to_str().unwrap(),
        "--set",
        "collective.bytes=1TiB",
    ]);
    assert!(e.contains("exceeds 213 days"), "{e}");
    assert!(e.contains("collective.bytes"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_one_bit_per_second_link_is_out_of_range() {
    let dir = scratch("1bps");
    for bw in ["1bps", "1e-300Gbps"] {
        let topo = std::fs::read_to_string(repo().join("topologies/ring10_10GBps.toml"))
            .unwrap()
            .replace("bandwidth = \"10GB/s\"", &format!("bandwidth = \"{bw}\""));
        let p = dir.join("ring.toml");
        std::fs::write(&p, topo).unwrap();
        let e = error_of(&["topo", "show", p.to_str().unwrap()]);
        assert!(e.contains("bandwidth"), "{e}");
        assert!(e.contains("from 1 Kbps to 10 Pbps"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn billions_of_slices_are_refused_before_any_schedule_is_built() {
    let e = error_of(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "collective.slices=4000000000",
    ]);
    assert!(e.contains("collective.slices"), "{e}");
    assert!(e.contains("from 1 to 4096"), "{e}");
}

#[test]
fn a_ring_only_field_names_the_algorithm_that_does_not_use_it() {
    let e = error_of(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "collective.algorithm=\"halving_doubling\"",
        "--set",
        "collective.rings=2",
    ]);
    assert!(e.contains("halving_doubling"), "{e}");
    assert!(!e.contains("\"this\""), "{e}");
}

#[test]
fn a_run_refuses_a_used_folder_and_force_replaces_it_whole() {
    let dir = scratch("used-out").join("out");
    let out = dir.to_str().unwrap();
    let first = dtsim(&["run", "scenarios/quickstart.toml", "--out", out]);
    assert!(first.status.success());
    assert!(dir.join("complete.json").is_file());
    // A stray file of another run (a packet run's ports.csv) must not survive --force.
    std::fs::write(dir.join("ports.csv"), "stale").unwrap();
    let e = error_of(&["run", "scenarios/quickstart.toml", "--out", out]);
    assert!(
        e.contains("already holds files") && e.contains("--force"),
        "{e}"
    );
    let forced = dtsim(&["run", "scenarios/quickstart.toml", "--out", out, "--force"]);
    assert!(forced.status.success());
    assert!(!dir.join("ports.csv").exists());
    let marker: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("complete.json")).unwrap()).unwrap();
    let files: Vec<&str> = marker["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(files.contains(&"summary.json") && files.contains(&"trace.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_event_budget_refuses_a_run_estimated_above_it_saying_what_to_change() {
    let e = error_of(&["run", "scenarios/quickstart.toml", "--max-events", "5"]);
    assert!(e.contains("refused before simulating"), "{e}");
    assert!(e.contains("event budget (5, --max-events)"), "{e}");
    // The flow model already plays it: the advice is about the run, not the model.
    assert!(
        e.contains("fewer ranks") && e.contains("fewer steps") && !e.contains("flow model"),
        "{e}"
    );
    let e = error_of(&[
        "run",
        "scenarios/quickstart.toml",
        "--max-events",
        "5",
        "--set",
        "network.model=\"packet\"",
    ]);
    assert!(
        e.contains("the flow model instead of the packet model") && e.contains("MTU"),
        "{e}"
    );
}

#[test]
fn a_dry_run_estimates_within_twice_the_events_the_run_then_has() {
    for scenario in [
        "scenarios/quickstart.toml",
        "scenarios/rail_cluster_hierarchical.toml",
        "scenarios/ps_incast_lossless.toml",
        "scenarios/gpt_1_3b_v100_parallelism.toml",
    ] {
        let dry = dtsim(&["run", scenario, "--dry-run", "--json"]);
        assert!(
            dry.status.success(),
            "{}",
            String::from_utf8_lossy(&dry.stderr)
        );
        let est: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
        let run = dtsim(&["run", scenario, "--json"]);
        let real: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        // A study lists its variants; the dry run estimates each, in the same order.
        let pairs: Vec<(u64, u64)> = match real.as_array() {
            Some(rows) => rows
                .iter()
                .zip(est.as_array().unwrap())
                .map(|(r, e)| {
                    (
                        e["estimate"]["events"].as_u64().unwrap(),
                        r["summary"]["events"].as_u64().unwrap(),
                    )
                })
                .collect(),
            None => vec![(
                est[0]["estimate"]["events"].as_u64().unwrap(),
                real["events"].as_u64().unwrap(),
            )],
        };
        assert!(!pairs.is_empty());
        for (estimated, measured) in pairs {
            let ratio = estimated as f64 / measured as f64;
            assert!(
                (0.5..=2.0).contains(&ratio),
                "{scenario}: estimated {estimated} events, ran {measured}"
            );
        }
    }
}

#[test]
fn a_bad_generator_override_is_blamed_on_the_scenario_key_that_set_it() {
    let e = error_of(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "topology.generator.n=\"x\"",
    ]);
    assert!(
        e.contains("scenarios/quickstart.toml: topology.generator.n:"),
        "{e}"
    );
    assert!(e.contains("overriding"), "{e}");
}

#[test]
fn an_error_after_set_names_the_field_not_a_line_of_text_nobody_wrote() {
    let e = error_of(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "collective.algorithm=3",
    ]);
    assert!(e.contains("(after --set): collective.algorithm:"), "{e}");
    assert!(!e.contains("line "), "{e}");
}

#[test]
fn a_collective_that_sends_nothing_prints_no_bandwidth() {
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "topology.generator.n=2",
        "--set",
        "collective.bytes=0",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("n/a"), "{text}");
    assert!(!text.contains("0.00 GB/s"), "{text}");
}
