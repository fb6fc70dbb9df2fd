//! Max-min fair bandwidth sharing: the math of the flow-level network model.
//!
//! A [`Problem`] is a set of flows, each crossing a path of directed links and optionally capped
//! at a rate; its answer is every flow's max-min fair rate, defined by *progressive filling*:
//! all unfrozen flows' rates rise together from zero; when the sum of rates on a link reaches its
//! capacity the link saturates and its flows freeze; a flow reaching its cap freezes. That is the
//! standard bottleneck algorithm, which both solvers here run step by step:
//!
//! 1. every link keeps `remaining` (capacity minus the rates of its frozen flows) and `unfrozen`
//!    (how many of its flows still rise); its *fair share* is `remaining / unfrozen`;
//! 2. a flow's *effective cap* is the smallest of its own cap and the capacities of the links it
//!    alone crosses (a link with one flow saturates exactly when that flow reaches its capacity);
//! 3. take the link with the smallest fair share (ties: the link used first, scanning the flows
//!    in order and each path in order) and the unfrozen flow with the smallest finite effective
//!    cap (ties: the lowest flow index);
//! 4. if that cap is ≤ that share, freeze that one flow at its cap; if the share is infinite,
//!    stop: every flow still rising is unlimited; otherwise freeze every unfrozen flow of that
//!    link, in increasing flow index, at the share;
//! 5. freezing a flow at rate `r` subtracts `r` from `remaining` and 1 from `unfrozen` of each link
//!    on its path, in path order. Repeat until no flow rises.
//!
//! [`MaxMinSolver`] (fast: a heap of link shares with lazy invalidation, touching only
//! used links, no allocation once warm) and [`solve_reference`] (deliberately simple: scans every
//! link and flow each round) perform exactly the same floating-point operations in exactly the
//! same order, so their rates are **bit-identical**, not merely close; the tests assert that.
//! [`SplitSolver`] runs the fast solver once per distinct link-disjoint part of a problem (the
//! same collective on every rail is one part solved once), with the same bit-identical rates.
//!
//! Conventions and edge cases:
//! - a flow with an empty path gets its cap, or `f64::INFINITY` when uncapped; so does a flow
//!   whose links all have infinite capacity;
//! - the tie rules (caps before links, links in order of first use, lower flow indices first)
//!   only fix the order of floating-point operations; the rates are the same max-min rates
//!   whichever order equal events take. Links are ranked by first use, not by index, so that a
//!   problem's rates do not depend on how its links are numbered: two copies of one collective
//!   on other links (another rail, other ECMP choices) give bit-identical rates, which is what
//!   lets [`SplitSolver`] reuse one copy's rates for the other;
//! - paths are meant to be simple; a link listed twice in one path is charged twice (the flow
//!   counts as two flows on it), identically in both solvers;
//! - rates are clamped at zero: a share that rounding (or a zero-capacity link) leaves at or below
//!   zero gives rate `0.0`; a negative cap means `0.0`; a NaN capacity counts as zero and a NaN cap
//!   as no cap. Capacities and caps are meant to be non-negative numbers.
//! - only links that some flow uses are read; `link_capacity_bps` may be the whole topology's.

mod fast;
mod reference;
mod split;
#[cfg(test)]
mod tests;

pub use fast::MaxMinSolver;
pub use reference::solve_reference;
pub use split::SplitSolver;

/// A max-min problem: flows over links. Links are identified by global indices into
/// `link_capacity_bps` (the whole topology's directed links); only links used by some flow matter.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub link_capacity_bps: &'a [f64],
    /// Flow f uses links `flow_links[flow_offsets[f]..flow_offsets[f+1]]` (u32 link indices);
    /// `flow_offsets` has one more entry than there are flows (or is empty for no flows).
    pub flow_offsets: &'a [u32],
    pub flow_links: &'a [u32],
    /// Per-flow rate cap in bits/s; `f64::INFINITY` for none.
    pub flow_cap_bps: &'a [f64],
}

impl Problem<'_> {
    /// Number of flows (`flow_offsets.len() - 1`, or 0).
    pub fn flow_count(&self) -> usize {
        self.flow_offsets.len().saturating_sub(1)
    }

    /// The links flow `flow` crosses, in path order.
    ///
    /// # Panics
    /// If `flow` is not below [`Problem::flow_count`] or the offsets do not fit `flow_links`.
    pub fn links_of(&self, flow: usize) -> &[u32] {
        let start = self.flow_offsets[flow] as usize;
        let end = self.flow_offsets[flow + 1] as usize;
        &self.flow_links[start..end]
    }

    /// Checks the lengths the solvers rely on (a programming error, not user input, if wrong).
    fn assert_shape(&self, rates_len: usize) {
        let flows = self.flow_count();
        assert_eq!(
            self.flow_cap_bps.len(),
            flows,
            "max-min problem: flow_cap_bps has {} entries for {flows} flows",
            self.flow_cap_bps.len()
        );
        assert_eq!(
            rates_len, flows,
            "max-min problem: rates_bps has {rates_len} entries for {flows} flows"
        );
    }
}

/// Per-link sum of rates (for utilization): returns (link index, load_bps) for used links, sorted
/// by link. Each link's sum is taken in increasing flow index order. A link listed twice in one
/// path carries that flow's rate twice.
///
/// # Panics
/// If `rates_bps` does not have one entry per flow or a path names a link outside
/// `link_capacity_bps`.
pub fn link_loads(p: &Problem, rates_bps: &[f64]) -> Vec<(u32, f64)> {
    p.assert_shape(rates_bps.len());
    let mut load_bps = vec![0.0_f64; p.link_capacity_bps.len()];
    let mut used = vec![false; p.link_capacity_bps.len()];
    for (flow, &rate) in rates_bps.iter().enumerate() {
        for &link in p.links_of(flow) {
            load_bps[link as usize] += rate;
            used[link as usize] = true;
        }
    }
    (0..p.link_capacity_bps.len())
        .filter(|&l| used[l])
        .map(|l| (l as u32, load_bps[l]))
        .collect()
}

/// A rate that cannot go below zero: non-positive and NaN values become `+0.0`, so that the bit
/// patterns of the results order like the numbers (the fast solver's queue keys rely on it).
#[inline]
fn non_negative(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// A link's fair share: what each of its `unfrozen` flows would get if it saturated now.
#[inline]
fn fair_share(remaining_bps: f64, unfrozen: u32) -> f64 {
    non_negative(remaining_bps / f64::from(unfrozen))
}

/// A flow's cap for the bottleneck algorithm: its own cap (non-negative; NaN means none) and the
/// capacity of every link it alone crosses (`link_flow_count[l] == 1`). Such a private link
/// saturates exactly when its flow reaches its capacity, which is what a cap is; counting it as
/// one fixes the order of equal-valued events (caps first) and keeps it out of the link queue.
fn effective_cap(
    cap_bps: f64,
    path: &[u32],
    link_flow_count: &[u32],
    link_capacity_bps: &[f64],
) -> f64 {
    let private = path
        .iter()
        .copied()
        .filter(|&link| link_flow_count[link as usize] == 1);
    cap_within(cap_bps, private, link_capacity_bps)
}

/// A flow's cap (non-negative; NaN means none) lowered to the capacity of each of `links`, in
/// order: its effective cap when they are the links it alone crosses.
fn cap_within(cap_bps: f64, links: impl Iterator<Item = u32>, link_capacity_bps: &[f64]) -> f64 {
    let mut effective = if cap_bps < f64::INFINITY {
        non_negative(cap_bps)
    } else {
        f64::INFINITY
    };
    for link in links {
        let capacity = fair_share(link_capacity_bps[link as usize], 1);
        if capacity < effective {
            effective = capacity;
        }
    }
    effective
}
