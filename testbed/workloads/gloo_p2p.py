"""One rank of the gloo point-to-point benchmark (suite.py gloo_p2p): how ProcessGroupGloo's
isend/irecv exchanges between two ranks run over their one TCP connection.

gloo's TCP pair (transport/tcp/pair.cc) sends a message's payload only once the receiver's
NOTIFY_RECV_READY has arrived, and that notification is written into the same connection as
the receiver's own sends to the sender, behind whatever it has already written. So when both
ranks post isend, then irecv, the rank that posts later finds its peer's notification waiting,
writes its payload at once and its own notification after it: the other way waits for the
whole first way (twice a one-way send). Posting irecv first notifies before any payload, and
both ways run at once. This log measures that, with each rank's monotonic clock (one machine,
one clock across namespaces) at the moment it posts, so the pair's skew is in the log.

Patterns (pairs from --pairs "a:b,c:d", each a rank and its peer):
  one_way            the first rank of every pair sends, the second receives
  exchange_one_pair  the first pair only: both isend, then irecv
  exchange           every pair: both isend, then irecv
  exchange_recv_first every pair: both irecv, then isend
  gloo_allreduce     every pair runs torch's all_reduce on its two-rank group (gloo's own ring)
Prints one JSON line on rank 0.
"""
import argparse
import json
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--pairs", default="0:2,1:3")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    pairs = [tuple(int(x) for x in p.split(":")) for p in a.pairs.split(",")]
    peer = {}
    for i, (x, y) in enumerate(pairs):
        peer[x], peer[y] = (y, i), (x, i)
    groups = [dist.new_group(list(p)) for p in pairs]
    results = []
    for nbytes in a.bytes:
        x = torch.ones(nbytes // 4)
        r = torch.empty_like(x)

        def exchange(active, recv_first=False):
            if me not in peer or peer[me][1] not in active:
                return
            p = peer[me][0]
            if recv_first:
                reqs = [dist.irecv(r, p), dist.isend(x, p)]
            else:
                reqs = [dist.isend(x, p), dist.irecv(r, p)]
            for q in reqs:
                q.wait()

        def one_way():
            if me in peer:
                p, i = peer[me]
                if pairs[i][0] == me:
                    dist.send(x, p)
                else:
                    dist.recv(r, p)

        def allreduce():
            if me in peer:
                dist.all_reduce(x, group=groups[peer[me][1]])

        every = set(range(len(pairs)))
        patterns = [("one_way", one_way), ("exchange_one_pair", lambda: exchange({0})),
                    ("exchange", lambda: exchange(every)),
                    ("exchange_recv_first", lambda: exchange(every, True)),
                    ("gloo_allreduce", allreduce)]
        for name, fn in patterns:
            rows = []
            for i in range(a.repeats + 1):
                dist.barrier()
                t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
                fn()
                t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
                t = torch.tensor([t0, t1], dtype=torch.float64)
                out = [torch.empty_like(t) for _ in range(n)]
                dist.all_gather(out, t)
                if i > 0:
                    rows.append([o.tolist() for o in out])
            results.append({"bytes": nbytes, "pattern": name,
                            "start_end_secs_per_rank": rows})
    if me == 0:
        print(json.dumps({"pairs": pairs, "results": results}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
