#!/usr/bin/env python3
"""compare.py A B TOL: two checkpoints (safetensors) hold the same tensors, each within TOL
relative (||a - b|| / ||b||, the l2 norms of the tensor), and the same "step" metadata. Prints
the worst tensor; exit 0 when within, 1 otherwise.

The norm, not the largest element: a gradient that is zero in exact arithmetic but rounding
noise in floating point (gpt_tiny's key bias: softmax ignores a constant added to every
score) moves its elements by Adam's lr * noise / eps, noise that differs with the order of
the sums (one batch or two halves). Those elements are far below the tensor's scale, so the
norm sees the noise as what it is, while a per-element maximum over a mostly tiny tensor
would magnify it."""
import json
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[base + a:base + b], dtype=DT[t["dtype"]]).reshape(t["shape"])
    return out, meta


def main():
    a, ma = load(sys.argv[1])
    b, mb = load(sys.argv[2])
    tol = float(sys.argv[3])
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(a)} vs {sorted(b)}")
        return 1
    if ma.get("step") != mb.get("step"):
        print(f"different steps: {ma.get('step')} vs {mb.get('step')}")
        return 1
    worst, wname = 0.0, ""
    for k in a:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        d = float(np.linalg.norm(x - y)) / max(float(np.linalg.norm(y)), 1e-300) if y.size else 0.0
        if d > worst or not wname:
            worst, wname = d, k
    ok = worst <= tol
    print(f"{len(a)} tensors, step {ma.get('step')}: worst relative difference {worst:.3g} ({wname}), "
          f"tolerance {tol:g}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
