//! Data-parallel steps (`tensor_parallel = pipeline_parallel = 1`): DDP with gradient
//! buckets, all-reduce after backward, parameter servers, single-process `DataParallel` and
//! ZeRO-1/2; ZeRO-3 (FSDP) and expert-parallel MoE steps are their own modules.

use super::moe::moe_step;
use super::sharded::fsdp_step;
use super::*;

/// Gradient buckets in reverse layer order: (bytes, lowest layer, highest layer).
pub(super) fn buckets(
    model: &Model,
    dtype: Dtype,
    first: u64,
    cap: u64,
) -> Vec<(u64, usize, usize)> {
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

pub(super) fn data_parallel_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    n: u32,
) -> Result<StepDag, StepError> {
    let all: Vec<u32> = (0..n).collect();
    let step = cm
        .step_times(model, cfg.batch_per_gpu, cfg.optimizer)
        .map_err(|e| err("profile", e))?;
    let times = step.passes;
    if cfg.method == DpMethod::Fsdp {
        return fsdp_step(b, model, cm, cfg, &all, &times);
    }
    if let (Some(moe), true) = (model.moe, cfg.expert_parallel > 1) {
        return moe_step(b, model, moe, cm, cfg, n);
    }
    let grad_bytes = model.params() * cfg.dtype.bytes();
    let e = cfg.dtype.bytes();
    let mut prev: Vec<OpId> = Vec::new();
    let mut dag = data_parallel_dag(model, cfg, n);
    let single_process = cfg.method == DpMethod::DataParallel;
    if single_process {
        // GPU 0 holds the batch and the parameters: scatter inputs, replicate parameters.
        let others: Vec<(u32, u32)> = (1..n).map(|i| (0, i)).collect();
        let inputs = b.copy(
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
            let g = b.copy(
                (1..n).map(|i| (i, 0)).collect(),
                out_bytes,
                prev.clone(),
                Phase::SendRecv,
            );
            let s = b.copy(
                (1..n).map(|i| (0, i)).collect(),
                out_bytes,
                vec![g],
                Phase::SendRecv,
            );
            prev = vec![s];
        }
        for (i, t) in times.iter().enumerate().rev() {
            let mut d = cfg.backward_time(t);
            if ddp && last {
                d = d.saturating_add(cm.ddp_overhead(model.layers[i].param_tensors));
            }
            let op = b.compute(n, d, prev.clone(), Phase::Backward, 0, i as u32);
            bwd_op[i] = op;
            prev = vec![op];
        }
    }
    let backward_done = prev[0];
    let optimizer = step.optimizer;
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
    Ok(dag)
}

/// The facts of a one-stage step over `n` data-parallel ranks, for the builders to fill.
pub(super) fn data_parallel_dag(model: &Model, cfg: &StepConfig, n: u32) -> StepDag {
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * n as u64 * cfg.accumulation_steps as u64;
    dag.stages = std::iter::once(0..model.layers.len()).collect();
    dag
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
}
