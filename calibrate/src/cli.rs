//! The `calibrate` command line: argument parsing, printing and exit codes. The binary's
//! `main` only calls [`main`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sim::profile::{PathMeasurement, Profile, Provenance};
use sim::topology::LinkClass;
use sim::units::{fmt_bits_per_s, fmt_bytes, Bandwidth};

use crate::build::{self, FitOptions, FittedRun};
use crate::fit::Holdout;
use crate::gpu;
use crate::import::{iperf3, kineto, layer_times, nccl_tests, p2p, torch_device, validation_csv};

/// Exit status: bad input (unreadable log, bad option, invalid profile).
pub const EXIT_INPUT: u8 = 2;
/// Exit status of `calibrate gpu` when there is no NVIDIA driver or GPU here.
pub const EXIT_NO_GPU: u8 = 3;
/// Exit status of `calibrate gpu` when a measurement failed on a GPU.
pub const EXIT_GPU_FAILED: u8 = 4;

const AFTER_HELP: &str = "Exit status: 0 success; 2 bad input (unreadable or broken log, bad option, invalid profile); 3 `calibrate gpu` found no NVIDIA driver or GPU on this machine; 4 `calibrate gpu` failed while measuring.";

#[derive(Parser)]
#[command(name = "calibrate", version, about = "Measure GPUs and clusters, import measurements, fit dtsim calibration profiles", after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct FitArgs {
    /// Link class that bounds the collective (nvlink, pcie, ib, ethernet, smp); default nvlink for one node, required for several.
    #[arg(long, value_parser = parse_link_class)]
    link_class: Option<LinkClass>,
    /// Nominal per-link rate (e.g. 450GB/s); with it, size-dependent factors are written.
    #[arg(long)]
    nominal_bw: Option<String>,
    /// Nominal link latency (e.g. 2us) for the latency factor.
    #[arg(long)]
    nominal_latency: Option<String>,
    /// Hold sizes back from the fit and report the error on them: every:K, above:SIZE, below:SIZE.
    #[arg(long)]
    holdout: Option<String>,
    /// Fit out-of-place times (default in-place).
    #[arg(long)]
    out_of_place: bool,
    /// Ignore sizes below this (e.g. 1MiB).
    #[arg(long, default_value = "0")]
    min_bytes: String,
    /// The collective of logs that do not say which program ran (all_reduce, all_gather, ...).
    #[arg(long)]
    collective: Option<String>,
}

#[derive(clap::Args, Clone)]
struct OutArgs {
    /// Profile to write (atomically). If it exists, the new tables are merged into it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Profile name (default: the output file's stem).
    #[arg(long)]
    name: Option<String>,
    /// Profile description.
    #[arg(long, default_value = "")]
    description: String,
}

#[derive(Subcommand)]
enum Command {
    /// Check a profile and print it readably, with the provenance of every table.
    Show {
        profile: PathBuf,
        /// Print the profile as normalized JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Import measurements made elsewhere.
    #[command(subcommand)]
    Import(ImportCmd),
    /// Fit alpha-beta lines to nccl-tests logs and report the error on held-back sizes.
    Fit {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        fit: FitArgs,
        #[command(flatten)]
        out: OutArgs,
        /// Print the fits as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fit dtsim's NCCL model (per-call and per-step latency, link efficiency) to nccl-tests
    /// tables by simulating every row; writes `network.nccl` into the profile with the rows
    /// it was fitted on (never scored by `dtsim validate`).
    FitNccl {
        /// Tables in the shared validation layout (size_bytes with busbw_GBps or oop_time_us).
        #[arg(required = true)]
        tables: Vec<PathBuf>,
        /// Fit on rows of these systems only (column `system`; repeatable). Default: all.
        #[arg(long = "system")]
        systems: Vec<String>,
        /// Leave every K-th selected row out of the fit, for `dtsim validate` to score the
        /// profile on sizes it was not fitted on.
        #[arg(long, value_name = "K")]
        hold_out_every: Option<u32>,
        /// Profile to write (merged into when it exists).
        #[arg(long)]
        out: PathBuf,
        /// Name of a new profile.
        #[arg(long, default_value = "nccl-fit")]
        name: String,
        /// Date to record in the provenance (YYYY-MM-DD; default: today).
        #[arg(long)]
        date: Option<String>,
    },
    /// Measure this machine's GPUs (needs the NVIDIA driver; cuBLAS and NCCL when found). Multi-node: launch with srun, mpirun or torchrun-style RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT.
    Gpu {
        /// Profile to write.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Folder for the raw logs (nccl-tests tables, measurements JSON).
        #[arg(long)]
        logs: Option<PathBuf>,
        #[arg(long, default_value = "8")]
        min_bytes: String,
        #[arg(long, default_value = "1GiB")]
        max_bytes: String,
        #[arg(long, default_value_t = 5)]
        warmup: u32,
        #[arg(long, default_value_t = 20)]
        reps: u32,
        /// Skip parts: copies, p2p, gemm, layers, nccl (comma-separated).
        #[arg(long, default_value = "")]
        skip: String,
        /// Catalog models whose conv/linear layers are timed as cuBLAS GEMMs (comma-separated).
        #[arg(long, default_value = "resnet50,alexnet")]
        layer_models: String,
        /// Batch sizes for the layer GEMMs (comma-separated).
        #[arg(long, default_value = "1,8,32,128")]
        layer_batches: String,
        /// Number formats for the layer GEMMs: fp32, tf32, fp16, bf16 (comma-separated).
        #[arg(long, default_value = "fp32,tf32,bf16")]
        layer_dtypes: String,
    },
}

#[derive(Subcommand)]
enum ImportCmd {
    /// nccl-tests logs, text or JSON (-J), gzip allowed. With --topology: fit dtsim's NCCL
    /// model (per-call and per-step latency, link efficiency) by simulating every row on that
    /// topology, into the profile's network.nccl with the rows it was fitted on. Without:
    /// alpha-beta and size-factor tables for dtsim's ideal templates.
    NcclTests {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The topology the logs were measured on (a file that names its GPU, e.g.
        /// topologies/hgx_h100.toml): fit the NCCL model on it.
        #[arg(long)]
        topology: Option<PathBuf>,
        /// The algorithm the runs forced with NCCL_ALGO (ring, tree, nvls, pat), with --topology.
        #[arg(long, requires = "topology")]
        algorithm: Option<String>,
        /// The protocol the runs forced with NCCL_PROTO (ll, ll128, simple), with --topology.
        #[arg(long, requires = "topology")]
        protocol: Option<String>,
        /// Date to record in the provenance of NCCL-model fits (YYYY-MM-DD; default: today).
        #[arg(long, requires = "topology")]
        date: Option<String>,
        #[command(flatten)]
        fit: FitArgs,
        #[command(flatten)]
        out: OutArgs,
        #[arg(long)]
        json: bool,
    },
    /// The CSV transcriptions of published nccl-tests tables (shared/validation/*.csv).
    ValidationCsv {
        file: PathBuf,
        /// Only this system (the CSV's `system` column), e.g. "ND H100 v5".
        #[arg(long)]
        system: Option<String>,
        #[command(flatten)]
        fit: FitArgs,
        #[command(flatten)]
        out: OutArgs,
        /// Also write each run in nccl-tests' text format into this folder.
        #[arg(long)]
        write_logs: Option<PathBuf>,
    },
    /// A PyTorch profiler (Kineto) trace, gzip allowed: per-kernel, per-layer and NCCL times, steps.
    Kineto {
        trace: PathBuf,
        /// Rows per table.
        #[arg(long, default_value_t = 15)]
        top: usize,
        #[arg(long)]
        json: bool,
    },
    /// GEMM timings and copy rate of calibrate/scripts/torch_bench.py (device.json): a profile's
    /// compute section for that device (a CPU too). Into an existing compute section, only the
    /// file's dtype peak is added.
    TorchDevice {
        file: PathBuf,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Per-layer times of calibrate/scripts/torch_bench.py (layer_times.csv) into an existing
    /// profile's compute.layer_times, aligned with dtsim's catalog models.
    LayerTimes {
        file: PathBuf,
        /// The profile to add them to (it needs a compute section: `import torch-device` first).
        #[arg(long)]
        out: PathBuf,
        /// Where the file was measured, kept in the provenance (default: the file's path).
        #[arg(long)]
        measured_on: Option<String>,
    },
    /// p2pBandwidthLatencyTest or nvbandwidth output.
    P2p {
        file: PathBuf,
        #[arg(long, value_parser = parse_link_class)]
        link_class: Option<LinkClass>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// iperf3 JSON (iperf3 -J); with --nominal-bw also the link class's efficiency. Give runs
    /// with 1, 2, 4, 8 parallel streams (-P) through the same link: when their totals agree
    /// the link is shared and its efficiency scales the link (a link efficiency); otherwise
    /// (or with one run) the single-stream rate caps each flow (a bandwidth factor).
    Iperf3 {
        #[arg(required = true, num_args = 1..)]
        file: Vec<PathBuf>,
        #[arg(long, default_value = "ethernet", value_parser = parse_link_class)]
        link_class: LinkClass,
        /// Nominal rate of the measured path's bottleneck link (e.g. 200Mbps, as in the
        /// topology file): writes bandwidth factor = received rate / nominal for the class.
        #[arg(long)]
        nominal_bw: Option<String>,
        /// Measured one-way latency of the same path (e.g. half a ping-pong's median RTT).
        #[arg(long)]
        latency: Option<String>,
        /// The topology's one-way latency of that path (the sum over its links); with
        /// --latency and --nominal-bw, latency factor = measured / nominal.
        #[arg(long)]
        nominal_latency: Option<String>,
        /// How and where --latency was measured, kept in the provenance.
        #[arg(long, default_value = "")]
        latency_source: String,
        /// Where the iperf3 run (and --latency) were measured, e.g. "the dtsim testbed
        /// (topology ...)": the profile's provenance then says `measured` there, not `imported`.
        #[arg(long)]
        measured_on: Option<String>,
        #[command(flatten)]
        out: OutArgs,
    },
}

fn parse_link_class(s: &str) -> Result<LinkClass, String> {
    LinkClass::ALL
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| {
            format!(
                "one of {}, got {s:?}",
                LinkClass::ALL.map(|c| c.as_str()).join(", ")
            )
        })
}

/// An error with the exit status it maps to.
struct Failure(u8, String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(EXIT_INPUT, e.to_string())
    }
}

pub fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(code, msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(code)
        }
    }
}

fn fit_options(a: &FitArgs) -> Result<FitOptions, Failure> {
    Ok(FitOptions {
        link_class: a.link_class,
        nominal_bytes_per_s: a
            .nominal_bw
            .as_deref()
            .map(sim::units::parse_bandwidth)
            .transpose()
            .map_err(|e| Failure(EXIT_INPUT, format!("--nominal-bw: {e}")))?
            .map(|b| b / 8.0),
        nominal_latency_secs: a
            .nominal_latency
            .as_deref()
            .map(sim::units::parse_duration)
            .transpose()
            .map_err(|e| Failure(EXIT_INPUT, format!("--nominal-latency: {e}")))?
            .map(|t| t.as_secs_f64()),
        holdout: a
            .holdout
            .as_deref()
            .map(|h| h.parse::<Holdout>().map(|p| (p, h.to_string())))
            .transpose()
            .map_err(|e| Failure(EXIT_INPUT, format!("--holdout: {e}")))?,
        out_of_place: a.out_of_place,
        min_bytes: sim::units::parse_bytes(&a.min_bytes)
            .map_err(|e| Failure(EXIT_INPUT, format!("--min-bytes: {e}")))?,
        collective: a.collective.clone(),
    })
}

/// Loads `out` when it exists (to merge into), else a new profile.
fn open_profile(o: &OutArgs, prov: Provenance) -> Result<Profile, Failure> {
    let name = o
        .name
        .clone()
        .or_else(|| {
            o.out
                .as_ref()
                .and_then(|p| p.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "imported".into());
    match &o.out {
        Some(p) if p.exists() => {
            let mut prof = Profile::load(p)?;
            prof.provenance.detail = format!("{}; then {}", prof.provenance.detail, prov.detail);
            if o.name.is_some() {
                prof.name = name;
            }
            if !o.description.is_empty() {
                prof.description = o.description.clone();
            }
            Ok(prof)
        }
        _ => Ok(build::empty_profile(&name, &o.description, prov)),
    }
}

fn save(p: &Profile, out: &Option<PathBuf>) -> Result<(), Failure> {
    let Some(path) = out else { return Ok(()) };
    let text = serde_json::to_string_pretty(p)?;
    // Refuse to write what the simulator would refuse to read.
    Profile::parse(&text, &path.display().to_string())?;
    sim::metrics::output::write_atomic(path, (text + "\n").as_bytes())
        .map_err(|e| Failure(EXIT_INPUT, format!("{}: {e}", path.display())))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn print_fits(fits: &[(String, FittedRun)]) {
    println!(
        "{:<40} {:<15} {:>5} {:>10} {:>12} {:>12} {:>7} {:>8} {:>18}",
        "log",
        "collective",
        "ranks",
        "alpha",
        "algbw",
        "busbw",
        "R2",
        "max|res|",
        "hold-out mean/max"
    );
    for (origin, f) in fits {
        let c = &f.fit;
        let h = f
            .holdout
            .as_ref()
            .map(|h| {
                format!(
                    "{:.1}% / {:.1}% ({})",
                    h.mean_abs_rel_error * 100.0,
                    h.max_abs_rel_error * 100.0,
                    h.held_back.len()
                )
            })
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<40} {:<15} {:>5} {:>8.2}us {:>12} {:>12} {:>7.4} {:>7.1}% {:>18}",
            short(origin, 40),
            c.collective,
            c.ranks,
            c.alpha_secs * 1e6,
            sim::units::fmt_gbytes_per_s(c.algbw_bytes_per_s),
            sim::units::fmt_gbytes_per_s(c.busbw_bytes_per_s),
            c.r_squared,
            c.max_rel_residual * 100.0,
            h
        );
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!(
            "...{}",
            s.chars()
                .rev()
                .take(n - 3)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<String>()
        )
    }
}

fn fit_files(files: &[PathBuf], fa: &FitArgs) -> Result<Vec<(String, FittedRun)>, Failure> {
    let o = fit_options(fa)?;
    let mut fits = Vec::new();
    for f in files {
        let run = nccl_tests::load(f)?;
        let origin = f.display().to_string();
        fits.push((origin.clone(), build::fit_run(&run, &origin, &o)?));
    }
    Ok(fits)
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::FitNccl {
            tables,
            systems,
            hold_out_every,
            out,
            name,
            date,
        } => {
            let summary = crate::fit_nccl::run(
                &tables,
                &systems,
                hold_out_every,
                &out,
                &name,
                date.or_else(|| Some(build::today())),
            )
            .map_err(|e| Failure(EXIT_INPUT, e))?;
            print!("{summary}");
            Ok(())
        }
        Command::Show { profile, json } => {
            let p = Profile::load(&profile)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&p)?);
            } else {
                print!("{}", describe(&p));
            }
            Ok(())
        }
        Command::Fit {
            files,
            mut fit,
            out,
            json,
        } => {
            if fit.holdout.is_none() {
                fit.holdout = Some("every:3".into());
            }
            let fits = fit_files(&files, &fit)?;
            report_fits(&fits, json);
            if out.out.is_some() {
                let mut p = open_profile(
                    &out,
                    build::provenance("imported", format!("calibrate fit of {}", list(&files))),
                )?;
                build::merge_fits(
                    &mut p,
                    &fits.iter().map(|f| f.1.clone()).collect::<Vec<_>>(),
                );
                save(&p, &out.out)?;
            }
            Ok(())
        }
        Command::Import(ImportCmd::NcclTests {
            files,
            topology: Some(topology),
            algorithm,
            protocol,
            date,
            out,
            ..
        }) => {
            let path = out.out.clone().ok_or_else(|| {
                Failure(
                    EXIT_INPUT,
                    "--out: the profile to write the NCCL fit into (needed with --topology)".into(),
                )
            })?;
            let mut runs = Vec::new();
            for f in &files {
                runs.push((f.clone(), nccl_tests::load(f)?));
            }
            let name = out.name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "nccl-fit".into())
            });
            let sys = crate::fit_nccl::LogSystem {
                topology: &topology,
                algorithm: algorithm.as_deref(),
                protocol: protocol.as_deref(),
            };
            let summary = crate::fit_nccl::from_logs(
                &runs,
                &sys,
                &path,
                &name,
                date.or_else(|| Some(build::today())),
            )
            .map_err(|e| Failure(EXIT_INPUT, e))?;
            print!("{summary}");
            Ok(())
        }
        Command::Import(ImportCmd::NcclTests {
            files,
            topology: None,
            fit,
            out,
            json,
            ..
        }) => {
            let fits = fit_files(&files, &fit)?;
            report_fits(&fits, json);
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!("calibrate import nccl-tests {}", list(&files)),
                ),
            )?;
            build::merge_fits(
                &mut p,
                &fits.iter().map(|f| f.1.clone()).collect::<Vec<_>>(),
            );
            save(&p, &out.out)
        }
        Command::Import(ImportCmd::ValidationCsv {
            file,
            system,
            fit,
            out,
            write_logs,
        }) => {
            let o = fit_options(&fit)?;
            let runs: Vec<_> = validation_csv::load(&file)?
                .into_iter()
                .filter(|r| system.as_ref().is_none_or(|s| &r.system == s))
                .collect();
            if runs.is_empty() {
                return Err(Failure(
                    EXIT_INPUT,
                    format!(
                        "{}: no rows for system {:?}",
                        file.display(),
                        system.unwrap_or_default()
                    ),
                ));
            }
            let mut fits = Vec::new();
            for r in &runs {
                let origin = format!(
                    "{} rows {}-{} ({}, {}; source: {})",
                    file.display(),
                    r.lines.first().unwrap_or(&0),
                    r.lines.last().unwrap_or(&0),
                    r.system,
                    r.run.collective.as_deref().unwrap_or("?"),
                    r.source
                );
                if let Some(dir) = &write_logs {
                    let name = format!(
                        "{}_{}.txt",
                        r.system.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
                        r.run.collective.as_deref().unwrap_or("x")
                    );
                    sim::metrics::output::write_atomic(
                        &dir.join(name),
                        nccl_tests::to_text(&r.run).as_bytes(),
                    )?;
                }
                match build::fit_run(&r.run, &origin, &o) {
                    Ok(f) => fits.push((origin, f)),
                    Err(e) => eprintln!("skipped: {e}"),
                }
            }
            report_fits(&fits, false);
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!(
                        "calibrate import validation-csv {}{}",
                        file.display(),
                        system
                            .map(|s| format!(" --system {s:?}"))
                            .unwrap_or_default()
                    ),
                ),
            )?;
            build::merge_fits(
                &mut p,
                &fits.iter().map(|f| f.1.clone()).collect::<Vec<_>>(),
            );
            save(&p, &out.out)
        }
        Command::Import(ImportCmd::TorchDevice { file, out }) => import_torch_device(&file, &out),
        Command::Import(ImportCmd::LayerTimes {
            file,
            out,
            measured_on,
        }) => import_layer_times(&file, &out, measured_on.as_deref()),
        Command::Import(ImportCmd::Kineto { trace, top, json }) => {
            let s = kineto::load(&trace)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
                return Ok(());
            }
            println!(
                "{} steps, {} kernel names, {} layers, {} NCCL kernels",
                s.steps.len(),
                s.kernels.len(),
                s.layers.len(),
                s.collectives.len()
            );
            for st in &s.steps {
                println!(
                    "  step {:>4}: cpu {:>10.3} ms, gpu kernels {:>10.3} ms",
                    st.number,
                    st.cpu_secs * 1e3,
                    st.gpu_kernel_secs * 1e3
                );
            }
            for (title, rows) in [("kernels", &s.kernels), ("layers", &s.layers)] {
                println!("GPU time by {title} (top {top}):");
                for r in rows.iter().take(top) {
                    println!(
                        "  {:>10.3} ms {:>6}x  {}",
                        r.total_secs * 1e3,
                        r.count,
                        short(&r.name, 90)
                    );
                }
            }
            for c in s.collectives.iter().take(top) {
                println!(
                    "  nccl {:<15} {:>12} group {:<8} size {:<4} {:>9.1} us",
                    c.collective,
                    c.bytes
                        .map(|b| fmt_bytes(b as f64))
                        .unwrap_or_else(|| "?".into()),
                    c.group.as_deref().unwrap_or("?"),
                    c.group_size
                        .map(|g| g.to_string())
                        .unwrap_or_else(|| "?".into()),
                    c.secs * 1e6
                );
            }
            Ok(())
        }
        Command::Import(ImportCmd::P2p {
            file,
            link_class,
            out,
        }) => {
            let ms = p2p::load(&file)?;
            for m in &ms {
                println!(
                    "{} ({}x{}, line {}): off-diagonal mean {:.2} {}",
                    m.title,
                    m.values.len(),
                    m.values.len(),
                    m.line,
                    m.off_diagonal_mean().unwrap_or(f64::NAN),
                    m.unit
                );
            }
            let mut p = open_profile(
                &out,
                build::provenance(
                    "imported",
                    format!("calibrate import p2p {}", file.display()),
                ),
            )?;
            let origin = file.display().to_string();
            p.network
                .paths
                .retain(|m| !m.provenance.detail.starts_with(&origin));
            p.network
                .paths
                .extend(build::p2p_paths(&ms, &origin, link_class));
            save(&p, &out.out)
        }
        Command::Import(ImportCmd::Iperf3 {
            file,
            link_class,
            nominal_bw,
            latency,
            nominal_latency,
            latency_source,
            measured_on,
            out,
        }) => {
            let secs = |flag: &str, v: &Option<String>| {
                v.as_deref()
                    .map(sim::units::parse_duration)
                    .transpose()
                    .map(|d| d.map(|d| d.as_secs_f64()))
                    .map_err(|e| Failure(EXIT_INPUT, format!("--{flag}: {e}")))
            };
            let latency_secs = secs("latency", &latency)?;
            let nominal_latency_secs = secs("nominal-latency", &nominal_latency)?;
            if nominal_latency_secs.is_some() && latency_secs.is_none() {
                return Err(Failure(
                    EXIT_INPUT,
                    "--nominal-latency: needs --latency (the measured one-way latency)".into(),
                ));
            }
            let nominal_bits_per_s = nominal_bw
                .as_deref()
                .map(sim::units::parse_bandwidth)
                .transpose()
                .map_err(|e| Failure(EXIT_INPUT, format!("--nominal-bw: {e}")))?;
            let mut runs = Vec::new();
            for f in &file {
                let r = iperf3::load(f)?;
                println!(
                    "{} {} stream(s) to {}: sent {}, received {}{}",
                    r.protocol,
                    r.streams,
                    r.remote_host.as_deref().unwrap_or("?"),
                    fmt_bits_per_s(r.sent_bits_per_s),
                    fmt_bits_per_s(r.received_bits_per_s),
                    r.retransmits
                        .map(|x| format!(", {x} retransmits"))
                        .unwrap_or_default()
                );
                runs.push((f.display().to_string(), r));
            }
            // The path measurement: the single-stream run (else the first).
            let k = runs.iter().position(|(_, r)| r.streams == 1).unwrap_or(0);
            let (origin, r) = (runs[k].0.clone(), runs[k].1.clone());
            let names: Vec<&str> = runs.iter().map(|(o, _)| o.as_str()).collect();
            let mut prov = build::provenance(
                "imported",
                format!("calibrate import iperf3 {}", names.join(" ")),
            );
            if let Some(on) = &measured_on {
                prov.source = "measured".into();
                prov.detail = format!("measured on {on}; {}", prov.detail);
            }
            let mut p = open_profile(&out, prov.clone())?;
            if measured_on.is_some() && p.network.factors.is_empty() && p.network.paths.is_empty() {
                p.provenance.source = prov.source.clone();
            }
            let mut path = build::iperf3_path(&r, &origin, Some(link_class));
            if measured_on.is_some() {
                path.provenance.source = prov.source.clone();
                path.provenance.detail = format!("{}; {}", prov.detail, path.provenance.detail);
            }
            if let Some(l) = latency_secs {
                path.latency_secs = Some(l);
                let _ = write!(
                    path.provenance.detail,
                    "; one-way latency {:.1} us{}",
                    l * 1e6,
                    if latency_source.is_empty() {
                        String::new()
                    } else {
                        format!(" ({latency_source})")
                    }
                );
            }
            if let Some(nominal) = nominal_bits_per_s {
                let mut table = build::iperf3_factors(
                    &r,
                    nominal,
                    latency_secs.zip(nominal_latency_secs),
                    &path.provenance,
                )
                .map_err(|e| Failure(EXIT_INPUT, e))?;
                match build::iperf3_link_efficiency(&runs, nominal, &prov) {
                    Ok(e) => {
                        println!(
                            "{link_class} link efficiency {:.4}: the total rate does not depend \
                             on the stream count (shared by the flows on a link)",
                            e.value
                        );
                        // The rate is the link's; each flow keeps only the latency factor.
                        for row in &mut table.rows {
                            row.bandwidth_factor = 1.0;
                        }
                        table.provenance.detail = format!(
                            "bandwidth factor 1: the link efficiency carries the rate; {}",
                            table.provenance.detail
                        );
                        p.network.link_efficiency.insert(link_class, e);
                    }
                    Err(why) if runs.len() > 1 => {
                        println!("{link_class}: no link efficiency: {why}");
                    }
                    Err(_) => {}
                }
                println!(
                    "{link_class} factors: bandwidth {:.4}, latency {:.4}",
                    table.rows[0].bandwidth_factor, table.rows[0].latency_factor
                );
                p.network.factors.insert(link_class, table);
            }
            p.network.paths.push(path);
            save(&p, &out.out)
        }
        Command::Gpu {
            out,
            logs,
            min_bytes,
            max_bytes,
            warmup,
            reps,
            skip,
            layer_models,
            layer_batches,
            layer_dtypes,
        } => gpu_command(
            out,
            logs,
            &min_bytes,
            &max_bytes,
            warmup,
            reps,
            &skip,
            &LayerArgs {
                models: layer_models,
                batches: layer_batches,
                dtypes: layer_dtypes,
            },
        ),
    }
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn report_fits(fits: &[(String, FittedRun)], json: bool) {
    if json {
        let v: Vec<_> = fits.iter().map(|(o, f)| serde_json::json!({"log": o, "fit": f.fit, "line": f.line, "holdout": f.holdout})).collect();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print_fits(fits);
    }
}

/// `calibrate import torch-device`: a compute section from PyTorch-measured GEMMs.
fn import_torch_device(file: &Path, o: &OutArgs) -> Result<(), Failure> {
    let d = torch_device::load(file)?;
    let date = build::today();
    let prov = |detail: String| Provenance {
        source: "measured".into(),
        detail: format!("{detail}; {} ({})", d.origin, file.display()),
        date: Some(date.clone()),
    };
    let section = crate::compute::compute_section(
        &d.gemms,
        Some(d.copy_bytes_per_s),
        &d.device_name,
        d.memory_bytes,
        &prov,
    )
    .ok_or_else(|| {
        Failure(
            EXIT_INPUT,
            format!(
                "{}: expected at least three GEMMs of distinct size in one dtype",
                file.display()
            ),
        )
    })?;
    for f in crate::compute::fit_gemms(&d.gemms) {
        eprintln!("{}", f.describe());
    }
    let mut p = open_profile(
        o,
        prov(format!(
            "compute section of {} ({})",
            d.device_name, d.device_kind
        )),
    )?;
    match p.compute.as_mut() {
        // Another dtype of the same device: add its peak, keep the rest.
        Some(c) if c.device == section.device => {
            c.peak_flops_per_s.extend(section.peak_flops_per_s);
        }
        Some(c) => {
            return Err(Failure(
                EXIT_INPUT,
                format!(
                    "{}: compute.device is {:?}, not {:?}: write a profile per device",
                    o.out
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    c.device,
                    section.device
                ),
            ))
        }
        None => p.compute = Some(section),
    }
    if o.out.is_none() {
        println!("{}", describe(&p));
    }
    save(&p, &o.out)
}

/// `calibrate import layer-times`: replaces the profile's layer times of each measured
/// (model, batch, dtype) by the file's.
fn import_layer_times(file: &Path, out: &Path, measured_on: Option<&str>) -> Result<(), Failure> {
    use std::collections::BTreeMap;
    let name = file.display().to_string();
    let rows = layer_times::load(file)?;
    let mut profile = Profile::load(out)?;
    let Some(compute) = profile.compute.as_mut() else {
        return Err(Failure(
            EXIT_INPUT,
            format!(
                "{}: compute: a compute section to add layer times to (run `calibrate import \
                 torch-device DEVICE.json --out {}` first)",
                out.display(),
                out.display()
            ),
        ));
    };
    let mut groups: BTreeMap<(String, u64, Option<String>), Vec<&layer_times::LayerRow>> =
        BTreeMap::new();
    for r in &rows {
        groups
            .entry((r.model.clone(), r.batch, r.dtype.clone()))
            .or_default()
            .push(r);
    }
    let date = build::today();
    let mut added = 0;
    for ((model_name, batch, dtype), group) in &groups {
        let model = sim::workload::catalog::by_name(model_name)
            .map_err(|e| Failure(EXIT_INPUT, format!("{name}:{}: model: {e}", group[0].line)))?;
        let aligned = layer_times::align(&model, group, &name)?;
        compute
            .layer_times
            .retain(|t| !(t.model == *model_name && t.batch == *batch && t.dtype == *dtype));
        for a in aligned {
            compute.layer_times.push(sim::profile::MeasuredLayerTime {
                model: model_name.clone(),
                layer: a.layer,
                batch: *batch,
                dtype: dtype.clone(),
                forward: sim::units::Duration(sim::engine::SimTime::from_secs_f64(a.forward_secs)),
                backward: sim::units::Duration(sim::engine::SimTime::from_secs_f64(
                    a.backward_secs,
                )),
                provenance: Provenance {
                    source: "measured".into(),
                    detail: format!(
                        "module {} run alone by torch_bench.py, median; {}",
                        a.module,
                        measured_on.unwrap_or(&name)
                    ),
                    date: Some(date.clone()),
                },
            });
            added += 1;
        }
        eprintln!("{model_name} batch {batch}: {} layers", group.len());
    }
    profile.provenance.detail = format!(
        "{}; then layer times from {name}",
        profile.provenance.detail
    );
    eprintln!("{added} layer times");
    save(&profile, &Some(out.to_path_buf()))
}

/// `calibrate gpu`'s `--layer-*` values as given.
struct LayerArgs {
    models: String,
    batches: String,
    dtypes: String,
}

fn comma_list(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The layer GEMMs `--layer-models/--layer-batches/--layer-dtypes` ask for.
fn layer_plan(a: &LayerArgs) -> Result<Vec<gpu::layers::PlannedGemm>, Failure> {
    let bad = |flag: &str, e: String| Failure(EXIT_INPUT, format!("{flag}: {e}"));
    let models = comma_list(&a.models)
        .into_iter()
        .map(|m| sim::workload::catalog::by_name(m).map_err(|e| bad("--layer-models", e.expected)))
        .collect::<Result<Vec<_>, _>>()?;
    let batches = comma_list(&a.batches)
        .into_iter()
        .map(|b| match b.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(bad(
                "--layer-batches",
                format!("positive whole numbers, got {b:?}"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtypes = comma_list(&a.dtypes)
        .into_iter()
        .map(|d| match gpu::cublas::gemm_type(d) {
            Some(t) => Ok(t.name.to_string()),
            None => Err(bad(
                "--layer-dtypes",
                format!("fp32, tf32, fp16 or bf16, got {d:?}"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(gpu::layers::plan(&models, &batches, &dtypes))
}

#[allow(clippy::too_many_arguments)]
fn gpu_command(
    out: Option<PathBuf>,
    logs: Option<PathBuf>,
    min_bytes: &str,
    max_bytes: &str,
    warmup: u32,
    reps: u32,
    skip: &str,
    layers: &LayerArgs,
) -> Result<(), Failure> {
    let parse = |flag: &str, v: &str| {
        sim::units::parse_bytes(v).map_err(|e| Failure(EXIT_INPUT, format!("{flag}: {e}")))
    };
    let skip = comma_list(skip);
    if let Some(bad) = skip
        .iter()
        .find(|s| !["copies", "p2p", "gemm", "layers", "nccl"].contains(s))
    {
        return Err(Failure(
            EXIT_INPUT,
            format!("--skip: copies, p2p, gemm, layers or nccl, got {bad:?}"),
        ));
    }
    let layers = if skip.contains(&"layers") {
        Vec::new()
    } else {
        layer_plan(layers)?
    };
    let o = gpu::measure::Options {
        min_bytes: parse("--min-bytes", min_bytes)?,
        max_bytes: parse("--max-bytes", max_bytes)?,
        warmup,
        reps,
        copies: !skip.contains(&"copies"),
        p2p: !skip.contains(&"p2p"),
        gemm: !skip.contains(&"gemm"),
        nccl: !skip.contains(&"nccl"),
        layers,
    };
    // Libraries first: one sentence and exit 3 on a machine without a GPU.
    let found = gpu::libs::check().map_err(|e| Failure(EXIT_NO_GPU, e))?;
    let launch = gpu::launch::Launch::from_env(|k| std::env::var(k).ok())?;
    let cublas = gpu::cublas::Cublas::load();
    let nccl = gpu::nccl::Nccl::load();
    let loaded = |lib: &str, version: Result<String, String>| {
        format!("{lib} (version {})", version.unwrap_or_else(|e| e))
    };
    eprintln!(
        "driver {}, {} GPU(s); {} rank {} of {}",
        found.driver, found.devices, launch.launcher, launch.rank, launch.world_size
    );
    match &cublas {
        Ok(c) => eprintln!("cuBLAS: {}", loaded(&c.library, c.version())),
        Err(e) => eprintln!("cuBLAS: not loaded: {e}"),
    }
    match &nccl {
        Ok(n) => eprintln!("NCCL: {}", loaded(&n.library, n.version())),
        Err(e) => eprintln!("NCCL: not loaded: {e}"),
    }
    let mut log = |s: &str| eprintln!("measuring: {s}");
    let report = gpu::libs::no_panic("measuring", || {
        gpu::measure::run(
            &o,
            &launch,
            nccl.as_ref().ok(),
            cublas.as_ref().ok(),
            &mut log,
        )
    })
    .and_then(|r| r)
    .map_err(|e| Failure(EXIT_GPU_FAILED, e))?;
    if launch.rank != 0 {
        return Ok(());
    }
    print!("{}", describe_gpu(&report));
    for run in &report.collectives {
        println!();
        print!("{}", nccl_tests::to_text(run));
    }
    if let Some(dir) = &logs {
        sim::metrics::output::write_atomic(
            &dir.join("gpu_measurements.json"),
            serde_json::to_string_pretty(&report)?.as_bytes(),
        )?;
        for run in &report.collectives {
            sim::metrics::output::write_atomic(
                &dir.join(format!(
                    "{}_perf.txt",
                    run.collective.as_deref().unwrap_or("x")
                )),
                nccl_tests::to_text(run).as_bytes(),
            )?;
        }
    }
    if out.is_some() {
        save(&gpu_profile(&report, &out)?, &out)?;
    }
    Ok(())
}

fn describe_gpu(r: &gpu::measure::GpuReport) -> String {
    let mut s = format!(
        "host {} driver {} cuBLAS {} NCCL {} ({})\n",
        r.host,
        r.driver_version,
        r.cublas_version.as_deref().unwrap_or("-"),
        r.nccl_version.as_deref().unwrap_or("-"),
        r.launch
    );
    for (what, lib) in [("cuBLAS", &r.cublas_library), ("NCCL", &r.nccl_library)] {
        if let Some(l) = lib {
            s += &format!("  {what} from {l}\n");
        }
    }
    for d in &r.devices {
        s += &format!(
            "  GPU {} {} sm_{}{} {} SMs {} clocks {} / {} MHz\n",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sms,
            fmt_bytes(d.memory_bytes as f64),
            d.sm_clock_khz / 1000,
            d.memory_clock_khz / 1000
        );
    }
    for c in &r.copies {
        s += &format!(
            "  {} gpu{} {:>10}: {:>12} (median {:.2} us, min {:.2}, max {:.2})\n",
            c.kind,
            c.device,
            fmt_bytes(c.bytes as f64),
            sim::units::fmt_gbytes_per_s(c.bytes as f64 / c.time.median_secs),
            c.time.median_secs * 1e6,
            c.time.min_secs * 1e6,
            c.time.max_secs * 1e6
        );
    }
    for p in &r.p2p {
        s += &format!(
            "  p2p {}->{} (peer {}): uni {} bi {} latency {:.2} us\n",
            p.src,
            p.dst,
            p.peer_access,
            sim::units::fmt_gbytes_per_s(p.bytes as f64 / p.unidirectional.median_secs),
            sim::units::fmt_gbytes_per_s(2.0 * p.bytes as f64 / p.bidirectional.median_secs),
            p.latency.median_secs * 1e6
        );
    }
    for g in &r.gemms {
        s += &format!(
            "  gemm {} {}x{}x{}: {:.1} TFLOP/s (median {:.1} us)\n",
            g.dtype,
            g.m,
            g.n,
            g.k,
            g.flops() / g.time.median_secs / 1e12,
            g.time.median_secs * 1e6
        );
    }
    if !r.layer_gemms.is_empty() {
        s += &gpu::layers::summary_table(&gpu::layers::summarize(&r.layer_gemms));
    }
    s
}

/// The profile of a `calibrate gpu` run.
fn gpu_profile(r: &gpu::measure::GpuReport, out: &Option<PathBuf>) -> Result<Profile, Failure> {
    let when = build::today();
    let machine = format!(
        "calibrate gpu on {} ({} x {}), driver {}, {}",
        r.host,
        r.devices.len(),
        r.devices.first().map(|d| d.name.as_str()).unwrap_or("?"),
        r.driver_version,
        when
    );
    let prov = |detail: String| Provenance {
        source: "measured".into(),
        detail: format!("{detail}; {machine}"),
        date: Some(when.clone()),
    };
    let name = out
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "measured".into());
    let mut p = build::empty_profile(
        &name,
        &format!("Measured by calibrate gpu on {}", r.host),
        prov("device inventory, copies, P2P, cuBLAS GEMM and NCCL collectives".into()),
    );
    let largest = |kind: &str| {
        r.copies
            .iter()
            .filter(|c| c.kind == kind)
            .max_by_key(|c| c.bytes)
    };
    for kind in ["h2d", "d2h", "d2d"] {
        if let Some(c) = largest(kind) {
            p.network.paths.push(PathMeasurement {
                kind: kind.into(),
                link_class: (kind != "d2d").then_some(LinkClass::Pcie),
                src: None,
                dst: Some(format!("gpu{}", c.device)),
                bandwidth: Some(Bandwidth(c.bytes as f64 * 8.0 / c.time.median_secs)),
                latency_secs: None,
                provenance: prov(format!(
                    "{} copy of {} B, median of the repetitions",
                    kind, c.bytes
                )),
            });
        }
    }
    for e in &r.p2p {
        p.network.paths.push(PathMeasurement {
            kind: "p2p unidirectional".into(),
            link_class: None,
            src: Some(format!("gpu{}", e.src)),
            dst: Some(format!("gpu{}", e.dst)),
            bandwidth: Some(Bandwidth(
                e.bytes as f64 * 8.0 / e.unidirectional.median_secs,
            )),
            latency_secs: Some(e.latency.median_secs),
            provenance: prov(format!(
                "cuMemcpyPeerAsync of {} B (peer access {}), latency of a 4-byte copy",
                e.bytes, e.peer_access
            )),
        });
    }
    let o = FitOptions::default();
    let fits: Vec<FittedRun> = r
        .collectives
        .iter()
        .filter_map(|run| {
            build::fit_run(
                run,
                &format!(
                    "calibrate gpu {}_perf",
                    run.collective.as_deref().unwrap_or("?")
                ),
                &o,
            )
            .ok()
        })
        .collect();
    build::merge_fits(&mut p, &fits);
    // Compute: per dtype, GEMM time = (FLOPs + F½) / peak, fitted to the layer-shape GEMMs
    // when there are any, else to the grid.
    if let Some(dev) = r.devices.first() {
        p.compute = crate::compute::compute_section(
            &r.gemm_timings(),
            largest("d2d").map(|c| c.bytes as f64 / c.time.median_secs),
            &dev.name,
            dev.memory_bytes,
            &prov,
        );
    }
    Ok(p)
}

/// `12.3 TFLOP/s`, `45.6 GFLOP/s`: three significant figures in the largest unit below it.
fn fmt_flops_per_s(v: f64) -> String {
    let (scale, unit) = if v >= 1e12 {
        (1e12, "TFLOP/s")
    } else if v >= 1e9 {
        (1e9, "GFLOP/s")
    } else {
        (1e6, "MFLOP/s")
    };
    format!("{:.1} {unit}", v / scale)
}

/// A profile as text for people.
pub fn describe(p: &Profile) -> String {
    let mut s = String::new();
    let prov = |pr: &Provenance| {
        format!(
            "{}: {}{}",
            pr.source,
            pr.detail,
            pr.date
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )
    };
    s += &format!("profile {} (schema {})\n", p.name, p.schema_version);
    if !p.description.is_empty() {
        s += &format!("  {}\n", p.description);
    }
    s += &format!("  from {}\n", prov(&p.provenance));
    if p.network.factors.is_empty() {
        s += "  link factors: none (links run at the topology's nominal bandwidth and latency)\n";
    }
    for (class, table) in &p.network.factors {
        s += &format!(
            "  link factors for {class} (from {})\n",
            prov(&table.provenance)
        );
        s += "    from size    bandwidth x   latency x\n";
        for r in &table.rows {
            s += &format!(
                "    {:>10}   {:>11.3}   {:>9.3}\n",
                fmt_bytes(r.min_bytes as f64),
                r.bandwidth_factor,
                r.latency_factor
            );
        }
    }
    for (class, e) in &p.network.link_efficiency {
        s += &format!(
            "  link efficiency for {class}: {:.4} of every link, shared by its flows (from {})\n",
            e.value,
            prov(&e.provenance)
        );
    }
    match &p.network.reduce_bandwidth {
        Some(m) => {
            s += &format!(
                "  reduction rate {} (from {})\n",
                fmt_bits_per_s(m.value.bits_per_s()),
                prov(&m.provenance)
            )
        }
        None => s += "  reduction rate: fused into transfers (no extra time)\n",
    }
    for f in &p.network.collective_fits {
        s += &format!(
            "  {} over {} ranks / {} node(s) on {}: alpha {:.2} us [{:.2}, {:.2}], busbw {}, R2 {:.4}, max residual {:.1}%{}\n    (from {})\n",
            f.collective, f.ranks, f.nodes, f.link_class, f.alpha_secs * 1e6, f.alpha_ci95_secs[0] * 1e6, f.alpha_ci95_secs[1] * 1e6,
            sim::units::fmt_gbytes_per_s(f.busbw_bytes_per_s), f.r_squared, f.max_rel_residual * 100.0,
            f.holdout.as_ref().map(|h| format!(", hold-out {} on {} sizes: mean {:.1}% max {:.1}%", h.rule, h.points, h.mean_abs_rel_error * 100.0, h.max_abs_rel_error * 100.0)).unwrap_or_default(),
            prov(&f.provenance)
        );
    }
    if !p.network.paths.is_empty() {
        s += &format!("  {} path measurements:\n", p.network.paths.len());
        for m in p.network.paths.iter().take(12) {
            s += &format!(
                "    {} {}->{}: {}{} (from {})\n",
                m.kind,
                m.src.as_deref().unwrap_or("-"),
                m.dst.as_deref().unwrap_or("-"),
                m.bandwidth
                    .map(|b| fmt_bits_per_s(b.bits_per_s()))
                    .unwrap_or_default(),
                m.latency_secs
                    .map(|l| format!(" {:.2} us", l * 1e6))
                    .unwrap_or_default(),
                prov(&m.provenance)
            );
        }
        if p.network.paths.len() > 12 {
            s += &format!("    ... and {} more\n", p.network.paths.len() - 12);
        }
    }
    if let Some(c) = &p.compute {
        s += &format!("  compute: {}\n", c.device);
        for (dt, v) in &c.peak_flops_per_s {
            s += &format!(
                "    peak {dt}: {} (from {})\n",
                fmt_flops_per_s(v.value),
                prov(&v.provenance)
            );
        }
        s += &format!(
            "    memory bandwidth {} (from {})\n",
            fmt_bits_per_s(c.memory_bandwidth.value.bits_per_s()),
            prov(&c.memory_bandwidth.provenance)
        );
    }
    s
}
