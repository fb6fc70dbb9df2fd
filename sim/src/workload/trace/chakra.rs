//! MLCommons Chakra execution traces: one protobuf file per rank, `<name>.<rank>.et`, as
//! ASTRA-sim replays them. A file is a `GlobalMetadata` message followed by `Node` messages,
//! each preceded by its length as a varint (schema: `sim/proto/chakra/et_def.proto`,
//! messages: `super::chakra_pb`, decoded by prost).
//!
//! Reading, node by node type:
//! - `COMP_NODE`, `MEM_LOAD_NODE`, `MEM_STORE_NODE`: compute for `duration_micros`; a node
//!   whose `is_cpu_op` attribute is false runs on the rank's device lane (1), others on the
//!   host lane (0);
//! - `COMM_COLL_NODE`: `comm_type` (`CollectiveCommType`; from the node name as Chakra's
//!   converter does when absent), `comm_size` in bytes (nccl-tests' size: all-gather's
//!   gathered output; from the `inputs` tensors when absent), `pg_name`, `root`;
//! - `COMM_SEND_NODE` / `COMM_RECV_NODE`: `comm_dst` / `comm_src`, `comm_size`;
//! - `METADATA_NODE`: a zero-time join; `## process_group:init ##` defines the process groups
//!   (its input: a JSON list of `{pg_name, ranks}`, as PyTorch records it);
//! - `INVALID_NODE` or a type the schema does not define: an error naming the node.
//!
//! Dependencies are `data_deps`, as ASTRA-sim's feeder reads them (`ctrl_deps` are PyTorch's
//! caller links). [`write_dir`] writes a [`TraceSet`] back in the same form, so a PyTorch
//! pair converts to the files ASTRA-sim reads.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

use super::chakra_pb::{
    attribute_proto::Value as Attr, AttributeProto, GlobalMetadata, IoInfo, Node,
};
use super::chakra_pb::{CollectiveCommType, NodeType};
use super::{dir_names, rank_files, NodeKind, RankTrace, TraceError, TraceNode, TraceSet};
use crate::collective::Collective;

const PG_INIT: &str = "## process_group:init ##";

pub fn load_dir(dir: &Path) -> Result<TraceSet, TraceError> {
    let names = dir_names(dir)?;
    let rank_of = |n: &str| -> Option<u32> {
        let stem = n.strip_suffix(".et")?;
        stem.rsplit('.').next()?.parse().ok()
    };
    let files = rank_files(dir, &names, rank_of, "<name>.<rank>.et")?;
    let mut ranks = Vec::new();
    let mut groups = BTreeMap::new();
    for f in &files {
        let bytes = std::fs::read(f).map_err(|e| {
            TraceError::new(
                f.display().to_string(),
                "file",
                format!("a readable file ({e})"),
            )
        })?;
        let (rank, pgs) = parse(&bytes, &f.display().to_string())?;
        for (k, v) in pgs {
            groups.entry(k).or_insert(v);
        }
        ranks.push(rank);
    }
    let stem = files[0]
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".et"))
        .and_then(|n| n.rsplit_once('.'))
        .map(|(s, _)| s.to_string())
        .unwrap_or_else(|| dir.display().to_string());
    Ok(TraceSet {
        name: stem,
        format: "chakra",
        ranks,
        groups,
    })
}

/// One rank's trace from the bytes of its `.et` file.
pub fn parse(
    mut buf: &[u8],
    file: &str,
) -> Result<(RankTrace, BTreeMap<String, Vec<u32>>), TraceError> {
    let total = buf.len();
    let at = |rest: &[u8]| format!("byte {}", total - rest.len());
    let meta = GlobalMetadata::decode_length_delimited(&mut buf).map_err(|e| {
        TraceError::new(
            file,
            "GlobalMetadata at byte 0",
            format!(
                "a Chakra execution trace starting with its length-delimited GlobalMetadata ({e})"
            ),
        )
    })?;
    let recorded = duration_of(&meta);
    let mut nodes = Vec::new();
    let mut groups = BTreeMap::new();
    while !buf.is_empty() {
        let where_ = at(buf);
        let n = Node::decode_length_delimited(&mut buf).map_err(|e| {
            TraceError::new(
                file,
                format!("node message at {where_}"),
                format!("a complete length-delimited Chakra Node ({e}); is the file truncated?"),
            )
        })?;
        let node_at = || format!("node {} ({})", n.id, n.name);
        let ty = NodeType::try_from(n.r#type).map_err(|_| {
            TraceError::new(
                file,
                node_at(),
                format!(
                    "a node type of the Chakra schema (1 METADATA_NODE .. 7 COMM_COLL_NODE), got {}",
                    n.r#type
                ),
            )
        })?;
        let secs = n.duration_micros as f64 * 1e-6;
        let kind = match ty {
            NodeType::InvalidNode => {
                return Err(TraceError::new(
                    file,
                    node_at(),
                    "a valid node type (INVALID_NODE is the schema's unset value)",
                ))
            }
            NodeType::MetadataNode => {
                if n.name == PG_INIT {
                    groups = process_groups(&n, file)?;
                }
                NodeKind::Compute { secs: 0.0 }
            }
            NodeType::CompNode | NodeType::MemLoadNode | NodeType::MemStoreNode => {
                NodeKind::Compute { secs }
            }
            NodeType::CommCollNode => {
                let op = match int_attr(&n, "comm_type") {
                    Some(t) => comm_type(t).ok_or_else(|| {
                        TraceError::new(
                            file,
                            format!("{}: comm_type", node_at()),
                            format!(
                                "a collective dtsim replays (ALL_REDUCE, REDUCE, ALL_GATHER, \
                                 BROADCAST, ALL_TO_ALL, REDUCE_SCATTER, BARRIER), got {t}"
                            ),
                        )
                    })?,
                    None => comm_type_from_name(&n.name).ok_or_else(|| {
                        TraceError::new(
                            file,
                            node_at(),
                            "a comm_type attribute (or a name naming the collective)",
                        )
                    })?,
                };
                let barrier = op == Collective::Barrier;
                NodeKind::Collective {
                    op,
                    bytes: if barrier { 0 } else { size(&n, file)? },
                    group: string_attr(&n, "pg_name"),
                    root: int_attr(&n, "root")
                        .and_then(|r| u32::try_from(r).ok())
                        .unwrap_or(0),
                }
            }
            NodeType::CommSendNode | NodeType::CommRecvNode => {
                let send = ty == NodeType::CommSendNode;
                let field = if send { "comm_dst" } else { "comm_src" };
                let peer = int_attr(&n, field)
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| {
                        TraceError::new(file, format!("{}: {field}", node_at()), "the peer rank")
                    })?;
                let bytes = size(&n, file)?;
                if send {
                    NodeKind::Send { peer, bytes }
                } else {
                    NodeKind::Recv { peer, bytes }
                }
            }
        };
        let device =
            matches!(kind, NodeKind::Compute { .. }) && bool_attr(&n, "is_cpu_op") == Some(false);
        nodes.push(TraceNode {
            id: n.id,
            name: n.name.clone(),
            kind,
            deps: n.data_deps.clone(),
            lane: u16::from(device),
        });
    }
    Ok((
        RankTrace {
            file: file.to_string(),
            nodes,
            recorded_step_secs: recorded,
        },
        groups,
    ))
}

/// The step time a trace's metadata records (`recorded_step_micros`, written by dtsim).
fn duration_of(meta: &GlobalMetadata) -> Option<f64> {
    meta.attr
        .iter()
        .find(|a| a.name == "recorded_step_micros")
        .and_then(|a| attr_f64(a.value.as_ref()?))
        .map(|us| us * 1e-6)
}

fn attr_f64(v: &Attr) -> Option<f64> {
    Some(match *v {
        Attr::DoubleVal(x) => x,
        Attr::FloatVal(x) => x as f64,
        _ => attr_i64(v)? as f64,
    })
}

fn attr_i64(v: &Attr) -> Option<i64> {
    Some(match *v {
        Attr::Int32Val(x) | Attr::Sint32Val(x) | Attr::Sfixed32Val(x) => x as i64,
        Attr::Int64Val(x) | Attr::Sint64Val(x) | Attr::Sfixed64Val(x) => x,
        Attr::Uint32Val(x) | Attr::Fixed32Val(x) => x as i64,
        Attr::Uint64Val(x) | Attr::Fixed64Val(x) => i64::try_from(x).ok()?,
        _ => return None,
    })
}

fn find<'a>(n: &'a Node, name: &str) -> Option<&'a Attr> {
    n.attr.iter().find(|a| a.name == name)?.value.as_ref()
}

fn int_attr(n: &Node, name: &str) -> Option<i64> {
    attr_i64(find(n, name)?)
}

fn string_attr(n: &Node, name: &str) -> Option<String> {
    match find(n, name)? {
        Attr::StringVal(s) => Some(s.clone()),
        v => attr_i64(v).map(|x| x.to_string()),
    }
}

fn bool_attr(n: &Node, name: &str) -> Option<bool> {
    match find(n, name)? {
        Attr::BoolVal(b) => Some(*b),
        _ => None,
    }
}

fn comm_type(t: i64) -> Option<Collective> {
    let t = CollectiveCommType::try_from(i32::try_from(t).ok()?).ok()?;
    Some(match t {
        CollectiveCommType::AllReduce => Collective::AllReduce,
        CollectiveCommType::Barrier => Collective::Barrier,
        CollectiveCommType::Reduce => Collective::Reduce,
        CollectiveCommType::AllGather => Collective::AllGather,
        CollectiveCommType::Broadcast => Collective::Broadcast,
        CollectiveCommType::AllToAll => Collective::AllToAll,
        CollectiveCommType::ReduceScatter | CollectiveCommType::ReduceScatterBlock => {
            Collective::ReduceScatter
        }
        CollectiveCommType::Gather | CollectiveCommType::Scatter => return None,
    })
}

/// Chakra's converter's rule: the collective the (normalized) name contains.
fn comm_type_from_name(name: &str) -> Option<Collective> {
    let n = name.replace(['_', '-'], "").to_lowercase();
    [
        ("allreduce", Collective::AllReduce),
        ("alltoall", Collective::AllToAll),
        ("allgather", Collective::AllGather),
        ("reducescatter", Collective::ReduceScatter),
        ("broadcast", Collective::Broadcast),
        ("barrier", Collective::Barrier),
    ]
    .into_iter()
    .find(|(k, _)| n.contains(k))
    .map(|(_, c)| c)
}

/// `comm_size`, else the bytes of the tensors in the node's inputs (older converters).
fn size(n: &Node, file: &str) -> Result<u64, TraceError> {
    if let Some(s) = int_attr(n, "comm_size") {
        return u64::try_from(s).map_err(|_| {
            TraceError::new(
                file,
                format!("node {} ({}): comm_size", n.id, n.name),
                format!("a size in bytes, at least 0, got {s}"),
            )
        });
    }
    let parsed = n.inputs.as_ref().and_then(|io| {
        let values = python_literal(&io.values)?;
        let shapes = python_literal(&io.shapes);
        let mut out = (0, Default::default());
        super::pytorch::tensors_of(&values, shapes.as_ref(), &mut out);
        (out.0 > 0).then_some(out.0)
    });
    parsed.ok_or_else(|| {
        TraceError::new(
            file,
            format!("node {} ({})", n.id, n.name),
            "a comm_size attribute (bytes) or tensors in its inputs",
        )
    })
}

/// A Python literal as Chakra's converter writes `inputs.values` (`str()` of a list), read as
/// JSON: single quotes become double quotes, `True`/`False`/`None` their JSON spellings.
fn python_literal(s: &str) -> Option<serde_json::Value> {
    let json = s
        .replace('\'', "\"")
        .replace("True", "true")
        .replace("False", "false")
        .replace("None", "null");
    serde_json::from_str(&json).ok()
}

fn process_groups(n: &Node, file: &str) -> Result<BTreeMap<String, Vec<u32>>, TraceError> {
    let at = format!("node {} ({})", n.id, n.name);
    let text = n.inputs.as_ref().map(|i| i.values.trim()).unwrap_or("");
    // PyTorch's converter writes str(["<json>"]): unwrap the one-string list.
    let inner = text
        .strip_prefix("['")
        .and_then(|t| t.strip_suffix("']"))
        .unwrap_or(text);
    super::pytorch::groups_from_json(inner, file, &at)
}

fn attr(name: &str, value: Attr) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        doc_string: String::new(),
        value: Some(value),
    }
}

fn comm_type_of(c: Collective) -> CollectiveCommType {
    match c {
        Collective::AllReduce => CollectiveCommType::AllReduce,
        Collective::ReduceScatter => CollectiveCommType::ReduceScatter,
        Collective::AllGather => CollectiveCommType::AllGather,
        Collective::Broadcast => CollectiveCommType::Broadcast,
        Collective::Reduce => CollectiveCommType::Reduce,
        Collective::AllToAll | Collective::SendRecv => CollectiveCommType::AllToAll,
        Collective::Barrier => CollectiveCommType::Barrier,
    }
}

/// One rank's `.et` bytes.
pub fn encode(rank: &RankTrace, groups: &BTreeMap<String, Vec<u32>>, source: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut meta = vec![
        attr(
            "schema",
            Attr::StringVal("chakra 0.0.4, written by dtsim".into()),
        ),
        attr("source", Attr::StringVal(source.to_string())),
    ];
    if let Some(s) = rank.recorded_step_secs {
        meta.push(attr("recorded_step_micros", Attr::DoubleVal(s * 1e6)));
    }
    GlobalMetadata {
        version: "0.0.4".into(),
        attr: meta,
    }
    .encode_length_delimited(&mut out)
    .expect("a Vec grows");
    let mut nodes: Vec<Node> = Vec::with_capacity(rank.nodes.len() + 1);
    if !groups.is_empty() {
        let list: Vec<serde_json::Value> = groups
            .iter()
            .map(|(k, v)| serde_json::json!({"pg_name": k, "ranks": v, "group_size": v.len()}))
            .collect();
        nodes.push(Node {
            id: rank.nodes.iter().map(|n| n.id).max().unwrap_or(0) + 1,
            name: PG_INIT.into(),
            r#type: NodeType::MetadataNode as i32,
            inputs: Some(IoInfo {
                values: serde_json::Value::Array(list).to_string(),
                shapes: String::new(),
                types: "String".into(),
            }),
            ..Default::default()
        });
    }
    for n in &rank.nodes {
        let mut node = Node {
            id: n.id,
            name: n.name.clone(),
            data_deps: n.deps.clone(),
            ..Default::default()
        };
        match &n.kind {
            NodeKind::Compute { secs } => {
                node.r#type = NodeType::CompNode as i32;
                node.duration_micros = (secs * 1e6).round() as u64;
                node.attr
                    .push(attr("is_cpu_op", Attr::BoolVal(n.lane == 0)));
            }
            NodeKind::Collective {
                op,
                bytes,
                group,
                root,
            } => {
                node.r#type = NodeType::CommCollNode as i32;
                node.attr
                    .push(attr("comm_type", Attr::Int64Val(comm_type_of(*op) as i64)));
                node.attr
                    .push(attr("comm_size", Attr::Int64Val(*bytes as i64)));
                if let Some(g) = group {
                    node.attr.push(attr("pg_name", Attr::StringVal(g.clone())));
                }
                if *root != 0 {
                    node.attr.push(attr("root", Attr::Int64Val(*root as i64)));
                }
            }
            NodeKind::Send { peer, bytes } | NodeKind::Recv { peer, bytes } => {
                let send = matches!(n.kind, NodeKind::Send { .. });
                node.r#type = if send {
                    NodeType::CommSendNode
                } else {
                    NodeType::CommRecvNode
                } as i32;
                let field = if send { "comm_dst" } else { "comm_src" };
                node.attr.push(attr(field, Attr::Int64Val(*peer as i64)));
                node.attr
                    .push(attr("comm_size", Attr::Int64Val(*bytes as i64)));
            }
        }
        nodes.push(node);
    }
    for n in nodes {
        n.encode_length_delimited(&mut out).expect("a Vec grows");
    }
    out
}

/// Writes `set` as `<out>/<name>.<rank>.et`, each file atomically; returns the paths.
pub fn write_dir(
    set: &TraceSet,
    out: &Path,
    name: &str,
) -> Result<Vec<std::path::PathBuf>, TraceError> {
    let fail = |p: &Path, e: std::io::Error| {
        TraceError::new(
            p.display().to_string(),
            "file",
            format!("a writable path ({e})"),
        )
    };
    std::fs::create_dir_all(out).map_err(|e| fail(out, e))?;
    let source = format!("{} trace {}", set.format, set.name);
    let mut paths = Vec::new();
    for (r, rank) in set.ranks.iter().enumerate() {
        let path = out.join(format!("{name}.{r}.et"));
        let tmp = out.join(format!(".{name}.{r}.et.tmp"));
        std::fs::write(&tmp, encode(rank, &set.groups, &source)).map_err(|e| fail(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| fail(&path, e))?;
        paths.push(path);
    }
    Ok(paths)
}
