#!/usr/bin/env python3
"""Error handling of real generated trainers (fashion_mlp, moons_mlp).

  errors.py --fashion-trainer BIN --moons-trainer BIN --fashion DIR --work DIR

Every case must end with exactly one line on stderr, `<program>: error: ...` (naming the
file or flag at fault where there is one), the documented exit status (1 bad data, file or
checkpoint; 2 bad usage), and no checkpoint: every case is given --checkpoint PATH, and
afterwards PATH must not exist and no temporary file (PATH.tmp.*) may be left in its
folder. One case checks that an existing checkpoint survives a failed run untouched.
"""

import argparse
import gzip
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fashion-trainer", required=True)
    ap.add_argument("--moons-trainer", required=True)
    ap.add_argument("--fashion", required=True)
    ap.add_argument("--work", required=True)
    opt = ap.parse_args()
    u.need_numpy()
    paths = u.need_fashion(opt.fashion)
    import numpy as np
    work = u.fresh_dir(opt.work)
    ckdir = os.path.join(work, "ck")
    os.makedirs(ckdir)

    def path(name):
        return os.path.join(work, name)

    # Valid small data, and broken variants of it.
    good = u.fashion_subset(paths, work, 64, 32)
    images = np.load(good["train_image"])
    labels = np.load(good["train_label"])
    np.save(path("image_783.npy"), images.reshape(64, 784)[:, :783])
    np.save(path("label_63.npy"), labels[:63])
    bad_label = labels.copy()
    bad_label[17] = 10
    np.save(path("label_10.npy"), bad_label)
    with open(paths["test_image"], "rb") as f:
        gz = f.read()
    with open(path("truncated-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gz[:len(gz) // 3])
    with open(path("garbage-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gz[:10] + bytes(range(256)) * 64)
    with open(path("not-idx-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(b"this is not an IDX file\n" * 100))

    fashion = os.path.basename(opt.fashion_trainer)
    # A moons checkpoint, a fashion checkpoint and a truncated copy of it.
    moons = u.moons_files(work, 64, 16)
    moons_ck = path("moons.safetensors")
    u.run([opt.moons_trainer] + u.moons_flags(moons, test=False) + ["--steps", "3", "--quiet", "--checkpoint", moons_ck])
    fashion_ck = path("fashion.safetensors")
    u.run([opt.fashion_trainer] + u.data_flags(good, test=False) +
          ["--steps", "2", "--batch", "32", "--quiet", "--checkpoint", fashion_ck])
    with open(fashion_ck, "rb") as f:
        fashion_ck_bytes = f.read()
    with open(path("fashion-truncated.safetensors"), "wb") as f:
        f.write(fashion_ck_bytes[:len(fashion_ck_bytes) // 2])

    img, lab = f"--data=image={good['train_image']}", f"--data=label={good['train_label']}"
    cases = [
        # (name, exit status, flags, text the line must contain)
        ("missing training file", 1, [f"--data=image={path('nope.npy')}", lab], path("nope.npy")),
        ("missing test file", 1, [img, lab, f"--test=image={path('nope-test.npy')}",
                                  f"--test=label={good['test_label']}"], path("nope-test.npy")),
        ("truncated gz", 1, [f"--data=image={path('truncated-images-idx3-ubyte.gz')}", lab],
         "truncated-images-idx3-ubyte.gz"),
        ("corrupt gz stream", 1, [f"--data=image={path('garbage-images-idx3-ubyte.gz')}", lab],
         "garbage-images-idx3-ubyte.gz"),
        ("gz of something else", 1, [f"--data=image={path('not-idx-images-idx3-ubyte.gz')}", lab],
         "not-idx-images-idx3-ubyte.gz"),
        ("783 values per example for image [784]", 1, [f"--data=image={path('image_783.npy')}", lab],
         "image_783.npy"),
        ("unequal example counts", 1, [img, f"--data=label={path('label_63.npy')}"], "label_63.npy"),
        ("label 10 for a [10] one-hot input", 1, [img, f"--data=label={path('label_10.npy')}"], "label_10.npy"),
        ("class indices for image, which forward reads", 1, [f"--data=image={good['train_label']}", lab],
         os.path.basename(good["train_label"])),
        ("moons_mlp's checkpoint to --resume", 1, [img, lab, "--resume", moons_ck], "moons.safetensors"),
        ("moons_mlp's checkpoint to --init", 1, [img, lab, "--init", moons_ck], "moons.safetensors"),
        ("truncated checkpoint to --resume", 1, [img, lab, "--resume", path("fashion-truncated.safetensors")],
         "fashion-truncated.safetensors"),
        ("--resume with another --batch", 2, [img, lab, "--resume", fashion_ck, "--batch", "16", "--epochs", "2"],
         "--batch"),
        ("unknown flag", 2, [img, lab, "--bogus"], "--bogus"),
        ("--epochs not a number", 2, [img, lab, "--epochs", "abc"], "--epochs"),
        ("--batch above the model's maximum", 2, [img, lab, "--batch", "100000"], "--batch"),
        ("--batch 0", 2, [img, lab, "--batch", "0"], "--batch"),
        ("--init with --resume", 2, [img, lab, "--init", fashion_ck, "--resume", fashion_ck], "--init"),
        ("--data without NAME=", 2, [f"--data={good['train_image']}", lab], "--data"),
        ("--data for an unknown input", 2, [img, lab, f"--data=pixels={good['train_image']}"], "pixels"),
        ("no data for an input", 2, [img], "label"),
    ]
    failures = []
    for i, (name, rc, flags, needle) in enumerate(cases):
        ck = os.path.join(ckdir, f"case{i}.safetensors")
        try:
            _, err = u.run([opt.fashion_trainer] + flags + ["--quiet", "--checkpoint", ck], expect_rc=rc)
        except u.Failure as e:
            failures.append(f"{name}: {e}")
            continue
        lines = [line for line in err.splitlines() if line.strip()]
        print(f"  {name}: {err.strip()}")
        if len(lines) != 1:
            failures.append(f"{name}: {len(lines)} lines on stderr, expected 1:\n{err}")
        elif not lines[0].startswith(f"{fashion}: error: "):
            failures.append(f"{name}: the line does not start with '{fashion}: error: ': {lines[0]}")
        elif needle not in lines[0]:
            failures.append(f"{name}: the line does not name {needle!r}: {lines[0]}")
        left = sorted(os.listdir(ckdir))
        if left:
            failures.append(f"{name}: files left in the checkpoint folder: {left}")
            for f in left:
                os.remove(os.path.join(ckdir, f))

    # A failed run leaves an existing checkpoint as it was.
    keep = os.path.join(ckdir, "keep.safetensors")
    with open(keep, "wb") as f:
        f.write(fashion_ck_bytes)
    try:
        u.run([opt.fashion_trainer, f"--data=image={path('image_783.npy')}", lab, "--quiet", "--checkpoint", keep],
              expect_rc=1)
        with open(keep, "rb") as f:
            if f.read() != fashion_ck_bytes:
                failures.append("a failed run changed the existing checkpoint given to --checkpoint")
        if sorted(os.listdir(ckdir)) != ["keep.safetensors"]:
            failures.append(f"files left in the checkpoint folder: {sorted(os.listdir(ckdir))}")
    except u.Failure as e:
        failures.append(f"existing checkpoint and bad data: {e}")

    # CANNL_ISA that names no instruction set (it may only lower the CPU's: cannl_rt.h).
    ck = os.path.join(ckdir, "isa.safetensors")
    try:
        _, err = u.run([opt.fashion_trainer, img, lab, "--steps", "2", "--quiet", "--checkpoint", ck], expect_rc=2,
                       env=dict(os.environ, CANNL_ISA="avx3", OMP_WAIT_POLICY="PASSIVE"))
        print(f"  CANNL_ISA=avx3: {err.strip()}")
        if err.strip() != f"{fashion}: error: CANNL_ISA=avx3: expected amx, avx512, avx2 or sse2" or os.path.exists(ck):
            failures.append(f"CANNL_ISA=avx3: {err!r}")
    except u.Failure as e:
        failures.append(f"CANNL_ISA=avx3: {e}")

    # A file-size limit (ulimit -f, a full disk's cousin) while the checkpoint is written: one
    # error line, exit 1, no temporary file left — not a kill by SIGXFSZ.
    import resource
    import subprocess
    ck = os.path.join(ckdir, "limited.safetensors")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    r = subprocess.run([opt.fashion_trainer, img, lab, "--steps", "2", "--batch", "32", "--quiet",
                        "--checkpoint", ck], capture_output=True, text=True, preexec_fn=limit, timeout=600)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    print(f"  file-size limit: rc {r.returncode}: {r.stderr.strip()}")
    if r.returncode != 1 or len(lines) != 1 or "limited.safetensors" not in lines[0]:
        failures.append(f"file-size limit: exit {r.returncode}, stderr {r.stderr!r}")
    if os.listdir(ckdir) != ["keep.safetensors"]:
        failures.append(f"file-size limit: files left in the checkpoint folder: {sorted(os.listdir(ckdir))}")

    print(f"{len(cases) + 3} cases, {len(failures)} failed")
    if failures:
        raise u.Failure("\n  ".join(["error handling:"] + failures))


if __name__ == "__main__":
    u.run_main(main)
