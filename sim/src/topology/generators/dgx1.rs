//! The DGX-1 (V100) `hybrid_cube_mesh` and the `pcie_box` of GPUs without peer-to-peer.

use super::*;

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
///
/// `p2p = true` is a box whose GPUs do reach each other directly (datacenter PCIe cards, P2P
/// enabled): transfers turn at the switch (or the host's root complex) instead of being staged
/// in host memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieBox {
    pub gpus: u32,
    pub pcie: LinkParams,
    #[serde(default)]
    pub switch_uplink: Option<LinkParams>,
    #[serde(default)]
    pub p2p: bool,
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
            if !self.p2p {
                b.set_staged_via(g, host);
            }
        }
        b.build()
    }
}
