//! The workloads behind `cargo bench -p sim` and `dtsim bench`: the engine's speed targets.
//!
//! (a) one max-min solve of a ring step over 16,384 GPUs on a three-tier fat-tree, with
//!     rank-ordered and random placement;
//! (b) ring all-reduce of 1 GiB over 1,024 / 4,096 / 16,384 GPUs on a non-blocking fat-tree,
//!     rank-ordered, and over 4,096 / 16,384 with random placement (ECMP collisions);
//! (c) training steps at 1,024 / 4,096 / 16,384 / 131,072 GPUs: GPT-1.3B (TP 8 x PP 4 x DP,
//!     1F1B, 8 micro-batches) and Llama-3.1 405B (TP 8 x PP 16 x DP 128, distributed optimizer,
//!     full recomputation, 16 micro-batches) under NCCL on the rail-optimized H100 cluster
//!     (`topologies/h100_rail_cluster.toml` grown to N/8 nodes, `data/profiles/h100_sxm_node.json`);
//! (d) event-queue hold time with 10^6 pending events.
//!
//! Each case builds its input, runs once, and reports what it did (events, flows, solves) so
//! rates can be computed; wall times are measured by the caller (criterion, or `dtsim bench`).

use std::sync::Arc;

use crate::collective::play::{play, PlayOptions, PlayOutcome};
use crate::collective::{
    bus_factor, generate, Algorithm, Collective, CollectiveSpec, Fabric, RingOrder,
};
use crate::engine::{EventQueue, SimRng, SimTime};
use crate::net::flow::FlowModel;
use crate::net::maxmin::{MaxMinSolver, Problem};
use crate::topology::generators::{FatTree, LinkParams};
use crate::topology::routing::Router;
use crate::topology::{DeviceId, LinkClass, Topology};
use crate::units::{Bandwidth, Duration};

/// Rank placement for the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    RankOrdered,
    /// A random permutation of the GPUs, drawn from seed 1.
    Random,
}

/// A k-ary three-tier fat-tree of 400 Gb/s links, 1 us per hop, with `hosts` GPUs
/// (`hosts_per_edge` defaults to k/2, which makes it non-blocking).
pub fn fat_tree(k: u32, hosts: u32, hosts_per_edge: Option<u32>) -> Arc<Topology> {
    let link = LinkParams {
        bandwidth: Bandwidth(400e9),
        latency: Duration(SimTime::from_us(1)),
        buffer: None,
        class: LinkClass::Ib,
    };
    let spec = FatTree {
        k,
        hosts_per_edge,
        hosts: Some(hosts),
        link,
        host_link: None,
    };
    Arc::new(
        spec.build(&format!("fat-tree-k{k}-{hosts}"))
            .expect("benchmark fat-tree builds"),
    )
}

/// The smallest even k whose non-blocking fat-tree (k³/4 hosts) holds `gpus`.
pub fn fat_tree_k_for(gpus: u32) -> u32 {
    let mut k = 4;
    while k * k * k / 4 < gpus {
        k += 2;
    }
    k
}

/// The GPUs of `topo` in placement order (the first `n`).
pub fn place(topo: &Topology, n: u32, placement: Placement) -> Vec<DeviceId> {
    let mut gpus = topo.gpus().to_vec();
    if placement == Placement::Random {
        SimRng::new(1, 0).fork("placement").shuffle(&mut gpus);
    }
    gpus.truncate(n as usize);
    gpus
}

/// Flows of one ring step (rank i → rank i+1) routed on `topo`, as a max-min problem's tables.
pub struct RingStep {
    pub capacity_bps: Vec<f64>,
    pub offsets: Vec<u32>,
    pub links: Vec<u32>,
    pub caps: Vec<f64>,
}

impl RingStep {
    pub fn new(topo: &Topology, ranks: &[DeviceId]) -> RingStep {
        let mut router = Router::new(topo, 1);
        let mut offsets = vec![0u32];
        let mut links = Vec::new();
        for i in 0..ranks.len() {
            let path = router
                .path(topo, ranks[i], ranks[(i + 1) % ranks.len()])
                .expect("fat-tree is connected");
            links.extend(path.iter().map(|l| l.0));
            offsets.push(links.len() as u32);
        }
        RingStep {
            capacity_bps: topo.links().iter().map(|l| l.bandwidth_bps).collect(),
            offsets,
            caps: vec![f64::INFINITY; ranks.len()],
            links,
        }
    }

    pub fn problem(&self) -> Problem<'_> {
        Problem {
            link_capacity_bps: &self.capacity_bps,
            flow_offsets: &self.offsets,
            flow_links: &self.links,
            flow_cap_bps: &self.caps,
        }
    }

    /// One solve; returns the slowest flow's rate (so the work cannot be optimized away).
    pub fn solve(&self, solver: &mut MaxMinSolver, rates: &mut Vec<f64>) -> f64 {
        rates.resize(self.caps.len(), 0.0);
        solver.solve(&self.problem(), rates);
        rates.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

struct TopoFabric<'a> {
    topo: &'a Topology,
    ranks: &'a [DeviceId],
    router: std::cell::RefCell<Router>,
}

impl Fabric for TopoFabric<'_> {
    fn bottleneck_bps(&self, a: u32, b: u32) -> f64 {
        let mut r = self.router.borrow_mut();
        let path = r
            .path(self.topo, self.ranks[a as usize], self.ranks[b as usize])
            .expect("connected");
        self.topo.bottleneck(path).0
    }
    fn node_of(&self, rank: u32) -> u32 {
        rank
    }
}

/// Result of one ring all-reduce benchmark run.
#[derive(Debug, Clone)]
pub struct RingRun {
    pub outcome: PlayOutcome,
    /// The closed form 2(n-1)(a + M/(nB)) with `a` the largest path latency between ring
    /// neighbours (every step waits for its slowest pair) and B the host link bandwidth.
    pub closed_form: SimTime,
    pub busbw_gbytes_per_s: f64,
}

/// Ring all-reduce of `bytes` over `ranks` placed on `topo`.
pub fn ring_all_reduce(topo: &Arc<Topology>, ranks: &[DeviceId], bytes: u64) -> RingRun {
    let n = ranks.len() as u32;
    let fabric = TopoFabric {
        topo,
        ranks,
        router: std::cell::RefCell::new(Router::new(topo, 1)),
    };
    let spec = CollectiveSpec {
        collective: Collective::AllReduce,
        bytes,
        root: 0,
        peer: 1,
        algorithm: Algorithm::Ring {
            rings: vec![RingOrder::Generated {
                offset: 0,
                stride: 1,
                reverse: false,
            }],
        },
        slices: 1,
    };
    let schedule = generate(&spec, n, &fabric).expect("ring all-reduce generates");
    let mut model = FlowModel::new(topo.clone(), Default::default(), 1);
    let outcome = play(
        &schedule,
        ranks,
        &mut model,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .expect("plays");

    let mut router = Router::new(topo, 1);
    let mut max_latency_ps = 0u64;
    let mut host_bps = f64::INFINITY;
    for i in 0..ranks.len() {
        let path = router
            .path(topo, ranks[i], ranks[(i + 1) % ranks.len()])
            .expect("connected");
        max_latency_ps =
            max_latency_ps.max(path.iter().map(|&l| topo.link(l).latency.as_ps()).sum());
        host_bps = host_bps.min(topo.link(path[0]).bandwidth_bps);
    }
    let chunk = (bytes as f64 / n as f64).ceil();
    let step = max_latency_ps as f64 * 1e-12 + chunk * 8.0 / host_bps;
    let closed_form = SimTime::from_secs_f64(2.0 * (n as f64 - 1.0) * step);
    let secs = outcome.end.as_secs_f64();
    RingRun {
        busbw_gbytes_per_s: bytes as f64 / secs * bus_factor(Collective::AllReduce, n) / 1e9,
        outcome,
        closed_form,
    }
}

/// Event-queue "hold": keep `pending` events queued; each hold pops the earliest and schedules
/// one at its time plus a random increment. Returns a checksum of the popped times.
pub struct Hold {
    queue: EventQueue<u32>,
    rng: SimRng,
}

impl Hold {
    pub fn new(pending: usize) -> Hold {
        let mut queue = EventQueue::new();
        let mut rng = SimRng::new(42, 0);
        for i in 0..pending {
            let _ = queue
                .schedule(SimTime::from_ps(rng.below(1_000_000)), i as u32)
                .expect("future");
        }
        Hold { queue, rng }
    }

    /// Performs `n` holds.
    pub fn run(&mut self, n: usize) -> u64 {
        let mut sum = 0u64;
        for _ in 0..n {
            let (t, e) = self.queue.pop().expect("pending events");
            sum = sum.wrapping_add(t.as_ps());
            let _ = self
                .queue
                .schedule_in(SimTime::from_ps(1 + self.rng.below(1_000_000)), e);
        }
        sum
    }
}

/// A training-step benchmark case (c): a scenario with its paths relative to the repository.
#[derive(Debug, Clone, Copy)]
pub struct StepCase {
    pub name: &'static str,
    scenario: &'static str,
}

/// GPT-1.3B, bf16, Adam, TP 8 x PP 4 x DP, 1F1B with 8 micro-batches of 1 (issue 12's case).
pub const GPT_1_3B_STEP: StepCase = StepCase {
    name: "gpt-1.3b tp8 pp4",
    scenario: r#"
name = "bench-gpt-1.3b-step"
profile = "../data/profiles/h100_sxm_node.json"
[topology]
file = "../topologies/h100_rail_cluster.toml"
[workload]
model = "gpt_1_3b"
dtype = "bf16"
optimizer = "adam"
batch_per_gpu = 8
parallelism = "ddp"
tensor_parallel = 8
pipeline_parallel = 4
microbatches = 8
pipeline_schedule = "1f1b"
"#,
};

/// Llama-3.1 405B, bf16, Adam, TP 8 x PP 16 x DP, distributed optimizer, full recomputation,
/// 16 micro-batches of one 8,192-token sequence (Meta's 16,384-GPU layout: DP 128).
pub const LLAMA3_405B_STEP: StepCase = StepCase {
    name: "llama3-405b tp8 pp16",
    scenario: r#"
name = "bench-llama3-405b-step"
profile = "../data/profiles/h100_sxm_node.json"
[topology]
file = "../topologies/h100_rail_cluster.toml"
[workload]
model = "llama3_405b"
dtype = "bf16"
optimizer = "adam"
parallelism = "zero1"
tensor_parallel = 8
pipeline_parallel = 16
batch_per_gpu = 16
microbatches = 16
activation_recompute = true
"#,
};

impl StepCase {
    /// The case's scenario on `gpus` GPUs (`gpus / 8` HGX nodes), reading the topology and
    /// profile under `repo_root`.
    pub fn scenario(
        &self,
        repo_root: &std::path::Path,
        gpus: u32,
    ) -> Result<crate::scenario::Scenario, crate::scenario::ScenarioError> {
        self.scenario_with(repo_root, gpus, &[])
    }

    /// [`StepCase::scenario`] with more `field=value` overrides.
    pub fn scenario_with(
        &self,
        repo_root: &std::path::Path,
        gpus: u32,
        set: &[&str],
    ) -> Result<crate::scenario::Scenario, crate::scenario::ScenarioError> {
        let anchor = repo_root.join("scenarios").join("bench_step.toml");
        let mut all = vec![format!("topology.generator.nodes={}", gpus / 8)];
        all.extend(set.iter().map(|s| s.to_string()));
        crate::scenario::parse(self.scenario, &anchor, &all)
    }
}

/// The exponent `b` of the least-squares line `ln y = a + b ln x`.
pub fn growth_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|&(x, y)| (x.ln(), y.ln()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in bytes.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_benchmark_matches_its_closed_form_on_a_small_fat_tree() {
        let topo = fat_tree(fat_tree_k_for(128), 128, None);
        for placement in [Placement::RankOrdered, Placement::Random] {
            let ranks = place(&topo, 128, placement);
            let run = ring_all_reduce(&topo, &ranks, 64 << 20);
            let err = (run.outcome.end.as_secs_f64() / run.closed_form.as_secs_f64() - 1.0).abs();
            if placement == Placement::RankOrdered {
                assert!(
                    err < 1e-3,
                    "rank-ordered within 0.1% of the closed form: {err}"
                );
            } else {
                // Random placement shares uplinks: never faster than the closed form.
                assert!(run.outcome.end >= run.closed_form);
            }
        }
    }

    #[test]
    fn the_growth_exponent_of_a_power_law_is_its_power() {
        let pts: Vec<(f64, f64)> = [1024.0, 4096.0, 16384.0]
            .iter()
            .map(|&x: &f64| (x, 3.0 * x.powf(1.25)))
            .collect();
        let b = growth_exponent(&pts).unwrap();
        assert!((b - 1.25).abs() < 1e-9, "{b}");
        assert_eq!(growth_exponent(&pts[..1]), None);
    }

    #[test]
    fn hold_keeps_the_number_of_pending_events() {
        let mut h = Hold::new(1000);
        h.run(5000);
        assert_eq!(h.queue.len(), 1000);
    }
}
