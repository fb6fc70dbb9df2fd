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
use sim::scenario::fit_nccl::FitRow;

use crate::import::nccl_tests::NcclTestsRun;
use sim::scenario::fit_nccl::FitChoices;

/// Fits on the rows of `tables` whose system is one of `systems` (all when empty), leaving
/// out every `hold_out_every`-th of them (so that `dtsim validate` scores the model on sizes
/// it was not fitted on), merges the result into the profile at `out` (created when missing,
/// named `name`), returns a summary.
#[allow(clippy::too_many_arguments)]
pub fn run(
    tables: &[PathBuf],
    systems: &[String],
    hold_out_every: Option<u32>,
    out: &Path,
    name: &str,
    date: Option<String>,
    choices: FitChoices,
) -> Result<String, String> {
    let keep = |s: &str| systems.is_empty() || systems.iter().any(|k| k == s);
    let rows: Vec<_> = sim::validate::nccl::fit_rows(tables, &keep)?
        .into_iter()
        .map(|(_, r)| r)
        .enumerate()
        .filter(|(i, _)| hold_out_every.is_none_or(|k| k < 2 || (i + 1) % k as usize != 0))
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
    let detail = format!(
        "calibrate fit-nccl: simulated fit of {} rows ({}{}) of {}",
        rows.len(),
        if systems.is_empty() {
            "all systems".to_string()
        } else {
            systems.join("; ")
        },
        hold_out_every
            .map(|k| format!("; every {k}th row held out for validate"))
            .unwrap_or_default(),
        file_names(tables)
    );
    fit_and_write(&rows, &detail, out, name, date, choices)
}

/// What the user says about logs that the logs do not say themselves.
pub struct LogSystem<'a> {
    /// The topology the runs were measured on.
    pub topology: &'a Path,
    /// `NCCL_ALGO` / `NCCL_PROTO` the runs forced, if any.
    pub algorithm: Option<&'a str>,
    pub protocol: Option<&'a str>,
    /// The tuner plugin rules the runs ran under (`NCCL_TUNER_CONFIG_FILE`), if any.
    pub tuner_config: Option<&'a Path>,
    /// The runs had `NCCL_COLLNET_ENABLE=1` (CollNet on switches that reduce).
    pub collnet: bool,
}

/// The collectives NCCL runs with its collective algorithms, as nccl-tests names them.
const NCCL_COLLECTIVES: [&str; 5] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
];

/// Fits the NCCL model to nccl-tests logs measured on `sys`: every row of every log becomes
/// a simulated scenario (the log's collective, size, ranks and NCCL version on the topology),
/// scored by its out-of-place time.
pub fn from_logs(
    runs: &[(PathBuf, NcclTestsRun)],
    sys: &LogSystem,
    out: &Path,
    name: &str,
    date: Option<String>,
    choices: FitChoices,
) -> Result<String, String> {
    let mut rows = Vec::new();
    for (path, run) in runs {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let collective = run.collective.as_deref().ok_or_else(|| {
            format!(
                "{}: which collective ran is not in the log (name the file after it, e.g. \
                 all_reduce.log)",
                path.display()
            )
        })?;
        if !NCCL_COLLECTIVES.contains(&collective) {
            return Err(format!(
                "{}: collective {collective:?}: the NCCL model fits {} (NCCL runs the others \
                 as point-to-point operations)",
                path.display(),
                NCCL_COLLECTIVES.join(", ")
            ));
        }
        let ranks = run.ranks().ok_or_else(|| {
            format!(
                "{}: how many ranks ran (no `# Using devices` rank lines and no `nGpus`)",
                path.display()
            )
        })?;
        let version = run.nccl_version.as_deref().filter(|v| {
            let ok = sim::library::nccl::Version::parse(v).is_some();
            if !ok {
                eprintln!(
                    "note: {}: NCCL {v} is outside the modelled 2.18-2.27; fitted with 2.27's \
                     decisions",
                    path.display()
                );
            }
            ok
        });
        for (i, r) in run.rows.iter().enumerate() {
            let Some(t) = r.out_of_place.or(r.in_place) else {
                continue;
            };
            if r.size_bytes == 0 || t.time_us.is_nan() || t.time_us <= 0.0 {
                continue;
            }
            let m = sim::scenario::fit_nccl::Measured {
                topology: sys.topology,
                collective,
                bytes: r.size_bytes,
                ranks,
                algorithm: sys.algorithm,
                protocol: sys.protocol,
                version,
                tuner_config: sys.tuner_config,
                collnet: sys.collnet,
                measured_secs: t.time_us * 1e-6,
                file: file.clone(),
                row: i as u32 + 1,
            };
            rows.push(m.fit_row()?);
        }
    }
    if rows.is_empty() {
        return Err("no timed rows in the logs".into());
    }
    let files: Vec<PathBuf> = runs.iter().map(|(p, _)| p.clone()).collect();
    let detail = format!(
        "calibrate import nccl-tests --topology {}{}{}{}: simulated fit of {} rows of {}",
        sys.topology
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        sys.algorithm
            .map(|a| format!(" --algorithm {a}"))
            .unwrap_or_default(),
        sys.protocol
            .map(|p| format!(" --protocol {p}"))
            .unwrap_or_default(),
        sys.tuner_config
            .map(|t| format!(" --tuner-config {}", t.display()))
            .unwrap_or_default()
            + if sys.collnet { " --collnet" } else { "" },
        rows.len(),
        file_names(&files)
    );
    fit_and_write(&rows, &detail, out, name, date, choices)
}

fn file_names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .filter_map(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fit_and_write(
    rows: &[FitRow],
    detail: &str,
    out: &Path,
    name: &str,
    date: Option<String>,
    choices: FitChoices,
) -> Result<String, String> {
    let detail = if choices.ring_channel_rates {
        format!("{detail}; ring/tree channel rates fitted per protocol")
    } else {
        detail.to_string()
    };
    let fit = sim::scenario::fit_nccl::fit_with(rows, &detail, date.clone(), choices)?;
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
        ("channel_gbps", &c.channel_gbps),
        ("base_latency_scale", &c.base_latency_scale),
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
