//! The machine being simulated: devices (GPUs, NICs, switches, hosts) and the full-duplex links
//! between them, held in a petgraph graph, plus how paths are chosen through it.
//!
//! A full-duplex link is two directed [`Link`]s with ids `2i` and `2i + 1`, each with its own
//! bandwidth, latency and output buffer. Device and link ids are dense integers so network
//! models can keep flat tables indexed by them.
//!
//! - [`file`](mod@file): topology TOML files (explicit device/link lists or a generator) → [`Topology`]
//! - [`generators`]: ring, star, leaf-spine, fat-tree, rail-optimized, NVSwitch node, ...
//! - [`routing`]: deterministic shortest paths with ECMP, cached per (source, destination)
//! - [`reduction`]: in-network reduction (SHARP) trees over the switches that reduce
//! - [`summary`]: what `dtsim topo show` prints (counts, bisection bandwidth, diameter) and DOT

pub mod file;
pub mod generators;
pub mod gpu_models;
pub mod import;
pub mod reduction;
pub mod routing;
pub mod summary;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::engine::SimTime;

/// Index of a device in [`Topology::devices`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId(pub u32);

/// Index of a directed link in [`Topology::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LinkId(pub u32);

impl DeviceId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl LinkId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// The other direction of the same full-duplex link.
    pub fn reverse(self) -> LinkId {
        LinkId(self.0 ^ 1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Gpu,
    Nic,
    Nvswitch,
    PcieSwitch,
    /// A CPU host: root complex / host bridge; can also hold a parameter server.
    Host,
    /// A network switch (leaf, spine, core; InfiniBand or Ethernet).
    Switch,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 6] = [
        DeviceKind::Gpu,
        DeviceKind::Nic,
        DeviceKind::Nvswitch,
        DeviceKind::PcieSwitch,
        DeviceKind::Host,
        DeviceKind::Switch,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Nic => "nic",
            DeviceKind::Nvswitch => "nvswitch",
            DeviceKind::PcieSwitch => "pcie_switch",
            DeviceKind::Host => "host",
            DeviceKind::Switch => "switch",
        }
    }
    /// Whether traffic between two other devices may pass through a device of this kind by
    /// default. GPUs do not forward (peer traffic between GPUs without a direct link goes
    /// through PCIe and the host, as CUDA P2P does); a topology may override it per device
    /// (e.g. a torus of accelerators that forward).
    pub fn forwards_by_default(self) -> bool {
        !matches!(self, DeviceKind::Gpu)
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    Nvlink,
    Pcie,
    /// CPU socket interconnect (QPI/UPI/Infinity Fabric).
    Smp,
    Ib,
    Ethernet,
    Other,
}

impl LinkClass {
    pub const ALL: [LinkClass; 6] = [
        LinkClass::Nvlink,
        LinkClass::Pcie,
        LinkClass::Smp,
        LinkClass::Ib,
        LinkClass::Ethernet,
        LinkClass::Other,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::Nvlink => "nvlink",
            LinkClass::Pcie => "pcie",
            LinkClass::Smp => "smp",
            LinkClass::Ib => "ib",
            LinkClass::Ethernet => "ethernet",
            LinkClass::Other => "other",
        }
    }
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    pub name: String,
    pub kind: DeviceKind,
    /// Which server (box, node) the device belongs to, for hierarchical collectives and
    /// placement; `None` for network switches.
    pub node: Option<u32>,
    /// Whether traffic between other devices may pass through this one.
    pub forwards: bool,
    /// Where this GPU's traffic to a GPU with the same staging device is staged, when the
    /// two cannot reach each other's memory (no CUDA peer-to-peer): the host whose memory
    /// holds the bounce buffers. Such a transfer is routed up to that device and back down
    /// (NCCL's SHM transport), so it crosses a shared PCIe switch uplink twice, once each
    /// way; see [`Topology::staged_via`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staged_via: Option<DeviceId>,
    /// A network switch that reduces the streams passing through it (InfiniBand SHARP, as
    /// NCCL's CollNet uses it): see [`reduction`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_network_reduction: bool,
}

/// One direction of a full-duplex link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub from: DeviceId,
    pub to: DeviceId,
    pub bandwidth_bps: f64,
    pub latency: SimTime,
    /// Output buffer at the sending side of this direction.
    pub buffer_bytes: u64,
    pub class: LinkClass,
}

/// Properties of one full-duplex link (both directions alike).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    pub bandwidth_bps: f64,
    pub latency: SimTime,
    pub buffer_bytes: u64,
    pub class: LinkClass,
}

/// A topology problem: which file, which field, what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{field}: {expected}", file.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct TopologyError {
    pub file: Option<String>,
    pub field: String,
    pub expected: String,
}

impl TopologyError {
    pub fn new(field: impl Into<String>, expected: impl Into<String>) -> Self {
        TopologyError {
            file: None,
            field: field.into(),
            expected: expected.into(),
        }
    }
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        if self.file.is_none() {
            self.file = Some(file.into());
        }
        self
    }
}

/// Devices and directed links, with a petgraph view for graph algorithms.
#[derive(Debug, Clone)]
pub struct Topology {
    pub name: String,
    /// The GPU model the file names (`gpu = "H100-SXM5"`), if it names one.
    pub gpu: Option<String>,
    /// The library the file names for its hosts (`library = "gloo"`), if any.
    pub library: Option<String>,
    devices: Vec<Device>,
    links: Vec<Link>,
    /// Outgoing directed links per device (CSR would do; lists are small).
    out_links: Vec<Vec<LinkId>>,
    gpus: Vec<DeviceId>,
    /// Node `i` is device `i`; edge weights are directed link ids.
    graph: DiGraph<DeviceId, LinkId>,
}

impl Topology {
    pub fn builder(name: impl Into<String>) -> TopologyBuilder {
        TopologyBuilder {
            name: name.into(),
            devices: Vec::new(),
            links: Vec::new(),
        }
    }
    /// The same devices and links with every link as `f` remakes it (its rate, latency or
    /// buffer; `f` keeps its ends and class).
    pub fn map_links(&self, f: impl Fn(&Link) -> Link) -> Topology {
        let mut t = self.clone();
        for l in &mut t.links {
            let new = f(l);
            debug_assert!(new.from == l.from && new.to == l.to && new.class == l.class);
            *l = new;
        }
        t
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The device a transfer from `src` to `dst` is staged through, when both are staged via
    /// the same one (GPUs without peer-to-peer in one server): the route is then `src` to it
    /// and it to `dst`.
    pub fn staged_via(&self, src: DeviceId, dst: DeviceId) -> Option<DeviceId> {
        let via = self.device(src).staged_via?;
        (self.device(dst).staged_via == Some(via) && src != via && dst != via).then_some(via)
    }
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.devices[id.index()]
    }
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.index()]
    }
    pub fn out_links(&self, id: DeviceId) -> &[LinkId] {
        &self.out_links[id.index()]
    }
    /// Bits/s of the `class` links cabled directly from `a` to `b` (0 where none is; a route
    /// through other devices does not count).
    pub fn direct_bps(&self, a: DeviceId, b: DeviceId, class: LinkClass) -> f64 {
        self.out_links(a)
            .iter()
            .map(|&l| self.link(l))
            .filter(|l| l.to == b && l.class == class)
            .map(|l| l.bandwidth_bps)
            .sum()
    }
    /// GPUs in declaration order: rank-ordered placement puts rank i on `gpus()[i]`.
    pub fn gpus(&self) -> &[DeviceId] {
        &self.gpus
    }
    pub fn find(&self, name: &str) -> Option<DeviceId> {
        self.devices
            .iter()
            .position(|d| d.name == name)
            .map(|i| DeviceId(i as u32))
    }
    pub fn graph(&self) -> &DiGraph<DeviceId, LinkId> {
        &self.graph
    }
    pub fn node_index(id: DeviceId) -> NodeIndex {
        NodeIndex::new(id.index())
    }
    /// The slowest link of a path: its bandwidth (bits/s) and class; infinite for an empty path.
    pub fn bottleneck(&self, path: &[LinkId]) -> (f64, LinkClass) {
        let mut best = (f64::INFINITY, LinkClass::Other);
        for &l in path {
            let link = self.link(l);
            if link.bandwidth_bps < best.0 {
                best = (link.bandwidth_bps, link.class);
            }
        }
        best
    }

    /// Number of full-duplex links.
    pub fn duplex_link_count(&self) -> usize {
        self.links.len() / 2
    }
}

/// Builds a [`Topology`] device by device and link by link; `build` validates it.
#[derive(Debug, Clone)]
pub struct TopologyBuilder {
    name: String,
    devices: Vec<Device>,
    links: Vec<Link>,
}

impl TopologyBuilder {
    pub fn add_device(
        &mut self,
        name: impl Into<String>,
        kind: DeviceKind,
        node: Option<u32>,
    ) -> DeviceId {
        let id = DeviceId(self.devices.len() as u32);
        self.devices.push(Device {
            name: name.into(),
            kind,
            node,
            forwards: kind.forwards_by_default(),
            staged_via: None,
            in_network_reduction: false,
        });
        id
    }

    /// Makes traffic from `id` to every other device staged via `host` go through `host`'s
    /// memory instead of peer to peer (see [`Device::staged_via`]).
    pub fn set_staged_via(&mut self, id: DeviceId, host: DeviceId) {
        self.devices[id.index()].staged_via = Some(host);
    }

    /// Makes network switch `id` reduce the streams through it (SHARP).
    pub fn set_in_network_reduction(&mut self, id: DeviceId, on: bool) {
        self.devices[id.index()].in_network_reduction = on;
    }

    /// Allows or forbids traffic of others through `id`.
    pub fn set_forwards(&mut self, id: DeviceId, forwards: bool) {
        self.devices[id.index()].forwards = forwards;
    }

    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Adds a full-duplex link; returns the (a→b, b→a) directed link ids.
    pub fn add_link(&mut self, a: DeviceId, b: DeviceId, spec: LinkSpec) -> (LinkId, LinkId) {
        self.add_asymmetric_link(a, b, spec, spec)
    }

    /// Adds a full-duplex link whose directions differ (e.g. an asymmetric PCIe path).
    pub fn add_asymmetric_link(
        &mut self,
        a: DeviceId,
        b: DeviceId,
        a_to_b: LinkSpec,
        b_to_a: LinkSpec,
    ) -> (LinkId, LinkId) {
        let ab = LinkId(self.links.len() as u32);
        for (from, to, s) in [(a, b, a_to_b), (b, a, b_to_a)] {
            self.links.push(Link {
                from,
                to,
                bandwidth_bps: s.bandwidth_bps,
                latency: s.latency,
                buffer_bytes: s.buffer_bytes,
                class: s.class,
            });
        }
        (ab, ab.reverse())
    }

    /// Checks names, bandwidths and connectivity, and builds the graph.
    pub fn build(self) -> Result<Topology, TopologyError> {
        let TopologyBuilder {
            name,
            devices,
            links,
        } = self;
        if devices.is_empty() {
            return Err(TopologyError::new("devices", "at least one device"));
        }
        let mut names: Vec<(&str, usize)> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.as_str(), i))
            .collect();
        names.sort();
        for w in names.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(TopologyError::new(
                    format!("device[{}].name", w[1].1),
                    format!("a unique device name; {:?} is used twice", w[0].0),
                ));
            }
        }
        let n = devices.len();
        let mut out_links = vec![Vec::new(); n];
        let mut graph = DiGraph::with_capacity(n, links.len());
        for i in 0..n {
            graph.add_node(DeviceId(i as u32));
        }
        for (i, l) in links.iter().enumerate() {
            let field = format!(
                "link[{}] ({} -> {})",
                i / 2,
                devices[l.from.index()].name,
                devices[l.to.index()].name
            );
            crate::limits::bandwidth_bps(l.bandwidth_bps)
                .map_err(|e| TopologyError::new(format!("{field}.bandwidth"), e))?;
            crate::limits::latency_secs(l.latency.as_secs_f64())
                .map_err(|e| TopologyError::new(format!("{field}.latency"), e))?;
            if l.from == l.to {
                return Err(TopologyError::new(
                    field,
                    "a link between two different devices",
                ));
            }
            out_links[l.from.index()].push(LinkId(i as u32));
            graph.add_edge(
                Topology::node_index(l.from),
                Topology::node_index(l.to),
                LinkId(i as u32),
            );
        }
        let gpus: Vec<DeviceId> = devices
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == DeviceKind::Gpu)
            .map(|(i, _)| DeviceId(i as u32))
            .collect();
        // Every device must be reachable from the first one (links are full duplex, so this is
        // connectivity of the undirected graph).
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        seen[0] = true;
        while let Some(d) = stack.pop() {
            for l in &out_links[d] {
                let to = links[l.index()].to.index();
                if !seen[to] {
                    seen[to] = true;
                    stack.push(to);
                }
            }
        }
        if let Some(lost) = seen.iter().position(|s| !s) {
            return Err(TopologyError::new(
                "link",
                format!(
                    "a connected topology; device {:?} cannot be reached from {:?}",
                    devices[lost].name, devices[0].name
                ),
            ));
        }
        Ok(Topology {
            name,
            gpu: None,
            library: None,
            devices,
            links,
            out_links,
            gpus,
            graph,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LinkSpec {
        LinkSpec {
            bandwidth_bps: 100e9,
            latency: SimTime::from_ns(500),
            buffer_bytes: 1 << 20,
            class: LinkClass::Ethernet,
        }
    }

    #[test]
    fn a_duplex_link_is_two_directed_links() {
        let mut b = Topology::builder("t");
        let x = b.add_device("x", DeviceKind::Gpu, Some(0));
        let y = b.add_device("y", DeviceKind::Gpu, Some(0));
        let (xy, yx) = b.add_link(x, y, spec());
        let t = b.build().unwrap();
        assert_eq!(t.link(xy).from, x);
        assert_eq!(t.link(yx).from, y);
        assert_eq!(xy.reverse(), yx);
        assert_eq!(t.gpus(), &[x, y]);
        assert_eq!(t.graph().edge_count(), 2);
    }

    #[test]
    fn disconnected_duplicate_and_zero_bandwidth_are_refused() {
        let mut b = Topology::builder("t");
        b.add_device("x", DeviceKind::Gpu, None);
        b.add_device("y", DeviceKind::Gpu, None);
        let e = b.build().unwrap_err();
        assert!(e.expected.contains("connected"), "{e}");

        let mut b = Topology::builder("t");
        let x = b.add_device("x", DeviceKind::Gpu, None);
        let y = b.add_device("x", DeviceKind::Gpu, None);
        b.add_link(x, y, spec());
        assert!(b.build().unwrap_err().expected.contains("unique"));

        let mut b = Topology::builder("t");
        let x = b.add_device("x", DeviceKind::Gpu, None);
        let y = b.add_device("y", DeviceKind::Gpu, None);
        b.add_link(
            x,
            y,
            LinkSpec {
                bandwidth_bps: 0.0,
                ..spec()
            },
        );
        assert!(b.build().unwrap_err().field.ends_with("bandwidth"));
    }
}
