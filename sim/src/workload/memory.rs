//! Memory per GPU: parameters, gradients, optimizer state and saved activations, and the
//! largest batch that fits.
//!
//! Parameters are kept in fp32 (plus a 16-bit working copy in mixed precision), gradients in
//! the workload's dtype, optimizer state in fp32. Activations are the layers' saved elements
//! (see [`catalog`](super::catalog)) for every micro-batch a stage holds at once: one without
//! pipelining, all `m` under GPipe, `min(pp − stage, m)` under 1F1B. Tensor parallelism splits
//! the parameters and activations of attention and MLP blocks; ZeRO stages 1–3 shard master
//! weights and optimizer state, gradients, and working weights over the data-parallel ranks
//! (expert weights over the ranks that hold the same experts). Framework workspace and
//! fragmentation are not modelled, so real limits are somewhat lower.

use super::catalog::Model;
use super::compute::Dtype;
use super::step::{stage_order, StepConfig, StepDag};

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
    // Context parallelism splits every layer's activations by tokens.
    let cp = cfg.context_parallel.max(1) as u64;
    let v = dag.virtual_stages.max(1) as usize;
    let pp = (dag.stages.len() / v).max(1);
    let m = cfg.microbatches.max(1) as u64;
    let e = cfg.dtype.bytes();
    let master = if matches!(cfg.dtype, Dtype::Fp32 | Dtype::Tf32) {
        4
    } else {
        4 + e
    };
    let mut worst = MemoryUse::default();
    if dag.stages.len() < pp * v {
        return worst;
    }
    for s in 0..pp {
        // GPU stage s holds chunks s, s + pp, ... (one chunk without interleaving).
        let chunks: Vec<&[super::catalog::Layer]> = (0..v)
            .map(|c| &model.layers[dag.stages[c * pp + s].clone()])
            .collect();
        let layers: Vec<&super::catalog::Layer> = chunks.iter().flat_map(|c| c.iter()).collect();
        let split = |kind: super::catalog::LayerKind| if kind.tensor_parallel() { tp } else { 1 };
        // Expert parallelism keeps 1/ep of each MoE block's experts on a GPU.
        let ep = cfg.expert_parallel.max(1) as u64;
        let experts = |l: &super::catalog::Layer| match (l.kind, model.moe) {
            (super::catalog::LayerKind::MoeBlock, Some(m)) => m.expert_params_per_block,
            _ => 0,
        };
        // The last of several stages also holds the tied embedding's copy for the head.
        let tied_copy = model.tied_embedding_copy(s as u64, pp as u64, tp);
        let params: u64 = layers
            .iter()
            .map(|l| (l.params - (experts(l) - experts(l) / ep)) / split(l.kind))
            .sum::<u64>()
            + tied_copy;
        // With full recomputation a layer keeps only its input (split like its activations:
        // Megatron's sequence parallelism shards the checkpointed inputs too).
        let saved_by_chunk: Vec<u64> = chunks
            .iter()
            .map(|c| {
                c.iter()
                    .map(|l| {
                        let kept = if cfg.recompute {
                            l.input_elems.min(l.saved_elems)
                        } else {
                            l.saved_elems
                        };
                        kept / split(l.kind) / cp
                    })
                    .sum()
            })
            .collect();
        // Activations held at the worst point of the stage's schedule: a forward keeps its
        // chunk's, the matching backward frees them.
        let saved_peak: u64 = if pp == 1 {
            saved_by_chunk.iter().sum()
        } else {
            let order = stage_order(
                cfg.pipeline_schedule,
                pp as u32,
                v as u32,
                m as u32,
                s as u32,
            );
            let (mut held, mut peak) = (0u64, 0u64);
            for it in order {
                let c = saved_by_chunk[it.chunk as usize];
                if it.forward {
                    held += c;
                    peak = peak.max(held);
                } else {
                    held -= c;
                }
            }
            peak
        };
        // ZeRO shards over the data-parallel ranks: stage 1 the fp32 master weights and the
        // optimizer state, stage 2 also the gradients, stage 3 also the working weights (of
        // which two layers are gathered at a time).
        // ... over the data-parallel and context-parallel ranks together (Megatron's DP x CP
        // group: context-parallel ranks hold the same parameters).
        // Expert weights held here are sharded over the ranks holding the same experts (the
        // expert-data-parallel group: DP / EP x CP x TP ranks, the experts being whole on each
        // TP rank), the dense ones over DP x CP.
        let dp = dag.data_parallel.max(1) as u64 * cp;
        let expert_dp = (dag.data_parallel.max(1) as u64 / ep).max(1) * cp * tp;
        let expert_held: u64 = layers.iter().map(|l| experts(l) / ep).sum();
        let zero = cfg.method.zero_stage();
        // `bytes_per_param` of every parameter held, sharded from ZeRO stage `from` on.
        let shard = |bytes_per_param: u64, from: u8| {
            if zero < from {
                params * bytes_per_param
            } else if expert_dp == dp {
                (params * bytes_per_param).div_ceil(dp)
            } else {
                ((params - expert_held) * bytes_per_param).div_ceil(dp)
                    + (expert_held * bytes_per_param).div_ceil(expert_dp)
            }
        };
        let gathered: u64 = if zero >= 3 {
            let mut largest: Vec<u64> = layers.iter().map(|l| l.params / split(l.kind)).collect();
            largest.sort_unstable_by(|a, b| b.cmp(a));
            largest.iter().take(2).sum::<u64>() * e
        } else {
            0
        };
        let working = if master > 4 { e } else { 0 };
        let u = MemoryUse {
            params_bytes: shard(4, 1) + shard(working, 3) + gathered,
            grads_bytes: shard(e, 2),
            optimizer_bytes: shard(cfg.optimizer.state_bytes_per_param(), 1),
            activation_bytes: saved_peak * e * micro_batch,
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
