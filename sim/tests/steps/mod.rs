//! What the training-step tests share: the repository root, a bundled scenario's step, and
//! GPT 1.3B on H100 nodes. Each test file uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sim::scenario::{self, workload::run_workload};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn step(scenario_file: &str, set: &[&str]) -> sim::metrics::workload::WorkloadReport {
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = scenario::load(&repo().join(scenario_file), &set).unwrap();
    run_workload(&s, Default::default()).unwrap()
}

pub fn gpt_on_h100_nodes(set: &[&str]) -> Result<sim::metrics::workload::WorkloadReport, String> {
    let text = format!(
        "name = \"gpt-h100\"\nprofile = {:?}\n[topology]\nfile = {:?}\n\
         [topology.generator]\nnodes = 2\n[workload]\nmodel = \"gpt_1_3b\"\ndtype = \"fp16\"\n\
         batch_per_gpu = 2\ntensor_parallel = 8\n",
        repo()
            .join("data/profiles/v100_dgx1_public.json")
            .display()
            .to_string(),
        repo()
            .join("topologies/h100_rail_cluster.toml")
            .display()
            .to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s =
        sim::scenario::parse(&text, Path::new("gpt-h100.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::workload::run_workload(&s, Default::default()).map_err(|e| e.to_string())
}
