#!/usr/bin/env python3
"""Integer inputs in the training and inference programs (issue 16 item 4, contract v1 §2), on
the hand-written bigram language model fake_bigram (inputs tokens [8] and next [8], int32 ids
< 256; output logits [8, 256] = the rows of its param table).

usage: int_inputs.py WORKDIR TRAIN INFER      (exit 77 without NumPy)

Checks: .npy int32 / int64 and integer CSV bind to the int inputs of both programs; the
inference program's logits are the table rows of exactly the ids in the file (the ids reach the
model as int32, row by row); out-of-range ids, float files, int64 values past int32 and a
wrong row length are errors that name the file (and the input, example and position)."""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("int_inputs: NumPy not available, skipped")
    sys.exit(77)

work, train, infer = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def read_table(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    t = head["table"]
    b, e = t["data_offsets"]
    return np.frombuffer(data[b:e], dtype=np.float32).reshape(t["shape"])


rng = np.random.default_rng(7)
text = rng.integers(0, 256, size=(48, 9))
np.save("tok64.npy", text[:, :8].astype(np.int64))
np.save("tok32.npy", text[:, :8].astype(np.int32))
np.save("next.npy", text[:, 1:].astype(np.int32))
np.savetxt("tok.csv", text[:, :8], fmt="%d", delimiter=",")
np.savetxt("next_header.csv", text[:, 1:], fmt="%d", delimiter=",", header="t0,t1,t2,t3,t4,t5,t6,t7", comments="")

# Training: the same run from int64 .npy, int32 .npy and CSV gives the same checkpoint.
tables = []
for i, tok in enumerate(["tok64.npy", "tok32.npy", "tok.csv"]):
    nxt = "next.npy" if i < 2 else "next_header.csv"
    rc, out, err = run(train, f"--data=tokens={tok}", f"--data=next={nxt}", "--epochs=2", "--batch=8",
                       f"--checkpoint=ck{i}.safetensors", "--quiet")
    check(rc == 0, f"training on {tok}: rc {rc}: {err}")
    if rc == 0:
        tables.append(read_table(f"ck{i}.safetensors"))
check(len(tables) == 3 and all(np.array_equal(tables[0], t) for t in tables[1:]),
      "int64 .npy, int32 .npy and CSV ids train to the same table")
check(len(tables) > 0 and not np.array_equal(tables[0], read_table("ck0.safetensors") * 0), "training changed the table")

# Inference: logits[e, t] is the table's row tokens[e, t].
rc, out, err = run(infer, "--weights=ck0.safetensors", "--input=tokens=tok64.npy", "--output=logits.npy")
check(rc == 0, f"inference: rc {rc}: {err}")
if rc == 0:
    logits = np.load("logits.npy")
    table = read_table("ck0.safetensors")
    check(logits.shape == (48, 8, 256), f"logits shape {logits.shape}")
    check(np.array_equal(logits, table[text[:, :8]]), "logits are the table rows of the ids")
rc, out, err = run(infer, "--weights=ck0.safetensors", "--data=tokens=tok.csv", "--input=next=next.npy", "--metric")
check(rc == 0 and "test loss:" in out and "test accuracy:" in out, f"inference --metric with ids: {rc} {out} {err}")


def expect_error(args, *needles):
    rc, out, err = run(*args)
    ok = rc == 1 and all(n in err for n in needles)
    check(ok, f"{' '.join(args[1:])}: expected exit 1 with {needles}, got {rc}: {err.strip()}")


bad = text[:, :8].astype(np.int32)
bad[5, 6] = 256
np.save("bad_hi.npy", bad)
bad = text[:, :8].astype(np.int64)
bad[9, 0] = -1
np.save("bad_neg.npy", bad)
big = text[:, :8].astype(np.int64)
big[2, 3] = 2**33
np.save("big.npy", big)
np.save("float.npy", text[:, :8].astype(np.float32))
np.save("short.npy", text[:, :7].astype(np.int32))
np.savetxt("float.csv", text[:, :8] + 0.5, delimiter=",")
with open("bad.csv", "w") as f:
    for row in text[:, :8]:
        f.write(",".join(str(v) for v in row) + "\n")
    f.write("1,2,3,4,5,6,7,999\n")

for prog, flag in [(train, "--data"), (infer, "--input")]:
    extra = ["--data=next=next.npy"] if prog == train else ["--weights=ck0.safetensors", "--output=o.npy"]
    expect_error([prog, f"{flag}=tokens=bad_hi.npy"] + extra, "bad_hi.npy", "input 'tokens'", "example 5",
                 "position 6", "id 256 is out of range [0, 256)")
    expect_error([prog, f"{flag}=tokens=bad_neg.npy"] + extra, "bad_neg.npy", "input 'tokens'", "example 9",
                 "position 0", "id -1")
    expect_error([prog, f"{flag}=tokens=big.npy"] + extra, "big.npy", "8589934592 does not fit int32", "'tokens'")
    expect_error([prog, f"{flag}=tokens=float.npy"] + extra, "float.npy", "float32 values", "integer ids",
                 "'tokens'")
    expect_error([prog, f"{flag}=tokens=short.npy"] + extra, "short.npy", "7 ids per example", "'tokens'")
    expect_error([prog, f"{flag}=tokens=float.csv"] + extra, "float.csv", "line 1", "not an integer", "'tokens'")
    expect_error([prog, f"{flag}=tokens=bad.csv"] + extra, "bad.csv", "example 48", "position 7", "id 999")
expect_error([infer, "--weights=ck0.safetensors", "--input=tokens=tok32.npy", "--input=next=bad_hi.npy", "--metric"],
             "bad_hi.npy", "input 'next'", "example 5", "position 6")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("int_inputs: all checks passed")
