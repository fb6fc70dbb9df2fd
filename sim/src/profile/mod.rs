//! Calibration profiles: the measured numbers a simulation replays, each with its provenance.
//!
//! A profile is JSON (written by `calibrate`, shipped in `data/profiles/`). It is shared by the
//! `calibrate` crate, which writes profiles, and the simulator, which reads them. A profile
//! without provenance is refused: every table says where its numbers came from (measured by
//! `calibrate` on which machine and when, imported from which log, or taken from which public
//! table).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod compute;
pub use compute::*;

use crate::net::factors::{EfficiencyFactors, FactorRow};
use crate::topology::LinkClass;
use crate::units::Bandwidth;

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// Where a number came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// `measured`, `imported`, `public` or `nominal`.
    pub source: String,
    /// What exactly: machine and command, file imported, table cited, or why nominal.
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// A factor table for one link class with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorTable {
    pub rows: Vec<FactorRow>,
    pub provenance: Provenance,
}

/// A link class's payload share (see [`crate::net::factors`]) with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEfficiency {
    pub value: f64,
    pub provenance: Provenance,
}

/// A byte count with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredBytes {
    pub value: crate::units::Bytes,
    pub provenance: Provenance,
}

/// A duration with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredDuration {
    pub value: crate::units::Duration,
    pub provenance: Provenance,
}

/// A rate with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredBandwidth {
    pub value: Bandwidth,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkCalibration {
    /// Size-dependent bandwidth/latency factors per link class.
    #[serde(default)]
    pub factors: BTreeMap<LinkClass, FactorTable>,
    /// Payload share of every link of a class, shared by the flows on it (protocol headers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub link_efficiency: BTreeMap<LinkClass, LinkEfficiency>,
    /// Bytes each TCP connection keeps queued ahead in the FIFO egress queue of a link of a
    /// class (TCP small queues in front of a shaper): sends posted together on that link leave
    /// in the order posted, each that far ahead of the next (see [`crate::net::flow`]; the
    /// packet model with CUBIC keeps that much of a connection queued at its own link).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fifo_head_bytes: BTreeMap<LinkClass, MeasuredBytes>,
    /// Depth of the token bucket of a shaper on every link of a class, as time at the link's
    /// rate (tc's `burst`): a transfer that starts on idle links sends that much at once (see
    /// [`crate::net::flow`]; the packet model plays it at each such link's port).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shaper_burst: BTreeMap<LinkClass, MeasuredDuration>,
    /// Mean time a small message waits at a shaped link of a class for the packet another
    /// connection has in service there (`calibrate import packet-wait`; see
    /// [`crate::net::flow`]; the packet model does not play it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shaper_packet_wait: BTreeMap<LinkClass, MeasuredDuration>,
    /// Largest packet TCP hands the shaper of a link of a class at once (a GSO packet): a
    /// message no larger passes whole while the shaper is not in debt, and the shaper then
    /// holds the link's next packets until its debt is paid (`calibrate import
    /// shaper-packet`; see [`crate::net::flow`]; the packet model's packets stay the MTU's, and
    /// with CUBIC its receivers acknowledge once per this many bytes, as the testbed's hosts
    /// get such packets whole).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shaper_packet: BTreeMap<LinkClass, MeasuredBytes>,
    /// Rate at which one GPU (or one host, for gloo) reduces received data when reductions
    /// are not fused into copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce_bandwidth: Option<MeasuredBandwidth>,
    /// Rate at which one host copies the buffers a library stages its collective through
    /// (ProcessGroupGloo's flat all-gather buffer, primed and copied out on every call), first
    /// touch of fresh pages included: with `host_copy_out_bandwidth`, the priming copy's
    /// alone (into the fresh buffer), otherwise both copies'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_copy_bandwidth: Option<MeasuredBandwidth>,
    /// Rate at which one host copies a staged buffer out to tensors the caller reuses (warm
    /// pages, no first touch), when measured apart from the priming copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_copy_out_bandwidth: Option<MeasuredBandwidth>,
    /// The cores all hosts of the topology share, and what one message of a CPU library
    /// takes of them (`calibrate import cpu-costs`): where hosts share a machine (the testbed's
    /// namespaces), gloo's per-message host work is played on those cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpu>,
    /// How much later than usual a host's thread runs when a message wakes it, as measured on
    /// the machine the hosts share (`calibrate import wake-ups`): gloo's receivers draw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_wake_up: Option<HostWakeUp>,
    /// Alpha-beta fits of measured collectives (nccl-tests logs, `calibrate gpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collective_fits: Vec<CollectiveFit>,
    /// Measured point-to-point rates and latencies: GPU pairs, host-device copies, host to host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathMeasurement>,
    /// The physical parameters of dtsim's NCCL model (`library = "nccl"`), fitted by
    /// `calibrate` by simulating the measured sweeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<NcclCalibration>,
}

/// The cores that every host shares and a message's cost on them, measured on the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCpu {
    /// Cores every host of the topology runs on (the testbed machine's).
    pub shared_cores: f64,
    /// Core time of one message besides its bytes, both ends together (waking the library's
    /// threads, system calls, the receiver's notification).
    pub per_message: crate::units::Duration,
    /// Core nanoseconds per payload byte, both ends together (the hosts' network stacks).
    pub per_byte_ns: f64,
    pub provenance: Provenance,
    /// A message's cost inside the library's own collectives, where it may differ from the
    /// point-to-point messages `per_message` and `per_byte_ns` were measured on (torch's
    /// isend/irecv pay a python call and a work object per message, gloo's all-reduce ring
    /// none); `None`: those costs for every message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_collectives: Option<MessageCost>,
}

/// One message's core time, both ends together: `per_message + per_byte_ns × bytes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageCost {
    pub per_message: crate::units::Duration,
    pub per_byte_ns: f64,
    pub provenance: Provenance,
}

impl MessageCost {
    /// Whether both parts are physical (per byte 0 to 10^6 ns, per message at most 1 s) and
    /// the provenance says where they come from; else the field (under `at`) and what was
    /// expected.
    fn check(&self, at: &str) -> Result<(), (String, String)> {
        if !(self.per_byte_ns >= 0.0 && self.per_byte_ns < 1e6) {
            return Err((
                format!("{at}.per_byte_ns"),
                format!(
                    "core nanoseconds per byte, 0 or more, got {}",
                    self.per_byte_ns
                ),
            ));
        }
        let secs = self.per_message.0.as_secs_f64();
        if secs > 1.0 {
            return Err((
                format!("{at}.per_message"),
                format!("at most 1 s of core time per message, got {secs} s"),
            ));
        }
        if self.provenance.detail.trim().is_empty() {
            return Err((
                format!("{at}.provenance.detail"),
                "where these costs were measured".into(),
            ));
        }
        Ok(())
    }
}

impl HostCpu {
    /// Whether `cores` can be the cores hosts share (1 to 10^6); else what was expected.
    pub fn check_shared_cores(cores: f64) -> Result<(), String> {
        if (1.0..=1e6).contains(&cores) {
            Ok(())
        } else {
            Err(format!("a number of cores from 1 to 10^6, got {cores}"))
        }
    }
}

/// The wake-up delays of a host's threads beyond the usual, as a distribution: where the
/// hosts share a machine's cores, a thread woken for a message mostly runs at once and now and
/// then milliseconds later (the scheduler's wait behind the other hosts' threads). Measured as
/// the extra time of a small gloo exchange over its median, each exchange one draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWakeUp {
    /// Evenly spaced quantiles of the extra delay, seconds, ascending (the k-th of `n` is the
    /// `(k + 0.5) / n` quantile): a draw picks one uniformly.
    pub extra_secs_quantiles: Vec<f64>,
    pub provenance: Provenance,
}

impl HostWakeUp {
    /// Most quantiles a profile may carry.
    pub const QUANTILES_MAX: usize = 10_000;

    /// Whether `q` can be the quantiles (1 to [`Self::QUANTILES_MAX`] of them, each finite,
    /// 0 to 1 s, ascending); else what was expected.
    pub fn check_quantiles(q: &[f64]) -> Result<(), String> {
        if q.is_empty() || q.len() > Self::QUANTILES_MAX {
            return Err(format!(
                "1 to {} quantiles, got {}",
                Self::QUANTILES_MAX,
                q.len()
            ));
        }
        if let Some((i, v)) = q
            .iter()
            .enumerate()
            .find(|(_, v)| !(0.0..=1.0).contains(*v))
        {
            return Err(format!("seconds from 0 to 1 at [{i}], got {v}"));
        }
        if let Some(i) = (1..q.len()).find(|&i| q[i] < q[i - 1]) {
            return Err(format!(
                "ascending quantiles, got {} after {} at [{i}]",
                q[i],
                q[i - 1]
            ));
        }
        Ok(())
    }
}

/// The few physical parameters of dtsim's NCCL model, each keyed the way the simulator looks
/// it up, with its provenance. A key that is absent takes NCCL's own constant (its tuner's
/// `baseLat`/`hwLat`) or an efficiency of 1, and reports say so.
///
/// Keys:
/// - `base_latency_us["ring/simple"]`: fixed cost of one collective call (kernel launch,
///   enqueue, the first and last synchronization) for an algorithm/protocol;
/// - `base_latency_scale["nvls/simple"]`: the call latency as a factor on NCCL's own per-call
///   latency for the release being played (23 µs for NVLS up to 2.19, 25 µs from 2.20), so a
///   value fitted under one release follows NCCL's own change to the next; an absolute
///   `base_latency_us` for the same key wins;
/// - `step_latency_us["ring/ll128/nvlink"]`: per transfer step, on top of the path's link
///   latencies, for an algorithm/protocol over a link class (the step's slowest link);
/// - `efficiency["ring/nvlink"]`: fraction of a link class's nominal rate that an
///   algorithm's payload reaches once protocol framing (LL 4 of 8 bytes, LL128 120 of 128) is
///   accounted for;
/// - `channel_gbps["nvls/simple"]`: payload one channel (one thread block) moves per second
///   per GPU, GB/s; a collective on `c` channels runs at most `c ×` this. Absent, NCCL's own
///   per-channel maxima apply where it has them (LL, LL128, tree) and no limit elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NcclCalibration {
    #[serde(default)]
    pub base_latency_us: BTreeMap<String, FittedParameter>,
    #[serde(default)]
    pub step_latency_us: BTreeMap<String, FittedParameter>,
    #[serde(default)]
    pub efficiency: BTreeMap<String, FittedParameter>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub channel_gbps: BTreeMap<String, FittedParameter>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub base_latency_scale: BTreeMap<String, FittedParameter>,
    /// The measured rows these parameters were fitted on; `dtsim validate` does not score them.
    #[serde(default)]
    pub fitted_on: Vec<FittedRows>,
}

/// A fitted parameter: value, 95% confidence interval, where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedParameter {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    pub provenance: Provenance,
}

/// Rows of one measurement file (1-based data rows, as `dtsim validate` numbers them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedRows {
    /// The file's name (no directory), e.g. `azure_nd_single_node_allreduce.csv`.
    pub file: String,
    pub rows: Vec<u32>,
}

/// A collective's time fitted as `alpha + bytes / algbw` over a size sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveFit {
    /// `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, ...
    pub collective: String,
    /// The class of the links that bound it (the slowest the ranks span).
    pub link_class: LinkClass,
    pub ranks: u32,
    pub nodes: u32,
    pub alpha_secs: f64,
    pub alpha_ci95_secs: [f64; 2],
    /// Asymptotic algorithm bandwidth (message bytes per second).
    pub algbw_bytes_per_s: f64,
    pub algbw_ci95_low_bytes_per_s: f64,
    /// `None` when the interval reaches an infinite bandwidth.
    #[serde(default)]
    pub algbw_ci95_high_bytes_per_s: Option<f64>,
    /// `algbw` times nccl-tests' bus-bandwidth factor (2(n-1)/n for all-reduce).
    pub busbw_bytes_per_s: f64,
    pub r_squared: f64,
    /// Largest |measured - fitted| / measured over the fitted sizes.
    pub max_rel_residual: f64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub points: u32,
    /// Error on sizes held back from the fit, when a hold-out was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout: Option<HoldoutError>,
    pub provenance: Provenance,
}

/// How well a fit predicts sizes it did not see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldoutError {
    /// The hold-out rule, e.g. `every:3` or `above:64MiB`.
    pub rule: String,
    pub points: u32,
    pub mean_abs_rel_error: f64,
    pub max_abs_rel_error: f64,
}

/// A measured rate and/or latency between two endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathMeasurement {
    /// What was measured: `p2p unidirectional`, `p2p bidirectional`, `h2d`, `d2h`, `d2d`, `tcp`...
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_class: Option<LinkClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_secs: Option<f64>,
    pub provenance: Provenance,
}

/// A number with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibrated<T> {
    pub value: T,
    pub provenance: Provenance,
}

/// A calibration profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub schema_version: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub provenance: Provenance,
    #[serde(default)]
    pub network: NetworkCalibration,
    /// GPU compute rates, for training workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeCalibration>,
}

#[derive(Debug, thiserror::Error)]
#[error("{file}: {field}: {expected}")]
pub struct ProfileError {
    pub file: String,
    pub field: String,
    pub expected: String,
}

impl Profile {
    /// A profile with no calibration: links exactly as the topology says, fused reductions.
    pub fn nominal() -> Profile {
        Profile {
            schema_version: SCHEMA_VERSION,
            name: "nominal".into(),
            description:
                "No calibration: link bandwidths and latencies as the topology file gives them."
                    .into(),
            provenance: Provenance {
                source: "nominal".into(),
                detail: "built into dtsim; no measurement behind it".into(),
                date: None,
            },
            network: NetworkCalibration::default(),
            compute: None,
        }
    }

    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: file.clone(),
            field: "(file)".into(),
            expected: format!("a readable profile JSON file ({e})"),
        })?;
        Self::parse(&text, &file)
    }

    pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let err = |field: &str, expected: String| ProfileError {
            file: origin.to_string(),
            field: field.to_string(),
            expected,
        };
        // serde's message names the field (unknown or missing) and serde_json adds line and column.
        let p: Profile = serde_json::from_str(text).map_err(|e| err("(profile)", e.to_string()))?;
        if p.schema_version != SCHEMA_VERSION {
            return Err(err(
                "schema_version",
                format!("{SCHEMA_VERSION}, got {}", p.schema_version),
            ));
        }
        if p.provenance.source.trim().is_empty() || p.provenance.detail.trim().is_empty() {
            return Err(err(
                "provenance",
                "a source and a detail saying where the numbers came from".into(),
            ));
        }
        for (class, table) in &p.network.factors {
            if table.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("network.factors.{class}.provenance.detail"),
                    "where these factors came from".into(),
                ));
            }
        }
        for (class, e) in &p.network.link_efficiency {
            if e.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("network.link_efficiency.{class}.provenance.detail"),
                    "where this efficiency came from".into(),
                ));
            }
            if let Err(why) = crate::limits::factor(e.value) {
                return Err(err(&format!("network.link_efficiency.{class}.value"), why));
            }
        }
        for (class, h) in &p.network.shaper_packet {
            if h.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("network.shaper_packet.{class}.provenance.detail"),
                    "where this packet size was captured (calibrate import shaper-packet)".into(),
                ));
            }
            if h.value.0 == 0 || h.value.0 > 1 << 20 {
                return Err(err(
                    &format!("network.shaper_packet.{class}.value"),
                    format!("1 byte to 1 MiB (a packet), got {} bytes", h.value.0),
                ));
            }
        }
        for (class, h) in &p.network.fifo_head_bytes {
            if h.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("network.fifo_head_bytes.{class}.provenance.detail"),
                    "where this queue depth came from".into(),
                ));
            }
            if h.value.0 > 1 << 30 {
                return Err(err(
                    &format!("network.fifo_head_bytes.{class}.value"),
                    format!("at most 1 GiB, got {} bytes", h.value.0),
                ));
            }
        }
        // Per-class shaper durations: (field, map, where its detail says it came from, what
        // one second at most bounds).
        let shaper_durations = [
            (
                "shaper_packet_wait",
                &p.network.shaper_packet_wait,
                "where this wait was measured (suite.py packet_wait)",
                "a wait for one packet",
            ),
            (
                "shaper_burst",
                &p.network.shaper_burst,
                "where this bucket depth came from (the shaper's configuration)",
                "a token bucket at the link's rate",
            ),
        ];
        for (field, map, source, what) in shaper_durations {
            for (class, d) in map {
                if d.provenance.detail.trim().is_empty() {
                    return Err(err(
                        &format!("network.{field}.{class}.provenance.detail"),
                        source.into(),
                    ));
                }
                let secs = d.value.0.as_secs_f64();
                if secs > 1.0 {
                    return Err(err(
                        &format!("network.{field}.{class}.value"),
                        format!("{what} of at most 1 s, got {secs} s"),
                    ));
                }
            }
        }
        if let Some(h) = &p.network.host_cpu {
            if let Err(expected) = HostCpu::check_shared_cores(h.shared_cores) {
                return Err(err("network.host_cpu.shared_cores", expected));
            }
            if !(h.per_byte_ns >= 0.0 && h.per_byte_ns < 1e6) {
                return Err(err(
                    "network.host_cpu.per_byte_ns",
                    format!(
                        "core nanoseconds per byte, 0 or more, got {}",
                        h.per_byte_ns
                    ),
                ));
            }
            if h.per_message.0.as_secs_f64() > 1.0 {
                return Err(err(
                    "network.host_cpu.per_message",
                    format!(
                        "at most 1 s of core time per message, got {} s",
                        h.per_message.0.as_secs_f64()
                    ),
                ));
            }
            if h.provenance.detail.trim().is_empty() {
                return Err(err(
                    "network.host_cpu.provenance.detail",
                    "where these costs were measured".into(),
                ));
            }
            if let Some(c) = &h.in_collectives {
                if let Err((field, expected)) = c.check("network.host_cpu.in_collectives") {
                    return Err(err(&field, expected));
                }
            }
        }
        if let Some(w) = &p.network.host_wake_up {
            if p.network.host_cpu.is_none() {
                return Err(err(
                    "network.host_wake_up",
                    "network.host_cpu beside it (wake-ups are drawn where the hosts' shared \
                     cores are played: `calibrate import cpu-costs` first)"
                        .into(),
                ));
            }
            if let Err(expected) = HostWakeUp::check_quantiles(&w.extra_secs_quantiles) {
                return Err(err("network.host_wake_up.extra_secs_quantiles", expected));
            }
            if w.provenance.detail.trim().is_empty() {
                return Err(err(
                    "network.host_wake_up.provenance.detail",
                    "where these wake-ups were measured".into(),
                ));
            }
        }
        for (i, f) in p.network.collective_fits.iter().enumerate() {
            let field = format!("network.collective_fits[{i}]");
            if f.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("{field}.provenance.detail"),
                    "where this fit came from".into(),
                ));
            }
            if !(f.algbw_bytes_per_s > 0.0 && f.algbw_bytes_per_s.is_finite()) {
                return Err(err(
                    &format!("{field}.algbw_bytes_per_s"),
                    format!("a positive rate, got {}", f.algbw_bytes_per_s),
                ));
            }
            if !f.alpha_secs.is_finite() || f.points < 3 || f.ranks == 0 {
                return Err(err(
                    &field,
                    "a finite alpha_secs, at least 3 points and 1 rank".into(),
                ));
            }
        }
        for (i, m) in p.network.paths.iter().enumerate() {
            let field = format!("network.paths[{i}]");
            if m.provenance.detail.trim().is_empty() {
                return Err(err(
                    &format!("{field}.provenance.detail"),
                    "where this measurement came from".into(),
                ));
            }
            let bw_ok = m
                .bandwidth
                .is_none_or(|b| b.bits_per_s() > 0.0 && b.bits_per_s().is_finite());
            let lat_ok = m.latency_secs.is_none_or(|l| l >= 0.0 && l.is_finite());
            if !bw_ok || !lat_ok || (m.bandwidth.is_none() && m.latency_secs.is_none()) {
                return Err(err(
                    &field,
                    "a positive bandwidth and/or a non-negative latency_secs".into(),
                ));
            }
        }
        if let Some(c) = &p.compute {
            check_compute(c).map_err(|(f, e)| err(&format!("compute.{f}"), e))?;
        }
        if let Some(n) = &p.network.nccl {
            crate::library::nccl::params::check(n)
                .map_err(|(f, e)| err(&format!("network.nccl.{f}"), e))?;
        }
        p.efficiency_factors()
            .validate()
            .map_err(|e| err("network.factors", e))?;
        Ok(p)
    }

    /// The factor tables in the form the network models use.
    pub fn efficiency_factors(&self) -> EfficiencyFactors {
        EfficiencyFactors {
            tables: self
                .network
                .factors
                .iter()
                .map(|(c, t)| (*c, t.rows.clone()))
                .collect(),
            link: self
                .network
                .link_efficiency
                .iter()
                .map(|(c, e)| (*c, e.value))
                .collect(),
            fifo_head: self
                .network
                .fifo_head_bytes
                .iter()
                .map(|(c, h)| (*c, h.value.0 as f64))
                .collect(),
            shaper_burst_secs: self
                .network
                .shaper_burst
                .iter()
                .map(|(c, b)| (*c, b.value.0.as_secs_f64()))
                .collect(),
            shaper_packet_wait_secs: self
                .network
                .shaper_packet_wait
                .iter()
                .map(|(c, w)| (*c, w.value.0.as_secs_f64()))
                .collect(),
            shaper_packet_bytes: self
                .network
                .shaper_packet
                .iter()
                .map(|(c, b)| (*c, b.value.0 as f64))
                .collect(),
            tcp_windows: !self.network.shaper_packet.is_empty(),
        }
    }

    /// Reduction rate in bytes per second, when the profile has one.
    pub fn reduce_bytes_per_s(&self) -> Option<f64> {
        self.network
            .reduce_bandwidth
            .as_ref()
            .map(|m| m.value.bytes_per_s())
    }

    /// Cores every host shares, when the profile says they share a machine's.
    pub fn shared_cores(&self) -> Option<f64> {
        self.network.host_cpu.as_ref().map(|h| h.shared_cores)
    }

    /// Host staging-copy rate in bytes per second, when the profile has one.
    pub fn host_copy_bytes_per_s(&self) -> Option<f64> {
        self.network
            .host_copy_bandwidth
            .as_ref()
            .map(|m| m.value.bytes_per_s())
    }

    /// Rate of copying a staged buffer out to warm tensors, bytes per second: the profile's
    /// `host_copy_out_bandwidth`, or its one staging-copy rate where it has no such split.
    pub fn host_copy_out_bytes_per_s(&self) -> Option<f64> {
        self.network
            .host_copy_out_bandwidth
            .as_ref()
            .map(|m| m.value.bytes_per_s())
            .or_else(|| self.host_copy_bytes_per_s())
    }
}

/// Every compute number needs a provenance detail and a sensible value.
fn check_compute(c: &ComputeCalibration) -> Result<(), (String, String)> {
    let prov = |field: &str, p: &Provenance| {
        if p.detail.trim().is_empty() || p.source.trim().is_empty() {
            Err((
                format!("{field}.provenance"),
                "a source and a detail saying where this number came from".to_string(),
            ))
        } else {
            Ok(())
        }
    };
    if c.peak_flops_per_s.is_empty() {
        return Err((
            "peak_flops_per_s".into(),
            "at least one dtype, e.g. {\"fp32\": {\"value\": 15.7e12, ...}}".into(),
        ));
    }
    for (dtype, v) in &c.peak_flops_per_s {
        prov(&format!("peak_flops_per_s.{dtype}"), &v.provenance)?;
        if !(v.value > 0.0 && v.value.is_finite()) {
            return Err((
                format!("peak_flops_per_s.{dtype}.value"),
                format!("a positive FLOP/s, got {}", v.value),
            ));
        }
    }
    // Matmul efficiency may exceed 1: FLOPs are counted as direct convolution, and Winograd /
    // FFT kernels do fewer multiplications (see workload::compute::MAX_MATMUL_EFFICIENCY).
    for (field, v, max) in [
        ("matmul_efficiency", &c.matmul_efficiency, 2.0),
        ("memory_efficiency", &c.memory_efficiency, 1.0),
    ] {
        prov(field, &v.provenance)?;
        if !(v.value > 0.0 && v.value <= max) {
            return Err((
                format!("{field}.value"),
                format!("a fraction of peak in (0, {max}], got {}", v.value),
            ));
        }
    }
    prov("half_efficiency_flops", &c.half_efficiency_flops.provenance)?;
    if !(c.half_efficiency_flops.value >= 0.0 && c.half_efficiency_flops.value.is_finite()) {
        return Err((
            "half_efficiency_flops.value".into(),
            "a non-negative number of FLOPs".into(),
        ));
    }
    prov("memory_bandwidth", &c.memory_bandwidth.provenance)?;
    if c.memory_bandwidth.value.bits_per_s() <= 0.0 {
        return Err((
            "memory_bandwidth.value".into(),
            "a positive bandwidth".into(),
        ));
    }
    prov("memory_capacity", &c.memory_capacity.provenance)?;
    prov("layer_overhead", &c.layer_overhead.provenance)?;
    if let Some(d) = &c.ddp_overhead_per_tensor {
        prov("ddp_overhead_per_tensor", &d.provenance)?;
    }
    for (i, t) in c.layer_times.iter().enumerate() {
        prov(&format!("layer_times[{i}]"), &t.provenance)?;
        if t.batch == 0 {
            return Err((format!("layer_times[{i}].batch"), "at least 1".into()));
        }
    }
    if let Some(g) = &c.gemm_times {
        prov("gemm_times", &g.provenance)?;
        for (i, t) in g.times.iter().enumerate() {
            let at = |f: &str| format!("gemm_times.times[{i}].{f}");
            for (f, v) in [("m", t.m), ("n", t.n), ("k", t.k), ("count", t.count)] {
                if v == 0 {
                    return Err((at(f), "at least 1".into()));
                }
            }
            if !(t.secs.is_finite() && t.secs > 0.0) {
                return Err((at("secs"), format!("seconds > 0, got {}", t.secs)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
