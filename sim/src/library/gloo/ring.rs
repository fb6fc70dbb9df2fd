//! gloo's ring collectives on the all-reduce's segments (`allreduce.cc`, `reduce.cc`): the
//! all-reduce's reduce-scatter then all-gather loops, and reduce's reduce-scatter followed by
//! its gather to the root, each loop played rank by rank ([`ring_loop_by_rank`]; the
//! all-reduce up to [`ALL_REDUCE_BY_RANK_MAX`] ranks, reduce up to [`REDUCE_BY_RANK_MAX`]) and
//! in lockstep batches beyond. See [`super`] for what gloo runs.

use super::{
    in_order_transfer, message, message_parts, to_left, MAX_SEGMENT_BYTES, PREAMBLE_BYTES,
};
use crate::collective::{Collective, Endpoint, OpId, OpKind, Phase, Schedule};

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

/// The longest segment any rank sends at iteration i of either ring phase (the batch's size).
/// At iteration i the ranks send one segment from each rank's chunk of `segments / n`, all at
/// the same offset i mod per_rank within their chunk of per_rank = segments / n; segments only get shorter towards
/// the end of the buffer, so the first chunk's holds the longest.
pub(super) fn longest_segment(bytes: u64, per_rank: u64, seg: u64, i: u64) -> u64 {
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

/// Most ranks whose all-reduce is played rank by rank (both of its loops): about 10 ops per
/// rank and iteration, 20n² at the fewest segments, and each play of a call with wake-ups its
/// own copy. 64 MiB on the star with the testbed's wake-ups (101 plays): 16 ranks 1.7 s and
/// 127 MB, 32 ranks 10.2 s and 258 MB, against 0.4 s and 24 MB in lockstep (measured
/// 2026-12-02); above it the loops run in lockstep batches.
pub const ALL_REDUCE_BY_RANK_MAX: u32 = 16;

/// gloo's segmented ring all-reduce (see the module doc), rank by rank up to
/// [`ALL_REDUCE_BY_RANK_MAX`] ranks. `allreduce.cc`'s two loops run on each rank on its own:
/// iteration i of the reduce-scatter sends segment `((r + 1)·per_rank + i) mod segments` to
/// rank − 1, iteration i of the all-gather segment `(r·per_rank + i) mod segments` (the last
/// ones short or empty where the size does not divide), and a rank starts its all-gather once
/// its own reduce-scatter is done (its last receive reduced, its last send written), not when
/// every rank's is: a late rank holds up only the ranks its segments feed, as far as the two
/// in flight do not cover it. An iteration's receivers still share one wake-up draw (a wake-up
/// group, [`super::host_cpu`]), as when the iteration was one batch.
pub(super) fn all_reduce(bytes: u64, n: u32) -> Schedule {
    let mut s = Schedule::new(Collective::AllReduce, "gloo ring", n, bytes);
    if n < 2 || bytes == 0 {
        return s;
    }
    if n > ALL_REDUCE_BY_RANK_MAX {
        all_reduce_lockstep(&mut s, bytes, n);
        return s;
    }
    let ranks = u64::from(n);
    let (segments, seg) = ring_segments(bytes, ranks);
    let per_rank = segments / ranks;
    let iterations = segments - per_rank;
    let length = |k: u64| bytes.saturating_sub(k * seg).min(seg);
    let scattered = |r: u32, i: u64| length(((u64::from(r) + 1) * per_rank + i) % segments);
    let gathered = |r: u32, i: u64| length((u64::from(r) * per_rank + i) % segments);
    let idle = vec![Vec::new(); n as usize];
    let (rs_done, rs_sent) = ring_loop_by_rank(
        &mut s,
        RingLoop::reduce_scatter(n, iterations, per_rank, true),
        scattered,
        &idle,
        vec![None; n as usize],
    );
    ring_loop_by_rank(
        &mut s,
        RingLoop {
            n,
            iterations,
            per_rank,
            received: Received::Kept,
            phase: Phase::AllGather,
            one_wake_up_per_iteration: true,
        },
        gathered,
        &rs_done,
        rs_sent,
    );
    s
}

/// gloo's all-reduce in lockstep batches, for rings past [`ALL_REDUCE_BY_RANK_MAX`]: iteration
/// i of each loop is one batch of every rank's segment carrying the longest of them, and the
/// all-gather loop starts once every rank's reduce-scatter is done.
fn all_reduce_lockstep(s: &mut Schedule, bytes: u64, n: u32) {
    let (segments, seg) = ring_segments(bytes, u64::from(n));
    let per_rank = segments / u64::from(n);
    let iterations = segments - per_rank;
    let longest = |i: u64| longest_segment(bytes, per_rank, seg, i);
    let left = to_left(n);
    let (mut last_sent, last_reduced) =
        ring_reduce_scatter(s, &left, n, iterations, per_rank, longest);
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
        let op = message(s, &left, b, deps, last_sent, Phase::AllGather, i as u32);
        gathered.push(Some(op));
        last_sent = Some(op);
    }
}

/// Most ranks whose reduce loop is played rank by rank: 3 ops per rank and iteration, about
/// 6n² in all (256 ranks, 64 MiB on the star: 1.4 s and 254 MB against 0.45 s and 116 MB in
/// lockstep, measured 2026-11-27); above it the loop runs in lockstep batches.
pub const REDUCE_BY_RANK_MAX: u32 = 256;

/// gloo's reduce (see the module doc). The reduce-scatter is the all-reduce's first loop with
/// reduce's segments and `segments − 2` iterations, played rank by rank up to
/// [`REDUCE_BY_RANK_MAX`] ranks ([`ring_loop_by_rank`]: a rank skips the segments past the
/// buffer's end); then every rank but the root sends its chunk (`segments / n` segments,
/// clipped to the buffer) to the root once its own loop is done, each once the root's
/// notification arrived. In lockstep each iteration is one batch of the longest segment any
/// rank sends then, and the chunks leave once every loop is done.
pub(super) fn reduce(bytes: u64, n: u32, root: u32) -> Schedule {
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
        ring_loop_by_rank(
            &mut s,
            RingLoop::reduce_scatter(n, iterations, per_rank, false),
            own,
            &vec![Vec::new(); n as usize],
            vec![None; n as usize],
        )
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

/// What a ring loop does with a segment it received before it forwards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Received {
    /// Reduced on the CPU into the rank's own (the reduce-scatter loops).
    Reduced,
    /// Kept as it came (the all-reduce's all-gather loop).
    Kept,
}

/// The shape of one ring loop played rank by rank.
struct RingLoop {
    n: u32,
    iterations: u64,
    per_rank: u64,
    received: Received,
    phase: Phase,
    /// The receivers of an iteration's segments share one wake-up draw (a wake-up group,
    /// [`super::host_cpu`]), as the all-reduce's did when its iterations were played as
    /// batches; otherwise each receiver draws its own (reduce, as before).
    one_wake_up_per_iteration: bool,
}

impl RingLoop {
    /// A reduce-scatter loop: every received segment reduced before it is forwarded.
    fn reduce_scatter(n: u32, iterations: u64, per_rank: u64, one_wake_up: bool) -> Self {
        RingLoop {
            n,
            iterations,
            per_rank,
            received: Received::Reduced,
            phase: Phase::ReduceScatter,
            one_wake_up_per_iteration: one_wake_up,
        }
    }
}

/// One of gloo's ring loops (`allreduce.cc`'s reduce-scatter and all-gather, `reduce.cc`'s
/// reduce-scatter) played rank by rank: at iteration i rank r sends its segment `own(r, i)`
/// to rank − 1 (nothing when it lies past the buffer's end) once its own iteration i − 2 is
/// done (its receive reduced or kept, two in flight) and the segment it forwards, received
/// `per_rank` iterations before, is; rank − 1 posts its receive, which sends the notification,
/// when it starts iteration i. A rank's first iterations wait for `entry[r]`, and its first
/// payload follows `before[r]` on its connection. Ranks whose segments lie past the end
/// skip those sends, so the links they would have loaded run ahead, which a batch per
/// iteration would not show. Returns, per rank, what its loop ends with (its last receive
/// reduced or kept and its last send's write done), and what a payload after the loop on its
/// connection follows (its last send's write, or `before[r]` where it sent nothing).
fn ring_loop_by_rank(
    s: &mut Schedule,
    shape: RingLoop,
    own: impl Fn(u32, u64) -> u64,
    entry: &[Vec<OpId>],
    before: Vec<Option<OpId>>,
) -> (Vec<Vec<OpId>>, Vec<Option<OpId>>) {
    let RingLoop {
        n,
        iterations,
        per_rank,
        received,
        phase,
        one_wake_up_per_iteration,
    } = shape;
    let ranks = n as usize;
    let left = |r: usize| (r + ranks - 1) % ranks;
    let mut sent: Vec<Vec<Option<OpId>>> = vec![Vec::new(); ranks];
    // Per rank and iteration: the received segment once reduced (or kept).
    let mut done: Vec<Vec<Option<OpId>>> = vec![Vec::new(); ranks];
    // Per rank and iteration: what the iteration waited for.
    let mut started: Vec<Vec<Vec<OpId>>> = vec![Vec::new(); ranks];
    let mut last_done: Vec<Option<OpId>> = vec![None; ranks];
    // Per rank: its last payload of this loop.
    let mut last_sent: Vec<Option<OpId>> = vec![None; ranks];
    for i in 0..iterations {
        let iu = i as usize;
        // What each rank's iteration i waits for.
        let starts: Vec<Vec<OpId>> = (0..ranks)
            .map(|r| {
                if i < 2 {
                    return entry[r].clone();
                }
                // Two in flight: iteration i − 2's receive done, or its send where it
                // received nothing; with neither, what that iteration waited for.
                let mut deps: Vec<OpId> = match done[r][iu - 2].or(sent[r][iu - 2]) {
                    Some(op) => vec![op],
                    None => started[r][iu - 2].clone(),
                };
                if i >= per_rank {
                    deps.extend(done[r][(i - per_rank) as usize]);
                }
                deps
            })
            .collect();
        // Each rank posts its receive before its send (`allreduce.cc`, `reduce.cc`): every
        // notification of the iteration goes out before any payload does.
        let mut ready: Vec<Option<OpId>> = vec![None; ranks];
        for r in 0..ranks {
            if own(r as u32, i) > 0 {
                ready[r] = Some(in_order_transfer(
                    s,
                    vec![(left(r) as u32, r as u32)],
                    PREAMBLE_BYTES,
                    starts[left(r)].clone(),
                    (phase, i as u32),
                ));
            }
        }
        let group = one_wake_up_per_iteration.then_some(s.ops.len() as u32);
        for r in 0..ranks {
            let Some(note) = ready[r] else {
                sent[r].push(None);
                continue;
            };
            let mut send_posted = vec![note];
            send_posted.extend(starts[r].iter().copied());
            send_posted.extend(last_sent[r].or(before[r]));
            let payload = in_order_transfer(
                s,
                vec![(r as u32, left(r) as u32)],
                own(r as u32, i),
                send_posted,
                (phase, i as u32),
            );
            s.ops[payload.0 as usize].wake_up_group = group;
            sent[r].push(Some(payload));
            last_sent[r] = Some(payload);
        }
        for r in 0..ranks {
            let from = (r + 1) % ranks;
            let Some(got) = sent[from][iu] else {
                done[r].push(None);
                continue;
            };
            let op = match received {
                Received::Kept => got,
                Received::Reduced => {
                    let mut rdeps = vec![got];
                    rdeps.extend(last_done[r]);
                    s.push(
                        OpKind::Reduce {
                            endpoints: 1,
                            bytes: own(from as u32, i),
                        },
                        rdeps,
                        phase,
                        0,
                        i as u32,
                    )
                }
            };
            done[r].push(Some(op));
            last_done[r] = Some(op);
        }
        for (r, deps) in starts.into_iter().enumerate() {
            started[r].push(deps);
        }
    }
    // A rank's loop ends once its last receive is done and its last send's write is: its
    // bytes have left the host (`Schedule::push_pushed`).
    let last_pushed: Vec<Option<OpId>> = last_sent
        .iter()
        .map(|sent| sent.map(|op| s.push_pushed(op, phase, iterations as u32)))
        .collect();
    let ends = (0..ranks)
        .map(|r| {
            let mut end: Vec<OpId> = last_done[r].into_iter().chain(last_pushed[r]).collect();
            if end.is_empty() {
                end = entry[r].clone();
            }
            end
        })
        .collect();
    let last = (0..ranks).map(|r| last_pushed[r].or(before[r])).collect();
    (ends, last)
}
