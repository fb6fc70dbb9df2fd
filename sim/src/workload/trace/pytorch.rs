//! PyTorch execution traces (ET) with the same step's Kineto trace, one pair per rank:
//! `rank<r>.et.json` and `rank<r>.kineto.json` in one directory.
//!
//! The ET (`torch.profiler.ExecutionTraceObserver`, `ExecutionGraphObserver` in torch 1.13;
//! schema 1.0.1 with flat `inputs` / `input_types` / `input_shapes` and `parent`, 1.0.2+ with
//! `inputs: {values, shapes, types}` and `ctrl_deps`) gives the structure: every operator with
//! its parent, its tensors (`[tensor id, storage id, offset, elements, bytes per element,
//! device]`) and the `c10d::` collectives with their buffers and process group (`pg_name`,
//! groups from the `## process_group:init ##` node). Kineto (`export_chrome_trace`, the legacy
//! list of events or `{"traceEvents": [...]}`) gives the durations.
//!
//! The step is the `ProfilerStep#<n>` range both traces hold. Its top-level operators on the
//! host thread, in order, are matched one to one between the two files (same names, else an
//! error), and become a chain of compute nodes, each lasting its Kineto duration plus the
//! host time since the previous one (Python between operators), so the chain spans the
//! recorded step. A `c10d::` collective becomes a collective node issued when the top-level
//! operator around it ends; the first later operator that reads its buffers' storage waits
//! for it, and the recorded gap before that operator (the wait itself) is dropped: the
//! simulated collective stands in for it. The library's own spans (`gloo:`, `nccl:`), which
//! run on its threads, are the collective and not host compute.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::Value;

use super::{dir_names, rank_files, NodeKind, RankTrace, TraceError, TraceNode, TraceSet};
use crate::collective::Collective;

/// Spans a communication library records on its own threads: the collective, not compute.
const LIBRARY_SPANS: [&str; 4] = ["gloo:", "nccl:", "ucc:", "mpi:"];

fn is_library_span(name: &str) -> bool {
    LIBRARY_SPANS.iter().any(|p| name.starts_with(p))
}

pub fn load_dir(dir: &Path) -> Result<TraceSet, TraceError> {
    let names = dir_names(dir)?;
    let ets = rank_files(
        dir,
        &names,
        |n| {
            n.strip_prefix("rank")?
                .strip_suffix(".et.json")?
                .parse()
                .ok()
        },
        "rank<r>.et.json",
    )?;
    let mut ranks = Vec::new();
    let mut groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (r, et) in ets.iter().enumerate() {
        let kineto = dir.join(format!("rank{r}.kineto.json"));
        if !kineto.exists() {
            return Err(TraceError::new(
                kineto.display().to_string(),
                "file",
                format!("rank {r}'s Kineto trace beside its execution trace"),
            ));
        }
        let (rank, pgs) = load_rank(et, &kineto)?;
        for (name, members) in pgs {
            groups.entry(name).or_insert(members);
        }
        ranks.push(rank);
    }
    Ok(TraceSet {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string()),
        format: "pytorch",
        ranks,
        groups,
    })
}

fn read_json(path: &Path) -> Result<Value, TraceError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| TraceError::new(&file, "file", format!("a readable JSON file ({e})")))?;
    serde_json::from_str(&text).map_err(|e| {
        TraceError::new(
            &file,
            format!("line {} column {}", e.line(), e.column()),
            format!("valid JSON ({e})"),
        )
    })
}

/// One ET operator, as the replay needs it.
struct EtNode {
    id: u64,
    name: String,
    parent: u64,
    values: Vec<Value>,
    types: Vec<String>,
    shapes: Vec<Value>,
    pg_name: Option<String>,
}

/// An input field in its 1.0.2+ form (`inputs.values`, `inputs.types`, `inputs.shapes`) or
/// its schema-1.0.1 one (`inputs`, `input_types`, `input_shapes`).
fn input_field<'a>(n: &'a Value, part: &str) -> Option<&'a Vec<Value>> {
    match &n["inputs"] {
        Value::Object(o) => o.get(part).and_then(Value::as_array),
        v @ Value::Array(_) if part == "values" => v.as_array(),
        _ => n[format!("input_{part}").as_str()].as_array(),
    }
}

fn et_nodes(et: &Value, file: &str) -> Result<Vec<EtNode>, TraceError> {
    let nodes = et["nodes"].as_array().ok_or_else(|| {
        TraceError::new(
            file,
            "nodes",
            "a PyTorch execution trace: an object with a \"nodes\" array",
        )
    })?;
    let mut out = Vec::with_capacity(nodes.len());
    let mut seen = BTreeSet::new();
    for (i, n) in nodes.iter().enumerate() {
        let at = || format!("nodes[{i}]");
        let id = n["id"]
            .as_u64()
            .ok_or_else(|| TraceError::new(file, at(), "an \"id\" (unsigned integer)"))?;
        if !seen.insert(id) {
            return Err(TraceError::new(
                file,
                at(),
                format!("node ids unique in the trace; {id} is used twice"),
            ));
        }
        let name = n["name"]
            .as_str()
            .ok_or_else(|| TraceError::new(file, at(), "a \"name\" (string)"))?
            .to_string();
        let parent = n["parent"]
            .as_u64()
            .or_else(|| n["ctrl_deps"].as_u64())
            .ok_or_else(|| {
                TraceError::new(
                    file,
                    format!("node {id} ({name})"),
                    "a parent (\"parent\" or \"ctrl_deps\", unsigned integer)",
                )
            })?;
        let values = input_field(n, "values").cloned().unwrap_or_default();
        let types = input_field(n, "types")
            .map(|t| {
                t.iter()
                    .map(|x| x.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default();
        let shapes = input_field(n, "shapes").cloned().unwrap_or_default();
        let pg_name = n["pg_name"].as_str().map(str::to_string).or_else(|| {
            n["attrs"].as_array().and_then(|a| {
                a.iter()
                    .find(|x| x["name"] == "pg_name")
                    .and_then(|x| x["value"].as_str().map(str::to_string))
            })
        });
        out.push(EtNode {
            id,
            name,
            parent,
            values,
            types,
            shapes,
            pg_name,
        });
    }
    Ok(out)
}

/// Process groups from `## process_group:init ##`: a JSON list of `{pg_name, ranks, ...}`
/// (empty `ranks`: every rank).
fn process_groups(nodes: &[EtNode], file: &str) -> Result<BTreeMap<String, Vec<u32>>, TraceError> {
    let mut groups = BTreeMap::new();
    for n in nodes
        .iter()
        .filter(|n| n.name == "## process_group:init ##")
    {
        let at = format!("node {} ({})", n.id, n.name);
        let text = n.values.first().and_then(Value::as_str).ok_or_else(|| {
            TraceError::new(file, &at, "the process groups as a JSON string input")
        })?;
        groups.extend(groups_from_json(text, file, &at)?);
    }
    Ok(groups)
}

/// PyTorch's process-group list, `[{"pg_name": .., "ranks": [..], ..}, ..]`, by name.
pub(super) fn groups_from_json(
    text: &str,
    file: &str,
    at: &str,
) -> Result<BTreeMap<String, Vec<u32>>, TraceError> {
    let list: Vec<Value> = serde_json::from_str(text)
        .map_err(|e| TraceError::new(file, at, format!("a JSON list of process groups ({e})")))?;
    let mut groups = BTreeMap::new();
    for g in list {
        let name = match &g["pg_name"] {
            Value::String(s) => s.clone(),
            Value::Number(x) => x.to_string(),
            _ => {
                return Err(TraceError::new(
                    file,
                    at,
                    "a pg_name in every process group",
                ))
            }
        };
        let ranks = g["ranks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64().map(|x| x as u32))
                    .collect()
            })
            .unwrap_or_default();
        groups.insert(name, ranks);
    }
    Ok(groups)
}

/// A tensor value: `[tensor id, storage id, offset, elements, bytes per element, device]`.
fn tensor(v: &Value) -> Option<(u64, u64, u64)> {
    let a = v.as_array()?;
    if a.len() < 5 || !a[..5].iter().all(Value::is_u64) {
        return None;
    }
    Some((a[1].as_u64()?, a[3].as_u64()?, a[4].as_u64()?))
}

/// (bytes, storages) of the tensors in one argument (a tensor or nested lists of them); a
/// tensor's elements come from its shape when the trace gives it.
pub(super) fn tensors_of(v: &Value, shape: Option<&Value>, out: &mut (u64, BTreeSet<u64>)) {
    if let Some((storage, numel, elem)) = tensor(v) {
        let from_shape = shape.and_then(Value::as_array).and_then(|dims| {
            dims.iter()
                .map(Value::as_u64)
                .try_fold(1u64, |p, d| d.and_then(|d| p.checked_mul(d)))
        });
        let n = from_shape.unwrap_or(numel);
        out.0 = out.0.saturating_add(n.saturating_mul(elem));
        out.1.insert(storage);
        return;
    }
    if let Some(items) = v.as_array() {
        let shapes = shape.and_then(Value::as_array);
        for (i, x) in items.iter().enumerate() {
            tensors_of(x, shapes.and_then(|s| s.get(i)), out);
        }
    }
}

fn arg_tensors(n: &EtNode, i: usize) -> (u64, BTreeSet<u64>) {
    let mut out = (0, BTreeSet::new());
    if let Some(v) = n.values.get(i) {
        tensors_of(v, n.shapes.get(i), &mut out);
    }
    out
}

fn storages_read(n: &EtNode) -> BTreeSet<u64> {
    let mut out = (0, BTreeSet::new());
    for (i, v) in n.values.iter().enumerate() {
        if n.types.get(i).is_none_or(|t| t.contains("Tensor")) {
            tensors_of(v, n.shapes.get(i), &mut out);
        }
    }
    out.1
}

fn int_arg(n: &EtNode, i: usize) -> Option<u32> {
    n.values
        .get(i)?
        .as_u64()
        .and_then(|x| u32::try_from(x).ok())
}

/// A `c10d::` operator as a trace node kind, with the storages of its buffers.
fn collective_of(n: &EtNode, file: &str) -> Result<Option<(NodeKind, BTreeSet<u64>)>, TraceError> {
    let Some(op) = n.name.strip_prefix("c10d::") else {
        return Ok(None);
    };
    let op = op.trim_matches('_');
    if op == "wait" || op.starts_with("monitored_barrier") {
        return Ok(None);
    }
    let at = || format!("node {} ({})", n.id, n.name);
    let group = n.pg_name.clone();
    let coll = |op: Collective, arg: usize, root: u32| {
        let (bytes, st) = arg_tensors(n, arg);
        (
            NodeKind::Collective {
                op,
                bytes,
                group: group.clone(),
                root,
            },
            st,
        )
    };
    let p2p = |send: bool| -> Result<(NodeKind, BTreeSet<u64>), TraceError> {
        let (bytes, st) = arg_tensors(n, 0);
        let peer = int_arg(n, 2)
            .ok_or_else(|| TraceError::new(file, at(), "the peer rank as the third input"))?;
        Ok((
            if send {
                NodeKind::Send { peer, bytes }
            } else {
                NodeKind::Recv { peer, bytes }
            },
            st,
        ))
    };
    let kind = match op {
        "allreduce" | "allreduce_coalesced" => coll(Collective::AllReduce, 0, 0),
        // (Tensor[][] outputs, Tensor[] inputs) and (Tensor output, Tensor input): the
        // gathered output is nccl-tests' size.
        "allgather" | "allgather_base" | "allgather_into_tensor_coalesced" => {
            coll(Collective::AllGather, 0, 0)
        }
        // (outputs, inputs): the input is nccl-tests' size.
        "reduce_scatter" | "reduce_scatter_base" | "reduce_scatter_tensor_coalesced" => {
            coll(Collective::ReduceScatter, 1, 0)
        }
        "broadcast" => coll(Collective::Broadcast, 0, int_arg(n, 2).unwrap_or(0)),
        "reduce" => coll(Collective::Reduce, 0, int_arg(n, 2).unwrap_or(0)),
        "alltoall" | "alltoall_base" => coll(Collective::AllToAll, 1, 0),
        // Played as the library runs it: gloo's dissemination barrier, OpenMPI's rules, on
        // NCCL (which has none) torch's all-reduce of one float.
        "barrier" => (
            NodeKind::Collective {
                op: Collective::Barrier,
                bytes: 0,
                group: group.clone(),
                root: 0,
            },
            BTreeSet::new(),
        ),
        "send" => p2p(true)?,
        "recv" | "recv_any_source" => p2p(false)?,
        other => {
            return Err(TraceError::new(
                file,
                at(),
                format!(
                    "a collective dtsim replays (allreduce, allgather, reduce_scatter, \
                     broadcast, reduce, alltoall, barrier, send, recv), not {other:?}"
                ),
            ))
        }
    };
    Ok(Some(kind))
}

/// A complete Kineto event on the step's thread.
struct Event {
    name: String,
    ts_us: f64,
    dur_us: f64,
}

fn kineto_top_level(k: &Value, step: &str, file: &str) -> Result<(Event, Vec<Event>), TraceError> {
    let events = match k {
        Value::Array(a) => a,
        _ => k["traceEvents"].as_array().ok_or_else(|| {
            TraceError::new(
                file,
                "traceEvents",
                "a Kineto / Chrome trace: a list of events or {\"traceEvents\": [...]}",
            )
        })?,
    };
    let complete = |e: &Value| e["ph"] == "X" && e["name"].is_string();
    let num = |e: &Value, f: &str| e[f].as_f64();
    let step_ev = events
        .iter()
        .find(|e| complete(e) && e["name"] == step)
        .ok_or_else(|| {
            TraceError::new(
                file,
                step,
                "the same ProfilerStep range as the execution trace (are they of one step?)",
            )
        })?;
    let (t0, d0) = (
        num(step_ev, "ts").unwrap_or(0.0),
        num(step_ev, "dur").unwrap_or(0.0),
    );
    let tid = &step_ev["tid"];
    let mut inside: Vec<Event> = events
        .iter()
        .filter(|e| complete(e) && &e["tid"] == tid && !std::ptr::eq(*e, step_ev))
        .filter_map(|e| {
            Some(Event {
                name: e["name"].as_str()?.to_string(),
                ts_us: num(e, "ts")?,
                dur_us: num(e, "dur")?,
            })
        })
        .filter(|e| e.ts_us >= t0 && e.ts_us + e.dur_us <= t0 + d0 && !is_library_span(&e.name))
        .collect();
    inside.sort_by(|a, b| {
        a.ts_us
            .total_cmp(&b.ts_us)
            .then(b.dur_us.total_cmp(&a.dur_us))
    });
    let mut top: Vec<Event> = Vec::new();
    for e in inside {
        if top.last().is_none_or(|t| e.ts_us >= t.ts_us + t.dur_us) {
            top.push(e);
        }
    }
    Ok((
        Event {
            name: step.to_string(),
            ts_us: t0,
            dur_us: d0,
        },
        top,
    ))
}

fn load_rank(
    et_path: &Path,
    kineto_path: &Path,
) -> Result<(RankTrace, BTreeMap<String, Vec<u32>>), TraceError> {
    let file = et_path.display().to_string();
    let kfile = kineto_path.display().to_string();
    let nodes = et_nodes(&read_json(et_path)?, &file)?;
    let groups = process_groups(&nodes, &file)?;
    let step = nodes
        .iter()
        .filter(|n| n.name.starts_with("ProfilerStep#"))
        .min_by_key(|n| n.id)
        .ok_or_else(|| {
            TraceError::new(
                &file,
                "ProfilerStep",
                "a ProfilerStep#<n> range around the recorded step (torch.profiler's \
                 schedule, or record_function(\"ProfilerStep#<n>\"))",
            )
        })?;
    let mut children: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.parent != n.id {
            children.entry(n.parent).or_default().push(i);
        }
    }
    for c in children.values_mut() {
        c.sort_by_key(|&i| nodes[i].id);
    }
    let top: Vec<usize> = children
        .get(&step.id)
        .map(|c| {
            c.iter()
                .copied()
                .filter(|&i| !is_library_span(&nodes[i].name))
                .collect()
        })
        .unwrap_or_default();
    let (step_ev, events) = kineto_top_level(&read_json(kineto_path)?, &step.name, &kfile)?;
    if let Some(k) = (0..top.len().max(events.len()))
        .find(|&k| top.get(k).map(|&i| &nodes[i].name) != events.get(k).map(|e| &e.name))
    {
        let name = |s: Option<&String>| s.map_or("nothing".to_string(), |s| format!("{s:?}"));
        return Err(TraceError::new(
            &kfile,
            format!("top-level operator {k} of {}", step.name),
            format!(
                "the operator the execution trace has there, {} (Kineto has {}): the two files \
                 must record the same step on the same rank",
                name(top.get(k).map(|&i| &nodes[i].name)),
                name(events.get(k).map(|e| &e.name)),
            ),
        ));
    }
    // Each top-level operator's subtree: the collectives it issues, the storages it reads.
    let subtree = |root: usize| {
        let mut stack = vec![root];
        let mut out = Vec::new();
        let mut visited = BTreeSet::new();
        while let Some(i) = stack.pop() {
            if !visited.insert(i) {
                continue; // parent links that loop: each node once
            }
            out.push(i);
            if let Some(c) = children.get(&nodes[i].id) {
                stack.extend(c.iter().copied());
            }
        }
        out.sort_by_key(|&i| nodes[i].id);
        out
    };
    let mut out: Vec<TraceNode> = Vec::new();
    // (collective node id, storages) issued and not yet waited for
    let mut in_flight: Vec<(u64, BTreeSet<u64>)> = Vec::new();
    let mut prev_end = step_ev.ts_us;
    let mut prev: Option<u64> = None;
    for (k, (&i, ev)) in top.iter().zip(&events).enumerate() {
        let sub = subtree(i);
        let reads: BTreeSet<u64> = sub.iter().flat_map(|&j| storages_read(&nodes[j])).collect();
        let mut deps: Vec<u64> = prev.into_iter().collect();
        let mut waits = false;
        in_flight.retain(|(id, st)| {
            if st.intersection(&reads).next().is_some() {
                deps.push(*id);
                waits = true;
                false
            } else {
                true
            }
        });
        let gap = if waits {
            0.0
        } else {
            (ev.ts_us - prev_end).max(0.0)
        };
        let tail = if k + 1 == top.len() {
            (step_ev.ts_us + step_ev.dur_us - (ev.ts_us + ev.dur_us)).max(0.0)
        } else {
            0.0
        };
        let id = nodes[i].id;
        out.push(TraceNode {
            id,
            name: nodes[i].name.clone(),
            kind: NodeKind::Compute {
                secs: (gap + ev.dur_us + tail) * 1e-6,
            },
            deps,
            lane: 0,
        });
        for &j in &sub {
            if let Some((kind, storages)) = collective_of(&nodes[j], &file)? {
                out.push(TraceNode {
                    id: nodes[j].id,
                    name: nodes[j].name.clone(),
                    kind,
                    deps: vec![id],
                    lane: 0,
                });
                in_flight.push((nodes[j].id, storages));
            }
        }
        prev = Some(id);
        prev_end = ev.ts_us + ev.dur_us;
    }
    Ok((
        RankTrace {
            file,
            nodes: out,
            recorded_step_secs: Some(step_ev.dur_us * 1e-6),
        },
        groups,
    ))
}
