#!/usr/bin/env python3
"""`cannl gen --weights-apart` and `--weights CK --embed --weights-only` (issue 36 item 11): an
embedded model written by two runs into one directory, as cmake/Cannl.cmake's WEIGHTS builds
it (the model compiled once, the params apart). Together they write exactly the files of
`--weights CK --embed` (the model card says only that the params are compiled in: the first run
reads no checkpoint); neither run removes the other's files, and --weights-only rewrites no
file but <model>_weights.c. Misused options are usage errors.
    gen_weights_apart.py CANNL SPECS_DIR WORKDIR"""
import json
import os
import shutil
import struct
import subprocess
import sys

cannl, specs, work = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
spec = os.path.join(specs, "moons_mlp.cannl")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def gen(*args):
    return subprocess.run([cannl, "gen", spec, *args], capture_output=True, text=True)


def files(d):
    out = {}
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


# moons_mlp's params (2-16-16-1), every value of tensor i 0.125 * (i + 1), float32, step 7.
shapes = {"w1": (16, 2), "b1": (16,), "w2": (16, 16), "b2": (16,), "w3": (1, 16), "b3": (1,)}
head, blobs, off = {"__metadata__": {"model": "moons_mlp", "step": "7"}}, [], 0
for i, (k, sh) in enumerate(shapes.items()):
    n = 1
    for d in sh:
        n *= d
    b = struct.pack(f"<{n}f", *([0.125 * (i + 1)] * n))
    head[k] = {"dtype": "F32", "shape": list(sh), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
with open("ck.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

r = gen("-o", "whole", "--weights", "ck.safetensors", "--embed")
check(r.returncode == 0, f"gen --weights --embed: {r.returncode} {r.stderr}")
whole = files("whole")

# The model's half: every file but the weights, and no checkpoint read.
r = gen("-o", "split", "--weights-apart")
check(r.returncode == 0, f"gen --weights-apart: {r.returncode} {r.stderr}")
model = files("split")
check(sorted(model) == sorted(n for n in whole if n != "moons_mlp_weights.c"),
      f"--weights-apart wrote {sorted(model)}")
card = json.loads(model.get("moons_mlp.json", b"{}"))
check(card.get("embedded_weights") == {"checkpoint": None, "step": None},
      f"--weights-apart's card: embedded_weights {card.get('embedded_weights')}")
check(b"#define MOONS_MLP_EMBEDDED_WEIGHTS 1" in model.get("moons_mlp.h", b""), "the header declares the params compiled in")

# The weights' half, beside it: one file more, the others not touched.
before = {n: os.stat(os.path.join("split", n)).st_mtime_ns for n in model}
r = gen("-o", "split", "--weights", "ck.safetensors", "--embed", "--weights-only")
check(r.returncode == 0, f"gen --weights-only: {r.returncode} {r.stderr}")
both = files("split")
check(sorted(both) == sorted(whole), f"the two runs wrote {sorted(both)}, --embed alone {sorted(whole)}")
check(all(os.stat(os.path.join("split", n)).st_mtime_ns == t for n, t in before.items()),
      "--weights-only rewrote a file of the model's")
for name in whole:
    if name != "moons_mlp.json":
        check(both.get(name) == whole[name], f"{name} differs from --weights --embed's")
card_whole = json.loads(whole["moons_mlp.json"])
card_whole["embedded_weights"] = {"checkpoint": None, "step": None}
check(card == card_whole, "the cards differ in more than embedded_weights")

# The model's half again (a changed spec): the weights stay.
r = gen("-o", "split", "--weights-apart")
check(r.returncode == 0 and os.path.exists("split/moons_mlp_weights.c"),
      f"--weights-apart again removed the weights: {r.returncode} {r.stderr}")
# A plain gen there is another build: it removes them.
r = gen("-o", "split")
check(r.returncode == 0 and not os.path.exists("split/moons_mlp_weights.c"), "a plain gen left the weights behind")

# Into a new directory, --weights-only writes that one file.
r = gen("-o", "only", "--weights", "ck.safetensors", "--embed", "--weights-only")
check(r.returncode == 0 and sorted(os.listdir("only")) == ["moons_mlp_weights.c"],
      f"--weights-only into a new directory: {r.returncode} {sorted(os.listdir('only')) if os.path.isdir('only') else None}")

for args, needle in [(["--weights-only"], "--weights"),
                     (["--weights-only", "--embed"], "--weights"),
                     (["--weights-apart", "--weights", "ck.safetensors", "--embed"], "--weights"),
                     (["--weights-apart", "--target", "cuda"], "--weights-apart")]:
    r = gen("-o", "bad", *args)
    check(r.returncode == 2 and needle in r.stderr, f"{args}: {r.returncode} {r.stderr}")
    check(not os.path.exists("bad"), f"{args} wrote files")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("gen_weights_apart: all checks passed")
