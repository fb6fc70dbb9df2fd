//! Collective operations as schedules: DAGs of batched chunk transfers and reductions.
//!
//! A generator turns (collective, algorithm, ranks, bytes, options) into a [`Schedule`]. The
//! schedule does not know about devices or links: it speaks of *endpoints*, where endpoints
//! `0..ranks` are the communicator's ranks and endpoints `ranks..` are extra participants the
//! algorithm needs (parameter servers), named in [`Schedule::extra_endpoints`]. A scenario
//! places endpoints on devices and a network model plays the schedule.
//!
//! The unit of work is an [`Op`]. A transfer op is a *batch*: every (src, dst) pair of one
//! [`Pattern`] sends the same number of bytes at the same time, and the op is finished when
//! every pair's data has arrived. One step of a ring is one op whose pattern is "each rank
//! sends to its successor", so a 16,384-rank ring all-reduce is 32,766 ops that all share one
//! pattern, not 5×10⁸ transfers. An op starts when all of its dependencies have finished.
//!
//! Sizes follow nccl-tests: `bytes` is the per-rank buffer size as nccl-tests prints it in its
//! `size` column (all-reduce: the buffer every rank reduces; all-gather: the gathered output;
//! reduce-scatter: the input), so algbw = bytes / time and busbw = algbw × [`bus_factor`].

//!
//! Generators, one module per algorithm family, behind one entry point [`generate()`]:
//! - [`ring`]: k rings (all-reduce, reduce-scatter, all-gather, chain broadcast/reduce)
//! - [`hierarchical`]: intra-node reduce-scatter → inter-node all-reduce → intra-node all-gather
//! - [`tree`]: NCCL's double binary tree
//! - [`halving_doubling`]: Rabenseifner's recursive halving and doubling
//! - [`parameter_server`]: synchronous, sharded, separate or colocated servers
//! - [`direct`]: every rank sends straight to its destinations (all-to-all and friends)
//! - [`generate`](mod@generate): the entry point, the algorithm × collective table, defaults,
//!   exact byte splitting and the pipelined (sliced) chain every step-by-step algorithm uses.
//! - [`play`]: the event loop that plays a schedule on a network model; [`in_order`]: the
//!   ordered connections it keeps for ops that ask for them (a library's TCP messages);
//!   [`cpu_pool`]: the cores that hosts' work shares where hosts share a machine.

pub mod benchmark_loop;
pub mod cpu_pool;
pub mod direct;
pub mod generate;
pub mod halving_doubling;
pub mod hierarchical;
pub mod in_order;
pub mod parameter_server;
pub mod play;
pub mod ring;
pub mod steps;
pub mod tree;

pub use generate::{default_algorithm, generate};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A participant of a schedule: a rank (`< ranks`) or an extra endpoint (`>= ranks`).
pub type Endpoint = u32;

/// Index of an op in [`Schedule::ops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpId(pub u32);

/// Index of a pattern in [`Schedule::patterns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PatternId(pub u32);

/// A set of (source, destination) endpoint pairs that transfer together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub pairs: Arc<[(Endpoint, Endpoint)]>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// Every pair of `pattern` sends `bytes`; done when all have been delivered.
    Transfer { pattern: PatternId, bytes: u64 },
    /// Each of the `endpoints` reduces `bytes` locally (in parallel); the time comes from the
    /// profile's reduction bandwidth (zero when the reduction is fused into the copy, as in NCCL),
    /// on the cores the hosts share where the play says they share some ([`cpu_pool`]).
    Reduce { endpoints: u32, bytes: u64 },
    /// Each of the `endpoints` computes for `duration` (in parallel): one layer's forward or
    /// backward pass on every rank of a group, an optimizer step. Workload DAGs use it;
    /// collective generators never do. A zero duration makes a join point.
    Compute {
        endpoints: u32,
        duration: crate::engine::SimTime,
    },
    /// Each of the `endpoints` spends `core_time` of host CPU (a library's work per message:
    /// waking its threads, system calls, the kernel's network stack), on the cores all hosts
    /// of the machine share where the play says they share some ([`cpu_pool`]: equal shares
    /// when more work runs than there are cores); otherwise a delay of `core_time`.
    HostWork {
        endpoints: u32,
        core_time: crate::engine::SimTime,
    },
}

/// Which part of the algorithm an op belongs to, for timelines and traffic matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    ReduceScatter,
    AllGather,
    Reduce,
    Broadcast,
    AllToAll,
    SendRecv,
    /// A barrier's messages (they carry no data).
    Barrier,
    /// Parameter server: workers push gradients.
    Push,
    /// Parameter server: workers pull parameters.
    Pull,
    /// Hierarchical: the inter-node stage.
    InterNode,
    /// Training step: a forward-pass compute op.
    Forward,
    /// Training step: a backward-pass compute op.
    Backward,
    /// Training step: the optimizer update (also a parameter server's update).
    Optimizer,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ReduceScatter => "reduce-scatter",
            Phase::AllGather => "all-gather",
            Phase::Reduce => "reduce",
            Phase::Broadcast => "broadcast",
            Phase::AllToAll => "all-to-all",
            Phase::SendRecv => "send-recv",
            Phase::Barrier => "barrier",
            Phase::Push => "push",
            Phase::Pull => "pull",
            Phase::InterNode => "inter-node",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    /// Ops that must finish before this one starts (all with smaller ids).
    pub deps: Vec<OpId>,
    pub phase: Phase,
    /// Independent lane of the algorithm (ring index, tree index, server shard).
    pub channel: u16,
    /// Algorithm step within the channel (for timelines).
    pub step: u32,
    /// What a communication library adds to a transfer op beyond the wire (see
    /// [`Transport`]); `None` for the ideal templates: the op is only its bytes on the links.
    pub transport: Option<Transport>,
    /// The op's pairs are messages on ordered connections (one TCP socket per sender and
    /// receiver): each waits for the in-order ops that became ready before it on the same
    /// (sender, receiver) to finish ([`in_order`]). `false` for the ideal templates.
    pub in_order: bool,
    /// A zero-time op done once the bytes of transfer op `pushed_of` have all left their
    /// senders' hosts, as the network model says ([`crate::net::NetContext::batch_pushed`]):
    /// the sender's view of a write into a socket that drains into the network, which on a
    /// path whose slowest link comes after a faster one ends before the bytes arrive. `None`
    /// for every other op.
    pub pushed_of: Option<OpId>,
    /// Payloads of one step that a library's hosts are woken for as one: a receiver's wake-up
    /// drawn once for the group and shared by its members (gloo's all-reduce iteration, played
    /// rank by rank: `crate::library::gloo::host_cpu`). `None`: each payload draws its own.
    pub wake_up_group: Option<u32>,
}

/// What a library's protocol costs on one transfer op, beyond moving its bytes over the
/// links. Set by `crate::library`; the play loop and the network models apply it without
/// knowing which library or protocol it stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transport {
    /// Fixed time from the op becoming ready to its first byte leaving (a protocol's per-step
    /// synchronization: flag polling, FIFO handshakes, proxy posts), on top of path latency.
    pub setup: crate::engine::SimTime,
    /// Ceiling on each flow's rate in bits/s (one channel's copy engine: the SM running it);
    /// `f64::INFINITY` when only the links limit it.
    pub max_flow_bps: f64,
}
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub collective: Collective,
    /// Algorithm name for reports, e.g. `"ring(2)"`, `"hierarchical"`.
    pub algorithm: String,
    pub ranks: u32,
    /// Names of endpoints `ranks..` (e.g. `"ps0"`), placed by the scenario.
    pub extra_endpoints: Vec<String>,
    /// nccl-tests `size` of the collective.
    pub bytes: u64,
    pub patterns: Vec<Pattern>,
    pub ops: Vec<Op>,
}

impl Schedule {
    pub fn new(
        collective: Collective,
        algorithm: impl Into<String>,
        ranks: u32,
        bytes: u64,
    ) -> Self {
        Schedule {
            collective,
            algorithm: algorithm.into(),
            ranks,
            extra_endpoints: Vec::new(),
            bytes,
            patterns: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// Adds a pattern; returns an existing identical one if the previous pattern is equal
    /// (generators emit the same pattern step after step).
    pub fn add_pattern(&mut self, pairs: impl Into<Arc<[(Endpoint, Endpoint)]>>) -> PatternId {
        let pairs = pairs.into();
        if let Some(i) = self.patterns.iter().rposition(|p| p.pairs == pairs) {
            return PatternId(i as u32);
        }
        self.patterns.push(Pattern { pairs });
        PatternId(self.patterns.len() as u32 - 1)
    }

    /// Adds a pattern without looking for an equal one (for generators that know their
    /// patterns are new, such as the n-1 single-pair hops of a chain, where searching would
    /// cost O(n²)).
    pub fn push_pattern(&mut self, pairs: impl Into<Arc<[(Endpoint, Endpoint)]>>) -> PatternId {
        self.patterns.push(Pattern {
            pairs: pairs.into(),
        });
        PatternId(self.patterns.len() as u32 - 1)
    }

    pub fn push(
        &mut self,
        kind: OpKind,
        deps: Vec<OpId>,
        phase: Phase,
        channel: u16,
        step: u32,
    ) -> OpId {
        self.ops.push(Op {
            kind,
            deps,
            phase,
            channel,
            step,
            transport: None,
            in_order: false,
            pushed_of: None,
            wake_up_group: None,
        });
        OpId(self.ops.len() as u32 - 1)
    }

    /// An op done once transfer `of`'s bytes have all left their senders (see
    /// [`Op::pushed_of`]); it waits for nothing else.
    pub fn push_pushed(&mut self, of: OpId, phase: Phase, step: u32) -> OpId {
        debug_assert!(matches!(
            self.ops[of.0 as usize].kind,
            OpKind::Transfer { .. }
        ));
        let id = self.push(
            OpKind::Compute {
                endpoints: 1,
                duration: crate::engine::SimTime::ZERO,
            },
            Vec::new(),
            phase,
            0,
            step,
        );
        self.ops[id.0 as usize].pushed_of = Some(of);
        id
    }

    pub fn endpoints(&self) -> u32 {
        self.ranks + self.extra_endpoints.len() as u32
    }

    /// Total bytes put on the network by the schedule.
    pub fn total_transfer_bytes(&self) -> u128 {
        self.ops
            .iter()
            .map(|op| match op.kind {
                OpKind::Transfer { pattern, bytes } => {
                    self.patterns[pattern.0 as usize].pairs.len() as u128 * bytes as u128
                }
                OpKind::Reduce { .. } | OpKind::Compute { .. } | OpKind::HostWork { .. } => 0,
            })
            .sum()
    }

    /// Copies `sub` into this schedule once for all `groups` at the same time: group g's
    /// endpoint e of `sub` becomes `groups[g][e]` here, and each pattern of `sub` becomes one
    /// pattern holding every group's mapped pairs, so the groups' identical steps stay one
    /// batch each. Ops of `sub` without dependencies wait for `after`; `map_kind` may replace
    /// an op's kind (e.g. a server's reduction by the optimizer update it stands for). Returns
    /// the op ids that nothing inside the copy waits for (the copy is finished when they are);
    /// empty when `sub` has no ops.
    ///
    /// Every group must have `sub.endpoints()` entries, all below `self.endpoints()`.
    pub fn embed(
        &mut self,
        sub: &Schedule,
        groups: &[&[Endpoint]],
        after: &[OpId],
        map_kind: &dyn Fn(&Op) -> OpKind,
    ) -> Vec<OpId> {
        let base = self.ops.len() as u32;
        let n_groups = groups.len().max(1) as u32;
        let mut pattern_map: Vec<Option<PatternId>> = vec![None; sub.patterns.len()];
        let mut has_succ = vec![false; sub.ops.len()];
        for op in &sub.ops {
            for d in &op.deps {
                has_succ[d.0 as usize] = true;
            }
        }
        for op in &sub.ops {
            let kind = match map_kind(op) {
                OpKind::Transfer { pattern, bytes } => {
                    let p = pattern.0 as usize;
                    let id = match pattern_map[p] {
                        Some(id) => id,
                        None => {
                            let pairs: Vec<(Endpoint, Endpoint)> = groups
                                .iter()
                                .flat_map(|g| {
                                    sub.patterns[p]
                                        .pairs
                                        .iter()
                                        .map(|&(s, d)| (g[s as usize], g[d as usize]))
                                })
                                .collect();
                            let id = self.add_pattern(pairs);
                            pattern_map[p] = Some(id);
                            id
                        }
                    };
                    OpKind::Transfer { pattern: id, bytes }
                }
                OpKind::Reduce { endpoints, bytes } => OpKind::Reduce {
                    endpoints: endpoints * n_groups,
                    bytes,
                },
                OpKind::Compute {
                    endpoints,
                    duration,
                } => OpKind::Compute {
                    endpoints: endpoints * n_groups,
                    duration,
                },
                OpKind::HostWork {
                    endpoints,
                    core_time,
                } => OpKind::HostWork {
                    endpoints: endpoints * n_groups,
                    core_time,
                },
            };
            let deps = if op.deps.is_empty() {
                after.to_vec()
            } else {
                op.deps.iter().map(|d| OpId(d.0 + base)).collect()
            };
            let id = self.push(kind, deps, op.phase, op.channel, op.step);
            self.ops[id.0 as usize].transport = op.transport;
            self.ops[id.0 as usize].in_order = op.in_order;
            self.ops[id.0 as usize].pushed_of = op.pushed_of.map(|o| OpId(o.0 + base));
            // Group ids are op ids of their schedule: shifted, they stay apart from this one's.
            self.ops[id.0 as usize].wake_up_group = op.wake_up_group.map(|g| g + base);
        }
        (0..sub.ops.len())
            .filter(|&i| !has_succ[i])
            .map(|i| OpId(base + i as u32))
            .collect()
    }

    /// Checks the invariants every generator must keep: deps point backwards, patterns and
    /// endpoints exist, no self-transfers.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.endpoints();
        for (i, p) in self.patterns.iter().enumerate() {
            for &(s, d) in p.pairs.iter() {
                if s >= n || d >= n {
                    return Err(format!(
                        "pattern {i}: endpoint out of range ({s} -> {d}, {n} endpoints)"
                    ));
                }
                if s == d {
                    return Err(format!("pattern {i}: self-transfer on endpoint {s}"));
                }
            }
        }
        for (i, op) in self.ops.iter().enumerate() {
            if let Some(d) = op.deps.iter().find(|d| d.0 as usize >= i) {
                return Err(format!("op {i} depends on op {} which is not earlier", d.0));
            }
            if let OpKind::Transfer { pattern, .. } = op.kind {
                if pattern.0 as usize >= self.patterns.len() {
                    return Err(format!("op {i}: pattern {} does not exist", pattern.0));
                }
            }
        }
        Ok(())
    }
}

/// The collective operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast,
    Reduce,
    AllToAll,
    /// Point-to-point: rank 0 sends `bytes` to rank 1 (or `root` → `peer`).
    SendRecv,
    /// No rank leaves before every rank has entered: messages without data (`bytes` is 0).
    Barrier,
}

impl Collective {
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllGather => "all_gather",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
            Collective::Barrier => "barrier",
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// nccl-tests' bus bandwidth factor: busbw = algbw × factor, so that busbw is comparable to
/// the hardware's link bandwidth whatever the rank count.
pub fn bus_factor(c: Collective, ranks: u32) -> f64 {
    let n = ranks as f64;
    match c {
        Collective::AllReduce => 2.0 * (n - 1.0) / n,
        Collective::ReduceScatter | Collective::AllGather | Collective::AllToAll => (n - 1.0) / n,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        // Nothing is sent: no bandwidth to compare.
        Collective::Barrier => 0.0,
    }
}

/// What a generator may ask about the network its ranks sit on.
pub trait Fabric {
    /// Bottleneck bandwidth (bits/s) of the path from `src` to `dst` on an idle network.
    fn bottleneck_bps(&self, src: Endpoint, dst: Endpoint) -> f64;
    /// The server (node) a rank lives on; ranks on the same node share an intra-node fabric.
    fn node_of(&self, rank: u32) -> u32;
}

/// The order of one ring: an explicit permutation of the ranks, or generated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RingOrder {
    /// Ring position i holds rank `order[i]`; must be a permutation of `0..ranks`.
    Explicit(Vec<u32>),
    /// Ring position i holds rank `(offset + i * stride) mod ranks` (stride coprime with
    /// ranks), optionally traversed in reverse.
    Generated {
        #[serde(default)]
        offset: u32,
        #[serde(default = "one")]
        stride: u32,
        #[serde(default)]
        reverse: bool,
    },
}

fn one() -> u32 {
    1
}

/// A collective algorithm with its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case", deny_unknown_fields)]
pub enum Algorithm {
    /// k rings (one per entry), bytes split across rings in proportion to each ring's
    /// bottleneck bandwidth.
    Ring { rings: Vec<RingOrder> },
    /// Intra-node reduce-scatter → inter-node all-reduce (one ring per local rank index) →
    /// intra-node all-gather. Needs the same number of ranks on every node.
    Hierarchical,
    /// NCCL's double binary tree: two complementary trees, half the data each.
    DoubleBinaryTree,
    /// Recursive halving (reduce-scatter) and doubling (all-gather), Rabenseifner-style.
    HalvingDoubling,
    /// Synchronous parameter server sharded over `servers` servers. With `colocated`, server j
    /// is rank j; otherwise servers are extra endpoints `ps0..` placed by the scenario.
    ParameterServer {
        #[serde(default = "one")]
        servers: u32,
        #[serde(default)]
        colocated: bool,
    },
    /// Every rank sends directly to every rank that needs its data.
    Direct,
}

/// One collective to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveSpec {
    pub collective: Collective,
    /// nccl-tests `size` (see the module doc).
    pub bytes: u64,
    /// Root rank for broadcast and reduce; source for send/recv.
    pub root: u32,
    /// Destination rank for send/recv.
    pub peer: u32,
    pub algorithm: Algorithm,
    /// NCCL-style pipelining: each step's transfer is cut into this many slices, slice j of
    /// step s+1 waiting only for slice j of step s (and slice j-1 of step s+1 on the same link).
    pub slices: u32,
}

/// Why a schedule could not be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {expected}")]
pub struct CollectiveError {
    pub field: String,
    pub expected: String,
}

impl CollectiveError {
    pub fn new(field: impl Into<String>, expected: impl Into<String>) -> Self {
        CollectiveError {
            field: field.into(),
            expected: expected.into(),
        }
    }
}
