//! `dtsim-testbed run` leaves nothing behind: not after SIGINT or SIGTERM while COMMAND runs,
//! not after a signal while the testbed is still being built, and not when COMMAND fails or
//! cannot be started. The hosts run the TCP congestion control asked for. Needs root and `ip
//! netns`; skipped with a notice otherwise.
//!
//! Each test uses its own `--prefix` and state directory, so the tests can run in parallel with
//! each other and with a testbed someone else has up.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dtsim-testbed");

fn topology() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/star4_200mbit.toml")
}

/// Why these tests cannot run here, if they cannot.
fn unsupported() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`ip netns list` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("no `ip` command ({e})")),
    }
}

macro_rules! require_root_and_netns {
    () => {
        if let Some(why) = unsupported() {
            eprintln!("skipped: needs root and `ip netns` ({why})");
            return;
        }
    };
}

/// Namespaces and links in the root namespace whose names start with `prefix-`.
fn leftovers(prefix: &str) -> Vec<String> {
    let tag = format!("{prefix}-");
    let run = |args: &[&str]| {
        let o = Command::new("ip").args(args).output().expect("running ip");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut out: Vec<String> = run(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&tag))
        .map(|n| format!("netns {n}"))
        .collect();
    for line in run(&["-o", "link", "show"]).lines() {
        // "12: tb-0b@if11: <...>"
        if let Some(name) = line.split(": ").nth(1) {
            let name = name.split('@').next().unwrap_or("");
            if name.starts_with(&tag) {
                out.push(format!("link {name}"));
            }
        }
    }
    out
}

/// A fresh state directory (for the hosts file) and a prefix unique to this test run.
fn scratch(tag: &str) -> (String, PathBuf) {
    let id = std::process::id() % 10_000;
    let prefix = format!("{tag}{id}");
    let dir = std::env::temp_dir().join(format!("dtsim-testbed-test-{prefix}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (prefix, dir)
}

fn start(prefix: &str, state: &Path, hosts: u32, command: &[&str]) -> Child {
    start_with(prefix, state, hosts, &[], command)
}

fn start_with(prefix: &str, state: &Path, hosts: u32, options: &[&str], command: &[&str]) -> Child {
    Command::new(BIN)
        .arg("run")
        .arg(topology())
        .args(["--set", &format!("generator.n={hosts}")])
        .args(options)
        .args(["--prefix", prefix])
        .arg("--state-dir")
        .arg(state)
        .arg("--")
        .args(command)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting dtsim-testbed")
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dtsim-testbed did not exit within {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {}", child.id());
}

fn pid_alive(pid: u32) -> bool {
    // A zombie still has /proc/PID; it is not running.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn stderr_of(child: &mut Child) -> String {
    use std::io::Read as _;
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

fn assert_clean(prefix: &str, state: &Path) {
    let left = leftovers(prefix);
    assert!(left.is_empty(), "left behind: {left:?}");
    let hosts = state.join(format!("{prefix}.hosts"));
    assert!(!hosts.exists(), "{} still exists", hosts.display());
    let _ = std::fs::remove_dir_all(state);
}

/// Starts `run` with a command that records its pids (one in the root namespace, one inside
/// host 0's namespace that ignores SIGTERM and SIGINT) and sleeps; sends `sig` once both run.
fn interrupt_while_command_runs(tag: &str, sig: &str) {
    let (prefix, state) = scratch(tag);
    let pids = state.join("pids");
    let script = format!(
        "sleep 30 & echo $! >> {p}; ip netns exec {prefix}-h0 sh -c 'trap \"\" TERM INT; exec sleep 30' & echo $! >> {p}; wait",
        p = pids.display()
    );
    let mut child = start(&prefix, &state, 3, &["sh", "-c", &script]);
    let hosts = state.join(format!("{prefix}.hosts"));
    wait_until("the testbed is up", Duration::from_secs(60), || {
        hosts.exists()
            && std::fs::read_to_string(&pids).is_ok_and(|s| s.lines().count() == 2)
            && leftovers(&prefix).iter().any(|l| l.starts_with("netns"))
    });
    let sleepers: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, sig);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    // Before reading stderr: a surviving grandchild would hold the pipe open.
    for pid in sleepers {
        wait_until(
            &format!("the command's process {pid} ends"),
            Duration::from_secs(5),
            || !pid_alive(pid),
        );
    }
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(130), "exit status; stderr: {err}");
    assert!(err.contains("interrupted"), "stderr: {err}");
    assert_clean(&prefix, &state);
}

#[test]
fn sigint_while_the_command_runs_tears_everything_down() {
    require_root_and_netns!();
    interrupt_while_command_runs("si", "-INT");
}

#[test]
fn sigterm_while_the_command_runs_tears_everything_down() {
    require_root_and_netns!();
    interrupt_while_command_runs("st", "-TERM");
}

#[test]
fn sigint_while_the_testbed_is_being_built_tears_down_what_exists() {
    require_root_and_netns!();
    let (prefix, state) = scratch("sb");
    // 16 hosts take long enough to build that the signal lands half-way.
    let mut child = start(&prefix, &state, 16, &["sleep", "30"]);
    wait_until(
        "the first namespace exists",
        Duration::from_secs(60),
        || leftovers(&prefix).iter().any(|l| l.starts_with("netns")),
    );
    signal(&child, "-INT");
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let err = stderr_of(&mut child);
    assert!(
        !status.success(),
        "an interrupted build fails; stderr: {err}"
    );
    assert_clean(&prefix, &state);
}

#[test]
fn a_failing_command_tears_everything_down_and_passes_its_status_on() {
    require_root_and_netns!();
    let (prefix, state) = scratch("fc");
    let script = format!("ip netns exec {prefix}-h1 true && exit 3");
    let mut child = start(&prefix, &state, 2, &["sh", "-c", &script]);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let err = stderr_of(&mut child);
    assert_eq!(
        status.code(),
        Some(3),
        "the command saw its namespace and failed with 3; stderr: {err}"
    );
    assert_clean(&prefix, &state);
}

#[test]
fn a_command_that_cannot_start_tears_everything_down() {
    require_root_and_netns!();
    let (prefix, state) = scratch("ns");
    let mut child = start(&prefix, &state, 2, &["/nonexistent/dtsim-no-such-command"]);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("dtsim-no-such-command"), "stderr: {err}");
    assert_clean(&prefix, &state);
}

const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Runs a 2-host testbed with `options`; returns what host 1's namespace reports as its TCP
/// congestion control, and the exit status and stderr.
fn congestion_seen_by_host1(tag: &str, options: &[&str]) -> (String, ExitStatus, String) {
    let (prefix, state) = scratch(tag);
    let seen = state.join("seen");
    let script = format!(
        "ip netns exec {prefix}-h1 sysctl -n net.ipv4.tcp_congestion_control > {}",
        seen.display()
    );
    let mut child = start_with(&prefix, &state, 2, options, &["sh", "-c", &script]);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let err = stderr_of(&mut child);
    let got = std::fs::read_to_string(&seen).unwrap_or_default();
    assert_clean(&prefix, &state);
    (got.trim().to_string(), status, err)
}

#[test]
fn the_hosts_run_the_congestion_control_asked_for() {
    require_root_and_netns!();
    // Linux's default unless told otherwise, whatever the root namespace runs.
    let (got, status, err) = congestion_seen_by_host1("cc", &[]);
    assert!(status.success(), "stderr: {err}");
    assert_eq!(got, "cubic");
    let (got, status, err) = congestion_seen_by_host1("cr", &["--tcp-congestion", "reno"]);
    assert!(status.success(), "stderr: {err}");
    assert_eq!(got, "reno");
    // Non-root namespaces may only pick what the root lists: cubic is listed now.
    let allowed = std::fs::read_to_string(ALLOWED).unwrap();
    assert!(
        allowed.split_whitespace().any(|a| a == "cubic"),
        "{ALLOWED}: {allowed}"
    );
}

#[test]
fn a_congestion_control_the_kernel_lacks_is_an_error_that_builds_nothing() {
    require_root_and_netns!();
    let (got, status, err) = congestion_seen_by_host1("cx", &["--tcp-congestion", "nosuch"]);
    assert_eq!(status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("--tcp-congestion nosuch") && err.contains("this kernel offers"),
        "stderr: {err}"
    );
    assert_eq!(got, "");
}
