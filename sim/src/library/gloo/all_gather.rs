//! gloo's all_gather (`allgather.cc`) as ProcessGroupGloo calls it: the ring of half blocks
//! played rank by rank, and the staging copies around it. See [`super`].

use super::{message_parts, p2p};
use crate::collective::{Collective, OpId, OpKind, Phase, Schedule};

/// What ProcessGroupGloo's staging copies cost one host, bytes per second: priming a fresh
/// buffer (first touch of its pages) and copying a staged buffer out to warm tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StagingCopies {
    pub prime_bytes_per_s: f64,
    pub out_bytes_per_s: f64,
}

impl StagingCopies {
    /// The profile's rates (`network.host_copy_bandwidth`, `host_copy_out_bandwidth`), when
    /// it measured them.
    pub fn of(profile: &crate::profile::Profile) -> Option<StagingCopies> {
        let prime = profile.host_copy_bytes_per_s().filter(|r| *r > 0.0)?;
        let out = profile.host_copy_out_bytes_per_s().filter(|r| *r > 0.0)?;
        Some(StagingCopies {
            prime_bytes_per_s: prime,
            out_bytes_per_s: out,
        })
    }
}

/// gloo's ring all-gather of a gathered size `bytes`: 2(n − 1) iterations of half a block,
/// each waiting for the one two before it (whose half it forwards), played rank by rank
/// ([`ring_all_gather_by_rank`]: a rank's notification to its left neighbour leaves behind
/// its own half to its right one, so who posts first matters). ProcessGroupGloo stages it
/// through a flat buffer: every rank first copies its block into its slot and, after the last
/// receive, the whole buffer out to the caller's tensors: at the host's measured `copies`
/// rates, host work before the ring (every rank) and after it (each rank once its own last
/// sends and receives are done).
pub(super) fn all_gather(bytes: u64, n: u32, copies: Option<StagingCopies>) -> Schedule {
    let mut s = Schedule::new(Collective::AllGather, "gloo ring", n, bytes);
    if n < 2 {
        return s;
    }
    let block = bytes / u64::from(n);
    let copy = |s: &mut Schedule, secs: f64, deps: Vec<OpId>, step: u32, ranks: u32| {
        s.push(
            OpKind::HostWork {
                endpoints: ranks,
                core_time: crate::engine::SimTime::from_secs_f64(secs),
            },
            deps,
            Phase::AllGather,
            0,
            step,
        )
    };
    let primed = copies.map(|c| copy(&mut s, block as f64 / c.prime_bytes_per_s, vec![], 0, n));
    let halves = [block / 2, block - block / 2];
    let done = ring_all_gather_by_rank(&mut s, n, halves, primed);
    if let Some(c) = copies {
        for rank_done in done {
            copy(
                &mut s,
                bytes as f64 / c.out_bytes_per_s,
                rank_done,
                2 * (n - 1),
                1,
            );
        }
    }
    s
}

/// gloo's all_gather ring rank by rank (`allgather.cc`): at iteration i every rank posts a send
/// of half a block to rank + 1, then a receive from rank − 1, [`p2p::POST_GAP`] apart; from
/// iteration 2 on, once its send of iteration i − 2 was written (its notification arrived) and
/// its receive of i − 2 arrived. Rank 0 starts [`p2p::ENTRY_LAG`] late. On two ranks both
/// directions share one connection, so the post order decides (see [`p2p`]): the late rank
/// finds the notifications waiting and writes its half before its own notification. Returns,
/// per rank, what it waits for last: its last two sends written and its last two receives.
fn ring_all_gather_by_rank(
    s: &mut Schedule,
    n: u32,
    halves: [u64; 2],
    primed: Option<OpId>,
) -> Vec<Vec<OpId>> {
    let after: Vec<OpId> = primed.into_iter().collect();
    let mut ready = p2p::entry(s, n, &after, Phase::AllGather);
    let iterations = 2 * (n as usize - 1);
    // (notification, payload) of rank r's send at iteration i: sent[i][r].
    let mut sent: Vec<Vec<(OpId, OpId)>> = Vec::with_capacity(iterations);
    for i in 0..iterations {
        if i >= 2 {
            for r in 0..n as usize {
                let left = (r + n as usize - 1) % n as usize;
                ready[r] = vec![sent[i - 2][r].0, sent[i - 2][left].1];
            }
        }
        // Iterations 0 and 1 are posted back to back; later ones each after its waits.
        let (send_call, calls) = if i < 2 { (2 * i, 4) } else { (0, 2) };
        let posted: Vec<Vec<Vec<OpId>>> = ready
            .iter()
            .map(|r| p2p::calls(s, r, calls, Phase::AllGather, i as u32))
            .collect();
        let step: Vec<(OpId, OpId)> = (0..n)
            .map(|from| {
                let to = (from + 1) % n;
                message_parts(
                    s,
                    &[(from, to)],
                    halves[i & 1],
                    posted[to as usize][send_call + 1].clone(),
                    posted[from as usize][send_call].clone(),
                    Phase::AllGather,
                    i as u32,
                )
            })
            .collect();
        sent.push(step);
    }
    // A rank is done once its last two sends were written (their notifications came) and its
    // last two receives arrived.
    (0..n as usize)
        .map(|r| {
            let left = (r + n as usize - 1) % n as usize;
            sent.iter()
                .rev()
                .take(2)
                .flat_map(|step| [step[r].0, step[left].1])
                .collect()
        })
        .collect()
}
