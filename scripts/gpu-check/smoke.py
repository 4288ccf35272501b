#!/usr/bin/env python3
"""Each example's CUDA trainer trains a few steps on the staged data (scripts/gpu-check.sh, part
`train`; fashion_cnn, fashion_einsum and moons_mlp go through tests/e2e/train.py as gpu.train.*).

  smoke.py --stage DIR --work DIR [--bin DIR] [--only CASE,...] [--list]

Every step's loss is logged (--log-every 1, which also checks the state is finite); a case passes
when every loss is finite and the mean of the last 3 is below the mean of the first 3 by the
case's factor. Exit status 0 when every staged case passed, 1 otherwise; a case whose trainer is
not staged is skipped.
"""
import argparse
import math
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import e2e_util as u  # noqa: E402
from refs import Results, data_flags, staged  # noqa: E402

# case: (CUDA trainer, data, args, the last 3 steps' mean loss at most this times the first 3's)
CASES = {
    "fashion_mlp": ("fashion_mlp_cuda_train", "fashion", ["--steps", "40", "--batch", "64"], 0.8),
    "gpt_tiny": ("gpt_tiny_cuda_train", "text", ["--steps", "40", "--batch", "8"], 0.9),
    "gpt_char": ("gpt_char_cuda_train", "text", ["--steps", "60", "--batch", "16"], 0.9),
    "gpt_char_bf16": ("gpt_char_bf16_cuda_train", "text", ["--steps", "60", "--batch", "16"], 0.9),
    "llama_char": ("llama_char_cuda_train", "text", ["--steps", "60", "--batch", "16"], 0.9),
    # GPT-2 124M, 8 steps of 8 x 1024 KJV bytes at the constant lr 6e-4 (the spec's warm-up starts
    # near 0): the byte distribution alone takes the loss from ln 50304 = 10.8 well down.
    "gpt2_124m": ("gpu_gpt2_124m_cuda_train", "shard",
                  ["--steps", "8", "--batch", "8", "--lr-schedule", "constant"], 0.8),
    "gpt2_124m_bf16": ("gpu_gpt2_124m_bf16_cuda_train", "shard",
                       ["--steps", "8", "--batch", "8", "--lr-schedule", "constant"], 0.8),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", required=True)
    ap.add_argument("--bin", help="the staged programs (default STAGE/bin)")
    ap.add_argument("--work")
    ap.add_argument("--only", type=lambda s: [c for c in s.split(",") if c], default=None)
    ap.add_argument("--list", action="store_true")
    opt = ap.parse_args()
    opt.bin = opt.bin or os.path.join(opt.stage, "bin")
    res = Results()
    spec_dir = os.path.join(HERE, "..", "..", "specs")
    names = [c for c in CASES if (not opt.only or c in opt.only) and
             (c != "llama_char" or os.path.isfile(os.path.join(spec_dir, "llama_char.cannl")))]
    if opt.list:
        for c in names:
            binary, kind, args, factor = CASES[c]
            print(f"train {c}: {binary} on {kind}, {' '.join(args)}, last 3 losses <= {factor} x first 3"
                  f"{'' if staged(opt.bin, binary) else '  [not staged]'}")
        return 0
    u.check(opt.work, "--work DIR is needed")
    work = u.fresh_dir(opt.work)
    for case in names:
        binary, kind, args, factor = CASES[case]
        path = staged(opt.bin, binary)
        if not path:
            res.skip(case, f"{binary} not staged")
            continue

        def one(case=case, path=path, kind=kind, args=args, factor=factor):
            metrics = os.path.join(work, f"{case}.jsonl")
            extra = []
            if kind == "fashion":
                f = os.path.join(opt.stage, "data", "fashion")
                extra = [f"--test=image={f}/t10k-images-idx3-ubyte.gz", f"--test=label={f}/t10k-labels-idx1-ubyte.gz"]
            u.run([path] + data_flags(opt.stage, kind) + extra + args +
                  ["--seed", "1", "--log-every", "1", "--quiet", "--metrics", metrics], timeout=600)
            records = u.read_jsonl(metrics)
            losses = ([r["loss"] for r in records if "loss" in r] or
                      [r["train_loss"] for r in records if "train_loss" in r])
            u.check(len(losses) >= 6, f"{len(losses)} losses logged")
            u.check(all(v is not None and math.isfinite(v) for v in losses), f"a loss is not finite: {losses}")
            first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
            acc = [r["accuracy"] for r in records if "accuracy" in r]
            print(f"  {case}: {len(losses)} steps, loss {first:.4f} (first 3) -> {last:.4f} (last 3), "
                  f"{last / first:.3f}x (at most {factor}){f'; test accuracy {acc[-1]:.4f}' if acc else ''}",
                  flush=True)
            u.check(last <= factor * first, f"the loss did not go down enough: {[round(v, 4) for v in losses]}")

        res.run(f"train {case}", one)
    return res.finish("train")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except u.Failure as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
