//! Topology files (TOML) → [`Topology`].
//!
//! A file names the topology and either asks a generator for a parameterized family or lists
//! devices and links explicitly (exactly one of the two):
//!
//! ```toml
//! name = "two-gpus"                    # required
//! description = "free text"            # optional
//! gpu = "H100-SXM5"                    # optional: the GPU model (libraries read its generation)
//! library = "gloo"                     # optional: what the hosts run when a scenario names none
//! in_network_reduction = true          # optional: every network switch reduces in the network
//!                                      #   (InfiniBand SHARP; NCCL's CollNet runs on it)
//!
//! [generator]                          # EITHER a generator ...
//! kind = "ring"                        # see generators::GeneratorSpec for kinds and parameters
//! n = 10
//! link = { bandwidth = "10GB/s", latency = "1us", class = "ethernet" }
//!
//! [defaults.nvlink]                    # ... OR explicit lists; optional per-class link defaults
//! latency = "700ns"
//! buffer = "1MiB"
//!
//! [[device]]
//! name = "gpu{i}"                      # with count: "{i}" is replaced by 0..count
//! kind = "gpu"                         # gpu | nic | nvswitch | pcie_switch | host | switch
//! node = 0                             # optional server index
//! forwards = false                     # optional; default per kind (GPUs do not forward)
//! staged_via = "host0"                 # optional, GPUs without peer-to-peer: the device whose
//!                                      #   memory stages their transfers to each other
//! in_network_reduction = true          # optional, kind = "switch" only: it reduces (SHARP)
//! count = 2                            # optional; expands to gpu0, gpu1
//!
//! [[link]]
//! a = "gpu0"
//! b = "gpu1"
//! bandwidth = "300GB/s"                # per direction, required
//! latency = "1us"                      # optional; else [defaults.<class>].latency; else 0
//! buffer = "1MiB"                      # optional; else [defaults.<class>].buffer; else per class
//! class = "nvlink"                     # required: nvlink | pcie | smp | ib | ethernet | other
//! count = 2                            # optional: parallel links bundled into one
//! ```
//!
//! `count` on a link bundles that many identical parallel links into one full-duplex link whose
//! bandwidth and buffer are `count` times those given (latency is unchanged): flows share the
//! bundle as if packets were sprayed over its members.
//!
//! Every error names the file (with `:line:column` where the TOML text locates it), the field
//! path (`link[3].bandwidth`, `device[2].kind`, `generator.n`) and what was expected.
//! [`load_with_overrides`] merges a table of overrides (a scenario's `--set topology.x=y`)
//! into the file before reading it; locations then refer to the merged text, so only the field
//! path is given.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize as DeriveDeserialize;

use super::generators::{default_buffer_bytes, GeneratorSpec};
use super::{DeviceId, DeviceKind, LinkClass, LinkSpec, Topology, TopologyError};
use crate::engine::SimTime;
use crate::toml_spans::{backticked_after, SpanTree};
use crate::units::{Bandwidth, Bytes, Duration};

/// A whole topology file.
#[derive(Debug, Clone, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The GPU model of every GPU in the file, as the vendor names it (`"H100-SXM5"`,
    /// `"A100-SXM4"`, `"V100-SXM2"`, `"RTX 2080 Ti"`): communication libraries read their
    /// constants by GPU generation from it, and a GPU topology that names it defaults to
    /// `library = "nccl"`.
    #[serde(default)]
    pub gpu: Option<String>,
    /// The communication library the topology's hosts run when a scenario names none
    /// (`"gloo"` on the testbed's CPU hosts); checked against the library names when a scenario
    /// is prepared.
    #[serde(default)]
    pub library: Option<String>,
    /// Every network switch (`kind = "switch"`) reduces the streams through it, as InfiniBand
    /// switches with SHARP do ([`super::reduction`]); `[[device]]` entries can say it per switch.
    #[serde(default)]
    pub in_network_reduction: Option<bool>,
    #[serde(default)]
    pub generator: Option<GeneratorSpec>,
    #[serde(default)]
    pub defaults: Option<ClassDefaultsTable>,
    #[serde(default)]
    pub device: Vec<DeviceEntry>,
    #[serde(default)]
    pub link: Vec<LinkEntry>,
}

/// `[defaults.<class>]`: values for links of that class that do not give their own.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDefaultsTable {
    pub nvlink: Option<ClassDefaults>,
    pub pcie: Option<ClassDefaults>,
    pub smp: Option<ClassDefaults>,
    pub ib: Option<ClassDefaults>,
    pub ethernet: Option<ClassDefaults>,
    pub other: Option<ClassDefaults>,
}

impl ClassDefaultsTable {
    pub fn get(&self, class: LinkClass) -> Option<&ClassDefaults> {
        match class {
            LinkClass::Nvlink => self.nvlink.as_ref(),
            LinkClass::Pcie => self.pcie.as_ref(),
            LinkClass::Smp => self.smp.as_ref(),
            LinkClass::Ib => self.ib.as_ref(),
            LinkClass::Ethernet => self.ethernet.as_ref(),
            LinkClass::Other => self.other.as_ref(),
        }
    }
}

/// Defaults for the links of one class.
#[derive(Debug, Clone, Copy, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDefaults {
    pub latency: Option<Duration>,
    pub buffer: Option<Bytes>,
}

/// One `[[device]]` entry (several devices when `count` is given).
#[derive(Debug, Clone, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    pub name: String,
    pub kind: DeviceKind,
    #[serde(default)]
    pub node: Option<u32>,
    #[serde(default)]
    pub forwards: Option<bool>,
    /// GPUs without peer-to-peer: the device (a host) whose memory stages their transfers to
    /// the other GPUs staged via it ([`super::Device::staged_via`]).
    #[serde(default)]
    pub staged_via: Option<String>,
    /// A network switch that reduces in the network (SHARP).
    #[serde(default)]
    pub in_network_reduction: Option<bool>,
    #[serde(default)]
    pub count: Option<u32>,
}

/// One `[[link]]` entry: a full-duplex link, alike in both directions.
#[derive(Debug, Clone, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry {
    pub a: String,
    pub b: String,
    /// Per direction.
    pub bandwidth: Bandwidth,
    #[serde(default)]
    pub latency: Option<Duration>,
    #[serde(default)]
    pub buffer: Option<Bytes>,
    pub class: LinkClass,
    /// Parallel links bundled into one (bandwidth and buffer multiplied).
    #[serde(default)]
    pub count: Option<u32>,
}

/// Reads and builds the topology file at `path`.
pub fn load(path: &Path) -> Result<Topology, TopologyError> {
    load_with_overrides(path, &toml::Table::new())
}

/// Builds a topology from the text of a file; `origin` (usually its path) is named in errors.
pub fn parse_str(text: &str, origin: &str) -> Result<Topology, TopologyError> {
    parse_with_overrides(text, origin, &toml::Table::new())
}

/// Reads the file at `path`, deep-merges `overrides` into it (see [`merge_toml`]) and builds it.
pub fn load_with_overrides(
    path: &Path,
    overrides: &toml::Table,
) -> Result<Topology, TopologyError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TopologyError {
        file: Some(origin.clone()),
        field: "(file)".into(),
        expected: format!("a readable UTF-8 topology file ({e})"),
    })?;
    parse_with_overrides(&text, &origin, overrides)
}

/// Merges `over` into `base`: tables merge key by key, recursively; any other value (including
/// arrays) replaces the one in `base`.
pub fn merge_toml(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge_toml(b, o),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

fn parse_with_overrides(
    text: &str,
    origin: &str,
    overrides: &toml::Table,
) -> Result<Topology, TopologyError> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| TopologyError {
        file: Some(located(origin, text, e.span())),
        field: "(toml syntax)".into(),
        expected: format!("valid TOML: {}", e.message().trim().replace('\n', "; ")),
    })?;
    // Locations are only meaningful in the text as written.
    let (merged, locate) = if overrides.is_empty() {
        (text.to_string(), true)
    } else {
        merge_toml(&mut table, overrides);
        let merged = toml::to_string(&table).map_err(|e| TopologyError {
            file: Some(origin.to_string()),
            field: "(overrides)".into(),
            expected: format!("overrides that form a valid TOML document ({e})"),
        })?;
        (merged, false)
    };
    let source = Source {
        origin,
        text: &merged,
        locate,
        tree: SpanTree::parse(&merged),
    };
    let file: TopologyFile = toml::from_str(&merged).map_err(|e| source.serde_error(&e))?;
    let mut topo = build(&file, origin).map_err(|e| source.attach(e))?;
    topo.gpu = file.gpu.clone().filter(|g| !g.trim().is_empty());
    topo.library = file.library.clone().filter(|l| !l.trim().is_empty());
    if file.in_network_reduction == Some(true) {
        let switches = topo
            .devices
            .iter_mut()
            .filter(|d| d.kind == DeviceKind::Switch)
            .map(|d| d.in_network_reduction = true)
            .count();
        if switches == 0 {
            return Err(source.attach(TopologyError::new(
                "in_network_reduction",
                "network switches (kind = \"switch\") to reduce in; this topology has none",
            )));
        }
    }
    Ok(topo)
}

/// The text being read, to turn byte spans into `file:line:column` and field paths.
struct Source<'a> {
    origin: &'a str,
    text: &'a str,
    locate: bool,
    tree: Option<SpanTree>,
}

impl Source<'_> {
    fn file_at(&self, span: Option<Range<usize>>) -> String {
        if self.locate {
            located(self.origin, self.text, span)
        } else {
            self.origin.to_string()
        }
    }

    fn serde_error(&self, e: &toml::de::Error) -> TopologyError {
        let message = e.message().trim().to_string();
        let mut span = e.span();
        let path = match (&self.tree, e.span()) {
            // An empty span is the document itself (a missing top-level field).
            (Some(_), Some(s)) if s.is_empty() => None,
            (Some(tree), Some(s)) => tree.path_at(s.start).map(|raw| {
                let refined = tree.refine(&raw, &message, self.text);
                if refined != raw {
                    span = tree.span_of(&refined).or(span.clone());
                }
                refined
            }),
            _ => None,
        };
        let mut field = path.unwrap_or_default();
        let mut expected = message.clone();
        // "missing field `x`" is reported on the table; name the field itself.
        if let Some(missing) = backticked_after(&message, "missing field ") {
            field = join_path(&field, missing);
            expected = format!("a value for `{missing}` (required)");
        }
        if field.is_empty() {
            field = "(top level)".into();
        }
        TopologyError {
            file: Some(self.file_at(span)),
            field,
            expected,
        }
    }

    /// Adds the file, located at `e.field` when the text has it.
    fn attach(&self, mut e: TopologyError) -> TopologyError {
        let span = self.tree.as_ref().and_then(|t| t.span_of(&e.field));
        if e.file.is_none() {
            e.file = Some(self.file_at(span));
        }
        e
    }
}

fn join_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `origin:line:column` for the start of `span` (1-based), or `origin` alone.
fn located(origin: &str, text: &str, span: Option<Range<usize>>) -> String {
    match span {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!("{origin}:{line}:{col}")
        }
        None => origin.to_string(),
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut col = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line, col)
}

const INDEX_TOKEN: &str = "{i}";

/// A generator's `node_file`, relative to the directory of the file naming it (`origin`).
fn load_node_file(origin: &str, node_file: &str) -> Result<Topology, TopologyError> {
    let dir = Path::new(origin).parent().unwrap_or(Path::new("."));
    let path = dir.join(node_file);
    load(&path).map_err(|e| {
        TopologyError::new(
            "generator.node_file",
            format!(
                "a server topology file that builds; {} gave: {e}",
                path.display()
            ),
        )
    })
}

/// Turns a deserialized file into a validated topology. Errors carry field paths, no file;
/// `origin` locates a generator's `node_file`.
fn build(file: &TopologyFile, origin: &str) -> Result<Topology, TopologyError> {
    if file.name.trim().is_empty() {
        return Err(TopologyError::new("name", "a non-empty topology name"));
    }
    let has_lists = !file.device.is_empty() || !file.link.is_empty() || file.defaults.is_some();
    match (&file.generator, has_lists) {
        (Some(_), true) => Err(TopologyError::new(
            "generator",
            "either a [generator] table or [[device]]/[[link]]/[defaults] lists, not both",
        )),
        (Some(spec), false) => match spec.node_file() {
            Some(node_file) => {
                let node = load_node_file(origin, node_file)?;
                spec.build_with_node(&file.name, Some(&node))
            }
            None => spec.build(&file.name),
        },
        (None, false) => Err(TopologyError::new(
            "device",
            "a [generator] table or [[device]] and [[link]] lists; the file has neither",
        )),
        (None, true) => build_lists(file),
    }
}

fn at_least_one(field: String, count: Option<u32>) -> Result<u32, TopologyError> {
    match count {
        None => Ok(1),
        Some(0) => Err(TopologyError::new(field, "a count of at least 1, got 0")),
        Some(c) => Ok(c),
    }
}

fn build_lists(file: &TopologyFile) -> Result<Topology, TopologyError> {
    let mut b = Topology::builder(file.name.clone());
    // Device name → (id, index of the [[device]] entry that made it).
    let mut by_name: BTreeMap<String, (DeviceId, usize)> = BTreeMap::new();
    for (i, d) in file.device.iter().enumerate() {
        if d.name.trim().is_empty() {
            return Err(TopologyError::new(
                format!("device[{i}].name"),
                "a non-empty device name",
            ));
        }
        let templated = d.name.contains(INDEX_TOKEN);
        let count = at_least_one(format!("device[{i}].count"), d.count)?;
        match (d.count.is_some(), templated) {
            (true, false) => {
                return Err(TopologyError::new(
                    format!("device[{i}].name"),
                    format!(
                        "a name containing \"{{i}}\" when count is given (got {:?}), \
                         e.g. \"gpu{{i}}\"",
                        d.name
                    ),
                ))
            }
            (false, true) => {
                return Err(TopologyError::new(
                    format!("device[{i}].name"),
                    format!(
                        "a plain name, or a count with a name containing \"{{i}}\" \
                         (got {:?} without count)",
                        d.name
                    ),
                ))
            }
            _ => {}
        }
        let total = by_name.len() as u64 + count as u64;
        if total > super::generators::MAX_GENERATED_DEVICES {
            return Err(TopologyError::new(
                format!("device[{i}].count"),
                format!(
                    "at most {} devices in all, got {total}",
                    super::generators::MAX_GENERATED_DEVICES
                ),
            ));
        }
        for k in 0..count {
            let name = if templated {
                d.name.replace(INDEX_TOKEN, &k.to_string())
            } else {
                d.name.clone()
            };
            if let Some(&(_, first)) = by_name.get(&name) {
                return Err(TopologyError::new(
                    format!("device[{i}].name"),
                    format!("a unique device name; {name:?} is also made by device[{first}]"),
                ));
            }
            let id = b.add_device(name.clone(), d.kind, d.node);
            b.set_forwards(id, d.forwards.unwrap_or(d.kind.forwards_by_default()));
            if let Some(on) = d.in_network_reduction {
                if on && d.kind != DeviceKind::Switch {
                    return Err(TopologyError::new(
                        format!("device[{i}].in_network_reduction"),
                        format!(
                            "in-network reduction on a network switch (kind = \"switch\") only, \
                             got it on a {}",
                            d.kind
                        ),
                    ));
                }
                b.set_in_network_reduction(id, on);
            }
            by_name.insert(name, (id, i));
        }
    }
    // Staging devices may be listed after the GPUs that name them.
    for (name, &(id, i)) in &by_name {
        let Some(via) = &file.device[i].staged_via else {
            continue;
        };
        match by_name.get(via) {
            Some(&(via_id, _)) if via_id != id => b.set_staged_via(id, via_id),
            _ => {
                return Err(TopologyError::new(
                    format!("device[{i}].staged_via"),
                    format!(
                        "the name of another device in [[device]] (the host whose memory \
                         stages {name:?}'s transfers); got {via:?}"
                    ),
                ))
            }
        }
    }
    let defaults = file.defaults.clone().unwrap_or_default();
    for (j, l) in file.link.iter().enumerate() {
        let end = |side: &str, name: &str| -> Result<DeviceId, TopologyError> {
            by_name.get(name).map(|&(id, _)| id).ok_or_else(|| {
                TopologyError::new(
                    format!("link[{j}].{side}"),
                    format!("the name of a device in [[device]]; no device is named {name:?}"),
                )
            })
        };
        let a = end("a", &l.a)?;
        let b_end = end("b", &l.b)?;
        if a == b_end {
            return Err(TopologyError::new(
                format!("link[{j}].b"),
                format!("a device other than link[{j}].a ({:?})", l.a),
            ));
        }
        let count = at_least_one(format!("link[{j}].count"), l.count)?;
        let class_defaults = defaults.get(l.class).copied().unwrap_or_default();
        let latency = l
            .latency
            .or(class_defaults.latency)
            .map(|d| d.0)
            .unwrap_or(SimTime::ZERO);
        let buffer_bytes = l
            .buffer
            .or(class_defaults.buffer)
            .map(|b| b.0)
            .unwrap_or_else(|| default_buffer_bytes(l.class));
        let buffer_bytes = buffer_bytes.checked_mul(count as u64).ok_or_else(|| {
            TopologyError::new(
                format!("link[{j}].buffer"),
                "a buffer that times count fits in 64 bits",
            )
        })?;
        let bandwidth_bps = l.bandwidth.bits_per_s() * count as f64;
        crate::limits::bandwidth_bps(bandwidth_bps)
            .map_err(|e| TopologyError::new(format!("link[{j}].bandwidth (times count)"), e))?;
        b.add_link(
            a,
            b_end,
            LinkSpec {
                bandwidth_bps,
                latency,
                buffer_bytes,
                class: l.class,
            },
        );
    }
    b.build()
}

#[cfg(test)]
mod tests;
