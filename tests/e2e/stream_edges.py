#!/usr/bin/env python3
"""A stream run (--stream / --val-stream, contract v1 §6) whose validation loss turns nan.

usage: stream_edges.py WORKDIR TRAIN [SCHEDULED]   (TRAIN: gpt_tiny_train; SCHEDULED: gpt_char_train)

Two steps at lr 3e-4 make a good checkpoint; a resumed run at lr 1e30 then takes one more
step whose training loss (computed before the update) is finite but whose params (finite,
about 1e30) overflow the forward pass: the validation after that step is nan. That is a
diverged run (docs: a run whose loss turns nan stops with exit status 1 and saves nothing
over the last checkpoint): exit 1, one line "training diverged at step 3: the validation
loss is nan", the good checkpoint byte-identical, no metrics record with a null val_loss;
without --checkpoint too (it used to end with exit 0 and "val loss: nan"). A run stopped by
--steps and resumed logs what the uninterrupted run logs. With SCHEDULED (a model whose spec
has a schedule: gpt_char's cosine with 100 warm-up steps from lr 1e-3), each record's lr is
the lr that step used (the warm-up's 1e-5, 2e-5, 3e-5 in float32), not the base lr."""
import json
import os
import struct
import shutil
import subprocess
import sys

work, train = sys.argv[1:3]
scheduled = sys.argv[3] if len(sys.argv) > 3 else None
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


with open("text.txt", "wb") as f:
    f.write(b"In the beginning God created the heaven and the earth. " * 200)
common = ["--stream=tokens,next=text.txt", "--batch=4", "--seed=7", "--threads=1", "--quiet"]
rc, _, err = run(train, *common, "--steps=2", "--checkpoint=good.safetensors", "--metrics=m.jsonl")
check(rc == 0, f"2 good steps: rc {rc}: {err}")
if rc != 0:
    sys.exit(1)
with open("good.safetensors", "rb") as f:
    good = f.read()

for eval_every in (["--eval-every=1"], []):  # at every step; at the end only (the last step)
    rc, out, err = run(train, *common, "--val-stream=tokens,next=text.txt", *eval_every, "--steps=3", "--lr=1e30",
                       "--resume=good.safetensors", "--checkpoint=good.safetensors", "--metrics=m.jsonl")
    check(rc == 1 and err.count("\n") == 1 and "training diverged at step 3" in err and "validation loss is nan" in err
          and "keeps step 2" in err, f"{eval_every}: rc {rc}, stderr {err!r}")
    with open("good.safetensors", "rb") as f:
        check(f.read() == good, f"{eval_every}: the good checkpoint changed")
    with open("m.jsonl") as f:
        records = [json.loads(line) for line in f]
    check(all(r.get("val_loss", 0) is not None for r in records), f"{eval_every}: a null val_loss: {records}")
    check("val loss" not in out, f"{eval_every}: a summary was printed: {out!r}")

rc, out, err = run(train, *common, "--val-stream=tokens,next=text.txt", "--steps=3", "--lr=1e30",
                   "--resume=good.safetensors")
check(rc == 1 and "validation loss is nan" in err, f"no --checkpoint: rc {rc}, stdout {out!r}, stderr {err!r}")

# A run stopped at --steps 15 and resumed to --steps 30 logs what the uninterrupted run logs
# (--log-every 10: steps 10, 20, 30; no record for the step the first run stopped at).
def log_of(path):
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k != "elapsed"} for line in f if line.strip()]


rc1, _, err1 = run(train, *common, "--steps=30", "--log-every=10", "--metrics=whole.jsonl")
rc2, _, err2 = run(train, *common, "--steps=15", "--log-every=10", "--metrics=part.jsonl", "--checkpoint=part.safetensors")
rc3, _, err3 = run(train, *common, "--steps=30", "--log-every=10", "--metrics=part.jsonl", "--checkpoint=part.safetensors",
                   "--resume=part.safetensors")
check(rc1 == rc2 == rc3 == 0, f"resume by --steps: rc {rc1} {rc2} {rc3}: {err1}{err2}{err3}")
if rc1 == rc2 == rc3 == 0:
    whole, part = log_of("whole.jsonl"), log_of("part.jsonl")
    check([r["step"] for r in whole] == [10, 20, 30] and whole == part, f"resumed log {part} vs {whole}")

# A spec schedule's lr in the records: the rate each step used.
if scheduled:
    rc, _, err = run(scheduled, *common, "--steps=3", "--log-every=1", "--metrics=sched.jsonl")
    check(rc == 0, f"scheduled run: rc {rc}: {err}")
    if rc == 0:
        f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
        lrs = [r["lr"] for r in log_of("sched.jsonl")]
        check(lrs == [f32(1e-3 * s / 100) for s in (1, 2, 3)], f"scheduled lr in the records: {lrs}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("stream_edges: all checks passed")
