//! gloo's host work per message, on the cores the hosts share.
//!
//! Every gloo message costs its hosts CPU: the sender's and receiver's network stacks per
//! byte, and per message the threads woken to send and take it, the system calls, the
//! notification that went before it. On separate machines that work overlaps the transfers
//! and costs nothing visible; where every host runs on one machine's few cores (the testbed:
//! 4 or 8 namespaces on 2 cores) it competes, and with enough messages at once it is what a
//! collective waits for. Measured on the testbed (`suite.py cpu_costs`: the machine's busy
//! core-seconds per message by size), the profile gives it as `network.host_cpu`, and this
//! module charges it:
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

use super::PREAMBLE_BYTES;
use crate::collective::{OpId, OpKind, PatternId, Schedule};
use crate::engine::SimTime;

/// Core time of one gloo message, both ends together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageCpu {
    pub per_message_secs: f64,
    pub per_byte_secs: f64,
}

/// Charges every payload transfer of `s` its host work (see the module).
pub fn charge(s: &mut Schedule, cpu: MessageCpu) {
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
        // A zero-time join: what waited for the transfer waits for it and its work.
        after[i] = Some(s.push(
            OpKind::Compute {
                endpoints: 0,
                duration: SimTime::ZERO,
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
        charge(&mut s, CPU);
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
        charge(&mut s, CPU);
        assert!(s.ops.iter().any(|op| matches!(op.kind,
            OpKind::HostWork { core_time, .. } if core_time == SimTime::from_secs_f64(1e-4 + 4e-9))));
    }
}
