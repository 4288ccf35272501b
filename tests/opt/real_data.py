#!/usr/bin/env python3
"""real_data.py — the issue's criterion on the real data: 10 training steps of a float32
trainer built at -O0, -O1 and -O2 give losses equal within TOL relative (each step's loss,
from --metrics), for a few seeds and batch sizes.

Usage: real_data.py TOL FASHION_DIR TRAIN_O0 TRAIN_O1 TRAIN_O2
Exit 0 pass, 1 fail, 77 (skipped) without the Fashion-MNIST files.
"""
import json
import os
import subprocess
import sys
import tempfile


def losses(exe, fashion, seed, batch, work):
    log = os.path.join(work, "m.jsonl")
    cmd = [exe, "--data", f"image={fashion}/train-images-idx3-ubyte.gz",
           "--data", f"label={fashion}/train-labels-idx1-ubyte.gz", "--steps", "10", "--batch", str(batch),
           "--seed", str(seed), "--log-every", "1", "--metrics", log, "--quiet", "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{exe}: exit status {r.returncode}\n{r.stderr}")
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    return [row["loss"] for row in rows if "step" in row and "loss" in row]


def main():
    tol, fashion, exes = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if not os.path.exists(os.path.join(fashion, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: no Fashion-MNIST under {fashion}")
        return 77
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        for seed in (0, 1):
            for batch in (32, 128):
                ref = losses(exes[0], fashion, seed, batch, work)
                if len(ref) != 10:
                    sys.exit(f"-O0 logged {len(ref)} losses, expected 10")
                for level, exe in enumerate(exes[1:], 1):
                    got = losses(exe, fashion, seed, batch, work)
                    d = max(abs(a - b) / max(abs(a), abs(b), 1e-30) for a, b in zip(ref, got))
                    print(f"seed {seed} batch {batch} -O{level}: largest relative difference {d:.3g}")
                    worst = max(worst, d)
                    if len(got) != len(ref) or d > tol:
                        print(f"FAIL: -O{level} differs from -O0 by {d:.3g} > {tol}")
                        return 1
    print(f"all levels within {tol} (largest {worst:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
