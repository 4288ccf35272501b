#!/usr/bin/env python3
"""The CUDA inference program against the C one (issue 18, item 4): the same checkpoint and
test images give the same outputs, within a relative 1e-4 (float32; the GPU sums in another
order), and the same test metrics.

  infer_c.py --train BIN --c BIN --cuda BIN --work DIR [--fashion DIR]

--train (fashion_mlp's C training program) trains 20 steps and saves a checkpoint; both
inference programs run forward on the first 1000 test images (--output logits .npy) and
evaluate them (--metric): the logits agree (l2, relative 1e-4), the printed loss and accuracy
(4 decimals) within 2e-4.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_util as u  # noqa: E402

TOL = 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--c", required=True)
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    opt = ap.parse_args()
    u.need_numpy()
    import numpy as np
    paths = u.need_fashion(opt.fashion)
    u.fresh_dir(opt.work)
    sub = u.fashion_subset(paths, opt.work, 2000, 1000)
    ck = os.path.join(opt.work, "c.safetensors")
    u.run([opt.train] + u.data_flags(sub, test=False) + ["--steps", "20", "--batch", "128", "--quiet",
                                                          "--checkpoint", ck])
    outs, printed = {}, {}
    for kind, binary in (("c", opt.c), ("cuda", opt.cuda)):
        outs[kind] = os.path.join(opt.work, f"{kind}.npy")
        flags = [f"--input=image={sub['test_image']}", f"--input=label={sub['test_label']}"]
        out, _ = u.run([binary, "--weights", ck, "--output", outs[kind], "--metric"] + flags)
        printed[kind] = {k: u.printed_value(out, f"test {k}") for k in ("loss", "accuracy")}
        print(f"{kind}: {printed[kind]}")
    a, b = np.load(outs["c"]).astype(np.float64), np.load(outs["cuda"]).astype(np.float64)
    u.check(a.shape == b.shape == (1000, 10), f"shapes {a.shape} / {b.shape}")
    rel = np.linalg.norm(a - b) / np.linalg.norm(a)
    print(f"logits: relative l2 difference {rel:.2e}, max |diff| {np.max(np.abs(a - b)):.2e}")
    u.check(rel <= TOL, f"logits differ: relative {rel:.3e} > {TOL}")
    for k in ("loss", "accuracy"):
        u.check(abs(printed["c"][k] - printed["cuda"][k]) <= 2e-4,  # printed to 4 decimals f"test {k}: {printed['c'][k]} vs {printed['cuda'][k]}")


if __name__ == "__main__":
    u.run_main(main)
