//! OpenMPI's barrier: coll/tuned's fixed rules (`coll_tuned_decision_fixed.c`, v4.1.4) and the
//! `coll/base` algorithms they pick (`coll_base_barrier.c`), facts read from the sources.
//!
//! - **Rules**, by communicator size only: recursive doubling below 4 ranks, linear from 4 to
//!   7, recursive doubling from 8 to 63, bruck to 255, tree to 511, bruck to 1,023, tree to
//!   4,095, bruck above. `coll_tuned_barrier_algorithm` forces one by name or number: 1
//!   linear, 2 double_ring, 3 recursive_doubling, 4 bruck, 5 two_proc, 6 tree.
//! - **Messages**: every one is empty, so eager (ob1 sends its match header at once and a
//!   standard send completes as it is written). A synchronous send (the double ring's second
//!   lap, recursive doubling's last message to a folded rank) completes when the receiver's
//!   acknowledgement of the match is back.
//! - **Algorithms**, each rank stepping on as its own calls complete (played rank by rank, the
//!   last rank entering late as in the other collectives):
//!   - linear: every rank sends to rank 0 and waits for its answer; rank 0 answers them in rank
//!     order once all have arrived;
//!   - double ring: a message around the ring from rank 0 (each rank forwards it once it has
//!     it), then a second lap of synchronous sends;
//!   - recursive doubling: ranks above the largest power of two p fold into rank − p (a
//!     sendrecv with it), the first p exchange (sendrecv) at distance 1, 2, 4 …, and each folded
//!     rank is released by a synchronous send;
//!   - bruck: a dissemination barrier, a send to rank + d and a receive from rank − d for
//!     d = 1, 2, 4 …;
//!   - two_proc: one sendrecv (2 ranks only);
//!   - tree: up a binomial tree (each rank hears from its children, then tells its parent),
//!     then back down.

use super::allreduce::entering;
use super::{Algorithm as _, LibraryError, LibraryOptions, Plan, Request, System, ACK_BYTES};
use crate::collective::{Collective, Endpoint, OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;

/// How much later than the others the last rank enters a barrier timed after the one before
/// (`testbed_barrier.csv`): not [`super::allreduce::ENTRY_LAG`], which was measured at the
/// collectives' entry after the harness's barrier; these calls took 0.06-0.53 ms whole, so
/// their ranks cannot enter 0.14 ms apart. Not measured: the 50 µs every rank-by-rank
/// collective had until 2026-12-02.
const BARRIER_ENTRY_LAG: SimTime = SimTime::from_ps(50_000_000);

algorithms! {
    /// OpenMPI's barrier algorithms, numbered as `coll_tuned_barrier_algorithm` takes them.
    BarrierAlg, "barrier", {
        Linear = 1 => "linear",
        DoubleRing = 2 => "double_ring",
        RecursiveDoubling = 3 => "recursive_doubling",
        Bruck = 4 => "bruck",
        TwoProc = 5 => "two_proc",
        Tree = 6 => "tree",
    }
}

/// What coll/tuned's fixed rules run for a barrier of `comm_size` ranks (v4.1.4).
pub fn barrier_fixed(comm_size: u32) -> BarrierAlg {
    use BarrierAlg::*;
    match comm_size {
        0..=3 => RecursiveDoubling,
        4..=7 => Linear,
        8..=63 => RecursiveDoubling,
        64..=255 => Bruck,
        256..=511 => Tree,
        512..=1023 => Bruck,
        1024..=4095 => Tree,
        _ => Bruck,
    }
}

/// The barrier OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    _req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let (alg, how) = super::chosen(opts, || barrier_fixed(n))?;
    if alg == BarrierAlg::TwoProc && n != 2 {
        return Err(LibraryError::new(
            "collective.algorithm",
            format!("a barrier algorithm for {n} ranks: two_proc runs on 2 ranks only"),
        ));
    }
    let mut s = Schedule::new(Collective::Barrier, format!("mpi {}", alg.as_str()), n, 0);
    if n > 1 {
        let mut ranks = Ranks {
            ready: entering(&mut s, n, Phase::Barrier, BARRIER_ENTRY_LAG),
        };
        match alg {
            BarrierAlg::Linear => linear(&mut s, &mut ranks, n),
            BarrierAlg::DoubleRing => double_ring(&mut s, &mut ranks, n),
            BarrierAlg::RecursiveDoubling => recursive_doubling(&mut s, &mut ranks, n),
            BarrierAlg::Bruck => bruck(&mut s, &mut ranks, n),
            BarrierAlg::TwoProc => ranks.round(&mut s, &[(0, 1), (1, 0)], 0),
            BarrierAlg::Tree => tree(&mut s, &mut ranks, n),
        }
    }
    Ok(Plan {
        schedule: s,
        placed_endpoints: Vec::new(),
        decision: format!("OpenMPI 4.1 barrier {} ({how})", alg.as_str()),
        parameters: Vec::new(),
        alternatives: Vec::new(),
        alternatives_vary: String::new(),
        plays_per_way: 1,
    })
}

/// Per rank, what its next call waits for.
struct Ranks {
    ready: Vec<Vec<OpId>>,
}

impl Ranks {
    /// An empty message from `from` to `to`, written once `from` is ready; a standard send,
    /// complete as it is written. Returns its arrival.
    fn send(&self, s: &mut Schedule, from: Endpoint, to: Endpoint, step: u32) -> OpId {
        let pattern = s.add_pattern(vec![(from, to)]);
        s.push(
            OpKind::Transfer { pattern, bytes: 0 },
            self.ready[from as usize].clone(),
            Phase::Barrier,
            0,
            step,
        )
    }

    /// A blocking receive by `to` of the message that arrives with `arrival`.
    fn recv(&mut self, to: Endpoint, arrival: OpId) {
        self.ready[to as usize].push(arrival);
    }

    /// One round of empty messages, (from, to) each: every sender writes once it is ready, then
    /// every receiver waits for its message. Partners naming each other both ways are
    /// `ompi_coll_base_sendrecv_zero` (each posts a receive, sends, and waits for the receive).
    fn round(&mut self, s: &mut Schedule, pairs: &[(Endpoint, Endpoint)], step: u32) {
        let arrivals: Vec<OpId> = pairs
            .iter()
            .map(|&(from, to)| self.send(s, from, to, step))
            .collect();
        for (&(_, to), arrival) in pairs.iter().zip(arrivals) {
            self.recv(to, arrival);
        }
    }

    /// A synchronous send from `from` to `to`: complete once `to`, ready to receive, has sent
    /// back its acknowledgement of the match.
    fn ssend(&mut self, s: &mut Schedule, from: Endpoint, to: Endpoint, step: u32) {
        let arrival = self.send(s, from, to, step);
        let pattern = s.add_pattern(vec![(to, from)]);
        let mut deps = self.ready[to as usize].clone();
        deps.push(arrival);
        let ack = s.push(
            OpKind::Transfer {
                pattern,
                bytes: ACK_BYTES,
            },
            deps,
            Phase::Barrier,
            0,
            step,
        );
        self.ready[from as usize] = vec![ack];
        self.recv(to, arrival);
    }
}

/// Linear: every rank sends to rank 0 and waits for its answer; rank 0 answers in rank order
/// once all have arrived.
fn linear(s: &mut Schedule, ranks: &mut Ranks, n: u32) {
    let to_root: Vec<(Endpoint, Endpoint)> = (1..n).map(|r| (r, 0)).collect();
    ranks.round(s, &to_root, 0);
    let answers: Vec<(Endpoint, Endpoint)> = (1..n).map(|r| (0, r)).collect();
    ranks.round(s, &answers, 1);
}

/// Double ring: rank 0 sends to rank 1, every other rank forwards once it has the message, and
/// rank 0 waits for it back; then the same with synchronous sends.
fn double_ring(s: &mut Schedule, ranks: &mut Ranks, n: u32) {
    for lap in 0..2u32 {
        for r in 0..n {
            let to = (r + 1) % n;
            if lap == 0 {
                let arrival = ranks.send(s, r, to, lap);
                ranks.recv(to, arrival);
            } else {
                ranks.ssend(s, r, to, lap);
            }
        }
    }
}

/// Recursive doubling: ranks from the largest power of two p up fold into rank − p, the first
/// p exchange at distance 1, 2, 4 …, and each folded rank is released by a synchronous send.
fn recursive_doubling(s: &mut Schedule, ranks: &mut Ranks, n: u32) {
    let p = 1u32 << (31 - n.leading_zeros());
    // A folded rank's sendrecv: its send to rank − p now; its receive is the final release.
    let folds: Vec<(Endpoint, Endpoint)> = (p..n).map(|high| (high, high - p)).collect();
    ranks.round(s, &folds, 0);
    let mut mask = 1;
    let mut step = 1;
    while mask < p {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..p)
            .filter(|r| r & mask == 0)
            .flat_map(|r| [(r, r ^ mask), (r ^ mask, r)])
            .collect();
        ranks.round(s, &pairs, step);
        mask <<= 1;
        step += 1;
    }
    for high in p..n {
        ranks.ssend(s, high - p, high, step);
    }
}

/// Bruck: at distance d = 1, 2, 4 … every rank sends to rank + d and waits for rank − d's.
fn bruck(s: &mut Schedule, ranks: &mut Ranks, n: u32) {
    let mut d = 1;
    let mut step = 0;
    while d < n {
        let pairs: Vec<(Endpoint, Endpoint)> = (0..n).map(|r| (r, (r + d) % n)).collect();
        ranks.round(s, &pairs, step);
        d <<= 1;
        step += 1;
    }
}

/// Tree: at jump 1, 2, 4 … a rank whose partner (rank ^ jump) is above it hears from it, one
/// below it tells it (when the partner's low bits are clear); then back down in reverse.
fn tree(s: &mut Schedule, ranks: &mut Ranks, n: u32) {
    let depth = n.next_power_of_two();
    let pairs = |jump: u32| -> Vec<(Endpoint, Endpoint)> {
        // (child, parent): the rank above and the rank below.
        (0..n)
            .filter(|&r| {
                let partner = r ^ jump;
                partner & (jump - 1) == 0 && partner < n && partner < r
            })
            .map(|r| (r, r ^ jump))
            .collect()
    };
    // Up at jumps 1, 2, 4 … below the depth, then down in reverse.
    let jumps: Vec<u32> = (0..32)
        .map(|j| 1u32 << j)
        .take_while(|&j| j < depth)
        .collect();
    let rounds = jumps
        .iter()
        .map(|&j| (j, true))
        .chain(jumps.iter().rev().map(|&j| (j, false)));
    for (step, (jump, up)) in (0u32..).zip(rounds) {
        let messages: Vec<(Endpoint, Endpoint)> = pairs(jump)
            .into_iter()
            .map(|(child, parent)| if up { (child, parent) } else { (parent, child) })
            .collect();
        ranks.round(s, &messages, step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::testing::cpu_hosts;
    use BarrierAlg::*;

    #[test]
    fn fixed_rules_at_the_thresholds_of_the_source() {
        // coll_tuned_decision_fixed.c (v4.1.4), ompi_coll_tuned_barrier_intra_dec_fixed.
        let cases = [
            (2, RecursiveDoubling),
            (3, RecursiveDoubling),
            (4, Linear),
            (7, Linear),
            (8, RecursiveDoubling),
            (63, RecursiveDoubling),
            (64, Bruck),
            (255, Bruck),
            (256, Tree),
            (511, Tree),
            (512, Bruck),
            (1023, Bruck),
            (1024, Tree),
            (4095, Tree),
            (4096, Bruck),
        ];
        for (n, alg) in cases {
            assert_eq!(barrier_fixed(n), alg, "{n} ranks");
        }
        assert_eq!(BarrierAlg::parse("6"), Some(Tree));
        assert_eq!(BarrierAlg::parse("double-ring"), Some(DoubleRing));
        assert_eq!(BarrierAlg::parse("7"), None);
    }

    /// OpenMPI's barrier on `n` CPU hosts with `alg` forced.
    fn forced(alg: &str, n: u32) -> Result<Plan, LibraryError> {
        let req = Request {
            collective: Collective::Barrier,
            bytes: 0,
            root: 0,
            peer: 1,
        };
        let opts = LibraryOptions {
            algorithm: Some(alg.into()),
            ..Default::default()
        };
        plan(&req, &cpu_hosts(n), &opts)
    }

    /// The (sender, receiver) of every message of `alg` on `n` ranks, acknowledgements of
    /// synchronous sends apart, and how many acknowledgements there are.
    fn messages(alg: &str, n: u32) -> (Vec<(u32, u32)>, usize) {
        let p = forced(alg, n).unwrap();
        p.schedule.validate().unwrap();
        let mut sent = Vec::new();
        let mut acks = 0;
        for op in &p.schedule.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                match bytes {
                    0 => sent.push(p.schedule.patterns[pattern.0 as usize].pairs[0]),
                    _ => acks += 1,
                }
            }
        }
        (sent, acks)
    }

    #[test]
    fn every_algorithm_sends_the_messages_its_source_sends() {
        for n in [2u32, 3, 4, 5, 6, 7, 8, 12, 16] {
            let log2 = 32 - (n - 1).leading_zeros();
            let p = 1u32 << (31 - n.leading_zeros());
            // linear: everyone to rank 0 and back.
            let (m, acks) = messages("linear", n);
            assert_eq!((m.len(), acks), (2 * (n as usize - 1), 0), "linear {n}");
            assert!(m[..n as usize - 1].iter().all(|&(_, to)| to == 0));
            // bruck: n messages a round, ⌈log2 n⌉ rounds, to rank + d.
            let (m, _) = messages("bruck", n);
            assert_eq!(m.len(), (n * log2) as usize, "bruck {n}");
            assert!(m[..n as usize].iter().all(|&(a, b)| b == (a + 1) % n));
            // recursive doubling: p log2 p exchanged, each folded rank in and out (synchronous).
            let (m, acks) = messages("recursive_doubling", n);
            let folded = (n - p) as usize;
            assert_eq!(
                m.len(),
                (p * p.trailing_zeros()) as usize + 2 * folded,
                "rd {n}"
            );
            assert_eq!(acks, folded, "rd {n}");
            // tree: up and down the binomial tree, one message per edge each way.
            let (m, acks) = messages("tree", n);
            assert_eq!((m.len(), acks), (2 * (n as usize - 1), 0), "tree {n}");
            // double ring: two laps, the second synchronous.
            let (m, acks) = messages("double_ring", n);
            assert_eq!(
                (m.len(), acks),
                (2 * n as usize, n as usize),
                "double ring {n}"
            );
        }
        assert_eq!(messages("two_proc", 2).0, vec![(0, 1), (1, 0)]);
    }

    #[test]
    fn two_proc_on_more_than_two_ranks_is_refused_by_field() {
        let e = forced("two_proc", 4).unwrap_err();
        assert_eq!(e.field, "collective.algorithm");
    }
}
