//! NCCL's double binary tree: all-reduce, reduce and broadcast over two complementary binary
//! trees, each carrying half of the bytes.
//!
//! Tree shape (NCCL's `ncclGetBtree`, over tree *positions* 0..n): position 0 is the root and
//! has a single child; every other position p with lowest set bit b has parent
//! `(p ^ b) | (b << 1)`, or `p ^ b` when that is out of range. Odd positions are leaves, even
//! positions are interior. Positions map to ranks:
//! - all-reduce (NCCL): tree 0 is the identity; tree 1 is the mirror `n-1-p` when n is even (so
//!   the interior ranks of one tree are exactly the leaves of the other) and the shift `p+1 mod
//!   n` when n is odd (only rank 0 is interior in both);
//! - reduce and broadcast with root r: both trees must be rooted at r, so tree 0 is `r+p mod n`
//!   and tree 1 keeps r at position 0 and shifts the others by one (`r + 1 + (p mod (n-1))`);
//!   only the root is interior in both.
//!
//! A level is the set of (child, parent) edges whose child is at depth d. Reduce runs levels
//! from the deepest up (each level op followed by the parents' reduction), broadcast from depth
//! 1 down (parent → child); all-reduce is reduce then broadcast. Each tree is one channel,
//! pipelined in `slices` chunks: chunk c at a level waits for chunk c at the previous level and
//! chunk c-1 at the same level.

use super::steps::{chain, split_even, ChainStep};
use super::{Collective, CollectiveError, CollectiveSpec, Phase, Schedule};

/// NCCL's binary-tree parent of position `p` among `n` positions (`None` for the root).
pub(crate) fn parent(p: u32, n: u32) -> Option<u32> {
    if p == 0 {
        return None;
    }
    let bit = p & p.wrapping_neg();
    let up = (p ^ bit) | (bit << 1);
    Some(if up >= n { p ^ bit } else { up })
}

/// The rank at each position of tree `tree` (0 or 1).
pub(crate) fn ranks_of_positions(tree: u32, n: u32, root: Option<u32>) -> Vec<u32> {
    (0..n)
        .map(|p| match (tree, root) {
            (0, None) => p,
            (_, None) if n.is_multiple_of(2) => n - 1 - p,
            (_, None) => (p + 1) % n,
            (0, Some(r)) => (r + p) % n,
            (_, Some(r)) if p == 0 => r,
            (_, Some(r)) => (r + 1 + p % (n - 1)) % n,
        })
        .collect()
}

/// (child, parent) rank pairs of each depth 1..=D of a tree, deepest last.
pub(crate) fn levels(tree: u32, n: u32, root: Option<u32>) -> Vec<Vec<(u32, u32)>> {
    let rank = ranks_of_positions(tree, n, root);
    let mut depth = vec![0usize; n as usize];
    // A parent can be a larger position than its child, so walk up instead of sweeping.
    for p in 1..n {
        let mut d = 0;
        let mut q = p;
        while let Some(up) = parent(q, n) {
            d += 1;
            q = up;
        }
        depth[p as usize] = d;
    }
    let max_depth = depth.iter().copied().max().unwrap_or(0);
    let mut out = vec![Vec::new(); max_depth];
    for p in 1..n {
        let up = parent(p, n).unwrap_or(0);
        out[depth[p as usize] - 1].push((rank[p as usize], rank[up as usize]));
    }
    out
}

pub(crate) fn generate(spec: &CollectiveSpec, ranks: u32) -> Result<Schedule, CollectiveError> {
    let mut schedule = Schedule::new(spec.collective, "double_binary_tree", ranks, spec.bytes);
    let root = match spec.collective {
        Collective::AllReduce => None,
        _ => Some(spec.root),
    };
    let halves = split_even(spec.bytes, 2);
    for (tree, &bytes) in halves.iter().enumerate() {
        if bytes == 0 && !(spec.bytes == 0 && tree == 0) {
            continue;
        }
        let levels = levels(tree as u32, ranks, root);
        let mut steps = Vec::new();
        if spec.collective != Collective::Broadcast {
            for level in levels.iter().rev() {
                let mut parents: Vec<u32> = level.iter().map(|&(_, p)| p).collect();
                parents.sort_unstable();
                parents.dedup();
                steps.push(ChainStep {
                    pattern: schedule.add_pattern(level.clone()),
                    bytes,
                    phase: Phase::Reduce,
                    reducers: parents.len() as u32,
                });
            }
        }
        if spec.collective != Collective::Reduce {
            for level in &levels {
                let down: Vec<(u32, u32)> = level.iter().map(|&(c, p)| (p, c)).collect();
                steps.push(ChainStep {
                    pattern: schedule.add_pattern(down),
                    bytes,
                    phase: Phase::Broadcast,
                    reducers: 0,
                });
            }
        }
        chain(&mut schedule, &steps, spec.slices, tree as u16, 0, &[]);
    }
    Ok(schedule)
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::{Algorithm, OpKind};
    use super::*;

    fn interior(tree: u32, n: u32, root: Option<u32>) -> Vec<bool> {
        let mut is = vec![false; n as usize];
        for level in levels(tree, n, root) {
            for (_, p) in level {
                is[p as usize] = true;
            }
        }
        is
    }

    #[test]
    fn the_tree_is_nccls_btree() {
        // NCCL's picture for 14 ranks: 0 - 8; 8 - {4, 12}; 4 - {2, 6}; 12 - {10, 13}; ...
        let parents: Vec<Option<u32>> = (0..14).map(|p| parent(p, 14)).collect();
        let expected = [
            None,
            Some(2),
            Some(4),
            Some(2),
            Some(8),
            Some(6),
            Some(4),
            Some(6),
            Some(0),
            Some(10),
            Some(12),
            Some(10),
            Some(8),
            Some(12),
        ];
        assert_eq!(parents, expected);
    }

    #[test]
    fn every_rank_is_interior_in_at_most_one_tree() {
        for n in 4..64 {
            let (a, b) = (interior(0, n, None), interior(1, n, None));
            let both: Vec<u32> = (0..n).filter(|&r| a[r as usize] && b[r as usize]).collect();
            if n % 2 == 0 {
                assert!(both.is_empty(), "n = {n}: {both:?}");
            } else {
                // NCCL's shifted tree for odd n shares exactly rank 0.
                assert_eq!(both, vec![0], "n = {n}");
            }
            for root in [0, n / 2, n - 1] {
                let (a, b) = (interior(0, n, Some(root)), interior(1, n, Some(root)));
                let both: Vec<u32> = (0..n).filter(|&r| a[r as usize] && b[r as usize]).collect();
                assert_eq!(both, vec![root], "n = {n}, root = {root}");
            }
        }
    }

    #[test]
    fn every_tree_is_binary_and_spans_all_ranks() {
        for n in 2..70 {
            for root in [None, Some(n - 1)] {
                for tree in 0..2 {
                    let mut children = vec![0; n as usize];
                    let mut as_child = vec![0; n as usize];
                    for level in levels(tree, n, root) {
                        for (c, p) in level {
                            children[p as usize] += 1;
                            as_child[c as usize] += 1;
                        }
                    }
                    assert!(children.iter().all(|&k| k <= 2));
                    let top = ranks_of_positions(tree, n, root)[0];
                    for r in 0..n {
                        assert_eq!(as_child[r as usize], u32::from(r != top));
                    }
                }
            }
        }
    }

    #[test]
    fn all_reduce_sends_each_half_up_once_and_receives_it_down_once() {
        let n = 11;
        let m = 1001;
        let mut sp = spec(Collective::AllReduce, Algorithm::DoubleBinaryTree, m);
        sp.slices = 4;
        let s = generate(&sp, n, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        for tree in 0..2u16 {
            let half = split_even(m, 2)[tree as usize] as u128;
            let mut up = vec![0u128; n as usize];
            let mut down = vec![0u128; n as usize];
            for op in s.ops.iter().filter(|op| op.channel == tree) {
                if let OpKind::Transfer { pattern, bytes } = op.kind {
                    for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                        match op.phase {
                            Phase::Reduce => up[a as usize] += bytes as u128,
                            _ => down[b as usize] += bytes as u128,
                        }
                    }
                }
            }
            let top = ranks_of_positions(tree as u32, n, None)[0];
            for r in 0..n as usize {
                let expected = if r as u32 == top { 0 } else { half };
                assert_eq!(
                    (up[r], down[r]),
                    (expected, expected),
                    "tree {tree} rank {r}"
                );
            }
        }
        assert_eq!(s.total_transfer_bytes(), 2 * (n as u128 - 1) * m as u128);
    }

    #[test]
    fn chunks_pipeline_level_by_level() {
        let mut sp = spec(Collective::Broadcast, Algorithm::DoubleBinaryTree, 64);
        sp.slices = 2;
        let s = generate(&sp, 4, &FLAT).unwrap();
        // 4 ranks: depth 2 (0 -> 2 -> {1, 3}); tree 0's ops: level 1 chunks 0,1, level 2 chunks 0,1.
        let tree0: Vec<_> = s.ops.iter().filter(|op| op.channel == 0).collect();
        assert_eq!(tree0.len(), 4);
        assert_eq!(s.ops[3].deps.len(), 2);
        assert!(s.ops.iter().all(|op| op.phase == Phase::Broadcast));
        let (_, received) = sent_received(&s);
        assert_eq!(received, vec![0, 64, 64, 64]);
    }

    #[test]
    fn reduce_ends_at_the_root_in_both_trees() {
        let mut sp = spec(Collective::Reduce, Algorithm::DoubleBinaryTree, 64);
        sp.root = 5;
        let s = generate(&sp, 9, &FLAT).unwrap();
        let (sent, received) = sent_received(&s);
        assert_eq!(sent[5], 0);
        assert_eq!(received[5], 64);
        assert_eq!(s.total_transfer_bytes(), 8 * 64);
        assert!(s
            .ops
            .iter()
            .any(|op| matches!(op.kind, OpKind::Reduce { .. })));
    }
}
