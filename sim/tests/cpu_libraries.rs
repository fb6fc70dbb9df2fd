//! gloo and OpenMPI on CPU hosts: the testbed's topologies default to gloo, OpenMPI's fixed
//! rules pick what it picks, and a topology that names no known library is a clear error.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(topology: &Path, bytes: &str, extra: &str) -> Result<sim::metrics::Summary, String> {
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"all_reduce\"\nbytes = \"{bytes}\"\n{extra}",
        topology.display().to_string()
    );
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s)
        .map(|r| r.summary)
        .map_err(|e| e.to_string())
}

#[test]
fn the_testbed_runs_gloo_by_default() {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let s = run(&star, "16MiB", "").unwrap();
    assert!(
        s.library.starts_with("gloo ring, 16 segments"),
        "{}",
        s.library
    );
    // The ideal templates stay one line away.
    let s = run(
        &star,
        "16MiB",
        "library = \"ideal\"\nalgorithm = \"ring\"\n",
    )
    .unwrap();
    assert!(s.library.starts_with("ideal"), "{}", s.library);
}

#[test]
fn openmpi_follows_its_fixed_rules_on_four_ranks() {
    // coll_tuned_decision_fixed.c (4.1): 4-7 ranks, commutative: recursive doubling below
    // 8 KiB, Rabenseifner from there.
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let small = run(&star, "4KiB", "library = \"mpi\"\n").unwrap();
    assert!(
        small.library.contains("recursive_doubling (fixed rules)"),
        "{}",
        small.library
    );
    let big = run(&star, "1MiB", "library = \"mpi\"\n").unwrap();
    assert!(
        big.library.contains("rabenseifner (fixed rules)"),
        "{}",
        big.library
    );
    let e = run(&star, "1MiB", "library = \"mpi\"\nalgorithm = \"bruck\"\n").unwrap_err();
    assert!(e.contains("collective.algorithm"), "{e}");
}

#[test]
fn a_topology_naming_an_unknown_library_is_an_error_naming_the_file_and_field() {
    let dir = std::env::temp_dir().join(format!("dtsim-cpu-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("bad.toml");
    std::fs::write(
        &topo,
        "name = \"bad\"\nlibrary = \"glo\"\n[generator]\nkind = \"star\"\nn = 2\n\
         [generator.link]\nbandwidth = \"1Gbps\"\nclass = \"ethernet\"\n",
    )
    .unwrap();
    let e = run(&topo, "1MiB", "").unwrap_err();
    assert!(
        e.contains("bad.toml") && e.contains("library") && e.contains("gloo"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The star's 8 hosts, all-reducing 256 KiB with gloo on the star's profile, with `set`.
fn eight_hosts_256k(set: &[&str]) -> Result<f64, String> {
    let text = format!(
        "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\ngenerator.n = 8\n\
         [collective]\nop = \"all_reduce\"\nbytes = \"256KiB\"\nlibrary = \"gloo\"\n",
        root()
            .join("data/profiles/testbed_star4_200mbit.json")
            .display()
            .to_string(),
        root()
            .join("testbed/topologies/star4_200mbit.toml")
            .display()
            .to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s)
        .map(|r| r.summary.time_ps as f64 * 1e-12)
        .map_err(|e| e.to_string())
}

#[test]
fn hosts_sharing_one_core_wait_for_it_and_two_cores_hold_the_testbeds_gloo_work() {
    // Measured (data/runs/calibration/testbed_star_one_core_vs_two.csv): 27.9 ms on the
    // machine's 2 cores, 41.3 ms with every rank pinned to one.
    let two = eight_hosts_256k(&[]).unwrap();
    let one = eight_hosts_256k(&["network.shared_cores=1"]).unwrap();
    let own_cores = eight_hosts_256k(&["network.shared_cores=1000"]).unwrap();
    // On 2 cores each step's work (8 messages of 16 KiB) fits beside its transfers.
    assert!(
        (two - own_cores).abs() < 1e-3 * own_cores,
        "{two} against {own_cores}"
    );
    // On 1 core it does not: the pool carries most of the measured slowdown, not more.
    assert!(one > 1.5 * two, "{one} against {two}");
    assert!(one < 41.3e-3, "{one}");
}

#[test]
fn shared_cores_need_a_profile_that_says_what_a_message_costs_them() {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let e = run(&star, "1MiB", "[network]\nshared_cores = 1\n").unwrap_err();
    assert!(
        e.contains("network.shared_cores") && e.contains("host_cpu"),
        "{e}"
    );
    let e = eight_hosts_256k(&["network.shared_cores=0.5"]).unwrap_err();
    assert!(
        e.contains("network.shared_cores") && e.contains("from 1"),
        "{e}"
    );
}
