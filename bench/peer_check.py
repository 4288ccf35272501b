"""peer_check.py — that the peers of bench/peers.py do cannl's work: the losses of the first steps, from the
same init and batches, in cannl's trainer and in each peer (run it with the peers' virtual environment's
python; bench/peers.sh --check runs it before the timing).

Usage: peer_check.py BENCH_DIR MODEL [MODEL ...]

Models: llama_char, gru_rows (the zoo's models whose PyTorch peer has a name map onto the spec's params). The
PyTorch peer's initial params (bench/peer_torch.py's setup: the seeded init) are written as safetensors with a
--name-map (llama_char: tests/e2e/parity_llama.py's map; gru_rows: nn.GRU's stacked gates split r, z, n as in
tests/e2e/parity_gru.py) and its first 3 batches as .npy files; cannl's training program
BENCH_DIR/<model>_train takes 3 steps on them (--no-shuffle --threads 1 --lr-schedule constant: the peers
keep the spec's lrs) and logs each step's loss, computed before its update. PyTorch 2 eager, torch.compile
(default mode) and JAX (bench/peer_jax.py: the same params and batches, its jitted step) take the same
steps, their timed step (bench/peer_torch.py's training_step, peer_jax.py's make_train_step). Step 0 is the
loss at the init: the same model; steps 1 and 2 compare the optimisers too (llama_char's Muon and AdamW
after clipping, gru_rows's Adam). Prints a markdown table: every loss, and the largest difference from
cannl's.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import peer_torch  # noqa: E402
import torch_gpt  # noqa: E402
from bench import MODELS as IMAGE_MODELS  # noqa: E402
from gpt_bench import MODELS as GPT_MODELS  # noqa: E402

CHECKED = ("llama_char", "gru_rows")
STEPS = 3


def cannl_init(name, model):
    """The PyTorch peer's initial params under its names (stacked gates split) and the trainer's --name-map."""
    if name in torch_gpt.LLAMAS:
        return torch_gpt.llama_init(name, peer_torch.GPT_SHAPES[name][0], 0)
    state, lines = {}, ["w_out = out.weight", "b_out = out.bias"]
    for key, v in model.state_dict().items():
        if key.startswith("gru.") and key != "gru.bias_hh_l0":  # the spec has one bias per gate
            for gate, part in zip("rzn", torch.chunk(v, 3)):
                state[f"{key}.{gate}"] = part.contiguous()
        elif key.startswith("out."):
            state[key] = v
    for gate in "rzn":
        lines += [f"w{gate} = gru.weight_ih_l0.{gate}", f"u{gate} = gru.weight_hh_l0.{gate}",
                  f"b{gate} = gru.bias_ih_l0.{gate}"]
    return state, lines


def cannl_losses(bench, name, batch, inputs):
    """The losses of cannl's training program on the peer's init and batches (constant lr, as the peers)."""
    work = bench / "check" / name
    work.mkdir(parents=True, exist_ok=True)
    state, lines = cannl_init(name, inputs(0).get("model"))
    torch_gpt.write_safetensors(work / "init.safetensors", state)
    (work / "map.txt").write_text("".join(line + "\n" for line in lines))
    data = []
    for key in inputs(0):
        if key == "model":
            continue
        arr = torch.cat([inputs(k)[key] for k in range(STEPS)]).numpy()
        np.save(work / f"{key}.npy", arr.astype(np.int32 if arr.dtype == np.int64 else np.float32))
        data.append(f"--data={key}={work / f'{key}.npy'}")
    metrics = work / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    subprocess.run([bench / f"{name}_train", *data, "--steps", str(STEPS), "--batch", str(batch), "--no-shuffle",
                    "--threads", "1", "--lr-schedule", "constant", "--init", work / "init.safetensors",
                    "--name-map", work / "map.txt", "--metrics", metrics, "--log-every", "1", "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    recs = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return [r["loss"] for r in recs if "loss" in r and "step" in r]


def torch_losses(step):
    return [float(step().detach()) for _ in range(STEPS)]


def jax_losses(name, batch):
    import jax
    import peer_jax
    params, tx, state, loss_fn, next_batch = peer_jax.setup(name, batch)
    opt_state, step, out = tx.init(params), jax.jit(peer_jax.make_train_step(loss_fn, tx)), []
    for _ in range(STEPS):
        params, opt_state, state, loss = step(params, opt_state, state, *next_batch())
        out.append(float(loss))
    return out


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    bench = Path(sys.argv[1])
    torch.set_num_threads(1)
    print("| model | batch | step | cannl | PyTorch 2 eager | torch.compile | JAX jit "
          "| largest difference from cannl |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in sys.argv[2:]:
        if name not in CHECKED:
            print(f"peer_check.py: no check for '{name}' (checked: {' '.join(CHECKED)})", file=sys.stderr)
            continue
        batch = GPT_MODELS[name][1] if name in GPT_MODELS else IMAGE_MODELS[name][1][0][0]
        step, inputs = peer_torch.training_step(name, batch, "eager")
        cannl = cannl_losses(bench, name, batch, inputs)  # (before the peer's steps move its params)
        rows = list(zip(cannl, torch_losses(step), torch_losses(peer_torch.training_step(name, batch, "compile")[0]),
                        jax_losses(name, batch)))
        for s, losses in enumerate(rows):
            worst = max(abs(x - losses[0]) for x in losses[1:])
            print(f"| {name} | {batch} | {s} | " + " | ".join(f"{x:.6f}" for x in losses) + f" | {worst:.2e} |",
                  flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
