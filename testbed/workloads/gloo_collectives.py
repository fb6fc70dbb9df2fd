"""One rank of a gloo collective benchmark (launched by suite.py, one process per namespace).

Methods (float32 tensors; --bytes is nccl-tests' size: the all-reduce, broadcast and reduce
buffer, the all-gather's gathered output):
  allreduce     torch.distributed.all_reduce (gloo's ring)
  broadcast     torch.distributed.broadcast from rank 0 (gloo's binomial tree)
  allgather     torch.distributed.all_gather of bytes / n per rank (gloo's ring)
  reduce        torch.distributed.reduce to rank 0 (gloo's ring reduce-scatter, then a gather)
  multiring     several rings over send/recv, each carrying an equal share, rank orders given
  hierarchical  subgroups: ring reduce-scatter within each node group, all_reduce across groups
                of equal local index, all_gather within the group
  ps            synchronous parameter server on rank 0 over send/recv (push, reduce, pull)
  barrier       torch.distributed.barrier (gloo's dissemination barrier; give --bytes 0)
Prints one JSON line on rank 0: per-iteration seconds (max over ranks).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

import tb


def ring_reduce_scatter_allgather(parts, orders, gather=True):
    """Ring all-reduce (or only its reduce-scatter) of parts[i] on ring orders[i] (global
    ranks), all rings stepping together; returns nothing, parts are reduced in place."""
    me = dist.get_rank()
    chunks, pos, nxt, prv = [], [], [], []
    for part, order in zip(parts, orders):
        n = len(order)
        i = order.index(me)
        pos.append(i)
        nxt.append(order[(i + 1) % n])
        prv.append(order[(i - 1) % n])
        chunks.append(list(torch.tensor_split(part, n)))
    n = len(orders[0])
    recv = [torch.empty_like(c[0]) for c in chunks]
    # reduce-scatter: step s, send chunk (i - s), receive chunk (i - s - 1) and add it.
    for s in range(n - 1):
        reqs = []
        for k in range(len(orders)):
            send_c = chunks[k][(pos[k] - s) % n]
            recv_i = (pos[k] - s - 1) % n
            recv[k] = torch.empty_like(chunks[k][recv_i])
            reqs.append(dist.isend(send_c, nxt[k], tag=k))
            reqs.append(dist.irecv(recv[k], prv[k], tag=k))
        for r in reqs:
            r.wait()
        for k in range(len(orders)):
            chunks[k][(pos[k] - s - 1) % n].add_(recv[k])
    if not gather:
        return
    # all-gather: rank owns chunk (i + 1); step s sends chunk (i + 1 - s).
    for s in range(n - 1):
        reqs = []
        for k in range(len(orders)):
            send_c = chunks[k][(pos[k] + 1 - s) % n]
            recv_i = (pos[k] - s) % n
            reqs.append(dist.isend(send_c, nxt[k], tag=k))
            reqs.append(dist.irecv(chunks[k][recv_i], prv[k], tag=k))
        for r in reqs:
            r.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", required=True)
    ap.add_argument("--bytes", type=int, nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--orders", default="", help="multiring: JSON list of rank orders")
    ap.add_argument("--groups", default="", help="hierarchical: JSON list of node groups")
    ap.add_argument("--marks", action="store_true",
                    help="also report every rank's (start, end) per iteration, warmup included")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    orders = json.loads(a.orders) if a.orders else [list(range(n))]
    groups = json.loads(a.groups) if a.groups else []
    sub = {}
    if a.method == "hierarchical":
        local = len(groups[0])
        intra = [dist.new_group(g) for g in groups]
        inter = [dist.new_group([g[l] for g in groups]) for l in range(local)]
        my_g = next(i for i, g in enumerate(groups) if me in g)
        my_l = groups[my_g].index(me)
        sub = {"intra": intra[my_g], "inter": inter[my_l], "group": groups[my_g], "local": my_l}
    results = []
    for nbytes in a.bytes:
        x = torch.ones(nbytes // 4)
        own = torch.ones(nbytes // 4 // n)
        gathered = [torch.empty_like(own) for _ in range(n)]

        def once():
            if a.method == "allreduce":
                dist.all_reduce(x)
            elif a.method == "broadcast":
                dist.broadcast(x, src=0)
            elif a.method == "allgather":
                dist.all_gather(gathered, own)
            elif a.method == "reduce":
                dist.reduce(x, dst=0)
            elif a.method == "barrier":
                dist.barrier()
            elif a.method == "multiring":
                parts = list(torch.tensor_split(x, len(orders)))
                ring_reduce_scatter_allgather(parts, orders)
            elif a.method == "hierarchical":
                g = sub["group"]
                chunks = list(torch.tensor_split(x, len(g)))
                ring_reduce_scatter_allgather([x], [g], gather=False)
                mine = chunks[(sub["local"] + 1) % len(g)]
                dist.all_reduce(mine, group=sub["inter"])
                out = [torch.empty_like(c) for c in chunks]
                dist.all_gather(out, mine, group=sub["intra"])
            elif a.method == "ps":
                if me == 0:
                    bufs = [torch.empty_like(x) for _ in range(n - 1)]
                    reqs = [dist.irecv(bufs[i - 1], i) for i in range(1, n)]
                    for r in reqs:
                        r.wait()
                    for b in bufs:
                        x.add_(b)
                    for r in [dist.isend(x, i) for i in range(1, n)]:
                        r.wait()
                else:
                    dist.send(x, 0)
                    dist.recv(x, 0)
            else:
                raise SystemExit(f"unknown method {a.method}")

        marks = [] if a.marks else None
        ts = tb.timed(once, a.repeats, a.warmup, dist.barrier, marks)
        t = torch.tensor(ts, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        # A barrier moves nothing whatever --bytes says.
        moved = 0 if a.method == "barrier" else nbytes
        results.append({"bytes": moved, "secs": t.tolist()})
        if marks is not None:
            mine = torch.tensor(marks, dtype=torch.float64)
            every = [torch.empty_like(mine) for _ in range(n)]
            dist.all_gather(every, mine)
            results[-1]["start_end_secs_per_rank"] = [e.tolist() for e in every]
    if me == 0:
        print(json.dumps({"results": results}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
