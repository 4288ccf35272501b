#!/usr/bin/python3
"""bench.py — the cannl vs PyTorch benchmark (run it through bench/run.sh, which builds the
programs it runs).

Usage: bench.py BENCH_DIR [--reps R] [--threads 1 2] [--models m1 m2 ...]

Step times: for each repetition, for each thread count, for each model, it runs in turn
fresh processes of the generated code (generated kernels), the generated code built with
--blas (OpenBLAS), and PyTorch (bench/torch_step.py), so slow phases of the machine hit all
three alike. Each process times WARMUP untimed steps, then STEPS steps one by one, and
reports its median; the table gives, over the R processes, the median of those medians and
their spread (min-max), examples/s, and the median of the per-repetition ratios
cannl/PyTorch. Thread settings follow /work/shared/benchmarking.md: OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS = T, and OMP_WAIT_POLICY=PASSIVE at 2 threads.

Contractions: every `cannl_gemm(...)` call of the generated fashion_mlp (batch n = 128)
timed by gemm_bench (the model's own emitted kernel) next to cblas_sgemm at the same shape
and transposes, at each thread count, and the FMA peak (fma_peak).
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

# model: (batch, warmup steps, timed steps)
MODELS = {
    "fashion_mlp": (128, 10, 60),
    "fashion_mlp_adam": (128, 10, 60),
    "moons_mlp": (32, 200, 3000),
    "fashion_cnn": (64, 1, 4),
}


def env_for(threads):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        env.pop("OMP_WAIT_POLICY", None)
    return env


def run_json(cmd, threads):
    out = subprocess.run(cmd, env=env_for(threads), check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def step_times(bench, models, threads_list, reps):
    results = {}  # (model, threads, impl) -> [median_us per process]
    for rep in range(reps):
        for threads in threads_list:
            for model in models:
                batch, warmup, steps = MODELS[model]
                args = [str(batch), str(warmup), str(steps), str(threads)]
                impls = {"cannl": [str(bench / f"{model}_step")],
                         "cannl-blas": [str(bench / f"{model}_blas_step")],
                         "pytorch": [sys.executable, str(HERE / "torch_step.py"), model]}
                for impl, cmd in impls.items():
                    if impl != "pytorch" and not Path(cmd[0]).exists():
                        continue
                    r = run_json(cmd + args, threads)
                    results.setdefault((model, threads, impl), []).append(r["median_us"])
        print(f"  repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return results


def fmt_ms(us_list):
    med = statistics.median(us_list)
    return f"{med / 1000:.4g} ({min(us_list) / 1000:.4g}-{max(us_list) / 1000:.4g})"


def step_table(results, models, threads_list):
    lines = ["| model | batch | threads | cannl ms/step | cannl --blas ms/step | PyTorch ms/step | cannl ex/s | PyTorch ex/s | cannl/PyTorch | blas/PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model in models:
        batch = MODELS[model][0]
        for t in threads_list:
            c = results.get((model, t, "cannl"))
            b = results.get((model, t, "cannl-blas"))
            p = results.get((model, t, "pytorch"))
            if not c or not p:
                continue
            ratio = statistics.median(x / y for x, y in zip(c, p))
            bratio = f"{statistics.median(x / y for x, y in zip(b, p)):.3f}" if b else "-"
            lines.append(f"| {model} | {batch} | {t} | {fmt_ms(c)} | {fmt_ms(b) if b else '-'} | {fmt_ms(p)} | "
                         f"{batch / statistics.median(c) * 1e6:.0f} | {batch / statistics.median(p) * 1e6:.0f} | "
                         f"{ratio:.3f} | {bratio} |")
    return "\n".join(lines)


def gemm_calls(source, batch):
    """The distinct cannl_gemm calls of a generated source, n replaced by the batch."""
    calls = []
    for m in re.finditer(r"\bcannl_gemm\(([^;]*)\);", source):
        args = [a.strip() for a in m.group(1).split(",")]
        if len(args) != 16 or args[0] == "long M":
            continue
        def val(e):
            return eval(e.replace("n", str(batch)), {})  # sizes are `512`, `n`, `n * 16`
        shape = tuple(val(args[i]) for i in (0, 1, 2)) + tuple(int(args[i]) for i in (5, 6, 8, 9, 11, 12))
        label = f"{args[10]} = {args[4]} . {args[7]}"
        if (shape, label) not in calls:
            calls.append((shape, label))
    return calls


def gemm_table(bench, threads_list):
    src = (bench / "fashion_mlp" / "fashion_mlp.c").read_text()
    peak = {t: run_json([str(bench / "fma_peak"), str(t)], t)["peak_gflops"] for t in threads_list}
    lines = ["| product (fashion_mlp, batch 128) | M x N x K | threads | cannl GFLOP/s | OpenBLAS GFLOP/s | cannl/OpenBLAS | cannl/peak |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    seen = set()
    for shape, label in gemm_calls(src, 128):
        if shape in seen:
            continue  # forward's and eval's copies of a train_step product
        seen.add(shape)
        for t in threads_list:
            r = run_json([str(bench / "gemm_bench")] + [str(x) for x in shape] + [str(t)], t)
            ob = r["openblas_gflops"]
            ratio = f"{r['cannl_gflops'] / ob:.2f}" if ob > 0 else "-"
            lines.append(f"| `{label}` | {shape[0]} x {shape[1]} x {shape[2]} | {t} | {r['cannl_gflops']:.1f} | "
                         f"{ob:.1f} | {ratio} | {r['cannl_gflops'] / peak[t]:.2f} |")
    peaks = ", ".join(f"{t} thread{'s' if t > 1 else ''}: {peak[t]:.1f} GFLOP/s" for t in threads_list)
    return "\n".join(lines) + f"\n\nFMA peak (fma_peak, float32): {peaks}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_dir")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--no-steps", action="store_true")
    a = ap.parse_args()
    bench = Path(a.bench_dir)
    for m in a.models:
        if m not in MODELS:
            raise SystemExit(f"bench.py: unknown model '{m}' (known: {', '.join(MODELS)})")
    print(f"# cannl vs PyTorch, {a.reps} interleaved repetitions\n")
    if not a.no_gemm:
        print(gemm_table(bench, a.threads) + "\n", flush=True)
    if not a.no_steps:
        print(step_table(step_times(bench, a.models, a.threads, a.reps), a.models, a.threads))
        print("\nms/step: median over the processes of each process's median step (min-max of those medians)")


if __name__ == "__main__":
    main()
