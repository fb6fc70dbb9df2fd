//! NCCL's ring search inside one node whose GPUs are cabled to each other by NVLink without a
//! switch (DGX-1's hybrid cube mesh, NVLink-bridged cards): which rings, how many, how fast.
//!
//! On an NVSwitch every GPU reaches every other at full rate and any order is a ring; on a
//! mesh only some pairs share NVLinks (DGX-1: GPU 3 and GPU 4 share none), so the order decides
//! whether a ring stays on NVLink or falls back to PCIe through the CPUs. NCCL searches for the
//! rings. Facts from `src/graph/search.cc` (v2.18.5-1), not code:
//! - a channel's ring visits every GPU once and takes its speed `s` (GB/s) from every NVLink it
//!   crosses, one direction (NCCL's per-link bandwidth, `SM70_NVLINK_BW` 20 GB/s, times the
//!   links between the pair);
//! - speeds come from `speedArrayIntra` (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3; from
//!   sm90 `sm90SpeedArrayIntra`), starting at the fastest a pair can carry; the search keeps the
//!   solution with the most `channels × s` and goes down a speed while the next one is more than
//!   0.49 of the best found, stopping early once the GPUs' NVLinks are used in full;
//! - at most `MAXCHANNELS / 2` = 16 channels;
//! - a solution of 25 GB/s or more per channel is duplicated (twice the channels, half the
//!   speed) except on Ampere and later with more than 4 channels below 50 GB/s.
//!
//! NCCL backtracks over the whole search with time limits; here rings are packed depth first
//! (the best-provisioned neighbour first) with a step budget and an upper bound from the
//! GPUs' remaining NVLink bandwidth, which finds full decompositions on 8-GPU meshes.

use std::collections::HashMap;

/// The rings a search found: one order of the node's ranks per search channel.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshRings {
    pub orders: Vec<Vec<u32>>,
    /// NCCL's bandwidth per search channel (`bwIntra`), GB/s.
    pub bw_gbps: f64,
}

const SPEEDS: [f64; 13] = [
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
const SPEEDS_SM90: [f64; 11] = [
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
const MAX_SEARCH_CHANNELS: usize = 16;
const MAX_MESH_GPUS: usize = 64;
/// Depth-first steps allowed per speed (a full 8-GPU DGX-1 search takes a few thousand).
const STEP_BUDGET: u64 = 50_000;

/// NCCL's rings over `links[i][j]` NVLinks from GPU `i` to GPU `j` (ranks of one node), each
/// link `link_gbps` in NCCL's units; `None` when no ring stays on NVLink. Every communicator of
/// a training step asks, so answers are kept per mesh (the search is a pure function of it).
pub fn nvlink_rings(
    links: &[Vec<u32>],
    link_gbps: f64,
    compute_capability: u32,
) -> Option<MeshRings> {
    type Key = (Vec<Vec<u32>>, u64, u32);
    static FOUND: std::sync::OnceLock<std::sync::Mutex<HashMap<Key, Option<MeshRings>>>> =
        std::sync::OnceLock::new();
    let key = (links.to_vec(), link_gbps.to_bits(), compute_capability);
    let found = FOUND.get_or_init(Default::default);
    if let Some(hit) = found.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return hit;
    }
    let rings = search(links, link_gbps, compute_capability);
    if let Ok(mut m) = found.lock() {
        m.insert(key, rings.clone());
    }
    rings
}

fn search(links: &[Vec<u32>], link_gbps: f64, compute_capability: u32) -> Option<MeshRings> {
    let n = links.len();
    // NCCL's nodes hold a few dozen GPUs at most; a larger "node" keeps the ranks' order.
    if !(2..=MAX_MESH_GPUS).contains(&n) {
        return None;
    }
    let cap: Vec<Vec<f64>> = links
        .iter()
        .map(|row| row.iter().map(|&l| l as f64 * link_gbps).collect())
        .collect();
    let max_pair = cap.iter().flatten().cloned().fold(0.0, f64::max);
    // What a GPU can send over all its NVLinks: the most any solution moves.
    let total = cap
        .iter()
        .map(|row| row.iter().sum::<f64>())
        .fold(f64::INFINITY, f64::min);
    let speeds: &[f64] = if compute_capability >= 90 {
        &SPEEDS_SM90
    } else {
        &SPEEDS
    };
    let mut best: Option<(Vec<Vec<u32>>, f64)> = None;
    for (i, &s) in speeds.iter().enumerate() {
        if s > max_pair {
            continue;
        }
        let orders = pack(&cap, s);
        let score = orders.len() as f64 * s;
        if !orders.is_empty()
            && best
                .as_ref()
                .is_none_or(|(o, bs)| score > o.len() as f64 * bs)
        {
            best = Some((orders, s));
        }
        if let Some((o, bs)) = &best {
            let used = o.len() as f64 * bs;
            let next_ok = speeds.get(i + 1).is_some_and(|&next| next / bs > 0.49);
            if used >= total - 1e-9 || !next_ok {
                break;
            }
        }
    }
    let (orders, bw) = best?;
    let duplicate = bw >= 25.0 && !(compute_capability > 80 && bw < 50.0 && orders.len() > 4);
    if duplicate {
        let k = (2 * orders.len()).min(MAX_SEARCH_CHANNELS);
        let orders: Vec<Vec<u32>> = orders.iter().cycle().take(k).cloned().collect();
        return Some(MeshRings {
            bw_gbps: bw / 2.0,
            orders,
        });
    }
    Some(MeshRings {
        orders,
        bw_gbps: bw,
    })
}

/// As many rings at speed `s` as fit in `cap` (GB/s per direction of each GPU pair).
fn pack(cap: &[Vec<f64>], s: f64) -> Vec<Vec<u32>> {
    let mut search = Packing {
        cap: cap.to_vec(),
        s,
        steps: 0,
        current: Vec::new(),
        best: Vec::new(),
    };
    search.more();
    search.best
}

struct Packing {
    cap: Vec<Vec<f64>>,
    s: f64,
    steps: u64,
    current: Vec<Vec<u32>>,
    best: Vec<Vec<u32>>,
}

impl Packing {
    /// Channels every GPU could still send at speed `s`: no packing gets past the least.
    fn bound(&self) -> usize {
        self.cap
            .iter()
            .map(|row| {
                row.iter()
                    .map(|&c| (c / self.s + 1e-9).floor() as usize)
                    .sum::<usize>()
            })
            .min()
            .unwrap_or(0)
    }

    fn more(&mut self) {
        if self.current.len() > self.best.len() {
            self.best = self.current.clone();
        }
        if self.current.len() >= MAX_SEARCH_CHANNELS
            || self.steps > STEP_BUDGET
            || self.current.len() + self.bound() <= self.best.len()
        {
            return;
        }
        let n = self.cap.len();
        let mut ring = vec![0u32];
        let mut seen = vec![false; n];
        seen[0] = true;
        self.extend(&mut ring, &mut seen);
    }

    /// Extends `ring` to a cycle through every GPU, then packs more rings after it.
    fn extend(&mut self, ring: &mut Vec<u32>, seen: &mut [bool]) {
        self.steps += 1;
        if self.steps > STEP_BUDGET || self.best.len() >= MAX_SEARCH_CHANNELS {
            return;
        }
        let n = self.cap.len();
        let last = *ring.last().unwrap_or(&0) as usize;
        if ring.len() == n {
            if self.cap[last][0] + 1e-9 < self.s {
                return;
            }
            self.take(ring, -1.0);
            self.current.push(ring.clone());
            self.more();
            self.current.pop();
            self.take(ring, 1.0);
            return;
        }
        // Best-provisioned neighbours first: they leave the thin links for later rings.
        let mut next: Vec<usize> = (0..n)
            .filter(|&j| !seen[j] && self.cap[last][j] + 1e-9 >= self.s)
            .collect();
        next.sort_by(|&a, &b| {
            self.cap[last][b]
                .total_cmp(&self.cap[last][a])
                .then(a.cmp(&b))
        });
        for j in next {
            seen[j] = true;
            ring.push(j as u32);
            self.extend(ring, seen);
            ring.pop();
            seen[j] = false;
            if self.best.len() >= MAX_SEARCH_CHANNELS {
                return;
            }
        }
    }

    /// Adds `sign × s` to every hop of the cycle `ring`.
    fn take(&mut self, ring: &[u32], sign: f64) {
        for (k, &a) in ring.iter().enumerate() {
            let b = ring[(k + 1) % ring.len()];
            self.cap[a as usize][b as usize] += sign * self.s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DGX-1's hybrid cube mesh (NVLinks per GPU pair, read off the P2P matrix of an 8x V100
    /// SXM2 node in shared/validation/p2p_bandwidth_matrices.csv: ~45 GiB/s two links, ~22.5
    /// one, ~7-8 none).
    fn dgx1_v100() -> Vec<Vec<u32>> {
        let pairs = [
            (0, 1, 1),
            (0, 2, 2),
            (0, 3, 1),
            (0, 4, 2),
            (1, 2, 1),
            (1, 3, 2),
            (1, 5, 2),
            (2, 3, 2),
            (2, 6, 1),
            (3, 7, 1),
            (4, 5, 1),
            (4, 6, 2),
            (4, 7, 1),
            (5, 6, 1),
            (5, 7, 2),
            (6, 7, 2),
        ];
        let mut m = vec![vec![0; 8]; 8];
        for (a, b, l) in pairs {
            m[a][b] = l;
            m[b][a] = l;
        }
        m
    }

    fn uses_only_nvlink(links: &[Vec<u32>], order: &[u32]) -> bool {
        (0..order.len())
            .all(|k| links[order[k] as usize][order[(k + 1) % order.len()] as usize] > 0)
    }

    #[test]
    fn dgx1_v100_fills_all_six_nvlinks_of_every_gpu_with_six_rings_at_20_gbps() {
        let m = dgx1_v100();
        for row in &m {
            assert_eq!(row.iter().sum::<u32>(), 6, "V100 has six NVLinks");
        }
        let r = nvlink_rings(&m, 20.0, 70).unwrap();
        assert_eq!(r.orders.len(), 6, "{r:?}");
        assert_eq!(r.bw_gbps, 20.0);
        for o in &r.orders {
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..8).collect::<Vec<u32>>(),
                "a ring visits every GPU once"
            );
            assert!(uses_only_nvlink(&m, o), "{o:?}");
        }
        // No GPU pair direction carries more rings than it has NVLinks.
        let mut load = vec![vec![0u32; 8]; 8];
        for o in &r.orders {
            for k in 0..8 {
                load[o[k] as usize][o[(k + 1) % 8] as usize] += 1;
            }
        }
        for a in 0..8 {
            for b in 0..8 {
                assert!(load[a][b] <= m[a][b], "{a}->{b}: {} rings", load[a][b]);
            }
        }
    }

    #[test]
    fn the_first_four_gpus_of_a_dgx1_ring_among_themselves() {
        let m: Vec<Vec<u32>> = dgx1_v100()[..4].iter().map(|r| r[..4].to_vec()).collect();
        let r = nvlink_rings(&m, 20.0, 70).unwrap();
        assert!(r.orders.iter().all(|o| uses_only_nvlink(&m, o)));
        // GPUs 0 and 1 share one NVLink each way, 2 and 3 two: three links per direction
        // between the pairs' members limit the packing to 4 rings at 20 GB/s... or fewer
        // faster ones; either way no more than a GPU's four NVLinks' worth.
        assert!(
            r.orders.len() as f64 * r.bw_gbps <= 4.0 * 20.0 + 1e-9,
            "{r:?}"
        );
        assert!(r.orders.len() as f64 * r.bw_gbps >= 60.0, "{r:?}");
    }

    #[test]
    fn gpus_without_a_cycle_of_nvlinks_have_no_rings() {
        // A line 0 - 1 - 2: no cycle through all three stays on NVLink.
        let m = vec![vec![0, 1, 0], vec![1, 0, 1], vec![0, 1, 0]];
        assert_eq!(nvlink_rings(&m, 20.0, 70), None);
    }

    #[test]
    fn a_bridged_pair_runs_rings_both_ways_and_fast_rings_are_duplicated() {
        // Two GPUs with 4 bridge links (RTX 3090: NCCL's 12 GB/s each on sm86): one ring at
        // 40 GB/s, duplicated to two at 20 (Ampere, 1 channel).
        let m = vec![vec![0, 4], vec![4, 0]];
        let r = nvlink_rings(&m, 12.0, 86).unwrap();
        assert_eq!(r.orders.len(), 2, "{r:?}");
        assert_eq!(r.bw_gbps, 20.0);
    }
}
