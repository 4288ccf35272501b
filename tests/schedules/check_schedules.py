#!/usr/bin/env python3
"""The learning rates of cannl's schedules against torch.optim.lr_scheduler.

usage: check_schedules.py NAME=TRACER...

TRACER is lr_trace.c linked with the model of specs/NAME.cannl (float64); it prints the lr of
each step, as the param moved and as the model's get_last_lr reports it (both are checked). The same sequence comes from PyTorch: torch.optim.SGD on one param, the scheduler
of the same name, `scheduler.step()` after every `optimizer.step()`, the lr read before each
step. They must agree within 1e-12 relative. Exit 77 (skipped) without torch.
"""
import subprocess
import sys

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"check_schedules: skipped: {e}")
    sys.exit(77)

S = torch.optim.lr_scheduler


def warmup(w, then):
    """cannl's warm-up (docs/language.md §10): lr * (s + 1) / w for s < w, then the schedule."""
    return lambda opt: S.SequentialLR(opt, [S.LambdaLR(opt, lambda s: (s + 1) / w), then(opt)], milestones=[w])


# NAME: (base lr, steps, the scheduler on an optimiser)
CASES = {
    "exponential": (0.5, 30, lambda o: S.ExponentialLR(o, gamma=0.9)),
    "exponential_warmup": (0.5, 30, warmup(3, lambda o: S.ExponentialLR(o, gamma=0.8))),
    "linear": (0.5, 12, lambda o: S.LinearLR(o)),
    "linear_down": (0.2, 15, lambda o: S.LinearLR(o, start_factor=1, end_factor=0.1, total_iters=8)),
    "onecycle": (1, 20, lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20, cycle_momentum=False)),
    "onecycle_options": (1, 25, lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=25, pct_start=0.25,
                                                      div_factor=10, final_div_factor=100, cycle_momentum=False)),
}


def torch_lrs(base, steps, make):
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=base)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main(args):
    if not args:
        print(__doc__)
        return 2
    failed = 0
    for arg in args:
        name, tracer = arg.split("=", 1)
        base, steps, make = CASES[name]
        text = subprocess.run([tracer, str(steps)], check=True, capture_output=True, text=True).stdout
        rows = [line.split() for line in text.splitlines() if line.startswith("lr ")]
        ours = [float(r[2]) for r in rows]
        ref = torch_lrs(base, steps, make)
        bad = [(s, a, b) for s, (a, b) in enumerate(zip(ours, ref)) if abs(a - b) > 1e-12 * max(1e-3, abs(b))]
        bad += [(s, float(r[3]), b) for s, (r, b) in enumerate(zip(rows, ref))
                if abs(float(r[3]) - b) > 1e-12 * max(1e-3, abs(b))]
        if len(ours) != steps or bad:
            failed += 1
            print(f"{name}: FAIL ({len(ours)} of {steps} steps)")
            for s, a, b in bad[:5]:
                print(f"  step {s}: cannl {a!r}, torch {b!r}")
        else:
            print(f"{name}: {steps} steps equal (first {ref[0]:.6g}, last {ref[-1]:.6g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
