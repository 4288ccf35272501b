#!/usr/bin/env python3
"""Parity of the generated gpt_tiny trainer with a GPT written in PyTorch: 5 AdamW steps.

  parity_gpt.py --trainer BIN --spec specs/gpt_tiny.cannl --work DIR [--small]

The reference is nanoGPT's structure (token and position embeddings, a pre-norm block of
layer_norm, fused qkv, causal attention, GELU MLP and residuals, a tied head, mean
cross-entropy), written on the params in cannl's storage layout (contract §9: `[d -> vocab]`
is stored [vocab, d], `w_qkv : [d -> 3, heads, hd]` [3, heads, hd, d], `w_o : [heads, hd ->
d]` [d, heads, hd]). Both sides start from the same random params (a safetensors file given
to the trainer with --init) and see the same batches of int32 ids (.npy files, --no-shuffle,
--threads 1). The optimiser is the spec's: AdamW with weight decay on the params that have
input axes only (decay = "matrices", nanoGPT's configure_optimizers), gradient clipping at
norm 1 (torch.nn.utils.clip_grad_norm_), and it must clip. Criteria (issue 16): a float64
trainer every param and optimiser-state tensor within 1e-9 (max norm, relative) and every
loss within 1e-9; a float32 trainer every loss within 1e-5 (relative), its params printed.
--small (sanitiser builds): 3 steps of 2.
"""

import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from parity import TOL_F64, loss_failures, paired_tensors, rel_err  # noqa: E402

TOL_F32_LOSS = 1e-5
VOCAB, CTX, D, HEADS, HD = 256, 64, 128, 4, 32
SHAPES = {"wte": (VOCAB, D), "wpe": (CTX, D), "ln1_g": (D,), "ln1_b": (D,), "w_qkv": (3, HEADS, HD, D),
          "b_qkv": (3, HEADS, HD), "w_o": (D, HEADS, HD), "b_o": (D,), "ln2_g": (D,), "ln2_b": (D,),
          "w_fc": (4 * D, D), "b_fc": (4 * D,), "w_pr": (D, 4 * D), "b_pr": (D,), "lnf_g": (D,), "lnf_b": (D,)}
DECAYED = {"wte", "wpe", "w_qkv", "w_o", "w_fc", "w_pr"}  # the params with input axes
LR, BETAS, EPS, WEIGHT_DECAY, CLIP = 3e-4, (0.9, 0.95), 1e-8, 0.1, 1.0


def main():
    opt = u.parity_parser(2024, "--spec", small="3 steps of 2 (sanitiser builds)").parse_args()
    steps, batch = (3, 2) if opt.small else (5, 4)

    torch = u.torch_one_thread()
    import numpy as np
    import torch.nn.functional as F
    work = u.fresh_dir(opt.work)
    spec = open(opt.spec).read()
    u.check("adamw(lr = 3e-4, beta2 = 0.95, weight_decay = 0.1, decay = \"matrices\"), clip_grad_norm = 1.0" in spec,
            f"{opt.spec}: the optimiser line this test mirrors has changed")

    rng = np.random.default_rng(opt.seed)
    init = {}
    for k, s in SHAPES.items():
        if k.endswith("_g"):
            init[k] = rng.uniform(0.8, 1.2, size=s)
        elif k.startswith("b_") or k.endswith("_b"):
            init[k] = rng.uniform(-0.1, 0.1, size=s)
        else:
            init[k] = rng.normal(0, 0.1, size=s)
        init[k] = init[k].astype(np.float32)
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init, {"note": "e2e gpt_tiny parity init"})
    n = steps * batch
    text = rng.integers(0, VOCAB, size=n * CTX + 1, dtype=np.int64)
    tokens = np.stack([text[i * CTX:(i + 1) * CTX] for i in range(n)]).astype(np.int32)
    nxt = np.stack([text[i * CTX + 1:(i + 1) * CTX + 1] for i in range(n)]).astype(np.int32)
    tok_path, next_path = os.path.join(work, "tokens.npy"), os.path.join(work, "next.npy")
    np.save(tok_path, tokens)
    np.save(next_path, nxt)

    # --- cannl
    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=tokens={tok_path}", f"--data=next={next_path}", "--steps", str(steps),
           "--batch", str(batch), "--no-shuffle", "--threads", "1", "--init", init_path, "--checkpoint", ckpt,
           "--metrics", metrics, "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    f64 = header["wte"]["dtype"] == "F64"
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, steps + 1)),
            f"metrics log steps {[s for s, _ in got_losses]}, expected 1..{steps}")

    # --- PyTorch float64
    P = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in init.items()}
    groups = [{"params": [P[k] for k in SHAPES if k in DECAYED], "weight_decay": WEIGHT_DECAY},
              {"params": [P[k] for k in SHAPES if k not in DECAYED], "weight_decay": 0.0}]
    optim = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS)
    causal = torch.ones(CTX, CTX, dtype=torch.bool).triu(1)

    def ln(z, g, b):
        return F.layer_norm(z, z.shape[-1:]) * g + b

    def forward(tok):
        x0 = F.embedding(tok, P["wte"]) + P["wpe"][None]
        qkv = torch.einsum("bti,jhei->btjhe", ln(x0, P["ln1_g"], P["ln1_b"]), P["w_qkv"]) + P["b_qkv"]
        q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))            # [n, heads, ctx, hd]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(HD)
        y = (torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1) @ v).transpose(1, 2)
        x1 = x0 + (torch.einsum("bthe,dhe->btd", y, P["w_o"]) + P["b_o"])
        f = F.gelu(F.linear(ln(x1, P["ln2_g"], P["ln2_b"]), P["w_fc"], P["b_fc"]))
        x2 = x1 + F.linear(f, P["w_pr"], P["b_pr"])
        return F.linear(ln(x2, P["lnf_g"], P["lnf_b"]), P["wte"])

    want_losses, clipped = [], 0
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        logits = forward(torch.tensor(tokens[sl]).long())
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), torch.tensor(nxt[sl]).long().reshape(-1))
        optim.zero_grad()
        loss.backward()
        clipped += float(torch.nn.utils.clip_grad_norm_(list(P.values()), CLIP)) > CLIP
        optim.step()
        want_losses.append(float(loss))
    print(f"PyTorch float64: clip_grad_norm = {CLIP} clipped {clipped} of {steps} steps")
    u.check(clipped > 0, "the gradient norm never exceeded 1: clipping was not compared")
    want = {}
    for name, p in P.items():
        want[name] = p.detach().numpy()
        for key, val in optim.state[p].items():
            if torch.is_tensor(val) and val.dim() > 0:
                want[f"{name}.{key}"] = val.detach().numpy()

    # --- compare
    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    print(f"cannl {header['wte']['dtype']} vs PyTorch float64: losses {[round(x, 6) for x in want_losses]}, "
          f"worst relative error {worst:.3e}")
    worst_t = 0.0
    for tname, a, b in paired_tensors(got, want, failures):
        e = rel_err(a, b, "max")
        worst_t = max(worst_t, e)
        print(f"  {tname:<20} {e:.3e}")
        if f64 and not e <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e:.3g} > {TOL_F64}")
    moved = max(rel_err(got[k], init[k]) for k in init if k in got)
    print(f"params moved from their init by up to {moved:.3e} (max norm, relative)")
    u.check(moved > 1e-3, f"the params barely moved from their init ({moved:.3g}): nothing was compared")
    rule = f"every tensor and loss <= {TOL_F64}" if f64 else f"losses <= {TOL_F32_LOSS}"
    if failures:
        raise u.Failure(f"parity with PyTorch float64 ({rule}):\n  " + "\n  ".join(failures))
    print(f"PARITY gpt_tiny {header['wte']['dtype']}, {steps} AdamW steps of {batch}: {len(want)} tensors, "
          f"worst {worst_t:.3e}; losses {worst:.3e} (checked: {rule})")


if __name__ == "__main__":
    u.run_main(main)
