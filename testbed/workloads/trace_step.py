"""One rank of a traced DDP training step on the testbed (torch, gloo, CPU): the fixture behind
`dtsim run` of workload traces (data/traces/testbed_ddp_cnn/).

Trains a small CNN (3 convolutions, global average pooling, one linear layer; CIFAR-sized
synthetic inputs) with DistributedDataParallel over gloo, one thread per rank. After --warmup
untraced steps, one step runs under both of PyTorch's recorders at once:
- the execution trace (ExecutionGraphObserver in torch 1.13, ExecutionTraceObserver later):
  every operator with its inputs, outputs, tensor ids, thread and parent, process groups;
- the profiler (Kineto, CPU activities): the same operators with start times and durations,
  the step marked `ProfilerStep#<n>`.
Each rank writes `rank<r>.et.json` and `rank<r>.kineto.json` into --out; rank 0 prints a JSON
summary (step times of the untraced steps, the traced step's wall time, versions).
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.profiler as profiler


def cnn(classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def observer():
    if hasattr(profiler, "ExecutionTraceObserver"):
        return profiler.ExecutionTraceObserver()
    return profiler.ExecutionGraphObserver()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    os.makedirs(a.out, exist_ok=True)
    net = nn.parallel.DistributedDataParallel(cnn())
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()

    untraced = []
    for _ in range(a.warmup):
        dist.barrier()
        t = time.perf_counter()
        step()
        untraced.append(time.perf_counter() - t)

    et_path = os.path.join(a.out, f"rank{me}.et.json")
    eg = observer()
    eg.register_callback(et_path)
    dist.barrier()
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        eg.start()
        t = time.perf_counter()
        with profiler.record_function(f"ProfilerStep#{a.warmup}"):
            step()
        traced = time.perf_counter() - t
        eg.stop()
    eg.unregister_callback()
    prof.export_chrome_trace(os.path.join(a.out, f"rank{me}.kineto.json"))
    times = torch.tensor([traced] + untraced, dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    if me == 0:
        print(json.dumps({
            "ranks": n, "batch": a.batch, "params": sum(p.numel() for p in net.parameters()),
            "traced_step_secs": times[0].item(), "untraced_step_secs": times[1:].tolist(),
            "torch": torch.__version__, "python": platform.python_version(),
            "cpus": os.cpu_count()}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
