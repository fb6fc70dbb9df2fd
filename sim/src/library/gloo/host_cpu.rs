//! gloo's host work per message, on the cores the hosts share.
//!
//! Every gloo message costs its hosts CPU: the sender's and receiver's network stacks per
//! byte, and per message the threads woken to send and take it, the system calls, the
//! notification that went before it. On separate machines that work overlaps the transfers
//! and costs nothing visible; where every host runs on one machine's few cores (the testbed:
//! 4 or 8 namespaces on 2 cores) it competes, and with enough messages at once it is what a
//! collective waits for. Measured on the testbed (`suite.py cpu_costs`: the machine's busy
//! core-seconds per message by size), the profile gives it as `network.host_cpu`, and this
//! module charges it. That stream sends over torch's isend/irecv, a python call and a work
//! object per message; inside gloo's own collectives a message costs about half (gloo's
//! all-reduce run back to back on 4, 6 and 8 hosts, `suite.py cpu_costs --collective`: 76 µs
//! and 1.16 ns/B against 101 µs and 3.19 ns/B), the profile's
//! `network.host_cpu.in_collectives`, which the collectives are charged ([`MessageCpus`]; the
//! all-reduces written over send/recv and a send_recv pay the stream's):
//!
//! - each payload transfer takes `per_message + per_byte × bytes` of core time per pair,
//!   beside the transfer (from when its dependencies are done): a stack works on packets as
//!   they pass, and gloo's I/O thread reads a message into place as it arrives;
//! - what waited for the transfer waits for its work too. Uncontended, the work ends before
//!   the transfer and costs nothing; when the cores are short it is what the next step
//!   waits for.
//!
//! Notifications (transfers of exactly a 48-byte preamble) are not charged apart: the
//! per-message cost holds them. A smaller payload is still a message and is charged (until
//! 2026-11-27 payloads of 48 bytes or less went free: a 4-byte all-reduce on 2 testbed ranks
//! was predicted at 0.081 ms, measured 0.255); a payload of exactly 48 bytes passes for a
//! notification.
//! The play shares the cores among all of it ([`crate::collective::cpu_pool`]).
//!
//! Wake-ups (the profile's `network.host_wake_up`): the thread a message wakes mostly runs at
//! once and now and then milliseconds later, while the shared cores serve the other hosts'
//! threads. Measured on the testbed (`suite.py wakeup_load`: a 4-byte gloo all-reduce between
//! two hosts, 3,000 calls on 4 and on 8 hosts, no other load), the calls' extra time over their
//! median was 0 in half of them, 0.14 ms at the 90th percentile and 3.4-3.8 ms at the 99th: a
//! tail, which a constant stands for badly (it costs the many messages that wait for none).
//! Each payload's join waits one draw from that distribution ([`WakeUps`]) after the payload
//! and its work: where the play moves a collective step's messages as one batch (a broadcast's
//! level, the all-reduce's iteration past [`super::ALL_REDUCE_BY_RANK_MAX`] ranks) they
//! share it; where it plays them rank by rank (the all-reduce's and reduce's rings, the
//! all_gather) each receiver draws its own.
//! A call is then one random realisation, so the plan carries [`WAKE_UP_PLAYS`] of them (each
//! its own draws, from the scenario's seed) and a run reports the median
//! ([`crate::library::Plan::alternatives`]).

use std::sync::Arc;

use super::PREAMBLE_BYTES;
use crate::collective::{OpId, OpKind, PatternId, Schedule};
use crate::engine::{SimRng, SimTime};

/// Plays of a call whose receivers draw their wake-ups (a run reports the median one), at
/// most. The median of the plays is a sample too, and a small call's plays spread wide (the
/// star's 256 KiB all_gather at 400 Mbit/s: 2.6-8.4 ms, where a few long wake-ups on its
/// path decide): at 25 plays drawn independently, five seeds put that row's error at +2% to
/// +34% and the testbed's 188 groups at 107-116 within the bar. Drawn stratified
/// ([`WakeUps::draws`]), each play after its own barrier, at 101 plays: 113-116 over the five,
/// a row's error across seeds 0.14 points apart on average (0.77 before), the largest 5.5
/// (`docs/testbed.md`, "The plays made steadier").
pub const WAKE_UP_PLAYS: usize = 101;

/// The fewest plays of a call with wake-ups, however large ([`plays_for`]).
pub const WAKE_UP_PLAYS_AT_LEAST: usize = 25;

/// Flows (a transfer's pairs, summed over a play's transfers) that a call's plays may carry
/// together before they are cut below [`WAKE_UP_PLAYS`]: a large call's plays spread less
/// (its many draws average out) and each costs more.
pub const WAKE_UP_PLAY_FLOWS: usize = 2_000_000;

/// Plays of a call whose one play carries `flows` flows, asked for `asked`: all of them while
/// the plays carry at most [`WAKE_UP_PLAY_FLOWS`] together, fewer beyond, never under
/// [`WAKE_UP_PLAYS_AT_LEAST`] (or `asked`, where it asked for fewer).
pub fn plays_for(asked: usize, flows: usize) -> usize {
    let affordable = WAKE_UP_PLAY_FLOWS / flows.max(1);
    asked.min(affordable.max(WAKE_UP_PLAYS_AT_LEAST)).max(1)
}

/// The wake-up delays a message's receiver draws (the profile's `network.host_wake_up`) and
/// the seed its plays draw from.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeUps {
    /// Evenly spaced quantiles of the extra delay, seconds, ascending.
    pub extra_secs_quantiles: Arc<[f64]>,
    /// The scenario's seed (a harness barrier's plays: a seed of their own).
    pub seed: u64,
    /// Plays of each call asked for (at least 1): a run's, [`WAKE_UP_PLAYS`]; a training step
    /// plays one.
    pub plays: usize,
}

impl WakeUps {
    /// The draws of play `play` of `plays`, stratified (Latin hypercube sampling): the
    /// quantiles' range is cut into `plays` equal strata, and the `j`-th draw of each play
    /// falls in a stratum of its own, a permutation of the plays (`a·play + b mod plays`, `a`
    /// prime to `plays`, both drawn per `j`) deciding which, uniform within it. Each message's
    /// wake-up then covers its distribution evenly over the plays, its tail included in one of
    /// them, where independent draws leave some plays with several long wake-ups and others
    /// with none, and the plays' median less steady (see [`WAKE_UP_PLAYS`]). A single play
    /// draws from the whole range.
    pub fn draws(&self, play: u64, plays: u64) -> impl FnMut() -> SimTime + '_ {
        // A seed of the wake-ups' own (fork ignores the stream), then the play's stream of it;
        // the permutations come from a stream shared by every play.
        let own = SimRng::new(self.seed, 0).fork("gloo wake-ups");
        let mut strata = own.fork("strata");
        let mut rng = SimRng::new(own.clone().next_u64(), play);
        let q = &self.extra_secs_quantiles;
        let plays = plays.max(1);
        let play = play % plays;
        move || {
            let stratum = if plays > 1 {
                let mut a = 1 + strata.below(plays - 1);
                while gcd(a, plays) != 1 {
                    a = a % (plays - 1) + 1;
                }
                (a * play + strata.below(plays)) % plays
            } else {
                0
            };
            let u = (stratum as f64 + rng.unit_f64()) / plays as f64;
            let i = ((u * q.len() as f64) as usize).min(q.len() - 1);
            SimTime::from_secs_f64(q[i])
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Core time of one gloo message, both ends together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageCpu {
    pub per_message_secs: f64,
    pub per_byte_secs: f64,
}

/// What a gloo message costs the cores by how it is sent: over torch's isend/irecv (the
/// all-reduces written over send/recv, a send_recv), each message a python call and a work
/// object, or inside gloo's own collectives, none of that (the profile's
/// `network.host_cpu` and its `in_collectives`; measured on the testbed at about half).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageCpus {
    pub send_recv: MessageCpu,
    pub in_collectives: MessageCpu,
}

impl MessageCpus {
    /// One cost for every message.
    pub fn same(cpu: MessageCpu) -> Self {
        MessageCpus {
            send_recv: cpu,
            in_collectives: cpu,
        }
    }
}

/// Charges every payload transfer of `s` its host work (see the module), and, with
/// `wake_up`, the wake-up of what waits for it: one draw per payload op.
pub fn charge(s: &mut Schedule, cpu: MessageCpu, mut wake_up: Option<&mut dyn FnMut() -> SimTime>) {
    let original = s.ops.len();
    let mut after: Vec<Option<OpId>> = vec![None; original];
    let payloads: Vec<(usize, PatternId, u64)> = s
        .ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match op.kind {
            OpKind::Transfer { pattern, bytes } if bytes != PREAMBLE_BYTES => {
                Some((i, pattern, bytes))
            }
            _ => None,
        })
        .collect();
    // The draw of each wake-up group met so far.
    let mut group_draws: std::collections::BTreeMap<u32, SimTime> = Default::default();
    for (i, pattern, bytes) in payloads {
        let core_secs = cpu.per_message_secs + cpu.per_byte_secs * bytes as f64;
        if core_secs <= 0.0 {
            continue;
        }
        let pairs = s.patterns[pattern.0 as usize].pairs.len() as u32;
        let (phase, channel, step) = (s.ops[i].phase, s.ops[i].channel, s.ops[i].step);
        let beside = s.ops[i].deps.clone();
        let work = s.push(
            OpKind::HostWork {
                endpoints: pairs,
                core_time: SimTime::from_secs_f64(core_secs),
            },
            beside,
            phase,
            channel,
            step,
        );
        // A join: what waited for the transfer waits for it, its work and the wake-up drawn
        // (once per wake-up group).
        let group = s.ops[i].wake_up_group;
        let woken = match group.and_then(|g| group_draws.get(&g)) {
            Some(&drawn) => drawn,
            None => {
                let drawn = wake_up.as_mut().map_or(SimTime::ZERO, |draw| draw());
                if let Some(g) = group {
                    group_draws.insert(g, drawn);
                }
                drawn
            }
        };
        after[i] = Some(s.push(
            OpKind::Compute {
                endpoints: 0,
                duration: woken,
            },
            vec![OpId(i as u32), work],
            phase,
            channel,
            step,
        ));
    }
    for op in &mut s.ops[..original] {
        for d in &mut op.deps {
            if let Some(w) = after[d.0 as usize] {
                *d = w;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, Phase};

    /// 100 µs per message and 1 ns per byte.
    const CPU: MessageCpu = MessageCpu {
        per_message_secs: 1e-4,
        per_byte_secs: 1e-9,
    };

    #[test]
    fn a_payloads_host_work_runs_beside_it_and_what_followed_it_waits_for_both() {
        let mut s = Schedule::new(Collective::SendRecv, "test", 2, 1000);
        let p = s.add_pattern(vec![(0, 1)]);
        let note = s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: PREAMBLE_BYTES,
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        let payload = s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 1000,
            },
            vec![note],
            Phase::SendRecv,
            0,
            1,
        );
        let next = s.push(
            OpKind::Reduce {
                endpoints: 1,
                bytes: 1000,
            },
            vec![payload],
            Phase::SendRecv,
            0,
            2,
        );
        charge(&mut s, CPU, None);
        // The notification is not charged; the payload gets one work op beside it (same
        // deps, 100 µs + 1 µs) and a join after both, which the reduce now waits for.
        assert_eq!(s.ops.len(), 5);
        let work = &s.ops[3];
        assert_eq!(work.deps, vec![note]);
        assert!(
            matches!(work.kind, OpKind::HostWork { endpoints: 1, core_time }
            if core_time == SimTime::from_secs_f64(1e-4 + 1e-6))
        );
        assert_eq!(s.ops[4].deps, vec![payload, OpId(3)]);
        assert_eq!(s.ops[next.0 as usize].deps, vec![OpId(4)]);
        assert_eq!(s.ops[payload.0 as usize].deps, vec![note]);
    }

    #[test]
    fn a_payload_smaller_than_a_notification_is_still_a_message() {
        // A 4-byte all-reduce cuts its buffer into 1-element segments: each is a message and
        // costs its per-message core time (on the testbed's 2 cores, 4 B all-reduces on 2
        // ranks took 0.255 ms at the median: 0.081 ms predicted uncharged, 0.244 charged).
        let mut s = Schedule::new(Collective::SendRecv, "test", 2, 4);
        let p = s.add_pattern(vec![(0, 1)]);
        s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 4,
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        charge(&mut s, CPU, None);
        assert!(s.ops.iter().any(|op| matches!(op.kind,
            OpKind::HostWork { core_time, .. } if core_time == SimTime::from_secs_f64(1e-4 + 4e-9))));
    }

    fn wake_ups(seed: u64) -> WakeUps {
        WakeUps {
            extra_secs_quantiles: vec![0.0, 0.0, 1e-4, 4e-3].into(),
            seed,
            plays: WAKE_UP_PLAYS,
        }
    }

    fn first_draws(w: &WakeUps, play: u64) -> Vec<SimTime> {
        let mut draw = w.draws(play, w.plays as u64);
        (0..64).map(|_| draw()).collect()
    }

    #[test]
    fn over_the_plays_each_draw_meets_every_stratum_of_its_distribution_once() {
        // 25 quantiles, 1 ms apart, and 25 plays: a stratum is one quantile, so the j-th
        // draws of the 25 plays are the 25 quantiles in some order, another for each j.
        let w = WakeUps {
            extra_secs_quantiles: (0..25).map(|i| i as f64 * 1e-3).collect(),
            seed: 3,
            plays: 25,
        };
        let per_play: Vec<Vec<SimTime>> = (0..25).map(|k| first_draws(&w, k)).collect();
        let all: Vec<SimTime> = (0..25)
            .map(|i| SimTime::from_secs_f64(i as f64 * 1e-3))
            .collect();
        for j in 0..64 {
            let mut column: Vec<SimTime> = per_play.iter().map(|p| p[j]).collect();
            column.sort();
            assert_eq!(column, all, "draw {j}");
        }
        let orders: std::collections::BTreeSet<Vec<SimTime>> = (0..64)
            .map(|j| per_play.iter().map(|p| p[j]).collect())
            .collect();
        assert!(
            orders.len() > 32,
            "the permutations differ from draw to draw"
        );
        // One play alone draws from the whole range.
        let mut one = w.draws(0, 1);
        let alone: std::collections::BTreeSet<SimTime> = (0..400).map(|_| one()).collect();
        assert!(alone.len() > 20);
    }

    #[test]
    fn a_large_call_is_played_fewer_times_but_never_under_the_floor() {
        assert_eq!(plays_for(WAKE_UP_PLAYS, 2_000), WAKE_UP_PLAYS);
        assert_eq!(plays_for(WAKE_UP_PLAYS, WAKE_UP_PLAY_FLOWS / 50), 50);
        assert_eq!(plays_for(WAKE_UP_PLAYS, 522_240), WAKE_UP_PLAYS_AT_LEAST);
        assert_eq!(plays_for(1, 2_000), 1, "a training step's one play");
    }

    #[test]
    fn a_play_draws_the_same_wake_ups_for_the_same_seed_and_others_for_other_plays() {
        let w = wake_ups(7);
        assert_eq!(first_draws(&w, 3), first_draws(&wake_ups(7), 3));
        assert_ne!(first_draws(&w, 3), first_draws(&w, 4));
        assert_ne!(first_draws(&w, 3), first_draws(&wake_ups(8), 3));
        // Every draw is one of the quantiles, and 64 draws meet the tail.
        let draws = first_draws(&w, 3);
        let q: Vec<SimTime> = w
            .extra_secs_quantiles
            .iter()
            .map(|&s| SimTime::from_secs_f64(s))
            .collect();
        assert!(draws.iter().all(|d| q.contains(d)));
        assert!(draws.contains(&SimTime::from_secs_f64(4e-3)));
    }

    #[test]
    fn payloads_of_one_wake_up_group_share_one_draw_and_others_draw_their_own() {
        // Three payloads: the first two one group (one step's receivers woken as one), the
        // third alone. Draws come 1 ms, 2 ms, 3 ms...: the group takes the first, the lone
        // payload the second.
        let mut s = Schedule::new(Collective::SendRecv, "test", 3, 1000);
        let p = s.add_pattern(vec![(0, 1)]);
        let q = s.add_pattern(vec![(1, 2)]);
        for (pattern, group) in [(p, Some(7)), (q, Some(7)), (p, None)] {
            let op = s.push(
                OpKind::Transfer {
                    pattern,
                    bytes: 1000,
                },
                vec![],
                Phase::SendRecv,
                0,
                0,
            );
            s.ops[op.0 as usize].wake_up_group = group;
        }
        let mut next = 0.0;
        let mut draw = || {
            next += 1e-3;
            SimTime::from_secs_f64(next)
        };
        charge(&mut s, CPU, Some(&mut draw));
        let woken: Vec<SimTime> = s
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::Compute { duration, .. } => Some(duration),
                _ => None,
            })
            .collect();
        let ms = |x: f64| SimTime::from_secs_f64(x * 1e-3);
        assert_eq!(woken, vec![ms(1.0), ms(1.0), ms(2.0)]);
    }

    #[test]
    fn what_waits_for_a_payload_waits_for_its_receivers_wake_up_too() {
        let mut s = Schedule::new(Collective::SendRecv, "test", 2, 1000);
        let p = s.add_pattern(vec![(0, 1)]);
        let payload = s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 1000,
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        s.push(
            OpKind::Reduce {
                endpoints: 1,
                bytes: 1000,
            },
            vec![payload],
            Phase::SendRecv,
            0,
            1,
        );
        charge(&mut s, CPU, Some(&mut || SimTime::from_secs_f64(3e-3)));
        // The join after the payload and its work lasts the wake-up drawn.
        let join = &s.ops[3];
        assert!(matches!(join.kind, OpKind::Compute { duration, .. }
            if duration == SimTime::from_secs_f64(3e-3)));
        assert_eq!(s.ops[1].deps, vec![OpId(3)]);
    }
}
