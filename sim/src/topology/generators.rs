//! Topology generators: parameterized families of real machines and fabrics.
//!
//! A topology file may say `[generator] kind = "..."` with the parameters of one family instead
//! of listing devices and links. Each generator builds through [`TopologyBuilder`], so its output
//! is validated like a hand-written file.

use serde::Deserialize;

use super::{DeviceKind, LinkClass, LinkSpec, Topology, TopologyError};
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
        LinkSpec {
            bandwidth_bps: self.bandwidth.bits_per_s(),
            latency: self.latency.0,
            buffer_bytes: self
                .buffer
                .map(|b| b.0)
                .unwrap_or_else(|| default_buffer_bytes(self.class)),
            class: self.class,
        }
    }
}

/// Output buffer per port when a file does not give one.
pub fn default_buffer_bytes(class: LinkClass) -> u64 {
    match class {
        LinkClass::Nvlink | LinkClass::Pcie | LinkClass::Smp => 1 << 20,
        LinkClass::Ib | LinkClass::Ethernet | LinkClass::Other => 4 << 20,
    }
}

/// One generated family with its parameters (`[generator]` in a topology file).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GeneratorSpec {
    /// `n` GPUs (one per node) in a bidirectional ring: gpu i ↔ gpu (i+1) mod n.
    Ring { n: u32, link: LinkParams },
}

impl GeneratorSpec {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        match self {
            GeneratorSpec::Ring { n, link } => ring(name, *n, link),
        }
    }
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

/// A ring of `n` single-GPU nodes.
pub fn ring(name: &str, n: u32, link: &LinkParams) -> Result<Topology, TopologyError> {
    at_least("n", n, 2)?;
    let mut b = Topology::builder(name);
    let gpus: Vec<_> = (0..n)
        .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
        .collect();
    let pairs = if n == 2 { 1 } else { n };
    for i in 0..pairs {
        b.add_link(gpus[i as usize], gpus[((i + 1) % n) as usize], link.spec());
    }
    b.build()
}
