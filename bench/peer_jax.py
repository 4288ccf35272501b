"""peer_jax.py — the bench models' training step in JAX + optax under jax.jit (run it with the peers'
virtual environment's python through bench/peers.sh; bench/peers.py drives it).

Usage: peer_jax.py MODEL BATCH WARMUP STEPS THREADS

The whole step (forward, loss, jax.value_and_grad, the optax update) is one jitted program with the params
and the optimiser state donated (donate_argnums), compiled ahead of the timing (lower().compile(); its
time is reported apart as compile_s, and the warm-up steps after it are untimed too). Every timed step
waits for its outputs (jax.block_until_ready on params, state and loss).

Same models as the PyTorch peers: the forward passes are written here once, functionally, and the params
are the PyTorch peers' own initial params (bench/torch_step.py's modules with PyTorch's default init;
bench/torch_gpt.py's random_init for gpt_char, llama_init for llama_char), converted to arrays; the data is
torch_step.image_batch's synthetic batch (gpt_char, llama_char: 8 random token windows in turn, as
torch_gpt.py); the optimisers are the same (SGD with momentum 0.9, Adam, AdamW with weight decay on the
weights and clipping at global norm 1; llama_char: Muon on the matrices, written here from docs/language.md's
algorithm, and AdamW on the rest, after clipping at global norm 1). gru_rows's GRU is a lax.scan over the
image's rows.

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

GPT_SHAPES = {"gpt_char": (128, 8), "llama_char": (128, 8)}  # ctx, batch (bench/gpt_bench.py's)


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


def rms_norm(x, g):  # parity_llama.py's RMSNorm, eps 1e-5
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g


def rotary(x, cos, sin):  # x [n, t, heads, hd]: the HF Llama rotary embedding (rotate_half)
    e = x.shape[-1]
    return x * cos[:, None] + jnp.concatenate((-x[..., e // 2:], x[..., :e // 2]), -1) * sin[:, None]


def llama_loss(dims, p, tok, nxt):
    """tests/e2e/parity_llama.py's Llama on its state_dict's names (nn.Linear: x W^T): RMSNorm, RoPE, causal
    attention with query head h on key/value head h // group, SwiGLU, untied head."""
    kvh, group, hd, (n, t) = dims["kvh"], dims["group"], dims["hd"], tok.shape
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))  # angles in float64, as HF's
    freqs = np.outer(np.arange(t, dtype=np.float64), inv_freq)
    emb = np.concatenate((freqs, freqs), -1)
    cos, sin = jnp.asarray(np.cos(emb), jnp.float32), jnp.asarray(np.sin(emb), jnp.float32)
    causal = jnp.triu(jnp.ones((t, t), bool), 1)
    x = p["emb.weight"][tok]
    for i in range(dims["layers"]):
        L = f"layers.{i}."
        a = rms_norm(x, p[L + "norm1.weight"])
        q = rotary((a @ p[L + "attn.q.weight"].T).reshape(n, t, kvh * group, hd), cos, sin)
        k = rotary((a @ p[L + "attn.k.weight"].T).reshape(n, t, kvh, hd), cos, sin)
        v = (a @ p[L + "attn.v.weight"].T).reshape(n, t, kvh, hd)
        s = jnp.einsum("ntkgd,nskd->nkgts", q.reshape(n, t, kvh, group, hd), k) * (1.0 / np.sqrt(hd))
        y = jnp.einsum("nkgts,nskd->ntkgd", jax.nn.softmax(jnp.where(causal, -jnp.inf, s), axis=-1), v)
        m = x + y.reshape(n, t, kvh * group * hd) @ p[L + "attn.o.weight"].T
        g = rms_norm(m, p[L + "norm2.weight"])
        f = jax.nn.silu(g @ p[L + "mlp.gate.weight"].T) * (g @ p[L + "mlp.up.weight"].T)
        x = m + f @ p[L + "mlp.down.weight"].T
    logits = rms_norm(x, p["norm_f.weight"]) @ p["head.weight"].T
    lp = jax.nn.log_softmax(logits.reshape(-1, dims["vocab"]), axis=-1)
    return -jnp.take_along_axis(lp, nxt.reshape(-1, 1), axis=1).mean()


def gru_rows(p, image):
    """torch_step.GRURows: nn.GRU(28, 64) over the image's rows (gates r, z, n stacked in its weights; its
    hidden-side biases are zero and frozen, so left out: n = tanh(W_in x + b_in + r * (W_hn h))), then the
    last state through nn.Linear(64, 10)."""
    w_ih, w_hh, b_ih = p["gru.weight_ih_l0"], p["gru.weight_hh_l0"], p["gru.bias_ih_l0"]
    hid = w_hh.shape[1]
    gi = jnp.swapaxes(image @ w_ih.T + b_ih, 0, 1)  # [rows, batch, 3 hid]: the input's part of every gate

    def cell(h, gi_t):
        gh = h @ w_hh.T
        r = jax.nn.sigmoid(gi_t[:, :hid] + gh[:, :hid])
        z = jax.nn.sigmoid(gi_t[:, hid:2 * hid] + gh[:, hid:2 * hid])
        n = jnp.tanh(gi_t[:, 2 * hid:] + r * gh[:, 2 * hid:])
        return (1 - z) * n + z * h, None
    h, _ = jax.lax.scan(cell, jnp.zeros((image.shape[0], hid), image.dtype), gi)
    return dense(p, "out", h)


def muon(lr, momentum=0.95, weight_decay=0.1, ns_steps=5, eps=1e-7):
    """Muon as docs/language.md documents cannl's `muon` (torch.optim.Muon's arguments and defaults, nesterov,
    adjust_lr "original"), written here from that algorithm, in the param's own dtype: with g the (clipped)
    gradient of a matrix of `rows` x `cols` (nn.Linear's [out, in]),
        buf <- buf + (1 - momentum) (g - buf);  U <- g + momentum (buf - g)
        X <- U, or U^T when rows > cols;  X <- X / max(|X|_F, eps)
        ns_steps times: A <- X X^T;  X <- a X + (b A + c A A) X,  (a, b, c) = (3.4445, -4.7750, 2.0315)
        p <- p (1 - lr weight_decay) - lr sqrt(max(1, rows / cols)) X (transposed back).
    (optax.contrib.muon is another algorithm: bias-corrected momentum, X / (|X|_F + eps), a shape scaling of
    its own.)"""
    a_, b_, c_ = 3.4445, -4.7750, 2.0315

    def orthogonal(u):
        rows, cols = u.shape
        x = u.T if rows > cols else u
        x = x / jnp.maximum(jnp.linalg.norm(x), eps)
        for _ in range(ns_steps):
            gram = x @ x.T
            x = a_ * x + (b_ * gram + c_ * gram @ gram) @ x
        return (x.T if rows > cols else x) * np.sqrt(max(1.0, rows / cols))

    def init(params):
        return jax.tree.map(jnp.zeros_like, params)

    def update(grads, buf, params):
        buf = jax.tree.map(lambda b, g: b + (1 - momentum) * (g - b), buf, grads)
        upd = jax.tree.map(lambda b, g, p: -lr * orthogonal(g + momentum * (b - g)) - lr * weight_decay * p,
                           buf, grads, params)
        return upd, buf
    return optax.GradientTransformation(init, update)


def arrays(tensors):
    return {k: jnp.asarray(v.detach().numpy()) for k, v in tensors.items()}


def setup(name, batch):
    """(params, optimiser, state, loss(params, state, *batch) -> (loss, state), next_batch() -> batch args)."""
    torch.manual_seed(0)  # the init of PyTorch's modules, as bench/peer_torch.py seeds it
    g = torch.Generator().manual_seed(0)
    if name in torch_gpt.LLAMAS:  # bench/peer_torch.py's llama_char: torch_gpt.llama_init, 8 windows in turn
        ctx = GPT_SHAPES[name][0]
        dims = torch_gpt.llama_parts(name, ctx)[2]
        params = arrays(torch_gpt.llama_init(name, ctx, 0)[0])
        matrices = {k: k.endswith(".weight") and v.ndim == 2 and not k.startswith("emb.") for k, v in params.items()}
        tx = optax.chain(optax.clip_by_global_norm(1.0),  # parity_llama.py's groups, the spec's lrs (constant)
                         optax.multi_transform({"muon": muon(0.02, momentum=0.95),
                                                "adamw": optax.adamw(3e-3, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0)},
                                               {k: "muon" if v else "adamw" for k, v in matrices.items()}))
        data = [jnp.asarray(torch.randint(0, 256, (2, batch, ctx), generator=g).numpy().astype(np.int32))
                for _ in range(8)]
        count = [0]

        def next_batch():
            count[0] += 1
            return data[count[0] % 8][0], data[count[0] % 8][1]
        return params, tx, {}, lambda p, st, tok, nxt: (llama_loss(dims, p, tok, nxt), st), next_batch
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
    if name == "gru_rows":  # the frozen zero biases are no params here
        params = {k: v for k, v in params.items() if k != "gru.bias_hh_l0"}
        return params, tx, {}, lambda p, st: (soft_ce(gru_rows(p, image), label), st), lambda: ()
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


def make_train_step(loss_fn, tx):
    def train_step(params, opt_state, state, *b):  # state: batch norms' running statistics, dropout's key
        (loss, state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, *b)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss
    return train_step


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    name = sys.argv[1]
    batch, warmup, steps, threads = map(int, sys.argv[2:6])
    params, tx, state, loss_fn, next_batch = setup(name, batch)
    opt_state = tx.init(params)
    train_step = make_train_step(loss_fn, tx)

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
