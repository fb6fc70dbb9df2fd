//! A call's plays and which of them a run reports: each play timed on its own, or after its
//! own play of the harness's barrier ([`play_timed`]); where a call runs one of several equally
//! likely ways (a root's entry orders) and each way is played several times with other random
//! draws (the hosts' wake-ups), the run's time is the median over the ways of each way's
//! median play ([`median_play`]).

use crate::collective::benchmark_loop;
use crate::collective::play::{play_watched, PlayError, PlayOptions, Watch};
use crate::collective::Schedule;
use crate::engine::SimTime;
use crate::net::NetworkModel;
use crate::topology::DeviceId;

use super::{Scenario, ScenarioError};

/// The median of plays' ends (each play's end and index; `per_way` consecutive plays one way
/// the call runs): each way's lower-median play stands for it, and the median of those is
/// the time (the mean of the middle two for an even count of ways), with the index of the
/// play that the lower of them is. `per_way` that does not divide the plays counts 1.
pub(super) fn median_play(ends: &[(SimTime, usize)], per_way: usize) -> (SimTime, usize) {
    let per_way = per_way.max(1);
    let per_way = if ends.len().is_multiple_of(per_way) {
        per_way
    } else {
        1
    };
    let ways: Vec<(SimTime, usize)> = ends.chunks(per_way).map(median_low).collect();
    crate::stats::median_time(&ways)
}

/// The lower median of some plays' ends (a play's end and index): the middle one for an odd
/// count, the lower of the middle two for an even count.
fn median_low(plays: &[(SimTime, usize)]) -> (SimTime, usize) {
    let mut sorted = plays.to_vec();
    sorted.sort();
    sorted[(sorted.len() - 1) / 2]
}

/// The most calls a benchmark loop times (`collective.timed_calls`): each is the whole call
/// played again, and the testbed's harness times at most twenty.
pub const TIMED_CALLS_MAX: u32 = 100;

/// The scenario's `collective.timed_calls` (default 1), checked against 1..=[`TIMED_CALLS_MAX`].
pub(super) fn timed_calls_of(s: &Scenario, file: &str) -> Result<u32, ScenarioError> {
    let n = s
        .file
        .collective
        .as_ref()
        .and_then(|c| c.timed_calls)
        .unwrap_or(1);
    if !(1..=TIMED_CALLS_MAX).contains(&n) {
        return Err(ScenarioError::new(
            file,
            "collective.timed_calls",
            format!("a count of timed calls from 1 to {TIMED_CALLS_MAX}, not {n}"),
        ));
    }
    Ok(n)
}

/// Mixed into the scenario's seed for the harness barrier's wake-ups, so that barrier play k
/// does not draw what call play k draws.
pub(super) const BARRIER_SEED: u64 = 0x0062_6172_7269_6572; // "barrier" in ASCII

/// When `schedule` ends played on `net`: alone, or with a `barrier`, as the median of
/// `timed_calls` calls after a first, each after the barrier ([`benchmark_loop`]).
pub(super) fn play_timed(
    schedule: &Schedule,
    barrier: Option<&Schedule>,
    timed_calls: u32,
    endpoints: &[DeviceId],
    net: &mut dyn NetworkModel,
    options: PlayOptions,
    watch: Watch,
) -> Result<SimTime, PlayError> {
    let Some(barrier) = barrier else {
        return Ok(play_watched(schedule, endpoints, net, options, watch)?.end);
    };
    let (out, looped) = benchmark_loop::play_after_barrier(
        schedule,
        barrier,
        timed_calls,
        endpoints,
        net,
        options,
        watch,
    )?;
    Ok(looped.median(&out).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[f64]) -> Vec<(SimTime, usize)> {
        v.iter()
            .enumerate()
            .map(|(i, &m)| (SimTime::from_secs_f64(m * 1e-3), i))
            .collect()
    }

    #[test]
    fn two_ways_far_apart_meet_at_their_medians_mean_not_at_the_draws_extremes() {
        // Way A's three plays near 10 ms (one drew a long wake-up), way B's near 20 ms.
        let ends = ms(&[10.0, 10.2, 14.0, 20.0, 19.0, 20.4]);
        let (median, lo) = median_play(&ends, 3);
        assert_eq!(median, SimTime::from_secs_f64(15.1e-3));
        assert_eq!(lo, 1, "way A's median play");
        // Pooled, the middle two would be 14.0 and 19.0.
        let (pooled, _) = median_play(&ends, 1);
        assert_eq!(pooled, SimTime::from_secs_f64(16.5e-3));
        // One way: its median play; a count that does not divide the plays pools them.
        assert_eq!(
            median_play(&ends[..3], 3),
            (SimTime::from_secs_f64(10.2e-3), 1)
        );
        assert_eq!(median_play(&ends[..5], 3).1, 2);
    }
}
