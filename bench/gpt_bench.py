#!/usr/bin/python3
"""gpt_bench.py — the GPT specs' training step, cannl vs PyTorch 1.13 on the CPU (run it through
bench/gpt.sh, which builds the programs it runs into BENCH_DIR).

Usage: gpt_bench.py BENCH_DIR --text TRAIN.txt --val VAL.txt [--reps R] [--threads 1 2]
                    [--models gpt_char gpt2_124m llama_char] [--no-steps] [--no-loss]

Models (BENCH_DIR/<model>/: `cannl gen`, gpt2_124m with --dim ctx=64): gpt_char at batch 8
(ctx 128), gpt2_124m at batch 4 (ctx 64, llm.c's CPU configuration B=4, T=64), llama_char at
batch 8 (ctx 128; Muon + AdamW, the PyTorch side tests/e2e/parity_llama.py's nn model).

Step times: for each repetition, for each thread count, for each model, a fresh process of
the generated code (bench/step_bench.c: the bare train_step on random token windows) and one of
PyTorch (bench/torch_gpt.py step: zero_grad, forward, loss, backward, clip, AdamW) in turn, so
slow phases of the machine hit both alike; each times warm-up steps untimed, then steps one by
one, and reports its median. The table gives, over the R pairs, the median of the medians and
their spread (min-max), and the median of the per-pair ratios cannl / PyTorch. Threads follow
/work/shared/benchmarking.md: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = T, and
OMP_WAIT_POLICY=PASSIVE at 2 threads. A second table sets each step against its matrix products
at the FMA peak (products_flops below; BENCH_DIR/fma_peak, bench/fma_peak.c, run at every
repetition): issue 38's bound.

Losses: both sides start from the same params (torch_gpt.py init: the spec's distributions,
written as safetensors and given to the trainer with --init) and take the same AdamW steps
(constant lr, the trainer's --lr-schedule constant; llama_char: Muon + AdamW, its init under
the nn model's names through --name-map) on the same windows of ctx + 1 bytes of
TRAIN.txt (.npy files in file order: --no-shuffle, one thread); then the mean loss over the
same fixed windows of VAL.txt: the trainer's test_loss (--test) against PyTorch's. Tokens are
bytes (gpt2_124m's vocabulary holds them; no GPT-2 tokenizer here). Criterion: within 0.02
nats per token.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import MALLOC_TUNABLES, openblas_core  # noqa: E402  (the malloc settings every bench process runs with)

# model: ctx, batch, (warmup, timed steps) for the step bench, loss steps, validation windows
MODELS = {
    "gpt_char": (128, 8, (3, 20), 60, 64),
    "gpt2_124m": (64, 4, (1, 4), 12, 16),
    "llama_char": (128, 8, (3, 20), 60, 64),
}


SPECS = HERE.parent / "specs"


def spec_dims(model):
    """The `dim NAME = VALUE` lines of specs/MODEL.cannl (integers; `4 * d` forms are not dims)."""
    text = (SPECS / f"{model}.cannl").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*dim\s+(\w+)\s*=\s*(\d+)", text, re.M)}


def causal_pairs(ctx):
    """(query, key) pairs a causal attention over ctx positions computes: query t sees keys 0..t."""
    return ctx * (ctx + 1) // 2


def newton_schulz_flops(rows, cols, steps):
    """Muon's Newton-Schulz on a rows x cols matrix (on its transpose when rows > cols): per step
    A = X X^T and A A (symmetric: only the triangle's m (m + 1) / 2 dot products are needed) and
    (b A + c A A) X (a full m x m by m x n product); m = min(rows, cols), n = max. Returns
    (full products' flops, symmetric products' flops)."""
    m, n = min(rows, cols), max(rows, cols)
    return steps * 2 * m * m * n, steps * (m * (m + 1) * n + m * (m + 1) * m)


def products_flops(model, ctx, batch):
    """The matrix products one training step needs, in flops (2 per multiply-add), from the
    spec's dims (ctx as the bench generates it), by kind: "linear" (every x W^T of the forward
    and both products of its backward, dX = dY W and dW = dY^T X: 6 N in out for N = batch x ctx
    rows), "attention" (causal, per sequence and query head: Q K^T and P V forward, dO V^T,
    P^T dO, dS K and dS^T Q backward, each over the pairs a query sees, hd wide; the backward's
    recomputation of Q K^T is not counted), "muon" and "muon_sym" (Newton-Schulz,
    newton_schulz_flops; llama_char's Muon takes every param with input axes but the embedding
    table: the spec's `muon ... on matrices`). Embedding look-ups and their scatter-add gradient,
    normalisations, softmax, losses and the optimisers' element-wise steps are not products and
    are left out."""
    dm = spec_dims(model)
    d, layers, vocab, hd = dm["d"], dm["layers"], dm["vocab"], dm["hd"]
    rows = batch * ctx
    if model.startswith("gpt"):  # gpt_char, gpt2_124m: w_qkv, w_o, w_fc, w_pr; the head tied to wte
        heads = dm["heads"]
        shapes = [(d, 3 * heads * hd), (heads * hd, d), (d, 4 * d), (4 * d, d)] * layers + [(d, vocab)]
        muon = []
    elif model == "llama_char":  # w_q, w_k, w_v, w_o, w_gate, w_up, w_down; the untied head
        heads = dm["kvh"] * dm["group"]
        kv, ff = dm["kvh"] * hd, dm["ff"]
        shapes = [(d, heads * hd), (d, kv), (d, kv), (heads * hd, d), (d, ff), (d, ff), (ff, d)] * layers
        shapes += [(d, vocab)]
        muon = shapes  # (in, out): the matrix is out x in; Newton-Schulz's count is symmetric in the two
    else:
        raise ValueError(f"gpt_bench.py: no product count for {model}")
    out = {"linear": sum(6 * rows * i * o for i, o in shapes),
           "attention": layers * batch * heads * 6 * 2 * causal_pairs(ctx) * hd,
           "muon": 0, "muon_sym": 0}
    found = re.search(r"muon\([^)]*ns_steps\s*=\s*(\d+)", (SPECS / f"{model}.cannl").read_text())
    ns_steps = int(found.group(1)) if found else 5  # muon's default (torch.optim.Muon's)
    for i, o in muon:
        full, sym = newton_schulz_flops(o, i, ns_steps)
        out["muon"] += full
        out["muon_sym"] += sym
    return out


def env_for(threads):
    env = dict(os.environ)
    # PyTorch runs its own best kernels, as bench/bench.py's best path does: a machine may set
    # OPENBLAS_CORETYPE (some images pin Haswell's AVX2 kernels for CPUs OpenBLAS 0.3.21 does
    # not know), which would hand PyTorch slower products than its own detection picks.
    for k in ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE"):
        env.pop(k, None)
    if openblas_core():  # (a CPU OpenBLAS does not know: its best core it runs, not its generic one)
        env["OPENBLAS_CORETYPE"] = openblas_core()
    # glibc's malloc reuses freed blocks instead of unmapping them (see bench.py).
    env["GLIBC_TUNABLES"] = MALLOC_TUNABLES
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        env.pop("OMP_WAIT_POLICY", None)
    return env


def run_json(cmd, env):
    out = subprocess.run([str(c) for c in cmd], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def fmt_ms(us):
    return f"{us / 1000:.1f}"


def steps_table(bench, models, threads, reps):
    res = {(m, t): {"cannl": [], "torch": [], "ratio": [], "cpu_ratio": [], "cpu": []} for m in models for t in threads}
    peak = {t: [] for t in threads}
    for r in range(reps):
        for t in threads:
            peak[t].append(run_json([bench / "fma_peak", t], env_for(t)))
            for m in models:
                ctx, batch, (warm, steps), _, _ = MODELS[m]
                env = env_for(t)
                c = run_json([bench / m / "step", batch, warm, steps, t], env)
                p = run_json([sys.executable, HERE / "torch_gpt.py", "step", m, ctx, batch, warm, steps, t], env)
                d = res[(m, t)]
                d["cannl"].append(c["median_us"])
                d["torch"].append(p["median_us"])
                d["ratio"].append(c["median_us"] / p["median_us"])
                d["cpu_ratio"].append(c["cpu_us"] / p["cpu_us"])
                d["cpu"].append(c["cpu_us"])
                d["isa"] = c["isa"]
                d["openblas"] = p["openblas"]
                print(f"  rep {r + 1}/{reps} {m} {t} thread(s): cannl {fmt_ms(c['median_us'])} ms, "
                      f"PyTorch {fmt_ms(p['median_us'])} ms", file=sys.stderr, flush=True)
    print(f"\n### Training step, cannl vs PyTorch 1.13 ({reps} interleaved pairs of fresh processes; "
          "median, min-max)\n")
    print("| model | batch x ctx | threads | cannl ms | PyTorch ms | cannl / PyTorch (median of pairs) "
          "| CPU time ratio | ISA | PyTorch's OpenBLAS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in models:
        ctx, batch = MODELS[m][:2]
        for t in threads:
            d = res[(m, t)]
            cell = lambda v: f"{fmt_ms(statistics.median(v))} ({fmt_ms(min(v))}-{fmt_ms(max(v))})"  # noqa: E731
            print(f"| {m} | {batch} x {ctx} | {t} | {cell(d['cannl'])} | {cell(d['torch'])} | "
                  f"**{statistics.median(d['ratio']):.2f}** ({min(d['ratio']):.2f}-{max(d['ratio']):.2f}) | "
                  f"{statistics.median(d['cpu_ratio']):.2f} | {d['isa']} | {d['openblas']} |")
    # The products' bound (issue 38): the step's matrix products (products_flops) at the FMA peak
    # of bench/fma_peak.c, best of the run's measurements; by the wall clock at T threads, and by
    # CPU time (the products' CPU time at one core's peak against the step's CPU time, summed
    # over its threads: the figure a loaded machine leaves alone).
    print("\n### The step against its products at the FMA peak (bench/fma_peak.c, best of the run)\n")
    print("| model | threads | products GFLOP (linear + attention + Muon's Newton-Schulz, of which symmetric) "
          "| FMA peak GFLOP/s (wall; one core by CPU time) | products at the peak ms | cannl ms | bound / step "
          "| CPU time: bound ms | cannl CPU ms | bound / step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in models:
        ctx, batch = MODELS[m][:2]
        f = products_flops(m, ctx, batch)
        total = sum(f.values())
        kinds = f"{total / 1e9:.3f} ({f['linear'] / 1e9:.3f} + {f['attention'] / 1e9:.3f} + " \
                f"{(f['muon'] + f['muon_sym']) / 1e9:.3f}, {f['muon_sym'] / 1e9:.3f})"
        for t in threads:
            d = res[(m, t)]
            pw = max(x["peak_gflops"] for x in peak[t])
            pc = max(x["peak_gflops_cpu"] for x in peak[t]) / t
            step, cpu = statistics.median(d["cannl"]) / 1000, statistics.median(d["cpu"]) / 1000
            bw, bc = total / pw * 1e-6, total / pc * 1e-6
            print(f"| {m} | {t} | {kinds} | {pw:.1f} ({pc:.1f}) | {bw:.1f} | {step:.1f} | **{bw / step:.0%}** | "
                  f"{bc:.1f} | {cpu:.1f} | **{bc / cpu:.0%}** |")


def windows(path, count, ctx, rng, spaced=False):
    import numpy as np
    data = np.frombuffer(Path(path).read_bytes(), dtype=np.uint8)
    if len(data) < ctx + 2:
        raise SystemExit(f"gpt_bench.py: {path}: shorter than a window of {ctx + 1} bytes")
    if spaced:
        starts = np.linspace(0, len(data) - ctx - 1, count).astype(np.int64)
    else:
        starts = rng.integers(0, len(data) - ctx - 1, size=count)
    w = np.stack([data[s:s + ctx + 1] for s in starts]).astype(np.int32)
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def loss_table(bench, models, text, val):
    import numpy as np
    rows = []
    for m in models:
        ctx, batch, _, steps, nval = MODELS[m]
        work = bench / m / "loss"
        work.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(1)
        files = {}
        for key, (tok, nxt) in {"train": windows(text, steps * batch, ctx, rng),
                                "val": windows(val, nval, ctx, rng, spaced=True)}.items():
            files[key] = (work / f"{key}_tokens.npy", work / f"{key}_next.npy")
            np.save(files[key][0], tok)
            np.save(files[key][1], nxt)
        init = work / "init.safetensors"
        env = env_for(1)
        subprocess.run([sys.executable, HERE / "torch_gpt.py", "init", m, str(ctx), init], env=env, check=True)
        metrics = work / "metrics.jsonl"
        name_map = Path(str(init) + ".map")  # the init under PyTorch's names (llama_char)
        subprocess.run([bench / m / "train", f"--data=tokens={files['train'][0]}", f"--data=next={files['train'][1]}",
                        f"--test=tokens={files['val'][0]}", f"--test=next={files['val'][1]}",
                        "--steps", str(steps), "--batch", str(batch), "--no-shuffle", "--threads", "1",
                        "--lr-schedule", "constant", "--init", init, "--metrics", metrics, "--quiet"]
                       + (["--name-map", name_map] if name_map.exists() else []),
                       env=env, check=True, stdout=subprocess.DEVNULL)
        recs = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        got = [r["test_loss"] for r in recs if "test_loss" in r][-1]
        want = run_json([sys.executable, HERE / "torch_gpt.py", "train", m, ctx, init, *files["train"], *files["val"],
                         batch, 1], env)
        rows.append((m, batch, ctx, steps, nval, got, want["val_loss"], want["first_loss"]))
    print("\n### Validation loss after the same steps from the same init and windows (nats per byte)\n")
    print("| model | batch x ctx | steps | val windows | initial loss | cannl | PyTorch | difference | within 0.02 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for m, batch, ctx, steps, nval, got, want, first in rows:
        d = abs(got - want)
        ok = ok and d <= 0.02
        print(f"| {m} | {batch} x {ctx} | {steps} | {nval} | {first:.4f} | {got:.4f} | {want:.4f} | {d:.4f} | "
              f"{'yes' if d <= 0.02 else '**no**'} |")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", type=Path)
    ap.add_argument("--text", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--no-steps", action="store_true")
    ap.add_argument("--no-loss", action="store_true")
    opt = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load before: {open('/proc/loadavg').read().split()[:3]}")
    ok = True
    if not opt.no_steps:
        steps_table(opt.bench, opt.models, opt.threads, opt.reps)
    if not opt.no_loss:
        ok = loss_table(opt.bench, opt.models, opt.text, opt.val)
    print(f"\nload after: {open('/proc/loadavg').read().split()[:3]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
