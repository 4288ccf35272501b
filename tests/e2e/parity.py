#!/usr/bin/env python3
"""Parity of a generated fashion_mlp trainer with PyTorch.

  parity.py --trainer BIN --spec SPEC --fashion DIR --work DIR [--small]

SPEC is a copy of specs/fashion_mlp.cannl (784-512-512-10 MLP, relu, mean cross-entropy);
its `minimize loss with OPT(ARGS)` line is parsed here and turned into the PyTorch optimiser
of the same name (sgd -> torch.optim.SGD, adam -> Adam, adamw -> AdamW, same arguments), so
every variant spec is compared with exactly what it says. Its training options are applied
the same way: `schedule = constant|step|cosine(...)` sets each param group's lr before every
step by the formulas of docs/language.md §10 (computed here independently), and
`clip_grad_norm = X` calls torch.nn.utils.clip_grad_norm_(params, X) before every step (the
test fails unless clipping engaged on at least one step, so the option is really compared).

Both sides start from the same random params (written by this script to a safetensors file
and given to the trainer with --init) and see the same batches: the first 10 batches of 128
examples of the Fashion-MNIST training file (IDX .gz), in file order (--no-shuffle),
--threads 1. With --small (sanitiser builds, ~100x slower): 4 steps of 64 examples.

PyTorch runs in float64: that is the reference (the exact answer up to 1e-16, so whatever
differs is the trainer's). For a float32 trainer PyTorch float32 runs too, and its own
error against float64 is printed beside cannl's, for scale.

Relative error of a tensor (a = cannl's, b = PyTorch float64's):
    max norm:  max_i |a_i - b_i| / max_i |b_i|
    l2 norm:   sqrt(sum_i (a_i - b_i)^2) / sqrt(sum_i b_i^2)
and of a loss: |a - b| / |b|, for every step's loss (from --metrics, logged at every step:
the loss computed before that step's update).

Criterion, for a float64 trainer (DTYPE f64 builds of the same specs): every param and
every optimiser-state tensor of the final checkpoint (PyTorch's names: w1.momentum_buffer,
w1.exp_avg, w1.exp_avg_sq), max norm <= 1e-9, and every loss <= 1e-9. This is the
acceptance criterion (relative 1e-4) with five orders of magnitude to spare: it checks the
update rules exactly.

Criterion, for a float32 trainer (the specs as they are): every loss <= 1e-4, and every
param <= 1e-2 in the l2 norm (a guard against gross errors); the max-norm errors and the
optimiser state are printed, not checked. A float32 run of a ReLU network cannot be held
to 1e-4 in the max norm, PyTorch's float32 neither:
  * ReLU kinks: a pre-activation within float32 rounding of 0 (about 0.3 such per 10-step
    run here) takes either side depending on the summation order, which changes one
    example's gradient contribution for one unit; every later step widens the band of
    units that can flip. Measured: a sanitiser build (other vectorisation) of the nesterov
    variant flipped unit 502 of layer 2 for example 110 of batch 7 (exact pre-activation
    -9.1e-8), after which the w1 momentum buffer differed by 1e-2 and w1 by 8.8e-4 (max
    norm) where the unsanitised build was within 3e-7; and with 4 Adam steps of 64, PyTorch
    float32 itself is off from float64 by 6.5e-2 (max) / 2.1e-3 (l2) on w1 while cannl
    float32 is within 1.4e-6. The losses stay within 2e-5 in both cases.
  * Adam's first updates are about lr * sign(g): a weight whose gradient is zero up to
    float32 rounding (cancellation over the batch) moves by +-lr either way.
"""

import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

# (losses, params in the l2 norm) for float32; every tensor in the max norm for float64.
TOL_F32_LOSS, TOL_F32_PARAM_L2 = 1e-4, 1e-2
TOL_F64 = 1e-9

# Positional order of each optimiser's arguments (docs/language.md §10) and defaults.
OPT_ARGS = {
    "sgd": (["lr", "momentum", "weight_decay", "dampening", "nesterov"],
            {"momentum": 0.0, "weight_decay": 0.0, "dampening": 0.0, "nesterov": 0.0}),
    "adam": (["lr", "beta1", "beta2", "eps", "weight_decay"],
             {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}),
    "adamw": (["lr", "beta1", "beta2", "eps", "weight_decay"],
              {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}),
}


def parse_optimizer(spec_path):
    text = open(spec_path).read()
    m = re.search(r"^\s*minimize\s+\w+\s+with\s+(\w+)\s*\(([^)]*)\)", text, re.M)
    u.check(m, f"{spec_path}: no `minimize ... with OPT(...)` line")
    name, argtext = m.group(1), m.group(2)
    u.check(name in OPT_ARGS, f"{spec_path}: optimiser {name} has no PyTorch mapping here")
    order, args = OPT_ARGS[name][0], dict(OPT_ARGS[name][1])
    for i, part in enumerate(a.strip() for a in argtext.split(",") if a.strip()):
        if "=" in part:
            k, v = (s.strip() for s in part.split("=", 1))
        else:
            k, v = order[i], part
        u.check(k in order, f"{spec_path}: unknown argument {k} of {name}")
        args[k] = float(v)
    u.check("lr" in args, f"{spec_path}: {name} without lr")
    return name, args


SCHEDULE_ARGS = {
    "constant": (["warmup"], {"warmup": 0.0}),
    "step": (["every", "gamma", "warmup"], {"gamma": 0.1, "warmup": 0.0}),
    "cosine": (["steps", "warmup", "min_lr"], {"warmup": 0.0, "min_lr": 0.0}),
}


def parse_call_args(text, order, defaults, where):
    args = dict(defaults)
    for i, part in enumerate(a.strip() for a in text.split(",") if a.strip()):
        if "=" in part:
            k, v = (s.strip() for s in part.split("=", 1))
        else:
            k, v = order[i], part
        u.check(k in order, f"{where}: unknown argument {k}")
        args[k] = float(v)
    return args


def parse_options(spec_path):
    """The training options after the optimiser: (schedule name, args) or None, max_norm or None."""
    text = open(spec_path).read()
    m = re.search(r"^\s*minimize\s+\w+\s+with\s+\w+\s*\([^)]*\)((?:\s*,\s*\w+\s*=\s*(?:\w+\s*\([^)]*\)|[-+.\w]+))*)",
                  text, re.M)
    schedule, clip = None, None
    for name, value in re.findall(r",\s*(\w+)\s*=\s*(\w+\s*\([^)]*\)|[-+.\w]+)", m.group(1) if m else ""):
        if name == "schedule":
            sm = re.match(r"(\w+)\s*\(([^)]*)\)", value)
            u.check(sm and sm.group(1) in SCHEDULE_ARGS, f"{spec_path}: schedule {value} has no mapping here")
            order, defaults = SCHEDULE_ARGS[sm.group(1)]
            schedule = (sm.group(1), parse_call_args(sm.group(2), order, defaults, spec_path))
        elif name == "clip_grad_norm":
            clip = float(value)
        else:
            u.check(False, f"{spec_path}: training option {name} has no mapping here")
    return schedule, clip


def scheduled_lr(base, schedule, s):
    """docs/language.md §10: the lr of the step after s steps."""
    import math
    if schedule is None:
        return base
    name, a = schedule
    w = a["warmup"]
    if s < w:
        return base * (s + 1) / w
    if name == "constant":
        return base
    if name == "step":
        return base * a["gamma"] ** ((s - int(w)) // int(a["every"]))
    p = min(1.0, (s - w) / (a["steps"] - w))
    return a["min_lr"] + (base - a["min_lr"]) * 0.5 * (1 + math.cos(math.pi * p))


def torch_optimizer(torch, name, args, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=args["lr"], momentum=args["momentum"],
                               dampening=args["dampening"], weight_decay=args["weight_decay"],
                               nesterov=args["nesterov"] != 0)
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    return cls(params, lr=args["lr"], betas=(args["beta1"], args["beta2"]), eps=args["eps"],
               weight_decay=args["weight_decay"])


def rel_err(a, b, norm="max"):
    import numpy as np
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if norm == "max":
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    else:
        scale = float(np.linalg.norm(b))
        diff = float(np.linalg.norm(a - b))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def loss_failures(got_losses, want_losses, tol):
    """cannl's losses ((step, value) pairs) against the reference's, each within tol relative:
    (the failures, the worst relative error)."""
    failures, worst = [], 0.0
    for (step, a), b in zip(got_losses, want_losses):
        e = abs(a - b) / abs(b)
        worst = max(worst, e)
        if not e <= tol:
            failures.append(f"loss at step {step}: cannl {a!r}, torch {b!r} (relative {e:.3g})")
    return failures, worst


def paired_tensors(got, want, failures):
    """(name, cannl's, the reference's) for each tensor of want (in name order) that the checkpoint
    got holds in the same shape; a failure for each one missing or of another shape, and, once every
    pair is taken, for the checkpoint's tensors the reference does not have."""
    for name in sorted(want):
        if name not in got:
            failures.append(f"checkpoint has no tensor {name}")
        elif tuple(got[name].shape) != tuple(want[name].shape):
            failures.append(f"{name}: shape {tuple(got[name].shape)}, torch {tuple(want[name].shape)}")
        else:
            yield name, got[name], want[name]
    extra = sorted(set(got) - set(want))
    if extra:
        failures.append(f"checkpoint tensors PyTorch does not have: {extra}")


def main():
    opt = u.parity_parser(1234, "--spec", "--fashion", small="4 steps of 64 (sanitiser builds)").parse_args()
    opt.steps, opt.batch = (4, 64) if opt.small else (10, 128)

    torch = u.torch_one_thread()
    paths = u.need_fashion(opt.fashion)
    import numpy as np
    import torch.nn.functional as F

    opt_name, opt_args = parse_optimizer(opt.spec)
    schedule, clip = parse_options(opt.spec)
    print(f"spec {os.path.basename(opt.spec)}: {opt_name} {opt_args}, schedule {schedule}, clip_grad_norm {clip}")
    work = u.fresh_dir(opt.work)

    # Random initial params in storage order (contract §9: [784 -> 512] is stored [512, 784]).
    rng = np.random.default_rng(opt.seed)
    shapes = {"w1": (512, 784), "b1": (512,), "w2": (512, 512), "b2": (512,), "w3": (10, 512), "b3": (10,)}
    fan_in = {"w1": 784, "b1": 784, "w2": 512, "b2": 512, "w3": 512, "b3": 512}
    init = {k: rng.uniform(-1, 1, size=s).astype(np.float32) / np.float32(np.sqrt(fan_in[k]))
            for k, s in shapes.items()}
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init, {"note": "e2e parity init"})

    # --- cannl
    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=image={paths['train_image']}", f"--data=label={paths['train_label']}",
           "--steps", str(opt.steps), "--batch", str(opt.batch), "--no-shuffle", "--threads", "1",
           "--init", init_path, "--checkpoint", ckpt, "--metrics", metrics, "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    u.check(meta.get("step") == str(opt.steps), f"checkpoint step {meta.get('step')!r}, expected {opt.steps}")
    dtype = {"F32": np.float32, "F64": np.float64}[header["w1"]["dtype"]]
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, opt.steps + 1)),
            f"metrics log steps {[s for s, _ in got_losses]}, expected 1..{opt.steps}")

    # --- PyTorch: float64 is the reference; float32 too for a float32 trainer, to show
    #     PyTorch's own float32 error on the same problem.
    n = opt.steps * opt.batch
    images = u.read_idx(paths["train_image"])[:n].reshape(n, 784)
    labels = u.read_idx(paths["train_label"])[:n].astype(np.int64)

    def pytorch(tdt):
        params = {k: torch.tensor(v, dtype=tdt, requires_grad=True) for k, v in init.items()}
        optim = torch_optimizer(torch, opt_name, opt_args, list(params.values()))
        losses, clipped = [], 0
        for s in range(opt.steps):
            sl = slice(s * opt.batch, (s + 1) * opt.batch)
            x = torch.tensor(images[sl], dtype=tdt) / 255
            y = torch.tensor(labels[sl])
            h1 = F.relu(F.linear(x, params["w1"], params["b1"]))
            h2 = F.relu(F.linear(h1, params["w2"], params["b2"]))
            logits = F.linear(h2, params["w3"], params["b3"])
            loss = F.cross_entropy(logits, y)
            optim.zero_grad()
            loss.backward()
            if clip is not None:
                norm = torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
                clipped += float(norm) > clip
            for group in optim.param_groups:
                group["lr"] = scheduled_lr(opt_args["lr"], schedule, s)
            optim.step()
            losses.append(float(loss))
        if clip is not None:
            print(f"PyTorch {tdt}: clip_grad_norm = {clip} clipped {clipped} of {opt.steps} steps")
            u.check(clipped > 0, f"clip_grad_norm = {clip} never clipped: raise the spec's lr or lower max_norm")
        tensors = {}  # params and optimiser state, under the checkpoint's names
        for name, p in params.items():
            tensors[name] = p.detach().numpy()
            for key, val in optim.state[p].items():
                if torch.is_tensor(val) and val.dim() > 0:
                    tensors[f"{name}.{key}"] = val.detach().numpy()
        return tensors, losses

    want, want_losses = pytorch(torch.float64)
    f64 = dtype == np.float64
    t32 = None if f64 else pytorch(torch.float32)[0]

    # --- compare
    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    head = f"{'':<20} {'max|a-b|/max|b|':>16} {'||a-b||/||b||':>16}"
    if not f64:
        head += f"   PyTorch float32: {'max':>9} {'l2':>9}"
    print(f"cannl {header['w1']['dtype']} vs PyTorch float64 (b)\n{head}")
    print(f"{'losses':<20} {worst:>16.3e}")
    max_param = {"max": 0.0, "l2": 0.0}
    for tname, a, b in paired_tensors(got, want, failures):
        e = {n: rel_err(a, b, n) for n in ("max", "l2")}
        is_param = tname in init
        if is_param:
            for n in e:
                max_param[n] = max(max_param[n], e[n])
        line = f"{tname:<20} {e['max']:>16.3e} {e['l2']:>16.3e}"
        if t32 is not None:
            line += f"   {'':>16} {rel_err(t32[tname], b, 'max'):>9.1e} {rel_err(t32[tname], b, 'l2'):>9.1e}"
        print(line)
        if f64 and not e["max"] <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e['max']:.3g} > {TOL_F64}")
        if not f64 and is_param and not e["l2"] <= TOL_F32_PARAM_L2:
            failures.append(f"{tname}: relative error (l2 norm) {e['l2']:.3g} > {TOL_F32_PARAM_L2}")
    # Sanity: the params moved, so the comparison is not passed by a trainer that does nothing.
    moved = max(rel_err(got[k], init[k]) for k in init if k in got)
    print(f"params moved from their init by up to {moved:.3e} (max norm)")
    u.check(moved > 1e-2, f"the params barely moved from their init ({moved:.3g}): nothing was compared")
    rule = (f"every tensor and loss <= {TOL_F64} in the max norm" if f64 else
            f"losses <= {TOL_F32_LOSS}, params <= {TOL_F32_PARAM_L2} in the l2 norm")
    if failures:
        raise u.Failure(f"parity with PyTorch float64 ({rule}):\n  " + "\n  ".join(failures))
    print(f"PARITY {os.path.basename(opt.spec)} {header['w1']['dtype']}, {opt.steps} steps of {opt.batch}: "
          f"{len(want)} tensors; params: max-norm error {max_param['max']:.3e}, l2 error {max_param['l2']:.3e}; "
          f"losses {worst:.3e} (checked: {rule})")

if __name__ == "__main__":
    u.run_main(main)
