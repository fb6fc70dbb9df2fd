"""One rank of the wake-up-under-load benchmark (suite.py wakeup_load): how long a small gloo
exchange takes while other hosts on the same machine keep its cores busy.

Ranks 0 and 1 time a 4-byte all_reduce on their own group (gloo's ring on two ranks: every
step a message, its notification, and a thread woken to take it), `--calls` times per load
level; ranks 2.. are load: at level k, the first k pairs of them (2-3, 4-5, ...) stream 16 KiB
messages to each other, 8 in flight, as a collective's ranks do, for `--seconds`; rank 0
reads the machine's /proc/stat around its calls at each level. Prints one JSON line
on rank 0: per level the calls' times and the machine's busy cores.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import tb

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--load-bytes", type=int, default=16384)
    ap.add_argument("--seconds", type=float, default=3.0, help="per load level")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    probe = dist.new_group([0, 1])
    pairs = [(2 + 2 * i, 3 + 2 * i) for i in range((n - 2) // 2)]
    results = []
    for level in range(len(pairs) + 1):
        dist.barrier()
        # One clock across the namespaces: every rank stops at the same instant.
        deadline = time.clock_gettime(time.CLOCK_MONOTONIC) + a.seconds
        loaded = [p for p in pairs[:level] if me in p]
        if loaded:
            src, dst = loaded[0]
            bufs = [torch.ones(a.load_bytes // 4) for _ in range(8)]
            flag = torch.zeros(1)
            while True:
                if me == src:
                    reqs = [dist.isend(b, dst) for b in bufs]
                else:
                    reqs = [dist.irecv(b, src) for b in bufs]
                for r in reqs:
                    r.wait()
                # The sender decides when the stream ends and tells the receiver.
                if me == src:
                    flag.fill_(float(time.clock_gettime(time.CLOCK_MONOTONIC) > deadline))
                    dist.send(flag, dst)
                else:
                    dist.recv(flag, src)
                if flag.item() > 0:
                    break
        elif me in (0, 1):
            x = torch.ones(1)
            for _ in range(10):
                dist.all_reduce(x, group=probe)
            time.sleep(0.2)  # let the load settle
            b0, t0 = tb.busy_core_secs()
            secs = []
            for _ in range(a.calls):
                s = time.perf_counter()
                dist.all_reduce(x, group=probe)
                secs.append(time.perf_counter() - s)
                if time.clock_gettime(time.CLOCK_MONOTONIC) > deadline - 0.2:
                    break
            b1, t1 = tb.busy_core_secs()
            if me == 0:
                results.append({"load_pairs": level, "busy_cores": (b1 - b0) / (t1 - t0),
                                "calls": len(secs), "secs": secs,
                                "median_secs": statistics.median(secs),
                                "mean_secs": statistics.fmean(secs)})
        dist.barrier()
    if me == 0:
        print(json.dumps({"ranks": n, "load_bytes": a.load_bytes, "results": results}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
