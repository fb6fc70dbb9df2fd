//! OpenMPI's all-reduce: the fixed rules and the `coll/base` algorithms they pick.

use super::Algorithm as _;
use super::{
    exchanges_pair_by_pair, oriented_ways, CallExchanges, Histories, Partners, Ready, StepPairs,
};
use super::{
    is_eager, message, message_on, reduce, transfer, LibraryError, LibraryOptions, Plan, Request,
    System, ACK_BYTES, ELEMENT_BYTES, REQUEST_BYTES,
};
use crate::collective::steps::split_even;
use crate::collective::{Collective, Endpoint, OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;

/// How much later than the others the last rank enters a ring. Ranks never enter together: a
/// single ring exchange on the testbed ran late in 4 of 10 repetitions at 1 MiB and 6 of 10 at
/// 4 MiB (`testbed_mpi_p2p_4ranks.json`, `ring`), and back to back the lateness persists (see
/// [`ring`]). Which rank is late matters where the ring crosses slow links (below); on six
/// ranks of the three-leaf testbed the last ranks of each leaf's pair entered last: captured
/// over eleven 1 MiB ring all_gathers (`suite.py capture_mpi`,
/// `testbed_three_leaf_100mbit_uplinks.capture_mpi_ring_1m.json`), ranks 0 and 3 sent their
/// first requests first, 2 and 5 last, 0.2-0.65 ms later, rank 5 last or second last in 10 of
/// 11 calls. Rank 0 late instead would have every rank answered before it sends, and the
/// ring step in lockstep (73.5 ms predicted for that 1 MiB all_gather, 96.0 with the last
/// rank late, 116-131 measured). How late: the last rank entered a median 0.140 ms after the
/// second last over the 591 calls of the 41 OpenMPI captures there were on 2026-12-02
/// (per-log medians 0.03-0.74 ms; `capture_exchanges.py --entry-lags
/// data/runs/calibration/*capture_mpi*.json`; with the seven captured after it, four of them
/// under the load of sampling TCP's state, 0.150 ms over 649 calls). The lag was 50 µs before,
/// shorter than the star's acknowledgement round trip (~0.10 ms): on the slow-host star the
/// late rank's request then reached its successor 2 µs before that rank's own first block
/// started, and its answer went ahead of the block, where the captures have it behind
/// (`testbed_star4_slow_host.capture_mpi_ring_ag_1m_after_256k_{1,2}.json`: the slow host's
/// first block left 10.6-16.4 ms into the call).
pub(super) const ENTRY_LAG: SimTime = SimTime::from_ps(140_000_000);
algorithms! {
    /// `coll_tuned_allreduce_algorithm` numbers and names.
    AllReduceAlg,
    "all-reduce",
    {
        BasicLinear = 1 => "basic_linear",
        Nonoverlapping = 2 => "nonoverlapping",
        RecursiveDoubling = 3 => "recursive_doubling",
        Ring = 4 => "ring",
        SegmentedRing = 5 => "segmented_ring",
        Rabenseifner = 6 => "rabenseifner",
    }
}

/// OpenMPI 4.1's fixed all-reduce rule for a commutative operation on `comm_size` ranks and
/// `bytes` per rank (`ompi_coll_tuned_allreduce_intra_dec_fixed`).
pub fn allreduce_fixed(comm_size: u32, bytes: u64) -> AllReduceAlg {
    use AllReduceAlg::*;
    let rules: &[super::Rule<AllReduceAlg>] = &[
        (
            4,
            &[
                (8, Ring),
                (4096, RecursiveDoubling),
                (8192, Ring),
                (16384, RecursiveDoubling),
                (65536, Ring),
                (262144, SegmentedRing),
            ],
            Rabenseifner,
        ),
        (8, &[(16, Ring), (8192, RecursiveDoubling)], Rabenseifner),
        (16, &[(8192, RecursiveDoubling)], Rabenseifner),
        (
            32,
            &[(64, SegmentedRing), (4096, RecursiveDoubling)],
            Rabenseifner,
        ),
        (64, &[(128, SegmentedRing)], Rabenseifner),
        (128, &[(262144, RecursiveDoubling)], Rabenseifner),
        (
            256,
            &[(131072, Nonoverlapping), (262144, RecursiveDoubling)],
            Rabenseifner,
        ),
        (512, &[(4096, Nonoverlapping)], Rabenseifner),
        (
            2048,
            &[(2048, Nonoverlapping), (16384, RecursiveDoubling)],
            Rabenseifner,
        ),
        (
            4096,
            &[
                (2048, Nonoverlapping),
                (4096, SegmentedRing),
                (16384, RecursiveDoubling),
            ],
            Rabenseifner,
        ),
        (
            u32::MAX,
            &[
                (2048, Nonoverlapping),
                (16384, SegmentedRing),
                (32768, RecursiveDoubling),
            ],
            Rabenseifner,
        ),
    ];
    super::by_rules(rules, comm_size, bytes)
}

/// The all-reduce OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let (asked, how) = super::chosen(opts, || allreduce_fixed(n, req.bytes))?;
    let count = req.bytes / ELEMENT_BYTES;
    let pof2 = if n == 0 {
        1
    } else {
        1u64 << (31 - n.leading_zeros())
    };
    // What coll/base then runs (its own fall-backs).
    let runs = match asked {
        AllReduceAlg::SegmentedRing => AllReduceAlg::Ring,
        a => a,
    };
    let runs = match runs {
        AllReduceAlg::Ring if count < u64::from(n) => AllReduceAlg::RecursiveDoubling,
        AllReduceAlg::Rabenseifner if count < pof2 => AllReduceAlg::BasicLinear,
        a => a,
    };
    if runs == AllReduceAlg::Nonoverlapping {
        return nonoverlapping(req, sys, opts, how);
    }
    let build = |x: &CallExchanges| {
        let mut s = Schedule::new(
            Collective::AllReduce,
            format!("mpi {}", runs.as_str()),
            n,
            req.bytes,
        );
        if n > 1 && req.bytes > 0 {
            match runs {
                AllReduceAlg::BasicLinear => basic_linear(&mut s, req.bytes, n),
                AllReduceAlg::RecursiveDoubling => recursive_doubling(&mut s, req.bytes, n, x),
                // Segmented ring was mapped to the ring and nonoverlapping refused above.
                AllReduceAlg::Ring | AllReduceAlg::SegmentedRing => ring(&mut s, req.bytes, n),
                AllReduceAlg::Rabenseifner => rabenseifner(&mut s, req.bytes, n, x),
                AllReduceAlg::Nonoverlapping => {}
            }
        }
        s
    };
    let (s, alternatives) = oriented_ways(opts.mpi_exchanges, n, build);
    let mut decision = format!("OpenMPI 4.1 {} ({how})", asked.as_str());
    if runs != asked {
        decision.push_str(&format!(", runs {}", runs.as_str()));
    }
    Ok(Plan::with_orientations(s, decision, alternatives))
}

/// nonoverlapping (`allreduce_intra_nonoverlapping`): the communicator's own reduce to rank 0,
/// then its own broadcast from rank 0, each by its fixed rules ([`super::reduce`],
/// [`super::bcast`]).
fn nonoverlapping(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    how: &str,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let ralg = super::reduce::reduce_fixed(n, req.bytes);
    let mut s = Schedule::new(Collective::AllReduce, "mpi nonoverlapping", n, req.bytes);
    let reduced =
        super::reduce::reduce_into(&mut s, ralg, n, 0, req.bytes, false, &[]).map_err(|alg| {
            LibraryError::new(
                "collective.algorithm",
                format!(
                    "an algorithm dtsim plays: OpenMPI runs nonoverlapping here ({how}, {n} \
                     ranks, {} B), whose reduce runs {}, which is not modelled; force another \
                     one",
                    req.bytes,
                    alg.as_str()
                ),
            )
        })?;
    let bcast = Request {
        collective: Collective::Broadcast,
        root: 0,
        ..*req
    };
    let rules = LibraryOptions {
        algorithm: None,
        ..opts.clone()
    };
    let b = super::bcast::plan(&bcast, sys, &rules)?;
    let everyone: Vec<Endpoint> = (0..n).collect();
    s.embed(&b.schedule, &[&everyone], &reduced, &|op| op.kind.clone());
    Ok(Plan {
        schedule: s,
        placed_endpoints: Vec::new(),
        decision: format!(
            "OpenMPI 4.1 nonoverlapping ({how}): reduce {} to rank 0, then {}",
            ralg.as_str(),
            b.decision
                .trim_start_matches("OpenMPI 4.1 ")
                .replace(" (fixed rules)", "")
        ),
        parameters: Vec::new(),
        alternatives: Vec::new(),
        alternatives_vary: String::new(),
        plays_per_way: 1,
    })
}

/// Linear reduce to rank 0 (receives in order n − 1 … 1, each reduced before the next is
/// matched), then a linear broadcast from rank 0 (all sends at once).
fn basic_linear(s: &mut Schedule, m: u64, n: u32) {
    let senders: Vec<(Endpoint, Endpoint)> = (1..n).map(|r| (r, 0)).collect();
    let reduced = if is_eager(m) {
        // Every message lands at once (unexpected messages are buffered); the root reduces.
        let all = message(s, &senders, m, vec![], Phase::Reduce, 0);
        reduce(s, 1, m * u64::from(n - 1), all, Phase::Reduce, 0)
    } else {
        // Every request arrives at once; each message's data waits for its receive.
        let mut last = transfer(s, senders, REQUEST_BYTES, vec![], Phase::Reduce, 0);
        // One new single-pair pattern per rank (push_pattern: searching for an equal one
        // would cost O(n) per rank).
        let single = |s: &mut Schedule, pair, bytes, after, step| {
            let pattern = s.push_pattern(vec![pair]);
            s.push(
                OpKind::Transfer { pattern, bytes },
                vec![after],
                Phase::Reduce,
                0,
                step,
            )
        };
        for (k, r) in (1..n).rev().enumerate() {
            let step = k as u32 + 1;
            let ack = single(s, (0, r), ACK_BYTES, last, step);
            let got = single(s, (r, 0), m, ack, step);
            last = reduce(s, 1, m, got, Phase::Reduce, step);
        }
        last
    };
    let to_all: Vec<(Endpoint, Endpoint)> = (1..n).map(|r| (0, r)).collect();
    message(s, &to_all, m, vec![reduced], Phase::Broadcast, n);
}

/// Recursive doubling: odd ranks below 2·extra take their even neighbour's buffer, the
/// remaining power of two exchange whole buffers at distance 1, 2, 4 …, then the folded-in
/// ranks get the result back.
fn recursive_doubling(s: &mut Schedule, m: u64, n: u32, x: &CallExchanges) {
    let adj = 1u32 << (31 - n.leading_zeros());
    let extra = n - adj;
    let real = |v: u32| if v < extra { 2 * v + 1 } else { v + extra };
    let mut ready = Ready::new(n);
    let mut step = 0;
    if extra > 0 {
        for k in 0..extra {
            let (even, odd) = (2 * k, 2 * k + 1);
            let got = message(s, &[(even, odd)], m, vec![], Phase::Reduce, step);
            let reduced = reduce(s, 1, m, got, Phase::Reduce, step);
            ready.set(&[even, odd], reduced);
        }
        step += 1;
    }
    // The odd ranks of the fold reduced their neighbour's buffer first; the others entered.
    let mut histories = Histories::new(n, (0..extra).map(|k| 2 * k + 1));
    let mut distance = 1;
    while distance < adj {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..adj)
            .filter(|v| v & distance == 0)
            .map(|v| (real(v), real(v ^ distance)))
            .collect();
        let mix = histories.step(&pairs, Partners::Entering);
        exchanges_pair_by_pair(
            s,
            &mut ready,
            (&pairs, mix),
            m,
            n,
            x,
            Some(m),
            Phase::ReduceScatter,
            step,
        );
        distance <<= 1;
        step += 1;
    }
    for k in 0..extra {
        let (even, odd) = (2 * k, 2 * k + 1);
        message(
            s,
            &[(odd, even)],
            m,
            ready.of(&[odd]),
            Phase::Broadcast,
            step,
        );
    }
}

/// OpenMPI's ring: n blocks (the first `count mod n` one element longer); reduce-scatter
/// steps send a block to rank + 1 and reduce the one received before sending it on; the
/// all-gather steps forward blocks. Each message carries the longest block.
///
/// Played rank by rank, not step by step: a rank starts its next step once it has received
/// (and reduced) this step's block and its own send is done, whatever the other ranks do, as
/// `coll/base` runs it (no synchronisation between steps). Its receives are posted as
/// `coll/base` posts them: in the reduce-scatter one block ahead, at the top of an iteration
/// that begins once the blocking send before it is done, so a rank answers its predecessor's
/// next request only then (a rank held in its send holds its predecessor's next block); in the
/// all-gather (`sendrecv`) when it enters the step. So a rank that falls behind sends
/// its request while its successor already sends, and the successor's acknowledgement waits
/// behind its own data in its egress queue (the network model's standing queue); the data it
/// answers arrives late, the receiver starts its next step late, and the next step repeats it
/// one rank further on. Ranks never enter together ([`ENTRY_LAG`]): on the testbed each step of
/// six back to back cost 6.7-7.5 ms more than its bytes from 1 MiB messages
/// (`testbed_mpi_p2p_4ranks.json`, `ring_steps`), in a lockstep ring nothing would wait.
///
/// Above [`RANK_BY_RANK_MAX`] ranks the ring is played step by step instead ([`ring_lockstep`]).
fn ring(s: &mut Schedule, m: u64, n: u32) {
    let count = m / ELEMENT_BYTES;
    let block = split_even(count, u64::from(n))[0] * ELEMENT_BYTES;
    ring_steps(s, n, block, n - 1, n - 1);
}

/// `reduce_steps` ring steps that reduce what they receive before sending it on, then
/// `gather_steps` that forward it (the all-reduce's n − 1 and n − 1; all_gather's ring 0 and
/// n − 1), every message `block` bytes, played rank by rank as [`ring`] says; above
/// [`RANK_BY_RANK_MAX`] ranks step by step ([`ring_lockstep`]).
pub(super) fn ring_steps(
    s: &mut Schedule,
    n: u32,
    block: u64,
    reduce_steps: u32,
    gather_steps: u32,
) {
    if n > RANK_BY_RANK_MAX {
        return ring_lockstep(s, n, block, reduce_steps, gather_steps);
    }
    // One single-pair pattern per direction and rank, shared by every step.
    let right: Vec<_> = (0..n)
        .map(|r| s.push_pattern(vec![(r, (r + 1) % n)]))
        .collect();
    let left: Vec<_> = (0..n)
        .map(|r| s.push_pattern(vec![((r + 1) % n, r)]))
        .collect();
    // Per rank, what its next step waits for.
    let mut ready = entering(s, n, Phase::ReduceScatter, ENTRY_LAG);
    // Per rank, its send of the step before (the reduce-scatter posts a step's receive once
    // that send is done).
    let mut sent_before: Option<Vec<OpId>> = None;
    for k in 0..reduce_steps + gather_steps {
        // Steps are numbered 0.. for the reduce-scatter, one more from the all-gather on.
        let (phase, step) = if k < reduce_steps {
            (Phase::ReduceScatter, k)
        } else {
            (Phase::AllGather, k + 1)
        };
        let mut sent = Vec::with_capacity(n as usize);
        for r in 0..n as usize {
            let to = (r + 1) % n as usize;
            sent.push(message_on(
                s,
                (right[r], left[r]),
                block,
                ready[r].clone(),
                // The receive is posted when the receiver enters the step; in the
                // reduce-scatter one step ahead: once the receiver's send of the step before
                // is done (its first receive before it sends at all).
                match (phase, &sent_before) {
                    (Phase::AllGather, _) => ready[to].clone(),
                    (_, Some(before)) => vec![before[to]],
                    (_, None) => Vec::new(),
                },
                phase,
                step,
            ));
        }
        for r in 0..n as usize {
            let from = (r + n as usize - 1) % n as usize;
            let got = if phase == Phase::ReduceScatter {
                reduce(s, 1, block, sent[from], phase, step)
            } else {
                sent[from]
            };
            ready[r] = vec![sent[r], got];
        }
        sent_before = Some(sent);
    }
}

/// What each of `n` ranks waits for before its first step when it is played rank by rank:
/// nothing, but the last rank `lag` ([`ENTRY_LAG`] for the collectives).
pub(super) fn entering(s: &mut Schedule, n: u32, phase: Phase, lag: SimTime) -> Vec<Vec<OpId>> {
    let mut ready: Vec<Vec<OpId>> = vec![Vec::new(); n as usize];
    ready[(n - 1) as usize] = vec![s.push(
        OpKind::Compute {
            endpoints: 1,
            duration: lag,
        },
        vec![],
        phase,
        0,
        0,
    )];
    ready
}

/// Most ranks whose ring (and Bruck's all_gather) is played rank by rank. Rank by rank, every
/// request, answer and block is a transfer of its own and the answers tie each rank's
/// transfers to its neighbours', so the flow model solves the whole ring together at every
/// event: a 64 MiB ring on a star of
/// 256 ranks takes 1.1 s and 205 MB (0.17 s and 105 MB step by step), of 1,024 ranks 13.3 s
/// and 1.5 GB (0.11 s and 88 MB; measured 2026-11-26 on the 2-core development machine).
pub const RANK_BY_RANK_MAX: u32 = 256;

/// The ring step by step: every rank's message of a step in one batch, all ranks in lockstep
/// (no drift, so no answer waits behind its rank's own send: each step costs its bytes).
fn ring_lockstep(s: &mut Schedule, n: u32, block: u64, reduce_steps: u32, gather_steps: u32) {
    let right: Vec<(Endpoint, Endpoint)> = (0..n).map(|r| (r, (r + 1) % n)).collect();
    let mut last: Vec<OpId> = Vec::new();
    for k in 0..reduce_steps {
        let got = message(s, &right, block, last.clone(), Phase::ReduceScatter, k);
        last = vec![reduce(s, n, block, got, Phase::ReduceScatter, k)];
    }
    for k in 0..gather_steps {
        last = vec![message(
            s,
            &right,
            block,
            last.clone(),
            Phase::AllGather,
            reduce_steps + 1 + k,
        )];
    }
}

/// Rabenseifner (`allreduce_intra_redscat_allgather`): fold the ranks above the power of two
/// into their even neighbours (halves exchanged, the odd one's reduced half sent back),
/// reduce-scatter by vector halving and distance doubling, all-gather in reverse, and send the
/// whole result to the folded-out ranks.
fn rabenseifner(s: &mut Schedule, m: u64, n: u32, x: &CallExchanges) {
    let count = m / ELEMENT_BYTES;
    let pof2 = 1u32 << (31 - n.leading_zeros());
    let rem = n - pof2;
    let real = |v: u32| if v < rem { 2 * v } else { v + rem };
    let mut ready = Ready::new(n);
    let mut step = 0;
    let half = count.div_ceil(2) * ELEMENT_BYTES;
    if rem > 0 {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..rem).map(|k| (2 * k, 2 * k + 1)).collect();
        exchanges_pair_by_pair(
            s,
            &mut ready,
            (&pairs, StepPairs::all(Partners::Entering, rem)),
            half,
            n,
            x,
            Some(half),
            Phase::ReduceScatter,
            step,
        );
        for &(even, odd) in &pairs {
            let back = message(
                s,
                &[(odd, even)],
                half,
                ready.of(&[odd]),
                Phase::ReduceScatter,
                step,
            );
            ready.set(&[even, odd], back);
        }
        step += 1;
    }
    // Window sizes: halved each step (the larger half is the one kept, as rcount/scount).
    let mut windows = Vec::new();
    let mut w = count;
    let mut mask = 1;
    while mask < pof2 {
        let kept = w.div_ceil(2);
        windows.push((mask, kept));
        w = kept;
        mask <<= 1;
    }
    let pairs_at = |mask: u32| -> Vec<(Endpoint, Endpoint)> {
        (0..pof2)
            .filter(|v| v & mask == 0)
            .map(|v| (real(v), real(v ^ mask)))
            .collect()
    };
    // The even ranks of the fold swapped halves and reduced first; the others entered.
    let mut histories = Histories::new(n, (0..rem).map(|k| 2 * k));
    for &(mask, kept) in &windows {
        let bytes = kept * ELEMENT_BYTES;
        let pairs = pairs_at(mask);
        let mix = histories.step(&pairs, Partners::Entering);
        exchanges_pair_by_pair(
            s,
            &mut ready,
            (&pairs, mix),
            bytes,
            n,
            x,
            Some(bytes),
            Phase::ReduceScatter,
            step,
        );
        step += 1;
    }
    // The all-gather's first step follows the last reduction; the others, its own steps.
    for (i, &(mask, kept)) in (0u32..).zip(windows.iter().rev()) {
        let bytes = kept * ELEMENT_BYTES;
        let pairs = pairs_at(mask);
        let mix = histories.step(&pairs, Partners::at_step(i));
        exchanges_pair_by_pair(
            s,
            &mut ready,
            (&pairs, mix),
            bytes,
            n,
            x,
            None,
            Phase::AllGather,
            step,
        );
        step += 1;
    }
    for k in 0..rem {
        let (even, odd) = (2 * k, 2 * k + 1);
        message(
            s,
            &[(even, odd)],
            m,
            ready.of(&[even]),
            Phase::Broadcast,
            step,
        );
    }
}

#[cfg(test)]
mod tests;
