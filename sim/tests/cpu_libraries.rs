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
