//! The 2D/3D `torus` of GPUs that forward.

use super::*;

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
