#!/usr/bin/env python3
"""compare.py — runs one model's opt_levels program built at each level and compares.

Usage: compare.py TOL EXE_O0 EXE_O1 EXE_O2 ...
Every line of every program's output must name the same quantity as -O0's, and each number
must equal -O0's within TOL relative (|a - b| <= TOL * max(|a|, |b|, 1e-30)); the losses are the
issue's criterion, the gradients, eval loss, metrics, outputs and params are checked the same
way (each a sum of absolute values, so that no cancellation turns rounding into a
large relative difference). Prints the largest relative difference per level. Exit 0 pass, 1 fail.
"""
import subprocess
import sys


def run(exe):
    out = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"{exe}: exit status {out.returncode}\n{out.stderr}")
    rows = []
    for line in out.stdout.splitlines():
        *key, value = line.split()
        rows.append((" ".join(key), float(value)))
    return rows


def main():
    tol = float(sys.argv[1])
    exes = sys.argv[2:]
    ref = run(exes[0])
    if not any(k.startswith("loss") for k, _ in ref):
        sys.exit("no losses printed")
    ok = True
    for exe in exes[1:]:
        rows = run(exe)
        if [k for k, _ in rows] != [k for k, _ in ref]:
            print(f"{exe}: prints other quantities than {exes[0]}")
            ok = False
            continue
        worst, where = 0.0, ""
        for (k, a), (_, b) in zip(ref, rows):
            rel = abs(a - b) / max(abs(a), abs(b), 1e-30)
            if a == b:
                rel = 0.0
            if rel > worst:
                worst, where = rel, k
            if rel > tol:
                print(f"{exe}: {k}: {b!r} vs {a!r} at -O0 (relative {rel:.3g} > {tol})")
                ok = False
        print(f"{exe}: largest relative difference to -O0 {worst:.3g}" + (f" ({where})" if where else ""))
    sys.exit(0 if ok else 1)


main()
