"""Shared helpers for testbed workloads: the hosts file, launching one process per namespace,
timing, and appending dataset rows with provenance.

Runs with Debian's /usr/bin/python3 (python3-torch, python3-mpi4py), as root, inside
`dtsim-testbed run`, which sets DTSIM_TESTBED_HOSTS / _PREFIX / _RANKS / _TOPOLOGY / _SET.
"""
import csv
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def rel(path):
    """`path` relative to the repository root when inside it (as datasets name files), else absolute."""
    r = os.path.relpath(os.path.abspath(path), ROOT)
    return os.path.abspath(path) if r.startswith("..") else r


def calibrate_bin():
    """The `calibrate` binary: $DTSIM_CALIBRATE_BIN, else the workspace's debug build."""
    b = os.environ.get("DTSIM_CALIBRATE_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "debug", "calibrate")
    if not os.path.exists(b):
        sys.exit(f"{b}: no calibrate binary (cargo build -p calibrate, or set DTSIM_CALIBRATE_BIN)")
    return b


def connect(addr, port, tries=100):
    """A TCP connection to addr:port with TCP_NODELAY, retried every 0.1 s while the peer's
    listener comes up (its namespace's process may start after ours)."""
    import socket
    for _ in range(tries):
        try:
            s = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise RuntimeError(f"cannot reach {addr}:{port}")
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def hosts():
    """[(rank, namespace, address, iface, device)] from the testbed's hosts file."""
    path = os.environ.get("DTSIM_TESTBED_HOSTS")
    if not path:
        sys.exit("DTSIM_TESTBED_HOSTS is not set: run under `dtsim-testbed run TOPOLOGY -- ...`")
    rows = []
    with open(path) as f:
        for line in f.read().splitlines()[1:]:
            r, ns, addr, iface, dev = line.split("\t")
            rows.append((int(r), ns, addr, iface, dev))
    return rows


def launch(script, args, n, timeout=600, port=29500, reporter=0):
    """Runs `script args` once per rank 0..n-1, each in its host's namespace with the torch
    rendezvous variables set; returns the JSON object rank `reporter` prints last."""
    hs = hosts()[:n]
    master = hs[0][2]
    procs = []
    for rank, ns, addr, iface, _ in hs:
        env = dict(os.environ, MASTER_ADDR=master, MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(n), GLOO_SOCKET_IFNAME=iface, OMP_NUM_THREADS="1",
                   PYTHONUNBUFFERED="1")
        cmd = ["ip", "netns", "exec", ns, PY, os.path.join(HERE, script)] + list(args)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    outs = []
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError(f"{script} {args}: timed out after {timeout} s")
        outs.append(out)
        if p.returncode != 0:
            for q in procs:
                q.kill()
            raise RuntimeError(f"{script} {args}: a rank exited with {p.returncode}")
    lines = [l for l in outs[reporter].splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def topology_stem():
    """The running testbed topology's file stem (star4_200mbit), as calibration logs name it."""
    path = os.environ.get("DTSIM_TESTBED_TOPOLOGY", "testbed")
    return os.path.splitext(os.path.basename(path))[0]


# /proc/stat's first line: user nice system idle iowait irq softirq steal. Busy is ours: not
# idle, not waiting for I/O, not the hypervisor's (steal).
CPU_KINDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
BUSY_KINDS = [0, 1, 2, 5, 6]


def cpu_ticks():
    """The machine's CPU time so far per kind of CPU_KINDS, in clock ticks."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def busy_core_secs():
    """(the machine's busy core-seconds so far, CLOCK_MONOTONIC now)."""
    ticks = cpu_ticks()
    busy = sum(ticks[i] for i in BUSY_KINDS) / os.sysconf("SC_CLK_TCK")
    return busy, time.clock_gettime(time.CLOCK_MONOTONIC)


class CpuSampler:
    """Samples the machine's /proc/stat every `period` seconds in a thread (CLOCK_MONOTONIC
    stamps, the clock the ranks mark calls with), while in a `with` block; `busy(t0, t1)`
    gives the cores busy between two instants, by kind."""
    def __init__(self, period=0.02):
        import threading
        self.period, self.samples, self.stop = period, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            self.samples.append((time.clock_gettime(time.CLOCK_MONOTONIC), cpu_ticks()))
            self.stop.wait(self.period)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def busy(self, t0, t1):
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2:
            return {"busy_cores": float("nan"), "samples": len(inside)}
        (a_t, a), (b_t, b) = inside[0], inside[-1]
        d = [y - x for x, y in zip(a, b)]
        cores = sum(d) / (os.sysconf("SC_CLK_TCK") * (b_t - a_t))
        out = {k: v / sum(d) * cores for k, v in zip(CPU_KINDS, d) if k != "idle"}
        out["busy_cores"] = cores * sum(d[i] for i in BUSY_KINDS) / sum(d)
        out["samples"] = len(inside)
        return out


def timed(fn, repeats, warmup, barrier, marks=None):
    """Per-iteration wall seconds of fn() (after a barrier each), warmup iterations dropped.
    With a list `marks`, also appends each iteration's (start, end) on CLOCK_MONOTONIC (one
    clock across the namespaces), warmup included: the idle gaps between calls."""
    ts = []
    for i in range(warmup + repeats):
        barrier()
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
        if marks is not None:
            end = time.clock_gettime(time.CLOCK_MONOTONIC)
            marks.append((end - ts[-1], end))
    return ts[warmup:]


def versions():
    v = {"python": platform.python_version(), "kernel": platform.release()}
    try:
        import torch
        v["torch"] = torch.__version__
    except ImportError:
        v["torch"] = "not installed"
    try:
        import mpi4py
        v["mpi4py"] = mpi4py.__version__
    except ImportError:
        v["mpi4py"] = "not installed"
    for name, cmd in [("openmpi", ["mpirun", "--version"]), ("iproute2", ["ip", "-V"]),
                      ("iperf3", ["iperf3", "--version"])]:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()
            v[name] = out[0] if out else "unknown"
        except OSError:
            v[name] = "not installed"
    return v


COLUMNS = ["run_id", "date_utc", "kind", "topology", "topology_set", "ranks", "library", "method",
           "op", "bytes", "model", "batch_per_gpu", "bucket_bytes", "sim_set", "profile",
           "repeats", "measured_secs", "measured_min_secs", "measured_max_secs",
           "launch_medians_secs", "compute_secs", "comm_secs", "load_avg_1m_start",
           "load_avg_1m_end", "cpus", "shaper", "tcp_congestion", "versions", "command", "source"]


def provenance():
    return {
        "topology": os.environ.get("DTSIM_TESTBED_TOPOLOGY", ""),
        "topology_set": os.environ.get("DTSIM_TESTBED_SET", ""),
        "shaper": os.environ.get("DTSIM_TESTBED_SHAPER", ""),
        # The hosts' TCP congestion control (dtsim-testbed --tcp-congestion; cubic by default).
        "tcp_congestion": os.environ.get("DTSIM_TESTBED_TCP_CONGESTION", ""),
        "cpus": os.cpu_count(),
        "versions": json.dumps(versions(), sort_keys=True),
        "source": f"dtsim testbed on {platform.node()} (namespaces + bridges + tc), this machine",
    }


def append_rows(path, rows):
    """Appends rows (dicts over COLUMNS) to the CSV at path, writing the header if new."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != COLUMNS:
            sys.exit(f"{path}: its header lists other columns than this suite writes "
                     f"({', '.join(c for c in COLUMNS if c not in header) or 'order differs'}); "
                     "move it away to record a new dataset")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="raise")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})


def load1():
    return os.getloadavg()[0]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(ts):
    return statistics.median(ts), min(ts), max(ts)


def launch_medians(per_launch):
    """A row's `launch_medians_secs`: each launch's median, `;`-separated (empty for one)."""
    if len(per_launch) < 2:
        return ""
    return ";".join(f"{statistics.median(ts):.9g}" for ts in per_launch)


def quartiles(xs):
    """[first quartile, median, third quartile] of xs (elements of the sorted list)."""
    xs = sorted(xs)
    return [xs[len(xs) // 4], xs[len(xs) // 2], xs[3 * len(xs) // 4]]
