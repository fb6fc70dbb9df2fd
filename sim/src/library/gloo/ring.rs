//! gloo's ring collectives on the all-reduce's segments (`allreduce.cc`, `reduce.cc`): the
//! all-reduce's reduce-scatter then all-gather loops, and reduce's reduce-scatter (lockstep or
//! rank by rank) followed by its gather to the root. See [`super`] for what gloo runs.

use super::{message, message_parts, to_left, MAX_SEGMENT_BYTES};
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

/// gloo's segmented ring all-reduce (see the module doc). Iteration i of each phase sends one
/// segment per rank; the batch carries the longest of the ranks' segments (equal whenever the
/// size divides evenly).
pub(super) fn all_reduce(bytes: u64, n: u32) -> Schedule {
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
    // A rank's loop ends once its last receive is reduced and its last send's write is done:
    // its bytes have left the host (`Schedule::push_pushed`).
    let last_pushed: Vec<Option<OpId>> = last_sent
        .iter()
        .map(|sent| sent.map(|op| s.push_pushed(op, Phase::ReduceScatter, iterations as u32)))
        .collect();
    let done = (0..ranks)
        .map(|r| last_reduced[r].into_iter().chain(last_pushed[r]).collect())
        .collect();
    (done, last_pushed)
}
