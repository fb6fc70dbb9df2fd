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

mod clos;
mod dgx1;
mod rail;
mod small;
#[cfg(test)]
mod tests;
mod torus;

pub use clos::{FatTree, LeafSpine};
pub use dgx1::{HybridCubeMesh, PcieBox, DGX1_V100_NVLINK_PAIRS};
pub use rail::{NvswitchNode, RailOptimized};
pub use small::{ring, Star};
pub use torus::Torus;
