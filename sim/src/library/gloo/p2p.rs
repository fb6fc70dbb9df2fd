//! All-reduces written by hand over ProcessGroupGloo's `isend`/`irecv`, as torch.distributed
//! users compose them (and as the testbed's suite does, `testbed/workloads/gloo_collectives.py`),
//! rather than gloo's own collectives:
//!
//! - [`rings`]: one ring all-reduce per rank order, each over an equal share of the buffer,
//!   all rings stepping together. Each step, every rank posts, ring by ring, an isend to its
//!   successor and then an irecv from its predecessor, waits for all of them, and adds what
//!   it received (reduce-scatter), or keeps it (all-gather).
//! - [`hierarchical`]: within each node's ranks such a ring's reduce-scatter; across nodes
//!   (ranks of equal local index) gloo's own all_reduce of the chunk each holds; within each
//!   node gloo's own all_gather (torch 1.13's gloo has no reduce_scatter to call).
//!
//! Every message is gloo's rendezvous (see [`super`]): the payload leaves once the receiver's
//! notification arrived, and that notification is written into the receiver's own connection
//! to the sender, behind any payload it wrote there before (`in_order` ops). So the order in
//! which a rank posts matters. When two ranks exchange (isend, then irecv) and one posts later
//! than the notification from the other takes to reach it, the late one writes its payload at
//! once and its notification after it: the other way waits for the whole first way. The
//! testbed's gloo_p2p log (`data/runs/calibration/testbed_two_level_2to1.gloo_p2p_cross_leaf.json`,
//! `suite.py gloo_p2p`) shows both: a pair's exchange ran one way after the other (2× a
//! one-way send) whenever its ranks posted more than 160 µs apart, both ways at once below
//! 110 µs, and always both ways at once when both posted irecv first. After a barrier the
//! pair's posts were a median 165 µs apart ([`ENTRY_LAG`]).
//!
//! dtsim plays one realisation of that: rank 0 posts its first step [`ENTRY_LAG`] after the
//! others, every rank posts its calls [`POST_GAP`] apart in program order, and from then on the
//! ranks drift as the simulated transfers make them.

use super::{all_gather, all_reduce, in_order_transfer, message_parts};
use crate::collective::steps::split_even;
use crate::collective::{Collective, Endpoint, OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;

/// How much later than the others rank 0 posts its first send: the median of |post time of
/// one rank − post time of its peer| over the 150 exchanges after a barrier in the gloo_p2p
/// log (165 µs; quartiles 88 and 371 µs). Any lag beyond a notification's path latency plus
/// [`POST_GAP`] plays the same: the late rank's payload goes first.
pub const ENTRY_LAG: SimTime = SimTime::from_ps(165_000_000);

/// The time between two torch.distributed calls of one rank (the isend, then the irecv),
/// which orders what the rank writes; only the order matters while it is shorter than a
/// notification's path latency (tens of µs on the testbed).
pub const POST_GAP: SimTime = SimTime::from_ps(10_000_000);

/// Element size for splitting buffers as `torch.tensor_split` does (float32).
const ELEMENT_BYTES: u64 = 4;

/// `bytes` cut into `parts` pieces the way `tensor_split` cuts a float32 tensor.
fn tensor_split(bytes: u64, parts: u64) -> Vec<u64> {
    split_even(bytes / ELEMENT_BYTES, parts)
        .into_iter()
        .map(|e| e * ELEMENT_BYTES)
        .collect()
}

/// One ring of [`ring_steps`]: its ranks in order and the bytes it all-reduces.
struct Ring<'a> {
    order: &'a [Endpoint],
    bytes: u64,
}

/// The steps of `rings` (all of one length) over send/recv: the reduce-scatter, then the
/// all-gather when `gather`. `ready[r]` is what rank r waits for before its first post (empty:
/// nothing); returns, per rank, the op after which it is done (its last step's receives and
/// sends, and the reduction of what it received). A send is done once its payload is in the
/// socket: with `send_queue` ([`send`]), when all but that much was delivered.
fn ring_steps(
    s: &mut Schedule,
    rings: &[Ring<'_>],
    gather: bool,
    mut ready: Vec<Vec<OpId>>,
    send_queue: Option<u64>,
) -> Vec<Vec<OpId>> {
    let Some(n) = rings.first().map(|r| r.order.len()) else {
        return ready;
    };
    let ranks = ready.len();
    // Per rank, how many rings it is on (it posts them in ring order); slot[k][i]: where ring
    // k comes among the posts of the rank at place i on it.
    let mut rings_of = vec![0usize; ranks];
    let mut slot: Vec<Vec<usize>> = Vec::with_capacity(rings.len());
    for ring in rings {
        let mut places = Vec::with_capacity(n);
        for &r in ring.order {
            places.push(rings_of[r as usize]);
            rings_of[r as usize] += 1;
        }
        slot.push(places);
    }
    let chunks: Vec<Vec<u64>> = rings
        .iter()
        .map(|r| tensor_split(r.bytes, n as u64))
        .collect();
    let steps = if gather { 2 * (n - 1) } else { n - 1 };
    for step in 0..steps {
        let (phase, reducing) = if step < n - 1 {
            (Phase::ReduceScatter, true)
        } else {
            (Phase::AllGather, false)
        };
        // Each rank's calls: isend then irecv per ring, POST_GAP apart.
        let posted: Vec<Vec<Vec<OpId>>> = (0..ranks)
            .map(|r| calls(s, &ready[r], 2 * rings_of[r], phase, step as u32))
            .collect();
        // Every message of the step, from the rank at place i of ring k to the next. A rank
        // waits for its sends (in the socket) and its receives (delivered), then reduces what
        // it received.
        let mut waits: Vec<Vec<OpId>> = vec![Vec::new(); ranks];
        let mut received = vec![0u64; ranks];
        for (k, ring) in rings.iter().enumerate() {
            for (i, &from) in ring.order.iter().enumerate() {
                let to = ring.order[(i + 1) % n];
                let chunk = if reducing {
                    (i + n - step % n) % n
                } else {
                    (i + 1 + n - (step - (n - 1)) % n) % n
                };
                let bytes = chunks[k][chunk];
                let (written, delivered) = send(
                    s,
                    (from, to),
                    bytes,
                    posted[to as usize][2 * slot[k][(i + 1) % n] + 1].clone(),
                    posted[from as usize][2 * slot[k][i]].clone(),
                    send_queue,
                    (phase, step as u32),
                );
                waits[from as usize].push(written);
                waits[to as usize].push(delivered);
                received[to as usize] += bytes;
            }
        }
        for r in 0..ranks {
            if rings_of[r] == 0 {
                continue;
            }
            let deps = std::mem::take(&mut waits[r]);
            let received = received[r];
            let kind = if reducing {
                OpKind::Reduce {
                    endpoints: 1,
                    bytes: received,
                }
            } else {
                OpKind::Compute {
                    endpoints: 1,
                    duration: SimTime::ZERO,
                }
            };
            ready[r] = vec![s.push(kind, deps, phase, 0, step as u32)];
        }
    }
    ready
}

/// One isend from `pair.0` to `pair.1` and its irecv (see [`message_parts`]): returns (the
/// send done, the payload delivered). gloo's send is done once its write into the socket
/// completed. The socket holds what TCP keeps queued at its egress (`send_queue`, the
/// profile's FIFO head) and little beyond: captured on the testbed's 2:1 and 1:1 leaves
/// (`testbed_two_level_{2to1,1to1}.capture_gloo_hierarchical_16m.json`, twelve hierarchical
/// all-reduces of 16 MiB), a rank that sent its 8 MiB second in the reduce-scatter's exchange
/// started its next call's payloads 0.9-2.9 ms after that send's last byte left, never
/// during it. So a payload larger than the queue is played as its first bytes, then the
/// queue's worth behind them on the connection, and the send is done once the first part
/// arrived; a smaller one (or without a queue) once the receiver's notification arrived.
/// Where the hosts' CPU is charged ([`super::host_cpu`]) each part is a payload: the sender's
/// wake-up when its write completes is drawn too, and the message's fixed cost is charged
/// twice (0.1 ms of core time more per split send on the testbed).
fn send(
    s: &mut Schedule,
    pair: (Endpoint, Endpoint),
    bytes: u64,
    recv_posted: Vec<OpId>,
    send_posted: Vec<OpId>,
    send_queue: Option<u64>,
    (phase, step): (Phase, u32),
) -> (OpId, OpId) {
    let queue = send_queue.unwrap_or(0);
    if queue == 0 || bytes <= queue {
        return message_parts(s, &[pair], bytes, recv_posted, send_posted, phase, step);
    }
    let (ready, head) = message_parts(
        s,
        &[pair],
        bytes - queue,
        recv_posted,
        send_posted.clone(),
        phase,
        step,
    );
    let mut deps = vec![ready];
    deps.extend(send_posted);
    let tail = in_order_transfer(s, vec![pair], queue, deps, (phase, step));
    (head, tail)
}

/// What every rank waits for before its first post, each after `after`: rank 0 [`ENTRY_LAG`],
/// the others nothing more (`phase`: the first posts', for timelines).
pub(super) fn entry(s: &mut Schedule, ranks: u32, after: &[OpId], phase: Phase) -> Vec<Vec<OpId>> {
    let mut ready = vec![after.to_vec(); ranks as usize];
    if ranks > 1 {
        ready[0] = vec![s.push(
            OpKind::Compute {
                endpoints: 1,
                duration: ENTRY_LAG,
            },
            after.to_vec(),
            phase,
            0,
            0,
        )];
    }
    ready
}

/// When one rank's `count` calls in a row are posted, the first once `ready` finished and
/// each next one [`POST_GAP`] later: what each call waits for.
pub(super) fn calls(
    s: &mut Schedule,
    ready: &[OpId],
    count: usize,
    phase: Phase,
    step: u32,
) -> Vec<Vec<OpId>> {
    (0..count)
        .map(|call| {
            if call == 0 {
                return ready.to_vec();
            }
            vec![s.push(
                OpKind::Compute {
                    endpoints: 1,
                    duration: SimTime::from_ps(POST_GAP.as_ps() * call as u64),
                },
                ready.to_vec(),
                phase,
                0,
                step,
            )]
        })
        .collect()
}

/// Ring all-reduces over send/recv, one per order in `orders` (each a permutation of the
/// ranks), the buffer split evenly between them (see the module doc).
pub fn rings(bytes: u64, n: u32, orders: &[Vec<u32>], send_queue: Option<u64>) -> Schedule {
    let mut s = Schedule::new(
        Collective::AllReduce,
        format!("send/recv rings ({})", orders.len()),
        n,
        bytes,
    );
    if n < 2 || bytes == 0 {
        return s;
    }
    let parts = tensor_split(bytes, orders.len() as u64);
    let rings: Vec<Ring<'_>> = orders
        .iter()
        .zip(&parts)
        .map(|(order, &bytes)| Ring {
            order: order.as_slice(),
            bytes,
        })
        .collect();
    let ready = entry(&mut s, n, &[], Phase::ReduceScatter);
    ring_steps(&mut s, &rings, true, ready, send_queue);
    s
}

/// The hierarchical all-reduce of `bytes` over `groups` (the ranks of each node, all groups of
/// one size, in node order): see the module doc. `copies` are the host's staging-copy
/// rates for gloo's all_gather, `send_queue` what a send leaves in its socket (see `send`).
pub fn hierarchical(
    bytes: u64,
    groups: &[Vec<u32>],
    copies: Option<super::StagingCopies>,
    send_queue: Option<u64>,
) -> Schedule {
    let n: u32 = groups.iter().map(|g| g.len() as u32).sum();
    let mut s = Schedule::new(Collective::AllReduce, "send/recv hierarchical", n, bytes);
    let local = groups.first().map_or(0, Vec::len);
    if n < 2 || bytes == 0 || local == 0 {
        return s;
    }
    // 1. Within each node: the send/recv ring's reduce-scatter of the whole buffer.
    let rings: Vec<Ring<'_>> = groups
        .iter()
        .map(|g| Ring {
            order: g.as_slice(),
            bytes,
        })
        .collect();
    let ready = entry(&mut s, n, &[], Phase::ReduceScatter);
    let reduced = ring_steps(&mut s, &rings, false, ready, send_queue);
    // 2. Across nodes, per local index l: gloo's all_reduce of the chunk those ranks hold
    // (chunk (l + 1) mod L of the ring's split), once they all finished their reduce-scatter.
    let chunks = tensor_split(bytes, local as u64);
    let mut across = Vec::new();
    for l in 0..local {
        let members: Vec<Endpoint> = groups.iter().map(|g| g[l]).collect();
        let after: Vec<OpId> = members
            .iter()
            .flat_map(|&r| reduced[r as usize].iter().copied())
            .collect();
        let sub = all_reduce(chunks[(l + 1) % local], groups.len() as u32);
        across.extend(s.embed(&sub, &[&members], &after, &|op| op.kind.clone()));
    }
    // 3. Within each node: gloo's all_gather of the chunks back into the whole buffer.
    if local > 1 {
        let sub = all_gather(bytes, local as u32, copies);
        for g in groups {
            s.embed(&sub, &[g.as_slice()], &across, &|op| op.kind.clone());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::gloo::PREAMBLE_BYTES;
    use crate::library::testing::payload_bytes;

    #[test]
    fn rings_move_each_rings_share_two_n_minus_one_over_n_times() {
        // Two rings of 4 ranks over 1 MiB: each carries 512 KiB, every rank sends 2·3/4 of it
        // per ring.
        let s = rings(1 << 20, 4, &[vec![0, 1, 2, 3], vec![0, 2, 1, 3]], None);
        s.validate().unwrap();
        assert_eq!(payload_bytes(&s, PREAMBLE_BYTES), 2 * 4 * 6 * (128 << 10));
        // One notification per payload, in order on its connection like the payload.
        let transfers: Vec<_> = s
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Transfer { .. }))
            .collect();
        assert!(transfers.iter().all(|o| o.in_order));
        assert_eq!(transfers.len(), 2 * 2 * 4 * 6);
    }

    #[test]
    fn a_rank_posts_its_isend_before_its_irecv_and_rank_zero_posts_late() {
        let s = rings(1 << 20, 2, &[vec![0, 1]], None);
        // Rank 0's first call waits for ENTRY_LAG; each rank's irecv is POST_GAP after its isend.
        let lag = s
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Compute { duration, .. } if duration == ENTRY_LAG))
            .count();
        assert_eq!(lag, 1);
        let gaps = s
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Compute { duration, .. } if duration == POST_GAP))
            .count();
        assert_eq!(gaps, 2 * 2, "two ranks, two steps, one irecv each");
    }

    #[test]
    fn hierarchical_reduces_in_nodes_then_all_reduces_across_then_gathers() {
        let groups = vec![vec![0, 1], vec![2, 3]];
        let m = 16u64 << 20;
        let s = hierarchical(m, &groups, None, None);
        s.validate().unwrap();
        // Reduce-scatter in each node: every rank sends half the buffer once.
        let rs: u128 = 4 * (m as u128 / 2);
        // Across nodes: gloo's ring all-reduce of each 8 MiB chunk on 2 ranks (2·1/2 of it per
        // rank); in each node gloo's all_gather of 16 MiB on 2 ranks (each rank its 8 MiB).
        let across: u128 = 2 * 2 * (m as u128 / 2);
        let gather: u128 = 4 * (m as u128 / 2);
        assert_eq!(payload_bytes(&s, PREAMBLE_BYTES), rs + across + gather);
    }

    #[test]
    fn a_send_larger_than_its_socket_holds_is_done_once_all_but_the_queue_arrived() {
        // One reduce-scatter step on two ranks, 8 MiB each way, a 168 KB send queue: each
        // payload is its first 8 MiB - 168 KB, then the queue's 168 KB behind it on the
        // connection; a rank's step waits for the first part it sent and the whole it received.
        let queue = 168_000u64;
        let s = hierarchical(16 << 20, &[vec![0, 1]], None, Some(queue));
        s.validate().unwrap();
        let sizes = |op: &crate::collective::Op| match op.kind {
            OpKind::Transfer { bytes, .. } if bytes != PREAMBLE_BYTES => Some(bytes),
            _ => None,
        };
        let head = (8u64 << 20) - queue;
        let heads: Vec<usize> = (0..s.ops.len())
            .filter(|&i| sizes(&s.ops[i]) == Some(head))
            .collect();
        let tails: Vec<usize> = (0..s.ops.len())
            .filter(|&i| sizes(&s.ops[i]) == Some(queue))
            .collect();
        assert_eq!(
            (heads.len(), tails.len()),
            (2, 2),
            "one head and one tail each way"
        );
        assert!(tails.iter().all(|&t| s.ops[t].in_order));
        // Each rank's reduction waits for its own head (its send done) and the other's tail.
        for op in s
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Reduce { .. }))
        {
            let deps: Vec<usize> = op.deps.iter().map(|d| d.0 as usize).collect();
            assert_eq!(deps.iter().filter(|d| heads.contains(d)).count(), 1);
            assert_eq!(deps.iter().filter(|d| tails.contains(d)).count(), 1);
        }
        // Without a queue, or a payload the socket holds, the payload is one transfer.
        for q in [None, Some(16 << 20)] {
            let whole = hierarchical(16 << 20, &[vec![0, 1]], None, q);
            let n = whole
                .ops
                .iter()
                .filter(|o| sizes(o) == Some(8 << 20))
                .count();
            assert_eq!(n, 2, "the reduce-scatter's two payloads, whole");
        }
    }
}
