#!/usr/bin/python3
"""torch_gpt.py — the GPT specs (specs/gpt_char.cannl, specs/gpt2_124m.cannl) and the Llama-style
specs/llama_char.cannl in PyTorch 1.13, for bench/gpt_bench.py.

  torch_gpt.py step MODEL CTX BATCH WARMUP STEPS THREADS
      times STEPS training steps (after WARMUP untimed) on random token windows and prints one
      JSON line like bench/step_bench.c (median, 10th / 90th percentile in us, CPU time per step)
  torch_gpt.py train MODEL CTX INIT TOKENS NEXT VAL_TOKENS VAL_NEXT BATCH THREADS
      from the params of the safetensors file INIT, one AdamW step per BATCH windows of the
      .npy files TOKENS / NEXT in file order (constant lr: the trainer's --lr-schedule constant),
      then prints one JSON line with the mean loss over the windows of VAL_TOKENS / VAL_NEXT
  torch_gpt.py init MODEL CTX INIT
      writes the spec's random init to INIT (llama_char: under the nn model's names, with the
      trainer's --name-map beside it, INIT.map)

The model is written on the params in cannl's storage layout and names (contract §9; blocks
`w_qkv.0` ...), nanoGPT's structure as PyTorch 1.13 runs it (no fused attention kernel before
2.0: softmax of the masked score matrix), float32. The optimiser is the spec's: AdamW, weight
decay on the params with input axes only, gradient clipping at norm 1.

llama_char is the Llama of torch.nn layers of tests/e2e/parity_llama.py (its float64 parity
test) in float32: nn.Embedding, nn.Linear, RMSNorm, the HF rotary embedding, grouped-query
attention by repeat_interleave, SwiGLU; Muon (torch.optim.Muon's algorithm, tests/muon/
check_muon.py's update, float32) on the matrices and AdamW on the rest, clipping at norm 1.
"""
import json
import math
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
import torch_step  # noqa: E402  (bench/, beside this file)

ROOT = Path(__file__).resolve().parent.parent
LLAMAS = ("llama_char",)  # specs written as tests/e2e/parity_llama.py's nn model

# model: vocab, d, heads, layers, lr, betas, w_o / w_pr init std
CONFIGS = {
    "gpt_char": (256, 128, 4, 4, 1e-3, (0.9, 0.99), 0.00707),
    "gpt2_124m": (50304, 768, 12, 12, 6e-4, (0.9, 0.95), 0.00408),
}
DECAYED = ("wte", "wpe", "w_qkv", "w_o", "w_fc", "w_pr")


def shapes(model, ctx):
    vocab, d, heads, layers = CONFIGS[model][:4]
    hd = d // heads
    s = {"wte": (vocab, d), "wpe": (ctx, d), "lnf_g": (d,), "lnf_b": (d,)}
    for i in range(layers):
        s.update({f"ln1_g.{i}": (d,), f"ln2_g.{i}": (d,), f"ln1_b.{i}": (d,), f"ln2_b.{i}": (d,),
                  f"w_qkv.{i}": (3, heads, hd, d), f"b_qkv.{i}": (3, heads, hd), f"w_o.{i}": (d, heads, hd),
                  f"b_o.{i}": (d,), f"w_fc.{i}": (4 * d, d), f"b_fc.{i}": (4 * d,), f"w_pr.{i}": (d, 4 * d),
                  f"b_pr.{i}": (d,)})
    return s


def random_init(model, ctx, seed):
    """The spec's init distributions (normal std 0.02, the residual projections smaller, ones, zeros)."""
    g = torch.Generator().manual_seed(seed)
    small = CONFIGS[model][6]
    out = {}
    for k, s in shapes(model, ctx).items():
        base = k.split(".")[0]
        if base.endswith("_g"):
            t = torch.ones(s)
        elif base.startswith("b_") or base.endswith("_b"):
            t = torch.zeros(s)
        else:
            std = small if base in ("w_o", "w_pr") else 0.01 if (base == "wpe" and model == "gpt2_124m") else 0.02
            t = torch.randn(s, generator=g) * std
        out[k] = t
    return out


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64}[info["dtype"]]
        out[name] = torch.from_numpy(np.frombuffer(blob[8 + n + b:8 + n + e], dtype=dt).reshape(info["shape"]).copy()).float()
    return out


def write_safetensors(path, tensors):
    header, chunks, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(chunks))


class GPT:
    def __init__(self, model, ctx, params):
        self.vocab, self.d, self.heads, self.layers, lr, betas, _ = CONFIGS[model]
        self.hd = self.d // self.heads
        self.P = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        decayed = [p for k, p in self.P.items() if k.split(".")[0] in DECAYED]
        other = [p for k, p in self.P.items() if k.split(".")[0] not in DECAYED]
        self.opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                     lr=lr, betas=betas, eps=1e-8)
        self.causal = torch.ones(ctx, ctx, dtype=torch.bool).triu(1)

    def logits(self, tok):
        P, n, t = self.P, tok.shape[0], tok.shape[1]
        d, h, hd = self.d, self.heads, self.hd
        x = F.embedding(tok, P["wte"]) + P["wpe"][None, :t]
        for i in range(self.layers):
            a = F.layer_norm(x, (d,), P[f"ln1_g.{i}"], P[f"ln1_b.{i}"])
            qkv = F.linear(a, P[f"w_qkv.{i}"].reshape(3 * d, d), P[f"b_qkv.{i}"].reshape(3 * d))
            q, k, v = qkv.view(n, t, 3, h, hd).permute(2, 0, 3, 1, 4)         # [n, h, t, hd] each
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            y = (torch.softmax(s.masked_fill(self.causal[:t, :t], float("-inf")), dim=-1) @ v)
            y = y.transpose(1, 2).reshape(n, t, d)
            x = x + F.linear(y, P[f"w_o.{i}"].reshape(d, d), P[f"b_o.{i}"])
            f = F.gelu(F.linear(F.layer_norm(x, (d,), P[f"ln2_g.{i}"], P[f"ln2_b.{i}"]), P[f"w_fc.{i}"], P[f"b_fc.{i}"]),
                       approximate="tanh")
            x = x + F.linear(f, P[f"w_pr.{i}"], P[f"b_pr.{i}"])
        return F.linear(F.layer_norm(x, (d,), P["lnf_g"], P["lnf_b"]), P["wte"])

    def loss(self, tok, nxt):
        return F.cross_entropy(self.logits(tok).reshape(-1, self.vocab), nxt.reshape(-1))

    def step(self, tok, nxt):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(tok, nxt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.P.values()), 1.0)
        self.opt.step()
        return float(loss)


def llama_parts(model, ctx):
    """tests/e2e/parity_llama.py (the nn model, its optimisers, the name map), Muon's update and
    the spec's dims at context ctx."""
    sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "tests" / "muon")]
    import parity_llama
    from check_muon import muon_step
    dims = parity_llama.spec_dims((ROOT / "specs" / f"{model}.cannl").read_text(), [f"ctx={ctx}"])
    return parity_llama, muon_step, dims


def llama_init(model, ctx, seed):
    """The spec's init (every matrix and the embedding normal(0, 0.02), the gains ones) as the
    nn model's state_dict, and the trainer's --name-map lines for it."""
    pl, _, dims = llama_parts(model, ctx)
    g = torch.Generator().manual_seed(seed)
    net = pl.build_model(torch, dims).float()
    state = {k: (torch.ones(v.shape) if "norm" in k else torch.randn(v.shape, generator=g) * 0.02)
             for k, v in net.state_dict().items()}
    return state, pl.name_map(dims, state)


class Llama:
    def __init__(self, model, ctx, params):
        pl, muon_step, dims = llama_parts(model, ctx)
        self.vocab = dims["vocab"]
        self.net = pl.build_model(torch, dims).float()
        self.net.load_state_dict(params)
        self.opts = pl.optimizers(torch, self.net, muon_step)
        self.opt = self.opts[1]  # (train sets each group's lr: the spec's, constant)

    def loss(self, tok, nxt):
        return F.cross_entropy(self.net(tok).reshape(-1, self.vocab), nxt.reshape(-1))

    def step(self, tok, nxt):
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        loss = self.loss(tok, nxt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.net.parameters()), 1.0)
        for o in self.opts:
            o.step()
        return float(loss)


def make(model, ctx, params=None):
    if model in LLAMAS:
        return Llama(model, ctx, params if params is not None else llama_init(model, ctx, 0)[0])
    return GPT(model, ctx, params if params is not None else random_init(model, ctx, 0))


def main():
    a = sys.argv[1:]
    if len(a) == 7 and a[0] == "step":
        model, ctx, batch, warmup, steps, threads = a[1], *map(int, a[2:])
        torch.set_num_threads(threads)
        m = make(model, ctx)
        g = torch.Generator().manual_seed(1)
        data = [torch.randint(0, m.vocab, (2, batch, ctx), generator=g) for _ in range(8)]
        for i in range(warmup):
            m.step(data[i % 8][0], data[i % 8][1])
        times = []
        c0 = time.process_time()
        for i in range(steps):
            t0 = time.perf_counter()
            loss = m.step(data[i % 8][0], data[i % 8][1])
            times.append((time.perf_counter() - t0) * 1e6)
        cpu_us = (time.process_time() - c0) / steps * 1e6
        times.sort()
        print(json.dumps({"model": model, "batch": batch, "threads": threads, "steps": steps,
                          "median_us": times[steps // 2], "p10_us": times[steps // 10],
                          "p90_us": times[steps * 9 // 10], "cpu_us": cpu_us, "loss": loss,
                          "openblas": torch_step.openblas_core()}))
    elif len(a) == 10 and a[0] == "train":
        model, ctx, init, tok, nxt, vtok, vnxt = a[1], int(a[2]), *a[3:8]
        batch, threads = int(a[8]), int(a[9])
        torch.set_num_threads(threads)
        m = make(model, ctx, read_safetensors(init))
        if model not in LLAMAS:  # (the Llama's optimisers keep the spec's lrs: constant)
            for g in m.opt.param_groups:
                g["lr"] = CONFIGS[model][4]
        tok, nxt = torch.from_numpy(np.load(tok)).long(), torch.from_numpy(np.load(nxt)).long()
        losses = [m.step(tok[i:i + batch], nxt[i:i + batch]) for i in range(0, tok.shape[0] - batch + 1, batch)]
        vt, vn = torch.from_numpy(np.load(vtok)).long(), torch.from_numpy(np.load(vnxt)).long()
        with torch.no_grad():
            tot = sum(float(m.loss(vt[i:i + batch], vn[i:i + batch])) * vt[i:i + batch].shape[0]
                      for i in range(0, vt.shape[0], batch))
        print(json.dumps({"model": model, "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
                          "val_loss": tot / vt.shape[0]}))
    elif len(a) == 4 and a[0] == "init" and a[1] in LLAMAS:
        state, lines = llama_init(a[1], int(a[2]), 0)
        write_safetensors(a[3], state)
        Path(a[3] + ".map").write_text("".join(line + "\n" for line in lines))
    elif len(a) == 4 and a[0] == "init":
        write_safetensors(a[3], random_init(a[1], int(a[2]), 0))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
