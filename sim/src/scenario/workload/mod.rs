//! `[workload]` scenarios: a training step on the scenario's topology, and `[[compare]]`
//! studies that run several variants of one scenario and tabulate them.
//!
//! ```toml
//! [workload]
//! model = "resnet50"               # a catalog name, or model_file = "my_model.toml", or
//!                                  # [workload.transformer] layers = 24, hidden = 2048, ...
//! batch_per_gpu = 32
//! parallelism = "ddp"              # ddp | allreduce_after_backward | parameter_server |
//!                                  # data_parallel | zero1 | zero2 | fsdp (ZeRO-3)
//! bucket = "25MiB"                 # DDP bucket cap; first_bucket = "1MiB" (default: = bucket)
//! dtype = "fp32"                   # fp32 | tf32 | fp16 | bf16
//! optimizer = "momentum"           # sgd | momentum | adam
//! execution = "fused"              # fused | eager (PyTorch op by op: the profile's host costs)
//! accumulation_steps = 1
//! tensor_parallel = 1              # Megatron TP group size
//! pipeline_parallel = 1            # stages; microbatches = 4, pipeline_schedule = "1f1b" | "gpipe"
//! virtual_stages = 1               # model chunks per stage: > 1 is interleaved 1F1B (Megatron)
//! context_parallel = 1             # sequence split over this many ranks (ring attention)
//! context_parallel_comm = "p2p"    # p2p (ring) | all_gather | a2a (Ulysses): Megatron's cp_comm_type
//! rank_order = "tp-cp-dp-pp"       # mesh axes innermost first: which groups share a node
//! servers = 1                      # parameter server shards; colocated = true (servers are ranks)
//! steps_per_epoch = 100            # epoch time and traffic per epoch = steps × one step
//! epochs = 1
//! ablation = "none"                # none | free_communication | free_compute
//! memory_check = true              # refuse a step whose GPUs cannot hold one sample
//! activation_recompute = false     # keep layer inputs only; forward again before backward
//! expert_parallel = 1              # MoE: experts sharded over groups of this many ranks
//! capacity_factor = 1.0            # MoE: expert capacity over the balanced share
//! [workload.allreduce]             # the gradient / TP all-reduce, as in [collective]:
//! library = "ideal"                # ideal | nccl (default nccl on a topology naming its GPU)
//! algorithm = "ring"               # ideal: the template; nccl: forced as NCCL_ALGO would
//! permutations = [0, 5]            # ideal only (nccl: protocol, min/max_channels, library_version)
//!
//! [[compare]]                      # optional: variants, each a list of --set overrides
//! label = "hierarchical"
//! set = ["workload.allreduce.algorithm=hierarchical"]
//! ```
//!
//! Steps are identical and separated by the optimizer (synchronous training), so one step is
//! simulated and an epoch is `steps_per_epoch` of them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::run::{network_model, prepare, NetFabric, RunError};
use super::{Scenario, ScenarioError};
use crate::collective::play::{play_watched, PlayOptions, PlayOutcome, Watch};
use crate::collective::{Collective, CollectiveSpec, Fabric};
use crate::library::{self, Library, LibraryOptions, Request, System};
use crate::metrics::workload::{StudyRow, WorkloadReport, WorkloadSummary};
use crate::net::series::SeriesOptions;
use crate::net::NetworkModel;
use crate::units::fmt_bytes;
use crate::workload::compute::ComputeModel;
use crate::workload::memory;
use crate::workload::metrics::{step_metrics, traffic_per_step};
use crate::workload::step::{self, RankOrder, StepConfig};
use crate::workload::step::{Planned, Planner, StepDag, Templates};

mod table;
pub use table::{AllReduceTable, CompareEntry, WorkloadTable};

/// One request's plans, by the group they were planned for, and the distinct schedules among
/// them: groups whose plans are equal share one schedule, so that the step builder knows them
/// for the same plan by pointer instead of comparing every op (thousands of tensor-parallel
/// groups ask the same all-reduce hundreds of times each).
#[derive(Default)]
struct PlansByGroup {
    by_group: std::collections::HashMap<Vec<u32>, Planned>,
    distinct: Vec<Arc<crate::collective::Schedule>>,
}

impl PlansByGroup {
    /// Keeps `planned` for `group`, sharing an equal schedule among the last few distinct ones
    /// (a bounded search: groups whose plans all differ cost no more than before).
    fn insert(&mut self, group: &[u32], planned: &mut Planned) {
        const SEARCHED: usize = 8;
        let recent = self.distinct.iter().rev().take(SEARCHED);
        match recent.into_iter().find(|s| **s == planned.schedule) {
            Some(same) => planned.schedule = Arc::clone(same),
            None => self.distinct.push(Arc::clone(&planned.schedule)),
        }
        self.by_group.insert(group.to_vec(), planned.clone());
    }
}

/// A library (NCCL) planning each of the step's collectives for the group it runs on: the
/// group's [`System`] (nodes, paths, NVSwitch) is what NCCL's topology detection would see
/// in that communicator. Parameter-server exchanges are not library collectives and stay
/// templates.
pub(super) struct LibraryPlanner<'a> {
    view: &'a NetFabric<'a>,
    library: Library,
    options: LibraryOptions,
    calibration: Option<&'a crate::profile::NcclCalibration>,
    /// Groups repeat (every bucket over the same replicas): their systems are computed once.
    systems: std::cell::RefCell<std::collections::HashMap<Vec<u32>, System>>,
    /// The plans of the last request, by group: a step asks the same tensor-parallel
    /// all-reduce of every group hundreds of times (each block, micro-batch and pass), and
    /// planning is a pure function of the request and the group.
    last: std::cell::RefCell<Option<(Request, PlansByGroup)>>,
}

impl<'a> LibraryPlanner<'a> {
    pub(super) fn new(
        view: &'a NetFabric<'a>,
        library: Library,
        options: LibraryOptions,
        calibration: Option<&'a crate::profile::NcclCalibration>,
    ) -> Self {
        LibraryPlanner {
            view,
            library,
            options,
            calibration,
            systems: Default::default(),
            last: Default::default(),
        }
    }
}

impl Planner for LibraryPlanner<'_> {
    fn plan(
        &self,
        spec: &CollectiveSpec,
        members: &[u32],
        fabric: &dyn Fabric,
    ) -> Result<Planned, (String, String)> {
        // Parameter-server exchanges are not library collectives. Point-to-point traffic
        // (MoE dispatch and Ulysses all-to-alls; pipeline stages' and ring attention's
        // send/recv pairs) runs as the library runs it where the library has it: NCCL's
        // grouped sends (`library::nccl::p2p`: protocol, the ring's kernel costs), gloo's
        // rendezvous messages (`library::gloo`); OpenMPI's all-to-all and send/recv are not
        // modelled, so under `mpi` (and `ideal`) it stays the template.
        let template = matches!(
            spec.algorithm,
            crate::collective::Algorithm::ParameterServer { .. }
        ) || match spec.collective {
            Collective::SendRecv | Collective::AllToAll => {
                !matches!(self.library, Library::Nccl | Library::Gloo)
            }
            _ => false,
        };
        if template {
            return Templates.plan(spec, members, fabric);
        }
        let request = Request::of(spec);
        if let Some((r, plans)) = &*self.last.borrow() {
            if *r == request {
                if let Some(p) = plans.by_group.get(members) {
                    return Ok(p.clone());
                }
            }
        }
        let system = self
            .systems
            .borrow_mut()
            .entry(members.to_vec())
            .or_insert_with(|| System::of(self.view, members))
            .clone();
        let plan = library::plan(
            self.library,
            &Request::of(spec),
            &system,
            &self.options,
            self.calibration,
            fabric,
        )
        .map_err(|e| {
            (
                e.field.replacen("collective.", "workload.allreduce.", 1),
                e.expected,
            )
        })?;
        let mut planned = Planned {
            schedule: Arc::new(plan.schedule),
            placed: plan.placed_endpoints,
            decision: Some(plan.decision),
        };
        let mut last = self.last.borrow_mut();
        match &mut *last {
            Some((r, plans)) if *r == request => plans.insert(members, &mut planned),
            _ => {
                let mut plans = PlansByGroup::default();
                plans.insert(members, &mut planned);
                *last = Some((request, plans));
            }
        }
        Ok(planned)
    }
}

/// Runs a `[workload]` scenario: one training step, played on the network model.
pub fn run_workload(s: &Scenario, watch: Watch) -> Result<WorkloadReport, RunError> {
    let file = s.path.display().to_string();
    let fail = |(f, e): (String, String)| RunError::from(ScenarioError::new(&file, f, e));
    let w = s.file.workload.as_ref().ok_or_else(|| {
        fail((
            "workload".into(),
            "a [workload] table (this scenario times a collective)".into(),
        ))
    })?;
    let prep = prepare(s)?;
    if let Some(dir) = &w.trace {
        return super::trace::run_trace(s, w, dir, prep, watch);
    }
    let mut net: Box<dyn NetworkModel> = network_model(s, &prep)?;
    run_model_step(s, w, &prep, net.as_mut(), watch)
}

/// [`run_workload`]'s model step (not a recorded trace) on the network model `net` made for
/// the scenario.
fn run_model_step(
    s: &Scenario,
    w: &WorkloadTable,
    prep: &super::run::Prepared,
    net: &mut dyn NetworkModel,
    watch: Watch,
) -> Result<WorkloadReport, RunError> {
    let file = s.path.display().to_string();
    let fail = |(f, e): (String, String)| RunError::from(ScenarioError::new(&file, f, e));
    let n = prep.ranks.len() as u32;
    let model = w.model(&s.path).map_err(fail)?;
    let library = w.library(&prep.topology);
    let cfg = w.step_config(n, library).map_err(fail)?;
    let cm = ComputeModel::from_profile(&prep.profile, cfg.dtype)
        .map_err(|e| fail(("profile".into(), e)))?
        .executing(&prep.profile, w.execution)
        .map_err(|e| fail(("workload.execution".into(), e)))?;
    let dag = {
        let fabric = NetFabric::new(net, prep);
        if library == Library::Ideal {
            step::build(&model, &cm, &cfg, n, &fabric, &Templates).map_err(fail)?
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
            step::build(&model, &cm, &cfg, n, &fabric, &planner).map_err(fail)?
        }
    };
    // A step whose GPUs cannot hold even one sample is refused before it is simulated.
    if w.memory_check
        && cm.memory_capacity_bytes > 0
        && memory::largest_batch(&model, &cfg, &dag, cm.memory_capacity_bytes) == 0
    {
        let need = memory::per_gpu(&model, &cfg, &dag, 1);
        return Err(fail((
            "workload".into(),
            format!(
                "a step that fits in the profile's {} per GPU; {} at {} DP x {} TP x {} PP with \
                 one sample per micro-batch needs {} (params {}, grads {}, optimizer {}, \
                 activations {}): shard it (parallelism = \"zero1\", \"zero2\" or \"fsdp\", \
                 more tensor_parallel or pipeline_parallel), use larger GPUs, or set \
                 workload.memory_check = false to time it anyway",
                fmt_bytes(cm.memory_capacity_bytes as f64),
                model.name,
                dag.data_parallel,
                cfg.tensor_parallel.max(1),
                cfg.pipeline_parallel.max(1),
                fmt_bytes(need.total_bytes() as f64),
                fmt_bytes(need.params_bytes as f64),
                fmt_bytes(need.grads_bytes as f64),
                fmt_bytes(need.optimizer_bytes as f64),
                fmt_bytes(need.activation_bytes as f64),
            ),
        )));
    }
    let hint = format!(
        "; make workload.batch_per_gpu ({}) or workload.steps_per_epoch smaller, \
         or the links faster",
        cfg.batch_per_gpu
    );
    let played = play_step(s, prep, &dag, net, watch, hint)?;
    let metrics = step_metrics(&dag, &played.outcome, model.tokens_per_sample);
    let micro = cfg.batch_per_gpu / cfg.microbatches.max(1) as u64;
    let mem = memory::per_gpu(&model, &cfg, &dag, micro);
    // The largest micro-batch that fits, as a batch per GPU (micro-batch x micro-batches): the
    // unit batch_per_gpu is given in.
    let largest = memory::largest_batch(&model, &cfg, &dag, cm.memory_capacity_bytes)
        .saturating_mul(cfg.microbatches.max(1) as u64);
    let summary = WorkloadSummary {
        scenario: s.file.name.clone(),
        topology: prep.topology.name.clone(),
        profile: prep.profile.name.clone(),
        model: model.name.clone(),
        params: model.params(),
        forward_gflops_per_sample: model.forward_flops() as f64 / 1e9,
        parallelism: cfg.method.as_str().to_string(),
        algorithm: algorithm_label(&dag, &cfg),
        ranks: n,
        data_parallel: dag.data_parallel,
        tensor_parallel: cfg.tensor_parallel,
        pipeline_parallel: cfg.pipeline_parallel,
        virtual_stages: dag.virtual_stages,
        context_parallel: cfg.context_parallel.max(1),
        rank_order: (cfg.rank_order != RankOrder::default()).then(|| cfg.rank_order.to_string()),
        expert_parallel: cfg.expert_parallel.max(1),
        microbatches: cfg.microbatches,
        batch_per_gpu: cfg.batch_per_gpu,
        global_batch: dag.global_batch,
        dtype: cfg.dtype.as_str().to_string(),
        buckets: dag.buckets.len(),
        bucket_bytes: dag.buckets.iter().map(|b| b.0).collect(),
        stages: dag.stages.iter().map(|r| (r.start, r.end)).collect(),
        metrics,
        memory: mem,
        memory_capacity_bytes: cm.memory_capacity_bytes,
        largest_batch_per_gpu: largest,
        steps_per_epoch: w.steps_per_epoch,
        epochs: w.epochs,
        traffic_per_epoch_bytes: played.traffic_per_epoch(w.steps_per_epoch),
        ops: dag.schedule.ops.len(),
        events: played.outcome.events,
        trace: None,
    };
    let title = format!("{}: one training step of {}", s.file.name, model.name);
    Ok(played.into_report(summary, &title, &dag, prep))
}

/// What ran the step's collectives: the templates' algorithm, or each distinct library
/// decision with how many collectives made it.
pub(super) fn algorithm_label(dag: &StepDag, cfg: &StepConfig) -> String {
    if dag.decisions.is_empty() {
        return cfg.algorithm.report_name();
    }
    dag.decisions
        .iter()
        .map(|(d, n)| format!("{d} (x{n})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A step played on its network model: what every report of a step is built from.
pub(super) struct PlayedStep {
    pub outcome: PlayOutcome,
    endpoints: Vec<crate::topology::DeviceId>,
    /// Bytes per step (src endpoint, dst endpoint, class).
    traffic: BTreeMap<(u32, u32, &'static str), u128>,
    link_series: Option<crate::net::series::LinkSeries>,
}

impl PlayedStep {
    /// Bytes per epoch of `steps` steps, by traffic class.
    pub(super) fn traffic_per_epoch(&self, steps: u64) -> BTreeMap<String, f64> {
        let mut by_class: BTreeMap<String, f64> = BTreeMap::new();
        for (&(_, _, class), &bytes) in &self.traffic {
            *by_class.entry(class.to_string()).or_insert(0.0) += bytes as f64 * steps as f64;
        }
        by_class
    }

    /// The report: `summary` with the step's traffic, devices, timeline (titled `title`) and
    /// link series.
    pub(super) fn into_report(
        self,
        summary: WorkloadSummary,
        title: &str,
        dag: &StepDag,
        prep: &super::run::Prepared,
    ) -> WorkloadReport {
        let device_names: Vec<String> = self
            .endpoints
            .iter()
            .map(|d| prep.topology.device(*d).name.clone())
            .collect();
        let trace = step_trace(title, dag, &self.outcome, &device_names);
        WorkloadReport {
            summary,
            traffic_per_step: self.traffic,
            endpoints: device_names,
            topology: Arc::clone(&prep.topology),
            trace,
            link_series: self.link_series,
        }
    }
}

/// Places a step's endpoints (its ranks, then the extra endpoints the library placed or the
/// scenario names), plays it and reads its traffic and link series; `hint` ends the error of
/// a run too big to play.
pub(super) fn play_step(
    s: &Scenario,
    prep: &super::run::Prepared,
    dag: &StepDag,
    net: &mut dyn NetworkModel,
    watch: Watch,
    hint: String,
) -> Result<PlayedStep, RunError> {
    let file = s.path.display().to_string();
    let fail = |(f, e): (String, String)| RunError::from(ScenarioError::new(&file, f, e));
    let mut endpoints = prep.ranks.clone();
    let placed: std::collections::HashMap<&str, crate::topology::DeviceId> =
        dag.placed.iter().map(|(p, d)| (p.as_str(), *d)).collect();
    for name in &dag.schedule.extra_endpoints {
        if let Some(&dev) = placed.get(name.as_str()) {
            endpoints.push(dev);
            continue;
        }
        let field = format!("placement.endpoints.{name}");
        let dev = s.file.placement.endpoints.get(name).ok_or_else(|| {
            fail((
                field.clone(),
                format!("the device of parameter server {name:?}, e.g. a host (or set workload.colocated = true)"),
            ))
        })?;
        let id = prep.topology.find(dev).ok_or_else(|| {
            fail((
                field.clone(),
                format!(
                    "a device of topology {:?}; there is no {dev:?}",
                    prep.topology.name
                ),
            ))
        })?;
        endpoints.push(id);
    }
    let outcome = play_watched(
        &dag.schedule,
        &endpoints,
        net,
        PlayOptions {
            reduce_bytes_per_s: prep.profile.reduce_bytes_per_s(),
            shared_cores: prep.profile.shared_cores(),
        },
        watch,
    )
    .map_err(|e| RunError::play(&file, hint, e))?;
    Ok(PlayedStep {
        link_series: net.link_series(outcome.end, SeriesOptions::default()),
        traffic: traffic_per_step(dag),
        outcome,
        endpoints,
    })
}

/// One step per rank as a Chrome / Perfetto trace: rank i is `rank<i> (<device>)`, extra
/// endpoints by their names.
fn step_trace(
    title: &str,
    dag: &StepDag,
    outcome: &PlayOutcome,
    device_names: &[String],
) -> crate::metrics::trace::Trace {
    let n = dag.ranks as usize;
    crate::metrics::trace::Trace::from_schedule(
        title,
        &dag.schedule,
        &outcome.ops,
        device_names
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if i < n {
                    format!("rank{i} ({d})")
                } else {
                    format!("{} ({d})", dag.schedule.extra_endpoints[i - n])
                }
            })
            .collect(),
        Some(crate::metrics::trace::Lanes {
            of_op: &dag.lanes,
            count: dag.lane_count,
            ranks: (!dag.lane_ranks.is_empty()).then_some(&dag.lane_ranks[..]),
        }),
    )
}

/// A study's variants, each as its label and overrides: every `[[compare]]` entry (`overrides`,
/// then its own `set`), or the scenario alone, named after it, where it has none.
pub fn variants(base: &Scenario, overrides: &[String]) -> Vec<(String, Vec<String>)> {
    if base.file.compare.is_empty() {
        return vec![(base.file.name.clone(), overrides.to_vec())];
    }
    base.file
        .compare
        .iter()
        .map(|c| {
            let mut all = overrides.to_vec();
            all.extend(c.set.iter().cloned());
            (c.label.clone(), all)
        })
        .collect()
}

/// Runs the scenario at `path` and each of its `[[compare]]` variants; one row per variant
/// (one row for a scenario without variants).
pub fn run_study(
    path: &Path,
    overrides: &[String],
    watch: Watch,
) -> Result<Vec<StudyRow>, RunError> {
    let base = super::load(path, overrides)?;
    let mut rows: Vec<StudyRow> = Vec::new();
    for (label, all) in variants(&base, overrides) {
        let s = super::load(path, &all)?;
        let report = run_workload(&s, watch)?;
        rows.push(StudyRow {
            label,
            report,
            speedup: 0.0,
            scaling_efficiency: 0.0,
        });
    }
    let (t0, n0) = (
        rows[0].report.summary.metrics.samples_per_s,
        rows[0].report.summary.ranks,
    );
    for r in &mut rows {
        let s = &r.report.summary;
        r.speedup = if t0 > 0.0 {
            s.metrics.samples_per_s / t0
        } else {
            0.0
        };
        r.scaling_efficiency = r.speedup / (s.ranks as f64 / n0 as f64);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
