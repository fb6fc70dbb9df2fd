//! Speed of one max-min solve at scale: a ring step on a k = 32 three-tier fat-tree with 32 hosts
//! per edge switch (16,384 hosts, 65,536 directed links). Flow i goes from rank i to rank i+1
//! (mod N) over the up-down path host → edge → agg → core → agg → edge → host, the agg and core
//! picked by a deterministic ECMP hash of (source, destination).
//!
//! - `ring_rank_ordered`: rank r on host r, so most flows stay under one edge switch
//!   (target ≤ 1 ms);
//! - `ring_random_placement`: ranks on a seeded random permutation of the hosts, so most flows
//!   cross the core (target ≤ 5 ms).

use criterion::{criterion_group, criterion_main, Criterion};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sim::net::maxmin::{MaxMinSolver, Problem};

/// Directed links of a k-ary three-tier fat-tree, numbered by tier.
struct FatTree {
    k: u32,
    hosts_per_edge: u32,
    link_capacity_bps: Vec<f64>,
}

impl FatTree {
    const LINK_BPS: f64 = 400e9;

    fn new(k: u32, hosts_per_edge: u32) -> Self {
        let mut tree = FatTree {
            k,
            hosts_per_edge,
            link_capacity_bps: Vec::new(),
        };
        tree.link_capacity_bps = vec![Self::LINK_BPS; tree.link_count() as usize];
        tree
    }

    fn half(&self) -> u32 {
        self.k / 2
    }
    fn hosts(&self) -> u32 {
        self.edges() * self.hosts_per_edge
    }
    /// Edge switches (k pods × k/2), numbered pod-major; likewise agg switches.
    fn edges(&self) -> u32 {
        self.k * self.half()
    }
    /// Directed links per tier-crossing group: host↔edge N each way, edge↔agg and agg↔core
    /// k·(k/2)·(k/2) each way.
    fn tier_links(&self) -> u32 {
        self.edges() * self.half()
    }
    fn link_count(&self) -> u32 {
        2 * self.hosts() + 4 * self.tier_links()
    }

    fn host_up(&self, host: u32) -> u32 {
        host
    }
    fn host_down(&self, host: u32) -> u32 {
        self.hosts() + host
    }
    /// Edge `edge` (global) → agg `agg` (index within its pod), and back.
    fn edge_up(&self, edge: u32, agg: u32) -> u32 {
        2 * self.hosts() + edge * self.half() + agg
    }
    fn edge_down(&self, edge: u32, agg: u32) -> u32 {
        2 * self.hosts() + self.tier_links() + edge * self.half() + agg
    }
    /// Agg `agg` of pod `pod` → its core uplink `core` (0..k/2), and back.
    fn agg_up(&self, pod: u32, agg: u32, core: u32) -> u32 {
        2 * self.hosts() + 2 * self.tier_links() + (pod * self.half() + agg) * self.half() + core
    }
    fn agg_down(&self, pod: u32, agg: u32, core: u32) -> u32 {
        2 * self.hosts() + 3 * self.tier_links() + (pod * self.half() + agg) * self.half() + core
    }

    /// The up-down path from `src` to `dst`, appended to `path`.
    fn route(&self, src: u32, dst: u32, path: &mut Vec<u32>) {
        if src == dst {
            return;
        }
        let (src_edge, dst_edge) = (src / self.hosts_per_edge, dst / self.hosts_per_edge);
        let (src_pod, dst_pod) = (src_edge / self.half(), dst_edge / self.half());
        let hash = splitmix64((u64::from(src) << 32) | u64::from(dst));
        let agg = (hash % u64::from(self.half())) as u32;
        let core = ((hash >> 16) % u64::from(self.half())) as u32;
        path.push(self.host_up(src));
        if src_edge != dst_edge {
            path.push(self.edge_up(src_edge, agg));
            if src_pod != dst_pod {
                path.push(self.agg_up(src_pod, agg, core));
                path.push(self.agg_down(dst_pod, agg, core));
            }
            path.push(self.edge_down(dst_edge, agg));
        }
        path.push(self.host_down(dst));
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Flat flow tables of one ring step: rank r sends to rank r+1 over `placement[r]`'s path.
struct RingStep {
    flow_offsets: Vec<u32>,
    flow_links: Vec<u32>,
    flow_cap_bps: Vec<f64>,
}

impl RingStep {
    fn new(tree: &FatTree, placement: &[u32]) -> Self {
        let n = placement.len();
        let mut flow_offsets = vec![0];
        let mut flow_links = Vec::new();
        for r in 0..n {
            tree.route(placement[r], placement[(r + 1) % n], &mut flow_links);
            flow_offsets.push(flow_links.len() as u32);
        }
        RingStep {
            flow_offsets,
            flow_links,
            flow_cap_bps: vec![f64::INFINITY; n],
        }
    }

    fn problem<'a>(&'a self, tree: &'a FatTree) -> Problem<'a> {
        Problem {
            link_capacity_bps: &tree.link_capacity_bps,
            flow_offsets: &self.flow_offsets,
            flow_links: &self.flow_links,
            flow_cap_bps: &self.flow_cap_bps,
        }
    }
}

fn bench_ring_step(c: &mut Criterion, name: &str, tree: &FatTree, placement: &[u32]) {
    let step = RingStep::new(tree, placement);
    let p = step.problem(tree);
    let mut solver = MaxMinSolver::new();
    let mut rates_bps = vec![0.0; p.flow_count()];
    solver.solve(&p, &mut rates_bps);
    let slowest = rates_bps.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!(
        "{name}: {} flows, {} link crossings, slowest flow {:.1} Gb/s",
        p.flow_count(),
        step.flow_links.len(),
        slowest / 1e9
    );
    c.bench_function(name, |b| b.iter(|| solver.solve(&p, &mut rates_bps)));
}

fn ring_steps(c: &mut Criterion) {
    let tree = FatTree::new(32, 32);
    let rank_ordered: Vec<u32> = (0..tree.hosts()).collect();
    bench_ring_step(c, "ring_rank_ordered", &tree, &rank_ordered);

    let mut random = rank_ordered.clone();
    random.shuffle(&mut ChaCha8Rng::seed_from_u64(2024));
    bench_ring_step(c, "ring_random_placement", &tree, &random);
}

criterion_group!(benches, ring_steps);
criterion_main!(benches);
