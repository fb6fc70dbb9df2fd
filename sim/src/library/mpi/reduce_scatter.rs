//! OpenMPI 4.1's reduce_scatter: `coll/tuned`'s fixed rules and the `coll/base` algorithms
//! they pick. Facts read from v4.1.4's sources (no code taken):
//!
//! - **Choice** (`ompi_coll_tuned_reduce_scatter_intra_dec_fixed`): for commutative operations,
//!   by communicator size and the whole vector's bytes (dtsim's `bytes`, n equal blocks), one
//!   of 1 non-overlapping, 2 recursive_halving, 3 ring, 4 butterfly ([`reduce_scatter_fixed`]):
//!   on 4-31 ranks recursive halving below 256 KiB, the ring from there.
//! - **Algorithms** (`coll_base_reduce_scatter.c`): recursive halving folds the ranks above the
//!   power of two below n into their odd neighbours (the even rank sends its whole vector),
//!   then partners at distance n/2, n/4 ... 1 swap the half of their current window that the
//!   other keeps (a receive posted, then a blocking send: an exchange between partners, as the
//!   testbed's run, [`super::exchange`]) and reduce it; a folded rank gets its block back
//!   last. Butterfly (Träff's) folds the same way and halves the same windows, but with
//!   partners at distance 1, 2 ... n/2, so each position ends holding the block of its mirror
//!   image (its bits reversed): a folded pair's even half goes straight to the rank that
//!   dropped out, then mirror images swap. The ring sends each block on to rank + 1 n − 1
//!   times, reducing what it received before sending it (the all-reduce ring's first half,
//!   played the same way: [`super::allreduce::ring_steps`]).
//!
//! Not modelled, and refused: non-overlapping (a tuned reduce then a tuned scatterv); the
//! fixed rules pick it only below 8 bytes on 4-7 ranks and for tiny vectors from 32 ranks.

use super::allreduce::ring_steps;
use super::Algorithm as _;
use super::{
    exchange_in_step, exchanges_pair_by_pair, message, reduce, LibraryError, LibraryOptions, Plan,
    Ready, Request, System, ELEMENT_BYTES,
};
use super::{oriented_ways, CallExchanges, Histories, Partners, StepPairs};
use crate::collective::steps::split_even;
use crate::collective::{Collective, Endpoint, Phase, Schedule};

algorithms! {
    /// `coll_tuned_reduce_scatter_algorithm` numbers and names.
    ReduceScatterAlg,
    "reduce_scatter",
    {
        NonOverlapping = 1 => "non_overlapping",
        RecursiveHalving = 2 => "recursive_halving",
        Ring = 3 => "ring",
        Butterfly = 4 => "butterfly",
    }
}

/// OpenMPI 4.1's fixed reduce_scatter rule for a commutative operation over a vector of
/// `bytes` on `comm_size` ranks.
pub fn reduce_scatter_fixed(comm_size: u32, bytes: u64) -> ReduceScatterAlg {
    use ReduceScatterAlg::*;
    let rules: &[super::Rule<ReduceScatterAlg>] = &[
        (4, &[(65536, Ring), (131072, Butterfly)], Ring),
        (8, &[(8, NonOverlapping), (262144, RecursiveHalving)], Ring),
        (32, &[(262144, RecursiveHalving)], Ring),
        (
            64,
            &[
                (64, NonOverlapping),
                (2048, RecursiveHalving),
                (524288, Butterfly),
            ],
            Ring,
        ),
        (
            128,
            &[
                (256, NonOverlapping),
                (512, RecursiveHalving),
                (2048, Butterfly),
                (4096, RecursiveHalving),
            ],
            Butterfly,
        ),
        (
            256,
            &[(256, NonOverlapping), (512, RecursiveHalving)],
            Butterfly,
        ),
        (
            512,
            &[(256, NonOverlapping), (1024, RecursiveHalving)],
            Butterfly,
        ),
        (
            1024,
            &[
                (512, NonOverlapping),
                (2048, RecursiveHalving),
                (8192, Butterfly),
                (16384, RecursiveHalving),
            ],
            Butterfly,
        ),
        (
            2048,
            &[
                (512, NonOverlapping),
                (4096, RecursiveHalving),
                (16384, Butterfly),
                (32768, RecursiveHalving),
            ],
            Butterfly,
        ),
        (
            4096,
            &[(512, NonOverlapping), (4096, RecursiveHalving)],
            Butterfly,
        ),
        (
            u32::MAX,
            &[(1024, NonOverlapping), (8192, RecursiveHalving)],
            Butterfly,
        ),
    ];
    super::by_rules(rules, comm_size, bytes)
}

/// The reduce_scatter OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let (alg, how) = super::chosen(opts, || reduce_scatter_fixed(n, req.bytes))?;
    if alg == ReduceScatterAlg::NonOverlapping {
        return Err(LibraryError::new(
            "collective.algorithm",
            format!(
                "a reduce_scatter dtsim plays: OpenMPI runs {} here ({how}, {n} ranks, {} B), \
                 which is not modelled; force recursive_halving, ring or butterfly",
                alg.as_str(),
                req.bytes
            ),
        ));
    }
    let count = req.bytes / ELEMENT_BYTES;
    let blocks = split_even(count, u64::from(n.max(1)));
    let block = blocks.first().copied().unwrap_or(0) * ELEMENT_BYTES;
    let build = |x: &CallExchanges| {
        let mut s = Schedule::new(
            Collective::ReduceScatter,
            format!("mpi {}", alg.as_str()),
            n,
            req.bytes,
        );
        if n > 1 && block > 0 {
            match alg {
                ReduceScatterAlg::Ring => ring_steps(&mut s, n, block, n - 1, 0),
                ReduceScatterAlg::Butterfly => butterfly(&mut s, block, n, x),
                _ => recursive_halving(&mut s, block, n, x),
            }
        }
        s
    };
    let (s, alternatives) = oriented_ways(opts.mpi_exchanges, n, build);
    Ok(Plan::with_orientations(
        s,
        format!("OpenMPI 4.1 reduce_scatter {} ({how})", alg.as_str()),
        alternatives,
    ))
}

/// The power of two below `n` that recursive halving and butterfly run on: (positions, ranks
/// folded into their odd neighbours).
fn fold_sizes(n: u32) -> (u32, u32) {
    let pof2 = 1u32 << (31 - n.leading_zeros());
    (pof2, n - pof2)
}

/// The rank playing position `v` of the power of two when `remain` ranks were folded: the odd
/// one of a folded pair.
fn real(v: u32, remain: u32) -> u32 {
    if v < remain {
        2 * v + 1
    } else {
        v + remain
    }
}

/// The first `remain` even ranks send their whole vector (`n` blocks) to their odd neighbour,
/// which reduces it: what each rank of the halving waits for (nothing without a fold, and
/// nothing for the ranks above the fold).
fn fold(s: &mut Schedule, block: u64, n: u32, remain: u32) -> Ready {
    let mut ready = Ready::new(n);
    let whole = block * u64::from(n);
    for k in 0..remain {
        let (even, odd) = (2 * k, 2 * k + 1);
        let got = message(
            s,
            &[(even, odd)],
            whole,
            Vec::new(),
            Phase::ReduceScatter,
            0,
        );
        let reduced = reduce(s, 1, whole, got, Phase::ReduceScatter, 0);
        ready.set(&[even, odd], reduced);
    }
    ready
}

/// The fold ([`fold`]), then the halving rounds of recursive halving and butterfly over the
/// `pof2` positions (block `b` holds two ranks' blocks when `b < remain`), partners `v ^ mask`
/// for each mask in turn: each keeps the half of its window of blocks that its `mask` bit says
/// (clear: the lower), swaps the other half with its partner and reduces what it received.
/// Pair by pair ([`Ready`]): a pair swaps once both partners are done with their own last
/// round. Returns what each rank waits for after the rounds, every position's final window's
/// first block, and the step after the rounds.
fn fold_and_halve(
    s: &mut Schedule,
    block: u64,
    n: u32,
    masks: impl Iterator<Item = u32>,
    x: &CallExchanges,
) -> (Ready, Vec<u32>, u32) {
    let (pof2, remain) = fold_sizes(n);
    let mut ready = fold(s, block, n, remain);
    let mut step = u32::from(remain > 0);
    // The odd ranks of the fold reduced a whole vector first; the others entered the halving.
    let mut histories = Histories::new(n, (0..remain).map(|k| 2 * k + 1));
    let blocks_of = |b: u32| -> u64 {
        if b < remain {
            2
        } else {
            1
        }
    };
    // Each position's window of blocks [lo, hi); partners keep opposite halves.
    let mut windows: Vec<(u32, u32)> = vec![(0, pof2); pof2 as usize];
    for mask in masks {
        // Blocks each position sends this step.
        let mut sends = vec![0u64; pof2 as usize];
        for v in 0..pof2 {
            let (lo, hi) = windows[v as usize];
            let mid = lo + (hi - lo) / 2;
            // The lower position keeps the lower half and sends the upper.
            let (keep, send) = if v & mask == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            sends[v as usize] = (send.0..send.1).map(blocks_of).sum();
            windows[v as usize] = keep;
        }
        let lower: Vec<u32> = (0..pof2).filter(|v| v & mask == 0).collect();
        let pairs: Vec<(Endpoint, Endpoint)> = lower
            .iter()
            .map(|&v| (real(v, remain), real(v ^ mask, remain)))
            .collect();
        let step_pairs = histories.step(&pairs, Partners::Entering);
        // Partners that send the same exchange it; where a folded position holds more, the
        // larger side's surplus follows one way.
        for (&v, &(a, b)) in lower.iter().zip(&pairs) {
            let (up, down) = (sends[v as usize], sends[(v ^ mask) as usize]);
            let common = up.min(down);
            let swapped = exchange_in_step(
                s,
                (&[(a, b)], step_pairs),
                block * common,
                n,
                x,
                ready.of(&[a, b]),
                Phase::ReduceScatter,
                step,
            );
            let done = if up > common {
                message(
                    s,
                    &[(a, b)],
                    block * (up - common),
                    vec![swapped],
                    Phase::ReduceScatter,
                    step,
                )
            } else if down > common {
                message(
                    s,
                    &[(b, a)],
                    block * (down - common),
                    vec![swapped],
                    Phase::ReduceScatter,
                    step,
                )
            } else {
                swapped
            };
            // Each reduces what its partner sent it.
            for (r, got) in [(a, down), (b, up)] {
                let reduced = reduce(s, 1, got * block, done, Phase::ReduceScatter, step);
                ready.set(&[r], reduced);
            }
        }
        step += 1;
    }
    (ready, windows.iter().map(|w| w.0).collect(), step)
}

/// Recursive halving over blocks of `block` bytes (see the module): partners at distance
/// n/2, n/4 ... 1, so position v ends holding block v; a folded pair's odd rank then sends
/// the even one its block.
fn recursive_halving(s: &mut Schedule, block: u64, n: u32, x: &CallExchanges) {
    let (pof2, remain) = fold_sizes(n);
    let masks = std::iter::successors(Some(pof2 >> 1), |m| Some(m >> 1)).take_while(|&m| m > 0);
    let (ready, _, step) = fold_and_halve(s, block, n, masks, x);
    for k in 0..remain {
        let (even, odd) = (2 * k, 2 * k + 1);
        message(
            s,
            &[(odd, even)],
            block,
            ready.of(&[odd]),
            Phase::ReduceScatter,
            step,
        );
    }
}

/// `v`'s lowest `bits` bits in reverse order (`ompi_mirror_perm`).
fn mirror(v: u32, bits: u32) -> u32 {
    if bits == 0 {
        return v;
    }
    v.reverse_bits() >> (32 - bits)
}

/// Butterfly over blocks of `block` bytes (see the module): the fold, then partners at
/// distance 1, 2 ... n/2, so position v ends holding the block of its mirror image m(v) (bits
/// reversed). If that block is a folded pair's, the even rank's half goes to it directly;
/// then v and m(v), where they differ, swap what each holds for the other.
fn butterfly(s: &mut Schedule, block: u64, n: u32, x: &CallExchanges) {
    let (pof2, remain) = fold_sizes(n);
    let bits = pof2.trailing_zeros();
    let masks = std::iter::successors(Some(1u32), |m| Some(m << 1)).take_while(|&m| m < pof2);
    let (mut ready, held, step) = fold_and_halve(s, block, n, masks, x);
    // Folded blocks' even halves to the ranks that dropped out (blocking sends, first).
    for v in (0..pof2).filter(|&v| held[v as usize] < remain) {
        let (from, to) = (real(v, remain), 2 * held[v as usize]);
        let sent = message(
            s,
            &[(from, to)],
            block,
            ready.of(&[from]),
            Phase::ReduceScatter,
            step,
        );
        ready.set(&[from], sent);
    }
    debug_assert!((0..pof2).all(|v| held[v as usize] == mirror(v, bits)));
    let swaps: Vec<(Endpoint, Endpoint)> = (0..pof2)
        .filter(|&v| v < mirror(v, bits))
        .map(|v| (real(v, remain), real(mirror(v, bits), remain)))
        .collect();
    let all = StepPairs::all(Partners::Entering, swaps.len() as u32);
    exchanges_pair_by_pair(
        s,
        &mut ready,
        (&swaps, all),
        block,
        n,
        x,
        None,
        Phase::ReduceScatter,
        step,
    );
}

#[cfg(test)]
mod tests {
    use super::super::Exchanges;
    use super::*;
    use ReduceScatterAlg::*;

    #[test]
    fn fixed_rules_at_the_thresholds_of_the_source() {
        // coll_tuned_decision_fixed.c (v4.1.4), commutative operations.
        assert_eq!(reduce_scatter_fixed(2, 65535), Ring);
        assert_eq!(reduce_scatter_fixed(3, 65536), Butterfly);
        assert_eq!(reduce_scatter_fixed(3, 131072), Ring);
        assert_eq!(reduce_scatter_fixed(4, 7), NonOverlapping);
        assert_eq!(reduce_scatter_fixed(4, 262143), RecursiveHalving);
        assert_eq!(reduce_scatter_fixed(7, 262144), Ring);
        assert_eq!(reduce_scatter_fixed(16, 1 << 20), Ring);
        assert_eq!(reduce_scatter_fixed(40, 100_000), Butterfly);
        assert_eq!(reduce_scatter_fixed(100, 3000), RecursiveHalving);
        assert_eq!(reduce_scatter_fixed(700, 10000), RecursiveHalving);
        assert_eq!(reduce_scatter_fixed(5000, 8191), RecursiveHalving);
        assert_eq!(reduce_scatter_fixed(5000, 8192), Butterfly);
    }

    #[test]
    fn recursive_halving_on_six_ranks_folds_two_and_sends_each_side_its_own_share() {
        // 6 ranks, blocks of B: ranks 0 and 2 send their whole vector (6B) to 1 and 3; the
        // four positions (ranks 1, 3, 4, 5; the first two holding two blocks each) halve at
        // distance 2 (2B one way, 4B the other, per pair) and 1 (2B each way between 1 and
        // 3, B each way between 4 and 5); 1 and 3 return their partners' block: 32B in all.
        let block = 1u64 << 20;
        let plan = six_ranks_halving(block, Exchanges::default());
        let data = crate::library::testing::payload_bytes(&plan.schedule, super::super::ACK_BYTES)
            - crate::library::testing::transfer_bytes(&plan.schedule, super::super::REQUEST_BYTES);
        assert_eq!(data, 32 * u128::from(block));
    }

    /// Recursive halving's plan on six ranks for blocks of `block` bytes, exchanges in `x`.
    fn six_ranks_halving(block: u64, x: Exchanges) -> Plan {
        let req = Request {
            collective: Collective::ReduceScatter,
            bytes: 6 * block,
            root: 0,
            peer: 1,
        };
        let opts = LibraryOptions {
            algorithm: Some("recursive_halving".into()),
            mpi_exchanges: x,
            ..Default::default()
        };
        plan(&req, &crate::library::testing::cpu_hosts(6), &opts).unwrap()
    }

    #[test]
    fn the_halving_step_after_the_fold_pairs_partners_that_come_apart() {
        // 6 ranks, blocks of 1 MiB: ranks 1 and 3 reduce the fold's vectors while 4 and 5
        // start halving, so the first halving step pairs 1-4 and 3-5, which come to it apart:
        // both pairs at the polling share, their common 2 MiB waiting for its head.
        use super::super::exchanges::{head_bytes, Partners, StepPairs};
        let block = 1u64 << 20;
        let p = six_ranks_halving(block, Exchanges::Expected);
        let head = |partners| {
            let step = StepPairs::all(partners, 2);
            head_bytes(6, 2 * block, Exchanges::Expected, step)
        };
        let has = |bytes| crate::library::testing::transfer_bytes(&p.schedule, bytes) > 0;
        // (Without the fold every step of recursive halving pairs partners alike: entering.)
        assert!(has(head(Partners::Polling)));
        // The next step (1-3, 4-5: 2 MiB and 1 MiB each way) pairs partners alike again.
        assert!(has(head(Partners::Entering)));
    }

    /// The data bytes (requests and answers left out) of OpenMPI's reduce_scatter of `n`
    /// blocks of 1 MiB on `n` ranks by `alg`.
    fn data_bytes(alg: &str, n: u32) -> u128 {
        let block = 1u64 << 20;
        let whole = u64::from(n) * block;
        let p = crate::library::testing::mpi_forced(Collective::ReduceScatter, alg, n, 0, whole);
        crate::library::testing::mpi_data_bytes(&p.schedule) / u128::from(block)
    }

    #[test]
    fn butterfly_halves_from_distance_one_then_swaps_mirror_images() {
        // coll_base_reduce_scatter.c (v4.1.4), in blocks B. 2 ranks: one swap of halves
        // (B each way), the mirror of 1 bit changes nothing.
        assert_eq!(data_bytes("butterfly", 2), 2);
        // 3 ranks: rank 0 folds its whole vector (3B) into rank 1; positions 0 (rank 1, the
        // blocks of ranks 0 and 1) and 1 (rank 2) swap halves, 1B one way and 2B the other;
        // rank 1 hands rank 0 its block: 7B.
        assert_eq!(data_bytes("butterfly", 3), 7);
        // 4 ranks: halves at distance 1 (2B each way, 8B), quarters at distance 2 (4B), then
        // positions 1 and 2, each holding the other's block, swap (2B): 14B, where recursive
        // halving, ending with every block home, moves 12B.
        assert_eq!(data_bytes("butterfly", 4), 14);
        assert_eq!(data_bytes("recursive_halving", 4), 12);
        // 6 ranks: the folds (12B), the halving at distance 1 (12B) and 2 (6B), the folded
        // blocks' even halves to ranks 0 and 2 (2B), ranks 3 and 4 swapping theirs (2B).
        assert_eq!(data_bytes("butterfly", 6), 34);
    }

    #[test]
    fn the_mirror_image_reverses_the_bits() {
        assert_eq!(mirror(0, 2), 0);
        assert_eq!(mirror(1, 2), 2);
        assert_eq!(mirror(3, 2), 3);
        assert_eq!(mirror(1, 3), 4);
        assert_eq!(mirror(6, 3), 3);
        assert_eq!(mirror(1, 1), 1);
        assert_eq!(mirror(0, 0), 0);
    }

    #[test]
    fn the_fixed_rules_butterfly_plays_and_non_overlapping_is_refused() {
        // 3 ranks at 64 KiB: the rules pick butterfly, which plays.
        let sys = crate::library::testing::cpu_hosts(3);
        let req = |bytes| Request {
            collective: Collective::ReduceScatter,
            bytes,
            root: 0,
            peer: 1,
        };
        let p = plan(&req(65544), &sys, &LibraryOptions::default()).unwrap();
        assert!(p.decision.contains("butterfly"), "{}", p.decision);
        let opts = LibraryOptions {
            algorithm: Some("non_overlapping".into()),
            ..Default::default()
        };
        let e = plan(&req(65544), &sys, &opts).unwrap_err();
        assert!(e.to_string().contains("not modelled"), "{e}");
    }

    #[test]
    fn algorithms_by_name_or_number() {
        assert_eq!(ReduceScatterAlg::parse("2"), Some(RecursiveHalving));
        assert_eq!(
            ReduceScatterAlg::parse("non-overlapping"),
            Some(NonOverlapping)
        );
        assert_eq!(ReduceScatterAlg::parse("5"), None);
    }
}
