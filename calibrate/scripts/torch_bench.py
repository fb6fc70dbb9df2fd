"""Single-device PyTorch training runs that dtsim's compute predictions are checked against.

  python3 calibrate/scripts/torch_bench.py --out data/runs/compute/MACHINE [--device auto|cpu|cuda]
      [--models resnet50,alexnet,gpt2,gpt_1_3b] [--batches resnet50=8,16,32 alexnet=32,64,128 | 1,2,4]
      [--dtype fp32|tf32|bf16|fp16] [--steps 20] [--warmup 5] [--threads N] [--profile PATH]
      [--no-trace] [--no-layers] [--no-gemm]

What it measures, on one device, for each model × batch size (synthetic ImageNet-sized data,
SGD with momentum, cross-entropy, the torchvision model; for gpt2 and gpt_1_3b a GPT of the
catalog's shape on random tokens, whole steps and traces only):
- step_times.csv: whole training steps (zero_grad, forward, loss, backward, optimizer step),
  `--warmup` untimed then `--steps` timed, each ended by a device synchronize; median, min, max.
  Each row names the dtsim profile to predict it with (`--profile`), so
  `dtsim validate OUT/step_times.csv` replays it.
- layer_times.csv: every leaf module run alone at its real input shape, forward and backward
  (gradient of its output all ones; no input gradient for the first layer, as in training),
  synchronized, median of `--layer-reps`; rows in execution
  order with the module's type and parameter count, which `calibrate import layer-times` aligns
  with dtsim's catalog model to fill a profile's compute.layer_times.
- device.json: device name, memory, threads, versions; GEMM timings at every convolution's and
  linear layer's im2col shape (forward, input gradient, weight gradient) and a square grid; a
  device copy rate. `calibrate import torch-device` turns it into a profile's compute section.
- trace_MODEL_bBATCH.json(.gz): a PyTorch profiler trace of a few steps of the middle batch size
  (Kineto's Chrome trace where torch has Kineto), for `calibrate import kineto`.
- with --host-costs, --kernel-rates, --block-rates: what an eager step costs the host per
  layer kind and the GPU per element of its memory-bound layers and transformer blocks
  (device.json `eager_host`, `eager_kernels`, `eager_blocks`; eager_costs.py beside this file),
  for `calibrate import eager`.

Nothing here is estimated: every number written was timed on this device in this run.
"""
import argparse
import csv
import datetime
import gzip
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import time

import torch
import torch.nn as nn

DEFAULT_BATCHES = {"resnet50": [8, 16, 32, 64], "alexnet": [32, 64, 128, 256],
                   "gpt2": [4, 8, 16], "gpt_1_3b": [1, 2],
                   "resnet18_cifar": [32, 128, 512, 2048], "bert_base": [8, 32, 128]}
CPU_BATCHES = {"resnet50": [1, 2, 4, 8], "alexnet": [8, 16, 32, 64], "gpt2": [1], "gpt_1_3b": [1],
               "resnet18_cifar": [8, 32], "bert_base": [1, 4]}

# GPT models as dtsim's catalog defines them (sim/src/workload/catalog.rs, TransformerConfig):
# layers, hidden, heads, sequence, vocabulary. Pre-norm blocks with biases, GELU MLP of 4 x hidden,
# learned positions, final LayerNorm, LM head tied to the token embedding, no dropout, attention
# that stores its s x s scores (the catalog's flash_attention = false).
GPT_SHAPES = {"gpt2": (12, 768, 12, 1024, 50257), "gpt_1_3b": (24, 2048, 16, 2048, 50257)}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_atomic(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def csv_text(rows):
    if not rows:
        return ""
    import io
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


class Device:
    """The device, its synchronize, its name and the autocast setting of the dtype."""

    def __init__(self, kind, dtype):
        if kind == "auto":
            kind = "cuda" if torch.cuda.is_available() else "cpu"
        if kind == "cuda" and not torch.cuda.is_available():
            sys.exit("--device cuda: torch sees no CUDA device here")
        self.kind = kind
        self.torch = torch.device(kind)
        self.dtype = dtype
        if kind == "cuda":
            # tf32 means TF32 tensor cores for matmuls and convolutions; fp32 means none.
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            torch.backends.cudnn.allow_tf32 = dtype == "tf32"
            torch.backends.cudnn.benchmark = True
            p = torch.cuda.get_device_properties(0)
            self.name = p.name
            self.memory_bytes = p.total_memory
            self.sms = p.multi_processor_count
        else:
            if dtype in ("tf32", "fp16"):
                sys.exit(f"--dtype {dtype}: not on a CPU (fp32 or bf16)")
            self.name = cpu_name()
            self.memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            self.sms = None
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)

    def sync(self):
        if self.kind == "cuda":
            torch.cuda.synchronize()

    def autocast(self):
        if self.autocast_dtype is None:
            return _Null()
        return torch.autocast(device_type=self.kind, dtype=self.autocast_dtype)

    def operand_dtype(self):
        return self.autocast_dtype or torch.float32


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


# Attention of the GPT blocks: "plain" stores the s x s scores (scale, causal mask, softmax,
# then the product with V, each its own kernel); "sdpa" is torch's fused
# scaled_dot_product_attention (FlashAttention on GPUs that have it), set by --attention.
ATTENTION = {"kind": "plain"}


class GptBlock(nn.Module):
    def __init__(self, hidden, heads, sequence):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.fc_proj = nn.Linear(4 * hidden, hidden)
        causal = torch.tril(torch.ones(sequence, sequence, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def attention(self, x):
        """The attention half: norm, QKV, attention, projection, residual."""
        b, t, h = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
        q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        if ATTENTION["kind"] == "sdpa":
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (h // self.heads) ** -0.5
            scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
            y = scores.softmax(dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, h)
        return x + self.proj(y)

    def forward(self, x):
        x = self.attention(x)
        return x + self.fc_proj(nn.functional.gelu(self.fc(self.ln_2(x))))


class Gpt(nn.Module):
    """A GPT of dtsim's catalog shape; input token ids (batch, sequence), output logits."""

    def __init__(self, layers, hidden, heads, sequence, vocabulary):
        super().__init__()
        self.sequence, self.vocabulary = sequence, vocabulary
        self.wte = nn.Embedding(vocabulary, hidden)
        self.wpe = nn.Embedding(sequence, hidden)
        self.h = nn.ModuleList(GptBlock(hidden, heads, sequence) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


class BertLayer(nn.Module):
    """A post-norm encoder layer (BERT): attention, add, LayerNorm, GELU MLP, add, LayerNorm."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln_1 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.fc_proj = nn.Linear(4 * hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        if ATTENTION["kind"] == "sdpa":
            y = nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            y = ((q @ k.transpose(-2, -1)) * (h // self.heads) ** -0.5).softmax(dim=-1) @ v
        x = self.ln_1(x + self.proj(y.transpose(1, 2).reshape(b, t, h)))
        return self.ln_2(x + self.fc_proj(nn.functional.gelu(self.fc(x))))


class Bert(nn.Module):
    """BERT-base as dtsim's catalog has it (Hugging Face BertModel with its pooler, 109,482,240
    parameters): token, position and token-type embeddings with a LayerNorm, 12 post-norm layers
    of 768, the pooler on the first token; input token ids (batch, 128), output the pooled
    vector (no pre-training heads: the loss is on the pooler's output)."""

    def __init__(self, layers=12, hidden=768, heads=12, sequence=128, vocabulary=30522):
        super().__init__()
        self.sequence, self.vocabulary = sequence, vocabulary
        self.word = nn.Embedding(vocabulary, hidden)
        self.position = nn.Embedding(512, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(BertLayer(hidden, heads) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.ln(self.word(tokens) + self.position(pos) + self.token_type(torch.zeros_like(tokens)))
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


class CifarBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet18(nn.Module):
    """ResNet-18 for CIFAR-10 as kuangliu/pytorch-cifar builds it (3x3 stem, no max-pool, 10
    classes; 11,173,962 parameters, dtsim's resnet18_cifar); input 32 x 32 images."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [CifarBlock(cin, cout, stride), CifarBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.linear = nn.Linear(512, 10)

    def forward(self, x):
        out = self.blocks(torch.relu(self.bn1(self.conv1(x))))
        return self.linear(nn.functional.adaptive_avg_pool2d(out, 1).flatten(1))


def is_gpt(name):
    """Whether `name` is one of the transformers (token ids in, no per-layer timing)."""
    return name in GPT_SHAPES or name == "bert_base"


def build_model(name, dev=None):
    """The model, its parameters created on `dev` where torch can (2.0+: a 1.3B GPT initialized
    on the CPU takes seconds per build)."""
    import contextlib
    here = dev.torch if dev is not None and hasattr(torch.device, "__enter__") else None
    with here if here is not None else contextlib.nullcontext():
        if name in GPT_SHAPES:
            model = Gpt(*GPT_SHAPES[name])
        elif name == "bert_base":
            model = Bert()
        elif name == "resnet18_cifar":
            model = CifarResNet18()
        else:
            import torchvision.models as tvm
            if not hasattr(tvm, name):
                sys.exit(f"--models: torchvision has no model {name!r}")
            model = getattr(tvm, name)()
    return model if dev is None else model.to(dev.torch)


def timed(dev, fn, warmup, reps):
    """Median, min and max seconds of `fn` over `reps` synchronized calls after `warmup`."""
    for _ in range(warmup):
        fn()
    dev.sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        dev.sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out), max(out)


def training_step(model, dev, batch, compiled=False):
    """One step: synthetic ImageNet images and labels, or for a GPT random token ids and next
    tokens (cross-entropy over every position); the forward through torch.compile'd `model`
    when `compiled`."""
    if isinstance(model, Gpt):
        shape = (batch, model.sequence)
        x = torch.randint(0, model.vocabulary, shape, device=dev.torch)
        y = torch.randint(0, model.vocabulary, shape, device=dev.torch)
        ce = nn.CrossEntropyLoss()

        def loss_fn(logits, target):
            return ce(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    elif isinstance(model, Bert):
        x = torch.randint(0, model.vocabulary, (batch, model.sequence), device=dev.torch)
        y = None

        def loss_fn(pooled, _):
            return pooled.float().square().mean()
    elif isinstance(model, CifarResNet18):
        x = torch.randn(batch, 3, 32, 32, device=dev.torch)
        y = torch.randint(0, 10, (batch,), device=dev.torch)
        loss_fn = nn.CrossEntropyLoss()
    else:
        x = torch.randn(batch, 3, 224, 224, device=dev.torch)
        y = torch.randint(0, 1000, (batch,), device=dev.torch)
        loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler() if dev.dtype == "fp16" else None
    forward = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with dev.autocast():
            loss = loss_fn(forward(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    return step


def leaf_calls(model, dev, batch):
    """(module name, module, input shape) of every leaf module call in one forward, in order."""
    calls, hooks = [], []
    for name, m in model.named_modules():
        if len(list(m.children())) == 0:
            hooks.append(m.register_forward_hook(
                lambda mod, inp, out, name=name: calls.append((name, mod, tuple(inp[0].shape)))))
    with torch.no_grad(), dev.autocast():
        model(torch.randn(batch, 3, 224, 224, device=dev.torch))
    for h in hooks:
        h.remove()
    return calls


def layer_times(model_name, model, dev, batch, reps):
    """Forward and backward seconds of each leaf module call run alone at its input shape."""
    rows = []
    for i, (name, mod, shape) in enumerate(leaf_calls(model, dev, batch)):
        if isinstance(mod, nn.ReLU):
            mod = nn.ReLU(inplace=False)  # in place on a leaf input cannot be differentiated
        # The model's input needs no gradient: its first layer computes only weight gradients.
        x = torch.randn(shape, device=dev.torch, dtype=dev.operand_dtype(), requires_grad=i > 0)
        with dev.autocast():
            out = mod(x)
        g = torch.ones_like(out)

        def fwd():
            with dev.autocast():
                mod(x)

        def bwd():
            out.backward(g, retain_graph=True)

        f = timed(dev, fwd, 2, reps)
        b = timed(dev, bwd, 2, reps) if out.requires_grad else (0.0, 0.0, 0.0)
        rows.append(dict(model=model_name, batch=batch, dtype=dev.dtype, index=i, module=name,
                         type=type(mod).__name__,
                         params=sum(p.numel() for p in mod.parameters()),
                         input_shape="x".join(str(s) for s in shape),
                         forward_secs=f"{f[0]:.9f}", backward_secs=f"{b[0]:.9f}",
                         forward_min_secs=f"{f[1]:.9f}", backward_min_secs=f"{b[1]:.9f}",
                         reps=reps))
        mod.zero_grad(set_to_none=True)
    return rows


def gemm_shapes(model, dev, batch):
    """im2col GEMM (m, n, k, count) of each convolution and linear call: forward, input gradient
    (not for the first layer) and weight gradient, as dtsim's catalog defines them."""
    out = []
    for i, (name, mod, shape) in enumerate(leaf_calls(model, dev, batch)):
        if isinstance(mod, nn.Conv2d):
            n_, c, h, w = shape
            kh, kw = mod.kernel_size
            sh, sw = mod.stride
            ph, pw = mod.padding
            ho = (h + 2 * ph - kh) // sh + 1
            wo = (w + 2 * pw - kw) // sw + 1
            g = mod.groups
            m, n, k = n_ * ho * wo, mod.out_channels // g, c // g * kh * kw
        elif isinstance(mod, nn.Linear):
            m, n, k, g = shape[0], mod.out_features, mod.in_features, 1
        else:
            continue
        for pass_, (a, b, c2) in (("forward", (m, n, k)), ("input_grad", (m, k, n)),
                                  ("weight_grad", (n, k, m))):
            if pass_ == "input_grad" and i == 0:
                continue  # the model's input needs no gradient
            out.append(dict(layer=name, pass_=pass_, m=a, n=b, k=c2, count=g))
    return out


def time_gemm(dev, m, n, k, count, reps):
    dt = dev.operand_dtype()
    a = torch.randn(count, m, k, device=dev.torch, dtype=dt)
    b = torch.randn(count, k, n, device=dev.torch, dtype=dt)
    return timed(dev, lambda: torch.bmm(a, b) if count > 1 else torch.mm(a[0], b[0]), 2, reps)


def copy_rate(dev, reps):
    n = (256 << 20) if dev.kind == "cuda" else (64 << 20)
    src = torch.empty(n, dtype=torch.uint8, device=dev.torch)
    dst = torch.empty_like(src)
    med, lo, hi = timed(dev, lambda: dst.copy_(src), 2, reps)
    return dict(bytes=n, secs_median=med, secs_min=lo, secs_max=hi,
                read_plus_write_bytes_per_s=2 * n / med)


def module_step_cost(dev, reps, blocks=64):
    """The host's cost per kernel inside a training step: a step (forward, loss, backward, SGD
    with momentum, under the run's autocast) of `blocks` tiny convolution + BatchNorm + ReLU
    blocks on one 8-channel 8x8 image, whose kernels each do almost nothing, so that the step is
    the host's time to issue them (Python, modules, autograd, dispatch, launch). Kernels per step
    are counted with the profiler where it sees the device (CUDA), else left out."""
    layers = []
    for _ in range(blocks):
        layers += [nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev.torch).train()
    x = torch.randn(1, 8, 8, 8, device=dev.torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        with dev.autocast():
            loss = model(x).float().sum()
        loss.backward()
        opt.step()

    med, lo, hi = timed(dev, step, 3, reps)
    kernels = None
    if dev.kind == "cuda" and torch.autograd.kineto_available():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            step()
            dev.sync()
        # Kernels are events of their own in newer torch, attached to their CPU op in older.
        events = p.events()
        on_device = sum(1 for e in events
                        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
        attached = sum(len(getattr(e, "kernels", None) or []) for e in events)
        kernels = max(on_device, attached) or None
    return dict(blocks=blocks, step_secs_median=med, step_secs_min=lo, kernels=kernels,
                secs_per_kernel=med / kernels if kernels else None)


def kernel_costs(dev, reps):
    """What an eager framework's step is made of besides GEMMs, each timed alone:
    - issue: seconds per tiny operation when operations are issued back to back and waited for
      once (the host's cost per op: Python, dispatcher, kernel launch), and `launch_sync` with a
      wait after each (issue plus the device's round trip);
    - module_step: the host's cost per kernel inside a whole training step of tiny layers
      (modules, autograd and the optimizer around each launch; `module_step_cost`);
    - elementwise: bytes read plus written per second of large out-of-place additions,
      softmax over rows of 1024 and LayerNorm over rows of 1024 in the run's dtype."""
    dt = dev.operand_dtype()
    tiny = torch.ones(1, device=dev.torch)
    n_ops = 2000

    def burst():
        for _ in range(n_ops):
            tiny.add_(1.0)

    issue = timed(dev, burst, 1, reps)
    sync = timed(dev, lambda: tiny.add_(1.0), 10, 200)
    out = dict(issue_secs_per_op=issue[0] / n_ops, issue_ops=n_ops,
               launch_sync_secs=sync[0], module_step=module_step_cost(dev, reps),
               elementwise=[])
    elems = [1 << 16, 1 << 20, 1 << 24] + ([1 << 26, 1 << 28] if dev.kind == "cuda" else [])
    e = torch.finfo(dt).bits // 8
    for n in elems:
        x = torch.randn(n // 1024, 1024, device=dev.torch, dtype=dt)
        y = torch.randn_like(x)
        ln = nn.LayerNorm(1024, device=dev.torch, dtype=dt)
        for op, fn, moved in (("add", lambda: x + y, 3), ("softmax", lambda: x.softmax(-1), 2),
                              ("layer_norm", lambda: ln(x), 2)):
            with torch.no_grad():
                med, lo, hi = timed(dev, fn, 2, reps)
            out["elementwise"].append(dict(op=op, elements=n, dtype=dev.dtype, secs_median=med,
                                           secs_min=lo, bytes_moved=moved * n * e,
                                           bytes_per_s=moved * n * e / med))
        del x, y, ln
    return out


def parse_batches(items, models, cpu):
    default = CPU_BATCHES if cpu else DEFAULT_BATCHES
    out = {m: list(default.get(m, [1, 2, 4, 8])) for m in models}
    plain = []  # `--batches 4 8` and `--batches 4,8` alike: for every model
    for item in items or []:
        try:
            if "=" in item:
                m, v = item.split("=", 1)
                if m not in out:
                    sys.exit(f"--batches {item}: {m} is not in --models")
                out[m] = [int(b) for b in v.split(",")]
            else:
                plain += [int(b) for b in item.split(",")]
        except ValueError:
            sys.exit(f"--batches {item}: whole numbers, e.g. 8,16 or resnet50=8,16")
    if plain:
        for m in out:
            out[m] = plain
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--models", default="resnet50,alexnet")
    ap.add_argument("--batches", nargs="*")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layer-reps", type=int, default=10)
    ap.add_argument("--gemm-reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--profile", default="",
                    help="the dtsim profile(s) rows are predicted with, ';'-separated, "
                         "relative to the repository root")
    ap.add_argument("--label", default="", help="what this machine is, for the rows")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--no-layers", action="store_true")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--attention", default="plain", choices=["plain", "sdpa"],
                    help="GPT attention: scores stored (plain) or torch's fused SDPA")
    ap.add_argument("--compile", action="store_true",
                    help="train the torch.compile'd model (warm-up steps include compiling)")
    ap.add_argument("--host-costs", action="store_true",
                    help="also time the host's cost per layer kind in eager steps (device.json "
                         "eager_host; `calibrate import eager`)")
    ap.add_argument("--kernel-rates", action="store_true",
                    help="also time the GPU's rate of eager memory-bound layers (device.json "
                         "eager_kernels; CUDA only)")
    ap.add_argument("--block-rates", action="store_true",
                    help="only the transformer blocks of --kernel-rates (device.json eager_blocks)")
    ap.add_argument("--kernels", action="store_true",
                    help="also time per-op issue cost and elementwise rates (device.json)")
    a = ap.parse_args()

    ATTENTION["kind"] = a.attention
    torch.set_num_threads(a.threads or os.cpu_count())
    torch.manual_seed(0)
    dev = Device(a.device, a.dtype)
    models = [m for m in a.models.split(",") if m]
    batches = parse_batches(a.batches, models, dev.kind == "cpu")
    os.makedirs(a.out, exist_ok=True)
    common = dict(device=dev.kind, device_name=dev.name, dtype=a.dtype,
                  threads=torch.get_num_threads(), host=socket.gethostname(),
                  torch=torch.__version__, date_utc=now())
    print(f"{dev.name} ({dev.kind}), torch {torch.__version__}, {a.dtype}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr, flush=True)

    steps, layers, gemms, done_shapes = [], [], [], {}
    for name in models:
        for batch in batches[name]:
            model = build_model(name, dev).train()
            try:
                step = training_step(model, dev, batch, a.compile)
                med, lo, hi = timed(dev, step, a.warmup, a.steps)
            except RuntimeError as e:  # out of memory at this batch: say so, go on
                if "out of memory" not in str(e):
                    raise
                print(f"{name} batch {batch}: out of memory, skipped", file=sys.stderr, flush=True)
                del model
                torch.cuda.empty_cache()
                continue
            print(f"{name} batch {batch}: {med * 1e3:.2f} ms/step (min {lo * 1e3:.2f}, "
                  f"max {hi * 1e3:.2f})", file=sys.stderr, flush=True)
            steps.append(dict(model=name, batch=batch, **common,
                              attention=a.attention if is_gpt(name) else "",
                              compiled=int(a.compile), steps=a.steps, warmup=a.warmup,
                              step_secs_median=f"{med:.9f}", step_secs_min=f"{lo:.9f}",
                              step_secs_max=f"{hi:.9f}",
                              samples_per_s=f"{batch / med:.3f}", profile=a.profile,
                              load1=f"{os.getloadavg()[0]:.2f}",
                              machine=a.label or socket.gethostname(),
                              command=" ".join(sys.argv)))
            # Layers alone and their GEMM shapes are the ImageNet CNNs' (leaf_calls feeds 224 x
            # 224 images); a transformer's layer GEMMs, and the CIFAR ResNet's, are timed by
            # `calibrate gpu --layer-models gpt2,resnet18_cifar,...`.
            if not a.no_layers and not is_gpt(name) and name != "resnet18_cifar":
                layers += layer_times(name, model, dev, batch, a.layer_reps)
            if not a.no_gemm and not is_gpt(name) and name != "resnet18_cifar":
                for s in gemm_shapes(model, dev, batch):
                    key = (s["m"], s["n"], s["k"], s["count"])
                    if key not in done_shapes:
                        done_shapes[key] = time_gemm(dev, *key, a.gemm_reps)
                    med_g, lo_g, hi_g = done_shapes[key]
                    gemms.append(dict(model=name, batch=batch, layer=s["layer"],
                                      **{"pass": s["pass_"]}, m=s["m"], n=s["n"], k=s["k"],
                                      count=s["count"], dtype=a.dtype, secs_median=med_g,
                                      secs_min=lo_g, secs_max=hi_g))
            del model
            if dev.kind == "cuda":
                torch.cuda.empty_cache()
        if not a.no_trace:
            trace(name, batches[name][len(batches[name]) // 2], dev, a.out)
        # Rows are written after every model, so an interrupted run keeps what it measured.
        write_atomic(os.path.join(a.out, "step_times.csv"), csv_text(steps))
        if layers:
            write_atomic(os.path.join(a.out, "layer_times.csv"), csv_text(layers))

    info = dict(common, memory_bytes=dev.memory_bytes, multiprocessors=dev.sms,
                python=platform.python_version(), machine=a.label or socket.gethostname(),
                cuda=getattr(torch.version, "cuda", None),
                cudnn=torch.backends.cudnn.version() if dev.kind == "cuda" else None)
    if not a.no_gemm:
        grid = []
        for s in (256, 512, 1024, 2048) + ((4096, 8192) if dev.kind == "cuda" else ()):
            med_g, lo_g, hi_g = time_gemm(dev, s, s, s, 1, a.gemm_reps)
            grid.append(dict(m=s, n=s, k=s, count=1, dtype=a.dtype, secs_median=med_g,
                             secs_min=lo_g, secs_max=hi_g))
        info.update(gemm_grid=grid, layer_gemms=gemms, copy=copy_rate(dev, a.gemm_reps))
    if a.kernels:
        info.update(kernels=kernel_costs(dev, a.gemm_reps))
    if a.host_costs or a.kernel_rates or a.block_rates:
        import eager_costs  # beside this file; it builds on the models above
        if a.host_costs:
            info.update(eager_host=eager_costs.host_costs(dev, a.steps))
        if a.kernel_rates and dev.kind == "cuda":
            info.update(eager_kernels=eager_costs.kernel_rates(dev, a.steps))
        if (a.kernel_rates or a.block_rates) and dev.kind == "cuda":
            info.update(eager_blocks=eager_costs.block_rates(dev, a.steps))
    write_atomic(os.path.join(a.out, "device.json"), json.dumps(info, indent=1) + "\n")
    print(f"wrote {a.out}: step_times.csv" + (", layer_times.csv" if layers else "") +
          ", device.json" + ("" if a.no_trace else ", traces"), file=sys.stderr)


def trace(name, batch, dev, out_dir):
    """A profiler trace of 3 training steps after 2 warm-up steps. Without Kineto (some CPU
    builds of torch), the legacy autograd profiler writes the trace: CPU ops only, no steps."""
    model = build_model(name, dev).train()
    step = training_step(model, dev, batch)
    path = os.path.join(out_dir, f"trace_{name}_b{batch}.json")
    tmp = f"{path}.tmp{os.getpid()}.json"
    if torch.autograd.kineto_available():
        from torch.profiler import ProfilerActivity, profile, schedule
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.kind == "cuda" else [])
        # Exported when the active steps end: later torch clears a cycle's events after it, so
        # an export after the `with` finds none.
        with profile(activities=acts, schedule=schedule(wait=0, warmup=2, active=3),
                     record_shapes=True, with_modules=True,
                     on_trace_ready=lambda prof: prof.export_chrome_trace(tmp)) as p:
            for _ in range(5):
                step()
                dev.sync()
                p.step()
        if not os.path.exists(tmp):
            p.export_chrome_trace(tmp)
    else:
        for _ in range(2):
            step()
        dev.sync()
        with torch.autograd.profiler.profile(record_shapes=True) as p:
            for i in range(3):
                with torch.autograd.profiler.record_function(f"ProfilerStep#{i}"):
                    step()
                    dev.sync()
        p.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.open(path + ".gz.tmp", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(tmp)
    os.replace(path + ".gz.tmp", path + ".gz")


if __name__ == "__main__":
    main()
