#!/usr/bin/env python3
"""Data-parallel training checks (issue 19): a generated training program under
`mpirun -np P` against the same program alone (no mpirun), compared by their checkpoints
(compare.py: every param and optimiser-state tensor within a relative tolerance).

  equal   10 steps at global batch 128: -np 1 and -np 2 each equal the program alone
          (Fashion-MNIST, or with --stream a token stream of random bytes)
  uneven  a 300-example set, batch 128, 2 epochs (slices 43/43/42, a short last batch of
          44) on 3 ranks; the checkpoint and the test loss and accuracy equal the run alone;
          and batch 2 on 3 ranks (one rank without examples) equals the run alone
  zero    ZeRO-1 (--zero 1: optimiser state sharded over the ranks): 10 steps at global batch
          128 on 2 and on 3 ranks equal the program alone (the checkpoint rank 0 gathers holds
          every tensor the program alone saves); 2 ZeRO-1 ranks to step 5, then the program
          alone resumes to step 10; the program alone to step 5, then 2 ZeRO-1 ranks resume
          to step 10: both equal 10 steps alone
  memory  ZeRO-1 saves memory: on 1, 2 and 3 ranks with --zero 1, the optimiser-state bytes
          each rank holds (the summary line) add up to the model card's opt_state_block.bytes,
          and each is at most 1/P of it plus the largest param's state (shards are whole
          params); on 2 and 3 ranks every rank holds less than all of it; without --zero every
          rank holds all of it
  dropout a model with dropout (p = 0.5): 10 steps at global batch 128 on 2 and 3 ranks
          (slices 43/43/42), plain and ZeRO-1, equal the program alone: each rank draws the
          masks one process draws for the same examples (by their index in the global batch)
  bn      a model with batch_norm (each rank normalises with its slice's statistics and keeps
          its own running statistics, as DDP without SyncBatchNorm; rank 0's are saved): on 2 and
          3 ranks, --zero 1 equals the plain all-reduce, running statistics included, and the
          test loss the ranks report is the checkpoint's (the program alone evaluating it)
  resume  2 ranks to step 5 (checkpointed), then 1 rank resumes to step 10: equals 10 steps
          alone
  periodic periodic checkpoints under 2 ZeRO-1 ranks: --checkpoint-every 3 --keep-last 2 keeps
          the saves of steps 6 and 8 (step 6 equal to the program alone), and saves due by rank
          0's clock at every step are made by every rank alike
  kill    kill -9 of rank 1 mid-run: mpirun and every rank end non-zero within seconds, the
          output names rank 1, the checkpoint on disk loads (a run resumes from it)
  usage   a bad flag (--zero 2, an unknown one, --data of no input) under mpirun -np 3: every
          rank exits non-zero and the error is printed once, not once per rank; --help once
  hosts   two "hosts": two network namespaces joined by a veth pair, one rank in each,
          mpirun over TCP between them (its remote launcher an `ip netns exec` script in
          place of ssh): 10 steps equal the program alone (skipped where namespaces cannot
          be made: not root, no iproute2, no CAP_NET_ADMIN)

Exit 77 (skipped) when mpirun or the data is missing."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import load  # noqa: E402

SKIP = 77


def skip(msg):
    print(f"SKIP: {msg}")
    sys.exit(SKIP)


def env():
    e = dict(os.environ)
    # Sessions and CI run as root; one OpenMP thread per rank (2 cores).
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    return e


def mpirun(np_):
    return [MPIRUN, "--oversubscribe", "-np", str(np_)]


def run(cmd, what):
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        print(f"FAIL: {what} exited {r.returncode}")
        sys.exit(1)
    return r.stdout


NOISY = []  # NAME=TOL: tensors whose gradient is rounding noise (--noisy)


def compare(a, b, tol, what):
    dir_ = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(dir_, "compare.py"), a, b, str(tol)] + NOISY, stdout=subprocess.PIPE,
                       text=True)
    print(f"{what}: {r.stdout.strip()}", flush=True)
    return r.returncode == 0


def fashion_args(a):
    d = a.fashion
    files = [f"{d}/train-images-idx3-ubyte.gz", f"{d}/train-labels-idx1-ubyte.gz"]
    for f in files:
        if not os.path.exists(f):
            skip(f"no Fashion-MNIST ({f})")
    return ["--data", f"image={files[0]}", "--data", f"label={files[1]}"]


def stream_args(a):
    path = os.path.join(a.work, "stream.bin")
    rng = np.random.default_rng(7)
    rng.integers(0, 256, 20000, dtype=np.uint8).tofile(path)
    return ["--stream", f"tokens,next={path}"]


def small_set(a, name, n, seed):
    """n random examples of the MLP's inputs (.npy): images of 784 values in [0, 255] and
    class indices."""
    rng = np.random.default_rng(seed)
    img = os.path.join(a.work, f"{name}_image.npy")
    lab = os.path.join(a.work, f"{name}_label.npy")
    np.save(img, rng.integers(0, 256, (n, 784)).astype(np.float64))
    np.save(lab, rng.integers(0, 10, n).astype(np.int64))
    return img, lab


def cmd_equal(a):
    data = stream_args(a) if a.stream else fashion_args(a)
    base = [a.trainer] + data + ["--steps", "10", "--batch", "128", "--seed", "3", "--quiet"]
    w = a.work
    run(base + ["--checkpoint", f"{w}/alone.st"], "the program alone")
    ok = True
    for p in (1, 2):
        out = run(mpirun(p) + base + ["--checkpoint", f"{w}/np{p}.st"], f"mpirun -np {p}")
        if f"data-parallel: {p} ranks" not in out:
            print(f"FAIL: mpirun -np {p} did not train data-parallel (no summary line)")
            ok = False
        ok = compare(f"{w}/np{p}.st", f"{w}/alone.st", a.tol, f"-np {p} vs alone") and ok
    return 0 if ok else 1


def cmd_zero(a):
    data = stream_args(a) if a.stream else fashion_args(a)
    base = [a.trainer] + data + ["--batch", "128", "--seed", "3", "--quiet"]
    w = a.work
    for f in ("zero_a.st", "zero_b.st"):
        if os.path.exists(f"{w}/{f}"):
            os.remove(f"{w}/{f}")
    run(base + ["--steps", "10", "--checkpoint", f"{w}/alone.st"], "the program alone")
    ok = True
    for p in (2, 3):
        out = run(mpirun(p) + base + ["--steps", "10", "--zero", "1", "--checkpoint", f"{w}/zero{p}.st"],
                  f"mpirun -np {p} --zero 1")
        if f"data-parallel (ZeRO-1): {p} ranks" not in out:
            print(f"FAIL: mpirun -np {p} --zero 1 did not train with ZeRO-1 (no summary line)")
            ok = False
        ok = compare(f"{w}/zero{p}.st", f"{w}/alone.st", a.tol, f"-np {p} --zero 1 vs alone") and ok
    # Sharded -> one process, one process -> sharded: the checkpoint has nothing of P or ZeRO in it.
    run(mpirun(2) + base + ["--steps", "5", "--zero", "1", "--checkpoint", f"{w}/zero_a.st"], "-np 2 --zero 1 to step 5")
    run([a.trainer] + data + ["--resume", f"{w}/zero_a.st", "--steps", "10", "--quiet", "--checkpoint",
                              f"{w}/zero_a.st"], "the program alone resuming")
    ok = compare(f"{w}/zero_a.st", f"{w}/alone.st", a.tol, "2 ZeRO-1 ranks then alone vs alone") and ok
    run(base + ["--steps", "5", "--checkpoint", f"{w}/zero_b.st"], "the program alone to step 5")
    run(mpirun(2) + [a.trainer] + data + ["--resume", f"{w}/zero_b.st", "--steps", "10", "--zero", "1", "--quiet",
                                          "--checkpoint", f"{w}/zero_b.st"], "-np 2 --zero 1 resuming")
    ok = compare(f"{w}/zero_b.st", f"{w}/alone.st", a.tol, "alone then 2 ZeRO-1 ranks vs alone") and ok
    return 0 if ok else 1


def opt_block(trainer):
    """The model card's optimiser-state block: its bytes and the largest param's state (bytes,
    its tensors' extents with their alignment padding)."""
    model = os.path.basename(trainer)[:-len("_train")]
    d = os.path.join(os.path.dirname(trainer), "cannl", model)
    cards = [f for f in os.listdir(d) if f.endswith(".json")] if os.path.isdir(d) else []
    if len(cards) != 1:
        print(f"FAIL: no model card in {d}")
        sys.exit(1)
    block = json.load(open(os.path.join(d, cards[0])))["opt_state_block"]
    ts = sorted(block["tensors"], key=lambda t: t["offset_bytes"])
    per_param = {}
    for i, t in enumerate(ts):
        end = ts[i + 1]["offset_bytes"] if i + 1 < len(ts) else block["bytes"]
        param = t["name"].rsplit(".", 1)[0]
        per_param[param] = per_param.get(param, 0) + end - t["offset_bytes"]
    return block["bytes"], max(per_param.values(), default=0)


def held(out, p, zero):
    """The per-rank bytes of the summary line "optimiser state: X bytes on this rank of Y ..."."""
    m = re.search(r"optimiser state: (\d+) bytes on this rank of (\d+) \((.*)\)", out)
    if not m:
        print(f"FAIL: -np {p}: no optimiser-state line in the summary")
        sys.exit(1)
    total = int(m.group(2))
    if not zero:
        return total, [int(m.group(1))] * p if m.group(3) == "each rank holds all of it" else []
    per = [int(x) for x in m.group(3).split(":", 1)[1].split()]
    return total, per


def cmd_memory(a):
    data = stream_args(a) if a.stream else fashion_args(a)
    base = [a.trainer] + data + ["--batch", "128", "--seed", "3", "--steps", "1", "--quiet"]
    total, largest = opt_block(a.trainer)
    print(f"model card: optimiser state {total} bytes, the largest param's {largest}")
    ok = total > 0
    for p in (1, 2, 3):
        got_total, per = held(run(mpirun(p) + base + ["--zero", "1"], f"mpirun -np {p} --zero 1"), p, True)
        bound = total / p + largest
        good = (got_total == total and len(per) == p and sum(per) == total and max(per) <= bound
                and (p == 1 or max(per) < total))
        print(f"-np {p} --zero 1: per rank {per} of {got_total} (at most {bound:.0f} each): {'ok' if good else 'FAIL'}")
        ok = ok and good
    got_total, per = held(run(mpirun(2) + base, "mpirun -np 2"), 2, False)
    good = got_total == total and per == [total, total]
    print(f"-np 2 without --zero: per rank {per}: {'ok' if good else 'FAIL'}")
    return 0 if ok and good else 1


def cmd_dropout(a):
    w = a.work
    rng = np.random.default_rng(11)
    x, y = os.path.join(w, "x.npy"), os.path.join(w, "y.npy")
    np.save(x, rng.standard_normal((640, 6)))
    np.save(y, rng.integers(0, 3, 640).astype(np.int64))
    base = [a.trainer, "--data", f"x={x}", "--data", f"y={y}", "--steps", "10", "--batch", "128", "--seed", "3",
            "--quiet"]
    run(base + ["--checkpoint", f"{w}/alone.st"], "the program alone")
    ok = True
    for p, zero in ((2, False), (3, False), (2, True), (3, True)):
        flags = ["--zero", "1"] if zero else []
        what = f"-np {p}" + (" --zero 1" if zero else "")
        run(mpirun(p) + base + flags + ["--checkpoint", f"{w}/np{p}{zero}.st"], f"mpirun {what}")
        ok = compare(f"{w}/np{p}{zero}.st", f"{w}/alone.st", a.tol, f"{what} vs alone") and ok
    return 0 if ok else 1


def cmd_bn(a):
    w = a.work
    rng = np.random.default_rng(12)
    x, y = os.path.join(w, "x.npy"), os.path.join(w, "y.npy")
    tx, ty = os.path.join(w, "tx.npy"), os.path.join(w, "ty.npy")
    np.save(x, rng.standard_normal((640, 6)) * 2 + 1)
    np.save(y, rng.integers(0, 3, 640).astype(np.int64))
    np.save(tx, rng.standard_normal((400, 6)) * 2 + 1)  # 4 batches: split over the ranks
    np.save(ty, rng.integers(0, 3, 400).astype(np.int64))
    data = [a.trainer, "--data", f"x={x}", "--data", f"y={y}", "--test", f"x={tx}", "--test", f"y={ty}"]
    base = data + ["--steps", "10", "--batch", "128", "--seed", "3", "--quiet"]
    ok = True
    for p in (2, 3):
        for f in (f"{w}/np{p}.jsonl", f"{w}/alone{p}.jsonl"):
            if os.path.exists(f):
                os.remove(f)
        run(mpirun(p) + base + ["--checkpoint", f"{w}/np{p}.st", "--metrics", f"{w}/np{p}.jsonl"], f"mpirun -np {p}")
        run(mpirun(p) + base + ["--zero", "1", "--checkpoint", f"{w}/np{p}_zero.st"], f"mpirun -np {p} --zero 1")
        ok = compare(f"{w}/np{p}_zero.st", f"{w}/np{p}.st", a.tol, f"-np {p} --zero 1 vs -np {p}") and ok
        # The test loss the ranks report is that of the checkpoint (rank 0's running statistics),
        # as the program alone evaluates it.
        run(data + ["--resume", f"{w}/np{p}.st", "--steps", "10", "--quiet", "--metrics", f"{w}/alone{p}.jsonl"],
            "the program alone evaluating the checkpoint")
        got, want = last_test(f"{w}/np{p}.jsonl")["test_loss"], last_test(f"{w}/alone{p}.jsonl")["test_loss"]
        print(f"-np {p}: test loss {got!r}, the checkpoint's {want!r}", flush=True)
        if abs(got - want) > a.tol * abs(want):
            print(f"FAIL: -np {p}: the test loss is not the checkpoint's")
            ok = False
    return 0 if ok else 1


def last_test(path):
    recs = [json.loads(line) for line in open(path) if line.strip()]
    recs = [r for r in recs if "test_loss" in r]
    return recs[-1]


def cmd_uneven(a):
    w = a.work
    img, lab = small_set(a, "train", 300, 1)
    timg, tlab = small_set(a, "test", 100, 2)
    base = [a.trainer, "--data", f"image={img}", "--data", f"label={lab}", "--test", f"image={timg}",
            "--test", f"label={tlab}", "--epochs", "2", "--batch", "128", "--lr", "0.001", "--quiet"]
    for m in ("alone.jsonl", "np3.jsonl"):
        if os.path.exists(f"{w}/{m}"):
            os.remove(f"{w}/{m}")
    run(base + ["--checkpoint", f"{w}/alone.st", "--metrics", f"{w}/alone.jsonl"], "the program alone")
    run(mpirun(3) + base + ["--checkpoint", f"{w}/np3.st", "--metrics", f"{w}/np3.jsonl"], "mpirun -np 3")
    ok = compare(f"{w}/np3.st", f"{w}/alone.st", 1e-12, "-np 3 vs alone")
    x, y = last_test(f"{w}/np3.jsonl"), last_test(f"{w}/alone.jsonl")
    for k in ("test_loss", "accuracy", "train_loss", "step"):
        same = abs(x[k] - y[k]) <= 1e-12 * max(1.0, abs(y[k]))
        print(f"{k}: -np 3 {x[k]!r} alone {y[k]!r}: {'ok' if same else 'FAIL'}")
        ok = ok and same
    # A batch of 2 on 3 ranks: one rank has no examples (it contributes zero gradients).
    tiny = [a.trainer, "--data", f"image={img}", "--data", f"label={lab}", "--steps", "4", "--batch", "2", "--lr",
            "0.001", "--quiet"]
    run(tiny + ["--checkpoint", f"{w}/tiny_alone.st"], "the program alone, batch 2")
    run(mpirun(3) + tiny + ["--checkpoint", f"{w}/tiny_np3.st"], "mpirun -np 3, batch 2")
    ok = compare(f"{w}/tiny_np3.st", f"{w}/tiny_alone.st", 1e-12, "-np 3 vs alone, batch 2") and ok
    return 0 if ok else 1


def cmd_resume(a):
    w = a.work
    base = [a.trainer] + fashion_args(a) + ["--batch", "128", "--seed", "5", "--quiet"]
    run(base + ["--steps", "10", "--checkpoint", f"{w}/alone.st"], "the program alone")
    if os.path.exists(f"{w}/resumed.st"):
        os.remove(f"{w}/resumed.st")
    run(mpirun(2) + base + ["--steps", "5", "--checkpoint", f"{w}/resumed.st"], "mpirun -np 2 to step 5")
    run(mpirun(1) + [a.trainer] + fashion_args(a) + ["--resume", f"{w}/resumed.st", "--steps", "10", "--quiet",
                                                     "--checkpoint", f"{w}/resumed.st"], "mpirun -np 1 resuming")
    return 0 if compare(f"{w}/resumed.st", f"{w}/alone.st", 1e-12, "2 ranks then 1 vs alone") else 1


def cmd_periodic(a):
    """Periodic checkpoints under 2 ZeRO-1 ranks (issue 36 item 3): every rank takes part in
    every save (rank 0 gathers the optimiser state and writes), at the same steps. By steps
    (--checkpoint-every 3 with --keep-last 2: the step files of steps 6 and 8, step 6's equal to
    the program alone run to step 6) and by rank 0's clock (--checkpoint-minutes 0.00001, 0.6 ms:
    due at every step, which the ranks must agree on, or the gather would hang or mismatch)."""
    w = a.work
    base = [a.trainer] + fashion_args(a) + ["--batch", "128", "--seed", "5", "--quiet"]
    for f in os.listdir(w):
        if f.startswith(("per.st", "clock.st")):
            os.remove(os.path.join(w, f))
    run(base + ["--steps", "6", "--checkpoint", f"{w}/alone6.st"], "the program alone to step 6")
    run(mpirun(2) + base + ["--steps", "8", "--zero", "1", "--checkpoint", f"{w}/per.st", "--checkpoint-every", "3",
                            "--keep-last", "2"], "mpirun -np 2 --zero 1 --checkpoint-every 3 --keep-last 2")
    files = sorted(f for f in os.listdir(w) if f.startswith("per.st"))
    ok = files == ["per.st", "per.st.step6", "per.st.step8"]
    print(f"step files: {files}", flush=True)
    ok = compare(f"{w}/per.st.step6", f"{w}/alone6.st", 1e-12, "step 6 of 2 ZeRO-1 ranks vs alone") and ok
    run(mpirun(2) + base + ["--steps", "5", "--zero", "1", "--checkpoint", f"{w}/clock.st", "--checkpoint-every", "0",
                            "--checkpoint-minutes", "0.00001", "--keep-last", "10"], "mpirun -np 2 --zero 1, by the clock")
    files = sorted(f for f in os.listdir(w) if f.startswith("clock.st"))
    print(f"step files: {files}", flush=True)
    ok = files == ["clock.st"] + [f"clock.st.step{s}" for s in range(1, 6)] and ok
    if not ok:
        print("FAIL: periodic saves under ZeRO-1")
    return 0 if ok else 1


def cmd_usage(a):
    ok = True
    data = fashion_args(a)
    cases = [(["--zero", "2"], 2, "--zero: stage 2 is not supported"),
             (["--bogus"], 2, "--bogus"),
             (["--data", "nope=x.npy"], 2, "nope"),
             (["--help"], 0, "usage: ")]
    for flags, want_rc, needle in cases:
        cmd = mpirun(3) + [a.trainer] + data + ["--steps", "1", "--quiet"] + flags
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        print(r.stdout, end="", flush=True)
        said = [line for line in r.stdout.splitlines() if needle in line and ("error" in line or needle == "usage: ")]
        if (r.returncode == 0) != (want_rc == 0) or len(said) != 1:
            print(f"FAIL: {flags}: exit {r.returncode}, '{needle}' said {len(said)} times (once expected)")
            ok = False
    return 0 if ok else 1


def ranks_of(pid):
    """The processes below pid (mpirun's ranks) with their OMPI_COMM_WORLD_RANK."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            environ = open(f"/proc/{d}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for e in environ:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                out[int(e.split(b"=")[1])] = int(d)
    return out


def cmd_kill(a):
    w = a.work
    img, lab = small_set(a, "train", 300, 1)
    ck = f"{w}/killed.st"
    for f in (ck,):
        if os.path.exists(f):
            os.remove(f)
    base = [a.trainer, "--data", f"image={img}", "--data", f"label={lab}", "--batch", "128", "--lr", "0.001"]
    cmd = mpirun(2) + base + ["--epochs", "1000000", "--checkpoint", ck, "--quiet"]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not os.path.exists(ck) and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)  # a few more epochs (and checkpoints) in flight
    ranks = ranks_of(p.pid)
    if p.poll() is not None or 1 not in ranks:
        print(p.communicate()[0])
        print(f"FAIL: the run is not going (exit {p.poll()}, ranks {ranks})")
        return 1
    print(f"ranks {ranks}; kill -9 rank 1 (pid {ranks[1]})", flush=True)
    t0 = time.time()
    os.kill(ranks[1], signal.SIGKILL)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        print(out)
        print("FAIL: mpirun still running 30 s after the kill")
        return 1
    took = time.time() - t0
    print(out, end="")
    ok = True
    print(f"mpirun exited {p.returncode} {took:.1f} s after the kill")
    if p.returncode == 0 or took > 15:
        print("FAIL: expected a non-zero exit within 15 s")
        ok = False
    if "rank 1" not in out:
        print("FAIL: the output does not name rank 1")
        ok = False
    # mpirun may exit while a rank it killed is still on its way out (seen under load): a rank
    # counts as left running only if it is still there 10 s after mpirun's exit.
    def alive(pid):
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    gone_by = time.time() + 10
    while any(alive(pid) for pid in ranks.values()) and time.time() < gone_by:
        time.sleep(0.1)
    for r, pid in ranks.items():
        if alive(pid):
            print(f"FAIL: rank {r} (pid {pid}) still alive 10 s after mpirun exited")
            ok = False
    tensors, meta = load(ck)
    step = int(meta["step"])
    print(f"checkpoint {ck}: {len(tensors)} tensors, step {step}")
    run(base + ["--resume", ck, "--steps", str(step + 3), "--quiet"], "resuming from the checkpoint")
    return 0 if ok else 1


AGENT = """#!/bin/sh
# mpirun's remote launcher (plm_rsh_agent) for the test's two namespaces: "ssh HOST CMD"
host=$1; shift
case "$host" in
  {a_ip}) ns={a} ;;
  {b_ip}) ns={b} ;;
  *) echo "ns-agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" sh -c "$*"
"""


def cmd_hosts(a):
    w = a.work
    ip = shutil.which("ip")
    if not ip or os.geteuid() != 0:
        skip("two network namespaces need root and iproute2 (ip)")
    tag = str(os.getpid() % 100000)
    ns_a, ns_b, veth_a, veth_b = f"cannl_a{tag}", f"cannl_b{tag}", f"cva{tag}", f"cvb{tag}"
    subnet = f"10.{77 + os.getpid() % 100}.0"
    a_ip, b_ip = f"{subnet}.1", f"{subnet}.2"

    def sh(*cmd):
        return subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    r = sh(ip, "netns", "add", ns_a)
    if r.returncode != 0:
        skip(f"cannot create a network namespace here: {r.stdout.strip()}")
    try:
        steps = [(ip, "netns", "add", ns_b), (ip, "link", "add", veth_a, "type", "veth", "peer", "name", veth_b),
                 (ip, "link", "set", veth_a, "netns", ns_a), (ip, "link", "set", veth_b, "netns", ns_b),
                 (ip, "-n", ns_a, "addr", "add", f"{a_ip}/24", "dev", veth_a),
                 (ip, "-n", ns_b, "addr", "add", f"{b_ip}/24", "dev", veth_b),
                 (ip, "-n", ns_a, "link", "set", veth_a, "up"), (ip, "-n", ns_b, "link", "set", veth_b, "up"),
                 (ip, "-n", ns_a, "link", "set", "lo", "up"), (ip, "-n", ns_b, "link", "set", "lo", "up")]
        for cmd in steps:
            r = sh(*cmd)
            if r.returncode != 0:
                skip(f"cannot join two namespaces with a veth pair: {' '.join(cmd)}: {r.stdout.strip()}")
        agent = os.path.join(w, "ns-agent.sh")
        with open(agent, "w") as f:
            f.write(AGENT.format(a_ip=a_ip, b_ip=b_ip, a=ns_a, b=ns_b))
        os.chmod(agent, 0o755)
        base = [a.trainer] + fashion_args(a) + ["--steps", "10", "--batch", "128", "--seed", "3", "--quiet"]
        run(base + ["--checkpoint", f"{w}/alone.st"], "the program alone")
        net = f"{subnet}.0/24"
        run([ip, "netns", "exec", ns_a, MPIRUN, "--host", f"{a_ip}:1,{b_ip}:1", "-np", "2", "--mca", "plm_rsh_agent",
             agent, "--mca", "btl", "tcp,self", "--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include",
             net, "-x", "OMP_NUM_THREADS"] + base + ["--checkpoint", f"{w}/hosts.st"],
            "mpirun over two namespaces")
        return 0 if compare(f"{w}/hosts.st", f"{w}/alone.st", 1e-12, "2 hosts vs alone") else 1
    finally:
        sh(ip, "netns", "del", ns_a)  # the veth pair goes with its ends' namespaces
        sh(ip, "netns", "del", ns_b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["equal", "zero", "memory", "dropout", "bn", "uneven", "resume", "kill",
                                       "usage", "hosts", "periodic"])
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--work", required=True)
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--noisy", action="append", default=[], metavar="NAME=TOL",
                    help="hold NAME (and its optimiser state) to TOL: a tensor whose gradient is zero "
                         "in exact arithmetic, rounding noise that depends on the order of the sums")
    a = ap.parse_args()
    NOISY.extend(a.noisy)
    global MPIRUN
    MPIRUN = shutil.which("mpirun")
    if not MPIRUN:
        skip("mpirun not found (Debian: apt-get install openmpi-bin)")
    a.work = os.path.join(a.work, a.what + "_" + os.path.basename(a.trainer) + ("_stream" if a.stream else ""))
    os.makedirs(a.work, exist_ok=True)
    r = subprocess.run(mpirun(1) + ["true"], env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        skip(f"mpirun cannot start a process here: {r.stdout.strip()[:300]}")
    return {"equal": cmd_equal, "zero": cmd_zero, "memory": cmd_memory, "dropout": cmd_dropout, "bn": cmd_bn, "uneven": cmd_uneven, "resume": cmd_resume, "kill": cmd_kill,
            "usage": cmd_usage, "hosts": cmd_hosts, "periodic": cmd_periodic}[a.what](a)


MPIRUN = None

if __name__ == "__main__":
    sys.exit(main())
