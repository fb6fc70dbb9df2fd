//! The network model as a run's collective generators and libraries see it ([`NetFabric`]):
//! path bottlenecks from the model's own routes, nodes, NICs and NVSwitches from the topology.

use std::cell::RefCell;

use super::run::Prepared;
use crate::collective::Fabric;
use crate::library::{self, PathFacts};
use crate::net::NetworkModel;
use crate::topology::reduction::ReductionTree;
use crate::topology::routing::Router;
use crate::topology::{DeviceId, DeviceKind, Topology};

/// The network model as the collective generators see it: path bottlenecks from the model's
/// routes, nodes from the topology (or from `placement.group_size`).
pub(crate) struct NetFabric<'a> {
    model: RefCell<&'a mut dyn NetworkModel>,
    topo: &'a Topology,
    endpoints: &'a [DeviceId],
    group_size: Option<u32>,
    /// NICs per node, counted once on first use (a per-group count over every device made
    /// planning a 16,384-GPU step quadratic).
    nics_per_node: std::cell::OnceCell<std::collections::HashMap<u32, u32>>,
    /// Whether any switch reduces in the network, looked up once (every communicator asks).
    reducing_switches: std::cell::OnceCell<bool>,
}

impl<'a> NetFabric<'a> {
    pub(crate) fn new(model: &'a mut dyn NetworkModel, prep: &'a Prepared) -> Self {
        NetFabric {
            model: RefCell::new(model),
            topo: &prep.topology,
            endpoints: &prep.ranks,
            group_size: prep.group_size,
            nics_per_node: std::cell::OnceCell::new(),
            reducing_switches: std::cell::OnceCell::new(),
        }
    }
}

impl library::SystemView for NetFabric<'_> {
    fn path(&self, src: u32, dst: u32) -> Option<PathFacts> {
        let (a, b) = (self.endpoints[src as usize], self.endpoints[dst as usize]);
        self.model
            .borrow_mut()
            .path_bottleneck(a, b)
            .ok()
            .map(|(bps, class)| PathFacts {
                class,
                bits_per_s: bps,
            })
    }
    fn nvswitch_of(&self, rank: u32) -> Option<DeviceId> {
        let d = self.endpoints[rank as usize];
        self.topo
            .out_links(d)
            .iter()
            .map(|&l| self.topo.link(l).to)
            .find(|&t| self.topo.device(t).kind == DeviceKind::Nvswitch)
    }
    fn nics_on_node_of(&self, rank: u32) -> u32 {
        let Some(node) = self.topo.device(self.endpoints[rank as usize]).node else {
            return 0;
        };
        let counts = self.nics_per_node.get_or_init(|| {
            let mut counts = std::collections::HashMap::new();
            for d in self.topo.devices() {
                if let (DeviceKind::Nic, Some(n)) = (d.kind, d.node) {
                    *counts.entry(n).or_insert(0) += 1;
                }
            }
            counts
        });
        counts.get(&node).copied().unwrap_or(0)
    }
    fn gpu(&self) -> Option<String> {
        self.topo.gpu.clone()
    }
    fn has_in_network_reduction(&self) -> bool {
        *self
            .reducing_switches
            .get_or_init(|| self.topo.devices().iter().any(|d| d.in_network_reduction))
    }
    fn direct_nvlink_bps(&self, src: u32, dst: u32) -> f64 {
        let (a, b) = (self.endpoints[src as usize], self.endpoints[dst as usize]);
        self.topo
            .direct_bps(a, b, crate::topology::LinkClass::Nvlink)
    }
    fn reduction_tree(&self, ranks: &[u32]) -> Result<ReductionTree, String> {
        let members: Vec<DeviceId> = ranks.iter().map(|&r| self.endpoints[r as usize]).collect();
        // Routes as the network model's own (same topology, ECMP salt of no consequence: a
        // member's first switch is the one its NIC is cabled to).
        let mut router = Router::new(self.topo, 0);
        crate::topology::reduction::tree(self.topo, &mut router, &members)
    }
}

impl Fabric for NetFabric<'_> {
    fn bottleneck_bps(&self, src: u32, dst: u32) -> f64 {
        let (a, b) = (self.endpoints[src as usize], self.endpoints[dst as usize]);
        self.model
            .borrow_mut()
            .path_bottleneck(a, b)
            .map(|(bps, _)| bps)
            .unwrap_or(0.0)
    }
    fn node_of(&self, rank: u32) -> u32 {
        match self.group_size {
            Some(g) => rank / g,
            None => self
                .topo
                .device(self.endpoints[rank as usize])
                .node
                .unwrap_or(rank),
        }
    }
}
