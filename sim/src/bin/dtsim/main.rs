//! `dtsim`: the command line over the `sim` library.
//!
//! ```text
//! dtsim run SCENARIO [--set key=value]... [--json] [--out DIR]
//! dtsim nccl-tests SCENARIO [-b 8 -e 8G -f 2] [--measured TABLE --system NAME]
//! dtsim topo show TOPOLOGY [--set key=value]... [--dot]
//! dtsim topo import DUMP [--gpu MODEL] [--out FILE]
//! dtsim bench [--quick] [--steps]
//! dtsim sweep SCENARIO [--jobs N] [--out DIR] [--shard i/n] [--emit-slurm DIR] [--limit N]
//! dtsim merge DIR... [--out FILE]
//! dtsim report RESULTS... --out DIR     (runs dtsim-report from the reports crate)
//! ```

mod bench;
mod run_command;
mod sweep_command;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use sim::collective::play::Watch;
use sim::metrics::run_dir;
use sim::scenario::{self, sweep};
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
    /// Run one scenario and print a summary (and, for a library's collective or a training step,
    /// dtsim's track record on measured runs of the same call or step); write results with --out.
    Run {
        scenario: PathBuf,
        /// Override a scenario key, e.g. --set collective.bytes=64MiB (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print the summary as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Write summary.json, links.csv, traffic.csv, timeline.csv ... into this directory
        /// (default: the scenario's [output] dir, if any); it must be empty or new.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Clear the output directory first when it holds an earlier run.
        #[arg(long)]
        force: bool,
        /// Refuse a run estimated above N simulation events, and stop one that reaches N.
        #[arg(long, value_name = "N")]
        max_events: Option<u64>,
        /// Print the estimate (events, ops, flows, peak memory) and stop before simulating.
        #[arg(long)]
        dry_run: bool,
    },
    /// Run a collective scenario at every size of an nccl-tests sweep (-b, -e, -f) and print
    /// the library's choice, time, algbw and busbw per size, beside a measured table if given.
    NcclTests {
        /// The scenario to sweep; without one, the system of --measured/--system as `dtsim
        /// validate` replays it (topology and profile read from the table's columns).
        #[arg(required_unless_present = "measured")]
        scenario: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Smallest size (nccl-tests -b).
        #[arg(short = 'b', long = "minbytes", default_value = "8")]
        min: String,
        /// Largest size (nccl-tests -e).
        #[arg(short = 'e', long = "maxbytes", default_value = "8GiB")]
        max: String,
        /// Size multiplier (nccl-tests -f).
        #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
        factor: u64,
        /// A table in the shared validation layout to print beside the prediction.
        #[arg(long, requires = "system")]
        measured: Option<PathBuf>,
        /// The system of --measured to compare with (its `system` column).
        #[arg(long, requires = "measured")]
        system: Option<String>,
        /// `table` (the choice per size, beside --measured), or `nccl-tests`: the predicted
        /// sweep in nccl-tests' own text layout, to diff with a real log.
        #[arg(long, default_value = "table", value_parser = ["table", "nccl-tests"])]
        format: String,
    },
    /// Time the engine's benchmark cases and print a table (see also `cargo bench -p sim`).
    Bench {
        /// Skip the 16,384-GPU cases.
        #[arg(long)]
        quick: bool,
        /// Only the training steps (case (c)), up to 16,384 GPUs: the growth from 1,024 to
        /// 16,384 GPUs in a minute.
        #[arg(long)]
        steps: bool,
        /// Run one step case (gpt or llama) in this process and print it on one line: what
        /// the step bench runs in a child process per case.
        #[arg(long, hide = true, requires = "gpus")]
        step_case: Option<String>,
        #[arg(long, hide = true)]
        gpus: Option<u32>,
        #[arg(long, hide = true)]
        ring: bool,
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
        /// Exit non-zero when a group's largest absolute error exceeds PCT percent (with
        /// --max-median-error, both: the groups outside are named).
        #[arg(long, value_name = "PCT")]
        max_error: Option<f64>,
        /// Write predictions.csv and errors.csv into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// `system`: also fit the NCCL model on every other system's nccl-tests table and
        /// predict each system's rows from that fit (a cross-system error).
        #[arg(long, value_name = "system")]
        leave_one_out: Option<String>,
        /// Replay every testbed row with this scenario key too, after the row's own (e.g.
        /// --set network.model=packet --set network.congestion_control=cubic); repeatable.
        #[arg(long, value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Compare with an earlier --out DIR of validate (its errors.csv and predictions.csv):
        /// groups that came within the gates or left them, rows closer or further, mean
        /// |error| before and now. The same DIR as --out compares with its previous contents.
        #[arg(long, value_name = "DIR")]
        baseline: Option<PathBuf>,
    },
    /// Run every point of a scenario's [sweep] (and [[compare]]) in parallel; resumes where an
    /// earlier call stopped.
    Sweep(sweep_command::SweepArgs),
    /// Combine the points of one or more sweep directories (e.g. shards) into results.csv.
    Merge {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write the table (default: DIR/results.csv of the first directory).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write an HTML report with figures (runs `dtsim-report`, built from the reports crate).
    #[command(disable_help_flag = true)]
    Report {
        /// Arguments for dtsim-report, e.g. RESULTS... --out DIR.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Inspect topology files.
    Topo {
        #[command(subcommand)]
        command: TopoCommand,
    },
    /// Read recorded workload traces (PyTorch ET + Kineto, Chakra ET); replay them with
    /// `[workload] trace = "DIR"` in a scenario.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
}

#[derive(Subcommand)]
enum TraceCommand {
    /// What a trace directory holds: ranks, nodes, collectives, process groups, recorded step.
    Show {
        dir: PathBuf,
        /// pytorch or chakra (default: from the files).
        #[arg(long)]
        format: Option<String>,
    },
    /// Write a trace as Chakra execution traces (<name>.<rank>.et), the files ASTRA-sim reads.
    Convert {
        dir: PathBuf,
        /// pytorch or chakra (default: from the files).
        #[arg(long)]
        format: Option<String>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// File stem (default: the trace's name).
        #[arg(long)]
        name: Option<String>,
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
    /// Write a topology file from what a machine reports: NCCL's topology XML
    /// (NCCL_TOPO_DUMP_FILE, NCCL_TOPO_FILE) or `nvidia-smi topo -m` output.
    Import(ImportArgs),
}

/// `dtsim topo import`'s arguments.
#[derive(clap::Args)]
struct ImportArgs {
    input: PathBuf,
    /// nccl-xml or nvidia-smi (default: detected from the text).
    #[arg(long)]
    format: Option<String>,
    /// The GPU model, e.g. A100-SXM4 (required for nvidia-smi; XML dumps name it by PCI id).
    #[arg(long)]
    gpu: Option<String>,
    /// PCIe bandwidth per link and direction for nvidia-smi input, e.g. 31.5GB/s (default:
    /// the GPU model's PCIe generation, x16).
    #[arg(long)]
    pcie: Option<String>,
    /// Bandwidth between NUMA nodes for nvidia-smi input, e.g. 32GB/s.
    #[arg(long)]
    smp: Option<String>,
    /// The GPUs have no peer-to-peer (`nvidia-smi topo -p2p r` says NS): transfers between
    /// them are staged in the memory of the host each reaches over PCIe.
    #[arg(long)]
    no_p2p: bool,
    /// The topology's name (default: the input file's stem).
    #[arg(long)]
    name: Option<String>,
    /// Write the topology file here (atomically) instead of printing it.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    sim::pipe::end_quietly_on_closed_pipe();
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
            force,
            max_events,
            dry_run,
        } => {
            let s = scenario::load(&path, &set)?;
            if dry_run {
                return run_command::estimate(&s, &path, &set, json);
            }
            let out = out.or_else(|| s.file.output.dir.as_ref().map(PathBuf::from));
            if let Some(dir) = &out {
                run_dir::claim(dir, force).map_err(|e| anyhow::anyhow!(e))?;
            }
            let progress = Progress::new(json, "preparing");
            let report_progress =
                |at: sim::engine::SimTime, events: u64| progress.report(at, events);
            let watch = Watch {
                max_events,
                // A run the estimate says will not fit is refused before it starts.
                max_bytes: sim::collective::play::available_bytes(),
                estimate_only: false,
                progress: Some(&report_progress),
            };
            if s.file.workload.is_some() {
                let done = run_command::run_workload(&s, &path, &set, json, out, watch);
                progress.finish();
                return done;
            }
            let started = std::time::Instant::now();
            let report = scenario::run::run_watched(&s, watch);
            progress.finish();
            let report = report?;
            let wall = started.elapsed();
            let track = sim::validate::track_record::for_run(&s, &report);
            if json {
                // The summary as summary.json has it, with the track record after it where the
                // run has one (as a sweep's points carry it).
                #[derive(serde::Serialize)]
                struct WithTrack<'a, T: serde::Serialize> {
                    #[serde(flatten)]
                    summary: &'a T,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    track_record: Option<&'a sim::validate::track_record::TrackRecord>,
                }
                let v = WithTrack {
                    summary: &report.summary,
                    track_record: track.as_ref(),
                };
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{report}");
                if let Some(t) = &track {
                    println!("{t}");
                }
            }
            if let Some(dir) = out {
                let files = report
                    .write_dir(&dir)
                    .and_then(|mut files| {
                        if let Some(t) = &track {
                            let file = dir.join("track_record.json");
                            let text = serde_json::to_string_pretty(t)? + "\n";
                            sim::metrics::output::write_atomic(&file, text.as_bytes())?;
                            files.push(file);
                        }
                        run_dir::mark_complete(&dir, "collective", &files).map(|()| files)
                    })
                    .with_context(|| format!("writing results to {}", dir.display()))?;
                if !json {
                    println!("\nwrote {} files to {}", files.len(), dir.display());
                }
            }
            // Wall time goes to stderr: result files and stdout stay bit-identical across runs.
            eprintln!("simulated in {:.3} s wall time", wall.as_secs_f64());
            Ok(())
        }
        Command::NcclTests {
            scenario: path,
            set,
            min,
            max,
            factor,
            measured,
            system,
            format,
        } => {
            let (s, path) = match (&path, &measured, &system) {
                (Some(p), _, _) => (scenario::load(p, &set)?, p.clone()),
                (None, Some(t), Some(sys)) => {
                    let (text, mut all) =
                        sim::validate::nccl::scenario_of(t, sys).map_err(|e| anyhow::anyhow!(e))?;
                    all.extend(set.iter().cloned());
                    let named = PathBuf::from(format!("{} ({sys})", t.display()));
                    (scenario::parse(&text, &named, &all)?, named)
                }
                _ => anyhow::bail!("a scenario, or --measured TABLE with --system NAME"),
            };
            let bytes = |flag: &str, v: &str| {
                sim::units::parse_bytes(v).map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
            };
            let range = scenario::size_sweep::Range {
                min_bytes: bytes("-b", &min)?,
                max_bytes: bytes("-e", &max)?,
                factor,
            };
            let measured = match (&measured, &system) {
                (Some(t), Some(sys)) => {
                    let op = s
                        .file
                        .collective
                        .as_ref()
                        .map_or(sim::collective::Collective::AllReduce, |c| c.op);
                    Some(
                        sim::validate::nccl::measured_us(t, sys, op)
                            .map_err(|e| anyhow::anyhow!(e))?,
                    )
                }
                _ => None,
            };
            let prep = scenario::run::prepare(&s)?;
            let points =
                scenario::size_sweep::run_on(&s, &prep, &range).map_err(|e| anyhow::anyhow!(e))?;
            if format == "nccl-tests" {
                let run = scenario::size_sweep::nccl_tests_run(&s, &prep, &points)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                print!("{}", sim::metrics::nccl_tests::to_text(&run));
                return Ok(());
            }
            print!(
                "{}",
                scenario::size_sweep::table(&points, measured.as_ref())
            );
            Ok(())
        }
        Command::Sweep(args) => sweep_command::run(args),
        Command::Merge { dirs, out } => {
            let m = sweep::merge(&dirs)?;
            let path = out.unwrap_or_else(|| dirs[0].join("results.csv"));
            sim::metrics::output::write_atomic(&path, sweep::results_csv(&m).as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            println!(
                "wrote {} ({} points{})",
                path.display(),
                m.rows.len(),
                if m.missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", {} missing: run the sweep again to finish them",
                        m.missing.len()
                    )
                }
            );
            Ok(())
        }
        Command::Report { args } => report_command(&args),
        Command::Bench {
            step_case: Some(case),
            gpus,
            ring,
            ..
        } => bench::run_step_case(&case, gpus.unwrap_or(1024), ring).map_err(anyhow::Error::msg),
        Command::Bench { quick, steps, .. } => {
            bench::run(quick, steps);
            Ok(())
        }
        Command::Validate {
            datasets,
            calibrate_on,
            score_on,
            max_median_error,
            max_error,
            out,
            leave_one_out,
            set,
            baseline,
        } => {
            // Shown only where a replay takes over a second (the packet model's, minutes).
            let progress = Progress::new(false, "replaying");
            let report_row = |at: Option<sim::validate::RowProgress>| match at {
                Some(at) => progress.bar.set_message(format!(
                    "replaying {} ({} of {}): row {} of {}",
                    at.dataset, at.dataset_index, at.datasets, at.row, at.rows
                )),
                None => progress.finish(),
            };
            sim::validate::run_cli(
                &datasets,
                sim::validate::Flags {
                    calibrate_on: calibrate_on.as_deref(),
                    score_on: score_on.as_deref(),
                    leave_one_out: leave_one_out.as_deref(),
                    set: &set,
                    baseline: baseline.as_deref(),
                },
                sim::validate::Gates {
                    max_median_error_pct: max_median_error,
                    max_error_pct: max_error,
                },
                out.as_deref(),
                &report_row,
            )
        }
        Command::Topo {
            command: TopoCommand::Show { topology, set, dot },
        } => {
            let mut overrides = toml::Table::new();
            for o in &set {
                scenario::apply_override(&mut overrides, o)
                    .map_err(|e| anyhow::anyhow!("{}: --set {o}: {e}", topology.display()))?;
            }
            let progress = Progress::new(false, "building the topology");
            let topo = match topology_file::load_with_overrides(&topology, &overrides) {
                Ok(t) => t,
                Err(e) => {
                    progress.finish();
                    return Err(e.into());
                }
            };
            progress.bar.set_message(format!(
                "summarizing {} devices and {} links (routes, bisection)",
                topo.devices().len(),
                topo.links().len()
            ));
            let text = if dot {
                summary::to_dot(&topo)
            } else {
                let mut t = summary::summarize(&topo).to_string();
                if let Some(r) = sim::library::nccl::first_node_rings(&topo) {
                    let orders: Vec<String> = r
                        .orders
                        .iter()
                        .map(|o| o.iter().map(u32::to_string).collect::<Vec<_>>().join(" "))
                        .collect();
                    t += &format!(
                        "NCCL rings  {} over NVLink at {} GB/s each (search.cc, a node's GPUs in \
                         file order): {}\n",
                        r.orders.len(),
                        r.bw_gbps,
                        orders.join(" | ")
                    );
                }
                t + "\n"
            };
            progress.finish();
            print!("{text}");
            Ok(())
        }
        Command::Topo {
            command: TopoCommand::Import(args),
        } => topo_import(args),
        Command::Trace {
            command: TraceCommand::Show { dir, format },
        } => {
            let set = sim::workload::trace::load(&dir, trace_format(format)?)?;
            print!("{}", sim::workload::trace::describe(&set));
            Ok(())
        }
        Command::Trace {
            command:
                TraceCommand::Convert {
                    dir,
                    format,
                    out,
                    name,
                },
        } => {
            let set = sim::workload::trace::load(&dir, trace_format(format)?)?;
            let stem = name.unwrap_or_else(|| set.name.clone());
            let files = sim::workload::trace::chakra::write_dir(&set, &out, &stem)?;
            for f in files {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
    }
}

fn trace_format(f: Option<String>) -> anyhow::Result<Option<sim::workload::trace::Format>> {
    use sim::workload::trace::Format;
    f.map(|f| match f.as_str() {
        "pytorch" => Ok(Format::Pytorch),
        "chakra" => Ok(Format::Chakra),
        _ => anyhow::bail!("--format: pytorch or chakra, got {f:?}"),
    })
    .transpose()
}

/// `dtsim topo import`: reads the machine's report, checks that the topology it writes builds,
/// and prints or writes it.
fn topo_import(args: ImportArgs) -> anyhow::Result<()> {
    use sim::topology::import;
    let ImportArgs {
        input,
        format,
        gpu,
        pcie,
        smp,
        no_p2p,
        name,
        out,
    } = args;
    let bandwidth = |flag: &str, v: Option<String>| -> anyhow::Result<Option<f64>> {
        v.map(|t| {
            let bps = sim::units::parse_bandwidth(&t)
                .map_err(|e| anyhow::anyhow!("--{flag} {t:?}: {e}"))?;
            Ok(bps / 8.0)
        })
        .transpose()
    };
    let opts = import::ImportOptions {
        format: format
            .map(|f| {
                import::Format::parse(&f)
                    .ok_or_else(|| anyhow::anyhow!("--format: nccl-xml or nvidia-smi, got {f:?}"))
            })
            .transpose()?,
        gpu,
        pcie_bytes_per_s: bandwidth("pcie", pcie)?,
        smp_bytes_per_s: bandwidth("smp", smp)?,
        name,
        no_p2p,
    };
    let origin = input.display().to_string();
    let text = std::fs::read_to_string(input)
        .map_err(|e| anyhow::anyhow!("{origin}: a readable UTF-8 file ({e})"))?;
    let node = import::import(&text, &origin, &opts)?;
    let topo = node.topology()?;
    let toml = node.to_toml();
    match out {
        Some(path) => {
            sim::metrics::output::write_atomic(&path, toml.as_bytes())
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            eprintln!(
                "wrote {} ({} devices, {} links): dtsim topo show {} summarizes it",
                path.display(),
                topo.devices().len(),
                topo.duplex_link_count(),
                path.display()
            );
        }
        None => print!("{toml}"),
    }
    Ok(())
}

/// A spinner on stderr for anything that takes more than a second (building a topology,
/// generating a schedule, simulating): drawn only on a terminal and without --json, from one
/// second on, with the simulated time and events once the simulation reports them.
struct Progress {
    bar: indicatif::ProgressBar,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    fn new(json: bool, what: &str) -> Self {
        use std::io::IsTerminal as _;
        use std::sync::atomic::Ordering;
        let bar = indicatif::ProgressBar::hidden();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if !json && std::io::stderr().is_terminal() {
            let (bar, done) = (bar.clone(), done.clone());
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(1));
                if !done.load(Ordering::SeqCst) {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    bar.enable_steady_tick(std::time::Duration::from_millis(200));
                }
            });
        }
        Progress { bar, done }
    }

    fn report(&self, at: sim::engine::SimTime, events: u64) {
        self.bar
            .set_message(format!("simulated {at}, {events} events"));
    }

    fn finish(&self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        self.bar.finish_and_clear();
    }
}

/// `dtsim report ...`: runs the `dtsim-report` binary that sits next to this one.
fn report_command(args: &[String]) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("locating the dtsim binary")?;
    let name = format!("dtsim-report{}", std::env::consts::EXE_SUFFIX);
    let candidate = me.with_file_name(&name);
    if !candidate.exists() {
        anyhow::bail!(
            "{} not found next to {}: reports need the `reports` crate (polars, plotters), \
             which dtsim does not link to keep its build fast. Build it once with \
             `cargo build -p reports --bin dtsim-report` (add --release if dtsim was built with \
             --release; a release build of polars takes ~50 minutes on 2 cores, debug ~7), \
             or run `cargo run -p reports --bin dtsim-report -- RESULTS... --out DIR`",
            name,
            me.display()
        );
    }
    let status = std::process::Command::new(&candidate)
        .args(args)
        .status()
        .with_context(|| format!("running {}", candidate.display()))?;
    if !status.success() {
        anyhow::bail!("{} exited with {status}", candidate.display());
    }
    Ok(())
}
