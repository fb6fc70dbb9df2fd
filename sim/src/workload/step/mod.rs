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
//!
//! This module holds the configuration, the built [`StepDag`], the [`Planner`]s and
//! [`build`]; `builder` the [`StepBuilder`] every step is made with; the steps themselves are in
//! `data_parallel` (DDP, parameter servers, ZeRO-1/2), `sharded` (ZeRO-3 / FSDP), `moe`
//! (expert parallelism) and `pipeline` (tensor, pipeline and hybrid parallelism).

use serde::Deserialize;

use super::catalog::Model;
use super::compute::{ComputeModel, Dtype, Optimizer};
use super::eager::Execution;
use crate::collective::{
    generate, Algorithm, Collective, CollectiveError, CollectiveSpec, Fabric, Op, OpId, OpKind,
    Phase, Schedule,
};
use crate::engine::SimTime;
use crate::topology::DeviceId;

mod builder;
mod data_parallel;
mod mesh;
mod moe;
mod pipeline;
mod sharded;
mod stages;

pub use builder::StepBuilder;
use data_parallel::data_parallel_step;
pub use mesh::{Axis, Mesh, RankOrder};
use pipeline::hybrid_step;
pub(crate) use stages::stage_order;

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

/// How context-parallel ranks exchange attention's keys and values (Megatron-core's
/// `--cp-comm-type`, Transformer Engine's implementations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpComm {
    /// Ring attention: keys and values shifted round the CP ring, overlapping the pieces.
    #[default]
    P2p,
    /// Keys and values all-gathered over the CP group before attention (again before its
    /// backward), their gradients reduce-scattered after it.
    AllGather,
    /// DeepSpeed-Ulysses: an all-to-all turns sequence shards of queries, keys and values into
    /// head shards of the whole sequence, and one turns the output back.
    A2a,
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
    /// Model chunks per pipeline stage: more than 1 is Megatron's interleaved 1F1B.
    pub virtual_stages: u32,
    /// How the TP × CP × DP × PP mesh is laid out over the ranks, innermost axis first.
    pub rank_order: RankOrder,
    /// Context-parallel group size: each sequence split over this many ranks, attention's
    /// keys and values passed round their ring.
    pub context_parallel: u32,
    /// How the context-parallel ranks exchange keys and values.
    pub context_parallel_comm: CpComm,
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
            virtual_stages: 1,
            rank_order: RankOrder::default(),
            context_parallel: 1,
            context_parallel_comm: CpComm::P2p,
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
    /// Which layers each stage holds (index ranges into the model's layers); with
    /// `virtual_stages = v > 1`, the `pp × v` chunks in pipeline order, GPU stage `s` holding
    /// entries `s, s + pp, ...`.
    pub stages: Vec<std::ops::Range<usize>>,
    /// Model chunks per GPU stage (1 without interleaving).
    pub virtual_stages: u32,
    /// The ranks of each lane when they are not consecutive blocks (a `rank_order` other than
    /// TP innermost and stages outermost); empty otherwise.
    pub lane_ranks: Vec<Vec<u32>>,
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
    build_with(model, cm, cfg, ranks, fabric, planner, Builder::ByMesh)
}

/// Which builder lays a step out. `build` takes the data-parallel one when TP = CP = PP = 1
/// and Megatron's otherwise; the Megatron builder forced at TP = CP = PP = 1 must give the
/// data-parallel step without overlap, which a test holds it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builder {
    ByMesh,
    Megatron,
}

/// [`build`] with the builder named.
pub fn build_with(
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    ranks: u32,
    fabric: &dyn Fabric,
    planner: &dyn Planner,
    builder: Builder,
) -> Result<StepDag, StepError> {
    let (tp, pp) = (cfg.tensor_parallel.max(1), cfg.pipeline_parallel.max(1));
    let cp = cfg.context_parallel.max(1);
    if cfg.batch_per_gpu == 0 {
        return Err(err("workload.batch_per_gpu", "at least 1"));
    }
    if !ranks.is_multiple_of(tp * cp * pp) {
        return Err(err(
            "workload.tensor_parallel",
            format!(
                "tensor_parallel × context_parallel × pipeline_parallel ({tp} × {cp} × {pp}) \
                 dividing the {ranks} ranks"
            ),
        ));
    }
    if cp > 1 {
        let tokens = model.tokens_per_sample.unwrap_or(0);
        if !model.layers.iter().any(|l| l.kv_elems > 0) {
            return Err(err(
                "workload.context_parallel",
                format!(
                    "1 for {}, which has no attention blocks with known keys and values \
                     (context parallelism needs a catalog or [workload.transformer] model)",
                    model.name
                ),
            ));
        }
        // Ulysses gives each rank whole heads: the key/value heads (query groups) of every
        // attention block split over the TP x CP ranks (Transformer Engine's a2a check).
        let split_heads = |l: &&crate::workload::catalog::Layer| {
            l.kv_heads > 0 && !l.kv_heads.is_multiple_of((tp * cp) as u64)
        };
        if let (CpComm::A2a, Some(l)) = (
            cfg.context_parallel_comm,
            model.layers.iter().find(split_heads),
        ) {
            return Err(err(
                "workload.context_parallel_comm",
                format!(
                    "\"p2p\" or \"all_gather\" for {}: \"a2a\" (Ulysses) splits the {} key/value \
                     heads of each attention block over tensor_parallel x context_parallel \
                     ({tp} x {cp}) ranks, which must divide them",
                    model.name, l.kv_heads
                ),
            ));
        }
        if !tokens.is_multiple_of(2 * cp as u64) {
            return Err(err(
                "workload.context_parallel",
                format!(
                    "a size whose double divides the {tokens}-token sequence (Megatron splits \
                     it into 2 x context_parallel chunks), got {cp}"
                ),
            ));
        }
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
    let dp = ranks / (tp * cp * pp);
    let ep = cfg.expert_parallel.max(1);
    if ep > 1 {
        let Some(moe) = model.moe else {
            return Err(err(
                "workload.expert_parallel",
                format!("1 for {}, which has no experts", model.name),
            ));
        };
        let megatron = tp * cp * pp > 1;
        let modelled = matches!(cfg.method, DpMethod::Ddp | DpMethod::Zero1)
            || (!megatron && cfg.method == DpMethod::Zero2)
            || (megatron && cfg.method == DpMethod::AllreduceAfterBackward);
        if !modelled {
            return Err(err(
                "workload.expert_parallel",
                "expert parallelism under parallelism = \"ddp\", \"zero1\" (with tensor, \
                 context or pipeline parallelism: Megatron's distributed optimizer) or \"zero2\" \
                 (data parallelism alone), or allreduce_after_backward with tensor, context or \
                 pipeline parallelism; not with FSDP, nor ZeRO-2 under Megatron's mesh (the \
                 combinations dtsim models so far)",
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
    let data_parallel = tp == 1 && cp == 1 && pp == 1 && builder == Builder::ByMesh;
    if cm.execution() == Execution::Eager && !data_parallel {
        return Err(err(
            "workload.execution",
            "\"fused\" with tensor, context or pipeline parallelism: eager steps are modelled \
             for data parallelism alone (Megatron's steps run fused kernels)",
        ));
    }
    let mut b = StepBuilder::new(ranks, fabric, planner, cfg);
    let mut dag = if data_parallel {
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
        virtual_stages: 1,
        lane_ranks: Vec::new(),
        buckets: Vec::new(),
        placed: Vec::new(),
        decisions: Vec::new(),
    }
}

impl StepConfig {
    /// A layer's backward pass, with its forward again first under full recomputation.
    fn backward_time(&self, t: &super::compute::PassTimes) -> SimTime {
        if self.recompute {
            t.backward.saturating_add(t.forward)
        } else {
            t.backward
        }
    }

    /// The configured algorithm when it implements `c`, else the default for `c`.
    fn algorithm_for(&self, c: Collective) -> Algorithm {
        if self.algorithm.supports(c) {
            self.algorithm.clone()
        } else {
            crate::collective::default_algorithm(c)
        }
    }
}
