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
//! congestion_control = "none"                  # none | aimd (lossy) | cubic (TCP: windows,
//!                                              #   acknowledgements back through the queues)
//! host_queue = "128KiB"                        # cubic: bytes a connection keeps queued at
//!                                              #   its sender's link (TCP small queues)
//! ```
//!
//! Loading never panics: every problem is a [`ScenarioError`] naming the file, the field and
//! what was expected.

mod collective;
mod fabric;
pub mod fit_nccl;
mod plays;
pub mod run;
pub mod size_sweep;
pub mod sweep;
pub mod trace;
pub mod workload;

pub use collective::*;
pub use plays::TIMED_CALLS_MAX;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::collective::CollectiveSpec;
use crate::library::Library;
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
    /// Packet model: sender congestion control (none and aimd lossy only; cubic both modes).
    #[serde(default)]
    pub congestion_control: CongestionControl,
    /// Packet model, cubic: bytes a connection keeps queued at its sender's own link.
    pub host_queue: Option<Bytes>,
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
        if let Some(q) = self.host_queue {
            if self.congestion_control != CongestionControl::Cubic {
                return Err((
                    "network.host_queue".into(),
                    format!(
                        "only with congestion_control = \"cubic\" (TCP connections), got \"{}\"",
                        self.congestion_control.as_str()
                    ),
                ));
            }
            c.host_queue_bytes = q.0;
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
        .and_then(|s| crate::toml_spans::SpanTree::parse(merged)?.path_at(s.start))
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
            bytes: c.buffer_bytes()?,
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
