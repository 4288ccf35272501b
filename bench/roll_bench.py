"""roll_bench.py — repeat blocks as loops against the code before them (run it through bench/roll.sh,
which builds both sides into BENCH/old and BENCH/new: each a generator line and step timers).

Prints three markdown tables:
- the bytes of every generated C file of gpt2_124m (ctx 64) at 12 and 48 layers, old and new,
  against 1.5x gpt_tiny's model source (issue 34: 12 and 48 within 5%, each at most 1.5x);
- `cannl gen` time (best of 3) and `cc -O2 -c` CPU time of the model source at 12 and 48 layers;
- the training step (bench/step_bench.c: median of the timed steps) of each model at each thread
  count, REPS interleaved pairs of fresh processes, the order of old and new alternating.
"""
import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gpt_bench import MODELS, env_for, fmt_ms, run_json  # noqa: E402

SIDES = ("old", "new")


def generator(bench, side):
    return shlex.split((bench / side / "generator").read_text())


def gen(bench, side, spec, out, *extra):
    cmd = generator(bench, side)
    t0 = time.monotonic()
    subprocess.run([cmd[0], "gen", spec, *extra, *cmd[1:], "-o", out], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def compile_cpu_s(src, include):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-O2", "-fopenmp", "-c", "-I", include, "-I", Path(src).parent, src, "-o", os.devnull],
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def source_tables(bench, old_name):
    sizes, times = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        gen(bench, "new", str(bench / "new" / "root" / "specs" / "gpt_tiny.cannl"), f"{tmp}/tiny")
        tiny = os.path.getsize(f"{tmp}/tiny/gpt_tiny.c")
        for side in SIDES:
            for layers in (12, 48):
                d = f"{tmp}/{side}{layers}"
                spec = str(bench / side / "root" / "specs" / "gpt2_124m.cannl")
                best = min(gen(bench, side, spec, d, "--dim", "ctx=64", "--dim", f"layers={layers}") for _ in range(3))
                for f in sorted(os.listdir(d)):
                    if f.endswith((".c", ".h")):
                        sizes[(side, layers, f)] = os.path.getsize(f"{d}/{f}")
                inc = str(bench / side / "root" / "runtime-lib")
                times[(side, layers)] = (best, compile_cpu_s(f"{d}/gpt2_124m.c", inc))
                print(f"  {side} {layers} layers: gen {best:.2f} s, cc -O2 {times[(side, layers)][1]:.1f} s",
                      file=sys.stderr, flush=True)
    files = sorted({f for (_, _, f) in sizes})
    print(f"\n### gpt2_124m (ctx 64): generated sources, old = {old_name} (bytes; limit 1.5 x gpt_tiny.c = "
          f"{int(1.5 * tiny):,})\n")
    print("| file | old, 12 layers | old, 48 | new, 12 | new, 48 | new 48 / 12 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for f in files:
        row = [sizes.get((s, l, f)) for s in SIDES for l in (12, 48)]
        cells = [f"{v:,}" if v is not None else "-" for v in row]
        ratio = f"{row[3] / row[2]:.3f}" if row[2] and row[3] else "-"
        print(f"| {f} | " + " | ".join(cells) + f" | {ratio} |")
    print("\n| side | gen, 12 layers | gen, 48 | cc -O2 -c gpt2_124m.c, 12 layers | cc -O2, 48 |")
    print("| --- | --- | --- | --- | --- |")
    for s in SIDES:
        print(f"| {s} | {times[(s, 12)][0]:.2f} s | {times[(s, 48)][0]:.2f} s | {times[(s, 12)][1]:.1f} s "
              f"| {times[(s, 48)][1]:.1f} s |")


def steps_table(bench, models, threads, reps, old_name):
    res = {(m, t, s): [] for m in models for t in threads for s in SIDES}
    for r in range(reps):
        for t in threads:
            for m in models:
                _, batch, (warm, steps), _, _ = MODELS[m]
                order = SIDES if r % 2 == 0 else SIDES[::-1]
                for s in order:
                    res[(m, t, s)].append(run_json([bench / s / m / "step", batch, warm, steps, t], env_for(t))["median_us"])
                print(f"  rep {r + 1}/{reps} {m} {t} thread(s): old {fmt_ms(res[(m, t, 'old')][-1])} ms, "
                      f"new {fmt_ms(res[(m, t, 'new')][-1])} ms", file=sys.stderr, flush=True)
    print(f"\n### Training step, old = {old_name} against new ({reps} interleaved pairs of fresh processes; "
          "median, min-max)\n")
    print("| model | batch x ctx | threads | old ms | new ms | new / old (median of pairs) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for m in models:
        ctx, batch = MODELS[m][0], MODELS[m][1]
        for t in threads:
            o, n = res[(m, t, "old")], res[(m, t, "new")]
            ratios = [b / a for a, b in zip(o, n)]
            print(f"| {m} | {batch} x {ctx} | {t} | {fmt_ms(statistics.median(o))} ({fmt_ms(min(o))}-{fmt_ms(max(o))}) "
                  f"| {fmt_ms(statistics.median(n))} ({fmt_ms(min(n))}-{fmt_ms(max(n))}) "
                  f"| **{statistics.median(ratios):.3f}** ({min(ratios):.3f}-{max(ratios):.3f}) |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", type=Path)
    ap.add_argument("--old-name", default="old")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=["gpt_char", "gpt2_124m"], choices=["gpt_char", "gpt2_124m"])
    ap.add_argument("--no-sources", action="store_true", help="skip the size and compile-time tables")
    ap.add_argument("--no-steps", action="store_true", help="skip the training step")
    a = ap.parse_args()
    if not a.no_sources:
        source_tables(a.bench, a.old_name)
    if not a.no_steps:
        steps_table(a.bench, a.models, a.threads, a.reps, a.old_name)


if __name__ == "__main__":
    main()
