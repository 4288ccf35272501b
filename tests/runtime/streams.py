#!/usr/bin/env python3
"""Token streams in the training program (issue 17 item 1, contract v1 §6), on the hand-written
bigram language model fake_bigram (integer inputs tokens [8], next [8], vocab 256).

usage: streams.py WORKDIR TRAIN [CANNL [PREFETCH_TRAIN]]

Checks: --stream tokens,next=PATH feeds windows (input = the first ctx tokens, target = the
last ctx); --val-stream with --eval-every / --eval-batches prints and logs val_loss and
val_accuracy; the metrics records carry step, train_loss, lr, val_loss, val_<metric>,
elapsed; the windows follow --seed; a run interrupted and resumed equals the uninterrupted
one bit for bit (checkpoint and log); a run resumed at its end logs nothing again, and a log
lacking its last record gets it with the lr the run used; llm.c shards train, and bad shards
(version, short header, token count, token >= vocab) are errors naming the file; --steps is
required. With CANNL: `cannl plot` draws the stream run's log (train_loss, val_loss,
val_accuracy) and an epoch run's (loss, train_loss, test_loss, accuracy: issue 20 item 6)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

work, train = sys.argv[1], sys.argv[2]
cannl = sys.argv[3] if len(sys.argv) > 3 else None
prefetch_train = sys.argv[4] if len(sys.argv) > 4 else None
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([train] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def table_bytes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    b, e = head["table"]["data_offsets"]
    return data[b:e]


def shard(path, tokens, version=1, count=None, header_ints=256):
    head = [20240520, version, len(tokens) if count is None else count] + [0] * (header_ints - 3)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{header_ints}i", *head))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


# Text streams (raw bytes): a varied training text and its validation part.
words = "in the beginning god created the heaven and the earth and the earth was without form and void".split()
text = " ".join(words[(i * 7) % len(words)] for i in range(3000)).encode()
with open("train.txt", "wb") as f:
    f.write(text[:15000])
with open("val.txt", "wb") as f:
    f.write(text[15000:])

base = ["--stream", "tokens,next=train.txt", "--val-stream", "tokens,next=val.txt", "--batch", "8",
        "--eval-batches", "3", "--log-every", "4"]
rc, out, err = run(*base, "--steps", "20", "--eval-every", "8", "--metrics", "a.jsonl", "--checkpoint", "a.ck")
check(rc == 0, f"stream run: rc {rc}: {err}")
check("val loss:" in out and "val accuracy:" in out, f"stream run prints the validation: {out}")
check("step 8/20  val_loss" in out and "step 16/20  val_loss" in out, f"validation every 8 steps: {out}")
check(out.startswith("step 4/20  loss ") and "epoch" not in out, f"progress lines of a stream run name no epoch: {out}")
if rc == 0:
    recs = records("a.jsonl")
    steps = [r["step"] for r in recs]
    check(steps == [4, 8, 12, 16, 20], f"records at steps {steps}")
    for r in recs:
        check(all(k in r for k in ("step", "train_loss", "lr", "elapsed")), f"record keys {sorted(r)}")
        has_val = r["step"] in (8, 16, 20)
        check(("val_loss" in r and "val_accuracy" in r) == has_val, f"val keys at step {r['step']}: {sorted(r)}")
    check(recs[-1]["val_loss"] < recs[1]["val_loss"], "validation loss falls")
    check(all(r["lr"] == 1 for r in recs), "lr logged")

# The same seed gives the same windows (checkpoint); another seed others.
rc, out, err = run(*base, "--steps", "20", "--eval-every", "8", "--checkpoint", "b.ck")
check(rc == 0 and table_bytes("a.ck") == table_bytes("b.ck"), "same seed, same run")
rc, out, err = run(*base, "--steps", "20", "--seed", "5", "--checkpoint", "c.ck")
check(rc == 0 and table_bytes("a.ck") != table_bytes("c.ck"), "another seed, other windows")

# Interrupted at step 13 and resumed to 20: the same bits and the same log as the run above.
rc, out, err = run(*base, "--steps", "13", "--eval-every", "8", "--metrics", "r.jsonl", "--checkpoint", "r.ck",
                   "--threads", "1")
check(rc == 0, f"first half: {rc} {err}")
rc, out, err = run(*base, "--steps", "20", "--eval-every", "8", "--metrics", "r.jsonl", "--checkpoint", "r.ck",
                   "--resume", "r.ck", "--threads", "1")
check(rc == 0, f"resumed half: {rc} {err}")
if rc == 0:
    check(table_bytes("a.ck") == table_bytes("r.ck"), "resumed run = uninterrupted run, bit for bit")
    # (the first half also validated at its last step, 13: that record comes in addition)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "elapsed"} for r in rs if r["step"] != 13]
    resumed = records("r.jsonl")
    check(strip(records("a.jsonl")) == strip(resumed), "resumed log = uninterrupted log")
    check([r["step"] for r in resumed] == [4, 8, 12, 13, 16, 20], f"resumed log steps {[r['step'] for r in resumed]}")

# Resumed at its end (issue 36 item 5): no second record of the last step, however often; a log
# that lacks it gets it with the lr the run's last step used (the model's float32 lr, which
# fake_bigram's get_last_lr reports as generated models do), not the lr as set.
rc, out, err = run(*base, "--steps", "10", "--lr", "0.3", "--metrics", "end.jsonl", "--checkpoint", "end.ck")
check(rc == 0, f"run to its end: {rc} {err}")
with open("end.jsonl") as f:
    before = f.read()
for _ in range(2):
    rc, out, err = run(*base, "--steps", "10", "--metrics", "end.jsonl", "--checkpoint", "end.ck", "--resume", "end.ck")
    check(rc == 0 and "nothing to train" in out and "val loss: " in out, f"resumed at its end: {rc} {out} {err}")
with open("end.jsonl") as f:
    after = f.read()
check(after == before, f"resumed at its end: the log gained records:\n{before}---\n{after}")
rc, out, err = run(*base, "--steps", "10", "--metrics", "end2.jsonl", "--checkpoint", "end.ck", "--resume", "end.ck")
check(rc == 0, f"resumed at its end, another log: {rc} {err}")
if rc == 0:
    last, again = records("end.jsonl")[-1], records("end2.jsonl")
    check(len(again) == 1 and again[0]["step"] == 10 and again[0]["val_loss"] == last["val_loss"],
          f"the final validation's record in a log that lacks it: {again}")
    check(again[0]["lr"] == last["lr"] == 0.30000001192092896, f"lr {again[0]['lr']} vs the run's {last['lr']}")

# Resumed with another --seed: a warning that the windows now come from that seed.
rc, out, err = run(*base, "--steps", "21", "--seed", "9", "--resume", "r.ck", "--checkpoint", "r9.ck")
check(rc == 0 and "--seed 9 differs from the checkpoint's seed 0; drawing the stream's windows with 9" in err,
      f"resumed with another seed: {rc} {err}")

# A model that prefetches (as CUDA models do) gets every step's windows before the step, but for
# the first and those after a validation (20 - 1 - 2), and trains the same bits.
if prefetch_train:
    p = subprocess.run([prefetch_train, *base, "--steps", "20", "--eval-every", "8", "--checkpoint", "p.ck"],
                       capture_output=True, text=True, env=dict(os.environ, FAKE_PREFETCH_MODEL="bigram"))
    check(p.returncode == 0 and "prefetch: 17 prefetched, 20 steps, 17 matched, 0 bad" in p.stderr,
          f"prefetching stream run: {p.returncode} {p.stderr}")
    check(p.returncode == 0 and table_bytes("p.ck") == table_bytes("a.ck"), "prefetching changes nothing")

# Input and target are the window shifted by one: on a periodic stream ("abcabc...") the next
# token is a function of the current one, and the bigram table learns it exactly.
with open("abc.txt", "wb") as f:
    f.write(b"abc" * 400)
rc, out, err = run("--stream", "tokens,next=abc.txt", "--val-stream", "tokens,next=abc.txt", "--steps", "10",
                   "--batch", "4", "--metrics", "abc.jsonl")
check(rc == 0 and records("abc.jsonl")[-1]["val_accuracy"] == 1.0, f"windows shifted by one: {out} {err}")

# llm.c shards: a good one trains; bad ones are errors naming the file.
tokens = list(text[:4000])
shard("good.bin", tokens)
rc, out, err = run("--stream", "tokens,next=good.bin", "--steps", "3", "--batch", "4", "--checkpoint", "g.ck")
check(rc == 0, f"shard run: {rc} {err}")
with open("train4000.txt", "wb") as f:
    f.write(text[:4000])
rc, out, err = run("--stream", "tokens,next=train4000.txt", "--steps", "3", "--batch", "4", "--checkpoint", "g2.ck")
check(rc == 0 and table_bytes("g.ck") == table_bytes("g2.ck"), "a shard and raw bytes of the same tokens train alike")

shard("v2.bin", tokens, version=2)
shard("count.bin", tokens, count=len(tokens) + 10)
shard("vocab.bin", tokens[:100] + [300] + tokens[100:])
with open("short.bin", "wb") as f:
    f.write(struct.pack("<3i", 20240520, 1, 5))
with open("tiny.txt", "wb") as f:
    f.write(b"abcd")
for name, needle in [("v2.bin", "version"), ("count.bin", ""), ("vocab.bin", "300"), ("short.bin", ""),
                     ("tiny.txt", "")]:
    for flag in ("--stream", "--val-stream"):
        args = ["--steps", "2", "--batch", "4"]
        if flag == "--stream":
            args += ["--stream", f"tokens,next={name}"]
        else:
            args += ["--stream", "tokens,next=train.txt", "--val-stream", f"tokens,next={name}"]
        rc, out, err = run(*args)
        check(rc == 1 and name in err and needle in err, f"{flag} {name}: expected exit 1 naming it, got {rc}: {err}")

# Usage errors (exit 2).
for args, needle in [(["--stream", "tokens,next=train.txt"], "--steps"),
                     (["--stream", "tokens,next=train.txt", "--steps", "2", "--data", "tokens=x.npy"], "--data"),
                     (["--stream", "tokens,next=train.txt", "--steps", "2", "--epochs", "2"], "--epochs"),
                     (["--stream", "tokens,next=train.txt", "--steps", "2", "--eval-every", "2"], "--val-stream"),
                     (["--val-stream", "tokens,next=train.txt", "--steps", "2"], "--stream"),
                     (["--stream", "tokens,nxt=train.txt", "--steps", "2"], "no input 'nxt'"),
                     (["--stream", "tokens=train.txt", "--steps", "2"], "INPUT,TARGET=PATH"),
                     (["--stream", "tokens,next=train.txt", "--val-stream", "next,tokens=train.txt", "--steps", "2"],
                      "binds next,tokens but --stream binds tokens,next")]:
    rc, out, err = run(*args)
    check(rc == 2 and needle in err, f"{' '.join(args)}: expected usage error with {needle!r}, got {rc}: {err}")

# The epoch records of a --data run: epoch, step, train_loss, lr, test_loss, accuracy, elapsed.
with open("win.csv", "w") as f:
    for i in range(0, 4000, 9):
        f.write(",".join(str(b) for b in text[i:i + 9]) + "\n")
with open("tok.csv", "w") as f, open("next.csv", "w") as g, open("win.csv") as w:
    for line in w:
        v = line.strip().split(",")
        f.write(",".join(v[:8]) + "\n")
        g.write(",".join(v[1:]) + "\n")
rc, out, err = run("--data", "tokens=tok.csv", "--data", "next=next.csv", "--test", "tokens=tok.csv", "--test",
                   "next=next.csv", "--epochs", "3", "--batch", "32", "--log-every", "5", "--metrics", "e.jsonl")
check(rc == 0, f"epoch run: {rc} {err}")
if rc == 0:
    epochs = [r for r in records("e.jsonl") if "train_loss" in r]
    check([r["epoch"] for r in epochs] == [1, 2, 3] and [r["step"] for r in epochs] == [14, 28, 42],
          f"epoch records {epochs}")
    for r in epochs:
        check(sorted(r) == sorted(["epoch", "step", "train_loss", "lr", "test_loss", "accuracy", "elapsed"]),
              f"epoch record keys {sorted(r)}")

if cannl:
    svg_ns = "{http://www.w3.org/2000/svg}"
    for log, want in [("a.jsonl", ["lr", "train_loss", "val_accuracy", "val_loss"]),
                      ("e.jsonl", ["accuracy", "loss", "lr", "test_loss", "train_loss"])]:
        p = subprocess.run([cannl, "plot", log, "-o", log + ".svg"], capture_output=True, text=True)
        check(p.returncode == 0, f"cannl plot {log}: {p.returncode} {p.stderr}")
        if p.returncode == 0:
            root = ET.parse(log + ".svg").getroot()
            series = sorted(e.get("data-series") for e in root.iter(svg_ns + "polyline") if e.get("data-series"))
            # lr is drawn only when it varies; these runs keep it constant
            check([x for x in series if x != "lr"] == [x for x in want if x != "lr"], f"{log}: series {series}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("streams: all checks passed")
