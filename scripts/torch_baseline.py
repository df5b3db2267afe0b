#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the shapes of tests/cuda/cuda_check.cu's tables, side by side
with our kernels: RMSNorm and LayerNorm, softmax, SwiGLU, add, RoPE, AdamW, cross-entropy with
z-loss (bandwidth, against the measured copy bandwidth), and causal attention forward and backward
through scaled_dot_product_attention with the flash and cuDNN backends (TFLOP/s).

    python3 scripts/torch_baseline.py [--bench OUT/gpu-check.json] [--out DIR] [--no-compile]
                                      [--gpt2-flops FLOPS_PER_STEP]
    python3 scripts/torch_baseline.py --small [--no-compile] [--budget SECONDS]
                                      norms.toml's model only (gpu-check's small section)

Timing as in cuda_check: CUDA events around each call, 256 MiB of L2 flush before each, 3 warm-up
calls, median of 20 with the spread (min..max); random inputs, never zeros. Bytes are counted as
cuda_check counts them (what the operation must read and write once), so GB/s compare directly.
A GPT-2-small train step (124M parameters, batch 8 x 1024, bf16 autocast with float weights,
AdamW, SDPA's flash attention) in eager mode and under torch.compile gives PyTorch's MFU beside
ours: `--gpt2-flops` is bench's own FLOP count of that step (tests/cuda/gpt2_small.toml) and the
denominator is cuda_check's bf16 GEMM ceiling, so both MFUs share numerator and denominator.

--bench takes scripts/gpu-check.sh's gpu-check.json (an array of rows: section, check, result,
value, unit, detail): cuda_check's "ceiling/copy", "ceiling/gemm/bf16 square",
"bandwidth/<kernel>/<dtype>" and "attention/flash forward|backward" rows.

Exit 77 where there is no PyTorch or no GPU (nothing measured)."""
import argparse
import json
import math
import os
import re
import sys
import time

REPS, WARMUP = 20, 3


def time_ms(torch, fn):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def row_kernels(torch, dtype):
    """(kernel, shape, bytes, make) where make(compiled) returns the function to time."""
    F = torch.nn.functional
    rows, cols = 16384, 4096
    n, e = rows * cols, torch.tensor([], dtype=dtype).element_size()
    gen = torch.Generator(device="cuda").manual_seed(21)

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32).to(dt)

    x, dy, w = randn(rows, cols) * 2 + 0.5, randn(rows, cols), randn(cols)
    out = []

    def fwd(f, *inputs):
        def make(c):
            g = torch.compile(f) if c else f
            return lambda: g(*inputs)
        return make

    def bwd(f, *inputs):
        def make(c):
            g = torch.compile(f) if c else f
            xg = inputs[0].detach().requires_grad_(True)
            y = g(xg, *inputs[1:])
            # The output's gradient: dy, or its first columns where the output is narrower (a GLU's
            # is half its input), as cuda_check's rows read it.
            dout = dy if y.shape == dy.shape else dy[:, : y.shape[-1]].contiguous()
            return lambda: torch.autograd.grad(y, (xg,), dout, retain_graph=True)
        return make

    def rmsnorm(a, weight):
        return F.rms_norm(a, (cols,), weight, 1e-6)

    def layernorm(a, weight):
        return F.layer_norm(a, (cols,), weight, weight, 1e-5)

    def swiglu(a):
        gate, up = a.view(rows, 2, cols // 2).unbind(1)  # as cuda_check: gate and up halves of a row
        return F.silu(gate) * up

    def reglu(a):
        gate, up = a.view(rows, 2, cols // 2).unbind(1)
        return F.relu(gate) * up

    out.append(("rmsnorm forward", "16384x4096", 2 * n * e, fwd(rmsnorm, x, w)))
    out.append(("rmsnorm backward", "16384x4096", 3 * n * e, bwd(rmsnorm, x, w)))
    out.append(("layernorm forward", "16384x4096", 2 * n * e, fwd(layernorm, x, w)))
    out.append(("softmax forward", "16384x4096", 2 * n * e, fwd(lambda a: torch.softmax(a, -1), x)))
    out.append(("swiglu forward", "16384x4096", 1.5 * n * e, fwd(swiglu, x)))
    out.append(("swiglu backward", "16384x4096", 2.5 * n * e, bwd(swiglu, x)))
    out.append(("reglu backward", "16384x4096", 2.5 * n * e, bwd(reglu, x)))
    out.append(("add", "16384x4096", 3 * n * e, fwd(torch.add, x, dy)))

    # RoPE, half layout, in place on 16384 tokens of 32 heads of 128 (cos/sin tables [seq, 64] float).
    seq, heads, dh = 4096, 32, 128
    ang = torch.arange(seq * dh // 2, device="cuda", dtype=torch.float32).view(seq, dh // 2) * 1e-3
    cos, sin = ang.cos().repeat(rows // seq, 1)[:, None, :], ang.sin().repeat(rows // seq, 1)[:, None, :]

    def rope(a):
        v = a.view(rows, heads, dh)
        lo, hi = v[..., : dh // 2].float(), v[..., dh // 2:].float()
        return torch.cat((lo * cos - hi * sin, lo * sin + hi * cos), -1).to(a.dtype)

    xr = x.clone()
    out.append(("rope (in place)", "16384x32x128", 2 * n * e, fwd(lambda a: a.copy_(rope(a).view_as(a)), xr)))

    # AdamW over 64M parameters: torch.optim.AdamW(fused=True), one kernel; its moments are in the
    # parameter's dtype (no float moments for bf16 parameters), its bytes counted as ours.
    def adamw(c):
        p = torch.nn.Parameter(x.clone())
        p.grad = dy.clone()
        opt = torch.optim.AdamW([p], lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
        opt.step()
        return torch.compile(opt.step) if c else opt.step

    adam_bytes = (3 * e + 4 * 4) * n
    out.append(("adamw", "64M params", adam_bytes, adamw))

    # Cross-entropy with z-loss, forward and backward, 4096 rows of a 16384 vocabulary.
    logits = x.view(rows // 4, cols * 4)
    targets = torch.arange(rows // 4, device="cuda")  # as cuda_check: row i targets token i

    def ce(a):
        af = a.float()
        z = torch.logsumexp(af, -1)
        return F.cross_entropy(af, targets) + 1e-4 * (z * z).mean()

    def ce_make(c):
        g = torch.compile(ce) if c else ce
        lg = logits.detach().requires_grad_(True)
        return lambda: torch.autograd.grad(g(lg), (lg,))

    out.append(("cross_entropy fwd+bwd", "4096x16384", 2 * n * e, ce_make))
    return out


def attention(torch):
    """Causal attention B=4 H=16 T=4096 dh=128 bf16 through SDPA, per backend: (name, forward TFLOP/s, backward TFLOP/s)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    b, h, t, d = 4, 16, 4096, 128
    gen = torch.Generator(device="cuda").manual_seed(32)
    q, k, v = (torch.randn(b, h, t, d, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_(True)
               for _ in range(3))
    do = torch.randn(b, h, t, d, device="cuda", generator=gen).to(torch.bfloat16)
    flops = 4.0 * b * h * t * t * d / 2
    rows = []
    for name, backend in (("flash (FlashAttention-2)", SDPBackend.FLASH_ATTENTION),
                          ("cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("memory-efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                fwd = time_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                bwd = time_ms(torch, lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
            rows.append((name, flops / (fwd[0] * 1e-3) * 1e-12, 2.5 * flops / (bwd[0] * 1e-3) * 1e-12))
        except Exception as exc:  # a backend this build or GPU does not offer
            rows.append((name + f" (unavailable: {type(exc).__name__})", math.nan, math.nan))
    return rows


def gpt2_small(torch, compiled):
    """ms per train step (median, min, max) of a GPT-2-small model in bf16 autocast: LayerNorm, GeLU
    MLP, learned positions, causal SDPA, an untied 50257-token head, AdamW; batch 8 x 1024."""
    nn, F = torch.nn, torch.nn.functional
    d, n_layers, n_heads, t, b, vocab = 768, 12, 12, 1024, 8, 50257

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.fc, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, n_heads, d // n_heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(a)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(t, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
            self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return F.cross_entropy(self.head(self.ln_f(x)).float().view(-1, vocab), targets.view(-1))

    torch.manual_seed(1)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator(device="cuda").manual_seed(3)
    idx = torch.randint(0, vocab, (b, t), device="cuda", generator=gen)
    tgt = torch.randint(0, vocab, (b, t), device="cuda", generator=gen)
    fwd = torch.compile(model) if compiled else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return time_ms(torch, step)


def norms_small(torch, dtype, mode, steps=100):
    """experiments/norms.toml's model as tests/cuda/norms_small.toml has it (pre-norm RMSNorm,
    RoPE in the half layout, causal SDPA, SwiGLU with d_ff = 8/3 d rounded up to 32 as bench's
    swiglu, an untied head; d 256, 4 layers, 4 heads, T 256, batch 16, vocabulary 256), in float32
    or bf16 autocast with float weights, AdamW (fused) with clipping at 1.0, in `mode` eager,
    compile (torch.compile) or graph (the whole forward and the whole train step captured as CUDA
    graphs and replayed). Returns (forward ms, train step ms, each (median, min, max)) and the wall
    seconds of `steps` train steps on fresh batches (a constant learning rate: bench's warm-up and
    cosine schedule cost nothing on the device)."""
    nn, F = torch.nn, torch.nn.functional
    d, n_layers, n_heads, t, b, vocab = 256, 4, 4, 256, 16, 256
    dh = d // n_heads
    d_ff = (math.ceil(8 * d / 3 - 1e-9) + 31) // 32 * 32
    inv = 1.0 / (10000.0 ** (torch.arange(0, dh, 2, device="cuda", dtype=torch.float32) / dh))
    ang = torch.arange(t, device="cuda", dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()

    def rope(x):  # x [b, h, t, dh]: pairs (i, i + dh/2)
        x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
        c, s_ = cos.to(x.dtype), sin.to(x.dtype)
        return torch.cat((x1 * c - x2 * s_, x1 * s_ + x2 * c), -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.gate_up, self.down = nn.Linear(d, 2 * d_ff, bias=False), nn.Linear(d_ff, d, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(self.n1(x)).view(b, t, 3, n_heads, dh).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(a)
            g, u = self.gate_up(self.n2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
            self.norm, self.head = nn.RMSNorm(d, eps=1e-6), nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets):
            x = self.emb(idx)
            for blk in self.blocks:
                x = blk(x)
            return F.cross_entropy(self.head(self.norm(x)).float().view(-1, vocab), targets.view(-1))

    torch.manual_seed(1)
    model = LM().cuda()
    graph = mode == "graph"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True, capturable=graph)
    gen = torch.Generator(device="cuda").manual_seed(3)
    batches = [(torch.randint(0, vocab, (b, t), device="cuda", generator=gen),
                torch.randint(0, vocab, (b, t), device="cuda", generator=gen)) for _ in range(steps)]
    idx, tgt = (x.clone() for x in batches[0])  # the static inputs of the graphs
    fwd = torch.compile(model) if mode == "compile" else model
    bf16 = dtype == "bfloat16"

    def forward():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16, cache_enabled=False):
            return fwd(idx, tgt)

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16, cache_enabled=False):
            loss = fwd(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=not graph)
        return loss

    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up outside the capture (the optimizer's state, cuBLAS's plans)
                forward()
                train_step()
        torch.cuda.current_stream().wait_stream(side)
        g_fwd, g_train = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(g_fwd):
            forward()
        with torch.cuda.graph(g_train):
            train_step()
        run_forward, run_train = g_fwd.replay, g_train.replay
    else:
        run_forward, run_train = forward, train_step
    fwd_ms = time_ms(torch, run_forward)
    train_ms = time_ms(torch, run_train)
    torch.cuda.synchronize()
    began = time.time()
    for i, tg in batches:
        idx.copy_(i)
        tgt.copy_(tg)
        run_train()
    torch.cuda.synchronize()
    return fwd_ms, train_ms, time.time() - began


def small_rows(torch, args):
    """The `small` section's PyTorch rows, as lines "ROW<TAB>check<TAB>value<TAB>unit<TAB>detail"
    that scripts/gpu-check.sh turns into rows of its table ("-" for an empty field)."""
    began = time.time()
    for dtype in ("float32", "bfloat16"):
        for mode in ("eager", "compile", "graph"):
            name = {"eager": "PyTorch eager", "compile": "torch.compile", "graph": "PyTorch CUDA graphs"}[mode]
            if mode == "compile" and (args.no_compile or time.time() - began > args.budget):
                print(f"ROW\t{name} {dtype}\t-\t-\tskipped (time or --no-compile)", flush=True)
                continue
            try:
                (f_med, f_lo, f_hi), (t_med, t_lo, t_hi), wall = norms_small(torch, dtype, mode)
            except Exception as exc:  # one failing mode does not hide the others
                print(f"ROW\t{name} {dtype}\t-\t-\tfailed: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
                continue
            tokens = 16 * 256
            print(f"ROW\t{name} {dtype} forward\t{f_med:.4f}\tms\t{f_lo:.4f}..{f_hi:.4f}; "
                  f"{tokens / (f_med * 1e-3):.0f} tokens/s", flush=True)
            print(f"ROW\t{name} {dtype} train_step\t{t_med:.4f}\tms\t{t_lo:.4f}..{t_hi:.4f}; "
                  f"{tokens / (t_med * 1e-3):.0f} tokens/s", flush=True)
            print(f"ROW\t{name} {dtype} 100 train steps\t{wall:.3f}\ts\twall, fresh batches", flush=True)
    return 0


def rows_of(path, section="timing"):
    """{check: row} of gpu-check.json's rows of one section: cuda_check's (timing) by default; the
    baseline and targets sections reuse its check names with other values (ratios, shares)."""
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        return {r["check"]: r for r in json.load(f)
                if isinstance(r, dict) and "check" in r and r.get("section") == section}


def value(rows, check):
    v = rows.get(check, {}).get("value")
    return math.nan if v is None else float(v)


def fastest(targets, label):
    """(TFLOP/s, check) of gpu-check's targets row LABEL, the fastest of our flash kernels, which
    that section picks from cuda_check's rows ("...; the fastest: CHECK"); (nan, "none timed")."""
    found = re.search(r"the fastest: (.+)$", targets.get(label, {}).get("detail") or "")
    return (value(targets, label), found.group(1)) if found else (math.nan, "none timed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="cuda_check's JSON timings (OUT/gpu-check.json), for the side-by-side columns")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-check"), help="folder of torch-baseline.md")
    ap.add_argument("--no-compile", action="store_true", help="PyTorch eager only")
    ap.add_argument("--budget", type=float, default=150, help="seconds after which torch.compile rows are skipped")
    ap.add_argument("--gpt2-flops", type=float, default=math.nan,
                    help="bench's FLOPs of one GPT-2-small train step (`bench calc`'s declared train FLOP/token "
                         "x 8192 tokens, as its throughput table counts them), for MFU")
    ap.add_argument("--small", action="store_true",
                    help="only norms.toml's model (tests/cuda/norms_small.toml) in eager, torch.compile and CUDA "
                         "graphs, as ROW lines for scripts/gpu-check.sh's small section")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_baseline: PyTorch is not installed: nothing measured (SKIPPED)")
        return 77
    if not torch.cuda.is_available():
        print("torch_baseline: no CUDA device: nothing measured (SKIPPED)")
        return 77
    if args.small:
        return small_rows(torch, args)
    began = time.time()
    bench = rows_of(args.bench)
    copy = value(bench, "ceiling/copy")
    gemm_peak = value(bench, "ceiling/gemm/bf16 square")
    props = torch.cuda.get_device_properties(0)
    lines = [f"# PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) "
             f"on {props.name}, side by side with bench\n",
             f"Median of {REPS} after {WARMUP} warm-ups, L2 flushed, CUDA events; GB/s as % of the measured "
             f"device-to-device copy ({copy:.0f} GB/s, from cuda_check). ms: median (min..max).\n",
             "| kernel | dtype | shape | bench GB/s | eager ms | eager GB/s | compile ms | compile GB/s | "
             "bench % of copy | best PyTorch % of copy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for dtype, dname in ((torch.bfloat16, "bf16"), (torch.float32, "float")):
        for kernel, shape, nbytes, make in row_kernels(torch, dtype):
            cells = []
            best = math.nan
            for compiled in (False, True):
                if compiled and (args.no_compile or time.time() - began > args.budget):
                    cells.append(("skipped", math.nan))
                    continue
                try:
                    med, lo, hi = time_ms(torch, make(compiled))
                    gbps = nbytes / (med * 1e-3) * 1e-9
                    best = gbps if math.isnan(best) else max(best, gbps)
                    cells.append((f"{med:.4f} ({lo:.4f}..{hi:.4f})", gbps))
                except Exception as exc:
                    cells.append((f"failed: {type(exc).__name__}", math.nan))
            mine = value(bench, f"bandwidth/{kernel}/{dname}")
            lines.append(f"| {kernel} | {dname} | {shape} | {mine:.0f} | {cells[0][0]} | {cells[0][1]:.0f} | "
                         f"{cells[1][0]} | {cells[1][1]:.0f} | {100 * mine / copy:.0f}% | {100 * best / copy:.0f}% |")
    lines += ["", "## Causal attention, bf16, B=4 H=16 T=4096 dh=128 (TFLOP/s; backward = 2.5x the forward's FLOPs)",
              "", "| implementation | forward | backward |", "|---|---|---|"]
    if bench:
        lines.append(f"| bench flash (mma.sync) | {value(bench, 'attention/flash forward'):.0f} | "
                     f"{value(bench, 'attention/flash backward'):.0f} |")
        targets = rows_of(args.bench, "targets")
        fwd, fwd_name = fastest(targets, "attention forward, the fastest of ours")
        bwd, bwd_name = fastest(targets, "attention backward, the fastest of ours")
        lines.append(f"| bench flash, the fastest of ours (`{fwd_name}`; `{bwd_name}`) | {fwd:.0f} | {bwd:.0f} |")
        lines.append(f"| bench's cuDNN SDPA (backend graph) | {value(bench, 'attention/cudnn forward'):.0f} | "
                     f"{value(bench, 'attention/cudnn backward'):.0f} |")
    for name, fwd, bwd in attention(torch):
        lines.append(f"| PyTorch SDPA {name} | {fwd:.0f} | {bwd:.0f} |")
    if bench:
        lines.append(f"\nbf16 GEMM ceiling (cuBLASLt 4096^3, 5 x 10 back-to-back, median: cuda_check and the run's "
                     f"device record, one routine): {gemm_peak:.0f} TFLOP/s")
    lines += ["", "## GPT-2-small train step (124M, batch 8 x 1024, bf16 autocast, AdamW; SDPA flash attention)", "",
              f"MFU = bench's FLOPs per step ({args.gpt2_flops:.4g}) / time / the bf16 GEMM ceiling above.", "",
              "| PyTorch | ms per step (min..max) | tokens/s | MFU |", "|---|---|---|---|"]
    for compiled in (False, True):
        name = "torch.compile" if compiled else "eager"
        if compiled and (args.no_compile or time.time() - began > args.budget + 120):
            lines.append(f"| {name} | skipped (time) | | |")
            continue
        try:
            med, lo, hi = gpt2_small(torch, compiled)
            mfu = args.gpt2_flops / (med * 1e-3) / (gemm_peak * 1e12)
            lines.append(f"| {name} | {med:.1f} ({lo:.1f}..{hi:.1f}) | {8 * 1024 / (med * 1e-3):.0f} | {100 * mfu:.1f}% |")
        except Exception as exc:
            lines.append(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:80]} | | |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch-baseline.md"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
