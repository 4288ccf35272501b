"""peer_torch.py — the bench models' training step in PyTorch 2, eager or under torch.compile (run it with
the peers' virtual environment's python through bench/peers.sh; bench/peers.py drives it).

Usage: peer_torch.py MODEL BATCH WARMUP STEPS THREADS MODE
MODE: eager, compile (torch.compile's default mode) or max-autotune (mode="max-autotune-no-cudagraphs").

The models are bench/torch_step.py's (fashion_mlp, fashion_mlp_adam, fashion_cnn, cnn_dense256, the zoo's
resnet_bn, mlp_ln_dropout and gru_rows: same layers, PyTorch's default init, optimiser, synthetic batch;
gru_rows is tests/e2e/parity_gru.py's nn.GRU with its hidden-side biases zero and frozen, Adam) and
bench/torch_gpt.py's (gpt_char: the spec's init, random token windows, AdamW with clipping; llama_char:
tests/e2e/parity_llama.py's Llama of torch.nn layers, the spec's init, Muon on the matrices by
tests/muon/check_muon.py's muon_step in float32 (torch.optim.Muon runs its Newton-Schulz steps in bfloat16,
cannl and this in the param's type) and AdamW on the rest, clipping), imported, not rewritten. Under
torch.compile the loss (forward and loss; AOTAutograd compiles the backward with it) and the optimiser step
(gpt_char, llama_char: the gradient clipping with it) are compiled, PyTorch's recipe for a compiled training
step; compilation happens in the warm-up steps (the first, and a recompile when the optimiser's state
appears), whose wall time is reported apart (compile_s: all warm-up steps, compiling or not; 0 in eager mode)
and excluded from the step times. Prints one JSON line like bench/step_bench.c (median, 10th / 90th percentile
in us, CPU time per step) and the kernel libraries this torch was built with.
"""
import json
import os
import re
import sys
import time

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt  # noqa: E402
import torch_step  # noqa: E402

GPT_SHAPES = {"gpt_char": (128, 8), "llama_char": (128, 8)}  # ctx, batch (bench/gpt_bench.py's)
MODES = {"eager": None, "compile": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def kernels(mode):
    """The kernel libraries this torch runs the bench's operations on (from torch.__config__.show())."""
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", cfg)
    dnnl = re.search(r"MKL-DNN (v[\w.]+)", cfg)
    blas = blas.group(1) if blas else "?"
    libs = [f"BLAS {blas}" + (f" {mkl.group(1)}" if mkl and blas == "mkl" else "")]
    if torch.backends.mkldnn.is_available():
        libs.append(f"oneDNN {dnnl.group(1) if dnnl else ''}".strip())
    s = ", ".join(libs) + f", ATen {torch.backends.cpu.get_cpu_capability()}"
    return s if mode == "eager" else "Inductor C++/OpenMP + " + s


def setup(name, batch, g):
    """(loss_fn(*batch) -> loss, next_batch() -> batch args, opt_step(), zero_grad(), inputs) for the model;
    inputs(k): the batch of the k-th next_batch() (from 0) as {name: tensor} of the spec's inputs, and under
    "model" the nn.Module of an image model (for bench/peer_check.py).
    The init is seeded (torch.manual_seed(0)), so that every peer's process starts from the same params."""
    torch.manual_seed(0)
    if name in GPT_SHAPES:
        ctx = GPT_SHAPES[name][0]
        m = torch_gpt.make(name, ctx)
        data = [torch.randint(0, m.vocab, (2, batch, ctx), generator=g) for _ in range(8)]
        params = list(m.net.parameters()) if name in torch_gpt.LLAMAS else list(m.P.values())
        opts = m.opts if name in torch_gpt.LLAMAS else [m.opt]  # llama_char: Muon and AdamW
        count = [0]

        def next_batch():  # the 8 windows of torch_gpt.py step in turn
            count[0] += 1
            return data[count[0] % 8][0], data[count[0] % 8][1]

        def opt_step():
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            for o in opts:
                o.step()

        def zero_grad():
            for o in opts:
                o.zero_grad(set_to_none=True)
        return m.loss, next_batch, opt_step, zero_grad, \
            lambda k: {"tokens": data[(k + 1) % 8][0], "next": data[(k + 1) % 8][1]}
    if name not in torch_step.MODELS:
        raise SystemExit(f"peer_torch.py: no model '{name}'")
    image, label = torch_step.image_batch(name, batch, g)  # torch_step.setup, with the batch at hand
    model = torch_step.make_model(name)
    opt = torch_step.make_optimizer(name, model)
    return lambda: torch_step.soft_ce(model(image), label), lambda: (), opt.step, opt.zero_grad, \
        lambda k: {"image": image, "label": label, "model": model}


def training_step(name, batch, mode):
    """(step() -> loss, inputs): the timed step (zero_grad, loss, backward, optimiser step) in MODE, and setup's
    inputs."""
    loss_fn, next_batch, opt_step, zero_grad, inputs = setup(name, batch, torch.Generator().manual_seed(0))
    if MODES[mode]:
        loss_fn = torch.compile(loss_fn, mode=MODES[mode])
        opt_step = torch.compile(opt_step, mode=MODES[mode])

    def step():
        zero_grad()
        loss = loss_fn(*next_batch())
        loss.backward()
        opt_step()
        return loss
    return step, inputs


def main():
    if len(sys.argv) != 7 or sys.argv[6] not in MODES:
        raise SystemExit(__doc__)
    name, mode = sys.argv[1], sys.argv[6]
    batch, warmup, steps, threads = map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    step = training_step(name, batch, mode)[0]

    warm = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        step()
        warm.append(time.perf_counter() - t0)
    times = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e6)
    cpu_us = (time.process_time() - c0) / steps * 1e6
    times.sort()
    print(json.dumps({"model": name, "batch": batch, "threads": threads, "steps": steps, "mode": mode,
                      "median_us": times[steps // 2], "p10_us": times[steps // 10], "p90_us": times[steps * 9 // 10],
                      "cpu_us": cpu_us, "loss": float(loss.detach()),
                      "compile_s": sum(warm) if MODES[mode] else 0.0,
                      "warmup_s": sum(warm), "torch": torch.__version__, "threads_used": torch.get_num_threads(),
                      "kernels": kernels(mode)}))


if __name__ == "__main__":
    main()
