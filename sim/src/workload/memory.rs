//! Memory per GPU: parameters, gradients, optimizer state and saved activations, and the
//! largest batch that fits.
//!
//! Parameters are kept in fp32 (plus a 16-bit working copy in mixed precision), gradients in
//! the workload's dtype, optimizer state in fp32. Activations are the layers' saved elements
//! (see [`catalog`](super::catalog)) for every micro-batch a stage holds at once: one without
//! pipelining, all `m` under GPipe, `min(pp − stage, m)` under 1F1B. Tensor parallelism splits
//! the parameters and activations of attention and MLP blocks. Framework workspace and
//! fragmentation are not modelled, so real limits are somewhat lower.

use super::catalog::Model;
use super::compute::Dtype;
use super::step::{PipelineSchedule, StepConfig, StepDag};

/// Bytes one GPU needs, by kind (the most loaded pipeline stage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MemoryUse {
    pub params_bytes: u64,
    pub grads_bytes: u64,
    pub optimizer_bytes: u64,
    pub activation_bytes: u64,
}

impl MemoryUse {
    pub fn total_bytes(&self) -> u64 {
        self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activation_bytes
    }
}

/// Memory of the most loaded GPU for `micro_batch` samples per micro-batch.
pub fn per_gpu(model: &Model, cfg: &StepConfig, dag: &StepDag, micro_batch: u64) -> MemoryUse {
    let tp = cfg.tensor_parallel.max(1) as u64;
    let pp = dag.stages.len().max(1);
    let m = cfg.microbatches.max(1) as u64;
    let e = cfg.dtype.bytes();
    let master = if matches!(cfg.dtype, Dtype::Fp32 | Dtype::Tf32) {
        4
    } else {
        4 + e
    };
    let mut worst = MemoryUse::default();
    for (s, range) in dag.stages.iter().enumerate() {
        let layers = &model.layers[range.clone()];
        let split = |kind: super::catalog::LayerKind| if kind.tensor_parallel() { tp } else { 1 };
        let params: u64 = layers.iter().map(|l| l.params / split(l.kind)).sum();
        let saved: u64 = layers.iter().map(|l| l.saved_elems / split(l.kind)).sum();
        let in_flight = if pp == 1 {
            1
        } else {
            match cfg.pipeline_schedule {
                PipelineSchedule::Gpipe => m,
                PipelineSchedule::OneFOneB => ((pp - s) as u64).min(m),
            }
        };
        let u = MemoryUse {
            params_bytes: params * master,
            grads_bytes: params * e,
            optimizer_bytes: params * cfg.optimizer.state_bytes_per_param(),
            activation_bytes: saved * e * micro_batch * in_flight,
        };
        if u.total_bytes() > worst.total_bytes() {
            worst = u;
        }
    }
    worst
}

/// The largest micro-batch whose memory fits in `capacity_bytes` (0 when not even the
/// parameters fit).
pub fn largest_batch(model: &Model, cfg: &StepConfig, dag: &StepDag, capacity_bytes: u64) -> u64 {
    let fixed = per_gpu(model, cfg, dag, 0).total_bytes();
    let one = per_gpu(model, cfg, dag, 1).total_bytes();
    let per_sample = one.saturating_sub(fixed).max(1);
    if fixed > capacity_bytes {
        return 0;
    }
    // per_gpu is linear in the micro-batch for a fixed stage; check the worst stage exactly.
    let mut b = (capacity_bytes - fixed) / per_sample;
    while b > 0 && per_gpu(model, cfg, dag, b).total_bytes() > capacity_bytes {
        b -= 1;
    }
    b
}
