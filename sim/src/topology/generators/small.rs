//! The one-switch and no-switch families: `ring` and `star`.

use super::*;

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
