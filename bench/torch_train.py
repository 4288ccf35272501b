#!/usr/bin/python3
"""torch_train.py — PyTorch's counterpart of a generated training program's steady-state step.

Usage: torch_train.py MODEL BATCH STEPS1 STEPS2 THREADS FASHION_DIR
Trains MODEL (bench/torch_step.py's models: fashion_mlp, fashion_mlp_adam, fashion_cnn,
cnn_dense256) on Fashion-MNIST the way `<model>_train --data ... --batch BATCH` does: the
training set loaded once as float32 (not timed, like the trainer's data loading), each epoch
in a fresh random order, and every step gathers its batch (images and one-hot labels) by
index, runs zero_grad, forward, loss, backward and the optimiser step, and reads the loss.
Prints one JSON line with the time per step between step STEPS1 and step STEPS2 (and the
process's CPU time per step over the same steps), the same
quantity bench.py takes from two runs of the generated trainer of those lengths (the data
path included, start-up and warm-up excluded).
"""
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_step  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def main():
    if len(sys.argv) != 7:
        raise SystemExit(__doc__)
    name, (batch, s1, s2, threads), fashion = sys.argv[1], map(int, sys.argv[2:6]), sys.argv[6]
    if name not in torch_step.MODELS or not 0 < s1 < s2:
        raise SystemExit(__doc__)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    images = torch.from_numpy(read_idx(os.path.join(fashion, "train-images-idx3-ubyte.gz")).astype(np.float32))
    images = images.reshape(-1, 1, 28, 28) if name in torch_step.CONV_MODELS else images.reshape(-1, 784)
    labels = F.one_hot(torch.from_numpy(read_idx(os.path.join(fashion, "train-labels-idx1-ubyte.gz")).astype(np.int64)),
                       10).float()
    model = torch_step.make_model(name)
    opt = torch_step.make_optimizer(name, model)
    n = images.shape[0]
    per_epoch = (n + batch - 1) // batch
    loss_sum, t1 = 0.0, None
    for step in range(s2):
        if step % per_epoch == 0:
            order = torch.randperm(n)
        if step == s1:
            t1, c1 = time.perf_counter(), time.process_time()
        idx = order[(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        x, y = images[idx], labels[idx]
        opt.zero_grad()
        loss = torch_step.soft_ce(model(x), y)
        loss.backward()
        opt.step()
        loss_sum += loss.item() * len(idx)
    t2, c2 = time.perf_counter(), time.process_time()
    print(json.dumps({"model": name, "batch": batch, "threads": threads, "steps": [s1, s2],
                      "step_us": (t2 - t1) / (s2 - s1) * 1e6, "cpu_us": (c2 - c1) / (s2 - s1) * 1e6,
                      "mean_loss": loss_sum / (s2 * batch),
                      "openblas": torch_step.openblas_core()}))


if __name__ == "__main__":
    main()
