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
