//! Deterministic shortest-path routing with ECMP, cached per (source, destination).
//!
//! A path is a *widest shortest* path: fewest hops, interior devices that all forward traffic
//! (GPUs do not, by default; see [`super::DeviceKind::forwards_by_default`]), and among those the
//! largest bottleneck bandwidth (so GPU→NVSwitch→GPU wins over GPU→PCIe host→GPU, as NCCL's
//! path search does). Where several next hops are equally short and equally wide, one is picked
//! by a hash of (source, destination, hop, salt): the same pair always takes the same path,
//! different pairs spread over the equal-cost links, and changing the salt (a scenario's seed)
//! draws another ECMP assignment.
//!
//! GPUs without peer-to-peer in one server (see [`super::Device::staged_via`]) reach each
//! other through the host's memory: their path is the path up to the host followed by the path
//! down from it, which crosses a PCIe switch between them and the host twice.
//!
//! Distances and widths come from breadth-first searches backwards from the destination's
//! *anchors*: the forwarding devices every path into it passes (a GPU's NVSwitch, and the leaf
//! behind its own NIC; the leaf switch above a fat-tree host), which many destinations share,
//! so a 16,384-GPU fat-tree or rail cluster needs one search per switch, not one per GPU.
//! Searches are kept in a bounded cache. [`Router::reference`] searches from each destination
//! itself; the tests check that both give the same paths on every bundled topology.

use std::collections::{HashMap, VecDeque};

mod reach;

use self::reach::{Adjacency, Reach, Search, View, UNREACHABLE};
use super::{DeviceId, LinkId, Topology, TopologyError};

/// The devices `v` has a link to, each once (parallel links are one neighbour).
fn distinct_neighbours(topo: &Topology, v: DeviceId) -> Vec<DeviceId> {
    let mut n: Vec<DeviceId> = topo.out_links(v).iter().map(|&l| topo.link(l).to).collect();
    n.sort();
    n.dedup();
    n
}

/// The anchors of one target (see [`Router::anchors_of`]).
struct Anchors {
    /// (anchor, hops from it to the target, narrowest link on the way in bits/s).
    anchors: Vec<(DeviceId, u16, f32)>,
    hanging: Vec<(DeviceId, f32)>,
}

/// Routes between devices of one topology. Holds caches; create one per simulation.
#[derive(Debug)]
pub struct Router {
    salt: u64,
    /// Per root device: distance (hops) and widest bottleneck (bits/s) from every device to it.
    dist: HashMap<u32, Search, PairHash>,
    /// Per device, hops from the nearest device that does not forward (a GPU, a host): 0 for
    /// those, 1 for a NIC or an NVSwitch, 2 for a rail leaf, 3 for a spine.
    level: Vec<u16>,
    dist_order: VecDeque<u32>,
    /// Entries the searches hold together, and the most they may.
    held_entries: usize,
    max_entries: usize,
    /// A search's working arrays, one entry per device (unreached between searches).
    scratch_hops: Vec<u16>,
    scratch_width_bps: Vec<f32>,
    adj: Adjacency,
    /// (src, dst) → range in `arena`.
    routes: HashMap<(u32, u32), (u32, u32), PairHash>,
    arena: Vec<LinkId>,
    /// Search from every destination itself (the slow reference the anchors are tested
    /// against).
    own_search: bool,
}

/// Hashes device ids and id pairs with [`mix`]: the std hasher's DoS resistance is not
/// needed for a simulator's own keys, and a route lookup per flow made it a tenth of a large
/// step's time.
#[derive(Debug, Clone, Copy, Default)]
struct PairHash;

#[derive(Debug, Default)]
struct PairHasher(u64);

impl std::hash::BuildHasher for PairHash {
    type Hasher = PairHasher;
    fn build_hasher(&self) -> PairHasher {
        PairHasher(0)
    }
}

impl std::hash::Hasher for PairHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = self.0 << 32 | x as u64;
    }
}

fn mix(mut x: u64) -> u64 {
    // splitmix64 finalizer: stable, well spread.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Router {
    /// Targets with more anchors than this get a search of their own.
    const MAX_ANCHORS: usize = 8;

    /// A router whose ECMP choices are drawn with `salt`.
    pub fn new(topo: &Topology, salt: u64) -> Self {
        // Keep at most ~64 Mi distance entries (384 MiB) of searches, and at least 16 dense
        // ones.
        let n = topo.devices().len();
        Router {
            salt,
            dist: HashMap::default(),
            dist_order: VecDeque::new(),
            held_entries: 0,
            max_entries: (64usize << 20).max(16 * n),
            scratch_hops: Vec::new(),
            scratch_width_bps: Vec::new(),
            level: Self::levels(topo),
            adj: Adjacency::new(topo),
            routes: HashMap::default(),
            arena: Vec::new(),
            own_search: false,
        }
    }

    /// Bytes the search cache will hold once every destination is routed: a search per
    /// likely anchor (a forwarding device with more than two neighbours): dense (6 bytes per
    /// device) for a device whose forwarding neighbours are none of a higher level (a spine,
    /// the top of the hierarchy), small (10 bytes per device of its region, about its
    /// neighbours and theirs) for the others: composites, and searches that stop at their
    /// neighbours (an NVSwitch's), bounded as the cache is. For the estimate a
    /// run checks before it starts.
    pub fn estimate_cache_bytes(&self, topo: &Topology) -> u64 {
        let n = topo.devices().len();
        let entries: usize = (0..n as u32)
            .map(DeviceId)
            .filter(|&d| topo.device(d).forwards)
            .map(|d| (d, distinct_neighbours(topo, d)))
            .filter(|(_, nb)| nb.len() > 2)
            .map(|(d, nb)| {
                let forwarding = nb.iter().filter(|&&v| self.adj.forwards[v.index()]);
                let higher = forwarding
                    .clone()
                    .any(|&v| self.level[v.index()] > self.level[d.index()]);
                if higher || forwarding.count() == 0 {
                    // A composite's region, or a search that stops at its neighbours (an
                    // NVSwitch's GPUs do not forward).
                    (2 * nb.len() + 1) * 10
                } else {
                    n * 6
                }
            })
            .sum();
        entries.min(self.max_entries * 6) as u64
    }

    /// Hops from every device to the nearest one that does not forward (a multi-source
    /// search); `u16::MAX` where none is reachable.
    fn levels(topo: &Topology) -> Vec<u16> {
        let n = topo.devices().len();
        let mut level = vec![u16::MAX; n];
        let mut queue = VecDeque::new();
        for (i, d) in topo.devices().iter().enumerate() {
            if !d.forwards {
                level[i] = 0;
                queue.push_back(DeviceId(i as u32));
            }
        }
        while let Some(v) = queue.pop_front() {
            for &l in topo.out_links(v) {
                let u = topo.link(l).to;
                if level[u.index()] == u16::MAX {
                    level[u.index()] = level[v.index()] + 1;
                    queue.push_back(u);
                }
            }
        }
        level
    }

    /// The slow reference: a search from each destination itself, no anchors shared.
    pub fn reference(topo: &Topology, salt: u64) -> Self {
        Router {
            own_search: true,
            ..Router::new(topo, salt)
        }
    }

    /// The directed links from `src` to `dst`, in order. Empty when `src == dst`.
    pub fn path(
        &mut self,
        topo: &Topology,
        src: DeviceId,
        dst: DeviceId,
    ) -> Result<&[LinkId], TopologyError> {
        if let Some(&(start, len)) = self.routes.get(&(src.0, dst.0)) {
            return Ok(&self.arena[start as usize..(start + len) as usize]);
        }
        let start = self.arena.len() as u32;
        if src != dst {
            match topo.staged_via(src, dst) {
                // No peer-to-peer: up to the staging host's memory, then down to `dst`.
                Some(via) => {
                    self.compute(topo, src, via)?;
                    self.compute(topo, via, dst)?;
                }
                None => self.compute(topo, src, dst)?,
            }
        }
        let len = self.arena.len() as u32 - start;
        self.routes.insert((src.0, dst.0), (start, len));
        Ok(&self.arena[start as usize..])
    }

    /// Hop count from `src` to `dst`, or `None` when no path exists.
    pub fn hops(&mut self, topo: &Topology, src: DeviceId, dst: DeviceId) -> Option<u32> {
        self.path(topo, src, dst).ok().map(|p| p.len() as u32)
    }

    /// The anchors whose searches stand for `dst`'s (with the hops and narrowest link from
    /// each to `dst`), and `dst`'s neighbours: a forwarding neighbour whose only other
    /// neighbour forwards (a GPU's own NIC, whose other side is its rail's leaf) stands aside
    /// for that other neighbour two hops out; any other forwarding neighbour (an NVSwitch, a
    /// leaf switch) is an anchor one hop out. A 16,384-GPU rail cluster then needs one search
    /// per NVSwitch and per leaf, not one per GPU. With more anchors than
    /// [`Self::MAX_ANCHORS`], `dst` is its own single anchor.
    fn anchors_of(topo: &Topology, dst: DeviceId) -> Anchors {
        let max_into = |from: DeviceId, to: DeviceId| -> f32 {
            topo.out_links(from)
                .iter()
                .filter(|&&l| topo.link(l).to == to)
                .map(|&l| topo.link(l).bandwidth_bps as f32)
                .fold(0.0, f32::max)
        };
        let mut anchors: Vec<(DeviceId, u16, f32)> = Vec::new();
        let mut hanging: Vec<(DeviceId, f32)> = Vec::new();
        let mut add = |a: DeviceId, extra: u16, bps: f32| match anchors
            .iter_mut()
            .find(|(d, _, _)| *d == a)
        {
            Some(x) if extra < x.1 => *x = (a, extra, bps),
            Some(x) if extra == x.1 => x.2 = x.2.max(bps),
            Some(_) => {}
            None => anchors.push((a, extra, bps)),
        };
        for v in distinct_neighbours(topo, dst) {
            // Every neighbour is one hop away, over its widest link (a source needs no
            // forwarding: a GPU next to the target reaches it directly).
            let into_dst = max_into(v, dst);
            hanging.push((v, into_dst));
            if !topo.device(v).forwards {
                continue;
            }
            let others: Vec<DeviceId> = distinct_neighbours(topo, v)
                .into_iter()
                .filter(|&w| w != dst)
                .collect();
            match others[..] {
                [w] if topo.device(w).forwards => add(w, 2, max_into(w, v).min(into_dst)),
                _ => add(v, 1, into_dst),
            }
        }
        if anchors.len() > Self::MAX_ANCHORS {
            return Anchors {
                anchors: vec![(dst, 0, f32::INFINITY)],
                hanging: Vec::new(),
            };
        }
        Anchors { anchors, hanging }
    }

    /// Makes sure the search from `root` is cached, and those its composite search stands on.
    fn ensure(&mut self, topo: &Topology, root: DeviceId) {
        if self.dist.contains_key(&root.0) {
            return;
        }
        let search = self.search(topo, root);
        self.held_entries += search.entries();
        let ups: Vec<DeviceId> = match &search {
            Search::Full(_) => Vec::new(),
            Search::Composite { anchors, .. } => anchors.iter().map(|a| a.0).collect(),
        };
        self.dist.insert(root.0, search);
        self.dist_order.push_back(root.0);
        for a in ups {
            self.ensure(topo, a);
        }
    }

    /// Evicts the oldest searches while the cache is over its bound (between routes: a
    /// route's searches are all in use while it is computed).
    fn evict(&mut self) {
        while self.held_entries > self.max_entries {
            let Some(old) = self.dist_order.pop_front() else {
                break;
            };
            if let Some(r) = self.dist.remove(&old) {
                self.held_entries -= r.entries();
            }
        }
    }

    /// The search from `root`. Outside the reference mode, a search first stays below the
    /// root's level (it does not pass devices of a higher level, [`Router::levels`]); when it
    /// meets at most [`Router::MAX_ANCHORS`] such devices and stayed small, it is a
    /// [`Search::Composite`] of that local search and the searches of the higher devices it
    /// met, else a full breadth-first search.
    fn search(&mut self, topo: &Topology, root: DeviceId) -> Search {
        let n = topo.devices().len();
        let level = self.level[root.index()];
        // Higher neighbours of the root itself: with more than MAX_ANCHORS of them the
        // composite is not worth it, and the local search need not be made.
        let mut higher: Vec<DeviceId> = self
            .adj
            .of(root)
            .iter()
            .map(|&(_, v, _)| v)
            .filter(|v| self.adj.forwards[v.index()] && self.level[v.index()] > level)
            .collect();
        higher.sort_unstable();
        higher.dedup();
        if !self.own_search && higher.len() <= Self::MAX_ANCHORS {
            let (local, ups) = self.bfs(topo, root, Some(level));
            if ups.is_empty() {
                return Search::Full(local);
            }
            // Worth it only with few higher devices: each becomes an entry every lookup of a
            // route into this root reads (a rail leaf has 4 spines; a fat-tree edge's k/2
            // aggregation switches, each with k/2 cores, would make hundreds).
            if ups.len() <= Self::MAX_ANCHORS && local.entries() * 8 < n {
                let anchors = ups
                    .into_iter()
                    .map(|u| (u, local.hops(u), local.width(u)))
                    .collect();
                return Search::Composite { local, anchors };
            }
            self.release(local);
        }
        Search::Full(self.bfs(topo, root, None).0)
    }

    /// Gives a dense search's arrays back to the scratch (a search that is not kept).
    fn release(&mut self, reach: Reach) {
        if let Reach::Dense {
            mut hops,
            mut width_bps,
        } = reach
        {
            hops.fill(UNREACHABLE);
            width_bps.fill(0.0);
            self.scratch_hops = hops;
            self.scratch_width_bps = width_bps;
        }
    }

    /// Breadth-first search backwards from `root` through forwarding devices, with each
    /// reached device's hops and widest bottleneck; with `below = Some(level)`, devices of a
    /// higher level that forward are reached but not passed through, and returned.
    fn bfs(
        &mut self,
        topo: &Topology,
        root: DeviceId,
        below: Option<u16>,
    ) -> (Reach, Vec<DeviceId>) {
        let n = topo.devices().len();
        self.scratch_hops.resize(n, UNREACHABLE);
        self.scratch_width_bps.resize(n, 0.0);
        let mut hops = std::mem::take(&mut self.scratch_hops);
        hops[root.index()] = 0;
        let mut order = Vec::new();
        let mut ups = Vec::new();
        let mut queue = VecDeque::from([root]);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            // Only the root itself or forwarding devices can be passed through.
            if v != root && !self.adj.forwards[v.index()] {
                continue;
            }
            if v != root && below.is_some_and(|l| self.level[v.index()] > l) {
                ups.push(v);
                continue;
            }
            let d = hops[v.index()];
            // Links are full duplex: u → v exists iff v → u does.
            for &(_, u, _) in self.adj.of(v) {
                if hops[u.index()] == UNREACHABLE {
                    hops[u.index()] = d + 1;
                    queue.push_back(u);
                }
            }
        }
        // In order of increasing distance: a device's width is the best, over its next hops
        // (one hop closer, and the root or forwarding), of min(link, next's width).
        let mut width_bps = std::mem::take(&mut self.scratch_width_bps);
        width_bps[root.index()] = f32::INFINITY;
        let mut reach = Reach::Dense { hops, width_bps };
        for &u in &order[1..] {
            let own = [(&reach, 0, f32::INFINITY)];
            let view = View {
                target: root,
                anchors: &own,
                hanging: &[],
            };
            let w = view
                .next_hops(&self.adj, u)
                .map(|(_, w)| w)
                .fold(0.0, f32::max);
            if let Reach::Dense { width_bps, .. } = &mut reach {
                width_bps[u.index()] = w;
            }
        }
        let reach = match reach {
            Reach::Dense {
                mut hops,
                mut width_bps,
            } if order.len() * 8 < n => {
                // Few devices reached: keep them alone and clear the scratch for the next
                // search.
                order.sort_unstable();
                let sparse = Reach::Sparse {
                    devices: order.iter().map(|v| v.0).collect(),
                    hops: order.iter().map(|v| hops[v.index()]).collect(),
                    width_bps: order.iter().map(|v| width_bps[v.index()]).collect(),
                };
                for v in &order {
                    hops[v.index()] = UNREACHABLE;
                    width_bps[v.index()] = 0.0;
                }
                self.scratch_hops = hops;
                self.scratch_width_bps = width_bps;
                sparse
            }
            dense => dense,
        };
        ups.sort_unstable();
        (reach, ups)
    }

    /// The searches that together stand for `root`'s, each with the hops and narrowest link
    /// from its root to `root` added to `extra` and `last_bps`: a composite search's local
    /// part and, recursively, its higher devices' searches (an entry per root, the nearest).
    fn flatten<'r>(
        &'r self,
        root: DeviceId,
        extra: u16,
        last_bps: f32,
        out: &mut Vec<(DeviceId, &'r Reach, u16, f32)>,
    ) {
        let Some(search) = self.dist.get(&root.0) else {
            return;
        };
        let mut add = |id: DeviceId, reach: &'r Reach, extra: u16, bps: f32| match out
            .iter_mut()
            .find(|(d, _, _, _)| *d == id)
        {
            Some(x) if extra < x.2 => *x = (id, reach, extra, bps),
            Some(x) if extra == x.2 => x.3 = x.3.max(bps),
            Some(_) => {}
            None => out.push((id, reach, extra, bps)),
        };
        match search {
            Search::Full(reach) => add(root, reach, extra, last_bps),
            Search::Composite { local, anchors } => {
                add(root, local, extra, last_bps);
                for &(a, a_extra, a_bps) in anchors {
                    self.flatten(a, extra + a_extra, last_bps.min(a_bps), out);
                }
            }
        }
    }

    fn compute(
        &mut self,
        topo: &Topology,
        src: DeviceId,
        dst: DeviceId,
    ) -> Result<(), TopologyError> {
        let plan = if self.own_search {
            Anchors {
                anchors: vec![(dst, 0, f32::INFINITY)],
                hanging: Vec::new(),
            }
        } else {
            Self::anchors_of(topo, dst)
        };
        self.evict();
        for &(a, _, _) in &plan.anchors {
            self.ensure(topo, a);
        }
        let salt = self.salt;
        let mut flat = Vec::new();
        for &(a, extra, bps) in &plan.anchors {
            self.flatten(a, extra, bps, &mut flat);
        }
        let anchors: Vec<(&Reach, u16, f32)> = flat.iter().map(|&(_, r, e, b)| (r, e, b)).collect();
        let view = View {
            target: dst,
            anchors: &anchors,
            hanging: &plan.hanging,
        };
        if view.hops(src) == u32::MAX {
            return Err(TopologyError::new(
                "route",
                format!(
                    "a path from {} to {}; none exists through forwarding devices",
                    topo.device(src).name,
                    topo.device(dst).name
                ),
            ));
        }
        let mut here = src;
        let mut hop = 0u64;
        let mut path: Vec<LinkId> = Vec::with_capacity(view.hops(src) as usize);
        let mut candidates: Vec<LinkId> = Vec::new();
        while here != dst {
            let want = view.width(here);
            candidates.clear();
            let indexed = view.next_hops_indexed(&self.adj, here);
            #[cfg(debug_assertions)]
            if let Some(hops) = &indexed {
                let scanned: Vec<(LinkId, f32)> = view.next_hops(&self.adj, here).collect();
                debug_assert_eq!(hops, &scanned, "indexed and scanned next hops differ");
            }
            match indexed {
                Some(hops) => {
                    candidates.extend(hops.into_iter().filter(|&(_, w)| w == want).map(|(l, _)| l))
                }
                None => candidates.extend(
                    view.next_hops(&self.adj, here)
                        .filter(|&(_, w)| w == want)
                        .map(|(l, _)| l),
                ),
            }
            let pick = if candidates.len() == 1 {
                0
            } else {
                let h = mix(salt ^ mix(((src.0 as u64) << 32 | dst.0 as u64) ^ mix(hop)));
                (h % candidates.len() as u64) as usize
            };
            let l = candidates[pick];
            path.push(l);
            here = topo.link(l).to;
            hop += 1;
        }
        self.arena.extend_from_slice(&path);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
