//! TCP senders for the packet model (`congestion_control = "cubic"`): one connection per
//! (source, destination) pair, kept for the whole run as a library keeps its sockets, with
//! Linux's CUBIC and HyStart as `net/ipv4/tcp_cubic.c` (v6.x) writes them (facts read from the
//! kernel; no code taken).
//!
//! - **Window**: a connection sends while its bytes in flight (sent, not yet acknowledged) fit
//!   its congestion window; it starts at [`INITIAL_WINDOW_SEGMENTS`] segments.
//! - **Slow start** grows the window by every byte acknowledged, until **HyStart** ends it: by
//!   delay (the round's smallest of its first [`HYSTART_MIN_SAMPLES`] round trips exceeds the
//!   connection's smallest by more than an eighth of it, clamped to 4-16 ms) or by ACK train
//!   (acknowledgements arriving at most 2 ms apart for longer than half the smallest round
//!   trip since the round began), checked from [`HYSTART_LOW_WINDOW_SEGMENTS`] segments on,
//!   once per connection (until a loss).
//! - **Congestion avoidance** moves the window toward CUBIC's `C (t - K)^3 + W_max`
//!   (C = 0.4 segments/s³, t from the epoch's first acknowledgement plus the smallest round
//!   trip) or the Reno-friendly estimate (0.53 segments per window acknowledged), whichever is
//!   larger, by at most half a segment per segment acknowledged.
//! - **A loss** (here a retransmission timeout: the packet model has no duplicate
//!   acknowledgements) sets `W_max` to the window, the threshold to 0.7 of it and the window
//!   to one segment.
//! - **Idle restart**: a connection idle for longer than its retransmission timeout
//!   (`max(200 ms, 2 × smoothed round trip)`) halves its window per timeout elapsed, down to the
//!   initial window, and keeps three quarters of the old window as its threshold
//!   (`tcp_cwnd_restart`, `net.ipv4.tcp_slow_start_after_idle = 1`).
//!
//! Acknowledgements: one per data packet, or one per `ack_every_bytes` of them (module `conn`;
//! the testbed's receivers get whole GSO packets and acknowledge each). Not modelled: the
//! delayed-acknowledgement timer, pacing, segmentation offload (packets are the MTU's),
//! receive windows, fast retransmit and recovery.

use crate::engine::SimTime;

/// Linux's initial congestion window (RFC 6928).
pub const INITIAL_WINDOW_SEGMENTS: f64 = 10.0;
/// HyStart is checked only from this window on (`hystart_low_window`).
pub const HYSTART_LOW_WINDOW_SEGMENTS: f64 = 16.0;
/// Round trips HyStart's delay test takes per round (`HYSTART_MIN_SAMPLES`).
pub const HYSTART_MIN_SAMPLES: u32 = 8;
/// The smallest retransmission timeout (`TCP_RTO_MIN`).
pub const RTO_MIN: SimTime = SimTime::from_us(200_000);
/// Bytes of an acknowledgement on the wire (a minimal Ethernet frame).
pub const ACK_BYTES: u32 = 64;

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
const HYSTART_DELAY_MIN_PS: u64 = 4_000_000_000;
const HYSTART_DELAY_MAX_PS: u64 = 16_000_000_000;
const HYSTART_ACK_DELTA_PS: u64 = 2_000_000_000;
const PS_PER_SEC: f64 = 1e12;

/// One direction of a TCP connection: the sender's congestion state.
#[derive(Debug, Clone)]
pub struct Sender {
    mss: f64,
    /// Congestion window and slow-start threshold, bytes.
    pub cwnd: f64,
    pub ssthresh: f64,
    /// Bytes sent so far, and acknowledged so far (cumulative).
    pub sent: u64,
    pub acked: u64,
    min_rtt_ps: u64,
    srtt_ps: u64,
    /// When it last sent or was acknowledged.
    pub last_active_ps: u64,
    // HyStart.
    found: bool,
    round_end: u64,
    round_start_ps: u64,
    last_ack_ps: u64,
    round_min_rtt_ps: u64,
    round_samples: u32,
    // CUBIC.
    epoch_start_ps: Option<u64>,
    origin_segments: f64,
    k_secs: f64,
    w_est_segments: f64,
    last_max_segments: f64,
}

impl Sender {
    /// A new connection whose segments carry `mss` bytes.
    pub fn new(mss: u32) -> Self {
        let mss = mss.max(1) as f64;
        Sender {
            mss,
            cwnd: INITIAL_WINDOW_SEGMENTS * mss,
            ssthresh: f64::INFINITY,
            sent: 0,
            acked: 0,
            min_rtt_ps: u64::MAX,
            srtt_ps: 0,
            last_active_ps: 0,
            found: false,
            round_end: 0,
            round_start_ps: 0,
            last_ack_ps: 0,
            round_min_rtt_ps: u64::MAX,
            round_samples: 0,
            epoch_start_ps: None,
            origin_segments: 0.0,
            k_secs: 0.0,
            w_est_segments: 0.0,
            last_max_segments: 0.0,
        }
    }

    /// The smallest round trip seen (picoseconds; `u64::MAX` before any).
    pub fn min_rtt_ps(&self) -> u64 {
        self.min_rtt_ps
    }

    pub fn in_flight(&self) -> u64 {
        self.sent - self.acked
    }

    /// Whether `bytes` more may leave now (one segment always may when nothing is in flight).
    pub fn may_send(&self, bytes: u64) -> bool {
        self.in_flight() == 0 || (self.in_flight() + bytes) as f64 <= self.cwnd
    }

    pub fn on_sent(&mut self, bytes: u64, now_ps: u64) {
        self.sent += bytes;
        self.last_active_ps = now_ps;
    }

    fn rto_ps(&self) -> u64 {
        RTO_MIN.as_ps().max(2 * self.srtt_ps)
    }

    /// Before sending after a pause: restart the window if idle past the timeout.
    pub fn restart_if_idle(&mut self, now_ps: u64) {
        if self.in_flight() > 0 || self.sent == 0 {
            return;
        }
        let rto = self.rto_ps();
        let mut idle = now_ps.saturating_sub(self.last_active_ps);
        if idle <= rto {
            return;
        }
        let restart = (INITIAL_WINDOW_SEGMENTS * self.mss).min(self.cwnd);
        self.ssthresh = self.ssthresh_now();
        while idle > rto && self.cwnd > restart {
            self.cwnd /= 2.0;
            idle -= rto;
        }
        self.cwnd = self.cwnd.max(restart);
        self.epoch_start_ps = None;
    }

    /// `tcp_current_ssthresh`: the threshold, at least 3/4 of the window.
    fn ssthresh_now(&self) -> f64 {
        self.ssthresh.max(self.cwnd * 0.75)
    }

    /// An acknowledgement up to `acked_total` bytes arrived at `now_ps`, echoing a segment
    /// sent `rtt_ps` ago.
    pub fn on_ack(&mut self, acked_total: u64, rtt_ps: u64, now_ps: u64) {
        if acked_total <= self.acked {
            return;
        }
        let acked = acked_total - self.acked;
        self.acked = acked_total;
        self.last_active_ps = now_ps;
        self.min_rtt_ps = self.min_rtt_ps.min(rtt_ps.max(1));
        self.srtt_ps = if self.srtt_ps == 0 {
            rtt_ps
        } else {
            (7 * self.srtt_ps + rtt_ps) / 8
        };
        if self.cwnd < self.ssthresh {
            if !self.found && self.cwnd >= HYSTART_LOW_WINDOW_SEGMENTS * self.mss {
                self.hystart(rtt_ps, now_ps);
            }
            if self.cwnd < self.ssthresh {
                self.cwnd = (self.cwnd + acked as f64).min(self.ssthresh.max(self.cwnd));
                return;
            }
        }
        self.congestion_avoidance(acked as f64 / self.mss, now_ps);
    }

    fn hystart(&mut self, rtt_ps: u64, now_ps: u64) {
        if self.acked > self.round_end || self.round_end == 0 {
            // A new round: it ends once what is sent now is acknowledged.
            self.round_end = self.sent;
            self.round_start_ps = now_ps;
            self.last_ack_ps = now_ps;
            self.round_min_rtt_ps = u64::MAX;
            self.round_samples = 0;
        }
        if now_ps - self.last_ack_ps <= HYSTART_ACK_DELTA_PS {
            self.last_ack_ps = now_ps;
            if now_ps - self.round_start_ps > self.min_rtt_ps / 2 {
                self.exit_slow_start();
                return;
            }
        }
        if self.round_samples < HYSTART_MIN_SAMPLES {
            self.round_min_rtt_ps = self.round_min_rtt_ps.min(rtt_ps);
            self.round_samples += 1;
            if self.round_samples == HYSTART_MIN_SAMPLES {
                let thresh =
                    (self.min_rtt_ps / 8).clamp(HYSTART_DELAY_MIN_PS, HYSTART_DELAY_MAX_PS);
                if self.round_min_rtt_ps >= self.min_rtt_ps.saturating_add(thresh) {
                    self.exit_slow_start();
                }
            }
        }
    }

    fn exit_slow_start(&mut self) {
        self.found = true;
        self.ssthresh = self.cwnd;
    }

    fn congestion_avoidance(&mut self, acked_segments: f64, now_ps: u64) {
        let w = self.cwnd / self.mss;
        let epoch = match self.epoch_start_ps {
            Some(e) => e,
            None => {
                self.epoch_start_ps = Some(now_ps);
                if self.last_max_segments <= w {
                    self.k_secs = 0.0;
                    self.origin_segments = w;
                } else {
                    self.k_secs = ((self.last_max_segments - w) / CUBIC_C).cbrt();
                    self.origin_segments = self.last_max_segments;
                }
                self.w_est_segments = w;
                now_ps
            }
        };
        let t = (now_ps - epoch + self.min_rtt_ps) as f64 / PS_PER_SEC - self.k_secs;
        let mut target = self.origin_segments + CUBIC_C * t * t * t;
        // Reno-friendly: 3(1 - β)/(1 + β) segments per window acknowledged.
        self.w_est_segments += acked_segments * 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) / w;
        target = target.max(self.w_est_segments);
        if target > w {
            let grow = (target - w) / w * acked_segments;
            self.cwnd += grow.min(acked_segments / 2.0) * self.mss;
        }
    }

    /// A segment was lost (its retransmission timer fired).
    pub fn on_loss(&mut self) {
        let w = self.cwnd / self.mss;
        self.last_max_segments = w;
        self.ssthresh = (w * CUBIC_BETA).max(2.0) * self.mss;
        self.cwnd = self.mss;
        self.epoch_start_ps = None;
        self.found = false;
        self.round_end = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;
    const MS: u64 = 1_000_000_000;

    /// Acknowledges everything in flight, one segment at a time, `rtt` after it was sent,
    /// spread over `spread` of time: one round trip of a window.
    fn round(s: &mut Sender, now: &mut u64, rtt: u64, spread: u64) {
        let n = (s.cwnd / MSS as f64).floor() as u64;
        for _ in 0..n {
            s.on_sent(MSS as u64, *now);
        }
        let start = *now + rtt;
        for i in 0..n {
            let t = start + spread * i / n.max(1);
            s.on_ack(s.acked + MSS as u64, rtt, t);
        }
        *now = start + spread;
    }

    #[test]
    fn slow_start_doubles_the_window_every_round_trip_until_hystart() {
        let mut s = Sender::new(MSS);
        let mut now = 0;
        round(&mut s, &mut now, 10 * MS, 0);
        assert_eq!(s.cwnd, 20.0 * MSS as f64);
        // Round trips steady at 10 ms and acknowledgements in one burst: no exit.
        for _ in 0..3 {
            round(&mut s, &mut now, 10 * MS, 0);
        }
        assert_eq!(s.cwnd, 160.0 * MSS as f64);
        assert!(s.cwnd < s.ssthresh);
    }

    #[test]
    fn a_round_trip_rising_by_more_than_4_ms_ends_slow_start() {
        let mut s = Sender::new(MSS);
        let mut now = 0;
        round(&mut s, &mut now, MS, 0);
        round(&mut s, &mut now, MS, 0);
        let before = s.cwnd;
        // 1 ms + 4 ms of queue: the round's first eight samples end it.
        round(&mut s, &mut now, 5 * MS + 1, 0);
        assert!(s.found);
        assert!(s.cwnd < 2.0 * before, "{} vs {before}", s.cwnd);
        // The eighth sample ends it, before its own segment is counted.
        assert_eq!(s.ssthresh, before + 7.0 * MSS as f64);
    }

    #[test]
    fn an_ack_train_longer_than_half_the_round_trip_ends_slow_start() {
        // 0.2 ms round trips (the testbed's): acknowledgements spread over 1 ms end it as soon
        // as the window reaches 16 segments, within the first round trip.
        let mut s = Sender::new(MSS);
        let mut now = 0;
        round(&mut s, &mut now, MS / 5, MS);
        assert!(s.found);
        assert!(
            (16.0..=20.0).contains(&(s.ssthresh / MSS as f64)),
            "{}",
            s.ssthresh
        );
        // Acknowledgements in one burst instead: slow start goes on.
        let mut s = Sender::new(MSS);
        let mut now = 0;
        round(&mut s, &mut now, MS / 5, 0);
        round(&mut s, &mut now, MS / 5, 0);
        assert!(!s.found);
        assert_eq!(s.cwnd, 40.0 * MSS as f64);
    }

    #[test]
    fn congestion_avoidance_grows_half_a_segment_per_round_trip_when_cubic_is_flat() {
        let mut s = Sender::new(MSS);
        s.ssthresh = s.cwnd;
        let mut now = 0;
        // 10 ms round trips for 0.1 s: CUBIC's term adds 0.4 × 0.1³ segments; the
        // Reno-friendly estimate 0.53 per round trip.
        for _ in 0..10 {
            round(&mut s, &mut now, 10 * MS, 0);
        }
        let w = s.cwnd / MSS as f64;
        assert!((14.5..=16.0).contains(&w), "{w}");
    }

    #[test]
    fn an_idle_connection_restarts_from_the_initial_window() {
        let mut s = Sender::new(MSS);
        s.on_sent(1000, 0);
        s.on_ack(1000, MS / 10, 0);
        s.cwnd = 160.0 * MSS as f64;
        s.ssthresh = 100.0 * MSS as f64;
        s.restart_if_idle(150 * MS);
        assert_eq!(
            s.cwnd,
            160.0 * MSS as f64,
            "idle less than 200 ms keeps the window"
        );
        // 500 ms idle: halved twice (one per 200 ms timeout), 40 segments.
        let mut t = s.clone();
        t.restart_if_idle(500 * MS);
        assert_eq!(t.cwnd, 40.0 * MSS as f64);
        s.restart_if_idle(2000 * MS);
        assert_eq!(s.cwnd, INITIAL_WINDOW_SEGMENTS * MSS as f64);
        assert_eq!(
            s.ssthresh,
            120.0 * MSS as f64,
            "three quarters of the old window"
        );
    }

    #[test]
    fn a_loss_leaves_one_segment_and_cubic_climbs_back_toward_the_old_window() {
        let mut s = Sender::new(MSS);
        s.cwnd = 100.0 * MSS as f64;
        s.ssthresh = s.cwnd;
        s.on_loss();
        assert_eq!(s.cwnd, MSS as f64);
        assert_eq!(s.ssthresh, 70.0 * MSS as f64);
        // 100 ms round trips for 2 s: slow start back to 70 segments, then CUBIC's curve
        // toward W_max (K = cbrt(30 / 0.4) = 4.2 s: 95 segments at 2 s), above the
        // Reno-friendly estimate (70 + 0.53 per round trip).
        let mut now = 0;
        for _ in 0..20 {
            round(&mut s, &mut now, 100 * MS, 0);
        }
        let w = s.cwnd / MSS as f64;
        assert!((88.0..=97.0).contains(&w), "{w}");
        // 10 ms round trips: the Reno-friendly estimate is the larger, past the old window.
        let mut s = Sender::new(MSS);
        s.cwnd = 100.0 * MSS as f64;
        s.on_loss();
        let mut now = 0;
        for _ in 0..200 {
            round(&mut s, &mut now, 10 * MS, 0);
        }
        let w = s.cwnd / MSS as f64;
        assert!((150.0..=180.0).contains(&w), "{w}");
    }
}
