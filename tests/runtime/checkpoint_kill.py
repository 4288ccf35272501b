#!/usr/bin/env python3
"""Periodic checkpoints against kill -9 (issue 36 item 3), on the bigram language model fake_bigram
trained on a token stream.

usage: checkpoint_kill.py WORKDIR TRAIN [TRIALS]

A 2000-step --stream run with --checkpoint-every 100 (and a validation every 250 steps) is killed
with SIGKILL at a random moment (once its log reaches a random step), TRIALS times (default 4; the
seed is printed, KILL_SEED=N repeats it); a run that ends before its kill fails the test. SIGKILL
runs no handler, so what is on disk is what the periodic saves left. Each time: the checkpoint is
at most 100 steps behind the last step the run logged (it logs every step), and --resume from it
ends with the checkpoint and metrics log of the uninterrupted run, bit for bit (the log but for
its elapsed seconds). Before these saves existed a --stream run saved only at
its end or on a signal: a kill -9 left no checkpoint at all."""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

work, train = sys.argv[1], sys.argv[2]
trials = int(sys.argv[3]) if len(sys.argv) > 3 else 4
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []
STEPS, EVERY = 2000, 100


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def records(path):
    """The complete records of a log (a last line cut short by the kill is left out)."""
    with open(path) as f:
        text = f.read()
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def strip(recs):
    return [{k: v for k, v in r.items() if k != "elapsed"} for r in recs]


def metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


words = "in the beginning god created the heaven and the earth and the earth was without form and void".split()
text = " ".join(words[(i * 7) % len(words)] for i in range(3000)).encode()
with open("train.txt", "wb") as f:
    f.write(text[:15000])
with open("val.txt", "wb") as f:
    f.write(text[15000:])

base = [train, "--stream", "tokens,next=train.txt", "--val-stream", "tokens,next=val.txt", "--eval-every", "250",
        "--eval-batches", "2", "--batch", "8", "--steps", str(STEPS), "--log-every", "1", "--quiet",
        "--checkpoint-every", str(EVERY)]

t0 = time.monotonic()
p = subprocess.run(base + ["--checkpoint", "full.ck", "--metrics", "full.jsonl"], capture_output=True, text=True)
duration = time.monotonic() - t0
check(p.returncode == 0, f"uninterrupted run: exit {p.returncode}: {p.stderr}")
if p.returncode != 0:
    sys.exit(1)
full_ck, full_log = read_bytes("full.ck"), strip(records("full.jsonl"))
print(f"uninterrupted: {STEPS} steps in {duration:.2f} s, {len(full_log)} records", flush=True)

seed = int(os.environ.get("KILL_SEED", time.time_ns() % 1000000))
rng = random.Random(seed)
print(f"KILL_SEED={seed}", flush=True)
killed, most_lost = 0, 0
for trial in range(trials):
    for f in os.listdir("."):
        if f.startswith("k."):
            os.remove(f)
    proc = subprocess.Popen(base + ["--checkpoint", "k.ck", "--metrics", "k.jsonl"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    # a random moment: once the log reaches a random step (it logs every step), then up to a
    # step's time more; a moment drawn from the run's measured length let a run that went faster
    # than the first end before the kill, and the trial checked nothing
    target = rng.randint(1, STEPS - 2 * EVERY)
    while proc.poll() is None:
        try:
            with open("k.jsonl", "rb") as f:
                if f.read().count(b"\n") >= target:
                    break
        except FileNotFoundError:
            pass
        time.sleep(0.001)
    time.sleep(rng.uniform(0, duration / STEPS))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    logged = max([r["step"] for r in records("k.jsonl")], default=0)
    check(proc.returncode == -signal.SIGKILL, f"trial {trial}: the run ended before the kill at step {target} "
          f"(exit {proc.returncode})")
    if proc.returncode != -signal.SIGKILL:
        continue
    killed += 1
    saved = int(metadata("k.ck")["step"]) if os.path.exists("k.ck") else 0
    lost = logged - saved
    print(f"trial {trial}: killed after step {logged}; the checkpoint holds step {saved}: {lost} steps lost",
          flush=True)
    most_lost = max(most_lost, lost)
    check(0 <= lost <= EVERY, f"trial {trial}: {lost} steps lost (at most {EVERY})")
    check(saved % EVERY == 0, f"trial {trial}: checkpoint at step {saved}, not a multiple of {EVERY}")
    resume = ["--resume", "k.ck"] if os.path.exists("k.ck") else []
    p = subprocess.run(base + resume + ["--checkpoint", "k.ck", "--metrics", "k.jsonl"], capture_output=True,
                       text=True)
    check(p.returncode == 0, f"trial {trial}: resumed run: exit {p.returncode}: {p.stderr}")
    same_ck = p.returncode == 0 and read_bytes("k.ck") == full_ck
    same_log = p.returncode == 0 and strip(records("k.jsonl")) == full_log
    check(same_ck, f"trial {trial}: the resumed run's checkpoint differs from the uninterrupted run's")
    check(same_log, f"trial {trial}: the resumed run's log differs from the uninterrupted run's")
    how = f"resumed from step {saved}" if resume else "no checkpoint yet: run again from the start"
    print(f"trial {trial}: {how} to {STEPS}: checkpoint {'identical' if same_ck else 'DIFFERS'},"
          f" log {'identical' if same_log else 'DIFFERS'}", flush=True)
    check(not [f for f in os.listdir(".") if ".tmp." in f], f"trial {trial}: a temporary file was left")

print(f"{killed} of {trials} runs killed, at most {most_lost} steps lost, every resumed run bit-exact"
      if killed == trials and not failures else f"{killed} of {trials} runs killed", flush=True)
if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("checkpoint_kill: all checks passed")
