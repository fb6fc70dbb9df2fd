//! nccl-tests tables: each row replayed as NCCL runs it on the system its own columns describe
//! (GPU model, GPUs and nodes, the interconnects inside and between nodes: see
//! [`super::system`], which names no system), with that GPU's bundled profile; rows a profile
//! was fitted on are never scored; and leave-one-system-out (fit the NCCL parameters on every
//! other system, predict this one). The shared tables come out as:
//!
//! | system (column `system`) | topology | bundled profile |
//! |---|---|---|
//! | `ND H100 v5` | `hgx_h100.toml` | `h100_sxm_node.json` |
//! | `ND H200 v5` | `hgx_h100.toml` with `gpu = "H200"` (same NVLink4 / NVSwitch) | `h200_sxm_node.json` |
//! | `ND A100 v4` | `dgx_a100.toml` | `a100_sxm_node.json` |
//! | GCP `a3-megagpu-8g`, 2 nodes | `gcp_a3mega.toml` (8 NICs of 200 Gb/s per node) | `gcp_a3mega_2node_h100.json` |
//! | 2x RTX 2080 Ti | `pcie_box_2gpu.toml` | `rtx2080ti_pcie_box.json` |
//!
//! Rows of all_reduce, all_gather, reduce_scatter, broadcast and reduce are replayed (nccl-tests'
//! `size` is dtsim's `bytes`); profiles are fitted, and leave-one-system-out fits, on all-reduce
//! rows only, so the other collectives score how a fit carries over to them.
//!
//! Rows of GPUDirect-TCPXO clusters (GCP A3 Mega) run with the NCCL settings of Google's
//! recommended TCPXO environment (`nccl-env-profile.sh`): `NCCL_PROTO=Simple,LL128` and
//! `NCCL_MIN_NCHANNELS=4` ([`super::system::GCP_TCPXO_NCCL`]). Its tuner plugin's rules
//! (`a3plus_tuner_config.textproto`) are not public: NCCL's own choice stands in for them.
//!
//! A row whose command forced `NCCL_ALGO=NVLS` is replayed with NVLS forced where the system
//! can run it; where it cannot (the A100 table carries the label, but NCCL refuses NVLS
//! without NVLink SHARP), the row runs NCCL's default choice and its group name says so.

use std::path::{Path, PathBuf};

use super::{num, toml_str, Row};
use crate::collective::{bus_factor, Collective};
use crate::profile::Profile;
use crate::scenario::{self, fit_nccl::FitRow, run::prepare};

/// A row as a scenario.
pub struct Case {
    pub system: String,
    /// The row's collective. Profiles are fitted on all-reduce rows only; other collectives
    /// are scored against them.
    pub op: Collective,
    pub group: String,
    pub label: String,
    pub measured_secs: f64,
    pub text: String,
    pub set: Vec<String>,
    pub profile: PathBuf,
    /// What the row is replayed on, for the report ([`super::system::Replay::describe`]).
    pub replayed_on: String,
    /// The call the row measured (a track record's row).
    pub call: super::RowCall,
}

impl Case {
    /// The scenario with the row's bundled profile (`set` still to apply).
    pub fn scenario_text(&self) -> String {
        format!("profile = {}\n{}", toml_str(&self.profile), self.text)
    }
}

/// Whether a header (`has` a column) is an nccl-tests table's: sizes and a time or bandwidth.
pub fn is_table(has: impl Fn(&str) -> bool) -> bool {
    has("size_bytes") && TIME_COLUMNS.iter().any(|c| has(c))
}

/// The collectives of nccl-tests' `*_perf` programs that NCCL runs with its collective
/// algorithms, and `alltoall_perf`'s point-to-point all-to-all ([`crate::library::nccl::p2p`]):
/// (column `collective`, dtsim op). `sendrecv_perf` (a ring shift of sends) is not replayed.
const COLLECTIVES: [(&str, Collective); 6] = [
    ("all_reduce", Collective::AllReduce),
    ("all_gather", Collective::AllGather),
    ("reduce_scatter", Collective::ReduceScatter),
    ("broadcast", Collective::Broadcast),
    ("reduce", Collective::Reduce),
    ("alltoall", Collective::AllToAll),
];

/// The scenario replaying `row` (without its profile: callers add it or fit one). Rows of other
/// collectives than all-reduce are grouped apart (`<system> · <collective>`).
pub fn case(row: &Row, root: &Path) -> Result<Case, String> {
    let system = row.get("system").cloned().unwrap_or_default();
    let name = row
        .get("collective")
        .map(String::as_str)
        .unwrap_or("all_reduce");
    let Some(&(op_name, op)) = COLLECTIVES.iter().find(|(n, _)| *n == name) else {
        return Err(format!(
            "{system}: {name} rows are not replayed (dtsim's nccl library models {})",
            COLLECTIVES.map(|c| c.0).join(", ")
        ));
    };
    let bytes = num(row, "size_bytes")?;
    if !(bytes >= 0.0 && bytes.is_finite()) {
        return Err(format!(
            "size_bytes: a size of 0 bytes or more, got {bytes}"
        ));
    }
    let spec = super::system::read(row)?;
    let gpus = spec.gpus;
    let measured = measured_secs(row, op, bytes, gpus)?;
    let replay = spec.replay()?;
    let (topo, profile, nvls_capable) = (replay.topology, replay.profile, replay.nvls_capable);
    let set = replay.set.clone();
    let command = format!(
        "{} {}",
        row.get("command").map(String::as_str).unwrap_or(""),
        row.get("caveat").map(String::as_str).unwrap_or("")
    );
    let forced_nvls = command.contains("NCCL_ALGO=NVLS");
    let mut group = system.clone();
    if op != Collective::AllReduce {
        group.push_str(&format!(" · {op_name}"));
    }
    let mut text = format!(
        "name = \"validate\"\n[topology]\nfile = {}\n[placement]\nranks = {gpus}\n\
         [collective]\nop = \"{}\"\nbytes = \"{}B\"\nlibrary = \"nccl\"\n",
        toml_str(&root.join("topologies").join(format!("{topo}.toml"))),
        op.as_str(),
        bytes as u64,
    );
    if let Some(r) = row.get("root").and_then(|v| v.parse::<u32>().ok()) {
        if matches!(op, Collective::Broadcast | Collective::Reduce) {
            text.push_str(&format!("root = {r}\n"));
        }
    }
    text.push_str(replay.collective);
    let mut replayed_on = replay.describe();
    if let Some((v, note)) = row.get("nccl_version").and_then(|v| nccl_version(v)) {
        text.push_str(&format!("library_version = \"{v}\"\n"));
        if let Some(note) = note {
            replayed_on.push_str(&format!("; {note}"));
        }
    }
    if forced_nvls {
        if nvls_capable {
            text.push_str("algorithm = \"nvls\"\n");
        } else {
            group.push_str(" (labelled NVLS, not runnable here: NCCL's default choice)");
        }
    }
    let mut sim_set = "collective.library=nccl".to_string();
    if forced_nvls && nvls_capable {
        sim_set.push_str(";collective.algorithm=nvls");
    }
    let call = super::RowCall {
        sim_set,
        op: op.as_str().to_string(),
        ranks: gpus,
        bytes: Some(bytes as u64),
        batch: None,
        gpu: Some(spec.gpu.name.to_string()),
    };
    Ok(Case {
        call,
        system,
        op,
        group,
        label: format!("{} B", bytes as u64),
        measured_secs: measured,
        text,
        set,
        profile: root.join("data/profiles").join(format!("{profile}.json")),
        replayed_on,
    })
}

/// The columns a table may give a row's time in: nccl-tests' out-of-place or in-place time (µs),
/// else its bus or algorithm bandwidth (GB/s), in that order.
pub const TIME_COLUMNS: [&str; 7] = [
    "oop_time_us",
    "ip_time_us",
    "time_us",
    "busbw_GBps",
    "oop_busbw_GBps",
    "ip_busbw_GBps",
    "algbw_GBps",
];

/// The measured time of `row`: the first of [`TIME_COLUMNS`] it gives.
fn measured_secs(row: &Row, op: Collective, bytes: f64, gpus: u32) -> Result<f64, String> {
    for column in TIME_COLUMNS {
        let Some(v) = row.get(column).and_then(|v| v.trim().parse::<f64>().ok()) else {
            continue;
        };
        return Ok(if column.ends_with("time_us") {
            v * 1e-6
        } else if column.starts_with("algbw") {
            bytes / (v * 1e9)
        } else {
            bytes / (v * 1e9 / bus_factor(op, gpus))
        });
    }
    Err(format!(
        "{}: a measured time or bandwidth",
        TIME_COLUMNS.join(" / ")
    ))
}

/// The NCCL release a row names (`2.21.5`, `NCCL 2.21.5-1`, `v2.19`), as the release dtsim plays:
/// the nearest it models, with a note where that is not the one named. `None` where the row
/// names none (`not stated`): NCCL's newest modelled release.
fn nccl_version(text: &str) -> Option<(crate::library::nccl::Version, Option<String>)> {
    use crate::library::nccl::Version;
    // "2." at the start of a number ("CUDA 12.4" names no NCCL release).
    let start = text.match_indices("2.").map(|(i, _)| i).find(|&i| {
        !text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
    })?;
    let minor: u32 = text[start + 2..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    let v = Version { minor }.clamp(Version::OLDEST, Version::NEWEST);
    let note = (v.minor != minor)
        .then(|| format!("NCCL 2.{minor} played as {v}, the nearest release dtsim models"));
    Some((v, note))
}

/// Replays `row` with the system's bundled profile: (group, label, measured, simulated).
pub fn replay(row: &Row, root: &Path) -> super::Replayed {
    let c = case(row, root)?;
    let text = c.scenario_text();
    let sim = super::simulate(&text, &c.set, false)?;
    Ok(super::Replay {
        call: Some(c.call),
        ..super::Replay::new(c.group, c.label, c.measured_secs, sim)
    })
}

/// Which rows the bundled profiles were fitted on, each profile read once.
#[derive(Default)]
pub struct FittedOn {
    by_profile: std::collections::HashMap<PathBuf, Vec<crate::profile::FittedRows>>,
}

impl FittedOn {
    /// Whether the profile `row` is replayed with was fitted on this row of `file_name`.
    pub fn contains(&mut self, row: &Row, root: &Path, file_name: &str, row_no: usize) -> bool {
        let Ok(c) = case(row, root) else { return false };
        let fitted = self.by_profile.entry(c.profile.clone()).or_insert_with(|| {
            Profile::load(&c.profile)
                .ok()
                .and_then(|p| p.network.nccl.map(|n| n.fitted_on))
                .unwrap_or_default()
        });
        fitted
            .iter()
            .any(|f| f.file == file_name && f.rows.contains(&(row_no as u32)))
    }
}

/// Fit rows (nominal profile) for every replayable all-reduce row of `datasets` whose system
/// `keep` accepts.
pub fn fit_rows(
    datasets: &[PathBuf],
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, FitRow)>, String> {
    let mut out = Vec::new();
    for path in datasets {
        let rows = super::read_csv(path)?;
        let root = super::repo_root(path);
        let file = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (i, row) in rows.iter().enumerate() {
            let Ok(c) = case(row, &root) else { continue };
            if c.op != Collective::AllReduce
                || !keep(&c.system)
                || c.measured_secs.is_nan()
                || c.measured_secs <= 0.0
            {
                continue;
            }
            let s = scenario::parse(&c.text, Path::new("fit-row.toml"), &c.set)
                .map_err(|e| e.to_string())?;
            let prep = prepare(&s).map_err(|e| e.to_string())?;
            out.push((
                c.group.clone(),
                FitRow {
                    scenario: s,
                    prep,
                    measured_secs: c.measured_secs,
                    file: file.clone(),
                    row: i as u32 + 1,
                },
            ));
        }
    }
    Ok(out)
}

/// Leave-one-system-out over the nccl-tests tables among `datasets`: for each system, the
/// NCCL parameters fitted on every other system's rows predict its rows.
pub fn leave_one_out(datasets: &[PathBuf]) -> Result<Vec<super::Prediction>, String> {
    let nccl: Vec<PathBuf> = datasets
        .iter()
        .filter(|p| {
            super::read_csv(p).is_ok_and(|rows| {
                rows.first()
                    .is_some_and(|r| is_table(|c| r.contains_key(c)))
            })
        })
        .cloned()
        .collect();
    let all = fit_rows(&nccl, &|_| true)?;
    let mut systems: Vec<String> = all.iter().map(|(g, _)| g.clone()).collect();
    systems.sort();
    systems.dedup();
    let mut out = Vec::new();
    for held in &systems {
        let train: Vec<FitRow> = all
            .iter()
            .filter(|(g, _)| g != held)
            .map(|(_, r)| r.clone())
            .collect();
        let test: Vec<&FitRow> = all
            .iter()
            .filter(|(g, _)| g == held)
            .map(|(_, r)| r)
            .collect();
        if train.is_empty() || test.is_empty() {
            continue;
        }
        let fit = scenario::fit_nccl::fit(&train, &format!("leave-one-out: all but {held}"), None)?;
        let test_rows: Vec<FitRow> = test.iter().map(|r| (*r).clone()).collect();
        let sim = scenario::fit_nccl::simulate_rows(&test_rows, &fit.calibration)?;
        for (r, s) in test_rows.iter().zip(sim) {
            let dataset = Path::new(&r.file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(super::Prediction {
                dataset,
                group: format!("{held} [leave-one-system-out]"),
                row: r.row as usize,
                label: format!(
                    "{} B",
                    r.scenario
                        .file
                        .collective
                        .as_ref()
                        .map_or(0, |c| c.bytes.map_or(0, |b| b.0))
                ),
                measured_secs: r.measured_secs,
                simulated_secs: s,
                predicted_secs: s,
                calibration: false,
                scored: true,
                measured_range_secs: None,
                exchange_modes_secs: None,
                plays_secs: None,
                launch_range_secs: None,
                launch_medians_secs: Vec::new(),
                call: None,
            });
        }
    }
    Ok(out)
}

/// The scenario (text, `--set` lines) that replays `system`'s all-reduce rows of the table at
/// `path` as `dtsim validate` does, with the size left to the caller: `dtsim nccl-tests
/// --measured TABLE --system NAME` without a scenario of its own.
pub fn scenario_of(path: &Path, system: &str) -> Result<(String, Vec<String>), String> {
    let rows = super::read_csv(path)?;
    let root = super::repo_root(path);
    let mut systems = Vec::new();
    for row in &rows {
        let name = row.get("system").map(String::as_str).unwrap_or("");
        if !systems.iter().any(|s| s == name) {
            systems.push(name.to_string());
        }
        if name != system || row.get("collective").is_some_and(|c| c != "all_reduce") {
            continue;
        }
        let c = case(row, &root).map_err(|e| format!("{}: {e}", path.display()))?;
        let text = c.scenario_text();
        return Ok((text, c.set));
    }
    Err(format!(
        "{}: --system: one of {systems:?} with all_reduce rows, got {system:?}",
        path.display()
    ))
}

/// The measured times (µs by size) of one system's `op` rows in a table, for printing a
/// simulated sweep of that collective beside them (`dtsim nccl-tests --measured`).
pub fn measured_us(
    path: &Path,
    system: &str,
    op: Collective,
) -> Result<std::collections::BTreeMap<u64, f64>, String> {
    let rows = super::read_csv(path)?;
    let root = super::repo_root(path);
    let mut out = std::collections::BTreeMap::new();
    let mut systems = Vec::new();
    for row in &rows {
        let Ok(c) = case(row, &root) else { continue };
        if c.op != op {
            continue;
        }
        if !systems.contains(&c.system) {
            systems.push(c.system.clone());
        }
        if c.system == system && c.measured_secs > 0.0 {
            out.insert(num(row, "size_bytes")? as u64, c.measured_secs * 1e6);
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{}: --system: one of {systems:?} (systems with {op} rows), got {system:?}",
            path.display()
        ));
    }
    Ok(out)
}
