#!/usr/bin/env python3
"""bf16 (and tf32) training of gpt_char on the GPU tracks fp32 (issue 18, `--precision`); with
--cpu, the C target's bf16 products (AVX512_BF16, issue 38) the same way.

  precision_track.py --fp32 BIN --other BIN --precision NAME --text-dir DIR --work DIR
                     [--steps 300] [--tol 0.05] [--batch 16] [--cpu]

The byte stream is the repository's own documentation (DIR/docs/*.md and DIR/README.md, sorted,
concatenated: text that is there on every machine), the last 10% of it the validation stream.
Both trainers (gpt_char for --target cuda: fp32 products, and the same spec generated with
--precision NAME) train --steps steps from the same seed on the same windows and validate on
the same fixed batches at the end; their last val_loss must agree within --tol nats per byte,
and each must have learnt (val_loss below ln 256 = 5.55, a uniform guess, by a margin).
The checkpoints hold fp32 params either way: the fp32 trainer resumes the other's checkpoint
and takes one more step.
With --cpu (C trainers): skipped (77) on a CPU without AVX512_BF16, where both would run fp32;
and the other trainer under CANNL_ISA=avx2 must say once on stderr that its products run in
fp32.
"""
import argparse
import glob
import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_util as u  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp32", required=True)
    ap.add_argument("--other", required=True)
    ap.add_argument("--precision", required=True)
    ap.add_argument("--text-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--cpu", action="store_true", help="C trainers: need AVX512_BF16, check the fp32 fallback")
    opt = ap.parse_args()
    u.fresh_dir(opt.work)
    if opt.cpu:
        flags = open("/proc/cpuinfo").read().split() if os.path.exists("/proc/cpuinfo") else []
        if "avx512_bf16" not in flags or os.environ.get("CANNL_ISA", "avx512") != "avx512":
            u.skip("this CPU has no AVX512_BF16 (or CANNL_ISA is set below avx512): bf16 would run in fp32")
    files = sorted(glob.glob(os.path.join(opt.text_dir, "docs", "*.md"))) + [os.path.join(opt.text_dir, "README.md")]
    text = b"".join(open(f, "rb").read() for f in files)
    u.check(len(text) > 100_000, f"only {len(text)} bytes of text in {opt.text_dir}")
    cut = len(text) * 9 // 10
    train, val = os.path.join(opt.work, "train.txt"), os.path.join(opt.work, "val.txt")
    open(train, "wb").write(text[:cut])
    open(val, "wb").write(text[cut:])
    val_loss, ckpt = {}, {}
    for kind, binary in (("fp32", opt.fp32), (opt.precision, opt.other)):
        ckpt[kind] = os.path.join(opt.work, f"{kind}.safetensors")
        metrics = os.path.join(opt.work, f"{kind}.jsonl")
        u.run([binary, "--stream", f"tokens,next={train}", "--val-stream", f"tokens,next={val}",
               "--steps", str(opt.steps), "--batch", str(opt.batch), "--eval-batches", "8", "--seed", "1",
               "--log-every", "50", "--quiet", "--checkpoint", ckpt[kind], "--metrics", metrics])
        vals = [r["val_loss"] for r in u.read_jsonl(metrics) if "val_loss" in r]
        u.check(vals, f"{kind}: no val_loss in {metrics}")
        val_loss[kind] = vals[-1]
        print(f"{kind}: val_loss {vals[-1]:.4f} after {opt.steps} steps", flush=True)
        u.check(math.isfinite(vals[-1]) and vals[-1] < math.log(256) - 1.0, f"{kind}: did not learn ({vals[-1]})")
    if opt.cpu:  # the same bits would mean the products never left fp32
        u.check(val_loss[opt.precision] != val_loss["fp32"], f"{opt.precision}: fp32's val_loss to the last bit")
    diff = abs(val_loss[opt.precision] - val_loss["fp32"])
    print(f"|{opt.precision} - fp32| = {diff:.4f} (tolerance {opt.tol})", flush=True)
    u.check(diff <= opt.tol, f"{opt.precision} val_loss {val_loss[opt.precision]:.4f} is {diff:.4f} from fp32's "
            f"{val_loss['fp32']:.4f} (tolerance {opt.tol})")
    # Interchangeable checkpoints: fp32 resumes the other run's.
    u.run([opt.fp32, "--stream", f"tokens,next={train}", "--steps", str(opt.steps + 1), "--batch", str(opt.batch),
           "--seed", "1", "--quiet", "--log-every", "0", "--resume", ckpt[opt.precision]])
    if opt.cpu:  # a CPU (here: CANNL_ISA) without bf16 products runs fp32 and says so, once
        env = dict(os.environ, CANNL_ISA="avx2")
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        _, err = u.run([opt.other, "--stream", f"tokens,next={train}", "--steps", "2", "--batch", str(opt.batch),
                        "--seed", "1", "--quiet", "--log-every", "0"], env=env)
        said = err.count("the matrix products run in fp32")
        u.check(said == 1, f"CANNL_ISA=avx2: the bf16 trainer said {said} times that it runs fp32:\n{err}")


if __name__ == "__main__":
    u.run_main(main)
