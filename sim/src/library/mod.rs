//! Communication libraries: what NCCL, gloo and MPI actually run for a collective.
//!
//! A collective in a scenario is run *by a library*. The library decides what the real one
//! decides at run time (algorithm, protocol, number of channels, chunking) from the system it
//! runs on and the message size, then emits the same kind of [`Schedule`] the ideal templates
//! do, with a [`crate::collective::Transport`] on each transfer op for what its protocol costs
//! beyond the wire. The network model plays that schedule over the topology like any other:
//! contention, oversubscription and ECMP still decide the time. Nothing here is a closed-form
//! time; the library's own cost model is used only to *choose*, as the real library uses it.
//!
//! - `ideal`: the templates of [`crate::collective`] as written (the scenario's `algorithm`).
//! - [`nccl`]: NVIDIA NCCL 2.18–2.27: tuner, channels, protocols LL / LL128 / Simple, Ring,
//!   Tree, NVLS, NVLS-Tree, CollNet and PAT schedules (see its module doc for what is and is not
//!   modelled).
//! - [`gloo`]: gloo as torch.distributed's ProcessGroupGloo runs it (ring all-reduce in 1 MiB
//!   segments, binomial broadcast, ring all-gather, rendezvous messages in order on one
//!   connection per pair), and all-reduces written over its isend/irecv.
//! - [`mpi`]: OpenMPI 4.1's coll/tuned fixed rules and coll/base all-reduce algorithms, ob1's
//!   eager and rendezvous messages over TCP.
//!
//! Layering: this module sits between `collective` (schedules) and `scenario`/`workload`; it
//! reads calibration from [`crate::profile`] and facts about the system from a [`System`] the
//! caller builds from the topology and placement.

pub mod entry_orders;
pub mod gloo;
pub mod mpi;
pub mod nccl;

use serde::{Deserialize, Serialize};
use std::fmt;

use std::collections::BTreeMap;

use crate::collective::{Collective, Endpoint, Fabric, Schedule};
use crate::topology::reduction::ReductionTree;
use crate::topology::{DeviceId, LinkClass};

/// Which library runs the collectives of a scenario or workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Library {
    /// dtsim's templates exactly as configured (no library behaviour).
    Ideal,
    Nccl,
    Gloo,
    Mpi,
}

impl Library {
    pub const ALL: [Library; 4] = [Library::Ideal, Library::Nccl, Library::Gloo, Library::Mpi];

    pub fn as_str(self) -> &'static str {
        match self {
            Library::Ideal => "ideal",
            Library::Nccl => "nccl",
            Library::Gloo => "gloo",
            Library::Mpi => "mpi",
        }
    }

    pub fn parse(name: &str) -> Result<Library, LibraryError> {
        Library::ALL
            .into_iter()
            .find(|l| l.as_str() == name)
            .ok_or_else(|| {
                LibraryError::new(
                    "library",
                    format!("one of ideal, nccl, gloo, mpi; got {name:?}"),
                )
            })
    }

    /// The library a scenario gets when it names none: the one the topology file names for its
    /// hosts (`library = "gloo"` on the testbed's CPU hosts), else NCCL on a topology that
    /// names its GPU model (a GPU system NCCL would run on), else the ideal templates.
    pub fn default_for(topology_library: Option<Library>, system_gpu: Option<&str>) -> Library {
        match (topology_library, system_gpu) {
            (Some(l), _) => l,
            (None, Some(_)) => Library::Nccl,
            (None, None) => Library::Ideal,
        }
    }
}

impl fmt::Display for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a scenario may force, as a library's environment variables do (`NCCL_ALGO`,
/// `NCCL_PROTO`, `NCCL_MIN_NCHANNELS`, `NCCL_MAX_NCHANNELS`). `None`: the library decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LibraryOptions {
    pub algorithm: Option<String>,
    pub protocol: Option<String>,
    pub min_channels: Option<u32>,
    pub max_channels: Option<u32>,
    /// Library version, e.g. `"2.18"` for NCCL; `None`: the newest modelled.
    pub version: Option<String>,
    /// NCCL's `NCCL_COLLNET_ENABLE`: CollNet may run on switches that reduce (SHARP).
    pub collnet: bool,
    /// Explicit ring orders (NCCL_GRAPH_FILE-style): channel c follows `ring_orders[c % len]`.
    pub ring_orders: Vec<Vec<u32>>,
    /// A tuner plugin's rules (NCCL's example plugin with `NCCL_TUNER_CONFIG_FILE`).
    pub tuner_rules: Option<std::sync::Arc<nccl::plugin::TunerRules>>,
    /// The host's staging-copy rates (the profile's `network.host_copy_bandwidth` and
    /// `host_copy_out_bandwidth`): what gloo's all_gather copies around its ring costs;
    /// `None`: nothing.
    pub host_copies: Option<gloo::StagingCopies>,
    /// What one message costs the hosts' cores where they share a machine's (the profile's
    /// `network.host_cpu`), over send/recv and inside gloo's collectives: gloo charges it per
    /// message; `None`: nothing.
    pub message_cpu: Option<gloo::host_cpu::MessageCpus>,
    /// How late a woken host thread runs (the profile's `network.host_wake_up`) and the seed
    /// of its draws: gloo's receivers draw it where `message_cpu` is charged; `None`: never.
    pub wake_ups: Option<gloo::host_cpu::WakeUps>,
    /// OpenMPI: how its exchanges between partners run (`collective.exchanges`).
    pub mpi_exchanges: mpi::Exchanges,
    /// What a sender's TCP connection still holds when a send's write completes: the bytes
    /// TCP keeps queued at its egress (the profile's FIFO head, the largest over its link
    /// classes). gloo's send/recv sends complete once all but that much was delivered;
    /// `None`: once the receiver's notification arrived (the payload fits the socket).
    pub send_queue_bytes: Option<u64>,
}

impl LibraryOptions {
    /// These options with the wake-ups the profile measured, `plays` of each call drawn from
    /// `seed` (a run's call: [`gloo::host_cpu::WAKE_UP_PLAYS`]; a training step's: 1).
    pub fn with_wake_ups(self, profile: &crate::profile::Profile, seed: u64, plays: usize) -> Self {
        LibraryOptions {
            wake_ups: profile
                .network
                .host_wake_up
                .as_ref()
                .map(|w| gloo::host_cpu::WakeUps {
                    extra_secs_quantiles: w.extra_secs_quantiles.clone().into(),
                    seed,
                    plays,
                }),
            ..self
        }
    }

    /// These options with what the profile measured of the hosts: their staging-copy rates,
    /// each message's CPU and the send queue (the largest FIFO head).
    pub fn with_host_profile(self, profile: &crate::profile::Profile) -> Self {
        LibraryOptions {
            send_queue_bytes: profile
                .network
                .fifo_head_bytes
                .values()
                .map(|h| h.value.0)
                .max(),
            host_copies: gloo::StagingCopies::of(profile),
            message_cpu: profile.network.host_cpu.as_ref().map(|h| {
                let cost = |per_message: &crate::units::Duration, per_byte_ns: f64| {
                    gloo::host_cpu::MessageCpu {
                        per_message_secs: per_message.0.as_secs_f64(),
                        per_byte_secs: per_byte_ns * 1e-9,
                    }
                };
                let send_recv = cost(&h.per_message, h.per_byte_ns);
                gloo::host_cpu::MessageCpus {
                    send_recv,
                    in_collectives: h
                        .in_collectives
                        .as_ref()
                        .map_or(send_recv, |c| cost(&c.per_message, c.per_byte_ns)),
                }
            }),
            ..self
        }
    }
}

/// Where a path between two ranks is limited: its slowest link's class and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathFacts {
    pub class: LinkClass,
    pub bits_per_s: f64,
}

/// What the library's topology detection sees of the system the communicator spans.
#[derive(Debug, Clone, PartialEq)]
pub struct System {
    pub ranks: u32,
    /// Distinct nodes (servers) the ranks are on.
    pub nodes: u32,
    /// Most ranks on one node.
    pub ranks_per_node: u32,
    /// The GPU model the topology names.
    pub gpu: Option<String>,
    /// Slowest path between two ranks of one node (`None` with one rank per node).
    pub intra: Option<PathFacts>,
    /// Slowest path between ranks on different nodes (`None` on one node).
    pub inter: Option<PathFacts>,
    /// The NVSwitch every rank's GPU attaches to directly, when there is one (single node).
    pub nvswitch: Option<DeviceId>,
    /// Per node (in order of the node's first member), the NVSwitch all of that node's ranks
    /// attach to directly; empty unless every node has one (multi-node NVLS, NVLS-Tree).
    pub node_nvswitches: Vec<DeviceId>,
    /// NICs per node (0 when the nodes' GPUs reach the network some other way).
    pub nics_per_node: u32,
    /// What the network's switches can reduce for these ranks (NCCL's CollNet on SHARP).
    pub in_network: InNetworkReduction,
    /// Bits/s of NVLink cabled directly from the `i`-th member of a node to its `j`-th, when the
    /// nodes have no NVSwitch and some of a node's GPUs share NVLinks (DGX-1's hybrid cube
    /// mesh, bridged cards): what NCCL's ring search runs over. Read on the first node (nodes
    /// holding different numbers of members have none). Empty otherwise.
    pub nvlink_mesh: Vec<Vec<f64>>,
}

/// In-network reduction (SHARP) as a communicator sees it: one tree per head index, over the
/// nodes' heads of that index (the GPU next to NIC `h`: the node's `h`-th rank), as NCCL's
/// CollNet connects each channel's head to the network.
#[derive(Debug, Clone, PartialEq)]
pub enum InNetworkReduction {
    /// No switch of the topology reduces.
    Absent,
    /// Switches reduce, but the ranks are on one node: nothing to reduce across (NCCL does not
    /// set CollNet up for a one-node communicator, and runs without it).
    OneNode,
    /// Tree `h` reduces over every node's head `h`; `Child::Member(k)` is node `k`'s.
    Trees(Vec<ReductionTree>),
    /// Switches reduce, but not for these ranks: why.
    Unusable(String),
}

/// What a library's topology detection sees of the ranks (as NCCL's topology discovery
/// does): the path between two ranks, the NVSwitch a rank's GPU hangs off, the NICs of a
/// rank's node, the GPU model. Ranks are the [`Fabric`]'s.
pub trait SystemView: Fabric {
    fn path(&self, src: u32, dst: u32) -> Option<PathFacts>;
    fn nvswitch_of(&self, rank: u32) -> Option<DeviceId>;
    fn nics_on_node_of(&self, rank: u32) -> u32;
    fn gpu(&self) -> Option<String>;
    /// Whether any switch of the topology reduces in the network.
    fn has_in_network_reduction(&self) -> bool;
    /// Bits/s of NVLink cabled directly from `src`'s GPU to `dst`'s (0 without one: a route
    /// through other GPUs or a switch does not count).
    fn direct_nvlink_bps(&self, src: u32, dst: u32) -> f64;
    /// The in-network reduction tree over `ranks` (`Child::Member(i)` is `ranks[i]`), or why
    /// there is none.
    fn reduction_tree(&self, ranks: &[u32]) -> Result<ReductionTree, String>;
}

impl System {
    /// The system `members` (ranks of `view`, in communicator order) form: nodes counted by
    /// [`Fabric::node_of`]; the slowest path between neighbours in member order (the paths a
    /// ring in that order uses) inside a node and across nodes; the NVSwitch when every
    /// member's GPU hangs off the same one.
    pub fn of(view: &dyn SystemView, members: &[u32]) -> System {
        let mut per_node: BTreeMap<u32, u32> = BTreeMap::new();
        for &r in members {
            *per_node.entry(view.node_of(r)).or_insert(0) += 1;
        }
        let slowest = |v: Vec<PathFacts>| {
            v.into_iter()
                .min_by(|x, y| x.bits_per_s.total_cmp(&y.bits_per_s))
        };
        let mut intra = Vec::new();
        let mut inter = Vec::new();
        for w in members.windows(2) {
            let Some(p) = view.path(w[0], w[1]) else {
                continue;
            };
            if view.node_of(w[0]) == view.node_of(w[1]) {
                intra.push(p);
            } else {
                inter.push(p);
            }
        }
        let first = members.first().and_then(|&r| view.nvswitch_of(r));
        let nvswitch = first.filter(|&sw| members.iter().all(|&r| view.nvswitch_of(r) == Some(sw)));
        // One switch per node, shared by all of the node's ranks (and by no other node).
        let mut node_nvswitches: Vec<(u32, Option<DeviceId>)> = Vec::new();
        for &r in members {
            let (node, sw) = (view.node_of(r), view.nvswitch_of(r));
            match node_nvswitches.iter_mut().find(|(n, _)| *n == node) {
                Some((_, known)) if *known != sw => *known = None,
                Some(_) => {}
                None => node_nvswitches.push((node, sw)),
            }
        }
        let mut node_nvswitches: Vec<DeviceId> = node_nvswitches
            .into_iter()
            .map_while(|(_, sw)| sw)
            .collect();
        let mut distinct = node_nvswitches.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if node_nvswitches.len() != per_node.len() || distinct.len() != node_nvswitches.len() {
            node_nvswitches.clear();
        }
        let mesh = nvlink_mesh(
            view,
            members,
            &per_node,
            nvswitch.is_some() || !node_nvswitches.is_empty(),
        );
        System {
            ranks: members.len() as u32,
            nodes: per_node.len() as u32,
            ranks_per_node: per_node.values().copied().max().unwrap_or(1),
            gpu: view.gpu(),
            intra: slowest(intra),
            inter: slowest(inter),
            nvswitch,
            node_nvswitches,
            nics_per_node: members.first().map_or(0, |&r| view.nics_on_node_of(r)),
            in_network: InNetworkReduction::Absent,
            nvlink_mesh: mesh,
        }
        .with_reduction_trees(view, members)
    }

    /// The in-network reduction trees of [`InNetworkReduction`], when the topology has
    /// switches that reduce.
    fn with_reduction_trees(mut self, view: &dyn SystemView, members: &[u32]) -> System {
        if !view.has_in_network_reduction() {
            return self;
        }
        let nodes = members_by_node(members, view);
        self.in_network = match nodes {
            _ if self.nodes < 2 => InNetworkReduction::OneNode,
            None => {
                InNetworkReduction::Unusable("nodes hold different numbers of the ranks".into())
            }
            Some(nodes) => {
                // One head per NIC; a node without NIC devices (a GPU cabled to its switch)
                // has one.
                let heads = self.nics_per_node.min(self.ranks_per_node).max(1) as usize;
                let trees: Result<Vec<ReductionTree>, String> = (0..heads)
                    .map(|h| {
                        let head_ranks: Vec<u32> = nodes.iter().map(|v| v[h]).collect();
                        view.reduction_tree(&head_ranks)
                    })
                    .collect();
                match trees {
                    Ok(t) => InNetworkReduction::Trees(t),
                    Err(why) => InNetworkReduction::Unusable(why),
                }
            }
        };
        self
    }
}

/// [`System::nvlink_mesh`] of `members`: direct NVLink between the first node's members, read
/// only where the nodes have no NVSwitch and hold the same number (two or more) of members.
/// Every communicator asks, so nothing here is more than linear in the members.
fn nvlink_mesh(
    view: &dyn SystemView,
    members: &[u32],
    per_node: &BTreeMap<u32, u32>,
    nvswitched: bool,
) -> Vec<Vec<f64>> {
    let mut counts = per_node.values().copied();
    let per = counts.next().unwrap_or(0);
    if nvswitched || per < 2 || counts.any(|c| c != per) {
        return Vec::new();
    }
    let first = view.node_of(members[0]);
    let node: Vec<u32> = members
        .iter()
        .copied()
        .filter(|&r| view.node_of(r) == first)
        .collect();
    let m: Vec<Vec<f64>> = node
        .iter()
        .map(|&a| {
            node.iter()
                .map(|&b| {
                    if a == b {
                        0.0
                    } else {
                        view.direct_nvlink_bps(a, b)
                    }
                })
                .collect()
        })
        .collect();
    if m.iter().flatten().any(|&b| b > 0.0) {
        m
    } else {
        Vec::new()
    }
}

/// `members` grouped by node (`fabric`), nodes in order of their first member, members in
/// order within each; `None` when there are none or nodes hold different numbers of them.
pub(crate) fn members_by_node(members: &[u32], fabric: &dyn Fabric) -> Option<Vec<Vec<u32>>> {
    let mut nodes: Vec<(u32, Vec<u32>)> = Vec::new();
    for &r in members {
        let n = fabric.node_of(r);
        match nodes.iter_mut().find(|(k, _)| *k == n) {
            Some((_, v)) => v.push(r),
            None => nodes.push((n, vec![r])),
        }
    }
    let per = nodes.first()?.1.len();
    (nodes.iter().all(|(_, v)| v.len() == per)).then(|| nodes.into_iter().map(|(_, v)| v).collect())
}

/// A library's schedule with what it decided.
#[derive(Debug, Clone)]
pub struct Plan {
    pub schedule: Schedule,
    /// Devices the library itself places the schedule's extra endpoints on (NVLS: the switch).
    pub placed_endpoints: Vec<(String, DeviceId)>,
    /// For reports: e.g. `"NCCL 2.18 ring/LL128, 24 channels, chunk 576000 B"`.
    pub decision: String,
    /// The profile parameters the schedule's costs were looked up under, as
    /// `table[key]` (e.g. `"efficiency[ring/nvlink]"`): what a fit of this run can move.
    pub parameters: Vec<String>,
    /// Other ways the same call runs, each as likely as `schedule`, where the ranks' entry
    /// order decides (a gloo or OpenMPI broadcast root serves its children in the order they
    /// answer, [`entry_orders`]) or random draws do (gloo's receivers' wake-ups, one play per
    /// set of draws): a run plays them all and reports the median one (`scenario::run`).
    /// Empty for most plans; a training step plays `schedule` alone.
    pub alternatives: Vec<Schedule>,
    /// What makes the alternatives differ, for reports (e.g. [`ENTRY_ORDER`]); empty without.
    pub alternatives_vary: String,
    /// Consecutive plays (`schedule`, then the alternatives) that are one way the call runs,
    /// played with different draws: a run takes each way's median play, then the median of
    /// those ([`crate::scenario::run`]). 1: every play a way of its own.
    pub plays_per_way: usize,
}

impl Plan {
    /// A plan whose alternatives (none, or each another order its root's children enter in)
    /// are as likely as `schedule`: gloo's and OpenMPI's broadcasts.
    pub fn with_entry_orders(
        schedule: Schedule,
        decision: String,
        alternatives: Vec<Schedule>,
    ) -> Plan {
        Plan {
            schedule,
            placed_endpoints: Vec::new(),
            decision,
            parameters: Vec::new(),
            alternatives_vary: if alternatives.is_empty() {
                String::new()
            } else {
                ENTRY_ORDER.to_string()
            },
            plays_per_way: 1,
            alternatives,
        }
    }
}

impl Plan {
    /// A plan whose alternatives (none, or each another way an OpenMPI call's slow exchanges
    /// go: which partner posts first, `mpi::exchanges`) are as likely as `schedule`.
    pub fn with_orientations(
        schedule: Schedule,
        decision: String,
        alternatives: Vec<Schedule>,
    ) -> Plan {
        let vary = if alternatives.is_empty() {
            ""
        } else {
            mpi::ORIENTATION
        };
        Plan {
            alternatives_vary: vary.to_string(),
            ..Plan::with_entry_orders(schedule, decision, alternatives)
        }
    }
}

/// What varies between a root's alternatives: the order its children enter in.
pub const ENTRY_ORDER: &str = "the ranks' entry order";

/// Why a library could not run a collective: the scenario field and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {expected}")]
pub struct LibraryError {
    pub field: String,
    pub expected: String,
}

impl LibraryError {
    pub fn new(field: impl Into<String>, expected: impl Into<String>) -> Self {
        LibraryError {
            field: field.into(),
            expected: expected.into(),
        }
    }
}

/// A collective to run: the part of a scenario's `[collective]` every library reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub collective: Collective,
    /// nccl-tests `size` (see [`crate::collective`]).
    pub bytes: u64,
    pub root: u32,
    pub peer: u32,
}

impl Request {
    /// The part of `spec` a library reads (the template fields are the library's to choose).
    pub fn of(spec: &crate::collective::CollectiveSpec) -> Request {
        Request {
            collective: spec.collective,
            bytes: spec.bytes,
            root: spec.root,
            peer: spec.peer,
        }
    }
}

/// A [`Plan::decision`] without what varies with the size: `"NCCL 2.27 ring/simple, 24
/// channels, 4 slice(s); ..."` → `"NCCL 2.27 ring/simple, 24 channels"`.
pub fn choice(decision: &str) -> &str {
    match decision.match_indices(',').nth(1) {
        Some((i, _)) => &decision[..i],
        None => decision,
    }
}

/// `pairs` the other way round (a message's notification or acknowledgement).
pub(crate) fn reversed(pairs: &[(Endpoint, Endpoint)]) -> Vec<(Endpoint, Endpoint)> {
    pairs.iter().map(|&(a, b)| (b, a)).collect()
}

/// What `library` runs for `req` on `sys`: its choice and schedule. `calibration` is NCCL's
/// fitted parameters (the other libraries have none yet). Not for [`Library::Ideal`], whose
/// templates the scenario configures itself.
pub fn plan(
    library: Library,
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
    calibration: Option<&crate::profile::NcclCalibration>,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
    if let (Library::Gloo | Library::Mpi, Some(gpu)) = (library, &sys.gpu) {
        return Err(LibraryError::new(
            "collective.library",
            format!(
                "a topology of CPU hosts with library = \"{library}\": the ranks here are {gpu} \
                 GPUs, and how {library} moves GPU buffers (copies to the host and back, over \
                 TCP) is not modelled; use library = \"nccl\""
            ),
        ));
    }
    match library {
        Library::Nccl => nccl::plan(req, sys, opts, calibration, fabric),
        Library::Gloo => gloo::plan(req, sys, opts, fabric),
        Library::Mpi => mpi::plan(req, sys, opts),
        Library::Ideal => Err(LibraryError::new(
            "collective.library",
            "a real library (the ideal templates are generated from the scenario)",
        )),
    }
}

/// What the CPU-host libraries' tests share: a system of hosts, and bytes put on the wire.
#[cfg(test)]
pub(crate) mod testing {
    use super::System;
    use crate::collective::{Collective, Fabric, OpKind, Schedule};

    /// `per` ranks per node, numbered node by node.
    pub struct Nodes {
        pub per: u32,
    }
    impl Fabric for Nodes {
        fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
            1e11
        }
        fn node_of(&self, r: u32) -> u32 {
            r / self.per
        }
    }

    /// `n` hosts, one rank each, no GPU (what gloo and OpenMPI run on).
    pub fn cpu_hosts(n: u32) -> System {
        System {
            ranks: n,
            nodes: n,
            ranks_per_node: 1,
            gpu: None,
            intra: None,
            inter: None,
            nvswitch: None,
            node_nvswitches: Vec::new(),
            nics_per_node: 1,
            in_network: super::InNetworkReduction::Absent,
            nvlink_mesh: Vec::new(),
        }
    }

    /// Bytes the transfer ops of `s` whose size passes `keep` put on their pairs.
    fn bytes_where(s: &Schedule, keep: impl Fn(u64) -> bool) -> u128 {
        s.ops
            .iter()
            .map(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } if keep(bytes) => {
                    s.patterns[pattern.0 as usize].pairs.len() as u128 * bytes as u128
                }
                _ => 0,
            })
            .sum()
    }

    /// Per rank of `s`: bytes it sends to other ranks, to the schedule's extra endpoints (the
    /// switches of NVLS, NVLS-Tree and CollNet), and receives from them.
    pub fn bytes_to_ranks_and_switches(s: &Schedule) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let n = s.ranks as usize;
        let (mut to_ranks, mut up, mut down) = (vec![0; n], vec![0; n], vec![0; n]);
        for op in &s.ops {
            if let OpKind::Transfer { pattern, bytes } = op.kind {
                for &(a, b) in s.patterns[pattern.0 as usize].pairs.iter() {
                    let (a, b) = (a as usize, b as usize);
                    match (a < n, b < n) {
                        (true, true) => to_ranks[a] += bytes,
                        (true, false) => up[a] += bytes,
                        (false, true) => down[b] += bytes,
                        (false, false) => {}
                    }
                }
            }
        }
        (to_ranks, up, down)
    }

    /// Bytes moved by the transfers of exactly `bytes` each (every pair counted).
    pub fn transfer_bytes(s: &Schedule, bytes: u64) -> u128 {
        bytes_where(s, |b| b == bytes)
    }

    /// Bytes every transfer op of `s` puts on its pairs, leaving out the ops of exactly
    /// `control_bytes` (a library's notifications or acknowledgements).
    pub fn payload_bytes(s: &Schedule, control_bytes: u64) -> u128 {
        bytes_where(s, |b| b != control_bytes)
    }

    /// OpenMPI's plan for `collective` of `bytes` with `root` on `n` CPU hosts, `algorithm`
    /// forced (by name); validated.
    pub fn mpi_forced(
        collective: Collective,
        algorithm: &str,
        n: u32,
        root: u32,
        bytes: u64,
    ) -> super::Plan {
        let req = super::Request {
            collective,
            bytes,
            root,
            peer: 1,
        };
        let opts = super::LibraryOptions {
            algorithm: Some(algorithm.into()),
            ..Default::default()
        };
        let plan = super::mpi::plan(&req, &cpu_hosts(n), &opts).unwrap();
        plan.schedule.validate().unwrap();
        plan
    }

    /// The data an OpenMPI schedule moves: every transfer but rendezvous requests and answers
    /// (a run of blocks of exactly their sizes would be left out too).
    pub fn mpi_data_bytes(s: &Schedule) -> u128 {
        payload_bytes(s, super::mpi::ACK_BYTES) - transfer_bytes(s, super::mpi::REQUEST_BYTES)
    }
}
