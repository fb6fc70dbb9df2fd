//! The schedule NCCL runs for a tuner [`Choice`], with its protocol's costs on every op.
//!
//! - Ring: one ring per channel (the scenario's explicit orders, else rank order, which is
//!   what NCCL finds on an NVSwitch; channels on the same order are played as one ring that
//!   carries all of them), each step pipelined in NCCL's loop: a channel moves
//!   `ranks × chunk` bytes per loop, so a collective is `ceil(bytes / (channels × ranks ×
//!   chunk))` slices (at most [`MAX_SLICES`]).
//! - Tree: the double binary tree, sliced in tree chunks.
//! - NVLS: each GPU pushes to the NVSwitch (which reduces in the switch) and pulls the
//!   multicast result; per GPU and direction an all-reduce moves `bytes × (n+1)/n`, at most
//!   one channel's rate times the channels that have work (which NCCL's version decides:
//!   [`nvls_busy_channels`]).
//! - NVLS-Tree: NVLS inside each node, NCCL's double binary tree between the nodes' heads
//!   (one per NIC; [`nvls_tree`]), sliced in NVLS chunks; its switch transfers are NVLink steps,
//!   its tree transfers network steps.
//! - CollNet Direct / Chain: each head's share into the head (straight from every GPU, or up
//!   the node's chain), through the switches that reduce ([`collnet`]), and back out, sliced
//!   in Simple chunks (Direct: one per head and channel per loop).
//! - PAT: recursive halving / doubling (log-step), unsliced.
//!
//! Then every transfer op gets the protocol's framing as extra wire bytes, the link's
//! efficiency as fewer payload bytes per wire byte, a per-step setup latency (plus the
//! call's base latency on the ops that start the collective) and a per-flow ceiling: one
//! channel's copy rate as NCCL measured it (LL and LL128 ceilings, tree per-channel caps).

use super::params::Params;
use super::tuner::{self, Choice, PluginPick, TunerInput};
use super::{collnet, nvls_tree, trees};
use super::{Algo, Proto, Version};
use crate::collective::{
    generate, Algorithm, CollectiveSpec, Fabric, OpKind, Phase, RingOrder, Schedule, Transport,
};
use crate::engine::SimTime;
use crate::library::{LibraryError, LibraryOptions, Plan, Request, System};
use crate::topology::LinkClass;

/// NVLS-Tree's chunk (`enqueue.cc` 2.27): NVLS's 128 KiB, capped by
/// `NCCL_NVLSTREE_MAX_CHUNKSIZE`, whose default is 64 KiB from four nodes.
fn nvls_tree_chunk_bytes(nodes: u32) -> u64 {
    if nodes >= 4 {
        64 << 10
    } else {
        128 << 10
    }
}

/// Most pipeline slices a schedule gets: beyond this the extra ops change times by less than
/// the per-step latency they would add, and cost memory.
pub const MAX_SLICES: u64 = 16;

pub(super) fn emit(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    input: &TunerInput,
    choice: Choice,
    params: &Params,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks as u64;
    let nc = choice.channels as u64;
    let ring_like = matches!(
        req.collective,
        crate::collective::Collective::AllReduce
            | crate::collective::Collective::AllGather
            | crate::collective::Collective::ReduceScatter
    );
    let mut placed = Vec::new();
    // NVLS's chunk size: its per-chunk latency is paid inside the channel's rate (below).
    let mut nvls_chunk = 0u64;
    let (mut schedule, slices, channels_per_flow) =
        match choice.algo {
            Algo::Ring => {
                let chunk = choice.proto.chunk_bytes(ring_like);
                let per_loop = nc * chunk * if ring_like { n } else { 1 };
                let slices = req.bytes.div_ceil(per_loop).clamp(1, MAX_SLICES);
                // Channels whose rings follow the same order share the same links: under max-min
                // they are one ring carrying all of them (cap × channels), and simulate 1/nc as
                // many ops. Distinct orders stay distinct rings: explicit ones, and across nodes
                // one per NIC rail (see rail_rings).
                let rails = rail_rings(sys, fabric, nc, &input.mesh_rings);
                let (rings, per_flow): (Vec<RingOrder>, f64) = if !opts.ring_orders.is_empty() {
                    let k = opts.ring_orders.len().min(nc as usize);
                    let rings = (0..k)
                        .map(|c| RingOrder::Explicit(opts.ring_orders[c].clone()))
                        .collect();
                    (rings, nc as f64 / k as f64)
                } else if !rails.is_empty() {
                    let k = rails.len();
                    let rings = rails.into_iter().map(RingOrder::Explicit).collect();
                    (rings, nc as f64 / k as f64)
                } else if !input.mesh_rings.is_empty() {
                    // The rings NCCL's search found over the node's NVLinks; channels beyond them
                    // (NCCL duplicates every ring once) run the same orders.
                    let k = input.mesh_rings.len().min(nc as usize).max(1);
                    let rings = input.mesh_rings[..k]
                        .iter()
                        .cloned()
                        .map(RingOrder::Explicit)
                        .collect();
                    (rings, nc as f64 / k as f64)
                } else {
                    let order = RingOrder::Generated {
                        offset: 0,
                        stride: 1,
                        reverse: false,
                    };
                    (vec![order], nc as f64)
                };
                let s = template(req, Algorithm::Ring { rings }, slices, sys.ranks, fabric)?;
                (s, slices, per_flow)
            }
            Algo::Tree => {
                let chunk = choice.proto.chunk_bytes(false);
                let slices = req.bytes.div_ceil(nc * chunk).clamp(1, MAX_SLICES);
                let laid = match req.collective {
                    crate::collective::Collective::AllReduce => trees::all_reduce(
                        req.bytes,
                        sys.ranks,
                        nc,
                        sys.nics_per_node,
                        slices,
                        fabric,
                        input.mesh_rings.first().map(Vec::as_slice),
                    ),
                    _ => None,
                };
                match laid {
                    Some((s, per_lane)) => (s, slices, per_lane),
                    None => {
                        // Nodes of different sizes: the double binary tree over all ranks, its
                        // two trees carrying all channels' data.
                        let s =
                            template(req, Algorithm::DoubleBinaryTree, slices, sys.ranks, fabric)?;
                        (s, slices, nc as f64 / 2.0)
                    }
                }
            }
            Algo::Pat => {
                let s = template(req, Algorithm::HalvingDoubling, 1, sys.ranks, fabric)?;
                (s, 1, nc as f64)
            }
            Algo::Nvls if sys.nodes > 1 => {
                let crate::library::InNetworkReduction::Trees(trees) = &sys.in_network else {
                    unreachable!("the tuner runs NVLS across nodes only with CollNet")
                };
                if sys.node_nvswitches.len() != sys.nodes as usize {
                    return Err(LibraryError::new(
                        "collective.algorithm",
                        "an NVSwitch on every node for NVLS",
                    ));
                }
                let heads = trees.len() as u64;
                // enqueue.cc (2.21+): NVLS's chunk, at most 32 KiB across nodes where NCCL's NVLS
                // estimate is below 150 GB/s, shrunk for small messages over channels x heads.
                let nvls_gbps = tuner::estimates(input, req.collective, req.bytes)
                    .iter()
                    .find(|e| e.algo == Algo::Nvls)
                    .map_or(0.0, |e| e.algbw_gbps);
                let max_chunk = if nvls_gbps < 150.0 {
                    32 << 10
                } else {
                    128 << 10
                };
                let (_, slices) = nvls_chunk_and_slices(req.bytes, nc * heads, max_chunk);
                let (s, switches) =
                    collnet::nvls_all_reduce(req.bytes, sys.ranks, trees, slices, fabric)
                        .ok_or_else(|| {
                            LibraryError::new(
                    "collective.algorithm",
                    "nodes holding the same number (more than two) of the ranks for NVLS \
                             across nodes",
                )
                        })?;
                let names = s.extra_endpoints.iter().cloned();
                let devices = sys.node_nvswitches.iter().copied().chain(switches);
                placed.extend(names.zip(devices));
                // One lane per head, each carrying its share of the channels.
                (s, slices, nc as f64 / heads.max(1) as f64)
            }
            Algo::Nvls => {
                let switch = sys.nvswitch.ok_or_else(|| {
                    LibraryError::new("collective.algorithm", "an NVSwitch for NVLS")
                })?;
                placed.push(("nvswitch".to_string(), switch));
                // NVLS chunks: 128 KiB, shrunk for small messages (enqueue.cc 2.18); one loop
                // moves channels × ranks chunks.
                let (chunk, slices) = nvls_chunk_and_slices(req.bytes, nc * n, 128 << 10);
                let busy = nvls_busy_channels(input.version, req.bytes, nc, n, chunk);
                nvls_chunk = chunk;
                (nvls(req, sys.ranks, slices), slices, busy)
            }
            Algo::NvlsTree => {
                if sys.node_nvswitches.len() != sys.nodes as usize {
                    return Err(LibraryError::new(
                        "collective.algorithm",
                        "an NVSwitch on every node for NVLS-Tree",
                    ));
                }
                let heads = input.nvls_tree.map_or(1, |g| g.search_channels);
                // One loop moves a chunk per channel and head.
                let per_loop = nc * u64::from(heads) * nvls_tree_chunk_bytes(sys.nodes);
                let slices = req.bytes.div_ceil(per_loop).clamp(1, MAX_SLICES);
                let s = nvls_tree::all_reduce(req.bytes, sys.ranks, heads, slices, fabric)
                    .ok_or_else(|| {
                        LibraryError::new(
                            "collective.algorithm",
                            "nodes holding the same number (more than two) of the ranks for \
                         NVLS-Tree",
                        )
                    })?;
                for (k, &sw) in sys.node_nvswitches.iter().enumerate() {
                    placed.push((format!("nvswitch{k}"), sw));
                }
                // Channels alternate between the two trees; each lane is one head's part of them.
                (s, slices, nc as f64 / 2.0)
            }
            Algo::CollnetDirect | Algo::CollnetChain => {
                let crate::library::InNetworkReduction::Trees(trees) = &sys.in_network else {
                    unreachable!("the tuner chooses CollNet only with reduction trees")
                };
                let (kind, per_loop) = match choice.algo {
                    Algo::CollnetDirect => (collnet::Kind::Direct, nc * trees.len() as u64),
                    _ => (collnet::Kind::Chain, nc),
                };
                let chunk = choice.proto.chunk_bytes(false);
                let slices = req.bytes.div_ceil(per_loop * chunk).clamp(1, MAX_SLICES);
                let (s, switches) =
                    collnet::all_reduce(kind, req.bytes, sys.ranks, trees, slices, fabric)
                        .ok_or_else(|| {
                            LibraryError::new(
                                "collective.algorithm",
                                "nodes holding the same number of the ranks for CollNet",
                            )
                        })?;
                for (name, d) in s.extra_endpoints.iter().zip(switches) {
                    placed.push((name.clone(), d));
                }
                // One lane per head, each carrying its share of the channels.
                let lanes = trees.len().min(sys.ranks_per_node as usize).max(1);
                (s, slices, nc as f64 / lanes as f64)
            }
        };

    // What the steps cross: the network when the ranks span nodes.
    let class = match choice.algo {
        Algo::Nvls if sys.nodes == 1 => LinkClass::Nvlink,
        Algo::Ring if !input.mesh_rings.is_empty() && sys.nodes == 1 => LinkClass::Nvlink,
        _ => sys
            .inter
            .filter(|_| sys.nodes > 1)
            .or(sys.intra)
            .map_or(LinkClass::Other, |p| p.class),
    };
    let (a, p) = (choice.algo, choice.proto);
    // A step pays the latency and efficiency of the links it crosses, as NCCL's latency model
    // charges `intraLat` per hop inside a node and `interLat` per network hop: a tree's chain
    // steps and NVLS-Tree's switch transfers stay inside their nodes, its tree levels cross
    // the network. (A ring step moves every rank's chunk at once, over both: the network's.)
    let intra_class = sys.intra.map(|p| p.class);
    let class_of = |pattern: crate::collective::PatternId| -> LinkClass {
        let pairs = &schedule.patterns[pattern.0 as usize].pairs;
        let ranks = schedule.ranks;
        match a {
            Algo::NvlsTree if pairs.iter().any(|&(x, y)| x >= ranks || y >= ranks) => {
                LinkClass::Nvlink
            }
            // NVLS with CollNet: the node switches (the first extra endpoints) are NVLink.
            Algo::Nvls
                if pairs
                    .iter()
                    .any(|&(x, y)| (ranks..ranks + sys.nodes).any(|sw| sw == x || sw == y)) =>
            {
                LinkClass::Nvlink
            }
            // CollNet: what stays among GPUs is inside a node; what reaches a switch, network.
            Algo::CollnetDirect | Algo::CollnetChain
                if pairs.iter().all(|&(x, y)| x < ranks && y < ranks) =>
            {
                intra_class.unwrap_or(class)
            }
            Algo::Tree if sys.nodes > 1 => match intra_class {
                Some(intra)
                    if pairs.iter().all(|&(x, y)| {
                        x < ranks && y < ranks && fabric.node_of(x) == fabric.node_of(y)
                    }) =>
                {
                    intra
                }
                _ => class,
            },
            _ => class,
        }
    };
    let wire_of = |c: LinkClass| p.wire_bytes_per_byte() / params.efficiency(a, c);
    let wire = wire_of(class);
    let step = ring_step_latency_us(a, p, sys, params, class);
    // A ring or tree step is a transfer op: its latency is the op's setup. NVLS runs each
    // channel's data as a stream of chunks with a handshake each, which the slices played
    // here do not resolve: the channel moves `chunk` per `step + chunk / rate`.
    let (step, nvls_rate_factor) = match (a, params.channel_gbps(a, p)) {
        (Algo::Nvls, Some(gbps)) if step > 0.0 && nvls_chunk > 0 => {
            let stream_us = nvls_chunk as f64 / (gbps * 1e3);
            (0.0, stream_us / (step + stream_us))
        }
        _ => (step, 1.0),
    };
    let base = params.base_latency_us(a, p);
    // A profile's channel rate is payload, so it is scaled to the flow's wire bytes (framing
    // and efficiency); NCCL's own per-channel maxima are applied to the wire rate, as its
    // tuner compares them with link bandwidths.
    let (ceiling_gbps, ceiling_wire) = match params.channel_gbps(a, p) {
        Some(g) => (g, wire),
        None => (channel_ceiling_gbps(input, a, p), p.wire_bytes_per_byte()),
    };
    let max_flow_bps = ceiling_gbps * nvls_rate_factor * 8e9 * ceiling_wire * channels_per_flow;
    // A multi-node tree's steps inside a node run at a channel's rate inside one node (NCCL
    // indexes its per-channel maxima by node count; the 2-node LL ceiling is the network's).
    let intra_max_flow_bps = match params.channel_gbps(a, p) {
        Some(_) => max_flow_bps,
        None => {
            let one_node = TunerInput {
                nodes: 1,
                ..input.clone()
            };
            channel_ceiling_gbps(&one_node, a, p)
                * 8e9
                * p.wire_bytes_per_byte()
                * channels_per_flow
        }
    };
    let op_classes: Vec<Option<LinkClass>> = schedule
        .ops
        .iter()
        .map(|op| match op.kind {
            OpKind::Transfer { pattern, .. } => Some(class_of(pattern)),
            _ => None,
        })
        .collect();
    for (op, op_class) in schedule.ops.iter_mut().zip(op_classes) {
        if let OpKind::Transfer { bytes, .. } = &mut op.kind {
            let op_class = op_class.unwrap_or(class);
            let (wire, step, max_flow_bps) = if op_class == class {
                (wire, step, max_flow_bps)
            } else {
                let cap = if a == Algo::Tree {
                    intra_max_flow_bps
                } else {
                    max_flow_bps
                };
                (
                    wire_of(op_class),
                    params.step_latency_us(a, p, op_class),
                    cap,
                )
            };
            *bytes = (*bytes as f64 * wire).ceil() as u64;
            let first = op.deps.is_empty();
            let setup_us = step + if first { base } else { 0.0 };
            op.transport = Some(Transport {
                setup: SimTime::from_secs_f64(setup_us * 1e-6),
                max_flow_bps,
            });
        }
    }
    schedule.algorithm = format!("nccl-{}-{}({nc})", a.as_str(), p.as_str());
    let decision = format!(
        "NCCL {} {}/{}, {nc} channels{}{}, {slices} slice(s); steps over {}: base {:.2} us, \
         step {:.2} us, efficiency {:.3}{}; NCCL's own estimate {:.1} us",
        input.version,
        a.as_str(),
        p.as_str(),
        if a == Algo::Nvls && sys.nodes == 1 {
            format!(" ({channels_per_flow:.2} with work)")
        } else {
            String::new()
        },
        match (choice.plugin, &opts.tuner_rules) {
            (Some(PluginPick::Rule { line }), Some(r)) =>
                format!(" (tuner rule {}:{line})", r.path),
            (Some(PluginPick::NoRule), Some(r)) => {
                format!(
                    " (tuner {}: no rule matched, the plugin's 1 channel)",
                    r.path
                )
            }
            _ => String::new(),
        },
        class,
        base,
        step,
        params.efficiency(a, class),
        if ceiling_gbps.is_finite() {
            format!(", channel ceiling {ceiling_gbps:.1} GB/s")
        } else {
            String::new()
        },
        choice.nccl_estimate_us,
    );
    // What a fit may move: the parameters of the class the collective is named by (the
    // network across nodes). Steps inside a node (a tree's chains, NVLS-Tree's switch
    // transfers) take the profile's values for their own class where it has them, else
    // NCCL's: an nccl-tests table across nodes does not tell them apart from the network's.
    let (mut parameters, defaulted) = params.sources(a, p, class);
    parameters.extend(defaulted);
    Ok(Plan {
        schedule,
        placed_endpoints: placed,
        decision,
        parameters,
        alternatives: Vec::new(),
        alternatives_vary: String::new(),
        plays_per_way: 1,
    })
}

/// The latency one step op of `a` pays where it crosses `class`. A ring across nodes plays
/// each step as one op of every rank at once, but NCCL's ranks are not in step: a rank sends
/// its next chunk once its own input has arrived, so what adds up along a collective is the
/// latency of the hops one chunk takes, around the ring: of a ring's `n − 1` hops per pass,
/// `nodes − 1` cross the network and the rest stay inside a node (NCCL's own latency model
/// charges `nInterSteps = 2 (nodes − 1)` network hops and `intraLat`, at least its network
/// proxy overhead, on the other steps of an all-reduce). So a multi-node ring step pays the mean
/// of the two over the ring's hops. Everything else pays the latency of the class it crosses.
fn ring_step_latency_us(a: Algo, p: Proto, sys: &System, params: &Params, class: LinkClass) -> f64 {
    let step = params.step_latency_us(a, p, class);
    let intra = sys.intra.map(|i| i.class).filter(|&c| c != class);
    match intra {
        Some(intra) if a == Algo::Ring && sys.nodes > 1 && sys.ranks > sys.nodes => {
            // NCCL's proxy overhead per step of a multi-node ring (tuning.cc: getNetOverhead,
            // 1 µs, times 3 for Simple).
            let overhead = if p == Proto::Simple { 3.0 } else { 1.0 };
            let intra_us = params.step_latency_us(a, p, intra).max(overhead);
            let network_share = (sys.nodes - 1) as f64 / (sys.ranks - 1) as f64;
            intra_us + (step - intra_us) * network_share
        }
        _ => step,
    }
}

/// NCCL's rings across nodes: each channel leaves and enters every node through its own NIC
/// (graph search with one net device per channel, rail-aligned on NVSwitch nodes), so the
/// inter-node traffic of `channels` channels spreads over the nodes' NICs instead of one.
/// NCCL keeps a ring on one rail (`NCCL_CROSS_NIC` prefers the same NIC in and out of a node;
/// the GPU that ends the ring in a node reaches that NIC through its neighbour, PXN), so no
/// ring crosses between rails through the spines. dtsim lays ring `c` so that every node
/// boundary stays on one rail without PXN's NVLink hop: in even nodes it runs local ranks
/// `c, c+1, ..., c−1`, in odd ones back from `c−1` to `c`, so it crosses from rank `c−1` to
/// rank `c−1` (rail `c−1`), then from `c` to `c` (rail `c`). Each NIC still sends one ring's
/// traffic and receives one ring's, as in NCCL. (With an odd node count the wrap-around from
/// the last node crosses rails once.) One ring per NIC up to the ranks per node; empty when
/// the ranks are on one node, or nodes hold different numbers of ranks. Until 2026-11-27 every
/// node ran `c, ..., c−1`, so every boundary crossed from rail `c−1` to rail `c` through a
/// spine: on 4 to 32 rail-optimized H100 nodes a Simple ring all-reduce of 1 GiB lost half its
/// bus bandwidth and more to spine links and their ECMP collisions.
///
/// Nodes whose GPUs share NVLinks without a switch (`mesh`: the rings NCCL's search found over
/// one node, in node-local positions) run ring `c`'s NVLink cycle in every node, opened at
/// position `c × per / rings` so that the rings leave their nodes from different GPUs (and so
/// different NICs): node `k`'s last GPU of the cycle sends to node `k+1`'s first.
fn rail_rings(
    sys: &System,
    fabric: &dyn Fabric,
    channels: u64,
    mesh: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    if sys.nodes <= 1 || sys.ranks_per_node <= 1 {
        return Vec::new();
    }
    let Some(nodes) = super::ranks_by_node(sys.ranks, fabric) else {
        return Vec::new();
    };
    let per = nodes[0].len();
    if !mesh.is_empty() && mesh.iter().all(|c| c.len() == per) {
        let rings = mesh.len().min(channels as usize).max(1);
        return (0..rings)
            .map(|c| {
                let cycle = &mesh[c];
                let open = c * per / rings;
                nodes
                    .iter()
                    .flat_map(|v| (0..per).map(move |i| v[cycle[(open + i) % per] as usize]))
                    .collect()
            })
            .collect();
    }
    let rings = (sys.nics_per_node.max(1) as usize)
        .min(per)
        .min(channels as usize)
        .max(1);
    (0..rings)
        .map(|c| {
            nodes
                .iter()
                .enumerate()
                .flat_map(|(k, v)| {
                    (0..per).map(move |i| {
                        if k % 2 == 0 {
                            v[(c + i) % per]
                        } else {
                            v[(c + 2 * per - 1 - i) % per]
                        }
                    })
                })
                .collect()
        })
        .collect()
}

/// NVLS's chunk for `bytes` (`enqueue.cc`): `max_chunk`, shrunk to 64, 32 and 16 KiB while
/// the message is under 64, 8 and 2 times `ops_in_flight` (channels × heads) chunks; and the
/// slices that chunk makes (one loop moves `ops_in_flight` chunks).
fn nvls_chunk_and_slices(bytes: u64, ops_in_flight: u64, max_chunk: u64) -> (u64, u64) {
    let mut chunk = max_chunk;
    for (k, c) in [(64u64, 64u64 << 10), (8, 32 << 10), (2, 16 << 10)] {
        if bytes < k * ops_in_flight * chunk && chunk > c {
            chunk = c;
        }
    }
    (
        chunk,
        bytes.div_ceil(ops_in_flight * chunk).clamp(1, MAX_SLICES),
    )
}

/// How many channels' worth of throughput an NVLS collective of `bytes` gets: `bytes` over
/// what its busiest channel carries (each channel runs its share at one channel's rate).
///
/// - Up to 2.19 (`all_reduce.h`, `runNvls`) channel `b` takes the `heads × chunk` elements at
///   `b × heads × chunk` of every loop of `channels × heads × chunk`: below one loop only the
///   first `ceil(bytes / (heads × chunk))` channels have work, each a full `heads × chunk`.
/// - From 2.20 (`enqueue.cc`, `scheduleCollTasksToPlan`) the count is split evenly over the
///   channels, each share rounded up to `NCCL_SIMPLE_ALIGNMENT` (4 KiB): every channel works
///   from `channels × 4 KiB` on.
///
/// `heads` is the ranks on the NVSwitch (one reduction head per GPU on one node).
pub fn nvls_busy_channels(v: Version, bytes: u64, channels: u64, heads: u64, chunk: u64) -> f64 {
    if bytes == 0 {
        return channels as f64;
    }
    let busiest = if v.minor <= 19 {
        let piece = heads * chunk;
        let lp = channels * piece;
        (bytes / lp) * piece + (bytes % lp).min(piece)
    } else {
        const SIMPLE_ALIGNMENT: u64 = 4096;
        bytes
            .div_ceil(channels)
            .next_multiple_of(SIMPLE_ALIGNMENT)
            .min(bytes)
    };
    bytes as f64 / busiest as f64
}

/// One channel's payload ceiling in GB/s (NCCL's measured per-channel maxima; infinite
/// where only links limit it).
fn channel_ceiling_gbps(t: &TunerInput, a: Algo, p: Proto) -> f64 {
    let ll_total = tuner::ll_max_bw(t.version, t.arch, t.nodes);
    let (tree_simple, tree_ll128) = tuner::per_channel_tree(t.arch, t.nodes);
    match (a, p) {
        (Algo::Ring, Proto::Ll) => ll_total / t.ring.channels as f64,
        (Algo::Ring, Proto::Ll128) => tuner::per_channel_ring_ll128(t.arch),
        (Algo::Tree, Proto::Ll) => ll_total / t.tree.channels as f64,
        (Algo::Tree, Proto::Ll128) => tree_ll128,
        (Algo::Tree, Proto::Simple) => tree_simple,
        _ => f64::INFINITY,
    }
}

fn template(
    req: &Request,
    algorithm: Algorithm,
    slices: u64,
    ranks: u32,
    fabric: &dyn Fabric,
) -> Result<Schedule, LibraryError> {
    let spec = CollectiveSpec {
        collective: req.collective,
        bytes: req.bytes,
        root: req.root,
        peer: req.peer,
        algorithm,
        slices: slices as u32,
    };
    generate(&spec, ranks, fabric)
        .map_err(|e| LibraryError::new(format!("collective ({})", e.field), e.expected))
}

/// NVLS over one NVSwitch (extra endpoint `ranks`): per slice every GPU pushes to the switch
/// and pulls from it; the pull of a slice waits for its push (the switch reduces in between).
fn nvls(req: &Request, ranks: u32, slices: u64) -> Schedule {
    use crate::collective::Collective::*;
    let mut s = Schedule::new(req.collective, "nvls", ranks, req.bytes);
    s.extra_endpoints.push("nvswitch".into());
    if ranks == 1 {
        return s;
    }
    let sw = ranks;
    let n = ranks as f64;
    let up_pat = s.add_pattern((0..ranks).map(|r| (r, sw)).collect::<Vec<_>>());
    let down_pat = s.add_pattern((0..ranks).map(|r| (sw, r)).collect::<Vec<_>>());
    // Per GPU and direction, as a fraction of the message.
    let (up_frac, down_frac) = match req.collective {
        AllReduce => ((n + 1.0) / n, (n + 1.0) / n),
        AllGather => (1.0 / n, (n - 1.0) / n),
        ReduceScatter => (1.0, 1.0 / n),
        _ => unreachable!("NVLS implements all_reduce, all_gather and reduce_scatter"),
    };
    let mut prev_up = None;
    let mut prev_down = None;
    let mut done = 0u64;
    for j in 0..slices {
        let part = (req.bytes * (j + 1)) / slices - done;
        done += part;
        let up_bytes = (part as f64 * up_frac).ceil() as u64;
        let down_bytes = (part as f64 * down_frac).ceil() as u64;
        let up = s.push(
            OpKind::Transfer {
                pattern: up_pat,
                bytes: up_bytes,
            },
            prev_up.into_iter().collect(),
            Phase::ReduceScatter,
            0,
            j as u32,
        );
        let mut deps = vec![up];
        deps.extend(prev_down);
        let down = s.push(
            OpKind::Transfer {
                pattern: down_pat,
                bytes: down_bytes,
            },
            deps,
            Phase::AllGather,
            0,
            j as u32,
        );
        prev_up = Some(up);
        prev_down = Some(down);
    }
    s
}
