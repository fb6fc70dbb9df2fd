//! The `calibrate` command line: argument parsing, exit codes and the dispatch of each
//! subcommand. The binary's `main` only calls [`main`]. The `import` subcommands live in the
//! private module `import`, `calibrate gpu` in `measure_gpu`, the readable profile of `calibrate
//! show` in `describe`.

mod describe;
mod import;
mod measure_gpu;

pub use describe::describe;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sim::profile::{PathMeasurement, Profile, Provenance};
use sim::topology::LinkClass;
use sim::units::{fmt_bits_per_s, fmt_bytes, Bandwidth};

use crate::build::{self, FitOptions, FittedRun};
use crate::fit::Holdout;
use crate::gpu;
use crate::import::{
    cpu_costs, eager, fanout, gpu_measurements, host_costs, iperf3, kineto, layer_times,
    nccl_tests, p2p, packet_wait, shaper, shaper_packet, torch_device, validation_csv, wake_ups,
};

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

/// What a link-by-link testbed measurement (fanout, shaper, packet wait) is imported as: the
/// link class it measured, where, and the profile it goes into.
#[derive(clap::Args, Clone)]
struct LinkMeasurementArgs {
    #[arg(long, default_value = "ethernet", value_parser = parse_link_class)]
    link_class: LinkClass,
    /// Where it was measured, kept in the provenance (e.g. "the dtsim testbed
    /// (testbed/topologies/star4_200mbit.toml)").
    #[arg(long)]
    measured_on: Option<String>,
    #[command(flatten)]
    out: OutArgs,
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
        /// Also fit one channel's rate per ring/tree protocol (LL, LL128, Simple) in place of
        /// the link's efficiency: for tables whose protocols reach different shares of a link.
        #[arg(long)]
        ring_channel_rates: bool,
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
        /// The rules file of the tuner plugin the runs ran under (NCCL's example plugin's
        /// NCCL_TUNER_CONFIG_FILE), with --topology: every row is replayed as it steered NCCL.
        #[arg(long, requires = "topology")]
        tuner_config: Option<PathBuf>,
        /// The runs had NCCL_COLLNET_ENABLE=1 on switches that reduce in the network (SHARP;
        /// the topology file says which, `in_network_reduction`), with --topology.
        #[arg(long, requires = "topology")]
        collnet: bool,
        /// Date to record in the provenance of NCCL-model fits (YYYY-MM-DD; default: today).
        #[arg(long, requires = "topology")]
        date: Option<String>,
        /// With --topology: also fit one channel's rate per ring/tree protocol in place of
        /// the link's efficiency (as `fit-nccl --ring-channel-rates`).
        #[arg(long, requires = "topology")]
        ring_channel_rates: bool,
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
    /// The compute section of a profile `calibrate gpu` wrote on one node, into another profile
    /// (a cluster's, keeping its network section): every rate the source measured replaces the
    /// destination's; the peaks of number formats the source did not measure (fp8, say) stay,
    /// with their own provenance.
    Compute {
        /// The measured profile (`calibrate gpu --out`).
        source: PathBuf,
        /// The profile to write it into (created when missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// The measurements `calibrate gpu --logs DIR` kept (gpu_measurements.json, gzip allowed):
    /// the compute section rebuilt from them, into a profile as `import compute` does (every
    /// layer GEMM's time included, which the simulator times layer products from). Several
    /// runs on one device (other models' layers measured later) join: the GEMMs of all of them,
    /// the device and the copy rate of the first.
    GpuMeasurements {
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// The profile to write it into (created when missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// What eager PyTorch steps cost (torch_bench.py's device.json): the host's cost per layer
    /// kind (--host-costs) into an existing profile's compute.eager_host, the GPU's rate of
    /// memory-bound layers (--kernel-rates) into compute.eager_kernels, one number format a
    /// file: what `execution = "eager"` plays.
    Eager {
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// The profile to add them to (it needs a compute section).
        #[arg(long)]
        out: PathBuf,
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
    /// testbed/workloads/fanout.py logs (one host sending to two at once): the FIFO head
    /// bytes of the sender's link class (network.fifo_head_bytes): how far ahead the
    /// first-posted of two sends gets. Several logs of one link are pooled.
    Fanout {
        #[arg(required = true, num_args = 1..)]
        file: Vec<PathBuf>,
        #[command(flatten)]
        at: LinkMeasurementArgs,
    },
    /// `suite.py shaper_gap` logs (one send at a time after an idle gap): the depth of the
    /// token bucket of the link class's shaper (network.shaper_burst, as time at the rate the
    /// log measured), in place of the shaper's setting.
    Shaper {
        file: PathBuf,
        #[command(flatten)]
        at: LinkMeasurementArgs,
    },
    /// `suite.py capture_mpi` / `capture_gloo` logs (tcpdump at each host's egress): the
    /// largest packet TCP handed the shaper (network.shaper_packet): a message no larger
    /// passes a shaper out of debt whole and puts it in debt. Several captures are pooled.
    ShaperPacket {
        #[arg(required = true, num_args = 1..)]
        file: Vec<PathBuf>,
        #[command(flatten)]
        at: LinkMeasurementArgs,
    },
    /// `suite.py packet_wait` logs (testbed/workloads/packet_wait.py): the mean time a small
    /// message waits at a shaped link of the class for the packet another connection has in
    /// service there (network.shaper_packet_wait). Several logs of one link are pooled.
    PacketWait {
        #[arg(required = true, num_args = 1..)]
        file: Vec<PathBuf>,
        #[command(flatten)]
        at: LinkMeasurementArgs,
    },
    /// `suite.py packet_wait` logs whose pinging host streams (`--ping 2:0 --through 2:1
    /// --beside 2:3`): the mean time a host's small message waits behind its own stream; at
    /// the host link's payload rate, the bytes TCP keeps queued at the host's egress
    /// (network.fifo_head_bytes, which `import fanout` fits from two sends). Several logs of
    /// one link are pooled.
    OwnEgress {
        #[arg(required = true, num_args = 1..)]
        file: Vec<PathBuf>,
        /// Nominal rate of the host's link (e.g. 200Mbps, as in the topology file); the
        /// profile's link efficiency for the class (`import iperf3`) makes it the payload rate.
        #[arg(long)]
        nominal_bw: String,
        #[command(flatten)]
        at: LinkMeasurementArgs,
    },
    /// `suite.py cpu_costs` logs (testbed/workloads/cpu_costs.py): the cores all hosts share
    /// and one gloo message's core time on them (network.host_cpu), where every host runs on
    /// one machine (the testbed).
    CpuCosts {
        file: PathBuf,
        /// Cores the hosts share (default: the log's `cpus`, the machine's).
        #[arg(long)]
        shared_cores: Option<f64>,
        /// Where it was measured, kept in the provenance (e.g. "this testbed's machine").
        #[arg(long)]
        measured_on: Option<String>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// `suite.py cpu_costs --collective` logs (testbed/workloads/cpu_costs.py): a gloo
    /// message's core time inside gloo's own collectives (network.host_cpu.in_collectives),
    /// fitted over every row of every log, into a profile whose host_cpu `cpu-costs` wrote;
    /// without it the stream's costs stand for every message.
    CollectiveCpuCosts {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where it was measured, kept in the provenance (e.g. "this testbed's machine").
        #[arg(long)]
        measured_on: Option<String>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// `suite.py wakeup_load` logs (testbed/workloads/wakeup_load.py): how much later than
    /// usual a thread a message wakes runs, where every host runs on one machine's cores
    /// (network.host_wake_up): each log's calls without load over their median, pooled.
    WakeUps {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where it was measured, kept in the provenance (e.g. "this testbed's machine").
        #[arg(long)]
        measured_on: Option<String>,
        #[command(flatten)]
        out: OutArgs,
    },
    /// testbed/workloads/host_costs.py logs: the host's staging-copy and reduction rates
    /// (network.host_copy_bandwidth, with the copies timed apart also
    /// network.host_copy_out_bandwidth; network.reduce_bandwidth), what gloo spends on the CPU
    /// around its transfers.
    HostCosts {
        file: PathBuf,
        /// Where it was measured, kept in the provenance (e.g. "this testbed's machine").
        #[arg(long)]
        measured_on: Option<String>,
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
        /// The token bucket of the shaper on the measured links, as time at their rate (tc's
        /// `burst`; the dtsim testbed sets 2ms): network.shaper_burst for the class, a
        /// setting of the shaper, not a fit.
        #[arg(long)]
        shaper_burst: Option<String>,
        /// Where --shaper-burst comes from, kept in the provenance.
        #[arg(long, default_value = "")]
        shaper_burst_source: String,
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
            ring_channel_rates,
        } => {
            let summary = crate::fit_nccl::run(
                &tables,
                &systems,
                hold_out_every,
                &out,
                &name,
                date.or_else(|| Some(build::today())),
                sim::scenario::fit_nccl::FitChoices { ring_channel_rates },
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
        Command::Import(cmd) => import::run(cmd),
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
        } => measure_gpu::command(
            out,
            logs,
            &min_bytes,
            &max_bytes,
            warmup,
            reps,
            &skip,
            &measure_gpu::LayerArgs {
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
