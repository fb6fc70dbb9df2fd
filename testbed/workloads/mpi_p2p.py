"""OpenMPI point to point (mpi4py, launched by suite.py mpi_p2p): for each size, the median of a
one-way Send (rank 0 to 1), of a Sendrecv between ranks 0 and 1 (both ways at once, one peer),
of a ring exchange (every rank sends to rank + 1 and receives from rank - 1 at once, as a
ring step does; with 3 ranks or more), of 2(n - 1) ring exchanges back to back (a ring
all-reduce's steps, without its reductions), and of a Sendrecv of every rank with rank ^ 1 at
once (a recursive-doubling step: one peer, both ways, every rank busy; with 4 ranks or more,
an even number), each timed from a barrier to a barrier; prints JSON on rank 0. Mode send_return
(only when asked with --modes) is the one-way Send again with both ranks' own clocks kept: when
rank 0's Send returned and when rank 1's Recv completed (CLOCK_MONOTONIC, one clock across the
namespaces), so what the sender's socket still held when its Send completed can be read off.
With --copy-first B every rank copies B bytes into freshly allocated memory between the barrier
and the pairwise exchange; with --fresh-recv the pairwise exchange receives into a buffer
allocated for that repetition (as OpenMPI's all-reduces and reduce_scatters receive their
first exchange into a temporary buffer they allocate per call), not into one kept across
repetitions. Mode rd_steps (only when asked) is a recursive-doubling all-reduce written out
(log2 n steps, each a Sendrecv with rank ^ 2^k into a temporary buffer, then the sum into the
vector, after a copy of the vector into fresh memory, as coll/base's recursive doubling does),
each rank's clock (CLOCK_MONOTONIC) kept as it enters each step and as its exchange returns, so
each step's exchanges can be classed fast or slow call by call; mode rd_library is OpenMPI's own
Allreduce in the same launch (suite.py forces recursive doubling when asked for it), timed as
mpi_collectives.py times it."""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--bytes", type=int, nargs="+", required=True)
ap.add_argument("--repeats", type=int, default=10)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--skew-ms", type=float, default=0.0,
                help="odd ranks start the pairwise exchange this much after the even ones")
ap.add_argument("--copy-first", type=int, default=0,
                help="pairwise: every rank first copies this many bytes into fresh memory (as "
                     "OpenMPI's all-reduces copy their vector into a new buffer before their "
                     "first exchange)")
ap.add_argument("--fresh-recv", action="store_true",
                help="pairwise: receive into a buffer allocated for the repetition")
ap.add_argument("--modes", default="",
                help="comma-separated subset of oneway,sendrecv,ring,ring_steps,pairwise (default: all "
                     "that the rank count allows)")
a = ap.parse_args()
comm = MPI.COMM_WORLD
me = comm.Get_rank()
n = comm.Get_size()
modes = ["oneway", "sendrecv"] + (["ring", "ring_steps"] if n >= 3 else []) + \
    (["pairwise"] if n >= 4 and n % 2 == 0 else [])
if a.modes:
    modes = [m for m in modes + ["send_return", "rd_steps", "rd_library"]
             if m in a.modes.split(",")]
src = np.ones(a.copy_first // 4, dtype=np.float32)


def rd_steps(x):
    """A recursive-doubling all-reduce of x written out; returns this rank's (entered, exchange
    returned) CLOCK_MONOTONIC pair for each step."""
    v = np.empty_like(x)
    np.copyto(v, x)
    tmp = np.empty_like(x)
    steps = []
    k = 1
    while k < n:
        entered = time.clock_gettime(time.CLOCK_MONOTONIC)
        comm.Sendrecv(v, me ^ k, recvbuf=tmp, source=me ^ k)
        steps.append((entered, time.clock_gettime(time.CLOCK_MONOTONIC)))
        np.add(v, tmp, out=v)
        k <<= 1
    return steps
results = []
for nbytes in a.bytes:
    x = np.ones(nbytes // 4, dtype=np.float32)
    y = np.empty_like(x)
    row = {"bytes": nbytes}
    for mode in modes:
        ts = []
        marks = []
        for i in range(a.warmup + a.repeats):
            comm.Barrier()
            t = MPI.Wtime()
            if mode == "rd_steps":
                marks.append(rd_steps(x))
                ts.append(MPI.Wtime() - t)
                continue
            if mode == "rd_library":
                comm.Allreduce(x, y, op=MPI.SUM)
                ts.append(MPI.Wtime() - t)
                continue
            if mode == "send_return":
                m0 = time.clock_gettime(time.CLOCK_MONOTONIC)
                if me == 0:
                    comm.Send(x, 1)
                elif me == 1:
                    comm.Recv(y, 0)
                marks.append((m0, time.clock_gettime(time.CLOCK_MONOTONIC)))
            elif mode == "ring":
                comm.Sendrecv(x, (me + 1) % n, recvbuf=y, source=(me - 1) % n)
            elif mode == "pairwise":
                if me % 2 and a.skew_ms > 0:
                    time.sleep(a.skew_ms / 1e3)
                if a.copy_first:
                    fresh = np.empty(a.copy_first // 4, dtype=np.float32)
                    np.copyto(fresh, src[: fresh.size])
                into = np.empty_like(x) if a.fresh_recv else y
                comm.Sendrecv(x, me ^ 1, recvbuf=into, source=me ^ 1)
            elif mode == "ring_steps":
                for _ in range(2 * (n - 1)):
                    comm.Sendrecv(x, (me + 1) % n, recvbuf=y, source=(me - 1) % n)
            elif me < 2:
                if mode == "sendrecv":
                    comm.Sendrecv(x, 1 - me, recvbuf=y, source=1 - me)
                elif me == 0:
                    comm.Send(x, 1)
                else:
                    comm.Recv(y, 0)
            comm.Barrier()
            ts.append(MPI.Wtime() - t)
        ts = ts[a.warmup:]
        if mode in ("rd_steps", "rd_library"):
            # Timed per rank, as mpi_collectives.py does: the slowest rank's time per call.
            worst = np.empty(len(ts))
            comm.Allreduce(np.array(ts), worst, op=MPI.MAX)
            ts = worst.tolist()
            row[f"{mode}_calls_secs"] = ts
        ts = sorted(ts)
        row[f"{mode}_secs"] = ts[len(ts) // 2]
        row[f"{mode}_all_secs"] = ts
        if mode == "rd_steps":
            # Per call, per rank: [(entered step k, its exchange returned), ...].
            every = comm.gather(marks[a.warmup:], root=0)
            if me == 0:
                row["rd_steps_marks"] = [[every[r][i] for r in range(n)] for i in range(a.repeats)]
        if mode == "send_return":
            # Per repetition: rank 0's (start, Send returned), rank 1's (start, Recv done).
            both = comm.gather(marks[a.warmup:], root=0)
            if me == 0:
                row["send_return_marks"] = [[both[0][i], both[1][i]] for i in range(a.repeats)]
    results.append(row)
if me == 0:
    print(json.dumps({"ranks": n, "skew_ms": a.skew_ms, "copy_first_bytes": a.copy_first,
                      "fresh_recv": a.fresh_recv,
                      "results": results}), flush=True)
