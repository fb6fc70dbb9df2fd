//! What the collective generators share: exact byte splitting and the pipelined chain of
//! steps. The dispatcher ([`super::generate()`]) and every algorithm import from here; nothing
//! here imports an algorithm.

use super::{CollectiveError, OpId, OpKind, PatternId, Phase, Schedule};

/// `ceil(a / b)` for `b > 0`.
pub(crate) fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// `total` cut into `parts` pieces that differ by at most one byte and sum to `total`; the
/// first pieces are the larger ones.
pub(crate) fn split_even(total: u64, parts: u64) -> Vec<u64> {
    let base = total / parts;
    let extra = total % parts;
    (0..parts).map(|i| base + u64::from(i < extra)).collect()
}

/// `total` cut in proportion to `weights` (finite, non-negative, not all zero) into integer
/// pieces that sum to `total` exactly: largest remainders get the leftover bytes, ties going
/// to the lower index. Weights are quantized to 32 bits relative to the largest, so splits are
/// exact integer arithmetic and deterministic.
pub(crate) fn split_weighted(total: u64, weights: &[f64]) -> Vec<u64> {
    let max = weights.iter().cloned().fold(0.0_f64, f64::max);
    let quantized: Vec<u128> = weights
        .iter()
        .map(|w| ((w / max) * 4_294_967_296.0).round() as u128)
        .collect();
    let sum: u128 = quantized.iter().sum();
    let mut parts: Vec<u64> = quantized
        .iter()
        .map(|&w| (total as u128 * w / sum) as u64)
        .collect();
    let mut left = total - parts.iter().sum::<u64>();
    let mut by_remainder: Vec<(u128, usize)> = quantized
        .iter()
        .enumerate()
        .map(|(i, &w)| (total as u128 * w % sum, i))
        .collect();
    by_remainder.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

/// One step of a [`chain`]: a pattern whose every pair sends `bytes` (all slices together).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainStep {
    pub pattern: PatternId,
    pub bytes: u64,
    pub phase: Phase,
    /// Endpoints that reduce what they received before forwarding it (0: no reduction). The
    /// reduction of a slice is a [`OpKind::Reduce`] op between the slice's transfer and the
    /// next step's transfer of the same slice.
    pub reducers: u32,
}

/// Emits `steps` as a pipelined chain on one channel: each step is cut into
/// `min(slices, smallest step's bytes)` slices (at least one) of exactly split bytes; slice j of
/// step s waits for slice j of step s-1 (its reduction, if any) and for slice j-1 of step s.
/// Slice 0 of the first step waits for `after`. Steps are numbered from `first_step`. Returns
/// the last op of every slice (empty steps: `after`).
pub(crate) fn chain(
    schedule: &mut Schedule,
    steps: &[ChainStep],
    slices: u32,
    channel: u16,
    first_step: u32,
    after: &[OpId],
) -> Vec<OpId> {
    let Some(min_bytes) = steps.iter().map(|s| s.bytes).min() else {
        return after.to_vec();
    };
    let k = u64::from(slices).min(min_bytes).max(1);
    let mut last: Vec<Option<OpId>> = vec![None; k as usize];
    for (i, step) in steps.iter().enumerate() {
        let step_no = first_step + i as u32;
        let pieces = split_even(step.bytes, k);
        let mut previous_slice: Option<OpId> = None;
        for (j, &bytes) in pieces.iter().enumerate() {
            let mut deps = Vec::with_capacity(2);
            match last[j] {
                Some(op) => deps.push(op),
                None if j == 0 => deps.extend_from_slice(after),
                None => {}
            }
            if let Some(op) = previous_slice {
                deps.push(op);
            }
            let transfer = schedule.push(
                OpKind::Transfer {
                    pattern: step.pattern,
                    bytes,
                },
                deps,
                step.phase,
                channel,
                step_no,
            );
            previous_slice = Some(transfer);
            last[j] = Some(if step.reducers > 0 {
                schedule.push(
                    OpKind::Reduce {
                        endpoints: step.reducers,
                        bytes,
                    },
                    vec![transfer],
                    step.phase,
                    channel,
                    step_no,
                )
            } else {
                transfer
            });
        }
    }
    last.into_iter().flatten().collect()
}

/// Checks that a channel index fits the IR's `u16`.
pub(crate) fn channel(index: usize, field: &str) -> Result<u16, CollectiveError> {
    u16::try_from(index)
        .map_err(|_| CollectiveError::new(field, format!("at most {} lanes", u16::MAX)))
}

#[cfg(test)]
mod tests {
    use super::super::Collective;
    use super::*;

    #[test]
    fn split_even_sums_exactly_and_differs_by_at_most_one() {
        let parts = split_even(10, 4);
        assert_eq!(parts, vec![3, 3, 2, 2]);
        assert_eq!(split_even(3, 5), vec![1, 1, 1, 0, 0]);
    }

    #[test]
    fn split_weighted_follows_the_weights_and_sums_exactly() {
        let parts = split_weighted(1000, &[1.0, 3.0]);
        assert_eq!(parts, vec![250, 750]);
        let parts = split_weighted(10, &[1.0, 1.0, 1.0]);
        assert_eq!(parts.iter().sum::<u64>(), 10);
        assert_eq!(parts, vec![4, 3, 3]);
        let parts = split_weighted(u64::MAX, &[400e9, 100e9, 0.0]);
        assert_eq!(
            parts.iter().map(|&p| p as u128).sum::<u128>(),
            u64::MAX as u128
        );
        assert_eq!(parts[2], 0);
    }

    #[test]
    fn chain_with_slices_pipelines_slice_by_slice() {
        let mut s = Schedule::new(Collective::AllGather, "t", 2, 10);
        let p = s.add_pattern(vec![(0, 1)]);
        let step = ChainStep {
            pattern: p,
            bytes: 10,
            phase: Phase::AllGather,
            reducers: 0,
        };
        let last = chain(&mut s, &[step, step], 3, 0, 0, &[]);
        // step 0: ops 0,1,2 (slices 0..3); step 1: ops 3,4,5.
        assert_eq!(s.ops.len(), 6);
        assert_eq!(s.ops[0].deps, vec![]);
        assert_eq!(s.ops[1].deps, vec![OpId(0)]);
        assert_eq!(s.ops[3].deps, vec![OpId(0)]);
        assert_eq!(s.ops[4].deps, vec![OpId(1), OpId(3)]);
        assert_eq!(last, vec![OpId(3), OpId(4), OpId(5)]);
        let bytes: Vec<u64> = s.ops[..3]
            .iter()
            .map(|op| match op.kind {
                OpKind::Transfer { bytes, .. } => bytes,
                OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => 0,
            })
            .collect();
        assert_eq!(bytes, vec![4, 3, 3]);
    }
}
