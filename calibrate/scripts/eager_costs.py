"""What an eager PyTorch training step costs beyond the GPU's matrix products, for dtsim's
`execution = "eager"` (`calibrate import eager` reads what these write into device.json):

- `host_costs` (`torch_bench.py --host-costs`): the host's seconds per layer kind in each
  phase of a step (forward, backward, optimizer), from steps of chains of tiny layers;
- `kernel_rates` (`--kernel-rates`): the GPU's seconds per element of the memory-bound layer
  kinds (BatchNorm, ReLU, max-pool, residual add, LayerNorm) at large sizes;
- `block_rates` (`--block-rates`, and with `--kernel-rates`): the GPU's seconds of a GPT
  block's kernels besides its matrix products, per element and per stored attention score.

Every layer is torch_bench.py's own module (its GptBlock's halves, torch.nn's layers), so the
costs are those of the code the measured steps run. Nothing here is estimated: every number
written was timed on the device in this run.
"""
import statistics
import sys
import time

import torch
import torch.nn as nn

from torch_bench import ATTENTION, GptBlock


class _Residual(nn.Module):
    """A residual addition as a layer of its own: its input added to itself (torchvision's
    `out += identity`, an add whose backward passes the gradient to both operands)."""

    def forward(self, x):
        return x + x


class _Lookup(nn.Module):
    """An embedding layer in a chain: the input plus the rows of a lookup (a GPT's token and
    position embeddings are two lookups and an add)."""

    def __init__(self, rows, width):
        super().__init__()
        self.table = nn.Embedding(rows, width)
        self.register_buffer("ids", torch.arange(rows), persistent=False)

    def forward(self, x):
        return x + self.table(self.ids)


class _AttentionHalf(nn.Module):
    """The attention half of torch_bench's GptBlock, run by its own code (`GptBlock.attention`);
    the block's MLP is left unused (its parameters get no gradient, which SGD skips)."""

    def __init__(self, hidden, heads, sequence):
        super().__init__()
        self.block = GptBlock(hidden, heads, sequence)

    def forward(self, x):
        return self.block.attention(x)


class _MlpHalf(nn.Module):
    """The MLP half of torch_bench's GptBlock (norm, fc, GELU, fc, residual)."""

    def __init__(self, hidden):
        super().__init__()
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.fc_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return x + self.fc_proj(nn.functional.gelu(self.fc(self.ln_2(x))))


# Layer kinds of dtsim's catalog (`LayerKind`, snake_case) whose eager host cost is measured,
# each as torch runs it in the models above: (kind, image layer?, factory).
HOST_KINDS = [
    ("conv", True, lambda: nn.Conv2d(8, 8, 3, 1, 1, bias=False)),
    ("conv_bias", True, lambda: nn.Conv2d(8, 8, 3, 1, 1)),
    ("norm", True, lambda: nn.BatchNorm2d(8)),
    ("layer_norm", False, lambda: nn.LayerNorm(64)),
    # Out of place: a chain of in-place ReLUs overwrites what each one's backward needs
    # (torchvision's ReLU(inplace=True) follows a norm or an add, one op either way).
    ("activation", True, lambda: nn.ReLU()),
    ("pool", True, lambda: nn.MaxPool2d(3, 1, 1)),
    ("add", True, _Residual),
    ("linear", False, lambda: nn.Linear(64, 64)),
    ("embedding", False, lambda: _Lookup(16, 64)),
    ("attention_block", False, lambda: _AttentionHalf(64, 2, 16)),
    ("mlp_block", False, lambda: _MlpHalf(64)),
]


def host_phase_secs(dev, model, x, reps, warmup=3):
    """Median host seconds of one training step's phases, each read off the host's clock with no
    wait for the device in between: forward (zero_grad, forward under the run's autocast, loss),
    backward (`backward()` returns once autograd has issued every kernel), optimizer (SGD with
    momentum), and the whole step ended by a device synchronize."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(rec):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with dev.autocast():
            loss = model(x).float().sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        dev.sync()
        rec.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t0))

    for _ in range(warmup):
        step([])
    rec = []
    for _ in range(reps):
        step(rec)
    return [statistics.median(c) for c in zip(*rec)]


def host_costs(dev, reps, counts=(8, 24, 72)):
    """The host's cost of each layer kind in an eager training step: steps of a chain of N tiny
    layers of one kind (8-channel 8x8 images, or 16 tokens of 64), behind a stem that gives the
    chain parameters, for each N in `counts`, every phase timed on the host's clock
    (`host_phase_secs`). The kernels do almost nothing, so each phase is what the host takes to
    issue it; the least-squares slope over N is one layer's cost per phase, the intercept the
    step's own (zero_grad, loss, starting backward, the optimizer's fixed cost)."""
    out = dict(counts=list(counts), reps=reps, attention=ATTENTION["kind"], kinds={})
    saved = ATTENTION["kind"]
    kinds = list(HOST_KINDS)
    if hasattr(nn.functional, "scaled_dot_product_attention"):
        kinds.append(("attention_block_fused", False, lambda: _AttentionHalf(64, 2, 16)))
    for kind, image, make in kinds:
        ATTENTION["kind"] = "sdpa" if kind == "attention_block_fused" else "plain"
        per_n = []
        for n in counts:
            stem = nn.Conv2d(8, 8, 1) if image else nn.Linear(64, 64)
            model = nn.Sequential(stem, *[make() for _ in range(n)]).to(dev.torch).train()
            x = torch.randn(*((1, 8, 8, 8) if image else (1, 16, 64)), device=dev.torch)
            per_n.append(host_phase_secs(dev, model, x, reps))
            del model
        fit = {}
        for i, phase in enumerate(("forward", "backward", "optimizer", "step_synchronized")):
            ys = [p[i] for p in per_n]
            mx, my = statistics.fmean(counts), statistics.fmean(ys)
            slope = sum((c - mx) * (y - my) for c, y in zip(counts, ys)) / \
                sum((c - mx) ** 2 for c in counts)
            fit[phase] = dict(secs_per_layer=slope, fixed_secs=my - slope * mx,
                              secs_by_count=ys)
        out["kinds"][kind] = fit
        print(f"host cost {kind}: forward {fit['forward']['secs_per_layer'] * 1e6:.1f} us, "
              f"backward {fit['backward']['secs_per_layer'] * 1e6:.1f} us, optimizer "
              f"{fit['optimizer']['secs_per_layer'] * 1e6:.1f} us a layer; synchronized step "
              f"{fit['step_synchronized']['secs_per_layer'] * 1e6:.1f} us a layer",
              file=sys.stderr, flush=True)
    ATTENTION["kind"] = saved
    return out


# The layers eager PyTorch runs as kernels of their own that move memory and do little
# arithmetic, each at a realistic size: (kind, factory, input shape). Stride-1 pooling keeps the
# chain's shape (a stride-2 pool reads four times what it writes: rates are per element read
# plus written, as dtsim counts a layer's bytes).
KERNEL_KINDS = [
    ("norm", lambda: nn.BatchNorm2d(256), (256, 256, 28, 28)),
    ("activation", lambda: nn.ReLU(), (256, 256, 28, 28)),
    ("pool", lambda: nn.MaxPool2d(3, 1, 1), (256, 256, 28, 28)),
    ("add", _Residual, (256, 256, 28, 28)),
    ("layer_norm", lambda: nn.LayerNorm(1024), (64, 1024, 1024)),
]


def kernel_rates(dev, reps, counts=(4, 12)):
    """The GPU's seconds per element (read plus written) of the memory-bound layer kinds as
    eager PyTorch runs them under the run's autocast: chains of 4 and 12 layers of one kind on
    a large input (100 MB and more a layer, so the GPU, not the host, sets the pace), forward
    (with the loss) and backward each timed between CUDA events; the difference of the two
    chains over 8 layers is one layer, which cancels the stem and the loss."""
    out = dict(counts=list(counts), reps=reps, kinds={})
    for kind, make, shape in KERNEL_KINDS:
        per = []
        for n in counts:
            model = nn.Sequential(*[make() for _ in range(n)]).to(dev.torch).train()
            x = torch.randn(*shape, device=dev.torch, dtype=dev.operand_dtype(),
                            requires_grad=True)
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            fwd, bwd = [], []
            for i in range(reps + 2):
                x.grad = None
                model.zero_grad(set_to_none=True)
                ev[0].record()
                with dev.autocast():
                    loss = model(x).float().mean()
                ev[1].record()
                loss.backward()
                ev[2].record()
                torch.cuda.synchronize()
                if i >= 2:
                    fwd.append(ev[0].elapsed_time(ev[1]) / 1e3)
                    bwd.append(ev[1].elapsed_time(ev[2]) / 1e3)
            per.append((statistics.median(fwd), statistics.median(bwd)))
            del model, x
            torch.cuda.empty_cache()
        elems = 2
        for d in shape:
            elems *= d
        layers = counts[1] - counts[0]
        f = (per[1][0] - per[0][0]) / layers
        b = (per[1][1] - per[0][1]) / layers
        out["kinds"][kind] = dict(shape=list(shape), elements_read_plus_written=elems,
                                  forward_secs=f, backward_secs=b,
                                  forward_secs_per_element=f / elems,
                                  backward_secs_per_element=b / elems,
                                  secs_by_count=per)
        print(f"kernels {kind}: forward {f * 1e6:.1f} us, backward {b * 1e6:.1f} us a layer of "
              f"{elems / 2 / 1e6:.1f} M elements ({elems / f / 1e9 if f > 0 else 0:.0f} and "
              f"{elems / b / 1e9 if b > 0 else 0:.0f} G elements/s)", file=sys.stderr, flush=True)
    return out


# Transformer blocks at shapes no catalog model has (hidden 1024, 16 heads): the same 24,576
# tokens as 96 sequences of 256 and as 32 of 768, so that the stored scores differ threefold at
# equal token work, and each block keeps the GPU busier than the host (3,072 tokens did not).
BLOCK_HIDDEN, BLOCK_HEADS, BLOCK_SHAPES = 1024, 16, ((96, 256), (32, 768))


def _event_secs(dev, fn, reps, inner=1):
    """Median GPU seconds of `fn` between CUDA events (`inner` calls a sample), after a warm-up."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    fn()
    out = []
    for _ in range(reps):
        ev[0].record()
        for _ in range(inner):
            fn()
        ev[1].record()
        torch.cuda.synchronize()
        out.append(ev[0].elapsed_time(ev[1]) / 1e3 / inner)
    return statistics.median(out)


def _block_gemm_secs(dev, kind, b, s, reps):
    """Forward and backward GPU seconds of the matrix products of one block alone: each
    product (m, n, k, count) forward, then its input- and weight-gradient products."""
    h, d, t = BLOCK_HIDDEN, BLOCK_HIDDEN // BLOCK_HEADS, b * s
    if kind == "attention_block":
        products = [(t, 3 * h, h, 1), (s, s, d, b * BLOCK_HEADS), (s, d, s, b * BLOCK_HEADS),
                    (t, h, h, 1)]
    else:
        products = [(t, 4 * h, h, 1), (t, h, 4 * h, 1)]
    dt = dev.operand_dtype()
    fwd = bwd = 0.0
    for m, n, k, c in products:
        for which, (mm, nn_, kk) in enumerate(((m, n, k), (m, k, n), (k, n, m))):
            a = torch.randn(c, mm, kk, device=dev.torch, dtype=dt)
            w = torch.randn(c, kk, nn_, device=dev.torch, dtype=dt)
            secs = _event_secs(dev, lambda: torch.bmm(a, w) if c > 1 else torch.mm(a[0], w[0]),
                               reps, inner=5)
            if which == 0:
                fwd += secs
            else:
                bwd += secs
            del a, w
    return fwd, bwd


def block_rates(dev, reps, counts=(2, 6)):
    """What a transformer block's kernels besides its matrix products cost the GPU in an eager
    step, per element: chains of 2 and 6 of torch_bench's own GPT attention half (scores stored)
    and MLP half at two shapes of equal tokens, forward and backward timed between CUDA events
    (the difference of the chains over 4 is one block), less the block's products timed alone.
    The rest is split into a part per element of the block's input plus output (norms, casts,
    residual adds, transposes, the activation) and, for attention, a part per stored score
    element (scale, mask, softmax and their casts): two shapes, two unknowns."""
    saved = ATTENTION["kind"]
    ATTENTION["kind"] = "plain"
    out = dict(hidden=BLOCK_HIDDEN, heads=BLOCK_HEADS, counts=list(counts), reps=reps, kinds={})
    for kind, make in (("attention_block", lambda s: _AttentionHalf(BLOCK_HIDDEN, BLOCK_HEADS, s)),
                       ("mlp_block", lambda s: _MlpHalf(BLOCK_HIDDEN))):
        shapes = []
        for b, s in BLOCK_SHAPES:
            per = []
            for n in counts:
                model = nn.Sequential(*[make(s) for _ in range(n)]).to(dev.torch).train()
                # The residual stream as the GPT's embeddings give it: fp32, autocast or not.
                x = torch.randn(b, s, BLOCK_HIDDEN, device=dev.torch, requires_grad=True)

                def step():
                    with dev.autocast():
                        y = model(x).float().mean()
                    return y

                f = _event_secs(dev, step, reps)
                loss = step()
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                bw = []
                for _ in range(reps):
                    loss = step()
                    torch.cuda.synchronize()
                    ev[0].record()
                    loss.backward()
                    ev[1].record()
                    torch.cuda.synchronize()
                    bw.append(ev[0].elapsed_time(ev[1]) / 1e3)
                per.append((f, statistics.median(bw)))
                del model, x, loss
                torch.cuda.empty_cache()
            blocks = counts[1] - counts[0]
            fwd = (per[1][0] - per[0][0]) / blocks
            bwd = (per[1][1] - per[0][1]) / blocks
            g_f, g_b = _block_gemm_secs(dev, kind, b, s, reps)
            shapes.append(dict(batch=b, sequence=s, block_forward_secs=fwd,
                               block_backward_secs=bwd, gemm_forward_secs=g_f,
                               gemm_backward_secs=g_b,
                               elements=2 * b * s * BLOCK_HIDDEN,
                               score_elements=b * BLOCK_HEADS * s * s if kind ==
                               "attention_block" else 0))
        fit = {}
        for p in ("forward", "backward"):
            rest = [sh[f"block_{p}_secs"] - sh[f"gemm_{p}_secs"] for sh in shapes]
            e, sc = shapes[0]["elements"], [sh["score_elements"] for sh in shapes]
            if sc[1] != sc[0]:
                per_score = (rest[1] - rest[0]) / (sc[1] - sc[0])
                per_elem = (rest[0] - per_score * sc[0]) / e
            else:
                per_score, per_elem = 0.0, statistics.fmean(rest) / e
            fit[f"{p}_secs_per_element"] = per_elem
            fit[f"{p}_secs_per_score_element"] = per_score
        out["kinds"][kind] = dict(shapes=shapes, **fit)
        print(f"blocks {kind}: " + "; ".join(
            f"{sh['batch']}x{sh['sequence']}: block {sh['block_forward_secs'] * 1e3:.2f} / "
            f"{sh['block_backward_secs'] * 1e3:.2f} ms, products {sh['gemm_forward_secs'] * 1e3:.2f}"
            f" / {sh['gemm_backward_secs'] * 1e3:.2f} ms" for sh in shapes) +
            f"; per element {fit['forward_secs_per_element'] * 1e12:.2f} / "
            f"{fit['backward_secs_per_element'] * 1e12:.2f} ps, per score element "
            f"{fit['forward_secs_per_score_element'] * 1e12:.2f} / "
            f"{fit['backward_secs_per_score_element'] * 1e12:.2f} ps", file=sys.stderr, flush=True)
    ATTENTION["kind"] = saved
    return out
