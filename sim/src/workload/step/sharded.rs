//! ZeRO-3 / FSDP steps: per-layer parameter gathers and gradient scatters with prefetch.

use super::data_parallel::data_parallel_dag;
use super::*;

/// ZeRO-3 / FSDP over `all` ranks: per layer with parameters, an all-gather of its parameters
/// before its forward and before its backward, a reduce-scatter of its gradients after its
/// backward, all on one communication stream in issue order. Gathers run at most one layer
/// ahead of the compute (FSDP's forward and backward prefetch with its limit on gathers in
/// flight): layer i's gather waits for layer i − 2's compute (i + 2 in the backward pass).
/// Each rank then updates its 1/n shard.
pub(super) fn fsdp_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    all: &[u32],
    times: &[crate::workload::compute::PassTimes],
) -> Result<StepDag, StepError> {
    let n = all.len() as u32;
    let e = cfg.dtype.bytes();
    let groups = [all.to_vec()];
    let nl = model.layers.len();
    let dag = data_parallel_dag(model, cfg, n);
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
            let op = b.compute(n, cfg.backward_time(t), deps, Phase::Backward, 0, i as u32);
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
    Ok(dag)
}
