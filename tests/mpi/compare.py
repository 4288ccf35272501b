#!/usr/bin/env python3
"""compare.py A B TOL [NAME=TOL2 ...]: two checkpoints (safetensors) hold the same tensors,
each within TOL relative (||a - b|| / ||b||, the l2 norms of the tensor), and the same "step"
metadata. NAME=TOL2 holds the tensor NAME and its optimiser state (NAME.*) to TOL2 instead (a
tensor whose gradient is rounding noise, below). Prints the worst tensor against its tolerance;
exit 0 when every tensor is within, 1 otherwise.

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
    own = dict((kv.split("=", 1)[0], float(kv.split("=", 1)[1])) for kv in sys.argv[4:])

    def tol_of(name):
        for k, t in own.items():
            if name == k or name.startswith(k + "."):
                return t
        return tol
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(a)} vs {sorted(b)}")
        return 1
    if ma.get("step") != mb.get("step"):
        print(f"different steps: {ma.get('step')} vs {mb.get('step')}")
        return 1
    worst, wname = -1.0, ""  # the tensor furthest past (or least within) its tolerance
    ok = True
    for k in a:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        d = float(np.linalg.norm(x - y)) / max(float(np.linalg.norm(y)), 1e-300) if y.size else 0.0
        ok = ok and d <= tol_of(k)
        if d / tol_of(k) > worst:
            worst, wname = d / tol_of(k), k
    d = worst * tol_of(wname)
    print(f"{len(a)} tensors, step {ma.get('step')}: worst relative difference {d:.3g} ({wname}), "
          f"tolerance {tol_of(wname):g}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
