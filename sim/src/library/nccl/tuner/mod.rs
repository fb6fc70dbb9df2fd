//! NCCL's tuner: the (algorithm, protocol, channels) NCCL picks for a collective and size.
//!
//! NCCL picks by its own alpha-beta estimate, `time = latency + bytes / bandwidth` per
//! (algorithm, protocol), with constants measured by NVIDIA and written in its sources. We keep
//! those constants and that estimate *only to choose*, as NCCL does; the time dtsim reports
//! comes from playing the chosen schedule (see `super::emit`).
//!
//! Facts, read from NCCL's sources (never copied code):
//! - `src/graph/tuning.cc` at v2.18.5-1, v2.20.5-1 and v2.27.7-1: `baseLat`, `hwLat` (µs),
//!   `llMaxBws`, `perChMaxRingLL128Bws`, `perChMaxTreeBws`, `perChMaxTreeLL128Bws` (GB/s),
//!   the bus→algorithm bandwidth ratios, `treeCorrectionFactor`, the ring "plateau" factor
//!   and the LL128 enable rule.
//! - `src/enqueue.cc` v2.18.5-1 `getAlgoInfo`: channels shrink while
//!   `bytes < channels × threads × threadThreshold`; NVLS always uses its own channels (16).
//! - `src/include/devcomm.h` v2.18.5-1: `NCCL_STEPS` 8, thread counts (LL 512, LL128 640,
//!   Simple 512), LL128 120 data elements per 128-byte line; thresholds LL 8 B × ranks,
//!   LL128 8 B, Simple 64 B per thread.
//! - `src/graph/topo.h`, `search.cc` v2.18.5-1: NVLink bandwidth per link NCCL assumes
//!   (SM60 18, SM70/80/90 20 GB/s, SM86 12), PCI 12 GB/s, search capped at 16 channels.
//!
//! Where behaviour changed across 2.18–2.27 (selected by [`Version`]):
//! - NVLS latency: 2.18–2.19 `baseLat` 23 µs; 2.20+ `hwLat` NVLink 25 µs, latency = that alone.
//! - Hopper LL ceiling `llMaxBws`: 87.7 GB/s up to 2.19, 141 GB/s from 2.20.
//! - Ring LL bus bandwidth: ×1/4 (all-reduce) or ×1/3 up to 2.19; ×1/2 from 2.20.
//! - Tree Simple `baseLat` 0 up to 2.19, 8.4 µs from 2.20.
//! - PAT (all-gather / reduce-scatter, one GPU per node, Simple) exists from 2.23.
//! - NVLS for all-gather / reduce-scatter from 2.20 (single node).
//! - NVLS-Tree (multi-node all-reduce): 2.18 takes `bwIntra` up to two nodes, converts with
//!   `0.70 × nodes / (2 (nodes − 1))` and charges `2 (nodes − 1)` network hops of 19 µs; from
//!   2.19 `min(bwIntra, bwInter)` (half `bwInter` beyond two nodes), × 5/6, and
//!   `2 log2(nodes)` hops of 14 µs.
//! - CollNet (all-reduce on switches that reduce, `NCCL_COLLNET_ENABLE=1`; Simple only; the
//!   CollNet graph has the ring's channels at `bwIntra`; algorithm bandwidth half the bus
//!   bandwidth; Direct only on NVSwitch nodes, its bus bandwidth divided by `f − (f − 1)/2`,
//!   `f` = GPUs per node over channels, and × 0.85 from Hopper): `hwLat` 2.18 Direct 8.0 µs
//!   (NVLink, PCI) and 10.7 (network), Chain 4.75, 8.0 and 14; from 2.19 3.7 / 31 and
//!   2.8 / 30; latency `2 (min(1, ppn − 1) intraLat + (ppn − 1) × arity) + interLat` for Direct
//!   (arity 0.5 µs in 2.18, 0.4 from 2.19), `2 (ppn − 1) intraLat + interLat` for Chain.
//!   Channels: Direct shrinks by NCCL's `ncSwitch` loop (`enqueue.cc`), Chain like the others,
//!   both with 640 threads and a 512-byte threshold. NVLS across nodes runs only with CollNet
//!   (2.27 disables it otherwise), on the NVLS graph NVLS-Tree uses, latency `intraLat +
//!   interLat` (`hwLat` network NVLS 18 µs).

use super::plugin::TunerRules;
use super::{Algo, Arch, Proto, Version};
use crate::collective::Collective;

/// One algorithm's channels as NCCL's topology search would find them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graph {
    /// Channels after search (before duplication).
    pub search_channels: u32,
    /// Channels the communicator runs (after NVLink duplication).
    pub channels: u32,
    /// Per-channel bandwidth inside a node and across nodes, GB/s (NCCL's units).
    pub bw_intra_gbps: f64,
    pub bw_inter_gbps: f64,
    /// Whether intra-node paths are NVLink (NCCL's `typeIntra == LINK_NVL`).
    pub nvlink: bool,
}

/// What the tuner sees: the communicator and its graphs.
#[derive(Debug, Clone, PartialEq)]
pub struct TunerInput {
    pub version: Version,
    pub arch: Arch,
    /// CUDA compute capability × 10 (e.g. 90 for H100), for the LL128 enable rule.
    pub compute_capability: u32,
    pub ranks: u32,
    pub nodes: u32,
    pub ring: Graph,
    pub tree: Graph,
    /// NVLS channels, when the node supports NVLink SHARP (Hopper+ with an NVSwitch).
    pub nvls_channels: Option<u32>,
    /// NVLS-Tree's graph across nodes of NVLS-capable GPUs: heads (one per NIC) as search
    /// channels, NVLS's compute channels, and the speed the search found per head.
    pub nvls_tree: Option<Graph>,
    /// CollNet, when enabled (`NCCL_COLLNET_ENABLE`) on switches that reduce for these ranks.
    pub collnet: Option<CollnetGraph>,
    /// The rings NCCL's search found over a node's NVLink mesh (no NVSwitch), one order of
    /// the ranks per search channel; empty where any order is a ring.
    pub mesh_rings: Vec<Vec<u32>>,
    /// Forced by the scenario (`NCCL_ALGO` of one element).
    pub force_algo: Option<Algo>,
    /// The protocols `NCCL_PROTO` enables (`None`: NCCL's defaults, LL128 only where its
    /// rule allows; a list enables LL128 wherever it is listed, as NCCL does).
    pub protocols: Option<Vec<Proto>>,
    pub min_channels: Option<u32>,
    pub max_channels: Option<u32>,
}

/// NCCL's CollNet graph (`collNetGraph` in `init.cc`: the tree pattern, the ring's channel
/// count), its heads (one per NIC), and whether the nodes have an NVSwitch (CollNet Direct
/// needs one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollnetGraph {
    pub graph: Graph,
    pub heads: u32,
    pub direct: bool,
}

/// NCCL's estimate for one (algorithm, protocol): what the tuner compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub algo: Algo,
    pub proto: Proto,
    pub latency_us: f64,
    /// Algorithm bandwidth, GB/s (bytes / ns).
    pub algbw_gbps: f64,
    pub time_us: f64,
}

/// The tuner's decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub algo: Algo,
    pub proto: Proto,
    /// Channels this collective runs on (after shrinking for small sizes).
    pub channels: u32,
    /// NCCL's own time estimate, µs (reported beside dtsim's, never used as the result).
    pub nccl_estimate_us: f64,
    /// What a tuner plugin's rules decided (`None`: no plugin).
    pub plugin: Option<PluginPick>,
}

/// NCCL's own channel count for `best`: the algorithm's channels within `NCCL_MAX_NCHANNELS`,
/// then fewer while the size leaves threads idle (not below `NCCL_MIN_NCHANNELS`; NVLS keeps
/// its channels).
fn nccl_channels(t: &TunerInput, best: &Estimate, graph_channels: u32, bytes: u64) -> u32 {
    let mut nc = graph_channels;
    if let Some(max) = t.max_channels {
        nc = nc.min(max.max(1));
    }
    if best.algo == Algo::CollnetDirect {
        // enqueue.cc's CollNet channel tuning: shrink towards 16, 8, 4, ... channels while the
        // size leaves threads idle, halving the threshold at 1.5 times each step.
        let heads = t.collnet.map_or(1, |c| c.heads.max(1)) as u64;
        let (nt, mut threshold) = threads_and_threshold(best.algo, best.proto, t.ranks);
        let mut switch = 16u32;
        let mut short = true;
        while switch >= 1 && short {
            loop {
                short = bytes < nc as u64 * nt * heads * threshold;
                if !(short && nc > switch) {
                    break;
                }
                if nc == switch + switch / 2 {
                    threshold /= 2;
                }
                nc -= 1;
            }
            switch /= 2;
        }
    } else if !matches!(best.algo, Algo::Nvls | Algo::NvlsTree) {
        let (nt, threshold) = threads_and_threshold(best.algo, best.proto, t.ranks);
        let floor = t.min_channels.unwrap_or(1).max(1);
        while nc > floor && bytes < nc as u64 * nt * threshold {
            nc -= 1;
        }
    }
    nc
}

/// What a tuner plugin's rules did for one collective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PluginPick {
    /// No rule matched: NCCL's own choice, on the one channel the plugin answers.
    NoRule,
    /// The rule on this line of the file was applied.
    Rule { line: usize },
}

// ---- constants (µs and GB/s), indexed [algo][proto] with protos LL, LL128, Simple ----

const HW_NVLINK: usize = 0;
const HW_PCI: usize = 1;
const HW_NET: usize = 2;

fn base_lat(v: Version, a: Algo, p: Proto) -> f64 {
    let p = p.index();
    match a {
        Algo::Tree => [6.8, 14.0, if v.minor >= 20 { 8.4 } else { 0.0 }][p],
        Algo::Ring => [6.6, 14.0, 8.4][p],
        Algo::CollnetDirect | Algo::CollnetChain if v.minor < 19 => [6.8, 14.0, 0.0][p],
        Algo::CollnetDirect | Algo::CollnetChain => 0.0,
        Algo::Nvls | Algo::NvlsTree => {
            if v.minor >= 20 {
                0.0
            } else {
                [0.0, 0.0, 23.0][p]
            }
        }
        Algo::Pat => 0.0,
    }
}

fn hw_lat(v: Version, hw: usize, a: Algo, p: Proto) -> f64 {
    let p = p.index();
    match (hw, a) {
        (HW_NVLINK, Algo::Tree) => [0.6, 1.25, 4.0][p],
        (HW_NVLINK, Algo::Ring) => [0.6, 1.9, 3.4][p],
        (HW_NVLINK, Algo::Nvls | Algo::NvlsTree) if v.minor >= 20 => [0.0, 0.0, 25.0][p],
        (HW_PCI, Algo::Tree) => [1.0, 1.9, if v.minor >= 20 { 4.0 } else { 6.0 }][p],
        (HW_PCI, Algo::Ring) => [1.0, 2.5, 5.7][p],
        (HW_NET, Algo::Tree) => [5.0, 8.5, 14.0][p],
        (HW_NET, Algo::Ring) => [2.7, 4.0, 14.0][p],
        (HW_NET, Algo::Nvls) => [0.0, 0.0, 18.0][p],
        (HW_NET, Algo::NvlsTree) => [0.0, 0.0, if v.minor >= 19 { 14.0 } else { 19.0 }][p],
        (HW_NET, Algo::CollnetDirect) => [0.0, 0.0, if v.minor < 19 { 10.7 } else { 31.0 }][p],
        (HW_NET, Algo::CollnetChain) => [0.0, 0.0, if v.minor < 19 { 14.0 } else { 30.0 }][p],
        (_, Algo::CollnetDirect) => [0.0, 0.0, if v.minor < 19 { 8.0 } else { 3.7 }][p],
        (HW_PCI, Algo::CollnetChain) if v.minor < 19 => [0.0, 0.0, 8.0][p],
        (_, Algo::CollnetChain) => [0.0, 0.0, if v.minor < 19 { 4.75 } else { 2.8 }][p],
        _ => 0.0,
    }
}

/// NCCL's `hwLat` for an algorithm and protocol on a link kind: the default per-step latency
/// dtsim's NCCL transports use when a profile has not measured one.
pub fn step_latency_us(v: Version, class_hw: StepHw, a: Algo, p: Proto) -> f64 {
    let hw = match class_hw {
        StepHw::Nvlink => HW_NVLINK,
        StepHw::Pci => HW_PCI,
        StepHw::Net => HW_NET,
    };
    hw_lat(v, hw, a, p)
}

/// NCCL's `baseLat` (2.18–2.19) or, from 2.20, its NVLS one-shot latency: the default fixed
/// cost of one collective call.
pub fn base_latency_us(v: Version, a: Algo, p: Proto) -> f64 {
    base_lat(v, a, p)
}

/// The three link kinds NCCL's latency table distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepHw {
    Nvlink,
    Pci,
    Net,
}

fn arch_index(a: Arch) -> usize {
    match a {
        Arch::Volta => 0,
        Arch::Ampere => 1,
        Arch::Hopper => 2,
        Arch::Blackwell => 3,
    }
}

/// `llMaxBws[arch or cpu][nodes index]`: total LL bus bandwidth ceiling, GB/s.
pub fn ll_max_bw(v: Version, arch: Arch, nodes: u32) -> f64 {
    let i2 = if nodes <= 2 { nodes as usize - 1 } else { 2 };
    // For more than one node NCCL indexes by CPU vendor; dtsim assumes Intel (row 0).
    let i1 = if nodes == 1 { arch_index(arch) } else { 0 };
    let hopper = if v.minor >= 20 {
        [141.0, 45.0, 35.0]
    } else {
        [87.7, 22.5, 19.0]
    };
    let table = [
        [39.0, 39.0, 20.4],
        [87.7, 22.5, 19.0],
        hopper,
        [2.0 * 141.0, 2.0 * 45.0, 2.0 * 35.0],
    ];
    table[i1.min(3)][i2]
}

/// Per-channel LL128 ring ceiling, GB/s of bus bandwidth.
pub fn per_channel_ring_ll128(arch: Arch) -> f64 {
    match arch {
        Arch::Volta | Arch::Ampere => 20.0,
        Arch::Hopper => 36.7,
        Arch::Blackwell => 2.0 * 36.7,
    }
}

/// Per-channel tree ceilings (Simple, LL128), GB/s of bus bandwidth.
pub fn per_channel_tree(arch: Arch, nodes: u32) -> (f64, f64) {
    let i2 = if nodes <= 2 { nodes as usize - 1 } else { 2 };
    let simple = match arch {
        Arch::Volta => [26.5, 18.5, 10.0],
        Arch::Ampere => [24.0, 23.6, 17.8],
        Arch::Hopper => [38.7, 41.4, 36.0],
        Arch::Blackwell => [2.0 * 38.7, 2.0 * 41.4, 2.0 * 36.0],
    }[i2];
    let ll128 = match arch {
        Arch::Volta | Arch::Ampere => [20.0, 20.0, 20.0],
        Arch::Hopper => [36.7, 36.7, 29.0],
        Arch::Blackwell => [2.0 * 36.7, 2.0 * 36.7, 2.0 * 29.0],
    }[i2];
    (simple, ll128)
}

/// NCCL's inter-node search speeds for Hopper (`sm90SpeedArrayInter`, GB/s per channel; 2.19
/// added 22), fastest first.
fn sm90_inter_speeds(v: Version) -> &'static [f64] {
    if v.minor >= 19 {
        &[
            48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
        ]
    } else {
        &[
            48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
        ]
    }
}

/// The speed NCCL's NVLS search settles on across nodes: the fastest of the speed array a NIC
/// (`nic_gbps`) carries and that a GPU's NVLinks carry for each head (`per_head_nvlink_gbps`:
/// every head's channel crosses every GPU's links to the switch). `None` below the slowest.
pub fn nvls_search_speed(v: Version, nic_gbps: f64, per_head_nvlink_gbps: f64) -> Option<f64> {
    sm90_inter_speeds(v)
        .iter()
        .copied()
        .find(|&s| s <= nic_gbps && s <= per_head_nvlink_gbps)
}

/// `treeCorrectionFactor[proto][log2(bytes/64)]` (tuning.cc, same in 2.18 and 2.27).
const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

/// Threads per channel and the bytes-per-thread threshold below which channels are dropped.
pub fn threads_and_threshold(a: Algo, p: Proto, ranks: u32) -> (u64, u64) {
    if matches!(a, Algo::CollnetDirect | Algo::CollnetChain) {
        // NCCL_MAX_NTHREADS and CollNet's own threshold (tuning.cc).
        return (640, 512);
    }
    match p {
        Proto::Ll => (512, 8 * if a == Algo::Ring { ranks as u64 } else { 1 }),
        Proto::Ll128 => (640, 8),
        Proto::Simple => (512, 64),
    }
}

/// Whether NCCL enables LL128 by default (2.18 rule: NVLink inside nodes, one GPU
/// generation, compute capability 7.0, 8.0 or 9.0 exactly).
fn ll128_enabled(t: &TunerInput) -> bool {
    t.ring.nvlink && matches!(t.compute_capability, 70 | 80 | 90 | 100)
}

/// Which algorithms implement which collective, in `v`.
pub fn implements(v: Version, a: Algo, c: Collective) -> bool {
    use Collective::*;
    match a {
        Algo::Ring => matches!(
            c,
            AllReduce | ReduceScatter | AllGather | Broadcast | Reduce
        ),
        Algo::Tree => c == AllReduce,
        Algo::Nvls => c == AllReduce || (v.minor >= 20 && matches!(c, ReduceScatter | AllGather)),
        Algo::NvlsTree => c == AllReduce,
        Algo::CollnetDirect | Algo::CollnetChain => c == AllReduce,
        Algo::Pat => v.minor >= 23 && matches!(c, ReduceScatter | AllGather),
    }
}

/// NCCL's (latency, algorithm bandwidth) estimate for every runnable (algorithm, protocol),
/// or why none can run.
pub fn estimates(t: &TunerInput, coll: Collective, bytes: u64) -> Vec<Estimate> {
    let v = t.version;
    let n = t.ranks as f64;
    let nodes = t.nodes as f64;
    let ppn = n / nodes;
    let nsteps = match coll {
        Collective::AllReduce => 2.0 * (n - 1.0),
        Collective::ReduceScatter | Collective::AllGather => n - 1.0,
        _ => n,
    };
    let n_inter_steps = if t.nodes == 1 {
        0.0
    } else {
        match coll {
            Collective::AllReduce => 2.0 * (nodes - 1.0),
            Collective::ReduceScatter | Collective::AllGather => nodes - 1.0,
            _ => nodes - 1.0,
        }
    };
    let ll_max = ll_max_bw(v, t.arch, t.nodes);
    let (tree_max, tree_ll128_max) = per_channel_tree(t.arch, t.nodes);
    let log_size = {
        let x = bytes >> 6;
        if x == 0 {
            -1
        } else {
            63 - x.leading_zeros() as i64
        }
    };
    let mut out = Vec::new();
    for a in Algo::ALL {
        if !implements(v, a, coll) || !runnable(t, a) {
            continue;
        }
        if t.force_algo.is_some_and(|f| f != a) {
            continue;
        }
        let graph = match a {
            Algo::Tree => &t.tree,
            Algo::NvlsTree => match &t.nvls_tree {
                Some(g) => g,
                None => continue,
            },
            // NVLS across nodes (with CollNet) runs on the same NVLS graph as NVLS-Tree.
            Algo::Nvls if t.nodes > 1 => match &t.nvls_tree {
                Some(g) => g,
                None => continue,
            },
            Algo::CollnetDirect | Algo::CollnetChain => match &t.collnet {
                Some(c) => &c.graph,
                None => continue,
            },
            _ => &t.ring,
        };
        let channels = match a {
            Algo::Nvls if t.nodes == 1 => t.nvls_channels.unwrap_or(0),
            _ => graph.search_channels,
        } as f64;
        for p in Proto::ALL {
            let simple_only = matches!(
                a,
                Algo::Nvls | Algo::NvlsTree | Algo::Pat | Algo::CollnetDirect | Algo::CollnetChain
            );
            if simple_only && p != Proto::Simple {
                continue;
            }
            if t.protocols.as_ref().is_some_and(|l| !l.contains(&p)) {
                continue;
            }
            if p == Proto::Ll128 && t.protocols.is_none() && !ll128_enabled(t) {
                continue;
            }
            let bw = if t.nodes <= 2 {
                graph.bw_intra_gbps
            } else {
                graph.bw_inter_gbps
            };
            let bw = match a {
                Algo::Nvls if v.minor >= 20 => graph.bw_intra_gbps.min(if t.nodes > 1 {
                    graph.bw_inter_gbps
                } else {
                    f64::INFINITY
                }),
                // From 2.19 the tree half of NVLS-Tree is charged half a NIC beyond two nodes.
                Algo::NvlsTree if v.minor >= 19 => graph.bw_intra_gbps.min(if t.nodes <= 2 {
                    graph.bw_inter_gbps
                } else {
                    graph.bw_inter_gbps / 2.0
                }),
                Algo::CollnetDirect | Algo::CollnetChain => graph.bw_intra_gbps,
                _ => bw,
            };
            let mut bus = channels * bw;
            if a == Algo::Ring && p == Proto::Ll {
                let k = if v.minor >= 20 {
                    0.5
                } else if t.nodes > 1 || matches!(coll, Collective::AllReduce | Collective::Reduce)
                {
                    0.25
                } else {
                    1.0 / 3.0
                };
                bus = ll_max.min(bus * k);
            }
            if a == Algo::Ring && p == Proto::Ll128 {
                let k = if v.minor < 20 && ppn < 2.0 { 0.7 } else { 0.92 };
                bus = (bus * k).min(channels * per_channel_ring_ll128(t.arch));
            }
            if a == Algo::Tree {
                bus = (bus * 0.92).min(channels * tree_max);
                if p == Proto::Ll {
                    bus = (bus / 3.8).min(ll_max);
                }
                if p == Proto::Ll128 {
                    let k = if t.nodes == 1 {
                        7.0 / 9.0
                    } else {
                        120.0 / 128.0
                    };
                    bus = (bus * k).min(channels * tree_ll128_max);
                }
            }
            if a == Algo::Pat {
                bus *= 0.75;
            }
            if a == Algo::CollnetDirect {
                // "Collnet+Direct requires all GPUs to have a local NIC to work at full speed".
                let f = ppn / channels;
                bus /= f - (f - 1.0) / 2.0;
                if t.arch >= Arch::Hopper {
                    bus *= 0.85;
                }
            }
            let ratio = match a {
                Algo::Ring => n / nsteps,
                Algo::Nvls => 5.0 / 6.0,
                Algo::NvlsTree if v.minor >= 19 => 5.0 / 6.0,
                Algo::NvlsTree => 0.70 * nodes / (2.0 * (nodes - 1.0)).max(1.0),
                Algo::Pat => 1.0,
                _ => 0.5,
            };
            let mut algbw = bus * ratio;
            if algbw <= 0.0 {
                continue;
            }
            // Latency.
            let intra_hw = if graph.nvlink { HW_NVLINK } else { HW_PCI };
            let hw = if t.nodes == 1 { intra_hw } else { HW_NET };
            let intra_lat = hw_lat(v, intra_hw, a, p);
            let inter_lat = hw_lat(v, HW_NET, a, p);
            let mut lat = base_lat(v, a, p);
            match a {
                Algo::Ring => {
                    if matches!(coll, Collective::Broadcast | Collective::Reduce) {
                        lat += hw_lat(v, hw, a, p);
                    } else {
                        let net_overhead = if t.nodes > 1 {
                            if p == Proto::Simple {
                                3.0
                            } else {
                                1.0
                            }
                        } else {
                            0.0
                        };
                        let il = intra_lat.max(net_overhead);
                        lat += (nsteps - n_inter_steps) * il + n_inter_steps * inter_lat;
                    }
                }
                Algo::Tree => {
                    lat += 2.0 * ((ppn - 1.0) * intra_lat + nodes.log2().floor() * inter_lat);
                }
                Algo::Nvls => {
                    if v.minor >= 20 {
                        lat = intra_lat;
                    }
                    if t.nodes > 1 {
                        lat += inter_lat;
                    }
                }
                // 2.18: a network hop per node up and down; from 2.19 per tree level.
                Algo::NvlsTree if v.minor >= 19 => {
                    lat += intra_lat + 2.0 * nodes.log2().floor() * inter_lat
                }
                Algo::NvlsTree => lat += 2.0 * (nodes - 1.0) * inter_lat,
                Algo::Pat => lat = 8.0 + nodes.log2().floor() * inter_lat / 3.5 + n * 2.8,
                Algo::CollnetDirect => {
                    let arity = if v.minor < 19 { 0.5 } else { 0.4 };
                    lat +=
                        2.0 * ((ppn - 1.0).min(1.0) * intra_lat + (ppn - 1.0) * arity) + inter_lat;
                }
                Algo::CollnetChain => lat += 2.0 * (ppn - 1.0) * intra_lat + inter_lat,
            }
            // ncclTopoGetAlgoTime refinements.
            if a == Algo::Tree && coll == Collective::AllReduce && (0..23).contains(&log_size) {
                algbw *= TREE_CORRECTION[p.index()][log_size as usize];
            }
            if a == Algo::Ring
                && p == Proto::Simple
                && t.nodes > 1
                && coll == Collective::AllReduce
                && bytes / (t.ring.channels as u64 * t.ranks as u64).max(1) >= 64
            {
                lat *= if t.compute_capability < 80 { 1.9 } else { 1.4 };
            }
            let time_us = lat + bytes as f64 / (1000.0 * algbw);
            out.push(Estimate {
                algo: a,
                proto: p,
                latency_us: lat,
                algbw_gbps: algbw,
                time_us,
            });
        }
    }
    out
}

/// Whether the system can run `a` at all (NCCL's algorithm enable rules).
pub fn runnable(t: &TunerInput, a: Algo) -> bool {
    match a {
        Algo::Ring => true,
        Algo::Tree => t.ranks > 1,
        // Across nodes NVLS needs CollNet for the sum between nodes (tuning.cc 2.27: "Disable
        // ... Collnet+NVLS if collnet is not supported").
        Algo::Nvls if t.nodes > 1 => t.nvls_tree.is_some() && t.collnet.is_some(),
        Algo::Nvls => t.nvls_channels.is_some(),
        Algo::NvlsTree => t.nvls_tree.is_some() && t.nodes > 1,
        // CollNet needs it enabled and switches that reduce for these ranks; Direct also an
        // NVSwitch in the nodes (tuning.cc: off where `nvsCount == 0`).
        Algo::CollnetDirect => t.collnet.is_some_and(|c| c.direct) && t.nodes > 1,
        Algo::CollnetChain => t.collnet.is_some() && t.nodes > 1,
        Algo::Pat => t.nodes == t.ranks && t.version.minor >= 23,
    }
}

/// NCCL's choice for `coll` of `bytes`: the fastest estimate, then its channel count.
pub fn choose(t: &TunerInput, coll: Collective, bytes: u64) -> Option<Choice> {
    choose_with(t, coll, bytes, None)
}

/// [`choose`] with a tuner plugin's rules ([`TunerRules`]): the first matching rule NCCL can
/// run here is picked (its cost set to 0), and the plugin's channel answer replaces NCCL's count
/// (one channel unless the rule applied names one; capped at the algorithm's channels).
pub fn choose_with(
    t: &TunerInput,
    coll: Collective,
    bytes: u64,
    rules: Option<&TunerRules>,
) -> Option<Choice> {
    let table = estimates(t, coll, bytes);
    let rule = rules.and_then(|r| {
        r.first_match(coll, bytes, t.nodes, t.ranks, |a, p| {
            table.iter().any(|e| e.algo == a && e.proto == p)
        })
    });
    let best = match rule {
        Some(r) => table
            .iter()
            .copied()
            .find(|e| e.algo == r.algo && e.proto == r.proto)?,
        None => table
            .iter()
            .copied()
            .fold(None::<Estimate>, |best, e| match best {
                Some(b) if b.time_us <= e.time_us => Some(b),
                _ => Some(e),
            })?,
    };
    let graph_channels = match best.algo {
        Algo::Nvls if t.nodes == 1 => t.nvls_channels.unwrap_or(1),
        Algo::Nvls | Algo::NvlsTree => t.nvls_tree.map_or(1, |g| g.channels),
        Algo::Tree => t.tree.channels,
        Algo::CollnetDirect | Algo::CollnetChain => t.collnet.map_or(1, |c| c.graph.channels),
        _ => t.ring.channels,
    };
    // A tuner plugin's channel answer replaces NCCL's own count (one channel unless the rule
    // applied names a count); without a plugin, NCCL shrinks its count for small sizes.
    let (nc, plugin) = match (rules, rule) {
        (Some(_), Some(rule)) => (
            rule.channels.unwrap_or(1).min(graph_channels),
            Some(PluginPick::Rule { line: rule.line }),
        ),
        (Some(_), None) => (1, Some(PluginPick::NoRule)),
        (None, _) => (nccl_channels(t, &best, graph_channels, bytes), None),
    };
    Some(Choice {
        algo: best.algo,
        proto: best.proto,
        channels: nc.max(1),
        nccl_estimate_us: best.time_us,
        plugin,
    })
}

#[cfg(test)]
mod tests;
