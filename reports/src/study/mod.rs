//! A study: the inputs given on the command line turned into sections of figures.
//!
//! Inputs, recognised by what they are:
//! - a sweep directory (`results.parquet`, `results.csv` or `points/`), or a results file:
//!   scaling curves, method comparisons, compute vs communication, the results table;
//! - a `[[compare]]` run directory (one folder per variant): the variants compared, then each
//!   variant as a run directory;
//! - a run directory (`summary.json` from `dtsim run --out`): traffic heatmaps per phase
//!   (collective) or per epoch and class (workload), link utilization, buffer occupancy
//!   (`ports.csv`), utilization and occupancy over time (`link_series.csv`), the per-rank
//!   timeline (`trace.json`);
//! - a scenario file (`.toml`): the configured GPU×GPU bandwidth (routing bottlenecks);
//! - a validation CSV (columns named `predicted…` and `measured…`): predicted vs measured;
//! - `dtsim validate --out`'s `errors.csv` files: one table of the method groups within a bar,
//!   dataset by dataset, over all of them ([`groups`]).
//!
//! `dtsim-report whatif` builds one more kind of section from two `predictions.csv` files: a
//! what-if scored ([`whatif`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::data::{column_names, f64s, has, read_table, strings};
use crate::figures::{self, Figure, Span, Table};
use crate::fmt;

mod bandwidth;
pub mod groups;
mod run;
mod sweep;
mod validation;
pub mod whatif;

use bandwidth::bandwidth_section;
use groups::{groups_section, is_errors_table, Bar};
use run::run_section;
use sweep::{compare_sections, compare_variants, scaling_section, sweep_section};
use validation::validation_section;

/// A part of the page: one input (or the scaling curves across inputs).
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    pub text: String,
    pub figures: Vec<Figure>,
    /// Tables shown without a figure (e.g. all sweep points).
    pub tables: Vec<(String, Table)>,
}

/// Heatmaps are drawn up to this many endpoints.
pub const MAX_HEATMAP: usize = 128;
/// Timelines show at most this many ranks.
pub const MAX_TIMELINE_TRACKS: usize = 32;

pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Workload rows collected across inputs for the scaling curves.
#[derive(Debug, Clone)]
struct ScalingRow {
    study: String,
    ranks: f64,
    samples_per_s: f64,
    global_batch: f64,
}

/// Builds every section for `inputs`, error tables held to the testbed's bar.
pub fn build(inputs: &[PathBuf]) -> Result<Vec<Section>, String> {
    build_with(inputs, Bar::default())
}

/// Builds every section for `inputs`, `errors.csv` tables held to `bar`.
pub fn build_with(inputs: &[PathBuf], bar: Bar) -> Result<Vec<Section>, String> {
    let mut sections = Vec::new();
    let mut scaling: Vec<ScalingRow> = Vec::new();
    let mut error_tables: Vec<PathBuf> = Vec::new();
    for (k, input) in inputs.iter().enumerate() {
        let tag = format!("{}{}", k + 1, {
            let s = slug(
                &input
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            if s.is_empty() {
                String::new()
            } else {
                format!("-{s}")
            }
        });
        let sec = if input.is_dir() {
            if let Some(r) = results_file(input) {
                sweep_section(&r, &tag, &mut scaling)?
            } else if input.join("points").is_dir() {
                let (_, _, files) =
                    crate::data::merge_to_parquet(std::slice::from_ref(input), input)?;
                sweep_section(&files[1], &tag, &mut scaling)?
            } else if input.join("summary.json").is_file() {
                run_section(input, &tag)?
            } else if let Some(variants) = compare_variants(input)? {
                sections.extend(compare_sections(input, &variants, &tag)?);
                continue;
            } else {
                return Err(format!(
                    "{}: not a sweep directory (results.csv, results.parquet or points/), a run directory (summary.json) nor a [[compare]] run directory (complete.json of kind compare, or variant folders with summary.json)",
                    input.display()
                ));
            }
        } else if input.extension().is_some_and(|x| x == "toml") {
            bandwidth_section(input, &tag)?
        } else if input
            .extension()
            .is_some_and(|x| x == "csv" || x == "parquet")
        {
            let df = read_table(input)?;
            let cols = column_names(&df);
            if is_errors_table(&cols) {
                error_tables.push(input.clone());
                continue;
            } else if cols.iter().any(|c| c.contains("predicted"))
                && cols.iter().any(|c| c.contains("measured"))
            {
                validation_section(input, &tag)?
            } else {
                sweep_section(input, &tag, &mut scaling)?
            }
        } else {
            return Err(format!(
                "{}: expected a sweep or run directory, a results/validation .csv or .parquet, or a scenario .toml",
                input.display()
            ));
        };
        sections.push(sec);
    }
    if !error_tables.is_empty() {
        sections.push(groups_section(&error_tables, bar)?);
    }
    if scaling
        .iter()
        .map(|r| r.ranks as u64)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1
    {
        sections.insert(0, scaling_section(&scaling)?);
    }
    Ok(sections)
}

fn results_file(dir: &Path) -> Option<PathBuf> {
    ["results.parquet", "results.csv"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
