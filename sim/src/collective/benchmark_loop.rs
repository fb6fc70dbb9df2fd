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
//! [`after_barrier`] lays the loop out as one schedule: the call once, the barrier once every
//! op of it is done, then the call again once the barrier is done; the timed call is the last
//! copy, from the barrier's end to the schedule's end. [`timed_call`] cuts that copy's op
//! times out of the loop's play, on the timed call's own clock.

use super::play::{play_watched, OpTiming, PlayError, PlayOptions, PlayOutcome, Watch};
use super::{OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;
use crate::net::NetworkModel;
use crate::topology::DeviceId;

/// `call`, then `barrier` once all of it is done, then `call` again once the barrier is;
/// returns that schedule and the op after which the timed (second) call starts. The barrier
/// is the communicator's: its endpoints are the call's ranks, the call's first endpoints (a
/// parameter server's extra endpoints take no part in it).
pub fn after_barrier(call: &Schedule, barrier: &Schedule) -> (Schedule, OpId) {
    let mut s = call.clone();
    let endpoints: Vec<u32> = (0..call.endpoints()).collect();
    let ranks: Vec<u32> = (0..barrier.ranks.min(call.ranks)).collect();
    let barrier = if barrier.endpoints() == ranks.len() as u32 {
        barrier
    } else {
        // A barrier over other ranks than the call's: none (the calls only follow each other).
        &Schedule::new(barrier.collective, "none", ranks.len() as u32, 0)
    };
    let call_done = join(&mut s, (0..call.ops.len() as u32).map(OpId).collect());
    let mut barrier_ends = s.embed(barrier, &[&ranks], &[call_done], &|op| op.kind.clone());
    if barrier_ends.is_empty() {
        barrier_ends.push(call_done);
    }
    let barrier_done = join(&mut s, barrier_ends);
    s.embed(call, &[&endpoints], &[barrier_done], &|op| op.kind.clone());
    (s, barrier_done)
}

/// `call`'s loop ([`after_barrier`]) played on `net`: the loop's outcome and the op after
/// which the timed call starts.
pub fn play_after_barrier(
    call: &Schedule,
    barrier: &Schedule,
    endpoints: &[DeviceId],
    net: &mut dyn NetworkModel,
    options: PlayOptions,
    watch: Watch,
) -> Result<(PlayOutcome, OpId), PlayError> {
    let (looped, timed_from) = after_barrier(call, barrier);
    Ok((
        play_watched(&looped, endpoints, net, options, watch)?,
        timed_from,
    ))
}

/// The timed call of a loop laid out by [`after_barrier`] (`timed_from` is what it returned)
/// and played as `looped`: the second copy's `call_ops` op times, from the barrier's end. The
/// rest (bytes per pattern, counters) is `alone`'s, the call played by itself: the loop's
/// would count the first call and the barrier too.
pub fn timed_call(
    looped: &PlayOutcome,
    timed_from: OpId,
    call_ops: usize,
    alone: &PlayOutcome,
) -> PlayOutcome {
    let start = looped.ops[timed_from.0 as usize].end;
    let since = |t: SimTime| SimTime::from_ps(t.as_ps().saturating_sub(start.as_ps()));
    let first = timed_from.0 as usize + 1;
    PlayOutcome {
        end: since(looped.end),
        ops: looped.ops[first..first + call_ops]
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
        let (s, start) = after_barrier(&call, &barrier);
        // send, join, barrier message, join, send.
        assert_eq!(s.ops.len(), 5);
        assert_eq!(s.ops[1].deps, vec![OpId(0)]);
        assert_eq!(s.ops[2].deps, vec![OpId(1)]);
        assert_eq!(start, OpId(3));
        assert_eq!(s.ops[3].deps, vec![OpId(2)]);
        assert_eq!(s.ops[4].deps, vec![start]);
        assert_eq!(s.total_transfer_bytes(), 2001);
    }

    #[test]
    fn a_parameter_servers_extra_endpoint_takes_no_part_in_the_barrier() {
        // Two ranks and a server (endpoint 2): the barrier's message stays between the ranks.
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
        let (s, start) = after_barrier(&call, &barrier);
        let OpKind::Transfer { pattern, .. } = s.ops[start.0 as usize - 1].kind else {
            panic!("the barrier's message: {:?}", s.ops);
        };
        assert_eq!(&*s.patterns[pattern.0 as usize].pairs, &[(1, 0)]);
        assert_eq!(s.total_transfer_bytes(), 2 * 20 + 1);
    }

    #[test]
    fn an_empty_barrier_still_orders_the_calls() {
        let call = one_send(10);
        let barrier = Schedule::new(Collective::Barrier, "test", 2, 0);
        let (s, start) = after_barrier(&call, &barrier);
        assert_eq!(s.ops[start.0 as usize].deps, vec![OpId(1)]);
        assert_eq!(s.ops.last().unwrap().deps, vec![start]);
    }
}
