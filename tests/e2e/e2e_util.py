"""Helpers shared by the end-to-end tests (tests/e2e/*.py).

Only the standard library and NumPy: the safetensors format and Fashion-MNIST's IDX files
are read and written here directly. A test that cannot run here (no NumPy, no PyTorch, no
Fashion-MNIST) exits with SKIP (77), which ctest reports as skipped.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

SKIP = 77

FASHION_FILES = {
    "train_image": "train-images-idx3-ubyte.gz",
    "train_label": "train-labels-idx1-ubyte.gz",
    "test_image": "t10k-images-idx3-ubyte.gz",
    "test_label": "t10k-labels-idx1-ubyte.gz",
}


class Failure(Exception):
    """A failed check; main() prints it and exits 1."""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(SKIP)


def need_numpy():
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip("NumPy is not installed")


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("PyTorch is not installed")


def need_fashion(d):
    paths = {k: os.path.join(d, f) for k, f in FASHION_FILES.items()}
    missing = [p for p in paths.values() if not os.path.isfile(p)]
    if missing:
        skip(f"Fashion-MNIST not found: {missing[0]}")
    return paths


def parity_parser(seed, *paths, small=None):
    """The parity scripts' command line: --trainer and --work, each of `paths` ("--spec",
    "--fashion", "--infer": required), --seed (default `seed`) and, where `small` says what it
    runs, --small (sanitiser builds). Returns the parser, for a script's own flags."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    for flag in paths:
        ap.add_argument(flag, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=seed)
    if small:
        ap.add_argument("--small", action="store_true", help=small)
    return ap


def torch_one_thread():
    """Skips (77) without NumPy or PyTorch; else returns torch on one thread, NumPy's BLAS on one
    too: the comparison is about values, the trainers run --threads 1, and CI has two cores."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    need_numpy()
    need_torch()
    import torch
    torch.set_num_threads(1)
    return torch


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def run_main(main):
    """Runs main(), turning a Failure into one FAIL line and exit status 1."""
    t0 = time.monotonic()
    try:
        main()
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
    print(f"PASS ({time.monotonic() - t0:.1f} s)", flush=True)


# --------------------------------------------------------------------------- data files

def read_idx(path):
    """An IDX file (maybe gzip-compressed) as a NumPy array (u8/i8/i16/i32/f32/f64)."""
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, type_code, ndims = struct.unpack(">HBB", data[:4])
    check(zero == 0, f"{path}: not an IDX file")
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    dtype = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[type_code]
    return np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndims).reshape(dims)


def fashion_subset(paths, out_dir, n_train, n_test):
    """Writes the first n_train training and n_test test examples as .npy files (images u8
    [n, 28, 28], labels u8 [n]) and returns {train_image, train_label, test_image, test_label}."""
    import numpy as np
    out = {}
    for key, n in (("train_image", n_train), ("train_label", n_train),
                   ("test_image", n_test), ("test_label", n_test)):
        arr = np.ascontiguousarray(read_idx(paths[key])[:n])
        out[key] = os.path.join(out_dir, f"{key}_{n}.npy")
        np.save(out[key], arr)
    return out


def data_flags(files, names=("image", "label"), test=True):
    flags = [f"--data={names[0]}={files['train_image']}", f"--data={names[1]}={files['train_label']}"]
    if test:
        flags += [f"--test={names[0]}={files['test_image']}", f"--test={names[1]}={files['test_label']}"]
    return flags


# --------------------------------------------------------------------------- safetensors

_ST_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "|u1"}


def read_safetensors(path):
    """(tensors {name: ndarray}, metadata dict, header dict) of a safetensors file."""
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    check(len(blob) >= 8, f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.get("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(blob[base + b:base + e], dtype=_ST_DTYPES[info["dtype"]])
        tensors[name] = arr.reshape(info["shape"])
    return tensors, meta, header


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: ndarray} (float32, float64 or int64) in the order given."""
    import numpy as np
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    chunks, offset = [], 0
    for name, arr in tensors.items():
        shape = list(np.shape(arr))  # (ascontiguousarray makes a 0-d array 1-d)
        arr = np.ascontiguousarray(arr)
        dt = {np.dtype("float32"): ("F32", "<f4"), np.dtype("float64"): ("F64", "<f8"),
              np.dtype("int64"): ("I64", "<i8")}[arr.dtype]
        raw = arr.astype(dt[1]).tobytes()
        header[name] = {"dtype": dt[0], "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for c in chunks:
            f.write(c)


# --------------------------------------------------------------------------- trainers

def run(cmd, expect_rc=0, env=None, timeout=900):
    """Runs a command; checks its exit status; returns (stdout, stderr). OpenMP threads
    sleep when idle (OMP_WAIT_POLICY=PASSIVE): ctest runs two tests at a time on CI's two
    cores, and spinning threads of one would starve the other."""
    if env is None:
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    dt = time.monotonic() - t0
    shown = " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))
    print(f"$ {shown}   [{dt:.1f} s, exit {p.returncode}]", flush=True)
    if expect_rc is not None and p.returncode != expect_rc:
        raise Failure(f"exit status {p.returncode}, expected {expect_rc}, of: {' '.join(cmd)}\n"
                      f"--- stdout (tail)\n{p.stdout[-3000:]}\n--- stderr (tail)\n{p.stderr[-3000:]}")
    return p.stdout, p.stderr


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def log_lines(path):
    """A metrics log's lines without their "elapsed" (the one field two runs of the same training
    do not share)."""
    with open(path) as f:
        return [re.sub(r',"elapsed":[^,}]*', "", line) for line in f]


def step_losses(records):
    """[(step, loss)] of the per-step lines of a metrics log."""
    return [(r["step"], r["loss"]) for r in records if "loss" in r and "step" in r]


def printed_value(stdout, label):
    """The number after `label:` in a trainer's final summary (e.g. 'test accuracy')."""
    m = re.findall(r"^" + re.escape(label) + r":\s*([-+0-9.eE]+|nan|inf)\s*$", stdout, re.M)
    check(m, f"the trainer printed no '{label}:' line; stdout:\n{stdout[-2000:]}")
    return float(m[-1])


def make_moons(n, noise, seed):
    """The "two moons" toy problem (as scikit-learn's make_moons): points float32 [n, 2],
    targets float32 [n] (0 or 1), shuffled."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n0 = n // 2
    n1 = n - n0
    t0 = rng.uniform(0, np.pi, n0)
    t1 = rng.uniform(0, np.pi, n1)
    upper = np.stack([np.cos(t0), np.sin(t0)], axis=1)
    lower = np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], axis=1)
    x = np.concatenate([upper, lower]) + rng.normal(0, noise, (n, 2))
    y = np.concatenate([np.zeros(n0), np.ones(n1)])
    order = rng.permutation(n)
    return x[order].astype(np.float32), y[order].astype(np.float32)


def moons_files(out_dir, n_train, n_test, noise=0.1):
    """Writes a two-moons training and test set as .npy files; returns the paths as
    {train_point, train_target, test_point, test_target}."""
    import numpy as np
    out = {}
    for split, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        x, y = make_moons(n, noise, seed)
        out[f"{split}_point"] = os.path.join(out_dir, f"moons_{split}_point.npy")
        out[f"{split}_target"] = os.path.join(out_dir, f"moons_{split}_target.npy")
        np.save(out[f"{split}_point"], x)
        np.save(out[f"{split}_target"], y)
    return out


def moons_flags(files, test=True):
    flags = [f"--data=point={files['train_point']}", f"--data=target={files['train_target']}"]
    if test:
        flags += [f"--test=point={files['test_point']}", f"--test=target={files['test_target']}"]
    return flags
