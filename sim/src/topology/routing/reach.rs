//! What one backward search from a root holds ([`Reach`], [`Search`]), how a target's
//! distances and widths are read across the searches of its anchors ([`View`]), and the flat
//! adjacency table the searches scan ([`Adjacency`]). The router (`mod.rs`) decides which
//! searches to run and keep; this module is the data they produce and how it is read.

use std::collections::HashMap;

use super::PairHash;
use crate::topology::{DeviceId, LinkId, Topology};

pub(super) const UNREACHABLE: u16 = u16::MAX;

/// How every device reaches one root: hop count and the widest bottleneck among shortest paths.
/// Dense (one entry per device) when the search reached much of the topology; sparse (the
/// reached devices, sorted) when it stopped early, as an NVSwitch's does at the GPUs around it,
/// which do not forward: a 16,384-GPU cluster has 2,048 such searches of 9 devices each, and
/// dense ones would cost 2,048 × every device.
#[derive(Debug)]
pub(super) enum Reach {
    Dense {
        hops: Vec<u16>,
        width_bps: Vec<f32>,
    },
    Sparse {
        devices: Vec<u32>,
        hops: Vec<u16>,
        width_bps: Vec<f32>,
    },
}

impl Reach {
    /// Hops from `v` to the root, [`UNREACHABLE`] when the search did not reach it.
    #[inline]
    pub(super) fn hops(&self, v: DeviceId) -> u16 {
        match self {
            Reach::Dense { hops, .. } => hops[v.index()],
            Reach::Sparse { devices, hops, .. } => match Self::find(devices, v) {
                Some(i) => hops[i],
                None => UNREACHABLE,
            },
        }
    }

    /// Widest bottleneck from `v` to the root (0 when unreached).
    #[inline]
    pub(super) fn width(&self, v: DeviceId) -> f32 {
        match self {
            Reach::Dense { width_bps, .. } => width_bps[v.index()],
            Reach::Sparse {
                devices, width_bps, ..
            } => match Self::find(devices, v) {
                Some(i) => width_bps[i],
                None => 0.0,
            },
        }
    }

    /// Where `v` is in a sparse search's sorted devices: most lookups are of devices outside
    /// the few ids it reached (one node's), answered by the range check alone.
    #[inline]
    pub(super) fn find(devices: &[u32], v: DeviceId) -> Option<usize> {
        match (devices.first(), devices.last()) {
            (Some(&lo), Some(&hi)) if (lo..=hi).contains(&v.0) => devices.binary_search(&v.0).ok(),
            _ => None,
        }
    }

    /// Entries held (for the cache's bound).
    pub(super) fn entries(&self) -> usize {
        match self {
            Reach::Dense { hops, .. } => hops.len(),
            Reach::Sparse { devices, .. } => devices.len(),
        }
    }
}

/// A cached search from one root: a full one, or the root's search below its level together
/// with the searches of the higher devices where it stopped (a rail leaf's: its nodes' NICs
/// and GPUs, and its spines; every path from farther away enters through one of those).
#[derive(Debug)]
pub(super) enum Search {
    Full(Reach),
    Composite {
        local: Reach,
        /// (higher device, hops from it to the root, widest bottleneck on the way).
        anchors: Vec<(DeviceId, u16, f32)>,
    },
}

impl Search {
    pub(super) fn entries(&self) -> usize {
        match self {
            Search::Full(r) => r.entries(),
            Search::Composite { local, anchors } => local.entries() + anchors.len(),
        }
    }
}

/// The searches that together give every device's distance and width to one target: each
/// anchor's search shifted by the hops (`extra`) from the anchor to the target and capped by
/// the narrowest link on the way (`last_bps`), and the target's neighbours (one hop away,
/// whatever an anchor's search says).
///
/// Every path into the target enters through an anchor or a hanging neighbour, so the distance
/// from `v` is the least over anchors of (hops to the anchor + extra), and the width the widest
/// over the anchors that reach that least: the same numbers a search from the target itself
/// gives (tested against it), from searches that many targets share.
pub(super) struct View<'a> {
    pub(super) target: DeviceId,
    pub(super) anchors: &'a [(&'a Reach, u16, f32)],
    /// The target's neighbours: (device, bits/s of its widest link into the target).
    pub(super) hanging: &'a [(DeviceId, f32)],
}

impl View<'_> {
    /// Hops from `v` to the target, `u32::MAX` when unreachable.
    #[inline]
    pub(super) fn hops(&self, v: DeviceId) -> u32 {
        if v == self.target {
            return 0;
        }
        if self.hanging.iter().any(|&(h, _)| h == v) {
            return 1;
        }
        self.anchors
            .iter()
            .filter_map(|&(r, extra, _)| {
                let h = r.hops(v);
                (h != UNREACHABLE).then_some(h as u32 + extra as u32)
            })
            .min()
            .unwrap_or(u32::MAX)
    }

    /// Widest bottleneck (bits/s) over shortest paths from `v` to the target.
    pub(super) fn width(&self, v: DeviceId) -> f32 {
        self.width_at(v, self.hops(v))
    }

    /// [`Self::width`] of `v`, whose distance `d` the caller already has.
    #[inline]
    pub(super) fn width_at(&self, v: DeviceId, d: u32) -> f32 {
        if v == self.target {
            return f32::INFINITY;
        }
        if let Some(&(_, bps)) = self.hanging.iter().find(|&&(h, _)| h == v) {
            return bps;
        }
        self.anchors
            .iter()
            .filter(|(r, extra, _)| {
                let h = r.hops(v);
                h != UNREACHABLE && h as u32 + *extra as u32 == d
            })
            .map(|&(r, _, last)| r.width(v).min(last))
            .fold(0.0, f32::max)
    }

    /// Links from `u` one hop closer to the target through a usable device (the target itself
    /// or one that forwards), each with the width of the best path through it, in the
    /// topology's link order. Parallel links to one neighbour (a spine's uplink bundles) ask
    /// the neighbour's distance and width once.
    pub(super) fn next_hops<'t>(
        &'t self,
        adj: &'t Adjacency,
        u: DeviceId,
    ) -> impl Iterator<Item = (LinkId, f32)> + 't {
        let du = self.hops(u);
        let mut last: Option<(DeviceId, bool, f32)> = None;
        adj.of(u).iter().filter_map(move |&(l, v, link_bps)| {
            let (closer, width) = match last {
                Some((prev, closer, width)) if prev == v => (closer, width),
                _ => {
                    let usable = v == self.target || adj.forwards[v.index()];
                    let dv = self.hops(v);
                    let closer = usable && dv != u32::MAX && dv + 1 == du;
                    let width = if closer { self.width_at(v, dv) } else { 0.0 };
                    last = Some((v, closer, width));
                    (closer, width)
                }
            };
            closer.then(|| (l, link_bps.min(width)))
        })
    }

    /// [`Self::next_hops`] of a device with many links (a spine), without scanning them: the
    /// devices one hop closer are enumerated from the sparse searches (a leaf's region, an
    /// NVSwitch's GPUs) and the target's neighbours, and their links looked up in the
    /// device's neighbour index; same links, same order. `None` when a dense search could
    /// hold such a device (then only the scan finds them all).
    pub(super) fn next_hops_indexed(
        &self,
        adj: &Adjacency,
        u: DeviceId,
    ) -> Option<Vec<(LinkId, f32)>> {
        let index = adj.by_neighbour.get(&u.0)?;
        let du = self.hops(u);
        if du == 0 || du == u32::MAX {
            return Some(Vec::new());
        }
        let want = du - 1;
        let mut near: Vec<u32> = Vec::new();
        if want == 0 {
            near.push(self.target.0);
        }
        if want == 1 {
            near.extend(self.hanging.iter().map(|h| h.0 .0));
        }
        for &(r, extra, _) in self.anchors {
            if extra as u32 > want {
                continue;
            }
            match r {
                Reach::Sparse { devices, hops, .. } => near.extend(
                    devices
                        .iter()
                        .zip(hops)
                        .filter(|(_, &h)| h as u32 + extra as u32 == want)
                        .map(|(&d, _)| d),
                ),
                Reach::Dense { .. } => return None,
            }
        }
        near.sort_unstable();
        near.dedup();
        let mut positions: Vec<u32> = Vec::new();
        for v in near {
            let start = index.partition_point(|&(n, _)| n < v);
            positions.extend(
                index[start..]
                    .iter()
                    .take_while(|&&(n, _)| n == v)
                    .map(|p| p.1),
            );
        }
        positions.sort_unstable();
        let links = adj.of(u);
        let mut out = Vec::with_capacity(positions.len());
        for p in positions {
            let (l, v, link_bps) = links[p as usize];
            let usable = v == self.target || adj.forwards[v.index()];
            let dv = self.hops(v);
            if usable && dv == want {
                out.push((l, link_bps.min(self.width_at(v, dv))));
            }
        }
        Some(out)
    }
}

/// Every device's outgoing links as (link, far end, bits/s) in one flat table, in the
/// topology's order, and which devices forward: a route search scans a spine's thousands of
/// links, and reading each from the topology's link records cost a cache miss.
#[derive(Debug)]
pub(super) struct Adjacency {
    offsets: Vec<u32>,
    out: Vec<(LinkId, DeviceId, f32)>,
    pub(super) forwards: Vec<bool>,
    /// For devices with more than [`Adjacency::INDEXED_DEGREE`] links: (neighbour, position
    /// of a link to it in the device's list), sorted.
    by_neighbour: HashMap<u32, Vec<(u32, u32)>, PairHash>,
}

impl Adjacency {
    pub(super) fn new(topo: &Topology) -> Adjacency {
        let n = topo.devices().len();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut out = Vec::with_capacity(topo.links().len());
        offsets.push(0);
        for d in 0..n as u32 {
            for &l in topo.out_links(DeviceId(d)) {
                let link = topo.link(l);
                out.push((l, link.to, link.bandwidth_bps as f32));
            }
            offsets.push(out.len() as u32);
        }
        let mut by_neighbour = HashMap::default();
        for d in 0..n {
            let links = &out[offsets[d] as usize..offsets[d + 1] as usize];
            if links.len() > Self::INDEXED_DEGREE {
                let mut index: Vec<(u32, u32)> = links
                    .iter()
                    .enumerate()
                    .map(|(p, &(_, v, _))| (v.0, p as u32))
                    .collect();
                index.sort_unstable();
                by_neighbour.insert(d as u32, index);
            }
        }
        Adjacency {
            offsets,
            out,
            forwards: topo.devices().iter().map(|d| d.forwards).collect(),
            by_neighbour,
        }
    }

    /// Devices with more links than this get a neighbour index.
    pub(super) const INDEXED_DEGREE: usize = 64;

    pub(super) fn of(&self, u: DeviceId) -> &[(LinkId, DeviceId, f32)] {
        &self.out[self.offsets[u.index()] as usize..self.offsets[u.index() + 1] as usize]
    }
}
