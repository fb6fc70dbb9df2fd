//! A scenario's `[collective]` table: which library runs the collective and with what
//! overrides, or which ideal template; checked field by field into a [`CollectiveSpec`] and
//! [`LibraryOptions`].

use std::path::Path;

use serde::Deserialize;

use crate::collective::{Algorithm, Collective, CollectiveSpec, RingOrder};
use crate::library::{Library, LibraryOptions};
use crate::units::Bytes;

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

/// How a scenario times its call ([`CollectiveTable::timing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallTiming {
    /// From a quiet network: nothing before the call.
    #[default]
    Alone,
    /// After the same call and the library's barrier ([`crate::collective::benchmark_loop`]).
    AfterBarrier,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveTable {
    pub op: Collective,
    /// nccl-tests `size`: the per-rank buffer (none for a barrier).
    pub bytes: Option<Bytes>,
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
    /// How the call is timed: `alone` (default: from a quiet network, every shaper bucket
    /// full) or `after_barrier`, as a benchmark loop times it (the testbed's harness does):
    /// after the same call and the library's barrier (the templates': every rank messages
    /// every other; NCCL's: torch's one-float all-reduce).
    pub timing: Option<CallTiming>,
    /// With `timing = "after_barrier"`: how many calls the loop times after its warm-up call,
    /// each after a barrier, the run reporting their median as a benchmark harness does (the
    /// testbed's: five to twenty; default 1). What a call leaves (shaper buckets, TCP windows,
    /// which rank of a ring runs late) changes from call to call, so one call's time depends
    /// on where in the loop it falls; the median of several does less.
    pub timed_calls: Option<u32>,
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

/// The ideal template a `[collective]` table names (default `ring`; `direct` for all_to_all
/// and the barrier, which no ring implements), or (field, expected).
pub fn ideal_algorithm(
    name: Option<&str>,
    op: Collective,
) -> Result<AlgorithmName, (String, String)> {
    const NAMES: [(&str, AlgorithmName); 6] = [
        ("ring", AlgorithmName::Ring),
        ("hierarchical", AlgorithmName::Hierarchical),
        ("double_binary_tree", AlgorithmName::DoubleBinaryTree),
        ("halving_doubling", AlgorithmName::HalvingDoubling),
        ("parameter_server", AlgorithmName::ParameterServer),
        ("direct", AlgorithmName::Direct),
    ];
    match name {
        // As `collective::default_algorithm`: direct where no ring implements the op.
        None if matches!(op, Collective::AllToAll | Collective::Barrier) => {
            Ok(AlgorithmName::Direct)
        }
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
                format!("one of median, expected, both_ways, one_way_first, got {x:?}"),
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
        host_copies: None,
        message_cpu: None,
        wake_ups: None,
        mpi_exchanges,
        send_queue_bytes: None,
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
    /// The per-rank buffer in bytes: required, except for a barrier, which carries none.
    pub fn buffer_bytes(&self) -> Result<u64, (String, String)> {
        match (self.op, self.bytes) {
            (Collective::Barrier, None | Some(Bytes(0))) => Ok(0),
            (Collective::Barrier, Some(Bytes(b))) => Err((
                "collective.bytes".into(),
                format!("nothing for a barrier (it carries no data), got {b} B"),
            )),
            (_, Some(Bytes(b))) => Ok(b),
            (op, None) => Err((
                "collective.bytes".into(),
                format!("the per-rank buffer of the {op}, e.g. \"64MiB\""),
            )),
        }
    }
    /// `root` names one of `ranks` ranks (any value with a single rank).
    pub(super) fn check_root(&self, ranks: u32) -> Result<(), (String, String)> {
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
        let name = ideal_algorithm(c.algorithm.as_deref(), c.op)?;
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
            bytes: c.buffer_bytes()?,
            root: c.root,
            peer: c.peer,
            algorithm,
            slices,
        })
    }
}
