#!/usr/bin/env python3
"""--generate at the edges of its flags and of the contract's window rule (v1 §6).

usage: generate_edges.py WORKDIR TRAIN INFER CTX1_TRAIN CTX1_INFER

TRAIN/INFER: gpt_tiny (byte-level, ctx 64); CTX1_*: gpt_tiny built with ctx = 1 (and a small
width), whose window past ctx can keep only one token. Checks:
- ctx = 1: generation goes on past ctx (the window: the last token) with the KV cache, and
  gives the same text as the full forward pass per token (CANNL_GENERATE_FULL_FORWARD=1),
  which must not read the logits of a position before the window;
- a temperature so small that logits / T overflow (1e-320) is argmax, as T = 0;
- --seed takes any uint64 (18446744073709551615), as the training program's --seed;
- logits that are not finite (weights that overflow float32) are an error (exit 1, one line
  saying so), not bytes drawn from nan;
- ties: with the final layer norm's gain and bias zeroed every logit is 0, and --top-k k keeps
  the k lowest ids (descending score, then ascending id): every byte drawn is below k, each of
  them drawn, with the KV cache and with the full forward pass.
Plain Python (no NumPy): the checkpoint is edited with struct."""
import json
import os
import shutil
import struct
import subprocess
import sys

work, train, infer, ctx1_train, ctx1_infer = sys.argv[1:6]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    e = dict(os.environ)
    e.pop("CANNL_GENERATE_FULL_FORWARD", None)
    if env:
        e.update(env)
    p = subprocess.run(list(args), capture_output=True, env=e)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


with open("text.txt", "wb") as f:
    f.write(b"In the beginning God created the heaven and the earth. " * 200)
for prog, ck in ((train, "ck.safetensors"), (ctx1_train, "ck1.safetensors")):
    rc, _, err = run(prog, "--stream=tokens,next=text.txt", "--steps=3", "--batch=4", "--seed=1",
                     f"--checkpoint={ck}", "--quiet")
    check(rc == 0, f"training {prog}: rc {rc}: {err}")
    if rc != 0:
        sys.exit(1)

# --- ctx = 1: every token past the first is past ctx; the window keeps the last token.
FULL = {"CANNL_GENERATE_FULL_FORWARD": "1"}
for flags in (["--temperature=0"], ["--seed=3"], ["--seed=4", "--top-k=5", "--temperature=0.7"]):
    args = [ctx1_infer, "--weights=ck1.safetensors", "--generate=12", "--prompt=In the"] + flags
    rc, out, err = run(*args)
    check(rc == 0 and len(out) == 6 + 12 and out.startswith(b"In the"),
          f"ctx 1, {flags}: rc {rc}, {len(out)} bytes (want 18): {err.strip()}")
    rc2, out2, err2 = run(*args, env=FULL)
    check(rc2 == 0 and out2 == out, f"ctx 1, {flags}: the full forward pass gives rc {rc2} {out2!r} "
          f"({err2.strip()}), the KV cache {out!r}")

# --- a temperature whose quotients overflow: argmax, as T = 0.
W = "--weights=ck.safetensors"
rc0, greedy, err = run(infer, W, "--generate=20", "--prompt=In the", "--temperature=0")
check(rc0 == 0, f"T = 0: rc {rc0}: {err}")
for t in ("1e-320", "1e-300"):
    rc, out, err = run(infer, W, "--generate=20", "--prompt=In the", f"--temperature={t}")
    check(rc == 0 and out == greedy, f"T = {t}: rc {rc}, {out!r}, want T = 0's {greedy!r} ({err.strip()})")

# --- --seed: the whole uint64 range, as the trainer's.
rc, a, err = run(infer, W, "--generate=20", "--prompt=In the", "--seed=18446744073709551615")
rc2, b, _ = run(infer, W, "--generate=20", "--prompt=In the", "--seed=18446744073709551615")
check(rc == 0 and len(a) == 26 and a == b, f"--seed 2^64 - 1: rc {rc}: {err.strip()}")
rc, _, err = run(infer, W, "--generate=20", "--prompt=In the", "--seed=18446744073709551616")
check(rc == 2 and "--seed" in err and "too large" in err, f"--seed 2^64: rc {rc}: {err.strip()}")

# --- logits that overflow: lnf_g scaled to 3e38 makes the head's sums inf - inf = nan.
with open("ck.safetensors", "rb") as f:
    blob = f.read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
data = bytearray(blob[8 + n:])
lo, hi = header["lnf_g"]["data_offsets"]
vals = struct.unpack(f"<{(hi - lo) // 4}f", data[lo:hi])
data[lo:hi] = struct.pack(f"<{len(vals)}f", *[v * 3e38 if abs(v * 3e38) < 3.4e38 else 3e38 for v in vals])
with open("big.safetensors", "wb") as f:
    f.write(blob[:8 + n] + bytes(data))
for flags in (["--temperature=0"], ["--seed=1"]):
    for env in (None, FULL):
        rc, out, err = run(infer, "--weights=big.safetensors", "--generate=10", "--prompt=In", *flags, env=env)
        check(rc == 1 and out == b"In" and "not finite" in err and err.count("\n") == 1,
              f"overflowing logits, {flags}, {env}: rc {rc}, stdout {out!r}, stderr {err!r}")

# --- ties: lnf_g and lnf_b zeroed make every logit 0; top-k keeps the k lowest ids.
data = bytearray(blob[8 + n:])
for name in ("lnf_g", "lnf_b"):
    lo, hi = header[name]["data_offsets"]
    data[lo:hi] = bytes(hi - lo)
with open("flat.safetensors", "wb") as f:
    f.write(blob[:8 + n] + bytes(data))
for k in (1, 3, 40):
    for env in (None, FULL):
        rc, out, err = run(infer, "--weights=flat.safetensors", "--generate=200", "--prompt=In", f"--top-k={k}",
                           "--seed=7", env=env)
        drawn = set(out[2:])
        check(rc == 0 and len(out) == 202 and drawn == set(range(k)),
              f"tied logits, --top-k {k}, {env}: rc {rc}, bytes drawn {sorted(drawn)} (want 0..{k - 1}): {err.strip()}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("generate_edges: all checks passed")
