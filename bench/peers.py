#!/usr/bin/python3
"""peers.py — cannl's training step against today's CPU peers: PyTorch 2 eager, PyTorch 2 torch.compile
(default mode and max-autotune-no-cudagraphs) and JAX + optax under jax.jit (run it through
bench/peers.sh, which builds cannl's step timers into BENCH_DIR and finds the peers' venv).

Usage: peers.py BENCH_DIR --python VENV/bin/python [--reps R] [--threads 1 2] [--models m ...]
                [--peers cannl eager compile max-autotune jax] [--quick]

Models: bench/bench.py's image classifiers (fashion_mlp and fashion_mlp_adam at batch 128, fashion_cnn at
64 and 256, cnn_dense256 at 64; same warm-up and timed steps; the zoo's resnet_bn at 64, mlp_ln_dropout at 128
and gru_rows at 128) and bench/gpt_bench.py's gpt_char and llama_char (batch 8, ctx 128). cannl:
bench/step_bench.c on the generated model; PyTorch 2: bench/peer_torch.py (the models of bench/torch_step.py
and bench/torch_gpt.py, imported); JAX: bench/peer_jax.py.

For each repetition, for each thread count, for each model, a fresh process of each implementation in
turn (interleaved, so the machine's slow phases hit all alike); each runs warm-up steps untimed (the
compiled peers compile before or during them; that time is reported apart and never enters a step), then
times steps one by one and reports its median. The table gives the median of the process medians, their
range, and the median of the per-repetition ratios cannl / peer.

Threads (/work/shared/benchmarking.md): OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = T, torch.set_num_threads(T),
OMP_WAIT_POLICY=PASSIVE at 2 threads (cannl and PyTorch). JAX: at one thread XLA_FLAGS=
--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1; at T > 1 its defaults, restricted with
taskset to T cores where the machine has more. OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, ATEN_CPU_CAPABILITY and
DNNL_MAX_CPU_ISA are unset for every peer: each runs its own best kernels. torch.compile's Inductor cache
lives in BENCH_DIR/inductor-cache (the first process of a model compiles cold, later ones hit the cache:
the compile column gives the range).
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import MODELS as IMAGE_MODELS  # noqa: E402
from bench import env_for, fmt_ms  # noqa: E402
from bench import run_json as run_json_str  # noqa: E402
from gpt_bench import MODELS as GPT_MODELS  # noqa: E402

PEERS = {  # name: (column title, driver script, mode)
    "eager": ("PyTorch 2 eager", "peer_torch.py", "eager"),
    "compile": ("torch.compile", "peer_torch.py", "compile"),
    "max-autotune": ("torch.compile max-autotune", "peer_torch.py", "max-autotune"),
    "jax": ("JAX jit", "peer_jax.py", None),
}
MIN_COMPILED_WARMUP = 3  # torch.compile may recompile in the 2nd step (the optimiser's state appears)


def cases(models, quick):
    """(model, batch, warmup, steps)."""
    for m in models:
        if m in GPT_MODELS:
            ctx, batch, (warm, steps) = GPT_MODELS[m][:3]
            yield m, batch, warm, max(3, steps // 4) if quick else steps
        else:
            for batch, warm, steps, _ in IMAGE_MODELS[m][1]:
                if quick and batch > 128 and m != "fashion_mlp":
                    continue  # the smoke run leaves out fashion_cnn at batch 256
                yield m, batch, warm, max(3, steps // 10) if quick else steps


def run_json(cmd, env):
    return run_json_str([str(c) for c in cmd], env)


def peer_env(threads, bench, jax=False):
    env = env_for(threads)
    for k in ("OPENBLAS_L2_SIZE", "XLA_FLAGS"):
        env.pop(k, None)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(bench / "inductor-cache")
    if jax and threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return env


def taskset(threads):
    n = os.cpu_count() or 1
    return ["taskset", "-c", f"0-{threads - 1}"] if 1 < threads < n else []


def cpu_name():
    info = {}
    for line in open("/proc/cpuinfo"):
        if ":" in line:
            k, v = (s.strip() for s in line.split(":", 1))
            info.setdefault(k, v)
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')} model {info.get('model', '?')}), "
            f"{os.cpu_count()} logical CPUs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_dir")
    ap.add_argument("--python", required=True, help="the peers' virtual environment's python")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=["fashion_mlp", "fashion_mlp_adam", "fashion_cnn", "cnn_dense256",
                                                    "gpt_char", "resnet_bn", "mlp_ln_dropout", "llama_char",
                                                    "gru_rows"])
    ap.add_argument("--peers", nargs="+", default=["cannl"] + list(PEERS))
    ap.add_argument("--quick", action="store_true", help="smoke run: a tenth of the steps, no fashion_cnn 256")
    ap.add_argument("--save", help="write the measurements to this JSON file")
    ap.add_argument("--load", nargs="+", default=[],
                    help="measurements of earlier runs (--save) to tabulate with this run's (then not interleaved: "
                         "the table says so)")
    a = ap.parse_args()
    bench = Path(a.bench_dir)
    for m in a.models:
        if m not in IMAGE_MODELS and m not in GPT_MODELS:
            raise SystemExit(f"peers.py: unknown model '{m}'")
    for p in a.peers:
        if p != "cannl" and p not in PEERS:
            raise SystemExit(f"peers.py: unknown peer '{p}' (known: cannl {' '.join(PEERS)})")
    load0 = os.getloadavg()[0]
    peak = {t: run_json([str(bench / "fma_peak"), str(t)], env_for(t)) for t in a.threads}
    res, info, isa, loaded = {}, {}, "?", set()
    for f in a.load:
        saved = json.loads(Path(f).read_text())
        for model, batch, t, p, d in saved["results"]:
            res[(model, batch, t, p)] = d
            loaded.add(p)
        info.update(saved["info"])
        isa = saved["isa"] if saved["isa"] != "?" else isa
    all_cases = list(cases(a.models, a.quick))
    for rep in range(a.reps):
        for t in a.threads:
            for model, batch, warm, steps in all_cases:
                for p in a.peers:
                    if p == "cannl":
                        r = run_json([bench / f"{model}_step", batch, warm, steps, t], env_for(t))
                        isa = r.get("isa", isa)
                    else:
                        _, script, mode = PEERS[p]
                        w = max(warm, MIN_COMPILED_WARMUP) if p != "eager" else warm
                        cmd = [a.python, HERE / script, model, batch, w, steps, t] + ([mode] if mode else [])
                        if p == "jax":
                            cmd = taskset(t) + cmd
                        r = run_json(cmd, peer_env(t, bench, jax=p == "jax"))
                        info[p] = r.get("kernels", "?") + (f"; torch {r['torch']}" if "torch" in r else "") + \
                            (f"; jax {r['jax']}" if "jax" in r else "")
                    d = res.setdefault((model, batch, t, p), {"us": [], "cpu": [], "compile": [], "loss": []})
                    d["us"].append(r["median_us"])
                    d["compile"].append(r.get("compile_s", 0.0))
                    d["loss"].append(r.get("loss", float("nan")))
                    d["cpu"].append(r["cpu_us"])
                    print(f"  rep {rep + 1}/{a.reps} {model} b{batch} {t}T {p}: {r['median_us'] / 1000:.3f} ms"
                          + (f" (compile {r['compile_s']:.1f} s)" if r.get("compile_s") else ""),
                          file=sys.stderr, flush=True)
    if a.save:
        Path(a.save).write_text(json.dumps({"results": [list(k) + [d] for k, d in res.items()], "info": info,
                                            "isa": isa}))
    peers = [p for p in PEERS if p in a.peers or p in loaded]
    print("### cannl against PyTorch 2 and JAX: " +
          (f"{a.reps} interleaved repetitions of fresh processes" if a.reps else "no measurements of this run") +
          f"{' (smoke run: --quick)' if a.quick else ''}"
          f"{f'; tabulated with the measurements of {len(a.load)} earlier run(s), not interleaved' if a.load else ''}"
          "\n")
    print(f"CPU: {cpu_name()}; load average at the start: {load0:.1f}, at the end: {os.getloadavg()[0]:.1f}. "
          "FMA peak (bench/fma_peak.c, "
          f"{peak[a.threads[0]].get('isa', '?')}): " +
          ", ".join(f"{t} thread{'s' if t > 1 else ''} {peak[t]['peak_gflops']:.1f} GFLOP/s" for t in a.threads) +
          (f"; by CPU time, one core: {peak[1]['peak_gflops_cpu']:.1f}" if 1 in peak else "") +
          f". cannl's kernels: {isa}.\n")
    for p in peers:
        print(f"- {PEERS[p][0]}: {info.get(p, '?')}")
    head = (["model", "batch", "threads", "cannl ms"] + [f"{PEERS[p][0]} ms" for p in peers] +
            [f"cannl / {PEERS[p][0]}" for p in peers] + [f"CPU time, 1 thread: cannl / {PEERS[p][0]}" for p in peers] +
            ["compile s (" + ", ".join(PEERS[p][0] for p in peers if p != "eager") + ")"])
    print("\n| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for model, batch, _, _ in all_cases:
        for t in a.threads:
            c = res.get((model, batch, t, "cannl"))
            row = [model, str(batch), str(t), fmt_ms(c["us"]) if c else "-"]
            ratios, cpus, comp = [], [], []
            for p in peers:
                d = res.get((model, batch, t, p))
                row.append(fmt_ms(d["us"]) if d else "-")
                ratios.append(f"{statistics.median(x / y for x, y in zip(c['us'], d['us'])):.2f}" if c and d else "-")
                cpus.append(f"{statistics.median(x / y for x, y in zip(c['cpu'], d['cpu'])):.2f}"
                            if t == 1 and c and d else "-")
                if p != "eager" and d:
                    comp.append(f"{min(d['compile']):.1f}-{max(d['compile']):.1f}")
            print("| " + " | ".join(row + ratios + cpus + [", ".join(comp) or "-"]) + " |")
    print("\nms: median over the processes of each process's median step (min-max of those medians); cannl / peer: "
          "median of the per-repetition ratios; CPU time (one thread): the same ratio of the processes' CPU time per "
          "timed step, the step's cost while it had the core, which other jobs on the machine inflate less; "
          "compile s: torch.compile's warm-up steps (compiling the loss, its "
          "backward and the optimiser step; cold Inductor cache in the first process, warm after), JAX's "
          "lower().compile(), min-max over the processes; never part of a step.")


if __name__ == "__main__":
    main()
