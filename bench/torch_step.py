#!/usr/bin/python3
"""torch_step.py — times one training step of an example spec's model in PyTorch.

Usage: torch_step.py MODEL BATCH WARMUP STEPS THREADS
The models are the specs' models written by hand in PyTorch (float32, CPU), with the same
optimiser and synthetic data of the same kind as bench/step_bench.c. Runs WARMUP steps
untimed, then times each of STEPS steps (zero_grad, forward, loss, backward, optimiser
step) and prints one JSON line like step_bench: median, 10th and 90th percentile in us, and the
process's CPU time per step (mean).
Thread counts: torch.set_num_threads(THREADS); run.sh also sets OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS (Debian's torch does its matrix products on OpenBLAS's own threads).
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):  # fashion_mlp, fashion_mlp_adam: 784-512-512-10, relu
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, image):
        x = image / 255
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


class Moons(nn.Module):  # moons_mlp: 2-16-16-1, tanh, sigmoid
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(2, 16), nn.Linear(16, 16), nn.Linear(16, 1)

    def forward(self, point):
        return torch.sigmoid(self.l3(torch.tanh(self.l2(torch.tanh(self.l1(point))))))


class CNN(nn.Module):  # fashion_cnn: conv5x5(32)-pool-conv5x5(64)-pool-1024-10; cnn_dense256: -256-10
    def __init__(self, hidden=1024):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 32, 5, padding=2), nn.Conv2d(32, 64, 5, padding=2)
        self.l3, self.l4 = nn.Linear(7 * 7 * 64, hidden), nn.Linear(hidden, 10)

    def forward(self, image):
        x = image / 255
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.l4(F.relu(self.l3(x.flatten(1))))


class ResNet(nn.Module):  # bench/specs/resnet_bn.cannl: stem, a basic block, two downsampling blocks, GAP
    def __init__(self):
        super().__init__()

        def conv_bn(i, o, k=3, stride=1):
            return nn.Sequential(nn.Conv2d(i, o, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(o))
        self.stem = conv_bn(1, 16)
        self.a1, self.b1 = conv_bn(16, 16), conv_bn(16, 16)
        self.a2, self.b2, self.s2 = conv_bn(16, 32, stride=2), conv_bn(32, 32), conv_bn(16, 32, 1, 2)
        self.a3, self.b3, self.s3 = conv_bn(32, 64, stride=2), conv_bn(64, 64), conv_bn(32, 64, 1, 2)
        self.fc = nn.Linear(64, 10)

    def forward(self, image):
        h = F.relu(self.stem(image / 255))
        h = F.relu(self.b1(F.relu(self.a1(h))) + h)
        h = F.relu(self.b2(F.relu(self.a2(h))) + self.s2(h))
        h = F.relu(self.b3(F.relu(self.a3(h))) + self.s3(h))
        return self.fc(h.mean((2, 3)))


class MLPLN(nn.Module):  # bench/specs/mlp_ln_dropout.cannl: 784-512-256-10, layer norm, gelu, dropout 0.1
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 256), nn.Linear(256, 10)
        self.n1, self.n2 = nn.LayerNorm(512), nn.LayerNorm(256)

    def forward(self, image):
        h = F.dropout(F.gelu(self.n1(self.l1(image / 255))), 0.1, self.training)
        h = F.dropout(F.gelu(self.n2(self.l2(h))), 0.1, self.training)
        return self.l3(h)


class GRURows(nn.Module):  # specs/gru_rows.cannl: a GRU of 64 units reads the 28 rows of the raw image, 64-10
    """tests/e2e/parity_gru.py's model: nn.GRU has two biases per gate where the spec has one, so its
    hidden-side biases are zero and frozen (n = tanh(W_in x + b_in + r * (W_hn h)), the spec's)."""
    def __init__(self):
        super().__init__()
        self.gru, self.out = nn.GRU(28, 64, batch_first=True), nn.Linear(64, 10)
        with torch.no_grad():
            self.gru.bias_hh_l0.zero_()
        self.gru.bias_hh_l0.requires_grad_(False)

    def forward(self, image):  # [batch, 28, 28] pixels 0..255, as the spec reads them
        return self.out(self.gru(image)[1][0])


# The models of fashion_mlp.cannl, fashion_mlp_adam.cannl, fashion_cnn.cannl and
# bench/specs/cnn_dense256.cannl (the image classifiers; bench/torch_train.py uses them too), and the
# model zoo's image classifiers (bench/specs/resnet_bn.cannl, mlp_ln_dropout.cannl, specs/gru_rows.cannl;
# bench/peers.sh).
MODELS = ("fashion_mlp", "fashion_mlp_adam", "fashion_cnn", "cnn_dense256", "resnet_bn", "mlp_ln_dropout", "gru_rows")
CONV_MODELS = ("fashion_cnn", "cnn_dense256", "resnet_bn")  # images as [batch, 1, 28, 28]
ROW_MODELS = ("gru_rows",)  # images as [batch, 28, 28]: a sequence of rows


def make_model(name):
    return {"fashion_cnn": lambda: CNN(), "cnn_dense256": lambda: CNN(256), "resnet_bn": ResNet,
            "mlp_ln_dropout": MLPLN, "gru_rows": GRURows}.get(name, MLP)()


def make_optimizer(name, model):
    if name == "fashion_mlp":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if name == "resnet_bn":
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    if name == "mlp_ln_dropout":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)


def soft_ce(logits, label):  # mean(cross_entropy(logits, one-hot label))
    return -(label * F.log_softmax(logits, dim=1)).sum(1).mean()


def image_batch(name, batch, g):
    """The synthetic batch of an image classifier: pixels 0..255 and one-hot labels (bench/peer_jax.py too)."""
    shape = (batch, 1, 28, 28) if name in CONV_MODELS else (batch, 28, 28) if name in ROW_MODELS else (batch, 784)
    image = torch.rand(shape, generator=g) * 255
    return image, F.one_hot(torch.randint(0, 10, (batch,), generator=g), 10).float()


def setup(name, batch, g):
    if name in MODELS:
        image, label = image_batch(name, batch, g)
        model = make_model(name)
        return model, make_optimizer(name, model), lambda: soft_ce(model(image), label)
    if name == "moons_mlp":
        point = torch.rand((batch, 2), generator=g) * 2 - 1
        target = (torch.rand((batch, 1), generator=g) < 0.5).float()
        model = Moons()
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        return model, opt, lambda: ((model(point) - target) ** 2).mean()
    raise SystemExit(f"torch_step.py: no PyTorch model for '{name}'")


def openblas_core():
    """The kernel family of the OpenBLAS torch runs its products on (OPENBLAS_CORETYPE lowers it)."""
    import ctypes
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "openblas" in path and ".so" in path:
            f = ctypes.CDLL(path).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
    return "?"


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    name, batch, warmup, steps, threads = sys.argv[1], *map(int, sys.argv[2:])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    model, opt, loss_fn = setup(name, batch, g)

    def step():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    times = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e6)
    cpu_us = (time.process_time() - c0) / steps * 1e6
    times.sort()
    print(json.dumps({"model": name, "batch": batch, "threads": threads, "steps": steps,
                      "median_us": times[steps // 2], "p10_us": times[steps // 10],
                      "p90_us": times[steps * 9 // 10], "cpu_us": cpu_us, "loss": float(loss),
                      "openblas": openblas_core()}))


if __name__ == "__main__":
    main()
