//! NCCL as it runs (2.18–2.27): what it picks for a collective, and the schedule it plays.
//!
//! For a collective of `bytes` on a [`System`]:
//! 1. [`tuner`] builds NCCL's view of the system (GPU generation, NVLink/PCIe/network
//!    channels and per-channel bandwidths, NVLS when the node has an NVSwitch and Hopper+ GPUs)
//!    and picks (algorithm, protocol) by NCCL's own cost table, then shrinks the channel count
//!    for small messages as NCCL's `getAlgoInfo` does. `NCCL_ALGO` / `NCCL_PROTO` /
//!    `NCCL_MIN|MAX_NCHANNELS` overrides come from the scenario.
//! 2. [`emit`] plays that choice as a schedule: Ring = one ring per channel, pipelined in
//!    NCCL's loop chunks; Tree = chains inside nodes and the double binary tree over them
//!    ([`trees`]), in tree chunks; NVLS = every GPU
//!    pushing to and pulling from the NVSwitch (in-switch reduction and multicast); NVLS-Tree =
//!    NVLS inside each node and the double binary tree between the nodes' NIC heads
//!    ([`nvls_tree`]); CollNet Direct and Chain = the nodes' heads summing through switches
//!    that reduce in the network ([`collnet`], SHARP); PAT = log-step halving/doubling.
//! 3. [`params`] turns the profile's fitted physical parameters (per-call latency, per-step
//!    latency, link efficiency) into a [`crate::collective::Transport`] on every transfer op,
//!    and protocol framing into wire bytes (LL sends 8 bytes per 4 of data, LL128 128 per 120).
//!
//! CollNet runs where NCCL would: `collective.collnet = true` (`NCCL_COLLNET_ENABLE=1`) on a
//! topology whose switches reduce (`in_network_reduction`); asked for anywhere else, it is an
//! error naming what is missing.

pub mod collnet;
pub mod emit;
pub mod nvls_tree;
pub mod p2p;
pub mod params;
pub mod plugin;
pub mod search;
pub mod trees;
pub mod tuner;

use super::{LibraryError, LibraryOptions, Plan, Request, System};
use crate::collective::{Collective, Fabric};
use crate::profile::NcclCalibration;
use crate::topology::{gpu_models, LinkClass};

/// The algorithms NCCL names (`NCCL_ALGO` spelling, lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algo {
    Tree,
    Ring,
    CollnetDirect,
    CollnetChain,
    Nvls,
    NvlsTree,
    Pat,
}

impl Algo {
    pub const ALL: [Algo; 7] = [
        Algo::Tree,
        Algo::Ring,
        Algo::CollnetDirect,
        Algo::CollnetChain,
        Algo::Nvls,
        Algo::NvlsTree,
        Algo::Pat,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Algo::Tree => "tree",
            Algo::Ring => "ring",
            Algo::CollnetDirect => "collnet_direct",
            Algo::CollnetChain => "collnet_chain",
            Algo::Nvls => "nvls",
            Algo::NvlsTree => "nvls_tree",
            Algo::Pat => "pat",
        }
    }
    pub fn parse(s: &str) -> Option<Algo> {
        let s = s.to_ascii_lowercase().replace('-', "_");
        let s = match s.as_str() {
            "nvlstree" => "nvls_tree",
            "collnetdirect" => "collnet_direct",
            "collnetchain" => "collnet_chain",
            other => other,
        }
        .to_string();
        Algo::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// NCCL's protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Ll,
    Ll128,
    Simple,
}

impl Proto {
    pub const ALL: [Proto; 3] = [Proto::Ll, Proto::Ll128, Proto::Simple];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Ll => "ll",
            Proto::Ll128 => "ll128",
            Proto::Simple => "simple",
        }
    }
    pub fn parse(s: &str) -> Option<Proto> {
        let s = s.to_ascii_lowercase();
        Proto::ALL.into_iter().find(|p| p.as_str() == s)
    }
    /// Bytes on the wire per payload byte: LL carries 4 data bytes in each 8-byte line (the
    /// other 4 are a flag), LL128 120 in each 128-byte line, Simple sends payload only.
    pub fn wire_bytes_per_byte(self) -> f64 {
        match self {
            Proto::Ll => 2.0,
            Proto::Ll128 => 128.0 / 120.0,
            Proto::Simple => 1.0,
        }
    }
    /// Payload bytes per step of one channel's loop (`buffSize / NCCL_STEPS` × chunk steps,
    /// framing removed): Simple 4 MiB / 8 × 4 chunk steps for ring all-reduce / all-gather /
    /// reduce-scatter (× 1 otherwise); LL 512 KiB / 8, half of it data; LL128
    /// 4,915,200 / 8 × 120/128.
    pub fn chunk_bytes(self, ring_collective: bool) -> u64 {
        match self {
            Proto::Simple => (4 << 20) / 8 * if ring_collective { 4 } else { 1 },
            Proto::Ll => (512 << 10) / 8 / 2,
            Proto::Ll128 => 4_915_200 / 8 * 120 / 128,
        }
    }
}

/// (source, destination) ranks of one step.
pub(crate) type Pairs = Vec<(u32, u32)>;

/// The steps between nodes of one of NCCL's double binary trees (`tree` 0 or 1 over `nodes`
/// nodes), each node standing as its head rank `head_of(node)`: up, deepest level first, each
/// level's (child head, parent head) pairs with how many parents reduce what they receive;
/// then down from the root, (parent head, child head) pairs. The tree all-reduce and
/// NVLS-Tree both run these between their intra-node stages.
pub(crate) fn head_tree_steps(
    tree: u32,
    nodes: u32,
    head_of: impl Fn(u32) -> u32,
) -> (Vec<(Pairs, u32)>, Vec<Pairs>) {
    let levels = crate::collective::tree::levels(tree, nodes, None);
    let up = levels
        .iter()
        .rev()
        .map(|level| {
            let pairs: Pairs = level
                .iter()
                .map(|&(c, p)| (head_of(c), head_of(p)))
                .collect();
            let mut parents: Vec<u32> = pairs.iter().map(|&(_, p)| p).collect();
            parents.sort_unstable();
            parents.dedup();
            (pairs, parents.len() as u32)
        })
        .collect();
    let down = levels
        .iter()
        .map(|level| {
            level
                .iter()
                .map(|&(c, p)| (head_of(p), head_of(c)))
                .collect()
        })
        .collect();
    (up, down)
}

/// NVLS inside every node of `nodes` (ranks grouped by node): the patterns of every GPU
/// writing to its node's switch (node `k`'s is endpoint `first_switch + k`) and of each switch
/// multicasting back to its GPUs, added to `s`.
pub(crate) fn node_switch_patterns(
    s: &mut crate::collective::Schedule,
    nodes: &[Vec<u32>],
    first_switch: u32,
) -> (crate::collective::PatternId, crate::collective::PatternId) {
    let to_switch: Vec<(u32, u32)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(k, v)| v.iter().map(move |&r| (r, first_switch + k as u32)))
        .collect();
    let from_switch: Vec<(u32, u32)> = to_switch.iter().map(|&(r, sw)| (sw, r)).collect();
    (s.add_pattern(to_switch), s.add_pattern(from_switch))
}

/// Ranks `0..ranks` grouped by node (`fabric`), nodes in order of their first rank, ranks in
/// order within each: how NCCL's rail-aligned rings, trees and NVLS-Tree lay channels over
/// nodes. `None` when there are no ranks or nodes hold different numbers of them (NCCL's
/// layouts assume the same on every node).
pub(crate) fn ranks_by_node(ranks: u32, fabric: &dyn Fabric) -> Option<Vec<Vec<u32>>> {
    let all: Vec<u32> = (0..ranks).collect();
    crate::library::members_by_node(&all, fabric)
}

/// An NCCL release `2.minor`; dtsim models 2.18 to 2.27.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub minor: u32,
}

impl Version {
    pub const OLDEST: Version = Version { minor: 18 };
    pub const NEWEST: Version = Version { minor: 27 };

    /// `"2.18"`, `"2.18.5"` or `"2.18.5-1"`.
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split(['.', '-']);
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next()?.parse::<u32>().ok()?;
        let v = Version { minor };
        (major == 2 && (Self::OLDEST..=Self::NEWEST).contains(&v)).then_some(v)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "2.{}", self.minor)
    }
}

/// GPU generation, as NCCL indexes its per-architecture constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arch {
    /// Everything below compute capability 8.0 (Pascal, Volta, Turing).
    Volta,
    Ampere,
    Hopper,
    Blackwell,
}

/// (compute capability × 10, NVLink payload rate per link per direction in bytes/s) of a GPU
/// model named in a topology file, from [`crate::topology::gpu_models`].
pub fn gpu_facts(name: &str) -> Option<(u32, f64)> {
    gpu_models::by_name(name).map(|m| (m.compute_capability, m.nvlink_bytes_per_s))
}

fn arch_of(cc: u32) -> Arch {
    match cc {
        100.. => Arch::Blackwell,
        90..=99 => Arch::Hopper,
        80..=89 => Arch::Ampere,
        _ => Arch::Volta,
    }
}

/// NCCL's rings (its `search.cc`, see [`search`]) over a node's NVLink mesh: `bps[i][j]` the
/// NVLink bits/s cabled from the node's `i`-th GPU to its `j`-th, of a GPU of compute
/// capability `cc` whose links move `nvlink_bytes_per_s` each. `None` without a mesh.
fn mesh_rings(
    bps: &[Vec<f64>],
    cc: u32,
    nvlink_bytes_per_s: f64,
    version: Version,
) -> Option<search::MeshRings> {
    if bps.is_empty() || nvlink_bytes_per_s <= 0.0 {
        return None;
    }
    let links: Vec<Vec<u32>> = bps
        .iter()
        .map(|row| {
            row.iter()
                .map(|&b| (b / 8.0 / nvlink_bytes_per_s).round() as u32)
                .collect()
        })
        .collect();
    if links.iter().flatten().all(|&l| l == 0) {
        return None;
    }
    search::nvlink_rings(&links, nccl_nvlink_bw_gbps(cc, version), cc)
}

/// NCCL's rings over the NVLinks of a topology's first node (as `dtsim topo show` prints
/// them), when its GPUs share NVLinks without an NVSwitch and the file names their model: the
/// rings as positions among that node's GPUs (in the file's order), and each one's bandwidth.
pub fn first_node_rings(topo: &crate::topology::Topology) -> Option<search::MeshRings> {
    use crate::topology::DeviceKind;
    let (cc, nvlink_bytes_per_s) = topo.gpu.as_deref().and_then(gpu_facts)?;
    let node = topo.device(*topo.gpus().first()?).node;
    let gpus: Vec<_> = topo
        .gpus()
        .iter()
        .copied()
        .filter(|&g| topo.device(g).node == node)
        .collect();
    let switched = gpus.iter().any(|&g| {
        topo.out_links(g)
            .iter()
            .any(|&l| topo.device(topo.link(l).to).kind == DeviceKind::Nvswitch)
    });
    if switched {
        return None;
    }
    let bps: Vec<Vec<f64>> = gpus
        .iter()
        .map(|&a| {
            gpus.iter()
                .map(|&b| topo.direct_bps(a, b, LinkClass::Nvlink))
                .collect()
        })
        .collect();
    mesh_rings(&bps, cc, nvlink_bytes_per_s, Version::NEWEST)
}

/// NCCL's assumed NVLink bandwidth per link, GB/s (`SM*_NVLINK_BW`, topo.h): 20 for Volta
/// to Hopper, Hopper 20.6 from 2.20, 12 for SM86, 18 for Pascal, 40.1 for Blackwell.
fn nccl_nvlink_bw_gbps(cc: u32, v: Version) -> f64 {
    match cc {
        100.. => 40.1,
        90..=99 if v.minor >= 20 => 20.6,
        86 => 12.0,
        60..=69 => 18.0,
        _ => 20.0,
    }
}

/// The default link efficiencies for `sys`'s GPU: NCCL's per-link constants over the
/// datasheet rates (see [`params::LinkPrior`]); nominal when the GPU is unknown.
pub fn link_prior(sys: &System, v: Version) -> params::LinkPrior {
    match sys.gpu.as_deref().and_then(gpu_facts) {
        Some((cc, nvlink_bytes_per_s)) => {
            params::LinkPrior::from_nccl(nccl_nvlink_bw_gbps(cc, v), nvlink_bytes_per_s / 1e9)
        }
        None => params::LinkPrior::NOMINAL,
    }
}

/// NCCL's view of `sys`: the tuner input, or what is missing.
pub fn tuner_input(
    sys: &System,
    opts: &LibraryOptions,
    version: Version,
) -> Result<tuner::TunerInput, LibraryError> {
    let gpu = sys.gpu.as_deref().ok_or_else(|| {
        LibraryError::new(
            "library",
            "a topology that names its GPU model (gpu = \"H100-SXM5\") for library = \"nccl\"",
        )
    })?;
    let (cc, nvlink_bytes_per_s) = gpu_facts(gpu).ok_or_else(|| {
        LibraryError::new(
            "topology.gpu",
            format!(
                "a GPU model dtsim knows the NCCL generation of (H100, H200, A100, V100, P100, \
                 RTX 2080, B200, ...), got {gpu:?}"
            ),
        )
    })?;
    let arch = arch_of(cc);
    let nvlink = sys.intra.is_some_and(|p| p.class == LinkClass::Nvlink) || sys.ranks_per_node <= 1;
    let intra_nvlink = sys.intra.filter(|p| p.class == LinkClass::Nvlink);
    // Ring/tree graph inside a node: one channel per NVLink (search capped at 16), each at
    // NCCL's per-link bandwidth; duplicated on NVLink; PCIe: one search channel at NCCL's
    // PCIe bandwidth.
    let (mut search, mut bw_intra) = match intra_nvlink {
        Some(p) if nvlink_bytes_per_s > 0.0 => {
            let links = (p.bits_per_s / 8.0 / nvlink_bytes_per_s).round().max(1.0) as u32;
            let search = links.min(16);
            (
                search,
                nccl_nvlink_bw_gbps(cc, version) * links as f64 / search as f64,
            )
        }
        // PCIe: NCCL's link bandwidth is width × per-lane speed / 80 (topo.cc; 6 Gb/s a lane
        // at Gen3's 8 GT/s): 12 GB/s for Gen3 x16, 24 for Gen4, 48 for Gen5, the same 0.76
        // of the payload rate at every generation.
        _ => (
            1,
            sys.intra
                .filter(|p| p.class == LinkClass::Pcie)
                .map_or(12.0, |p| p.bits_per_s / 8e9 * 12.0 / 15.75),
        ),
    };
    // A node whose GPUs share NVLinks without a switch: NCCL's rings are the ones its search
    // finds over those links (see `search`), not the ranks' order.
    let mut nvlink = nvlink;
    let mesh_rings = mesh_rings(&sys.nvlink_mesh, cc, nvlink_bytes_per_s, version);
    if let Some(m) = &mesh_rings {
        search = m.orders.len() as u32;
        bw_intra = m.bw_gbps;
        nvlink = true;
    }
    let mut bw_inter = bw_intra;
    if let Some(net) = sys.inter {
        let nics = sys.nics_per_node.max(1);
        let nic_gbps = net.bits_per_s / 8e9;
        search = search.min(2 * nics).clamp(1, 16);
        bw_inter = nic_gbps / 2.0;
        // The search sets a channel's intra- and inter-node speed together and raises them
        // together for rings (search.cc): across nodes the NIC's speed is both.
        bw_intra = bw_inter;
    }
    // Channels are duplicated once after the search (connect.cc), up to MAXCHANNELS 32.
    let channels = (2 * search).min(32);
    let graph = tuner::Graph {
        search_channels: search,
        channels,
        bw_intra_gbps: bw_intra,
        bw_inter_gbps: bw_inter,
        nvlink,
    };
    // NVLS needs Hopper+ GPUs on an NVSwitch, more than two of them per node (nvls.cc:
    // `ncclNvlsInit` leaves it off for `gpuCount <= 2`); NCCL runs it on NVLS_NCHANNELS (16)
    // channels. On one node that is NVLS, across nodes NVLS-Tree.
    let nvls_capable = arch >= Arch::Hopper && sys.ranks_per_node > 2;
    let nvls_channels = (nvls_capable && sys.nvswitch.is_some() && sys.nodes == 1).then_some(16);
    let nvls_tree = (nvls_capable && sys.nodes > 1 && !sys.node_nvswitches.is_empty())
        .then(|| nvls_tree_graph(sys, cc, nvlink_bytes_per_s, version))
        .flatten();
    let collnet = collnet_graph(sys, opts, graph)?;
    let force_algo = match &opts.algorithm {
        None => None,
        Some(name) => Some(Algo::parse(name).ok_or_else(|| {
            LibraryError::new(
                "collective.algorithm",
                format!(
                    "an NCCL algorithm (ring, tree, nvls, nvls_tree, collnet_direct, \
                     collnet_chain, pat), got {name:?}"
                ),
            )
        })?),
    };
    let protocols = match &opts.protocol {
        None => None,
        Some(list) => Some(parse_protocols(list)?),
    };
    if let (Some(lo), Some(hi)) = (opts.min_channels, opts.max_channels) {
        if lo > hi {
            return Err(LibraryError::new(
                "collective.min_channels",
                format!("at most max_channels ({hi}), got {lo}"),
            ));
        }
    }
    for (field, v) in [
        ("collective.min_channels", opts.min_channels),
        ("collective.max_channels", opts.max_channels),
    ] {
        if let Some(v) = v {
            if !(1..=64).contains(&v) {
                return Err(LibraryError::new(
                    field,
                    format!("a channel count from 1 to 64 (NCCL's MAXCHANNELS), got {v}"),
                ));
            }
        }
    }
    Ok(tuner::TunerInput {
        version,
        arch,
        compute_capability: cc,
        ranks: sys.ranks,
        nodes: sys.nodes,
        // NCCL searches the ring and tree graphs separately (graph/search.cc), but with the
        // same speed array and link set; on the systems dtsim builds (one path class inside a
        // node, one NIC rail per channel across nodes) both searches find the same channel
        // count and bandwidth, so one graph serves both. Kept as two fields so a topology
        // where they differ (PCIe trees, asymmetric NVLink meshes) can set them apart.
        ring: graph,
        tree: graph,
        nvls_channels,
        nvls_tree,
        collnet,
        mesh_rings: mesh_rings.map(|m| m.orders).unwrap_or_default(),
        force_algo,
        protocols,
        min_channels: opts.min_channels,
        max_channels: opts.max_channels,
    })
}

/// NCCL's CollNet graph when `collective.collnet` enables it: the ring graph's channels and
/// speed (`init.cc` gives the CollNet graph the ring's channel count), one head per NIC with a
/// reduction tree each. Enabled where nothing reduces, it is an error naming why.
fn collnet_graph(
    sys: &System,
    opts: &LibraryOptions,
    ring: tuner::Graph,
) -> Result<Option<tuner::CollnetGraph>, LibraryError> {
    if !opts.collnet {
        return Ok(None);
    }
    match &sys.in_network {
        crate::library::InNetworkReduction::Trees(trees) => Ok(Some(tuner::CollnetGraph {
            graph: ring,
            heads: trees.len() as u32,
            direct: sys.nvswitch.is_some() || !sys.node_nvswitches.is_empty(),
        })),
        // NCCL_COLLNET_ENABLE is for every communicator; one inside a node runs without it.
        crate::library::InNetworkReduction::OneNode => Ok(None),
        crate::library::InNetworkReduction::Absent => Err(LibraryError::new(
            "collective.collnet",
            "a topology whose network switches reduce in the network (SHARP: \
             in_network_reduction = true in the topology file, or \
             --set topology.in_network_reduction=true); this one has none",
        )),
        crate::library::InNetworkReduction::Unusable(why) => Err(LibraryError::new(
            "collective.collnet",
            format!("switches that reduce for these ranks: {why}"),
        )),
    }
}

/// The protocols `NCCL_PROTO` enables: a comma-separated list (`"simple,ll128"`), or every
/// protocol but those listed after a `^` (`"^ll"`), as NCCL's `parseList` reads it.
fn parse_protocols(list: &str) -> Result<Vec<Proto>, LibraryError> {
    let (exclude, names) = match list.trim().strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, list),
    };
    let mut listed = Vec::new();
    for name in names.split(',').map(str::trim) {
        let p = Proto::parse(name).ok_or_else(|| {
            LibraryError::new(
                "collective.protocol",
                format!(
                    "NCCL protocols (ll, ll128, simple), one or a list as NCCL_PROTO takes \
                     them (\"simple,ll128\", \"^ll\"), got {list:?}"
                ),
            )
        })?;
        listed.push(p);
    }
    let enabled: Vec<Proto> = Proto::ALL
        .into_iter()
        .filter(|p| listed.contains(p) != exclude)
        .collect();
    if enabled.is_empty() {
        return Err(LibraryError::new(
            "collective.protocol",
            format!("at least one protocol left enabled, got {list:?}"),
        ));
    }
    Ok(enabled)
}

/// NCCL's NVLS graph across nodes (`graph/search.cc`, NVLS pattern with network): one channel
/// per NIC ("NVLS needs to balance on all NICs"), each headed by the GPU next to that NIC, at
/// the highest speed of the SM90 inter-node speed array that the NIC carries and that every
/// GPU's NVLinks to the switch carry for all heads at once (`ncclTopoSearchTryNvls`). The
/// search sets `bwIntra = bwInter` to that speed. `None` without a network path or NICs.
fn nvls_tree_graph(
    sys: &System,
    cc: u32,
    nvlink_bytes_per_s: f64,
    v: Version,
) -> Option<tuner::Graph> {
    let net = sys.inter?;
    let heads = sys.nics_per_node.min(sys.ranks_per_node);
    if heads == 0 {
        return None;
    }
    let nic_gbps = net.bits_per_s / 8e9;
    // NVLinks from a GPU to its switch, at NCCL's per-link bandwidth.
    let gpu_nvlink_gbps = match sys.intra {
        Some(p) if p.class == LinkClass::Nvlink && nvlink_bytes_per_s > 0.0 => {
            let links = (p.bits_per_s / 8.0 / nvlink_bytes_per_s).round().max(1.0);
            links * nccl_nvlink_bw_gbps(cc, v)
        }
        _ => return None,
    };
    let speed = tuner::nvls_search_speed(v, nic_gbps, gpu_nvlink_gbps / heads as f64)?;
    Some(tuner::Graph {
        search_channels: heads,
        channels: 16,
        bw_intra_gbps: speed,
        bw_inter_gbps: speed,
        nvlink: true,
    })
}

/// What torch's barrier over NCCL all-reduces (ProcessGroupNCCL::barrier: a one-element
/// float tensor), since NCCL has no barrier of its own.
pub const BARRIER_BYTES: u64 = 4;

/// The schedule NCCL runs for `req` on `sys`, with the profile's NCCL parameters (a barrier:
/// torch's all-reduce of [`BARRIER_BYTES`]).
pub fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    calibration: Option<&NcclCalibration>,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
    if req.collective == Collective::Barrier {
        // NCCL has no barrier; torch's ProcessGroupNCCL::barrier all-reduces one float.
        let one = Request {
            collective: Collective::AllReduce,
            bytes: BARRIER_BYTES,
            ..*req
        };
        let mut p = plan(&one, sys, opts, calibration, fabric)?;
        p.decision = format!(
            "a barrier as torch runs it on NCCL (an all-reduce of one float): {}",
            p.decision
        );
        return Ok(p);
    }
    let version = match &opts.version {
        None => Version::NEWEST,
        Some(v) => Version::parse(v).ok_or_else(|| {
            LibraryError::new(
                "collective.library_version",
                format!("an NCCL version from 2.18 to 2.27 (e.g. \"2.18\"), got {v:?}"),
            )
        })?,
    };
    let input = tuner_input(sys, opts, version)?;
    let params = params::Params::new(calibration, version, link_prior(sys, version));
    // Point-to-point: no tuner, and NCCL_ALGO / NCCL_PROTO do not apply (see `p2p`).
    if matches!(req.collective, Collective::AllToAll | Collective::SendRecv) {
        return p2p::point_to_point(req, sys, version, &params, fabric);
    }
    if let Some(a) = input.force_algo {
        if !tuner::implements(version, a, req.collective) {
            return Err(LibraryError::new(
                "collective.algorithm",
                format!(
                    "an algorithm NCCL {version} implements {} with; {} does not",
                    req.collective,
                    a.as_str()
                ),
            ));
        }
        if !tuner::runnable(&input, a) {
            return Err(LibraryError::new(
                "collective.algorithm",
                format!(
                    "an algorithm this system can run: {}",
                    why_not(a, sys, version, opts.collnet)
                ),
            ));
        }
    }
    let rules = opts.tuner_rules.as_deref();
    let choice = tuner::choose_with(&input, req.collective, req.bytes, rules).ok_or_else(|| {
        LibraryError::new(
            "collective.protocol",
            format!(
                "a protocol the forced algorithm runs with (NVLS and PAT run Simple only; \
                 LL128 needs NVLink), none is left for {}",
                req.collective
            ),
        )
    })?;
    emit::emit(req, sys, opts, &input, choice, &params, fabric)
}

fn why_not(a: Algo, sys: &System, v: Version, opts_collnet: bool) -> String {
    match a {
        Algo::Nvls => format!(
            "NVLS needs Hopper or newer GPUs on one node attached to an NVSwitch ({})",
            if sys.nvswitch.is_none() {
                "this topology has no NVSwitch the ranks attach to"
            } else if sys.nodes > 1 {
                "the ranks span several nodes"
            } else {
                "the GPU is older than Hopper"
            }
        ),
        Algo::NvlsTree => format!(
            "NVLS-Tree needs Hopper or newer GPUs, more than two per node, each node's on an \
             NVSwitch, and several nodes joined by NICs ({})",
            if sys.nodes <= 1 {
                "the ranks are on one node: that is NVLS"
            } else if sys.node_nvswitches.is_empty() {
                "not every node's ranks attach to one NVSwitch of their own"
            } else if sys.ranks_per_node <= 2 {
                "at most two ranks per node"
            } else if sys.inter.is_none() || sys.nics_per_node == 0 {
                "the nodes have no NICs"
            } else {
                "the GPU is older than Hopper"
            }
        ),
        Algo::CollnetDirect | Algo::CollnetChain if !opts_collnet => {
            "CollNet runs only where it is enabled: collective.collnet = true \
             (NCCL_COLLNET_ENABLE=1)"
                .into()
        }
        Algo::CollnetDirect | Algo::CollnetChain if sys.nodes < 2 => {
            "CollNet reduces across nodes; the ranks are on one node".into()
        }
        Algo::CollnetDirect => {
            "CollNet Direct needs an NVSwitch in the nodes (NCCL turns it off where there is \
             none); collnet_chain runs without"
                .into()
        }
        Algo::CollnetChain => String::new(),
        Algo::Pat if v.minor < 23 => format!("PAT exists from NCCL 2.23, this is {v}"),
        Algo::Pat => "PAT runs with one GPU per node only".into(),
        Algo::Tree => "tree needs at least 2 ranks".into(),
        Algo::Ring => String::new(),
    }
}
