//! `dtsim-fuzz`: mutation-fuzzes every parser of `dtsim` and `calibrate` with a case budget.
//!
//! ```text
//! dtsim-fuzz [--cases N] [--seed S] [--target NAME]... [--slow-ms MS] [--hang-secs S]
//! dtsim-fuzz --target NAME --seed S --case I --print     (one case's input, to reproduce it)
//! ```
//!
//! Prints one row per target (cases, accepted, refused, panics, slow cases, slowest case) and
//! exits 1 when any case panicked, 3 when one hung (from the watchdog), and aborts with the
//! case's reproducer on an allocation above 4 GiB.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fuzz::harness::{self, Budget};
use fuzz::targets::Target;

#[global_allocator]
static ALLOC: fuzz::alloc::Capped = fuzz::alloc::Capped;

#[derive(Parser)]
#[command(
    name = "dtsim-fuzz",
    about = "Mutation-fuzz every parser dtsim and calibrate read"
)]
struct Args {
    /// Cases per target.
    #[arg(long, default_value_t = 1000)]
    cases: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these targets (repeatable): scenario, topology, profile, model_file, sweep_state,
    /// nccl_tests_text, nccl_tests_json, kineto, iperf3, p2p_matrix, torch_device, layer_times,
    /// validation_csv, testbed_dataset, nccl_topo_xml, nvidia_smi_topo, pytorch_trace.
    #[arg(long = "target")]
    targets: Vec<String>,
    /// Print case I's input (with --target and --seed) and run it alone.
    #[arg(long, value_name = "I")]
    case: Option<u64>,
    #[arg(long, requires = "case")]
    print: bool,
    /// List cases slower than this.
    #[arg(long, default_value_t = 1000.0)]
    slow_ms: f64,
    /// Abort with the reproducer when one case runs longer.
    #[arg(long, default_value_t = 60)]
    hang_secs: u64,
    /// The repository root (seeds are read from it).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let targets: Vec<Target> = if a.targets.is_empty() {
        Target::ALL.to_vec()
    } else {
        let mut v = Vec::new();
        for name in &a.targets {
            match Target::by_name(name) {
                Some(t) => v.push(t),
                None => {
                    eprintln!("error: --target {name:?}: not a target (see --help)");
                    return ExitCode::from(2);
                }
            }
        }
        v
    };
    if let Some(i) = a.case {
        let t = targets[0];
        let seeds = harness::load_seeds(t, &a.repo);
        if seeds.is_empty() {
            eprintln!(
                "error: no seeds for {} under {}",
                t.name(),
                a.repo.display()
            );
            return ExitCode::from(2);
        }
        let (k, text) = harness::case_input(t, &seeds, a.seed, i);
        if a.print {
            println!("--- mutated from {}", seeds[k].0.display());
            println!("{text}");
        }
        let scratch = std::env::temp_dir().join(format!("dtsim-fuzz-one-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&scratch);
        harness::mark_case(t, a.seed, i);
        let outcome = harness::run_case(t, &text, &seeds[k].0, &scratch);
        let _ = std::fs::remove_dir_all(&scratch);
        return match outcome {
            Ok(accepted) => {
                println!(
                    "--- {}",
                    if accepted {
                        "accepted"
                    } else {
                        "refused (a clean error)"
                    }
                );
                ExitCode::SUCCESS
            }
            Err(msg) => {
                println!("--- PANIC: {msg}");
                ExitCode::from(1)
            }
        };
    }
    let budget = Budget {
        seed: a.seed,
        cases: a.cases,
        slow_ms: a.slow_ms,
        hang_secs: a.hang_secs,
    };
    println!(
        "{:<17} {:>9} {:>9} {:>9} {:>7} {:>6} {:>10} {:>9}",
        "target", "cases", "accepted", "refused", "panics", "slow", "slowest", "cases/s"
    );
    let mut panics = 0;
    let mut total = 0;
    for t in targets {
        let tally = match harness::run(t, &a.repo, &budget) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        println!(
            "{:<17} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8.1}ms {:>9.0}",
            t.name(),
            tally.cases,
            tally.accepted,
            tally.refused,
            tally.panics.len(),
            tally.slow.len(),
            tally.max_ms,
            tally.cases as f64 / tally.wall_secs.max(1e-9)
        );
        for (i, msg, _) in &tally.panics {
            println!("  PANIC case {i}: {}", msg.lines().next().unwrap_or(""));
        }
        for (i, ms) in tally.slow.iter().take(5) {
            println!("  slow case {i}: {ms:.0} ms");
        }
        panics += tally.panics.len();
        total += tally.cases;
    }
    println!("{total} cases, {panics} panics (seed {})", a.seed);
    if panics > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
