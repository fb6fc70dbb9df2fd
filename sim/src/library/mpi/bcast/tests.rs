//! The broadcast's rules, trees and plans, as the source builds them.
#![cfg(test)]

use super::*;
use BcastAlg::*;

#[test]
fn fixed_rules_at_the_thresholds_of_the_source() {
    // coll_tuned_decision_fixed.c (v4.1.4), ompi_coll_tuned_bcast_intra_dec_fixed.
    assert_eq!(bcast_fixed(2, 31), Pipeline);
    assert_eq!(bcast_fixed(3, 32767), BasicLinear);
    assert_eq!(bcast_fixed(3, 1 << 20), BinaryTree);
    assert_eq!(bcast_fixed(4, 8191), Binomial);
    assert_eq!(bcast_fixed(4, 262144), BasicLinear);
    assert_eq!(bcast_fixed(7, 1048575), BasicLinear);
    assert_eq!(bcast_fixed(6, 1048576), Chain);
    assert_eq!(bcast_fixed(8, 4095), Knomial);
    assert_eq!(bcast_fixed(8, 32768), BasicLinear);
    assert_eq!(bcast_fixed(16, 1048576), ScatterAllgather);
    assert_eq!(bcast_fixed(100, 1), Knomial);
    assert_eq!(bcast_fixed(200, 40000), BinaryTree);
    assert_eq!(bcast_fixed(512, 20000), SplitBinaryTree);
    assert_eq!(bcast_fixed(10000, 10000), BinaryTree);
}

#[test]
fn algorithms_by_name_or_number() {
    assert_eq!(BcastAlg::parse("6"), Some(Binomial));
    assert_eq!(BcastAlg::parse("Chain"), Some(Chain));
    assert_eq!(BcastAlg::parse("10"), None);
}

#[test]
fn trees_as_coll_base_topo_builds_them() {
    // build_tree's example for fanout 2, 7 ranks: 0 -> 1, 2; 1 -> 3, 5; 2 -> 4, 6.
    let t = fanout_tree(7, 0, 2);
    assert_eq!(t[0], vec![1, 2]);
    assert_eq!(t[1], vec![3, 5]);
    assert_eq!(t[2], vec![4, 6]);
    assert!(t[3..].iter().all(Vec::is_empty));
    // Binomial: 0 -> 1, 2, 4; 1 -> 3, 5; 2 -> 6; 3 -> 7.
    let b = binomial_tree(8, 0);
    assert_eq!(b[0], vec![1, 2, 4]);
    assert_eq!(b[1], vec![3, 5]);
    assert_eq!(b[2], vec![6]);
    assert_eq!(b[3], vec![7]);
    // The k-nomial example of coll_base_bcast.c, radix 4 on 10 ranks:
    // 0 -> 4, 8, 1, 2, 3; 4 -> 5, 6, 7; 8 -> 9.
    let k = knomial_tree(10, 0, 4);
    assert_eq!(k[0], vec![4, 8, 1, 2, 3]);
    assert_eq!(k[4], vec![5, 6, 7]);
    assert_eq!(k[8], vec![9]);
    // Shifted by the root: rooted at 2, rank 2 plays 0's part.
    assert_eq!(binomial_tree(4, 2)[2], vec![3, 0]);
    // Chains: fan-out 1 is the pipeline 0 -> 1 -> 2 -> 3; fan-out 2 on 6 ranks hangs
    // 1-2-3 and 4-5 from the root.
    let p = chain(4, 0, 1);
    assert_eq!(p, vec![vec![1], vec![2], vec![3], vec![]]);
    let c = chain(6, 0, 2);
    assert_eq!(c[0], vec![1, 4]);
    assert_eq!(c[1], vec![2]);
    assert_eq!(c[2], vec![3]);
    assert_eq!(c[4], vec![5]);
    assert!(c[3].is_empty() && c[5].is_empty());
}

/// OpenMPI's broadcast of `bytes` from `root` on `n` ranks by `alg`.
fn planned(alg: &str, n: u32, root: u32, bytes: u64) -> Plan {
    crate::library::testing::mpi_forced(Collective::Broadcast, alg, n, root, bytes)
}

/// Data bytes of a plan (requests and answers left out).
fn data(p: &Plan) -> u128 {
    crate::library::testing::mpi_data_bytes(&p.schedule)
}

#[test]
fn scatter_allgather_scatters_by_binomial_tree_then_gathers() {
    // coll_base_bcast.c's example, 8 ranks, blocks B of 1 MiB: the scatter sends 4B to
    // rank 4, 2B to 2, B to 1, then 2B from 4 to 6 and B each to 5, 3 and 7 (12B); the
    // all-gather moves 1, 2 then 4 blocks per rank (56B) by recursive doubling, or one
    // block per rank in each of 7 ring steps (56B).
    let b = 1u128 << 20;
    for alg in ["scatter_allgather", "scatter_allgather_ring"] {
        let p = planned(alg, 8, 0, 8 << 20);
        p.schedule.validate().unwrap();
        assert_eq!(data(&p), 68 * b, "{alg}");
        assert_eq!(
            planned(alg, 8, 5, 8 << 20).schedule.ops.len(),
            p.schedule.ops.len()
        );
    }
}

#[test]
fn scatter_allgather_gets_every_block_everywhere_on_any_rank_count() {
    // Not a power of two: the ranks whose partner subtree is incomplete get its blocks
    // passed down by recursive halving (the plan checks every rank ends with the whole
    // vector); fewer elements than ranks fall back to basic_linear.
    for n in 2..40u32 {
        for root in [0, n / 2, n - 1] {
            for bytes in [4 * u64::from(n), 1 << 20, (1 << 20) + 4 * 7] {
                for alg in ["scatter_allgather", "scatter_allgather_ring"] {
                    let p = planned(alg, n, root, bytes);
                    p.schedule.validate().unwrap();
                    // Every rank but the root gets the vector at least once (counted
                    // where no run of blocks is a request's or an answer's size).
                    let need = u128::from(bytes) * u128::from(n - 1);
                    assert!(
                        bytes < 1 << 20 || data(&p) >= need,
                        "{alg} on {n} from {root}, {bytes} B: {} < {need}",
                        data(&p)
                    );
                }
            }
        }
    }
    let p = planned("scatter_allgather", 8, 0, 16);
    assert!(p.decision.contains("basic_linear"), "{}", p.decision);
    assert_eq!(data(&p), 7 * 16);
}

#[test]
fn split_binary_tree_sends_each_subtree_a_half_then_neighbours_swap() {
    // coll_base_bcast.c: halves H down the binary tree (0 -> 1, 2; 1 -> 3, 5; 2 -> 4, 6;
    // 3 -> 7), then left nodes swap with the right node after them. 7 ranks: 6H down, 3
    // swaps (6H); 8 ranks: 7H down, 3 swaps (6H), and the root's right half to rank 7 (H):
    // every rank but the root gets the message exactly once.
    for (n, root) in [(7u32, 0u32), (8, 0), (8, 3), (9, 8)] {
        let p = planned("split_binary_tree", n, root, 1 << 20);
        p.schedule.validate().unwrap();
        assert_eq!(data(&p), u128::from(n - 1) << 20, "{n} ranks from {root}");
    }
    // One element has no second half: the chain.
    let p = planned("split_binary_tree", 4, 0, 4);
    assert_eq!(data(&p), 3 * 4);
}

#[test]
fn the_fixed_rules_scatter_allgather_plays() {
    let req = Request {
        collective: Collective::Broadcast,
        bytes: 1 << 20,
        root: 0,
        peer: 1,
    };
    let sys = crate::library::testing::cpu_hosts(16);
    let p = plan(&req, &sys, &LibraryOptions::default()).unwrap();
    assert!(
        p.decision.contains("scatter_allgather (fixed rules)"),
        "{}",
        p.decision
    );
}

#[test]
fn a_rendezvous_tree_is_played_in_every_order_the_roots_children_may_answer_in() {
    let plan_of = |alg: &str, bytes: u64, n: u32| {
        let req = Request {
            collective: Collective::Broadcast,
            bytes,
            root: 0,
            peer: 1,
        };
        let opts = LibraryOptions {
            algorithm: Some(alg.into()),
            ..LibraryOptions::default()
        };
        plan(&req, &crate::library::testing::cpu_hosts(n), &opts).unwrap()
    };
    // The root's first data goes to the child whose transfer the schedule starts first.
    let first_served = |s: &Schedule| -> u32 {
        s.ops
            .iter()
            .find_map(|op| match op.kind {
                crate::collective::OpKind::Transfer { pattern, bytes } if bytes > 1 << 16 => {
                    Some(s.patterns[pattern.0 as usize].pairs[0].1)
                }
                _ => None,
            })
            .unwrap()
    };
    // Binomial on 4 ranks: the root's children 1 and 2, both orders.
    let p = plan_of("binomial", 1 << 20, 4);
    assert_eq!(p.alternatives.len(), 1);
    assert_eq!(first_served(&p.schedule), 1);
    assert_eq!(first_served(&p.alternatives[0]), 2);
    // Eager sends leave as posted: one way only.
    assert!(plan_of("binomial", 1 << 15, 4).alternatives.is_empty());
    // basic_linear on 4 ranks: 3! orders; on 16, past the cap, the 15 rotations; on 256, 24.
    assert_eq!(plan_of("basic_linear", 1 << 20, 4).alternatives.len(), 5);
    assert_eq!(plan_of("basic_linear", 1 << 20, 16).alternatives.len(), 14);
    assert_eq!(plan_of("basic_linear", 1 << 20, 256).alternatives.len(), 23);
    // One child (the pipeline's chain): nothing to choose.
    assert!(plan_of("pipeline", 1 << 20, 4).alternatives.is_empty());
    // Blocking sends one after the other (scatter_allgather): their order is the code's; its
    // ways are those of its all_gather's slow exchanges (which partner posts first).
    let p = plan_of("scatter_allgather", 1 << 20, 16);
    assert_eq!(p.alternatives_vary, crate::library::mpi::ORIENTATION);
}

#[test]
fn every_rank_but_the_root_receives_exactly_once() {
    for n in 1..40 {
        for root in [0, n / 2, n - 1] {
            for t in [
                fanout_tree(n, root, 2),
                binomial_tree(n, root),
                knomial_tree(n, root, 4),
                chain(n, root, 1),
                chain(n, root, 4),
            ] {
                let mut got = vec![0; n as usize];
                for kids in &t {
                    for &c in kids {
                        got[c as usize] += 1;
                    }
                }
                for r in 0..n {
                    let want = u32::from(r != root);
                    assert_eq!(got[r as usize], want, "n {n} root {root} rank {r}: {t:?}");
                }
            }
        }
    }
}
