#!/usr/bin/python3
"""bench.py — the cannl vs PyTorch benchmark (run it through bench/run.sh, which builds the
programs it runs into BENCH_DIR).

Usage: bench.py BENCH_DIR --best ISA --isa ISA [ISA ...] [--reps R] [--threads 1 2]
                [--models m1 m2 ...] [--fashion DIR] [--no-gemm] [--no-steps] [--no-train]

Instruction sets (--isa): each is a path of the programs, BENCH_DIR/<isa>/. The CPU's best
(--best) is the shipped build as users get it: compiled for any x86-64, the routines'
multiversioned loops and the runtime's kernels choosing at run time. A lower one (avx2,
sse2) is a build whose loops are compiled for that level (-march=x86-64-v3; the baseline)
run with CANNL_ISA=<isa>, which lowers the runtime's kernels: what a CPU of that kind runs.
PyTorch runs the same path: ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA and OPENBLAS_CORETYPE
lowered alike. Every table says the path it measured.

FMA peak: bench/fma_peak.c built for each path, 1 and 2 threads.

Products: every `cannl_sgemm(...)` and `cannl_sgemm_dot(...)` call of the generated models (fashion_mlp at batch 128,
fashion_cnn at 64 and 256, cnn_dense256 at 64; the calls of forward and eval are train_step's)
timed by gemm_bench (the runtime's kernel) next to cblas_sgemm at the same shape, transposes
and beta, and next to the FMA peak.

Step times: for each repetition, for each thread count, for each model, fresh processes of
the generated code, the generated code built with --blas (OpenBLAS), and PyTorch
(bench/torch_step.py) in turn, so slow phases of the machine hit all three alike. Each
process times warm-up steps untimed, then steps one by one, and reports its median; the
table gives, over the R processes, the median of those medians and their spread (min-max),
examples/s, and the median of the per-repetition ratios cannl/PyTorch.

Training programs: `<model>_train --data ... --steps S` for two lengths S1 < S2 (fresh
processes), the step time being the difference of the times they print over S2 - S1: the
program's steady-state step with its data path (gathering the shuffled batch), against
bench/torch_train.py doing the same in PyTorch (needs Fashion-MNIST).

Threads follow /work/shared/benchmarking.md: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = T,
and OMP_WAIT_POLICY=PASSIVE at 2 threads.
"""
import argparse
import functools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# model: spec, [(batch, warmup steps, timed steps, trainer lengths S1 S2 or None)]
MODELS = {
    "fashion_mlp": ("specs/fashion_mlp.cannl", [(128, 20, 300, (20, 220))]),
    "fashion_mlp_adam": ("specs/fashion_mlp_adam.cannl", [(128, 20, 300, (20, 220))]),
    "moons_mlp": ("specs/moons_mlp.cannl", [(32, 200, 3000, None)]),
    "fashion_cnn": ("specs/fashion_cnn.cannl", [(64, 1, 5, (3, 18)), (256, 1, 3, (2, 7))]),
    "cnn_dense256": ("bench/specs/cnn_dense256.cannl", [(64, 1, 5, (3, 18))]),
    # the model zoo (issue 38: models the compiler was not tuned on; bench/peers.sh runs them)
    "resnet_bn": ("bench/specs/resnet_bn.cannl", [(64, 1, 5, None)]),
    "mlp_ln_dropout": ("bench/specs/mlp_ln_dropout.cannl", [(128, 20, 300, None)]),
    "gru_rows": ("specs/gru_rows.cannl", [(128, 20, 200, None)]),
}
ZOO = ["resnet_bn", "mlp_ln_dropout", "gru_rows"]  # in MODELS for bench/peers.py; bench/run.sh does not build them
# The products of these models (fashion_mlp_adam's are fashion_mlp's).
GEMM_MODELS = ["fashion_mlp", "fashion_cnn", "cnn_dense256"]

# PyTorch's settings for a lower path.
TORCH_ISA = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
    "sse2": {"ATEN_CPU_CAPABILITY": "default", "DNNL_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Nehalem"},
}


# glibc's malloc keeps freed blocks up to 32 MB for reuse instead of unmapping them. By default
# a block over its (adaptive) mmap threshold is mapped and unmapped on every allocation: PyTorch's
# Adam makes several temporaries of a weight's size per step, and with fashion_mlp_adam's
# synthetic batch the process took 400-900 page faults a step (median step 13.5 ms against 5.3
# ms at the 10th percentile; none with this setting). Every process of the bench runs with it
# (the generated programs allocate nothing in a step: it changes nothing for them).
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"


@functools.lru_cache(maxsize=None)
def openblas_core():
    """OPENBLAS_CORETYPE for Debian's PyTorch when OpenBLAS 0.3.21's own detection, which knows CPUs
    by family and model, does not know this one and falls back to its generic SSE3 core ("Prescott":
    a virtual machine's anonymous Xeon, a CPU newer than the library) although the CPU has AVX-512
    or AVX2: the newest of its cores the CPU runs (SkylakeX or Haswell), so that PyTorch's products
    run at its best here; else None (the library's own choice)."""
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch; torch.ones(8, 8) @ torch.ones(8, 8)"],
                           env=dict(os.environ, OPENBLAS_VERBOSE="2", OPENBLAS_NUM_THREADS="1"),
                           capture_output=True, text=True)
    found = re.search(r"Core: (\w+)", probe.stdout + probe.stderr)
    if not found or found.group(1) not in ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom"):
        return None
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    want = ("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
            else "Haswell" if {"avx2", "fma"} <= flags else None)
    if want:
        print(f"PyTorch's OpenBLAS picks its generic core ({found.group(1)}) on this CPU: "
              f"OPENBLAS_CORETYPE={want} for PyTorch", file=sys.stderr)
    return want


def env_for(threads, isa=None, best=None):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        env.pop("OMP_WAIT_POLICY", None)
    for k in ("CANNL_ISA", "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE"):
        env.pop(k, None)
    env["GLIBC_TUNABLES"] = MALLOC_TUNABLES
    if isa and isa != best:
        env["CANNL_ISA"] = isa
        env.update(TORCH_ISA.get(isa, {}))  # OpenBLAS too: gemm_bench's, the --blas builds'
    elif openblas_core():
        env["OPENBLAS_CORETYPE"] = openblas_core()
    return env


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def fmt_ms(us_list):
    med = statistics.median(us_list)
    return f"{med / 1000:.4g} ({min(us_list) / 1000:.4g}-{max(us_list) / 1000:.4g})"


def cases(models):
    for model in models:
        for batch, warmup, steps, train in MODELS[model][1]:
            yield model, batch, warmup, steps, train


# ---------------------------------------------------------------- products

def gemm_calls(source, batch):
    """The distinct cannl_sgemm and cannl_sgemm_dot calls of a generated source, n replaced by
    the batch: ((M, N, K, a_m, a_k, b_k, b_n, c_m, c_n, overwrite), label, dot)."""
    calls = []
    for m in re.finditer(r"/\* matrix product ([^:]*):[^\n]*\n(?:[^\n]*for \([^\n]*\n)*\s*cannl_sgemm(_dot)?\(([^;]*)\);",
                         source):
        args = [a.strip() for a in m.group(3).split(",")]
        dot = m.group(2) is not None
        if len(args) != (13 if dot else 15):
            continue
        if dot:  # (g, M, N, K, alpha, A, a_m, B, b_n, C, c_m, c_n, overwrite): a_k = b_k = 1
            args = args[:7] + ["1"] + args[7:8] + ["1"] + args[8:]

        def val(e):
            return eval(re.sub(r"\bn\b", str(batch), e), {})  # sizes are `512`, `n`, `n * 16`
        shape = tuple(val(args[i]) for i in (1, 2, 3)) + tuple(int(args[i]) for i in (6, 7, 9, 10, 12, 13, 14))
        if all(shape != s for s, _, _ in calls):
            calls.append((shape, m.group(1), dot))
    return calls


def peaks(bench, isa, best, threads_list):
    return {t: run_json([str(bench / isa / "fma_peak"), str(t)], env_for(t, isa, best)) for t in threads_list}


def gemm_table(bench, isa, best, threads_list, models):
    peak = peaks(bench, isa, best, threads_list)
    lines = [f"Path {isa}. FMA peak (fma_peak): " +
             ", ".join(f"{t} thread{'s' if t > 1 else ''}: {peak[t]['peak_gflops']:.1f} GFLOP/s" for t in threads_list) +
             (f"; by CPU time, one core: {peak[1]['peak_gflops_cpu']:.1f}" if 1 in peak else "") + "\n",
             "| model, batch | product | M x N x K | threads | cannl GFLOP/s | OpenBLAS GFLOP/s | cannl/OpenBLAS | "
             "cannl/peak | CPU time: cannl GFLOP/s | cannl/OpenBLAS | cannl/peak |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model in [m for m in GEMM_MODELS if m in models]:
        src = (bench / isa / model / f"{model}.c").read_text()
        for batch, *_ in MODELS[model][1]:
            for shape, label, dot in gemm_calls(src, batch):
                for t in threads_list:
                    # OpenBLAS's idle threads spin for a while after each call (its THREAD_TIMEOUT),
                    # in the one process that times both: two-thread figures then ranged from 94 to
                    # 187 GFLOP/s from process to process, for either side, at 512 x 512 x 128.
                    # With the shortest timeout both measure steadily (cannl 164-174, OpenBLAS
                    # 159-167 in four processes each).
                    env = env_for(t, isa, best)
                    env["OPENBLAS_THREAD_TIMEOUT"] = "4"
                    r = run_json([str(bench / isa / "gemm_bench")] + [str(x) for x in shape] + [str(t)] +
                                 (["dot"] if dot else []), env)
                    ob, c = r["openblas_gflops"], r["cannl_gflops"]
                    row = (f"| {model}, {batch} | `{label}`{' (dot)' if dot else ''} | {shape[0]} x {shape[1]} x {shape[2]} | {t} | {c:.1f} | "
                           f"{ob:.1f} | {c / ob if ob > 0 else 0:.2f} | {c / peak[t]['peak_gflops']:.2f} |")
                    if t == 1:  # one core, while the product had it
                        cc, oc = r["cannl_gflops_cpu"], r["openblas_gflops_cpu"]
                        row += f" {cc:.1f} | {cc / oc if oc > 0 else 0:.2f} | {cc / peak[1]['peak_gflops_cpu']:.2f} |"
                    else:
                        row += " - | - | - |"
                    lines.append(row)
            print(f"  {isa}: {model} batch {batch} products done", file=sys.stderr, flush=True)
    lines.append("\nGFLOP/s by the wall clock (best of 3 rounds) and, on one thread, by the process's CPU time "
                 "(the speed while it had the core: other jobs on the machine slow the first, not the second); "
                 "peak: fma_peak's, measured the same way in the same run.")
    return "\n".join(lines)


# ---------------------------------------------------------------- steps

def step_times(bench, isa, best, models, threads_list, reps):
    results = {}  # (model, batch, threads, impl) -> [median_us per process]
    for rep in range(reps):
        for threads in threads_list:
            for model, batch, warmup, steps, _ in cases(models):
                args = [str(batch), str(warmup), str(steps), str(threads)]
                impls = {"cannl": [str(bench / isa / f"{model}_step")],
                         "cannl-blas": [str(bench / isa / f"{model}_blas_step")],
                         "pytorch": [sys.executable, str(HERE / "torch_step.py"), model]}
                for impl, cmd in impls.items():
                    if impl != "pytorch" and not Path(cmd[0]).exists():
                        continue
                    r = run_json(cmd + args, env_for(threads, isa, best))
                    if impl == "cannl" and r["isa"] != isa:
                        raise SystemExit(f"bench.py: {cmd[0]} ran on {r['isa']}, not {isa}")
                    results.setdefault((model, batch, threads, impl), []).append(r["median_us"])
                    results.setdefault((model, batch, threads, impl + " cpu"), []).append(r["cpu_us"])
        print(f"  {isa}: step repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return results


def step_table(results, isa, models, threads_list):
    lines = [f"Path {isa}: step times (bench/step_bench.c, bench/torch_step.py)\n",
             "| model | batch | threads | cannl ms/step | cannl --blas ms/step | PyTorch ms/step | cannl ex/s | "
             "PyTorch ex/s | cannl/PyTorch | blas/PyTorch | CPU time: cannl/PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model, batch, *_ in cases(models):
        for t in threads_list:
            c = results.get((model, batch, t, "cannl"))
            b = results.get((model, batch, t, "cannl-blas"))
            p = results.get((model, batch, t, "pytorch"))
            if not c or not p:
                continue
            ratio = statistics.median(x / y for x, y in zip(c, p))
            bratio = f"{statistics.median(x / y for x, y in zip(b, p)):.3f}" if b else "-"
            lines.append(f"| {model} | {batch} | {t} | {fmt_ms(c)} | {fmt_ms(b) if b else '-'} | {fmt_ms(p)} | "
                         f"{batch / statistics.median(c) * 1e6:.0f} | {batch / statistics.median(p) * 1e6:.0f} | "
                         f"{ratio:.3f} | {bratio} | {cpu_ratio(results, model, batch, t)} |")
    lines.append("\nms/step: median over the processes of each process's median step (min-max of those medians); "
                 "CPU time: the median of the per-repetition ratios of the processes' CPU time per step (one thread: "
                 "the steps' cost while they had the core, which other jobs on the machine do not inflate)")
    return "\n".join(lines)


def cpu_ratio(results, model, batch, t):
    c, p = results.get((model, batch, t, "cannl cpu")), results.get((model, batch, t, "pytorch cpu"))
    return f"{statistics.median(x / y for x, y in zip(c, p)):.3f}" if t == 1 and c and p else "-"


# ---------------------------------------------------------------- training programs

def trainer_seconds(trainer, fashion, batch, steps, threads, env):
    """(the seconds `trainer --steps steps` says it trained, the CPU seconds of the process)."""
    d = Path(fashion)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([str(trainer), "--data", f"image={d / 'train-images-idx3-ubyte.gz'}", "--data",
                          f"label={d / 'train-labels-idx1-ubyte.gz'}", "--batch", str(batch), "--steps", str(steps),
                          "--threads", str(threads), "--quiet"], env=env, check=True, capture_output=True,
                         text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"trained to step (\d+) in ([0-9.]+) s", out)
    if not m or int(m.group(1)) != steps:
        raise SystemExit(f"bench.py: no 'trained to step {steps}' from {trainer}:\n{out}")
    return float(m.group(2)), (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def train_times(bench, isa, best, models, threads_list, reps, fashion):
    results = {}  # (model, batch, threads, impl) -> [us per step]
    for rep in range(reps):
        for threads in threads_list:
            for model, batch, _, _, lengths in cases(models):
                if not lengths:
                    continue
                s1, s2 = lengths
                trainer = bench / isa / f"{model}_train"
                env = env_for(threads, isa, best)
                (t1, c1), (t2, c2) = (trainer_seconds(trainer, fashion, batch, s, threads, env) for s in (s1, s2))
                results.setdefault((model, batch, threads, "cannl"), []).append((t2 - t1) / (s2 - s1) * 1e6)
                results.setdefault((model, batch, threads, "cannl cpu"), []).append((c2 - c1) / (s2 - s1) * 1e6)
                r = run_json([sys.executable, str(HERE / "torch_train.py"), model, str(batch), str(s1), str(s2),
                              str(threads), fashion], env_for(threads, isa, best))
                results.setdefault((model, batch, threads, "pytorch"), []).append(r["step_us"])
                results.setdefault((model, batch, threads, "pytorch cpu"), []).append(r["cpu_us"])
        print(f"  {isa}: trainer repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return results


def train_table(results, isa, models, threads_list):
    lines = [f"Path {isa}: training programs' steady-state step, data path included "
             "(<model>_train, bench/torch_train.py)\n",
             "| model | batch | threads | cannl trainer ms/step | PyTorch ms/step | cannl/PyTorch | "
             "CPU time: cannl/PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for model, batch, *_ in cases(models):
        for t in threads_list:
            c = results.get((model, batch, t, "cannl"))
            p = results.get((model, batch, t, "pytorch"))
            if not c or not p:
                continue
            ratio = statistics.median(x / y for x, y in zip(c, p))
            lines.append(f"| {model} | {batch} | {t} | {fmt_ms(c)} | {fmt_ms(p)} | {ratio:.3f} | "
                         f"{cpu_ratio(results, model, batch, t)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_dir")
    ap.add_argument("--best", required=True, help="this CPU's best instruction set")
    ap.add_argument("--isa", nargs="+", required=True, help="the paths to measure")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=[m for m in MODELS if m not in ZOO])
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--no-steps", action="store_true")
    ap.add_argument("--no-train", action="store_true")
    a = ap.parse_args()
    bench = Path(a.bench_dir)
    for m in a.models:
        if m not in MODELS:
            raise SystemExit(f"bench.py: unknown model '{m}' (known: {', '.join(MODELS)})")
    best = a.best
    print(f"# cannl vs PyTorch, {a.reps} interleaved repetitions; paths: {', '.join(a.isa)} "
          f"(this CPU's best: {best})\n")
    for isa in a.isa:
        if not a.no_gemm:
            print(gemm_table(bench, isa, best, a.threads, a.models) + "\n", flush=True)
        if not a.no_steps:
            print(step_table(step_times(bench, isa, best, a.models, a.threads, a.reps), isa, a.models, a.threads) +
                  "\n", flush=True)
        if not a.no_train:
            if not Path(a.fashion, "train-images-idx3-ubyte.gz").exists():
                print(f"(training programs: no Fashion-MNIST in {a.fashion})\n")
            else:
                print(train_table(train_times(bench, isa, best, a.models, a.threads, a.reps, a.fashion), isa, a.models,
                                  a.threads) + "\n", flush=True)


if __name__ == "__main__":
    main()
