//! Checks of the step builders against each other, played on a real scenario's network.
#![cfg(test)]

use super::*;
use crate::net::flow::FlowModel;
use crate::workload::step::Builder;

/// The step time of `scenario` (from the repository root, with `set`) laid out by
/// `builder`, on the ideal templates.
fn step_secs(scenario: &str, set: &[&str], builder: Builder) -> f64 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = crate::scenario::load(&root.join(scenario), &set).unwrap();
    let w = s.file.workload.as_ref().unwrap();
    let prep = prepare(&s).unwrap();
    let n = prep.ranks.len() as u32;
    let model = w.model(&s.path).unwrap();
    let cfg = w.step_config(n, Library::Ideal).unwrap();
    let cm = ComputeModel::from_profile(&prep.profile, cfg.dtype).unwrap();
    let mut net = network_model(&s, &prep).unwrap();
    let dag = {
        let fabric = NetFabric::new(net.as_mut(), &prep);
        step::build_with(&model, &cm, &cfg, n, &fabric, &Templates, builder).unwrap()
    };
    let played = play_step(
        &s,
        &prep,
        &dag,
        net.as_mut(),
        Watch::default(),
        String::new(),
    );
    step_metrics(&dag, &played.unwrap().outcome, None).step_secs
}

#[test]
fn megatrons_builder_at_tp_1_pp_1_plays_the_data_parallel_step_without_overlap() {
    // GPT 1.3B on 4 V100s, every gradient in one bucket, all-reduced after the backward:
    // the two builders lay the same step out in different ops (one per layer vs one per
    // pass) and must time it the same.
    let set = [
        "workload.tensor_parallel=1",
        "workload.pipeline_parallel=1",
        "workload.microbatches=1",
        "workload.batch_per_gpu=2",
        "workload.parallelism=\"allreduce_after_backward\"",
        "workload.bucket=\"64GiB\"",
        "workload.allreduce.library=\"ideal\"",
    ];
    let f = "scenarios/gpt_1_3b_v100_parallelism.toml";
    let (ddp, megatron) = (
        step_secs(f, &set, Builder::ByMesh),
        step_secs(f, &set, Builder::Megatron),
    );
    assert!(
        (megatron / ddp - 1.0).abs() < 1e-9,
        "Megatron {megatron} s vs DDP {ddp} s"
    );
}

/// The bench's GPT-1.3B step (TP 8 x PP 4) on `gpus` H100s with `set`, played on the flow
/// model, keeping the rates of parts no change reached or solving them all: the report's
/// summary, timeline and link series as text, and how many parts kept their rates.
fn gpt_step_on_flow_model(gpus: u32, set: &[&str], keep_parts: bool) -> (String, u64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let s = crate::bench::GPT_1_3B_STEP
        .scenario_with(&root, gpus, set)
        .unwrap();
    let w = s.file.workload.as_ref().unwrap();
    let prep = prepare(&s).unwrap();
    let mut net = FlowModel::new(
        prep.topology.clone(),
        prep.profile.efficiency_factors(),
        s.file.seed,
    );
    if !keep_parts {
        net = net.without_kept_parts();
    }
    let report = run_model_step(&s, w, &prep, &mut net, Watch::default()).unwrap();
    let text = format!(
        "{}\n{}\n{:?}",
        serde_json::to_string(&report.summary).unwrap(),
        report.trace.to_json(),
        report.link_series
    );
    (text, net.parts_kept())
}

#[test]
fn keeping_the_rates_of_parts_no_change_reached_times_a_step_exactly_as_solving_every_part() {
    // 256 GPUs at TP 8 (DP 32), the all-reduces on NCCL's tree with LL128: its levels
    // pipeline, so each data-parallel group's tree is one component of many parts, re-solved
    // whenever one level's step starts or ends.
    let set = [
        "workload.pipeline_parallel=1",
        "workload.allreduce.algorithm=\"tree\"",
        "workload.allreduce.protocol=\"ll128\"",
    ];
    let (kept, parts_kept) = gpt_step_on_flow_model(256, &set, true);
    let (solved, none_kept) = gpt_step_on_flow_model(256, &set, false);
    assert!(parts_kept > 1000, "{parts_kept} parts kept their rates");
    assert_eq!(none_kept, 0);
    assert!(kept == solved, "the reports differ");
}
