"""One rank of a data-parallel training benchmark on the testbed (torch, gloo, CPU).

Model: an MLP (--model mlp: 1024 -> 4 x [Linear 1024 + ReLU] -> Linear 10), SGD, synthetic data.
1. Compute calibration, every rank at once (so CPU sharing is as in the run): per-layer forward
   and backward times at this batch, the optimizer step, a full compute-only step. Rank 0 writes
   the dtsim model file (data/runs/models/) and a compute profile (layer_times, measured) next
   to the testbed link profile.
2. Steps with communication: ddp (DistributedDataParallel, --bucket-mib), allreduce_after_backward
   (one all_reduce of all gradients after backward), parameter_server (rank 0 is the server:
   gradients pushed over send/recv, rank 0 steps the optimizer, parameters pulled).
Prints JSON on rank 0: step seconds, compute seconds, paths.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import tb

ROOT = os.path.abspath(os.path.join(tb.HERE, "..", ".."))


def mlp(width=1024, hidden_layers=4, classes=10):
    mods, names = [], []
    d = width
    for i in range(hidden_layers):
        mods += [nn.Linear(d, width), nn.ReLU()]
        names += [f"fc{i}", f"relu{i}"]
    mods.append(nn.Linear(width, classes))
    names.append("head")
    return nn.Sequential(*mods), names, width


def model_toml(model, names, width):
    lines = ["# Written by testbed/workloads/train.py: the MLP it trains, per sample.",
             'name = "testbed_mlp"', f"input_elements = {width}", ""]
    for m, n in zip(model, names):
        if isinstance(m, nn.Linear):
            p = m.in_features * m.out_features + m.out_features
            lines += ["[[layer]]", f'name = "{n}"', 'kind = "linear"', f"params = {p}",
                      f"forward_flops = {2 * m.in_features * m.out_features}",
                      f"output_elements = {m.out_features}", ""]
        else:
            lines += ["[[layer]]", f'name = "{n}"', 'kind = "activation"', "forward_flops = 0",
                      f"output_elements = {width}", ""]
    return "\n".join(lines)


def med_time(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--bucket-mib", type=int, default=25)
    # A second recording of the steps (`collect.sh rerecord_training`) leaves the model file and
    # the compute profile the first recording wrote, which its scored rows name, as they are.
    ap.add_argument("--keep-files", action="store_true",
                    help="measure and report, but write neither the model file nor the profile")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    model, names, width = mlp()
    x = torch.randn(a.batch, width)
    y = torch.randint(0, 10, (a.batch,))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    # 1. compute calibration (all ranks concurrently)
    dist.barrier()
    layer_times = []
    h = x
    for m, name in zip(model, names):
        inp = h.detach().requires_grad_(True)
        fwd = med_time(lambda: m(inp), 5)
        out = m(inp)
        g = torch.ones_like(out)
        bwd = med_time(lambda: torch.autograd.backward(out, g, retain_graph=True), 5)
        layer_times.append((name, fwd, bwd))
        h = out.detach()
    model.zero_grad()

    def compute_step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    opt_secs = med_time(opt.step, 5)
    compute_secs = med_time(compute_step, 5)
    t = torch.tensor([compute_secs, opt_secs] + [v for _, f, b in layer_times for v in (f, b)])
    dist.all_reduce(t)
    t /= n  # mean over ranks
    compute_secs, opt_secs = t[0].item(), t[1].item()
    layer_times = [(nm, t[2 + 2 * i].item(), t[3 + 2 * i].item()) for i, (nm, _, _) in enumerate(layer_times)]

    # 2. steps with communication
    params = list(model.parameters())
    if a.method == "ddp":
        net = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mib)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
    elif a.method == "allreduce_after_backward":
        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            flat /= n
            o = 0
            for p in params:
                p.grad.copy_(flat[o:o + p.numel()].view_as(p))
                o += p.numel()
            opt.step()
    elif a.method == "parameter_server":
        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            if me == 0:
                bufs = [torch.empty_like(flat) for _ in range(n - 1)]
                for r in [dist.irecv(bufs[i - 1], i) for i in range(1, n)]:
                    r.wait()
                for b in bufs:
                    flat += b
                flat /= n
                o = 0
                for p in params:
                    p.grad.copy_(flat[o:o + p.numel()].view_as(p))
                    o += p.numel()
                opt.step()
                pflat = torch.cat([p.data.reshape(-1) for p in params])
                for r in [dist.isend(pflat, i) for i in range(1, n)]:
                    r.wait()
            else:
                dist.send(flat, 0)
                pflat = torch.empty_like(flat)
                dist.recv(pflat, 0)
                o = 0
                for p in params:
                    p.data.copy_(pflat[o:o + p.numel()].view_as(p))
                    o += p.numel()
    else:
        raise SystemExit(f"unknown method {a.method}")
    ts = tb.timed(step, a.steps, 1, dist.barrier)
    tt = torch.tensor(ts, dtype=torch.float64)
    dist.all_reduce(tt, op=dist.ReduceOp.MAX)

    if me == 0:
        nparams = sum(p.numel() for p in params)
        mdir = os.path.join(ROOT, "data", "runs", "models")
        os.makedirs(mdir, exist_ok=True)
        mfile = os.path.join(mdir, "testbed_mlp.toml")
        if not a.keep_files:
            with open(mfile, "w") as f:
                f.write(model_toml(model, names, width))
        topo = os.path.splitext(os.path.basename(os.environ.get("DTSIM_TESTBED_TOPOLOGY", "x")))[0]
        link_profile = os.path.join(ROOT, "data", "profiles", f"testbed_{topo}.json")
        prof = json.load(open(link_profile)) if os.path.exists(link_profile) else {
            "schema_version": 1, "name": f"testbed_{topo}", "network": {},
            "provenance": {"source": "measured", "detail": "dtsim testbed"}}
        when = tb.now()
        det = (f"measured in-run by testbed/workloads/train.py on {n} ranks at once "
               f"(batch {a.batch}, torch {torch.__version__}, 1 thread per rank, {os.cpu_count()} "
               f"CPUs shared, load {tb.load1():.1f}); median of 5, mean over ranks")
        pv = {"source": "measured", "detail": det, "date": when}
        sgd_bytes = 12 * nparams
        prof["name"] = f"testbed_{topo}_{a.method}"
        prof["compute"] = {
            "device": f"CPU ({os.cpu_count()} cores, shared), torch {torch.__version__}",
            "peak_flops_per_s": {"fp32": {"value": 2 * sum(
                m.in_features * m.out_features for m in model if isinstance(m, nn.Linear)) * a.batch
                / max(1e-9, sum(f for _, f, _ in layer_times)), "provenance": pv}},
            "matmul_efficiency": {"value": 1.0, "provenance": {"source": "measured", "detail":
                "peak_flops_per_s is the measured forward rate of this model, so efficiency 1; "
                "layer_times cover every layer", "date": when}},
            "half_efficiency_flops": {"value": 0.0, "provenance": {"source": "measured", "detail":
                "unused: every layer has a measured time at this batch", "date": when}},
            "memory_bandwidth": {"value": f"{sgd_bytes / opt_secs:.0f}B/s", "provenance": {
                "source": "measured", "detail": det + f"; SGD step {opt_secs*1e3:.2f} ms over "
                f"{nparams} params x 12 B", "date": when}},
            "memory_efficiency": {"value": 1.0, "provenance": pv},
            "memory_capacity": {"value": "4GiB", "provenance": {"source": "nominal", "detail":
                "not a limit on this CPU run; the largest batch is not validated", "date": when}},
            "layer_overhead": {"value": "0s", "provenance": {"source": "measured", "detail":
                "included in the measured layer and optimizer times", "date": when}},
            "layer_times": [{"model": "testbed_mlp", "layer": nm, "batch": a.batch,
                             "forward": f"{f*1e6:.1f}us", "backward": f"{b*1e6:.1f}us",
                             "provenance": pv} for nm, f, b in layer_times],
        }
        pfile = os.path.join(ROOT, "data", "profiles", f"testbed_{topo}_{a.method}.json")
        if not a.keep_files:
            with open(pfile + ".tmp", "w") as f:
                json.dump(prof, f, indent=2)
                f.write("\n")
            os.replace(pfile + ".tmp", pfile)
        print(json.dumps({"step_secs": tt.tolist(), "compute_secs": compute_secs,
                          "gradient_bytes": 4 * nparams,
                          "model_file": os.path.relpath(mfile, ROOT),
                          "profile": os.path.relpath(pfile, ROOT)}), flush=True)
    # Every rank leaves together: a rank torn down while rank 0 (the rendezvous store's host)
    # still writes its files spun at exit on 2026-12-03 until the launch's timeout.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
