"""Times the host work gloo does around its transfers, on this machine's CPU, one process:

  python3 testbed/workloads/host_costs.py [--out data/runs/calibration/testbed_host_costs.json]

- copy: what ProcessGroupGloo's all_gather does besides gloo's ring, per call: a fresh flat
  output buffer, this rank's block copied into its slot (gloo's allgather.cc primes it), the
  other blocks written as they arrive (done here by one copy each, standing in for the
  receives' first touch of the fresh pages), and every block copied out to the caller's
  tensors. Timed: the priming copy and the copy out; bytes: the block plus the whole buffer;
  each also on its own (`prime_secs`: the block into fresh pages, which the first touch
  dominates; `out_secs`: the whole buffer into tensors the caller reuses, warm pages).
- reduce: gloo's ring reduction of a received segment into the local one (float32 sum, in
  place), per segment size.

Median of --repeats per size, for 4 ranks (the star's all-gathers). Prints one line per size
and writes the JSON `calibrate import host-costs` reads.
"""
import argparse
import json
import os
import statistics
import time

import torch

import tb

MIB = 1 << 20


def copy_secs(total, n, repeats):
    block = total // n // 4
    own = torch.ones(block)
    gathered = [torch.empty(block) for _ in range(n)]
    ts, primes, outs = [], [], []
    for _ in range(repeats + 2):
        flat = torch.empty(n * block)
        t0 = time.perf_counter()
        flat[0:block].copy_(own)
        t1 = time.perf_counter()
        for i in range(1, n):
            flat[i * block:(i + 1) * block].copy_(own)
        t2 = time.perf_counter()
        for i in range(n):
            gathered[i].copy_(flat[i * block:(i + 1) * block])
        t3 = time.perf_counter()
        ts.append((t1 - t0) + (t3 - t2))
        primes.append(t1 - t0)
        outs.append(t3 - t2)
    return tuple(statistics.median(x[2:]) for x in (ts, primes, outs))


def reduce_secs(seg, repeats):
    a = torch.ones(seg // 4)
    b = torch.ones(seg // 4)
    ts = []
    for _ in range(repeats + 2):
        t0 = time.perf_counter()
        a.add_(b)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts[2:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(tb.ROOT, "data", "runs", "calibration",
                                                  "testbed_host_costs.json"))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--bytes", type=int, nargs="+", default=[MIB // 4, MIB, 4 * MIB, 16 * MIB])
    a = ap.parse_args()
    torch.set_num_threads(1)
    copies, reductions = [], []
    for total in a.bytes:
        secs, prime, out = copy_secs(total, a.ranks, a.repeats)
        block = total // a.ranks
        copied = block + total
        copies.append({"gathered_bytes": total, "copied_bytes": copied, "secs": secs,
                       "prime_bytes": block, "prime_secs": prime, "out_secs": out})
        print(f"copy    {total:>10} B gathered: {copied:>10} B in {secs * 1e3:8.3f} ms "
              f"({copied / secs / 1e9:.2f} GB/s; priming {block / prime / 1e9:.2f} GB/s, "
              f"out {total / out / 1e9:.2f} GB/s)", flush=True)
    for seg in sorted({min(max(b // (2 * a.ranks), 4), MIB) for b in a.bytes}):
        secs = reduce_secs(seg, a.repeats)
        reductions.append({"segment_bytes": seg, "secs": secs})
        print(f"reduce  {seg:>10} B segment in {secs * 1e3:8.3f} ms ({seg / secs / 1e9:.2f} GB/s)",
              flush=True)
    out = {"ranks": a.ranks, "repeats": a.repeats, "threads": 1, "copy": copies,
           "reduce": reductions, "cpus": os.cpu_count(), "date_utc": tb.now(),
           "versions": tb.versions(), "command": "python3 testbed/workloads/host_costs.py"}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
