//! Max-min over the parts of a problem that share no link, each distinct part solved once.
//!
//! Flows that share no link, directly or through other flows, cannot change each other's rates:
//! a problem is as many independent problems as it has link-connected parts. Training steps
//! make many parts that are the same problem on other links: a data-parallel all-reduce fused
//! over the eight rails of a rail-optimized fabric is eight copies of one rail's flows, and a
//! pipelined tree re-solves them all whenever one of its steps starts or ends, most parts
//! unchanged since the last time. [`SplitSolver`] finds the parts (union-find over links),
//! looks each up among the parts it solved before, and solves with [`MaxMinSolver`] only the
//! parts it has not seen.
//!
//! A part matches one seen before when it lists the same flows in the same order (caps, path
//! lengths), over links numbered by first use with the same capacities. The bottleneck
//! algorithm breaks ties between equal shares by that same first-use order (not by link
//! index), so a match's rates are exactly what solving it would give, whatever its links'
//! indices: the same tree step on eight rails, each with its own ECMP choices, is one part
//! solved once. (Until 2026-11-26 ties went to the lower link index, and a match also had to
//! keep its links' index order: in a 16,384-GPU GPT-1.3B step 168,000 lookups found an equal
//! part in another order and solved it again.) And solving a part alone performs the same
//! floating-point operations in the same order as solving it inside the whole problem: each
//! step of the algorithm on one part depends only on that part's shares and caps, and its
//! links' first-use order is the same inside the whole. So the rates are bit-identical to
//! [`MaxMinSolver`] on the whole problem; the tests check it against the reference solver.
//!
//! Finding and encoding the parts costs O(F·h) for F flows of h hops, a fraction of a solve of
//! the same flows; problems under [`SplitSolver::MIN_FLOWS`] flows, or of a single part, go to
//! the solver directly, and a part is encoded only when a part of its shape (flows, hops) came
//! before, so a problem of distinct parts (a ring on randomly placed GPUs: 67 parts, none alike)
//! costs what the solver alone does (`dtsim bench`, case (a)). Seen parts are kept up to [`SplitSolver::MAX_SEEN_WORDS`] words, then
//! forgotten all at once (a pure function of the solves so far: runs stay deterministic).
//!
//! A caller that re-solves a problem after a change on a few links ([`SplitSolver::solve_changed`]:
//! the flow model, when a batch of a large component starts or loses flows) says which links
//! changed and what rate each flow had: a part that crosses no changed link is the part it was,
//! and takes its old rates without being encoded or looked up. Only finding the parts is paid
//! for it.

use std::collections::{BTreeMap, BTreeSet};

use super::{cap_within, MaxMinSolver, Problem};

const NONE: u32 = u32::MAX;

/// A part solved before: where its encoding and rates lie in the arenas.
#[derive(Debug, Clone, Copy)]
struct Seen {
    enc: (usize, usize),
    rates: (usize, usize),
    /// The next seen part with the same hash, or `NONE`.
    next: u32,
}

/// A max-min solver that splits a problem into link-disjoint parts and solves only the parts
/// it has not solved before. All scratch is reused between solves.
#[derive(Debug, Default)]
pub struct SplitSolver {
    inner: MaxMinSolver,
    /// Problems with fewer flows are solved whole ([`SplitSolver::MIN_FLOWS`] unless a test
    /// sets it).
    whole_below: Option<usize>,
    /// Union-find over links (global index): parent, `NONE` for links this solve does not use.
    parent: Vec<u32>,
    /// Per link: the part whose root it is, or its local number while a part is encoded.
    link_scratch: Vec<u32>,
    touched: Vec<u32>,
    /// Flows of each part, in flow order: `part_flows[part_start[p]..part_start[p + 1]]`.
    part_start: Vec<u32>,
    part_flows: Vec<u32>,
    flow_part: Vec<u32>,
    /// Per part: whether it crosses a changed link (`solve_changed`), and the changed links met
    /// while finding the parts.
    part_changed: Vec<bool>,
    changed_links: Vec<u32>,
    /// The part being looked up: its encoding and its links by local number.
    enc: Vec<u64>,
    part_links: Vec<u32>,
    /// Shapes (flows, hops) of the parts met so far: a part is encoded from its shape's second.
    shapes: BTreeSet<(u32, u32)>,
    // Parts seen: first by hash, then chained; their words in three arenas.
    seen_by_hash: BTreeMap<u64, u32>,
    seen: Vec<Seen>,
    seen_enc: Vec<u64>,
    seen_rates: Vec<f64>,
    // The sub-problem of one part, its links numbered by first use: their global indices and
    // capacities, and its flows' paths in local numbers.
    sub_link_ids: Vec<u32>,
    sub_link_caps: Vec<f64>,
    sub_offsets: Vec<u32>,
    sub_links: Vec<u32>,
    sub_caps: Vec<f64>,
    sub_rates: Vec<f64>,
    /// Parts solved, and parts that took the rates of a part seen before, over the solver's
    /// life.
    pub parts_solved: u64,
    pub parts_reused: u64,
    /// Parts that crossed no changed link and kept their rates (`solve_changed`).
    pub parts_kept: u64,
}

impl SplitSolver {
    /// Below this many flows a problem is solved whole.
    pub const MIN_FLOWS: usize = 64;
    /// Words (encodings and rates) kept for seen parts: 64 MiB.
    pub const MAX_SEEN_WORDS: usize = 8 << 20;

    pub fn new() -> Self {
        Self::default()
    }

    /// Splits problems of any size (tests: small problems exercise the splitting).
    #[cfg(test)]
    pub(super) fn splitting_every_problem(mut self) -> Self {
        self.whole_below = Some(0);
        self
    }

    /// Writes each flow's max-min fair rate into `rates_bps`, bit-identical to
    /// [`MaxMinSolver::solve`] on the whole problem.
    pub fn solve(&mut self, p: &Problem, rates_bps: &mut [f64]) {
        self.solve_parts(p, None, rates_bps);
    }

    /// [`SplitSolver::solve`] for a problem that differs from one solved before only on the
    /// links flagged in `changed_links` (indexed by link): a part that crosses none of them and
    /// whose flows all have a rate in `previous_bps` (NaN: a flow new since) takes those
    /// rates, which are what solving it again would give.
    pub fn solve_changed(
        &mut self,
        p: &Problem,
        previous_bps: &[f64],
        changed_links: &[bool],
        rates_bps: &mut [f64],
    ) {
        p.assert_shape(previous_bps.len());
        assert_eq!(
            changed_links.len(),
            p.link_capacity_bps.len(),
            "one changed flag per link"
        );
        self.solve_parts(p, Some((previous_bps, changed_links)), rates_bps);
    }

    fn solve_parts(
        &mut self,
        p: &Problem,
        previous: Option<(&[f64], &[bool])>,
        rates_bps: &mut [f64],
    ) {
        let flows = p.flow_count();
        p.assert_shape(rates_bps.len());
        if flows < self.whole_below.unwrap_or(Self::MIN_FLOWS) {
            self.inner.solve(p, rates_bps);
            return;
        }
        let parts = self.find_parts(p, previous.map(|(_, changed)| changed));
        if parts <= 1 {
            self.inner.solve(p, rates_bps);
            return;
        }
        // Flows with no link share nothing: their cap, or unlimited (as the solver gives).
        for (flow, rate) in rates_bps.iter_mut().enumerate() {
            if self.flow_part[flow] == NONE {
                *rate = cap_within(
                    p.flow_cap_bps[flow],
                    std::iter::empty(),
                    p.link_capacity_bps,
                );
            }
        }
        if self.seen_enc.len() + self.seen_rates.len() > Self::MAX_SEEN_WORDS {
            self.forget_seen();
        }
        for part in 0..parts {
            if let Some((previous_bps, _)) = previous {
                if !self.part_changed[part] && self.keep_previous(part, previous_bps, rates_bps) {
                    self.parts_kept += 1;
                    continue;
                }
            }
            if let [flow] = *self.flows_of(part) {
                let path = p.links_of(flow as usize);
                if !has_repeated_link(path) {
                    rates_bps[flow as usize] = lone_flow_rate(p, flow as usize);
                    self.parts_solved += 1;
                    continue;
                }
            }
            // A part whose shape (flows, hops) never came before is solved without being
            // encoded: most parts of a problem with no copies are unique, and encoding them
            // would only cost. Its shape is noted, so a second part of that shape is encoded
            // and kept for the ones after it.
            let shape = self.shape_of(p, part);
            if self.shapes.insert(shape) {
                self.parts_solved += 1;
                self.solve_part(p, part, rates_bps);
                continue;
            }
            self.encode(p, part);
            let hash = hash_words(&self.enc);
            match self.find_seen(hash) {
                Some(seen) => {
                    self.parts_reused += 1;
                    let rates = &self.seen_rates[seen.rates.0..seen.rates.1];
                    for (&flow, &rate) in self.flows_of(part).iter().zip(rates) {
                        rates_bps[flow as usize] = rate;
                    }
                }
                None => {
                    self.parts_solved += 1;
                    self.solve_part(p, part, rates_bps);
                    self.remember(hash);
                }
            }
        }
    }

    /// Writes a part's previous rates; false (leaving some unwritten) when a flow has none.
    fn keep_previous(&self, part: usize, previous_bps: &[f64], rates_bps: &mut [f64]) -> bool {
        for &flow in self.flows_of(part) {
            let rate = previous_bps[flow as usize];
            if rate.is_nan() {
                return false;
            }
            rates_bps[flow as usize] = rate;
        }
        true
    }

    /// Groups the flows into link-connected parts (numbered in order of their first flow),
    /// flagging those that cross a link of `changed`; returns how many.
    fn find_parts(&mut self, p: &Problem, changed: Option<&[bool]>) -> usize {
        self.changed_links.clear();
        let note_changed = |link: u32, changed_links: &mut Vec<u32>| {
            if changed.is_some_and(|c| c[link as usize]) {
                changed_links.push(link);
            }
        };
        if self.parent.len() < p.link_capacity_bps.len() {
            self.parent.resize(p.link_capacity_bps.len(), NONE);
            self.link_scratch.resize(p.link_capacity_bps.len(), NONE);
        }
        for flow in 0..p.flow_count() {
            let path = p.links_of(flow);
            let Some(&first) = path.first() else {
                continue;
            };
            if self.parent[first as usize] == NONE {
                self.parent[first as usize] = first;
                self.touched.push(first);
                note_changed(first, &mut self.changed_links);
            }
            let mut root = self.find(first);
            for &link in &path[1..] {
                if self.parent[link as usize] == NONE {
                    // A link first seen here joins the flow's set directly.
                    self.parent[link as usize] = root;
                    self.touched.push(link);
                    note_changed(link, &mut self.changed_links);
                    continue;
                }
                let other = self.find(link);
                if other != root {
                    let (lo, hi) = (root.min(other), root.max(other));
                    self.parent[hi as usize] = lo;
                    root = lo;
                }
            }
        }
        self.number_parts(p)
    }

    /// Numbers the parts, lists their flows, and resets the union-find.
    fn number_parts(&mut self, p: &Problem) -> usize {
        let flows = p.flow_count();
        self.flow_part.clear();
        self.flow_part.resize(flows, NONE);
        let mut parts = 0u32;
        for flow in 0..flows {
            if let Some(&first) = p.links_of(flow).first() {
                let root = self.find(first) as usize;
                if self.link_scratch[root] == NONE {
                    self.link_scratch[root] = parts;
                    parts += 1;
                }
                self.flow_part[flow] = self.link_scratch[root];
            }
        }
        self.part_changed.clear();
        self.part_changed.resize(parts as usize, false);
        for i in 0..self.changed_links.len() {
            let root = self.find(self.changed_links[i]) as usize;
            self.part_changed[self.link_scratch[root] as usize] = true;
        }
        for &link in &self.touched {
            self.parent[link as usize] = NONE;
            self.link_scratch[link as usize] = NONE;
        }
        self.touched.clear();

        self.part_start.clear();
        self.part_start.resize(parts as usize + 2, 0);
        for &part in &self.flow_part {
            if part != NONE {
                self.part_start[part as usize + 2] += 1;
            }
        }
        for i in 2..parts as usize + 2 {
            self.part_start[i] += self.part_start[i - 1];
        }
        // part_start[p + 1] is where part p's next flow goes; filled, it is p's end.
        self.part_flows.clear();
        self.part_flows
            .resize(self.part_start[parts as usize + 1] as usize, 0);
        for (flow, &part) in self.flow_part.iter().enumerate() {
            if part != NONE {
                let at = &mut self.part_start[part as usize + 1];
                self.part_flows[*at as usize] = flow as u32;
                *at += 1;
            }
        }
        self.part_start.truncate(parts as usize + 1);
        parts as usize
    }

    fn find(&mut self, mut link: u32) -> u32 {
        while self.parent[link as usize] != link {
            let up = self.parent[self.parent[link as usize] as usize];
            self.parent[link as usize] = up;
            link = up;
        }
        link
    }

    /// How many flows a part has and how many hops they make: what a copy must share.
    fn shape_of(&self, p: &Problem, part: usize) -> (u32, u32) {
        let flows = self.flows_of(part);
        let hops = flows
            .iter()
            .map(|&f| p.links_of(f as usize).len() as u32)
            .sum();
        (flows.len() as u32, hops)
    }

    fn flows_of(&self, part: usize) -> &[u32] {
        &self.part_flows[self.part_start[part] as usize..self.part_start[part + 1] as usize]
    }

    /// Encodes a part into `enc`: per flow its cap and its path as local link numbers (in
    /// order of first use), then its links' capacities by local number; `part_links` maps
    /// local numbers back to links.
    fn encode(&mut self, p: &Problem, part: usize) {
        self.enc.clear();
        self.part_links.clear();
        let (start, end) = (
            self.part_start[part] as usize,
            self.part_start[part + 1] as usize,
        );
        for &flow in &self.part_flows[start..end] {
            let path = p.links_of(flow as usize);
            self.enc.push(p.flow_cap_bps[flow as usize].to_bits());
            self.enc.push(path.len() as u64);
            for &link in path {
                let local = &mut self.link_scratch[link as usize];
                if *local == NONE {
                    *local = self.part_links.len() as u32;
                    self.part_links.push(link);
                }
                self.enc.push(u64::from(*local));
            }
        }
        for &link in &self.part_links {
            self.enc.push(p.link_capacity_bps[link as usize].to_bits());
            self.link_scratch[link as usize] = NONE;
        }
    }

    /// A seen part equal to the encoded one.
    fn find_seen(&self, hash: u64) -> Option<Seen> {
        let mut at = self.seen_by_hash.get(&hash).copied();
        while let Some(i) = at {
            let seen = self.seen[i as usize];
            if self.seen_enc[seen.enc.0..seen.enc.1] == self.enc[..] {
                return Some(seen);
            }
            at = Some(seen.next).filter(|&n| n != NONE);
        }
        None
    }

    /// Keeps the part just solved (its encoding and the rates in `sub_rates`).
    fn remember(&mut self, hash: u64) {
        let enc = (self.seen_enc.len(), self.seen_enc.len() + self.enc.len());
        self.seen_enc.extend_from_slice(&self.enc);
        let rates = (
            self.seen_rates.len(),
            self.seen_rates.len() + self.sub_rates.len(),
        );
        self.seen_rates.extend_from_slice(&self.sub_rates);
        let id = self.seen.len() as u32;
        let next = self.seen_by_hash.insert(hash, id).unwrap_or(NONE);
        self.seen.push(Seen { enc, rates, next });
    }

    fn forget_seen(&mut self) {
        self.shapes.clear();
        self.seen_by_hash.clear();
        self.seen.clear();
        self.seen_enc.clear();
        self.seen_rates.clear();
    }

    /// Solves one part alone, writes its flows' rates and leaves them in `sub_rates`. The
    /// part's links are renumbered 0.. in order of first use (the solver's tie order: the
    /// same operations), so the solver's per-link arrays are as long as the part has links,
    /// not the topology: on a large cluster they no longer miss the cache on every hop.
    fn solve_part(&mut self, p: &Problem, part: usize, rates_bps: &mut [f64]) {
        let (start, end) = (
            self.part_start[part] as usize,
            self.part_start[part + 1] as usize,
        );
        self.sub_offsets.clear();
        self.sub_links.clear();
        self.sub_caps.clear();
        self.sub_link_caps.clear();
        self.sub_offsets.push(0);
        for &flow in &self.part_flows[start..end] {
            for &link in p.links_of(flow as usize) {
                let local = &mut self.link_scratch[link as usize];
                if *local == NONE {
                    *local = self.sub_link_ids.len() as u32;
                    self.sub_link_ids.push(link);
                    self.sub_link_caps.push(p.link_capacity_bps[link as usize]);
                }
                self.sub_links.push(*local);
            }
            self.sub_offsets.push(self.sub_links.len() as u32);
            self.sub_caps.push(p.flow_cap_bps[flow as usize]);
        }
        for &link in &self.sub_link_ids {
            self.link_scratch[link as usize] = NONE;
        }
        self.sub_link_ids.clear();
        self.sub_rates.clear();
        self.sub_rates.resize(end - start, 0.0);
        let sub = Problem {
            link_capacity_bps: &self.sub_link_caps,
            flow_offsets: &self.sub_offsets,
            flow_links: &self.sub_links,
            flow_cap_bps: &self.sub_caps,
        };
        self.inner.solve(&sub, &mut self.sub_rates);
        for (&flow, &rate) in self.part_flows[start..end].iter().zip(&self.sub_rates) {
            rates_bps[flow as usize] = rate;
        }
    }
}

/// Whether a path lists a link twice (such a flow counts twice on it: not a lone flow).
fn has_repeated_link(path: &[u32]) -> bool {
    path.iter()
        .enumerate()
        .any(|(i, l)| path[i + 1..].contains(l))
}

/// The rate of a flow that shares none of its links: the bottleneck algorithm freezes it at its
/// effective cap (its cap and its links' capacities, all private), or leaves it unlimited.
fn lone_flow_rate(p: &Problem, flow: usize) -> f64 {
    let path = p.links_of(flow).iter().copied();
    cap_within(p.flow_cap_bps[flow], path, p.link_capacity_bps)
}

/// A fixed (unseeded) hash of words in four independent lanes (a part's encoding is long; one
/// chain of multiplies would wait on each).
fn hash_words(words: &[u64]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes = [1u64, 2, 3, 4];
    let mut chunks = words.chunks_exact(4);
    for c in &mut chunks {
        for (lane, &w) in lanes.iter_mut().zip(c) {
            *lane = (lane.rotate_left(23) ^ w).wrapping_mul(K);
        }
    }
    let mut h = words.len() as u64;
    for &w in chunks.remainder().iter().chain(&lanes) {
        h = (h.rotate_left(23) ^ w).wrapping_mul(K);
    }
    h
}
