//! `dtsim`: the command line over the `sim` library.
//!
//! ```text
//! dtsim run SCENARIO [--set key=value]... [--json] [--out DIR]
//! dtsim topo show TOPOLOGY [--set key=value]... [--dot]
//! dtsim bench [--quick]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use sim::scenario::{self, run::run};
use sim::topology::{file as topology_file, summary};

#[derive(Parser)]
#[command(
    name = "dtsim",
    version,
    about = "Simulate the networks distributed deep-learning training runs on"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario and print a summary; write results with --out.
    Run {
        scenario: PathBuf,
        /// Override a scenario key, e.g. --set collective.bytes=64MiB (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print the summary as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Write summary.json, links.csv, traffic.csv, timeline.csv ... into this directory
        /// (default: the scenario's [output] dir, if any).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Time the engine's benchmark cases and print a table (see also `cargo bench -p sim`).
    Bench {
        /// Skip the 16,384-GPU cases.
        #[arg(long)]
        quick: bool,
    },
    /// Replay measured runs (testbed datasets, nccl-tests and DDP tables) and report the error.
    Validate {
        datasets: Vec<PathBuf>,
        /// Fit `measured = a + b x simulated` per group on the rows this filter selects
        /// (`col=v1|v2; col>=x`) and score only the others.
        #[arg(long)]
        calibrate_on: Option<String>,
        /// Score only the rows this filter selects (e.g. 'size_bytes>=1048576').
        #[arg(long)]
        score_on: Option<String>,
        /// Exit non-zero when a group's median absolute error exceeds PCT percent.
        #[arg(long, value_name = "PCT")]
        max_median_error: Option<f64>,
        /// Write predictions.csv and errors.csv into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Inspect topology files.
    Topo {
        #[command(subcommand)]
        command: TopoCommand,
    },
}

#[derive(Subcommand)]
enum TopoCommand {
    /// Devices and links by class, bisection bandwidth, diameter.
    Show {
        topology: PathBuf,
        /// Override a topology key, e.g. --set generator.n=16 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print Graphviz DOT instead of the summary.
        #[arg(long)]
        dot: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run {
            scenario: path,
            set,
            json,
            out,
        } => {
            let s = scenario::load(&path, &set)?;
            if s.file.workload.is_some() {
                return run_workload(&s, &path, &set, json, out);
            }
            let started = std::time::Instant::now();
            let report = run(&s)?;
            let wall = started.elapsed();
            if json {
                print!("{}", report.summary_json());
            } else {
                println!("{report}");
            }
            let out = out.or_else(|| s.file.output.dir.as_ref().map(PathBuf::from));
            if let Some(dir) = out {
                let files = report
                    .write_dir(&dir)
                    .with_context(|| format!("writing results to {}", dir.display()))?;
                if !json {
                    println!("\nwrote {} files to {}", files.len(), dir.display());
                }
            }
            // Wall time goes to stderr: result files and stdout stay bit-identical across runs.
            eprintln!("simulated in {:.3} s wall time", wall.as_secs_f64());
            Ok(())
        }
        Command::Bench { quick } => {
            bench(quick);
            Ok(())
        }
        Command::Validate {
            datasets,
            calibrate_on,
            score_on,
            max_median_error,
            out,
        } => sim::validate::run_cli(
            &datasets,
            calibrate_on.as_deref(),
            score_on.as_deref(),
            max_median_error,
            out.as_deref(),
        ),
        Command::Topo {
            command: TopoCommand::Show { topology, set, dot },
        } => {
            let mut overrides = toml::Table::new();
            for o in &set {
                scenario::apply_override(&mut overrides, o)
                    .map_err(|e| anyhow::anyhow!("{}: --set {o}: {e}", topology.display()))?;
            }
            let topo = topology_file::load_with_overrides(&topology, &overrides)?;
            if dot {
                print!("{}", summary::to_dot(&topo));
            } else {
                println!("{}", summary::summarize(&topo));
            }
            Ok(())
        }
    }
}

/// Runs a `[workload]` scenario (and its `[[compare]]` variants) and prints the step report, or
/// a table when there are variants.
fn run_workload(
    s: &scenario::Scenario,
    path: &std::path::Path,
    set: &[String],
    json: bool,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let rows = scenario::workload::run_study(path, set)?;
    let wall = started.elapsed();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "label": r.label,
                    "speedup": r.speedup,
                    "scaling_efficiency": r.scaling_efficiency,
                    "summary": r.report.summary,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if s.file.compare.is_empty() {
        println!("{}", rows[0].report);
    } else {
        if !s.file.description.is_empty() {
            println!("{}\n", s.file.description.trim());
        }
        print!("{}", sim::metrics::workload::study_table(&rows));
    }
    let out = out.or_else(|| s.file.output.dir.as_ref().map(PathBuf::from));
    if let Some(dir) = out {
        for r in &rows {
            let d = if rows.len() == 1 {
                dir.clone()
            } else {
                dir.join(&r.label)
            };
            r.report
                .write_dir(&d)
                .with_context(|| format!("writing results to {}", d.display()))?;
        }
        if !json {
            println!("\nwrote results to {}", dir.display());
        }
    }
    eprintln!("simulated in {:.3} s wall time", wall.as_secs_f64());
    Ok(())
}

/// Runs the benchmark cases of `sim::bench` once each and prints what they did and how fast.
fn bench(quick: bool) {
    use sim::bench::{
        fat_tree, fat_tree_k_for, peak_memory_bytes, place, ring_all_reduce, Hold, Placement,
        RingStep,
    };
    use std::time::Instant;
    let mib = |b: Option<u64>| {
        b.map(|b| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64))
            .unwrap_or("?".into())
    };
    let gpus_max: u32 = if quick { 4096 } else { 16384 };

    println!("(a) one max-min solve of a ring step on a three-tier fat-tree (k=32, 32 hosts per edge, 16,384 GPUs)");
    let topo = fat_tree(32, 16384, Some(32));
    let mut solver = sim::net::maxmin::MaxMinSolver::new();
    let mut rates = Vec::new();
    for placement in [Placement::RankOrdered, Placement::Random] {
        let step = RingStep::new(&topo, &place(&topo, 16384, placement));
        step.solve(&mut solver, &mut rates);
        let reps = 20;
        let t = Instant::now();
        let mut slowest = 0.0;
        for _ in 0..reps {
            slowest = step.solve(&mut solver, &mut rates);
        }
        let per = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "    {:<13} {:>8.3} ms per solve   {} flows, {} link crossings, slowest flow {}",
            format!("{placement:?}"),
            per * 1e3,
            step.caps.len(),
            step.links.len(),
            sim::units::fmt_bits_per_s(slowest)
        );
    }

    println!("\n(b) ring all-reduce of 1 GiB on a non-blocking fat-tree (400 Gb/s, 1 us per hop)");
    println!(
        "    {:<24} {:>9} {:>10} {:>12} {:>12} {:>12} {:>7} {:>14} {:>9} {:>10}",
        "case",
        "wall s",
        "events",
        "flows",
        "flows/s",
        "events/s",
        "solves",
        "simulated",
        "vs ideal",
        "peak mem"
    );
    let cases = [
        (1024, Placement::RankOrdered),
        (4096, Placement::RankOrdered),
        (4096, Placement::Random),
        (16384, Placement::RankOrdered),
        (16384, Placement::Random),
    ];
    for (n, placement) in cases {
        if n > gpus_max {
            continue;
        }
        let topo = fat_tree(fat_tree_k_for(n), n, None);
        let ranks = place(&topo, n, placement);
        let t = Instant::now();
        let run = ring_all_reduce(&topo, &ranks, 1 << 30);
        let wall = t.elapsed().as_secs_f64();
        let o = &run.outcome;
        let err = o.end.as_secs_f64() / run.closed_form.as_secs_f64() - 1.0;
        println!(
            "    {:<24} {:>9.3} {:>10} {:>12} {:>12.3e} {:>12.3e} {:>7} {:>14} {:>+8.3}% {:>10}",
            format!("{n} GPUs {placement:?}"),
            wall,
            o.events,
            o.net.flows,
            o.net.flows as f64 / wall,
            o.events as f64 / wall,
            o.net.solves,
            o.end.to_string(),
            err * 100.0,
            mib(peak_memory_bytes())
        );
    }
    println!("    (peak memory is the process's so far: cases run in increasing size)");

    println!("\n(c) event-queue hold with 10^6 pending events");
    let mut hold = Hold::new(1_000_000);
    hold.run(1_000_000);
    let n = 5_000_000;
    let t = Instant::now();
    let sum = hold.run(n);
    let per = t.elapsed().as_secs_f64() / n as f64;
    println!(
        "    {:.1} ns per hold (pop + schedule), checksum {sum}",
        per * 1e9
    );
}
