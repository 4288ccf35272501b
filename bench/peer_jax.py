"""peer_jax.py — the bench models' training step in JAX + optax under jax.jit (run it with the peers'
virtual environment's python through bench/peers.sh; bench/peers.py drives it).

Usage: peer_jax.py MODEL BATCH WARMUP STEPS THREADS

The whole step (forward, loss, jax.value_and_grad, the optax update) is one jitted program with the params
and the optimiser state donated (donate_argnums), compiled ahead of the timing (lower().compile(); its
time is reported apart as compile_s, and the warm-up steps after it are untimed too). Every timed step
waits for its outputs (jax.block_until_ready on params, state and loss).

Same models as the PyTorch peers: the forward passes are written here once, functionally, and the params
are the PyTorch peers' own initial params (bench/torch_step.py's modules with PyTorch's default init;
bench/torch_gpt.py's random_init for gpt_char), converted to arrays; the data is torch_step.image_batch's
synthetic batch (gpt_char: 8 random token windows in turn, as torch_gpt.py); the optimisers are the same
(SGD with momentum 0.9, Adam, AdamW with weight decay on the weights and clipping at global norm 1).

Threads: XLA's CPU threads are set from outside (bench/peers.py: XLA_FLAGS for one thread, taskset for
more); THREADS is only recorded. Prints one JSON line like bench/step_bench.c, and the kernel family the
compiled program calls (read from its optimised HLO: YNNPACK or XNNPACK fusions, oneDNN custom calls, or
else XLA's own dot / convolution ops, which XLA:CPU runs on Eigen).
"""
import collections
import json
import os
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402  (only for the PyTorch peers' init and data)
import torch_gpt  # noqa: E402
import torch_step  # noqa: E402

GPT_SHAPES = {"gpt_char": (128, 8)}  # ctx, batch (bench/gpt_bench.py's)


def soft_ce(logits, label):  # torch_step.soft_ce
    return -(label * jax.nn.log_softmax(logits, axis=1)).sum(1).mean()


def dense(p, name, x):  # nn.Linear: x W^T + b
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def mlp(p, image):
    x = image / 255
    return dense(p, "l3", jax.nn.relu(dense(p, "l2", jax.nn.relu(dense(p, "l1", x)))))


def conv_relu_pool(p, name, x):  # Conv2d(5, padding=2), relu, max_pool2d(2), NCHW
    y = jax.lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), ((2, 2), (2, 2)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jax.nn.relu(y + p[name + ".bias"][None, :, None, None])
    return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def cnn(p, image):
    x = conv_relu_pool(p, "c2", conv_relu_pool(p, "c1", image / 255))
    return dense(p, "l4", jax.nn.relu(dense(p, "l3", x.reshape(x.shape[0], -1))))


def layer_norm(x, g, b):  # F.layer_norm, eps 1e-5
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def conv_bn(p, st, name, x, stride=1):
    """torch_step.ResNet's conv_bn in training mode: Conv2d (no bias, padding k // 2), BatchNorm2d with the batch's
    statistics; returns the output and the updated running statistics (momentum 0.1, unbiased variance)."""
    w = p[name + ".0.weight"]
    pad = w.shape[-1] // 2
    y = jax.lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    mu, var = y.mean((0, 2, 3)), y.var((0, 2, 3))
    m = y.size // y.shape[1]
    st = dict(st)
    st[name + ".mean"] = 0.9 * st[name + ".mean"] + 0.1 * jax.lax.stop_gradient(mu)
    st[name + ".var"] = 0.9 * st[name + ".var"] + 0.1 * jax.lax.stop_gradient(var) * m / (m - 1)
    y = (y - mu[None, :, None, None]) * jax.lax.rsqrt(var + 1e-5)[None, :, None, None]
    return y * p[name + ".1.weight"][None, :, None, None] + p[name + ".1.bias"][None, :, None, None], st


def resnet(p, st, image):
    relu = jax.nn.relu
    h, st = conv_bn(p, st, "stem", image / 255)
    h = relu(h)
    for blk, stride in (("1", 1), ("2", 2), ("3", 2)):
        a, st = conv_bn(p, st, "a" + blk, h, stride)
        b, st = conv_bn(p, st, "b" + blk, relu(a))
        s, st = (h, st) if stride == 1 else conv_bn(p, st, "s" + blk, h, stride)
        h = relu(b + s)
    return dense(p, "fc", h.mean((2, 3))), st


def mlp_ln(p, st, image):  # torch_step.MLPLN in training mode: dropout 0.1 from a key carried in the state
    key, k1, k2 = jax.random.split(st["key"], 3)

    def drop(k, x):
        return jnp.where(jax.random.bernoulli(k, 0.9, x.shape), x / 0.9, 0.0)
    h = drop(k1, jax.nn.gelu(layer_norm(dense(p, "l1", image / 255), p["n1.weight"], p["n1.bias"]), approximate=False))
    h = drop(k2, jax.nn.gelu(layer_norm(dense(p, "l2", h), p["n2.weight"], p["n2.bias"]), approximate=False))
    return dense(p, "l3", h), {"key": key}


def gpt_loss(model, p, tok, nxt):  # torch_gpt.GPT.logits and loss
    vocab, d, h, layers = torch_gpt.CONFIGS[model][:4]
    hd, (n, t) = d // h, tok.shape
    causal = jnp.triu(jnp.ones((t, t), bool), 1)
    x = p["wte"][tok] + p["wpe"][None, :t]
    for i in range(layers):
        a = layer_norm(x, p[f"ln1_g.{i}"], p[f"ln1_b.{i}"])
        qkv = a @ p[f"w_qkv.{i}"].reshape(3 * d, d).T + p[f"b_qkv.{i}"].reshape(3 * d)
        q, k, v = qkv.reshape(n, t, 3, h, hd).transpose(2, 0, 3, 1, 4)
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(hd))
        y = jax.nn.softmax(jnp.where(causal, -jnp.inf, s), axis=-1) @ v
        y = y.transpose(0, 2, 1, 3).reshape(n, t, d)
        x = x + y @ p[f"w_o.{i}"].reshape(d, d).T + p[f"b_o.{i}"]
        f = jax.nn.gelu(layer_norm(x, p[f"ln2_g.{i}"], p[f"ln2_b.{i}"]) @ p[f"w_fc.{i}"].T + p[f"b_fc.{i}"],
                        approximate=True)
        x = x + f @ p[f"w_pr.{i}"].T + p[f"b_pr.{i}"]
    logits = layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
    lp = jax.nn.log_softmax(logits.reshape(-1, vocab), axis=-1)
    return -jnp.take_along_axis(lp, nxt.reshape(-1, 1), axis=1).mean()


def arrays(tensors):
    return {k: jnp.asarray(v.detach().numpy()) for k, v in tensors.items()}


def setup(name, batch):
    """(params, optimiser, state, loss(params, state, *batch) -> (loss, state), next_batch() -> batch args)."""
    g = torch.Generator().manual_seed(0)
    if name in GPT_SHAPES:
        ctx = GPT_SHAPES[name][0]
        params = arrays(torch_gpt.random_init(name, ctx, 0))
        lr, betas = torch_gpt.CONFIGS[name][4:6]
        mask = {k: k.split(".")[0] in torch_gpt.DECAYED for k in params}
        tx = optax.chain(optax.clip_by_global_norm(1.0),
                         optax.adamw(lr, b1=betas[0], b2=betas[1], eps=1e-8, weight_decay=0.1, mask=mask))
        data = [jnp.asarray(torch.randint(0, 256, (2, batch, ctx), generator=g).numpy().astype(np.int32))
                for _ in range(8)]
        count = [0]

        def next_batch():
            count[0] += 1
            return data[count[0] % 8][0], data[count[0] % 8][1]
        return params, tx, {}, lambda p, st, tok, nxt: (gpt_loss(name, p, tok, nxt), st), next_batch
    if name not in torch_step.MODELS:
        raise SystemExit(f"peer_jax.py: no JAX model for '{name}'")
    image, label = (jnp.asarray(a.numpy()) for a in torch_step.image_batch(name, batch, g))
    model = torch_step.make_model(name)
    params = arrays(dict(model.named_parameters()))
    tx = {"fashion_mlp": optax.sgd(0.1, momentum=0.9),  # torch_step.make_optimizer
          "resnet_bn": optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(0.05, momentum=0.9)),
          "mlp_ln_dropout": optax.adamw(1e-3, weight_decay=0.01)}.get(name, optax.adam(1e-3))
    if name == "resnet_bn":  # the batch norms' running statistics
        st = {k[:-len(".1" + end)] + s: jnp.asarray(v.numpy()) for k, v in model.named_buffers()
              for s, end in ((".mean", ".running_mean"), (".var", ".running_var")) if k.endswith(".1" + end)}
        return params, tx, st, lambda p, st: (lambda out: (soft_ce(out[0], label), out[1]))(resnet(p, st, image)), \
            lambda: ()
    if name == "mlp_ln_dropout":
        return params, tx, {"key": jax.random.PRNGKey(0)}, \
            lambda p, st: (lambda out: (soft_ce(out[0], label), out[1]))(mlp_ln(p, st, image)), lambda: ()
    fwd = cnn if name in ("fashion_cnn", "cnn_dense256") else mlp
    return params, tx, {}, lambda p, st: (soft_ce(fwd(p, image), label), st), lambda: ()


def kernels(hlo):
    """The kernel families the optimised program calls: its library fusions (YNNPACK, XNNPACK), oneDNN
    custom calls; with none, XLA:CPU's own dot / convolution ops (Eigen)."""
    lib = {"__ynn_fusion": "YNNPACK", "__xnn_fusion": "XNNPACK"}
    fused = collections.Counter(re.findall(r'"kind":"(__\w+_fusion)"', hlo))
    fams = [f"{lib.get(k, k)} ({n} fusions)" for k, n in fused.items()]
    onednn = len(re.findall(r'custom_call_target="__onednn', hlo))
    if onednn:
        fams.append(f"oneDNN ({onednn} calls)")
    return f"XLA:CPU ({jax.default_backend()}), " + (", ".join(fams) or "Eigen")


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    name = sys.argv[1]
    batch, warmup, steps, threads = map(int, sys.argv[2:6])
    params, tx, state, loss_fn, next_batch = setup(name, batch)
    opt_state = tx.init(params)

    def train_step(params, opt_state, state, *b):  # state: batch norms' running statistics, dropout's key
        (loss, state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, *b)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    t0 = time.perf_counter()
    step = jax.jit(train_step, donate_argnums=(0, 1, 2)).lower(params, opt_state, state, *next_batch()).compile()
    compile_s = time.perf_counter() - t0
    hlo = step.as_text() or ""
    t0 = time.perf_counter()
    for _ in range(warmup):
        params, opt_state, state, loss = jax.block_until_ready(step(params, opt_state, state, *next_batch()))
    warmup_s = time.perf_counter() - t0
    times = []
    c0 = time.process_time()
    for _ in range(steps):
        b = next_batch()
        t0 = time.perf_counter()
        params, opt_state, state, loss = jax.block_until_ready(step(params, opt_state, state, *b))
        times.append((time.perf_counter() - t0) * 1e6)
    cpu_us = (time.process_time() - c0) / steps * 1e6
    times.sort()
    print(json.dumps({"model": name, "batch": batch, "threads": threads, "steps": steps, "mode": "jit",
                      "median_us": times[steps // 2], "p10_us": times[steps // 10], "p90_us": times[steps * 9 // 10],
                      "cpu_us": cpu_us, "loss": float(loss), "compile_s": compile_s, "warmup_s": warmup_s,
                      "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                      "kernels": kernels(hlo)}))


if __name__ == "__main__":
    main()
