//! OpenMPI 4.1's all_gather: `coll/tuned`'s fixed rules and the `coll/base` algorithms they
//! pick. Facts read from v4.1.4's sources (no code taken):
//!
//! - **Choice** (`ompi_coll_tuned_allgather_intra_dec_fixed`): by communicator size and the
//!   bytes each rank contributes (dtsim's `bytes` is the gathered total, n blocks), one of
//!   1 linear, 2 bruck, 3 recursive_doubling, 4 ring, 5 neighbor, 6 two_proc
//!   ([`allgather_fixed`]): two_proc on 2 ranks, recursive doubling up to 31.
//! - **Algorithms** (`coll_base_allgather.c`), every step a sendrecv (receive posted, blocking
//!   send): recursive_doubling exchanges 1, 2, 4 ... blocks with rank ^ distance (a
//!   communicator whose size is not a power of two runs bruck instead); bruck sends the first
//!   min(d, n − d) blocks it holds to rank − d and receives as many from rank + d, d = 1, 2,
//!   4 ... (at d = n/2 the two are one partner: an exchange); ring forwards one block to rank + 1, n − 1 times; neighbor exchange trades one
//!   block with one neighbour, then two blocks at a time with the other and back, n/2 steps
//!   (an odd communicator runs the ring); two_proc is one exchange.
//! - Exchanges between partners, as the all-reduce's recursive doubling, run both ways at
//!   once or one way first as measured on the testbed ([`super::exchange`]); the ring and
//!   bruck run rank by rank as the all-reduce's ring does ([`super::allreduce::ring_steps`]):
//!   every step a sendrecv, a rank steps on once its own are done.
//!
//! Not modelled, and refused: linear (a tuned gather then a tuned broadcast); the fixed rules
//! never pick it.

use super::allreduce::{entering, ring_steps, ENTRY_LAG, RANK_BY_RANK_MAX};
use super::Algorithm as _;
use super::{
    exchange, message, message_on, reversed, LibraryError, LibraryOptions, Plan, Request, System,
};
use super::{exchanges_pair_by_pair, oriented_ways, CallExchanges, Partners, Ready, StepPairs};
use crate::collective::{Collective, Endpoint, OpId, Phase, Schedule};

algorithms! {
    /// `coll_tuned_allgather_algorithm` numbers and names.
    AllGatherAlg,
    "all_gather",
    {
        Linear = 1 => "linear",
        Bruck = 2 => "bruck",
        RecursiveDoubling = 3 => "recursive_doubling",
        Ring = 4 => "ring",
        Neighbor = 5 => "neighbor",
        TwoProc = 6 => "two_proc",
    }
}

/// OpenMPI 4.1's fixed all_gather rule for `block_bytes` contributed by each of `comm_size`
/// ranks.
pub fn allgather_fixed(comm_size: u32, block_bytes: u64) -> AllGatherAlg {
    use AllGatherAlg::*;
    if comm_size == 2 {
        return TwoProc;
    }
    let rules: &[super::Rule<AllGatherAlg>] = &[
        (32, &[], RecursiveDoubling),
        (64, &[(1024, RecursiveDoubling), (65536, Neighbor)], Ring),
        (128, &[(512, RecursiveDoubling), (65536, Neighbor)], Ring),
        (
            256,
            &[
                (512, RecursiveDoubling),
                (131072, Neighbor),
                (524288, Ring),
                (1048576, Neighbor),
            ],
            Ring,
        ),
        (
            512,
            &[
                (32, RecursiveDoubling),
                (128, Bruck),
                (1024, RecursiveDoubling),
                (131072, Neighbor),
                (524288, Ring),
                (1048576, Neighbor),
            ],
            Ring,
        ),
        (
            1024,
            &[
                (64, RecursiveDoubling),
                (256, Bruck),
                (2048, RecursiveDoubling),
            ],
            Neighbor,
        ),
        (
            2048,
            &[
                (4, RecursiveDoubling),
                (8, Bruck),
                (16, RecursiveDoubling),
                (32, Bruck),
                (256, RecursiveDoubling),
                (512, Bruck),
                (4096, RecursiveDoubling),
            ],
            Neighbor,
        ),
        (
            4096,
            &[
                (32, Bruck),
                (128, RecursiveDoubling),
                (512, Bruck),
                (4096, RecursiveDoubling),
            ],
            Neighbor,
        ),
        (
            u32::MAX,
            &[
                (2, RecursiveDoubling),
                (8, Bruck),
                (16, RecursiveDoubling),
                (512, Bruck),
                (4096, RecursiveDoubling),
            ],
            Neighbor,
        ),
    ];
    super::by_rules(rules, comm_size, block_bytes)
}

/// The all_gather OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let block = req.bytes / u64::from(n.max(1));
    let (asked, how) = super::chosen(opts, || allgather_fixed(n, block))?;
    // What coll/base then runs (its own fall-backs).
    let runs = match asked {
        AllGatherAlg::RecursiveDoubling if !n.is_power_of_two() => AllGatherAlg::Bruck,
        AllGatherAlg::Neighbor if n % 2 == 1 => AllGatherAlg::Ring,
        a => a,
    };
    let refuse = |why: &str| {
        Err(LibraryError::new(
            "collective.algorithm",
            format!("an all_gather dtsim plays: {why}; force another one"),
        ))
    };
    match runs {
        AllGatherAlg::Linear => {
            return refuse(
                "linear is a tuned gather then a tuned broadcast, whose gather rules are not \
                 modelled",
            )
        }
        AllGatherAlg::TwoProc if n != 2 => {
            return refuse(&format!("two_proc runs on 2 ranks only, not {n}"))
        }
        _ => {}
    }
    let build = |x: &CallExchanges| {
        let mut s = Schedule::new(
            Collective::AllGather,
            format!("mpi {}", runs.as_str()),
            n,
            req.bytes,
        );
        if n > 1 && block > 0 {
            match runs {
                AllGatherAlg::RecursiveDoubling => recursive_doubling(&mut s, block, n, x),
                AllGatherAlg::Bruck => bruck(&mut s, block, n, x),
                AllGatherAlg::Ring => ring_steps(&mut s, n, block, 0, n - 1),
                AllGatherAlg::Neighbor => neighbor_exchange(&mut s, block, n, x),
                AllGatherAlg::TwoProc => {
                    exchange(
                        &mut s,
                        &[(0, 1)],
                        block,
                        n,
                        (x, Partners::Entering),
                        Vec::new(),
                        Phase::AllGather,
                        0,
                    );
                }
                AllGatherAlg::Linear => {}
            }
        }
        s
    };
    let (s, alternatives) = oriented_ways(opts.mpi_exchanges, n, build);
    let mut decision = format!("OpenMPI 4.1 all_gather {} ({how})", asked.as_str());
    if runs != asked {
        decision.push_str(&format!(", runs {}", runs.as_str()));
    }
    Ok(Plan::with_orientations(s, decision, alternatives))
}

/// Partners at `distance` exchange `distance` blocks, distance 1, 2, 4 ... (n a power of two).
fn recursive_doubling(s: &mut Schedule, block: u64, n: u32, x: &CallExchanges) {
    let mut ready = Ready::new(n);
    let (mut distance, mut step) = (1u32, 0u32);
    while distance < n {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..n)
            .filter(|r| r & distance == 0)
            .map(|r| (r, r ^ distance))
            .collect();
        let mix = StepPairs::all(Partners::at_step(step), pairs.len() as u32);
        let bytes = block * u64::from(distance);
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
        distance <<= 1;
        step += 1;
    }
}

/// Bruck: at distance d = 1, 2, 4 ... every rank sends min(d, n − d) blocks to rank − d and
/// receives as many from rank + d; where those are one rank (d = n/2) the step is an exchange
/// between partners, which runs as the testbed's exchanges do ([`exchange`]). Each step is a
/// sendrecv with no synchronisation between steps, so up to [`RANK_BY_RANK_MAX`] ranks it is
/// played rank by rank as the ring is ([`ring_steps`]): a rank starts its next step once its
/// send is done and its block has arrived, its receive is posted when it enters the step, and
/// the last rank enters late ([`entering`]).
fn bruck(s: &mut Schedule, block: u64, n: u32, x: &CallExchanges) {
    let rank_by_rank = n <= RANK_BY_RANK_MAX;
    let mut ready = Ready::waiting(if rank_by_rank {
        entering(s, n, Phase::AllGather, ENTRY_LAG)
    } else {
        Vec::new()
    });
    let mut last: Vec<OpId> = Vec::new();
    let (mut distance, mut step) = (1u32, 0u32);
    while distance < n {
        let bytes = block * u64::from(distance.min(n - distance));
        let to = |r: u32| (r + n - distance) % n;
        if !rank_by_rank {
            last = vec![if 2 * distance == n {
                let pairs: Vec<(Endpoint, Endpoint)> =
                    (0..distance).map(|r| (r, r + distance)).collect();
                exchange(
                    s,
                    &pairs,
                    bytes,
                    n,
                    (x, Partners::at_step(step)),
                    last,
                    Phase::AllGather,
                    step,
                )
            } else {
                let pairs: Vec<(Endpoint, Endpoint)> = (0..n).map(|r| (r, to(r))).collect();
                message(s, &pairs, bytes, last, Phase::AllGather, step)
            }];
        } else if 2 * distance == n {
            let pairs: Vec<(Endpoint, Endpoint)> =
                (0..distance).map(|r| (r, r + distance)).collect();
            let mix = StepPairs::all(Partners::at_step(step), distance);
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
        } else {
            let sent: Vec<OpId> = (0..n)
                .map(|r| {
                    let pair = vec![(r, to(r))];
                    let patterns = (
                        s.push_pattern(pair.clone()),
                        s.push_pattern(reversed(&pair)),
                    );
                    message_on(
                        s,
                        patterns,
                        bytes,
                        ready.rank(r).to_vec(),
                        ready.rank(to(r)).to_vec(),
                        Phase::AllGather,
                        step,
                    )
                })
                .collect();
            for r in 0..n {
                ready.set_all(
                    r,
                    vec![sent[r as usize], sent[((r + distance) % n) as usize]],
                );
            }
        }
        distance <<= 1;
        step += 1;
    }
}

/// Neighbor exchange (n even): even ranks trade their block with rank + 1, then two blocks at a
/// time alternately with the other neighbour and back, n/2 steps in all.
fn neighbor_exchange(s: &mut Schedule, block: u64, n: u32, x: &CallExchanges) {
    let with_next: Vec<(Endpoint, Endpoint)> = (0..n).step_by(2).map(|r| (r, r + 1)).collect();
    let with_prev: Vec<(Endpoint, Endpoint)> =
        (1..n).step_by(2).map(|r| (r, (r + 1) % n)).collect();
    let mut ready = Ready::new(n);
    for i in 0..n / 2 {
        let (pairs, bytes) = match i {
            0 => (&with_next, block),
            _ if i % 2 == 1 => (&with_prev, 2 * block),
            _ => (&with_next, 2 * block),
        };
        let partners = if i == 0 {
            Partners::Entering
        } else {
            Partners::at_step(i)
        };
        exchanges_pair_by_pair(
            s,
            &mut ready,
            (pairs, StepPairs::all(partners, pairs.len() as u32)),
            bytes,
            n,
            x,
            None,
            Phase::AllGather,
            i,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AllGatherAlg::*;

    #[test]
    fn a_step_after_the_calls_own_steps_runs_one_way_first_more_often_than_the_first() {
        // Recursive doubling of 4 MiB on 4 ranks: 1 MiB each way with the partners from the
        // barrier (the slow mode's head at 181/320, two pairs' share), then 2 MiB each way with
        // partners that waited on the first step (95/106 for one pair, so two pairs' step at
        // 1 - (11/106)^2).
        let req = Request {
            collective: Collective::AllGather,
            bytes: 4 << 20,
            root: 0,
            peer: 1,
        };
        let sys = crate::library::testing::cpu_hosts(4);
        let expected = LibraryOptions {
            mpi_exchanges: super::super::Exchanges::Expected,
            ..Default::default()
        };
        let p = plan(&req, &sys, &expected).unwrap();
        let sizes: Vec<u64> = p
            .schedule
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                crate::collective::OpKind::Transfer { bytes, .. } => Some(bytes),
                _ => None,
            })
            .collect();
        let tail = super::super::SLOW_EXCHANGE_TAIL_BYTES;
        let head = |bytes: u64, share: f64| ((bytes - tail) as f64 * share).round() as u64;
        assert!(sizes.contains(&head(1 << 20, 181.0 / 320.0)), "{sizes:?}");
        let polling_step = 1.0 - (11.0f64 / 106.0).powi(2);
        assert!(sizes.contains(&head(2 << 20, polling_step)), "{sizes:?}");
        // The median call (the default): the first step's two pairs already run slow in more
        // than half the calls, so both steps carry the slow mode's whole head.
        let p = plan(&req, &sys, &LibraryOptions::default()).unwrap();
        for bytes in [1u64 << 20, 2 << 20] {
            let head = crate::library::testing::transfer_bytes(&p.schedule, bytes - tail);
            assert_eq!(
                head,
                2 * u128::from(bytes - tail),
                "{bytes} B: both pairs' heads"
            );
        }
    }

    #[test]
    fn fixed_rules_at_the_thresholds_of_the_source() {
        // coll_tuned_decision_fixed.c (v4.1.4), ompi_coll_tuned_allgather_intra_dec_fixed.
        assert_eq!(allgather_fixed(2, 1 << 30), TwoProc);
        assert_eq!(allgather_fixed(3, 1), RecursiveDoubling);
        assert_eq!(allgather_fixed(31, 1 << 30), RecursiveDoubling);
        assert_eq!(allgather_fixed(32, 1023), RecursiveDoubling);
        assert_eq!(allgather_fixed(32, 1024), Neighbor);
        assert_eq!(allgather_fixed(64, 65536), Ring);
        assert_eq!(allgather_fixed(200, 600_000), Neighbor);
        assert_eq!(allgather_fixed(300, 100), Bruck);
        assert_eq!(allgather_fixed(1500, 24), Bruck);
        assert_eq!(allgather_fixed(3000, 64), RecursiveDoubling);
        assert_eq!(allgather_fixed(5000, 1), RecursiveDoubling);
        assert_eq!(allgather_fixed(5000, 4096), Neighbor);
    }

    #[test]
    fn bruck_rank_by_rank_sends_every_rank_its_blocks_down_the_ranks_the_last_entering_late() {
        use crate::collective::OpKind;
        use crate::library::mpi::{ACK_BYTES, REQUEST_BYTES};
        use crate::library::testing::{cpu_hosts, payload_bytes, transfer_bytes};
        let block: u64 = 1 << 20;
        for n in [3u32, 4, 5, 6, 7] {
            let req = Request {
                collective: Collective::AllGather,
                bytes: block * u64::from(n),
                root: 0,
                peer: 1,
            };
            let opts = LibraryOptions {
                algorithm: Some("bruck".into()),
                ..Default::default()
            };
            let p = plan(&req, &cpu_hosts(n), &opts).unwrap();
            let s = &p.schedule;
            s.validate().unwrap();
            // Every rank ends with the n − 1 blocks it lacked: n (n − 1) blocks moved in all.
            let data = payload_bytes(s, ACK_BYTES) - transfer_bytes(s, REQUEST_BYTES);
            assert_eq!(
                data,
                u128::from(n * (n - 1)) * u128::from(block),
                "{n} ranks"
            );
            // The first step sends to rank − 1, one single-pair pattern per rank, every
            // request at once but the last rank's, which waits for its late entry.
            let lag = crate::library::mpi::allreduce::ENTRY_LAG;
            let firsts: Vec<((u32, u32), bool)> = s
                .ops
                .iter()
                .filter_map(|op| match op.kind {
                    OpKind::Transfer { pattern, bytes }
                        if bytes == REQUEST_BYTES && op.step == 0 =>
                    {
                        let late = op.deps.iter().any(|d| {
                            matches!(s.ops[d.0 as usize].kind,
                                OpKind::Compute { duration, .. } if duration == lag)
                        });
                        Some((s.patterns[pattern.0 as usize].pairs[0], late))
                    }
                    _ => None,
                })
                .collect();
            let want: Vec<((u32, u32), bool)> =
                (0..n).map(|r| ((r, (r + n - 1) % n), r == n - 1)).collect();
            assert_eq!(firsts, want, "{n} ranks");
        }
    }

    #[test]
    fn algorithms_by_name_or_number() {
        assert_eq!(AllGatherAlg::parse("4"), Some(Ring));
        assert_eq!(AllGatherAlg::parse("Neighbor"), Some(Neighbor));
        assert_eq!(AllGatherAlg::parse("7"), None);
    }
}
