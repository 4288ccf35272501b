#!/usr/bin/env python3
"""Run-time-sized states (issue 36 item 7): the programs size their states for the batch in use.

usage: state_size.py WORKDIR TRAIN INFER      (gpt_char's programs: max batch 256)

gpt_char's training state is 1.46 GB at its maximum batch of 256 and 59 MB at --batch 8; its
forward-only state 172 MB at 256, 9.4 MB at 8 and 4.8 MB for --generate (one sequence). Under
an address-space limit (RLIMIT_AS, one thread) of 400 MB the training program trains at --batch 8
and resumes (the batch from its checkpoint), and under 100 MB the inference program generates
and runs --batch 8 forward passes: with states sized for the maximum each would fail to create
its state ("out of memory"). Skipped (77) where the limit cannot be set."""
import os
import resource
import shutil
import struct
import subprocess
import sys

work, train, infer = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []
MB = 1 << 20


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(limit_mb, *args):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * MB, limit_mb * MB))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(list(args) + ["--threads=1"], capture_output=True, preexec_fn=limit, env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


try:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and hard < 400 * MB:
        raise ValueError
except (ValueError, OSError):
    print("state_size: cannot set an address-space limit, skipped")
    sys.exit(77)

with open("text.txt", "wb") as f:
    f.write(b"In the beginning God created the heaven and the earth. " * 200)
rc, _, err = run(400, train, "--stream=tokens,next=text.txt", "--steps=1", "--batch=8", "--seed=1",
                 "--checkpoint=ck.safetensors", "--quiet")
check(rc == 0, f"training at --batch 8 within 400 MB: rc {rc}: {err.strip()}")
if rc == 0:
    rc, _, err = run(400, train, "--stream=tokens,next=text.txt", "--steps=2", "--resume=ck.safetensors",
                     "--checkpoint=ck2.safetensors", "--quiet")
    check(rc == 0, f"resuming (batch 8 from the checkpoint) within 400 MB: rc {rc}: {err.strip()}")
    rc, out, err = run(100, infer, "--weights=ck.safetensors", "--generate=20", "--prompt", "And God", "--seed=1")
    check(rc == 0 and out.startswith(b"And God") and len(out) == 27,
          f"--generate within 100 MB: rc {rc}: {err.strip()} {out[:40]!r}")
    # 16 windows of the text, tokens and the next bytes, as int32 .npy arrays
    data = open("text.txt", "rb").read()
    for name, shift in (("tokens", 0), ("next", 1)):
        rows = [data[k * 64 + shift:k * 64 + shift + 128] for k in range(16)]
        header = "{'descr': '<i4', 'fortran_order': False, 'shape': (16, 128), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        with open(name + ".npy", "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
            f.write(b"".join(struct.pack("<128i", *row) for row in rows))
    rc, out, err = run(100, infer, "--weights=ck.safetensors", "--input=tokens=tokens.npy", "--input=next=next.npy",
                       "--batch=8", "--metric")
    check(rc == 0 and b"test loss" in out, f"--metric at --batch 8 within 100 MB: rc {rc}: {err.strip()}")
# The limit bites: the maximum batch's training state does not fit in 400 MB.
rc, _, err = run(400, train, "--stream=tokens,next=text.txt", "--steps=1", "--batch=256", "--quiet")
check(rc != 0 and "out of memory" in err, f"--batch 256 within 400 MB fails to create its state: rc {rc}: {err}")

if failures:
    print(f"state_size: {len(failures)} failure(s)")
    sys.exit(1)
print("state_size: gpt_char trains and resumes at --batch 8 within 400 MB, generates and runs --batch 8 within 100 MB")
