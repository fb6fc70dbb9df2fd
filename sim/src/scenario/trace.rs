//! `[workload] trace = "dir"`: a step recorded on a real run (PyTorch ET + Kineto, Chakra ET),
//! replayed on the scenario's topology and reported like a catalog workload.
//!
//! ```toml
//! [workload]
//! trace = "../data/traces/testbed_ddp_cnn"   # per-rank files, relative to this scenario
//! trace_format = "pytorch"                   # pytorch | chakra (default: from the files)
//! batch_per_gpu = 64                         # optional: for samples/s
//! [workload.allreduce]                       # who runs the trace's collectives, as for models
//! library = "ideal"
//! ```
//!
//! Trace rank r runs on the scenario's rank r (placement as for any workload); compute keeps
//! its recorded durations, communication is simulated. The summary shows the recorded step
//! time beside the replayed one.

use super::run::{network_model, NetFabric, Prepared, RunError};
use super::workload::{algorithm_label, play_step, LibraryPlanner, WorkloadTable};
use super::{Scenario, ScenarioError};
use crate::collective::play::Watch;
use crate::library::Library;
use crate::metrics::workload::{TraceFacts, WorkloadReport, WorkloadSummary};
use crate::net::NetworkModel;
use crate::workload::metrics::step_metrics;
use crate::workload::step::Templates;
use crate::workload::trace::{self, NodeKind};

pub fn run_trace(
    s: &Scenario,
    w: &WorkloadTable,
    dir: &str,
    prep: Prepared,
    watch: Watch,
) -> Result<WorkloadReport, RunError> {
    let file = s.path.display().to_string();
    let fail = |(f, e): (String, String)| RunError::from(ScenarioError::new(&file, f, e));
    let base = s.path.parent().unwrap_or(std::path::Path::new("."));
    let set = trace::load(&base.join(dir), w.trace_format)
        .map_err(|e| fail(("workload.trace".into(), format!("a readable trace: {e}"))))?;
    let n = set.ranks.len() as u32;
    if n as usize > prep.ranks.len() {
        return Err(fail((
            "workload.trace".into(),
            format!(
                "a trace of at most the topology's {} ranks; {dir} has {n}",
                prep.ranks.len()
            ),
        )));
    }
    let mut prep = prep;
    prep.ranks.truncate(n as usize);
    let library = w.library(&prep.topology);
    let cfg = w.step_config(n, library).map_err(fail)?;
    let mut net: Box<dyn NetworkModel> = network_model(s, &prep)?;
    let mut dag = {
        let fabric = NetFabric::new(net.as_mut(), &prep);
        let built = if library == Library::Ideal {
            trace::build(&set, &cfg, &fabric, &Templates)
        } else {
            let planner = LibraryPlanner::new(
                &fabric,
                library,
                w.library_options(library)
                    .map_err(fail)?
                    .with_host_profile(&prep.profile)
                    .with_wake_ups(&prep.profile, s.file.seed, 1),
                prep.profile.network.nccl.as_ref(),
            );
            trace::build(&set, &cfg, &fabric, &planner)
        };
        built.map_err(|e| fail(("workload.trace".into(), e.to_string())))?
    };
    dag.global_batch = w.batch_per_gpu * n as u64;
    let hint = "; the trace's collectives are too many or too large for this run".to_string();
    let played = play_step(s, &prep, &dag, net.as_mut(), watch, hint)?;
    let metrics = step_metrics(&dag, &played.outcome, None);
    let count = |f: &dyn Fn(&NodeKind) -> bool| -> usize {
        set.ranks
            .iter()
            .map(|r| r.nodes.iter().filter(|n| f(&n.kind)).count())
            .max()
            .unwrap_or(0)
    };
    let facts = TraceFacts {
        path: dir.to_string(),
        format: set.format.to_string(),
        collectives: count(&|k| matches!(k, NodeKind::Collective { .. })),
        point_to_point: count(&|k| matches!(k, NodeKind::Send { .. } | NodeKind::Recv { .. })),
        recorded_step_secs: set.recorded_step_secs(),
        recorded_compute_secs: set.compute_secs().into_iter().fold(0.0, f64::max),
    };
    let summary = WorkloadSummary {
        scenario: s.file.name.clone(),
        topology: prep.topology.name.clone(),
        profile: prep.profile.name.clone(),
        model: set.name.clone(),
        params: 0,
        forward_gflops_per_sample: 0.0,
        parallelism: format!("trace ({})", set.format),
        algorithm: algorithm_label(&dag, &cfg),
        ranks: n,
        data_parallel: n,
        tensor_parallel: 1,
        pipeline_parallel: 1,
        virtual_stages: 1,
        context_parallel: 1,
        rank_order: None,
        expert_parallel: 1,
        microbatches: 1,
        batch_per_gpu: w.batch_per_gpu,
        global_batch: dag.global_batch,
        dtype: String::new(),
        buckets: 0,
        bucket_bytes: Vec::new(),
        stages: Vec::new(),
        metrics,
        memory: Default::default(),
        memory_capacity_bytes: 0,
        largest_batch_per_gpu: 0,
        steps_per_epoch: w.steps_per_epoch,
        epochs: w.epochs,
        traffic_per_epoch_bytes: played.traffic_per_epoch(w.steps_per_epoch),
        ops: dag.schedule.ops.len(),
        events: played.outcome.events,
        trace: Some(facts),
    };
    let title = format!("{}: replay of trace {}", s.file.name, set.name);
    Ok(played.into_report(summary, &title, &dag, &prep))
}
