#!/usr/bin/env python3
"""--generate in the inference program of a generated GPT (issue 17, contract v1 §6).

usage: generate.py WORKDIR TRAIN INFER IDS_TRAIN IDS_INFER [CTX]      (exit 77 without NumPy)

TRAIN/INFER: a byte-level GPT of context CTX (default 64: gpt_tiny; gpt_char at small dims, its
repeat block rolled, decodes through its block's decode function); IDS_*: gpt_tiny built with
vocab = 100 (ids mode, ctx 64). Each model trains 3 steps on a token stream (its checkpoint
holds the params). Checks: the output is the prompt then N tokens; the same seed gives the same
text, another seed another; T = 0 is deterministic and each generated token is the argmax of the logits the plain --input
forward path gives for its window (ids left-aligned, the rest 0), for the first tokens and for
tokens past ctx, where the window is the last ctx/2 tokens (and for a prompt longer than ctx,
chosen so that the windows of ctx/2, ctx/2 + 1 and ctx bytes give different tokens); --top-k 1 is argmax;
--prompts FILE gives each line the text --prompt LINE gives alone (several batches, a line past ctx, ids mode
too); and the bad flags and prompt files are usage errors (exit 2) that say what is wrong."""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("generate: NumPy not available, skipped")
    sys.exit(77)

work, train, infer, ids_train, ids_infer = sys.argv[1:6]
CTX = int(sys.argv[6]) if len(sys.argv) > 6 else 64
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
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


# --- the byte-level model: 3 steps on a raw-bytes stream
with open("text.txt", "wb") as f:
    f.write(b"In the beginning God created the heaven and the earth. " * 200)
rc, out, err = run(train, "--stream=tokens,next=text.txt", "--steps=3", "--batch=4", "--seed=1",
                   "--checkpoint=ck.safetensors", "--quiet")
check(rc == 0, f"training the byte-level model: rc {rc}: {err}")
if rc != 0:
    sys.exit(1)
W = "--weights=ck.safetensors"


def logits_of(prog, weights, window, n, ctx=CTX):
    """The plain forward path's logits at the window's last position."""
    ids = np.zeros((1, ctx), dtype=np.int32)
    ids[0, :len(window)] = window
    np.save("win.npy", ids)
    rc, _, err = run(prog, weights, "--input=tokens=win.npy", "--output=win_out.npy")
    check(rc == 0, f"forward of a window: rc {rc}: {err}")
    return np.load("win_out.npy")[0, len(window) - 1, :n]


prompt = b"And God said"
N = 100  # 12 + 100 > ctx: the window is cut (once at ctx 64)
rc, a, err = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--seed=3", "--temperature=0.9")
check(rc == 0, f"--generate: rc {rc}: {err}")
check(a.startswith(prompt) and len(a) == len(prompt) + N, f"prompt then {N} bytes: {len(a)} bytes {a[:40]!r}")
rc, b, _ = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--seed=3", "--temperature=0.9")
check(rc == 0 and a == b, "the same seed gives the same text")
rc, c, _ = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--seed=4", "--temperature=0.9")
check(rc == 0 and a != c and c.startswith(prompt), "another seed gives other text")
rc, z, _ = run(infer, W, "--generate=0", "--prompt", prompt.decode())
check(rc == 0 and z == prompt, f"--generate 0 writes the prompt only: {z!r}")

# T = 0: each token is the argmax of the forward path's logits for its window.
rc, g0, err = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--temperature=0")
check(rc == 0 and len(g0) == len(prompt) + N, f"T = 0: rc {rc}: {err}")
rc, g1, _ = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--temperature=0", "--seed=9")
check(g0 == g1, "T = 0 does not depend on the seed")
rc, gk, _ = run(infer, W, "--generate=100", "--prompt", prompt.decode(), "--top-k=1", "--seed=5")
check(gk == g0, "--top-k 1 is argmax")
toks = list(g0)
start = 0
for t in range(len(prompt), len(toks)):
    if t - start > CTX:
        start = t - CTX // 2
    if t in (len(prompt), len(prompt) + 1, CTX, CTX + 1, len(toks) - 1):  # first, at ctx, past it
        lg = logits_of(infer, W, toks[start:t], 256)
        check(int(np.argmax(lg)) == toks[t], f"T = 0 token {t} (window [{start}, {t})): {toks[t]} vs argmax "
              f"{int(np.argmax(lg))}")

# The window rule with a prompt longer than ctx: the first token comes from the last ctx/2
# bytes. A prompt is picked where that window's argmax differs from those of the windows one
# byte longer and ctx bytes long, so that the check tells them apart.
words = b"and the of God LORD said unto him thou shalt not be in heaven earth light darkness were ".split()
r = np.random.default_rng(2)
picked = None
for attempt in range(40):
    long_prompt = b" ".join(words[i] for i in r.integers(0, len(words), 40))[:CTX + 9]
    if len(long_prompt) != CTX + 9 or b"\0" in long_prompt:
        continue
    t = list(long_prompt)
    want = int(np.argmax(logits_of(infer, W, t[-(CTX // 2):], 256)))
    if want != int(np.argmax(logits_of(infer, W, t[-(CTX // 2) - 1:], 256))) and \
            want != int(np.argmax(logits_of(infer, W, t[-CTX:], 256))):
        picked = (long_prompt, want)
        break
check(picked is not None, "found a prompt whose windows of ctx/2, ctx/2 + 1 and ctx bytes disagree")
if picked:
    rc, out, err = run(infer, W, "--generate=1", "--prompt", picked[0].decode(), "--temperature=0")
    check(rc == 0 and out[:-1] == picked[0] and out[-1] == picked[1],
          f"a prompt past ctx: the first token is the argmax of its last ctx/2 bytes: {out[-1:]!r} vs {picked[1]}")

# --- ids mode: gpt_tiny with vocab 100, trained on an llm.c shard of ids < 100
stream = (np.arange(4000) * 7 % 100).astype(np.uint16)
head = np.zeros(256, dtype=np.int32)
head[:3] = [20240520, 1, len(stream)]
with open("ids.bin", "wb") as f:
    f.write(head.tobytes())
    f.write(stream.tobytes())
rc, out, err = run(ids_train, "--stream=tokens,next=ids.bin", "--steps=3", "--batch=4", "--seed=1",
                   "--checkpoint=ck_ids.safetensors", "--quiet")
check(rc == 0, f"training gpt_tiny vocab 100: rc {rc}: {err}")
WI = "--weights=ck_ids.safetensors"
rc, out, err = run(ids_infer, WI, "--generate=5", "--prompt", " 5 17\n3 ", "--temperature=0")
lines = out.decode().split("\n")
check(rc == 0 and lines[:3] == ["5", "17", "3"] and len(lines) == 9 and lines[-1] == "",
      f"ids mode: the prompt's ids then 5, one per line: rc {rc} {out!r} {err}")
if rc == 0 and len(lines) == 9:
    got = int(lines[3])
    lg = logits_of(ids_infer, WI, [5, 17, 3], 100, ctx=64)
    check(got == int(np.argmax(lg)) and all(0 <= int(v) < 100 for v in lines[3:8]),
          f"ids mode: first token {got} is the argmax {int(np.argmax(lg))}")


# --- --prompts FILE: line k's text is that of --prompt LINE alone, byte for byte (the batched
# decode steps: more lines than the cache's sequences, so several batches; prompts of different
# lengths, one past ctx, so that the rows sit at different positions and windows)
def records(out):
    """The texts of --prompts' output: '### prompt K: B bytes', the B bytes, a newline."""
    texts, at = [], 0
    while at < len(out):
        head_end = out.index(b"\n", at)
        head = out[at:head_end].decode()
        check(head.startswith(f"### prompt {len(texts) + 1}: ") and head.endswith(" bytes"), f"record header {head!r}")
        n = int(head.split(": ")[1].split()[0])
        texts.append(out[head_end + 1:head_end + 1 + n])
        check(out[head_end + 1 + n:head_end + 2 + n] == b"\n", "a newline after each record")
        at = head_end + 2 + n
    return texts


many = [b"And God said", b"In", b"x" * (CTX + 5), b"Let there be light"] + [b"Q%d said" % k for k in range(9)]
with open("prompts.txt", "wb") as f:
    f.write(b"\n".join(many) + b"\n")
# (--batch N: N lines at once, default 8: a state created for N sequences)
for args, at_once in ((["--seed=3", "--temperature=0.9"], []), (["--temperature=0"], []),
                      (["--seed=3", "--temperature=0.9"], ["--batch=3"]), (["--seed=4"], ["--batch=1"])):
    rc, out, err = run(infer, W, "--generate=40", "--prompts=prompts.txt", *args, *at_once)
    check(rc == 0, f"--prompts: rc {rc}: {err}")
    got = records(out) if rc == 0 else []
    check(len(got) == len(many), f"--prompts: {len(got)} records for {len(many)} lines")
    for k, line in enumerate(many[:len(got)]):
        rc, alone, _ = run(infer, W, "--generate=40", "--prompt", line.decode(), *args)
        check(rc == 0 and got[k] == alone, f"--prompts {args + at_once}: line {k + 1} is not --prompt alone: {got[k][:30]!r} vs "
              f"{alone[:30]!r}")
with open("ids_prompts.txt", "w") as f:
    f.write("5 17 3\n9\n")
rc, out, err = run(ids_infer, WI, "--generate=5", "--prompts=ids_prompts.txt", "--seed=2")
got = records(out) if rc == 0 else []
for k, line in enumerate(["5 17 3", "9"]):
    rc2, alone, _ = run(ids_infer, WI, "--generate=5", "--prompt", line, "--seed=2")
    check(rc == 0 and len(got) == 2 and got[k] == alone, f"ids mode --prompts: line {k + 1} is not --prompt alone")
for name, text in (("empty.txt", b""), ("blank.txt", b"a\n\nb\n"), ("nul.txt", b"a\nb\0c\n"),
                   ("many.txt", b"a\n" * 65537), ("bad_ids.txt", b"5 17\n5 100\n")):
    with open(name, "wb") as f:
        f.write(text)


# --- usage errors: exit 2, one line saying what is wrong
def expect_usage(prog, args, *needles):
    rc, out, err = run(prog, *args)
    check(rc == 2 and out == b"" and all(n in err for n in needles),
          f"{' '.join(args)}: expected exit 2 with {needles}, got {rc}: {err.strip()}")


expect_usage(infer, [W, "--generate=-1", "--prompt=a"], "--generate")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--temperature=-0.5"], "--temperature", ">= 0")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--temperature=hot"], "--temperature")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--top-k=0"], "--top-k")
expect_usage(infer, [W, "--generate=5", "--prompt="], "empty prompt")
expect_usage(infer, [W, "--generate=5"], "--prompt")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--input=tokens=win.npy"], "no --input, --output")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--output=o.npy"], "no --input, --output")
expect_usage(infer, [W, "--prompt=a", "--output=o.npy"], "go with --generate")
expect_usage(ids_infer, [WI, "--generate=5", "--prompt=5 100"], "token 1", "out of range", "[0, 100)")
expect_usage(ids_infer, [WI, "--generate=5", "--prompt=5 x7"], "'x7' is not a token id")
expect_usage(ids_infer, [WI, "--generate=5", "--prompt=  "], "no token ids")
expect_usage(infer, [W, "--generate=5", "--prompts=missing.txt"], "--prompts missing.txt", "cannot open")
expect_usage(infer, [W, "--generate=5", "--prompts=empty.txt"], "empty.txt", "no prompts")
expect_usage(infer, [W, "--generate=5", "--prompts=blank.txt"], "blank.txt:2: empty prompt")
expect_usage(infer, [W, "--generate=5", "--prompts=nul.txt"], "nul.txt:2:", "NUL")
expect_usage(infer, [W, "--generate=5", "--prompts=many.txt"], "many.txt", "65537 lines", "65536")
expect_usage(ids_infer, [WI, "--generate=5", "--prompts=bad_ids.txt"], "bad_ids.txt:2: token 1", "out of range")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--prompts=blank.txt"], "one of them")
expect_usage(infer, [W, "--prompts=blank.txt", "--output=o.npy"], "go with --generate")
expect_usage(infer, [W, "--generate=5", "--prompt=a", "--batch=2"], "--batch goes with --prompts")
expect_usage(infer, [W, "--generate=5", "--prompts=prompts.txt", "--batch=99999999"], "--batch 99999999",
             "larger than the model's maximum batch")
rc, out, _ = run(infer, "--help")
check(rc == 0 and b"--generate" in out and b"re-runs the full forward pass" in out, "--help describes --generate")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("generate: all checks passed")
