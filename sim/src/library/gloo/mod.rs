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
//!   once its own loop is done.
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

pub mod host_cpu;
pub mod p2p;

use super::{LibraryError, LibraryOptions, Plan, Request, System};
use crate::collective::steps::split_even;
use crate::collective::{Collective, Endpoint, Fabric, OpId, OpKind, Phase, Schedule};

/// gloo's `AllreduceOptions::kMaxSegmentSize`: the largest send of the all-reduce ring.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 20;

/// Bytes of a gloo TCP preamble (`Op::preamble`: six `size_t`), the whole of a notification.
pub const PREAMBLE_BYTES: u64 = 48;

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

/// Element size dtsim assumes for gloo's segment rounding (fp32 gradients).
const ELEMENT_BYTES: u64 = 4;

/// Segments of gloo's all-reduce ring for `bytes` on `ranks` ranks: (segments, bytes of one).
pub fn ring_segments(bytes: u64, ranks: u64) -> (u64, u64) {
    let by_size = bytes.div_ceil(MAX_SEGMENT_BYTES);
    let segments = by_size.max(2 * ranks).div_ceil(ranks) * ranks;
    let seg = bytes.div_ceil(segments).div_ceil(ELEMENT_BYTES) * ELEMENT_BYTES;
    (segments, seg)
}

/// Segments of gloo's reduce for `bytes` on `ranks` ranks (`reduce.cc`): (segments, bytes of
/// one). Segments are `min(⌈bytes / 2n⌉, 1 MiB)` rounded up to whole elements; the last ones
/// may be partial or empty.
pub fn reduce_segments(bytes: u64, ranks: u64) -> (u64, u64) {
    let seg = bytes
        .div_ceil(2 * ranks)
        .min(MAX_SEGMENT_BYTES)
        .div_ceil(ELEMENT_BYTES)
        * ELEMENT_BYTES;
    let segments = bytes.div_ceil(seg.max(1)).max(2 * ranks).div_ceil(ranks) * ranks;
    (segments, seg)
}

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
    let mut plan = plan_messages(req, sys, opts, fabric)?;
    if let Some(cpu) = opts.message_cpu {
        host_cpu::charge(&mut plan.schedule, cpu);
        for s in &mut plan.alternatives {
            host_cpu::charge(s, cpu);
        }
    }
    Ok(plan)
}

/// The messages gloo sends for `req`, before their host work is charged.
fn plan_messages(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
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
            return Ok(plan);
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
    Ok(Plan {
        schedule,
        placed_endpoints: Vec::new(),
        decision,
        parameters: Vec::new(),
        alternatives,
    })
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
            let s = p2p::hierarchical(req.bytes, &groups, opts.host_copies);
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
            Ok(plan(p2p::rings(req.bytes, n, &opts.ring_orders), decision))
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
/// payload): the sender's send is complete once the notification arrived (gloo writes the
/// payload into a socket buffer sized for it), the receiver's once the payload did.
fn message_parts(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    bytes: u64,
    recv_posted: Vec<OpId>,
    mut send_posted: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> (OpId, OpId) {
    let notify = s.add_pattern(super::reversed(pairs));
    let ready = s.push(
        OpKind::Transfer {
            pattern: notify,
            bytes: PREAMBLE_BYTES,
        },
        recv_posted,
        phase,
        0,
        step,
    );
    let pattern = s.add_pattern(pairs.to_vec());
    send_posted.insert(0, ready);
    let payload = s.push(
        OpKind::Transfer { pattern, bytes },
        send_posted,
        phase,
        0,
        step,
    );
    s.ops[ready.0 as usize].in_order = true;
    s.ops[payload.0 as usize].in_order = true;
    (ready, payload)
}

/// Every rank sends to rank − 1.
fn to_left(n: u32) -> Vec<(Endpoint, Endpoint)> {
    (0..n).map(|r| (r, (r + n - 1) % n)).collect()
}

/// The longest segment any rank sends at iteration i of either ring phase (the batch's size).
/// At iteration i the ranks send one segment from each rank's chunk of `segments / n`, all at
/// the same offset i mod per_rank within their chunk of per_rank = segments / n; segments only get shorter towards
/// the end of the buffer, so the first chunk's holds the longest.
fn longest_segment(bytes: u64, per_rank: u64, seg: u64, i: u64) -> u64 {
    bytes.saturating_sub((i % per_rank) * seg).min(seg)
}

/// The ring reduce-scatter loop of gloo's all-reduce and reduce: `iterations` batches on
/// `pairs` (every rank to rank − 1), iteration i carrying `longest(i)` bytes (none when 0),
/// issued once iteration i − 2 is reduced (two in flight) and once the segment it forwards,
/// received `per_rank` iterations before, is; every received segment reduced on the CPU in
/// order. Returns the last payload op and the last reduction.
fn ring_reduce_scatter(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    n: u32,
    iterations: u64,
    per_rank: u64,
    longest: impl Fn(u64) -> u64,
) -> (Option<OpId>, Option<OpId>) {
    let mut sent: Vec<Option<OpId>> = Vec::new();
    let mut reduced: Vec<Option<OpId>> = Vec::new();
    // The last payload on the ring's connections and the CPU's last reduction.
    let mut last_sent: Option<OpId> = None;
    let mut last_reduced: Option<OpId> = None;
    for i in 0..iterations {
        let b = longest(i);
        let mut deps = Vec::new();
        // Two in flight: iteration i is issued after iteration i − 2's segment was reduced.
        if i >= 2 {
            deps.extend(reduced[(i - 2) as usize].or(sent[(i - 2) as usize]));
        }
        // The segment forwarded now was received per_rank iterations ago and reduced since.
        if i >= per_rank {
            deps.extend(reduced[(i - per_rank) as usize]);
        }
        if b == 0 {
            sent.push(None);
            reduced.push(None);
            continue;
        }
        let op = message(s, pairs, b, deps, last_sent, Phase::ReduceScatter, i as u32);
        sent.push(Some(op));
        last_sent = Some(op);
        // The CPU reduces received segments one after another.
        let mut rdeps = vec![op];
        rdeps.extend(last_reduced);
        let r = s.push(
            OpKind::Reduce {
                endpoints: n,
                bytes: b,
            },
            rdeps,
            Phase::ReduceScatter,
            0,
            i as u32,
        );
        reduced.push(Some(r));
        last_reduced = Some(r);
    }
    (last_sent, last_reduced)
}

/// gloo's segmented ring all-reduce (see the module doc). Iteration i of each phase sends one
/// segment per rank; the batch carries the longest of the ranks' segments (equal whenever the
/// size divides evenly).
fn all_reduce(bytes: u64, n: u32) -> Schedule {
    let mut s = Schedule::new(Collective::AllReduce, "gloo ring", n, bytes);
    if n < 2 || bytes == 0 {
        return s;
    }
    let (segments, seg) = ring_segments(bytes, u64::from(n));
    let per_rank = segments / u64::from(n);
    let iterations = segments - per_rank;
    let longest = |i: u64| longest_segment(bytes, per_rank, seg, i);
    let left = to_left(n);
    let (mut last_sent, last_reduced) =
        ring_reduce_scatter(&mut s, &left, n, iterations, per_rank, longest);
    // The all-gather loop starts once the reduce-scatter loop has waited for everything.
    let rs_done: Vec<OpId> = last_reduced.into_iter().collect();
    let mut gathered: Vec<Option<OpId>> = Vec::new();
    for i in 0..iterations {
        let b = longest(i);
        let mut deps = rs_done.clone();
        if i >= 2 {
            deps.extend(gathered[(i - 2) as usize]);
        }
        if i >= per_rank {
            deps.extend(gathered[(i - per_rank) as usize]);
        }
        if b == 0 {
            gathered.push(None);
            continue;
        }
        let op = message(
            &mut s,
            &left,
            b,
            deps,
            last_sent,
            Phase::AllGather,
            i as u32,
        );
        gathered.push(Some(op));
        last_sent = Some(op);
    }
    s
}

/// Most ranks whose reduce loop is played rank by rank: 3 ops per rank and iteration, about
/// 6n² in all (256 ranks, 64 MiB on the star: 1.4 s and 254 MB against 0.45 s and 116 MB in
/// lockstep, measured 2026-11-27); above it the loop runs in lockstep batches.
pub const REDUCE_BY_RANK_MAX: u32 = 256;

/// gloo's reduce (see the module doc). The reduce-scatter is the all-reduce's first loop with
/// reduce's segments and `segments − 2` iterations, played rank by rank up to
/// [`REDUCE_BY_RANK_MAX`] ranks ([`reduce_scatter_by_rank`]: a rank skips the segments past the
/// buffer's end); then every rank but the root sends its chunk (`segments / n` segments,
/// clipped to the buffer) to the root once its own loop is done, each once the root's
/// notification arrived. In lockstep each iteration is one batch of the longest segment any
/// rank sends then, and the chunks leave once every loop is done.
fn reduce(bytes: u64, n: u32, root: u32) -> Schedule {
    let mut s = Schedule::new(Collective::Reduce, "gloo ring reduce", n, bytes);
    if n < 2 || bytes == 0 {
        return s;
    }
    let ranks = u64::from(n);
    let (segments, seg) = reduce_segments(bytes, ranks);
    let per_rank = segments / ranks;
    // Rank r sends segment ((r + 1) per_rank + i) mod segments at iteration i (a segment past
    // the buffer's end is short or empty).
    let length = |k: u64| bytes.saturating_sub(k * seg).min(seg);
    let own = |r: u32, i: u64| length(((u64::from(r) + 1) * per_rank + i) % segments);
    let iterations = segments.saturating_sub(2);
    let (loop_done, last_sent) = if n <= REDUCE_BY_RANK_MAX {
        reduce_scatter_by_rank(&mut s, n, iterations, per_rank, own)
    } else {
        let longest = |i: u64| (0..n).map(|r| own(r, i)).max().unwrap_or(0);
        let (sent, reduced) =
            ring_reduce_scatter(&mut s, &to_left(n), n, iterations, per_rank, longest);
        let done: Vec<OpId> = reduced.or(sent).into_iter().collect();
        (vec![done; n as usize], vec![sent; n as usize])
    };
    // The gather: each rank's chunk, once its own loop is done (every receive reduced).
    let chunk = |r: u64| bytes.saturating_sub(r * per_rank * seg).min(per_rank * seg);
    let step = iterations as u32;
    for r in (0..n).filter(|&r| r != root && chunk(u64::from(r)) > 0) {
        // The root posts its receives once its loop is done; a sender sends once its own is.
        let mut send_posted = loop_done[r as usize].clone();
        send_posted.extend(last_sent[r as usize]);
        message_parts(
            &mut s,
            &[(r, root)],
            chunk(u64::from(r)),
            loop_done[root as usize].clone(),
            send_posted,
            Phase::Reduce,
            step,
        );
    }
    s
}

/// gloo's reduce loop played rank by rank: at iteration i rank r sends its segment
/// `own(r, i)` to rank − 1 (nothing when it lies past the buffer's end) once its own iteration
/// i − 2 is reduced (two in flight) and the segment it forwards, received `per_rank`
/// iterations before, is; rank − 1 posts its receive when it starts iteration i, and reduces
/// what it received in order. Ranks whose segments lie past the end skip those sends, so the
/// links they would have loaded run ahead, which a batch per iteration would not show.
/// Returns, per rank, what its loop ends with, and its last payload on its connection.
fn reduce_scatter_by_rank(
    s: &mut Schedule,
    n: u32,
    iterations: u64,
    per_rank: u64,
    own: impl Fn(u32, u64) -> u64,
) -> (Vec<Vec<OpId>>, Vec<Option<OpId>>) {
    let ranks = n as usize;
    let left = |r: usize| (r + ranks - 1) % ranks;
    let mut sent: Vec<Vec<Option<OpId>>> = vec![Vec::new(); ranks];
    let mut reduced: Vec<Vec<Option<OpId>>> = vec![Vec::new(); ranks];
    let mut last_sent: Vec<Option<OpId>> = vec![None; ranks];
    let mut last_reduced: Vec<Option<OpId>> = vec![None; ranks];
    for i in 0..iterations {
        let iu = i as usize;
        // What each rank's iteration i waits for.
        let starts: Vec<Vec<OpId>> = (0..ranks)
            .map(|r| {
                let mut deps = Vec::new();
                if i >= 2 {
                    deps.extend(reduced[r][iu - 2].or(sent[r][iu - 2]));
                }
                if i >= per_rank {
                    deps.extend(reduced[r][(i - per_rank) as usize]);
                }
                deps
            })
            .collect();
        for r in 0..ranks {
            let b = own(r as u32, i);
            if b == 0 {
                sent[r].push(None);
                continue;
            }
            let mut send_posted = starts[r].clone();
            send_posted.extend(last_sent[r]);
            let (_, payload) = message_parts(
                s,
                &[(r as u32, left(r) as u32)],
                b,
                starts[left(r)].clone(),
                send_posted,
                Phase::ReduceScatter,
                i as u32,
            );
            sent[r].push(Some(payload));
            last_sent[r] = Some(payload);
        }
        for r in 0..ranks {
            let from = (r + 1) % ranks;
            let Some(got) = sent[from][iu] else {
                reduced[r].push(None);
                continue;
            };
            let mut rdeps = vec![got];
            rdeps.extend(last_reduced[r]);
            let op = s.push(
                OpKind::Reduce {
                    endpoints: 1,
                    bytes: own(from as u32, i),
                },
                rdeps,
                Phase::ReduceScatter,
                0,
                i as u32,
            );
            reduced[r].push(Some(op));
            last_reduced[r] = Some(op);
        }
    }
    let done = (0..ranks)
        .map(|r| last_reduced[r].into_iter().chain(last_sent[r]).collect())
        .collect();
    (done, last_sent)
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

/// The root's children in gloo's binomial broadcast, in the order it posts its sends: virtual
/// ranks 1, 2, 4 … below n (the largest subtree first).
fn root_children(n: u32) -> Vec<u32> {
    (0..32).map(|j| 1u32 << j).take_while(|&v| v < n).collect()
}

/// Most orders of the root's children a broadcast is played in ([`root_orders`]).
const ROOT_ORDERS_MAX: usize = 24;

/// The orders in which a broadcast's root may serve its children, posting order first: every
/// permutation while there are at most [`ROOT_ORDERS_MAX`], else the posting order's rotations.
///
/// The root posts every send at once, but a payload leaves only once its child's notification
/// has arrived, and the children enter the call in no fixed order: captured on 8 hosts of the
/// star (`testbed_star4_200mbit_8hosts.capture_broadcast_256k.json`, ten 256 KiB calls), the
/// root's first payload went to rank 1 in four calls (40.4-42.7 ms), to 2 in three and to 4 in
/// three (44.8-53.8 ms); on 4 hosts rank 1 first in seven of eleven. A rank that forwards posts
/// its sends after its children have long notified, so they leave in posting order (rank 1 to
/// 3 before 5 in all ten).
fn root_orders(n: u32) -> Vec<Vec<u32>> {
    let children = root_children(n);
    let k = children.len();
    if (1..=k).product::<usize>() > ROOT_ORDERS_MAX {
        return (0..k)
            .map(|i| {
                children[i..]
                    .iter()
                    .chain(&children[..i])
                    .copied()
                    .collect()
            })
            .collect();
    }
    let mut orders = vec![children.clone()];
    let mut order = children;
    // Heap's algorithm, iteratively: every other permutation once.
    let mut c = vec![0usize; k];
    let mut i = 0;
    while i < k {
        if c[i] < i {
            let j = if i % 2 == 0 { 0 } else { c[i] };
            order.swap(j, i);
            orders.push(order.clone());
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    orders
}

/// gloo's binomial broadcast: virtual rank v (root is 0) receives from v − 2^⌊log2 v⌋ and then
/// sends to v + 2^j for every 2^j > v, all at once. Every receiver's notification leaves at
/// the start (each rank posts its one receive first). The root's payloads leave in the order
/// `first` gives its children (see [`root_orders`]), the others' in posting order.
fn broadcast(bytes: u64, n: u32, root: u32, first: &[u32]) -> Schedule {
    let mut s = Schedule::new(Collective::Broadcast, "gloo binomial", n, bytes);
    if n < 2 {
        return s;
    }
    let real = |v: u32| (v + root) % n;
    let parent = |v: u32| v - (1 << (31 - v.leading_zeros()));
    let notify_pairs: Vec<(Endpoint, Endpoint)> =
        (1..n).map(|v| (real(v), real(parent(v)))).collect();
    let pattern = s.add_pattern(notify_pairs);
    let ready = s.push(
        OpKind::Transfer {
            pattern,
            bytes: PREAMBLE_BYTES,
        },
        vec![],
        Phase::Broadcast,
        0,
        0,
    );
    let mut received: Vec<Option<OpId>> = vec![None; n as usize];
    // The root's sends first, in the order given (a FIFO tie goes to the first pushed), then
    // every other rank's in posting order.
    let rest = (1..n).filter(|v| !first.contains(v));
    for v in first.iter().copied().chain(rest) {
        let p = parent(v);
        let mut deps = vec![ready];
        deps.extend(received[p as usize]);
        let pattern = s.push_pattern(vec![(real(p), real(v))]);
        let step = 32 - v.leading_zeros();
        received[v as usize] = Some(s.push(
            OpKind::Transfer { pattern, bytes },
            deps,
            Phase::Broadcast,
            0,
            step,
        ));
    }
    s
}

/// gloo's ring all-gather of a gathered size `bytes`: 2(n − 1) iterations of half a block,
/// each waiting for the one two before it (whose half it forwards), played rank by rank
/// ([`ring_all_gather_by_rank`]: a rank's notification to its left neighbour leaves behind
/// its own half to its right one, so who posts first matters). ProcessGroupGloo stages it
/// through a flat buffer: every rank first copies its block into its slot and, after the last
/// receive, the whole buffer out to the caller's tensors: at the host's measured `copies`
/// rates, host work before the ring (every rank) and after it (each rank once its own last
/// sends and receives are done).
fn all_gather(bytes: u64, n: u32, copies: Option<StagingCopies>) -> Schedule {
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
