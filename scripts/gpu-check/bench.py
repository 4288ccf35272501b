#!/usr/bin/env python3
"""GPT-2 124M's training step on the GPU: cannl against PyTorch eager and torch.compile
(scripts/gpu-check.sh, part `bench`), through bench/gpu/bench_gpt.py, within a deadline.

  bench.py --stage DIR --work DIR --deadline UNIX_SECONDS [--bin DIR] [--lines FILE] [--dry-run]

Configurations, in this order (the first two are what the report must have): bf16 B=8, fp32 B=8,
bf16 B=16, fp32 B=16, all at T=1024. Each is one bench_gpt.py process under `timeout`: cannl's
trainer (gpu_gpt2_124m_cuda_train for fp32, gpu_gpt2_124m_bf16_cuda_train for bf16: cuBLAS's
fp32 or bf16-operand products, fp32 everywhere else) against PyTorch 2.x eager and
torch.compile with the same model, AdamW, clipping and batch (bf16: autocast; fp32: TF32 off).
cannl's step is the steady state of two runs of S1 and S2 steps, PyTorch's the S2 - S1 steps
after S1 warm-up steps (compilation among them); medians over the runs. A 3-step probe of cannl's
trainer first bounds its step time: the runs and steps (2 runs of 5 and 15 at best) shrink so that
cannl takes about a third of the time left at most, and a configuration is skipped, and said so,
when less than a minute is left. A trainer that fails its probe is left out; PyTorch is timed.

For each configuration one line of this exact form goes to --lines (and stdout):
  gpt2_124m bf16 B=8 T=1024: cannl X ms, torch.compile Y ms, eager Z ms, ratio X/Y
with X/Y written as its value (n/a where a number is missing: a dry run has only n/a), then a line
with the peak device memory of each and torch.compile's warm-up time; a line saying why a number
is missing comes before it, starting `gpt2_124m PRECISION B=N:` (no T=, so that only the line
above starts `gpt2_124m PRECISION B=N T=1024:`). Exit status 0 when both B=8 lines have all three
numbers, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "gpu", "bench_gpt.py")
TRAINER = {"fp32": "gpu_gpt2_124m_cuda_train", "bf16": "gpu_gpt2_124m_bf16_cuda_train"}
CONFIGS = [("bf16", 8), ("fp32", 8), ("bf16", 16), ("fp32", 16)]
T = 1024


def fmt(ms):
    return f"{ms:.2f} ms" if ms is not None else "n/a"


def gib(b):
    return f"{b / 2**30:.2f} GiB" if b else "n/a"


def line_of(precision, batch, res):
    rows = res.get("rows", {}) if res else {}
    get = lambda k: rows.get(k, {}).get("ms")  # noqa: E731
    x, y, z = get(f"cannl {precision}"), get(f"torch compile {precision}"), get(f"torch eager {precision}")
    ratio = f"{x / y:.2f}" if x and y else "n/a"
    main = (f"gpt2_124m {precision} B={batch} T={T}: cannl {fmt(x)}, torch.compile {fmt(y)}, eager {fmt(z)}, "
            f"ratio {ratio}")
    c, tc, te = rows.get(f"cannl {precision}", {}), rows.get(f"torch compile {precision}", {}), \
        rows.get(f"torch eager {precision}", {})
    warm = tc.get("warmup_s")
    detail = (f"  peak device memory: cannl {gib(c.get('smi_peak_bytes'))} (nvidia-smi, whole process; arena "
              f"{gib(c.get('peak_bytes'))}), torch.compile {gib(tc.get('peak_bytes'))}, "
              f"eager {gib(te.get('peak_bytes'))} "
              f"(max_memory_allocated); torch.compile warm-up (compile + S1 steps) "
              f"{', '.join(f'{w:.0f} s' for w in warm) if warm else 'n/a'}; "
              f"runs {res.get('runs_done', 0) if res else 0}, "
              f"steps {res.get('steps') if res else 'n/a'}")
    return main, detail, bool(x and y and z)


def probe(trainer, shard, batch, timeout):
    """(an upper bound of the seconds per step, from a 3-step run's wall time, start-up included;
    or None and why it failed)."""
    cmd = [trainer, "--stream", f"tokens,next={shard}", "--steps", "3", "--batch", str(batch), "--seed", "1",
           "--quiet", "--log-every", "0"]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"3 steps took over {timeout:.0f} s"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()[-600:]}"
    return (time.time() - t0) / 3, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", required=True)
    ap.add_argument("--bin", help="the staged programs (default STAGE/bin)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--deadline", type=float, required=True)
    ap.add_argument("--lines")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--dry-run", action="store_true")
    opt = ap.parse_args()
    os.makedirs(opt.work, exist_ok=True)
    out = open(opt.lines, "w") if opt.lines else None

    def say(s):
        print(s, flush=True)
        if out:
            out.write(s + "\n")
            out.flush()

    ok = {}
    for precision, batch in CONFIGS:
        trainer = os.path.join(opt.bin or os.path.join(opt.stage, "bin"), TRAINER[precision])
        card = os.path.join(opt.stage, "cards", TRAINER[precision].replace("_train", "") + ".json")
        left = opt.deadline - time.time()
        res = None
        if not os.path.isfile(trainer):
            say(f"gpt2_124m {precision} B={batch}: {TRAINER[precision]} not staged")
        elif opt.dry_run:
            say(f"gpt2_124m {precision} B={batch}: would run bench_gpt.py (cannl {TRAINER[precision]}, "
                f"torch eager and torch.compile, --precision {precision})")
        elif left < 60:
            say(f"gpt2_124m {precision} B={batch}: skipped, {left:.0f} s left")
        else:
            # The B=8 configurations share what is left; B=16 gets what they leave. Two runs of
            # 5 and 15 steps when there is time for them (torch.compile's first compilation takes
            # about a minute), else one.
            if batch == 8:
                left = left / sum(1 for p, b in CONFIGS if b == 8 and (p, b) not in ok)
            # cannl's share of it: at most about a third, from a 3-step probe (a slow program
            # gets fewer steps, not the whole budget); a program that fails is left out and
            # PyTorch still timed.
            t0 = time.time()
            per_step, why = probe(trainer, os.path.join(opt.stage, "data", "kjv", "train.bin"), batch, left / 3)
            cannl = []
            if per_step is None:
                print(f"bench {precision} B={batch}: cannl's probe failed ({why}): PyTorch only", flush=True)
                say(f"gpt2_124m {precision} B={batch}: cannl's trainer failed its 3-step probe: "
                    f"{why.splitlines()[-1][:300]}")
                runs, s1, s2 = 1, 3, 8
            else:
                left -= time.time() - t0
                runs = 2 if left > 200 and 2 * 20 * per_step < 0.35 * left else 1
                s1, s2 = next(((a, b) for a, b in ((5, 15), (3, 8), (3, 5)) if runs * (a + b) * per_step < 0.35 * left),
                              (2, 3))
                print(f"bench {precision} B={batch}: probe {per_step:.2f} s a step at most; {runs} run(s) of "
                      f"{s1} and {s2} steps", flush=True)
                cannl = ["--cannl", f"{precision}={trainer}"]
            js = os.path.join(opt.work, f"bench_{precision}_b{batch}.json")
            cmd = [opt.python, BENCH, "--model", "gpt2_124m", "--batch", str(batch), "--ctx", str(T), *cannl,
                   "--precision", precision, "--runs", str(runs), "--steps", str(s1), str(s2), "--json", js,
                   "--smi-memory", "--work", opt.work]
            if os.path.isfile(card):
                cmd += ["--card", card]
            print("$ " + " ".join(cmd), flush=True)
            t0 = time.time()
            try:
                p = subprocess.run(cmd, timeout=max(30, left - 5), stdout=sys.stdout, stderr=subprocess.STDOUT)
                why = f"exit {p.returncode}" if p.returncode not in (0,) else ""
            except subprocess.TimeoutExpired:
                why = f"cut off after {time.time() - t0:.0f} s"
            if os.path.isfile(js):
                with open(js) as f:
                    res = json.load(f)
            if why:
                print(f"bench {precision} B={batch}: {why} (rows so far are kept)", flush=True)
        main_line, detail, complete = line_of(precision, batch, res)
        say(main_line)
        say(detail)
        ok[(precision, batch)] = complete
    if opt.dry_run:
        return 0
    return 0 if ok.get(("bf16", 8)) and ok.get(("fp32", 8)) else 1


if __name__ == "__main__":
    sys.exit(main())
