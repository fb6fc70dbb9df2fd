//! A call timed as a benchmark loop times it: after the same call and a barrier, not from a
//! quiet network.
//!
//! The testbed's harness (`tb.timed`) runs `barrier(); t0 = now; call(); t = now - t0` again
//! and again, and so do most hand-written benchmarks. What the timed call finds at its start
//! is what the previous call and the barrier left: above all the links' shaper buckets, which
//! refill only from when the previous call's last bytes left each link (the barrier's messages
//! are a few bytes). A call played alone starts with every bucket full; timed in its loop it
//! starts with what 0.05-1 ms of idle refilled (OpenMPI's timed calls start 0.04-0.07 ms after
//! the previous call's last rank from 256 KiB, gloo's 0.4-1.1 ms on 4 hosts:
//! `data/runs/calibration/testbed_star4_200mbit{,.mpi}_call_gaps.json`), on the links the
//! previous call used last, and full on those it used early.
//!
//! The harness times each rank on its own clock, from its own exit of the barrier to its own
//! end of the call, and reports the longest (`tb.timed`, then an all-reduce with `MAX`): a
//! rank that leaves the barrier early counts its wait for the last one. Measured
//! (`testbed_star4_200mbit{,_8hosts}.call_gaps.json`, gloo, ten calls per size): the ranks left
//! the barrier a median 0.4-1.9 ms apart on 4 hosts and 1.4-5.1 ms on 8, and the harness's time
//! exceeded the last rank's, from its start to the last end, by a median 0.2-0.6 ms on 4 hosts
//! at 256 KiB (all-reduce 0.6, all_gather 0.5, broadcast 0.2, reduce 0.26) and on 8 by 4.1,
//! 5.0, 1.6 and 0.33 ms (the reduce's longest clock is the root's, which ends last and left
//! the barrier anywhere in the spread). dtsim's own barrier, with the hosts' wake-ups drawn,
//! lets its ranks out a median 0.19 ms apart on 4 hosts (mean 1.0, 90th percentile 3.2), 1.8
//! on 6 and 2.5 on 8.
//!
//! [`after_barrier`] lays the loop out as one schedule ([`BenchmarkLoop`]): the call once (the
//! harness's warm-up), then for each timed call the barrier once every op before it is done,
//! each rank's exit (once every op of the barrier it waits for is done: the messages it
//! receives, their host work, its wake-ups), and the call again once the whole barrier is
//! done. Each timed copy is timed as the harness times it up to [`PER_RANK_ENTRY_MAX`] ranks
//! ([`BenchmarkLoop::copy_time`]; above, from its barrier's end to its last op), and the
//! loop's time is their median, as the harness reports the median of its timed calls: the
//! testbed's rows are five to twenty timed calls after one warm-up, and what a call leaves (the
//! buckets, the TCP windows, who is late in a ring) changes from call to call, so one copy's
//! time depends on where in that sequence it falls (docs/testbed.md, "TCP's windows decide
//! which messages pass whole"). The ranks still start each call together, at the barrier's end: the
//! libraries' own entry skews (OpenMPI's ring's last rank, gloo's rank 0) stand for who starts
//! first, and played from their own exits instead (tried 2026-12-01) the OpenMPI rings' step order
//! moved with the barrier's exit order, some 20% either way. [`timed_call`] cuts the median copy's
//! op times out of the loop's play, on that call's own clock (its last op ending at the harness's
//! time).

use super::play::{play_watched, OpTiming, PlayError, PlayOptions, PlayOutcome, Watch};
use super::{Endpoint, OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;
use crate::net::NetworkModel;
use crate::topology::DeviceId;

/// Most ranks whose timed call is timed per rank ([`BenchmarkLoop::copy_time`]): the ranks each
/// of the call's ops delivers to are kept, a few per op rank by rank but every rank for each op
/// of a lockstep batch.
pub const PER_RANK_ENTRY_MAX: u32 = 256;

/// A call's benchmark loop laid out as one schedule ([`after_barrier`]).
#[derive(Debug, Clone)]
pub struct BenchmarkLoop {
    pub schedule: Schedule,
    /// The timed calls, in the order played (at least one).
    pub copies: Vec<TimedCopy>,
    /// Per op of a timed copy (every copy alike): the ranks whose end of the call waits for it
    /// (a transfer's receivers; for other ops, the ranks of what it waits for). Empty above
    /// [`PER_RANK_ENTRY_MAX`] ranks.
    ranks_of: Vec<Vec<Endpoint>>,
    /// How many ops the call has (each copy's).
    call_ops: usize,
}

/// One timed call of a [`BenchmarkLoop`]: the barrier before it and where its ops start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedCopy {
    /// The op after which every rank has left the barrier before this call.
    pub barrier_done: OpId,
    /// Per rank: the op after which it has left that barrier. Empty above
    /// [`PER_RANK_ENTRY_MAX`] ranks (all leave at `barrier_done`).
    pub exits: Vec<OpId>,
    /// The copy's first op.
    pub first: usize,
}

impl BenchmarkLoop {
    /// Each timed call's time in `played`, in the order played ([`BenchmarkLoop::copy_time`]).
    pub fn copy_times(&self, played: &PlayOutcome) -> Vec<SimTime> {
        (0..self.copies.len())
            .map(|c| self.copy_time(played, c))
            .collect()
    }

    /// The loop's time in `played` as the harness reports it, the median over the timed calls
    /// of each one's time (the mean of the middle two for an even count), and the timed call
    /// whose time is the median's (the lower of the middle two; the first of equals).
    pub fn median(&self, played: &PlayOutcome) -> (SimTime, usize) {
        let indexed: Vec<(SimTime, usize)> = self
            .copy_times(played)
            .into_iter()
            .enumerate()
            .map(|(c, t)| (t, c))
            .collect();
        crate::stats::median_time(&indexed)
    }

    /// Timed call `copy`'s time in `played` as the harness measures it: the longest over the
    /// ranks from its own exit of the barrier to the end of its own last op (above
    /// [`PER_RANK_ENTRY_MAX`] ranks: from the barrier's end to the call's last op).
    pub fn copy_time(&self, played: &PlayOutcome, copy: usize) -> SimTime {
        let since =
            |from: SimTime, to: SimTime| SimTime::from_ps(to.as_ps().saturating_sub(from.as_ps()));
        let c = &self.copies[copy];
        let end_of = |i: usize| played.ops[i].end;
        if c.exits.is_empty() {
            let last = self
                .copy_ops(copy)
                .map(end_of)
                .max()
                .unwrap_or(SimTime::ZERO);
            return since(end_of(c.barrier_done.0 as usize), last);
        }
        let mut ends: Vec<SimTime> = c.exits.iter().map(|e| end_of(e.0 as usize)).collect();
        let starts = ends.clone();
        for (i, ranks) in self.ranks_of.iter().enumerate() {
            let end = end_of(c.first + i);
            for &r in ranks {
                let e = &mut ends[r as usize];
                *e = (*e).max(end);
            }
        }
        starts
            .iter()
            .zip(&ends)
            .map(|(&s, &e)| since(s, e))
            .max()
            .unwrap_or(SimTime::ZERO)
    }

    /// The op indices of timed call `copy` (laid out contiguously, as many as the call has).
    fn copy_ops(&self, copy: usize) -> std::ops::Range<usize> {
        let first = self.copies[copy].first;
        first..first + self.call_ops
    }
}

/// `call`, then `timed_calls` times (at least once): `barrier` once all before it is done, and
/// `call` again once the barrier is, with each rank's exit of each barrier noted (see the
/// module). The barrier is the communicator's: its endpoints are the call's ranks, the call's
/// first endpoints (a parameter server's extra endpoints take no part in it).
pub fn after_barrier(call: &Schedule, barrier: &Schedule, timed_calls: u32) -> BenchmarkLoop {
    let mut s = call.clone();
    let endpoints: Vec<u32> = (0..call.endpoints()).collect();
    let ranks: Vec<u32> = (0..barrier.ranks.min(call.ranks)).collect();
    let barrier = if barrier.endpoints() == ranks.len() as u32 {
        barrier
    } else {
        // A barrier over other ranks than the call's: none (the calls only follow each other).
        &Schedule::new(barrier.collective, "none", ranks.len() as u32, 0)
    };
    let per_rank = !ranks.is_empty() && ranks.len() as u32 <= PER_RANK_ENTRY_MAX;
    let mut copies = Vec::new();
    let mut before = 0..call.ops.len();
    for _ in 0..timed_calls.max(1) {
        let call_done = join(&mut s, before.map(|i| OpId(i as u32)).collect());
        let barrier_first = s.ops.len();
        let mut barrier_ends = s.embed(barrier, &[&ranks], &[call_done], &|op| op.kind.clone());
        if barrier_ends.is_empty() {
            barrier_ends.push(call_done);
        }
        let barrier_ops = barrier_first..s.ops.len();
        let barrier_done = join(&mut s, barrier_ends);
        // Each rank leaves once every op of the barrier it waits for is done: the messages it
        // receives, their host work and its wake-ups.
        let exits: Vec<OpId> = if per_rank {
            let mut mine: Vec<Vec<OpId>> = vec![Vec::new(); ranks.len()];
            let of = ranks_of_ops(&s, barrier_ops.clone(), ranks.len());
            for (i, rs) in barrier_ops.zip(&of) {
                for &r in rs {
                    mine[r as usize].push(OpId(i as u32));
                }
            }
            mine.into_iter()
                .map(|ops| {
                    if ops.is_empty() {
                        barrier_done
                    } else {
                        join(&mut s, ops)
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let first = s.ops.len();
        s.embed(call, &[&endpoints], &[barrier_done], &|op| op.kind.clone());
        before = first..s.ops.len();
        copies.push(TimedCopy {
            barrier_done,
            exits,
            first,
        });
    }
    let ranks_of = match copies.first() {
        Some(c) if per_rank => ranks_of_ops(&s, c.first..c.first + call.ops.len(), ranks.len()),
        _ => Vec::new(),
    };
    BenchmarkLoop {
        schedule: s,
        copies,
        ranks_of,
        call_ops: call.ops.len(),
    }
}

/// The endpoints op `i` of `s` delivers to (none for other ops), ascending: a message's
/// receiver waits for it to arrive, its sender only until it has handed it on (a send's own
/// end is the answer or notification it waited for, a transfer to the sender).
fn receivers(s: &Schedule, i: usize) -> Vec<Endpoint> {
    let OpKind::Transfer { pattern, .. } = s.ops[i].kind else {
        return Vec::new();
    };
    let mut ranks: Vec<Endpoint> = s.patterns[pattern.0 as usize]
        .pairs
        .iter()
        .map(|&(_, b)| b)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// Per op of `s` in `ops`: the ranks (below `ranks`) whose part of the call waits for it. A
/// transfer's receivers ([`receivers`]); an op that takes time (a reduction, host work, a
/// wake-up), the ranks common to the ops it waits for within `ops`, or the first's where they
/// have none in common; a join (no time of its own), the ranks common to what it waits
/// for, or none: it ends with them. Deps may point forward (a library's host work rewires
/// them), so the ops are taken in dependency order.
fn ranks_of_ops(s: &Schedule, ops: std::ops::Range<usize>, ranks: usize) -> Vec<Vec<Endpoint>> {
    let first = ops.start;
    let n = ops.len();
    let mut of: Vec<Option<Vec<Endpoint>>> = vec![None; n];
    for root in 0..n {
        // Depth-first over the deps within `ops`; an op is attributed once all of its are.
        let mut stack = vec![(root, false)];
        while let Some((i, expanded)) = stack.pop() {
            if of[i].is_some() {
                continue;
            }
            let op = &s.ops[first + i];
            let within = op
                .deps
                .iter()
                .map(|d| d.0 as usize)
                .filter(|d| ops.contains(d))
                .map(|d| d - first);
            if !expanded {
                stack.push((i, true));
                stack.extend(within.filter(|&d| of[d].is_none()).map(|d| (d, false)));
                continue;
            }
            let mine = match op.kind {
                OpKind::Transfer { .. } => {
                    let mut mine = receivers(s, first + i);
                    mine.retain(|&r| (r as usize) < ranks);
                    mine
                }
                ref kind => {
                    let theirs: Vec<&Vec<Endpoint>> =
                        within.filter_map(|d| of[d].as_ref()).collect();
                    let joins = op.pushed_of.is_some()
                        || matches!(kind, OpKind::Compute { duration, .. } if *duration == SimTime::ZERO);
                    common_or_first(&theirs, !joins)
                }
            };
            of[i] = Some(mine);
        }
    }
    of.into_iter().map(Option::unwrap_or_default).collect()
}

/// The ranks every one of `theirs` holds; where none, the first's if `first_else` (what an op
/// charged after a message waits for first is that message: its wake-up is its receiver's).
fn common_or_first(theirs: &[&Vec<Endpoint>], first_else: bool) -> Vec<Endpoint> {
    let Some((head, rest)) = theirs.split_first() else {
        return Vec::new();
    };
    let common: Vec<Endpoint> = head
        .iter()
        .copied()
        .filter(|r| rest.iter().all(|o| o.contains(r)))
        .collect();
    if common.is_empty() && first_else {
        return head.to_vec();
    }
    common
}

/// `call`'s loop of `timed_calls` ([`after_barrier`]) played on `net`: the loop's outcome and
/// its layout.
pub fn play_after_barrier(
    call: &Schedule,
    barrier: &Schedule,
    timed_calls: u32,
    endpoints: &[DeviceId],
    net: &mut dyn NetworkModel,
    options: PlayOptions,
    watch: Watch,
) -> Result<(PlayOutcome, BenchmarkLoop), PlayError> {
    let looped = after_barrier(call, barrier, timed_calls);
    Ok((
        play_watched(&looped.schedule, endpoints, net, options, watch)?,
        looped,
    ))
}

/// The timed call of a loop laid out by [`after_barrier`] and played as `played`: the median
/// copy's op times ([`BenchmarkLoop::median`]) on that call's own clock, whose last op ends
/// at its harness time ([`BenchmarkLoop::copy_time`]): its barrier's end where every rank left
/// it at once; where the longest clock started earlier, the ops start that much after zero.
/// Its end is the loop's time (the copy's own but for an even count of copies, where it is the
/// middle two's mean). The rest (bytes per pattern, counters) is
/// `alone`'s, the call played by itself: the loop's would count every copy and the barriers.
pub fn timed_call(
    played: &PlayOutcome,
    looped: &BenchmarkLoop,
    alone: &PlayOutcome,
) -> PlayOutcome {
    let (time, copy) = looped.median(played);
    let ops = looped.copy_ops(copy);
    let last = played.ops[ops.clone()]
        .iter()
        .map(|o| o.end)
        .max()
        .unwrap_or(SimTime::ZERO);
    let own = looped.copy_time(played, copy);
    let start = SimTime::from_ps(last.as_ps().saturating_sub(own.as_ps()));
    let since = |t: SimTime| SimTime::from_ps(t.as_ps().saturating_sub(start.as_ps()));
    PlayOutcome {
        end: time,
        ops: played.ops[ops]
            .iter()
            .map(|o| OpTiming {
                start: since(o.start),
                end: since(o.end),
            })
            .collect(),
        pattern_bytes: alone.pattern_bytes.clone(),
        events: alone.events,
        net: alone.net,
    }
}

/// An op done when all of `ops` are (at once when there are none).
fn join(s: &mut Schedule, deps: Vec<OpId>) -> OpId {
    s.push(
        OpKind::Compute {
            endpoints: 1,
            duration: SimTime::ZERO,
        },
        deps,
        Phase::Barrier,
        0,
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, Endpoint};

    fn one_send(bytes: u64) -> Schedule {
        let mut s = Schedule::new(Collective::AllReduce, "test", 2, bytes);
        let p = s.add_pattern(vec![(0 as Endpoint, 1 as Endpoint)]);
        s.push(
            OpKind::Transfer { pattern: p, bytes },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        s
    }

    /// A barrier of two ranks: rank 1 sends rank 0 one byte.
    fn one_message_barrier() -> Schedule {
        let mut barrier = Schedule::new(Collective::Barrier, "test", 2, 0);
        let p = barrier.add_pattern(vec![(1 as Endpoint, 0 as Endpoint)]);
        barrier.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 1,
            },
            vec![],
            Phase::Barrier,
            0,
            0,
        );
        barrier
    }

    #[test]
    fn the_timed_call_waits_for_the_first_and_the_barrier() {
        let call = one_send(1000);
        let barrier = one_message_barrier();
        let l = after_barrier(&call, &barrier, 1);
        let s = &l.schedule;
        // send, join, barrier message, join (the barrier's end), rank 0's exit (the message it
        // receives; rank 1 waits for none of the barrier's: its exit is the end), send.
        assert_eq!(s.ops.len(), 6);
        assert_eq!(s.ops[1].deps, vec![OpId(0)]);
        assert_eq!(s.ops[2].deps, vec![OpId(1)]);
        assert_eq!(l.copies[0].barrier_done, OpId(3));
        assert_eq!(s.ops[3].deps, vec![OpId(2)]);
        assert_eq!(l.copies[0].exits, vec![OpId(4), OpId(3)]);
        assert_eq!(s.ops[4].deps, vec![OpId(2)]);
        assert_eq!(l.copies[0].first, 5);
        assert_eq!(s.ops[5].deps, vec![l.copies[0].barrier_done]);
        assert_eq!(s.total_transfer_bytes(), 2001);
    }

    #[test]
    fn each_timed_call_follows_its_own_barrier_and_the_loop_reports_their_median() {
        let call = one_send(1000);
        let barrier = one_message_barrier();
        let l = after_barrier(&call, &barrier, 3);
        let s = &l.schedule;
        // The warm-up's send, then per timed call: join, barrier message, its end, rank 0's
        // exit, send.
        assert_eq!(s.ops.len(), 1 + 3 * 5);
        assert_eq!(l.copies.len(), 3);
        for (k, c) in l.copies.iter().enumerate() {
            assert_eq!(c.first, 5 + 5 * k);
            assert_eq!(s.ops[c.first].deps, vec![c.barrier_done]);
            // The barrier before call k + 1 waits for call k's ops (its join's deps).
            let join = c.barrier_done.0 as usize - 2;
            let before = if k == 0 { 0 } else { l.copies[k - 1].first };
            assert_eq!(s.ops[join].deps, vec![OpId(before as u32)]);
        }
        assert_eq!(s.total_transfer_bytes(), 4 * 1000 + 3);
        // Three calls of 5, 9 and 7 ms after their barriers: the median, 7 ms, and its copy.
        let mut ends = Vec::new();
        let mut t = 0.0;
        for (c, ms) in l.copies.iter().zip([5.0, 9.0, 7.0]) {
            t += 1.0;
            ends.extend([(c.barrier_done, t), (c.exits[0], t)]);
            t += ms;
            ends.push((OpId(c.first as u32), t));
        }
        let out = played(&l, &ends);
        let ms = |v: f64| SimTime::from_secs_f64(v * 1e-3);
        assert_eq!(l.copy_time(&out, 1), ms(9.0));
        assert_eq!(l.median(&out), (ms(7.0), 2));
        let timed = timed_call(&out, &l, &out);
        assert_eq!((timed.end, timed.ops[0].end), (ms(7.0), ms(7.0)));
        // An even count: the middle two's mean, the timeline the lower one's.
        let two = after_barrier(&call, &barrier, 2);
        let mut ends = Vec::new();
        let mut t = 0.0;
        for (c, ms) in two.copies.iter().zip([4.0, 8.0]) {
            t += 1.0;
            ends.extend([(c.barrier_done, t), (c.exits[0], t)]);
            t += ms;
            ends.push((OpId(c.first as u32), t));
        }
        let out = played(&two, &ends);
        let timed = timed_call(&out, &two, &out);
        assert_eq!((timed.end, timed.ops[0].end), (ms(6.0), ms(4.0)));
    }

    /// `l`'s ops played at the given ends (every other op at time zero).
    fn played(l: &BenchmarkLoop, ends_ms: &[(OpId, f64)]) -> PlayOutcome {
        let mut ops = vec![
            OpTiming {
                start: SimTime::ZERO,
                end: SimTime::ZERO,
            };
            l.schedule.ops.len()
        ];
        for &(op, ms) in ends_ms {
            ops[op.0 as usize].end = SimTime::from_secs_f64(ms * 1e-3);
        }
        let end = ops.iter().map(|o| o.end).max().unwrap_or(SimTime::ZERO);
        PlayOutcome {
            end,
            ops,
            pattern_bytes: Vec::new(),
            events: 0,
            net: Default::default(),
        }
    }

    #[test]
    fn each_rank_is_timed_from_its_own_exit_and_the_longest_clock_reported() {
        // The barrier: rank 1 tells rank 0, which then tells rank 1, so rank 0 leaves first.
        let mut barrier = Schedule::new(Collective::Barrier, "test", 2, 0);
        let to_0 = barrier.add_pattern(vec![(1 as Endpoint, 0 as Endpoint)]);
        let to_1 = barrier.add_pattern(vec![(0 as Endpoint, 1 as Endpoint)]);
        let transfer = |pattern| OpKind::Transfer { pattern, bytes: 1 };
        let told = barrier.push(transfer(to_0), vec![], Phase::Barrier, 0, 0);
        barrier.push(transfer(to_1), vec![told], Phase::Barrier, 0, 1);
        // The call: one rank sends the other its data, which arrives at 10 ms.
        let (told, answered) = (OpId(2), OpId(3));
        let timed = |from: Endpoint, to: Endpoint| {
            let mut call = Schedule::new(Collective::AllReduce, "test", 2, 1000);
            let p = call.add_pattern(vec![(from, to)]);
            call.push(transfer(p), vec![], Phase::SendRecv, 0, 0);
            let l = after_barrier(&call, &barrier, 1);
            let ends = [
                (told, 1.0),
                (answered, 3.0),
                (l.copies[0].barrier_done, 3.0),
                (l.copies[0].exits[0], 1.0),
                (l.copies[0].exits[1], 3.0),
                (OpId(l.copies[0].first as u32), 10.0),
            ];
            let out = played(&l, &ends);
            // The call's message on the call's own clock, and the call's time.
            let timed = timed_call(&out, &l, &out);
            (timed.end, timed.ops[0].end)
        };
        let ms = |v: f64| SimTime::from_secs_f64(v * 1e-3);
        // To rank 0, which left at 1 ms: 9 ms, where the barrier's end says 7; on the call's
        // own clock, from 1 ms, the message ends at the reported 9.
        assert_eq!(timed(1, 0), (ms(9.0), ms(9.0)));
        // To rank 1, which left at 3 ms: 7 ms (rank 0's clock stops when it has sent).
        assert_eq!(timed(0, 1), (ms(7.0), ms(7.0)));
    }

    #[test]
    fn an_op_that_takes_time_after_a_message_is_its_receivers_and_a_join_ends_with_its_own() {
        // Four ranks: 0 -> 1 and 2 -> 3 in one batch, then a wake-up after it (a delay of
        // its own: the ranks the batch delivers to), and a join of both (none of its own).
        let mut s = Schedule::new(Collective::AllReduce, "test", 4, 10);
        let p = s.add_pattern(vec![(0 as Endpoint, 1 as Endpoint), (2, 3)]);
        let q = s.add_pattern(vec![(1 as Endpoint, 0 as Endpoint)]);
        let batch = s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 10,
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        let back = s.push(
            OpKind::Transfer {
                pattern: q,
                bytes: 10,
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        let delay = |d: f64| OpKind::Compute {
            endpoints: 0,
            duration: SimTime::from_secs_f64(d),
        };
        s.push(delay(1e-4), vec![batch], Phase::SendRecv, 0, 1);
        s.push(delay(1e-4), vec![back, batch], Phase::SendRecv, 0, 1);
        s.push(delay(0.0), vec![back, batch], Phase::SendRecv, 0, 1);
        let of = ranks_of_ops(&s, 0..s.ops.len(), 4);
        assert_eq!(of[0], vec![1, 3]);
        assert_eq!(of[1], vec![0]);
        assert_eq!(of[2], vec![1, 3], "after the batch: its receivers");
        assert_eq!(
            of[3],
            vec![0],
            "nothing in common: what it waited for first"
        );
        assert!(of[4].is_empty(), "a join ends with what it joins");
    }

    #[test]
    fn a_parameter_servers_extra_endpoint_takes_no_part_in_the_barrier() {
        // Two ranks and a server (endpoint 2): the barrier's message stays between the ranks,
        // and the server's part counts on the clock of the rank it delivers to.
        let mut call = one_send(10);
        call.extra_endpoints.push("ps0".into());
        let p = call.add_pattern(vec![(1 as Endpoint, 2 as Endpoint)]);
        call.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 10,
            },
            vec![OpId(0)],
            Phase::Push,
            0,
            1,
        );
        let barrier = one_message_barrier();
        let l = after_barrier(&call, &barrier, 1);
        let (s, start) = (&l.schedule, l.copies[0].barrier_done);
        let OpKind::Transfer { pattern, .. } = s.ops[start.0 as usize - 1].kind else {
            panic!("the barrier's message: {:?}", s.ops);
        };
        assert_eq!(&*s.patterns[pattern.0 as usize].pairs, &[(1, 0)]);
        assert_eq!(s.total_transfer_bytes(), 2 * 20 + 1);
        assert_eq!(
            l.copies[0].exits.len(),
            2,
            "the ranks' exits, not the server's"
        );
    }

    #[test]
    fn an_empty_barrier_still_orders_the_calls() {
        let call = one_send(10);
        let barrier = Schedule::new(Collective::Barrier, "test", 2, 0);
        let l = after_barrier(&call, &barrier, 1);
        let (s, start) = (&l.schedule, l.copies[0].barrier_done);
        assert_eq!(s.ops[start.0 as usize].deps, vec![OpId(1)]);
        assert_eq!(s.ops.last().unwrap().deps, vec![start]);
        assert_eq!(
            l.copies[0].exits,
            vec![start, start],
            "every rank leaves at the barrier's end"
        );
    }
}
