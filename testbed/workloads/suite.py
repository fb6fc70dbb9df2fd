"""Runs testbed experiments and appends one dataset row per configuration.

  suite.py collectives --out data/runs/X.csv [--methods allreduce,ps,...] [--launches K] [--bytes ...]
  suite.py mpi --out data/runs/X.csv [--op allreduce|bcast|allgather|reduce_scatter|barrier]
                                       [--algorithms 0,1,4,6]
                                       [--launches K] [--bytes ...]
  suite.py mpi_p2p [--ranks N] [--skew-ms MS] [--copy-first B] [--fresh-recv] [--bind free|share|apart] [--p2p-modes M,..]
                                       [--out ...]  (Send vs
                                       Sendrecv vs ring vs pairwise exchanges, OpenMPI)
  suite.py gloo_p2p --pairs 0:2,1:3 --name NAME  (gloo isend/irecv exchanges, one pair's socket)
  suite.py call_gaps --methods allreduce,broadcast  (each rank's idle time between timed calls)
  suite.py capture --methods allreduce --bytes 262144 --name NAME  (every host's egress, per link)
  suite.py capture_mpi --op allgather --algorithms 4 --bytes 1048560 --name NAME  (OpenMPI's
                                       rendezvous messages, each sent and arrived, every host and
                                       switch port; --gloo-method M: gloo's, its notifications;
                                       --tcp-info-ms MS: every connection's TCP state too)
  suite.py shaper_gap --name star  (one send after an idle gap, with or without a small message
                                       first: the shaper's token bucket, what spends it)
  suite.py mpi_call_gaps --bytes 65536 262144 1048576  (OpenMPI: when each rank ends one timed
                                       call and starts the next)
  suite.py cpu_costs --repeats 3 --bytes 16384 65536 262144 1048576  (machine CPU per gloo message)
  suite.py wakeup_load --repeats 3000  (a small gloo exchange's time as other hosts load the cores)
  suite.py packet_wait --pings 400 [--ping 0:1 --through 2:1 --beside 2:3]  (a ping's wait at a
                                       shaped link another connection streams through; with
                                       --ping 2:0, behind the pinging host's own stream)
  suite.py training --out data/runs/X.csv --profile data/profiles/testbed_X.json
  suite.py link --profile data/profiles/testbed_X.json   (iperf3 + TCP ping-pong -> calibrate)
  suite.py incast --profile data/profiles/testbed_X.json (every host -> host 1 at once, iperf3)
  suite.py pairs --pairs 0:2,1:3 --name NAME --profile ...  (iperf3 between host pairs at once)
  suite.py two_way --pairs 0:4,1:5,3:1,4:2 --name NAME --gaps 0.3,0.02  (bulk TCP transfers
                                       between host pairs at once, in rounds an idle gap apart)
  suite.py trace [--ranks 2] [--out data/traces/testbed_ddp_cnn]  (a traced DDP step: ET + Kineto)

Run under `dtsim-testbed run TOPOLOGY [--set ...] -- /usr/bin/python3 testbed/workloads/suite.py ...`.
Each row carries the topology file and overrides, ranks, library, method, sizes, the dtsim
`--set` lines that describe the same configuration (sim_set), the measured median/min/max,
the machine load, software versions and the command, so `dtsim validate` can replay it.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import tb

MIB = 1 << 20
# What dtsim replays for each method: gloo's own collectives with library = "gloo"; the
# all-reduces this suite writes itself over gloo's isend/irecv (multiring, hierarchical) with
# library = "gloo" and their orders or algorithm (sim::library::gloo::p2p); the parameter
# server with the ideal template that does the same.
SIM_SET = {
    "allreduce": "collective.library=gloo",
    "broadcast": "collective.library=gloo",
    "allgather": "collective.library=gloo",
    "reduce": "collective.library=gloo",
    "ps": "collective.library=ideal;collective.algorithm=parameter_server;collective.servers=1;"
          "collective.colocated=true",
    "hierarchical": "collective.library=gloo;collective.algorithm=hierarchical",
    "barrier": "collective.library=gloo",
}
OPS = {"broadcast": "broadcast", "allgather": "all_gather", "reduce": "reduce",
       "barrier": "barrier"}
# OpenMPI 4.1 coll/tuned algorithm ids per collective (coll_tuned_<op>_algorithm); dtsim's
# library = "mpi" plays them by the same names (0: OpenMPI's own fixed rules).
MPI_ALGORITHMS = {
    "allreduce": {0: "default", 1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling",
                  4: "ring", 5: "segmented_ring", 6: "rabenseifner"},
    "bcast": {0: "default", 1: "basic_linear", 2: "chain", 3: "pipeline", 4: "split_binary_tree",
              5: "binary_tree", 6: "binomial", 7: "knomial", 8: "scatter_allgather",
              9: "scatter_allgather_ring"},
    "allgather": {0: "default", 1: "linear", 2: "bruck", 3: "recursive_doubling", 4: "ring",
                  5: "neighbor", 6: "two_proc"},
    "reduce_scatter": {0: "default", 1: "non_overlapping", 2: "recursive_halving", 3: "ring",
                       4: "butterfly"},
    "barrier": {0: "default", 1: "linear", 2: "double_ring", 3: "recursive_doubling", 4: "bruck",
                5: "two_proc", 6: "tree"},
    "reduce": {0: "default", 1: "linear", 2: "chain", 3: "pipeline", 4: "binary", 5: "binomial",
               6: "in_order_binary", 7: "rabenseifner"},
}
MPI_OPS = {"allreduce": "all_reduce", "bcast": "broadcast", "allgather": "all_gather",
           "reduce_scatter": "reduce_scatter", "barrier": "barrier", "reduce": "reduce"}


def mpi_method(op, alg):
    """The dataset's method name: mpi_<algorithm> for all-reduces (as recorded since
    2026-11-24), mpi_<op>_<algorithm> for the others."""
    name = MPI_ALGORITHMS[op][alg]
    return f"mpi_{name}" if op == "allreduce" else f"mpi_{op}_{name}"


def mpi_sim_set(op, alg):
    name = MPI_ALGORITHMS[op][alg]
    return "collective.library=mpi" + ("" if alg == 0 else f";collective.algorithm={name}")


def mpirun(hs, n, mca, script, args):
    """The mpirun command line that runs `script args` on the first n testbed hosts, one rank
    per namespace (nsexec.sh as the rsh agent), over the TCP BTL on the testbed's addresses;
    returns (command, hostfile to remove)."""
    hostfile = f"/tmp/dtsim-testbed-{os.getpid()}.hosts"
    with open(hostfile, "w") as f:
        for h in hs[:n]:
            f.write(f"{h[2]} slots=1\n")
    cmd = ["ip", "netns", "exec", hs[0][1], "mpirun", "--allow-run-as-root", "-np", str(n),
           "--hostfile", hostfile, "--mca", "plm_rsh_agent", os.path.join(tb.HERE, "nsexec.sh"),
           "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.77.0.0/16",
           "--mca", "oob_tcp_if_include", "10.77.0.0/16", "-x", "DTSIM_TESTBED_HOSTS",
           "-x", "OMP_NUM_THREADS=1", "--mca", "mpi_yield_when_idle", "1"] + mca + \
          [tb.PY, os.path.join(tb.HERE, script)] + args
    return cmd, hostfile


def pinned(cmd, bind):
    """`cmd` (an mpirun line) with each rank pinned by taskset from its rank (OpenMPI leaves
    the testbed's ranks unbound): `apart`, rank r on core r mod cores; `share`, ranks 2i and
    2i + 1 on one core; `free`, unchanged. The rows' command column says which."""
    if bind == "free":
        return cmd
    core = {"share": "$((OMPI_COMM_WORLD_RANK / 2 % {c}))",
            "apart": "$((OMPI_COMM_WORLD_RANK % {c}))"}[bind].format(c=os.cpu_count())
    i = cmd.index(tb.PY)
    return cmd[:i] + ["sh", "-c", f"exec taskset -c {core} {shlex.join(cmd[i:])}"]


def forced_algorithm(op, alg):
    """mpirun's options that force coll/tuned's algorithm `alg` (0: the fixed rules) for `op`."""
    return ["--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", f"coll_tuned_{op}_algorithm", str(alg)]


def run_mpi_collective(hs, n, a, alg):
    """One mpirun of mpi_collectives.py: `a.op` forced to algorithm `alg` (0: the fixed
    rules), `a.repeats` timed calls of each of `a.bytes`; returns (command, its JSON result)."""
    cmd, hostfile = mpirun(hs, n, forced_algorithm(a.op, alg), "mpi_collectives.py",
                           ["--op", a.op, "--repeats", str(a.repeats), "--bytes"] +
                           [str(b) for b in a.bytes])
    cmd = pinned(cmd, a.bind)
    out = run_json(cmd, "mpirun")
    os.remove(hostfile)
    return cmd, out


def run_json(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"{what} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])


def base_row(kind, n, command):
    r = dict(tb.provenance())
    r.update(kind=kind, ranks=n, command=command, date_utc=tb.now(),
             run_id=f"{tb.now()}-{os.getpid()}")
    return r


def collectives(a):
    """One row per (method, size) of gloo collectives over `--launches` separate process groups
    (each a fresh launch of gloo_collectives.py, every method once per launch in turn), their
    repetitions pooled: on 8 hosts a 256 KiB all-reduce took 23.2 ms in one launch and 29.9 ms
    in another (2026-11-26 and 2026-11-28), so one launch can land on either."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    rows = []
    secs, meta = {}, {}
    for launch in range(a.launches):
        for method in a.methods.split(","):
            for nbytes, ts, args, sim_set, loads in collectives_once(a, n, method):
                secs.setdefault((method, nbytes), []).append(ts)
                meta[(method, nbytes)] = (args, sim_set, loads)
                print(f"launch {launch + 1}/{a.launches} {method:14} {nbytes:>10} B  median "
                      f"{tb.summary(ts)[0]*1e3:9.2f} ms  load {loads[1]:.1f}", flush=True)
    for (method, nbytes), per_launch in secs.items():
        # The last launch's arguments and load (every launch runs the same arguments).
        args, sim_set, (load0, load1) = meta[(method, nbytes)]
        pooled = [t for ts in per_launch for t in ts]
        med, lo, hi = tb.summary(pooled)
        launches = f"  (x{a.launches} launches)" if a.launches > 1 else ""
        r = base_row("collective", n, "gloo_collectives.py " + " ".join(args) + launches)
        r.update(library="torch.distributed gloo", method=method,
                 op=OPS.get(method.split(":")[0], "all_reduce"),
                 bytes=nbytes, sim_set=sim_set, repeats=len(pooled),
                 measured_secs=med, measured_min_secs=lo, measured_max_secs=hi,
                 launch_medians_secs=tb.launch_medians(per_launch),
                 load_avg_1m_start=load0, load_avg_1m_end=load1, profile=a.profile)
        rows.append(r)
        print(f"{method:14} {nbytes:>10} B  median {med*1e3:9.2f} ms", flush=True)
    tb.append_rows(a.out, rows)


def method_args(a, method):
    """gloo_collectives.py's arguments that `method` needs beyond its name: a multiring's rank
    orders, a hierarchical all-reduce's node groups."""
    if method.startswith("multiring"):
        return ["--orders", a.orders]
    if method == "hierarchical":
        return ["--groups", a.groups]
    return []


def collectives_once(a, n, method):
    """One launch of gloo_collectives.py for `method`: per size (bytes, seconds of each
    repetition, the launch's arguments, the row's sim_set, the load before and after)."""
    extra, sim_set = method_args(a, method), SIM_SET.get(method, "")
    if method.startswith("multiring"):
        sim_set = f"collective.library=gloo;collective.orders={a.orders.replace(' ', '')}"
    load0 = tb.load1()
    args = ["--method", method.split(":")[0], "--repeats", str(a.repeats), "--bytes"] + \
        [str(b) for b in a.bytes] + extra
    out = tb.launch("gloo_collectives.py", args, n)
    load1 = tb.load1()
    return [(res["bytes"], res["secs"], args, sim_set, (load0, load1))
            for res in out["results"]]


def mpi(a):
    """One row per (algorithm, size) of `--op` over `--launches` separate mpiruns, every
    algorithm once per launch in turn: OpenMPI's exchange-based algorithms settle into a mode
    per launch (fresh TCP connections each time; recursive doubling at 4 MiB ran 352 ms in one
    launch and 695 ms in the next), so a row pools the iterations of several launches, and its
    min/max span all of them."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    if a.bind == "share":
        sys.exit("mpi: --bind free or apart (rank r on core r mod cores)")
    hs = tb.hosts()
    algs = [int(x) for x in a.algorithms.split(",")]
    names = MPI_ALGORITHMS[a.op]
    secs, cmds = {}, {}
    load0 = tb.load1()
    for launch in range(a.launches):
        for alg in algs:
            cmd, out = run_mpi_collective(hs, n, a, alg)
            cmds[alg] = " ".join(cmd) + (f"  (x{a.launches} launches)" if a.launches > 1 else "")
            for res in out["results"]:
                secs.setdefault((alg, res["bytes"]), []).append(res["secs"])
                med = tb.summary(res["secs"])[0]
                print(f"launch {launch + 1}/{a.launches} mpi {a.op} {alg} {names[alg]:18} "
                      f"{res['bytes']:>10} B  median {med*1e3:9.2f} ms", flush=True)
    load1 = tb.load1()
    rows = []
    for (alg, nbytes), per_launch in secs.items():
        pooled = [t for ts in per_launch for t in ts]
        med, lo, hi = tb.summary(pooled)
        r = base_row("collective", n, cmds[alg])
        r.update(library="openmpi coll/tuned + mpi4py", method=mpi_method(a.op, alg),
                 op=MPI_OPS[a.op], bytes=nbytes, sim_set=mpi_sim_set(a.op, alg),
                 repeats=len(pooled), measured_secs=med, measured_min_secs=lo,
                 measured_max_secs=hi, launch_medians_secs=tb.launch_medians(per_launch),
                 load_avg_1m_start=load0, load_avg_1m_end=load1, profile=a.profile)
        rows.append(r)
        launch_medians = ", ".join(f"{tb.summary(ts)[0]*1e3:.1f}" for ts in per_launch)
        print(f"mpi {a.op} {alg} {names[alg]:18} {nbytes:>10} B  median {med*1e3:9.2f} ms "
              f"(launch medians {launch_medians})", flush=True)
    tb.append_rows(a.out, rows)


def calibration_log(name):
    """Where a calibration log named `name` goes by default: data/runs/calibration/."""
    return os.path.join(tb.ROOT, "data", "runs", "calibration", name)


def write_log(path, out, load0, command):
    """Writes a calibration log: `out` with the run's provenance, load and command."""
    out.update(tb.provenance(), load_avg_1m_start=load0, load_avg_1m_end=tb.load1(),
               date_utc=tb.now(), command=command)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def mpi_p2p(a):
    """OpenMPI point to point on every host: a one-way Send and a Sendrecv between the first
    two, and a ring exchange over all (mpi_p2p.py), written as a JSON log (the measurements
    behind dtsim's one-direction-at-a-time exchanges over one TCP connection)."""
    hs = tb.hosts()
    n = a.ranks or int(os.environ["DTSIM_TESTBED_RANKS"])
    args = ["--repeats", str(a.repeats), "--skew-ms", str(a.skew_ms), "--modes", a.p2p_modes,
            "--copy-first", str(a.copy_first), "--bytes"] + [str(b) for b in a.bytes]
    if a.fresh_recv:
        args.append("--fresh-recv")
    # rd_library: OpenMPI's own recursive doubling, beside rd_steps' written-out one.
    mca = forced_algorithm("allreduce", 3) if "rd_library" in a.p2p_modes.split(",") else []
    cmd, hostfile = mpirun(hs, n, mca, "mpi_p2p.py", args)
    # The pairwise exchange's partners (rank ^ 1) on one core, on different cores, or free.
    cmd = pinned(cmd, a.bind)
    load0 = tb.load1()
    out = run_json(cmd, "mpirun")
    out["bind"] = a.bind
    os.remove(hostfile)
    write_log(a.out or calibration_log(f"testbed_mpi_p2p_{n}ranks.json"), out, load0, " ".join(cmd))
    for r in out["results"]:
        one = r.get("oneway_secs")
        line = f"{r['bytes']:>10} B"
        for mode in ("oneway", "sendrecv", "ring", "pairwise"):
            t = r.get(f"{mode}_secs")
            if t is not None:
                line += f"  {mode} {t * 1e3:9.3f} ms" + (f" ({t / one:.2f}x)" if one else "")
        print(line)


def gloo_p2p(a):
    """gloo isend/irecv between host pairs (gloo_p2p.py), written as a JSON log with every
    rank's post and finish time per repetition: the measurements behind dtsim's gloo messages
    leaving their connection in the order they were written."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    args = ["--repeats", str(a.repeats), "--pairs", a.pairs, "--bytes"] + [str(b) for b in a.bytes]
    load0 = tb.load1()
    out = tb.launch("gloo_p2p.py", args, n, timeout=900)
    out["ranks"] = n
    topo = tb.topology_stem()
    write_log(a.out or calibration_log(f"testbed_{topo}.gloo_p2p_{a.name}.json"), out, load0,
              "gloo_p2p.py " + " ".join(args))
    for r in out["results"]:
        secs = sorted(max(e for _, e in rep) - min(s for s, _ in rep)
                      for rep in r["start_end_secs_per_rank"])
        print(f"{r['pattern']:20} {r['bytes']:>10} B  median {secs[len(secs) // 2] * 1e3:9.2f} ms  "
              f"min {secs[0] * 1e3:9.2f}  max {secs[-1] * 1e3:9.2f}")


def call_gaps(a):
    """How long each rank is out of a collective between two timed calls (the barrier and the
    loop around it: tb.timed), per method and size, written as a JSON log with every rank's
    (start, end) per iteration: a shaper's token bucket refills in that gap, so it says how
    full the buckets are when a timed call starts; and how busy the machine's cores were over
    the timed calls (/proc/stat), what the hosts' network stacks and gloo's threads take of
    the cores that every namespace shares."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    topo = tb.topology_stem()
    load0 = tb.load1()
    logs, cmds = [], []
    for method in a.methods.split(","):
        args = ["--method", method, "--repeats", str(a.repeats), "--marks", "--bytes"] + \
            [str(b) for b in a.bytes]
        with tb.CpuSampler() as cpu:
            out = tb.launch("gloo_collectives.py", args, n, timeout=900)
        cmds.append("gloo_collectives.py " + " ".join(args))
        for r in out["results"]:
            r["method"] = method
            marks = r["start_end_secs_per_rank"]
            r["gap_secs_quartiles"] = tb.quartiles(rank[i + 1][0] - rank[i][1] for rank in marks
                                                   for i in range(len(rank) - 1))
            # The machine's CPU over the timed calls (warmup and first gap left out).
            t0 = min(rank[1][0] for rank in marks)
            t1 = max(rank[-1][1] for rank in marks)
            r["machine_cpu"] = cpu.busy(t0, t1)
            calls = len(marks[0]) - 1
            r["machine_cpu"]["busy_core_secs_per_call"] = \
                r["machine_cpu"]["busy_cores"] * (t1 - t0) / calls
            logs.append(r)
            q = r["gap_secs_quartiles"]
            c = r["machine_cpu"]
            print(f"{method:10} {r['bytes']:>10} B  gap between calls per rank: quartiles "
                  f"{q[0] * 1e3:.3f} {q[1] * 1e3:.3f} {q[2] * 1e3:.3f} ms; machine busy "
                  f"{c['busy_cores']:.2f} cores, {c['busy_core_secs_per_call'] * 1e3:.1f} "
                  f"core-ms per call", flush=True)
    write_log(a.out or calibration_log(f"testbed_{topo}.call_gaps.json"),
              {"ranks": n, "results": logs}, load0, " ; ".join(cmds))


def shaper_gap(a):
    """One host sending one message at a time to another (fanout.py with one receiver, which
    answers once it has all of it), after an idle gap, for every gap of --gaps and, with
    --probes, after a small message sent and answered first (0: none). Written as one JSON
    log that `calibrate import shaper` fits: how many bytes a shaper lets through at once
    after an idle gap (its token bucket's depth, refilled at the link's rate) and whether a
    small message spends them."""
    topo = tb.topology_stem()
    gaps = [float(g) for g in a.gaps.split(",")]
    probes = [int(p) for p in a.probes.split(",")]
    load0 = tb.load1()
    runs, cmds = [], []
    workdir = tempfile.mkdtemp(prefix="dtsim-shaper-gap-")
    for probe in probes:
        for gap in gaps:
            part = os.path.join(workdir, f"{probe}_{gap}.json")
            cmd = [tb.PY, os.path.join(tb.HERE, "fanout.py"), "driver", "--k", "1", "--repeats",
                   str(a.repeats), "--gap", str(gap), "--probe", str(probe), "--out", part,
                   "--bytes"] + [str(b) for b in a.bytes]
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
            cmds.append(" ".join(cmd[1:]))
            with open(part) as f:
                for r in json.load(f)["runs"]:
                    runs.append({"gap_secs": gap, "probe_bytes": probe, "bytes": r["bytes"],
                                 "secs": r["secs"][0]})
            for b in a.bytes:
                v = sorted(r["secs"] for r in runs
                           if r["gap_secs"] == gap and r["probe_bytes"] == probe and r["bytes"] == b)
                print(f"probe {probe:>6} B  gap {gap * 1e3:6.2f} ms  {b:>8} B  median "
                      f"{v[len(v) // 2] * 1e3:7.3f} ms", flush=True)
    shutil.rmtree(workdir)
    log = a.out or calibration_log(f"testbed_{topo}.shaper_gap_{a.name}.json")
    write_log(log, {"shaper_burst_setting": os.environ.get("DTSIM_TESTBED_SHAPER_BURST", ""),
                    "runs": runs}, load0, " ; ".join(cmds))
    print(f"the fit: calibrate import shaper {log}")


def mpi_call_gaps(a):
    """When each OpenMPI rank ends one timed call and starts the next (mpi_collectives.py
    --marks: its Barrier and loop between them), per collective and algorithm of --ops
    (op:algorithm, comma-separated) and size, written as a JSON log with every rank's (start,
    end) per iteration. A shaper's token bucket refills only while its link idles: this says
    how long the links idle before a timed call."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    hs = tb.hosts()
    topo = tb.topology_stem()
    load0 = tb.load1()
    logs, cmds = [], []
    for spec in a.ops.split(","):
        op, alg = spec.split(":")
        cmd, hostfile = mpirun(hs, n, forced_algorithm(op, alg), "mpi_collectives.py",
                               ["--op", op, "--repeats", str(a.repeats), "--marks", "--bytes"] +
                               [str(b) for b in a.bytes])
        out = run_json(cmd, "mpirun")
        os.remove(hostfile)
        cmds.append(" ".join(cmd))
        for r in out["results"]:
            marks = r["marks"]
            between = [min(m[i][0] for m in marks) - max(m[i - 1][1] for m in marks)
                       for i in range(1, len(marks[0]))]
            secs = sorted(r["secs"])
            r.update(op=op, algorithm=int(alg),
                     last_end_to_first_start_secs_quartiles=tb.quartiles(between))
            logs.append(r)
            q = r["last_end_to_first_start_secs_quartiles"]
            print(f"{op:15} {alg:>2} {r['bytes']:>9} B  call median {secs[len(secs) // 2] * 1e3:8.3f}"
                  f" ms; last rank's end to first rank's next start: quartiles "
                  f"{q[0] * 1e3:.3f} {q[1] * 1e3:.3f} {q[2] * 1e3:.3f} ms", flush=True)
    write_log(a.out or calibration_log(f"testbed_{topo}.mpi_call_gaps.json"),
              {"ranks": n, "results": logs}, load0, " ; ".join(cmds))


def cpu_costs(a):
    """The machine's CPU per gloo message by size (cpu_costs.py: rank 0 streams to rank 1,
    /proc/stat around each stream), written as a JSON log that `calibrate import cpu-costs`
    fits (core-seconds per message = per_message + per_byte x bytes): what the hosts' network
    stacks and gloo's threads take of the cores every namespace shares."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    topo = tb.topology_stem()
    args = ["--in-flight", str(a.in_flight), "--rounds", str(a.repeats), "--pairs",
            str(a.pairs_streaming), "--bytes"] + [str(b) for b in a.bytes]
    if a.collective:
        args += ["--collective", a.collective]
    load0 = tb.load1()
    out = tb.launch("cpu_costs.py", args, n, timeout=900)
    out["ranks"] = n
    name = f"cpu_costs_{a.collective}_{n}hosts" if a.collective else "cpu_costs"
    log = a.out or calibration_log(f"testbed_{topo}.{name}.json")
    write_log(log, out, load0, "cpu_costs.py " + " ".join(args))
    if a.collective:
        for r in out["results"]:
            print(f"{r['collective']} {r['bytes']:>10} B on {n}: {r['calls']:5} calls "
                  f"{r['secs'] / r['calls'] * 1e3:8.3f} ms each, "
                  f"{r['core_secs_per_call'] * 1e3:8.3f} core-ms per call", flush=True)
        return
    for r in out["results"]:
        print(f"{r['bytes']:>10} B  {r['messages']:5} messages  {r['secs']:.2f} s  "
              f"{r['core_secs_per_message'] * 1e6:8.1f} core-us per message", flush=True)
    print(f"idle machine {out['idle_busy_cores']:.3f} cores busy; the fit: "
          f"calibrate import cpu-costs {log}")


def wakeup_load(a):
    """A small gloo exchange timed while other hosts load the machine's cores
    (wakeup_load.py: ranks 0 and 1 time 4-byte all-reduces, pairs of the other ranks stream
    16 KiB messages, one more pair per level), written as a JSON log: how long gloo's threads
    wait to run as the shared cores fill, by the machine's busy cores."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    topo = tb.topology_stem()
    args = ["--calls", str(a.repeats)]
    load0 = tb.load1()
    out = tb.launch("wakeup_load.py", args, n, timeout=900)
    write_log(a.out or calibration_log(f"testbed_{topo}_{n}hosts.wakeup_load.json"), out, load0,
              "wakeup_load.py " + " ".join(args))
    for r in out["results"]:
        s = sorted(r["secs"])
        print(f"{r['load_pairs']} load pairs: machine busy {r['busy_cores']:.2f} cores; "
              f"{r['calls']} calls, median {r['median_secs'] * 1e3:.3f} ms, mean "
              f"{r['mean_secs'] * 1e3:.3f}, p90 {s[int(0.9 * len(s))] * 1e3:.3f}, p99 "
              f"{s[int(0.99 * len(s))] * 1e3:.3f}", flush=True)


def packet_wait(a):
    """A 1-byte ping from host 0 to host 1 and back, idle, then while host 2 streams to host 1
    (through host 1's downlink) and while it streams to host 3 (beside the ping's path; the
    host CPU control), --pings each at random moments (packet_wait.py), written as a JSON log
    that `calibrate import packet-wait` reads: the bytes of the packet a shaper has in service
    when a small message of another connection arrives. With the pinging host streaming
    (--ping 2:0 --through 2:1 --beside 2:3) both phases wait behind its own stream: what TCP
    keeps queued at its egress, which `calibrate import own-egress` reads as the FIFO head."""
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    pairs = {}
    for name, value in (("--ping", a.ping), ("--through", a.through), ("--beside", a.beside)):
        hosts = value.split(":")
        if len(hosts) != 2 or not all(h.isdigit() for h in hosts) or hosts[0] == hosts[1]:
            sys.exit(f"packet_wait: {name} {value!r}: expected two different hosts as A:B")
        pairs[name] = [int(h) for h in hosts]
    used = [h for p in pairs.values() for h in p]
    if max(used) >= n:
        sys.exit(f"packet_wait: hosts {used} on a testbed of {n}")
    if pairs["--through"][0] != pairs["--beside"][0]:
        sys.exit(f"packet_wait: --through {a.through} and --beside {a.beside} must stream from "
                 "the same host (the same CPU work, on the ping's path or off it)")
    topo = tb.topology_stem()
    args = ["--count", str(a.pings), "--ping", a.ping, "--through", a.through,
            "--beside", a.beside]
    load0 = tb.load1()
    launches = []
    for k in range(a.launches):  # fresh connections each: a stream's phase against the
        # shaper's is set when it starts
        out = tb.launch("packet_wait.py", args + ["--seed", str(k + 1)], max(used) + 1,
                        timeout=900, reporter=int(a.ping.split(":")[0]))
        launches.append(out)
        for phase, r in out["phases"].items():
            s = sorted(r["rtt_secs"])
            print(f"launch {k + 1} {phase:8} {len(s)} pings: mean {r['mean_secs'] * 1e3:.3f} ms, "
                  f"median {r['median_secs'] * 1e3:.3f}, p90 {s[int(0.9 * len(s))] * 1e3:.3f}",
                  flush=True)
    log = a.out or calibration_log(f"testbed_{topo}.packet_wait.json")
    write_log(log, {"ranks": max(used) + 1, "launches": launches}, load0,
              f"packet_wait.py {' '.join(args)} (x{a.launches} launches)")
    own = pairs["--ping"][0] == pairs["--through"][0]
    print(f"the fit: calibrate import {'own-egress' if own else 'packet-wait'} {log}"
          + (" --nominal-bw RATE" if own else ""))


def capture(a):
    """gloo collectives with every host's egress captured (tcpdump, headers only) while each
    rank marks its calls (gloo_collectives.py --marks), summarised per repetition and link as
    a JSON log: when each connection's payload crossed every 16 KiB (after the shaper: an
    egress capture sees packets as the qdisc releases them), each rank's start and end, and
    per connection its first payload after both of its ranks had started. What it shows: the
    token buckets' bursts, the steps of a ring, a call's set-up and its stalls."""
    import re
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    hs = tb.hosts()[:n]
    topo = tb.topology_stem()
    workdir = tempfile.mkdtemp(prefix="dtsim-capture-")
    load0 = tb.load1()
    logs, cmds = [], []
    line = re.compile(r"([\d.]+) IP ([\d.]+)\.\d+ > ([\d.]+)\.\d+: .* length (\d+)")
    rank_of = {h[2]: h[0] for h in hs}
    for method in a.methods.split(","):
        args = ["--method", method.split(":")[0], "--repeats", str(a.repeats), "--marks",
                "--bytes"] + [str(b) for b in a.bytes] + method_args(a, method)
        caps = [subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-n", "-Q",
                                  "out", "-s", "96", "-w", os.path.join(workdir, f"{r}.pcap")],
                                 stderr=subprocess.DEVNULL) for r, ns, _, iface, _ in hs]
        time.sleep(1.0)
        # tcpdump stamps packets with the wall clock, the ranks mark CLOCK_MONOTONIC.
        wall_minus_mono = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
        out = tb.launch("gloo_collectives.py", args, n, timeout=900)
        time.sleep(0.5)
        for c in caps:
            c.terminate()
            c.wait()
        cmds.append("gloo_collectives.py " + " ".join(args))
        packets = []
        for r in range(n):
            text = subprocess.run(["tcpdump", "-r", os.path.join(workdir, f"{r}.pcap"), "-n", "-tt"],
                                  capture_output=True, text=True).stdout
            for m in line.finditer(text):
                if int(m.group(4)) > 0 and m.group(2) in rank_of and m.group(3) in rank_of:
                    packets.append((float(m.group(1)) - wall_minus_mono, rank_of[m.group(2)],
                                    rank_of[m.group(3)], int(m.group(4))))
        packets.sort()
        for res in out["results"]:
            marks = res["start_end_secs_per_rank"]
            reps = []
            for i in range(len(marks[0])):
                t0 = min(m[i][0] for m in marks)
                t1 = max(m[i][1] for m in marks)
                flows = {}
                for t, src, dst, size in packets:
                    if t0 <= t <= t1:
                        flows.setdefault((src, dst), []).append((t - t0, size))
                conns = []
                for (src, dst), pk in sorted(flows.items()):
                    total, crossed, first = 0, [], None
                    for t, size in pk:
                        if size > 1000 and first is None:
                            first = t
                        total += size
                        while total >= (len(crossed) + 1) * 16384:
                            crossed.append(round(t, 6))
                    both = max(marks[src][i][0], marks[dst][i][0]) - t0
                    conns.append({"src": src, "dst": dst, "payload_bytes": total,
                                  "first_payload_after_both_started_secs":
                                      None if first is None else round(first - both, 6),
                                  "secs_at_each_16KiB": crossed})
                reps.append({"start_end_secs_per_rank": [[round(m[i][0] - t0, 6),
                                                          round(m[i][1] - t0, 6)] for m in marks],
                             "secs": max(m[i][1] - m[i][0] for m in marks),
                             "connections": conns})
            logs.append({"method": method, "bytes": res["bytes"], "repetitions": reps})
            setups = sorted(c["first_payload_after_both_started_secs"] for r in reps
                            for c in r["connections"]
                            if c["first_payload_after_both_started_secs"] is not None)
            secs = sorted(r["secs"] for r in reps)
            print(f"{method:10} {res['bytes']:>10} B  per call: min {secs[0] * 1e3:.2f} median "
                  f"{secs[len(secs) // 2] * 1e3:.2f} ms; first payload after both ranks started: "
                  f"min {setups[0] * 1e3:.3f} median {setups[len(setups) // 2] * 1e3:.3f} ms",
                  flush=True)
    shutil.rmtree(workdir, ignore_errors=True)
    write_log(a.out or calibration_log(f"testbed_{topo}.capture_{a.name}.json"),
              {"ranks": n, "results": logs}, load0, " ; ".join(cmds))


TCP_INFO_FIELDS = ("cwnd", "ssthresh", "unacked", "notsent", "bytes_acked")


def tcp_info_sampler(ns, rank, rank_of, period_secs, out, stop):
    """Samples `ss -tin` in namespace `ns` every `period_secs` until `stop` is set, appending
    per established connection to a known host: (epoch secs, rank, peer rank, peer port,
    Send-Q bytes, cwnd, ssthresh, unacked, notsent, bytes_acked, rtt ms, pacing rate bit/s)."""
    import re
    # Without a header and for one state, ss prints "Recv-Q Send-Q Local:Port Peer:Port", then
    # the connection's TCP info on an indented line.
    head = re.compile(r"^(\d+)\s+(\d+)\s+\S+:\d+\s+([\d.]+):(\d+)")
    rate = re.compile(r"pacing_rate ([\d.]+)([KMG]?)bps")
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
    while not stop.is_set():
        t = time.time()
        lines = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH", "state", "established"],
                               capture_output=True, text=True).stdout.splitlines()
        for conn, info in zip(lines, lines[1:]):
            m = head.match(conn)
            if m is None or m.group(3) not in rank_of:
                continue
            vals = [int(v.group(1)) if (v := re.search(rf"\b{f}:(\d+)", info)) else None
                    for f in TCP_INFO_FIELDS]
            rtt = re.search(r"\brtt:([\d.]+)/", info)
            pr = rate.search(info)
            out.append([round(t, 6), rank, rank_of[m.group(3)], int(m.group(4)), int(m.group(2))]
                       + vals + [float(rtt.group(1)) if rtt else None,
                                 float(pr.group(1)) * scale[pr.group(2)] if pr else None])
        stop.wait(period_secs)


def capture_mpi(a):
    """One OpenMPI collective (`--op`, the first of `--algorithms`, one launch) with every
    host's packets captured both ways (tcpdump, headers only), written as a JSON log of its
    rendezvous messages: per connection, each request (40 B), answer (64 B) and data message
    (the payload between two requests), when it left its sender and when its last byte reached
    the receiver (matched by the connection's byte count, the same stream seen at both ends),
    and for each answer when it left every switch port it crossed (the egress of the veth
    end `PREFIX-<k>a` carries link k of the topology file from its first device to its
    second, `PREFIX-<k>b` back). What it shows: how long an answer takes to cross (behind
    which queues), and how long a sender takes to send once its answer is in; each data
    message also lists its packets (when each left the sender's host, and its bytes: a GSO
    packet is one). With --gloo-method M it captures gloo's collective M
    (gloo_collectives.py) instead, its 48-byte notifications (the receiver's
    NOTIFY_RECV_READY, which the payload waits for) in the answers' place. With --tcp-info-ms
    every host's TCP connections to the others are sampled (`ss -tin`: Send-Q, congestion
    window and threshold, unacknowledged and unsent bytes, round trip) into `tcp_info`."""
    import re
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    hs = tb.hosts()[:n]
    workdir = tempfile.mkdtemp(prefix="dtsim-capture-mpi-")
    line = re.compile(r"([\d.]+) IP ([\d.]+)\.\d+ > ([\d.]+)\.\d+: .* length (\d+)")
    rank_of = {h[2]: h[0] for h in hs}
    alg = int(a.algorithms.split(",")[0])
    # The handshake's message sizes on the wire: OpenMPI's request and answer, gloo's notification.
    kinds = {48: "answer"} if a.gloo_method else {40: "request", 64: "answer"}
    answer_bytes = next(b for b, k in kinds.items() if k == "answer")
    load0 = tb.load1()
    caps = [subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-n", "-Q",
                              "inout", "-s", "96", "-w", os.path.join(workdir, f"{r}.pcap")],
                             stderr=subprocess.DEVNULL) for r, ns, _, iface, _ in hs]
    # The switches' ports (veth ends in the root namespace, `PREFIX-<link>a|b`), as their
    # shapers release packets.
    prefix = os.environ.get("DTSIM_TESTBED_PREFIX", "tb") + "-"
    ports = sorted(l.split(": ")[1].split("@")[0] for l in
                   subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                                  text=True).stdout.splitlines()
                   if l.split(": ")[1].startswith(prefix) and
                   l.split(": ")[1].split("@")[0][len(prefix):][:1].isdigit())
    caps += [subprocess.Popen(["tcpdump", "-i", port, "-n", "-Q", "out", "-s", "96", "-w",
                               os.path.join(workdir, f"port-{port}.pcap")],
                              stderr=subprocess.DEVNULL) for port in ports]
    time.sleep(1.0)
    import threading
    tcp_samples, stop = [], threading.Event()
    samplers = [threading.Thread(target=tcp_info_sampler,
                                 args=(ns, r, rank_of, a.tcp_info_ms / 1e3, tcp_samples, stop))
                for r, ns, _, _, _ in hs] if a.tcp_info_ms > 0 else []
    for th in samplers:
        th.start()
    if a.gloo_method:
        args = ["--method", a.gloo_method, "--repeats", str(a.repeats), "--bytes"] + \
            [str(b) for b in a.bytes]
        out = tb.launch("gloo_collectives.py", args, n, timeout=900)
        cmd = ["gloo_collectives.py"] + args
    else:
        cmd, out = run_mpi_collective(hs, n, a, alg)
    stop.set()
    for th in samplers:
        th.join()
    time.sleep(0.5)
    for c in caps:
        c.terminate()
        c.wait()
    # Per host, its packets of each direction: (time, payload bytes), as it sent or received them.
    sent, got = {}, {}
    for r in range(n):
        text = subprocess.run(["tcpdump", "-r", os.path.join(workdir, f"{r}.pcap"), "-n", "-tt"],
                              capture_output=True, text=True).stdout
        for m in line.finditer(text):
            src, dst, size = rank_of.get(m.group(2)), rank_of.get(m.group(3)), int(m.group(4))
            if src is None or dst is None or size == 0:
                continue
            side = sent if src == r else got
            side.setdefault((src, dst), []).append((float(m.group(1)), size))
    # Per port, when each 64-byte answer of each (src, dst) left it.
    left_port = {}
    for port in ports:
        text = subprocess.run(["tcpdump", "-r", os.path.join(workdir, f"port-{port}.pcap"), "-n",
                               "-tt"], capture_output=True, text=True).stdout
        for m in line.finditer(text):
            src, dst = rank_of.get(m.group(2)), rank_of.get(m.group(3))
            if src is not None and dst is not None and int(m.group(4)) == answer_bytes:
                left_port.setdefault((src, dst, port), []).append(float(m.group(1)))
    shutil.rmtree(workdir, ignore_errors=True)
    t0 = min(t for pk in sent.values() for t, _ in pk)
    messages = []
    for (src, dst), pk in sorted(sent.items()):
        offset, cur = 0, None
        for t, size in pk:
            offset += size
            kind = kinds.get(size, "data" if size > 1000 else "other")
            if kind == "data" and cur is not None and cur["kind"] == "data":
                cur["bytes"] += size
                cur["end_offset"] = offset
                cur["packets"].append([round(t - t0, 6), size])
                continue
            cur = {"src": src, "dst": dst, "kind": kind, "bytes": size,
                   "sent_secs": round(t - t0, 6), "end_offset": offset}
            if kind == "data":
                # Each packet as the sender's host handed it to its link (a GSO packet is one).
                cur["packets"] = [[round(t - t0, 6), size]]
            messages.append(cur)
    for msg in messages:
        arrived_at = None
        pk = got.get((msg["src"], msg["dst"]), [])
        total = 0
        for t, size in pk:
            total += size
            if total >= msg["end_offset"]:
                arrived_at = round(t - t0, 6)
                break
        msg["arrived_secs"] = arrived_at
        del msg["end_offset"]
        if msg["kind"] == "answer":
            hops = []
            for port in ports:
                at = next((t - t0 for t in left_port.get((msg["src"], msg["dst"], port), [])
                           if msg["sent_secs"] - 1e-4 <= t - t0 <= msg["sent_secs"] + 0.05), None)
                if at is not None:
                    hops.append([port, round(at - msg["sent_secs"], 6)])
            msg["left_ports_secs_after_sent"] = sorted(hops, key=lambda h: h[1])
    messages.sort(key=lambda m: m["sent_secs"])
    # How long each answer took to cross, and its sender's data after it arrived.
    crossing, reaction = {}, {}
    for i, msg in enumerate(messages):
        if msg["kind"] != "answer" or msg["arrived_secs"] is None:
            continue
        key = f"{msg['dst']}->{msg['src']}"
        crossing.setdefault(key, []).append(msg["arrived_secs"] - msg["sent_secs"])
        data = next((m for m in messages[i + 1:] if m["kind"] == "data" and
                     (m["src"], m["dst"]) == (msg["dst"], msg["src"])), None)
        if data is not None and data["sent_secs"] >= msg["arrived_secs"]:
            reaction.setdefault(key, []).append(data["sent_secs"] - msg["arrived_secs"])
    def quartiles(xs):
        xs = sorted(xs)
        return [round(xs[len(xs) // 4], 6), round(xs[len(xs) // 2], 6),
                round(xs[3 * len(xs) // 4], 6), round(xs[-1], 6)]
    summary = {k: {"answer_crossing_secs_q1_median_q3_max": quartiles(v),
                   "data_after_answer_secs_q1_median_q3_max":
                       quartiles(reaction[k]) if k in reaction else None}
               for k, v in sorted(crossing.items())}
    for k, v in summary.items():
        c, r = v["answer_crossing_secs_q1_median_q3_max"], \
            v["data_after_answer_secs_q1_median_q3_max"]
        print(f"connection {k}: answer crossed in median {c[1] * 1e3:.2f} ms (max "
              f"{c[3] * 1e3:.2f}); data left a median "
              f"{(r[1] * 1e3 if r else float('nan')):.2f} ms after the answer arrived", flush=True)
    secs = {res["bytes"]: tb.summary(res["secs"]) for res in out["results"]}
    what = f"gloo {a.gloo_method}" if a.gloo_method else f"{a.op} {MPI_ALGORITHMS[a.op][alg]}"
    for b, (med, lo, hi) in secs.items():
        print(f"{what} {b} B: median {med * 1e3:.2f} ms ({lo * 1e3:.2f}-{hi * 1e3:.2f})",
              flush=True)
    library = "gloo" if a.gloo_method else "mpi"
    write_log(a.out or calibration_log(f"testbed_{tb.topology_stem()}.capture_{library}_{a.name}.json"),
              {"ranks": n, "op": a.gloo_method or a.op,
               "algorithm": "gloo" if a.gloo_method else MPI_ALGORITHMS[a.op][alg], "ports": ports,
               "bytes": a.bytes, "repeats": a.repeats,
               "call_secs_median_min_max": {str(b): v for b, v in secs.items()},
               "per_connection": summary, "messages": messages,
               **({"tcp_info_columns": ["secs", "rank", "peer", "peer_port", "send_q"] +
                   list(TCP_INFO_FIELDS) + ["rtt_ms", "pacing_rate_bps"],
                   "tcp_info": [[round(x[0] - t0, 6)] + x[1:] for x in tcp_samples]}
                  if samplers else {})}, load0, " ".join(cmd))


def training(a):
    n = int(os.environ["DTSIM_TESTBED_RANKS"])
    rows = []
    for method in a.methods.split(","):
        load0 = tb.load1()
        args = ["--method", method, "--steps", str(a.repeats), "--batch", str(a.batch),
                "--model", a.model, "--bucket-mib", str(a.bucket_mib)]
        if a.keep_files:
            args.append("--keep-files")
        out = tb.launch("train.py", args, n, timeout=900)
        load1 = tb.load1()
        med, lo, hi = tb.summary(out["step_secs"])
        sim_set = f"workload.parallelism={method}"
        if method == "ddp":
            # torch DDP puts the last gradients in a 1 MiB first bucket (_DEFAULT_FIRST_BUCKET_BYTES)
            sim_set += ";workload.first_bucket=1MiB"
        if method == "parameter_server":
            sim_set += ";workload.servers=1;workload.colocated=true"
        r = base_row("training", n, "train.py " + " ".join(args))
        r.update(library="torch.distributed gloo", method=method, op="training_step",
                 bytes=out["gradient_bytes"], model=out["model_file"], batch_per_gpu=a.batch,
                 bucket_bytes=a.bucket_mib * MIB, sim_set=sim_set, repeats=len(out["step_secs"]),
                 measured_secs=med, measured_min_secs=lo, measured_max_secs=hi,
                 compute_secs=out["compute_secs"], comm_secs=med - out["compute_secs"],
                 load_avg_1m_start=load0, load_avg_1m_end=load1, profile=out["profile"])
        rows.append(r)
        print(f"{method:26} step median {med*1e3:9.2f} ms (compute {out['compute_secs']*1e3:.1f} ms)",
              flush=True)
    tb.append_rows(a.out, rows)


def link(a):
    """Testbed calibration through `calibrate`: iperf3 --json between hosts 0 and 1 (bandwidth)
    and a TCP ping-pong (latency) on the testbed, both logs kept under data/runs/calibration/,
    then `calibrate import iperf3 LOG --nominal-bw ... --latency ... --out PROFILE`, which writes
    the profile's ethernet factor table with its provenance."""
    hs = tb.hosts()
    stem = os.path.splitext(os.path.basename(a.profile))[0]
    logs = a.logs or os.path.join(tb.ROOT, "data", "runs", "calibration")
    os.makedirs(logs, exist_ok=True)
    iperf_logs = []
    for streams in [int(x) for x in a.streams.split(",")]:
        iperf_log = os.path.join(logs, f"{stem}.iperf3_P{streams}.json")
        srv = subprocess.Popen(["ip", "netns", "exec", hs[1][1], "iperf3", "-s", "-1", "--json"],
                               stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        cli = subprocess.run(["ip", "netns", "exec", hs[0][1], "iperf3", "-c", hs[1][2], "-t",
                              str(a.seconds), "-P", str(streams), "--json"],
                             capture_output=True, text=True, check=True)
        srv.wait(timeout=30)
        with open(iperf_log, "w") as f:
            f.write(cli.stdout)
        iperf_logs.append(tb.rel(iperf_log))
    load_bw = tb.load1()
    lat = tb.launch("pingpong.py", ["--count", str(a.pings)], 2)
    lat.update(load_avg_1m=tb.load1(), date_utc=tb.now(), hosts=[hs[0][1], hs[1][1]])
    ping_log = os.path.join(logs, f"{stem}.pingpong.json")
    with open(ping_log, "w") as f:
        json.dump(lat, f, indent=2)
        f.write("\n")
    one_way_us = lat["rtt_median_secs"] * 5e5
    where = (f"the dtsim testbed ({os.environ.get('DTSIM_TESTBED_TOPOLOGY')} "
             f"{os.environ.get('DTSIM_TESTBED_SET')}, shaper {os.environ.get('DTSIM_TESTBED_SHAPER')})")
    source = (f"TCP ping-pong testbed/workloads/pingpong.py, {a.pings} x 1 B host0<->host1 on {where}: "
              f"median RTT {lat['rtt_median_secs']*1e6:.1f} us / 2, log {tb.rel(ping_log)}, "
              f"load {lat['load_avg_1m']:.1f}")
    if os.path.exists(a.profile):
        os.remove(a.profile)  # a fresh profile, not a merge into the last one
    cmd = [tb.calibrate_bin(), "import", "iperf3"] + iperf_logs + [
           "--link-class", "ethernet", "--nominal-bw", a.nominal_bw,
           "--latency", f"{one_way_us:.2f}us", "--nominal-latency", a.nominal_latency,
           "--latency-source", source, "--measured-on", where,
           "--shaper-burst", os.environ.get("DTSIM_TESTBED_SHAPER_BURST", "0ms"),
           "--shaper-burst-source",
           f"dtsim-testbed gives every {os.environ.get('DTSIM_TESTBED_SHAPER')} class burst = "
           "cburst = that much of its link's rate, at least 16 KiB (testbed/src/plan.rs)",
           "--out", tb.rel(a.profile),
           "--description",
           f"measured by calibrate on {where}: iperf3 -t {a.seconds} -P {a.streams} "
           f"(load {load_bw:.1f}) and a "
           f"TCP ping-pong between host0 and host1; {tb.provenance()['versions']}"]
    p = subprocess.run(cmd, cwd=tb.ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    print(p.stdout, end="")


def incast(a):
    """Every other host sends to host 1 at once (one iperf3 TCP stream each, --seconds), through
    host 1's one capped link; one iperf3 --json log per sender into --logs (default
    data/runs/calibration), named after --profile's stem. The totals check the link efficiency
    (`sim/tests/testbed_link.rs`)."""
    hs = tb.hosts()
    stem = os.path.splitext(os.path.basename(a.profile))[0]
    logs = a.logs or os.path.join(tb.ROOT, "data", "runs", "calibration")
    os.makedirs(logs, exist_ok=True)
    senders = [h for h in hs if h[0] != 1]
    servers = [subprocess.Popen(["ip", "netns", "exec", hs[1][1], "iperf3", "-s", "-1", "--json",
                                 "-p", str(5201 + i)], stdout=subprocess.DEVNULL)
               for i in range(len(senders))]
    time.sleep(0.5)
    clients = [subprocess.Popen(["ip", "netns", "exec", h[1], "iperf3", "-c", hs[1][2], "-p",
                                 str(5201 + i), "-t", str(a.seconds), "--json"],
                                stdout=subprocess.PIPE, text=True)
               for i, h in enumerate(senders)]
    total = 0.0
    for h, c in zip(senders, clients):
        out, _ = c.communicate(timeout=a.seconds + 30)
        path = os.path.join(logs, f"{stem}.iperf3_incast_from_h{h[0]}.json")
        with open(path, "w") as f:
            f.write(out)
        rate = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        total += rate
        print(f"host{h[0]} -> host1: {rate / 1e6:.2f} Mbit/s", flush=True)
    for srv in servers:
        srv.wait(timeout=30)
    print(f"incast total into host1: {total / 1e6:.2f} Mbit/s")


def pairs(a):
    """iperf3 TCP streams between host pairs at once (--pairs "0:2,1:3", one stream each,
    --seconds), one --json log per pair into --logs (default data/runs/calibration) named
    {profile stem}.iperf3_{--name}_h{src}_to_h{dst}.json: how TCP flows share a link when
    others cross it in the same or the opposite direction."""
    hs = tb.hosts()
    stem = os.path.splitext(os.path.basename(a.profile))[0]
    logs = a.logs or os.path.join(tb.ROOT, "data", "runs", "calibration")
    os.makedirs(logs, exist_ok=True)
    want = [tuple(int(x) for x in p.split(":")) for p in a.pairs.split(",")]
    servers = [subprocess.Popen(["ip", "netns", "exec", hs[d][1], "iperf3", "-s", "-1", "--json",
                                 "-p", str(5201 + i)], stdout=subprocess.DEVNULL)
               for i, (_, d) in enumerate(want)]
    time.sleep(0.5)
    clients = [subprocess.Popen(["ip", "netns", "exec", hs[s_][1], "iperf3", "-c", hs[d][2], "-p",
                                 str(5201 + i), "-t", str(a.seconds), "--json"],
                                stdout=subprocess.PIPE, text=True)
               for i, (s_, d) in enumerate(want)]
    for (s_, d), c in zip(want, clients):
        out, _ = c.communicate(timeout=a.seconds + 30)
        with open(os.path.join(logs, f"{stem}.iperf3_{a.name}_h{s_}_to_h{d}.json"), "w") as f:
            f.write(out)
        end = json.loads(out)["end"]
        print(f"host{s_} -> host{d}: {end['sum_received']['bits_per_second'] / 1e6:.2f} Mbit/s, "
              f"{end['sum_sent'].get('retransmits')} retransmits", flush=True)
    for srv in servers:
        srv.wait(timeout=30)


def two_way(a):
    """Bulk TCP transfers between host pairs at once (two_way.py: --pairs, one connection
    each, kept for the whole launch), in rounds of --bytes each, --repeats rounds per size
    after each idle gap of --gaps (seconds; Linux restarts a connection's window after an idle
    retransmission timeout, ~200 ms here), --launches times on fresh connections: one JSON log,
    data/runs/calibration/testbed_{topology}.two_way_{--name}.json, every round's per-flow times."""
    gaps = [float(g) for g in a.gaps.split(",")]
    runs, cmds, res = [], [], {}
    workdir = tempfile.mkdtemp(prefix="dtsim-two-way-")
    load0 = tb.load1()
    for launch in range(a.launches):
        for gap in gaps:
            part = os.path.join(workdir, f"{launch}_{gap}.json")
            cmd = [tb.PY, os.path.join(tb.HERE, "two_way.py"), "driver", "--pairs", a.pairs,
                   "--repeats", str(a.repeats), "--gap", str(gap), "--out", part,
                   "--bytes"] + [str(b) for b in a.bytes]
            p = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800)
            print(f"launch {launch + 1}, gap {gap} s:\n{p.stdout}", end="", flush=True)
            cmds.append(" ".join(cmd[1:]))
            with open(part) as f:
                res = json.load(f)
            runs += [dict(r, gap_secs=gap, launch=launch) for r in res["runs"]]
    shutil.rmtree(workdir, ignore_errors=True)
    out = {"pairs": res["pairs"], "hosts": res["hosts"], "gaps_secs": gaps, "runs": runs}
    log = a.out or calibration_log(f"testbed_{tb.topology_stem()}.two_way_{a.name}.json")
    write_log(log, out, load0, " ; ".join(cmds))
    print(f"wrote {tb.rel(log)}")


def trace(a):
    """One DDP step of a small CNN traced on every rank (trace_step.py): PyTorch execution
    traces and Kineto traces into --out, with a README line of what was run."""
    n = a.ranks or int(os.environ["DTSIM_TESTBED_RANKS"])
    out_dir = a.out or os.path.join(tb.ROOT, "data", "traces", "testbed_ddp_cnn")
    args = ["--out", os.path.abspath(out_dir), "--batch", str(a.batch)]
    load0 = tb.load1()
    out = tb.launch("trace_step.py", args, n, timeout=900)
    out.update(tb.provenance(), ranks=n, topology=os.environ.get("DTSIM_TESTBED_TOPOLOGY", ""),
               load_avg_1m_start=load0, load_avg_1m_end=tb.load1(), date_utc=tb.now(),
               command="trace_step.py " + " ".join(args[2:]))
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite", choices=["collectives", "mpi", "mpi_p2p", "training", "link",
                                      "incast", "pairs", "two_way", "trace", "gloo_p2p", "call_gaps", "capture",
                                      "capture_mpi", "cpu_costs", "wakeup_load", "shaper_gap",
                                      "mpi_call_gaps", "packet_wait"])
    ap.add_argument("--ranks", type=int, default=0,
                    help="trace, mpi_p2p: ranks (default: every host)")
    ap.add_argument("--out", default="")
    ap.add_argument("--profile", default="")
    ap.add_argument("--methods", default="allreduce,ps")
    ap.add_argument("--algorithms", default="0,1,4,6")
    ap.add_argument("--op", choices=sorted(MPI_ALGORITHMS), default="allreduce",
                    help="mpi: the collective (its coll_tuned_<op>_algorithm ids in --algorithms)")
    ap.add_argument("--orders", default="[[0,1,2,3],[0,2,1,3]]")
    ap.add_argument("--groups", default="[[0,1],[2,3]]")
    ap.add_argument("--bytes", type=int, nargs="+", default=[MIB // 4, MIB, 4 * MIB, 16 * MIB])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--launches", type=int, default=5,
                    help="collectives, mpi, packet_wait: separate launches, pooled (per method "
                         "into one row for collectives and mpi) "
                         "(default 5: a single launch lands on either side of a launch's modes)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--bucket-mib", type=int, default=25)
    ap.add_argument("--keep-files", action="store_true",
                    help="training: leave the model file and compute profiles as they are")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--pairs", default="0:2,1:3", help="pairs, gloo_p2p: src:dst host pairs at once")
    ap.add_argument("--pairs-streaming", type=int, default=1,
                    help="cpu_costs: host pairs streaming at once (0-1, 2-3, ...)")
    ap.add_argument("--name", default="pairs", help="pairs, gloo_p2p, capture: name in the log files")
    ap.add_argument("--streams", default="1,2,4,8",
                    help="link: iperf3 parallel stream counts, one run each")
    ap.add_argument("--pings", type=int, default=500)
    ap.add_argument("--ping", default="0:1", help="packet_wait: the pinging host and its target")
    ap.add_argument("--through", default="2:1",
                    help="packet_wait: a stream whose path shares a link with the ping's way in")
    ap.add_argument("--beside", default="2:3",
                    help="packet_wait: a stream off the ping's path (the host CPU control)")
    ap.add_argument("--collective", default="",
                    help="cpu_costs: every rank runs this collective (all_reduce, all_gather, "
                         "broadcast, reduce) back to back: core-seconds per call")
    ap.add_argument("--in-flight", type=int, default=8,
                    help="cpu_costs: messages posted at a time (1: python wakes per message)")
    ap.add_argument("--skew-ms", type=float, default=0.0,
                    help="mpi_p2p: odd ranks enter the pairwise exchange this much later")
    ap.add_argument("--copy-first", type=int, default=0,
                    help="mpi_p2p: every rank copies this many bytes into fresh memory before "
                         "the pairwise exchange")
    ap.add_argument("--fresh-recv", action="store_true",
                    help="mpi_p2p: the pairwise exchange receives into a buffer allocated for "
                         "each repetition")
    ap.add_argument("--tcp-info-ms", type=float, default=0.0,
                    help="capture_mpi: also sample every host's TCP connections (ss -tin: window, "
                         "Send-Q, round trip) every this many ms (0: not)")
    ap.add_argument("--gloo-method", default="",
                    help="capture_mpi: capture this gloo collective (gloo_collectives.py --method) "
                         "instead of an OpenMPI one")
    ap.add_argument("--p2p-modes", default="",
                    help="mpi_p2p: which exchanges to time (mpi_p2p.py --modes; default all)")
    ap.add_argument("--bind", choices=["free", "share", "apart"], default="free",
                    help="mpi_p2p, mpi: ranks where the scheduler puts them (free), or pinned by "
                         "taskset: rank r on core r mod cores (apart), ranks 2i and 2i+1 on one "
                         "core (share, mpi_p2p only)")
    ap.add_argument("--logs", default="", help="link: where the iperf3/ping-pong logs go "
                    "(default data/runs/calibration)")
    ap.add_argument("--nominal-bw", default="200Mbps",
                    help="nominal rate of the host0-host1 path's bottleneck link (topology file)")
    ap.add_argument("--nominal-latency", default="50us",
                    help="the topology's one-way latency host0->host1 (sum over the path's links)")
    ap.add_argument("--gaps", default="0,0.0005,0.001,0.002,0.003,0.005,0.02",
                    help="shaper_gap: idle seconds before each timed send")
    ap.add_argument("--probes", default="0",
                    help="shaper_gap: bytes of a small message sent first (0: none)")
    ap.add_argument("--ops", default="reduce_scatter:2,reduce_scatter:3,allreduce:4,allgather:4",
                    help="mpi_call_gaps: collective:coll_tuned algorithm id, comma-separated")
    a = ap.parse_args()
    {"collectives": collectives, "mpi": mpi, "mpi_p2p": mpi_p2p, "training": training,
     "link": link, "incast": incast, "pairs": pairs, "two_way": two_way, "trace": trace, "gloo_p2p": gloo_p2p,
     "call_gaps": call_gaps, "capture": capture, "capture_mpi": capture_mpi,
     "cpu_costs": cpu_costs, "wakeup_load": wakeup_load, "shaper_gap": shaper_gap,
     "mpi_call_gaps": mpi_call_gaps, "packet_wait": packet_wait}[a.suite](a)


if __name__ == "__main__":
    main()
