//! Slow start after idle, against queues: how long a connection's window takes to cover its
//! share.
//!
//! A TCP connection idle for longer than its retransmission timeout restarts from the
//! initial window (Linux's `tcp_slow_start_after_idle`; module `window` keeps that state),
//! and its window then doubles once per round trip. Where that round trip is a fraction of a
//! millisecond this is over before it shows; where the connection's data or its
//! acknowledgements wait behind queues that other connections keep (a shaped uplink that
//! streams both ways), each doubling takes those queues' time and the connection sends below
//! its share for several of them. Measured on the testbed (2026-12-03, `suite.py mpi` on the
//! two leaves at 150 Mbit/s, `data/runs/calibration/testbed_two_leaf_150mbit.slow_start_after_idle.csv`):
//! OpenMPI's bruck all_gather of 4 MiB, whose connections carry one step per call and idle
//! for the rest (0.6-0.7 s), took a median 693 ms over twelve launches with the restart
//! and 601 ms over ten with `net.ipv4.tcp_slow_start_after_idle = 0`; the ring all_gather,
//! whose connections never idle that long, 306 ms either way.
//!
//! The model, where a profile keeps TCP windows (the testbed's): a batch about to start waits
//! what its slowest flow's slow start costs it against sending at its share from the start,
//! for flows whose connection restarted after idle (module `window`: idle past `RTO_MIN`, and
//! no message since that grew its window; a connection new to the play is not counted, since
//! it stands for one the harness's earlier calls had already opened and grown). Per flow: its
//! window `W0` after the restart, its share `r` (the link's rate over the connections there,
//! itself included, on its most crowded link), and its round trip `R`: its path's latency both
//! ways, the queues its data meets (the standing queue at its sender's link, the forwarded
//! queues further on) and those its acknowledgements meet on the route back, each other
//! connection counted for at most its FIFO head there. The window must reach `W* = r R`; from
//! `W0` that takes `k = log2(W*/W0)` round trips, in which it sends about `W*` bytes, which at
//! its share take one round trip: the cost is `(k − 1 + W0/W*) R` (a message smaller than `W*`
//! costs its slow start's time less its time at the share; [`slow_start_cost_secs`], checked
//! against a round-by-round reference). Other connections take the link meanwhile, as they
//! take what a ramping connection leaves.
//!
//! The bound on each connection's part of a queue is a stand-in, chosen after scoring: the
//! forwarded queues (module `fifo`) grow without a bound, and on the three 100 Mbit/s leaves
//! they put 100-160 ms into a restarted connection's round trip, where the testbed's
//! long-running cross-leaf connections measured 29-37 ms (`ss -tin`, docs/testbed.md, "A
//! window per connection"): about one FIFO head (159-173 kB) per connection queued at the
//! uplink. Unbounded, the two leaves' bruck of 4 MiB plays within 3.1% and the three leaves'
//! goes 34.5% slow; bounded, -18.4% and -5.5% (docs/testbed.md, "Slow start after idle").
//! The bruck above plays 555 ms against 527 without this (693 measured, 601 without the
//! restart): most of the restart's measured cost is still missing.

use super::FlowModel;
use crate::engine::SimTime;

/// What sending `bytes` from a window of `window_bytes` that doubles every `rtt_secs` costs
/// against sending them at `share_bps` from the start (the module's formula; 0 where the
/// window already covers the share's round trip).
pub(super) fn slow_start_cost_secs(
    window_bytes: f64,
    bytes: f64,
    share_bps: f64,
    rtt_secs: f64,
) -> f64 {
    let target = share_bps / 8.0 * rtt_secs;
    if window_bytes <= 0.0 || window_bytes >= target || bytes <= 0.0 {
        return 0.0;
    }
    let cost = if bytes >= target {
        ((target / window_bytes).log2() - 1.0 + window_bytes / target) * rtt_secs
    } else {
        (bytes / window_bytes + 1.0).log2() * rtt_secs - bytes * 8.0 / share_bps
    };
    cost.max(0.0)
}

impl FlowModel {
    /// How long a batch of `bytes` per flow on `pattern` waits at `now` for its connections'
    /// windows to open, as the module says: the most over its flows.
    pub(super) fn slow_start_wait(&mut self, pattern: usize, bytes: u64, now: SimTime) -> SimTime {
        let flows = self.patterns[pattern].flows();
        let mut wait_secs: f64 = 0.0;
        for f in 0..flows {
            let (path, ack, latency_ps) = {
                let pat = &self.patterns[pattern];
                (
                    pat.path(f).to_vec(),
                    pat.ack_path(f).to_vec(),
                    pat.latency_ps[f],
                )
            };
            if path.is_empty() {
                continue;
            }
            let w0 = self.windows.whole_max_bytes(&path, now);
            if !self.windows.restarted(&path) {
                continue;
            }
            let share_bps = path
                .iter()
                .map(|&l| {
                    let l = l as usize;
                    let others = self
                        .sending_on(l, now)
                        .filter(|(_, _, p, _, _)| *p != path.as_slice())
                        .count();
                    self.link_capacity_bps[l] / (others + 1) as f64
                })
                .fold(f64::INFINITY, f64::min);
            let rtt_secs = 2.0 * latency_ps as f64 * 1e-12
                + self.queue_secs(&path, now)
                + self.queue_secs(&ack, now);
            let cost = slow_start_cost_secs(w0, bytes as f64, share_bps, rtt_secs);
            wait_secs = wait_secs.max(cost);
        }
        SimTime::from_secs_f64(wait_secs)
    }

    /// The seconds a packet on `path` sent at `now` waits in the FIFO queues other
    /// connections keep: the standing queue at its first link, the forwarded queues after it.
    fn queue_secs(&self, path: &[u32], now: SimTime) -> f64 {
        let mut secs = 0.0;
        for (k, &l) in path.iter().enumerate() {
            let l = l as usize;
            if self.fifo_head_bytes[l] <= 0.0 {
                continue;
            }
            let bytes = if k == 0 {
                self.standing_queue_bytes(l, now)
            } else {
                let head = self.fifo_head_bytes[l];
                self.forwarded_queue_bytes_of(l, path, now, now, |_| true, head)
            };
            secs += bytes * 8.0 / self.link_capacity_bps[l];
        }
        secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::factors::EfficiencyFactors;
    use crate::net::flow::tests::{run, secs, star};
    use crate::net::testing::schedule;
    use crate::topology::LinkClass;

    /// The slow reference: round by round, the window doubling until it covers the share's
    /// round trip, each round sending what the window (then the share) allows.
    fn rounds_cost_secs(window_bytes: f64, bytes: f64, share_bps: f64, rtt_secs: f64) -> f64 {
        let target = share_bps / 8.0 * rtt_secs;
        let (mut w, mut left, mut t) = (window_bytes, bytes, 0.0);
        while left > 0.0 && w < target {
            let sent = w.min(left);
            left -= sent;
            t += if left > 0.0 {
                rtt_secs
            } else {
                sent * 8.0 / share_bps
            };
            w *= 2.0;
        }
        t += left * 8.0 / share_bps;
        t - bytes * 8.0 / share_bps
    }

    #[test]
    fn the_closed_form_is_within_half_a_round_trip_of_the_rounds() {
        let iw = 14_480.0;
        for (w0, bytes, share, rtt) in [
            (iw, 1.4e6, 50e6, 0.030),
            (iw, 1.4e6, 100e6, 0.047),
            (iw, 0.7e6, 143e6, 0.009),
            (2.0 * iw, 4.0e6, 48e6, 0.160),
            (iw, 60e3, 100e6, 0.020),
        ] {
            let closed = slow_start_cost_secs(w0, bytes, share, rtt);
            let rounds = rounds_cost_secs(w0, bytes, share, rtt);
            assert!(closed > 0.0, "{closed}");
            assert!(
                (closed - rounds).abs() <= 0.5 * rtt,
                "w0 {w0} bytes {bytes} share {share} rtt {rtt}: {closed} vs {rounds}"
            );
        }
    }

    #[test]
    fn a_window_that_covers_the_round_trip_costs_nothing() {
        // 100 Mbit/s over 0.1 ms: 1,250 bytes in flight, under ten segments.
        assert_eq!(slow_start_cost_secs(14_480.0, 1e6, 100e6, 1e-4), 0.0);
        assert_eq!(slow_start_cost_secs(200e3, 1e6, 100e6, 0.010), 0.0);
    }

    /// g0 sends 1 MB to g1; g2 streams 16 MB to g0 (1.28 s at 100 Mbit/s), after which g0
    /// sends 1 MB to g1 again, while g1 streams 25 MB to g2 since the first ended. Op ends,
    /// with TCP windows kept or not; FIFO heads of 160 kB.
    fn after_idle(windows: bool) -> Vec<f64> {
        let t = star(3, 100e6, SimTime::from_us(25));
        let sched = schedule(
            3,
            &[
                (vec![(0, 1)], 1_000_000, vec![]),
                (vec![(2, 0)], 16_000_000, vec![0]),
                (vec![(1, 2)], 25_000_000, vec![0]),
                (vec![(0, 1)], 1_000_000, vec![1]),
            ],
        );
        let factors = EfficiencyFactors {
            fifo_head: vec![(LinkClass::Ethernet, 160_000.0)],
            tcp_windows: windows,
            ..Default::default()
        };
        let (out, _) = run(&t, &sched, factors);
        out.ops.iter().map(|o| secs(o.end)).collect()
    }

    #[test]
    fn a_connection_idle_past_its_timeout_restarts_slow_start_behind_its_acknowledgements_queue() {
        let plain = after_idle(false);
        let windowed = after_idle(true);
        // The first message's connection is new, not restarted: no cost (the harness's
        // connections have run before the timed calls). Nor for g2's and g1's streams.
        for op in 0..3 {
            assert!(
                (windowed[op] - plain[op]).abs() < 1e-9,
                "{windowed:?} {plain:?}"
            );
        }
        // 1.28 s idle (six timeouts): g0 -> g1 restarts from ten segments. Its
        // acknowledgements wait behind the 160 kB g1 keeps queued at its link (12.8 ms), its
        // round trip 12.9 ms: the window must reach 161 kB, 3.5 round trips from 14.5 kB.
        let rtt = 4.0 * 25e-6 + 160_000.0 * 8.0 / 100e6;
        let expected = slow_start_cost_secs(14_480.0, 1e6, 100e6, rtt);
        assert!(expected > 0.030 && expected < 0.036, "{expected}");
        let cost = windowed[3] - plain[3];
        assert!((cost - expected).abs() < 1e-6, "{cost} vs {expected}");
    }
}
