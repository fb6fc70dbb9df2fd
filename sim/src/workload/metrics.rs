//! What a training step reports: step time, throughput, compute vs communication, exposed
//! communication, per-stage bubbles, and the GPU×GPU traffic split by phase.
//!
//! Definitions (all from the played DAG, none from formulas):
//! - compute time: the busiest lane's (pipeline stage's) total compute;
//! - communication time: the length of the union of the intervals in which any transfer,
//!   reduction or parameter-server update is running;
//! - exposed communication: the part of that union during which no GPU computes;
//! - communication overhead: exposed communication / step time;
//! - bubble (per stage): step time − the stage's compute, i.e. the time its GPUs wait.

use std::collections::BTreeMap;

use super::step::StepDag;
use crate::collective::play::PlayOutcome;
use crate::collective::{OpKind, Phase};

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepMetrics {
    pub step_secs: f64,
    pub compute_secs: f64,
    pub communication_secs: f64,
    pub exposed_communication_secs: f64,
    pub communication_overhead_pct: f64,
    /// Idle time per pipeline stage as a fraction of the step.
    pub bubble_fraction_per_stage: Vec<f64>,
    pub samples_per_s: f64,
    pub tokens_per_s: Option<f64>,
}

fn union_len(mut iv: Vec<(u64, u64)>) -> (u64, Vec<(u64, u64)>) {
    iv.retain(|(a, b)| b > a);
    iv.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in iv {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    (merged.iter().map(|(a, b)| b - a).sum(), merged)
}

/// Length of `a` minus its overlap with the (merged, sorted) intervals `b`.
fn minus(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let mut total = 0;
    for &(s, e) in a {
        let mut covered = 0;
        for &(bs, be) in b {
            let (lo, hi) = (s.max(bs), e.min(be));
            if hi > lo {
                covered += hi - lo;
            }
        }
        total += (e - s) - covered;
    }
    total
}

pub fn step_metrics(
    dag: &StepDag,
    outcome: &PlayOutcome,
    tokens_per_sample: Option<u64>,
) -> StepMetrics {
    let ps_to_s = |ps: u64| ps as f64 * 1e-12;
    let step = outcome.end.as_ps();
    let mut lane_busy = vec![0u64; dag.lane_count.max(1) as usize];
    let mut compute_iv = Vec::new();
    let mut comm_iv = Vec::new();
    for (i, op) in dag.schedule.ops.iter().enumerate() {
        let t = outcome.ops[i];
        let iv = (t.start.as_ps(), t.end.as_ps());
        match (dag.lanes[i], &op.kind) {
            (Some(lane), OpKind::Compute { .. }) => {
                lane_busy[lane as usize] += iv.1 - iv.0;
                compute_iv.push(iv);
            }
            (None, OpKind::Compute { endpoints: 0, .. }) => {}
            _ => comm_iv.push(iv),
        }
    }
    let (_, compute_merged) = union_len(compute_iv);
    let (comm_len, comm_merged) = union_len(comm_iv);
    let exposed = minus(&comm_merged, &compute_merged);
    let compute = lane_busy.iter().copied().max().unwrap_or(0);
    let step_secs = ps_to_s(step);
    let samples_per_s = if step > 0 {
        dag.global_batch as f64 / step_secs
    } else {
        0.0
    };
    StepMetrics {
        step_secs,
        compute_secs: ps_to_s(compute),
        communication_secs: ps_to_s(comm_len),
        exposed_communication_secs: ps_to_s(exposed),
        communication_overhead_pct: if step > 0 {
            100.0 * exposed as f64 / step as f64
        } else {
            0.0
        },
        bubble_fraction_per_stage: lane_busy
            .iter()
            .map(|&b| {
                if step > 0 {
                    (step - b.min(step)) as f64 / step as f64
                } else {
                    0.0
                }
            })
            .collect(),
        samples_per_s,
        tokens_per_s: tokens_per_sample.map(|t| samples_per_s * t as f64),
    }
}

/// Which part of an all-reduce a phase belongs to, for the traffic split.
pub fn traffic_class(phase: Phase) -> &'static str {
    match phase {
        Phase::ReduceScatter | Phase::Reduce | Phase::Push => "reduce-scatter",
        Phase::AllGather | Phase::Broadcast | Phase::Pull => "all-gather",
        Phase::InterNode => "inter-node",
        _ => "point-to-point",
    }
}

/// Bytes per step from endpoint to endpoint, by traffic class.
pub fn traffic_per_step(dag: &StepDag) -> BTreeMap<(u32, u32, &'static str), u128> {
    let mut per_pattern: BTreeMap<(u32, &'static str), u128> = BTreeMap::new();
    for op in &dag.schedule.ops {
        if let OpKind::Transfer { pattern, bytes } = op.kind {
            *per_pattern
                .entry((pattern.0, traffic_class(op.phase)))
                .or_insert(0) += bytes as u128;
        }
    }
    let mut out = BTreeMap::new();
    for (&(p, class), &bytes) in &per_pattern {
        for &(s, d) in dag.schedule.patterns[p as usize].pairs.iter() {
            *out.entry((s, d, class)).or_insert(0) += bytes;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_merge_and_subtract() {
        let (len, merged) = union_len(vec![(0, 10), (5, 15), (20, 30), (30, 30)]);
        assert_eq!(len, 25);
        assert_eq!(merged, vec![(0, 15), (20, 30)]);
        assert_eq!(minus(&[(0, 15), (20, 30)], &[(10, 25)]), 15);
    }
}
