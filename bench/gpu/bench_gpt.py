#!/usr/bin/env python3
"""GPU benchmark of the GPT specs (issue 18): the generated CUDA trainers against PyTorch 2.x on
the same GPU, in one run: ms per step, tokens per second, MFU, peak device memory.

  bench/gpu/bench_gpt.py --model gpt2_124m --batch 8 --ctx 1024
                         --cannl fp32=build/release/gpt2_124m_cuda_train --cannl bf16=PATH ...
                         [--card build/release/cannl/gpt2_124m_cuda/gpt2_124m.json]
                         [--steps 20 60] [--runs 3] [--peak-tflops 989] [--torch eager compile]
                         [--precision bf16|fp32] [--json OUT.json] [--smi-memory]
  (bench/gpu/gpt.sh builds the trainers and runs this for gpt2_124m and gpt_char;
  scripts/gpu-check.sh runs it for gpt2_124m at B = 8 and 16, bf16 and fp32.)

Data: a token shard of random ids (llm.c's format: 256 int32 header, magic 20240520, version
1, count; uint16 tokens), written once into --work; every program trains on random windows
of it.
cannl: each `--cannl LABEL=TRAINER` is a training program of the model (any --precision),
run with `--stream tokens,next=SHARD --steps S --batch B`; its step time is the steady state,
the difference of the times of two runs of different lengths (--steps S1 S2) divided by S2 - S1
(cuBLAS initialisation and the first steps cancel out). The time of a run is the one the trainer
prints ("trained to step N in X s": its training loop, from the first step to the last), not the
process's: start-up (reading the data, creating the model, uploading the params) takes seconds
and varies by hundreds of milliseconds, which swamped a 50 ms step over 5 steps (the
gpu-check of a53957b measured 230 ms at B = 8 and 52 ms at B = 16); the wall time is the
fallback. Its device memory is the model card's training arena (`--card`: `arena_bytes.training_state`; the input slots and
cuBLAS's workspace come on top).
PyTorch: nanoGPT's structure written here (pre-LN blocks, tanh GELU, tied head,
F.scaled_dot_product_attention with is_causal), the spec's AdamW (betas 0.9 and 0.95, eps 1e-8,
weight decay 0.1 on the matrices only; fused where available) and gradient clipping at 1;
`--precision bf16` (default): bf16 autocast; `fp32`: no autocast and TF32 off (matmul and cuDNN),
as cannl's fp32 products; `eager` and `compile` (torch.compile of the model, default mode), each
timed over S2 - S1 steps after S1 warm-up steps (torch.compile's compilation happens in those:
their time is reported as "compile", not counted in the step) with the loss read back every step
(loss.item(), as the cannl trainer reads its loss), peak memory from
torch.cuda.max_memory_allocated. Runs interleave (cannl, torch, ...), medians over the runs
reported. `--smi-memory`: also the peak of nvidia-smi's memory.used over the baseline during each
cannl run (the whole process: arena, CUDA context, cuBLAS workspace). `--json`: every row's
per-run times, median, peak memory and compile time, rewritten after every run (a run cut off
by a time limit keeps the rows before it).
MFU: (6 N + 12 L d T) flops per token (llm.c's count: N params, L layers, width d, T = ctx),
times tokens per second, over --peak-tflops (H100 SXM bf16 dense: 989).

Without a CUDA build of PyTorch (Debian's python3-torch is CPU-only) only the cannl rows are
timed and the script says so; `--device cpu` runs everything on the CPU (a smoke test of the
script with the C target's trainers, which take the same command line).
"""
import argparse
import array
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

# model: vocab (padded), d, heads, layers
CONFIGS = {"gpt2_124m": (50304, 768, 12, 12), "gpt_char": (256, 128, 4, 4)}
REAL_VOCAB = {"gpt2_124m": 50257, "gpt_char": 256}


def write_shard(path, vocab, count, seed):
    rng = random.Random(seed)
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, count
    tokens = array.array("H", (rng.randrange(vocab) for _ in range(count)))
    if sys.byteorder != "little":
        header.byteswap()
        tokens.byteswap()
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


class SmiPeak:
    """The peak of nvidia-smi's memory.used (MiB, GPU 0) over its value at the start, sampled
    every 100 ms by one `nvidia-smi -lms 100` process while the block runs."""

    def __init__(self, enabled):
        self.enabled, self.peak, self.base, self.proc = enabled, None, None, None

    def __enter__(self):
        if not self.enabled:
            return self
        q = ["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        try:
            self.base = int(subprocess.run(q, capture_output=True, text=True, timeout=30).stdout.split()[0])
            self.proc = subprocess.Popen(q + ["-lms", "100"], stdout=subprocess.PIPE, text=True)
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            self.proc = None
            return self
        self.peak = self.base
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.peak = max(self.peak, int(line.split()[0]))
            except (ValueError, IndexError):
                pass

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.thread.join(timeout=2)

    def bytes(self):
        return (self.peak - self.base) * 2**20 if self.proc and self.peak is not None else None


def time_cannl(trainer, shard, batch, steps, seed=1, smi=False):
    """(seconds of the training loop of a run of `steps` steps, as the trainer prints them, else the
    run's wall seconds; peak device memory over the baseline or None)."""
    cmd = [trainer, "--stream", f"tokens,next={shard}", "--steps", str(steps), "--batch", str(batch),
           "--seed", str(seed), "--quiet", "--log-every", "0"]
    with SmiPeak(smi) as mem:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    m = re.search(r"^trained to step \d+ in ([0-9.]+) s", p.stdout, re.M)
    return (float(m.group(1)) if m else dt), mem.bytes()


def torch_model(model, ctx, device):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    vocab, d, heads, layers = CONFIGS[model]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.pr = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.pr(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.lnf = nn.LayerNorm(d)

        def forward(self, tok, nxt):
            x = self.wte(tok) + self.wpe(torch.arange(tok.shape[1], device=tok.device))
            for blk in self.blocks:
                x = blk(x)
            logits = self.lnf(x) @ self.wte.weight.t()  # tied head
            return F.cross_entropy(logits.float().reshape(-1, vocab), nxt.reshape(-1))

    return GPT().to(device)


def time_torch(model, ctx, batch, steps, kind, device, tokens, precision="bf16", seed=1):
    """(seconds for steps[1] - steps[0] steps after steps[0] warm-up steps, peak bytes, seconds of
    the warm-up steps: torch.compile's compilation and steps[0] steps)."""
    import contextlib
    import torch
    if device == "cuda":  # fp32: no TF32 anywhere (cannl's fp32 products are CUBLAS_COMPUTE_32F)
        torch.backends.cuda.matmul.allow_tf32 = precision != "fp32"
        torch.backends.cudnn.allow_tf32 = precision != "fp32"
    torch.manual_seed(seed)
    net = torch_model(model, ctx, device)
    # The spec's AdamW: weight decay on the matrices only.
    groups = [{"params": [p for p in net.parameters() if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in net.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))
    except TypeError:  # no fused AdamW in this PyTorch
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    step_fn = torch.compile(net) if kind == "compile" else net
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def batch_of():
        at = torch.randint(0, len(tokens) - ctx - 1, (batch,), generator=gen)
        w = torch.stack([tokens[a:a + ctx + 1] for a in at.tolist()]).to(device, non_blocking=True)
        return w[:, :-1], w[:, 1:]

    def autocast():
        if precision == "bf16":
            return torch.autocast(device_type=device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def one():
        tok, nxt = batch_of()
        with autocast():
            loss = step_fn(tok, nxt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    t0 = time.perf_counter()
    for _ in range(steps[0]):
        one()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps[1] - steps[0]):
        one()
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return dt, peak, warm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=list(CONFIGS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--cannl", action="append", default=[], metavar="LABEL=TRAINER")
    ap.add_argument("--card", help="the model card of the cannl model (its training arena)")
    ap.add_argument("--steps", type=int, nargs=2, default=[20, 60])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--torch", nargs="*", default=["eager", "compile"], choices=["eager", "compile"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--work", default="build/bench/gpu")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                    help="PyTorch's arithmetic: bf16 autocast, or fp32 with TF32 off (default bf16)")
    ap.add_argument("--json", help="write the results here (rewritten after every run)")
    ap.add_argument("--smi-memory", action="store_true",
                    help="cannl's peak device memory from nvidia-smi during its runs")
    opt = ap.parse_args()
    os.makedirs(opt.work, exist_ok=True)
    vocab, d, heads, layers = CONFIGS[opt.model]
    shard = os.path.join(opt.work, f"random_{opt.model}.bin")
    count = max(1 << 20, 4 * opt.batch * (opt.ctx + 1))
    write_shard(shard, REAL_VOCAB[opt.model], count, seed=7)
    n_params = vocab * d + opt.ctx * d + 2 * d + layers * (12 * d * d + 13 * d)
    flops_per_token = 6 * n_params + 12 * layers * d * opt.ctx
    tokens_per_step = opt.batch * opt.ctx

    torch_ok = False
    if opt.torch:
        try:
            import torch
            torch_ok = opt.device == "cpu" or torch.cuda.is_available()
            if not torch_ok:
                print("bench_gpt: this PyTorch has no CUDA device (a CPU-only build?): PyTorch not timed")
            if "compile" in opt.torch and not hasattr(torch, "compile"):
                print(f"bench_gpt: PyTorch {torch.__version__} has no torch.compile: compile not timed")
                opt.torch = [k for k in opt.torch if k != "compile"]
            if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
                print(f"bench_gpt: PyTorch {torch.__version__} has no scaled_dot_product_attention: PyTorch not timed")
                torch_ok = False
        except ImportError:
            print("bench_gpt: no PyTorch: PyTorch not timed")
    tokens = None
    if torch_ok:
        import torch
        with open(shard, "rb") as f:
            f.seek(1024)
            ids = array.array("H", f.read())
        tokens = torch.tensor(ids, dtype=torch.int64)

    rows = {}  # label -> [seconds per step]
    peaks = {}  # label -> bytes (cannl: the card's arena, torch: max_memory_allocated)
    smi = {}  # label -> bytes (cannl with --smi-memory: nvidia-smi's peak over the baseline)
    compile_s = {}  # label -> [seconds of the warm-up steps]
    arena = None
    if opt.card:
        with open(opt.card) as f:
            arena = json.load(f)["arena_bytes"]["training_state"]
    s1, s2 = opt.steps

    def dump():
        if not opt.json:
            return
        out = {"model": opt.model, "batch": opt.batch, "ctx": opt.ctx, "precision": opt.precision,
               "steps": opt.steps, "runs_done": len(next(iter(rows.values()), [])), "rows": {}}
        if torch_ok:
            import torch
            out["torch"] = torch.__version__
            if opt.device == "cuda":
                out["device"] = torch.cuda.get_device_name(0)
        for k, v in rows.items():
            out["rows"][k] = {"ms": statistics.median(v) * 1e3, "runs_ms": [x * 1e3 for x in v],
                              "peak_bytes": peaks.get(k), "smi_peak_bytes": smi.get(k),
                              "warmup_s": compile_s.get(k)}
        tmp = opt.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, opt.json)

    failed = set()  # cannl programs that failed: reported, not run again; the others still timed
    for run in range(opt.runs):
        for spec in opt.cannl:
            label, trainer = spec.split("=", 1)
            if label in failed:
                continue
            try:
                t2, m2 = time_cannl(trainer, shard, opt.batch, s2, smi=opt.smi_memory)
                t1, _ = time_cannl(trainer, shard, opt.batch, s1)
            except RuntimeError as e:
                print(f"bench_gpt: cannl {label} failed: {e}", flush=True)
                failed.add(label)
                continue
            rows.setdefault(f"cannl {label}", []).append((t2 - t1) / (s2 - s1))
            if arena:
                peaks[f"cannl {label}"] = arena
            if m2 is not None:
                smi[f"cannl {label}"] = max(m2, smi.get(f"cannl {label}", 0))
            dump()
        if torch_ok:
            for kind in opt.torch:
                label = f"torch {kind} {opt.precision}"
                dt, peak, warm = time_torch(opt.model, opt.ctx, opt.batch, opt.steps, kind, opt.device, tokens,
                                            opt.precision)
                if opt.device == "cuda":  # the run's model and optimiser state are garbage now
                    import gc
                    gc.collect()
                    torch.cuda.empty_cache()
                rows.setdefault(label, []).append(dt / (s2 - s1))
                peaks[label] = peak
                compile_s.setdefault(label, []).append(warm)
                dump()
        print(f"run {run + 1}/{opt.runs}: " + ", ".join(f"{k} {v[-1] * 1e3:.2f} ms" for k, v in rows.items()), flush=True)
    print(f"\n{opt.model}, batch {opt.batch} x ctx {opt.ctx} ({tokens_per_step} tokens/step), {n_params / 1e6:.1f} M params, "
          f"{flops_per_token * tokens_per_step / 1e12:.3f} TFLOP/step, peak {opt.peak_tflops} TFLOP/s, device {opt.device}")
    print(f"{'program':24s} {'ms/step':>9s} {'tokens/s':>11s} {'MFU':>7s} {'memory GiB':>11s}")
    base_label = f"torch compile {opt.precision}"
    base = statistics.median(rows[base_label]) if base_label in rows else None
    for k, v in rows.items():
        t = statistics.median(v)
        mfu = flops_per_token * tokens_per_step / t / (opt.peak_tflops * 1e12)
        mem = f"{peaks[k] / 2**30:.2f}" if peaks.get(k) else "-"
        if smi.get(k):
            mem += f" (smi {smi[k] / 2**30:.2f})"
        ratio = f"   {t / base:.2f}x torch.compile" if base else ""
        warm = f"   warm-up {statistics.median(compile_s[k]):.1f} s" if k in compile_s else ""
        print(f"{k:24s} {t * 1e3:9.2f} {tokens_per_step / t:11.0f} {100 * mfu:6.1f}% {mem:>11s}{ratio}{warm}")
    if failed:
        return 1
    return 0 if torch_ok or not opt.torch else 3


if __name__ == "__main__":
    sys.exit(main())
