//! Workload traces recorded on real runs, replayed as a training step on any topology.
//!
//! A trace is one graph per rank of *nodes*: compute with its measured duration, collectives
//! with their size and process group, point-to-point sends and receives, and dependencies
//! between nodes of the same rank. The readers turn what users record into that graph:
//! - [`pytorch`]: PyTorch execution traces (`ExecutionTraceObserver`, schemas 1.0.1–1.1.x)
//!   paired with the same step's Kineto trace, which gives the durations;
//! - [`chakra`]: MLCommons Chakra execution traces (`<name>.<rank>.et`, the protobuf files
//!   ASTRA-sim replays), read and written.
//!
//! [`build`] turns a [`TraceSet`] into the same [`StepDag`] the catalog workloads build, so a
//! replayed trace is played by the network models and reported like any training step:
//! - compute nodes become compute ops on the rank's lane (one lane per rank and stream);
//! - the k-th collective of a process group on each member is one collective (NCCL's and
//!   gloo's rule: every member issues a group's collectives in the same order); it starts
//!   when every member has issued it and the library (templates, NCCL) plans it over the
//!   group's devices;
//! - the k-th send from rank a to rank b meets the k-th receive on b from a;
//! - a node runs when its dependencies have finished; a collective does not block its rank
//!   until a node depends on it.

pub mod chakra;
#[allow(clippy::all)]
mod chakra_pb;
pub mod pytorch;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use crate::collective::{Algorithm, Collective, CollectiveSpec, Fabric, OpId, Phase};
use crate::engine::SimTime;
use crate::workload::step::{Planner, StepBuilder, StepConfig, StepDag};

/// A bad trace: the file, the element (node, field) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub element: String,
    pub expected: String,
}

impl TraceError {
    pub fn new(
        file: impl Into<String>,
        element: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        TraceError {
            file: file.into(),
            element: element.into(),
            expected: expected.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: expected {}",
            self.file, self.element, self.expected
        )
    }
}

impl std::error::Error for TraceError {}

/// What a trace node does.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// Busy on its lane for the recorded time.
    Compute { secs: f64 },
    /// A collective over `group` (`None`: every rank of the trace). `bytes` is nccl-tests'
    /// size (all-gather: the gathered output; reduce-scatter: the input).
    Collective {
        op: Collective,
        bytes: u64,
        group: Option<String>,
        root: u32,
    },
    /// Sends `bytes` to trace rank `peer`.
    Send { peer: u32, bytes: u64 },
    /// Receives `bytes` from trace rank `peer`.
    Recv { peer: u32, bytes: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceNode {
    /// Unique within its rank.
    pub id: u64,
    pub name: String,
    pub kind: NodeKind,
    /// Ids of nodes of the same rank that must finish first.
    pub deps: Vec<u64>,
    /// Which of the rank's streams a compute node runs on (0: the host thread).
    pub lane: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RankTrace {
    /// Where this rank's trace came from (for errors and the summary).
    pub file: String,
    pub nodes: Vec<TraceNode>,
    /// The step time this rank recorded, when the trace says.
    pub recorded_step_secs: Option<f64>,
}

/// One recorded step on every rank.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSet {
    pub name: String,
    /// `"pytorch"` or `"chakra"`.
    pub format: &'static str,
    pub ranks: Vec<RankTrace>,
    /// Process groups by name: member trace ranks in communicator order.
    pub groups: BTreeMap<String, Vec<u32>>,
}

impl TraceSet {
    /// The step time the trace recorded: the longest rank's.
    pub fn recorded_step_secs(&self) -> Option<f64> {
        self.ranks
            .iter()
            .map(|r| r.recorded_step_secs)
            .try_fold(0.0f64, |m, s| s.map(|s| m.max(s)))
    }

    /// Compute seconds per rank (the sum of its compute nodes).
    pub fn compute_secs(&self) -> Vec<f64> {
        self.ranks
            .iter()
            .map(|r| {
                r.nodes
                    .iter()
                    .map(|n| match n.kind {
                        NodeKind::Compute { secs } => secs,
                        _ => 0.0,
                    })
                    .sum()
            })
            .collect()
    }
}

/// A few lines on what a trace holds, for `dtsim trace show`.
pub fn describe(set: &TraceSet) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace      {} ({}, {} ranks)",
        set.name,
        set.format,
        set.ranks.len()
    );
    if let Some(s) = set.recorded_step_secs() {
        let _ = writeln!(out, "recorded   step {:.3} ms (longest rank)", s * 1e3);
    }
    for (name, ranks) in &set.groups {
        let _ = writeln!(out, "group      {name:?}: ranks {ranks:?} (empty: all)");
    }
    for (r, rank) in set.ranks.iter().enumerate() {
        let (mut compute, mut secs, mut colls, mut bytes, mut p2p) = (0, 0.0, 0, 0u64, 0);
        for n in &rank.nodes {
            match n.kind {
                NodeKind::Compute { secs: s } => {
                    compute += 1;
                    secs += s;
                }
                NodeKind::Collective { bytes: b, .. } => {
                    colls += 1;
                    bytes += b;
                }
                NodeKind::Send { .. } | NodeKind::Recv { .. } => p2p += 1,
            }
        }
        let _ = writeln!(
            out,
            "rank {r:<5} {} nodes: {compute} compute ({:.3} ms), {colls} collectives \
             ({bytes} B), {p2p} point-to-point  [{}]",
            rank.nodes.len(),
            secs * 1e3,
            rank.file
        );
    }
    out
}

/// Which format a trace path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `rank<r>.et.json` + `rank<r>.kineto.json` per rank.
    Pytorch,
    /// `<name>.<r>.et` per rank.
    Chakra,
}

/// Reads the trace set at `path` (a directory), in `format` or the one its files show.
pub fn load(path: &Path, format: Option<Format>) -> Result<TraceSet, TraceError> {
    let format = match format {
        Some(f) => f,
        None => detect(path)?,
    };
    match format {
        Format::Pytorch => pytorch::load_dir(path),
        Format::Chakra => chakra::load_dir(path),
    }
}

fn detect(path: &Path) -> Result<Format, TraceError> {
    let names = dir_names(path)?;
    if names.iter().any(|n| n.ends_with(".et")) {
        Ok(Format::Chakra)
    } else if names.iter().any(|n| n.ends_with(".et.json")) {
        Ok(Format::Pytorch)
    } else {
        Err(TraceError::new(
            path.display().to_string(),
            "files",
            "a directory of Chakra traces (<name>.<rank>.et) or PyTorch traces \
             (rank<r>.et.json with rank<r>.kineto.json)",
        ))
    }
}

/// The file names in a directory, sorted.
pub(crate) fn dir_names(path: &Path) -> Result<Vec<String>, TraceError> {
    let rd = std::fs::read_dir(path).map_err(|e| {
        TraceError::new(
            path.display().to_string(),
            "directory",
            format!("a readable directory of per-rank trace files ({e})"),
        )
    })?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Per-rank files `prefix<rank>suffix` for ranks 0..n, all present, none missing.
pub(crate) fn rank_files(
    dir: &Path,
    names: &[String],
    matches: impl Fn(&str) -> Option<u32>,
    pattern: &str,
) -> Result<Vec<std::path::PathBuf>, TraceError> {
    let mut by_rank: BTreeMap<u32, std::path::PathBuf> = BTreeMap::new();
    for n in names {
        if let Some(r) = matches(n) {
            by_rank.insert(r, dir.join(n));
        }
    }
    if by_rank.is_empty() {
        return Err(TraceError::new(
            dir.display().to_string(),
            "files",
            format!("per-rank files named {pattern}"),
        ));
    }
    let n = by_rank.len() as u32;
    for r in 0..n {
        if !by_rank.contains_key(&r) {
            return Err(TraceError::new(
                dir.display().to_string(),
                format!("rank {r}"),
                format!(
                    "one file per rank 0..{} ({pattern}); rank {r}'s is missing",
                    n - 1
                ),
            ));
        }
    }
    Ok(by_rank.into_values().collect())
}

/// Where a collective or point-to-point exchange stands while ranks reach it.
struct Meeting {
    /// (rank, node id, the node's dependencies as ops) of each member that issued it.
    arrived: Vec<(u32, u64, Vec<OpId>)>,
    what: String,
}

/// Builds the replay of `set` on `fabric`: trace rank r is the step's rank r.
pub fn build(
    set: &TraceSet,
    cfg: &StepConfig,
    fabric: &dyn Fabric,
    planner: &dyn Planner,
) -> Result<StepDag, TraceError> {
    if matches!(cfg.algorithm, Algorithm::ParameterServer { .. }) {
        return Err(TraceError::new(
            &set.name,
            "algorithm",
            "a collective algorithm (the trace's collectives are not parameter-server pushes)",
        ));
    }
    let n = set.ranks.len() as u32;
    let lanes_per_rank = set
        .ranks
        .iter()
        .flat_map(|r| r.nodes.iter().map(|x| x.lane as u32 + 1))
        .max()
        .unwrap_or(1);
    if n as u64 * lanes_per_rank as u64 > u16::MAX as u64 {
        return Err(TraceError::new(
            &set.name,
            "ranks",
            format!(
                "at most {} ranks × streams; the trace has {n} ranks × {lanes_per_rank} streams",
                u16::MAX
            ),
        ));
    }
    let orders: Vec<Vec<usize>> = set
        .ranks
        .iter()
        .map(topological_order)
        .collect::<Result<_, _>>()?;
    let world: Vec<u32> = (0..n).collect();
    let mut b = StepBuilder::new(n, fabric, planner, cfg);
    let mut op_of: Vec<HashMap<u64, OpId>> = vec![HashMap::new(); n as usize];
    let mut cursor = vec![0usize; n as usize];
    let mut issued: Vec<HashMap<String, u32>> = vec![HashMap::new(); n as usize];
    let mut meetings: BTreeMap<(String, u32), Meeting> = BTreeMap::new();
    loop {
        let mut progressed = false;
        for r in 0..n as usize {
            let rank = &set.ranks[r];
            while cursor[r] < orders[r].len() {
                let node = &rank.nodes[orders[r][cursor[r]]];
                let Some(deps) = node
                    .deps
                    .iter()
                    .map(|d| op_of[r].get(d).copied())
                    .collect::<Option<Vec<OpId>>>()
                else {
                    break; // waits for a collective the other members have not issued yet
                };
                cursor[r] += 1;
                progressed = true;
                let lane = (r as u32 * lanes_per_rank + node.lane as u32) as u16;
                let (key, group, what) = match &node.kind {
                    NodeKind::Compute { secs } => {
                        let op = b.compute(
                            1,
                            SimTime::from_secs_f64(secs.max(0.0)),
                            deps,
                            phase_of(&node.name),
                            lane,
                            0,
                        );
                        op_of[r].insert(node.id, op);
                        continue;
                    }
                    NodeKind::Collective {
                        op, bytes, group, ..
                    } => {
                        let g = group.clone().unwrap_or_default();
                        let members = members_of(set, r, node, group.as_deref(), &world)?;
                        if !members.contains(&(r as u32)) {
                            return Err(node_error(
                                set,
                                r,
                                node,
                                format!(
                                    "a process group holding rank {r}; {g:?} holds {members:?}"
                                ),
                            ));
                        }
                        let seq = issued[r].entry(g.clone()).or_insert(0);
                        *seq += 1;
                        (
                            (format!("c:{g}"), *seq),
                            members,
                            format!("{op} of {bytes} B"),
                        )
                    }
                    NodeKind::Send { peer, bytes } | NodeKind::Recv { peer, bytes } => {
                        if *peer >= n || *peer == r as u32 {
                            return Err(node_error(
                                set,
                                r,
                                node,
                                format!("a peer rank other than {r} below {n}, got {peer}"),
                            ));
                        }
                        let (src, dst) = match node.kind {
                            NodeKind::Send { .. } => (r as u32, *peer),
                            _ => (*peer, r as u32),
                        };
                        let k = format!(
                            "p:{src}>{dst}:{}",
                            matches!(node.kind, NodeKind::Send { .. })
                        );
                        let seq = issued[r].entry(k).or_insert(0);
                        *seq += 1;
                        (
                            (format!("p:{src}>{dst}"), *seq),
                            vec![src, dst],
                            format!("{bytes} B from rank {src} to rank {dst}"),
                        )
                    }
                };
                let m = meetings.entry(key.clone()).or_insert_with(|| Meeting {
                    arrived: Vec::new(),
                    what: what.clone(),
                });
                if m.what != what {
                    return Err(node_error(
                        set,
                        r,
                        node,
                        format!(
                            "the same exchange as the other members' #{} on {:?} ({}), got {what}",
                            key.1, key.0, m.what
                        ),
                    ));
                }
                m.arrived.push((r as u32, node.id, deps));
                if m.arrived.len() < group.len() {
                    continue;
                }
                let m = meetings.remove(&key).expect("present");
                let after: Vec<OpId> = m.arrived.iter().flat_map(|a| a.2.clone()).collect();
                let done = match &node.kind {
                    NodeKind::Collective {
                        op, bytes, root, ..
                    } => {
                        if group.len() < 2 {
                            b.join(after)
                        } else {
                            let spec = CollectiveSpec {
                                collective: *op,
                                bytes: *bytes,
                                root: *root,
                                peer: 1,
                                algorithm: cfg.algorithm.clone(),
                                slices: cfg.slices,
                            };
                            b.collective(spec, std::slice::from_ref(&group), after, &|o| {
                                o.kind.clone()
                            })
                            .map_err(|(f, e)| node_error(set, r, node, format!("{e} (at {f})")))?
                        }
                    }
                    NodeKind::Send { bytes, .. } | NodeKind::Recv { bytes, .. } => b
                        .transfer(vec![(group[0], group[1])], *bytes, after)
                        .map_err(|(f, e)| node_error(set, r, node, format!("{e} (at {f})")))?,
                    NodeKind::Compute { .. } => unreachable!("compute nodes do not meet"),
                };
                for (rank, id, _) in m.arrived {
                    op_of[rank as usize].insert(id, done);
                }
            }
        }
        if cursor.iter().zip(&orders).all(|(c, o)| *c == o.len()) {
            break;
        }
        if !progressed {
            return Err(stuck(set, &cursor, &orders, &meetings));
        }
    }
    let mut dag = b.finish();
    dag.lane_count = (n * lanes_per_rank) as u16;
    Ok(dag)
}

fn phase_of(name: &str) -> Phase {
    if name.contains("Backward") || name.contains("backward") {
        Phase::Backward
    } else if name.contains("Optimizer") || name.contains("optimizer") {
        Phase::Optimizer
    } else {
        Phase::Forward
    }
}

fn members_of(
    set: &TraceSet,
    r: usize,
    node: &TraceNode,
    group: Option<&str>,
    world: &[u32],
) -> Result<Vec<u32>, TraceError> {
    let Some(g) = group else {
        return Ok(world.to_vec());
    };
    match set.groups.get(g) {
        Some(m) if m.is_empty() => Ok(world.to_vec()),
        Some(m) => {
            if let Some(bad) = m.iter().find(|&&x| x as usize >= set.ranks.len()) {
                return Err(node_error(
                    set,
                    r,
                    node,
                    format!(
                        "process group {g:?} of ranks below {}, it names rank {bad}",
                        set.ranks.len()
                    ),
                ));
            }
            Ok(m.clone())
        }
        None => Err(node_error(
            set,
            r,
            node,
            format!(
                "a process group the trace defines ({}); {g:?} is not one",
                if set.groups.is_empty() {
                    "it defines none".to_string()
                } else {
                    set.groups.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            ),
        )),
    }
}

fn node_error(set: &TraceSet, r: usize, node: &TraceNode, expected: String) -> TraceError {
    TraceError::new(
        &set.ranks[r].file,
        format!("node {} ({})", node.id, node.name),
        expected,
    )
}

/// Why no rank can go on: the first blocked rank and the exchange it waits for.
fn stuck(
    set: &TraceSet,
    cursor: &[usize],
    orders: &[Vec<usize>],
    meetings: &BTreeMap<(String, u32), Meeting>,
) -> TraceError {
    let r = (0..cursor.len())
        .find(|&r| cursor[r] < orders[r].len())
        .unwrap_or(0);
    let node = &set.ranks[r].nodes[orders[r][cursor[r]]];
    let waiting: Vec<String> = meetings
        .iter()
        .map(|((g, k), m)| {
            let ranks: Vec<u32> = m.arrived.iter().map(|a| a.0).collect();
            format!("#{k} on {g} ({}) issued only by ranks {ranks:?}", m.what)
        })
        .collect();
    node_error(
        set,
        r,
        node,
        format!(
            "every member to issue the exchanges this node waits for; {}",
            waiting.join("; ")
        ),
    )
}

/// Kahn's order of a rank's nodes (ties by position), or the node on a cycle / the missing
/// dependency.
fn topological_order(rank: &RankTrace) -> Result<Vec<usize>, TraceError> {
    let index: HashMap<u64, usize> = rank
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id, i))
        .collect();
    if index.len() != rank.nodes.len() {
        let mut seen = std::collections::HashSet::new();
        let dup = rank.nodes.iter().find(|n| !seen.insert(n.id)).expect("dup");
        return Err(TraceError::new(
            &rank.file,
            format!("node {} ({})", dup.id, dup.name),
            "node ids unique within a rank",
        ));
    }
    let mut indegree = vec![0u32; rank.nodes.len()];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); rank.nodes.len()];
    for (i, n) in rank.nodes.iter().enumerate() {
        for d in &n.deps {
            let Some(&j) = index.get(d) else {
                return Err(TraceError::new(
                    &rank.file,
                    format!("node {} ({})", n.id, n.name),
                    format!("dependencies on nodes of this rank; there is no node {d}"),
                ));
            };
            indegree[i] += 1;
            succ[j].push(i);
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == 0)
        .map(|(i, _)| std::cmp::Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(rank.nodes.len());
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &s in &succ[i] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(std::cmp::Reverse(s));
            }
        }
    }
    if order.len() < rank.nodes.len() {
        let i = (0..rank.nodes.len())
            .find(|&i| indegree[i] > 0)
            .unwrap_or(0);
        let n = &rank.nodes[i];
        return Err(TraceError::new(
            &rank.file,
            format!("node {} ({})", n.id, n.name),
            "dependencies without cycles; this node is on one",
        ));
    }
    Ok(order)
}

#[cfg(test)]
mod tests;
