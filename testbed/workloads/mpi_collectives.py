"""One rank of an MPI collective benchmark (mpi4py over OpenMPI, launched by mpirun from
suite.py): Allreduce, Bcast (from rank 0), Reduce (to rank 0), Allgather or Reduce_scatter of
float32 buffers of
each size (for Allgather the size gathered in all, each rank contributing size / ranks; for
Reduce_scatter the vector reduced, each rank keeping size / ranks), or Barrier (give size 0);
prints per-iteration seconds (max over ranks) as JSON on rank 0."""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--op", choices=["allreduce", "bcast", "reduce", "allgather", "reduce_scatter",
                                "barrier"],
                default="allreduce")
ap.add_argument("--bytes", type=int, nargs="+", required=True)
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--marks", action="store_true",
                help="also print every rank's (start, end) of each call on CLOCK_MONOTONIC, one "
                     "clock across the namespaces: the gaps between timed calls")
a = ap.parse_args()
comm = MPI.COMM_WORLD
n = comm.Get_size()
results = []
for nbytes in a.bytes:
    x = np.ones(nbytes // 4, dtype=np.float32)
    y = np.empty_like(x)
    block = np.ones(nbytes // 4 // n, dtype=np.float32)
    gathered = np.empty(block.size * n, dtype=np.float32)
    whole = np.ones(block.size * n, dtype=np.float32)
    ts = []
    marks = []
    for i in range(a.warmup + a.repeats):
        comm.Barrier()
        t = MPI.Wtime()
        if a.marks:
            m0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        if a.op == "allreduce":
            comm.Allreduce(x, y, op=MPI.SUM)
        elif a.op == "bcast":
            comm.Bcast(x, root=0)
        elif a.op == "reduce":
            comm.Reduce(x, y, op=MPI.SUM, root=0)
        elif a.op == "allgather":
            comm.Allgather(block, gathered)
        elif a.op == "barrier":
            comm.Barrier()
        else:
            comm.Reduce_scatter(whole, block, recvcounts=[block.size] * n, op=MPI.SUM)
        ts.append(MPI.Wtime() - t)
        if a.marks:
            marks.append((m0, time.clock_gettime(time.CLOCK_MONOTONIC)))
    ts = np.array(ts[a.warmup:])
    worst = np.empty_like(ts)
    comm.Allreduce(ts, worst, op=MPI.MAX)
    # What moved: all_gather and reduce_scatter round each rank's share down to whole floats.
    moved = nbytes if a.op in ("allreduce", "bcast", "reduce", "barrier") else block.size * n * 4
    row = {"bytes": moved, "secs": worst.tolist()}
    if a.marks:
        row["marks"] = comm.gather(marks, root=0)
    results.append(row)
if comm.Get_rank() == 0:
    print(json.dumps({"results": results}), flush=True)
