//! Tensor-, pipeline- and hybrid-parallel steps: stage partitioning, GPipe / 1F1B /
//! interleaved 1F1B order, Megatron tensor-parallel all-reduces, point-to-point activations,
//! per-stage gradient exchange (all-reduce or the distributed optimizer).
//!
//! With `virtual_stages = v > 1` (Megatron's virtual pipeline) the layers are cut into `pp × v`
//! chunks and GPU stage `s` holds chunks `s, s + pp, s + 2pp, ...`: a micro-batch goes round
//! the `pp` GPU stages `v` times, and the bubble shrinks about `v`-fold for `1 + (pp - 1) /
//! (pp v)` times the activations of plain 1F1B on the first stage.

use super::*;
use crate::workload::catalog::{Layer, LayerKind};

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

/// One pass of one micro-batch through one model chunk on a GPU stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub forward: bool,
    pub microbatch: u32,
    /// Which of the stage's `v` chunks (0 without interleaving).
    pub chunk: u32,
}

/// The order in which GPU stage `s` of `pp` runs its passes of `m` micro-batches through its
/// `v` chunks. GPipe: every forward, then every backward. 1F1B (Narayanan et al. 2021;
/// Megatron-LM `forward_backward_pipelining_without_interleaving`): `pp - s - 1` warm-up
/// forwards, then one forward and one backward in turn, then the remaining backwards.
/// Interleaved 1F1B (`..._with_interleaving`): micro-batches go through the chunks in groups of
/// `pp`; `2 (pp - s - 1) + (v - 1) pp` warm-up forwards (all of them when `m == pp`); the k-th
/// forward runs chunk `(k mod pp v) / pp` on micro-batch `(k / pp v) pp + k mod pp`, the k-th
/// backward the same micro-batch on the chunks in reverse.
pub(crate) fn stage_order(
    schedule: PipelineSchedule,
    pp: u32,
    v: u32,
    m: u32,
    s: u32,
) -> Vec<Item> {
    let item = |forward: bool, microbatch: u32, chunk: u32| Item {
        forward,
        microbatch,
        chunk,
    };
    if schedule == PipelineSchedule::Gpipe {
        return (0..m)
            .map(|i| item(true, i, 0))
            .chain((0..m).map(|i| item(false, i, 0)))
            .collect();
    }
    let v = v.max(1);
    let total = m * v;
    let group = pp * v;
    let nth = |forward: bool, k: u32| {
        let c = (k % group) / pp;
        let chunk = if forward { c } else { v - 1 - c };
        item(forward, (k / group) * pp + k % pp, chunk)
    };
    let warm = if v == 1 {
        (pp - s - 1).min(m)
    } else if m == pp {
        total
    } else {
        (2 * (pp - s - 1) + (v - 1) * pp).min(total)
    };
    let mut order: Vec<Item> = (0..warm).map(|k| nth(true, k)).collect();
    for k in 0..total - warm {
        order.push(nth(true, warm + k));
        order.push(nth(false, k));
    }
    order.extend((total - warm..total).map(|k| nth(false, k)));
    order
}

/// Where a stage's compute ops run: how many ranks, which lane (pipeline stage).
#[derive(Clone, Copy)]
struct Lane {
    endpoints: u32,
    lane: u16,
}

impl Lane {
    /// The compute accumulated in `pending` (from layer `first_layer` on) as one op after
    /// `prev`; the deps of what comes next.
    fn flush(
        self,
        b: &mut StepBuilder,
        pending: &mut SimTime,
        prev: &[OpId],
        phase: Phase,
        first_layer: u32,
    ) -> Vec<OpId> {
        if *pending == SimTime::ZERO {
            return prev.to_vec();
        }
        let op = b.compute(
            self.endpoints,
            *pending,
            prev.to_vec(),
            phase,
            self.lane,
            first_layer,
        );
        *pending = SimTime::ZERO;
        vec![op]
    }
}

/// Communication inside one layer's pass.
enum Inner {
    /// Megatron-core's ring attention (Transformer Engine's `p2p` context parallelism): the
    /// pass's time in `cp` equal pieces, piece 0 on the rank's own keys and values, piece k
    /// once the k-th shift of `bytes` round the ring has arrived; each shift leaves when the
    /// previous one has arrived, so shifts overlap the pieces before them. Backward shifts
    /// carry the gradients of the keys and values too (twice the bytes).
    Ring {
        ring: Vec<(u32, u32)>,
        bytes: u64,
        cp: u32,
    },
    /// Expert parallelism: an all-to-all to the experts, their compute, one back.
    Experts {
        spec: CollectiveSpec,
        groups: Vec<Vec<u32>>,
    },
}

impl Inner {
    /// One pass of `time` on layer `layer` after `deps`; returns its last op.
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &self,
        b: &mut StepBuilder,
        at: Lane,
        time: SimTime,
        forward: bool,
        deps: Vec<OpId>,
        phase: Phase,
        layer: usize,
    ) -> Result<OpId, StepError> {
        let (n, lane, layer) = (at.endpoints, at.lane, layer as u32);
        match self {
            Inner::Ring { ring, bytes, cp } => {
                let bytes = if forward { *bytes } else { 2 * bytes };
                let piece = SimTime::from_secs_f64(time.as_secs_f64() / *cp as f64);
                let mut shift = b.transfer(ring.clone(), bytes, deps.clone(), Phase::SendRecv);
                let mut last = b.compute(n, piece, deps, phase, lane, layer);
                for k in 1..*cp {
                    last = b.compute(n, piece, vec![last, shift], phase, lane, layer);
                    if k + 1 < *cp {
                        shift = b.transfer(ring.clone(), bytes, vec![shift], Phase::SendRecv);
                    }
                }
                Ok(last)
            }
            Inner::Experts { spec, groups } => {
                let out = b.collective(spec.clone(), groups, deps, &|op| op.kind.clone())?;
                let op = b.compute(n, time, vec![out], phase, lane, layer);
                b.collective(spec.clone(), groups, vec![op], &|op| op.kind.clone())
            }
        }
    }
}

pub(super) fn hybrid_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    dp: u32,
    tp: u32,
    pp: u32,
) -> Result<StepDag, StepError> {
    let cp = cfg.context_parallel.max(1);
    let ep = cfg.expert_parallel.max(1);
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
    let v = cfg.virtual_stages.max(1);
    if v > 1 {
        // (`pipeline_parallel` of at least 2 is checked with the scenario.)
        let why = if cfg.pipeline_schedule != PipelineSchedule::OneFOneB {
            Some("pipeline_schedule = \"1f1b\" (interleaving is a 1F1B schedule)".to_string())
        } else if !m.is_multiple_of(pp) {
            Some(format!(
                "microbatches ({m}) a multiple of pipeline_parallel ({pp}), as Megatron's \
                 interleaved schedule needs"
            ))
        } else if (pp * v) as usize > model.layers.len() {
            Some(format!(
                "pipeline_parallel x virtual_stages ({pp} x {v}) at most the model's {} layers",
                model.layers.len()
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(err("workload.virtual_stages", format!("{v} needs {why}")));
        }
    }
    // Virtual stage q (a chunk of consecutive layers) runs on GPU stage q mod pp.
    let nq = pp * v;
    let mb = cfg.batch_per_gpu / m as u64;
    let e = cfg.dtype.bytes();
    let mesh = Mesh {
        tp,
        cp,
        dp,
        pp,
        order: cfg.rank_order,
    };
    let rank = |stage: u32, replica: u32, c: u32, t: u32| mesh.rank(stage, replica, c, t);
    // A MoE block runs on its tokens' share, sequence-parallel across the TP group (Megatron
    // needs sequence parallelism for MoE under TP), its experts whole on each rank of the group
    // (expert tensor parallelism 1); with expert parallelism, padded to their capacity.
    let moe_ep = |l: &Layer| ep > 1 && l.kind == LayerKind::MoeBlock;
    let param_split = |l: &Layer| {
        if l.kind.tensor_parallel() {
            tp as u64
        } else {
            1
        }
    };
    let split = |l: &Layer| {
        if l.kind == LayerKind::MoeBlock {
            tp as u64
        } else {
            param_split(l)
        }
    };
    let times: Vec<_> = model
        .layers
        .iter()
        .map(|l| {
            if moe_ep(l) {
                let padded = Layer {
                    forward_flops: (l.forward_flops as f64 * cfg.capacity_factor).round() as u64,
                    ..l.clone()
                };
                cm.layer_times_split(&model.name, &padded, mb, split(l), cp as u64)
            } else {
                cm.layer_times_split(&model.name, l, mb, split(l), cp as u64)
            }
        })
        .collect();
    let experts_per_token = model.moe.map_or(0, |m| m.experts_per_token);
    let expert_params = model.moe.map_or(0, |m| m.expert_params_per_block);
    let costs: Vec<f64> = times
        .iter()
        .map(|t| t.forward.as_secs_f64() + t.backward.as_secs_f64())
        .collect();
    let stages = partition(&costs, nq as usize);
    let per_stage = dp * cp * tp;
    // (replica, context rank, tensor rank) of every rank of a stage.
    let coords: Vec<(u32, u32, u32)> = (0..dp)
        .flat_map(|r| (0..cp).flat_map(move |c| (0..tp).map(move |t| (r, c, t))))
        .collect();
    let tp_groups = |s: u32| -> Vec<Vec<u32>> {
        coords
            .chunks(tp as usize)
            .map(|g| g.iter().map(|&(r, c, t)| rank(s, r, c, t)).collect())
            .collect()
    };
    // Sends between stage s and s+1: every (replica, context rank, tp rank) to its counterpart.
    let pairs = |from: u32, to: u32| -> Vec<(u32, u32)> {
        coords
            .iter()
            .map(|&(r, c, t)| (rank(from, r, c, t), rank(to, r, c, t)))
            .collect()
    };
    // Expert-parallel groups: `ep` consecutive replicas of the same (context, tensor) rank.
    let ep_groups = |s: u32| -> Vec<Vec<u32>> {
        (0..dp / ep)
            .flat_map(|g| (0..cp).flat_map(move |c| (0..tp).map(move |t| (g, c, t))))
            .map(|(g, c, t)| (g * ep..(g + 1) * ep).map(|r| rank(s, r, c, t)).collect())
            .collect()
    };
    // One shift of the context-parallel ring: every rank to the next of its ring.
    let ring = |s: u32| -> Vec<(u32, u32)> {
        coords
            .iter()
            .map(|&(r, c, t)| (rank(s, r, c, t), rank(s, r, (c + 1) % cp, t)))
            .collect()
    };
    // Ops that deliver microbatch i's activation to virtual stage q (fwd) / its gradient (bwd).
    let mut act_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; nq as usize];
    let mut grad_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; nq as usize];
    let mut cursor = vec![0usize; pp as usize];
    let orders: Vec<Vec<Item>> = (0..pp)
        .map(|s| stage_order(cfg.pipeline_schedule, pp, v, m, s))
        .collect();
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
                let Item {
                    forward: fwd,
                    microbatch: i,
                    chunk,
                } = orders[su][cursor[su]];
                let iu = i as usize;
                let q = chunk * pp + s;
                let qu = q as usize;
                let input = if fwd {
                    if q == 0 {
                        Some(None)
                    } else {
                        act_in[qu][iu].map(Some)
                    }
                } else if q + 1 == nq {
                    Some(None)
                } else {
                    grad_in[qu][iu].map(Some)
                };
                let Some(input) = input else { break };
                let mut prev: Vec<OpId> = last_on_stage[su].into_iter().chain(input).collect();
                let range = stages[qu].clone();
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
                    // A layer with communication inside its pass: attention under context
                    // parallelism passes keys and values round the ring (with their
                    // gradients backward); a MoE block under expert parallelism dispatches
                    // cf x k x tokens x hidden per rank to the experts and combines as much
                    // back, the rank's tokens split over TP and CP.
                    let inner = if cp > 1 && layer.kv_elems > 0 {
                        Some(Inner::Ring {
                            ring: ring(s),
                            bytes: layer.kv_elems / cp as u64 * mb * e / tp as u64,
                            cp,
                        })
                    } else if moe_ep(layer) {
                        let bytes = (layer.input_elems as f64
                            * mb as f64
                            * experts_per_token as f64
                            * cfg.capacity_factor
                            * e as f64
                            / (tp * cp) as f64)
                            .round() as u64;
                        Some(Inner::Experts {
                            spec: b.spec(
                                Collective::AllToAll,
                                bytes,
                                cfg.algorithm_for(Collective::AllToAll),
                            ),
                            groups: ep_groups(s),
                        })
                    } else {
                        None
                    };
                    let at = Lane {
                        endpoints: per_stage,
                        lane: s as u16,
                    };
                    if !fwd && cfg.recompute {
                        // Full recomputation: the layer's forward again (with its tensor-
                        // parallel all-reduce) right before its backward.
                        match &inner {
                            Some(inner) => {
                                let deps =
                                    at.flush(b, &mut pending, &prev, Phase::Backward, first_layer);
                                prev = vec![inner.pass(
                                    b,
                                    at,
                                    t.forward,
                                    true,
                                    deps,
                                    Phase::Backward,
                                    l,
                                )?];
                            }
                            None => pending = pending.saturating_add(t.forward),
                        }
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
                            let bytes = layer.output_elems * mb * e / cp as u64;
                            let done =
                                b.collective(tp_spec(bytes), &tp_groups(s), vec![op], &|op| {
                                    op.kind.clone()
                                })?;
                            prev = vec![done];
                        }
                    }
                    let (time, phase) = if fwd {
                        (t.forward, Phase::Forward)
                    } else {
                        (t.backward, Phase::Backward)
                    };
                    match &inner {
                        Some(inner) => {
                            let deps = at.flush(b, &mut pending, &prev, phase, first_layer);
                            prev = vec![inner.pass(b, at, time, fwd, deps, phase, l)?];
                            first_layer = layers.get(k + 1).copied().unwrap_or(0) as u32;
                        }
                        None => pending = pending.saturating_add(time),
                    }
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
                            let bytes = layer.output_elems * mb * e / cp as u64;
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
                    stages[qu].end - 1
                } else {
                    stages[qu].start
                };
                let bytes = if fwd {
                    model.layers[boundary].output_elems
                } else {
                    model.layers[boundary].input_elems
                } * mb
                    * e
                    / tp as u64
                    / cp as u64;
                if fwd && q + 1 < nq {
                    let to = (q + 1) % pp;
                    act_in[qu + 1][iu] =
                        Some(b.transfer(pairs(s, to), bytes, vec![end], Phase::SendRecv));
                } else if !fwd && q > 0 {
                    let to = (q - 1) % pp;
                    grad_in[qu - 1][iu] =
                        Some(b.transfer(pairs(s, to), bytes, vec![end], Phase::SendRecv));
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
        let held =
            || (0..v).flat_map(|c| model.layers[stages[(c * pp + s) as usize].clone()].iter());
        // Expert weights (1/ep of each MoE block's) apart from the dense ones.
        let experts = |l: &Layer| if moe_ep(l) { expert_params } else { 0 };
        let params: u64 = held()
            .map(|l| (l.params - experts(l)) / param_split(l))
            .sum();
        let expert_shard: u64 = held().map(|l| experts(l) / ep as u64).sum();
        let tensors: u32 = held().map(|l| l.param_tensors).sum();
        let after: Vec<OpId> = last_on_stage[su].into_iter().collect();
        // Gradients are averaged over every replica of the parameters: the data-parallel and
        // context-parallel ranks together (Megatron's DP x CP group).
        let groups: Vec<Vec<u32>> = if dp * cp > 1 {
            (0..tp)
                .map(|t| {
                    (0..dp)
                        .flat_map(|r| (0..cp).map(move |c| (r, c)))
                        .map(|(r, c)| rank(s, r, c, t))
                        .collect()
                })
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
            let shard = params.div_ceil((dp * cp) as u64);
            let opt = cm.optimizer_time(shard, tensors.div_ceil(dp * cp).max(1), cfg.optimizer);
            let opt = b.compute(per_stage, opt, vec![rs], Phase::Optimizer, s as u16, 0);
            ends.push(
                b.collective(spec(Collective::AllGather), &groups, vec![opt], &|op| {
                    op.kind.clone()
                })?,
            );
            continue;
        }
        // Expert gradients, on the same stream after the dense ones: among the ranks holding
        // the same experts (one of every `ep` replicas, every context rank).
        let replicas: Vec<Vec<u32>> = (0..tp)
            .flat_map(|t| (0..ep).map(move |p| (t, p)))
            .map(|(t, p)| {
                (0..dp / ep)
                    .flat_map(|g| (0..cp).map(move |c| (g * ep + p, c)))
                    .map(|(r, c)| rank(s, r, c, t))
                    .collect()
            })
            .collect();
        let mut exchanged: Option<OpId> = None;
        if !groups.is_empty() {
            exchanged = Some(
                b.collective(tp_spec(params * e), &groups, after.clone(), &|op| {
                    op.kind.clone()
                })?,
            );
        }
        if expert_shard > 0 && replicas[0].len() > 1 {
            let deps = exchanged.map_or(after.clone(), |op| vec![op]);
            exchanged = Some(
                b.collective(tp_spec(expert_shard * e), &replicas, deps, &|op| {
                    op.kind.clone()
                })?,
            );
        }
        let done = match exchanged {
            Some(op) => op,
            None => b.join(after),
        };
        let opt = cm.optimizer_time(params + expert_shard, tensors, cfg.optimizer);
        ends.push(b.compute(per_stage, opt, vec![done], Phase::Optimizer, s as u16, 0));
    }
    b.join(ends);
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * dp as u64;
    dag.stages = stages;
    dag.virtual_stages = v;
    if cfg.rank_order != RankOrder::default() {
        dag.lane_ranks = (0..pp).map(|s| mesh.stage_ranks(s)).collect();
    }
    dag.lane_count = pp as u16;
    Ok(dag)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `stage_order` written as F/B, micro-batch, chunk: "F0c1" is micro-batch 0's forward
    /// through chunk 1.
    fn names(order: &[Item]) -> Vec<String> {
        order
            .iter()
            .map(|i| {
                let fb = if i.forward { 'F' } else { 'B' };
                format!("{fb}{}c{}", i.microbatch, i.chunk)
            })
            .collect()
    }

    #[test]
    fn interleaved_1f1b_runs_megatrons_order_on_the_first_stage() {
        // pp 2, v 2, m 4 on stage 0: 2 (pp - 1) + (v - 1) pp = 4 warm-up forwards, micro-batches
        // through the chunks in groups of pp (Megatron-LM get_model_chunk_id), then one forward
        // and one backward in turn, backwards through the chunks in reverse.
        let order = stage_order(PipelineSchedule::OneFOneB, 2, 2, 4, 0);
        let expect =
            "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0";
        assert_eq!(names(&order).join(" "), expect);
        // The last stage warms up (v - 1) pp forwards only.
        let last = stage_order(PipelineSchedule::OneFOneB, 2, 2, 4, 1);
        assert_eq!(names(&last[..3]).join(" "), "F0c0 F1c0 F0c1");
        assert!(!last[3].forward);
    }

    #[test]
    fn every_stage_runs_each_pass_once_and_a_backward_after_its_forward() {
        for schedule in [PipelineSchedule::OneFOneB, PipelineSchedule::Gpipe] {
            for pp in 2..6u32 {
                for v in 1..4u32 {
                    if schedule == PipelineSchedule::Gpipe && v > 1 {
                        continue;
                    }
                    for m in [pp, 2 * pp, 3 * pp] {
                        for s in 0..pp {
                            let order = stage_order(schedule, pp, v, m, s);
                            assert_eq!(order.len() as u32, 2 * m * v);
                            let mut seen = std::collections::HashSet::new();
                            for (k, it) in order.iter().enumerate() {
                                assert!(seen.insert(*it), "{it:?} twice (pp {pp} v {v} m {m})");
                                if !it.forward {
                                    let f = Item {
                                        forward: true,
                                        ..*it
                                    };
                                    assert!(order[..k].contains(&f), "{it:?} before its forward");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn without_interleaving_1f1b_warms_up_with_one_forward_per_later_stage() {
        for (pp, m, s, warm) in [(4, 8, 0, 3), (4, 8, 3, 0), (4, 2, 0, 2), (8, 16, 5, 2)] {
            let order = stage_order(PipelineSchedule::OneFOneB, pp, 1, m, s);
            let first_backward = order.iter().position(|i| !i.forward).unwrap();
            // warm-up forwards, then the first steady forward, then the first backward.
            assert_eq!(
                first_backward as u32,
                (warm + 1).min(m),
                "pp {pp} m {m} stage {s}"
            );
        }
    }
}
