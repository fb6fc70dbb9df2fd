//! Recursive halving (reduce-scatter) and recursive doubling (all-gather), Rabenseifner-style:
//! all-reduce, reduce-scatter, all-gather.
//!
//! With p = 2^⌊log2 n⌋, the p *active* ranks run log2 p steps per half. A step with distance d
//! is one op whose pattern is every active rank exchanging with the active rank whose virtual
//! index differs by `xor d` (both directions). Halving starts at the largest distance d = p/2
//! and ends at 1 (Rabenseifner; on hierarchical machines the big first exchange crosses the
//! farthest ranks), each step followed by a reduction; doubling runs the distances back from 1
//! to p/2. All-reduce bytes: a step at distance d moves `ceil(M·d/p)` per pair (M/2 first).
//! Reduce-scatter and all-gather move whole output blocks of `ceil(M/n)`: a step moves the most
//! blocks any rank sends in it.
//!
//! Non-power-of-two n (r = n - p extra ranks): the first 2r ranks pair up; before the halving,
//! each even rank 2i < 2r sends its input to 2i+1 (M bytes, reduced there; for all-gather, its
//! block), and sits out; after the doubling, 2i+1 sends 2i the result (M bytes; for
//! reduce-scatter, 2i's block). Active rank 2i+1 (i < r) has virtual index i, and active rank
//! j ≥ 2r has virtual index j - r; in reduce-scatter and all-gather the first r virtual ranks
//! own two output blocks (their own and their partner's). Slices are not used: halving steps
//! change which bytes a rank forwards, so there is no slice-by-slice pipeline.

use super::steps::{ceil_div, chain, ChainStep};
use super::{Collective, CollectiveError, CollectiveSpec, Phase, Schedule};

/// Rank of virtual (active) index `v` when `r` ranks sit out.
fn rank_of(v: u32, r: u32) -> u32 {
    if v < r {
        2 * v + 1
    } else {
        v + r
    }
}

pub(crate) fn generate(spec: &CollectiveSpec, ranks: u32) -> Result<Schedule, CollectiveError> {
    let mut schedule = Schedule::new(spec.collective, "halving_doubling", ranks, spec.bytes);
    let p = 1u32 << (31 - ranks.leading_zeros());
    let r = ranks - p;
    let m = spec.bytes;
    let block = ceil_div(m, u64::from(ranks));
    // Output blocks owned by virtual rank v (reduce-scatter / all-gather).
    let blocks = |v: u32| 1 + u64::from(v < r);
    let blocks_in = |lo: u32, len: u32| (lo..lo + len).map(blocks).sum::<u64>();
    let exchange = |schedule: &mut Schedule, d: u32| {
        let pairs: Vec<(u32, u32)> = (0..p).map(|v| (rank_of(v, r), rank_of(v ^ d, r))).collect();
        schedule.add_pattern(pairs)
    };
    let halving: Vec<u32> = (0..p.trailing_zeros()).rev().map(|k| 1 << k).collect();
    let doubling: Vec<u32> = halving.iter().rev().copied().collect();

    let mut steps = Vec::new();
    if spec.collective != Collective::AllGather {
        if r > 0 {
            let pairs: Vec<(u32, u32)> = (0..r).map(|i| (2 * i, 2 * i + 1)).collect();
            steps.push(ChainStep {
                pattern: schedule.add_pattern(pairs),
                bytes: m,
                phase: Phase::ReduceScatter,
                reducers: r,
            });
        }
        for &d in &halving {
            let bytes = match spec.collective {
                Collective::AllReduce => ceil_div_u128(m, d, p),
                // A rank sends the half of its current 2d-group that it does not keep.
                _ => {
                    (0..p)
                        .map(|v| blocks_in((v & !(2 * d - 1)) + ((v & d) ^ d), d))
                        .max()
                        .unwrap_or(0)
                        * block
                }
            };
            steps.push(ChainStep {
                pattern: exchange(&mut schedule, d),
                bytes,
                phase: Phase::ReduceScatter,
                reducers: p,
            });
        }
        if r > 0 && spec.collective == Collective::ReduceScatter {
            let pairs: Vec<(u32, u32)> = (0..r).map(|i| (2 * i + 1, 2 * i)).collect();
            steps.push(ChainStep {
                pattern: schedule.add_pattern(pairs),
                bytes: block,
                phase: Phase::ReduceScatter,
                reducers: 0,
            });
        }
    }
    if spec.collective != Collective::ReduceScatter {
        if r > 0 && spec.collective == Collective::AllGather {
            let pairs: Vec<(u32, u32)> = (0..r).map(|i| (2 * i, 2 * i + 1)).collect();
            steps.push(ChainStep {
                pattern: schedule.add_pattern(pairs),
                bytes: block,
                phase: Phase::AllGather,
                reducers: 0,
            });
        }
        for &d in &doubling {
            let bytes = match spec.collective {
                Collective::AllReduce => ceil_div_u128(m, d, p),
                // A rank sends everything its current d-group holds.
                _ => {
                    (0..p)
                        .map(|v| blocks_in(v & !(d - 1), d))
                        .max()
                        .unwrap_or(0)
                        * block
                }
            };
            steps.push(ChainStep {
                pattern: exchange(&mut schedule, d),
                bytes,
                phase: Phase::AllGather,
                reducers: 0,
            });
        }
        if r > 0 {
            let pairs: Vec<(u32, u32)> = (0..r).map(|i| (2 * i + 1, 2 * i)).collect();
            steps.push(ChainStep {
                pattern: schedule.add_pattern(pairs),
                bytes: m,
                phase: Phase::AllGather,
                reducers: 0,
            });
        }
    }
    chain(&mut schedule, &steps, 1, 0, 0, &[]);
    Ok(schedule)
}

/// `ceil(m · d / p)` without overflow.
fn ceil_div_u128(m: u64, d: u32, p: u32) -> u64 {
    (u128::from(m) * u128::from(d)).div_ceil(u128::from(p)) as u64
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::{Algorithm, OpKind};
    use super::*;

    fn hd(c: Collective, bytes: u64) -> super::super::CollectiveSpec {
        spec(c, Algorithm::HalvingDoubling, bytes)
    }

    #[test]
    fn power_of_two_all_reduce_moves_the_textbook_amount_in_2_log2_n_steps() {
        let m = 1 << 20;
        let s = generate(&hd(Collective::AllReduce, m), 16, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        assert_eq!(transfers(&s), 8);
        let (sent, received) = sent_received(&s);
        for r in 0..16 {
            assert_eq!(sent[r], 2 * 15 * m as u128 / 16);
            assert_eq!(received[r], sent[r]);
        }
    }

    #[test]
    fn halving_starts_at_the_largest_distance_and_doubling_ends_there() {
        let s = generate(&hd(Collective::AllReduce, 800), 8, &FLAT).unwrap();
        let steps: Vec<(Phase, u32, u64)> = s
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } => {
                    let (a, b) = s.patterns[pattern.0 as usize].pairs[0];
                    Some((op.phase, a ^ b, bytes))
                }
                OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => None,
            })
            .collect();
        assert_eq!(
            steps,
            vec![
                (Phase::ReduceScatter, 4, 400),
                (Phase::ReduceScatter, 2, 200),
                (Phase::ReduceScatter, 1, 100),
                (Phase::AllGather, 1, 100),
                (Phase::AllGather, 2, 200),
                (Phase::AllGather, 4, 400),
            ]
        );
        let pairs = s.patterns[0].pairs.to_vec();
        assert_eq!(pairs.len(), 8);
        assert!(pairs.contains(&(0, 4)) && pairs.contains(&(4, 0)));
    }

    #[test]
    fn extra_ranks_hand_their_data_to_a_partner_and_get_the_result_back() {
        // n = 6: p = 4, r = 2; ranks 0 and 2 sit out, 1 and 3 hold their data.
        let m = 400;
        let s = generate(&hd(Collective::AllReduce, m), 6, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        let first = &s.patterns[0].pairs;
        assert_eq!(first.to_vec(), vec![(0, 1), (2, 3)]);
        let OpKind::Transfer { pattern, bytes } = s.ops.last().unwrap().kind else {
            panic!("the last op is the post step")
        };
        assert_eq!(
            s.patterns[pattern.0 as usize].pairs.to_vec(),
            vec![(1, 0), (3, 2)]
        );
        assert_eq!(bytes, m);
        let (sent, received) = sent_received(&s);
        assert_eq!((sent[0], received[0]), (400, 400));
        assert_eq!(sent[1], 400 + 2 * 3 * 100);
        assert_eq!(s.total_transfer_bytes(), 2 * 3 * 400 + 2 * 2 * 400);
    }

    #[test]
    fn reduce_scatter_and_all_gather_move_n_minus_1_over_n_for_power_of_two() {
        let m = 8 * 64;
        for c in [Collective::ReduceScatter, Collective::AllGather] {
            let s = generate(&hd(c, m), 8, &FLAT).unwrap();
            assert_eq!(transfers(&s), 3);
            let (sent, _) = sent_received(&s);
            assert!(sent.iter().all(|&b| b == 7 * m as u128 / 8), "{c}");
        }
    }

    #[test]
    fn non_power_of_two_reduce_scatter_counts_the_double_blocks() {
        // n = 3: p = 2, r = 1. Virtual 0 = rank 1 owns 2 blocks, virtual 1 = rank 2 owns 1.
        let s = generate(&hd(Collective::ReduceScatter, 300), 3, &FLAT).unwrap();
        let bytes: Vec<u64> = s
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Transfer { bytes, .. } => Some(bytes),
                OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => None,
            })
            .collect();
        // pre: 0 -> 1 all 300; halving d=1: rank 2 sends 2 blocks to rank 1 (the max);
        // post: rank 1 sends rank 0 its block.
        assert_eq!(bytes, vec![300, 200, 100]);
    }
}
