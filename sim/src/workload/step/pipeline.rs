//! Tensor-, pipeline- and hybrid-parallel steps: stage partitioning, GPipe / 1F1B order,
//! Megatron tensor-parallel all-reduces, point-to-point activations, per-stage gradient
//! exchange (all-reduce or the distributed optimizer).

use super::*;

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

pub(super) fn hybrid_step(
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
    let split = |l: &crate::workload::catalog::Layer| {
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
