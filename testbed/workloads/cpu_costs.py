"""One rank of the host-CPU benchmark (suite.py cpu_costs): the machine's CPU that one gloo
message takes, by size, on the cores every testbed namespace shares.

Rank 0 streams messages to rank 1 (with `--pairs K`, also rank 2 to 3 ... at once: K streams;
torch.distributed isend/irecv over gloo: a payload and
its receiver's notification, as in every gloo collective), `--in-flight` posted at a time and
waited for together, so that python wakes once per batch as it does once per collective (one
at a time, python's own wake-ups per message are in the cost), one size at a time, the other
ranks idle; rank 0 reads the machine's /proc/stat before and after each stream (a barrier on each
side) and once around an idle second. What a stream's messages cost: the busy core-seconds
over the stream less the idle machine's, per message. The hosts' kernels (TCP, veth, bridge,
shaper, soft interrupts) and gloo's threads on both sides are all in it, as they are in a
collective. Prints one JSON line on rank 0.

With `--collective all_reduce` (or all_gather, broadcast, reduce) every rank instead runs that
collective on a tensor of each size back to back, as the benchmark harness does but without its
barrier per call, and the log gives the busy core-seconds per call: what gloo's own messages
cost inside a collective, where no python runs per message (its isend/irecv stream pays a
python call and a work object per message).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

import tb

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, nargs="+", required=True)
    ap.add_argument("--stream-secs", type=float, default=2.0,
                    help="about how long each size streams (at --rate-bytes-per-s)")
    ap.add_argument("--rate-bytes-per-s", type=float, default=25e6)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="every size this many times, in turn")
    ap.add_argument("--collective", default="",
                    choices=["", "all_reduce", "all_gather", "broadcast", "reduce"],
                    help="every rank runs this collective back to back instead of the stream")
    ap.add_argument("--pairs", type=int, default=1,
                    help="this many pairs stream at once (0-1, 2-3, ...): the cost per message "
                         "when that many hosts' threads share the cores")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    me = dist.get_rank()
    dist.barrier()
    b0, t0 = tb.busy_core_secs()
    time.sleep(2.0)
    dist.barrier()
    b1, t1 = tb.busy_core_secs()
    idle_cores = (b1 - b0) / (t1 - t0)
    results = []
    if a.collective:
        results = collective_costs(a, me, idle_cores)
    for nbytes in [b for _ in range(a.rounds) for b in a.bytes if not a.collective]:
        k = a.in_flight
        bufs = [torch.ones(nbytes // 4) for _ in range(k)]
        batches = max(4, int(a.stream_secs * a.rate_bytes_per_s / nbytes / k))
        count = batches * k

        streaming = me < 2 * a.pairs
        count *= a.pairs

        def batch():
            if not streaming:
                return
            if me % 2 == 0:
                reqs = [dist.isend(b, me + 1) for b in bufs]
            else:
                reqs = [dist.irecv(b, me - 1) for b in bufs]
            for r in reqs:
                r.wait()

        secs, busy = busy_over(batch, batches)
        results.append({"bytes": nbytes, "messages": count, "in_flight": k, "pairs": a.pairs,
                        "secs": secs,
                        "busy_core_secs": busy,
                        "core_secs_per_message": (busy - idle_cores * secs) / count})
    if me == 0:
        print(json.dumps({"idle_busy_cores": idle_cores, "cpus": os.cpu_count(),
                          "results": results}), flush=True)
    dist.destroy_process_group()


def collective_costs(a, me, idle_cores):
    """Busy core-seconds per call of `a.collective`, every size `a.rounds` times in turn."""
    n = dist.get_world_size()
    results = []
    for nbytes in [b for _ in range(a.rounds) for b in a.bytes]:
        t = torch.ones(nbytes // 4)
        outs = [torch.empty_like(t) for _ in range(n)]

        def call():
            if a.collective == "all_reduce":
                dist.all_reduce(t)
            elif a.collective == "all_gather":
                dist.all_gather(outs, t)
            elif a.collective == "broadcast":
                dist.broadcast(t, 0)
            else:
                dist.reduce(t, 0)

        calls = max(8, int(a.stream_secs * a.rate_bytes_per_s / nbytes))
        secs, busy = busy_over(call, calls)
        results.append({"collective": a.collective, "bytes": nbytes, "ranks": n, "calls": calls,
                        "secs": secs, "busy_core_secs": busy,
                        "core_secs_per_call": (busy - idle_cores * secs) / calls})
    return results


def busy_over(step, times):
    """(seconds, the machine's busy core-seconds) over `times` runs of `step` on every rank,
    after one untimed run (the connections warm), between barriers."""
    step()
    dist.barrier()
    b0, t0 = tb.busy_core_secs()
    for _ in range(times):
        step()
    dist.barrier()
    b1, t1 = tb.busy_core_secs()
    return t1 - t0, b1 - b0


if __name__ == "__main__":
    main()
