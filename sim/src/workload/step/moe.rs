//! Mixture-of-experts steps with expert parallelism: all-to-alls around each MoE block,
//! expert gradients among the ranks holding the same experts.

use super::data_parallel::{buckets, data_parallel_dag};
use super::*;

/// A mixture-of-experts step under DDP with expert parallelism `ep` over `n` ranks: groups of
/// `ep` consecutive ranks each hold every expert once. Around each MoE block, forward and
/// backward, an all-to-all moves each rank's tokens to the ranks of their experts and one
/// brings them back; each of those is `capacity_factor × k × tokens × hidden` elements per
/// rank (the buffers padded to the experts' capacity), and the experts' compute is padded the
/// same way. Dense gradients go in DDP buckets over all ranks; each MoE block's expert
/// gradients are all-reduced among the `n / ep` ranks holding the same experts, on the same
/// stream in the order the backward pass produces them. Under ZeRO-1/2 (DeepSpeed-MoE) the
/// same exchanges are reduce-scatters, each rank updates its shard of the dense weights (1/n)
/// and of its experts (1 / (n / ep)), and the parameters are all-gathered in the same order
/// over the same groups.
pub(super) fn moe_step(
    b: &mut StepBuilder,
    model: &Model,
    moe: crate::workload::catalog::MoeShape,
    cm: &ComputeModel,
    cfg: &StepConfig,
    n: u32,
) -> Result<StepDag, StepError> {
    use crate::workload::catalog::LayerKind;
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
                let padded = crate::workload::catalog::Layer {
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
    let mut dag = data_parallel_dag(model, cfg, n);
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
            let mut d = cfg.backward_time(t);
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
    let sharded = cfg.method.zero_stage() > 0;
    let (exchange, algorithm) = if sharded {
        let c = Collective::ReduceScatter;
        (c, cfg.algorithm_for(c))
    } else {
        (Collective::AllReduce, cfg.algorithm.clone())
    };
    let groups_of = |expert: bool| {
        if expert {
            &replicas[..]
        } else {
            std::slice::from_ref(&all)
        }
    };
    let mut stream: Option<OpId> = None;
    let mut done = Vec::new();
    for &(layer, bytes, expert) in &items {
        let mut after = vec![bwd_op[layer]];
        after.extend(stream);
        let spec = b.spec(exchange, bytes, algorithm.clone());
        let op = b.collective(spec, groups_of(expert), after, &|op| op.kind.clone())?;
        stream = Some(op);
        done.push(op);
    }
    dag.buckets = plan;
    let expert_params = moe.expert_params_per_block / ep as u64
        * model
            .layers
            .iter()
            .filter(|l| l.kind == LayerKind::MoeBlock)
            .count() as u64;
    let mut deps: Vec<OpId> = prev.into_iter().collect();
    deps.extend(done);
    if !sharded {
        let params = dense.params() + expert_params;
        let update = cm.optimizer_time(params, model.param_tensors(), cfg.optimizer);
        b.compute(n, update, deps, Phase::Optimizer, 0, 0);
        return Ok(dag);
    }
    let shard = dense.params().div_ceil(n as u64) + expert_params.div_ceil((n / ep) as u64);
    let tensors = model.param_tensors().div_ceil(n).max(1);
    let update = cm.optimizer_time(shard, tensors, cfg.optimizer);
    let mut last = b.compute(n, update, deps, Phase::Optimizer, 0, 0);
    let mut gathers = Vec::new();
    for &(_, bytes, expert) in &items {
        let c = Collective::AllGather;
        let spec = b.spec(c, bytes, cfg.algorithm_for(c));
        last = b.collective(spec, groups_of(expert), vec![last], &|op| op.kind.clone())?;
        gathers.push(last);
    }
    b.join(gathers);
    Ok(dag)
}
