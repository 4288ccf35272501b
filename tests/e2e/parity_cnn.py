#!/usr/bin/env python3
"""Parity of the generated fashion_cnn trainer with PyTorch: 5 Adam steps.

  parity_cnn.py --trainer BIN --work DIR --fashion DIR [--small]

specs/fashion_cnn.cannl: conv 5x5x32 (padding 2) -> relu -> max-pool 2 -> conv 5x5x64 ->
relu -> max-pool 2 -> dense 1024 -> relu -> dense 10, mean cross-entropy, adam(lr = 1e-3).
Both sides start from the same random params (written here to a safetensors file, given to
the trainer with --init; the conv biases non-zero) and see the same batches: the first 5
batches of 8 examples of the Fashion-MNIST training file in file order (--no-shuffle,
--threads 1); --small (sanitiser builds): 3 steps of 4.

PyTorch runs in float64 on the params kept in cannl's storage layout (images NHWC, conv
kernels [d, kh, kw, c], w3 [1024, 7, 7, 64]), permuted for F.conv2d inside the forward
pass, so the Adam state compares tensor for tensor. Criteria as in parity.py: a float64
trainer (DTYPE f64 build) every param, exp_avg and exp_avg_sq and every loss within 1e-9
(max norm); a float32 trainer every loss within 1e-4 and every param within 1e-2 (l2 norm),
the rest printed, with PyTorch float32's own error beside it for scale.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from parity import TOL_F32_LOSS, TOL_F32_PARAM_L2, TOL_F64, loss_failures, paired_tensors, rel_err  # noqa: E402

SHAPES = {"k1": (32, 5, 5, 1), "k2": (64, 5, 5, 32), "c1": (32,), "c2": (64,), "b3": (1024,),
          "w3": (1024, 7, 7, 64), "w4": (10, 1024), "b4": (10,)}
FAN_IN = {"k1": 25, "k2": 800, "c1": 25, "c2": 800, "b3": 3136, "w3": 3136, "w4": 1024, "b4": 1024}


def main():
    opt = u.parity_parser(4321, "--fashion", small="3 steps of 4 (sanitiser builds)").parse_args()
    steps, batch = (3, 4) if opt.small else (5, 8)

    torch = u.torch_one_thread()
    paths = u.need_fashion(opt.fashion)
    import numpy as np
    import torch.nn.functional as F
    work = u.fresh_dir(opt.work)

    rng = np.random.default_rng(opt.seed)
    init = {k: (rng.uniform(-1, 1, size=s) / np.sqrt(FAN_IN[k])).astype(np.float32) for k, s in SHAPES.items()}
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init, {"note": "e2e fashion_cnn parity init"})

    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=image={paths['train_image']}", f"--data=label={paths['train_label']}",
           "--steps", str(steps), "--batch", str(batch), "--no-shuffle", "--threads", "1",
           "--init", init_path, "--checkpoint", ckpt, "--metrics", metrics, "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    u.check(meta.get("step") == str(steps), f"checkpoint step {meta.get('step')!r}, expected {steps}")
    f64 = header["k1"]["dtype"] == "F64"
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, steps + 1)), f"metrics log steps {got_losses}")

    n = steps * batch
    images = u.read_idx(paths["train_image"])[:n].reshape(n, 28, 28, 1)
    labels = u.read_idx(paths["train_label"])[:n].astype(np.int64)

    def pytorch(tdt):
        P = {k: torch.tensor(v, dtype=tdt, requires_grad=True) for k, v in init.items()}
        optim = torch.optim.Adam(list(P.values()), lr=1e-3)
        nchw = lambda t: t.permute(0, 3, 1, 2)        # noqa: E731
        kernel = lambda k: k.permute(0, 3, 1, 2)      # noqa: E731  [d, kh, kw, c] -> [d, c, kh, kw]
        losses = []
        for s in range(steps):
            sl = slice(s * batch, (s + 1) * batch)
            x = nchw(torch.tensor(images[sl], dtype=tdt) / 255)
            a1 = F.relu(F.conv2d(x, kernel(P["k1"]), P["c1"], padding=2))
            p1 = F.max_pool2d(a1, 2)
            a2 = F.relu(F.conv2d(p1, kernel(P["k2"]), P["c2"], padding=2))
            p2 = F.max_pool2d(a2, 2).permute(0, 2, 3, 1).reshape(batch, -1)   # NHWC order, as w3
            h3 = F.relu(F.linear(p2, P["w3"].reshape(1024, -1), P["b3"]))
            loss = F.cross_entropy(F.linear(h3, P["w4"], P["b4"]), torch.tensor(labels[sl]))
            optim.zero_grad()
            loss.backward()
            optim.step()
            losses.append(float(loss))
        out = {}
        for name, p in P.items():
            out[name] = p.detach().numpy()
            for key, val in optim.state[p].items():
                if torch.is_tensor(val) and val.dim() > 0:
                    out[f"{name}.{key}"] = val.detach().numpy()
        return out, losses

    want, want_losses = pytorch(torch.float64)
    t32 = None if f64 else pytorch(torch.float32)[0]

    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    print(f"cannl {header['k1']['dtype']} vs PyTorch float64; losses: cannl {[round(v, 6) for _, v in got_losses]}, "
          f"torch {[round(v, 6) for v in want_losses]}, worst relative error {worst:.3e}")
    print(f"{'':<16} {'max|a-b|/max|b|':>16} {'||a-b||/||b||':>16}" + ("" if f64 else "   PyTorch float32: max, l2"))
    for tname, a, b in paired_tensors(got, want, failures):
        e = {k: rel_err(a, b, k) for k in ("max", "l2")}
        line = f"{tname:<16} {e['max']:>16.3e} {e['l2']:>16.3e}"
        if t32 is not None:
            line += f"   {rel_err(t32[tname], b, 'max'):.1e}, {rel_err(t32[tname], b, 'l2'):.1e}"
        print(line)
        if f64 and not e["max"] <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e['max']:.3g} > {TOL_F64}")
        if not f64 and tname in init and not e["l2"] <= TOL_F32_PARAM_L2:
            failures.append(f"{tname}: relative error (l2 norm) {e['l2']:.3g} > {TOL_F32_PARAM_L2}")
    moved = max(rel_err(got[k], init[k]) for k in init if k in got)
    u.check(moved > 1e-3, f"the params barely moved from their init ({moved:.3g}): nothing was compared")
    if failures:
        raise u.Failure("fashion_cnn parity with PyTorch float64:\n  " + "\n  ".join(failures))
    print(f"PARITY fashion_cnn {header['k1']['dtype']}, {steps} adam steps of {batch}: {len(want)} tensors, "
          f"losses within {worst:.3e}")


if __name__ == "__main__":
    u.run_main(main)
