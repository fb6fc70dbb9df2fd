//! The fast max-min solver: the bottleneck algorithm with a queue of link fair shares.
//!
//! Cost per solve is O(F·h + F log F + U log U) for F flows of h hops over U used links: links
//! are gathered from the paths (never scanning the whole topology); a link crossed by one flow is
//! folded into that flow's effective cap (flows sorted by cap once) and never queued, which in
//! collective traffic removes most links (every host link of a ring step); the other links'
//! initial shares are heapified (O(U)), and a link whose share changed is re-queued only when it
//! reaches the front (lazy invalidation); the solve stops as soon as every flow is frozen. All
//! scratch lives in the solver and is reused; after the first solve of a given size, a solve
//! allocates nothing.
//!
//! Why the lazy queue is exact: freezing a flow at the current level can only raise the shares of
//! its other links (in exact arithmetic), so a queued key is a lower bound of its link's share.
//! Rounding can lower a share by an ulp; then the link is queued again at once. So every live link
//! has a queued key ≤ its share, and when the front key equals its link's freshly computed share,
//! that link is the true (share, first-use rank) minimum — the same link the reference picks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{effective_cap, fair_share, non_negative, Problem};

/// Reusable max-min solver; scratch is sized to the largest link count seen and reset only for
/// the links a solve touched.
#[derive(Debug, Default)]
pub struct MaxMinSolver {
    links: LinkState,
    /// Used links of the current solve, in order of first use.
    touched_links: Vec<u32>,
    /// The flows of each used link, increasing: `link_flows[link_flow_start[l]..]`.
    link_flow_start: Vec<u32>,
    link_flows: Vec<u32>,
    flow_frozen: Vec<bool>,
    /// Flows with a finite cap as (cap bits, flow), sorted: the next cap to freeze is in front.
    capped_flows: Vec<(u64, u32)>,
    /// Flows with a non-empty path not yet frozen.
    unfrozen_flows: usize,
    queue: ShareQueue,
}

/// Per-link state, indexed by global link index; meaningful only for touched links.
#[derive(Debug, Default)]
struct LinkState {
    /// Capacity minus the rates of the link's frozen flows.
    remaining_bps: Vec<f64>,
    /// Flows on the link not yet frozen; 0 for every untouched link between solves.
    unfrozen: Vec<u32>,
    /// Key of the link's most recent queue entry: a lower bound of its fair share.
    queued_share_bps: Vec<f64>,
    /// The link's position in the solve's order of first use (its tie rank).
    first_use: Vec<u32>,
}

/// A min-queue of (fair share, first-use rank) keys, built by heapify (O(U)) rather than a full sort, since
/// many links die (all their flows frozen elsewhere) before reaching the front and the solve stops
/// once every flow is frozen. Keys pack the share's bits (non-negative, so
/// they order like the number) above the link's first-use rank, so ties go to the link used
/// first.
#[derive(Debug, Default)]
struct ShareQueue {
    heap: BinaryHeap<Reverse<u128>>,
}

fn queue_key(share_bps: f64, rank: u32) -> u128 {
    (u128::from(share_bps.to_bits()) << 32) | u128::from(rank)
}

fn split_key(key: u128) -> (u64, u32) {
    ((key >> 32) as u64, key as u32)
}

impl ShareQueue {
    /// Replaces the contents with `keys` (re-using the heap's buffer: no allocation once warm).
    fn rebuild(&mut self, keys: impl Iterator<Item = u128>) {
        let mut buffer = std::mem::take(&mut self.heap).into_vec();
        buffer.clear();
        buffer.extend(keys.map(Reverse));
        self.heap = BinaryHeap::from(buffer);
    }

    fn peek(&self) -> Option<u128> {
        self.heap.peek().map(|r| r.0)
    }

    fn pop(&mut self) {
        self.heap.pop();
    }

    fn push(&mut self, share_bps: f64, rank: u32) {
        self.heap.push(Reverse(queue_key(share_bps, rank)));
    }
}

impl LinkState {
    fn grow_to(&mut self, links: usize) {
        if self.unfrozen.len() < links {
            self.remaining_bps.resize(links, 0.0);
            self.unfrozen.resize(links, 0);
            self.queued_share_bps.resize(links, 0.0);
            self.first_use.resize(links, 0);
        }
    }

    /// Charges a flow frozen at `rate` to each link of its path.
    fn charge(&mut self, path: &[u32], rate: f64, queue: &mut ShareQueue) {
        for &link in path {
            let l = link as usize;
            self.remaining_bps[l] -= rate;
            self.unfrozen[l] -= 1;
            if self.unfrozen[l] > 0 {
                let share = fair_share(self.remaining_bps[l], self.unfrozen[l]);
                if share < self.queued_share_bps[l] {
                    // Rounding lowered the share below its queued key: queue it again now.
                    self.queued_share_bps[l] = share;
                    queue.push(share, self.first_use[l]);
                }
            }
        }
    }
}

impl MaxMinSolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes each flow's max-min fair rate (bits/s) into `rates_bps` (len = flows); see the
    /// module docs of [`super`] for the exact rules. Bit-identical to [`super::solve_reference`].
    ///
    /// # Panics
    /// If `rates_bps` or `flow_cap_bps` does not have one entry per flow, or a path names a link
    /// outside `link_capacity_bps`.
    pub fn solve(&mut self, p: &Problem, rates_bps: &mut [f64]) {
        let flows = p.flow_count();
        p.assert_shape(rates_bps.len());
        self.gather(p);

        rates_bps.fill(f64::INFINITY);
        self.flow_frozen.clear();
        self.flow_frozen.resize(flows, false);
        self.capped_flows.clear();
        self.unfrozen_flows = 0;
        for (flow, &cap) in p.flow_cap_bps.iter().enumerate() {
            let path = p.links_of(flow);
            if path.is_empty() {
                // Shares nothing with anyone: its cap, or unlimited (the INFINITY already there).
                if cap < f64::INFINITY {
                    rates_bps[flow] = non_negative(cap);
                }
                self.flow_frozen[flow] = true;
                continue;
            }
            self.unfrozen_flows += 1;
            let cap = effective_cap(cap, path, &self.links.unfrozen, p.link_capacity_bps);
            if cap < f64::INFINITY {
                self.capped_flows.push((cap.to_bits(), flow as u32));
            }
        }
        self.capped_flows.sort_unstable();
        let mut next_capped = 0;

        // Stopping once every flow is frozen skips the links that died along the way.
        while self.unfrozen_flows > 0 {
            let bottleneck = self.front_link();
            while next_capped < self.capped_flows.len()
                && self.flow_frozen[self.capped_flows[next_capped].1 as usize]
            {
                next_capped += 1;
            }
            let tightest_cap = self.capped_flows.get(next_capped).copied();
            match (tightest_cap, bottleneck) {
                (Some((cap_bits, flow)), None) => {
                    next_capped += 1;
                    self.freeze(p, flow as usize, f64::from_bits(cap_bits), rates_bps);
                }
                (Some((cap_bits, flow)), Some((share, _))) if cap_bits <= share.to_bits() => {
                    next_capped += 1;
                    self.freeze(p, flow as usize, f64::from_bits(cap_bits), rates_bps);
                }
                // Every flow still rising is unlimited (and INFINITY - INFINITY would be NaN).
                (_, Some((share, _))) if share == f64::INFINITY => break,
                (_, Some((share, link))) => {
                    self.queue.pop();
                    self.freeze_link(p, link, share, rates_bps);
                }
                (None, None) => break,
            }
        }
    }

    /// Finds the used links, counts their flows, lists each link's flows (increasing) and queues
    /// their initial shares. Resets the previous solve's links first.
    fn gather(&mut self, p: &Problem) {
        let flows = p.flow_count();
        for &link in &self.touched_links {
            self.links.unfrozen[link as usize] = 0;
        }
        self.touched_links.clear();
        self.links.grow_to(p.link_capacity_bps.len());
        if self.link_flow_start.len() < p.link_capacity_bps.len() {
            self.link_flow_start.resize(p.link_capacity_bps.len(), 0);
        }

        let unfrozen = &mut self.links.unfrozen;
        for flow in 0..flows {
            for &link in p.links_of(flow) {
                let count = &mut unfrozen[link as usize];
                if *count == 0 {
                    self.links.first_use[link as usize] = self.touched_links.len() as u32;
                    self.touched_links.push(link);
                }
                *count += 1;
            }
        }
        // Each link's slice ends where the next begins; filling backwards over flows leaves every
        // start at its slice's first entry and every slice in increasing flow order.
        let mut end = 0_u32;
        for &link in &self.touched_links {
            end += unfrozen[link as usize];
            self.link_flow_start[link as usize] = end;
        }
        self.link_flows.clear();
        self.link_flows.resize(end as usize, 0);
        for flow in (0..flows).rev() {
            for &link in p.links_of(flow) {
                let start = &mut self.link_flow_start[link as usize];
                *start -= 1;
                self.link_flows[*start as usize] = flow as u32;
            }
        }

        for &link in &self.touched_links {
            let l = link as usize;
            let capacity = p.link_capacity_bps[l];
            self.links.remaining_bps[l] = capacity;
            self.links.queued_share_bps[l] = fair_share(capacity, unfrozen[l]);
        }
        // A link with a single flow is that flow's cap (see `effective_cap`): it never needs queuing.
        let (queued_share_bps, unfrozen) = (&self.links.queued_share_bps, &self.links.unfrozen);
        self.queue.rebuild(
            self.touched_links
                .iter()
                .filter(|&&link| unfrozen[link as usize] > 1)
                .map(|&link| {
                    let l = link as usize;
                    queue_key(queued_share_bps[l], self.links.first_use[l])
                }),
        );
    }

    /// The live link with the smallest (fair share, first-use rank), re-queuing stale keys on the
    /// way.
    /// Leaves it at the front of the queue.
    fn front_link(&mut self) -> Option<(f64, u32)> {
        while let Some(key) = self.queue.peek() {
            let (key_bits, rank) = split_key(key);
            let link = self.touched_links[rank as usize];
            let l = link as usize;
            let unfrozen = self.links.unfrozen[l];
            if unfrozen == 0 {
                self.queue.pop();
                continue;
            }
            let share = fair_share(self.links.remaining_bps[l], unfrozen);
            if share.to_bits() == key_bits {
                return Some((share, link));
            }
            debug_assert!(
                share.to_bits() > key_bits,
                "queued share above the link's share"
            );
            self.queue.pop();
            self.links.queued_share_bps[l] = share;
            self.queue.push(share, rank);
        }
        None
    }

    /// Freezes every unfrozen flow of `link` at `share`, in increasing flow index.
    fn freeze_link(&mut self, p: &Problem, link: u32, share: f64, rates_bps: &mut [f64]) {
        let l = link as usize;
        let mut i = self.link_flow_start[l] as usize;
        while self.links.unfrozen[l] > 0 {
            let flow = self.link_flows[i] as usize;
            i += 1;
            if !self.flow_frozen[flow] {
                self.freeze(p, flow, share, rates_bps);
            }
        }
    }

    fn freeze(&mut self, p: &Problem, flow: usize, rate: f64, rates_bps: &mut [f64]) {
        rates_bps[flow] = rate;
        self.flow_frozen[flow] = true;
        self.unfrozen_flows -= 1;
        self.links.charge(p.links_of(flow), rate, &mut self.queue);
    }
}
