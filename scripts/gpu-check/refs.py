#!/usr/bin/env python3
"""The C target's reference runs for scripts/gpu-check.sh, and the CUDA runs checked against them.

  refs.py make     --stage DIR --build DIR [--only CASE,...]   here: run the C programs, save refs
  refs.py parity   --stage DIR --work DIR [--only CASE,...]    there: CUDA trainers against the refs
  refs.py infer    --stage DIR --work DIR                      there: CUDA forward against C's outputs
  refs.py generate --stage DIR --work DIR                      there: CUDA --generate at T = 0 against C's
  refs.py list     [--stage DIR]                               the cases (and which have refs)
  (--bin DIR: the staged CUDA programs, default DIR/bin of --stage)

Parity (one case a row of PARITY): the C trainer (found in --build) and the CUDA trainer (staged in
DIR/bin) train the same spec from the same --seed (the host init draws the same params on both
targets, docs/cuda.md; fashion_mlp_init starts both from --init of a staged params file) on the
same staged data for the same steps, logging every step's loss. The reference
DIR/refs/parity_CASE.npz holds the C run's losses and, for every state tensor of its final
checkpoint (params and optimiser state: after step 1 Adam's exp_avg is 0.1 x the gradient), the l2
norm and the elements at a stride that keeps at most the case's CAP of them (all of them when it
is None). A CUDA run passes when every step's loss is within `loss` (relative) of C's, and for
every tensor both the norm and the strided elements (l2 of the difference over l2 of C's) are
within `state` (relative). The tolerances (TOL) are per arithmetic: fp32 products differ from C only in the
order of sums; tf32 rounds the operands of the products to 10 mantissa bits, bf16 to 7. Adam moves
an element whose gradient is near 0 by up to 2 lr when rounding flips the gradient's sign, hence
the looser fp32 bound for Adam.

Infer: fashion_mlp trained 20 steps by C; its params, and C's outputs (logits) and printed test
loss and accuracy on the first 1000 staged test images, are the reference for the CUDA inference
program (logits relative l2 1e-4, loss and accuracy within 2e-4: they are printed to 4 decimals).

Generate: gpt_tiny and gpt_char trained a little by C on the staged KJV text; C's `--generate N
--prompt "And God said" --temperature 0` (on its KV cache; N past the context) is the reference for
the CUDA inference program's (which re-runs the forward pass over the window for each token): the
bytes must be identical.

Exit status: 0 all ran cases passed, 1 a case failed, 2 bad usage; a case whose programs or refs
are not staged is reported as `skip` (a `stage --ci` staging has a few).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import e2e_util as u  # noqa: E402

# Tolerances (relative), per arithmetic; first settings, to be tightened from the measured values
# each run prints.
TOL = {
    "fp32-sgd": {"loss": 1e-4, "state": 1e-4},
    "fp32-adam": {"loss": 1e-4, "state": 1e-3},
    "tf32": {"loss": 5e-3, "state": 3e-2},
    "bf16": {"loss": 3e-2, "state": 1e-1},
}
CAP = 32768  # strided elements kept per tensor
CAP_LARGE = 4096  # for GPT-2's 444 tensors (the staging must stay small)

# data: fashion (IDX images and labels), text (KJV bytes, --stream), shard (KJV bytes as an llm.c
# uint16 token shard, for GPT-2's vocabulary).
PARITY = {
    # case: (C trainer, CUDA trainer, data, trainer args, tolerance, CAP or None, reference case)
    "fashion_mlp": ("fashion_mlp_train", "fashion_mlp_cuda_train", "fashion", ["--steps", "10", "--batch", "128"],
                    "fp32-sgd", None, None),
    # From the params of infer's reference (fashion_mlp after 20 C steps) by --init: the CUDA
    # program's loading of a params file, not only its seeded init.
    "fashion_mlp_init": ("fashion_mlp_train", "fashion_mlp_cuda_train", "fashion",
                         ["--steps", "10", "--batch", "128",
                          "--init", "{stage}/refs/infer_fashion_mlp/weights.safetensors"],
                         "fp32-sgd", CAP, None),
    "fashion_cnn": ("fashion_cnn_train", "fashion_cnn_cuda_train", "fashion", ["--steps", "4", "--batch", "16"],
                    "fp32-adam", CAP, None),
    "gpt_tiny": ("gpt_tiny_train", "gpt_tiny_cuda_train", "text", ["--steps", "5", "--batch", "4"],
                 "fp32-adam", CAP, None),
    "gpt_char": ("gpt_char_train", "gpt_char_cuda_train", "text", ["--steps", "10", "--batch", "16"],
                 "fp32-adam", CAP, None),
    "gpt_char_tf32": (None, "gpt_char_tf32_cuda_train", "text", ["--steps", "10", "--batch", "16"],
                      "tf32", CAP, "gpt_char"),
    "gpt_char_bf16": (None, "gpt_char_bf16_cuda_train", "text", ["--steps", "10", "--batch", "16"],
                      "bf16", CAP, "gpt_char"),
    "llama_char": ("llama_char_train", "llama_char_cuda_train", "text", ["--steps", "5", "--batch", "8"],
                   "fp32-adam", CAP, None),
    # GPT-2 124M: 2 steps of one 1024-token sequence, the constant lr 6e-4 (the spec's warm-up
    # would start at 8.6e-7, too small to move the params).
    "gpt2_124m": ("gpu_gpt2_124m_b1_train", "gpu_gpt2_124m_cuda_train", "shard",
                  ["--steps", "2", "--batch", "1", "--lr-schedule", "constant"], "fp32-adam", CAP_LARGE, None),
    "gpt2_124m_bf16": (None, "gpu_gpt2_124m_bf16_cuda_train", "shard",
                       ["--steps", "2", "--batch", "1", "--lr-schedule", "constant"], "bf16", CAP_LARGE, "gpt2_124m"),
}
SPEC_OF = {"llama_char": "llama_char"}  # cases that exist only when their spec does
# Generation: a few C training steps (the text is mostly "the the ...", but the argmax is clear-cut,
# which a byte-for-byte comparison needs), then more tokens than the context holds (the window moves).
GENERATE = {  # model: (C trainer, C infer, CUDA infer, C training steps, batch, tokens generated)
    "gpt_tiny": ("gpt_tiny_train", "gpt_tiny_infer", "gpt_tiny_cuda_infer", 150, 8, 80),
    "gpt_char": ("gpt_char_train", "gpt_char_infer", "gpt_char_cuda_infer", 30, 8, 140),
}
PROMPT = "And God said"
OPT_SUFFIXES = (".exp_avg", ".exp_avg_sq", ".momentum", ".momentum_buffer", ".velocity")


def data_flags(stage, kind):
    d = os.path.join(stage, "data")
    if kind == "fashion":
        f = os.path.join(d, "fashion")
        return [f"--data=image={f}/train-images-idx3-ubyte.gz", f"--data=label={f}/train-labels-idx1-ubyte.gz"]
    if kind == "text":
        return [f"--stream=tokens,next={d}/kjv/train.txt"]
    if kind == "shard":
        return [f"--stream=tokens,next={d}/kjv/train.bin"]
    raise ValueError(kind)


def find_c(build, name):
    for sub in ("", "tests/gpu"):
        p = os.path.join(build, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    u.check(False, f"{name} is not built in {build}")


def staged(bindir, name):
    p = os.path.join(bindir, name)
    return p if os.path.isfile(p) else None


def train(binary, stage, case, work, extra):
    _, _, kind, args, _, _, _ = PARITY[case]
    args = [a.replace("{stage}", stage) for a in args]
    ck, metrics = os.path.join(work, f"{case}.safetensors"), os.path.join(work, f"{case}.jsonl")
    for p in (ck, metrics):
        if os.path.exists(p):
            os.remove(p)
    u.run([binary] + data_flags(stage, kind) + args +
          ["--seed", "1", "--log-every", "1", "--quiet", "--metrics", metrics, "--checkpoint", ck] + extra,
          timeout=1800)
    records = u.read_jsonl(metrics)  # per step: "loss" (a data set) or "train_loss" (a stream, --log-every 1)
    losses = [r["loss"] for r in records if "loss" in r] or [r["train_loss"] for r in records if "train_loss" in r]
    u.check(losses, f"{case}: no per-step losses in {metrics}")
    return ck, losses


def summarise(ck, cap):
    """{name: (shape, norm, strided elements)} of a checkpoint's tensors."""
    import numpy as np
    tensors, meta, _ = u.read_safetensors(ck)
    out = {}
    for name, t in tensors.items():
        flat = t.reshape(-1)
        stride = 1 if cap is None else max(1, -(-flat.size // cap))
        out[name] = (tuple(t.shape), float(np.linalg.norm(flat.astype(np.float64))),
                     np.ascontiguousarray(flat[::stride]))
    return out, meta


def save_ref(path, losses, summary, meta):
    import numpy as np
    arrays = {"__losses__": np.array(losses, dtype=np.float64),
              "__meta__": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
    for name, (shape, norm, sample) in summary.items():
        arrays[f"{name}::shape"] = np.array(shape, dtype=np.int64)
        arrays[f"{name}::norm"] = np.array([norm])
        arrays[f"{name}::sample"] = sample
    np.savez(path, **arrays)


def load_ref(path):
    import numpy as np
    z = np.load(path)
    summary = {}
    for key in z.files:
        if key.endswith("::norm"):
            name = key[:-6]
            summary[name] = (tuple(int(v) for v in z[f"{name}::shape"]), float(z[key][0]), z[f"{name}::sample"])
    return [float(v) for v in z["__losses__"]], summary


def cases_here(only):
    spec_dir = os.path.join(HERE, "..", "..", "specs")
    names = [c for c in PARITY if c not in SPEC_OF or os.path.isfile(os.path.join(spec_dir, SPEC_OF[c] + ".cannl"))]
    if only:
        unknown = [c for c in only if c not in PARITY and c not in GENERATE and c != "infer"]
        u.check(not unknown, f"unknown cases: {unknown} (refs.py list)")
        names = [c for c in names if c in only]
    return names


# --------------------------------------------------------------------------- here: references

def make(opt):
    refs = os.path.join(opt.stage, "refs")
    os.makedirs(refs, exist_ok=True)
    work = u.fresh_dir(opt.work or os.path.join(opt.build, "gpu-check-refs"))
    threads = ["--threads", str(opt.threads)]
    if not opt.only or "infer" in opt.only:  # first: fashion_mlp_init starts from its params
        make_infer(opt, work, threads)
    for case in cases_here(opt.only):
        c_bin, cuda_bin, _, _, _, cap, ref_case = PARITY[case]
        if ref_case is not None:
            continue  # compared with another case's reference
        if not staged(opt.bin, cuda_bin):
            print(f"{case}: {cuda_bin} not staged: no reference", flush=True)
            continue
        t0 = time.monotonic()
        ck, losses = train(find_c(opt.build, c_bin), opt.stage, case, work, threads)
        summary, meta = summarise(ck, cap)
        save_ref(os.path.join(refs, f"parity_{case}.npz"), losses, summary, meta)
        os.remove(ck)
        print(f"{case}: {len(losses)} losses ({losses[0]:.5f} .. {losses[-1]:.5f}), {len(summary)} tensors "
              f"[{time.monotonic() - t0:.1f} s]", flush=True)
    for model in GENERATE:
        if not opt.only or model in opt.only:
            make_generate(opt, work, threads, model)


def params_only(src, dst):
    tensors, meta, _ = u.read_safetensors(src)
    keep = {k: v for k, v in tensors.items() if not k.endswith(OPT_SUFFIXES)}
    u.write_safetensors(dst, keep, meta)


def make_infer(opt, work, threads):
    import numpy as np
    if not staged(opt.bin, "fashion_mlp_cuda_infer"):
        print("infer: fashion_mlp_cuda_infer not staged: no reference", flush=True)
        return
    out = u.fresh_dir(os.path.join(opt.stage, "refs", "infer_fashion_mlp"))
    ck = os.path.join(work, "infer.safetensors")
    u.run([find_c(opt.build, "fashion_mlp_train")] + data_flags(opt.stage, "fashion") + threads +
          ["--steps", "20", "--batch", "128", "--seed", "1", "--quiet", "--log-every", "0", "--checkpoint", ck])
    params_only(ck, os.path.join(out, "weights.safetensors"))
    printed, _ = u.run([find_c(opt.build, "fashion_mlp_infer"), "--weights", os.path.join(out, "weights.safetensors"),
                        "--output", os.path.join(out, "logits.npy"), "--metric"] + threads + infer_inputs(opt.stage))
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({k: u.printed_value(printed, f"test {k}") for k in ("loss", "accuracy")}, f)
    print(f"infer: fashion_mlp logits {np.load(os.path.join(out, 'logits.npy')).shape}", flush=True)


def infer_inputs(stage):
    f = os.path.join(stage, "data", "fashion")
    return [f"--input=image={f}/t10k-images-idx3-ubyte.gz", f"--input=label={f}/t10k-labels-idx1-ubyte.gz"]


def make_generate(opt, work, threads, model):
    c_train, c_infer, cuda_infer, steps, batch, tokens = GENERATE[model]
    if not staged(opt.bin, cuda_infer):
        print(f"generate {model}: {cuda_infer} not staged: no reference", flush=True)
        return
    out = u.fresh_dir(os.path.join(opt.stage, "refs", f"generate_{model}"))
    ck = os.path.join(work, f"generate_{model}.safetensors")
    u.run([find_c(opt.build, c_train)] + data_flags(opt.stage, "text") + threads +
          ["--steps", str(steps), "--batch", str(batch), "--seed", "1", "--quiet", "--log-every", "0",
           "--checkpoint", ck])
    weights = os.path.join(out, "weights.safetensors")
    params_only(ck, weights)
    p = subprocess.run([find_c(opt.build, c_infer), "--weights", weights, "--generate", str(tokens), "--prompt",
                        PROMPT, "--temperature", "0"] + threads, capture_output=True)
    u.check(p.returncode == 0, f"generate {model}: C exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(p.stdout)
    print(f"generate {model}: {p.stdout!r}", flush=True)


# --------------------------------------------------------------------------- there: checks

def brief(e):
    """A failure in a few lines: its first line (a failed command's program, not its whole command
    line), then the last lines of the program's stderr when the message carries them."""
    lines = str(e).splitlines() or [type(e).__name__]
    first = lines[0]
    if first.startswith("exit status") and " of: " in first:
        head, cmd = first.split(" of: ", 1)
        first = f"{head} of {os.path.basename(cmd.split()[0])}"
    tail = []
    if "--- stderr (tail)" in lines:
        tail = [ln for ln in lines[lines.index("--- stderr (tail)") + 1:] if ln.strip()][-3:]
    return "\n".join([first[:300]] + ["    " + ln[:300] for ln in tail])


class Results:
    def __init__(self):
        self.failed, self.passed, self.skipped = [], [], []

    def skip(self, case, why):
        print(f"skip {case}: {why}", flush=True)
        self.skipped.append(case)

    def run(self, case, fn):
        t0 = time.monotonic()
        try:
            fn()
        except (u.Failure, subprocess.TimeoutExpired, OSError) as e:
            print(f"FAIL {case}: {brief(e)} [{time.monotonic() - t0:.1f} s]", flush=True)
            self.failed.append(case)
            return
        print(f"pass {case} [{time.monotonic() - t0:.1f} s]", flush=True)
        self.passed.append(case)

    def finish(self, what):
        failed = ": " + ", ".join(self.failed) if self.failed else ""
        print(f"{what}: {len(self.passed)} passed, {len(self.failed)} failed{failed}, {len(self.skipped)} skipped",
              flush=True)
        return 1 if self.failed else 0


def parity(opt):
    import numpy as np
    res = Results()
    work = u.fresh_dir(opt.work)
    for case in cases_here(opt.only):
        _, cuda_bin, _, _, tol_name, cap, ref_case = PARITY[case]
        ref = os.path.join(opt.stage, "refs", f"parity_{ref_case or case}.npz")
        binary = staged(opt.bin, cuda_bin)
        if not binary or not os.path.isfile(ref):
            res.skip(case, f"{cuda_bin if not binary else ref} not staged")
            continue

        def one(case=case, binary=binary, ref=ref, tol=TOL[tol_name], cap=cap, tol_name=tol_name):
            ref_losses, ref_sum = load_ref(ref)
            ck, losses = train(binary, opt.stage, case, work, [])
            u.check(len(losses) == len(ref_losses), f"{len(losses)} losses, the reference has {len(ref_losses)}")
            loss_rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref_losses))
            summary, _ = summarise(ck, cap)
            os.remove(ck)
            u.check(sorted(summary) == sorted(ref_sum), f"tensor names differ: {sorted(set(summary) ^ set(ref_sum))}")
            worst, worst_name, bad = -1.0, "", []
            for name, (shape, norm, sample) in sorted(ref_sum.items()):
                g_shape, g_norm, g_sample = summary[name]
                u.check(g_shape == shape, f"{name}: shape {g_shape} vs {shape}")
                sample, g_sample = sample.astype(np.float64), g_sample.astype(np.float64)
                scale = np.linalg.norm(sample)
                rel = float(np.linalg.norm(g_sample - sample) / scale) if scale > 0 else float(np.linalg.norm(g_sample))
                rel = max(rel, abs(g_norm - norm) / norm if norm > 0 else g_norm)
                if rel > worst:
                    worst, worst_name = rel, name
                if not math.isfinite(rel) or rel > tol["state"]:
                    bad.append(f"{name} {rel:.2e}")
            print(f"  {case} ({tol_name}): losses {losses[0]:.5f} .. {losses[-1]:.5f}, worst loss rel {loss_rel:.2e} "
                  f"(tol {tol['loss']:.0e}); {len(summary)} tensors, worst state rel {worst:.2e} in {worst_name} "
                  f"(tol {tol['state']:.0e})", flush=True)
            u.check(math.isfinite(loss_rel) and loss_rel <= tol["loss"],
                    f"losses: worst relative difference {loss_rel:.3e} > {tol['loss']:.0e}: "
                    f"cuda {losses} vs c {ref_losses}")
            u.check(not bad, f"{len(bad)} tensors past {tol['state']:.0e}: {', '.join(bad[:8])}")

        res.run(case, one)
    return res.finish("parity")


def infer(opt):
    import numpy as np
    res = Results()
    work = u.fresh_dir(opt.work)
    ref = os.path.join(opt.stage, "refs", "infer_fashion_mlp")
    binary = staged(opt.bin, "fashion_mlp_cuda_infer")
    if not binary or not os.path.isdir(ref):
        res.skip("infer fashion_mlp", "fashion_mlp_cuda_infer or its reference not staged")
        return res.finish("infer")

    def one():
        out = os.path.join(work, "cuda.npy")
        printed, _ = u.run([binary, "--weights", os.path.join(ref, "weights.safetensors"), "--output", out,
                            "--metric"] + infer_inputs(opt.stage))
        a, b = np.load(os.path.join(ref, "logits.npy")).astype(np.float64), np.load(out).astype(np.float64)
        u.check(a.shape == b.shape, f"logits shape {b.shape}, C's {a.shape}")
        rel = np.linalg.norm(a - b) / np.linalg.norm(a)
        with open(os.path.join(ref, "metrics.json")) as f:
            want = json.load(f)
        got = {k: u.printed_value(printed, f"test {k}") for k in ("loss", "accuracy")}
        print(f"  logits {b.shape}: relative l2 {rel:.2e} (tol 1e-4), max |diff| {np.max(np.abs(a - b)):.2e}; "
              f"test loss {got['loss']} / {want['loss']}, accuracy {got['accuracy']} / {want['accuracy']} (cuda / c)",
              flush=True)
        u.check(rel <= 1e-4, f"logits differ: relative {rel:.3e} > 1e-4")
        for k in got:
            u.check(abs(got[k] - want[k]) <= 2e-4, f"test {k}: {got[k]} vs C's {want[k]}")

    res.run("infer fashion_mlp", one)
    return res.finish("infer")


def generate(opt):
    res = Results()
    for model, (_, _, cuda_infer, _, _, tokens) in GENERATE.items():
        ref = os.path.join(opt.stage, "refs", f"generate_{model}")
        binary = staged(opt.bin, cuda_infer)
        if not binary or not os.path.isdir(ref):
            res.skip(f"generate {model}", f"{cuda_infer} or its reference not staged")
            continue

        def one(binary=binary, ref=ref, tokens=tokens):
            with open(os.path.join(ref, "tokens.bin"), "rb") as f:
                want = f.read()
            p = subprocess.run([binary, "--weights", os.path.join(ref, "weights.safetensors"), "--generate",
                                str(tokens), "--prompt", PROMPT, "--temperature", "0"],
                               capture_output=True, timeout=300)
            u.check(p.returncode == 0, f"exit {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
            got = p.stdout
            same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            print(f"  cuda {got!r}\n  c    {want!r}", flush=True)
            u.check(got == want, f"T = 0 output differs from C's from byte {same} (prompt {len(PROMPT)} bytes; "
                    f"{len(got)} vs {len(want)} bytes)")

        res.run(f"generate {model}", one)
    return res.finish("generate")


def list_cases(opt):
    for case in cases_here(None):
        c_bin, cuda_bin, kind, args, tol, _, ref_case = PARITY[case]
        have = ""
        if opt.stage:
            ref = os.path.join(opt.stage, "refs", f"parity_{ref_case or case}.npz")
            have = "  [staged]" if staged(opt.bin, cuda_bin) and os.path.isfile(ref) else "  [not staged]"
        print(f"parity {case}: {cuda_bin} vs C {c_bin or PARITY[ref_case][0]} on {kind}, {' '.join(args)}, "
              f"tol {tol} {TOL[tol]}{have}")
    have = ""
    if opt.stage:
        ok = (staged(opt.bin, "fashion_mlp_cuda_infer") and
              os.path.isdir(os.path.join(opt.stage, "refs", "infer_fashion_mlp")))
        have = "  [staged]" if ok else "  [not staged]"
    print(f"infer fashion_mlp: fashion_mlp_cuda_infer vs C's logits and test metrics{have}")
    for model, (_, _, cuda_infer, steps, _, tokens) in GENERATE.items():
        have = ""
        if opt.stage:
            ok = staged(opt.bin, cuda_infer) and os.path.isdir(os.path.join(opt.stage, "refs", f"generate_{model}"))
            have = "  [staged]" if ok else "  [not staged]"
        print(f"generate {model}: {cuda_infer} --generate {tokens} at T = 0 vs C's (trained {steps} steps by C){have}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["make", "parity", "infer", "generate", "list"])
    ap.add_argument("--stage")
    ap.add_argument("--bin", help="the staged programs (default STAGE/bin; `run` unpacks STAGE/bin.tar.xz elsewhere)")
    ap.add_argument("--build")
    ap.add_argument("--work")
    ap.add_argument("--only", type=lambda s: [c for c in s.split(",") if c], default=None)
    ap.add_argument("--threads", type=int, default=2)
    opt = ap.parse_args()
    if opt.mode != "list" and not opt.stage:
        ap.error("--stage DIR is required")
    if opt.mode == "make" and not opt.build:
        ap.error("make needs --build DIR (the C programs)")
    if opt.mode in ("parity", "infer", "generate") and not opt.work:
        ap.error(f"{opt.mode} needs --work DIR")
    if opt.stage and not opt.bin:
        opt.bin = os.path.join(opt.stage, "bin")
    if opt.mode != "list":
        u.need_numpy()
    try:
        rc = {"make": lambda: make(opt) or 0, "parity": lambda: parity(opt), "infer": lambda: infer(opt),
              "generate": lambda: generate(opt), "list": lambda: list_cases(opt)}[opt.mode]()
    except u.Failure as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
