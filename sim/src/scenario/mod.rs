//! Scenario files: one experiment each (topology + placement + collective + network model +
//! profile + seed + outputs), and `--set key=value` overrides.
//!
//! ```toml
//! name = "quickstart"
//! seed = 1
//! [topology]
//! file = "../topologies/ring10_10GBps.toml"   # relative to this file
//! # any other key overrides the topology file, e.g. [topology.generator] n = 16
//! [placement]
//! strategy = "rank_ordered"                    # rank_ordered | random | explicit
//! ranks = 10                                   # default: every GPU
//! [collective]
//! op = "all_reduce"
//! bytes = "1GiB"
//! algorithm = "ring"                           # ring | hierarchical | double_binary_tree |
//! permutations = [0, 5]                        #   halving_doubling | parameter_server | direct
//! [network]
//! model = "flow"                               # flow | packet
//! # packet model only (ignored by the flow model):
//! mode = "lossless"                            # lossless | lossy
//! mtu = { ethernet = "9000B" }                 # per link class; default 1500 B Ethernet, 4 KiB others
//! high_water = 0.9                             # lossless: pause feeders at this buffer fraction
//! low_water = 0.7                              #   ... and resume at this one
//! retransmit_timeout = "100us"                 # lossy: drop to retransmission
//! window = "64KiB"                             # bytes in flight per flow (default: none)
//! congestion_control = "none"                  # lossy: none | aimd
//! ```
//!
//! Loading never panics: every problem is a [`ScenarioError`] naming the file, the field and
//! what was expected.

pub mod fit_nccl;
pub mod run;
pub mod size_sweep;
pub mod sweep;
pub mod trace;
pub mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::collective::{Algorithm, Collective, CollectiveSpec, RingOrder};
use crate::library::{Library, LibraryOptions};
use crate::net::packet::{CongestionControl, PacketConfig, SwitchMode};
use crate::topology::LinkClass;
use crate::units::{Bytes, Duration};

/// A scenario problem: which file, which field, what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {expected}")]
pub struct ScenarioError {
    pub file: String,
    pub field: String,
    pub expected: String,
}

impl ScenarioError {
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        ScenarioError {
            file: file.into(),
            field: field.into(),
            expected: expected.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementStrategy {
    /// Rank i on the i-th GPU of the topology (node-major order).
    #[default]
    RankOrdered,
    /// Ranks on a random choice of GPUs, drawn from the scenario seed.
    Random,
    /// Rank i on `devices[i]`.
    Explicit,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    #[serde(default)]
    pub strategy: PlacementStrategy,
    /// Number of ranks; default: every GPU of the topology.
    pub ranks: Option<u32>,
    /// Device names for `explicit` placement.
    pub devices: Option<Vec<String>>,
    /// Devices of extra endpoints (parameter servers), e.g. `{ ps0 = "host0" }`.
    #[serde(default)]
    pub endpoints: BTreeMap<String, String>,
    /// Treat every `group_size` consecutive ranks as one node for hierarchical algorithms
    /// (default: the topology's servers). Lets a flat fabric run a two-level all-reduce.
    pub group_size: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
/// The ideal templates, as scenario files spell them.
pub enum AlgorithmName {
    #[default]
    Ring,
    Hierarchical,
    DoubleBinaryTree,
    HalvingDoubling,
    ParameterServer,
    Direct,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveTable {
    pub op: Collective,
    /// nccl-tests `size`: the per-rank buffer.
    pub bytes: Bytes,
    /// Which library runs the collective: `ideal`, `nccl`, `gloo` or `mpi` (default: `nccl` on
    /// a topology that names its GPU model, `ideal` otherwise).
    pub library: Option<Library>,
    /// `ideal`: the template (`ring`, `hierarchical`, `double_binary_tree`,
    /// `halving_doubling`, `parameter_server`, `direct`; default `ring`). `nccl`: forces one
    /// algorithm as `NCCL_ALGO` does (`ring`, `tree`, `nvls`, `pat`, ...).
    pub algorithm: Option<String>,
    /// `nccl`: the protocols NCCL may use, as `NCCL_PROTO` takes them: one (`ll`, `ll128`,
    /// `simple`), a list (`"simple,ll128"`) or all but some (`"^ll"`).
    pub protocol: Option<String>,
    /// `nccl`: `NCCL_MIN_NCHANNELS` / `NCCL_MAX_NCHANNELS`.
    pub min_channels: Option<u32>,
    pub max_channels: Option<u32>,
    /// `nccl`: the release whose decisions to follow, `"2.18"` to `"2.27"` (default 2.27).
    pub library_version: Option<String>,
    /// `nccl`: `NCCL_COLLNET_ENABLE=1`: CollNet may run where the topology's switches reduce
    /// in the network (SHARP); off by default, as in NCCL.
    pub collnet: Option<bool>,
    /// A tuner plugin's rules file (NCCL's example plugin's `NCCL_TUNER_CONFIG_FILE`), relative
    /// to the scenario file; NCCL only.
    pub tuner_config: Option<String>,
    /// `mpi`: how OpenMPI's exchanges between partners run, `expected` (default: the testbed's
    /// measured share of slow ones), `both_ways` or `one_way_first`: to bound what a launch
    /// decides.
    pub exchanges: Option<String>,
    /// Ring: number of rings (rotations 0..k of the rank order) when neither `permutations`
    /// nor `orders` is given.
    pub rings: Option<u32>,
    /// Ring: one ring per entry, the rank order rotated by that offset.
    pub permutations: Option<Vec<u32>>,
    /// Ring: one ring per entry, an explicit rank order.
    pub orders: Option<Vec<Vec<u32>>>,
    /// Ring: stride of generated orders (coprime with the rank count).
    pub stride: Option<u32>,
    /// Ring: traverse ring i in reverse (one entry per ring).
    pub reverse: Option<Vec<bool>>,
    /// Parameter server: number of server shards.
    pub servers: Option<u32>,
    /// Parameter server: servers are ranks 0..servers instead of extra endpoints.
    pub colocated: Option<bool>,
    /// NCCL-style pipelining: slices per step.
    pub slices: Option<u32>,
    #[serde(default)]
    pub root: u32,
    #[serde(default = "one")]
    pub peer: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkModelName {
    #[default]
    Flow,
    Packet,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    #[serde(default)]
    pub model: NetworkModelName,
    /// Packet model: lossless (backpressure) or lossy (drops) switches.
    #[serde(default)]
    pub mode: SwitchMode,
    /// Packet model: MTU per link class, overriding the defaults.
    #[serde(default)]
    pub mtu: BTreeMap<LinkClass, Bytes>,
    /// Packet model, lossless: fraction of a buffer at which its feeders pause.
    pub high_water: Option<f64>,
    /// Packet model, lossless: fraction of a buffer at which paused feeders resume.
    pub low_water: Option<f64>,
    /// Packet model, lossy: time from a drop to the retransmission.
    pub retransmit_timeout: Option<Duration>,
    /// Packet model: bytes a flow may have in flight (sent, not yet delivered).
    pub window: Option<Bytes>,
    /// Packet model, lossy: sender congestion control.
    #[serde(default)]
    pub congestion_control: CongestionControl,
    /// Cores every host shares, in place of the profile's `network.host_cpu.shared_cores`
    /// (what-if: the testbed's hosts on 1 core, or on 8); the profile must carry host_cpu.
    pub shared_cores: Option<f64>,
}

impl NetworkSpec {
    /// The packet model's options, or (field, expected).
    pub fn packet_config(&self) -> Result<PacketConfig, (String, String)> {
        let mut c = PacketConfig {
            mode: self.mode,
            congestion_control: self.congestion_control,
            ..PacketConfig::default()
        };
        for (class, mtu) in &self.mtu {
            if mtu.0 == 0 || mtu.0 > u32::MAX as u64 {
                return Err((
                    format!("network.mtu.{class}"),
                    format!("a packet size from 1 B to 4 GiB, got {} B", mtu.0),
                ));
            }
            c.mtu_bytes[LinkClass::ALL.iter().position(|x| x == class).unwrap_or(0)] = mtu.0 as u32;
        }
        let fraction = |v: Option<f64>, d: f64, name: &str| match v {
            Some(x) if !(x > 0.0 && x <= 1.0) => Err((
                format!("network.{name}"),
                format!("a fraction of the buffer in (0, 1], got {x}"),
            )),
            Some(x) => Ok(x),
            None => Ok(d),
        };
        c.high_water = fraction(self.high_water, c.high_water, "high_water")?;
        c.low_water = fraction(self.low_water, c.low_water.min(c.high_water), "low_water")?;
        if c.low_water >= c.high_water && self.low_water.is_some() {
            return Err((
                "network.low_water".into(),
                format!(
                    "a fraction below high_water ({}), got {}",
                    c.high_water, c.low_water
                ),
            ));
        }
        if let Some(t) = self.retransmit_timeout {
            if t.0 == crate::engine::SimTime::ZERO {
                return Err((
                    "network.retransmit_timeout".into(),
                    "a positive duration such as \"100us\"".into(),
                ));
            }
            c.retransmit_timeout = t.0;
        }
        if let Some(w) = self.window {
            if w.0 == 0 {
                return Err((
                    "network.window".into(),
                    "a positive size such as \"64KiB\"".into(),
                ));
            }
            c.window_bytes = Some(w.0);
        }
        Ok(c)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Where `dtsim run` writes results when `--out` is not given (relative to the working
    /// directory).
    pub dir: Option<String>,
}

/// The scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub seed: u64,
    /// `file = "..."` plus overrides of that file's keys.
    pub topology: toml::Table,
    #[serde(default)]
    pub placement: PlacementSpec,
    /// A collective to time (exactly one of `collective` and `workload`).
    pub collective: Option<CollectiveTable>,
    /// A training workload to time (see [`workload::WorkloadTable`]).
    pub workload: Option<workload::WorkloadTable>,
    /// Variants of this scenario to run and tabulate side by side (see [`workload::CompareEntry`]).
    #[serde(default)]
    pub compare: Vec<workload::CompareEntry>,
    #[serde(default)]
    pub network: NetworkSpec,
    /// Calibration profile (JSON), relative to this file; default: nominal (no calibration).
    pub profile: Option<String>,
    #[serde(default)]
    pub output: OutputSpec,
    /// Axes to vary (see [`sweep`]); `dtsim run` runs the scenario as written, `dtsim sweep`
    /// every point.
    pub sweep: Option<toml::Table>,
}

/// A loaded scenario: the file's content with paths resolved.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub path: PathBuf,
    pub file: ScenarioFile,
    pub topology_path: PathBuf,
    pub topology_overrides: toml::Table,
    pub profile_path: Option<PathBuf>,
}

/// Reads `path`, applies `overrides` (`key.path=value`, value parsed as TOML or else taken as a
/// string) and checks the result.
pub fn load(path: &Path, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ScenarioError::new(&file, "(file)", format!("a readable scenario file ({e})"))
    })?;
    parse(&text, path, overrides)
}

/// Like [`load`] with the text given; `path` names the file and anchors relative paths.
pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let mut table: toml::Table = toml::from_str(text).map_err(|e| toml_error(&file, text, &e))?;
    for o in overrides {
        apply_override(&mut table, o)
            .map_err(|expected| ScenarioError::new(&file, format!("--set {o}"), expected))?;
    }
    // Re-serialize so that serde errors after overrides still point at a field; spans refer
    // to the original text only when there were no overrides.
    let mut sf: ScenarioFile = if overrides.is_empty() {
        toml::from_str(text).map_err(|e| toml_error(&file, text, &e))?
    } else {
        let merged = toml::to_string(&table).expect("a TOML table serializes");
        toml::from_str(&merged).map_err(|e| after_set_error(&file, &merged, &e))?
    };
    let base = path.parent().unwrap_or(Path::new("."));
    // Tuner rules files are read relative to the scenario, wherever the scenario runs from.
    let tuner_configs = [
        (
            "collective.tuner_config",
            sf.collective.as_mut().and_then(|c| c.tuner_config.as_mut()),
        ),
        (
            "workload.allreduce.tuner_config",
            sf.workload
                .as_mut()
                .and_then(|w| w.allreduce.tuner_config.as_mut()),
        ),
    ];
    // A path the scenario names, resolved; an error naming the field when nothing is there.
    let existing = |p: &str, field: &str, what: &str| {
        let resolved = resolve(base, p);
        if resolved.exists() {
            Ok(resolved)
        } else {
            Err(ScenarioError::new(
                &file,
                field,
                format!("an existing {what}; {} does not exist", resolved.display()),
            ))
        }
    };
    for (field, t) in tuner_configs {
        let Some(t) = t else { continue };
        *t = existing(t, field, "tuner rules file")?
            .display()
            .to_string();
    }
    let mut topology_overrides = sf.topology.clone();
    let topo_file = match topology_overrides.remove("file") {
        Some(toml::Value::String(s)) => s,
        Some(other) => {
            return Err(ScenarioError::new(
                &file,
                "topology.file",
                format!("a path string, got {other}"),
            ));
        }
        None => {
            return Err(ScenarioError::new(
                &file,
                "topology.file",
                "the path of a topology file",
            ))
        }
    };
    let topology_path = existing(&topo_file, "topology.file", "topology file")?;
    let profile_path = match &sf.profile {
        Some(p) => Some(existing(p, "profile", "profile file")?),
        None => None,
    };
    let scenario = Scenario {
        path: path.to_path_buf(),
        file: sf,
        topology_path,
        topology_overrides,
        profile_path,
    };
    match (&scenario.file.collective, &scenario.file.workload) {
        (Some(c), None) => {
            // The default library depends on the topology, so a scenario that names none is
            // checked when it runs.
            if let Some(library) = c.library {
                let checked = if library == Library::Ideal {
                    scenario.collective_spec(u32::MAX, library).map(|_| ())
                } else {
                    library_options_of(c, library).map(|_| ())
                };
                checked.map_err(|(field, expected)| ScenarioError::new(&file, field, expected))?;
            }
        }
        (None, Some(w)) => w
            .check()
            .map_err(|(field, expected)| ScenarioError::new(&file, field, expected))?,
        (Some(_), Some(_)) => {
            return Err(ScenarioError::new(
                &file,
                "workload",
                "exactly one of [collective] and [workload]; this file has both",
            ))
        }
        (None, None) => {
            return Err(ScenarioError::new(
                &file,
                "collective",
                "a [collective] table (time one collective) or a [workload] table (time a training step)",
            ))
        }
    }
    scenario
        .file
        .network
        .packet_config()
        .map_err(|(field, expected)| ScenarioError::new(&file, field, expected))?;
    Ok(scenario)
}

/// A path in a file, relative to that file's directory (absolute paths as they are).
fn resolve(base: &Path, p: &str) -> PathBuf {
    let pb = PathBuf::from(p);
    if pb.is_absolute() {
        pb
    } else {
        base.join(pb)
    }
}

/// `a.b.c=value` → sets `table[a][b][c]`, creating tables on the way.
pub fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), String> {
    let Some((key, raw)) = assignment.split_once('=') else {
        return Err("the form key.path=value".into());
    };
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|k| k.trim().is_empty()) {
        return Err("a dotted key such as collective.bytes".into());
    }
    // A TOML value if it parses as one (numbers, booleans, arrays, quoted strings), otherwise
    // the raw text as a string (so `collective.bytes=64MiB` works unquoted).
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(inner) => inner,
            _ => return Err(format!("{p} to be a table, but it holds a value")),
        };
    }
    t.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

/// A TOML syntax or schema error as "file: line L, column C: message".
pub fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ScenarioError {
    let location = e
        .span()
        .map(|s| {
            let (line, col) = line_col(text, s.start);
            format!("line {line}, column {col}")
        })
        .unwrap_or_else(|| "(document)".to_string());
    ScenarioError::new(file, location, one_line(e))
}

/// toml's messages can span lines ("invalid table header\nexpected ..."): one line of them.
fn one_line(e: &toml::de::Error) -> String {
    let lines: Vec<&str> = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// An error in the scenario as the `--set` overrides left it: the user never saw that text, so
/// the error names the field (`collective.bytes`), not a line of it.
fn after_set_error(file: &str, merged: &str, e: &toml::de::Error) -> ScenarioError {
    let field = e
        .span()
        .filter(|s| !s.is_empty())
        .and_then(|s| crate::topology::file::SpanTree::parse(merged)?.path_at(s.start))
        .unwrap_or_else(|| "(document)".into());
    ScenarioError::new(format!("{file} (after --set)"), field, one_line(e))
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

impl Scenario {
    /// The collective to generate for `ranks` ranks, or (field, expected). With a library
    /// other than `ideal` only the op, size, root and peer are read (the library picks the
    /// algorithm; `library_options_of` checks its fields).
    pub fn collective_spec(
        &self,
        ranks: u32,
        library: Library,
    ) -> Result<CollectiveSpec, (String, String)> {
        let Some(c) = &self.file.collective else {
            return Err((
                "collective".into(),
                "a [collective] table (this scenario describes a [workload]; run it with `dtsim run`)"
                    .into(),
            ));
        };
        if library == Library::Ideal {
            return collective_spec_of(c, ranks);
        }
        c.check_root(ranks)?;
        Ok(CollectiveSpec {
            collective: c.op,
            bytes: c.bytes.0,
            root: c.root,
            peer: c.peer,
            algorithm: crate::collective::default_algorithm(c.op),
            slices: 1,
        })
    }

    /// The library that runs this scenario's collective on `topology`: the one it names, else
    /// NCCL on a topology that names its GPU model, else the ideal templates.
    pub fn library(&self, topology: &crate::topology::Topology) -> Library {
        self.file
            .collective
            .as_ref()
            .and_then(|c| c.library)
            .unwrap_or_else(|| topology_default_library(topology))
    }
}

/// The library a topology's collectives default to (see [`Library::default_for`]); its
/// `library` name was checked when the scenario was prepared ([`check_topology_library`]).
pub fn topology_default_library(topology: &crate::topology::Topology) -> Library {
    let named = topology
        .library
        .as_deref()
        .and_then(|n| Library::parse(n).ok());
    Library::default_for(named, topology.gpu.as_deref())
}

/// The topology file's `library`, when it names one, must be a library: (field, expected).
pub fn check_topology_library(
    topology: &crate::topology::Topology,
) -> Result<(), (String, String)> {
    match topology.library.as_deref().map(Library::parse) {
        Some(Err(e)) => Err(("library".into(), e.expected)),
        _ => Ok(()),
    }
}

impl AlgorithmName {
    pub fn as_str(self) -> &'static str {
        match self {
            AlgorithmName::Ring => "ring",
            AlgorithmName::Hierarchical => "hierarchical",
            AlgorithmName::DoubleBinaryTree => "double_binary_tree",
            AlgorithmName::HalvingDoubling => "halving_doubling",
            AlgorithmName::ParameterServer => "parameter_server",
            AlgorithmName::Direct => "direct",
        }
    }
}

/// The ideal template a `[collective]` table names (default `ring`), or (field, expected).
pub fn ideal_algorithm(name: Option<&str>) -> Result<AlgorithmName, (String, String)> {
    const NAMES: [(&str, AlgorithmName); 6] = [
        ("ring", AlgorithmName::Ring),
        ("hierarchical", AlgorithmName::Hierarchical),
        ("double_binary_tree", AlgorithmName::DoubleBinaryTree),
        ("halving_doubling", AlgorithmName::HalvingDoubling),
        ("parameter_server", AlgorithmName::ParameterServer),
        ("direct", AlgorithmName::Direct),
    ];
    match name {
        None => Ok(AlgorithmName::Ring),
        Some(n) => NAMES
            .iter()
            .find(|(k, _)| *k == n)
            .map(|&(_, a)| a)
            .ok_or_else(|| {
                (
                    "collective.algorithm".to_string(),
                    format!(
                        "one of ring, hierarchical, double_binary_tree, halving_doubling, \
                     parameter_server, direct for library \"ideal\", got {n:?}"
                    ),
                )
            }),
    }
}

/// What a `[collective]` table asks of a library other than `ideal`, or (field, expected):
/// the template-only fields are refused (the library picks its own rings and slices), except
/// explicit ring `orders`, which NCCL takes as its channels' rings (as `NCCL_GRAPH_FILE`).
pub fn library_options_of(
    c: &CollectiveTable,
    library: Library,
) -> Result<LibraryOptions, (String, String)> {
    let field = |f: &str| format!("collective.{f}");
    let template_only = c
        .ring_fields()
        .into_iter()
        .filter(|(name, _)| *name != "orders")
        .chain(c.server_fields())
        .chain([("slices", c.slices.is_some())]);
    if let Some((name, _)) = template_only.into_iter().find(|(_, set)| *set) {
        return Err((
            field(name),
            format!(
                "not used by library \"{library}\", which chooses its own channels and \
                 pipelining; remove it, use min_channels/max_channels, or set library = \"ideal\""
            ),
        ));
    }
    let tuner_rules = match &c.tuner_config {
        None => None,
        Some(_) if library != Library::Nccl => {
            return Err((
                field("tuner_config"),
                format!(
                    "nothing with library \"{library}\": tuner rules files are NCCL's (its \
                     example tuner plugin's NCCL_TUNER_CONFIG_FILE)"
                ),
            ))
        }
        Some(path) => Some(std::sync::Arc::new(
            crate::library::nccl::plugin::TunerRules::load(Path::new(path))
                .map_err(|e| (field("tuner_config"), format!("a tuner rules file: {e}")))?,
        )),
    };
    let mpi_exchanges = match &c.exchanges {
        None => crate::library::mpi::Exchanges::default(),
        Some(_) if library != Library::Mpi => {
            return Err((
                field("exchanges"),
                format!(
                    "nothing with library \"{library}\": exchange modes are OpenMPI's \
                     (library = \"mpi\")"
                ),
            ))
        }
        Some(x) => crate::library::mpi::Exchanges::parse(x).ok_or_else(|| {
            (
                field("exchanges"),
                format!("one of expected, both_ways, one_way_first, got {x:?}"),
            )
        })?,
    };
    Ok(LibraryOptions {
        algorithm: c.algorithm.clone(),
        protocol: c.protocol.clone(),
        min_channels: c.min_channels,
        max_channels: c.max_channels,
        version: c.library_version.clone(),
        collnet: c.collnet.unwrap_or(false),
        ring_orders: c.orders.clone().unwrap_or_default(),
        tuner_rules,
        host_copy_bytes_per_s: None,
        message_cpu: None,
        mpi_exchanges,
    })
}

impl CollectiveTable {
    /// The fields only the ring template reads (name, set?).
    fn ring_fields(&self) -> [(&'static str, bool); 5] {
        [
            ("rings", self.rings.is_some()),
            ("permutations", self.permutations.is_some()),
            ("orders", self.orders.is_some()),
            ("stride", self.stride.is_some()),
            ("reverse", self.reverse.is_some()),
        ]
    }
    /// `root` names one of `ranks` ranks (any value with a single rank).
    fn check_root(&self, ranks: u32) -> Result<(), (String, String)> {
        if self.root >= ranks.max(1) && ranks > 1 {
            return Err((
                "collective.root".into(),
                format!("a rank below {ranks}, got {}", self.root),
            ));
        }
        Ok(())
    }
    /// The fields only the parameter-server template reads (name, set?).
    fn server_fields(&self) -> [(&'static str, bool); 2] {
        [
            ("servers", self.servers.is_some()),
            ("colocated", self.colocated.is_some()),
        ]
    }
}

/// The template-library fields that only `nccl` (or another real library) reads, when set
/// with `ideal`: (field, expected).
fn reject_library_fields(c: &CollectiveTable) -> Result<(), (String, String)> {
    let set = [
        ("protocol", c.protocol.is_some()),
        ("min_channels", c.min_channels.is_some()),
        ("max_channels", c.max_channels.is_some()),
        ("library_version", c.library_version.is_some()),
        ("tuner_config", c.tuner_config.is_some()),
        ("collnet", c.collnet.is_some()),
        ("exchanges", c.exchanges.is_some()),
    ];
    match set.iter().find(|(_, s)| *s) {
        Some((name, _)) => Err((
            format!("collective.{name}"),
            "only with a real library (library = \"nccl\"); the ideal templates have no \
             protocols or channels"
                .into(),
        )),
        None => Ok(()),
    }
}

/// The collective a `[collective]`-shaped table describes, for `ranks` ranks, or (field, expected).
pub fn collective_spec_of(
    c: &CollectiveTable,
    ranks: u32,
) -> Result<CollectiveSpec, (String, String)> {
    {
        let field = |f: &str| format!("collective.{f}");
        let ring_only = c.ring_fields();
        let ps_only = c.server_fields();
        let reject = |list: &[(&str, bool)], alg: &str| -> Result<(), (String, String)> {
            match list.iter().find(|(_, set)| *set) {
                Some((name, _)) => Err((
                    field(name),
                    format!(
                        "not used by algorithm \"{alg}\"; remove it or change collective.algorithm"
                    ),
                )),
                None => Ok(()),
            }
        };
        reject_library_fields(c)?;
        let name = ideal_algorithm(c.algorithm.as_deref())?;
        let algorithm = match name {
            AlgorithmName::Ring => {
                reject(&ps_only, "ring")?;
                let stride = c.stride.unwrap_or(1);
                let mut rings: Vec<RingOrder> = match (&c.orders, &c.permutations, c.rings) {
                    (Some(orders), None, None) => {
                        orders.iter().cloned().map(RingOrder::Explicit).collect()
                    }
                    (None, Some(perms), None) => perms
                        .iter()
                        .map(|&offset| RingOrder::Generated {
                            offset,
                            stride,
                            reverse: false,
                        })
                        .collect(),
                    (None, None, k) => (0..k.unwrap_or(1))
                        .map(|offset| RingOrder::Generated {
                            offset,
                            stride,
                            reverse: false,
                        })
                        .collect(),
                    _ => {
                        return Err((
                            field("rings"),
                            "only one of rings, permutations and orders".into(),
                        ))
                    }
                };
                if rings.is_empty() {
                    return Err((field("rings"), "at least one ring".into()));
                }
                if let Some(rev) = &c.reverse {
                    if rev.len() != rings.len() {
                        return Err((
                            field("reverse"),
                            format!("one entry per ring ({}), got {}", rings.len(), rev.len()),
                        ));
                    }
                    for (r, &flip) in rings.iter_mut().zip(rev) {
                        match r {
                            RingOrder::Generated { reverse, .. } => *reverse = flip,
                            RingOrder::Explicit(order) if flip => order.reverse(),
                            RingOrder::Explicit(_) => {}
                        }
                    }
                }
                Algorithm::Ring { rings }
            }
            AlgorithmName::ParameterServer => {
                reject(&ring_only, "parameter_server")?;
                Algorithm::ParameterServer {
                    servers: c.servers.unwrap_or(1),
                    colocated: c.colocated.unwrap_or(false),
                }
            }
            other => {
                let name = other.as_str();
                reject(&ring_only, name)?;
                reject(&ps_only, name)?;
                match other {
                    AlgorithmName::Hierarchical => Algorithm::Hierarchical,
                    AlgorithmName::DoubleBinaryTree => Algorithm::DoubleBinaryTree,
                    AlgorithmName::HalvingDoubling => Algorithm::HalvingDoubling,
                    _ => Algorithm::Direct,
                }
            }
        };
        let slices = c.slices.unwrap_or(1);
        if slices == 0 || slices > crate::limits::SLICES_MAX {
            return Err((
                field("slices"),
                format!(
                    "from 1 to {} pipeline slices per step; got {slices}",
                    crate::limits::SLICES_MAX
                ),
            ));
        }
        c.check_root(ranks)?;
        Ok(CollectiveSpec {
            collective: c.op,
            bytes: c.bytes.0,
            root: c.root,
            peer: c.peer,
            algorithm,
            slices,
        })
    }
}
