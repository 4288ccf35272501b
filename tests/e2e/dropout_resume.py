#!/usr/bin/env python3
"""dropout's masks (issue 20): drawn per step from the seed and the step, so a resumed run
continues bit for bit; another seed draws other masks; forward and inference are the identity.

  dropout_resume.py --trainer BIN --infer BIN --work DIR

tests/e2e/specs/dropout_mlp.cannl (6-32-3, dropout p = 0.5 after the hidden relu), params from
the same --init file in every run, examples in file order (--no-shuffle), so the masks are
the only thing the seed changes:
1. 8 steps with --seed 7 in one run, and 4 steps then --resume (no --seed: the checkpoint's)
   to 8: every tensor of the two final checkpoints is bit-identical, and so are the losses
   of steps 5-8.
2. 8 steps with --seed 8: the params differ from the --seed 7 run (other masks).
3. The loss of the training steps is not the loss without dropout (the masks are active),
   while the inference program's outputs on the training inputs equal the network without
   dropout computed here in NumPy from the checkpoint (within 1e-12 relative, a float64
   build; 1e-5 float32).
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from parity import rel_err  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--infer", required=True)
    ap.add_argument("--work", required=True)
    opt = ap.parse_args()
    u.need_numpy()
    import numpy as np
    work = u.fresh_dir(opt.work)
    rng = np.random.default_rng(11)
    n = 8 * 16
    x = rng.normal(size=(n, 6))
    y = np.eye(3)[(x[:, 0] + x[:, 1] - x[:, 2] > 0).astype(int) + (x[:, 3] > 0.5).astype(int)]
    xp, yp = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xp, x)
    np.save(yp, y)
    init = {"w1": rng.uniform(-0.4, 0.4, (32, 6)), "w2": rng.uniform(-0.2, 0.2, (3, 32)),
            "b1": rng.uniform(-0.1, 0.1, 32), "b2": np.zeros(3)}
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init)

    def train(tag, steps, extra):
        ckpt = os.path.join(work, f"{tag}.safetensors")
        metrics = os.path.join(work, f"{tag}.jsonl")
        u.run([opt.trainer, f"--data=x={xp}", f"--data=y={yp}", "--steps", str(steps), "--batch", "16",
               "--no-shuffle", "--threads", "1", "--checkpoint", ckpt, "--metrics", metrics, "--log-every", "1",
               "--quiet"] + extra)
        return ckpt, metrics

    a, a_log = train("a", 8, ["--seed", "7", "--init", init_path])
    half, _ = train("half", 4, ["--seed", "7", "--init", init_path])
    b, b_log = train("b", 8, ["--resume", half])
    c, _ = train("c", 8, ["--seed", "8", "--init", init_path])
    ta, _, header = u.read_safetensors(a)
    tb, _, _ = u.read_safetensors(b)
    tc, _, _ = u.read_safetensors(c)
    f64 = header["w1"]["dtype"] == "F64"
    u.check(sorted(ta) == sorted(tb), f"tensors {sorted(ta)} vs {sorted(tb)}")
    for k in ta:
        u.check(np.array_equal(ta[k], tb[k]), f"{k}: the resumed run differs from the uninterrupted one "
                f"(max |a-b| {np.max(np.abs(ta[k] - tb[k])):.3g})")
    la = [v for s, v in u.step_losses(u.read_jsonl(a_log)) if s > 4]
    lb = [v for s, v in u.step_losses(u.read_jsonl(b_log)) if s > 4]
    u.check(la == lb and len(la) == 4, f"losses of steps 5-8: {la} vs resumed {lb}")
    print(f"resume: {len(ta)} tensors bit-identical after 4 + 4 steps; losses of steps 5-8 equal")
    d = rel_err(tc["w1"], ta["w1"])
    u.check(d > 1e-3, f"--seed 8 gave nearly the params of --seed 7 (w1 relative difference {d:.3g}): the masks "
            "do not depend on the seed")
    print(f"another seed, other masks: w1 differs by {d:.3g} (relative, max norm)")

    # the first step's loss (at the init params) against the loss without dropout
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    logits0 = relu(x[:16] @ init["w1"].T + init["b1"]) @ init["w2"].T + init["b2"]
    lse = np.log(np.exp(logits0 - logits0.max(1, keepdims=True)).sum(1)) + logits0.max(1)
    plain = float(np.mean(lse - (logits0 * y[:16]).sum(1)))
    first = u.step_losses(u.read_jsonl(a_log))[0][1]
    u.check(abs(first - plain) > 1e-3 * abs(plain), f"the first step's loss {first} is the loss without dropout "
            f"{plain}: the masks are not applied in training")
    out = os.path.join(work, "out.npy")
    u.run([opt.infer, "--weights", a, f"--input=x={xp}", "--output", out])
    want = relu(x @ ta["w1"].astype(np.float64).T + ta["b1"]) @ ta["w2"].astype(np.float64).T + ta["b2"]
    e = rel_err(np.load(out), want)
    tol = 1e-12 if f64 else 1e-5
    u.check(e <= tol, f"inference output differs from the network without dropout: {e:.3g} > {tol}")
    print(f"training loss with masks {first:.6f} vs without {plain:.6f}; inference = no dropout within {e:.2e}")


if __name__ == "__main__":
    u.run_main(main)
