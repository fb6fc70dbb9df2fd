//! One training step as a DAG: compute ops for every layer's forward and backward pass, the
//! collectives of the parallelism (embedded collective schedules), and the optimizer.
//!
//! Ranks are laid out Megatron-style: tensor-parallel rank innermost, then data-parallel, then
//! pipeline stage (`rank = (stage × dp + replica) × tp + tp_rank`), so a TP group is a run of
//! consecutive GPUs (one NVLink domain when `tp` ≤ GPUs per node).
//!
//! Compute ops are batches: "layer l's backward on every rank of the group" is one op, so a
//! 1,024-rank data-parallel step has as many compute ops as a 1-rank one. Each op is tagged with
//! its *lane* (pipeline stage): the ops of one lane run one after the other, as on one GPU
//! stream; collectives and sends run alongside.
//!
//! Data-parallel methods (`tp = pp = 1`):
//! - `ddp`: gradients in buckets (reverse layer order, `first_bucket_bytes` then
//!   `bucket_bytes`), each bucket's all-reduce starting when the backward pass has produced its
//!   last gradient and after the previous bucket's all-reduce (one NCCL stream), overlapping
//!   the rest of the backward pass; DDP's per-tensor cost is added to each layer's backward.
//! - `allreduce_after_backward`: one all-reduce of all gradients after the backward pass.
//! - `parameter_server`: per bucket, push to the (sharded) servers, the servers' update (the
//!   optimizer, timed by the profile), pull; buckets overlap the backward pass as in DDP.
//! - `data_parallel` (PyTorch's single-process `nn.DataParallel`): GPU 0 scatters the inputs,
//!   broadcasts the parameters, gathers the outputs, scatters their gradients back, reduces the
//!   gradients to itself and alone runs the optimizer.
//! - `accumulation_steps` k: k forward/backward passes per step, communication on the last.
//!
//! Tensor/pipeline/hybrid (`tp > 1` or `pp > 1`): layers are cut into `pp` contiguous stages of
//! near-equal compute; each replica's batch is cut into `microbatches`; stages run them in
//! GPipe (all forwards, then all backwards) or 1F1B order (warm-up of `pp − stage − 1`
//! forwards, then one forward one backward); activations and their gradients go to the next /
//! previous stage as point-to-point transfers (1/tp of the activation per TP rank, Megatron's
//! scatter/gather); attention and MLP blocks are split across the TP group with one all-reduce
//! of the block's output after its forward and one after its backward; after its last backward
//! each stage all-reduces its gradients across data-parallel replicas and steps its optimizer.

use serde::Deserialize;

use super::catalog::Model;
use super::compute::{ComputeModel, Dtype, Optimizer};
use crate::collective::{
    generate, Algorithm, Collective, CollectiveError, CollectiveSpec, Endpoint, Fabric, Op, OpId,
    OpKind, Phase, Schedule,
};
use crate::engine::SimTime;
use crate::topology::DeviceId;

/// How data-parallel replicas exchange gradients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DpMethod {
    #[default]
    Ddp,
    AllreduceAfterBackward,
    ParameterServer,
    DataParallel,
    /// ZeRO stage 1 (Megatron's distributed optimizer): optimizer state sharded; gradients
    /// reduce-scattered in buckets during the backward pass, each rank updates its shard,
    /// parameters all-gathered after the update.
    Zero1,
    /// ZeRO stage 2: as stage 1, and gradients kept only for the rank's shard.
    Zero2,
    /// ZeRO stage 3 / PyTorch FSDP (full shard): parameters sharded too; each layer's
    /// parameters all-gathered before its forward and again before its backward (the next
    /// layer's gather prefetched while one computes), its gradients reduce-scattered after
    /// its backward.
    Fsdp,
}

impl DpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            DpMethod::Ddp => "ddp",
            DpMethod::AllreduceAfterBackward => "allreduce_after_backward",
            DpMethod::ParameterServer => "parameter_server",
            DpMethod::DataParallel => "data_parallel",
            DpMethod::Zero1 => "zero1",
            DpMethod::Zero2 => "zero2",
            DpMethod::Fsdp => "fsdp",
        }
    }

    /// The ZeRO stage: what each data-parallel rank keeps only its 1/dp shard of (1:
    /// optimizer state and fp32 master weights; 2: and gradients; 3: and parameters).
    pub fn zero_stage(self) -> u8 {
        match self {
            DpMethod::Zero1 => 1,
            DpMethod::Zero2 => 2,
            DpMethod::Fsdp => 3,
            _ => 0,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineSchedule {
    Gpipe,
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
}

/// What-if switches: make communication or compute free (the DAG keeps its shape).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ablation {
    #[default]
    None,
    FreeCommunication,
    FreeCompute,
}

/// Everything that shapes a step besides the model and the compute rates.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// Samples per data-parallel replica per forward pass (split into micro-batches when
    /// pipelining).
    pub batch_per_gpu: u64,
    pub method: DpMethod,
    pub bucket_bytes: u64,
    pub first_bucket_bytes: u64,
    pub accumulation_steps: u32,
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    pub microbatches: u32,
    pub pipeline_schedule: PipelineSchedule,
    /// Gradient all-reduce algorithm (data-parallel and tensor-parallel groups).
    pub algorithm: Algorithm,
    pub slices: u32,
    /// Parameter-server shards and whether they are ranks.
    pub servers: u32,
    pub colocated: bool,
    pub optimizer: Optimizer,
    pub dtype: Dtype,
    pub ablation: Ablation,
    /// Full activation recomputation: each layer keeps only its input and runs its forward
    /// again (tensor-parallel all-reduce included) before its backward.
    pub recompute: bool,
    /// Expert-parallel group size (mixture-of-experts models): each group of this many
    /// consecutive data-parallel ranks holds every expert once.
    pub expert_parallel: u32,
    /// Tokens an expert is given room for, over its balanced share: all-to-all buffers and
    /// expert compute are padded to it.
    pub capacity_factor: f64,
    /// Embed groups that run the same plan as one (see [`StepBuilder::collective`]); false
    /// plans and embeds each group alone (the reference).
    pub group_fusion: bool,
}

impl StepConfig {
    pub fn data_parallel(batch_per_gpu: u64, method: DpMethod) -> StepConfig {
        StepConfig {
            batch_per_gpu,
            method,
            bucket_bytes: 25 << 20,
            first_bucket_bytes: 25 << 20,
            accumulation_steps: 1,
            tensor_parallel: 1,
            pipeline_parallel: 1,
            microbatches: 1,
            pipeline_schedule: PipelineSchedule::OneFOneB,
            algorithm: crate::collective::default_algorithm(Collective::AllReduce),
            slices: 1,
            servers: 1,
            colocated: true,
            optimizer: Optimizer::Momentum,
            dtype: Dtype::Fp32,
            ablation: Ablation::None,
            group_fusion: true,
            recompute: false,
            expert_parallel: 1,
            capacity_factor: 1.0,
        }
    }
}

/// A built step: the schedule plus what the metrics need to read it.
#[derive(Debug, Clone)]
pub struct StepDag {
    pub schedule: Schedule,
    /// Per op: the lane (pipeline stage) of a worker compute op, `None` for communication,
    /// server updates and joins.
    pub lanes: Vec<Option<u16>>,
    pub lane_count: u16,
    pub ranks: u32,
    pub data_parallel: u32,
    /// Samples per step over all replicas.
    pub global_batch: u64,
    /// Which layers each stage holds (index ranges into the model's layers).
    pub stages: Vec<std::ops::Range<usize>>,
    /// DDP / PS buckets: (bytes, first layer, last layer) in the order they are sent.
    pub buckets: Vec<(u64, usize, usize)>,
    /// Extra endpoints a library placed itself (NVLS: each group's NVSwitch), by name.
    pub placed: Vec<(String, DeviceId)>,
    /// What the library decided for the step's collectives, each distinct choice once with
    /// how many collectives made it (empty for the templates).
    pub decisions: Vec<(String, u32)>,
}

/// One collective over one group, as a [`Planner`] turns it into a schedule.
#[derive(Clone)]
pub struct Planned {
    /// Shared: a library's cached plan is handed to every group that asks the same.
    pub schedule: std::sync::Arc<Schedule>,
    /// Extra endpoints the library placed itself (NVLS: the group's NVSwitch).
    pub placed: Vec<(String, DeviceId)>,
    /// The library's decision line, `None` for the templates.
    pub decision: Option<String>,
}

/// Groups of one collective that run the same plan, each with the step's names of the plan's
/// extra endpoints.
struct PlanClass<'g> {
    schedule: std::sync::Arc<Schedule>,
    endpoint_names: Vec<String>,
    members: Vec<(&'g Vec<u32>, Vec<String>)>,
}

/// Turns one collective over a group of ranks into a schedule: dtsim's templates
/// ([`Templates`]) or a library (the scenario layer's NCCL planner).
pub trait Planner {
    /// `members`: the group's ranks in communicator order; `fabric` sees the group with rank
    /// `i` = `members[i]`.
    fn plan(
        &self,
        spec: &CollectiveSpec,
        members: &[u32],
        fabric: &dyn Fabric,
    ) -> Result<Planned, StepError>;
}

/// `library = "ideal"`: the templates exactly as configured.
pub struct Templates;

impl Planner for Templates {
    fn plan(
        &self,
        spec: &CollectiveSpec,
        members: &[u32],
        fabric: &dyn Fabric,
    ) -> Result<Planned, StepError> {
        let schedule =
            generate(spec, members.len() as u32, fabric).map_err(|e: CollectiveError| {
                err(&format!("workload.allreduce ({})", e.field), e.expected)
            })?;
        Ok(Planned {
            schedule: std::sync::Arc::new(schedule),
            placed: Vec::new(),
            decision: None,
        })
    }
}

/// Why a step could not be built: (field, expected).
pub type StepError = (String, String);

fn err(field: &str, expected: impl Into<String>) -> StepError {
    (field.to_string(), expected.into())
}

/// A group of the communicator as the generators see it.
struct SubFabric<'a> {
    parent: &'a dyn Fabric,
    members: &'a [u32],
}

impl Fabric for SubFabric<'_> {
    fn bottleneck_bps(&self, src: Endpoint, dst: Endpoint) -> f64 {
        self.parent
            .bottleneck_bps(self.members[src as usize], self.members[dst as usize])
    }
    fn node_of(&self, rank: u32) -> u32 {
        self.parent.node_of(self.members[rank as usize])
    }
}

/// Builds a step's schedule op by op: compute on lanes, collectives planned per group and
/// embedded, point-to-point transfers, joins. [`build`] drives it from a model; the trace
/// replay (`workload::trace`) from a recorded step.
pub struct StepBuilder<'a> {
    s: Schedule,
    lanes: Vec<Option<u16>>,
    fabric: &'a dyn Fabric,
    planner: &'a dyn Planner,
    cfg: &'a StepConfig,
    placed: Vec<(String, DeviceId)>,
    decisions: Vec<(String, u32)>,
    /// Position of each extra endpoint of the step's schedule, by name (thousands of NVLS
    /// groups each name their own switch).
    endpoint_index: std::collections::HashMap<String, u32>,
}

impl<'a> StepBuilder<'a> {
    pub fn new(
        ranks: u32,
        fabric: &'a dyn Fabric,
        planner: &'a dyn Planner,
        cfg: &'a StepConfig,
    ) -> Self {
        StepBuilder {
            s: Schedule::new(Collective::AllReduce, "training-step", ranks, 0),
            lanes: Vec::new(),
            fabric,
            planner,
            cfg,
            placed: Vec::new(),
            decisions: Vec::new(),
            endpoint_index: std::collections::HashMap::new(),
        }
    }

    /// The built schedule in a [`StepDag`] of one lane per op's lane, with the ranks set and
    /// no model facts (stages, buckets, batch): the caller fills what it knows.
    pub fn finish(self) -> StepDag {
        let lane_count = self.lanes.iter().flatten().max().map_or(1, |&l| l + 1);
        let ranks = self.s.ranks;
        StepDag {
            schedule: self.s,
            lanes: self.lanes,
            lane_count,
            ranks,
            data_parallel: ranks,
            global_batch: 0,
            stages: Vec::new(),
            buckets: Vec::new(),
            placed: self.placed,
            decisions: self.decisions,
        }
    }

    pub fn compute(
        &mut self,
        endpoints: u32,
        d: SimTime,
        deps: Vec<OpId>,
        phase: Phase,
        lane: u16,
        step: u32,
    ) -> OpId {
        let d = if self.cfg.ablation == Ablation::FreeCompute {
            SimTime::ZERO
        } else {
            d
        };
        self.lanes.push(Some(lane));
        self.s.push(
            OpKind::Compute {
                endpoints,
                duration: d,
            },
            deps,
            phase,
            lane,
            step,
        )
    }

    pub fn join(&mut self, deps: Vec<OpId>) -> OpId {
        self.lanes.push(None);
        self.s.push(
            OpKind::Compute {
                endpoints: 0,
                duration: SimTime::ZERO,
            },
            deps,
            Phase::SendRecv,
            0,
            0,
        )
    }

    /// Embeds `collective` of `bytes` over each group (all groups the same size) after
    /// `after`; returns a join op that finishes with it. The planner plans the first group and
    /// the others reuse its schedule, unless the library placed endpoints of its own (NVLS:
    /// each group has its own NVSwitch): then every group is planned.
    pub fn collective(
        &mut self,
        spec: CollectiveSpec,
        groups: &[Vec<u32>],
        after: Vec<OpId>,
        map_kind: &dyn Fn(&Op) -> OpKind,
    ) -> Result<OpId, StepError> {
        if self.cfg.ablation == Ablation::FreeCommunication || groups.is_empty() {
            return Ok(self.join(after));
        }
        let plan_group = |g: &Vec<u32>| {
            let fabric = SubFabric {
                parent: self.fabric,
                members: g,
            };
            self.planner.plan(&spec, g, &fabric)
        };
        // Groups whose plans are the same schedule (up to which placed endpoints they use:
        // NVLS groups on different nodes each have their own NVSwitch) are embedded as one:
        // one op per step over all their pairs. The groups of one collective start together
        // after one batched compute op and are the same shape, so they also finish together.
        if !self.cfg.group_fusion {
            let mut sinks = Vec::new();
            for g in groups {
                let mut planned = plan_group(g)?;
                if let Some(d) = planned.decision.take() {
                    self.count_decision(&d);
                }
                let names = self.placed_names(&planned);
                sinks.extend(self.embed_groups(&planned.schedule, &[(g, names)], &after, map_kind));
            }
            return Ok(self.join(sinks));
        }
        let first = plan_group(&groups[0])?;
        let planned_apart = !first.placed.is_empty();
        let mut classes: Vec<PlanClass> = Vec::new();
        let mut next = Some(first);
        let mut first_decision: Option<String> = None;
        for (i, g) in groups.iter().enumerate() {
            let mut planned = match next.take() {
                Some(p) => p,
                None if planned_apart => plan_group(g)?,
                None => {
                    // Planned once: every group runs the first group's plan.
                    let names = classes[0].endpoint_names.clone();
                    classes[0].members.push((g, names));
                    if let Some(d) = &first_decision {
                        self.count_decision(d);
                    }
                    continue;
                }
            };
            if let Some(d) = planned.decision.take() {
                self.count_decision(&d);
                if i == 0 {
                    first_decision = Some(d);
                }
            }
            let names = self.placed_names(&planned);
            let same = classes.iter_mut().find(|c| {
                std::sync::Arc::ptr_eq(&c.schedule, &planned.schedule)
                    || (c.schedule.ops == planned.schedule.ops
                        && c.schedule.patterns == planned.schedule.patterns
                        && c.schedule.extra_endpoints.len()
                            == planned.schedule.extra_endpoints.len())
            });
            match same {
                Some(c) => c.members.push((g, names)),
                None => {
                    debug_assert!(i == 0 || planned_apart);
                    classes.push(PlanClass {
                        schedule: planned.schedule,
                        endpoint_names: names.clone(),
                        members: vec![(g, names)],
                    })
                }
            }
        }
        let mut sinks = Vec::new();
        for class in &classes {
            sinks.extend(self.embed_groups(&class.schedule, &class.members, &after, map_kind));
        }
        if sinks.is_empty() {
            return Ok(self.join(after));
        }
        Ok(self.join(sinks))
    }

    /// The step's names of a plan's extra endpoints, registering the endpoints it placed: a
    /// library-placed endpoint is named after its device, so groups sharing a device share
    /// the endpoint and groups on different ones do not.
    fn placed_names(&mut self, planned: &Planned) -> Vec<String> {
        for (name, dev) in &planned.placed {
            let global = format!("{name}@{}", dev.0);
            if !self.endpoint_index.contains_key(&global) {
                self.endpoint_position(&global);
                self.placed.push((global, *dev));
            }
        }
        planned
            .schedule
            .extra_endpoints
            .iter()
            .map(
                |name| match planned.placed.iter().find(|(n, _)| n == name) {
                    Some((_, dev)) => format!("{name}@{}", dev.0),
                    None => name.clone(),
                },
            )
            .collect()
    }

    /// The position of the step's extra endpoint `name`, added when new.
    fn endpoint_position(&mut self, name: &str) -> u32 {
        if let Some(&pos) = self.endpoint_index.get(name) {
            return pos;
        }
        let pos = self.s.extra_endpoints.len() as u32;
        self.s.extra_endpoints.push(name.to_string());
        self.endpoint_index.insert(name.to_string(), pos);
        pos
    }

    /// Counts one group's collective under the library's decision line.
    fn count_decision(&mut self, decision: &str) {
        let short = crate::library::choice(decision);
        match self.decisions.iter_mut().find(|(k, _)| k == short) {
            Some((_, count)) => *count += 1,
            None => self.decisions.push((short.to_string(), 1)),
        }
    }

    /// Embeds `sub` once over all `groups` (rank i of `sub` = `group[i]`, its j-th extra
    /// endpoint the step's endpoint named by the group's j-th name); returns the sinks.
    fn embed_groups(
        &mut self,
        sub: &Schedule,
        groups: &[(&Vec<u32>, Vec<String>)],
        after: &[OpId],
        map_kind: &dyn Fn(&Op) -> OpKind,
    ) -> Vec<OpId> {
        let maps: Vec<Vec<u32>> = groups
            .iter()
            .map(|(g, names)| {
                let mut m = (*g).clone();
                for name in names {
                    let pos = self.endpoint_position(name);
                    m.push(self.s.ranks + pos);
                }
                m
            })
            .collect();
        let refs: Vec<&[u32]> = maps.iter().map(|m| m.as_slice()).collect();
        let before = self.s.ops.len();
        let sinks = self.s.embed(sub, &refs, after, map_kind);
        self.lanes.extend((before..self.s.ops.len()).map(|_| None));
        sinks
    }

    fn spec(&self, collective: Collective, bytes: u64, algorithm: Algorithm) -> CollectiveSpec {
        CollectiveSpec {
            collective,
            bytes,
            root: 0,
            peer: 1,
            algorithm,
            slices: self.cfg.slices,
        }
    }

    pub fn transfer(
        &mut self,
        pairs: Vec<(u32, u32)>,
        bytes: u64,
        deps: Vec<OpId>,
        phase: Phase,
    ) -> OpId {
        if self.cfg.ablation == Ablation::FreeCommunication || pairs.is_empty() || bytes == 0 {
            return self.join(deps);
        }
        let p = self.s.add_pattern(pairs);
        self.lanes.push(None);
        self.s
            .push(OpKind::Transfer { pattern: p, bytes }, deps, phase, 0, 0)
    }
}

/// Builds one training step of `model` on `ranks` ranks (`fabric` answers the collective
/// generators' questions about the network; `planner` turns each collective into a schedule).
pub fn build(
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    ranks: u32,
    fabric: &dyn Fabric,
    planner: &dyn Planner,
) -> Result<StepDag, StepError> {
    let (tp, pp) = (cfg.tensor_parallel.max(1), cfg.pipeline_parallel.max(1));
    if cfg.batch_per_gpu == 0 {
        return Err(err("workload.batch_per_gpu", "at least 1"));
    }
    if !ranks.is_multiple_of(tp * pp) {
        return Err(err(
            "workload.tensor_parallel",
            format!("tensor_parallel × pipeline_parallel ({tp} × {pp}) dividing the {ranks} ranks"),
        ));
    }
    if pp as usize > model.layers.len() {
        return Err(err(
            "workload.pipeline_parallel",
            format!(
                "at most the model's {} layers, got {pp}",
                model.layers.len()
            ),
        ));
    }
    if cfg.accumulation_steps == 0 {
        return Err(err("workload.accumulation_steps", "at least 1"));
    }
    let dp = ranks / (tp * pp);
    let ep = cfg.expert_parallel.max(1);
    if ep > 1 {
        let Some(moe) = model.moe else {
            return Err(err(
                "workload.expert_parallel",
                format!("1 for {}, which has no experts", model.name),
            ));
        };
        if tp * pp > 1 || cfg.method != DpMethod::Ddp {
            return Err(err(
                "workload.expert_parallel",
                "expert parallelism under parallelism = \"ddp\" with tensor_parallel = \
                 pipeline_parallel = 1 (the combinations dtsim models so far)",
            ));
        }
        if !dp.is_multiple_of(ep) || !moe.experts.is_multiple_of(ep as u64) {
            return Err(err(
                "workload.expert_parallel",
                format!(
                    "a divisor of both the {dp} data-parallel ranks and the {} experts, got {ep}",
                    moe.experts
                ),
            ));
        }
    }
    if !(cfg.capacity_factor >= 1.0 && cfg.capacity_factor.is_finite()) {
        return Err(err(
            "workload.capacity_factor",
            format!("a factor of at least 1.0, got {}", cfg.capacity_factor),
        ));
    }
    let mut b = StepBuilder::new(ranks, fabric, planner, cfg);
    let mut dag = if tp == 1 && pp == 1 {
        data_parallel_step(&mut b, model, cm, cfg, ranks)?
    } else {
        if !matches!(
            cfg.method,
            DpMethod::Ddp | DpMethod::AllreduceAfterBackward | DpMethod::Zero1
        ) {
            return Err(err(
                "workload.parallelism",
                "ddp, allreduce_after_backward or zero1 (the distributed optimizer) with tensor \
                 or pipeline parallelism",
            ));
        }
        hybrid_step(&mut b, model, cm, cfg, dp, tp, pp)?
    };
    dag.schedule = b.s;
    dag.lanes = b.lanes;
    dag.placed = b.placed;
    dag.decisions = b.decisions;
    dag.ranks = ranks;
    dag.data_parallel = dp;
    debug_assert_eq!(dag.lanes.len(), dag.schedule.ops.len());
    Ok(dag)
}

fn empty_dag() -> StepDag {
    StepDag {
        schedule: Schedule::new(Collective::AllReduce, "", 0, 0),
        lanes: Vec::new(),
        lane_count: 1,
        ranks: 0,
        data_parallel: 0,
        global_batch: 0,
        stages: Vec::new(),
        buckets: Vec::new(),
        placed: Vec::new(),
        decisions: Vec::new(),
    }
}

/// Gradient buckets in reverse layer order: (bytes, lowest layer, highest layer).
fn buckets(model: &Model, dtype: Dtype, first: u64, cap: u64) -> Vec<(u64, usize, usize)> {
    let mut out = Vec::new();
    let mut cur = 0u64;
    let mut hi = None;
    let mut lo = 0;
    for (i, l) in model.layers.iter().enumerate().rev() {
        if l.params == 0 {
            continue;
        }
        if hi.is_none() {
            hi = Some(i);
        }
        cur += l.params * dtype.bytes();
        lo = i;
        let limit = if out.is_empty() { first } else { cap };
        if cur >= limit {
            out.push((cur, lo, hi.take().unwrap_or(i)));
            cur = 0;
        }
    }
    if cur > 0 {
        out.push((cur, lo, hi.unwrap_or(lo)));
    }
    out
}

fn data_parallel_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    n: u32,
) -> Result<StepDag, StepError> {
    let all: Vec<u32> = (0..n).collect();
    let times: Vec<_> = model
        .layers
        .iter()
        .map(|l| cm.layer_times(&model.name, l, cfg.batch_per_gpu, 1))
        .collect();
    if cfg.method == DpMethod::Fsdp {
        return fsdp_step(b, model, cm, cfg, &all, &times);
    }
    if let (Some(moe), true) = (model.moe, cfg.expert_parallel > 1) {
        return moe_step(b, model, moe, cm, cfg, n);
    }
    let grad_bytes = model.params() * cfg.dtype.bytes();
    let e = cfg.dtype.bytes();
    let mut prev: Vec<OpId> = Vec::new();
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * n as u64 * cfg.accumulation_steps as u64;
    dag.stages = std::iter::once(0..model.layers.len()).collect();
    let single_process = cfg.method == DpMethod::DataParallel;
    if single_process {
        // GPU 0 holds the batch and the parameters: scatter inputs, replicate parameters.
        let others: Vec<(u32, u32)> = (1..n).map(|i| (0, i)).collect();
        let inputs = b.transfer(
            others,
            cfg.batch_per_gpu * model.input_elems * e,
            vec![],
            Phase::SendRecv,
        );
        let spec = b.spec(
            Collective::Broadcast,
            grad_bytes,
            cfg.algorithm_for(Collective::Broadcast),
        );
        let rep = b.collective(spec, std::slice::from_ref(&all), vec![], &|op| {
            op.kind.clone()
        })?;
        prev = vec![inputs, rep];
    }
    let ddp = cfg.method == DpMethod::Ddp;
    let sharded = cfg.method.zero_stage() > 0;
    let bucketed = ddp || sharded || cfg.method == DpMethod::ParameterServer;
    let plan = buckets(model, cfg.dtype, cfg.first_bucket_bytes, cfg.bucket_bytes);
    let mut bwd_op = vec![OpId(0); model.layers.len()];
    let mut comm_done: Vec<OpId> = Vec::new();
    for micro in 0..cfg.accumulation_steps {
        let last = micro + 1 == cfg.accumulation_steps;
        for (i, t) in times.iter().enumerate() {
            let f = b.compute(n, t.forward, prev.clone(), Phase::Forward, 0, i as u32);
            prev = vec![f];
        }
        if single_process {
            // Gather outputs to GPU 0, loss there, scatter the output gradients back.
            let out_bytes =
                cfg.batch_per_gpu * model.layers.last().map(|l| l.output_elems).unwrap_or(0) * e;
            let g = b.transfer(
                (1..n).map(|i| (i, 0)).collect(),
                out_bytes,
                prev.clone(),
                Phase::SendRecv,
            );
            let s = b.transfer(
                (1..n).map(|i| (0, i)).collect(),
                out_bytes,
                vec![g],
                Phase::SendRecv,
            );
            prev = vec![s];
        }
        for (i, t) in times.iter().enumerate().rev() {
            let mut d = t.backward;
            if cfg.recompute {
                d = d.saturating_add(t.forward);
            }
            if ddp && last {
                d = d.saturating_add(cm.ddp_overhead(model.layers[i].param_tensors));
            }
            let op = b.compute(n, d, prev.clone(), Phase::Backward, 0, i as u32);
            bwd_op[i] = op;
            prev = vec![op];
        }
    }
    let backward_done = prev[0];
    let optimizer = cm.optimizer_time(model.params(), model.param_tensors(), cfg.optimizer);
    let is_ps = cfg.method == DpMethod::ParameterServer;
    let update = move |op: &Op| match op.kind {
        OpKind::Reduce { endpoints, .. } if is_ps => OpKind::Compute {
            endpoints,
            duration: SimTime::from_secs_f64(optimizer.as_secs_f64() / cfg.servers.max(1) as f64),
        },
        ref k => k.clone(),
    };
    let mut last_comm: Option<OpId> = None;
    if bucketed {
        let algorithm = if cfg.method == DpMethod::ParameterServer {
            Algorithm::ParameterServer {
                servers: cfg.servers,
                colocated: cfg.colocated,
            }
        } else if sharded {
            cfg.algorithm_for(Collective::ReduceScatter)
        } else {
            cfg.algorithm.clone()
        };
        let collective = if sharded {
            Collective::ReduceScatter
        } else {
            Collective::AllReduce
        };
        for &(bytes, lo, _) in &plan {
            let mut after = vec![bwd_op[lo]];
            after.extend(last_comm);
            let spec = b.spec(collective, bytes, algorithm.clone());
            let done = b.collective(spec, std::slice::from_ref(&all), after, &update)?;
            last_comm = Some(done);
            comm_done.push(done);
        }
        dag.buckets = plan.clone();
    } else if cfg.method == DpMethod::AllreduceAfterBackward {
        let spec = b.spec(Collective::AllReduce, grad_bytes, cfg.algorithm.clone());
        comm_done.push(b.collective(
            spec,
            std::slice::from_ref(&all),
            vec![backward_done],
            &update,
        )?);
    } else {
        let spec = b.spec(
            Collective::Reduce,
            grad_bytes,
            cfg.algorithm_for(Collective::Reduce),
        );
        comm_done.push(b.collective(
            spec,
            std::slice::from_ref(&all),
            vec![backward_done],
            &update,
        )?);
    }
    let mut deps = vec![backward_done];
    deps.extend(comm_done);
    if cfg.method == DpMethod::ParameterServer {
        // The servers updated the parameters; the step ends with the last pull.
        b.join(deps);
    } else if sharded {
        // Each rank updates its shard, then the buckets' parameters are all-gathered (one
        // stream, in bucket order).
        let shard = model.params().div_ceil(n as u64);
        let tensors = model.param_tensors().div_ceil(n).max(1);
        let update = cm.optimizer_time(shard, tensors, cfg.optimizer);
        let opt = b.compute(n, update, deps, Phase::Optimizer, 0, 0);
        let mut last = opt;
        let mut gathers = Vec::new();
        for &(bytes, _, _) in &plan {
            let spec = b.spec(
                Collective::AllGather,
                bytes,
                cfg.algorithm_for(Collective::AllGather),
            );
            last = b.collective(spec, std::slice::from_ref(&all), vec![last], &|op| {
                op.kind.clone()
            })?;
            gathers.push(last);
        }
        b.join(gathers);
    } else {
        let endpoints = if single_process { 1 } else { n };
        b.compute(endpoints, optimizer, deps, Phase::Optimizer, 0, 0);
    }
    dag.lane_count = 1;
    Ok(dag)
}

/// A mixture-of-experts step under DDP with expert parallelism `ep` over `n` ranks: groups of
/// `ep` consecutive ranks each hold every expert once. Around each MoE block, forward and
/// backward, an all-to-all moves each rank's tokens to the ranks of their experts and one
/// brings them back; each of those is `capacity_factor × k × tokens × hidden` elements per
/// rank (the buffers padded to the experts' capacity), and the experts' compute is padded the
/// same way. Dense gradients go in DDP buckets over all ranks; each MoE block's expert
/// gradients are all-reduced among the `n / ep` ranks holding the same experts, on the same
/// stream in the order the backward pass produces them.
fn moe_step(
    b: &mut StepBuilder,
    model: &Model,
    moe: super::catalog::MoeShape,
    cm: &ComputeModel,
    cfg: &StepConfig,
    n: u32,
) -> Result<StepDag, StepError> {
    use super::catalog::LayerKind;
    let ep = cfg.expert_parallel;
    let e = cfg.dtype.bytes();
    let cf = cfg.capacity_factor;
    let all: Vec<u32> = (0..n).collect();
    let ep_groups: Vec<Vec<u32>> = (0..n / ep)
        .map(|g| (g * ep..(g + 1) * ep).collect())
        .collect();
    let replicas: Vec<Vec<u32>> = (0..ep)
        .map(|p| (0..n / ep).map(|g| g * ep + p).collect())
        .collect();
    let is_moe = |i: usize| model.layers[i].kind == LayerKind::MoeBlock;
    let times: Vec<_> = model
        .layers
        .iter()
        .map(|l| {
            if l.kind == LayerKind::MoeBlock {
                let padded = super::catalog::Layer {
                    forward_flops: (l.forward_flops as f64 * cf).round() as u64,
                    ..l.clone()
                };
                cm.layer_times(&model.name, &padded, cfg.batch_per_gpu, 1)
            } else {
                cm.layer_times(&model.name, l, cfg.batch_per_gpu, 1)
            }
        })
        .collect();
    let a2a_bytes = |i: usize| {
        (model.layers[i].input_elems as f64
            * cfg.batch_per_gpu as f64
            * moe.experts_per_token as f64
            * cf
            * e as f64)
            .round() as u64
    };
    let a2a = |b: &mut StepBuilder, i: usize, after: OpId| -> Result<OpId, StepError> {
        let spec = b.spec(
            Collective::AllToAll,
            a2a_bytes(i),
            cfg.algorithm_for(Collective::AllToAll),
        );
        b.collective(spec, &ep_groups, vec![after], &|op| op.kind.clone())
    };
    // Dense gradients: the model's buckets without the experts.
    let mut dense = model.clone();
    for l in dense
        .layers
        .iter_mut()
        .filter(|l| l.kind == LayerKind::MoeBlock)
    {
        l.params -= moe.expert_params_per_block;
    }
    let plan = buckets(&dense, cfg.dtype, cfg.first_bucket_bytes, cfg.bucket_bytes);
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * n as u64 * cfg.accumulation_steps as u64;
    dag.stages = std::iter::once(0..model.layers.len()).collect();
    let mut prev: Option<OpId> = None;
    let mut bwd_op = vec![OpId(0); model.layers.len()];
    for micro in 0..cfg.accumulation_steps {
        let last = micro + 1 == cfg.accumulation_steps;
        for (i, t) in times.iter().enumerate() {
            let mut deps: Vec<OpId> = prev.into_iter().collect();
            if is_moe(i) {
                let start = b.join(deps);
                deps = vec![a2a(b, i, start)?];
            }
            let mut f = b.compute(n, t.forward, deps, Phase::Forward, 0, i as u32);
            if is_moe(i) {
                f = a2a(b, i, f)?;
            }
            prev = Some(f);
        }
        for (i, t) in times.iter().enumerate().rev() {
            let mut deps: Vec<OpId> = prev.into_iter().collect();
            if is_moe(i) {
                let start = b.join(deps);
                deps = vec![a2a(b, i, start)?];
            }
            let mut d = t.backward;
            if cfg.recompute {
                d = d.saturating_add(t.forward);
            }
            if last {
                d = d.saturating_add(cm.ddp_overhead(model.layers[i].param_tensors));
            }
            let mut op = b.compute(n, d, deps, Phase::Backward, 0, i as u32);
            bwd_op[i] = op;
            if is_moe(i) {
                op = a2a(b, i, op)?;
            }
            prev = Some(op);
        }
    }
    // Gradient exchanges on one stream, in the order the backward pass makes them ready.
    let mut items: Vec<(usize, u64, bool)> = plan
        .iter()
        .map(|&(bytes, lo, _)| (lo, bytes, false))
        .collect();
    if n / ep > 1 {
        items.extend(
            (0..model.layers.len())
                .filter(|&i| is_moe(i))
                .map(|i| (i, moe.expert_params_per_block / ep as u64 * e, true)),
        );
    }
    items.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
    let mut stream: Option<OpId> = None;
    let mut done = Vec::new();
    for (layer, bytes, expert) in items {
        let mut after = vec![bwd_op[layer]];
        after.extend(stream);
        let spec = b.spec(Collective::AllReduce, bytes, cfg.algorithm.clone());
        let groups = if expert {
            &replicas
        } else {
            std::slice::from_ref(&all)
        };
        let op = b.collective(spec, groups, after, &|op| op.kind.clone())?;
        stream = Some(op);
        done.push(op);
    }
    dag.buckets = plan;
    let params = dense.params()
        + moe.expert_params_per_block / ep as u64
            * model
                .layers
                .iter()
                .filter(|l| l.kind == LayerKind::MoeBlock)
                .count() as u64;
    let mut deps: Vec<OpId> = prev.into_iter().collect();
    deps.extend(done);
    let update = cm.optimizer_time(params, model.param_tensors(), cfg.optimizer);
    b.compute(n, update, deps, Phase::Optimizer, 0, 0);
    dag.lane_count = 1;
    Ok(dag)
}

/// ZeRO-3 / FSDP over `all` ranks: per layer with parameters, an all-gather of its parameters
/// before its forward and before its backward, a reduce-scatter of its gradients after its
/// backward, all on one communication stream in issue order. Gathers run at most one layer
/// ahead of the compute (FSDP's forward and backward prefetch with its limit on gathers in
/// flight): layer i's gather waits for layer i − 2's compute (i + 2 in the backward pass).
/// Each rank then updates its 1/n shard.
fn fsdp_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    all: &[u32],
    times: &[super::compute::PassTimes],
) -> Result<StepDag, StepError> {
    let n = all.len() as u32;
    let e = cfg.dtype.bytes();
    let groups = [all.to_vec()];
    let nl = model.layers.len();
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * n as u64 * cfg.accumulation_steps as u64;
    dag.stages = std::iter::once(0..nl).collect();
    let mut stream: Option<OpId> = None;
    let mut prev: Option<OpId> = None;
    let mut scatters = Vec::new();
    let comm = |b: &mut StepBuilder,
                c: Collective,
                bytes: u64,
                mut after: Vec<OpId>,
                stream: &mut Option<OpId>|
     -> Result<OpId, StepError> {
        after.extend(*stream);
        let spec = b.spec(c, bytes, cfg.algorithm_for(c));
        let done = b.collective(spec, &groups, after, &|op| op.kind.clone())?;
        *stream = Some(done);
        Ok(done)
    };
    for _ in 0..cfg.accumulation_steps {
        let mut fwd: Vec<Option<OpId>> = vec![None; nl];
        for (i, t) in times.iter().enumerate() {
            let mut deps: Vec<OpId> = prev.into_iter().collect();
            if model.layers[i].params > 0 {
                let ahead: Vec<OpId> = i.checked_sub(2).and_then(|j| fwd[j]).into_iter().collect();
                let bytes = model.layers[i].params * e;
                deps.push(comm(b, Collective::AllGather, bytes, ahead, &mut stream)?);
            }
            let f = b.compute(n, t.forward, deps, Phase::Forward, 0, i as u32);
            fwd[i] = Some(f);
            prev = Some(f);
        }
        let mut bwd: Vec<Option<OpId>> = vec![None; nl];
        for (i, t) in times.iter().enumerate().rev() {
            let mut deps: Vec<OpId> = prev.into_iter().collect();
            let bytes = model.layers[i].params * e;
            if bytes > 0 {
                let ahead: Vec<OpId> = bwd.get(i + 2).copied().flatten().into_iter().collect();
                deps.push(comm(b, Collective::AllGather, bytes, ahead, &mut stream)?);
            }
            let d = if cfg.recompute {
                t.backward.saturating_add(t.forward)
            } else {
                t.backward
            };
            let op = b.compute(n, d, deps, Phase::Backward, 0, i as u32);
            bwd[i] = Some(op);
            prev = Some(op);
            if bytes > 0 {
                scatters.push(comm(
                    b,
                    Collective::ReduceScatter,
                    bytes,
                    vec![op],
                    &mut stream,
                )?);
            }
        }
    }
    let shard = model.params().div_ceil(n as u64);
    let tensors = model.param_tensors().div_ceil(n).max(1);
    let mut deps: Vec<OpId> = prev.into_iter().collect();
    deps.extend(scatters);
    let update = cm.optimizer_time(shard, tensors, cfg.optimizer);
    b.compute(n, update, deps, Phase::Optimizer, 0, 0);
    dag.lane_count = 1;
    Ok(dag)
}

impl StepConfig {
    /// The configured algorithm when it implements `c`, else the default for `c`.
    fn algorithm_for(&self, c: Collective) -> Algorithm {
        if self.algorithm.supports(c) {
            self.algorithm.clone()
        } else {
            crate::collective::default_algorithm(c)
        }
    }
}

/// Cuts layers into `pp` contiguous, non-empty stages (forward + backward time per layer in
/// `costs`): the slowest stage as fast as any cut allows (bisection on the bound under which
/// packing the layers in order needs at most `pp` stages), and under that bound the stages
/// as even as they can be (least sum of squared stage times, by dynamic programming). A greedy
/// cut at the running `total x k / pp` overshoots by up to a layer per stage; packing under
/// the bound alone leaves a stage nearly empty when one layer (an LM head) sets the bound.
fn partition(costs: &[f64], pp: usize) -> Vec<std::ops::Range<usize>> {
    let n = costs.len();
    let pp = pp.clamp(1, n.max(1));
    if n == 0 {
        // No layers: every stage empty.
        return (0..pp).map(|_| 0..0).collect();
    }
    let stages_under = |bound: f64| -> usize {
        let (mut stages, mut acc) = (1, 0.0);
        for &c in costs {
            if acc + c > bound && acc > 0.0 {
                stages += 1;
                acc = 0.0;
            }
            acc += c;
        }
        stages
    };
    let total: f64 = costs.iter().sum();
    let (mut lo, mut hi) = (costs.iter().copied().fold(0.0, f64::max), total);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if stages_under(mid) <= pp {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let bound = hi * (1.0 + 1e-12);
    let mut prefix = vec![0.0; n + 1];
    for i in 0..n {
        prefix[i + 1] = prefix[i] + costs[i];
    }
    // best[k][i]: least sum of squares of the first i layers in k stages, each under the
    // bound; from[k][i]: where the k-th stage starts.
    let mut best = vec![vec![f64::INFINITY; n + 1]; pp + 1];
    let mut from = vec![vec![0usize; n + 1]; pp + 1];
    best[0][0] = 0.0;
    for k in 1..=pp {
        for i in k..=n - (pp - k) {
            for j in (k - 1)..i {
                let load = prefix[i] - prefix[j];
                if load > bound || best[k - 1][j].is_infinite() {
                    continue;
                }
                let v = best[k - 1][j] + load * load;
                if v < best[k][i] {
                    best[k][i] = v;
                    from[k][i] = j;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(pp);
    let mut end = n;
    for k in (1..=pp).rev() {
        let start = from[k][end];
        out.push(start..end);
        end = start;
    }
    out.reverse();
    out
}

fn hybrid_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    dp: u32,
    tp: u32,
    pp: u32,
) -> Result<StepDag, StepError> {
    let m = cfg.microbatches.max(1);
    if !cfg.batch_per_gpu.is_multiple_of(m as u64) {
        return Err(err(
            "workload.microbatches",
            format!(
                "a divisor of batch_per_gpu ({}), got {m}",
                cfg.batch_per_gpu
            ),
        ));
    }
    let mb = cfg.batch_per_gpu / m as u64;
    let e = cfg.dtype.bytes();
    let rank = |stage: u32, replica: u32, t: u32| (stage * dp + replica) * tp + t;
    let split = |l: &super::catalog::Layer| {
        if l.kind.tensor_parallel() {
            tp as u64
        } else {
            1
        }
    };
    let times: Vec<_> = model
        .layers
        .iter()
        .map(|l| cm.layer_times(&model.name, l, mb, split(l)))
        .collect();
    let costs: Vec<f64> = times
        .iter()
        .map(|t| t.forward.as_secs_f64() + t.backward.as_secs_f64())
        .collect();
    let stages = partition(&costs, pp as usize);
    let per_stage = dp * tp;
    let tp_groups = |s: u32| -> Vec<Vec<u32>> {
        (0..dp)
            .map(|r| (0..tp).map(|t| rank(s, r, t)).collect())
            .collect()
    };
    // Sends between stage s and s+1: every (replica, tp rank) to its counterpart.
    let pairs = |from: u32, to: u32| -> Vec<(u32, u32)> {
        (0..dp)
            .flat_map(|r| (0..tp).map(move |t| (r, t)))
            .map(|(r, t)| (rank(from, r, t), rank(to, r, t)))
            .collect()
    };
    // Order of (is_forward, microbatch) on each stage.
    let order = |s: u32| -> Vec<(bool, u32)> {
        match cfg.pipeline_schedule {
            PipelineSchedule::Gpipe => (0..m)
                .map(|i| (true, i))
                .chain((0..m).map(|i| (false, i)))
                .collect(),
            PipelineSchedule::OneFOneB => {
                let warm = (pp - s - 1).min(m);
                let mut v: Vec<(bool, u32)> = (0..warm).map(|i| (true, i)).collect();
                for i in 0..(m - warm) {
                    v.push((true, warm + i));
                    v.push((false, i));
                }
                v.extend((m - warm..m).map(|i| (false, i)));
                v
            }
        }
    };
    // Ops that deliver microbatch i's activation to stage s (fwd) / gradient to stage s (bwd).
    let mut act_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; pp as usize];
    let mut grad_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; pp as usize];
    let mut cursor = vec![0usize; pp as usize];
    let orders: Vec<Vec<(bool, u32)>> = (0..pp).map(order).collect();
    let mut last_on_stage: Vec<Option<OpId>> = vec![None; pp as usize];
    let tp_spec = |bytes: u64| CollectiveSpec {
        collective: Collective::AllReduce,
        bytes,
        root: 0,
        peer: 1,
        algorithm: cfg.algorithm.clone(),
        slices: cfg.slices,
    };
    // Walk the stages round-robin, emitting each stage's next item once its input exists
    // (ops must be pushed after their dependencies).
    let total_items: usize = orders.iter().map(|o| o.len()).sum();
    let mut emitted = 0;
    while emitted < total_items {
        let mut progressed = false;
        for s in 0..pp {
            let su = s as usize;
            while cursor[su] < orders[su].len() {
                let (fwd, i) = orders[su][cursor[su]];
                let iu = i as usize;
                let input = if fwd {
                    if s == 0 {
                        Some(None)
                    } else {
                        act_in[su][iu].map(Some)
                    }
                } else if s + 1 == pp {
                    Some(None)
                } else {
                    grad_in[su][iu].map(Some)
                };
                let Some(input) = input else { break };
                let mut prev: Vec<OpId> = last_on_stage[su].into_iter().chain(input).collect();
                let range = stages[su].clone();
                let layers: Vec<usize> = if fwd {
                    range.collect()
                } else {
                    range.rev().collect()
                };
                let mut pending = SimTime::ZERO;
                let mut first_layer = layers[0] as u32;
                for (k, &l) in layers.iter().enumerate() {
                    let t = &times[l];
                    let layer = &model.layers[l];
                    let comm = tp > 1 && layer.kind.tensor_parallel();
                    if !fwd && cfg.recompute {
                        // Full recomputation: the layer's forward again (with its tensor-
                        // parallel all-reduce) right before its backward.
                        pending = pending.saturating_add(t.forward);
                        if comm {
                            let op = b.compute(
                                per_stage,
                                pending,
                                prev.clone(),
                                Phase::Backward,
                                s as u16,
                                first_layer,
                            );
                            pending = SimTime::ZERO;
                            let bytes = layer.output_elems * mb * e;
                            let done =
                                b.collective(tp_spec(bytes), &tp_groups(s), vec![op], &|op| {
                                    op.kind.clone()
                                })?;
                            prev = vec![done];
                        }
                    }
                    pending = pending.saturating_add(if fwd { t.forward } else { t.backward });
                    if comm || k + 1 == layers.len() {
                        let phase = if fwd { Phase::Forward } else { Phase::Backward };
                        let op = b.compute(
                            per_stage,
                            pending,
                            prev.clone(),
                            phase,
                            s as u16,
                            first_layer,
                        );
                        prev = vec![op];
                        pending = SimTime::ZERO;
                        if comm {
                            let bytes = layer.output_elems * mb * e;
                            let done =
                                b.collective(tp_spec(bytes), &tp_groups(s), prev.clone(), &|op| {
                                    op.kind.clone()
                                })?;
                            prev = vec![done];
                        }
                        first_layer = layers.get(k + 1).copied().unwrap_or(0) as u32;
                    }
                }
                let end = prev[0];
                last_on_stage[su] = Some(end);
                let boundary = if fwd {
                    stages[su].end - 1
                } else {
                    stages[su].start
                };
                let bytes = if fwd {
                    model.layers[boundary].output_elems
                } else {
                    model.layers[boundary].input_elems
                } * mb
                    * e
                    / tp as u64;
                if fwd && s + 1 < pp {
                    act_in[su + 1][iu] =
                        Some(b.transfer(pairs(s, s + 1), bytes, vec![end], Phase::SendRecv));
                } else if !fwd && s > 0 {
                    grad_in[su - 1][iu] =
                        Some(b.transfer(pairs(s, s - 1), bytes, vec![end], Phase::SendRecv));
                }
                cursor[su] += 1;
                emitted += 1;
                progressed = true;
            }
        }
        if !progressed {
            return Err(err(
                "workload.pipeline_schedule",
                "a schedule without deadlock (internal error)",
            ));
        }
    }
    // Per stage: gradient all-reduce across replicas, then the optimizer.
    let mut ends = Vec::new();
    for s in 0..pp {
        let su = s as usize;
        let range = stages[su].clone();
        let params: u64 = model.layers[range.clone()]
            .iter()
            .map(|l| l.params / split(l))
            .sum();
        let tensors: u32 = model.layers[range].iter().map(|l| l.param_tensors).sum();
        let after: Vec<OpId> = last_on_stage[su].into_iter().collect();
        let groups: Vec<Vec<u32>> = if dp > 1 {
            (0..tp)
                .map(|t| (0..dp).map(|r| rank(s, r, t)).collect())
                .collect()
        } else {
            Vec::new()
        };
        if cfg.method == DpMethod::Zero1 && !groups.is_empty() {
            // The distributed optimizer: reduce-scatter the gradients, update the 1/dp shard,
            // all-gather the parameters.
            let spec = |c: Collective| CollectiveSpec {
                collective: c,
                algorithm: cfg.algorithm_for(c),
                ..tp_spec(params * e)
            };
            let rs = b.collective(spec(Collective::ReduceScatter), &groups, after, &|op| {
                op.kind.clone()
            })?;
            let shard = params.div_ceil(dp as u64);
            let opt = cm.optimizer_time(shard, tensors.div_ceil(dp).max(1), cfg.optimizer);
            let opt = b.compute(per_stage, opt, vec![rs], Phase::Optimizer, s as u16, 0);
            ends.push(
                b.collective(spec(Collective::AllGather), &groups, vec![opt], &|op| {
                    op.kind.clone()
                })?,
            );
            continue;
        }
        let done = if groups.is_empty() {
            b.join(after)
        } else {
            b.collective(tp_spec(params * e), &groups, after, &|op| op.kind.clone())?
        };
        let opt = cm.optimizer_time(params, tensors, cfg.optimizer);
        ends.push(b.compute(per_stage, opt, vec![done], Phase::Optimizer, s as u16, 0));
    }
    b.join(ends);
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * dp as u64;
    dag.stages = stages;
    dag.lane_count = pp as u16;
    Ok(dag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_in_reverse_layer_order_up_to_the_cap() {
        let m = crate::workload::catalog::resnet(50, 1000);
        let plan = buckets(&m, Dtype::Fp32, 25 << 20, 25 << 20);
        let total: u64 = plan.iter().map(|b| b.0).sum();
        assert_eq!(total, m.params() * 4);
        // The first bucket holds the fc layer (the last layer) and is sent first.
        assert_eq!(plan[0].2, m.layers.len() - 1);
        for w in plan.windows(2) {
            assert!(w[1].2 < w[0].1, "buckets are disjoint and in reverse order");
        }
        assert!(plan[..plan.len() - 1].iter().all(|b| b.0 >= 25 << 20));
        let small_first = buckets(&m, Dtype::Fp32, 1 << 20, 25 << 20);
        assert!(small_first[0].0 < plan[0].0);
    }

    /// The slowest stage of `p`.
    fn slowest(costs: &[f64], p: &[std::ops::Range<usize>]) -> f64 {
        p.iter()
            .map(|r| costs[r.clone()].iter().sum::<f64>())
            .fold(0.0, f64::max)
    }

    /// Slow reference: every way to cut `costs` into `pp` non-empty contiguous stages.
    fn best_slowest(costs: &[f64], pp: usize) -> f64 {
        fn go(costs: &[f64], pp: usize) -> f64 {
            if pp == 1 {
                return costs.iter().sum();
            }
            (1..=costs.len() - (pp - 1))
                .map(|i| costs[..i].iter().sum::<f64>().max(go(&costs[i..], pp - 1)))
                .fold(f64::INFINITY, f64::min)
        }
        go(costs, pp)
    }

    #[test]
    fn the_slowest_stage_is_as_fast_as_any_contiguous_cut_allows() {
        let mut rng = crate::engine::SimRng::new(11, 0);
        for case in 0..300 {
            let n = 1 + (case % 9);
            let costs: Vec<f64> = (0..n).map(|_| (rng.below(100) as f64) / 10.0).collect();
            for pp in 1..=n {
                let p = partition(&costs, pp);
                assert_eq!(p.len(), pp, "{costs:?} into {pp}");
                assert_eq!((p[0].start, p[pp - 1].end), (0, n));
                assert!(p.windows(2).all(|w| w[0].end == w[1].start));
                assert!(
                    p.iter().all(|r| !r.is_empty()),
                    "{costs:?} into {pp}: {p:?}"
                );
                let (got, best) = (slowest(&costs, &p), best_slowest(&costs, pp));
                assert!(
                    got <= best * (1.0 + 1e-9) + 1e-12,
                    "{costs:?} into {pp}: {got} > {best}"
                );
            }
        }
    }

    #[test]
    fn one_heavy_last_layer_leaves_the_others_evenly_split() {
        // 24 equal blocks and a head worth 11 of them, on 4 stages: the head alone sets the
        // bound; the blocks split 8 / 8 / 8, not 11 / 11 / 2.
        let mut costs = vec![1.0; 24];
        costs.push(11.0);
        let p = partition(&costs, 4);
        assert_eq!(p, vec![0..8, 8..16, 16..24, 24..25]);
    }

    #[test]
    fn stages_are_contiguous_and_balanced() {
        let p = partition(&[1.0, 1.0, 1.0, 1.0, 4.0], 2);
        assert_eq!(p, vec![0..4, 4..5]);
        let p = partition(&[1.0; 10], 3);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].start, 0);
        assert_eq!(p[2].end, 10);
        let p = partition(&[5.0, 0.0, 0.0], 3);
        assert_eq!(p, vec![0..1, 1..2, 2..3]);
    }
}
