//! TCP congestion windows per connection: which messages a shaper can pass whole.
//!
//! Module `burst` lets a message of up to one GSO packet (the profile's `shaper_packet`)
//! through a shaped link whole, as htb passes a packet whenever its level is not below zero.
//! But TCP hands the qdisc only what its congestion window allows: a message larger than the
//! window leaves as a first packet of the window's bytes and the rest a round trip later,
//! behind whatever queued at the links meanwhile. Captured on the testbed (docs/testbed.md,
//! "The ring's last rank enters 0.14 ms late"): gloo's reduce on five hosts at 100 Mbit/s sends
//! each rank's 52.5 KB chunk to the root once a call on its own connection, and those chunks
//! left as 7,240 + 5,792 B in the first call, 2 x 11,584 B in the second, growing one segment
//! a call to 2 x 24,616 B by the eleventh (`testbed_star5_100mbit.capture_gloo_red256k.json`),
//! the root's downlink passing the rest at its rate; on eight hosts at 200 Mbit/s the 32.8 KB
//! chunks passed whole from the third call on.
//!
//! The model, per connection (a path's first and last link): the window starts at Linux's
//! [`INITIAL_WINDOW_SEGMENTS`] segments of [`MSS_BYTES`]; a message no larger than it may pass
//! whole (module `burst` decides the rest), a larger one streams as any message beyond a
//! packet does. A message that fills at least half the window (Linux grows a window only while
//! it limits the sender) grows it once its bytes are sent: in slow start by its bytes (every
//! acknowledged byte adds one), in congestion avoidance by one segment per window's worth of
//! bytes (Reno's pace; the captures grew the gather connections one to three segments a
//! call). Slow start ends as CUBIC's HyStart ends it, on a rising round trip: a message
//! delayed [`HYSTART_DELAY_MIN`] or more beyond its bytes at its path's bottleneck rate (from
//! its posting to its last byte sent: the queues it met, at its own link or further on) while
//! its window passes HyStart's [`HYSTART_LOW_WINDOW_SEGMENTS`] leaves slow start at
//! [`SLOW_START_EXIT_SEGMENTS`], the window measured for such connections (a draw per
//! connection on the testbed, 16-84 segments: the median is played). A connection idle for
//! longer than [`RTO_MIN`] restarts from at most the initial window, halved once per idle RTO
//! (Linux's `tcp_slow_start_after_idle`). The windows live as long as the flow model, so a
//! benchmark loop's timed call finds what its warm call grew (one call, where the testbed's
//! median timed call follows three; docs/testbed.md, "TCP's windows decide which messages
//! pass whole").
//!
//! Not modelled: the window as a limit on a flow's rate (the fluid flows run at their max-min
//! rates whatever their windows), losses, CUBIC's growth curve, HyStart's ACK-train test, and
//! the spread of exit windows between connections.

use std::collections::HashMap;

use crate::engine::SimTime;

/// TCP's maximum segment size on the testbed's links: a 1,500-byte MTU less the IP and TCP
/// headers with timestamps (20 + 20 + 12 bytes).
pub(super) const MSS_BYTES: f64 = 1448.0;

/// Linux's initial congestion window (RFC 6928): 10 segments.
pub(super) const INITIAL_WINDOW_SEGMENTS: f64 = 10.0;

/// CUBIC's HyStart acts only from this window on (`hystart_low_window`, 16 segments).
pub(super) const HYSTART_LOW_WINDOW_SEGMENTS: f64 = 16.0;

/// The least round-trip rise that ends slow start (HyStart's delay threshold, the round
/// trip's eighth clamped to 4-16 ms; the testbed's round trips are ~0.1 ms).
pub(super) const HYSTART_DELAY_MIN: SimTime = SimTime::from_ps(4_000_000_000);

/// The window at which a connection that meets others' queues leaves slow start, in
/// segments: the median over the gather connections of gloo's reduce (each rank's chunk to
/// the root, on a connection of its own, meeting the others at the root's downlink), sampled
/// with `ss -tin` every 25 ms on the testbed and read by `testbed/workloads/tcp_state.py`:
/// 16, 27 and 84 on five hosts at 100 Mbit/s
/// (`testbed_star5_100mbit.capture_gloo_reduce_256k_tcpinfo.json`), 27, 27, 30 and 52 on
/// eight at 200 Mbit/s (`testbed_star4_200mbit_8hosts.capture_gloo_reduce_256k_tcpinfo.json`;
/// two more still in slow start at 52 and 57 when it ended). The same logs' ring
/// connections, which run alone, left it at 20-78.
pub(super) const SLOW_START_EXIT_SEGMENTS: f64 = 27.0;

/// Linux's least retransmission timeout, the idle time after which a connection restarts
/// its window (`TCP_RTO_MIN`).
pub(super) const RTO_MIN: SimTime = SimTime::from_ps(200_000_000_000);

/// One connection's sending state.
#[derive(Debug, Clone, Copy)]
struct Window {
    bytes: f64,
    slow_start: bool,
    /// When its last message's bytes were sent.
    last_sent: SimTime,
}

/// Every connection's window, keyed by its path's first and last link.
#[derive(Debug, Default)]
pub(super) struct Windows {
    enabled: bool,
    by_connection: HashMap<(u32, u32), Window>,
}

fn key(path: &[u32]) -> Option<(u32, u32)> {
    Some((*path.first()?, *path.last()?))
}

impl Windows {
    /// Windows kept (`enabled`: where links pass one-packet messages whole) or none.
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            by_connection: HashMap::new(),
        }
    }

    /// The most a message over `path` starting at `now` may pass whole: its connection's
    /// window after any idle restart (unbounded where windows are not kept).
    pub(super) fn whole_max_bytes(&mut self, path: &[u32], now: SimTime) -> f64 {
        if !self.enabled {
            return f64::INFINITY;
        }
        let Some(k) = key(path) else {
            return f64::INFINITY;
        };
        let initial = INITIAL_WINDOW_SEGMENTS * MSS_BYTES;
        let w = self.by_connection.entry(k).or_insert(Window {
            bytes: initial,
            slow_start: true,
            last_sent: now,
        });
        let idle = now.saturating_sub(w.last_sent);
        if idle > RTO_MIN {
            let rtos = (idle.as_ps() / RTO_MIN.as_ps()).min(63) as i32;
            let restart = initial.min(w.bytes);
            w.bytes = (w.bytes / 2f64.powi(rtos)).max(restart);
            w.last_sent = now;
        }
        w.bytes
    }

    /// A message of `bytes` over `path` (bottleneck `bottleneck_bps`), posted at `posted`,
    /// had its last byte sent at `now`: grow its connection's window, and end its slow start
    /// on a rising round trip.
    pub(super) fn sent(
        &mut self,
        path: &[u32],
        bytes: f64,
        bottleneck_bps: f64,
        posted: SimTime,
        now: SimTime,
    ) {
        if !self.enabled {
            return;
        }
        let Some(w) = key(path).and_then(|k| self.by_connection.get_mut(&k)) else {
            return;
        };
        w.last_sent = now;
        if bytes < w.bytes / 2.0 {
            return;
        }
        if w.slow_start {
            let at_rate = SimTime::from_secs_f64(bytes * 8.0 / bottleneck_bps);
            let delayed = now.saturating_sub(posted).saturating_sub(at_rate);
            let grown = w.bytes + bytes;
            if delayed >= HYSTART_DELAY_MIN && grown >= HYSTART_LOW_WINDOW_SEGMENTS * MSS_BYTES {
                // The round trip rose while the window passed HyStart's low window: slow start
                // ends, at the window measured for such connections (not below what it had).
                w.bytes = w.bytes.max(grown.min(SLOW_START_EXIT_SEGMENTS * MSS_BYTES));
                w.slow_start = false;
            } else {
                w.bytes = grown;
            }
            return;
        }
        w.bytes += MSS_BYTES * bytes / w.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: [u32; 2] = [0, 5];

    fn ms(ms: f64) -> SimTime {
        SimTime::from_secs_f64(ms * 1e-3)
    }

    #[test]
    fn a_new_connection_passes_ten_segments_whole_and_slow_start_grows_it_by_what_it_sent() {
        let mut w = Windows::new(true);
        assert_eq!(w.whole_max_bytes(&PATH, ms(0.0)), 14_480.0);
        // 52.5 KB at 100 Mbit/s takes 4.2 ms: sent in 4.5 ms is no rising round trip.
        w.sent(&PATH, 52_500.0, 100e6, ms(0.0), ms(4.5));
        assert_eq!(w.whole_max_bytes(&PATH, ms(5.0)), 14_480.0 + 52_500.0);
        // Another connection keeps its own window.
        assert_eq!(w.whole_max_bytes(&[1, 5], ms(5.0)), 14_480.0);
    }

    #[test]
    fn a_message_held_in_queues_ends_slow_start_at_the_measured_window_then_it_grows_a_segment_per_window(
    ) {
        let mut w = Windows::new(true);
        w.whole_max_bytes(&PATH, ms(0.0));
        // 4.2 ms of bytes that took 12 ms: 7.8 ms in queues, a rising round trip.
        w.sent(&PATH, 52_500.0, 100e6, ms(0.0), ms(12.0));
        let exit = SLOW_START_EXIT_SEGMENTS * MSS_BYTES;
        assert_eq!(w.whole_max_bytes(&PATH, ms(13.0)), exit);
        // Congestion avoidance: one segment per window's worth sent.
        w.sent(&PATH, exit, 100e6, ms(13.0), ms(30.0));
        assert_eq!(w.whole_max_bytes(&PATH, ms(31.0)), exit + MSS_BYTES);
    }

    #[test]
    fn a_message_under_half_the_window_does_not_grow_it() {
        let mut w = Windows::new(true);
        w.whole_max_bytes(&PATH, ms(0.0));
        w.sent(&PATH, 7_000.0, 100e6, ms(0.0), ms(0.6));
        assert_eq!(w.whole_max_bytes(&PATH, ms(1.0)), 14_480.0);
    }

    #[test]
    fn an_idle_connection_halves_its_window_per_rto_down_to_the_initial_one() {
        let mut w = Windows::new(true);
        w.whole_max_bytes(&PATH, ms(0.0));
        w.sent(&PATH, 185_520.0, 100e6, ms(0.0), ms(15.0));
        assert_eq!(w.whole_max_bytes(&PATH, ms(200.0)), 200_000.0);
        // Idle 450 ms from its last byte sent: two RTOs, a quarter.
        assert_eq!(w.whole_max_bytes(&PATH, ms(465.0)), 50_000.0);
        // Idle a second more: never below the initial window.
        assert_eq!(w.whole_max_bytes(&PATH, ms(1_465.0)), 14_480.0);
    }

    #[test]
    fn without_windows_any_message_may_pass_whole() {
        let mut w = Windows::new(false);
        assert_eq!(w.whole_max_bytes(&PATH, ms(0.0)), f64::INFINITY);
    }
}
