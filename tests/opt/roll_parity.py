#!/usr/bin/env python3
"""roll_parity.py — rolled repeat blocks (lower/roll.h) train as the expanded ones (--no-roll).

Usage: roll_parity.py TOL ROLLED NOROLL [--noisy NAME=TOL2 ...] [--fixture CKPT LOSSES]
ROLLED and NOROLL are roll_check.c linked with the same spec generated with and without
--no-roll (float64). Checks, each number within TOL relative (0: bit for bit):
  - 10 training steps: every loss, and every param tensor by ||a - b|| / ||b|| (the measure of
    tests/mpi/compare.py; NAME=TOL2 holds NAME.* to TOL2: a tensor whose gradient is rounding
    noise, gpt's key bias), compared by name (the rolled build lists a block's params
    group-major, the expanded one instance after instance), and so forward's outputs and
    eval's loss and metrics after the steps (the inference bodies);
  - resume: NOROLL trains 5 steps and saves a checkpoint, ROLLED loads it and trains 5 more:
    its losses are NOROLL's steps 6 to 10 and its params NOROLL's after 10 steps (checkpoint
    names do not change);
  - --fixture CKPT LOSSES: ROLLED loads CKPT (a checkpoint written by cannl before repeat
    blocks were rolled) and trains 5 steps: the losses LOSSES lists.
Prints the largest differences; exit 0 pass, 1 fail."""
import array
import os
import subprocess
import sys
import tempfile


def run(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{exe} {' '.join(args)}: exit status {r.returncode}\n{r.stderr}")
    return [float(l.split()[2]) for l in r.stdout.splitlines() if l.startswith("loss ")]


def dump(path):
    out = {}
    with open(path, "rb") as f:
        raw = f.read()
    i = 0
    while i < len(raw):
        j = raw.index(b"\0", i)
        name = raw[i:j].decode()
        n = int.from_bytes(raw[j + 1:j + 9], "little", signed=True)
        a = array.array("d")
        a.frombytes(raw[j + 9:j + 9 + 8 * n])
        out[name] = a
        i = j + 9 + 8 * n
    return out


def rel(a, b):
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), 1e-300)


def main():
    argv = sys.argv[1:]
    tol, rolled, norolled = float(argv[0]), argv[1], argv[2]
    noisy, fixture = {}, None
    k = 3
    while k < len(argv):
        if argv[k] == "--noisy":
            name, t = argv[k + 1].split("=")
            noisy[name] = float(t)
            k += 2
        elif argv[k] == "--fixture":
            fixture = (argv[k + 1], argv[k + 2])
            k += 3
        else:
            sys.exit(f"unknown argument {argv[k]}")

    def tol_of(name):
        for n, t in noisy.items():
            if name == n or name.startswith(n + "."):
                return t
        return tol

    ok = True

    def losses(what, a, b):
        nonlocal ok
        if len(a) != len(b):
            print(f"{what}: {len(a)} losses vs {len(b)}")
            ok = False
            return
        worst = max((rel(x, y) for x, y in zip(a, b)), default=0.0)
        print(f"{what}: largest relative difference of the losses {worst:.3g}")
        if worst > tol:
            ok = False

    def params(what, da, db):
        nonlocal ok
        if sorted(da) != sorted(db):
            print(f"{what}: other tensors: {sorted(set(da) ^ set(db))}")
            ok = False
            return
        worst, where, noise, nwhere = 0.0, "", 0.0, ""
        for name in da:
            if name.startswith("grad:"):
                continue
            x, y = da[name], db[name]
            dd = sum((p - q) ** 2 for p, q in zip(x, y)) ** 0.5
            nn = sum(q * q for q in y) ** 0.5
            d = dd / nn if nn > 0 else dd
            if d > tol_of(name):
                print(f"{what}: {name}: ||a - b|| / ||b|| = {d:.3g} > {tol_of(name)}")
                ok = False
            if d > worst and tol_of(name) == tol:
                worst, where = d, name
            if d > noise and tol_of(name) != tol:
                noise, nwhere = d, name
        print(f"{what}: largest ||a - b|| / ||b|| of a param {worst:.3g}" + (f" ({where})" if where else "") +
              (f"; of a noisy one {noise:.3g} ({nwhere})" if nwhere else ""))

    with tempfile.TemporaryDirectory() as tmp:
        p = lambda n: os.path.join(tmp, n)
        la = run(rolled, "--dump", p("a"))
        lb = run(norolled, "--dump", p("b"))
        losses("10 steps", la, lb)
        params("10 steps", dump(p("a")), dump(p("b")))
        run(norolled, "--steps", "5", "--save", p("ck5"))
        lr = run(rolled, "--steps", "5", "--load", p("ck5"), "--dump", p("r"))
        losses("resumed from --no-roll's checkpoint", lr, lb[5:])
        params("resumed from --no-roll's checkpoint", dump(p("r")), dump(p("b")))
        if fixture:
            lf = run(rolled, "--steps", "5", "--load", fixture[0])
            want = [float(l.split()[2]) for l in open(fixture[1]) if l.startswith("loss ")]
            losses(f"resumed from {os.path.basename(fixture[0])}", lf, want)
    sys.exit(0 if ok else 1)


main()
