//! `dtsim run` beyond a single collective: a training step and its `[[compare]]` variants
//! (with each one's track record), and `--dry-run`'s estimate of what a run will cost.

use std::path::PathBuf;

use anyhow::Context as _;

use sim::collective::play::Watch;
use sim::metrics::run_dir;
use sim::scenario;

/// Runs a `[workload]` scenario (and its `[[compare]]` variants) and prints the step report, or
/// a table when there are variants.
pub(crate) fn run_workload(
    s: &scenario::Scenario,
    path: &std::path::Path,
    set: &[String],
    json: bool,
    out: Option<PathBuf>,
    watch: Watch,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let rows = scenario::workload::run_study(path, set, watch)?;
    let wall = started.elapsed();
    // Each variant's track record: how far off dtsim has been on measured steps like it.
    let tracks: Vec<Option<sim::validate::track_record::TrackRecord>> = rows
        .iter()
        .zip(scenario::workload::variants(s, set))
        .map(|(r, (_, all))| {
            let v = scenario::load(path, &all).ok()?;
            sim::validate::track_record::for_step(&v, &r.report)
        })
        .collect();
    if json {
        let v: Vec<_> = rows
            .iter()
            .zip(&tracks)
            .map(|(r, t)| {
                serde_json::json!({
                    "label": r.label,
                    "speedup": r.speedup,
                    "scaling_efficiency": r.scaling_efficiency,
                    "summary": r.report.summary,
                    "track_record": t,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if s.file.compare.is_empty() {
        println!("{}", rows[0].report);
        if let Some(t) = &tracks[0] {
            println!("{t}");
        }
    } else {
        if !s.file.description.is_empty() {
            println!("{}\n", s.file.description.trim());
        }
        print!("{}", sim::metrics::workload::study_table(&rows));
        for (r, t) in rows.iter().zip(&tracks) {
            if let Some(t) = t {
                print!("\n{}:{t}", r.label);
            }
        }
    }
    if let Some(dir) = out {
        let mut files = Vec::new();
        for (r, t) in rows.iter().zip(&tracks) {
            let d = if rows.len() == 1 {
                dir.clone()
            } else {
                dir.join(&r.label)
            };
            files.extend(
                r.report
                    .write_dir(&d)
                    .with_context(|| format!("writing results to {}", d.display()))?,
            );
            if let Some(t) = t {
                let file = d.join("track_record.json");
                let text = serde_json::to_string_pretty(t)? + "\n";
                sim::metrics::output::write_atomic(&file, text.as_bytes())
                    .with_context(|| format!("writing {}", file.display()))?;
                files.push(file);
            }
        }
        let kind = if rows.len() == 1 {
            "workload"
        } else {
            "compare"
        };
        run_dir::mark_complete(&dir, kind, &files)
            .with_context(|| format!("writing results to {}", dir.display()))?;
        if !json {
            println!("\nwrote results to {}", dir.display());
        }
    }
    eprintln!("simulated in {:.3} s wall time", wall.as_secs_f64());
    Ok(())
}

/// `dtsim run --dry-run`: the scenario (each `[[compare]]` variant) estimated, not simulated.
pub(crate) fn estimate(
    s: &scenario::Scenario,
    path: &std::path::Path,
    set: &[String],
    json: bool,
) -> anyhow::Result<()> {
    use sim::collective::play::PlayError;
    use sim::scenario::run::RunError;
    let watch = Watch {
        estimate_only: true,
        ..Watch::default()
    };
    let variants = if s.file.workload.is_some() {
        scenario::workload::variants(s, set)
    } else {
        vec![(s.file.name.clone(), set.to_vec())]
    };
    let mut rows = Vec::new();
    for (label, all) in variants {
        let v = scenario::load(path, &all)?;
        let outcome = if v.file.workload.is_some() {
            scenario::workload::run_workload(&v, watch).map(|_| ())
        } else {
            scenario::run::run_watched(&v, watch).map(|_| ())
        };
        match outcome {
            Err(RunError::Play {
                error: PlayError::EstimateOnly(e),
                ..
            }) => rows.push((label, e)),
            Err(e) => return Err(e.into()),
            Ok(()) => anyhow::bail!("{label}: the run did not stop at its estimate"),
        }
    }
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(label, e)| serde_json::json!({"label": label, "estimate": e}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (label, e) in &rows {
            println!("{label}: {e}");
        }
        if let Some(avail) = sim::collective::play::available_bytes() {
            println!("memory available: {:.0} MB", avail as f64 / 1e6);
        }
    }
    Ok(())
}
