//! NVSwitch servers and the `rail_optimized` cluster of them (rail `r` of every node on
//! rail `r`'s leaves), with servers generated or copied from a node file; also the
//! single-server `nvswitch_node`.

use super::*;

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
    let spec = |l: &crate::topology::Link| LinkSpec {
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
