#!/usr/bin/env python3
"""Parity of the generated llama_char trainer with a Llama built from torch.nn layers: 5 steps of
Muon on the matrices and AdamW on the rest, with the spec's schedule and gradient clipping.

  parity_llama.py --trainer BIN --spec specs/llama_char.cannl --work DIR [--dim NAME=VALUE...] [--small]

specs/llama_char.cannl (contract v2 §1) is built with smaller dims (cannl gen --dim; the same
--dim flags here). PyTorch 1.13, float64: nn.Embedding, nn.Linear(bias=False) for every
projection, an RMSNorm module (F.rms_norm is torch >= 2.4), the Hugging Face Llama rotary
embedding (rotate_half, angles in float64), causal attention written out as
F.scaled_dot_product_attention computes it (torch >= 2.0) with grouped-query heads by
repeat_interleave (enable_gqa is torch >= 2.5), a SwiGLU MLP, an untied head. The optimisers:
a Muon optimiser written from torch.optim.Muon's documented algorithm (torch >= 2.9; the update
of tests/muon/check_muon.py, without the bfloat16 cast) on every nn.Linear weight (the spec's
`matrices`: params with input axes but embedding tables), torch.optim.AdamW on the embedding
and the norms' gains, both under LambdaLR with the spec's cosine warm-up, after
clip_grad_norm_, which must clip. The --init file is the PyTorch model's state_dict; a
--name-map gives each of the spec's params its key and, for the stacked projections
(`w_q.0 : [d -> kvh, group, hd]`), nn.Linear's shape, so the checkpoint holds every param and
optimiser state under PyTorch's names and shapes (contract v2 §6). Both sides see the same
batches of int32 ids (--no-shuffle, --threads 1). A float64 trainer: every loss, param,
momentum_buffer, exp_avg and exp_avg_sq within 1e-9 (max norm, relative); float32: losses
within 1e-4. --small (sanitiser builds): 3 steps of 2.
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_util as u  # noqa: E402
from parity import TOL_F32_LOSS, TOL_F64, loss_failures, paired_tensors, rel_err  # noqa: E402

# The spec's text this reference mirrors (whitespace-normalised); a change to any of them fails
# the test rather than comparing against another model.
MIRRORED = [
    "x = embedding(wte, tokens)",
    "h = rms_norm(x, eps = 1e-5) *. norm1",
    "q = rope(w_q * h, theta = 10000)",
    "k = rope(w_k * h, theta = 10000)",
    "a = attention(q, k, w_v * h, causal = true)",
    "m = x + w_o * a",
    "g = rms_norm(m, eps = 1e-5) *. norm2",
    "x = m + w_down * (silu(w_gate * g) *. (w_up * g))",
    "logits = w_head * (rms_norm(x, eps = 1e-5) *. norm_f)",
    "loss = mean(cross_entropy(logits, next))",
    "minimize loss with muon(lr = 0.02, momentum = 0.95) on matrices, "
    "adamw(lr = 3e-3, beta2 = 0.95, weight_decay = 0) on others, "
    "schedule = cosine(steps = 2000, warmup = 50), clip_grad_norm = 1.0",
]
EPS, THETA = 1e-5, 10000.0
MUON = dict(lr=0.02, momentum=0.95)                                  # torch.optim.Muon's defaults else
ADAMW = dict(lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
COSINE, CLIP = (2000, 50), 1.0
LINEARS = ("attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down")
SPEC_NAME = {"attn.q": "w_q", "attn.k": "w_k", "attn.v": "w_v", "attn.o": "w_o", "mlp.gate": "w_gate",
             "mlp.up": "w_up", "mlp.down": "w_down"}


def spec_dims(text, overrides):
    """The spec's `dim NAME = VALUE` lines, with --dim NAME=VALUE over them."""
    dims = {m.group(1): int(m.group(2)) for m in re.finditer(r"^dim\s+(\w+)\s*=\s*(\d+)", text, re.M)}
    for kv in overrides:
        name, _, value = kv.partition("=")
        u.check(name in dims and value.isdigit(), f"--dim {kv}: not NAME=VALUE of a dim of the spec")
        dims[name] = int(value)
    return dims


def build_model(torch, D):
    """The Llama of the spec from torch.nn layers; state_dict names as Hugging Face's, shortened."""
    nn = torch.nn
    F = torch.nn.functional
    heads = D["kvh"] * D["group"]

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight

    def rotary(x):  # x [b, heads, t, hd]: HF Llama's apply_rotary_pos_emb, angles in float64
        t, e = x.shape[-2], x.shape[-1]
        inv_freq = 1.0 / (THETA ** (torch.arange(0, e, 2, dtype=torch.float64) / e))
        freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        rotate_half = torch.cat((-x[..., e // 2:], x[..., :e // 2]), dim=-1)
        return x * cos + rotate_half * sin

    def sdpa(q, k, v):  # F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # query head h reads key/value head h // R
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        t = q.shape[-2]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            d, hd = D["d"], D["hd"]
            self.q = nn.Linear(d, heads * hd, bias=False)       # head h = g * group + r
            self.k = nn.Linear(d, D["kvh"] * hd, bias=False)
            self.v = nn.Linear(d, D["kvh"] * hd, bias=False)
            self.o = nn.Linear(heads * hd, d, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            split = lambda z, n: z.view(b, t, n, D["hd"]).transpose(1, 2)  # noqa: E731
            q = rotary(split(self.q(x), heads))
            k = rotary(split(self.k(x), D["kvh"]))
            y = sdpa(q, k, split(self.v(x), D["kvh"]))
            return self.o(y.transpose(1, 2).reshape(b, t, heads * D["hd"]))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D["d"], D["ff"], bias=False)
            self.up = nn.Linear(D["d"], D["ff"], bias=False)
            self.down = nn.Linear(D["ff"], D["d"], bias=False)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2, self.mlp = RMSNorm(D["d"]), Attention(), RMSNorm(D["d"]), MLP()

        def forward(self, x):
            m = x + self.attn(self.norm1(x))
            return m + self.mlp(self.norm2(m))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(D["vocab"], D["d"])
            self.layers = nn.ModuleList(Block() for _ in range(D["layers"]))
            self.norm_f = RMSNorm(D["d"])
            self.head = nn.Linear(D["d"], D["vocab"], bias=False)

        def forward(self, tokens):
            x = self.emb(tokens)
            for block in self.layers:
                x = block(x)
            return self.head(self.norm_f(x))

    return Llama().double()


def name_map(D, state):
    """The --name-map lines that give the spec's params the keys of build_model's state_dict (the
    stacked projections with nn.Linear's shape, for the files)."""
    lines = ["wte = emb.weight", "w_head = head.weight", "norm_f = norm_f.weight"]
    for layer in range(D["layers"]):
        for norm in ("norm1", "norm2"):
            lines.append(f"{norm}.{layer} = layers.{layer}.{norm}.weight")
        for lin in LINEARS:
            key = f"layers.{layer}.{lin}.weight"
            lines.append(f"{SPEC_NAME[lin]}.{layer} = {key} [{', '.join(map(str, state[key].shape))}]")
    return lines


def optimizers(torch, model, muon_step):
    """The spec's groups: Muon on the matrices (every nn.Linear weight: params with input axes but
    the embedding's table), AdamW on the others (the embedding, the norms' gains)."""
    matrices = [p for name, p in model.named_parameters() if name.endswith(".weight") and p.dim() == 2
                and not name.startswith("emb.")]
    others = [p for p in model.parameters() if all(p is not q for q in matrices)]
    return [make_muon(torch, muon_step)(matrices, **MUON), torch.optim.AdamW(others, **ADAMW)]


def make_muon(torch, muon_step):
    class Muon(torch.optim.Optimizer):
        """torch.optim.Muon (torch >= 2.9) for torch 1.13: the same arguments and defaults, each
        2-d param updated by muon_step (its documented algorithm, in the param's own dtype)."""

        def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, ns_steps=5,
                     eps=1e-7, adjust_lr_fn=None):
            super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                          ns_steps=ns_steps, eps=eps, adjust_lr_fn=adjust_lr_fn))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                    muon_step(p, p.grad, buf, p.shape[0], g["lr"], weight_decay=g["weight_decay"],
                              momentum=g["momentum"], nesterov=g["nesterov"], ns_steps=g["ns_steps"], eps=g["eps"],
                              adjust_lr=g["adjust_lr_fn"] or "original")
    return Muon


def main():
    ap = u.parity_parser(1913, "--spec", small="3 steps of 2 (sanitiser builds)")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE, as given to cannl gen")
    opt = ap.parse_args()
    steps, batch = (3, 2) if opt.small else (5, 4)

    torch = u.torch_one_thread()
    import numpy as np
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(HERE, "..", "muon"))
    from check_muon import cosine, muon_step
    work = u.fresh_dir(opt.work)
    text = open(opt.spec).read()
    flat = " ".join(re.sub(r"#[^\n]*", "", text).split())
    for line in MIRRORED:
        u.check(line in flat, f"{opt.spec}: the line this test mirrors has changed: {line}")
    D = spec_dims(text, opt.dim)
    print(f"llama_char dims {D}")

    torch.manual_seed(opt.seed)
    model = build_model(torch, D)
    with torch.no_grad():  # gains other than 1, so that they are tested; matrices wide enough to clip
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.8, 1.2)
            elif p.dim() == 2 and not name.startswith("emb."):
                p.normal_(0, 0.3)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, state, {"note": "e2e llama_char parity init (the nn model's state_dict)"})
    lines = name_map(D, state)
    map_path = os.path.join(work, "map.txt")
    with open(map_path, "w") as f:
        f.write("# llama_char <- the nn.Module Llama of parity_llama.py, nn.Linear weights in their own shape\n")
        f.writelines(line + "\n" for line in lines)

    rng = np.random.default_rng(opt.seed)
    n, ctx = steps * batch, D["ctx"]
    stream = rng.integers(0, D["vocab"], size=n * ctx + 1, dtype=np.int64)
    tokens = np.stack([stream[i * ctx:(i + 1) * ctx] for i in range(n)]).astype(np.int32)
    nxt = np.stack([stream[i * ctx + 1:(i + 1) * ctx + 1] for i in range(n)]).astype(np.int32)
    tok_path, next_path = os.path.join(work, "tokens.npy"), os.path.join(work, "next.npy")
    np.save(tok_path, tokens)
    np.save(next_path, nxt)

    # --- cannl
    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=tokens={tok_path}", f"--data=next={next_path}", "--steps", str(steps),
           "--batch", str(batch), "--no-shuffle", "--threads", "1", "--init", init_path, "--name-map", map_path,
           "--checkpoint", ckpt, "--metrics", metrics, "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    u.check(meta.get("step") == str(steps), f"checkpoint step {meta.get('step')!r}, expected {steps}")
    f64 = header["head.weight"]["dtype"] == "F64"
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, steps + 1)), f"metrics log steps {got_losses}")

    # --- PyTorch float64
    optims = optimizers(torch, model, muon_step)
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, cosine(*COSINE)) for o in optims]
    want_losses, clipped = [], 0
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        logits = model(torch.tensor(tokens[sl]).long())
        loss = F.cross_entropy(logits.reshape(-1, D["vocab"]), torch.tensor(nxt[sl]).long().reshape(-1))
        for o in optims:
            o.zero_grad()
        loss.backward()
        clipped += float(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)) > CLIP
        for o in optims:
            o.step()
        for sc in scheds:
            sc.step()
        want_losses.append(float(loss))
    print(f"PyTorch float64: clip_grad_norm = {CLIP} clipped {clipped} of {steps} steps")
    u.check(clipped > 0, "the gradient norm never exceeded the clip: clipping was not compared")
    want = {}
    for name, p in model.named_parameters():
        want[name] = p.detach().numpy()
        for o in optims:
            for key, val in o.state[p].items() if p in o.state else ():
                if torch.is_tensor(val) and val.dim() > 0:
                    want[f"{name}.{key}"] = val.detach().numpy()

    # --- compare
    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    print(f"cannl {header['head.weight']['dtype']} vs PyTorch float64; losses: cannl "
          f"{[round(v, 6) for _, v in got_losses]}, torch {[round(v, 6) for v in want_losses]}, "
          f"worst relative error {worst:.3e}")
    worst_t = 0.0
    for tname, a, b in paired_tensors(got, want, failures):
        e = rel_err(a, b, "max")
        worst_t = max(worst_t, e)
        print(f"  {tname:<40} {e:.3e}")
        if f64 and not e <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e:.3g} > {TOL_F64}")
    kinds = {k.rsplit(".", 1)[1] for k in want if k.endswith(("momentum_buffer", "exp_avg", "exp_avg_sq"))}
    u.check(kinds == {"momentum_buffer", "exp_avg", "exp_avg_sq"}, f"optimiser states compared: {sorted(kinds)}")
    moved = max(rel_err(got[k], state[k]) for k in state if k in got)
    print(f"params moved from their init by up to {moved:.3e} (max norm, relative)")
    u.check(moved > 1e-4, f"the params barely moved from their init ({moved:.3g}): nothing was compared")
    rule = f"every tensor and loss <= {TOL_F64}" if f64 else f"losses <= {TOL_F32_LOSS}"
    if failures:
        raise u.Failure(f"llama_char parity with PyTorch float64 ({rule}):\n  " + "\n  ".join(failures))
    print(f"PARITY llama_char {header['head.weight']['dtype']}, {steps} Muon + AdamW steps of {batch}: "
          f"{len(want)} tensors, worst {worst_t:.3e}; losses {worst:.3e} (checked: {rule})")


if __name__ == "__main__":
    u.run_main(main)
