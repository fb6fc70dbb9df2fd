//! What `dtsim topo show` prints: devices by kind, links by class, bisection bandwidth, GPU
//! diameter and per-pair bottlenecks; and a Graphviz rendering ([`to_dot`]).
//!
//! Definitions (also printed next to the numbers):
//! - **bisection bandwidth**: the maximum flow, in one direction, from the first half of the
//!   GPUs (in [`Topology::gpus`] order, i.e. rank order; the smaller half when the count is
//!   odd) to the second half, through the links' per-direction capacities, where a device that
//!   does not forward ([`super::Device::forwards`] is false) carries no transit traffic. It is a
//!   max flow (Dinic's algorithm), not a minimum over all balanced cuts: it answers "how much
//!   can ranks 0..n/2 send to ranks n/2..n at once", which is what data-parallel halves ask.
//! - **diameter**: the largest routed hop count between two GPUs. Hop counts follow the rule
//!   of [`super::routing::Router`] (shortest paths whose interior devices forward; GPUs without
//!   P2P up to their staging host and down from it), computed by one breadth-first search per
//!   source GPU. Above [`EXACT_DIAMETER_MAX_GPUS`] GPUs only
//!   [`DIAMETER_SAMPLE_SOURCES`] evenly spaced source GPUs are searched (to all destinations),
//!   and the output says "sampled".
//! - **GPU pair bottleneck**: for each GPU pair examined for the diameter, the largest
//!   bottleneck (narrowest link, per direction) of any shortest routed path between them; the
//!   summary gives the range over pairs.

use std::collections::BTreeSet;
use std::fmt;

use super::{DeviceId, DeviceKind, LinkClass, Topology};
use crate::units::{fmt_bits_per_s, fmt_gbytes_per_s};

/// Up to this many GPUs the diameter is exact (one search per GPU).
pub const EXACT_DIAMETER_MAX_GPUS: usize = 2048;
/// Source GPUs searched when the diameter is sampled.
pub const DIAMETER_SAMPLE_SOURCES: usize = 256;

/// The links of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSummary {
    pub class: LinkClass,
    /// Full-duplex links of this class.
    pub duplex_links: usize,
    /// Narrowest direction of any link of this class.
    pub min_bandwidth_bps: f64,
    /// Widest direction of any link of this class.
    pub max_bandwidth_bps: f64,
    /// Sum over all directed links of this class (both directions counted).
    pub total_bps: f64,
}

/// Counts and figures of merit of a topology; see the module documentation for definitions.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologySummary {
    pub name: String,
    pub devices: usize,
    /// Kinds present, in [`DeviceKind::ALL`] order.
    pub devices_by_kind: Vec<(DeviceKind, usize)>,
    /// Network switches that reduce in the network (SHARP).
    pub reducing_switches: usize,
    /// Classes present, in [`LinkClass::ALL`] order.
    pub links_by_class: Vec<ClassSummary>,
    pub duplex_links: usize,
    pub gpus: usize,
    /// Distinct server indices among all devices.
    pub nodes: usize,
    /// Max flow from the first half of the GPUs to the second half, bits per second.
    pub bisection_bps: f64,
    /// Largest routed hop count between two GPUs (over reachable pairs).
    pub diameter_hops: u32,
    /// Whether the diameter and pair figures come from a sample of source GPUs.
    pub diameter_sampled: bool,
    /// Ordered GPU pairs (source ≠ destination) examined for the diameter.
    pub gpu_pairs_examined: u64,
    /// Examined pairs with no routed path (e.g. GPUs that do not forward and share no switch).
    pub unreachable_gpu_pairs: u64,
    /// (min, max) over examined reachable pairs of the pair's bottleneck bandwidth; `None` when
    /// no pair is reachable.
    pub gpu_pair_bottleneck_bps: Option<(f64, f64)>,
}

/// Computes the summary: linear in the topology, plus one max flow, plus one breadth-first
/// search per (sampled) source GPU.
pub fn summarize(topo: &Topology) -> TopologySummary {
    let devices_by_kind = DeviceKind::ALL
        .iter()
        .map(|&k| (k, topo.devices().iter().filter(|d| d.kind == k).count()))
        .filter(|&(_, n)| n > 0)
        .collect();
    let links_by_class = LinkClass::ALL
        .iter()
        .filter_map(|&class| class_summary(topo, class))
        .collect();
    let nodes: BTreeSet<u32> = topo.devices().iter().filter_map(|d| d.node).collect();
    let pairs = gpu_pairs(topo);
    TopologySummary {
        name: topo.name.clone(),
        devices: topo.devices().len(),
        devices_by_kind,
        reducing_switches: topo
            .devices()
            .iter()
            .filter(|d| d.in_network_reduction)
            .count(),
        links_by_class,
        duplex_links: topo.duplex_link_count(),
        gpus: topo.gpus().len(),
        nodes: nodes.len(),
        bisection_bps: bisection_bps(topo),
        diameter_hops: pairs.diameter_hops,
        diameter_sampled: pairs.sampled,
        gpu_pairs_examined: pairs.examined,
        unreachable_gpu_pairs: pairs.unreachable,
        gpu_pair_bottleneck_bps: pairs.bottleneck_bps,
    }
}

fn class_summary(topo: &Topology, class: LinkClass) -> Option<ClassSummary> {
    let mut directed = topo.links().iter().filter(|l| l.class == class).peekable();
    directed.peek()?;
    let mut s = ClassSummary {
        class,
        duplex_links: 0,
        min_bandwidth_bps: f64::INFINITY,
        max_bandwidth_bps: 0.0,
        total_bps: 0.0,
    };
    let mut count = 0usize;
    for l in directed {
        count += 1;
        s.min_bandwidth_bps = s.min_bandwidth_bps.min(l.bandwidth_bps);
        s.max_bandwidth_bps = s.max_bandwidth_bps.max(l.bandwidth_bps);
        s.total_bps += l.bandwidth_bps;
    }
    // Both directions of a duplex link share its class.
    s.duplex_links = count / 2;
    Some(s)
}

/// Max flow (bits per second) from the first half of the GPUs to the second half; see the
/// module documentation.
pub fn bisection_bps(topo: &Topology) -> f64 {
    let gpus = topo.gpus();
    if gpus.len() < 2 {
        return 0.0;
    }
    let (senders, receivers) = gpus.split_at(gpus.len() / 2);
    max_flow_bps(topo, senders, receivers)
}

/// Max flow (bits per second) from `sources` to `sinks` over the topology's directed links,
/// with no transit through devices that do not forward.
pub fn max_flow_bps(topo: &Topology, sources: &[DeviceId], sinks: &[DeviceId]) -> f64 {
    let n = topo.devices().len();
    // A device that forwards is one flow node; one that does not is split into an entry
    // node (where its incoming links end) and an exit node (where its outgoing links start)
    // with nothing between them, so no flow passes through it.
    let mut entry = vec![0usize; n];
    let mut exit = vec![0usize; n];
    let mut next = 0usize;
    for (i, d) in topo.devices().iter().enumerate() {
        entry[i] = next;
        exit[i] = if d.forwards { next } else { next + 1 };
        next = exit[i] + 1;
    }
    let (source, sink) = (next, next + 1);
    let mut net = Dinic::new(next + 2);
    for l in topo.links() {
        net.add_edge(
            exit[l.from.index()],
            entry[l.to.index()],
            l.bandwidth_bps.round() as u64,
        );
    }
    for s in sources {
        net.add_edge(source, exit[s.index()], u64::MAX);
    }
    for t in sinks {
        net.add_edge(entry[t.index()], sink, u64::MAX);
    }
    net.max_flow(source, sink) as f64
}

/// Dinic's max-flow algorithm on integer capacities. Edge `e` and its residual `e ^ 1` are
/// stored side by side.
struct Dinic {
    adj: Vec<Vec<u32>>,
    to: Vec<u32>,
    cap: Vec<u64>,
    level: Vec<u32>,
    /// Current arc: the next edge of each node's list still worth trying in this phase.
    arc: Vec<usize>,
}

const NO_LEVEL: u32 = u32::MAX;

impl Dinic {
    fn new(nodes: usize) -> Self {
        Dinic {
            adj: vec![Vec::new(); nodes],
            to: Vec::new(),
            cap: Vec::new(),
            level: vec![NO_LEVEL; nodes],
            arc: vec![0; nodes],
        }
    }

    fn add_edge(&mut self, from: usize, to: usize, cap: u64) {
        let e = self.to.len() as u32;
        self.adj[from].push(e);
        self.to.push(to as u32);
        self.cap.push(cap);
        self.adj[to].push(e + 1);
        self.to.push(from as u32);
        self.cap.push(0);
    }

    /// Levels from `s` over edges with residual capacity; whether `t` is reachable.
    fn levels(&mut self, s: usize, t: usize) -> bool {
        self.level.fill(NO_LEVEL);
        self.level[s] = 0;
        let mut queue = std::collections::VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &e in &self.adj[v] {
                let w = self.to[e as usize] as usize;
                if self.cap[e as usize] > 0 && self.level[w] == NO_LEVEL {
                    self.level[w] = self.level[v] + 1;
                    queue.push_back(w);
                }
            }
        }
        self.level[t] != NO_LEVEL
    }

    fn max_flow(&mut self, s: usize, t: usize) -> u64 {
        let mut total = 0u64;
        let mut path: Vec<u32> = Vec::new();
        while self.levels(s, t) {
            self.arc.fill(0);
            path.clear();
            let mut v = s;
            loop {
                if v == t {
                    // Push the bottleneck along the path, then resume from the tail of the
                    // first edge it saturated.
                    let push = path
                        .iter()
                        .map(|&e| self.cap[e as usize])
                        .min()
                        .unwrap_or(0);
                    let mut first_saturated = path.len();
                    for (i, &e) in path.iter().enumerate() {
                        self.cap[e as usize] -= push;
                        self.cap[(e ^ 1) as usize] =
                            self.cap[(e ^ 1) as usize].saturating_add(push);
                        if self.cap[e as usize] == 0 && first_saturated == path.len() {
                            first_saturated = i;
                        }
                    }
                    total = total.saturating_add(push);
                    path.truncate(first_saturated);
                    v = path
                        .last()
                        .map(|&e| self.to[e as usize] as usize)
                        .unwrap_or(s);
                    continue;
                }
                // Advance along the current arc, skipping edges that do not lead one level on.
                let mut advanced = false;
                while self.arc[v] < self.adj[v].len() {
                    let e = self.adj[v][self.arc[v]] as usize;
                    let w = self.to[e] as usize;
                    if self.cap[e] > 0 && self.level[w] == self.level[v] + 1 {
                        path.push(e as u32);
                        v = w;
                        advanced = true;
                        break;
                    }
                    self.arc[v] += 1;
                }
                if advanced {
                    continue;
                }
                // Dead end: retreat one edge and try the tail's next arc.
                self.level[v] = NO_LEVEL;
                match path.pop() {
                    None => break,
                    Some(e) => {
                        v = self.to[(e ^ 1) as usize] as usize;
                        self.arc[v] += 1;
                    }
                }
            }
        }
        total
    }
}

/// Hop counts and bottlenecks over GPU pairs.
struct PairStats {
    diameter_hops: u32,
    sampled: bool,
    examined: u64,
    unreachable: u64,
    bottleneck_bps: Option<(f64, f64)>,
}

fn gpu_pairs(topo: &Topology) -> PairStats {
    let gpus = topo.gpus();
    let sampled = gpus.len() > EXACT_DIAMETER_MAX_GPUS;
    let sources: Vec<DeviceId> = if sampled {
        (0..DIAMETER_SAMPLE_SOURCES)
            .map(|i| gpus[i * gpus.len() / DIAMETER_SAMPLE_SOURCES])
            .collect()
    } else {
        gpus.to_vec()
    };
    let mut stats = PairStats {
        diameter_hops: 0,
        sampled,
        examined: 0,
        unreachable: 0,
        bottleneck_bps: None,
    };
    let mut search = RoutedSearch::new(topo.devices().len());
    // GPUs without P2P are routed up to their staging host and down from it: its own search.
    let mut from_via: Option<(DeviceId, RoutedSearch)> = None;
    for &src in &sources {
        search.run(topo, src);
        for &dst in gpus {
            if dst == src {
                continue;
            }
            stats.examined += 1;
            let (hops, w) = match topo.staged_via(src, dst) {
                None => (search.hops[dst.index()], search.width_bps[dst.index()]),
                Some(via) => {
                    let down = match &mut from_via {
                        Some((v, down)) if *v == via => down,
                        slot => {
                            let mut down = RoutedSearch::new(topo.devices().len());
                            down.run(topo, via);
                            &mut slot.insert((via, down)).1
                        }
                    };
                    let (up_hops, down_hops) = (search.hops[via.index()], down.hops[dst.index()]);
                    if up_hops == UNREACHED || down_hops == UNREACHED {
                        (UNREACHED, 0.0)
                    } else {
                        (
                            up_hops + down_hops,
                            search.width_bps[via.index()].min(down.width_bps[dst.index()]),
                        )
                    }
                }
            };
            if hops == UNREACHED {
                stats.unreachable += 1;
                continue;
            }
            stats.diameter_hops = stats.diameter_hops.max(hops);
            stats.bottleneck_bps = Some(match stats.bottleneck_bps {
                None => (w, w),
                Some((lo, hi)) => (lo.min(w), hi.max(w)),
            });
        }
    }
    stats
}

const UNREACHED: u32 = u32::MAX;

/// Breadth-first search from one source along routed paths (interior devices forward),
/// recording hop counts and, for each device, the widest bottleneck of any shortest path.
struct RoutedSearch {
    hops: Vec<u32>,
    width_bps: Vec<f64>,
    queue: std::collections::VecDeque<DeviceId>,
}

impl RoutedSearch {
    fn new(devices: usize) -> Self {
        RoutedSearch {
            hops: vec![UNREACHED; devices],
            width_bps: vec![0.0; devices],
            queue: std::collections::VecDeque::new(),
        }
    }

    fn run(&mut self, topo: &Topology, src: DeviceId) {
        self.hops.fill(UNREACHED);
        self.width_bps.fill(0.0);
        self.hops[src.index()] = 0;
        self.width_bps[src.index()] = f64::INFINITY;
        self.queue.clear();
        self.queue.push_back(src);
        // Every predecessor of a device at distance d + 1 is dequeued before it, so its width
        // is final when it is dequeued.
        while let Some(v) = self.queue.pop_front() {
            if v != src && !topo.device(v).forwards {
                continue;
            }
            let (d, width) = (self.hops[v.index()], self.width_bps[v.index()]);
            for &l in topo.out_links(v) {
                let link = topo.link(l);
                let w = link.to.index();
                let through = width.min(link.bandwidth_bps);
                if self.hops[w] == UNREACHED {
                    self.hops[w] = d + 1;
                    self.width_bps[w] = through;
                    self.queue.push_back(link.to);
                } else if self.hops[w] == d + 1 {
                    self.width_bps[w] = self.width_bps[w].max(through);
                }
            }
        }
    }
}

/// Label column width of the text table.
const LABEL: usize = 12;

impl fmt::Display for TopologySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<String> = self
            .devices_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(f, "{:<LABEL$}{}", "topology", self.name)?;
        writeln!(
            f,
            "{:<LABEL$}{}  ({})",
            "devices",
            self.devices,
            kinds.join(", ")
        )?;
        if self.reducing_switches > 0 {
            writeln!(
                f,
                "{:<LABEL$}{} switches reduce in the network (SHARP: NCCL's CollNet with \
                 collective.collnet = true)",
                "in-network", self.reducing_switches
            )?;
        }
        let node_word = if self.nodes == 1 { "node" } else { "nodes" };
        writeln!(
            f,
            "{:<LABEL$}{} in {} {node_word}",
            "GPUs", self.gpus, self.nodes
        )?;
        writeln!(f, "{:<LABEL$}{} full-duplex", "links", self.duplex_links)?;
        writeln!(
            f,
            "  {:<10}{:>8}{:>16}{:>16}{:>20}",
            "class", "links", "min/direction", "max/direction", "total (both dirs)"
        )?;
        for c in &self.links_by_class {
            writeln!(
                f,
                "  {:<10}{:>8}{:>16}{:>16}{:>20}",
                c.class.as_str(),
                c.duplex_links,
                fmt_bits_per_s(c.min_bandwidth_bps),
                fmt_bits_per_s(c.max_bandwidth_bps),
                fmt_bits_per_s(c.total_bps)
            )?;
        }
        writeln!(
            f,
            "{:<LABEL$}{} = {}  (max flow, first half of GPUs -> second half)",
            "bisection",
            fmt_bits_per_s(self.bisection_bps),
            fmt_gbytes_per_s(self.bisection_bps / 8.0)
        )?;
        let how = if self.diameter_sampled {
            format!("sampled from {DIAMETER_SAMPLE_SOURCES} source GPUs")
        } else {
            "exact".to_string()
        };
        let hop_word = if self.diameter_hops == 1 {
            "hop"
        } else {
            "hops"
        };
        writeln!(
            f,
            "{:<LABEL$}{} {hop_word}  (routed, between GPUs; {how})",
            "diameter", self.diameter_hops
        )?;
        match self.gpu_pair_bottleneck_bps {
            Some((lo, hi)) => writeln!(
                f,
                "{:<LABEL$}bottleneck {} .. {}  (widest shortest path, over {} GPU pairs)",
                "GPU pairs",
                fmt_bits_per_s(lo),
                fmt_bits_per_s(hi),
                self.gpu_pairs_examined
            )?,
            None => writeln!(f, "{:<LABEL$}no GPU pair has a routed path", "GPU pairs")?,
        }
        if self.unreachable_gpu_pairs > 0 {
            writeln!(
                f,
                "{:<LABEL$}{} of {} GPU pairs have no routed path (no forwarding device joins them)",
                "warning", self.unreachable_gpu_pairs, self.gpu_pairs_examined
            )?;
        }
        Ok(())
    }
}

fn dot_shape(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Gpu => "box",
        DeviceKind::Nic => "ellipse",
        DeviceKind::Nvswitch => "hexagon",
        DeviceKind::PcieSwitch => "diamond",
        DeviceKind::Host => "house",
        DeviceKind::Switch => "octagon",
    }
}

/// A Graphviz string literal.
fn dot_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Graphviz (`dot`) text: one undirected edge per full-duplex link labelled with its class and
/// per-direction bandwidth (both directions when they differ), devices shaped by kind
/// (GPU box, NIC ellipse, NVSwitch hexagon, PCIe switch diamond, host house, switch octagon),
/// devices of one server grouped in `subgraph cluster_<node>`.
pub fn to_dot(topo: &Topology) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let node_line = |out: &mut String, indent: &str, id: usize| {
        let d = &topo.devices()[id];
        let _ = writeln!(
            out,
            "{indent}{} [shape={}, tooltip={}];",
            dot_quote(&d.name),
            dot_shape(d.kind),
            dot_quote(d.kind.as_str())
        );
    };
    let _ = writeln!(out, "graph {} {{", dot_quote(&topo.name));
    let _ = writeln!(out, "  node [fontsize=10];\n  edge [fontsize=8];");
    let nodes: BTreeSet<u32> = topo.devices().iter().filter_map(|d| d.node).collect();
    for node in nodes {
        let _ = writeln!(out, "  subgraph cluster_{node} {{");
        let _ = writeln!(out, "    label={};", dot_quote(&format!("node {node}")));
        for (i, d) in topo.devices().iter().enumerate() {
            if d.node == Some(node) {
                node_line(&mut out, "    ", i);
            }
        }
        let _ = writeln!(out, "  }}");
    }
    for (i, d) in topo.devices().iter().enumerate() {
        if d.node.is_none() {
            node_line(&mut out, "  ", i);
        }
    }
    for pair in topo.links().chunks_exact(2) {
        let (ab, ba) = (&pair[0], &pair[1]);
        let bandwidth = if ab.bandwidth_bps == ba.bandwidth_bps {
            fmt_bits_per_s(ab.bandwidth_bps)
        } else {
            format!(
                "{} / {}",
                fmt_bits_per_s(ab.bandwidth_bps),
                fmt_bits_per_s(ba.bandwidth_bps)
            )
        };
        let _ = writeln!(
            out,
            "  {} -- {} [label={}];",
            dot_quote(&topo.device(ab.from).name),
            dot_quote(&topo.device(ab.to).name),
            dot_quote(&format!("{} {bandwidth}", ab.class))
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests;
