//! The `[workload]` table and `[[compare]]` entries as a scenario writes them (the module
//! above shows them), their checks, and what they resolve to: the step's [`StepConfig`], its
//! model, and the library and options of its collectives.

use std::path::Path;

use serde::Deserialize;

use crate::collective::Collective;
use crate::library::{Library, LibraryOptions};
use crate::scenario::{collective_spec_of, library_options_of, CollectiveTable};
use crate::units::Bytes;
use crate::workload::catalog::{self, Model, TransformerConfig};
use crate::workload::compute::{Dtype, Optimizer};
use crate::workload::eager::Execution;
use crate::workload::step::{Ablation, DpMethod, PipelineSchedule, RankOrder, StepConfig};

/// The step's collectives (gradient and TP all-reduces, DataParallel's broadcast and reduce):
/// the library that runs them and its options, as `[collective]` takes them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllReduceTable {
    pub library: Option<Library>,
    pub algorithm: Option<String>,
    pub protocol: Option<String>,
    pub min_channels: Option<u32>,
    pub max_channels: Option<u32>,
    pub library_version: Option<String>,
    /// `NCCL_COLLNET_ENABLE=1`, as `[collective] collnet`.
    pub collnet: Option<bool>,
    /// A tuner plugin's rules file, as `[collective] tuner_config` (NCCL only): every
    /// communicator of the step (TP groups, DP groups) asks it with its own nodes and ranks.
    pub tuner_config: Option<String>,
    /// `mpi`: how OpenMPI's exchanges between partners run (see `[collective] exchanges`).
    pub exchanges: Option<String>,
    pub rings: Option<u32>,
    pub permutations: Option<Vec<u32>>,
    pub orders: Option<Vec<Vec<u32>>>,
    pub stride: Option<u32>,
    pub reverse: Option<Vec<bool>>,
    pub slices: Option<u32>,
}

/// The `[workload]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadTable {
    pub model: Option<String>,
    pub model_file: Option<String>,
    pub transformer: Option<TransformerConfig>,
    /// A recorded step to replay instead of a model: a directory of per-rank traces
    /// (relative to the scenario), read as `trace_format` or as its files show.
    pub trace: Option<String>,
    pub trace_format: Option<crate::workload::trace::Format>,
    /// Samples per GPU per step (required for a model; for a trace, only for samples/s).
    #[serde(default)]
    pub batch_per_gpu: u64,
    #[serde(default)]
    pub parallelism: DpMethod,
    pub bucket: Option<Bytes>,
    pub first_bucket: Option<Bytes>,
    #[serde(default)]
    pub dtype: Dtype,
    #[serde(default)]
    pub optimizer: Optimizer,
    /// Fused (the GPU's time) or eager (PyTorch issuing op by op beside the GPU).
    #[serde(default)]
    pub execution: Execution,
    #[serde(default = "one")]
    pub accumulation_steps: u32,
    #[serde(default = "one")]
    pub tensor_parallel: u32,
    #[serde(default = "one")]
    pub pipeline_parallel: u32,
    #[serde(default = "one")]
    pub microbatches: u32,
    #[serde(default)]
    pub pipeline_schedule: PipelineSchedule,
    #[serde(default = "one")]
    pub virtual_stages: u32,
    pub rank_order: Option<String>,
    #[serde(default = "one")]
    pub context_parallel: u32,
    #[serde(default)]
    pub context_parallel_comm: crate::workload::step::CpComm,
    #[serde(default = "one")]
    pub servers: u32,
    #[serde(default = "yes")]
    pub colocated: bool,
    #[serde(default = "one_u64")]
    pub steps_per_epoch: u64,
    #[serde(default = "one_u64")]
    pub epochs: u64,
    #[serde(default)]
    pub ablation: Ablation,
    /// Refuse, before simulating, a step whose GPUs cannot hold one sample (default); false
    /// times it anyway (a what-if of the schedule alone), still reporting the shortfall.
    #[serde(default = "yes")]
    pub memory_check: bool,
    /// Groups of one collective that run the same plan are embedded as one op per step
    /// (default); false plans and embeds every group on its own, the slow reference the
    /// fused path is tested against.
    #[serde(default = "yes")]
    pub group_fusion: bool,
    /// Full activation recomputation (Megatron's `--recompute-granularity full`): memory for
    /// the layers' inputs only, a second forward before each backward.
    #[serde(default)]
    pub activation_recompute: bool,
    /// Expert-parallel group size for a mixture-of-experts model (1: every GPU holds every
    /// expert).
    #[serde(default = "one")]
    pub expert_parallel: u32,
    /// Expert capacity over the balanced share (all-to-all buffers and expert work padded).
    #[serde(default = "one_f64")]
    pub capacity_factor: f64,
    #[serde(default)]
    pub allreduce: AllReduceTable,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn one_f64() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

/// One variant of a study: a label and `--set`-style overrides applied to the scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareEntry {
    pub label: String,
    #[serde(default)]
    pub set: Vec<String>,
}

impl WorkloadTable {
    /// Checks what can be checked without the topology: (field, expected).
    pub fn check(&self) -> Result<(), (String, String)> {
        let sources = [
            self.model.is_some(),
            self.model_file.is_some(),
            self.transformer.is_some(),
            self.trace.is_some(),
        ];
        if sources.iter().filter(|&&x| x).count() != 1 {
            return Err((
                "workload.model".into(),
                format!(
                    "exactly one of model (one of {}), model_file, [workload.transformer] and \
                     trace (a directory of recorded per-rank traces)",
                    catalog::CATALOG.join(", ")
                ),
            ));
        }
        if self.trace_format.is_some() && self.trace.is_none() {
            return Err((
                "workload.trace_format".into(),
                "a trace = \"dir\" to read in that format".into(),
            ));
        }
        if let Some(name) = &self.model {
            catalog::by_name(name).map_err(|e| ("workload.model".to_string(), e.expected))?;
        }
        let batch = if self.trace.is_some() {
            self.batch_per_gpu.max(1)
        } else {
            self.batch_per_gpu
        };
        for (field, v) in [
            ("batch_per_gpu", batch),
            ("accumulation_steps", self.accumulation_steps as u64),
            ("tensor_parallel", self.tensor_parallel as u64),
            ("pipeline_parallel", self.pipeline_parallel as u64),
            ("microbatches", self.microbatches as u64),
            ("virtual_stages", self.virtual_stages as u64),
            ("context_parallel", self.context_parallel as u64),
            ("servers", self.servers as u64),
            ("steps_per_epoch", self.steps_per_epoch),
            ("epochs", self.epochs),
        ] {
            if v == 0 {
                return Err((format!("workload.{field}"), "at least 1".into()));
            }
        }
        self.rank_order()?;
        if self.virtual_stages > 1 && self.pipeline_parallel < 2 {
            return Err((
                "workload.virtual_stages".into(),
                format!(
                    "1 without pipeline parallelism ({} needs pipeline_parallel of at least 2)",
                    self.virtual_stages
                ),
            ));
        }
        if self.bucket.is_some_and(|b| b.0 == 0) || self.first_bucket.is_some_and(|b| b.0 == 0) {
            return Err((
                "workload.bucket".into(),
                "a positive size such as \"25MiB\"".into(),
            ));
        }
        // Without the topology the default library is unknown: check as the named one.
        match self.allreduce.library {
            Some(l) => self.step_config(u32::MAX, l).map(|_| ()),
            None => Ok(()),
        }
    }

    /// The library that runs the step's collectives on `topology`: the one named, else NCCL on
    /// a topology that names its GPU model, else the templates.
    pub fn library(&self, topology: &crate::topology::Topology) -> Library {
        self.allreduce
            .library
            .unwrap_or_else(|| crate::scenario::topology_default_library(topology))
    }

    /// `[workload.allreduce]` as a `[collective]` table (for the shared checks).
    fn collective_table(&self, library: Library) -> CollectiveTable {
        let a = &self.allreduce;
        CollectiveTable {
            op: Collective::AllReduce,
            bytes: Some(Bytes(0)),
            library: Some(library),
            algorithm: a.algorithm.clone(),
            protocol: a.protocol.clone(),
            min_channels: a.min_channels,
            max_channels: a.max_channels,
            library_version: a.library_version.clone(),
            collnet: a.collnet,
            tuner_config: a.tuner_config.clone(),
            exchanges: a.exchanges.clone(),
            timing: None,
            timed_calls: None,
            rings: a.rings,
            permutations: a.permutations.clone(),
            orders: a.orders.clone(),
            stride: a.stride,
            reverse: a.reverse.clone(),
            servers: None,
            colocated: None,
            slices: a.slices,
            root: 0,
            peer: 1,
        }
    }

    /// What a library other than `ideal` is asked for, or (field, expected).
    pub fn library_options(&self, library: Library) -> Result<LibraryOptions, (String, String)> {
        library_options_of(&self.collective_table(library), library)
            .map_err(|(f, e)| (f.replacen("collective.", "workload.allreduce.", 1), e))
    }

    /// `rank_order`, parsed (the default when absent).
    fn rank_order(&self) -> Result<RankOrder, (String, String)> {
        match &self.rank_order {
            None => Ok(RankOrder::default()),
            Some(s) => s
                .parse()
                .map_err(|e| ("workload.rank_order".to_string(), e)),
        }
    }

    /// The step configuration for `ranks` ranks whose collectives `library` runs (the
    /// templates' algorithm is the default ring when a library chooses its own).
    pub fn step_config(
        &self,
        ranks: u32,
        library: Library,
    ) -> Result<StepConfig, (String, String)> {
        let spec = if library == Library::Ideal {
            collective_spec_of(&self.collective_table(library), ranks)
                .map_err(|(f, e)| (f.replacen("collective.", "workload.allreduce.", 1), e))?
        } else {
            self.library_options(library)?;
            // The templates still play what the library does not run (parameter servers):
            // with their defaults, not the library's options.
            let mut plain = self.collective_table(Library::Ideal);
            plain.algorithm = None;
            plain.protocol = None;
            plain.min_channels = None;
            plain.max_channels = None;
            plain.library_version = None;
            plain.collnet = None;
            plain.tuner_config = None;
            plain.orders = None;
            collective_spec_of(&plain, ranks)
                .map_err(|(f, e)| (f.replacen("collective.", "workload.allreduce.", 1), e))?
        };
        let bucket = self.bucket.map(|b| b.0).unwrap_or(25 << 20);
        Ok(StepConfig {
            batch_per_gpu: self.batch_per_gpu,
            method: self.parallelism,
            bucket_bytes: bucket,
            first_bucket_bytes: self.first_bucket.map(|b| b.0).unwrap_or(bucket),
            accumulation_steps: self.accumulation_steps,
            tensor_parallel: self.tensor_parallel,
            pipeline_parallel: self.pipeline_parallel,
            microbatches: self.microbatches,
            pipeline_schedule: self.pipeline_schedule,
            virtual_stages: self.virtual_stages,
            rank_order: self.rank_order()?,
            context_parallel: self.context_parallel,
            context_parallel_comm: self.context_parallel_comm,
            algorithm: spec.algorithm,
            slices: spec.slices,
            servers: self.servers,
            colocated: self.colocated,
            optimizer: self.optimizer,
            dtype: self.dtype,
            ablation: self.ablation,
            group_fusion: self.group_fusion,
            recompute: self.activation_recompute,
            expert_parallel: self.expert_parallel,
            capacity_factor: self.capacity_factor,
        })
    }

    /// The model, from the catalog, a model file (relative to the scenario) or the inline
    /// transformer configuration. Under tensor parallelism a transformer's vocabulary is padded
    /// as Megatron pads it (`make-vocab-size-divisible-by` 128 times the TP size: GPT's 50,257
    /// tokens become 51,200 at TP 8), so that every rank's slice is a whole, aligned block.
    pub fn model(&self, scenario_path: &Path) -> Result<Model, (String, String)> {
        let pad = |mut c: catalog::TransformerConfig| {
            if self.tensor_parallel > 1 {
                let multiple = 128 * self.tensor_parallel as u64;
                c.vocabulary = c.vocabulary.div_ceil(multiple) * multiple;
            }
            catalog::transformer(&c)
        };
        if let Some(name) = &self.model {
            if let Some(c) = catalog::TransformerConfig::by_name(name) {
                return Ok(pad(c));
            }
            return catalog::by_name(name).map_err(|e| ("workload.model".into(), e.expected));
        }
        if let Some(f) = &self.model_file {
            let base = scenario_path.parent().unwrap_or(Path::new("."));
            return catalog::load_model_file(&base.join(f))
                .map_err(|e| ("workload.model_file".into(), e.to_string()));
        }
        let c = self
            .transformer
            .as_ref()
            .ok_or_else(|| ("workload.model".to_string(), "a model".to_string()))?;
        if c.layers == 0 || c.hidden == 0 || c.heads == 0 || c.sequence == 0 || c.vocabulary == 0 {
            return Err((
                "workload.transformer".into(),
                "layers, hidden, heads, sequence and vocabulary all at least 1".into(),
            ));
        }
        Ok(pad(c.clone()))
    }
}
