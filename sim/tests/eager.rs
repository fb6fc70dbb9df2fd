//! Eager training steps end to end: `execution = "eager"` plays the host issuing each layer
//! beside the GPU, with the host costs the bundled H100 profile measured
//! (`compute.eager_host`, from `torch_bench.py --host-costs`).

use std::path::{Path, PathBuf};

use sim::profile::Profile;
use sim::scenario::{self, workload::run_workload};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The step's seconds (or the error) of a scenario on the bundled H100 profile: `ranks` ranks
/// of `topologies/{topology}.toml`, and `workload` as the `[workload]` table's lines.
fn h100_step(topology: &str, ranks: u32, workload: &str) -> Result<f64, String> {
    let text = format!(
        "name = \"eager\"\nprofile = \"{}\"\n[topology]\nfile = \"{}\"\n[placement]\n\
         ranks = {ranks}\n[workload]\n{workload}",
        repo().join("data/profiles/h100_sxm_node.json").display(),
        repo().join(format!("topologies/{topology}.toml")).display(),
    );
    let s =
        scenario::parse(&text, &repo().join("scenarios/x.toml"), &[]).map_err(|e| e.to_string())?;
    run_workload(&s, Default::default())
        .map(|r| r.summary.metrics.step_secs)
        .map_err(|e| e.to_string())
}

/// A one-GPU step of `model` at `batch` in `dtype`, run as `execution` says.
fn one_gpu_step_in(dtype: &str, model: &str, batch: u64, execution: &str) -> Result<f64, String> {
    h100_step(
        "pcie_box_2gpu",
        1,
        &format!(
            "model = \"{model}\"\nbatch_per_gpu = {batch}\ndtype = \"{dtype}\"\n\
             execution = \"{execution}\"\n"
        ),
    )
}

/// [`one_gpu_step_in`] bf16.
fn one_gpu_step(model: &str, batch: u64, execution: &str) -> Result<f64, String> {
    one_gpu_step_in("bf16", model, batch, execution)
}

/// The bundled profile's host cost of a whole step of `model`: every layer's three phases and
/// the step's own, summed.
fn host_secs(model: &str) -> f64 {
    let p = Profile::load(&repo().join("data/profiles/h100_sxm_node.json")).unwrap();
    let c = &p.compute.unwrap().eager_host["bf16"];
    let sum = |h: &sim::profile::HostPhases| {
        h.forward.0.as_secs_f64() + h.backward.0.as_secs_f64() + h.optimizer.0.as_secs_f64()
    };
    let m = sim::workload::catalog::by_name(model).unwrap();
    let transformer = m
        .layers
        .iter()
        .any(|l| l.kind == sim::workload::catalog::LayerKind::AttentionBlock);
    m.layers
        .iter()
        .map(|l| sum(&c.layers[sim::workload::eager::HostCosts::kind_of(l, transformer)]))
        .sum::<f64>()
        + sum(&c.step)
}

#[test]
fn a_small_eager_step_takes_the_hosts_time_and_a_fused_one_the_gpus() {
    // ResNet-50 at batch 1: ~160 layers the host needs ~14 ms to issue, several times what the
    // GPU needs to run them.
    let eager = one_gpu_step("resnet50", 1, "eager").unwrap();
    let fused = one_gpu_step("resnet50", 1, "fused").unwrap();
    let host = host_secs("resnet50");
    assert!(host > 3.0 * fused, "host {host} s, fused {fused} s");
    assert!(
        (eager / host - 1.0).abs() < 0.02,
        "eager {eager} s, host {host} s"
    );
}

#[test]
fn a_large_eager_step_is_never_shorter_than_the_gpus_fused_time_nor_the_hosts() {
    // (That it is never longer than both sides' sum is `eager::play`'s own test: here the
    // GPU's side is longer than the fused step's, its BatchNorms and pools at their measured
    // eager rates.)
    for (model, batch) in [("resnet50", 256), ("gpt2", 16), ("alexnet", 1024)] {
        let eager = one_gpu_step(model, batch, "eager").unwrap();
        let fused = one_gpu_step(model, batch, "fused").unwrap();
        let host = host_secs(model);
        assert!(
            eager >= fused.max(host) * (1.0 - 1e-9),
            "{model}: {eager} {fused} {host}"
        );
    }
    // ResNet-50's 53 BatchNorms alone: at batch 256 their measured rate costs the GPU more
    // than the copy rate the fused step plays them at.
    let eager = one_gpu_step("resnet50", 256, "eager").unwrap();
    let fused = one_gpu_step("resnet50", 256, "fused").unwrap();
    assert!(eager > 1.2 * fused, "{eager} vs {fused}");
}

#[test]
fn eager_without_the_hosts_costs_is_an_error_naming_the_field() {
    // The bundled profile measured the host in bf16 and tf32, not fp16.
    let e = one_gpu_step_in("fp16", "resnet50", 8, "eager").unwrap_err();
    assert!(e.contains("workload.execution"), "{e}");
    assert!(e.contains("compute.eager_host.fp16"), "{e}");
    assert!(e.contains("bf16, tf32"), "{e}");
}

#[test]
fn eager_with_tensor_parallelism_is_an_error_naming_the_field() {
    let e = h100_step(
        "hgx_h100",
        8,
        "model = \"gpt2\"\nbatch_per_gpu = 8\ndtype = \"bf16\"\nexecution = \"eager\"\n\
         tensor_parallel = 8\nparallelism = \"allreduce_after_backward\"\n",
    )
    .unwrap_err();
    assert!(e.contains("workload.execution"), "{e}");
    assert!(e.contains("data parallelism alone"), "{e}");
}

#[test]
fn an_unknown_execution_is_an_error_naming_the_field() {
    let e = one_gpu_step("resnet50", 8, "graph").unwrap_err();
    // The scenario's line of `execution = "graph"`, and what it may be.
    assert!(e.contains("x.toml: line 11"), "{e}");
    assert!(e.contains("fused") && e.contains("eager"), "{e}");
}

#[test]
fn the_bundled_study_shows_eager_costing_most_where_the_host_sets_the_pace() {
    let rows = sim::scenario::workload::run_study(
        &repo().join("scenarios/resnet50_eager_vs_compiled_h100.toml"),
        &[],
        Default::default(),
    )
    .unwrap();
    let step = |label: &str| {
        rows.iter()
            .find(|r| r.label == label)
            .unwrap()
            .report
            .summary
            .metrics
            .step_secs
    };
    let small = step("eager, batch 16") / step("fused, batch 16");
    let large = step("eager, batch 128") / step("fused, batch 128");
    // Both slower eager; the small batch, whose ~900 launches the host needs longer to issue
    // than the GPU needs to run, far more so.
    assert!(large > 1.0, "{large}");
    assert!(small > 2.0 && small > large + 0.5, "{small} vs {large}");
}

#[test]
fn a_layer_kind_whose_host_cost_was_not_measured_is_an_error_naming_it() {
    // Mixtral's expert blocks were never timed on the host: eager cannot play them.
    let e = one_gpu_step("mixtral_8x7b", 1, "eager").unwrap_err();
    assert!(
        e.contains("compute.eager_host.bf16.layers.moe_block"),
        "{e}"
    );
    assert!(e.contains("mixtral_8x7b"), "{e}");
}
