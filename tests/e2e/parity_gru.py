#!/usr/bin/env python3
"""Parity of the generated gru_rows trainer with torch.nn.GRU: 5 Adam steps.

  parity_gru.py --trainer BIN --work DIR --fashion DIR [--small]

specs/gru_rows.cannl (contract v2 §4) reads a Fashion-MNIST image row by row through a GRU of
64 units (`repeat t in rows carry h`, x[t] the row of instance t) and classifies the last
state. PyTorch runs nn.GRU(28, 64, batch_first=True) and nn.Linear(64, 10) in float64 from the
same params: nn.GRU has two biases per gate where the spec has one, so its hidden-side biases
are zero and frozen (n = tanh(W_in x + b_in + r * (W_hn h)), the spec's). Its stacked
weight_ih_l0 [3 * 64, 28] (gates r, z, n) is written into the --init file gate by gate under
PyTorch's names with a suffix, and a --name-map file gives each of the spec's params its key
(`wz = gru.weight_ih_l0.z`); the checkpoint is written under the same names. Both sides see
the first 5 batches of 8 training images in file order (--no-shuffle, --threads 1); --small
(sanitiser builds): 3 steps of 4. A float64 trainer (DTYPE f64 build): every loss, param,
exp_avg and exp_avg_sq within 1e-9 (max norm, relative); float32: losses within 1e-4.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from parity import TOL_F32_LOSS, TOL_F64, loss_failures, paired_tensors, rel_err  # noqa: E402

ROWS, COLS, HID = 28, 28, 64
GATES = "rzn"  # nn.GRU's order of the gates in its stacked weights


def main():
    opt = u.parity_parser(35, "--fashion", small="3 steps of 4 (sanitiser builds)").parse_args()
    steps, batch = (3, 4) if opt.small else (5, 8)

    torch = u.torch_one_thread()
    paths = u.need_fashion(opt.fashion)
    import numpy as np
    import torch.nn.functional as F
    torch.manual_seed(opt.seed)
    work = u.fresh_dir(opt.work)

    gru = torch.nn.GRU(COLS, HID, batch_first=True).double()
    out = torch.nn.Linear(HID, 10).double()
    with torch.no_grad():
        gru.bias_hh_l0.zero_()
    gru.bias_hh_l0.requires_grad_(False)

    # The state_dict, each stacked tensor split by gate: "gru.weight_ih_l0.z" is W_iz.
    def split(state):
        flat = {}
        for key, v in state.items():
            v = v.detach().numpy().copy() if torch.is_tensor(v) else v  # not a view of the trained param
            if key.startswith("gru.") and key != "gru.bias_hh_l0":
                for g, part in zip(GATES, np.split(v, 3)):
                    flat[f"{key}.{g}"] = part
            elif key.startswith("out."):
                flat[key] = v
        return flat

    state = {f"gru.{k}": v for k, v in gru.state_dict().items()}
    state.update({f"out.{k}": v for k, v in out.state_dict().items()})
    init = split(state)
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init, {"note": "e2e gru_rows parity init (nn.GRU's params by gate)"})
    names = {"w_out": "out.weight", "b_out": "out.bias"}
    for g in GATES:
        names[f"w{g}"] = f"gru.weight_ih_l0.{g}"
        names[f"u{g}"] = f"gru.weight_hh_l0.{g}"
        names[f"b{g}"] = f"gru.bias_ih_l0.{g}"
    map_path = os.path.join(work, "map.txt")
    with open(map_path, "w") as f:
        f.write("# gru_rows <- nn.GRU(28, 64) and nn.Linear(64, 10), stacked gates split r, z, n\n")
        f.writelines(f"{k} = {v}\n" for k, v in names.items())

    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=image={paths['train_image']}", f"--data=label={paths['train_label']}",
           "--steps", str(steps), "--batch", str(batch), "--no-shuffle", "--threads", "1",
           "--init", init_path, "--name-map", map_path, "--checkpoint", ckpt, "--metrics", metrics,
           "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    u.check(meta.get("step") == str(steps), f"checkpoint step {meta.get('step')!r}, expected {steps}")
    f64 = header["out.weight"]["dtype"] == "F64"
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, steps + 1)), f"metrics log steps {got_losses}")

    n = steps * batch
    images = u.read_idx(paths["train_image"])[:n].reshape(n, ROWS, COLS)  # raw pixels, as the spec reads them
    labels = u.read_idx(paths["train_label"])[:n].astype(np.int64)
    params = [p for p in list(gru.parameters()) + list(out.parameters()) if p.requires_grad]
    optim = torch.optim.Adam(params, lr=1e-3)
    want_losses = []
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        _, h = gru(torch.tensor(images[sl], dtype=torch.float64))
        loss = F.cross_entropy(out(h[0]), torch.tensor(labels[sl]))
        optim.zero_grad()
        loss.backward()
        optim.step()
        want_losses.append(float(loss))
    tensors = {}
    for prefix, module in (("gru", gru), ("out", out)):
        for k, p in module.named_parameters():
            tensors[f"{prefix}.{k}"] = p
            for sk, val in optim.state[p].items() if p.requires_grad else ():
                if torch.is_tensor(val) and val.dim() > 0:
                    tensors[f"{prefix}.{k}.{sk}"] = val
    want = {}
    for key, v in tensors.items():
        base = key.split(".exp_avg")[0]
        suffix = key[len(base):]
        if base.startswith("gru.") and base != "gru.bias_hh_l0":
            for g, part in zip(GATES, np.split(v.detach().numpy(), 3)):
                want[f"{base}.{g}{suffix}"] = part
        elif base.startswith("out."):
            want[key] = v.detach().numpy()

    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    print(f"cannl {header['out.weight']['dtype']} vs nn.GRU float64; losses: cannl "
          f"{[round(v, 6) for _, v in got_losses]}, torch {[round(v, 6) for v in want_losses]}, "
          f"worst relative error {worst:.3e}")
    for tname, a, b in paired_tensors(got, want, failures):
        e = rel_err(a, b, "max")
        print(f"{tname:<34} {e:.3e}")
        if f64 and not e <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e:.3g} > {TOL_F64}")
    moved = max(rel_err(got[k], init[k]) for k in init if k in got)
    u.check(moved > 1e-4, f"the params barely moved from their init ({moved:.3g}): nothing was compared")
    if failures:
        raise u.Failure("gru_rows parity with nn.GRU float64:\n  " + "\n  ".join(failures))
    print(f"PARITY gru_rows {header['out.weight']['dtype']}, {steps} adam steps of {batch}: {len(want)} tensors, "
          f"losses within {worst:.3e}")


if __name__ == "__main__":
    u.run_main(main)
