//! Topology generators: parameterized families of real machines and fabrics.
//!
//! A topology file may say `[generator] kind = "..."` with the parameters of one family instead
//! of listing devices and links. Each generator builds through [`TopologyBuilder`], so its output
//! is validated like a hand-written file, and checks its own parameters first
//! (`generator.<field>: what was expected, got X`).
//!
//! | `kind`             | what it builds                                                       |
//! |--------------------|----------------------------------------------------------------------|
//! | `ring`             | `n` single-GPU nodes in a bidirectional ring                         |
//! | `star`             | `n` single-GPU nodes on one switch                                   |
//! | `leaf_spine`       | two-tier Clos, one GPU per host, optional oversubscription ratio     |
//! | `fat_tree`         | three-tier k-ary fat-tree (Al-Fares et al., SIGCOMM 2008)            |
//! | `rail_optimized`   | NVSwitch nodes, one NIC per GPU, rail `r` of every node on rail `r` |
//! | `nvswitch_node`    | one DGX/HGX-like server: GPUs on NVSwitch, optional host/NICs        |
//! | `hybrid_cube_mesh` | DGX-1 (V100): NVLink2 hybrid cube mesh, PCIe switches, two CPUs      |
//! | `pcie_box`         | GPUs under one host without peer-to-peer: GPU↔GPU goes via the host |
//! | `torus`            | 2D/3D torus of GPUs that forward, with wraparound links              |
//!
//! Conventions shared by all generators:
//! - GPUs are added in rank order (node-major, local index minor), because rank-ordered
//!   placement puts rank `i` on [`Topology::gpus`]`[i]`.
//! - Devices inside a server carry `node = Some(server index)`; network switches carry `None`.
//!   One-GPU-per-host families name GPUs `gpu<i>` (node `i`); multi-GPU servers name devices
//!   `n<node>.gpu<i>`, `n<node>.nic<i>`, `n<node>.nvswitch<i>`, `n<node>.host`.
//! - A bandwidth in [`LinkParams`] is per direction of one full-duplex link.
//! - Several parallel physical links between the same two devices whose traffic is striped by
//!   the hardware/NCCL (NVLink bricks between two GPUs) are one link of the summed bandwidth;
//!   parallel links that are load-balanced per flow (switch uplinks under ECMP) stay separate
//!   links, because the router spreads (source, destination) pairs over them.

use serde::Deserialize;

use super::{DeviceId, DeviceKind, LinkClass, LinkSpec, Topology, TopologyBuilder, TopologyError};
use crate::units::{Bandwidth, Bytes, Duration};

/// Properties shared by the links of one kind in a generated topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Bandwidth per direction.
    pub bandwidth: Bandwidth,
    #[serde(default)]
    pub latency: Duration,
    /// Output buffer per direction; defaults per class (see [`default_buffer_bytes`]).
    #[serde(default)]
    pub buffer: Option<Bytes>,
    pub class: LinkClass,
}

impl LinkParams {
    pub fn spec(&self) -> LinkSpec {
        self.spec_with_bandwidth(self.bandwidth.bits_per_s())
    }

    /// These link properties with another bandwidth (bits per second, per direction).
    pub fn spec_with_bandwidth(&self, bandwidth_bps: f64) -> LinkSpec {
        link_spec(bandwidth_bps, self.latency, self.buffer, self.class)
    }
}

/// Like [`LinkParams`], but the bandwidth may be left out when the generator derives it (the
/// leaf-spine uplinks from an oversubscription ratio).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UplinkParams {
    /// Bandwidth per direction of one uplink; give it or the generator's `oversubscription`.
    #[serde(default)]
    pub bandwidth: Option<Bandwidth>,
    #[serde(default)]
    pub latency: Duration,
    #[serde(default)]
    pub buffer: Option<Bytes>,
    pub class: LinkClass,
}

fn link_spec(
    bandwidth_bps: f64,
    latency: Duration,
    buffer: Option<Bytes>,
    class: LinkClass,
) -> LinkSpec {
    LinkSpec {
        bandwidth_bps,
        latency: latency.0,
        buffer_bytes: buffer
            .map(|b| b.0)
            .unwrap_or_else(|| default_buffer_bytes(class)),
        class,
    }
}

/// Output buffer per port when a file does not give one.
pub fn default_buffer_bytes(class: LinkClass) -> u64 {
    match class {
        LinkClass::Nvlink | LinkClass::Pcie | LinkClass::Smp => 1 << 20,
        LinkClass::Ib | LinkClass::Ethernet | LinkClass::Other => 4 << 20,
    }
}

/// One generated family with its parameters (`[generator]` in a topology file; the `kind` key
/// picks the variant, the other keys are the fields of its parameter struct).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GeneratorSpec {
    /// `n` GPUs (one per node, each forwarding its neighbours' traffic) in a bidirectional
    /// ring: gpu i ↔ gpu (i+1) mod n.
    Ring {
        n: u32,
        link: LinkParams,
    },
    Star(Star),
    LeafSpine(LeafSpine),
    FatTree(FatTree),
    RailOptimized(RailOptimized),
    NvswitchNode(NvswitchNode),
    HybridCubeMesh(HybridCubeMesh),
    PcieBox(PcieBox),
    Torus(Torus),
}

impl GeneratorSpec {
    /// The server topology file this generator copies per node, if it names one.
    pub fn node_file(&self) -> Option<&str> {
        match self {
            GeneratorSpec::RailOptimized(g) => g.node_file.as_deref(),
            _ => None,
        }
    }

    /// Builds the topology; `node` is the topology of [`Self::node_file`].
    pub fn build_with_node(
        &self,
        name: &str,
        node: Option<&Topology>,
    ) -> Result<Topology, TopologyError> {
        match self {
            GeneratorSpec::RailOptimized(g) => g.build_with_node(name, node),
            _ => self.build(name),
        }
    }

    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        match self {
            GeneratorSpec::Ring { n, link } => ring(name, *n, link),
            GeneratorSpec::Star(g) => g.build(name),
            GeneratorSpec::LeafSpine(g) => g.build(name),
            GeneratorSpec::FatTree(g) => g.build(name),
            GeneratorSpec::RailOptimized(g) => g.build(name),
            GeneratorSpec::NvswitchNode(g) => g.build(name),
            GeneratorSpec::HybridCubeMesh(g) => g.build(name),
            GeneratorSpec::PcieBox(g) => g.build(name),
            GeneratorSpec::Torus(g) => g.build(name),
        }
    }
}

/// Generators refuse to build more devices than this (a typo such as `k = 4000` would
/// otherwise exhaust memory instead of failing): twice [`crate::limits::RANKS_MAX`], room for
/// a NIC or switch port per GPU at the largest GPU count dtsim takes.
pub const MAX_GENERATED_DEVICES: u64 = 2 * crate::limits::RANKS_MAX;

/// What building one device (with its links) costs, measured on a 4,000,030-device leaf-spine
/// (release build, 2026-11-24: 2.0 GB peak, 30 s): for the estimate in the refusal.
const BYTES_PER_DEVICE: f64 = 500.0;
const SECS_PER_DEVICE: f64 = 7.5e-6;

fn one() -> u32 {
    1
}
fn eight() -> u32 {
    8
}

fn at_least(field: &str, value: u32, min: u32) -> Result<(), TopologyError> {
    if value < min {
        return Err(TopologyError::new(
            format!("generator.{field}"),
            format!("at least {min}, got {value}"),
        ));
    }
    Ok(())
}

/// Generators refuse more links (cables, each one both directions) than this: a typo in a
/// per-pair count (`uplinks_per_spine = 4294967295`) would otherwise exhaust memory.
pub const MAX_GENERATED_LINKS: u64 = 8 * crate::limits::RANKS_MAX;

fn not_too_many_links(field: &str, links: u128) -> Result<(), TopologyError> {
    if links > MAX_GENERATED_LINKS as u128 {
        return Err(TopologyError::new(
            format!("generator.{field}"),
            format!("parameters giving at most {MAX_GENERATED_LINKS} links, got {links}"),
        ));
    }
    Ok(())
}

fn not_too_many(field: &str, devices: u64) -> Result<(), TopologyError> {
    if devices > MAX_GENERATED_DEVICES {
        return Err(TopologyError::new(
            format!("generator.{field}"),
            format!(
                "parameters giving at most {MAX_GENERATED_DEVICES} devices, got {devices} \
                 (building them would take about {:.1} GB and {:.0} s)",
                devices as f64 * BYTES_PER_DEVICE / 1e9,
                devices as f64 * SECS_PER_DEVICE
            ),
        ));
    }
    Ok(())
}

/// A ring of `n` single-GPU nodes.
pub fn ring(name: &str, n: u32, link: &LinkParams) -> Result<Topology, TopologyError> {
    at_least("n", n, 2)?;
    not_too_many("n", n as u64)?;
    let mut b = Topology::builder(name);
    // Each ring node is a one-GPU machine that forwards its neighbours' traffic (as the hosts
    // of a physical ring network do), so any two GPUs can reach each other around the ring.
    let gpus: Vec<_> = (0..n)
        .map(|i| {
            let g = b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i));
            b.set_forwards(g, true);
            g
        })
        .collect();
    let pairs = if n == 2 { 1 } else { n };
    for i in 0..pairs {
        b.add_link(gpus[i as usize], gpus[((i + 1) % n) as usize], link.spec());
    }
    b.build()
}

/// `n` single-GPU nodes `gpu<i>`, each with one link to the switch `switch`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Star {
    pub n: u32,
    pub link: LinkParams,
}

impl Star {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("n", self.n, 2)?;
        not_too_many("n", self.n as u64 + 1)?;
        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..self.n)
            .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
            .collect();
        let sw = b.add_device("switch", DeviceKind::Switch, None);
        for g in gpus {
            b.add_link(g, sw, self.link.spec());
        }
        b.build()
    }
}

/// Two-tier Clos: `leaves` leaf switches `leaf<l>`, each with `hosts_per_leaf` single-GPU hosts
/// (`gpu<i>`, `i = l * hosts_per_leaf + h`; the host link stands for NIC and cable), and
/// `spines` spine switches `spine<s>`; every leaf has `uplinks_per_spine` links to every spine.
///
/// Uplink bandwidth: with `oversubscription = r`, each leaf's total uplink capacity is its
/// total downlink capacity divided by `r`, so one uplink carries
/// `hosts_per_leaf * host_link.bandwidth / (r * spines * uplinks_per_spine)` (`r = 1` is
/// non-blocking, `r = 2` is 2:1). Without it, `uplink.bandwidth` is used as given. Exactly one
/// of the two must be given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpine {
    pub leaves: u32,
    pub hosts_per_leaf: u32,
    pub spines: u32,
    #[serde(default = "one")]
    pub uplinks_per_spine: u32,
    pub host_link: LinkParams,
    pub uplink: UplinkParams,
    #[serde(default)]
    pub oversubscription: Option<f64>,
}

impl LeafSpine {
    /// Bandwidth of one leaf→spine link, bits per second per direction.
    pub fn uplink_bits_per_s(&self) -> Result<f64, TopologyError> {
        match (self.oversubscription, self.uplink.bandwidth) {
            (Some(r), None) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(TopologyError::new(
                        "generator.oversubscription",
                        format!("a ratio greater than zero (2.0 means 2:1), got {r}"),
                    ));
                }
                let down_bps = self.hosts_per_leaf as f64 * self.host_link.bandwidth.bits_per_s();
                Ok(down_bps / (r * self.spines as f64 * self.uplinks_per_spine as f64))
            }
            (None, Some(bw)) => Ok(bw.bits_per_s()),
            (Some(_), Some(_)) => Err(TopologyError::new(
                "generator.uplink.bandwidth",
                "either uplink.bandwidth or oversubscription, not both",
            )),
            (None, None) => Err(TopologyError::new(
                "generator.uplink.bandwidth",
                "uplink.bandwidth, or oversubscription to derive it from, got neither",
            )),
        }
    }

    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("leaves", self.leaves, 1)?;
        at_least("hosts_per_leaf", self.hosts_per_leaf, 1)?;
        at_least("spines", self.spines, 1)?;
        at_least("uplinks_per_spine", self.uplinks_per_spine, 1)?;
        let hosts = self.leaves as u64 * self.hosts_per_leaf as u64;
        not_too_many("leaves", hosts + self.leaves as u64 + self.spines as u64)?;
        not_too_many_links(
            "uplinks_per_spine",
            hosts as u128
                + self.leaves as u128 * self.spines as u128 * self.uplinks_per_spine as u128,
        )?;
        let up = &self.uplink;
        let up_spec = link_spec(self.uplink_bits_per_s()?, up.latency, up.buffer, up.class);

        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..hosts as u32)
            .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
            .collect();
        let leaves: Vec<_> = (0..self.leaves)
            .map(|l| b.add_device(format!("leaf{l}"), DeviceKind::Switch, None))
            .collect();
        let spines: Vec<_> = (0..self.spines)
            .map(|s| b.add_device(format!("spine{s}"), DeviceKind::Switch, None))
            .collect();
        for (i, &g) in gpus.iter().enumerate() {
            let leaf = leaves[i / self.hosts_per_leaf as usize];
            b.add_link(g, leaf, self.host_link.spec());
        }
        for &leaf in &leaves {
            for &spine in &spines {
                for _ in 0..self.uplinks_per_spine {
                    b.add_link(leaf, spine, up_spec);
                }
            }
        }
        b.build()
    }
}

/// Three-tier k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008): `k` pods, each with
/// `k/2` edge switches `pod<p>.edge<e>` and `k/2` aggregation switches `pod<p>.agg<a>` (every
/// edge linked to every agg of its pod), and `(k/2)^2` core switches `core<c>`; core `c` links to
/// agg `c / (k/2)` of every pod. Hosts (`gpu<i>`, one GPU each) hang off edge switches.
///
/// - `hosts_per_edge` (default `k/2`, the non-blocking tree with `k^3/4` hosts) overrides the
///   hosts per edge switch; more than `k/2` oversubscribes the edge layer by
///   `hosts_per_edge / (k/2)`: k = 32 with `hosts_per_edge = 32` gives 16,384 hosts at 2:1.
/// - `hosts` populates only the first N host slots (pod-major, then edge, then port), e.g. to
///   fit a GPU count that is not `k * k/2 * hosts_per_edge`; the fabric is always complete.
/// - `link` is used for edge–agg and agg–core links, `host_link` (default `link`) for host–edge.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FatTree {
    pub k: u32,
    #[serde(default)]
    pub hosts_per_edge: Option<u32>,
    #[serde(default)]
    pub hosts: Option<u32>,
    pub link: LinkParams,
    #[serde(default)]
    pub host_link: Option<LinkParams>,
}

impl FatTree {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        let k = self.k;
        at_least("k", k, 2)?;
        if !k.is_multiple_of(2) {
            return Err(TopologyError::new(
                "generator.k",
                format!("an even number of switch ports, got {k}"),
            ));
        }
        let half = k / 2;
        let per_edge = self.hosts_per_edge.unwrap_or(half);
        at_least("hosts_per_edge", per_edge, 1)?;
        let slots = k as u64 * half as u64 * per_edge as u64;
        let switches = k as u64 * k as u64 + half as u64 * half as u64;
        not_too_many("k", slots + switches)?;
        let hosts = match self.hosts {
            None => slots as u32,
            Some(h) if h >= 1 && h as u64 <= slots => h,
            Some(h) => {
                return Err(TopologyError::new(
                    "generator.hosts",
                    format!("between 1 and the {slots} host slots of this fat-tree, got {h}"),
                ))
            }
        };
        let host_link = self.host_link.as_ref().unwrap_or(&self.link).spec();
        let fabric = self.link.spec();

        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..hosts)
            .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
            .collect();
        let mut edges = Vec::with_capacity((k * half) as usize);
        let mut aggs = Vec::with_capacity((k * half) as usize);
        for p in 0..k {
            for e in 0..half {
                edges.push(b.add_device(format!("pod{p}.edge{e}"), DeviceKind::Switch, None));
            }
            for a in 0..half {
                aggs.push(b.add_device(format!("pod{p}.agg{a}"), DeviceKind::Switch, None));
            }
        }
        let cores: Vec<_> = (0..half * half)
            .map(|c| b.add_device(format!("core{c}"), DeviceKind::Switch, None))
            .collect();
        for (i, &g) in gpus.iter().enumerate() {
            b.add_link(g, edges[i / per_edge as usize], host_link);
        }
        for p in 0..k as usize {
            for e in 0..half as usize {
                for a in 0..half as usize {
                    let pod = p * half as usize;
                    b.add_link(edges[pod + e], aggs[pod + a], fabric);
                }
            }
        }
        for (c, &core) in cores.iter().enumerate() {
            let a = c / half as usize;
            for p in 0..k as usize {
                b.add_link(aggs[p * half as usize + a], core, fabric);
            }
        }
        b.build()
    }
}

/// Adds one server's NVSwitch domain: `gpus` GPUs `n<node>.gpu<i>` (in local order) and
/// `nvswitches` switches `n<node>.nvswitch<s>`, every GPU linked to every switch with
/// `nvlink.bandwidth / nvswitches` per direction (`nvlink.bandwidth` is the GPU's total).
fn add_nvswitch_domain(
    b: &mut TopologyBuilder,
    node: u32,
    gpus: u32,
    nvswitches: u32,
    nvlink: &LinkParams,
) -> Vec<DeviceId> {
    let ids: Vec<_> = (0..gpus)
        .map(|i| b.add_device(format!("n{node}.gpu{i}"), DeviceKind::Gpu, Some(node)))
        .collect();
    let switches: Vec<_> = (0..nvswitches)
        .map(|s| {
            b.add_device(
                format!("n{node}.nvswitch{s}"),
                DeviceKind::Nvswitch,
                Some(node),
            )
        })
        .collect();
    let per_switch = nvlink.spec_with_bandwidth(nvlink.bandwidth.bits_per_s() / nvswitches as f64);
    for &g in &ids {
        for &s in &switches {
            b.add_link(g, s, per_switch);
        }
    }
    ids
}

/// Rail-optimized GPU cluster (the DGX SuperPOD / HGX reference design): `nodes` servers, each
/// an NVSwitch domain of `gpus_per_node` GPUs (see [`NvswitchNode`] for `nvswitches`), each
/// GPU with its own NIC `n<node>.nic<g>` (GPU–NIC link `pcie`). NIC `g` of every node is on rail
/// `g`: it links (`nic_link`) to leaf switch `rail<g>.leaf<j>`, `j = node / nodes_per_rail_leaf`
/// (default: all nodes on one leaf per rail). Every leaf has `uplinks_per_spine` links
/// (`spine_link`) to each of the `spines` switches `spine<s>`, which join the rails.
///
/// `node_file = "node.toml"` (a topology file with explicit lists, e.g. one written by
/// `dtsim topo import`, path relative to this file) builds every server as a copy of that
/// one instead: its devices become `n<node>.<name>`, and its NICs, in file order, are rails
/// 0, 1, ... Then `gpus_per_node`, `nvswitches`, `nvlink` and `pcie` come from the node file
/// and may not be given.
///
/// GPUs do not forward, so traffic between GPUs on different rails of different nodes crosses
/// a spine (NCCL's PXN, which first moves data over NVLink to the GPU on the right rail, is a
/// collective-level choice, not a route).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RailOptimized {
    pub nodes: u32,
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    #[serde(default)]
    pub nvswitches: Option<u32>,
    /// Total NVLink bandwidth per GPU and direction.
    #[serde(default)]
    pub nvlink: Option<LinkParams>,
    /// GPU–NIC link (PCIe through the node's PCIe switch).
    #[serde(default)]
    pub pcie: Option<LinkParams>,
    /// One server as a topology file, instead of the four fields above.
    #[serde(default)]
    pub node_file: Option<String>,
    /// NIC–rail leaf link.
    pub nic_link: LinkParams,
    /// Rail leaf–spine link (one of `uplinks_per_spine`).
    pub spine_link: LinkParams,
    #[serde(default)]
    pub nodes_per_rail_leaf: Option<u32>,
    pub spines: u32,
    #[serde(default = "one")]
    pub uplinks_per_spine: u32,
}

/// How a rail-optimized cluster builds each server.
enum Server<'a> {
    Generated {
        gpus: u32,
        nvswitches: u32,
        nvlink: &'a LinkParams,
        pcie: &'a LinkParams,
    },
    Copied(&'a Topology),
}

impl RailOptimized {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        self.build_with_node(name, None)
    }

    /// Builds the cluster; `node` is the topology of `node_file`, read by the caller.
    pub fn build_with_node(
        &self,
        name: &str,
        node: Option<&Topology>,
    ) -> Result<Topology, TopologyError> {
        at_least("nodes", self.nodes, 1)?;
        at_least("uplinks_per_spine", self.uplinks_per_spine, 1)?;
        let server = self.server(node)?;
        let per_leaf = self.nodes_per_rail_leaf.unwrap_or(self.nodes);
        at_least("nodes_per_rail_leaf", per_leaf, 1)?;
        let leaves_per_rail = self.nodes.div_ceil(per_leaf);
        let (rails, per_node, links_per_node) = match &server {
            Server::Generated {
                gpus, nvswitches, ..
            } => (
                *gpus,
                2 * *gpus as u64 + *nvswitches as u64,
                *gpus as u128 * (*nvswitches as u128 + 1),
            ),
            Server::Copied(t) => (
                nics_of(t).len() as u32,
                t.devices().len() as u64,
                t.duplex_link_count() as u128,
            ),
        };
        let leaf_count = rails as u64 * leaves_per_rail as u64;
        if leaf_count > 1 {
            at_least("spines", self.spines, 1)?;
        }
        not_too_many(
            "nodes",
            self.nodes as u64 * per_node + leaf_count + self.spines as u64,
        )?;
        not_too_many_links(
            "uplinks_per_spine",
            self.nodes as u128 * (links_per_node + rails as u128)
                + leaf_count as u128 * self.spines as u128 * self.uplinks_per_spine as u128,
        )?;

        let mut b = Topology::builder(name);
        let mut nics = Vec::with_capacity((self.nodes * rails) as usize);
        for n in 0..self.nodes {
            match &server {
                Server::Generated {
                    gpus,
                    nvswitches,
                    nvlink,
                    pcie,
                } => {
                    let gpus = add_nvswitch_domain(&mut b, n, *gpus, *nvswitches, nvlink);
                    for (g, &gpu) in gpus.iter().enumerate() {
                        let nic = b.add_device(format!("n{n}.nic{g}"), DeviceKind::Nic, Some(n));
                        b.add_link(gpu, nic, pcie.spec());
                        nics.push(nic);
                    }
                }
                Server::Copied(t) => nics.extend(add_server_copy(&mut b, t, n)),
            }
        }
        let mut leaves = Vec::with_capacity(leaf_count as usize);
        for r in 0..rails {
            for j in 0..leaves_per_rail {
                leaves.push(b.add_device(format!("rail{r}.leaf{j}"), DeviceKind::Switch, None));
            }
        }
        let spines: Vec<_> = (0..self.spines)
            .map(|s| b.add_device(format!("spine{s}"), DeviceKind::Switch, None))
            .collect();
        for n in 0..self.nodes {
            for r in 0..rails {
                let nic = nics[(n * rails + r) as usize];
                let leaf = leaves[(r * leaves_per_rail + n / per_leaf) as usize];
                b.add_link(nic, leaf, self.nic_link.spec());
            }
        }
        for &leaf in &leaves {
            for &spine in &spines {
                for _ in 0..self.uplinks_per_spine {
                    b.add_link(leaf, spine, self.spine_link.spec());
                }
            }
        }
        b.build()
    }

    /// The server description: generated from the fields, or the node file's topology.
    fn server<'a>(&'a self, node: Option<&'a Topology>) -> Result<Server<'a>, TopologyError> {
        match (node, &self.node_file) {
            (Some(t), Some(_)) => {
                for (field, given) in [
                    ("gpus_per_node", self.gpus_per_node.is_some()),
                    ("nvswitches", self.nvswitches.is_some()),
                    ("nvlink", self.nvlink.is_some()),
                    ("pcie", self.pcie.is_some()),
                ] {
                    if given {
                        return Err(TopologyError::new(
                            format!("generator.{field}"),
                            "nothing: the node_file describes the server",
                        ));
                    }
                }
                if nics_of(t).is_empty() || t.gpus().is_empty() {
                    return Err(TopologyError::new(
                        "generator.node_file",
                        "a server with GPUs and at least one NIC (NIC r goes to rail r)",
                    ));
                }
                Ok(Server::Copied(t))
            }
            (None, Some(f)) => Err(TopologyError::new(
                "generator.node_file",
                format!("{f:?} read by the topology file loader (build it with topology::file)"),
            )),
            (_, None) => {
                let required = |field: &str| {
                    TopologyError::new(
                        format!("generator.{field}"),
                        "a value (or node_file = \"...\" naming a server's topology file)",
                    )
                };
                let gpus = self
                    .gpus_per_node
                    .ok_or_else(|| required("gpus_per_node"))?;
                at_least("gpus_per_node", gpus, 1)?;
                let nvswitches = self.nvswitches.unwrap_or(1);
                at_least("nvswitches", nvswitches, 1)?;
                Ok(Server::Generated {
                    gpus,
                    nvswitches,
                    nvlink: self.nvlink.as_ref().ok_or_else(|| required("nvlink"))?,
                    pcie: self.pcie.as_ref().ok_or_else(|| required("pcie"))?,
                })
            }
        }
    }
}

/// The NICs of a server topology, in device order.
fn nics_of(t: &Topology) -> Vec<DeviceId> {
    (0..t.devices().len() as u32)
        .map(DeviceId)
        .filter(|&d| t.device(d).kind == DeviceKind::Nic)
        .collect()
}

/// Copies server `t` into `b` as node `n` (devices renamed `n<n>.<name>`, every link with both
/// directions as in `t`); returns the copies of its NICs, in device order.
fn add_server_copy(b: &mut TopologyBuilder, t: &Topology, n: u32) -> Vec<DeviceId> {
    let ids: Vec<DeviceId> = t
        .devices()
        .iter()
        .map(|d| {
            let id = b.add_device(format!("n{n}.{}", d.name), d.kind, Some(n));
            b.set_forwards(id, d.forwards);
            id
        })
        .collect();
    for (d, &id) in t.devices().iter().zip(&ids) {
        if let Some(via) = d.staged_via {
            b.set_staged_via(id, ids[via.index()]);
        }
    }
    let spec = |l: &super::Link| LinkSpec {
        bandwidth_bps: l.bandwidth_bps,
        latency: l.latency,
        buffer_bytes: l.buffer_bytes,
        class: l.class,
    };
    for pair in t.links().chunks(2) {
        let (ab, ba) = (&pair[0], &pair[1]);
        b.add_asymmetric_link(ids[ab.from.index()], ids[ab.to.index()], spec(ab), spec(ba));
    }
    nics_of(t).into_iter().map(|d| ids[d.index()]).collect()
}

/// One NVSwitch server (DGX/HGX A100 or H100 like), node 0: `gpus` GPUs `n0.gpu<i>` on
/// `nvswitches` NVSwitch devices, plus, when `pcie` is given, a host `n0.host` with a PCIe link
/// to every GPU and, when `nics = gpus`, one NIC `n0.nic<i>` per GPU on a PCIe link to it.
///
/// `nvlink.bandwidth` is a GPU's total NVLink bandwidth per direction. With several
/// `nvswitches` each GPU links to each of them with an equal share. The default is one switch
/// device standing for the whole (non-blocking) NVSwitch fabric: the hardware stripes every
/// GPU pair's traffic over all switch chips, whereas the router sends each (source,
/// destination) pair over one equal-cost path, so with `nvswitches = s` a single pair would be
/// capped at `1/s` of its NVLink bandwidth. Use several only to count chips or study that
/// per-path hashing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvswitchNode {
    #[serde(default = "eight")]
    pub gpus: u32,
    #[serde(default = "one")]
    pub nvswitches: u32,
    pub nvlink: LinkParams,
    #[serde(default)]
    pub pcie: Option<LinkParams>,
    #[serde(default)]
    pub nics: u32,
}

impl NvswitchNode {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("gpus", self.gpus, 1)?;
        at_least("nvswitches", self.nvswitches, 1)?;
        not_too_many("gpus", 2 * self.gpus as u64 + self.nvswitches as u64 + 1)?;
        not_too_many_links(
            "nvswitches",
            self.gpus as u128 * (self.nvswitches as u128 + 2),
        )?;
        if self.nics != 0 && self.nics != self.gpus {
            return Err(TopologyError::new(
                "generator.nics",
                format!("0 or one NIC per GPU ({}), got {}", self.gpus, self.nics),
            ));
        }
        let mut b = Topology::builder(name);
        let gpus = add_nvswitch_domain(&mut b, 0, self.gpus, self.nvswitches, &self.nvlink);
        match &self.pcie {
            Some(pcie) => {
                let host = b.add_device("n0.host", DeviceKind::Host, Some(0));
                for (i, &g) in gpus.iter().enumerate() {
                    b.add_link(g, host, pcie.spec());
                    if self.nics > 0 {
                        let nic = b.add_device(format!("n0.nic{i}"), DeviceKind::Nic, Some(0));
                        b.add_link(g, nic, pcie.spec());
                    }
                }
            }
            None if self.nics > 0 => {
                return Err(TopologyError::new(
                    "generator.pcie",
                    "PCIe link parameters for the GPU–NIC links, since nics > 0; got none",
                ))
            }
            None => {}
        }
        b.build()
    }
}

/// The NVLink pairs of a DGX-1 with V100 (NVLink2, six links per GPU) as `(gpu a, gpu b,
/// links)`: 8 pairs with two links and 8 with one; pairs not listed have no NVLink.
///
/// Source: the measured 8×8 unidirectional P2P matrix of an 8× V100-SXM2 node in
/// `shared/validation/p2p_bandwidth_matrices.csv` (GPUInspector.jl docs, v100_sxm2.md):
/// ~45 GiB/s for two links, ~22.5 GiB/s for one, 6.6–8.1 GiB/s (PCIe through the CPUs) for none.
/// Every GPU has 2·2 + 2·1 = 6 links.
pub const DGX1_V100_NVLINK_PAIRS: [(u32, u32, u32); 16] = [
    (0, 2, 2),
    (0, 4, 2),
    (1, 3, 2),
    (1, 5, 2),
    (2, 3, 2),
    (4, 6, 2),
    (5, 7, 2),
    (6, 7, 2),
    (0, 1, 1),
    (0, 3, 1),
    (1, 2, 1),
    (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1),
    (4, 7, 1),
    (5, 6, 1),
];

/// DGX-1 (V100) servers: `nodes` (default 1) copies of one server `n<k>`, each with 8 GPUs
/// `n<k>.gpu<i>` in the NVLink2 hybrid cube mesh of [`DGX1_V100_NVLINK_PAIRS`] (a pair with two
/// links is one link of twice `nvlink.bandwidth`, which is per NVLink), four PCIe switches
/// `n<k>.pcie_sw<j>` (GPUs 2j and 2j+1 on switch j, switches 0–1 under CPU `n<k>.cpu0`, 2–3
/// under `n<k>.cpu1`; all `pcie` links) and the two CPUs joined by an `smp` link (QPI). With
/// `nics = 4`, one NIC `n<k>.nic<j>` per PCIe switch (the DGX-1's four InfiniBand adapters).
/// GPUs without NVLink between them reach each other through PCIe switch, CPU, QPI, CPU, PCIe
/// switch.
///
/// With `nic_link` (required when `nodes > 1`, and then `nics = 4`), every NIC of every node
/// links to one InfiniBand switch `ib_switch`, so a GPU reaches another node through the NIC on
/// its own PCIe switch: GPU, PCIe switch, NIC, `ib_switch`, NIC, PCIe switch, GPU. Servers are
/// added one after the other, so GPUs are node-major (rank order) and one node without
/// `nic_link` is exactly the single-server topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HybridCubeMesh {
    /// One NVLink (brick) per direction.
    pub nvlink: LinkParams,
    pub pcie: LinkParams,
    pub smp: LinkParams,
    #[serde(default)]
    pub nics: u32,
    #[serde(default = "one")]
    pub nodes: u32,
    /// NIC–`ib_switch` link.
    #[serde(default)]
    pub nic_link: Option<LinkParams>,
}

impl HybridCubeMesh {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("nodes", self.nodes, 1)?;
        not_too_many("nodes", self.nodes as u64 * 18 + 1)?;
        if self.nics != 0 && self.nics != 4 {
            return Err(TopologyError::new(
                "generator.nics",
                format!("0 or 4 (one per PCIe switch), got {}", self.nics),
            ));
        }
        if self.nodes > 1 && self.nic_link.is_none() {
            return Err(TopologyError::new(
                "generator.nic_link",
                format!(
                    "link parameters for the NIC–ib_switch links, since nodes = {} > 1; got none",
                    self.nodes
                ),
            ));
        }
        if self.nic_link.is_some() && self.nics != 4 {
            return Err(TopologyError::new(
                "generator.nics",
                format!(
                    "4 (one per PCIe switch), since nic_link joins the NICs to ib_switch; got {}",
                    self.nics
                ),
            ));
        }
        let mut b = Topology::builder(name);
        let mut nics = Vec::with_capacity(self.nodes as usize * 4);
        for n in 0..self.nodes {
            nics.extend(self.add_server(&mut b, n));
        }
        if let Some(nic_link) = &self.nic_link {
            let ib = b.add_device("ib_switch", DeviceKind::Switch, None);
            for &nic in &nics {
                b.add_link(nic, ib, nic_link.spec());
            }
        }
        b.build()
    }

    /// Adds server `n` and returns its NICs (none when `nics = 0`).
    fn add_server(&self, b: &mut TopologyBuilder, n: u32) -> Vec<DeviceId> {
        let gpus: Vec<_> = (0..8)
            .map(|i| b.add_device(format!("n{n}.gpu{i}"), DeviceKind::Gpu, Some(n)))
            .collect();
        let switches: Vec<_> = (0..4)
            .map(|j| b.add_device(format!("n{n}.pcie_sw{j}"), DeviceKind::PcieSwitch, Some(n)))
            .collect();
        let cpus: Vec<_> = (0..2)
            .map(|c| b.add_device(format!("n{n}.cpu{c}"), DeviceKind::Host, Some(n)))
            .collect();
        let per_link_bps = self.nvlink.bandwidth.bits_per_s();
        for (a, c, links) in DGX1_V100_NVLINK_PAIRS {
            let spec = self.nvlink.spec_with_bandwidth(per_link_bps * links as f64);
            b.add_link(gpus[a as usize], gpus[c as usize], spec);
        }
        for (i, &g) in gpus.iter().enumerate() {
            b.add_link(g, switches[i / 2], self.pcie.spec());
        }
        let mut nics = Vec::new();
        for (j, &s) in switches.iter().enumerate() {
            b.add_link(s, cpus[j / 2], self.pcie.spec());
            if self.nics == 4 {
                let nic = b.add_device(format!("n{n}.nic{j}"), DeviceKind::Nic, Some(n));
                b.add_link(nic, s, self.pcie.spec());
                nics.push(nic);
            }
        }
        b.add_link(cpus[0], cpus[1], self.smp.spec());
        nics
    }
}

/// `gpus` GPUs `n0.gpu<i>` in one server without GPU peer-to-peer (consumer GPUs, or P2P
/// disabled): GPU→GPU traffic is staged in the host's memory, as CUDA and NCCL's SHM transport
/// do without P2P, so every GPU→GPU route goes up to `n0.host` and back down
/// ([`crate::topology::Device::staged_via`]).
///
/// Without `switch_uplink` every GPU has its own `pcie` link to the host. With it, the GPUs sit
/// behind one PCIe switch `n0.pcie_sw` (each on its own `pcie` link, its x16 lanes) whose
/// single `switch_uplink` reaches the host (`nvidia-smi topo -m` says `PIX` between them): a
/// staged transfer crosses that uplink twice, up to host memory and down to the peer, so one
/// transfer alone has the uplink each way to itself, and two in opposite directions (a
/// 2-GPU ring) share both directions of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieBox {
    pub gpus: u32,
    pub pcie: LinkParams,
    #[serde(default)]
    pub switch_uplink: Option<LinkParams>,
}

impl PcieBox {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("gpus", self.gpus, 1)?;
        not_too_many("gpus", self.gpus as u64 + 2)?;
        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..self.gpus)
            .map(|i| b.add_device(format!("n0.gpu{i}"), DeviceKind::Gpu, Some(0)))
            .collect();
        let host = b.add_device("n0.host", DeviceKind::Host, Some(0));
        let upstream = match &self.switch_uplink {
            Some(uplink) => {
                let sw = b.add_device("n0.pcie_sw", DeviceKind::PcieSwitch, Some(0));
                b.add_link(sw, host, uplink.spec());
                sw
            }
            None => host,
        };
        for g in gpus {
            b.add_link(g, upstream, self.pcie.spec());
            b.set_staged_via(g, host);
        }
        b.build()
    }
}

/// A 2D (`dims = [x, y]`) or 3D (`dims = [x, y, z]`) torus of single-GPU nodes that forward
/// traffic (TPU-pod-like): GPU at coordinates `(x, y, z)` is `gpu<x>-<y>[-<z>]`, rank
/// `x + X·(y + Y·z)`, linked to its ±1 neighbour in every dimension with wraparound. A
/// dimension of size 2 has one link per pair (the wraparound would duplicate it).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Torus {
    pub dims: Vec<u32>,
    pub link: LinkParams,
}

impl Torus {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        if !(2..=3).contains(&self.dims.len()) {
            return Err(TopologyError::new(
                "generator.dims",
                format!("2 or 3 dimension sizes such as [4, 4], got {:?}", self.dims),
            ));
        }
        for (d, &size) in self.dims.iter().enumerate() {
            at_least(&format!("dims[{d}]"), size, 2)?;
        }
        let total: u64 = self.dims.iter().map(|&d| d as u64).product();
        not_too_many("dims", total)?;
        let mut dims = [1u32; 3];
        dims[..self.dims.len()].copy_from_slice(&self.dims);
        let [dx, dy, _] = dims;
        let rank = |c: [u32; 3]| (c[0] + dx * (c[1] + dy * c[2])) as usize;

        let mut b = Topology::builder(name);
        let mut gpus = Vec::with_capacity(total as usize);
        for i in 0..total as u32 {
            let c = [i % dx, (i / dx) % dy, i / (dx * dy)];
            let label = if self.dims.len() == 2 {
                format!("gpu{}-{}", c[0], c[1])
            } else {
                format!("gpu{}-{}-{}", c[0], c[1], c[2])
            };
            let g = b.add_device(label, DeviceKind::Gpu, Some(i));
            b.set_forwards(g, true);
            gpus.push(g);
        }
        for i in 0..total as u32 {
            let c = [i % dx, (i / dx) % dy, i / (dx * dy)];
            for d in 0..self.dims.len() {
                let size = dims[d];
                // Link to the +1 neighbour; with size 2 only from coordinate 0, once.
                if size == 2 && c[d] == 1 {
                    continue;
                }
                let mut n = c;
                n[d] = (c[d] + 1) % size;
                b.add_link(gpus[i as usize], gpus[rank(n)], self.link.spec());
            }
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::routing::Router;

    fn params(bandwidth: &str, class: LinkClass) -> LinkParams {
        LinkParams {
            bandwidth: Bandwidth(crate::units::parse_bandwidth(bandwidth).unwrap()),
            latency: Duration::default(),
            buffer: None,
            class,
        }
    }
    fn eth(bandwidth: &str) -> LinkParams {
        params(bandwidth, LinkClass::Ethernet)
    }

    fn count(t: &Topology, kind: DeviceKind) -> usize {
        t.devices().iter().filter(|d| d.kind == kind).count()
    }

    fn hops(t: &Topology, a: &str, b: &str) -> u32 {
        let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
        Router::new(t, 0).hops(t, a, b).unwrap()
    }

    /// Names of the devices on the route from `a` to `b`, both ends included.
    fn route(t: &Topology, a: &str, b: &str) -> Vec<String> {
        let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
        let mut r = Router::new(t, 0);
        let path = r.path(t, a, b).unwrap();
        let mut names = vec![t.device(a).name.clone()];
        names.extend(path.iter().map(|&l| t.device(t.link(l).to).name.clone()));
        names
    }

    /// Bandwidth (bits/s, one direction) of the link between two named devices.
    fn link_bps(t: &Topology, a: &str, b: &str) -> Option<f64> {
        let (a, b) = (t.find(a).unwrap(), t.find(b).unwrap());
        t.out_links(a)
            .iter()
            .map(|&l| t.link(l))
            .find(|l| l.to == b)
            .map(|l| l.bandwidth_bps)
    }

    fn gpus_are_rank_ordered_by_node(t: &Topology) {
        let nodes: Vec<u32> = t
            .gpus()
            .iter()
            .map(|&g| t.device(g).node.unwrap())
            .collect();
        assert!(nodes.windows(2).all(|w| w[0] <= w[1]), "{nodes:?}");
    }

    #[test]
    fn ring_links_each_gpu_to_its_two_neighbours() {
        let t = ring("r", 5, &eth("10GB/s")).unwrap();
        assert_eq!(t.gpus().len(), 5);
        assert_eq!(t.duplex_link_count(), 5);
        assert_eq!(ring("r", 2, &eth("10GB/s")).unwrap().duplex_link_count(), 1);
        let mut router = crate::topology::routing::Router::new(&t, 0);
        assert_eq!(
            router.hops(&t, t.gpus()[0], t.gpus()[2]),
            Some(2),
            "ring nodes forward"
        );
        assert_eq!(
            ring("r", 1, &eth("10GB/s")).unwrap_err().field,
            "generator.n"
        );
    }

    #[test]
    fn star_puts_every_gpu_one_hop_from_the_switch() {
        let t = Star {
            n: 8,
            link: eth("100Gbps"),
        }
        .build("s")
        .unwrap();
        assert_eq!(t.gpus().len(), 8);
        assert_eq!(count(&t, DeviceKind::Switch), 1);
        assert_eq!(t.duplex_link_count(), 8);
        assert_eq!(hops(&t, "gpu0", "gpu7"), 2);
        gpus_are_rank_ordered_by_node(&t);
    }

    fn leaf_spine(oversubscription: Option<f64>, uplink_bw: Option<&str>) -> LeafSpine {
        LeafSpine {
            leaves: 4,
            hosts_per_leaf: 8,
            spines: 2,
            uplinks_per_spine: 2,
            host_link: eth("100Gbps"),
            uplink: UplinkParams {
                bandwidth: uplink_bw.map(|s| Bandwidth(crate::units::parse_bandwidth(s).unwrap())),
                latency: Duration::default(),
                buffer: None,
                class: LinkClass::Ethernet,
            },
            oversubscription,
        }
    }

    #[test]
    fn leaf_spine_has_hosts_leaves_spines_and_full_leaf_to_spine_mesh() {
        let t = leaf_spine(None, Some("100Gbps")).build("ls").unwrap();
        assert_eq!(t.gpus().len(), 32);
        assert_eq!(count(&t, DeviceKind::Switch), 6);
        assert_eq!(t.duplex_link_count(), 32 + 4 * 2 * 2);
        assert_eq!(hops(&t, "gpu0", "gpu1"), 2);
        assert_eq!(hops(&t, "gpu0", "gpu31"), 4);
        gpus_are_rank_ordered_by_node(&t);
    }

    #[test]
    fn leaf_spine_two_to_one_gives_each_leaf_half_its_downlink_capacity_upward() {
        let t = leaf_spine(Some(2.0), None).build("ls").unwrap();
        let leaf = t.find("leaf1").unwrap();
        let (mut down, mut up) = (0.0, 0.0);
        for &l in t.out_links(leaf) {
            let link = t.link(l);
            match t.device(link.to).kind {
                DeviceKind::Gpu => down += link.bandwidth_bps,
                _ => up += link.bandwidth_bps,
            }
        }
        assert_eq!(down, 800e9);
        assert!((up - down / 2.0).abs() < 1.0, "up {up} down {down}");
        // 8 × 100 Gb/s / (2 × 2 spines × 2 uplinks each) = 100 Gb/s per uplink.
        assert_eq!(link_bps(&t, "leaf1", "spine0"), Some(100e9));
    }

    #[test]
    fn leaf_spine_wants_exactly_one_of_uplink_bandwidth_and_oversubscription() {
        let both = leaf_spine(Some(2.0), Some("100Gbps"))
            .build("ls")
            .unwrap_err();
        assert_eq!(both.field, "generator.uplink.bandwidth");
        let neither = leaf_spine(None, None).build("ls").unwrap_err();
        assert!(neither.expected.contains("neither"), "{neither}");
        let bad = leaf_spine(Some(0.0), None).build("ls").unwrap_err();
        assert_eq!(bad.field, "generator.oversubscription");
    }

    fn fat_tree(k: u32, hosts_per_edge: Option<u32>, hosts: Option<u32>) -> FatTree {
        FatTree {
            k,
            hosts_per_edge,
            hosts,
            link: eth("100Gbps"),
            host_link: None,
        }
    }

    #[test]
    fn fat_tree_k4_has_16_hosts_20_switches_and_48_links() {
        let t = fat_tree(4, None, None).build("ft").unwrap();
        assert_eq!(t.gpus().len(), 16);
        assert_eq!(count(&t, DeviceKind::Switch), 20);
        assert_eq!(t.duplex_link_count(), 48);
        gpus_are_rank_ordered_by_node(&t);
    }

    #[test]
    fn fat_tree_hops_are_2_under_an_edge_4_in_a_pod_and_6_across_pods() {
        let t = fat_tree(4, None, None).build("ft").unwrap();
        assert_eq!(hops(&t, "gpu0", "gpu1"), 2);
        assert_eq!(hops(&t, "gpu0", "gpu2"), 4);
        assert_eq!(hops(&t, "gpu0", "gpu4"), 6);
        assert_eq!(hops(&t, "gpu3", "gpu15"), 6);
        let r = route(&t, "gpu0", "gpu15");
        assert!(r[3].starts_with("core"), "{r:?}");
    }

    #[test]
    fn fat_tree_every_core_reaches_every_pod_once() {
        let t = fat_tree(6, None, None).build("ft").unwrap();
        for c in 0..9 {
            let core = t.find(&format!("core{c}")).unwrap();
            let mut pods: Vec<String> = t
                .out_links(core)
                .iter()
                .map(|&l| {
                    t.device(t.link(l).to)
                        .name
                        .split('.')
                        .next()
                        .unwrap()
                        .to_string()
                })
                .collect();
            pods.sort();
            pods.dedup();
            assert_eq!(pods.len(), 6);
            assert_eq!(t.out_links(core).len(), 6);
        }
    }

    #[test]
    fn fat_tree_hosts_and_hosts_per_edge_change_the_population_only() {
        let t = fat_tree(4, None, Some(10)).build("ft").unwrap();
        assert_eq!(t.gpus().len(), 10);
        assert_eq!(count(&t, DeviceKind::Switch), 20);
        let t = fat_tree(4, Some(4), None).build("ft").unwrap();
        assert_eq!(t.gpus().len(), 32);
        assert_eq!(t.out_links(t.find("pod3.edge1").unwrap()).len(), 4 + 2);
        let e = fat_tree(4, None, Some(17)).build("ft").unwrap_err();
        assert_eq!(e.field, "generator.hosts");
        assert_eq!(
            fat_tree(5, None, None).build("ft").unwrap_err().field,
            "generator.k"
        );
        assert_eq!(
            fat_tree(4000, None, None).build("ft").unwrap_err().field,
            "generator.k"
        );
    }

    #[test]
    fn fat_tree_k32_with_32_hosts_per_edge_has_16384_gpus_and_routes() {
        // Not timed (speed targets live in benchmarks), but it must stay linear: this builds
        // 17,664 devices and 32,768 links.
        let t = fat_tree(32, Some(32), None).build("ft16k").unwrap();
        assert_eq!(t.gpus().len(), 16_384);
        assert_eq!(count(&t, DeviceKind::Switch), 32 * 32 + 16 * 16);
        assert_eq!(t.duplex_link_count(), 16_384 + 2 * 32 * 16 * 16);
        let mut r = Router::new(&t, 1);
        let (a, b) = (t.gpus()[0], t.gpus()[16_383]);
        assert_eq!(r.hops(&t, a, b), Some(6));
    }

    fn rail(nodes: u32, nodes_per_rail_leaf: Option<u32>) -> RailOptimized {
        RailOptimized {
            nodes,
            gpus_per_node: Some(8),
            nvswitches: Some(1),
            nvlink: Some(params("450GB/s", LinkClass::Nvlink)),
            pcie: Some(params("63GB/s", LinkClass::Pcie)),
            node_file: None,
            nic_link: params("400Gbps", LinkClass::Ib),
            spine_link: params("400Gbps", LinkClass::Ib),
            nodes_per_rail_leaf,
            spines: 2,
            uplinks_per_spine: 2,
        }
    }

    #[test]
    fn rail_optimized_counts_devices_and_links() {
        let t = rail(4, Some(2)).build("rail").unwrap();
        assert_eq!(t.gpus().len(), 32);
        assert_eq!(count(&t, DeviceKind::Nic), 32);
        assert_eq!(count(&t, DeviceKind::Nvswitch), 4);
        // 8 rails × 2 leaves + 2 spines.
        assert_eq!(count(&t, DeviceKind::Switch), 18);
        // Per node 8 NVLink + 8 PCIe + 8 NIC links; 16 leaves × 2 spines × 2 uplinks.
        assert_eq!(t.duplex_link_count(), 4 * 24 + 16 * 2 * 2);
        gpus_are_rank_ordered_by_node(&t);
        assert_eq!(t.device(t.gpus()[9]).name, "n1.gpu1");
        assert_eq!(t.device(t.find("n3.nic5").unwrap()).node, Some(3));
    }

    #[test]
    fn rail_optimized_routes_inside_nodes_on_rails_and_across_rails() {
        let t = rail(4, Some(2)).build("rail").unwrap();
        assert_eq!(hops(&t, "n0.gpu0", "n0.gpu7"), 2, "over the NVSwitch");
        assert_eq!(
            route(&t, "n0.gpu3", "n1.gpu3"),
            ["n0.gpu3", "n0.nic3", "rail3.leaf0", "n1.nic3", "n1.gpu3"]
        );
        assert_eq!(hops(&t, "n0.gpu3", "n2.gpu3"), 6, "same rail, other leaf");
        let r = route(&t, "n0.gpu0", "n1.gpu1");
        assert_eq!(r.len(), 7, "{r:?}");
        assert!(r[3].starts_with("spine"), "{r:?}");
    }

    #[test]
    fn copied_servers_keep_their_gpus_staging_through_their_own_host() {
        // Per node: gpu0, gpu1 and nic0 behind one PCIe switch, no P2P between the GPUs.
        let mut b = Topology::builder("node");
        let gpus = [
            b.add_device("gpu0", DeviceKind::Gpu, Some(0)),
            b.add_device("gpu1", DeviceKind::Gpu, Some(0)),
        ];
        let sw = b.add_device("sw", DeviceKind::PcieSwitch, Some(0));
        let host = b.add_device("host", DeviceKind::Host, Some(0));
        let nic = b.add_device("nic0", DeviceKind::Nic, Some(0));
        let pcie = params("15.75GB/s", LinkClass::Pcie).spec();
        for d in [gpus[0], gpus[1], host, nic] {
            b.add_link(d, sw, pcie);
        }
        for g in gpus {
            b.set_staged_via(g, host);
        }
        let node = b.build().unwrap();
        let cluster = RailOptimized {
            node_file: Some("node.toml".into()),
            gpus_per_node: None,
            nvswitches: None,
            nvlink: None,
            pcie: None,
            ..rail(2, None)
        };
        let t = cluster.build_with_node("two", Some(&node)).unwrap();
        assert_eq!(
            route(&t, "n1.gpu0", "n1.gpu1"),
            ["n1.gpu0", "n1.sw", "n1.host", "n1.sw", "n1.gpu1"]
        );
        assert_eq!(
            hops(&t, "n0.gpu0", "n1.gpu0"),
            6,
            "across nodes: NIC to NIC, not staged"
        );
    }

    #[test]
    fn nvswitch_node_splits_gpu_bandwidth_over_switches() {
        let one = NvswitchNode {
            gpus: 8,
            nvswitches: 1,
            nvlink: params("300GB/s", LinkClass::Nvlink),
            pcie: None,
            nics: 0,
        };
        let t = one.build("dgx").unwrap();
        assert_eq!((t.devices().len(), t.duplex_link_count()), (9, 8));
        assert_eq!(link_bps(&t, "n0.gpu0", "n0.nvswitch0"), Some(2400e9));
        assert_eq!(hops(&t, "n0.gpu0", "n0.gpu5"), 2);

        let six = NvswitchNode {
            nvswitches: 6,
            ..one.clone()
        }
        .build("dgx")
        .unwrap();
        assert_eq!(count(&six, DeviceKind::Nvswitch), 6);
        assert_eq!(six.duplex_link_count(), 48);
        assert_eq!(link_bps(&six, "n0.gpu0", "n0.nvswitch5"), Some(400e9));
    }

    #[test]
    fn nvswitch_node_adds_host_and_one_nic_per_gpu() {
        let spec = NvswitchNode {
            gpus: 8,
            nvswitches: 1,
            nvlink: params("450GB/s", LinkClass::Nvlink),
            pcie: Some(params("63GB/s", LinkClass::Pcie)),
            nics: 8,
        };
        let t = spec.build("hgx").unwrap();
        assert_eq!(count(&t, DeviceKind::Host), 1);
        assert_eq!(count(&t, DeviceKind::Nic), 8);
        assert_eq!(t.duplex_link_count(), 8 * 3);
        assert_eq!(hops(&t, "n0.gpu2", "n0.host"), 1);
        assert_eq!(hops(&t, "n0.gpu2", "n0.gpu3"), 2);
        let e = NvswitchNode {
            nics: 3,
            ..spec.clone()
        }
        .build("x")
        .unwrap_err();
        assert_eq!(e.field, "generator.nics");
        let e = NvswitchNode { pcie: None, ..spec }.build("x").unwrap_err();
        assert_eq!(e.field, "generator.pcie");
    }

    fn dgx1_spec(nodes: u32, nic_link: Option<LinkParams>) -> HybridCubeMesh {
        HybridCubeMesh {
            nvlink: params("25GB/s", LinkClass::Nvlink),
            pcie: params("15.75GB/s", LinkClass::Pcie),
            smp: params("38.4GB/s", LinkClass::Smp),
            nics: 4,
            nodes,
            nic_link,
        }
    }

    fn dgx1() -> Topology {
        dgx1_spec(1, None).build("dgx1").unwrap()
    }

    fn two_dgx1() -> Topology {
        let edr = params("100Gbps", LinkClass::Ib);
        dgx1_spec(2, Some(edr)).build("dgx1x2").unwrap()
    }

    #[test]
    fn hybrid_cube_mesh_has_the_measured_double_and_single_nvlink_pairs() {
        let t = dgx1();
        let nv = |a: u32, b: u32| link_bps(&t, &format!("n0.gpu{a}"), &format!("n0.gpu{b}"));
        // Rows of the V100 P2P matrix: ~45 GiB/s = two links, ~22.5 = one, ~7-8 = none.
        assert_eq!(nv(0, 2), Some(400e9));
        assert_eq!(nv(0, 4), Some(400e9));
        assert_eq!(nv(6, 7), Some(400e9));
        assert_eq!(nv(0, 1), Some(200e9));
        assert_eq!(nv(2, 6), Some(200e9));
        assert_eq!(nv(7, 4), Some(200e9));
        assert_eq!(nv(0, 5), None);
        assert_eq!(nv(3, 4), None);
        for g in 0..8 {
            let gpu = t.find(&format!("n0.gpu{g}")).unwrap();
            let nvlinks: f64 = t
                .out_links(gpu)
                .iter()
                .map(|&l| t.link(l))
                .filter(|l| l.class == LinkClass::Nvlink)
                .map(|l| l.bandwidth_bps / 200e9)
                .sum();
            assert_eq!(nvlinks, 6.0, "gpu{g} has six NVLink2 links");
        }
        assert_eq!(t.duplex_link_count(), 16 + 8 + 4 + 4 + 1);
    }

    #[test]
    fn hybrid_cube_mesh_pairs_without_nvlink_cross_the_cpus() {
        let t = dgx1();
        assert_eq!(hops(&t, "n0.gpu0", "n0.gpu1"), 1);
        assert_eq!(
            route(&t, "n0.gpu0", "n0.gpu5"),
            [
                "n0.gpu0",
                "n0.pcie_sw0",
                "n0.cpu0",
                "n0.cpu1",
                "n0.pcie_sw2",
                "n0.gpu5"
            ]
        );
    }

    #[test]
    fn two_hybrid_cube_mesh_nodes_have_16_rank_ordered_gpus_and_eight_nics_on_one_ib_switch() {
        let t = two_dgx1();
        assert_eq!(t.gpus().len(), 16);
        gpus_are_rank_ordered_by_node(&t);
        assert_eq!(t.device(t.gpus()[8]).name, "n1.gpu0");
        assert_eq!(count(&t, DeviceKind::Nic), 8);
        assert_eq!(count(&t, DeviceKind::Switch), 1);
        assert_eq!(t.device(t.find("ib_switch").unwrap()).node, None);
        for n in 0..2 {
            for j in 0..4 {
                let nic = format!("n{n}.nic{j}");
                assert_eq!(link_bps(&t, &nic, "ib_switch"), Some(100e9), "{nic}");
                assert_eq!(link_bps(&t, &nic, &format!("n{n}.pcie_sw{j}")), Some(126e9));
            }
        }
        assert_eq!(t.duplex_link_count(), 2 * (16 + 8 + 4 + 4 + 1) + 8);
    }

    #[test]
    fn gpus_on_different_nodes_meet_through_their_own_pcie_switch_nic_and_the_ib_switch() {
        let t = two_dgx1();
        assert_eq!(
            route(&t, "n0.gpu0", "n1.gpu5"),
            [
                "n0.gpu0",
                "n0.pcie_sw0",
                "n0.nic0",
                "ib_switch",
                "n1.nic2",
                "n1.pcie_sw2",
                "n1.gpu5"
            ]
        );
        assert_eq!(
            route(&t, "n1.gpu7", "n0.gpu6"),
            [
                "n1.gpu7",
                "n1.pcie_sw3",
                "n1.nic3",
                "ib_switch",
                "n0.nic3",
                "n0.pcie_sw3",
                "n0.gpu6"
            ]
        );
    }

    #[test]
    fn second_hybrid_cube_mesh_node_keeps_the_nvlink_pairs_and_cpu_paths() {
        let t = two_dgx1();
        for n in 0..2 {
            let nv =
                |a: u32, b: u32| link_bps(&t, &format!("n{n}.gpu{a}"), &format!("n{n}.gpu{b}"));
            assert_eq!(nv(0, 2), Some(400e9));
            assert_eq!(nv(0, 1), Some(200e9));
            assert_eq!(nv(0, 5), None);
            assert_eq!(hops(&t, &format!("n{n}.gpu6"), &format!("n{n}.gpu7")), 1);
        }
        assert_eq!(
            route(&t, "n1.gpu0", "n1.gpu5"),
            [
                "n1.gpu0",
                "n1.pcie_sw0",
                "n1.cpu0",
                "n1.cpu1",
                "n1.pcie_sw2",
                "n1.gpu5"
            ],
            "the CPU path (5 hops) stays shorter than a detour over the IB switch (6)"
        );
        assert_eq!(link_bps(&t, "n0.gpu0", "n1.gpu0"), None);
    }

    #[test]
    fn one_hybrid_cube_mesh_node_without_nic_link_is_the_single_server() {
        let t = dgx1();
        assert_eq!(count(&t, DeviceKind::Switch), 0);
        let names: Vec<&str> = t.devices().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(&names[..3], ["n0.gpu0", "n0.gpu1", "n0.gpu2"]);
        assert_eq!(names.len(), 8 + 4 + 2 + 4);
        assert!(names.iter().all(|n| n.starts_with("n0.")));
    }

    #[test]
    fn several_hybrid_cube_mesh_nodes_need_a_nic_link_and_four_nics() {
        let e = dgx1_spec(2, None).build("x").unwrap_err();
        assert_eq!(e.field, "generator.nic_link");
        let e = HybridCubeMesh {
            nics: 0,
            ..dgx1_spec(2, Some(params("100Gbps", LinkClass::Ib)))
        }
        .build("x")
        .unwrap_err();
        assert_eq!(e.field, "generator.nics");
        let e = dgx1_spec(0, None).build("x").unwrap_err();
        assert_eq!(e.field, "generator.nodes");
    }

    #[test]
    fn pcie_box_sends_gpu_to_gpu_traffic_through_the_host() {
        let t = PcieBox {
            gpus: 2,
            pcie: params("15.75GB/s", LinkClass::Pcie),
            switch_uplink: None,
        }
        .build("box")
        .unwrap();
        assert_eq!(t.devices().len(), 3);
        assert_eq!(t.duplex_link_count(), 2);
        assert_eq!(
            route(&t, "n0.gpu0", "n0.gpu1"),
            ["n0.gpu0", "n0.host", "n0.gpu1"]
        );
    }

    #[test]
    fn pcie_box_behind_one_switch_stages_through_the_host_across_its_uplink_twice() {
        let t = PcieBox {
            gpus: 2,
            pcie: params("15.75GB/s", LinkClass::Pcie),
            switch_uplink: Some(params("15.75GB/s", LinkClass::Pcie)),
        }
        .build("box")
        .unwrap();
        assert_eq!(t.devices().len(), 4);
        assert_eq!(t.duplex_link_count(), 3);
        // The switch would carry gpu0 -> gpu1 in two hops; without P2P the data goes up to
        // host memory and back down, one direction of the uplink each way.
        assert_eq!(
            route(&t, "n0.gpu0", "n0.gpu1"),
            ["n0.gpu0", "n0.pcie_sw", "n0.host", "n0.pcie_sw", "n0.gpu1"]
        );
        assert_eq!(
            route(&t, "n0.gpu1", "n0.host"),
            ["n0.gpu1", "n0.pcie_sw", "n0.host"]
        );
        let (gpu0, gpu1, host) = (
            t.find("n0.gpu0").unwrap(),
            t.find("n0.gpu1").unwrap(),
            t.find("n0.host").unwrap(),
        );
        assert_eq!(t.staged_via(gpu0, gpu1), Some(host));
        assert_eq!(
            t.staged_via(gpu0, host),
            None,
            "the host itself is reached directly"
        );
    }

    #[test]
    fn torus_4x4_has_32_links_and_wraps_around() {
        let t = Torus {
            dims: vec![4, 4],
            link: eth("100GB/s"),
        }
        .build("t")
        .unwrap();
        assert_eq!(t.gpus().len(), 16);
        assert_eq!(t.duplex_link_count(), 32);
        assert!(t.devices().iter().all(|d| d.forwards));
        assert_eq!(hops(&t, "gpu0-0", "gpu3-0"), 1, "wraparound in x");
        assert_eq!(hops(&t, "gpu0-0", "gpu0-3"), 1, "wraparound in y");
        assert_eq!(hops(&t, "gpu0-0", "gpu2-2"), 4, "through other GPUs");
        assert_eq!(t.device(t.gpus()[5]).name, "gpu1-1");
    }

    #[test]
    fn torus_3d_and_size_two_dimensions() {
        let t = Torus {
            dims: vec![2, 3, 4],
            link: eth("100GB/s"),
        }
        .build("t")
        .unwrap();
        assert_eq!(t.gpus().len(), 24);
        // x (size 2): 12 pairs once; y (size 3): 24; z (size 4): 24.
        assert_eq!(t.duplex_link_count(), 12 + 24 + 24);
        assert_eq!(t.device(t.gpus()[23]).name, "gpu1-2-3");
        let e = Torus {
            dims: vec![4],
            link: eth("1GB/s"),
        }
        .build("t")
        .unwrap_err();
        assert_eq!(e.field, "generator.dims");
        let e = Torus {
            dims: vec![4, 1],
            link: eth("1GB/s"),
        }
        .build("t")
        .unwrap_err();
        assert_eq!(e.field, "generator.dims[1]");
    }

    #[test]
    fn generator_tables_deserialize_by_kind_and_refuse_unknown_fields() {
        let table: toml::Table = toml::from_str(
            r#"
            kind = "fat_tree"
            k = 4
            hosts = 12
            [link]
            bandwidth = "100Gbps"
            latency = "500ns"
            class = "ethernet"
            "#,
        )
        .unwrap();
        let g = GeneratorSpec::deserialize(toml::Value::Table(table)).unwrap();
        assert_eq!(g.build("ft").unwrap().gpus().len(), 12);

        let typo: toml::Table = toml::from_str(
            "kind = \"star\"\nnn = 3\n[link]\nbandwidth = \"1Gbps\"\nclass = \"ib\"",
        )
        .unwrap();
        let e = GeneratorSpec::deserialize(toml::Value::Table(typo)).unwrap_err();
        assert!(e.to_string().contains("nn"), "{e}");
    }

    /// Every file in `topologies/` with a `[generator]` table has a name and builds, and the
    /// real-system files have the GPU counts they claim.
    #[test]
    fn topology_files_with_generators_build() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        let expected_gpus = [
            ("dgx1_v100.toml", 8),
            ("dgx1_v100_x2.toml", 16),
            ("dgx_a100.toml", 8),
            ("hgx_h100.toml", 8),
            ("h100_rail_cluster.toml", 256),
            ("pcie_box_2gpu.toml", 2),
            ("ring10_10GBps.toml", 10),
            ("fat_tree_k8.toml", 128),
            ("fat_tree_16k.toml", 16_384),
            ("leaf_spine_2to1.toml", 64),
            ("torus_4x4.toml", 16),
            ("star8_100g.toml", 8),
        ];
        let mut built = 0;
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let table: toml::Table =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = table["name"].as_str().expect("name is a string");
            let Some(generator) = table.get("generator") else {
                continue;
            };
            let spec = GeneratorSpec::deserialize(generator.clone())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let t = spec
                .build(name)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let file = path.file_name().unwrap().to_str().unwrap();
            if let Some(&(_, gpus)) = expected_gpus.iter().find(|(f, _)| *f == file) {
                assert_eq!(t.gpus().len(), gpus, "{file}");
                built += 1;
            } else {
                assert!(!t.gpus().is_empty(), "{file}");
            }
        }
        assert_eq!(
            built,
            expected_gpus.len(),
            "files missing from {}",
            dir.display()
        );
    }
}
