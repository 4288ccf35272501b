#!/usr/bin/env python3
"""check_muon.py — optimiser groups and Muon against PyTorch (contract v2 §5).

For each CASE=BINARY argument: BINARY (muon_check.c linked with the generated float64 model of
specs/CASE.cannl) trains STEPS steps on a fixed batch from the state it saved first and checks
its resume bit for bit; this script runs the same steps in PyTorch 1.13, float64, from that
initial state: the model written with torch ops, Muon written from torch.optim.Muon's documented
algorithm (PyTorch >= 2.9, without its bfloat16 cast; 1.13 has no Muon), AdamW, Adam and SGD from
torch.optim, clip_grad_norm_ and the schedule's factor applied to every group's lr. Every param
and every optimiser state tensor must agree within 1e-9 relative (of the tensor's largest
magnitude). Exit 77 (skipped) without torch.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch not installed: skipped")
    sys.exit(77)

STEPS = 5
N = 4  # the batch muon_check.c trains on


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F64", (name, info["dtype"])
        a, b = info["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        t = torch.tensor(struct.unpack("<%dd" % ((b - a) // 8), raw))
        out[name] = t.reshape(info["shape"])
    return out


def muon_step(p, g, buf, rows, lr, weight_decay=0.1, momentum=0.95, nesterov=True, ns_steps=5, eps=1e-7,
              adjust_lr="original"):
    """torch.optim.Muon's update of one param (the documented algorithm, float64 throughout)."""
    cols = p.numel() // rows
    grad = g.reshape(rows, cols)
    b = buf.view(rows, cols)
    b.lerp_(grad, 1 - momentum)
    update = grad.lerp(b, momentum) if nesterov else b.clone()
    x = update.T if rows > cols else update
    x = x / x.norm().clamp(min=eps)
    a_, b_, c_ = 3.4445, -4.7750, 2.0315
    for _ in range(ns_steps):
        gram = x @ x.T
        poly = torch.addmm(gram, gram, gram, beta=b_, alpha=c_)
        x = torch.addmm(x, poly, x, beta=a_)
    if rows > cols:
        x = x.T
    ratio = math.sqrt(max(1, rows / cols)) if adjust_lr == "original" else 0.2 * math.sqrt(max(rows, cols))
    p.mul_(1 - lr * weight_decay)
    p.add_(x.reshape(p.shape), alpha=-lr * ratio)


def mse(z, t):
    return ((z - t) ** 2).mean()


# Each case: its inputs' per-example shapes, the loss of (params, inputs), the groups
# (optimiser, its args, its param names, each param's matrix rows), the schedule factor.
def two_loss(P, x, t):
    h = torch.tanh(x @ P["w1"].T + P["b1"])
    return mse(h @ P["w2"].T + P["b2"], t)


def opts_loss(P, x, t):
    h = torch.tanh(torch.einsum("oki,bi->bok", P["w"], x) + P["b"])
    return mse(torch.einsum("ojk,bjk->bo", P["w3"], h) + P["c"], t)


def repeat_loss(P, x, t):
    h = x @ P["w_in"].T
    for l in range(3):
        h = h + torch.tanh(h @ P["w.%d" % l].T + P["b.%d" % l]) @ P["u.%d" % l].T
    return mse(h, t)


def cosine(steps, warmup):
    def factor(s):  # s: steps taken before this one
        if s < warmup:
            return (s + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / (steps - warmup))))
    return factor


CASES = {
    "muon_two": dict(inputs=[5, 3], loss=two_loss, groups=[
        ("muon", dict(lr=0.05, momentum=0.9), {"w1": 7, "w2": 3}),
        ("adamw", dict(lr=0.01, betas=(0.9, 0.95)), ["b1", "b2"])]),
    "muon_opts": dict(inputs=[4, 2], loss=opts_loss, clip=0.5, schedule=cosine(10, 2), groups=[
        ("muon", dict(lr=0.1, nesterov=False, adjust_lr="match_rms_adamw", ns_steps=4), {"w": 6, "w3": 2}),
        ("sgd", dict(lr=0.03, momentum=0.9), ["b", "c"])]),
    "muon_repeat": dict(inputs=[4, 4], loss=repeat_loss, groups=[
        ("muon", dict(lr=0.02, weight_decay=0.05),
         dict([("w_in", 4)] + [("w.%d" % l, 6) for l in range(3)] + [("u.%d" % l, 4) for l in range(3)])),
        ("adam", dict(lr=0.01), ["b.%d" % l for l in range(3)])]),
}


def reference(case, init, inputs):
    c = CASES[case]
    P = {k: v.clone().requires_grad_(True) for k, v in init.items() if "." not in k or k.split(".")[-1].isdigit()}
    state = {}
    torch_opts = []
    for kind, args, names in c["groups"]:
        if kind == "muon":
            for n in names:
                state[n + ".momentum_buffer"] = torch.zeros_like(P[n])
            continue
        cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[kind]
        torch_opts.append((cls([P[n] for n in names], **args), names, args["lr"]))
    for s in range(STEPS):
        for t in P.values():
            t.grad = None
        c["loss"](P, *inputs).backward()
        if "clip" in c:
            torch.nn.utils.clip_grad_norm_(list(P.values()), c["clip"])
        factor = c["schedule"](s) if "schedule" in c else 1.0
        with torch.no_grad():
            for kind, args, names in c["groups"]:
                if kind != "muon":
                    continue
                a = dict(args)
                lr = a.pop("lr") * factor
                for n, rows in names.items():
                    muon_step(P[n], P[n].grad, state[n + ".momentum_buffer"], rows, lr, **a)
        for opt, names, lr in torch_opts:
            for grp in opt.param_groups:
                grp["lr"] = lr * factor
            opt.step()
    for opt, names, _ in torch_opts:
        for n in names:
            for k, v in opt.state[P[n]].items():
                if k in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                    state[n + "." + k] = v
    out = {k: v.detach() for k, v in P.items()}
    out.update(state)
    return out


def main():
    torch.set_default_dtype(torch.float64)  # (here, not on import: tests/e2e/parity_llama.py imports muon_step)
    bad = 0
    for arg in sys.argv[1:]:
        case, binary = arg.split("=", 1)
        with tempfile.TemporaryDirectory() as work:
            run = subprocess.run([binary, work, str(STEPS)], capture_output=True, text=True)
            print(f"{case}: {run.stdout.strip()} {run.stderr.strip()}")
            if run.returncode != 0:
                bad += 1
                continue
            init = read_safetensors(os.path.join(work, "init.safetensors"))
            final = read_safetensors(os.path.join(work, "final.safetensors"))
            # A repeat block's param w.0 keeps its state as w_0.momentum_buffer (the C name, as
            # checkpoints have always named it): compare it under the param's name.
            flat_names = {k.replace(".", "_"): k for k in init if "." not in k or k.split(".")[-1].isdigit()}
            final = {flat_names.get(k.rsplit(".", 1)[0], k.rsplit(".", 1)[0]) + "." + k.rsplit(".", 1)[1]
                     if "." in k and k.rsplit(".", 1)[0] in flat_names else k: v for k, v in final.items()}
            with open(os.path.join(work, "inputs.bin"), "rb") as f:
                raw = f.read()
            flat = torch.tensor(struct.unpack("<%dd" % (len(raw) // 8), raw))
            inputs, at = [], 0
            for size in CASES[case]["inputs"]:
                inputs.append(flat[at:at + N * size].reshape(N, size))
                at += N * size
        ref = reference(case, init, inputs)
        if sorted(ref) != sorted(final):
            print(f"{case}: tensors differ: cannl {sorted(final)} reference {sorted(ref)}")
            bad += 1
            continue
        worst = 0.0
        for name, want in ref.items():
            got = final[name].reshape(want.shape)
            err = ((got - want).abs().max() / want.abs().max().clamp(min=1e-300)).item()
            moved = (want - init[name].reshape(want.shape)).abs().max().item() if name in init else 1.0
            if err > 1e-9 or moved == 0:
                print(f"{case}: {name}: relative error {err:.3g} (moved {moved:.3g})")
                bad += 1
            worst = max(worst, err)
        print(f"{case}: {len(ref)} tensors within {worst:.2g} relative of PyTorch after {STEPS} steps")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
