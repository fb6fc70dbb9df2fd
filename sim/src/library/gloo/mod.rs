//! gloo as `torch.distributed`'s ProcessGroupGloo runs it (torch 1.13–2.x, gloo's TCP
//! transport): the collectives of CPU clusters and of the project's testbed, as gloo's sources
//! write them (facts read from gloo, no code taken).
//!
//! - **all_reduce**: ProcessGroupGloo calls `gloo::allreduce` without choosing an algorithm,
//!   which is the ring (`allreduce.cc`). The buffer is cut into `roundUp(max(⌈M / 1 MiB⌉, 2n),
//!   n)` segments (`kMaxSegmentSize` = 1 MiB since 2018); a ring reduce-scatter, then a ring
//!   all-gather, over them. Every rank sends to rank − 1 with two segments in flight: iteration
//!   i is issued once iteration i − 2 is done, and a received segment is reduced on the CPU
//!   before it is forwarded. The two in flight share one TCP connection, so they leave one
//!   after the other: the window keeps the connection busy, it does not add a second flow.
//!   Each rank runs the two loops on its own, and so does the play (rank by rank, up to
//!   [`ALL_REDUCE_BY_RANK_MAX`] ranks; in lockstep batches beyond).
//! - **broadcast**: binomial tree of the whole message (`broadcast.cc`). A rank forwards only
//!   after it received everything, and posts the sends to all its children at once, one
//!   message each (the root of 8 to ranks 1, 2 and 4): on a FIFO egress queue (the profile's
//!   FIFO head) the first-posted leaves first, without one they share the rank's uplink. The
//!   root's payloads wait for their children's notifications, which come in the order the
//!   children enter: the plan carries every order (`root_orders`) and a run reports the
//!   median one.
//! - **all_gather**: ring to rank + 1 (`allgather.cc`), each rank's block sent as two halves
//!   with two in flight.
//! - **reduce** (`reduce.cc`): the all-reduce's ring reduce-scatter with its own segments
//!   (`min(⌈M / 2n⌉, 1 MiB)` each, their count rounded up to a multiple of n and at least 2n)
//!   and count of iterations (segments − 2, which sends more than the reduce-scatter needs
//!   when a rank holds more than two segments; a rank sends nothing for a segment past the
//!   buffer's end), played rank by rank, then every rank sends its reduced chunk to the root
//!   once its own loop is done: its last receive reduced and its last send written, its bytes
//!   out of the host, which on a path whose slowest link comes later is before they arrive
//!   (the flow model's pushes, `Schedule::push_pushed`).
//! - **all_to_all**: every send and receive posted at once (`alltoall.cc`).
//! - **send_recv**: one message.
//! - All-reduces a torch user writes over isend/irecv ([`p2p`]): rings in given orders, and
//!   the hierarchical all-reduce over the topology's nodes.
//!
//! Every message is a rendezvous (`transport/tcp/pair.cc`): the payload leaves only when the
//! receiver's NOTIFY_RECV_READY has arrived, a message of one preamble (six `size_t`, 48 B)
//! the other way. dtsim plays that notification as a transfer of [`PREAMBLE_BYTES`] before
//! every payload op, so it costs one path latency where the real one does. A pair of ranks
//! has one TCP connection, so both are in order on it ([`crate::collective::in_order`]): a
//! notification leaves behind what its writer already sent to the same peer. Where two ranks
//! send each other both ways on one connection, the order they post in decides the time:
//! gloo's all_reduce posts its receive first (both ways at once), its all_gather its send
//! first, so on two ranks the later rank's payload goes first and the other waits for it
//! (see [`p2p`], whose all-reduces written over isend/irecv meet the same race).
//!
//! Host work: a received segment's reduction takes the profile's `network.reduce_bandwidth`
//! (the play's `Reduce` ops), and all_gather's staging copies (ProcessGroupGloo gathers into a
//! fresh flat buffer: its own block in first, at `network.host_copy_bandwidth`, the first touch
//! of fresh pages; everything out to the caller's tensors last, each rank once its own ring is
//! done, at `network.host_copy_out_bandwidth`, warm pages); all measured in one process by
//! `testbed/workloads/host_costs.py` (`calibrate import host-costs`). Where the profile says
//! the hosts share a machine's cores (`network.host_cpu`), every message's host work is played
//! on them ([`host_cpu`]), and so are the reductions and the copies (each at most one core at
//! its measured rate, slower when more work runs than there are cores).
//!
//! Not modelled, and refused: reduce_scatter (ProcessGroupGloo 1.13 has none). The work
//! thread's hand-offs are not modelled either.
//!
//! Here: the plan, its refusals, and the message (notification, then payload) every schedule
//! is built of; the collectives in `ring` (all_reduce, reduce), `broadcast`,
//! `all_gather`, [`p2p`] (over isend/irecv); the hosts' CPU in [`host_cpu`].

mod all_gather;
mod broadcast;
pub mod host_cpu;
pub mod p2p;
mod ring;

pub use all_gather::StagingCopies;
pub use ring::{reduce_segments, ring_segments, ALL_REDUCE_BY_RANK_MAX, REDUCE_BY_RANK_MAX};

use all_gather::all_gather;
use broadcast::{broadcast, root_children, root_orders};
use ring::{all_reduce, reduce};

use super::{LibraryError, LibraryOptions, Plan, Request, System};
use crate::collective::steps::split_even;
use crate::collective::{Collective, Endpoint, Fabric, OpId, OpKind, Phase, Schedule};

/// gloo's `AllreduceOptions::kMaxSegmentSize`: the largest send of the all-reduce ring.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 20;

/// Bytes of a gloo TCP preamble (`Op::preamble`: six `size_t`), the whole of a notification.
pub const PREAMBLE_BYTES: u64 = 48;

/// The schedule gloo runs for `req` on `sys`. `opts.algorithm` may only name what gloo would
/// run anyway (`ring` for all_reduce): gloo has no tuner to override. Two all-reduces written
/// over gloo's send/recv ([`p2p`]) are also what a torch user runs on gloo: rings in the
/// scenario's `orders`, and `hierarchical` over the nodes of `fabric`.
pub fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
    let (mut plan, sent) = plan_messages(req, sys, opts, fabric)?;
    let Some(cpus) = opts.message_cpu else {
        return Ok(plan);
    };
    let cpu = match sent {
        Sent::SendRecv => cpus.send_recv,
        Sent::InCollective => cpus.in_collectives,
    };
    // Every way the call runs (one, or one per entry order), each charged its host work; with
    // wake-ups drawn, played often enough that the ways stay equally likely and there are at
    // least as many plays as the call affords (`host_cpu::plays_for`), each its own draws.
    let ways = 1 + plan.alternatives.len();
    let flows: usize = std::iter::once(&plan.schedule)
        .chain(&plan.alternatives)
        .map(transfer_flows)
        .max()
        .unwrap_or(0);
    let copies = opts
        .wake_ups
        .as_ref()
        .map_or(1, |w| host_cpu::plays_for(w.plays, flows).div_ceil(ways));
    let total = (ways * copies) as u64;
    let mut plays: Vec<Schedule> = std::iter::once(plan.schedule)
        .chain(plan.alternatives)
        .flat_map(|way| std::iter::repeat_n(way, copies))
        .collect();
    for (k, s) in plays.iter_mut().enumerate() {
        let mut draws = opts.wake_ups.as_ref().map(|w| w.draws(k as u64, total));
        let draw = draws
            .as_mut()
            .map(|d| d as &mut dyn FnMut() -> crate::engine::SimTime);
        host_cpu::charge(s, cpu, draw);
    }
    plan.schedule = plays.remove(0);
    plan.alternatives = plays;
    if opts.wake_ups.is_some() {
        plan.plays_per_way = copies;
        plan.alternatives_vary = if ways > 1 {
            format!("{} and the hosts' wake-ups", plan.alternatives_vary)
        } else {
            "the hosts' wake-ups".to_string()
        };
    }
    Ok(plan)
}

/// Flows one play of `s` carries: its transfers' pairs, summed.
fn transfer_flows(s: &Schedule) -> usize {
    s.ops
        .iter()
        .map(|op| match op.kind {
            OpKind::Transfer { pattern, .. } => s.patterns[pattern.0 as usize].pairs.len(),
            _ => 0,
        })
        .sum()
}

/// Every payload message (one per pair; notifications not counted) one call of `collective`
/// of `bytes` sends on `n` ranks as gloo runs it, by size: what a measured call's host CPU is
/// spread over (`calibrate import collective-cpu-costs`). gloo's own collectives only.
pub fn payload_bytes(collective: Collective, bytes: u64, n: u32) -> Result<Vec<u64>, LibraryError> {
    if n < 2 || bytes == 0 {
        return Err(LibraryError::new(
            "collective",
            format!("2 ranks or more and some bytes, got {n} ranks and {bytes} B"),
        ));
    }
    let schedule = match collective {
        Collective::AllReduce => all_reduce(bytes, n),
        Collective::AllGather => all_gather(bytes, n, None),
        Collective::Broadcast => broadcast(bytes, n, 0, &root_children(n)),
        Collective::Reduce => reduce(bytes, n, 0),
        other => {
            return Err(LibraryError::new(
                "collective",
                format!("all_reduce, all_gather, broadcast or reduce, got {other}"),
            ))
        }
    };
    Ok(schedule
        .ops
        .iter()
        .flat_map(|op| match op.kind {
            OpKind::Transfer { pattern, bytes } if bytes != PREAMBLE_BYTES => {
                let pairs = schedule.patterns[pattern.0 as usize].pairs.len();
                vec![bytes; pairs]
            }
            _ => Vec::new(),
        })
        .collect())
}

/// The messages gloo sends for `req`, before their host work is charged.
/// How a plan's messages are sent, which decides their host CPU ([`host_cpu::MessageCpus`]).
enum Sent {
    /// Over torch's isend/irecv: the all-reduces written over send/recv, a send_recv.
    SendRecv,
    /// By gloo's own collective algorithms.
    InCollective,
}

fn plan_messages(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    fabric: &dyn Fabric,
) -> Result<(Plan, Sent), LibraryError> {
    if let Some(p) = &opts.protocol {
        return Err(LibraryError::new(
            "collective.protocol",
            format!("nothing with library = \"gloo\" (gloo has one TCP protocol), got {p:?}"),
        ));
    }
    if opts.min_channels.is_some() || opts.max_channels.is_some() {
        return Err(LibraryError::new(
            "collective",
            "no channel settings with library = \"gloo\" (gloo runs one ring in rank order)",
        ));
    }
    if opts.collnet {
        return Err(LibraryError::new(
            "collective.collnet",
            "nothing with library = \"gloo\" (CollNet is NCCL's in-network reduction)",
        ));
    }
    let n = sys.ranks;
    if req.collective == Collective::AllReduce {
        if let Some(plan) = send_recv_all_reduce(req, n, opts, fabric)? {
            return Ok((plan, Sent::SendRecv));
        }
    }
    if !opts.ring_orders.is_empty() {
        return Err(LibraryError::new(
            "collective.orders",
            format!(
                "no ring orders for {} with library = \"gloo\" (gloo runs one ring in rank \
                 order; orders are send/recv rings of an all_reduce)",
                req.collective
            ),
        ));
    }
    let (name, schedule) = match req.collective {
        Collective::AllReduce => ("ring", all_reduce(req.bytes, n)),
        Collective::Broadcast => (
            "binomial",
            broadcast(req.bytes, n, req.root, &root_children(n)),
        ),
        Collective::AllGather => ("ring", all_gather(req.bytes, n, opts.host_copies)),
        Collective::AllToAll => ("direct", all_to_all(req.bytes, n)),
        Collective::SendRecv => ("send_recv", send_recv(req.bytes, n, req.root, req.peer)),
        Collective::Reduce => ("ring", reduce(req.bytes, n, req.root)),
        Collective::Barrier => ("dissemination", barrier(n)),
        Collective::ReduceScatter => {
            return Err(LibraryError::new(
                "collective.op",
                format!(
                    "all_reduce, broadcast, all_gather, reduce, all_to_all or send_recv with \
                     library = \"gloo\" ({} is not modelled: torch 1.13's ProcessGroupGloo has \
                     no reduce_scatter)",
                    req.collective
                ),
            ))
        }
    };
    if let Some(a) = &opts.algorithm {
        if a != name {
            return Err(LibraryError::new(
                "collective.algorithm",
                format!(
                    "nothing, or {name:?}: gloo runs {} as {name} and has no other choice, got \
                     {a:?}",
                    req.collective
                ),
            ));
        }
    }
    let decision = match req.collective {
        Collective::AllReduce => {
            let (segments, seg) = ring_segments(req.bytes, u64::from(n));
            format!("gloo ring, {segments} segments of {seg} B, 2 in flight")
        }
        Collective::Reduce => {
            let (segments, seg) = reduce_segments(req.bytes, u64::from(n));
            format!(
                "gloo ring reduce-scatter, {segments} segments of {seg} B, 2 in flight, then a \
                 gather to rank {}",
                req.root
            )
        }
        _ => format!("gloo {name}"),
    };
    let alternatives = match req.collective {
        Collective::Broadcast => root_orders(n)
            .iter()
            .skip(1)
            .map(|order| broadcast(req.bytes, n, req.root, order))
            .collect(),
        _ => Vec::new(),
    };
    let sent = if req.collective == Collective::SendRecv {
        Sent::SendRecv
    } else {
        Sent::InCollective
    };
    Ok((
        Plan::with_entry_orders(schedule, decision, alternatives),
        sent,
    ))
}

/// The all-reduces written over send/recv ([`p2p`]): rings when the scenario gives `orders`
/// (with no algorithm or `ring`), the hierarchical one for `algorithm = "hierarchical"`;
/// `None` for gloo's own ring.
fn send_recv_all_reduce(
    req: &Request,
    n: u32,
    opts: &LibraryOptions,
    fabric: &dyn Fabric,
) -> Result<Option<Plan>, LibraryError> {
    let plan = |schedule: Schedule, decision: String| {
        Some(Plan {
            schedule,
            placed_endpoints: Vec::new(),
            decision,
            parameters: Vec::new(),
            alternatives: Vec::new(),
            alternatives_vary: String::new(),
            plays_per_way: 1,
        })
    };
    match opts.algorithm.as_deref() {
        Some("hierarchical") => {
            if !opts.ring_orders.is_empty() {
                return Err(LibraryError::new(
                    "collective.orders",
                    "no ring orders with algorithm = \"hierarchical\" (its rings are the nodes)",
                ));
            }
            let mut nodes: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
            for r in 0..n {
                nodes.entry(fabric.node_of(r)).or_default().push(r);
            }
            let groups: Vec<Vec<u32>> = nodes.into_values().collect();
            if let Some(g) = groups.iter().find(|g| g.len() != groups[0].len()) {
                return Err(LibraryError::new(
                    "collective.algorithm",
                    format!(
                        "the same number of ranks on every node for hierarchical, but rank {} \
                         has {} on its node and rank {} has {}",
                        groups[0][0],
                        groups[0].len(),
                        g[0],
                        g.len()
                    ),
                ));
            }
            let decision = format!(
                "send/recv hierarchical: ring reduce-scatter in {} nodes of {}, gloo all_reduce \
                 across, gloo all_gather in each",
                groups.len(),
                groups[0].len()
            );
            let s = p2p::hierarchical(req.bytes, &groups, opts.host_copies, opts.send_queue_bytes);
            Ok(plan(s, decision))
        }
        None | Some("ring") if !opts.ring_orders.is_empty() => {
            if let Some(o) = opts.ring_orders.iter().find(|o| {
                let mut sorted = (*o).clone();
                sorted.sort_unstable();
                sorted != (0..n).collect::<Vec<_>>()
            }) {
                return Err(LibraryError::new(
                    "collective.orders",
                    format!("every order a permutation of the {n} ranks, got {o:?}"),
                ));
            }
            let decision = format!(
                "send/recv rings ({}), isend then irecv per ring and step",
                opts.ring_orders.len()
            );
            Ok(plan(
                p2p::rings(req.bytes, n, &opts.ring_orders, opts.send_queue_bytes),
                decision,
            ))
        }
        _ => Ok(None),
    }
}

/// A gloo message batch: the receivers' notification (pairs reversed, one preamble), then the
/// payload once it arrived. Both wait for `deps`; the payload also waits for `previous`, the
/// last payload on the same connections (a pair's messages leave its one TCP socket in
/// order). Returns the payload op.
fn message(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    bytes: u64,
    deps: Vec<OpId>,
    previous: Option<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    let mut send_posted = deps.clone();
    send_posted.extend(previous);
    message_parts(s, pairs, bytes, deps, send_posted, phase, step).1
}

/// A gloo message batch whose receives and sends are posted at different times: the
/// notification waits for `recv_posted`, the payload for `send_posted` and the notification.
/// Both are in order on their connections ([`crate::collective::in_order`]): a notification
/// leaves behind whatever its writer already sent to the same peer. Returns (notification,
/// payload): a sender whose payload fits its socket is done once the notification arrived
/// (a larger one: [`p2p`]'s `send`), the receiver once the payload did.
fn message_parts(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    bytes: u64,
    recv_posted: Vec<OpId>,
    mut send_posted: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> (OpId, OpId) {
    let ready = in_order_transfer(
        s,
        super::reversed(pairs),
        PREAMBLE_BYTES,
        recv_posted,
        (phase, step),
    );
    send_posted.insert(0, ready);
    let payload = in_order_transfer(s, pairs.to_vec(), bytes, send_posted, (phase, step));
    (ready, payload)
}

/// A transfer of `bytes` over `pairs` after `deps`, in order on its connections: it leaves
/// behind whatever its writers already sent to the same peers.
fn in_order_transfer(
    s: &mut Schedule,
    pairs: Vec<(Endpoint, Endpoint)>,
    bytes: u64,
    deps: Vec<OpId>,
    (phase, step): (Phase, u32),
) -> OpId {
    let pattern = s.add_pattern(pairs);
    let op = s.push(OpKind::Transfer { pattern, bytes }, deps, phase, 0, step);
    s.ops[op.0 as usize].in_order = true;
    op
}

/// Every rank sends to rank − 1.
fn to_left(n: u32) -> Vec<(Endpoint, Endpoint)> {
    (0..n).map(|r| (r, (r + n - 1) % n)).collect()
}

/// gloo's barrier (`barrier.cc`): a dissemination barrier. At distance d = 1, 2, 4 ... below n
/// every rank posts a receive from rank − d and then ([`p2p::POST_GAP`] later) a send of nothing
/// to rank + d, and goes on once both are done: its send written (the receiver's notification
/// arrived) and the message from rank − d arrived. Played rank by rank, rank 0 entering
/// [`p2p::ENTRY_LAG`] late: ⌈log2 n⌉ rounds of one notification and one empty message each.
fn barrier(n: u32) -> Schedule {
    let mut s = Schedule::new(Collective::Barrier, "gloo dissemination", n, 0);
    if n < 2 {
        return s;
    }
    let mut ready = p2p::entry(&mut s, n, &[], Phase::Barrier);
    let (mut distance, mut round) = (1u32, 0u32);
    while distance < n {
        let posted: Vec<Vec<Vec<OpId>>> = ready
            .iter()
            .map(|r| p2p::calls(&mut s, r, 2, Phase::Barrier, round))
            .collect();
        let sent: Vec<(OpId, OpId)> = (0..n)
            .map(|from| {
                let to = (from + distance) % n;
                message_parts(
                    &mut s,
                    &[(from, to)],
                    0,
                    posted[to as usize][0].clone(),
                    posted[from as usize][1].clone(),
                    Phase::Barrier,
                    round,
                )
            })
            .collect();
        for r in 0..n {
            let from = (r + n - distance) % n;
            ready[r as usize] = vec![sent[r as usize].0, sent[from as usize].1];
        }
        distance <<= 1;
        round += 1;
    }
    s
}

/// gloo's all-to-all: every rank's n − 1 blocks of `bytes / n` posted at once.
fn all_to_all(bytes: u64, n: u32) -> Schedule {
    let mut s = Schedule::new(Collective::AllToAll, "gloo direct", n, bytes);
    if n < 2 {
        return s;
    }
    let block = split_even(bytes, u64::from(n))[0];
    let pairs: Vec<(Endpoint, Endpoint)> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .collect();
    message(&mut s, &pairs, block, vec![], None, Phase::AllToAll, 0);
    s
}

fn send_recv(bytes: u64, n: u32, root: u32, peer: u32) -> Schedule {
    let mut s = Schedule::new(Collective::SendRecv, "gloo send/recv", n, bytes);
    if root != peer {
        message(
            &mut s,
            &[(root, peer)],
            bytes,
            vec![],
            None,
            Phase::SendRecv,
            0,
        );
    }
    s
}

#[cfg(test)]
mod tests;
