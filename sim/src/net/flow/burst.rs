//! Shapers' token buckets: a transfer that starts on idle links sends its first bytes at once.
//!
//! A token-bucket shaper (tc's htb or tbf) lets a link's `burst` bytes through at line rate
//! when its bucket is full, then holds the link to its rate. The testbed gives every shaped
//! link a bucket of 2 ms of its rate, so a 256 KiB send from idle hosts finishes ~2 ms sooner
//! than its bytes over the rate: measured, a parameter-server round of 256 KiB on the star
//! (push, then pull) took 61.5 ms where max-min at the link rate gives 65.8.
//!
//! The model, per link with a bucket (depth = the profile's `shaper_burst` seconds at the
//! link's payload rate): a token level. While flows cross the link it does not refill (a link
//! carrying traffic runs at its rate and spends its tokens as they come); from the moment its
//! last flow ends it refills at the link's rate up to its depth. A batch that starts gets, per
//! flow, a head start of bytes delivered at once: the least, over the bucketed links of its
//! path, of that link's tokens water-filled over the batch's flows that cross it (none takes
//! more than it sends). What the flows take is spent; what they leave stays, so a 40-byte
//! request spends 40 bytes of it, as measured (`suite.py shaper_gap --probes`: 48 B and 1 KiB
//! messages before a 64 KiB send left it 0.84-0.87 ms, 0.89 without). Batches that start on
//! a link already carrying traffic get none.
//!
//! One-packet messages and the shaper's debt. htb lets a packet go whenever its level is not
//! below zero and charges all of it, and TCP hands it GSO packets of up to the profile's
//! `shaper_packet` bytes (65,160 B on the testbed: 45 segments). So a message no larger, on
//! links idle and out of debt, passes whole: it is delivered after its path latency and leaves
//! each shaped link of its path that much poorer, below zero if it took more than the bucket
//! held. Of the flows of one batch, the first on a link passes whole there and the others take
//! what is left. A batch due to start on an idle link in debt waits until the debt is paid (an
//! instant computed from the link's state alone, so the batches waiting on one link start in
//! the order posted; checked again then: the one before may have left a debt of its own),
//! and while it waits its bytes count as queued at its first link for sends posted after it
//! (module `fifo`). It waits hop by hop, as a packet crosses FIFO queues: the links of its
//! path before the first one in debt it has passed (kept in the batch), and a debt that a
//! message behind it leaves there later does not hold it back; at its start it passes whole
//! over them even if they carry flows by then (what it took there is charged as it starts).
//! Without this a 48-byte notification waiting at its receiver's downlink, re-checked when
//! that was paid, found its own uplink in debt from a half sent after it, and so on: gloo's
//! 256 KiB ring all_gather on the 100 Mbit/s star played +25.3% (+6.0% hop by hop). Captured
//! (`suite.py capture_mpi`, tcpdump at the hosts): every eager message of OpenMPI's 6-rank ring
//! all-reduce of 256 KiB on the star left as one 43,7xx-byte packet and the connection's next
//! one 1.83 ms later, its bytes at the rate; a ring of S steps takes S - 1 messages at the
//! rate, not S. Where the factors keep TCP's windows (module `window`), a message passes whole
//! only if its connection's congestion window covers it too. What is not modelled: a link
//! carrying less than its rate refilling while busy, a bucket's bytes taking time at line
//! rate, a message cut into a first packet of its window and the rest (one beyond its window
//! streams), and pacing.

use super::{Batch, FlowModel};
use crate::engine::SimTime;

/// A debt this small is paid: a wait computed to the picosecond leaves a rounding residue.
const DEBT_TOLERANCE_BYTES: f64 = 1.0;

/// Per-link token buckets and what the model needs to know of their state.
#[derive(Debug, Default)]
pub(super) struct Buckets {
    /// Per link: bucket depth in payload bytes (0: no shaper bucket), and refill rate.
    depth_bytes: Vec<f64>,
    refill_bytes_per_s: Vec<f64>,
    /// Per link: flows crossing it now (a path crossing it twice counts twice).
    flows_on: Vec<u32>,
    /// Per link: the tokens it had when it last went idle, or that the last batch to start
    /// on it from idle left (what its flows did not take); full at first.
    level_bytes: Vec<f64>,
    /// Per link, while no flow crosses it: since when, in seconds (-inf: since before the run,
    /// a full bucket).
    idle_since_secs: Vec<f64>,
    /// Per link, while flows cross it: since when, in seconds. Batches that start at that
    /// same instant still find what the earlier ones left (the shaper serves them in turn).
    busy_since_secs: Vec<f64>,
    /// Scratch: per link, the starting batch's demands on it (flow index, bytes wanted).
    starting: Vec<Vec<(u32, f64)>>,
    starting_links: Vec<u32>,
    /// Scratch: per link, the most a starting flow takes of its tokens.
    cap_bytes: Vec<f64>,
    /// Per link: the largest message its shaper passes whole, as one packet (0: none).
    packet_bytes: Vec<f64>,
    /// Scratch: per link, whether a starting flow passes whole there, and its bytes.
    whole_on: Vec<bool>,
    whole_bytes: Vec<f64>,
}

impl Buckets {
    /// Buckets of `burst_secs[l]` seconds at `capacity_bps[l]` (payload bits per second), full
    /// at time zero, whose shapers pass messages of up to `packet_bytes[l]` whole.
    pub(super) fn new(burst_secs: &[f64], packet_bytes: &[f64], capacity_bps: &[f64]) -> Self {
        if burst_secs.iter().all(|&s| s <= 0.0) {
            return Buckets::default();
        }
        let refill: Vec<f64> = capacity_bps.iter().map(|&c| c / 8.0).collect();
        let n = capacity_bps.len();
        let depth_bytes: Vec<f64> = burst_secs
            .iter()
            .zip(&refill)
            .map(|(&s, &r)| if r.is_finite() { s.max(0.0) * r } else { 0.0 })
            .collect();
        Buckets {
            level_bytes: depth_bytes.clone(),
            depth_bytes,
            refill_bytes_per_s: refill,
            flows_on: vec![0; n],
            idle_since_secs: vec![f64::NEG_INFINITY; n],
            busy_since_secs: vec![f64::NEG_INFINITY; n],
            starting: vec![Vec::new(); n],
            starting_links: Vec::new(),
            cap_bytes: vec![0.0; n],
            packet_bytes: packet_bytes.to_vec(),
            whole_on: vec![false; n],
            whole_bytes: vec![0.0; n],
        }
    }

    pub(super) fn enabled(&self) -> bool {
        !self.depth_bytes.is_empty()
    }

    /// Tokens (payload bytes) on link `l` at `now`: what it kept plus what refilled since it
    /// went idle, up to its depth; while flows cross it, none, but for batches starting at
    /// the instant the first did (what that one left).
    fn tokens(&self, l: usize, now: SimTime) -> f64 {
        let depth = self.depth_bytes[l];
        let now = now.as_secs_f64();
        if depth <= 0.0 {
            return 0.0;
        }
        if self.flows_on[l] > 0 {
            return if self.busy_since_secs[l] == now {
                self.level_bytes[l]
            } else {
                0.0
            };
        }
        let idle_secs = now - self.idle_since_secs[l];
        depth.min(self.level_bytes[l] + self.refill_bytes_per_s[l] * idle_secs)
    }

    /// The head start of each flow of a batch starting at `now` (flows given by their paths
    /// and the bytes they have to send; `passed`: links it crossed while it waited for a debt
    /// further on), written into `head_bytes`; counts the flows on their links and spends
    /// what they take.
    ///
    /// An idle link's tokens go to the flows starting on it as max-min does rates: none takes
    /// more than it sends, the others share the rest evenly (a 40-byte request takes 40 bytes
    /// and leaves the burst to the data beside it or after it). A flow's head start is the
    /// least of its links' shares; what the flows of a link do not take stays in its bucket.
    pub(super) fn start<'a>(
        &mut self,
        now: SimTime,
        flows: impl Iterator<Item = (&'a [u32], f64, f64)> + Clone,
        passed: &[u32],
        head_bytes: &mut Vec<f64>,
    ) {
        head_bytes.clear();
        // One-packet messages: on each link, the first starting idle and out of debt passes
        // whole (the shaper's level may go below zero).
        let mut whole = Vec::new();
        for (path, bytes, whole_max) in flows.clone() {
            let mut bucketed = path
                .iter()
                .map(|&l| l as usize)
                .filter(|&l| self.depth_bytes[l] > 0.0)
                .peekable();
            let passes = bucketed.peek().is_some()
                && bucketed.all(|l| {
                    bytes <= self.packet_bytes[l].min(whole_max)
                        && !self.whole_on[l]
                        && (passed.contains(&(l as u32))
                            || (self.flows_on[l] == 0
                                && self.tokens(l, now) >= -DEBT_TOLERANCE_BYTES))
                });
            if passes {
                for &l in path {
                    self.whole_on[l as usize] = self.depth_bytes[l as usize] > 0.0;
                }
            }
            whole.push(passes);
        }
        for (i, (path, bytes, _)) in flows.clone().enumerate() {
            for &l in path {
                let l = l as usize;
                if self.depth_bytes[l] > 0.0 {
                    if self.starting[l].is_empty() && self.whole_bytes[l] == 0.0 {
                        self.starting_links.push(l as u32);
                    }
                    if whole[i] {
                        self.whole_bytes[l] += bytes;
                    } else {
                        self.starting[l].push((i as u32, bytes));
                    }
                }
            }
        }
        // Each link's tokens water-filled over its starting flows' bytes: the most any of
        // them takes there (infinite where every flow's bytes fit).
        for &l in &self.starting_links {
            let l = l as usize;
            let mut left = (self.tokens(l, now) - self.whole_bytes[l]).max(0.0);
            let wants = &mut self.starting[l];
            wants.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut cap = f64::INFINITY;
            for (k, &(_, want)) in wants.iter().enumerate() {
                let even = left / (wants.len() - k) as f64;
                if want > even {
                    cap = even;
                    break;
                }
                left -= want;
            }
            self.cap_bytes[l] = cap;
        }
        for (i, (path, bytes, _)) in flows.clone().enumerate() {
            if whole[i] {
                head_bytes.push(bytes);
                continue;
            }
            let head = path
                .iter()
                .map(|&l| l as usize)
                .filter(|&l| self.depth_bytes[l] > 0.0)
                .map(|l| self.cap_bytes[l])
                .fold(bytes, f64::min);
            head_bytes.push(head.max(0.0));
        }
        // What each link keeps: its tokens less the heads its flows took.
        for &l in &self.starting_links {
            let l = l as usize;
            let taken: f64 = self.whole_bytes[l]
                + self.starting[l]
                    .iter()
                    .map(|&(f, _)| head_bytes[f as usize])
                    .sum::<f64>();
            let tokens = self.tokens(l, now);
            if self.whole_on[l] {
                self.level_bytes[l] = tokens - taken;
            } else if tokens > 0.0 {
                self.level_bytes[l] = (tokens - taken).max(0.0);
            }
        }
        for &l in &self.starting_links {
            self.starting[l as usize].clear();
            self.whole_on[l as usize] = false;
            self.whole_bytes[l as usize] = 0.0;
        }
        self.starting_links.clear();
        for (path, _, _) in flows {
            for &l in path {
                let l = l as usize;
                if self.depth_bytes[l] > 0.0 {
                    if self.flows_on[l] == 0 {
                        self.busy_since_secs[l] = now.as_secs_f64();
                    }
                    self.flows_on[l] += 1;
                }
            }
        }
    }

    /// A flow over `path` stopped sending at `now`: a link it leaves empty starts refilling
    /// from what it kept.
    pub(super) fn finish(&mut self, path: &[u32], now: SimTime) {
        for &l in path {
            if self.depth_bytes[l as usize] <= 0.0 {
                continue;
            }
            let on = &mut self.flows_on[l as usize];
            *on = on.saturating_sub(1);
            if *on == 0 {
                self.idle_since_secs[l as usize] = now.as_secs_f64();
            }
        }
    }
}

impl Buckets {
    /// When the batch over `paths` may go on, if a link owes a debt at `now`: per path, the
    /// first link in debt that the batch has not `passed` (the links before it are added to
    /// `passed`: it crossed them); the latest of those. The instant is the link's, computed
    /// from its state alone (when it went idle and what it owed then), so batches waiting on
    /// one link are due at the same instant and start in the order they were posted (the
    /// event queue keeps that order).
    pub(super) fn debt_paid_at<'a>(
        &self,
        now: SimTime,
        paths: impl Iterator<Item = &'a [u32]>,
        passed: &mut Vec<u32>,
    ) -> Option<SimTime> {
        let mut paid: Option<SimTime> = None;
        for path in paths {
            // The links this path crossed stay passed only if it waits further on.
            let kept = passed.len();
            let mut blocked = false;
            for &l in path {
                if passed.contains(&l) {
                    continue;
                }
                if let Some(at) = self.link_debt_paid_at(l as usize, now) {
                    paid = Some(paid.map_or(at, |p| p.max(at)));
                    blocked = true;
                    break;
                }
                passed.push(l);
            }
            if !blocked {
                passed.truncate(kept);
            }
        }
        paid
    }

    /// When link `l`'s debt is paid, if it is idle and owes one at `now`.
    fn link_debt_paid_at(&self, l: usize, now: SimTime) -> Option<SimTime> {
        // A link that carries flows has no debt to wait for, unless they started at this very
        // instant (a message that passed whole and left it in debt).
        let now_secs = now.as_secs_f64();
        let busy = self.flows_on[l] > 0 && self.busy_since_secs[l] != now_secs;
        if self.depth_bytes[l] <= 0.0 || busy || self.tokens(l, now) >= -DEBT_TOLERANCE_BYTES {
            return None;
        }
        let owed_since = if self.flows_on[l] > 0 {
            now_secs
        } else {
            self.idle_since_secs[l]
        };
        let at_secs = owed_since - self.level_bytes[l] / self.refill_bytes_per_s[l];
        Some(SimTime::from_ps((at_secs * 1e12).ceil() as u64).max(now))
    }
}

impl FlowModel {
    /// Gives the flows of a batch starting now their head starts from the buckets of idle
    /// links: those bytes leave at once (and count on every link of the flow's path).
    pub(super) fn take_head_start(&mut self, slot: u32, now: SimTime) {
        let Batch {
            pattern,
            live,
            remaining,
            factor_signature,
            push_left,
            debt_passed,
            ..
        } = &mut self.batches[slot as usize];
        let pat = &self.patterns[*pattern as usize];
        self.whole_max.clear();
        for &f in live.iter() {
            let max = self.windows.whole_max_bytes(pat.path(f as usize), now);
            self.whole_max.push(max);
        }
        let flows = live
            .iter()
            .zip(&self.whole_max)
            .map(|(&f, &max)| (pat.path(f as usize), remaining[f as usize], max));
        self.buckets
            .start(now, flows, debt_passed, &mut self.head_bytes);
        let mut signature = 0u64;
        for (&f, &head) in live.iter().zip(&self.head_bytes) {
            let head = head.min(remaining[f as usize]);
            if head <= 0.0 {
                continue;
            }
            remaining[f as usize] -= head;
            if let Some(left) = push_left.get_mut(f as usize) {
                *left -= head;
            }
            for &l in pat.path(f as usize) {
                self.link_bytes[l as usize] += head;
            }
            signature = signature.rotate_left(5) ^ head.to_bits() ^ u64::from(f);
        }
        // Batches with other head starts are other states (solutions and trajectories are
        // keyed by it).
        *factor_signature ^= signature.rotate_left(17);
    }
}
