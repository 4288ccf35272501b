#!/usr/bin/env python3
"""The CUDA training program against the C one: the same spec, seed, data and steps give the
same params, within a relative 1e-4 (float32; the GPU sums in another order).

  parity_c.py --c BIN --cuda BIN --work DIR [--fashion DIR] [--steps 10]

Both train fashion_mlp (or any model of Fashion-MNIST's image/label inputs) for --steps steps at
batch 128 from the default seed and save a checkpoint; every state tensor (params and
optimiser state) must agree: ||cuda - c|| <= 1e-4 ||c|| (l2, per tensor). The largest
elementwise difference is printed for scale. The checkpoints must also have the same names,
shapes, dtypes and step count (the format is the C binary's).
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
    ap.add_argument("--c", required=True)
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--steps", type=int, default=10)
    opt = ap.parse_args()
    u.need_numpy()
    import numpy as np
    paths = u.need_fashion(opt.fashion)
    u.fresh_dir(opt.work)
    ck = {}
    for kind, binary in (("c", opt.c), ("cuda", opt.cuda)):
        ck[kind] = os.path.join(opt.work, f"{kind}.safetensors")
        out, _ = u.run([binary] + u.data_flags(paths, test=False) +
                       ["--steps", str(opt.steps), "--batch", "128", "--quiet", "--log-every", "0",
                        "--checkpoint", ck[kind]])
        print(f"{kind}: {out.strip().splitlines()[-1] if out.strip() else ''}")
    tc, mc, hc = u.read_safetensors(ck["c"])
    tg, mg, hg = u.read_safetensors(ck["cuda"])
    u.check(sorted(tc) == sorted(tg), f"tensor names differ: {sorted(tc)} vs {sorted(tg)}")
    u.check(mc.get("step") == mg.get("step") == str(opt.steps), f"step counts {mc.get('step')} / {mg.get('step')}")
    u.check(mc.get("model") == mg.get("model"), f"models {mc.get('model')} / {mg.get('model')}")
    worst = 0.0
    for name in sorted(tc):
        a, b = tc[name].astype(np.float64), tg[name].astype(np.float64)
        u.check(hc[name]["dtype"] == hg[name]["dtype"] and a.shape == b.shape,
                f"{name}: {hc[name]['dtype']} {a.shape} vs {hg[name]['dtype']} {b.shape}")
        norm = np.linalg.norm(a)
        rel = np.linalg.norm(a - b) / norm if norm > 0 else np.linalg.norm(b)
        worst = max(worst, rel)
        print(f"  {name:28s} {str(a.shape):14s} rel l2 {rel:.2e}  max |diff| {np.max(np.abs(a - b)):.2e}")
        u.check(rel <= TOL, f"{name}: relative difference {rel:.3e} > {TOL}")
    print(f"ok: {len(tc)} tensors after {opt.steps} steps, worst relative l2 difference {worst:.2e} (<= {TOL})")


if __name__ == "__main__":
    u.run_main(main)
