//! `calibrate fit-nccl`: fits the physical parameters of dtsim's NCCL model (per-call
//! latency, per-step latency, link efficiency per algorithm) to measured nccl-tests tables by
//! simulating every row, and writes them into a profile's `network.nccl` with provenance and
//! the rows they were fitted on (which `dtsim validate` then refuses to score).
//!
//! The fit itself lives in `sim::scenario::fit_nccl` (shared with `dtsim validate
//! --leave-one-out`); this is the command around it. A profile's old size-factor tables are
//! dropped when its NCCL section is written: they were fitted by collective size and would be
//! applied again per transfer on top of the NCCL model.

use std::path::{Path, PathBuf};

use sim::profile::{Profile, Provenance};

/// Fits on the rows of `tables` whose system is one of `systems` (all when empty), merges the
/// result into the profile at `out` (created when missing, named `name`), returns a summary.
pub fn run(
    tables: &[PathBuf],
    systems: &[String],
    out: &Path,
    name: &str,
    date: Option<String>,
) -> Result<String, String> {
    let keep = |s: &str| systems.is_empty() || systems.iter().any(|k| k == s);
    let rows: Vec<_> = sim::validate::nccl::fit_rows(tables, &keep)?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    if rows.is_empty() {
        return Err(format!(
            "no all_reduce rows of systems {systems:?} in {}",
            tables
                .iter()
                .map(|t| t.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let files: Vec<String> = tables
        .iter()
        .filter_map(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
        .collect();
    let detail = format!(
        "calibrate fit-nccl: simulated fit of {} rows ({}) of {}",
        rows.len(),
        if systems.is_empty() {
            "all systems".to_string()
        } else {
            systems.join("; ")
        },
        files.join(", ")
    );
    let fit = sim::scenario::fit_nccl::fit(&rows, &detail, date.clone())?;
    let mut profile = if out.exists() {
        Profile::load(out).map_err(|e| e.to_string())?
    } else {
        let mut p = Profile::nominal();
        p.name = name.to_string();
        p.provenance = Provenance {
            source: "fitted".into(),
            detail: detail.clone(),
            date,
        };
        p
    };
    let dropped = std::mem::take(&mut profile.network.factors).len();
    profile.network.nccl = Some(fit.calibration.clone());
    let text = serde_json::to_string_pretty(&profile).map_err(|e| e.to_string())? + "\n";
    Profile::parse(&text, &out.display().to_string()).map_err(|e| e.to_string())?;
    sim::metrics::output::write_atomic(out, text.as_bytes())
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let mut s = format!(
        "fitted {} rows: median |error| {:.1}%, max {:.1}% (on the fitted rows themselves)\n",
        fit.rows,
        fit.median_abs_error * 100.0,
        fit.max_abs_error * 100.0
    );
    let c = &fit.calibration;
    for (table, m) in [
        ("base_latency_us", &c.base_latency_us),
        ("step_latency_us", &c.step_latency_us),
        ("efficiency", &c.efficiency),
    ] {
        for (k, v) in m {
            let ci = v
                .ci95
                .map(|[a, b]| format!(" (95% CI {a:.3} .. {b:.3})"))
                .unwrap_or_default();
            s += &format!("  {table}[{k}] = {:.4}{ci}\n", v.value);
        }
    }
    if dropped > 0 {
        s += &format!(
            "  dropped {dropped} size-factor table(s): fitted per collective size, they would be \
             applied again per transfer\n"
        );
    }
    s += &format!("wrote {}\n", out.display());
    Ok(s)
}
