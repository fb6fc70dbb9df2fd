//! Fits the NCCL model's physical parameters to measured collective times by simulating them.
//!
//! Each measured row is a scenario (topology, ranks, collective, size, forced algorithm if the
//! measurement forced one). The tuner's choice for a row does not depend on the parameters
//! (NCCL chooses by its own constants), so the keys a set of rows exercises are known before
//! fitting: for each (algorithm, protocol) that runs, its per-call latency; for multi-step
//! algorithms, its per-step latency over the steps' link class; for each (algorithm, link
//! class), its efficiency, or for NVLS its channel rate instead (and, with
//! [`FitChoices::ring_channel_rates`], for ring and tree a channel rate per protocol). Only
//! those are fitted; the rest keep NCCL's constants.
//!
//! The objective is the sum of squared log errors of simulated vs measured time (every size
//! weighs the same, small and large), minimised by Nelder–Mead over transformed parameters
//! (log latency, logit efficiency). 95% intervals come from the Jacobian at the optimum
//! (`s² (JᵀJ)⁻¹`, transformed back), which is honest for a few well-determined parameters
//! and says so when one is not determined (an interval that spans the allowed range).

use crate::collective::play::Watch;
use std::collections::BTreeMap;

use super::run::{run_prepared, Prepared};
use super::Scenario;
use crate::profile::{FittedParameter, FittedRows, NcclCalibration, Provenance};

/// One measured row to fit.
#[derive(Clone)]
pub struct FitRow {
    pub scenario: Scenario,
    pub prep: Prepared,
    pub measured_secs: f64,
    /// The measurement file's name and 1-based data row, for `fitted_on`.
    pub file: String,
    pub row: u32,
}

/// One measured collective on a known system: what an nccl-tests log row says, once the user
/// has named the topology it ran on.
#[derive(Debug, Clone)]
pub struct Measured<'a> {
    /// A topology file that names its GPU (`gpu = "H100-SXM5"`).
    pub topology: &'a std::path::Path,
    /// A collective NCCL runs: `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`,
    /// `reduce`.
    pub collective: &'a str,
    pub bytes: u64,
    pub ranks: u32,
    /// What the run forced, as `NCCL_ALGO` / `NCCL_PROTO` would.
    pub algorithm: Option<&'a str>,
    pub protocol: Option<&'a str>,
    /// The NCCL release that ran (`"2.19.3"`); the newest modelled when `None`.
    pub version: Option<&'a str>,
    /// The rules file of the tuner plugin the runs were steered by, if any.
    pub tuner_config: Option<&'a std::path::Path>,
    /// `NCCL_COLLNET_ENABLE=1` (CollNet where the topology's switches reduce).
    pub collnet: bool,
    pub measured_secs: f64,
    pub file: String,
    pub row: u32,
}

impl Measured<'_> {
    /// The row as an NCCL scenario on the topology, ready to simulate and fit.
    pub fn fit_row(&self) -> Result<FitRow, String> {
        let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut text = format!(
            "name = \"fit-row\"\n[topology]\nfile = {}\n[placement]\nranks = {}\n\
             [collective]\nop = {}\nbytes = \"{}B\"\nlibrary = \"nccl\"\n",
            quote(&self.topology.display().to_string()),
            self.ranks,
            quote(self.collective),
            self.bytes
        );
        for (field, v) in [
            ("algorithm", self.algorithm),
            ("protocol", self.protocol),
            ("library_version", self.version),
        ] {
            if let Some(v) = v {
                text.push_str(&format!("{field} = {}\n", quote(v)));
            }
        }
        if let Some(t) = self.tuner_config {
            text.push_str(&format!(
                "tuner_config = {}\n",
                quote(&t.display().to_string())
            ));
        }
        if self.collnet {
            text.push_str("collnet = true\n");
        }
        let at = |e: String| format!("{} row {}: {e}", self.file, self.row);
        let scenario = super::parse(&text, std::path::Path::new("fit-row.toml"), &[])
            .map_err(|e| at(e.to_string()))?;
        let prep = super::run::prepare(&scenario).map_err(|e| at(e.to_string()))?;
        Ok(FitRow {
            scenario,
            prep,
            measured_secs: self.measured_secs,
            file: self.file.clone(),
            row: self.row,
        })
    }
}

/// A fit's result: the calibration and how well it fits its own rows.
#[derive(Debug, Clone)]
pub struct NcclFit {
    pub calibration: NcclCalibration,
    pub rows: usize,
    /// Median and max |simulated / measured - 1| over the fitted rows.
    pub median_abs_error: f64,
    pub max_abs_error: f64,
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Base(String),
    Step(String),
    Efficiency(String),
    /// One channel's payload rate, GB/s.
    Channel(String),
    /// A call latency as a factor on NCCL's own for each row's release (NVLS, whose constant
    /// NCCL changed from 2.20: the factor carries over, the microseconds follow NCCL).
    BaseScale(String),
    /// A call latency and a step latency that the rows cannot tell apart (one rank count):
    /// one factor on NCCL's own pair (`base0`, `step0`, µs), so their split, which decides how
    /// latency grows with the GPU count, stays NCCL's.
    Latency {
        base: String,
        step: String,
        base0: f64,
        step0: f64,
    },
}

const SCALE_MIN: f64 = 1e-3;
const SCALE_MAX: f64 = 1e3;

const LAT_MIN_US: f64 = 0.01;
const LAT_MAX_US: f64 = 1000.0;
const CHANNEL_MIN_GBPS: f64 = 0.1;
const CHANNEL_MAX_GBPS: f64 = 10_000.0;

fn to_value(k: &Key, x: f64) -> f64 {
    match k {
        Key::Base(_) | Key::Step(_) => x.exp().clamp(LAT_MIN_US, LAT_MAX_US),
        Key::Channel(_) => x.exp().clamp(CHANNEL_MIN_GBPS, CHANNEL_MAX_GBPS),
        Key::Latency { .. } | Key::BaseScale(_) => x.exp().clamp(SCALE_MIN, SCALE_MAX),
        Key::Efficiency(_) => (1.0 / (1.0 + (-x).exp())).clamp(1e-3, 1.0),
    }
}

fn to_x(k: &Key, v: f64) -> f64 {
    match k {
        Key::Base(_) | Key::Step(_) => v.max(LAT_MIN_US).ln(),
        Key::Channel(_) => v.max(CHANNEL_MIN_GBPS).ln(),
        Key::Latency { .. } | Key::BaseScale(_) => v.max(SCALE_MIN).ln(),
        Key::Efficiency(_) => {
            let v = v.clamp(0.01, 0.99);
            (v / (1.0 - v)).ln()
        }
    }
}

fn calibration(
    keys: &[Key],
    x: &[f64],
    prov: &Provenance,
    fitted: &[FittedRows],
) -> NcclCalibration {
    let mut c = NcclCalibration {
        fitted_on: fitted.to_vec(),
        ..NcclCalibration::default()
    };
    for (k, &xi) in keys.iter().zip(x) {
        let p = FittedParameter {
            value: to_value(k, xi),
            ci95: None,
            provenance: prov.clone(),
        };
        match k {
            Key::Base(s) => c.base_latency_us.insert(s.clone(), p),
            Key::Step(s) => c.step_latency_us.insert(s.clone(), p),
            Key::Efficiency(s) => c.efficiency.insert(s.clone(), p),
            Key::Channel(s) => c.channel_gbps.insert(s.clone(), p),
            Key::BaseScale(s) => c.base_latency_scale.insert(s.clone(), p),
            Key::Latency {
                base,
                step,
                base0,
                step0,
            } => {
                let scaled = |v0: f64| FittedParameter {
                    value: (p.value * v0).clamp(0.0, LAT_MAX_US),
                    ci95: None,
                    provenance: Provenance {
                        detail: format!(
                            "{} (call and step latency fitted as one factor, {:.3}, on NCCL's own \
                         {base0:.2} us per call and {step0:.2} us per step: one rank count \
                         cannot tell them apart)",
                            prov.detail, p.value
                        ),
                        ..prov.clone()
                    },
                };
                c.base_latency_us.insert(base.clone(), scaled(*base0));
                c.step_latency_us.insert(step.clone(), scaled(*step0))
            }
        };
    }
    c
}

/// Simulated seconds of every row under `cal`, or the first row's error.
pub fn simulate_rows(rows: &[FitRow], cal: &NcclCalibration) -> Result<Vec<f64>, String> {
    use rayon::prelude::*;
    // Rows are independent runs: in parallel, collected in row order (deterministic).
    rows.par_iter()
        .map(|r| {
            let mut prep = r.prep.clone();
            prep.profile.network.nccl = Some(cal.clone());
            run_prepared(&r.scenario, prep, Watch::default())
                .map(|rep| rep.summary.time_ps as f64 * 1e-12)
                .map_err(|e| format!("{} row {}: {e}", r.file, r.row))
        })
        .collect()
}

/// The parameters the rows' costs depend on, from each run's `library_parameters`. Step
/// latencies are fitted for ring, tree and NVLS (per chunk) only: PAT's few log steps are
/// collinear with the call latency in any single-node table. Ring and tree ones only where
/// the rows that use one ran at two or more rank counts: at one count every row takes the
/// same number of steps, so a call latency and a step latency are one number there (any
/// split fits as well), and the split decides what other counts are predicted at. There the
/// pair is fitted as one factor on NCCL's own pair ([`Key::Latency`]), or, where the call
/// latency is also used with other steps, the step keeps NCCL's constant.
///
/// Returns every key once, in first-use order, and for each row the indices of its keys.
fn exercised(rows: &[FitRow], choices: FitChoices) -> Result<(Vec<Key>, Vec<Vec<usize>>), String> {
    let mut used_by_row = Vec::with_capacity(rows.len());
    let mut step_rank_counts: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for r in rows {
        let mut prep = r.prep.clone();
        prep.profile.network.nccl = None;
        let rep = run_prepared(&r.scenario, prep, Watch::default())
            .map_err(|e| format!("{} row {}: {e}", r.file, r.row))?;
        let used = rep.summary.library_parameters;
        if used.is_empty() {
            return Err(format!(
                "{} row {}: not an NCCL run ({})",
                r.file, r.row, rep.summary.library
            ));
        }
        for u in &used {
            if let Some(key) = u.strip_prefix("step_latency_us[") {
                let counts = step_rank_counts.entry(key.to_string()).or_default();
                if !counts.contains(&r.prep.ranks.len()) {
                    counts.push(r.prep.ranks.len());
                }
            }
        }
        used_by_row.push(used);
    }
    let separable = |step: &str| step_rank_counts.get(step).is_some_and(|c| c.len() > 1);
    let is_ring_tree = |k: &str| k.starts_with("ring/") || k.starts_with("tree/");
    // Call latencies bound to exactly one inseparable step latency in every row that uses
    // them: (base key, step key) -> NCCL's defaults at the first such row's version.
    let mut bound: BTreeMap<String, Option<String>> = BTreeMap::new();
    for used in &used_by_row {
        let steps: Vec<&str> = used
            .iter()
            .filter_map(|u| u.strip_prefix("step_latency_us["))
            .filter(|k| is_ring_tree(k) && !separable(k))
            .collect();
        for u in used {
            let Some(base) = u.strip_prefix("base_latency_us[") else {
                continue;
            };
            let prefix = format!("{}/", base.trim_end_matches(']'));
            let mine: Vec<&&str> = steps.iter().filter(|k| k.starts_with(&prefix)).collect();
            let here = (mine.len() == 1).then(|| mine[0].to_string());
            let entry = bound
                .entry(base.to_string())
                .or_insert_with(|| here.clone());
            if *entry != here {
                *entry = None;
            }
        }
    }
    let mut latency_keys: BTreeMap<String, Key> = BTreeMap::new();
    for (used, r) in used_by_row.iter().zip(rows) {
        for u in used {
            let Some(base) = u.strip_prefix("base_latency_us[") else {
                continue;
            };
            if let (Some(Some(step)), false) = (bound.get(base), latency_keys.contains_key(base)) {
                let (b, st) = (base.trim_end_matches(']'), step.trim_end_matches(']'));
                let (base0, step0) = nccl_latency_defaults(r, b, st)?;
                latency_keys.insert(
                    base.to_string(),
                    Key::Latency {
                        base: b.to_string(),
                        step: st.to_string(),
                        base0,
                        step0,
                    },
                );
            }
        }
    }
    let joint_step = |step: &str| {
        latency_keys
            .values()
            .any(|k| matches!(k, Key::Latency { step: s, .. } if format!("{s}]") == step))
    };
    let mut keys: Vec<Key> = Vec::new();
    let mut by_row = Vec::with_capacity(rows.len());
    for used in &used_by_row {
        let mut mine = Vec::new();
        for u in used {
            if let Some(k) = u
                .strip_prefix("base_latency_us[")
                .and_then(|b| latency_keys.get(b))
            {
                use_key(&mut keys, &mut mine, k.clone());
                continue;
            }
            if u.strip_prefix("step_latency_us[").is_some_and(joint_step) {
                continue;
            }
            let (table, key) = u
                .strip_suffix(']')
                .and_then(|u| u.split_once('['))
                .ok_or_else(|| format!("parameter name {u:?} is not table[key]"))?;
            let k = match table {
                "base_latency_us" | "base_latency_scale" if key.starts_with("nvls/") => {
                    Key::BaseScale(key.to_string())
                }
                "base_latency_us" => Key::Base(key.to_string()),
                // NVLS's per-chunk latency: chunks grow with the size (16 to 128 KiB), which
                // tells it apart from the call latency at any rank count.
                "step_latency_us" if key.starts_with("nvls/") => Key::Step(key.to_string()),
                "step_latency_us" if is_ring_tree(key) && separable(&format!("{key}]")) => {
                    Key::Step(key.to_string())
                }
                "step_latency_us" => continue,
                // Where a channel's rate is fitted, it and the link efficiency cap the same
                // flows (on a table where every channel always works, they are one number):
                // the efficiency keeps NCCL's view of the link.
                "efficiency"
                    if key
                        .split('/')
                        .next()
                        .and_then(crate::library::nccl::Algo::parse)
                        .is_some_and(crate::library::nccl::params::channel_rate_fitted) =>
                {
                    continue
                }
                // Asked for: each ring or tree protocol's channel rate, in place of the link's
                // efficiency (as for NVLS, the two cap the same flows).
                "efficiency" if choices.ring_channel_rates && is_ring_tree(key) => {
                    let algo = key.split('/').next().unwrap_or_default();
                    for u in used {
                        let proto = u
                            .strip_prefix("base_latency_us[")
                            .and_then(|b| b.strip_suffix(']'))
                            .and_then(|b| b.strip_prefix(&format!("{algo}/")));
                        if let Some(proto) = proto {
                            let k = Key::Channel(format!("{algo}/{proto}"));
                            use_key(&mut keys, &mut mine, k);
                        }
                    }
                    continue;
                }
                "efficiency" => Key::Efficiency(key.to_string()),
                "channel_gbps" => Key::Channel(key.to_string()),
                other => return Err(format!("unknown parameter table {other:?}")),
            };
            use_key(&mut keys, &mut mine, k);
        }
        by_row.push(mine);
    }
    Ok((keys, by_row))
}

/// Adds `k` to the fit's `keys` (once) and its index to a row's `mine` (once).
fn use_key(keys: &mut Vec<Key>, mine: &mut Vec<usize>, k: Key) {
    let i = keys.iter().position(|x| *x == k).unwrap_or_else(|| {
        keys.push(k);
        keys.len() - 1
    });
    if !mine.contains(&i) {
        mine.push(i);
    }
}

/// NCCL's own call and step latency (µs) for `base` ("ring/ll") and `step` ("ring/ll/ib") at
/// the NCCL version row `r` runs.
fn nccl_latency_defaults(r: &FitRow, base: &str, step: &str) -> Result<(f64, f64), String> {
    use crate::library::nccl::{params::LinkPrior, params::Params, Algo, Proto, Version};
    let version = r
        .scenario
        .file
        .collective
        .as_ref()
        .and_then(|c| c.library_version.as_deref())
        .and_then(Version::parse)
        .unwrap_or(Version::NEWEST);
    let mut parts = step.split('/');
    let (a, p, c) = (parts.next(), parts.next(), parts.next());
    let bad = || format!("parameter keys {base:?} / {step:?} are not algorithm/protocol[/class]");
    let a = a.and_then(Algo::parse).ok_or_else(bad)?;
    let p = p.and_then(Proto::parse).ok_or_else(bad)?;
    let c = c
        .and_then(|c| {
            crate::topology::LinkClass::ALL
                .iter()
                .find(|k| k.as_str() == c)
        })
        .ok_or_else(bad)?;
    let defaults = Params::new(None, version, LinkPrior::NOMINAL);
    Ok((
        defaults.base_latency_us(a, p),
        defaults.step_latency_us(a, p, *c),
    ))
}

/// Keys that no row couples are fitted apart: groups of keys joined by sharing a row (an
/// A100 table's ring keys never meet an H200 table's NVLS keys), each with the rows that use
/// them. The objective is a sum over rows, so this is the same optimum, found in a few
/// dimensions at a time instead of all at once, where Nelder–Mead converges.
fn independent_groups(n_keys: usize, by_row: &[Vec<usize>]) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut parent: Vec<usize> = (0..n_keys).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for ks in by_row {
        for w in ks.windows(2) {
            let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut groups: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    for k in 0..n_keys {
        let r = root(&mut parent, k);
        match groups.iter_mut().find(|g| g.0 == r) {
            Some(g) => g.1.push(k),
            None => groups.push((r, vec![k], Vec::new())),
        }
    }
    for (i, ks) in by_row.iter().enumerate() {
        if let Some(&k) = ks.first() {
            let r = root(&mut parent, k);
            if let Some(g) = groups.iter_mut().find(|g| g.0 == r) {
                g.2.push(i);
            }
        }
    }
    groups.into_iter().map(|(_, k, r)| (k, r)).collect()
}

fn objective(rows: &[FitRow], keys: &[Key], x: &[f64], prov: &Provenance) -> f64 {
    let cal = calibration(keys, x, prov, &[]);
    match simulate_rows(rows, &cal) {
        Ok(sim) => sim
            .iter()
            .zip(rows)
            .map(|(s, r)| (s / r.measured_secs).ln().powi(2))
            .sum(),
        Err(_) => f64::INFINITY,
    }
}

/// Nelder–Mead minimisation of `f` from `x0` (standard coefficients 1, 2, ½, ½).
fn nelder_mead(f: &dyn Fn(&[f64]) -> f64, x0: &[f64], step: f64, iters: usize) -> Vec<f64> {
    let n = x0.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n + 1);
    simplex.push((x0.to_vec(), f(x0)));
    for i in 0..n {
        let mut x = x0.to_vec();
        x[i] += step;
        let fx = f(&x);
        simplex.push((x, fx));
    }
    for _ in 0..iters {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let spread = simplex[n].1 - simplex[0].1;
        if spread.abs() < 1e-10 {
            break;
        }
        let centroid: Vec<f64> = (0..n)
            .map(|j| simplex[..n].iter().map(|(x, _)| x[j]).sum::<f64>() / n as f64)
            .collect();
        let along = |t: f64| -> Vec<f64> {
            centroid
                .iter()
                .zip(&simplex[n].0)
                .map(|(c, w)| c + t * (c - w))
                .collect()
        };
        let xr = along(1.0);
        let fr = f(&xr);
        if fr < simplex[0].1 {
            let xe = along(2.0);
            let fe = f(&xe);
            simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
        } else if fr < simplex[n - 1].1 {
            simplex[n] = (xr, fr);
        } else {
            let xc = along(-0.5);
            let fc = f(&xc);
            if fc < simplex[n].1 {
                simplex[n] = (xc, fc);
            } else {
                let best = simplex[0].0.clone();
                for s in simplex.iter_mut().skip(1) {
                    let x: Vec<f64> =
                        s.0.iter()
                            .zip(&best)
                            .map(|(a, b)| b + 0.5 * (a - b))
                            .collect();
                    s.1 = f(&x);
                    s.0 = x;
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0).0
}

/// Which parameters a fit may move beyond the defaults (see `exercised`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FitChoices {
    /// Fit one channel's payload rate per ring or tree protocol the rows run (LL, LL128,
    /// Simple) instead of the link's efficiency for that algorithm: for a table whose
    /// protocols reach different shares of the link (a thread block per channel copies at its
    /// protocol's pace), which one efficiency per link cannot express.
    pub ring_channel_rates: bool,
}

/// Fits the parameters the rows exercise; `detail` goes into every parameter's provenance.
pub fn fit(rows: &[FitRow], detail: &str, date: Option<String>) -> Result<NcclFit, String> {
    fit_with(rows, detail, date, FitChoices::default())
}

/// [`fit`], with the [`FitChoices`] given.
pub fn fit_with(
    rows: &[FitRow],
    detail: &str,
    date: Option<String>,
    choices: FitChoices,
) -> Result<NcclFit, String> {
    if rows.is_empty() {
        return Err("no rows to fit".into());
    }
    let (keys, by_row) = exercised(rows, choices)?;
    let prov = Provenance {
        source: "fitted".into(),
        detail: detail.to_string(),
        date,
    };
    let x0: Vec<f64> = keys
        .iter()
        .map(|k| match k {
            Key::Base(_) => to_x(k, 10.0),
            Key::Step(_) => to_x(k, 1.0),
            Key::Efficiency(_) => to_x(k, 0.8),
            // A ring or tree channel's rate only shows while it binds (above, the link caps
            // the flow and the objective is flat): start where it binds, so the search can
            // rise until it stops mattering rather than stall in the flat part.
            Key::Channel(c) if c.starts_with("ring/") || c.starts_with("tree/") => to_x(k, 2.0),
            Key::Channel(_) => to_x(k, 20.0),
            Key::Latency { .. } | Key::BaseScale(_) => to_x(k, 1.0),
        })
        .collect();
    let mut x = x0.clone();
    let groups = independent_groups(keys.len(), &by_row);
    for (group, members) in &groups {
        let g_rows: Vec<FitRow> = members.iter().map(|&i| rows[i].clone()).collect();
        let g_keys: Vec<Key> = group.iter().map(|&k| keys[k].clone()).collect();
        let f = |gx: &[f64]| objective(&g_rows, &g_keys, gx, &prov);
        let g0: Vec<f64> = group.iter().map(|&k| x0[k]).collect();
        // Two restarts from the first optimum: Nelder–Mead stalls on ridges.
        let mut gx = nelder_mead(&f, &g0, 0.7, 150 * g_keys.len());
        for _ in 0..2 {
            gx = nelder_mead(&f, &gx, 0.3, 100 * g_keys.len());
        }
        for (&k, v) in group.iter().zip(gx) {
            x[k] = v;
        }
    }
    let mut fitted_on: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for r in rows {
        fitted_on.entry(r.file.clone()).or_default().push(r.row);
    }
    let fitted_on: Vec<FittedRows> = fitted_on
        .into_iter()
        .map(|(file, rows)| FittedRows { file, rows })
        .collect();
    let mut cal = calibration(&keys, &x, &prov, &fitted_on);
    let sim = simulate_rows(rows, &cal)?;
    let resid: Vec<f64> = sim
        .iter()
        .zip(rows)
        .map(|(s, r)| (s / r.measured_secs).ln())
        .collect();
    // Jacobian of the log residuals by central differences, then s²(JᵀJ)⁻¹.
    let (m, n) = (rows.len(), keys.len());
    if m > n {
        let h = 1e-3;
        let mut jac = vec![vec![0.0; n]; m];
        for j in 0..n {
            let mut xp = x.clone();
            xp[j] += h;
            let mut xm = x.clone();
            xm[j] -= h;
            let sp = simulate_rows(rows, &calibration(&keys, &xp, &prov, &[]))?;
            let sm = simulate_rows(rows, &calibration(&keys, &xm, &prov, &[]))?;
            for i in 0..m {
                jac[i][j] = (sp[i].ln() - sm[i].ln()) / (2.0 * h);
            }
        }
        let s2 = resid.iter().map(|r| r * r).sum::<f64>() / (m - n) as f64;
        // A parameter the rows do not move (pinned at a bound, or its algorithm barely runs)
        // has no interval; the others get theirs from the rest of their group's matrix (keys
        // of different groups share no row: JᵀJ is block-diagonal, and one group's ridge, say
        // a call and a step latency that one GPU count cannot tell apart, leaves the other
        // groups' intervals standing).
        for (group, _) in &groups {
            let active: Vec<usize> = group
                .iter()
                .copied()
                .filter(|&j| (0..m).map(|i| jac[i][j] * jac[i][j]).sum::<f64>() > 1e-10)
                .collect();
            let jtj: Vec<Vec<f64>> = active
                .iter()
                .map(|&a| {
                    active
                        .iter()
                        .map(|&b| (0..m).map(|i| jac[i][a] * jac[i][b]).sum())
                        .collect()
                })
                .collect();
            let Some(inv) = invert(jtj) else { continue };
            for (ai, &j) in active.iter().enumerate() {
                let k = &keys[j];
                let sd = (s2 * inv[ai][ai]).max(0.0).sqrt();
                let lo = to_value(k, x[j] - 1.96 * sd);
                let hi = to_value(k, x[j] + 1.96 * sd);
                let slots = match k {
                    Key::Base(s) => vec![(cal.base_latency_us.get_mut(s), 1.0)],
                    Key::Step(s) => vec![(cal.step_latency_us.get_mut(s), 1.0)],
                    Key::Efficiency(s) => vec![(cal.efficiency.get_mut(s), 1.0)],
                    Key::Channel(s) => vec![(cal.channel_gbps.get_mut(s), 1.0)],
                    Key::BaseScale(s) => vec![(cal.base_latency_scale.get_mut(s), 1.0)],
                    Key::Latency {
                        base,
                        step,
                        base0,
                        step0,
                    } => vec![
                        (cal.base_latency_us.get_mut(base), *base0),
                        (cal.step_latency_us.get_mut(step), *step0),
                    ],
                };
                for (slot, v0) in slots {
                    if let Some(p) = slot {
                        p.ci95 = Some([lo * v0, hi * v0]);
                    }
                }
            }
        }
    }
    let mut abs: Vec<f64> = sim
        .iter()
        .zip(rows)
        .map(|(s, r)| (s / r.measured_secs - 1.0).abs())
        .collect();
    abs.sort_by(f64::total_cmp);
    Ok(NcclFit {
        calibration: cal,
        rows: m,
        median_abs_error: crate::stats::median(&abs),
        max_abs_error: *abs.last().unwrap_or(&0.0),
    })
}

/// Gauss–Jordan inverse of a small symmetric matrix; `None` when singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut inv: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, p);
        inv.swap(c, p);
        let d = a[c][c];
        for j in 0..n {
            a[c][j] /= d;
            inv[c][j] /= d;
        }
        for i in 0..n {
            if i != c {
                let f = a[i][c];
                for j in 0..n {
                    a[i][j] -= f * a[c][j];
                    inv[i][j] -= f * inv[c][j];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests;
