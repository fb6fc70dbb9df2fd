//! Fits the NCCL model's physical parameters to measured collective times by simulating them.
//!
//! Each measured row is a scenario (topology, ranks, collective, size, forced algorithm if the
//! measurement forced one). The tuner's choice for a row does not depend on the parameters
//! (NCCL chooses by its own constants), so the keys a set of rows exercises are known before
//! fitting: for each (algorithm, protocol) that runs, its per-call latency; for multi-step
//! algorithms, its per-step latency over the steps' link class; for each (algorithm, link
//! class), its efficiency. Only those are fitted; the rest keep NCCL's constants.
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
}

const LAT_MIN_US: f64 = 0.01;
const LAT_MAX_US: f64 = 1000.0;

fn to_value(k: &Key, x: f64) -> f64 {
    match k {
        Key::Base(_) | Key::Step(_) => x.exp().clamp(LAT_MIN_US, LAT_MAX_US),
        Key::Efficiency(_) => (1.0 / (1.0 + (-x).exp())).clamp(1e-3, 1.0),
    }
}

fn to_x(k: &Key, v: f64) -> f64 {
    match k {
        Key::Base(_) | Key::Step(_) => v.max(LAT_MIN_US).ln(),
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
/// latencies are fitted for ring and tree only: NVLS pays its latency once per call and PAT's
/// few log steps are collinear with the call latency in any single-node table.
fn exercised(rows: &[FitRow]) -> Result<Vec<Key>, String> {
    let mut keys: Vec<Key> = Vec::new();
    for r in rows {
        let mut prep = r.prep.clone();
        prep.profile.network.nccl = None;
        let rep = run_prepared(&r.scenario, prep, Watch::default())
            .map_err(|e| format!("{} row {}: {e}", r.file, r.row))?;
        let used = &rep.summary.library_parameters;
        if used.is_empty() {
            return Err(format!(
                "{} row {}: not an NCCL run ({})",
                r.file, r.row, rep.summary.library
            ));
        }
        for u in used {
            let (table, key) = u
                .strip_suffix(']')
                .and_then(|u| u.split_once('['))
                .ok_or_else(|| format!("parameter name {u:?} is not table[key]"))?;
            let k = match table {
                "base_latency_us" => Key::Base(key.to_string()),
                "step_latency_us" if key.starts_with("ring/") || key.starts_with("tree/") => {
                    Key::Step(key.to_string())
                }
                "step_latency_us" => continue,
                "efficiency" => Key::Efficiency(key.to_string()),
                other => return Err(format!("unknown parameter table {other:?}")),
            };
            if !keys.contains(&k) {
                keys.push(k)
            }
        }
    }
    Ok(keys)
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

/// Fits the parameters the rows exercise; `detail` goes into every parameter's provenance.
pub fn fit(rows: &[FitRow], detail: &str, date: Option<String>) -> Result<NcclFit, String> {
    if rows.is_empty() {
        return Err("no rows to fit".into());
    }
    let keys = exercised(rows)?;
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
        })
        .collect();
    let f = |x: &[f64]| objective(rows, &keys, x, &prov);
    // Two restarts from the first optimum: Nelder–Mead stalls on ridges.
    let mut x = nelder_mead(&f, &x0, 0.7, 150 * keys.len());
    for _ in 0..2 {
        x = nelder_mead(&f, &x, 0.3, 100 * keys.len());
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
        // has no interval; the others get theirs from the rest of the matrix.
        let active: Vec<usize> = (0..n)
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
        if let Some(inv) = invert(jtj) {
            for (ai, &j) in active.iter().enumerate() {
                let k = &keys[j];
                let sd = (s2 * inv[ai][ai]).max(0.0).sqrt();
                let lo = to_value(k, x[j] - 1.96 * sd);
                let hi = to_value(k, x[j] + 1.96 * sd);
                let slot = match k {
                    Key::Base(s) => cal.base_latency_us.get_mut(s),
                    Key::Step(s) => cal.step_latency_us.get_mut(s),
                    Key::Efficiency(s) => cal.efficiency.get_mut(s),
                };
                if let Some(p) = slot {
                    p.ci95 = Some([lo, hi]);
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
        median_abs_error: abs[abs.len() / 2],
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
mod tests {
    use super::*;

    #[test]
    fn nelder_mead_finds_the_minimum_of_a_quadratic_bowl() {
        let f = |x: &[f64]| (x[0] - 3.0).powi(2) + 10.0 * (x[1] + 1.0).powi(2);
        let x = nelder_mead(&f, &[0.0, 0.0], 1.0, 500);
        assert!(
            (x[0] - 3.0).abs() < 1e-3 && (x[1] + 1.0).abs() < 1e-3,
            "{x:?}"
        );
    }

    #[test]
    fn invert_inverts_and_refuses_singular() {
        let inv = invert(vec![vec![4.0, 1.0], vec![1.0, 3.0]]).unwrap();
        let d = 11.0;
        assert!((inv[0][0] - 3.0 / d).abs() < 1e-12 && (inv[0][1] + 1.0 / d).abs() < 1e-12);
        assert!(invert(vec![vec![1.0, 2.0], vec![2.0, 4.0]]).is_none());
    }
}
