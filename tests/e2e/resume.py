#!/usr/bin/env python3
"""--resume continues a run exactly, and the thread count does not change the results.

  resume.py --case fashion_mlp|fashion_einsum|moons_mlp --trainer BIN --work DIR
            [--fashion DIR] [--small]

On a small data set (the first examples of Fashion-MNIST written as .npy files, or a
generated two-moons set), with shuffling on (--seed 5) and a test set, at --threads 1:

  A  2 epochs uninterrupted (--metrics, --checkpoint, --log-every 1);
  B  1 epoch with --checkpoint, then --resume from that epoch checkpoint to 2 epochs;
  C  --steps (one epoch and 3 steps: stops mid-epoch), then --resume to 2 epochs.

Checks: B's metrics file equals A's byte for byte but for the elapsed times, C's step-loss lines equal A's byte for
byte (C logs one extra evaluation line when it stops mid-epoch, by design), the final
checkpoints of A, B and C are byte-identical, as are the printed test results. Then the
same uninterrupted run at --threads 2 (A2) must equal A byte for byte (the generated code
is meant not to depend on the thread count), and B at --threads 2 must equal A2.

fashion_mlp_sched_clip (a spec with a schedule and gradient clipping) also checks the
checkpoint's "lr_schedule" metadata ("spec"), and that --lr-schedule constant overrides the
spec's schedule (run D: different losses from A's, metadata "constant").
"""

import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402


def loss_lines(path):
    with open(path) as f:
        return [line for line in f if "loss" in json.loads(line) and "step" in json.loads(line)
                and "test_loss" not in json.loads(line)]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def summary(stdout):
    """The final summary without the timing line."""
    return [line for line in stdout.splitlines() if line.startswith("test ")]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at line {i + 1}:\n    {x.rstrip()}\n    {y.rstrip()}"
    return f"lengths {len(a)} and {len(b)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True,
                    choices=("fashion_mlp", "fashion_einsum", "moons_mlp", "fashion_mlp_sched_clip"))
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fashion")
    ap.add_argument("--small", action="store_true", help="less data (sanitiser builds)")
    opt = ap.parse_args()
    u.need_numpy()
    work = u.fresh_dir(opt.work)

    if opt.case == "moons_mlp":
        n_train, n_test, batch = (256, 64, 32) if opt.small else (1000, 500, 64)
        data = u.moons_flags(u.moons_files(work, n_train, n_test))
    else:
        paths = u.need_fashion(opt.fashion)
        n_train, n_test, batch = (256, 64, 32) if opt.small else (2000, 1000, 128)
        data = u.data_flags(u.fashion_subset(paths, work, n_train, n_test))
    spe = -(-n_train // batch)  # steps per epoch; the last batch of an epoch is smaller
    print(f"{opt.case}: {n_train} examples, batch {batch}, {spe} steps per epoch")
    common = [opt.trainer] + data + ["--batch", str(batch), "--log-every", "1", "--quiet"]

    def files(tag):
        return os.path.join(work, f"{tag}.jsonl"), os.path.join(work, f"{tag}.safetensors")

    def uninterrupted(tag, threads):
        m, c = files(tag)
        out, _ = u.run(common + ["--threads", str(threads), "--seed", "5", "--epochs", "2",
                                 "--metrics", m, "--checkpoint", c])
        return out

    def interrupted(tag, threads, stop):
        m, c = files(tag)
        u.run(common + ["--threads", str(threads), "--seed", "5", *stop, "--metrics", m, "--checkpoint", c])
        _, meta, _ = u.read_safetensors(c)
        print(f"  {tag}: stopped at step {meta.get('step')}, epoch {meta.get('epoch')}")
        out, _ = u.run(common + ["--threads", str(threads), "--resume", c, "--epochs", "2",
                                 "--metrics", m, "--checkpoint", c])
        return out

    failures = []

    def same(what, x, y):
        if x != y:
            detail = first_difference(x, y) if isinstance(x, list) else "contents differ"
            failures.append(f"{what}: {detail}")
            print(f"  DIFFERENT: {what}")
        else:
            print(f"  same: {what}")

    out_a = uninterrupted("A", 1)
    out_b = interrupted("B", 1, ["--epochs", "1"])
    out_c = interrupted("C", 1, ["--steps", str(spe + 3)])
    ma, ca = files("A")
    mb, cb = files("B")
    mc, cc = files("C")
    la = loss_lines(ma)
    u.check(len(la) == 2 * spe, f"A logged {len(la)} step losses, expected {2 * spe}")
    _, meta_a, _ = u.read_safetensors(ca)
    u.check(meta_a.get("step") == str(2 * spe) and meta_a.get("epoch") == "2",
            f"A's final checkpoint metadata {meta_a}")
    same("metrics A vs B (1 epoch + resume), whole file but elapsed", u.log_lines(ma), u.log_lines(mb))
    same("step losses A vs C (mid-epoch stop + resume)", la, loss_lines(mc))
    same("final checkpoint A vs B", read_bytes(ca), read_bytes(cb))
    same("final checkpoint A vs C", read_bytes(ca), read_bytes(cc))
    same("printed test results A vs B", summary(out_a), summary(out_b))
    same("printed test results A vs C", summary(out_a), summary(out_c))

    out_a2 = uninterrupted("A2", 2)
    out_b2 = interrupted("B2", 2, ["--epochs", "1"])
    ma2, ca2 = files("A2")
    mb2, cb2 = files("B2")
    same("metrics --threads 2 vs --threads 1", u.log_lines(ma), u.log_lines(ma2))
    same("final checkpoint --threads 2 vs --threads 1", read_bytes(ca), read_bytes(ca2))
    same("printed test results --threads 2 vs --threads 1", summary(out_a), summary(out_a2))
    same("metrics at --threads 2: A2 vs B2 (resume)", u.log_lines(ma2), u.log_lines(mb2))
    same("final checkpoint at --threads 2: A2 vs B2 (resume)", read_bytes(ca2), read_bytes(cb2))
    if read_bytes(ca) != read_bytes(ca2):
        t1, _, _ = u.read_safetensors(ca)
        t2, _, _ = u.read_safetensors(ca2)
        import numpy as np
        for k in t1:
            if k in t2 and t1[k].tobytes() != t2[k].tobytes():
                d = np.max(np.abs(t1[k].astype(np.float64) - t2[k]))
                print(f"  threads 1 vs 2: {k} differs, max |diff| {d:.3g}")
    if opt.case == "fashion_mlp_sched_clip":
        u.check(meta_a.get("lr_schedule") == "spec", f"A's lr_schedule metadata {meta_a.get('lr_schedule')!r}, expected 'spec'")
        md, cd = files("D")
        u.run(common + ["--threads", "1", "--seed", "5", "--epochs", "2", "--lr-schedule", "constant",
                        "--metrics", md, "--checkpoint", cd])
        _, meta_d, _ = u.read_safetensors(cd)
        u.check(meta_d.get("lr_schedule") == "constant", f"D's lr_schedule metadata {meta_d.get('lr_schedule')!r}")
        ld = loss_lines(md)
        u.check(ld[0] == la[0] and ld[1] != la[1],
                "--lr-schedule constant: the first loss must equal A's and the second differ (the spec's warm-up "
                f"lr is lr/3 on step 1): {ld[:2]} vs {la[:2]}")
        print("  --lr-schedule constant overrides the spec's schedule")
    print("\n".join(summary(out_a)))
    if failures:
        raise u.Failure("\n  ".join(["resume / thread-count determinism:"] + failures))


if __name__ == "__main__":
    u.run_main(main)
