//! `dtsim-testbed`: a real cluster on one Linux machine, built from a dtsim topology file.
//!
//! ```text
//! dtsim-testbed up TOPOLOGY [--set key=value]... [--prefix tb] [--shaper htb|tbf] [--tcp-congestion cubic]
//! dtsim-testbed down [--prefix tb]
//! dtsim-testbed run TOPOLOGY [--set key=value]... [--prefix tb] -- COMMAND [ARGS]...
//! dtsim-testbed plan TOPOLOGY [--set key=value]...
//! ```
//!
//! Hosts are network namespaces (`PREFIX-h<rank>`, address 10.77.x.y on `eth0`), switches are
//! Linux bridges, links are veth pairs capped with `tc` on both ends. `run` builds the testbed,
//! runs COMMAND in the root namespace with `DTSIM_TESTBED_HOSTS` (a TSV file: rank, namespace,
//! address, iface, device), `DTSIM_TESTBED_PREFIX`, `DTSIM_TESTBED_RANKS`, `DTSIM_TESTBED_TOPOLOGY`,
//! `DTSIM_TESTBED_SET` (the --set overrides joined by `;`), `DTSIM_TESTBED_SHAPER`,
//! `DTSIM_TESTBED_SHAPER_BURST` (its token bucket as time at a link's rate, e.g. `2ms`) and
//! `DTSIM_TESTBED_TCP_CONGESTION` set, and tears the
//! testbed down when COMMAND exits, on SIGINT/SIGTERM and on errors. COMMAND runs in its own
//! process group; on a signal that group gets SIGTERM (SIGKILL 3 s later), and processes left in
//! the namespaces are ended the same way before the namespaces are deleted. Needs root and iproute2.

mod plan;
mod system;

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use system::{Shaper, Testbed};

/// How long COMMAND's processes get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

#[derive(Parser)]
#[command(
    name = "dtsim-testbed",
    version,
    about = "Build a dtsim topology as namespaces, bridges and capped veth links"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args)]
struct Build {
    /// A dtsim topology file (every GPU becomes a host namespace, every other device a bridge).
    topology: PathBuf,
    /// Override a topology key, e.g. --set generator.link.bandwidth=100Mbps (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Names of namespaces, bridges and veths start with PREFIX- (1-6 letters/digits).
    #[arg(long, default_value = "tb")]
    prefix: String,
    #[arg(long, value_enum, default_value = "htb")]
    shaper: Shaper,
    /// The hosts' TCP congestion control (`net.ipv4.tcp_congestion_control` in every host
    /// namespace). Linux's default, so that runs do not depend on what this machine's root
    /// namespace was set to (measured here: OpenMPI ring steps ran 10-25% slower under bbr).
    #[arg(long, default_value = "cubic", value_name = "NAME")]
    tcp_congestion: String,
    /// Where the hosts file goes.
    #[arg(long, default_value = system::DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the testbed and leave it up (tear down with `down`).
    Up(Build),
    /// Remove every namespace and link named PREFIX-*.
    Down {
        #[arg(long, default_value = "tb")]
        prefix: String,
        #[arg(long, default_value = system::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Build the testbed, run COMMAND, tear it down (also on Ctrl-C and errors).
    Run {
        #[command(flatten)]
        build: Build,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Print what `up` would build, without building it.
    Plan(Build),
}

fn main() -> ExitCode {
    sim::pipe::end_quietly_on_closed_pipe();
    match dispatch(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn load_plan(b: &Build) -> anyhow::Result<plan::Plan> {
    let mut overrides = toml::Table::new();
    for o in &b.set {
        sim::scenario::apply_override(&mut overrides, o)
            .map_err(|e| anyhow::anyhow!("{}: --set {o}: {e}", b.topology.display()))?;
    }
    let topo = sim::topology::file::load_with_overrides(&b.topology, &overrides)?;
    plan::plan(&topo, &b.prefix, [10, 77])
        .map_err(|e| anyhow::anyhow!("{}: {e}", b.topology.display()))
}

fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    ctrlc::set_handler(move || s.store(true, Ordering::SeqCst))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(stop)
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Cmd::Plan(b) => {
            let p = load_plan(&b)?;
            for h in &p.hosts {
                println!(
                    "host {} {} {}/{} ({})",
                    h.rank, h.namespace, h.address, p.prefix_len, h.device
                );
            }
            for br in &p.bridges {
                println!("bridge {br}");
            }
            for v in &p.veths {
                println!(
                    "veth {} <-> {} {:?} {:.0} bit/s each way",
                    v.names[0], v.names[1], v.ends, v.bits_per_s
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Down { prefix, state_dir } => {
            let n = system::teardown_prefix(&prefix, &state_dir)?;
            println!("removed {n} namespaces and links named {prefix}-*");
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Up(b) => {
            let p = load_plan(&b)?;
            let stop = stop_flag()?;
            let tb = Testbed::up(&p, b.shaper, &b.tcp_congestion, &b.state_dir, &stop)?;
            println!(
                "testbed up: {} hosts, {} bridges, {} links; hosts in {}",
                p.hosts.len(),
                p.bridges.len(),
                p.veths.len(),
                tb.hosts_file.display()
            );
            tb.keep();
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run { build, command } => {
            let p = load_plan(&build)?;
            let stop = stop_flag()?;
            let tb = Testbed::up(
                &p,
                build.shaper,
                &build.tcp_congestion,
                &build.state_dir,
                &stop,
            )?;
            // COMMAND gets its own process group, so that everything it starts in the root
            // namespace can be ended with it (processes inside the namespaces are ended by the
            // teardown). The terminal's Ctrl-C reaches only this process; it is passed on.
            let mut child = Command::new(&command[0])
                .args(&command[1..])
                .env("DTSIM_TESTBED_HOSTS", &tb.hosts_file)
                .env("DTSIM_TESTBED_PREFIX", &p.prefix)
                .env("DTSIM_TESTBED_RANKS", p.hosts.len().to_string())
                .env("DTSIM_TESTBED_TOPOLOGY", &build.topology)
                .env("DTSIM_TESTBED_SET", build.set.join(";"))
                .env(
                    "DTSIM_TESTBED_SHAPER",
                    format!("{:?}", build.shaper).to_lowercase(),
                )
                .env("DTSIM_TESTBED_TCP_CONGESTION", &build.tcp_congestion)
                .env(
                    "DTSIM_TESTBED_SHAPER_BURST",
                    format!("{}ms", plan::BURST_SECS * 1e3),
                )
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting {}", command[0]))?;
            let status = loop {
                if let Some(s) = child.try_wait()? {
                    break Some(s);
                }
                if stop.load(Ordering::SeqCst) {
                    system::kill_process_group(&mut child, GRACE);
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            // Whatever COMMAND left running in the background goes too.
            system::kill_process_group(&mut child, GRACE);
            drop(tb);
            match status {
                None => {
                    eprintln!("interrupted: testbed torn down");
                    Ok(ExitCode::from(130))
                }
                Some(s) if s.success() => Ok(ExitCode::SUCCESS),
                Some(s) => {
                    eprintln!("{} exited with {s}; testbed torn down", command[0]);
                    Ok(ExitCode::from(s.code().unwrap_or(1).clamp(1, 255) as u8))
                }
            }
        }
    }
}
