#!/usr/bin/env python3
"""fashion_cnn training-step time: cannl's generated trainer against PyTorch 1.13, one run.

  bench/fashion_cnn_step.py --trainer build/release/fashion_cnn_train [--threads 1]
                            [--batch 64] [--reps 7] [--fashion /usr/share/datasets/fashion-mnist]

The same network on both sides (specs/fashion_cnn.cannl: conv 5x5x32 pad 2 -> relu ->
max-pool 2 -> conv 5x5x64 pad 2 -> relu -> max-pool 2 -> dense 1024 -> relu -> dense 10,
mean cross-entropy, Adam 1e-3), the same batch size and thread count
(OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = --threads, OMP_WAIT_POLICY=PASSIVE at 2 threads, as
/work/shared/benchmarking.md recommends). The two programs alternate (A B A B ...), each a
fresh process, --reps times:

  cannl    per-step time = (T(40 steps) - T(10 steps)) / 30, T the trainer's own
           "trained to step N in X s" (so data loading and start-up cancel out);
  PyTorch  per-step time = median of 30 timed steps after 5 warm-up steps, in a subprocess
           (NCHW, torch's own conv kernels), on real Fashion-MNIST batches.

Prints every pair, the medians, the spread and the median of the pair-by-pair ratios
(cannl / PyTorch: above 1 means cannl is slower).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

TORCH_CHILD = r"""
import sys, time, gzip, numpy as np, torch, torch.nn.functional as F
batch, threads, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
with gzip.open(path) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
g = torch.Generator().manual_seed(0)
conv1, conv2 = torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.Conv2d(32, 64, 5, padding=2)
fc1, fc2 = torch.nn.Linear(7 * 7 * 64, 1024), torch.nn.Linear(1024, 10)
params = [p for m in (conv1, conv2, fc1, fc2) for p in m.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
times = []
for s in range(35):
    xb = torch.tensor(x[s * batch:(s + 1) * batch], dtype=torch.float32) / 255
    yb = torch.randint(0, 10, (batch,), generator=g)
    t0 = time.perf_counter()
    h = F.max_pool2d(F.relu(conv1(xb)), 2)
    h = F.max_pool2d(F.relu(conv2(h)), 2)
    loss = F.cross_entropy(fc2(F.relu(fc1(h.flatten(1)))), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if s >= 5:
        times.append(time.perf_counter() - t0)
print(sorted(times)[len(times) // 2])
"""


def env_for(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def cannl_time(opt, steps):
    d = opt.fashion
    out = subprocess.run([opt.trainer, f"--data=image={d}/train-images-idx3-ubyte.gz",
                          f"--data=label={d}/train-labels-idx1-ubyte.gz", "--steps", str(steps),
                          "--batch", str(opt.batch), "--threads", str(opt.threads), "--quiet", "--log-every", "0"],
                         env=env_for(opt.threads), capture_output=True, text=True, check=True)
    m = re.search(r"trained to step (\d+) in ([\d.]+) s", out.stdout + out.stderr)
    if not m:
        sys.exit(f"no 'trained to step N in X s' line in the trainer's output:\n{out.stdout}{out.stderr}")
    return float(m.group(2))


def torch_time(opt):
    out = subprocess.run(["/usr/bin/python3", "-c", TORCH_CHILD, str(opt.batch), str(opt.threads),
                          f"{opt.fashion}/train-images-idx3-ubyte.gz"],
                         env=env_for(opt.threads), capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    opt = ap.parse_args()
    print(f"fashion_cnn training step, batch {opt.batch}, {opt.threads} thread(s), {opt.reps} alternating pairs")
    cs, ts, ratios = [], [], []
    for i in range(opt.reps):
        c = (cannl_time(opt, 40) - cannl_time(opt, 10)) / 30
        t = torch_time(opt)
        cs.append(c)
        ts.append(t)
        ratios.append(c / t)
        print(f"  pair {i + 1}: cannl {c * 1e3:7.1f} ms   PyTorch {t * 1e3:7.1f} ms   ratio {c / t:5.2f}", flush=True)
    med = statistics.median
    print(f"cannl   median {med(cs) * 1e3:.1f} ms/step (min {min(cs) * 1e3:.1f}, max {max(cs) * 1e3:.1f})")
    print(f"PyTorch median {med(ts) * 1e3:.1f} ms/step (min {min(ts) * 1e3:.1f}, max {max(ts) * 1e3:.1f})")
    print(f"ratio cannl / PyTorch: median of pairs {med(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
