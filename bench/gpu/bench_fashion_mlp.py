#!/usr/bin/env python3
"""GPU benchmark: one training step of fashion_mlp (784-512-512-10, ReLU, mean cross-entropy,
SGD lr 0.1 momentum 0.9, float32, batch 128) by the generated CUDA program and by PyTorch
eager, on the same GPU, in one run; prints both step times and their ratio.

  bench/gpu/bench_fashion_mlp.py --trainer build/release/fashion_mlp_cuda_train
                                 [--fashion DIR] [--batch 128] [--runs 5] [--steps 200 1000]

The CUDA program's step time is its steady state: the difference of the wall times of two
runs of different lengths (--steps S1 and S2, same data, no test set) divided by S2 - S1, so
start-up, data loading and cuBLAS initialisation cancel out. Each step of it copies the next
batch from the host (prefetched on its copy stream) and reads the loss back.
PyTorch eager runs the same model in float32 (TF32 off, as cuBLAS runs our products in plain
float32) with the training set already on the GPU, reading the loss back every step
(loss.item(), as the CUDA program does), timed over S2 - S1 steps after 50 warm-up steps.
Runs are interleaved (CUDA, torch, CUDA, torch, ...) and medians reported.

PyTorch must be a CUDA build: Debian's python3-torch is CPU-only, and then only the CUDA
program is timed and the script says so (exit status 3).
"""
import argparse
import gzip
import os
import statistics
import struct
import subprocess
import sys
import time

FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return data[4 + 4 * ndim:], dims


def time_cuda_program(trainer, fashion, batch, steps):
    img, lab = (os.path.join(fashion, f) for f in FILES)
    cmd = [trainer, f"--data=image={img}", f"--data=label={lab}", "--steps", str(steps), "--batch", str(batch),
           "--quiet", "--log-every", "0"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return dt


def torch_with_cuda():
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        why = "CPU-only build" if torch.version.cuda is None else "no CUDA device visible to it"
        return None, f"PyTorch {torch.__version__} has no CUDA ({why}; Debian's python3-torch is CPU-only)"
    return torch, None


def time_torch(torch, fashion, batch, warmup, steps, seed=0):
    import numpy as np
    img, dims = read_idx(os.path.join(fashion, FILES[0]))
    lab, _ = read_idx(os.path.join(fashion, FILES[1]))
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x_all = torch.tensor(np.frombuffer(img, dtype=np.uint8).reshape(dims[0], 784).astype(np.float32), device=dev)
    y_all = torch.tensor(np.frombuffer(lab, dtype=np.uint8).astype(np.int64), device=dev)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    perm = torch.randperm(dims[0], device=dev)
    nb = dims[0] // batch

    def step(i):
        idx = perm[(i % nb) * batch:(i % nb + 1) * batch]
        logits = model(x_all[idx] / 255)
        loss = torch.nn.functional.cross_entropy(logits, y_all[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainer", required=True, help="fashion_mlp_cuda_train (a Release build)")
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, nargs=2, default=(200, 1000), metavar=("S1", "S2"))
    opt = ap.parse_args()
    s1, s2 = opt.steps
    if not (0 < s1 < s2):
        sys.exit("error: --steps S1 S2 needs 0 < S1 < S2")
    for f in FILES:
        if not os.path.isfile(os.path.join(opt.fashion, f)):
            sys.exit(f"error: Fashion-MNIST not found: {os.path.join(opt.fashion, f)}")
    torch, why = torch_with_cuda()
    if torch is not None:
        print(f"GPU: {torch.cuda.get_device_name(0)}; PyTorch {torch.__version__} (CUDA {torch.version.cuda})")
    else:
        print(f"NOTE: {why}: only the CUDA program is timed")
    cuda_ms, torch_ms = [], []
    for r in range(opt.runs):
        short = time_cuda_program(opt.trainer, opt.fashion, opt.batch, s1)
        long_ = time_cuda_program(opt.trainer, opt.fashion, opt.batch, s2)
        cuda_ms.append(1e3 * (long_ - short) / (s2 - s1))
        line = f"run {r + 1}: cannl CUDA {cuda_ms[-1]:.3f} ms/step"
        if torch is not None:
            torch_ms.append(1e3 * time_torch(torch, opt.fashion, opt.batch, 50, s2 - s1, seed=r))
            line += f", PyTorch eager {torch_ms[-1]:.3f} ms/step, ratio {torch_ms[-1] / cuda_ms[-1]:.2f}"
        print(line, flush=True)
    c = statistics.median(cuda_ms)
    print(f"\nfashion_mlp, batch {opt.batch}, float32, steady state over {s2 - s1} steps, median of {opt.runs}:")
    print(f"  cannl CUDA program  {c:.3f} ms/step  (spread {min(cuda_ms):.3f}..{max(cuda_ms):.3f})")
    if torch is None:
        print(f"  PyTorch eager       not measured: {why}")
        return 3
    t = statistics.median(torch_ms)
    ratios = [a / b for a, b in zip(torch_ms, cuda_ms)]
    print(f"  PyTorch eager       {t:.3f} ms/step  (spread {min(torch_ms):.3f}..{max(torch_ms):.3f})")
    print(f"  PyTorch / cannl     {statistics.median(ratios):.2f}x (median of per-run ratios; > 1: cannl faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
