#!/usr/bin/env python3
"""Checks cannl's gradients (and losses) against PyTorch's autograd, in float64.

Usage: torch_check.py NAME=CHECKER...

For each spec NAME (tests/gradcheck/specs/NAME.cannl), CHECKER is its gradcheck binary
(gradcheck.c linked with the generated model). The script runs `CHECKER --dump DIR --no-fd`,
which writes the params before the training step, the inputs (n examples), the analytic
gradients of the loss and the loss as .npy files, then recomputes the loss from the same
params and inputs with the PyTorch function REFERENCES[NAME] below and compares:

    |cannl - torch| <= 1e-9 * max(1, |cannl|, |torch|)      (the loss and every gradient element)

Every spec needs a reference here; a spec without one fails.

Layout (docs/language.md §13): tensors are row-major in storage order, axes batch, output,
input. A weight w : [IN -> OUT] is stored [OUT, IN] (nn.Linear.weight; `w * x` is x @ w.T);
a tensor [batch | 3 -> 4] is stored [n, 4, 3]; images [batch | h, w, c] are NHWC and a conv
kernel [kh, kw, c -> d] is stored [d, kh, kw, c]. Pointwise broadcasting in cannl aligns each
kind of axes separately, so the references insert the size-1 axes that torch's right-aligned
broadcasting would otherwise get wrong.

Exit status: 0 all match, 1 a mismatch or a checker failure, 2 bad usage, 77 (skipped) when
torch cannot be imported.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"torch_check: skipped: {e}")
    sys.exit(77)

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

RTOL = 1e-9
REFERENCES = {}


def ref(name):
    def register(fn):
        REFERENCES[name] = fn
        return fn
    return register


# ---------------------------------------------------------------- layout helpers

def lin(w, x):
    """w * x for w : [i -> o] stored [o, i] and x : [batch | i] stored [n, i]."""
    return x @ w.T


def nchw(x):
    return x.permute(0, 3, 1, 2)


def nhwc(x):
    return x.permute(0, 2, 3, 1)


def conv(x, k, stride=1, padding=0):
    """conv2d of an NHWC image with a kernel stored [d, kh, kw, c]; NHWC result."""
    return nhwc(F.conv2d(nchw(x), k.permute(0, 3, 1, 2), stride=stride, padding=padding))


def max_pool(x, size, stride):
    return nhwc(F.max_pool2d(nchw(x), size, stride))


def avg_pool(x, size, stride):
    return nhwc(F.avg_pool2d(nchw(x), size, stride))


def over_outputs(fn, x, n_out, n_in):
    """Applies fn over the output axes of x stored [n, out..., in...] (n_out output axes,
    n_in input axes), separately for each batch and input index: fn gets [n, in..., out...]
    and the number of output axes."""
    nd = x.dim()
    out = list(range(1, 1 + n_out))
    inp = list(range(1 + n_out, nd))
    assert len(inp) == n_in
    perm = [0] + inp + out
    y = fn(x.permute(*perm), n_out)
    inv = [perm.index(i) for i in range(nd)]
    return y.permute(*inv)


def softmax_out(x, n_out, n_in=0):
    def f(t, k):
        shape = t.shape
        flat = t.reshape(*shape[:t.dim() - k], -1)
        return torch.softmax(flat, dim=-1).reshape(shape)
    return over_outputs(f, x, n_out, n_in)


def log_softmax_out(x, n_out, n_in=0):
    def f(t, k):
        shape = t.shape
        flat = t.reshape(*shape[:t.dim() - k], -1)
        return torch.log_softmax(flat, dim=-1).reshape(shape)
    return over_outputs(f, x, n_out, n_in)


def layer_norm_out(x, n_out, n_in=0, eps=1e-5):
    return over_outputs(lambda t, k: F.layer_norm(t, t.shape[t.dim() - k:], eps=eps), x, n_out, n_in)


def pool_leading2(pool, x, size, stride):
    """A 2-d pooling over storage dims 1 and 2 (the first two output axes) of x, whatever
    axes follow."""
    y = x.movedim((1, 2), (-2, -1))
    lead = y.shape[:-2]
    y = pool(y.reshape(-1, 1, *y.shape[-2:]), size, stride)
    return y.reshape(*lead, *y.shape[-2:]).movedim((-2, -1), (1, 2))


def ce(logits, target):
    """cross_entropy over dim 1 with probability targets (PyTorch's own), one value per
    example (and per trailing input index)."""
    return F.cross_entropy(logits, target, reduction="none")


# ---------------------------------------------------------------- the references
# P: params, X: inputs (torch tensors in storage layout, inputs with the batch axis first).

@ref("add")
def _(P, X):
    z = (P["a"] + X["x"]) + P["b"] + 0.5
    return (z * z * P["c"]).sum()


@ref("sub")
def _(P, X):
    y = P["a"] - X["x"]
    z = 1 - (P["b"] - y)
    return (z * z * P["c"]).sum()


@ref("mul")
def _(P, X):
    y = P["a"] * X["x"] * P["b"]
    z = y * y + 2 * y * P["a"]
    return (z * P["c"]).sum()


@ref("div")
def _(P, X):
    x, a = X["x"], P["a"]
    y = a / (x * x + 1)
    z = (x + 2) / P["b"]
    q = (y + z / 2) / (a * a + 1)
    return (q * P["c"]).sum()


@ref("neg")
def _(P, X):
    y = -P["a"] * X["x"]
    z = -(y * P["b"]) + y * y
    return (-z * P["c"]).sum()


@ref("pow")
def _(P, X):
    x, a = X["x"], P["a"]
    pos = a * (x * x + 1)
    y = pos ** 0.5 + a ** 2 + (a + x) ** 3 + pos ** -1 + a ** -1.5 + pos ** 1.5
    return (y * P["c"]).sum()


@ref("pow_dim")
def _(P, X):
    x, a = X["x"], P["a"]
    y = (a + x) ** 3 + (a * x) ** 2 + a ** 2
    return (y * P["c"]).sum()


@ref("matmul")
def _(P, X):
    h = torch.tanh(torch.einsum("oij,bij->bo", P["w"], X["x"]))   # w : [2, 3 -> 4]
    g = lin(P["r"], h)
    k = torch.einsum("oj,bji->boi", P["a"], X["m"])               # [batch | 3 -> 5]
    pq = P["p"] @ P["q"]                                           # [4 -> 2] stored [2, 4]
    return (g * P["c"]).sum() + (k * P["ck"]).sum() + (pq * pq).sum()


@ref("matmul_batched")
def _(P, X):
    m, x = X["m"], X["x"]                                          # m stored [n, 2, 3]
    y = torch.einsum("boi,bi->bo", m * P["u"], torch.tanh(x))
    z = lin(P["w"], y)
    r = torch.einsum("boj,jk->bok", torch.tanh(m), P["q"])         # [batch | 2 -> 2]
    return (torch.tanh(z) * P["c"]).sum() + (r * r).sum()


@ref("gemm")
def _(P, X):
    h = torch.tanh(lin(P["w"], X["x"]))
    t = torch.einsum("bi,ij->bj", h, P["u"])                     # u : [20 -> 40] stored [40, 20]
    mm = torch.einsum("bok,bki->boi", X["m1"] * P["s"], X["m2"])   # [batch | 12 -> 24] stored [n, 24, 12]
    return (torch.tanh(t) * P["c"]).sum() / 4 + (torch.tanh(mm) * P["d"]).sum()


@ref("aliasing")
def _(P, X):
    p, q = P["p"], P["q"]
    pp = p @ p                                 # p * p : [3 -> 3] stored [out, in]
    qq = q @ q
    h = torch.tanh(lin(pp, X["x"]))
    hh = torch.einsum("bi,bj->bij", h, h)
    return (h * h).sum() + (qq * qq).sum() + (hh * q).sum()


@ref("broadcast_size1")
def _(P, X):
    s, t = X["s"], X["t"]
    y = (s + P["r"]) * (P["q"] - t) + s * t
    return (torch.tanh(y) * P["c"]).sum()


@ref("broadcast_missing")
def _(P, X):
    x, v, z = X["x"], X["v"], X["z"]          # [n, 3, 4], [n, 4], [n, 4 (out), 2 (in)]
    b, s = P["b"], P["s"]
    y = (x + b) * v[:, None, :] * s           # v's output axis meets x's last output axis
    u = (z - b[:, None]) * P["p"] + s         # b meets z's output axis; p : [2 -> 1] stored [1, 2]
    return (torch.tanh(y) * P["c"]).sum() + (torch.tanh(u) * P["d"]).sum()


@ref("einsum1")
def _(P, X):
    x, y, w = X["x"], X["y"], P["w"]          # x : [batch | 3 -> 4] stored [n, 4, 3]
    t = (x * w).transpose(1, 2)               # [batch | 4 -> 3] stored [n, 3, 4]
    r = torch.tanh(x + w).sum(dim=2)          # sum over the input axis
    s = (y * P["u"]).transpose(1, 2)
    pw = w.T                                  # [4 -> 3] stored [3, 4]
    return (t * P["c"]).sum() + (r * P["d"]).sum() + (torch.tanh(s) * P["e"]).sum() + (pw * pw).sum()


@ref("einsum2")
def _(P, X):
    x, y = X["x"], X["y"]
    h = torch.tanh(lin(P["w"], x))
    g = torch.einsum("bij,jk->bik", y, P["u"])
    o = torch.einsum("bi,bj->bij", h, x * x)
    dot = (h * h).sum(dim=1)
    pq = P["p"] @ P["q"]
    return (torch.tanh(g) * P["c"]).sum() + (o * P["d"]).sum() + dot.sum() + (pq * pq).sum()


@ref("einsum_ellipsis")
def _(P, X):
    x, v, m, w = X["x"], X["v"], X["m"], P["w"]
    y = torch.einsum("bxyi,bi->bxy", x * w, v)
    r = torch.tanh(x + w).permute(0, 2, 3, 1)
    t = (m * P["k"]).transpose(1, 2)
    return (torch.tanh(y) * P["c"]).sum() + (r * P["d"]).sum() + (torch.tanh(t) * P["e"]).sum()


@ref("einsum_kinds")
def _(P, X):
    x, y = X["x"], X["y"]
    h = torch.tanh(x * P["w"])
    had = h * x
    outer = torch.einsum("bi,bj->bij", h, y)                     # [batch | j -> i] stored [n, i, j]
    acc = torch.einsum("bi,bj->ji", h, torch.tanh(y))            # [i -> j] stored [j, i]
    mixed = torch.einsum("ij,bj->bi", P["u"], y)                 # u : [j -> i] stored [i, j]
    return ((had * P["c"]).sum() + (outer * P["d"]).sum() + (acc * P["e"]).sum()
            + (torch.tanh(mixed) * P["c"]).sum())


@ref("einsum_affine")
def _(P, X):
    x = X["image"] + P["p"]
    cv = conv(x, P["k"])
    strid = conv(x, P["k2"], stride=2, padding=1)
    sub2 = (x * x)[:, ::2, ::2, :]
    pool = max_pool(x, 2, 2)
    return ((torch.tanh(cv) * P["c"]).sum() + (torch.tanh(strid) * P["c2"]).sum()
            + (sub2 * P["c3"]).sum() + (pool * P["c4"]).sum())


@ref("einsum_padded")
def _(P, X):
    x = X["image"] + P["p"]
    padded = F.pad(nchw(x), (1, 1, 1, 1))                  # zeros
    pmax = nhwc(F.max_pool2d(padded, 2, 2))
    pavg = nhwc(F.avg_pool2d(F.pad(nchw(x * x), (1, 1, 1, 1)), 2, 2))
    return (pmax * P["c1"]).sum() + (pavg * P["c2"]).sum()


def pointwise(fn):
    def reference(P, X):
        y = fn(lin(P["w"], X["x"]) + P["b"])
        return (y * P["c"]).sum()
    return reference


REFERENCES["relu"] = pointwise(torch.relu)
REFERENCES["sigmoid"] = pointwise(torch.sigmoid)
REFERENCES["tanh"] = pointwise(torch.tanh)
REFERENCES["exp"] = pointwise(torch.exp)
REFERENCES["abs"] = pointwise(torch.abs)
REFERENCES["gelu"] = pointwise(F.gelu)          # the exact (erf) form, PyTorch's default
REFERENCES["log"] = pointwise(lambda z: torch.log(z * z + 0.5))
REFERENCES["sqrt"] = pointwise(lambda z: torch.sqrt(z * z + 0.5))

@ref("where")
def _(P, X):
    u = lin(P["w"], X["x"]) + P["b"]
    v = lin(P["w2"], X["x"])
    return ((torch.where(u > 0, v, P["d"]) + torch.where(v > 0, u * u, torch.tensor(0.5))) * P["c"]).sum()
REFERENCES["clamp"] = pointwise(lambda z: torch.clamp(z, -0.3, 0.4) + torch.clamp(z, min=-0.2))

@ref("maximum")
def _(P, X):
    u = lin(P["w"], X["x"]) + P["b"]
    v = lin(P["w2"], X["x"])
    return ((torch.maximum(u, P["d"]) + torch.maximum(v, u)) * P["c"]).sum()

@ref("minimum")
def _(P, X):
    u = lin(P["w"], X["x"]) + P["b"]
    v = lin(P["w2"], X["x"])
    return ((torch.minimum(u, P["d"]) + torch.minimum(v, u)) * P["c"]).sum()
REFERENCES["leaky_relu"] = pointwise(lambda z: F.leaky_relu(z) + F.leaky_relu(z, negative_slope=-0.2))
REFERENCES["elu"] = pointwise(lambda z: F.elu(2 * z) + F.elu(z, alpha=0.5))
REFERENCES["softplus"] = pointwise(lambda z: F.softplus(z) + F.softplus(2 * z, beta=2, threshold=1))
REFERENCES["silu"] = pointwise(lambda z: F.silu(2 * z))
REFERENCES["log1p"] = pointwise(lambda z: torch.log1p(z * z - 0.5))
REFERENCES["cos"] = pointwise(lambda z: torch.cos(2 * z))
REFERENCES["sin"] = pointwise(lambda z: torch.sin(2 * z))


def reduction(kind):
    def red(t, dims=None):
        if kind == "sum":
            return t.sum() if dims is None else t.sum(dim=dims)
        if kind == "mean":
            return t.mean() if dims is None else t.mean(dim=dims)
        return t.max() if dims is None else t.amax(dim=dims)

    def reference(P, X):
        w = P["w"]
        y = torch.tanh(X["x"] * w)            # [batch | 3 -> 4] stored [n, 4, 3]
        s1 = red(y * w)
        s2 = red(y, (2,))                     # b|i->o => b|o
        s3 = red(y, (0, 1))                   # b|i->o => i->
        s4 = red(y, (0,))                     # b|i->o => i->o
        s5 = red(y, (1, 2))                   # b|i->o => b|
        return s1 + (s2 * P["c"]).sum() + (s3 * P["d"]).sum() + (s4 * P["e"]).sum() + (s5 * s5).sum()
    return reference


for _kind in ("sum", "mean", "max"):
    REFERENCES["reduce_" + _kind] = reduction(_kind)


@ref("softmax")
def _(P, X):
    p = torch.softmax(lin(P["w"], X["x"]), dim=1)
    q = softmax_out(X["m"] * P["u"], n_out=2, n_in=1)    # [batch | 2 -> 3, 2] stored [n, 3, 2, 2]
    return (p * P["c"]).sum() + (q * P["e"]).sum()


@ref("log_softmax")
def _(P, X):
    p = torch.log_softmax(lin(P["w"], X["x"]), dim=1)
    q = log_softmax_out(X["m"] * P["u"], n_out=2, n_in=1)
    return (p * P["c"]).sum() + (q * P["e"]).sum()


@ref("cross_entropy")
def _(P, X):
    x, t, z = X["x"], X["t"], X["z"]                     # z : [batch | 2 -> 4] stored [n, 4, 2]
    logits = lin(P["w"], x) + P["b"]
    ce1 = ce(logits, t)
    ce2 = ce(z * P["u"], t[:, :, None].expand(-1, -1, 2))  # one value per input index: [n, 2]
    ce3 = ce(logits, torch.softmax(P["q"], dim=0).expand(x.shape[0], -1))
    return ce1.mean() + (ce2 * P["d"]).sum() + ce3.sum()


@ref("cross_entropy_broadcast")
def _(P, X):
    t = X["t"]
    n = t.shape[0]
    q = P["q"].expand(n, -1)                               # the same logits for every example
    wq = (P["w"] @ P["q"]).expand(n, -1)                   # w : [4 -> 4] stored [out, in]
    return ce(q, t).mean() + ce(wq, torch.softmax(t * 2, dim=1)).mean()


# Losses (issue 20): PyTorch's own functions and reductions; a param target broadcasts over
# the batch as in torch.
def loss_refs(fn, wrap=lambda z: z, target=lambda t: t, options=None):
    options = options or {}

    def reference(P, X):
        z = wrap(lin(P["w"], X["x"]) + P["b"])
        t, c = target(X["t"]), target(P["c"])
        return (fn(z, t, **options.get("mean", {})) + fn(z, c.expand_as(z), reduction="sum", **options.get("sum", {}))
                + (fn(z, t, reduction="none", **options.get("none", {})) * P["c"]).sum())
    return reference


REFERENCES["mse_loss"] = loss_refs(F.mse_loss)
REFERENCES["l1_loss"] = loss_refs(F.l1_loss)
REFERENCES["huber_loss"] = loss_refs(F.huber_loss, wrap=lambda z: 2 * z,
                                     options={"sum": {"delta": 0.2}, "none": {"delta": 0.2}})


@ref("bce_with_logits")
def _(P, X):
    z = 4 * (lin(P["w"], X["x"]) + P["b"])
    y = torch.sigmoid(2 * X["t"])
    c = P["c"]
    bce = F.binary_cross_entropy_with_logits
    at0 = bce(lin(P["w0"], X["x"]), y)  # logits exactly 0: the gradient is (sigmoid(0) - y) x
    return (bce(z, y) + bce(z, torch.sigmoid(c).expand_as(z), reduction="sum") + (bce(z, y, reduction="none") * c).sum()
            + at0)


@ref("nll_loss")
def _(P, X):
    # F.nll_loss takes class indices only: with class distributions it is -sum(p * logp) over
    # the classes (equal to F.nll_loss for one-hot rows), then the same reductions.
    p = torch.softmax(X["t"], dim=1)
    logp = torch.log_softmax(lin(P["w"], X["x"]) + P["b"], dim=1)
    nll = -(p * logp).sum(dim=1)                              # [n]
    lz = torch.log_softmax(X["z"] * P["u"], dim=1)            # [batch | 2 -> 4] stored [n, 4, 2]
    nllz = -(p[:, :, None] * lz).sum(dim=1)                   # [n, 2]
    return nll.mean() + nll.sum() + (nllz * P["d"]).sum() + nllz.mean()


@ref("nll_loss_ids")
def _(P, X):
    logp = torch.log_softmax(lin(P["w"], X["x"]) + P["b"], dim=1)
    label = X["label"].long()
    return (F.nll_loss(logp, label) + F.nll_loss(logp, label, reduction="sum") +
            (F.nll_loss(logp, label, reduction="none") * P["d"]).sum())


@ref("logsumexp")
def _(P, X):
    z = lin(P["w"], X["x"])
    big = 50 * (X["m"] * P["u"]) + 100                        # [batch | 2 -> 3] stored [n, 3, 2]
    return (torch.logsumexp(z.flatten(), 0) + (torch.logsumexp(z * P["c"], 1) * P["c"].sum()).sum()
            + (torch.logsumexp(big, 2) * P["e"]).sum())


@ref("concat")
def _(P, X):
    x = X["x"]
    n = x.shape[0]
    a = torch.tanh(torch.cat([lin(P["w"], x), lin(P["w2"], x)], 1))
    b = torch.cat([lin(P["w2"], x), P["p"].expand(n, -1)], 1)
    g = torch.cat([X["m"] * P["u"], P["v"].expand(n, -1, -1, -1)], 2)   # [batch | 2 -> 3, k] stored [n, 3, k, 2]
    return ((a * P["c"]).sum() + (torch.sin(b) * P["c"]).sum() + (torch.cat([P["p"], P["p"] * P["p"]]) * P["d"]).sum()
            + (g * g * P["e"]).sum())


@ref("layer_norm")
def _(P, X):
    z = lin(P["w"], X["x"])
    h = F.layer_norm(z, (4,), eps=1e-5)
    y = P["gain"] * h + P["bias"]
    h2 = F.layer_norm(z, (4,), eps=1e-3)
    nrm = layer_norm_out(X["m"] * P["u"], n_out=2, n_in=1)
    return (torch.tanh(y) * P["c"]).sum() + (h2 * P["c2"]).sum() + (nrm * P["e"]).sum()


def bn_train(x, dim, eps=1e-5):
    """batch_norm in the training step: storage dim `dim` of x (its last output axis) normalised
    over every other dim with the batch's statistics, by nn.functional.batch_norm (channels
    at dim 1)."""
    y = F.batch_norm(x.movedim(dim, 1), None, None, training=True, eps=eps)
    return y.movedim(1, dim)


@ref("batch_norm")
def _(P, X):
    z = lin(P["w"], X["x"])
    h = bn_train(z, 1)
    h2 = bn_train(torch.tanh(z), 1, eps=1e-3)
    k = bn_train(z * P["c3"], 1) + bn_train(torch.tanh(z) * P["c3"], 1, eps=0.1)
    n = bn_train(X["m"] * P["u"], 2)  # [n, 3, 2 | 2]: the last output axis is storage dim 2
    return ((torch.tanh(h) * P["c"]).sum() + (h2 * h2 * P["c2"]).sum() + torch.tanh(k).sum() +
            (n * n * P["e"]).sum())


# dropout's mask, as the generated code draws it (docs/language.md, dropout): the key from the
# state's seed and the step (runtime-lib/rng.c cannl_dropout_key), each element's draw from
# the key and its counter (stream << 40 + its flat index in storage at the maximum batch) by
# splitmix64's finaliser; kept when the high 32 bits reach round(p 2^32).
GC_SEED = 20261121  # gradcheck.c's GC_SEED: create(seed)
_M64 = (1 << 64) - 1


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def dropout_key(seed, step):
    k = _mix64((seed ^ 0xD1B54A32D192ED03) + 0x9E3779B97F4A7C15 & _M64)
    return _mix64((k + step + 0x9E3779B97F4A7C15) & _M64)


def dropout_mask(shape, p, stream, seed=GC_SEED, step=1):
    key = dropout_key(seed, step)
    t = min(round(p * 2.0 ** 32), 2 ** 32 - 1)
    flat = [(_mix64(key ^ (((stream << 40) + i) * 0x9E3779B97F4A7C15 & _M64)) >> 32) >= t
            for i in range(math.prod(shape))]
    return torch.tensor(flat, dtype=torch.float64).reshape(shape)


@ref("dropout")
def _(P, X):
    z = torch.tanh(lin(P["w"], X["x"]))
    mask = dropout_mask(z.shape, 0.5, stream=0)
    assert 0 < mask.sum() < mask.numel(), "the mask should drop some elements and keep some"
    h = z * mask / (1 - 0.5)
    g = lin(P["w2"], h)  # p = 0: every element kept, no scaling
    return (torch.tanh(g) * P["c"]).sum()


@ref("conv2d")
def _(P, X):
    y = conv(X["image"] + P["p"], P["k"]) + P["bias"]
    return (torch.tanh(y) * P["c"]).sum()


@ref("conv2d_stride2_pad1")
def _(P, X):
    y = conv(X["image"] * P["p"], P["k"], stride=2, padding=1)
    return (torch.tanh(y) * P["c"]).sum()


@ref("conv2d_stride3_pad2")
def _(P, X):
    y = conv(X["image"] * P["p"], P["k"], stride=3, padding=2)
    return (torch.tanh(y) * P["c"]).sum()


@ref("max_pool2d_ties")
def _(P, X):
    x = X["image"] * 0 + P["b"]
    return (max_pool(x, 2, 2) * P["c1"]).sum() + (torch.tanh(max_pool(x, 3, 2)) * P["c2"]).sum()


@ref("conv2d_pad2")
def _(P, X):
    y = conv(X["image"] + P["p"], P["k"], padding=2)
    return (torch.tanh(y) * P["c"]).sum()


@ref("conv2d_stride2")
def _(P, X):
    y = conv(X["image"] + P["p"], P["k"], stride=2)
    return (torch.tanh(y) * P["c"]).sum()


def pooling(pool):
    def reference(P, X):
        x = X["image"] + P["p"]
        y1 = pool(x, 2, 2)
        y2 = pool(x, 3, 1)
        y3 = pool(x, 3, 3)
        return (torch.tanh(y1) * P["c1"]).sum() + (y2 * P["c2"]).sum() + (y3 * y3 * P["c3"]).sum()
    return reference


REFERENCES["max_pool2d"] = pooling(max_pool)
REFERENCES["avg_pool2d"] = pooling(avg_pool)


@ref("pool_shapes")
def _(P, X):
    t = X["t"]
    y1 = pool_leading2(F.max_pool2d, X["a"] + P["pa"], 2, 2)
    y2 = pool_leading2(F.avg_pool2d, X["m"] * P["pm"], 2, 2)    # m stored [n, 4, 4, 2 (in)]
    y3 = pool_leading2(F.max_pool2d, t + P["pt"], 2, 2)
    y4 = pool_leading2(F.avg_pool2d, t * P["pt"], 2, 2)
    c3 = P["c3"]
    return (y1 * P["c1"]).sum() + (torch.tanh(y2) * P["c2"]).sum() + (y3 * c3).sum() + (y4 * y4 * c3).sum()


@ref("stability")
def _(P, X):
    logits = 1000 * torch.tanh(lin(P["w"], X["x"]))
    p = torch.softmax(logits, dim=1)
    lsm = torch.log_softmax(logits, dim=1)
    return (p * P["c"]).sum() + (lsm * P["e"]).sum() / 1000 + ce(logits, X["t"]).mean() / 1000


@ref("batch_mean")
def _(P, X):
    h = torch.tanh(lin(P["w"], X["x"]))
    mu = h.mean(dim=0)
    centered = h - mu
    var = (centered * centered).mean(dim=0)
    return (mu * P["c"]).sum() + (var * P["c2"]).sum() + (h * h).mean()


@ref("numbers")
def _(P, X):
    w = P["w"]
    a = 2 * w.sum(dim=1)                      # w * 2: the number takes w's input axes
    y = torch.tanh(lin(w, X["x"]) / 3)
    b = 2 * y.sum(dim=1)                      # 2 * y: the number takes y's output axes
    return (a * P["c"]).sum() + (b * b).sum() / 3 - 0.5 * y.sum()


@ref("mlp")
def _(P, X):
    x = X["image"] / 2
    h1 = torch.relu(lin(P["w1"], x) + P["b1"])
    h2 = torch.relu(lin(P["w2"], h1) + P["b2"])
    logits = lin(P["w3"], h2) + P["b3"]
    return ce(logits, X["label"]).mean()


@ref("cnn")
def _(P, X):
    a1 = torch.relu(conv(X["image"], P["k1"], padding=1) + P["c1"])
    p1 = max_pool(a1, 2, 2)
    a2 = torch.tanh(conv(p1, P["k2"]) + P["c2"])
    p2 = avg_pool(a2, 2, 1)
    logits = torch.einsum("ohwc,bhwc->bo", P["w"], p2) + P["b"]
    return ce(logits, X["label"]).mean()


@ref("einsum_mlp")
def _(P, X):
    x = X["image"] / 2
    z1 = torch.einsum("hrc,brc->bh", P["w1"], x) + P["b1"]
    h1 = torch.relu(P["gain"] * F.layer_norm(z1, (5,), eps=1e-5) + P["bias"])
    logits = lin(P["w2"], h1) + P["b2"]
    w1 = P["w1"]
    return ce(logits, X["label"]).sum() / 3 + 0.01 * (w1 * w1).sum()


@ref("reserved_names")
def _(P, X):
    n = torch.tanh(lin(P["v"], X["x"]) + P["step"])
    out = n * P["count"]
    return (out * P["name"]).sum()



# ---------------------------------------------------------------- contract v1: language models
# Integer inputs (ids) come as float64 arrays of whole numbers: .long() makes them indices.

@ref("embedding")
def _(P, X):
    tokens = X["tokens"].long()                                     # [n, ctx]
    x = F.embedding(tokens, P["wte"]) + F.embedding(torch.arange(tokens.shape[1]), P["wpe"])[None]
    y = torch.tanh(x * X["g"][:, None, :] + P["c"])                 # g : [batch | 3] meets batch
    return (y * y * P["c"]).sum()


@ref("lm_cross_entropy")
def _(P, X):
    logits = lin(P["w"], X["x"]) + P["b"]                           # [n, ctx, 5]
    ce_ = F.cross_entropy(logits.reshape(-1, 5), X["next"].long().reshape(-1), reduction="none")
    ce_ = ce_.reshape(X["next"].shape)
    return ce_.mean() + (ce_ * X["d"]).sum()


@ref("bcast_batch")
def _(P, X):
    a, s = X["a"], X["s"]                                           # [n, 3, 2, 1], [n, 1, 4]
    p, q, c = P["p"], P["q"], P["c"]                                # [1, 4], [2, 1], [2, 4]
    s4 = s[:, :, None, :]                                           # [n, 1, 1, 4]: s's 4 is the last output axis
    y = a / (s4 * s4 + p)
    z = (s4 - a) * q
    u = p / (a * a + 1) - q
    v = q - s4
    return (torch.tanh(y) * c).sum() + (z * z * c).sum() + (torch.sin(u) * c).sum() + (v * v).sum()


@ref("norm_odd")
def _(P, X):
    h = X["m"] * P["u"]                                             # [n, 3, 1, 2]: outputs 3, 1; input 2
    c, d = P["c"], P["d"]
    p = softmax_out(h, 2, 1)
    l = log_softmax_out(h, 2, 1)
    nrm = layer_norm_out(h, 2, 1)
    t = softmax_out(X["m"], 2, 1)
    ce_ = -(t * log_softmax_out(h, 2, 1)).sum(dim=(1, 2))          # [n, 2]
    r = h.amax(dim=(1, 2))                                          # [n, 2]
    s = (h * h).mean()
    return (p * c).sum() + (l * l * c).sum() + (nrm * c).sum() + (ce_ * d).sum() + (r * d).sum() + s


@ref("conv_odd")
def _(P, X):
    y = conv(X["image"], P["k"], stride=2, padding=1)              # [n, 2, 3, 1]
    q = avg_pool(X["f"] * X["f"] + 1, 2, 1) * P["e"]               # [n, 4, 2, 2]
    w = (X["t"] * P["g"]).mean(dim=1)                               # [n, 3]
    z = conv(X["f"] + P["pf"], P["k1"])                             # [n, 5, 3, 3]: 1x1, stride 1
    return (torch.tanh(y) * P["c"]).sum() + q.sum() + (torch.sin(w) * P["g"]).sum() + torch.tanh(z).sum()


@ref("matmul_bcast")
def _(P, X):
    a, b = X["a"], X["b"]                                           # [n, 3, 4, 2], [n, 1, 2, 3]
    y = a @ b                                                       # [n, 3, 4, 3]: batch 3 vs 1 broadcast
    z = torch.einsum("pqo,ntoi->ntpqi", P["w"], y)                  # w stored [2, 2, 4]
    cz = P["c"]                                                     # [3 -> 2, 2] stored [2, 2, 3]
    pb = torch.einsum("ko,ntoi->ntki", P["p"], b)                   # p stored [3, 2]
    xq = F.pad(X["x"] * P["q"], (2, 2))                             # [n, 8]: reads at h - 2, zeros outside
    return (torch.tanh(z) * cz).sum() + torch.sin(pb).sum() + (xq * P["d"]).sum()


@ref("index")
def _(P, X):
    h = torch.einsum("bti,oqki->btoqk", X["x"], P["w"])            # [n, ctx, 3, 2, 4]
    a, b = h[:, :, 0], h[:, :, 2]
    pair = X["pair"].long()                                         # [n, ctx, 2]
    e = F.embedding(pair[:, :, 1], P["table"]) + F.embedding(pair[:, :, 0], P["table"])
    return (torch.tanh(a * b) * P["c"]).sum() + (torch.sin(e) * a[:, :, 1]).sum()


@ref("softmax_spec")
def _(P, X):
    z = X["x"] * P["u"]                                             # [n, ctx, 2, 4]
    p = torch.softmax(z, dim=1)                                     # over the positions
    lsm = torch.log_softmax(z, dim=3)
    nrm = F.layer_norm(z, (4,)) * P["gain"]
    mu = z.mean(dim=1, keepdim=True)
    var = ((z - mu) ** 2).mean(dim=1, keepdim=True)
    m = (z - mu) / torch.sqrt(var + 1e-3)                           # layer_norm over ctx
    c = P["c"]
    return (p * c).sum() + (lsm * lsm * c).sum() + (torch.tanh(nrm) * c).sum() + (m * m * c).sum()


def sdpa(q, k, v, causal=False, scale=None, window=0):
    """F.scaled_dot_product_attention (torch >= 2.0) over dim -2, written out for torch 1.13;
    enable_gqa=True's grouped-query (k, v with fewer heads on dim -3: query head h reads
    key/value head h // R, repeat_interleave) and a sliding window of `window` keys as a boolean
    mask (query t sees the keys t - window < s <= t)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    if k.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        t = q.shape[-2]
        hidden = torch.ones(t, t, dtype=torch.bool).triu(1)
        if window > 0:
            hidden = hidden | torch.ones(t, t, dtype=torch.bool).tril(-window)
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@ref("attention")
def _(P, X):
    qkv = torch.einsum("bti,jhdi->btjhd", X["x"], P["w_qkv"])     # [n, ctx, 3, heads, hd]
    q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))    # [n, heads, ctx, hd]
    y = sdpa(q, k, v, causal=True).transpose(1, 2)                # [n, ctx, heads, hd]
    z = sdpa(lin(P["w_q"], X["x"]), lin(P["w_k"], X["m"]), lin(P["w_v"], X["m"]), scale=0.7)
    return (torch.tanh(y) * P["c"]).sum() + (z * z * P["d"]).sum()


@ref("attention_gqa")
def _(P, X):
    q = torch.einsum("bti,grdi->btgrd", X["x"], P["w_q"]).flatten(2, 3).transpose(1, 2)  # [n, 4, ctx, hd]
    k, v = (torch.einsum("bti,gdi->btgd", X["x"], P[w]).transpose(1, 2) for w in ("w_k", "w_v"))  # [n, 2, ctx, hd]
    y = sdpa(q, k, v, causal=True).transpose(1, 2).reshape(q.shape[0], -1, 2, 2, 3)  # [n, ctx, kvh, group, hd]
    q1 = torch.einsum("bti,hdi->bhtd", X["x"], P["w_q1"])                            # [n, 3, ctx, hd]
    k1, v1 = lin(P["w_k1"], X["m"])[:, None], lin(P["w_v1"], X["m"])[:, None]       # one key/value head
    z = sdpa(q1, k1, v1).transpose(1, 2)                                             # [n, ctx, 3, 2]
    return (torch.tanh(y) * P["c"]).sum() + (z * z * P["d"]).sum()


@ref("attention_window")
def _(P, X):
    qkv = torch.einsum("bti,jhdi->btjhd", X["x"], P["w_qkv"])     # [n, ctx, 3, 2, hd]
    q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))    # [n, 2, ctx, hd]
    y = sdpa(q, k, v, causal=True, window=3).transpose(1, 2)       # [n, ctx, 2, hd]
    q = torch.einsum("bti,grdi->btgrd", X["x"], P["w_q"]).flatten(2, 3).transpose(1, 2)
    k, v = (torch.einsum("bti,gdi->btgd", X["x"], P[w]).transpose(1, 2) for w in ("w_k", "w_v"))
    z = sdpa(q, k, v, causal=True, window=4).transpose(1, 2).reshape(q.shape[0], -1, 2, 2, 3)
    return (torch.tanh(y) * P["c"]).sum() + (z * z * P["d"]).sum()


@ref("gpt")
def _(P, X):
    """nanoGPT's forward pass: pre-norm blocks, fused qkv, causal attention, tanh GELU, tied head."""
    tokens, nxt = X["tokens"].long(), X["next"].long()
    x = F.embedding(tokens, P["wte"]) + F.embedding(torch.arange(tokens.shape[1]), P["wpe"])[None]

    def ln(z, g, b):
        return F.layer_norm(z, z.shape[-1:]) * g + b

    for i in range(2):
        p = {k: P[f"{k}.{i}"] for k in ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "w_qkv", "b_qkv", "w_o", "b_o",
                                          "w_fc", "b_fc", "w_pr", "b_pr")}
        qkv = torch.einsum("bti,jhei->btjhe", ln(x, p["ln1_g"], p["ln1_b"]), p["w_qkv"]) + p["b_qkv"]
        q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))            # [n, heads, ctx, hd]
        att = sdpa(q, k, v, causal=True).transpose(1, 2)                     # [n, ctx, heads, hd]
        x = x + (torch.einsum("bthe,dhe->btd", att, p["w_o"]) + p["b_o"])   # w_o stored [d, heads, hd]
        f = F.gelu(lin(p["w_fc"], ln(x, p["ln2_g"], p["ln2_b"])) + p["b_fc"], approximate="tanh")
        x = x + (lin(p["w_pr"], f) + p["b_pr"])
    logits = lin(P["wte"], ln(x, P["lnf_g"], P["lnf_b"]))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), nxt.reshape(-1))


def rms_norm_ref(x, dims, eps=1e-6):
    """F.rms_norm (torch >= 2.4) over storage dims `dims`, written out for torch 1.13."""
    return x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + eps)


@ref("rms_norm")
def _(P, X):
    z = lin(P["w"], X["x"])
    h = rms_norm_ref(z, (-1,)) * P["gain"]
    h2 = rms_norm_ref(z, (-1,), eps=1e-3)
    nrm = rms_norm_ref(X["m"] * P["u"], (1, 2))                      # [n, 3, 2 | 2]: the output axes
    return (torch.tanh(h) * P["c"]).sum() + (h2 * h2 * P["c2"]).sum() + (nrm * P["e"]).sum()


@ref("rms_norm_spec")
def _(P, X):
    z = X["x"] * P["u"]                                             # [n, ctx, 2, 4]
    q = rms_norm_ref(z, (3,)) * P["gain"]                           # per head
    p = rms_norm_ref(z, (1,), eps=1e-3)                             # over the positions
    c = P["c"]
    return (torch.tanh(q) * c).sum() + (p * p * c).sum()


def rope_ref(x, theta=10000.0, interleaved=False):
    """Rotary embedding of the last dim of x [n, T, heads.., e] at position t = dim 1: the Hugging
    Face Llama apply_rotary_pos_emb (rotate_half: pairs (i, i + e/2)), or Meta's interleaved pairs
    (2i, 2i + 1); the angles t / theta^(2i/e) in float64."""
    T, e = x.shape[1], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, e, 2, dtype=torch.float64) / e))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]   # [T, e/2]
    shape = [1, T] + [1] * (x.dim() - 3) + [e // 2]
    cos, sin = ang.cos().to(x.dtype).reshape(shape), ang.sin().to(x.dtype).reshape(shape)
    if interleaved:
        xe, xo = x[..., 0::2], x[..., 1::2]
        return torch.stack((xe * cos - xo * sin, xo * cos + xe * sin), dim=-1).flatten(-2)
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)

    def rotate_half(v):
        return torch.cat((-v[..., e // 2:], v[..., :e // 2]), dim=-1)
    return x * cos + rotate_half(x) * sin


@ref("rope")
def _(P, X):
    x = X["x"]                                                      # [n, ctx, 6]
    wq = torch.einsum("bti,ghei->btghe", x, P["w_q"])               # [n, ctx, 2, 2, 4]
    wk = torch.einsum("bti,hei->bthe", x, P["w_k"])                 # [n, ctx, 2, 4]
    wv = torch.einsum("bti,ghei->btghe", x, P["w_v"])
    wk2 = torch.einsum("bti,ghei->btghe", x, P["w_k2"])
    q, k = rope_ref(wq), rope_ref(wk, theta=100.0)
    qi, ki = rope_ref(wq, theta=3.0, interleaved=True), rope_ref(wk, interleaved=True)
    n, t = x.shape[0], x.shape[1]
    heads = lambda v: v.reshape(n, t, 4, 4).transpose(1, 2)         # [n, heads, ctx, hd]
    y = sdpa(heads(q), heads(rope_ref(wk2)), heads(wv), causal=True).transpose(1, 2).reshape(n, t, 2, 2, 4)
    c, d = P["c"], P["d"]
    return ((torch.tanh(q) * c).sum() + (k * k * k * d).sum() + (qi * c * qi).sum() + (torch.sin(ki) * d).sum() +
            (y * c).sum())


@ref("llama")
def _(P, X):
    """A Llama-style forward pass: RMSNorm, QK-norm, HF rotary embedding, SwiGLU, untied head."""
    tokens, nxt = X["tokens"].long(), X["next"].long()
    x = F.embedding(tokens, P["wte"])
    for i in range(2):
        p = {k: P[f"{k}.{i}"] for k in ("norm1", "norm2", "qn", "kn", "w_q", "w_k", "w_v", "w_o", "w_gate", "w_up",
                                          "w_down")}
        h = rms_norm_ref(x, (-1,), eps=1e-5) * p["norm1"]
        heads = {k: torch.einsum("bti,hei->bthe", h, p[k]) for k in ("w_q", "w_k", "w_v")}  # [n, ctx, heads, hd]
        q = rope_ref(rms_norm_ref(heads["w_q"], (-1,)) * p["qn"], theta=100.0)
        k = rope_ref(rms_norm_ref(heads["w_k"], (-1,)) * p["kn"], theta=100.0)
        att = sdpa(q.transpose(1, 2), k.transpose(1, 2), heads["w_v"].transpose(1, 2), causal=True).transpose(1, 2)
        m = x + torch.einsum("bthe,dhe->btd", att, p["w_o"])              # w_o stored [d, heads, hd]
        g = rms_norm_ref(m, (-1,), eps=1e-5) * p["norm2"]
        x = m + lin(p["w_down"], F.silu(lin(p["w_gate"], g)) * lin(p["w_up"], g))
    logits = lin(P["w_head"], rms_norm_ref(x, (-1,), eps=1e-5) * P["norm_f"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), nxt.reshape(-1))


@ref("gelu_tanh")
def _(P, X):
    v = lin(P["w"], X["x"])
    y = F.gelu(v, approximate="tanh")
    return (y * P["c"]).sum() + (F.gelu(v) * y).sum()

def shifted(a, k, dim):
    """a read at index i + k along dim: zero where i + k falls outside (an einsum offset)."""
    out = torch.zeros_like(a)
    n = a.shape[dim]
    if abs(k) >= n:
        return out
    src = a.narrow(dim, max(k, 0), n - abs(k))
    out.narrow(dim, max(-k, 0), n - abs(k)).copy_(src)
    return out


@ref("offsets")
def _(P, X):
    h = torch.tanh(lin(P["w"], X["x"]))                             # [n, ctx, 3]
    nxt = shifted(h, 1, 1)                                          # "b, t+1|f => b, t|f"
    prv = shifted(h, -1, 1)                                         # "b, t|f => b, t+1|f"
    pair = h * shifted(X["x"], -2, 1)
    feat = shifted(h, -1, 2)                                        # "b, t|f-1 => b, t|f"
    ex = shifted(torch.exp(h), 2, 1)                                # zeros outside, not exp(0)
    c, d = P["c"], P["d"]
    return (torch.tanh(nxt + 2 * prv) * c).sum() + (pair * d).sum() + (feat * feat * c).sum() + (ex * d).sum()


@ref("slices")
def _(P, X):
    h = torch.einsum("bi,oki->bok", X["x"], P["w"])                # [n, 6, 2]
    a = h[:, 1:4]
    e = torch.exp(h)[:, 4:6]
    return ((torch.tanh(a) * P["c"]).sum() + (e * h[:, 0:2]).sum() + (h[:, 5] * P["d"]).sum()
            + (torch.sin(X["x"][:, 3:5]) * a[:, 0]).sum())


@ref("recurrence")
def _(P, X):
    x = X["x"]                                                      # [n, steps, 2]
    h = torch.tanh(lin(P["wx"], x[:, 0]) + P["b"])
    for t in range(3):
        h = torch.tanh(lin(P["wh"], h) + lin(P["wx"], x[:, t]) + P["b"]) * P[f"g.{t}"]
    return (h * P["c"]).sum()


# ---------------------------------------------------------------- the driver

def load(directory, prefix):
    out = {}
    for f in sorted(os.listdir(directory)):
        if f.startswith(prefix) and f.endswith(".npy"):
            out[f[len(prefix):-4]] = np.load(os.path.join(directory, f))
    return out


def max_rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0, 0
    scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    rel = np.abs(a - b) / scale
    rel = np.where(np.isnan(rel), np.inf, rel)
    at = int(np.argmax(rel))
    return float(rel.flat[at]), at


def check(name, checker):
    """Returns a list of failure messages (empty: pass) and a summary string."""
    if name not in REFERENCES:
        return [f"no PyTorch reference for spec '{name}' in torch_check.py"], ""
    with tempfile.TemporaryDirectory(prefix=f"gc_{name}_") as d:
        r = subprocess.run([checker, "--dump", d, "--no-fd", "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            return [f"{checker} exited with {r.returncode}:\n{r.stdout}{r.stderr}"], ""
        loss_c = float(np.load(os.path.join(d, "loss.npy")))
        params = load(d, "param_")
        grads = load(d, "grad_")
        inputs = load(d, "input_")
    P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    X = {k: torch.tensor(v) for k, v in inputs.items()}
    loss_t = REFERENCES[name](P, X)
    loss_t.backward()
    fails = []
    err, _ = max_rel(loss_c, loss_t.item())
    if not err <= RTOL:
        fails.append(f"loss: cannl {loss_c!r}, torch {loss_t.item()!r} (error {err:.3g})")
    worst = err
    for k, p in P.items():
        if p.grad is None:
            fails.append(f"param '{k}': the PyTorch reference does not use it")
            continue
        g_c = grads[k]
        g_t = p.grad.numpy()
        if g_c.shape != g_t.shape:
            fails.append(f"param '{k}': gradient shape {g_c.shape} vs torch {g_t.shape}")
            continue
        err, at = max_rel(g_c, g_t)
        worst = max(worst, err)
        if not err <= RTOL:
            idx = np.unravel_index(at, g_c.shape) if g_c.ndim else ()
            fails.append(f"param '{k}' element {tuple(int(i) for i in idx)} (flat {at}): cannl "
                         f"{g_c.flat[at]!r}, torch {g_t.flat[at]!r} (error {err:.3g} > {RTOL})")
    return fails, f"{len(P)} params, max error {worst:.3g}"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    failed = []
    for arg in argv[1:]:
        name, sep, checker = arg.partition("=")
        if not sep:
            print(f"torch_check: bad argument '{arg}' (expected NAME=CHECKER)", file=sys.stderr)
            return 2
        fails, summary = check(name, checker)
        if fails:
            failed.append(name)
            print(f"FAIL {name}")
            for f in fails:
                print(f"     {name}: {f}")
        else:
            print(f"ok   {name}: {summary}")
    print(f"torch_check: {len(argv) - 1 - len(failed)} of {len(argv) - 1} specs match PyTorch"
          f" (tolerance {RTOL})")
    if failed:
        print("torch_check: FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
