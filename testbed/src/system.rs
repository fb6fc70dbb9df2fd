//! Builds a [`Plan`] on this machine with `ip` and `tc`, and tears it down again.
//!
//! [`Testbed`] records what it created; dropping it (normal exit, error, or after a signal)
//! removes it in reverse order. [`teardown_prefix`] removes whatever carries a prefix, for
//! `dtsim-testbed down` after `up`, or after a crash.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::plan::{burst_bytes, End, Plan, HOST_IFACE};

/// How links are capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shaper {
    /// Hierarchical token bucket (one class at the link rate); handles GSO packets.
    Htb,
    /// Token bucket filter.
    Tbf,
}

/// Runs `ip`/`tc` style commands, failing with the command line and its stderr.
pub fn sh(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("running {} (is iproute2 installed?)", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Something the testbed created, undone in reverse order.
#[derive(Debug)]
enum Made {
    Namespace(String),
    Link(String),
}

const CC_AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const CC_ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A built testbed; dropping it tears it down unless [`Testbed::keep`] was called.
pub struct Testbed {
    made: Vec<Made>,
    keep: bool,
    /// Whether this value wrote `hosts_file` (and so removes it).
    wrote_hosts: bool,
    pub hosts_file: PathBuf,
}

impl Testbed {
    /// Builds `plan`; stops early (tearing down what exists) when `stop` is raised.
    pub fn up(
        plan: &Plan,
        shaper: Shaper,
        tcp_congestion: &str,
        state_dir: &Path,
        stop: &AtomicBool,
    ) -> anyhow::Result<Self> {
        let hosts_file = state_dir.join(format!("{}.hosts", plan.prefix));
        // Another testbed with this prefix, whatever state folder it used: refuse before
        // touching anything (else `ip link add` fails half-way with "File exists").
        let (mut taken, links) = names_with_prefix(&plan.prefix)?;
        taken.extend(links);
        if !taken.is_empty() {
            bail!(
                "a testbed named {:?} is up ({} exist{}{}): pick another --prefix, or `dtsim-testbed down --prefix {}`",
                plan.prefix,
                taken.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                if taken.len() == 1 { "s" } else { "" },
                if taken.len() > 3 { format!(" and {} more", taken.len() - 3) } else { String::new() },
                plan.prefix
            );
        }
        if hosts_file.exists() {
            bail!(
                "a testbed named {:?} is up ({} exists): pick another --prefix, or `dtsim-testbed down --prefix {}`",
                plan.prefix,
                hosts_file.display(),
                plan.prefix
            );
        }
        let mut tb = Testbed {
            made: Vec::new(),
            keep: false,
            wrote_hosts: false,
            hosts_file,
        };
        let check = |stop: &AtomicBool| {
            if stop.load(Ordering::SeqCst) {
                bail!("interrupted while building the testbed; tore down what was built");
            }
            Ok(())
        };
        for b in &plan.bridges {
            check(stop)?;
            sh(&["ip", "link", "add", b, "type", "bridge"])?;
            tb.made.push(Made::Link(b.clone()));
            // Forward at once: no STP listening/learning delay (the plan is a tree).
            sh(&[
                "ip",
                "link",
                "set",
                b,
                "type",
                "bridge",
                "forward_delay",
                "0",
                "stp_state",
                "0",
            ])?;
            sh(&["ip", "link", "set", b, "up"])?;
        }
        tb.allow_congestion_control(tcp_congestion)?;
        for h in &plan.hosts {
            check(stop)?;
            sh(&["ip", "netns", "add", &h.namespace])?;
            tb.made.push(Made::Namespace(h.namespace.clone()));
            sh(&["ip", "-n", &h.namespace, "link", "set", "lo", "up"])?;
            let setting = format!("net.ipv4.tcp_congestion_control={tcp_congestion}");
            sh(&[
                "ip",
                "netns",
                "exec",
                &h.namespace,
                "sysctl",
                "-q",
                "-w",
                &setting,
            ])?;
        }
        for v in &plan.veths {
            check(stop)?;
            sh(&[
                "ip",
                "link",
                "add",
                &v.names[0],
                "type",
                "veth",
                "peer",
                "name",
                &v.names[1],
            ])?;
            // Deleting either end deletes the pair; record the one that stays in the root
            // namespace (a host end moves into its namespace, where `ip link del` cannot see it,
            // and a namespace a straggler process keeps alive would keep the pair).
            let root_end = v
                .ends
                .iter()
                .position(|e| matches!(e, End::Bridge(_)))
                .unwrap_or(0);
            tb.made.push(Made::Link(v.names[root_end].clone()));
            for (name, end) in v.names.iter().zip(&v.ends) {
                match end {
                    End::Bridge(b) => {
                        sh(&["ip", "link", "set", name, "master", b])?;
                        sh(&["ip", "link", "set", name, "up"])?;
                        shape(None, name, v.bits_per_s, shaper)?;
                    }
                    End::Host(r) => {
                        let h = &plan.hosts[*r as usize];
                        let ns = h.namespace.as_str();
                        sh(&["ip", "link", "set", name, "netns", ns])?;
                        sh(&["ip", "-n", ns, "link", "set", name, "name", HOST_IFACE])?;
                        let addr = format!("{}/{}", h.address, plan.prefix_len);
                        sh(&["ip", "-n", ns, "addr", "add", &addr, "dev", HOST_IFACE])?;
                        sh(&["ip", "-n", ns, "link", "set", HOST_IFACE, "up"])?;
                        shape(Some(ns), HOST_IFACE, v.bits_per_s, shaper)?;
                    }
                }
            }
        }
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        tb.wrote_hosts = true;
        // `down` finds the hosts file through this locator in the default folder, whichever
        // --state-dir `up` was given.
        let locator = locator_file(&plan.prefix);
        if let Some(dir) = locator.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&locator, tb.hosts_file.display().to_string());
        let mut f = std::fs::File::create(&tb.hosts_file)
            .with_context(|| format!("writing {}", tb.hosts_file.display()))?;
        writeln!(f, "rank\tnamespace\taddress\tiface\tdevice")?;
        for h in &plan.hosts {
            writeln!(
                f,
                "{}\t{}\t{}\t{}\t{}",
                h.rank, h.namespace, h.address, HOST_IFACE, h.device
            )?;
        }
        Ok(tb)
    }

    /// Lets the host namespaces use `name` as their default TCP congestion control: Linux
    /// lets a namespace other than the root pick only an algorithm the root namespace lists in
    /// `tcp_allowed_congestion_control`, so `name` is added there when it is available but not
    /// listed. It stays listed: taking it out at teardown would fail another testbed being
    /// built at the same time, and listing an available algorithm only lets unprivileged
    /// programs pick it for their own sockets.
    fn allow_congestion_control(&self, name: &str) -> anyhow::Result<()> {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .with_context(|| format!("reading {path}"))
                .map(|s| s.trim().to_string())
        };
        let available = read(CC_AVAILABLE)?;
        if !available.split_whitespace().any(|a| a == name) {
            bail!(
                "--tcp-congestion {name}: this kernel offers {available} ({CC_AVAILABLE}); \
                 load the module (e.g. modprobe tcp_{name}) or pick one of those"
            );
        }
        let allowed = read(CC_ALLOWED)?;
        if !allowed.split_whitespace().any(|a| a == name) {
            std::fs::write(CC_ALLOWED, format!("{allowed} {name}"))
                .with_context(|| format!("adding {name} to {CC_ALLOWED}"))?;
        }
        Ok(())
    }

    /// Leaves the testbed up when this value is dropped (`dtsim-testbed up`).
    pub fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for m in self.made.iter().rev() {
            let r = match m {
                Made::Namespace(ns) => {
                    kill_namespace_processes(ns);
                    sh(&["ip", "netns", "del", ns])
                }
                Made::Link(l) => sh(&["ip", "link", "del", l]),
            };
            // A veth vanishes with its namespace peer; anything else is worth a warning.
            if let Err(e) = r {
                if !e.to_string().contains("Cannot find device") {
                    eprintln!("teardown: {e:#}");
                }
            }
        }
        if self.wrote_hosts {
            let _ = std::fs::remove_file(&self.hosts_file);
            if let Some(prefix) = self
                .hosts_file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
            {
                let _ = std::fs::remove_file(locator_file(&prefix));
            }
        }
    }
}

/// Where `up` notes the hosts file of testbed `prefix` (in the default state folder).
fn locator_file(prefix: &str) -> PathBuf {
    Path::new(DEFAULT_STATE_DIR).join(format!("{prefix}.where"))
}

/// The default `--state-dir`.
pub const DEFAULT_STATE_DIR: &str = "/run/dtsim-testbed";

/// Namespaces, and links, whose name starts with `prefix-`.
fn names_with_prefix(prefix: &str) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let tag = format!("{prefix}-");
    let mut namespaces = Vec::new();
    for line in sh(&["ip", "netns", "list"])?.lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        if ns.starts_with(&tag) {
            namespaces.push(ns.to_string());
        }
    }
    let mut links = Vec::new();
    for line in sh(&["ip", "-o", "link", "show"])?.lines() {
        // "12: tb-0b@if11: <...>" or "3: tb-b4: <...>"
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or("");
        if name.starts_with(&tag) {
            links.push(name.to_string());
        }
    }
    Ok((namespaces, links))
}

/// Caps egress of `dev` (in namespace `ns`, or the root namespace) at `bits_per_s`.
fn shape(ns: Option<&str>, dev: &str, bits_per_s: f64, shaper: Shaper) -> anyhow::Result<()> {
    let rate = format!("{}bit", bits_per_s.round() as u64);
    let burst = format!("{}b", burst_bytes(bits_per_s));
    let mut base: Vec<&str> = vec!["tc"];
    if let Some(ns) = ns {
        base.extend(["-n", ns]);
    }
    let run = |rest: &[&str]| {
        let mut a = base.clone();
        a.extend_from_slice(rest);
        sh(&a)
    };
    match shaper {
        Shaper::Tbf => {
            run(&[
                "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst,
                "latency", "100ms",
            ])?;
        }
        Shaper::Htb => {
            run(&[
                "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10",
            ])?;
            run(&[
                "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate",
                &rate, "ceil", &rate, "burst", &burst, "cburst", &burst,
            ])?;
        }
    }
    Ok(())
}

/// Ends the processes still running in namespace `ns` (started on the testbed): SIGTERM, then
/// SIGKILL for those still there after a grace period.
fn kill_namespace_processes(ns: &str) {
    let pids = || -> Vec<String> {
        sh(&["ip", "netns", "pids", ns])
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    for (signal, grace) in [
        ("-TERM", Duration::from_secs(2)),
        ("-KILL", Duration::from_secs(2)),
    ] {
        let left = pids();
        if left.is_empty() {
            return;
        }
        let _ = Command::new("kill")
            .arg(signal)
            .args(&left)
            .stderr(std::process::Stdio::null())
            .status();
        let t = Instant::now();
        while t.elapsed() < grace && !pids().is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Ends every process of the process group `leader` leads (COMMAND and what it started in the
/// root namespace): SIGTERM, then SIGKILL after `grace`; reaps `leader`. Returns as soon as the
/// group is empty.
pub fn kill_process_group(leader: &mut std::process::Child, grace: Duration) {
    let group = format!("-{}", leader.id());
    let send = |signal: &str| {
        Command::new("kill")
            .args([signal, "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !send("-TERM") {
        return; // no process left in the group
    }
    let t = Instant::now();
    while t.elapsed() < grace {
        // A leader that exited stays a zombie (and its group alive) until reaped.
        let _ = leader.try_wait();
        if !send("-0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    send("-KILL");
    let _ = leader.wait();
}

/// Removes every namespace and link whose name starts with `prefix-` (`dtsim-testbed down`).
/// Returns how many were removed.
pub fn teardown_prefix(prefix: &str, state_dir: &Path) -> anyhow::Result<usize> {
    let (namespaces, _) = names_with_prefix(prefix)?;
    let mut removed = 0;
    for ns in &namespaces {
        kill_namespace_processes(ns);
        sh(&["ip", "netns", "del", ns])?;
        removed += 1;
    }
    // Links listed after the namespaces are gone: a veth goes with its namespace peer.
    let (_, links) = names_with_prefix(prefix)?;
    for name in &links {
        match sh(&["ip", "link", "del", name]) {
            Ok(_) => removed += 1,
            Err(e) if e.to_string().contains("Cannot find device") => {}
            Err(e) => return Err(e),
        }
    }
    let _ = std::fs::remove_file(state_dir.join(format!("{prefix}.hosts")));
    // The hosts file of an `up` with another --state-dir, found through its locator.
    let locator = locator_file(prefix);
    if let Ok(hosts) = std::fs::read_to_string(&locator) {
        let _ = std::fs::remove_file(hosts.trim());
    }
    let _ = std::fs::remove_file(locator);
    Ok(removed)
}
