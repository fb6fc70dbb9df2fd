//! OpenMPI 4.1 as it runs its collectives: `coll/tuned`'s fixed decision rules, the `coll/base`
//! algorithms they pick, and the ob1 PML's eager and rendezvous messages over the TCP BTL.
//! Facts read from OpenMPI v4.1.4's sources (no code taken). This module holds the messages
//! and the dispatch; `exchanges/` the exchanges between partners (their modes and how often
//! each runs); each collective's rules and algorithms are in its own: `allreduce/`
//! (described here, the first modelled), `bcast/`, `allgather.rs`, `reduce_scatter.rs`,
//! `reduce.rs`, `barrier.rs`.
//!
//! - **Choice** (`coll_tuned_decision_fixed.c`): by communicator size and message size, for
//!   commutative operations (sums), one of 1 basic_linear, 2 nonoverlapping, 3
//!   recursive_doubling, 4 ring, 5 segmented_ring, 6 rabenseifner ([`allreduce_fixed`]). A
//!   scenario forces one as `--mca coll_tuned_allreduce_algorithm N` does, by name or number.
//! - **Algorithms** (`coll_base_allreduce.c`): basic_linear is a linear reduce to rank 0 (its
//!   blocking receives in order n − 1 … 1) and a linear broadcast; recursive_doubling exchanges
//!   the whole buffer log2 n times (odd extra ranks fold in first); ring is a reduce-scatter
//!   then an all-gather over n blocks, one blocking send per step (fewer elements than ranks:
//!   recursive doubling); segmented_ring with the segment size the rules pass (0) is the ring;
//!   rabenseifner halves the vector while doubling the distance, then gathers back (fewer
//!   elements than the power of two below n: basic_linear).
//! - **Messages** (ob1 + `btl_tcp_component.c`): up to the 64 KiB eager limit a message goes at
//!   once; above it, as captured on the testbed (tcpdump of 256 KiB and 1 MiB Send and
//!   Sendrecv from mpi4py buffers; `data/runs/calibration/testbed_mpi_ring_capture_1MiB.txt`),
//!   a request of [`REQUEST_BYTES`] goes first with no data
//!   (ob1's protocol for contiguous buffers on a BTL that can put), the receiver answers with
//!   [`ACK_BYTES`] once the receive is matched, and only then does the data follow, all of it.
//!   dtsim plays those as three transfers. The answer leaves through the receiver's egress
//!   queue: where the receiver is already sending, it waits behind that send's standing queue
//!   (the flow model's FIFO head, `network.fifo_head_bytes`): 6.8 ms at 200 Mbit/s in the
//!   capture, which is what each step of the ring costs beyond its bytes (`ring`).
//! - **Measured on the testbed** (`data/runs/calibration/testbed_mpi_p2p_{2,4}ranks*.json`,
//!   `suite.py mpi_p2p`, TCP cubic, 10 repetitions per size and launch): with two ranks, a
//!   Sendrecv of a rendezvous message of 1 MiB or more with its one peer takes 1.95-2.00× a
//!   one-way Send of it, less below (1.27-1.52× at 64-96 KiB; 16 KiB eager messages overlap):
//!   the slow mode every time; with four ranks and two of them waiting in a barrier,
//!   1.00×; with all four exchanging in pairs at once (a recursive-doubling step), over ten
//!   launches, either both ways at once (1.0×) or the way back only once the first way has all
//!   but ~82 KB delivered (1.35× at 128 KiB, 1.67× at 256 KiB, 2.0× from 4 MiB), 181 of 320
//!   repetitions the slow way, and a launch tends to keep one mode; 1.0× every time when one
//!   rank of each pair enters 0.5 ms after the other. How often a step runs slow depends on
//!   what its partners did just before (`exchanges/`): entered the call or reduced what they
//!   received (that share), or waited on the call's own previous step, which ran the slow way
//!   95 of 106 times in five captured all_gathers ([`POLLING_SLOW_EXCHANGES`]): the late
//!   partner, polling, had read the early one's request and answered it before writing its
//!   own. A slow step leaves the call slow to its end ([`SLOW_STEPS_AFTER_SLOW`]), and dtsim
//!   plays the median call: both ways at once until the step by which half the calls have gone
//!   slow, the way back after the first way's head from there ([`Exchanges::Median`]).
//!   A slow exchange's first way goes from the partner that posts first: the way back's
//!   sender of its previous slow exchange, a coin where both stand alike; the call is played
//!   every way its coins fall (at most 16, sampled beyond; one way past 64 ranks) and the
//!   median way reported (`exchanges/`, [`ORIENTATION`]).
//!   This is the less certain part of the model, and a single launch lands on either side of
//!   it: recursive doubling of 4 MiB on 4 ranks took 352-354 ms in three launches and 694-697
//!   ms in two (`data/runs/testbed_mpi_allreduce.csv` pools five).
//!
//! Not modelled, and refused: non-commutative operations, the algorithms each collective's
//! file names, and the rules of the collectives other than all_reduce, broadcast, all_gather,
//! reduce_scatter, reduce and barrier. The all-reduce's nonoverlapping plays the
//! communicator's reduce then its broadcast (`reduce.rs`).

/// Declares a `coll_tuned_<collective>_algorithm` enumeration once: each algorithm with its
/// OpenMPI number and name, and its [`Algorithm`] implementation (listing them in number order).
macro_rules! algorithms {
    ($(#[$doc:meta])* $name:ident, $collective:literal,
     { $($variant:ident = $number:literal => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($variant = $number),+
        }

        impl super::Algorithm for $name {
            const ALL: &'static [$name] = &[$($name::$variant),+];
            const COLLECTIVE: &'static str = $collective;
            fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }
    };
}

mod allgather;
mod allreduce;
mod barrier;
mod bcast;
mod exchanges;
mod reduce;
mod reduce_scatter;

pub use allgather::{allgather_fixed, AllGatherAlg};
pub use allreduce::{allreduce_fixed, AllReduceAlg, RANK_BY_RANK_MAX};
pub use barrier::{barrier_fixed, BarrierAlg};
pub use bcast::{bcast_fixed, BcastAlg};
use exchanges::{
    exchange, exchange_in_step, exchanges_pair_by_pair, oriented_ways, CallExchanges, Histories,
    Partners, Ready, StepPairs,
};
pub use exchanges::{
    Exchanges, EXCHANGES, ORIENTATION, ORIENTATION_WAYS, ORIENTED_RANKS_MAX, PAIRS_PER_REPETITION,
    POLLING_EXCHANGES, POLLING_SLOW_EXCHANGES, SLOW_EXCHANGES, SLOW_EXCHANGE_TAIL_BYTES,
    SLOW_STEPS_AFTER_SLOW, STEPS_AFTER_SLOW,
};
pub use reduce_scatter::{reduce_scatter_fixed, ReduceScatterAlg};

use super::{reversed, LibraryError, LibraryOptions, Plan, Request, System};

/// A `coll_tuned_<collective>_algorithm` enumeration: OpenMPI's algorithms for one collective,
/// numbered from 1 in the order of [`Algorithm::ALL`].
pub trait Algorithm: Copy + PartialEq + 'static {
    /// Every algorithm, in OpenMPI's numbering.
    const ALL: &'static [Self];
    /// The collective they run, for messages ("all-reduce").
    const COLLECTIVE: &'static str;
    fn as_str(self) -> &'static str;
    /// By name (`-` read as `_`), or by number as `coll_tuned_<collective>_algorithm` takes it.
    fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL
            .iter()
            .enumerate()
            .find(|(i, a)| a.as_str() == s || (i + 1).to_string() == s)
            .map(|(_, a)| *a)
    }
}

/// One row of a fixed rule table: (communicator size below, [(bytes below, algorithm)], the
/// algorithm for more bytes).
type Rule<A> = (u32, &'static [(u64, A)], A);

/// What a fixed rule table (`coll_tuned_decision_fixed.c`'s nested ifs, row by row) gives
/// `bytes` on `comm_size` ranks; the last row holds every larger communicator.
fn by_rules<A: Copy>(rules: &[Rule<A>], comm_size: u32, bytes: u64) -> A {
    let (_, sizes, above) = rules
        .iter()
        .find(|(below, _, _)| comm_size < *below)
        .copied()
        .unwrap_or(rules[rules.len() - 1]);
    sizes
        .iter()
        .find(|(below, _)| bytes < *below)
        .map_or(above, |&(_, a)| a)
}

/// The algorithm the scenario forces (`collective.algorithm`, by name or number) or else the
/// fixed rules' `fixed`, with which of the two it is.
fn chosen<A: Algorithm>(
    opts: &LibraryOptions,
    fixed: impl FnOnce() -> A,
) -> Result<(A, &'static str), LibraryError> {
    let Some(asked) = &opts.algorithm else {
        return Ok((fixed(), "fixed rules"));
    };
    A::parse(asked).map(|a| (a, "forced")).ok_or_else(|| {
        let names: Vec<&str> = A::ALL.iter().map(|a| a.as_str()).collect();
        LibraryError::new(
            "collective.algorithm",
            format!(
                "an OpenMPI {} algorithm ({}, or 1-{}), got {asked:?}",
                A::COLLECTIVE,
                names.join(", "),
                A::ALL.len()
            ),
        )
    })
}
use crate::collective::{Collective, Endpoint, OpId, OpKind, PatternId, Phase, Schedule};
use crate::engine::SimTime;

/// The TCP BTL's eager limit (`btl_eager_limit`, `btl_rndv_eager_limit`): 64 KiB.
pub const EAGER_LIMIT_BYTES: u64 = 64 << 10;
/// ob1's match header, which an eager message carries within the eager limit.
const MATCH_HEADER_BYTES: u64 = 16;
/// A rendezvous request: ob1's header for a contiguous buffer, no data (TCP payload as
/// captured on the testbed).
pub const REQUEST_BYTES: u64 = 40;
/// The receiver's answer to a request, after which the data follows (TCP payload as captured).
pub const ACK_BYTES: u64 = 64;
/// Element size dtsim assumes where OpenMPI counts elements (float32).
const ELEMENT_BYTES: u64 = 4;

/// True when ob1 sends `bytes` eagerly (within the eager limit with its match header).
pub fn is_eager(bytes: u64) -> bool {
    bytes + MATCH_HEADER_BYTES <= EAGER_LIMIT_BYTES
}

/// One batch: every pair of `pairs` sends `bytes` once `deps` are done.
fn transfer(
    s: &mut Schedule,
    pairs: Vec<(Endpoint, Endpoint)>,
    bytes: u64,
    deps: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    let pattern = s.add_pattern(pairs);
    s.push(OpKind::Transfer { pattern, bytes }, deps, phase, 0, step)
}

/// One message on every pair of `pairs` (same size): eager, or request + acknowledgement +
/// data. Returns the op after which the data has arrived.
fn message(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    bytes: u64,
    deps: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    let to = s.add_pattern(pairs.to_vec());
    if is_eager(bytes) {
        return s.push(
            OpKind::Transfer { pattern: to, bytes },
            deps,
            phase,
            0,
            step,
        );
    }
    let back = s.add_pattern(reversed(pairs));
    message_on(s, (to, back), bytes, deps, Vec::new(), phase, step)
}

/// One message on one pair, whose patterns (`to`, `back`) the caller made: eager, or the
/// rendezvous request, the receiver's acknowledgement (once `matched`: its receive is posted)
/// and the data. Returns the op after which the data has arrived.
#[allow(clippy::too_many_arguments)]
fn message_on(
    s: &mut Schedule,
    (to, back): (PatternId, PatternId),
    bytes: u64,
    deps: Vec<OpId>,
    matched: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    let send = |s: &mut Schedule, pattern, bytes, deps| {
        s.push(OpKind::Transfer { pattern, bytes }, deps, phase, 0, step)
    };
    if is_eager(bytes) {
        return send(s, to, bytes, deps);
    }
    let request = send(s, to, REQUEST_BYTES, deps);
    let mut ack_deps = vec![request];
    ack_deps.extend(matched);
    let ack = send(s, back, ACK_BYTES, ack_deps);
    send(s, to, bytes, vec![ack])
}

/// An op done when all of `ops` are (nothing of its own).
fn join(s: &mut Schedule, ops: Vec<OpId>, phase: Phase, step: u32) -> OpId {
    if let [one] = ops[..] {
        return one;
    }
    s.push(
        OpKind::Compute {
            endpoints: 1,
            duration: SimTime::ZERO,
        },
        ops,
        phase,
        0,
        step,
    )
}

fn reduce(
    s: &mut Schedule,
    endpoints: u32,
    bytes: u64,
    after: OpId,
    phase: Phase,
    step: u32,
) -> OpId {
    s.push(
        OpKind::Reduce { endpoints, bytes },
        vec![after],
        phase,
        0,
        step,
    )
}

/// The schedule OpenMPI runs for `req` on `sys`.
pub fn plan(req: &Request, sys: &System, opts: &LibraryOptions) -> Result<Plan, LibraryError> {
    if opts.protocol.is_some()
        || opts.min_channels.is_some()
        || opts.max_channels.is_some()
        || !opts.ring_orders.is_empty()
    {
        return Err(LibraryError::new(
            "collective",
            "no protocol, channel or ring-order settings with library = \"mpi\" (OpenMPI's \
             coll/tuned has none); force an algorithm with collective.algorithm",
        ));
    }
    if opts.collnet {
        return Err(LibraryError::new(
            "collective.collnet",
            "nothing with library = \"mpi\" (CollNet is NCCL's in-network reduction)",
        ));
    }
    match req.collective {
        Collective::AllReduce => allreduce::plan(req, sys, opts),
        Collective::Broadcast => bcast::plan(req, sys, opts),
        Collective::AllGather => allgather::plan(req, sys, opts),
        Collective::ReduceScatter => reduce_scatter::plan(req, sys, opts),
        Collective::Reduce => reduce::plan(req, sys, opts),
        Collective::Barrier => barrier::plan(req, sys, opts),
        other => Err(LibraryError::new(
            "collective.op",
            format!(
                "all_reduce, broadcast, all_gather, reduce_scatter, reduce or barrier with \
                 library = \"mpi\" (OpenMPI's rules for {other} are not modelled yet)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    //! Whatever the communicator and size, what the fixed rules pick plays.
    use super::*;

    #[test]
    fn every_choice_of_the_fixed_rules_plays_but_a_few_on_tiny_or_huge_communicators() {
        // Refused by name, what dtsim does not model: reduce_scatter's non-overlapping (a
        // reduce, then a scatterv; under 1 KiB from 4 ranks), reduce's in_order_binary and
        // rabenseifner (256-511 ranks at 8-16 KiB, from 2,048 ranks at some sizes under 16 KiB,
        // 2-3 ranks under 8 B), and an all-reduce whose nonoverlapping reduce runs one of
        // those. Everything else the rules of v4.1.4 choose has a schedule.
        let sizes = [
            4u64,
            1 << 10,
            10_000,
            20_000,
            64 << 10,
            100_000,
            1 << 20,
            16 << 20,
        ];
        let ranks = (2..=40).chain([64, 100, 200, 300, 600, 1024]);
        let mut refused = Vec::new();
        for n in ranks {
            let sys = crate::library::testing::cpu_hosts(n);
            for collective in [
                Collective::AllReduce,
                Collective::Broadcast,
                Collective::AllGather,
                Collective::ReduceScatter,
                Collective::Reduce,
                Collective::Barrier,
            ] {
                let sizes: &[u64] = if collective == Collective::Barrier {
                    &[0]
                } else {
                    &sizes
                };
                for &bytes in sizes {
                    let req = Request {
                        collective,
                        bytes,
                        root: 0,
                        peer: 1,
                    };
                    match plan(&req, &sys, &LibraryOptions::default()) {
                        Ok(p) => p.schedule.validate().unwrap(),
                        Err(e) => {
                            let why = e.to_string();
                            let named = ["non_overlapping", "in_order_binary", "rabenseifner"];
                            assert!(
                                named.iter().any(|a| why.contains(a)),
                                "{collective} on {n} ranks, {bytes} B: {why}"
                            );
                            refused.push((collective, n, bytes));
                        }
                    }
                }
            }
        }
        assert!(!refused.is_empty());
        for (collective, n, bytes) in refused {
            let expected = match collective {
                Collective::ReduceScatter => bytes < 1 << 10,
                Collective::Reduce | Collective::AllReduce => {
                    (n < 4 && bytes < 8)
                        || ((256..512).contains(&n) && (8192..16384).contains(&bytes))
                }
                _ => false,
            };
            assert!(expected, "{collective} refused on {n} ranks at {bytes} B");
        }
    }
}
