//! `dtsim sweep`: expands a scenario's sweep and runs the shard's pending points, or writes
//! Slurm scripts.

use std::path::PathBuf;

use anyhow::Context as _;
use sim::scenario::{self, sweep};

/// What `dtsim sweep` takes.
#[derive(clap::Args)]
pub struct SweepArgs {
    pub scenario: PathBuf,
    /// Override a scenario key for every point (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Points run at once (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Results directory (default: the scenario's [output] dir, else results/sweeps/NAME).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only points with index % n == i (default: from SLURM_ARRAY_TASK_ID/COUNT).
    #[arg(long, value_name = "i/n")]
    pub shard: Option<String>,
    /// Run at most N pending points, then stop (a later call runs the rest).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Write every result file per point (links.csv, traffic.csv, trace.json ...), not only
    /// summary.json.
    #[arg(long)]
    pub all_files: bool,
    /// Reuse an output directory that holds another sweep (other --set), dropping its points.
    #[arg(long)]
    pub force: bool,
    /// Write a Slurm job-array script, a dependent merge job and submit.sh into DIR instead
    /// of running.
    #[arg(long, value_name = "DIR")]
    pub emit_slurm: Option<PathBuf>,
    /// Array tasks for --emit-slurm.
    #[arg(long, default_value_t = 8)]
    pub tasks: u32,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `dtsim sweep`: expands the scenario, then runs the shard's pending points with a progress bar
/// (on a terminal), or writes Slurm scripts.
pub fn run(a: SweepArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let sw = sweep::expand(&a.scenario, &a.set)?;
    let base = scenario::load(&a.scenario, &a.set)?;
    let out = a
        .out
        .or_else(|| base.file.output.dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("results/sweeps").join(&sw.name));
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(dir) = a.emit_slurm {
        let me = std::env::current_exe().context("locating the dtsim binary")?;
        let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let mut sw_abs = sw.clone();
        sw_abs.scenario_path = abs(&sw.scenario_path);
        let scripts = sweep::slurm_scripts(
            &sw_abs,
            &me,
            &abs(&out),
            a.tasks,
            a.jobs.unwrap_or(1) as u32,
        );
        let write = |name: &str, text: &str| -> anyhow::Result<()> {
            let p = dir.join(name);
            sim::metrics::output::write_atomic(&p, text.as_bytes())
                .with_context(|| format!("writing {}", p.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write("sweep_array.sbatch", &scripts.array)?;
        write("merge.sbatch", &scripts.merge)?;
        write("submit.sh", &scripts.submit)?;
        println!(
            "wrote {0}/sweep_array.sbatch, {0}/merge.sbatch and {0}/submit.sh ({1} points in {2} array tasks); submit with: bash {0}/submit.sh",
            dir.display(),
            sw.points.len(),
            a.tasks.clamp(1, sw.points.len().max(1) as u32)
        );
        return Ok(());
    }
    let shard = match a.shard {
        Some(s) => sweep::Shard::parse(&s).map_err(|e| anyhow::anyhow!("--shard: {e}"))?,
        None => sweep::Shard::from_env(|k| std::env::var(k).ok())
            .map_err(|e| anyhow::anyhow!("Slurm job array: expected {e}"))?
            .unwrap_or(sweep::Shard::ALL),
    };
    let opts = sweep::SweepOptions {
        out: out.clone(),
        jobs: a.jobs.unwrap_or(cores),
        shard,
        limit: a.limit,
        all_files: a.all_files,
        force: a.force,
    };
    let mine = sw.points.iter().filter(|p| shard.contains(p.index)).count();
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(mine as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {pos}/{len} points  {elapsed_precise} elapsed, {eta} left  {msg}",
    ) {
        bar.set_style(style);
    }
    let done_before = sw
        .points
        .iter()
        .filter(|p| shard.contains(p.index) && sweep::is_done(&out, p))
        .count();
    bar.set_position(done_before as u64);
    let started = std::time::Instant::now();
    let outcome = sweep::run(&sw, &opts, &|p| {
        bar.inc(1);
        bar.set_message(format!("#{}", p.index));
    })?;
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    let complete = outcome.failed.is_empty() && outcome.left == 0;
    let mut merged = None;
    if complete && shard == sweep::Shard::ALL {
        let m = sweep::merge(std::slice::from_ref(&out))?;
        let p = out.join("results.csv");
        sim::metrics::output::write_atomic(&p, sweep::results_csv(&m).as_bytes())?;
        merged = Some(p);
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "sweep": sw.name, "out": out.display().to_string(), "points": sw.points.len(),
                "shard": format!("{}/{}", shard.index, shard.count), "in_shard": outcome.in_shard,
                "already_done": outcome.already_done, "ran": outcome.ran, "left": outcome.left,
                "failed": outcome.failed.iter().map(|(i, e)| serde_json::json!({"index": i, "error": e})).collect::<Vec<_>>(),
                "jobs": opts.jobs, "wall_secs": wall,
                "results": merged.as_ref().map(|p| p.display().to_string()),
            })
        );
    } else {
        println!(
            "sweep {}: {} points{}; {} already done, {} run now, {} failed, {} left; {:.2} s wall with {} jobs",
            sw.name,
            sw.points.len(),
            if shard.count > 1 {
                format!(" (shard {}/{}: {})", shard.index, shard.count, outcome.in_shard)
            } else {
                String::new()
            },
            outcome.already_done,
            outcome.ran,
            outcome.failed.len(),
            outcome.left,
            wall,
            opts.jobs
        );
        for (i, e) in outcome.failed.iter().take(10) {
            println!("  point {i} failed: {e}");
        }
        if let Some(p) = &merged {
            println!("wrote {}", p.display());
        }
    }
    if !outcome.failed.is_empty() {
        anyhow::bail!(
            "{} points failed (results of the others are kept; fix the scenario and run again)",
            outcome.failed.len()
        );
    }
    Ok(())
}
