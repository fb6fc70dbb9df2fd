//! Which layers each pipeline stage holds (a balanced contiguous cut) and the order in which a
//! stage runs its forward and backward passes: GPipe, 1F1B, interleaved 1F1B.

use super::PipelineSchedule;

/// Cuts layers into `pp` contiguous, non-empty stages (forward + backward time per layer in
/// `costs`): the slowest stage as fast as any cut allows (bisection on the bound under which
/// packing the layers in order needs at most `pp` stages), and under that bound the stages
/// as even as they can be (least sum of squared stage times, by dynamic programming). A greedy
/// cut at the running `total x k / pp` overshoots by up to a layer per stage; packing under
/// the bound alone leaves a stage nearly empty when one layer (an LM head) sets the bound.
pub(super) fn partition(costs: &[f64], pp: usize) -> Vec<std::ops::Range<usize>> {
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
