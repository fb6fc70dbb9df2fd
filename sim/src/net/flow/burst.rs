//! Shapers' token buckets: a transfer that starts on idle links sends its first bytes at once.
//!
//! A token-bucket shaper (tc's htb or tbf) lets a link's `burst` bytes through at line rate
//! when its bucket is full, then holds the link to its rate. The testbed gives every shaped
//! link a bucket of 2 ms of its rate, so a 256 KiB send from idle hosts finishes ~2 ms sooner
//! than its bytes over the rate: measured, a parameter-server round of 256 KiB on the star
//! (push, then pull) took 61.5 ms where max-min at the link rate gives 65.8.
//!
//! The model, per link with a bucket (depth = the profile's `shaper_burst` seconds at the
//! link's payload rate): while flows cross the link its bucket is taken as empty (a link
//! carrying traffic runs at its rate and spends its tokens); from the moment its last flow
//! ends it refills at the link's rate up to its depth. A batch that starts gets, per flow, a
//! head start of bytes delivered at once: the least, over the bucketed links of its path, of
//! that link's tokens shared evenly by the batch's flows that cross it. The tokens are then
//! spent. Batches that start on a link already carrying traffic get none. What is not
//! modelled: a link carrying less than its rate refilling while busy, and a bucket's bytes
//! taking time at line rate.

use super::{Batch, FlowModel};
use crate::engine::SimTime;

/// Per-link token buckets and what the model needs to know of their state.
#[derive(Debug, Default)]
pub(super) struct Buckets {
    /// Per link: bucket depth in payload bytes (0: no shaper bucket), and refill rate.
    depth_bytes: Vec<f64>,
    refill_bytes_per_s: Vec<f64>,
    /// Per link: flows crossing it now (a path crossing it twice counts twice).
    flows_on: Vec<u32>,
    /// Per link, while no flow crosses it: since when, in seconds (-inf: since before the run,
    /// a full bucket).
    idle_since_secs: Vec<f64>,
    /// Scratch: per link, how many flows of the starting batch cross it.
    starting: Vec<u32>,
    starting_links: Vec<u32>,
}

impl Buckets {
    /// Buckets of `burst_secs[l]` seconds at `capacity_bps[l]` (payload bits per second); full
    /// at time zero.
    pub(super) fn new(burst_secs: &[f64], capacity_bps: &[f64]) -> Self {
        if burst_secs.iter().all(|&s| s <= 0.0) {
            return Buckets::default();
        }
        let refill: Vec<f64> = capacity_bps.iter().map(|&c| c / 8.0).collect();
        let n = capacity_bps.len();
        Buckets {
            depth_bytes: burst_secs
                .iter()
                .zip(&refill)
                .map(|(&s, &r)| if r.is_finite() { s.max(0.0) * r } else { 0.0 })
                .collect(),
            refill_bytes_per_s: refill,
            flows_on: vec![0; n],
            idle_since_secs: vec![f64::NEG_INFINITY; n],
            starting: vec![0; n],
            starting_links: Vec::new(),
        }
    }

    pub(super) fn enabled(&self) -> bool {
        !self.depth_bytes.is_empty()
    }

    /// Tokens (payload bytes) on link `l` at `now`.
    fn tokens(&self, l: usize, now: SimTime) -> f64 {
        let depth = self.depth_bytes[l];
        if depth <= 0.0 || self.flows_on[l] > 0 {
            return 0.0;
        }
        let idle_secs = now.as_secs_f64() - self.idle_since_secs[l];
        depth.min(self.refill_bytes_per_s[l] * idle_secs)
    }

    /// The head start of each flow of a batch starting at `now` (flows given by their paths),
    /// written into `head_bytes`; spends the tokens and counts the flows on their links.
    pub(super) fn start<'a>(
        &mut self,
        now: SimTime,
        paths: impl Iterator<Item = &'a [u32]> + Clone,
        head_bytes: &mut Vec<f64>,
    ) {
        head_bytes.clear();
        for path in paths.clone() {
            for &l in path {
                let l = l as usize;
                if self.depth_bytes[l] > 0.0 {
                    if self.starting[l] == 0 {
                        self.starting_links.push(l as u32);
                    }
                    self.starting[l] += 1;
                }
            }
        }
        for path in paths.clone() {
            let head = path
                .iter()
                .map(|&l| l as usize)
                .filter(|&l| self.depth_bytes[l] > 0.0)
                .map(|l| self.tokens(l, now) / f64::from(self.starting[l]))
                .fold(f64::INFINITY, f64::min);
            head_bytes.push(if head.is_finite() { head } else { 0.0 });
        }
        for &l in &self.starting_links {
            self.starting[l as usize] = 0;
        }
        self.starting_links.clear();
        for path in paths {
            for &l in path {
                if self.depth_bytes[l as usize] > 0.0 {
                    self.flows_on[l as usize] += 1;
                }
            }
        }
    }

    /// A flow over `path` stopped sending at `now`: a link it leaves empty starts refilling.
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

impl FlowModel {
    /// Gives the flows of a batch starting now their head starts from the buckets of idle
    /// links: those bytes leave at once (and count on every link of the flow's path).
    pub(super) fn take_head_start(&mut self, slot: u32, now: SimTime) {
        let Batch {
            pattern,
            live,
            remaining,
            factor_signature,
            ..
        } = &mut self.batches[slot as usize];
        let pat = &self.patterns[*pattern as usize];
        let paths = live.iter().map(|&f| pat.path(f as usize));
        self.buckets.start(now, paths, &mut self.head_bytes);
        let mut signature = 0u64;
        for (&f, &head) in live.iter().zip(&self.head_bytes) {
            let head = head.min(remaining[f as usize]);
            if head <= 0.0 {
                continue;
            }
            remaining[f as usize] -= head;
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
