#!/usr/bin/env python3
"""Parity of dropout and batch_norm (issue 20) with PyTorch: the generated bn_mlp trainer and
inference program against nn.BatchNorm1d(affine=False) and nn.Dropout.

  parity_bn.py --trainer BIN --infer BIN --work DIR [--seed N]

tests/e2e/specs/bn_mlp.cannl: 6-16-12-3, linear -> batch_norm -> relu -> dropout(p = 0) twice
(the second batch norm with eps = 1e-3, momentum = 0.2 and a learned gain), sgd(lr = 0.1,
momentum = 0.9), mean cross-entropy. The PyTorch twin is an nn.Module whose state_dict keys
(l1.weight, bn1.running_mean, bn1.num_batches_tracked, ...) differ from cannl's names: a name
map file (`w1 = l1.weight`, `h1.running_mean = bn1.running_mean`, ...) is given to the
trainer and to the inference program, so every file below is in PyTorch's names.

1. Training: both start from the PyTorch module's state_dict (random weights and biases, a
   random gain, and random running statistics with num_batches_tracked = 3, an int64 tensor
   as PyTorch saves it), saved as safetensors and read by the trainer with --init and the
   name map; 6 steps of 32 examples in file order. PyTorch float64 in train mode is the
   reference. A float64 trainer: every loss, param, momentum buffer, running_mean,
   running_var and num_batches_tracked of the final checkpoint within 1e-9 (max norm,
   relative); a float32 trainer: losses within 1e-4, tensors within 1e-2 (l2 norm). The
   momentum buffers of b1 and b2 (zero gradients: each is added before a batch norm) are
   rounding noise on both sides, held to 1e-12 absolute (1e-6 for float32).
2. The checkpoint loads into the PyTorch module (load_state_dict, strict: the batch-norm
   statistics into nn.BatchNorm1d's buffers; num_batches_tracked equal to 3 + 6).
3. Eval: the inference program (--weights the checkpoint, the name map) on 300 test examples
   in batches of 256 against that module in model.eval() (running statistics): within 1e-9
   (float64) or 1e-5 (float32) relative, max norm.
4. Batch independence: each of 5 examples run alone (--batch 1) gives the output it gets
   inside a batch of 256, within 1e-6 relative (eval mode reads no batch statistics).
5. A training step on a batch of one example (one value per channel, which PyTorch refuses)
   blends a variance of 0 into running_var: 0.9 times the initial one, nothing infinite.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from parity import TOL_F32_LOSS, TOL_F32_PARAM_L2, TOL_F64, loss_failures, paired_tensors, rel_err  # noqa: E402

NAME_MAP = """# cannl name = PyTorch state_dict key
w1 = l1.weight
b1 = l1.bias
w2 = l2.weight
b2 = l2.bias
w3 = l3.weight
b3 = l3.bias
g2 = g2
h1.running_mean = bn1.running_mean
h1.running_var = bn1.running_var
h1.num_batches_tracked = bn1.num_batches_tracked
h2.running_mean = bn2.running_mean
h2.running_var = bn2.running_var
h2.num_batches_tracked = bn2.num_batches_tracked
"""


# A bias added right before a batch norm has no effect on the loss: its gradient is zero in
# exact arithmetic and rounding noise (about 1e-17) in PyTorch's and cannl's, so its momentum
# buffer is compared in absolute terms: within NOISE of PyTorch's (NOISE_F32 for a float32
# trainer, whose gradients are float32 rounding noise, 1e-8).
NOISE, NOISE_F32 = 1e-12, 1e-6


def make_net(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(6, 16)
            self.bn1 = nn.BatchNorm1d(16, affine=False)
            self.l2 = nn.Linear(16, 12)
            self.bn2 = nn.BatchNorm1d(12, eps=1e-3, momentum=0.2, affine=False)
            self.g2 = nn.Parameter(torch.ones(12))
            self.l3 = nn.Linear(12, 3)
            self.drop = nn.Dropout(p=0.0)

        def forward(self, x):
            h1 = self.drop(torch.relu(self.bn1(self.l1(x))))
            h2 = self.drop(torch.relu(self.g2 * self.bn2(self.l2(h1))))
            return self.l3(h2)

    return Net()


def main():
    opt = u.parity_parser(2020, "--infer").parse_args()
    steps, batch = 6, 32

    torch = u.torch_one_thread()
    import numpy as np
    work = u.fresh_dir(opt.work)
    rng = np.random.default_rng(opt.seed)

    # data: 6 features on different scales (so the statistics matter), a class from them
    n_train, n_test = steps * batch, 300
    scale = np.array([1.0, 3.0, 0.5, 2.0, 1.5, 0.2])
    shift = np.array([0.5, -2.0, 1.0, 0.0, 3.0, -0.5])
    xs = rng.normal(size=(n_train + n_test, 6)) * scale + shift
    cls = (xs[:, 0] + xs[:, 1] * 0.3 - xs[:, 4] > 0).astype(np.int64) + (xs[:, 3] > 1).astype(np.int64)
    ys = np.eye(3)[cls]
    files = {}
    for name, arr in (("x", xs[:n_train]), ("y", ys[:n_train]), ("tx", xs[n_train:]), ("ty", ys[n_train:])):
        files[name] = os.path.join(work, f"{name}.npy")
        np.save(files[name], arr.astype(np.float64))
    name_map = os.path.join(work, "names.txt")
    with open(name_map, "w") as f:
        f.write(NAME_MAP)

    # the initial state: PyTorch's module, its state_dict saved as safetensors
    torch.manual_seed(opt.seed)
    ref = make_net(torch).double()
    with torch.no_grad():
        ref.g2.copy_(torch.tensor(rng.uniform(0.5, 1.5, 12)))
        for bn, c in ((ref.bn1, 16), (ref.bn2, 12)):
            bn.running_mean.copy_(torch.tensor(rng.normal(size=c)))
            bn.running_var.copy_(torch.tensor(rng.uniform(0.5, 2.0, c)))
            bn.num_batches_tracked.fill_(3)
    init = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    u.check(init["bn1.num_batches_tracked"].dtype == np.int64, "num_batches_tracked is not int64 in PyTorch")
    init_path = os.path.join(work, "init.safetensors")
    u.write_safetensors(init_path, init, {"note": "e2e bn_mlp parity init (a PyTorch state_dict)"})

    # 1. training
    ckpt = os.path.join(work, "out.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    u.run([opt.trainer, f"--data=x={files['x']}", f"--data=y={files['y']}", "--steps", str(steps),
           "--batch", str(batch), "--no-shuffle", "--threads", "1", "--init", init_path, "--name-map", name_map,
           "--checkpoint", ckpt, "--metrics", metrics, "--log-every", "1", "--quiet"])
    got, meta, header = u.read_safetensors(ckpt)
    f64 = header["l1.weight"]["dtype"] == "F64"
    got_losses = u.step_losses(u.read_jsonl(metrics))
    u.check([s for s, _ in got_losses] == list(range(1, steps + 1)), f"metrics log steps {got_losses}")

    ref.train()
    optim = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    want_losses = []
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        logits = ref(torch.tensor(xs[sl]))
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(cls[sl]))
        optim.zero_grad()
        loss.backward()
        optim.step()
        want_losses.append(float(loss))
    want = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    for name, p in ref.named_parameters():
        want[f"{name}.momentum_buffer"] = optim.state[p]["momentum_buffer"].numpy()

    failures, worst = loss_failures(got_losses, want_losses, TOL_F64 if f64 else TOL_F32_LOSS)
    print(f"cannl {header['l1.weight']['dtype']} vs PyTorch float64 (train mode); losses: cannl "
          f"{[round(v, 6) for _, v in got_losses]}, torch {[round(v, 6) for v in want_losses]}, worst {worst:.3e}")
    print(f"{'':<34} {'max|a-b|/max|b|':>16} {'||a-b||/||b||':>16}")
    for tname, a, b in paired_tensors(got, want, failures):
        if float(np.max(np.abs(b))) < NOISE:  # b1's, b2's gradients (see NOISE): absolute errors
            d = float(np.max(np.abs(np.asarray(a, np.float64) - b)))
            print(f"{tname:<34} {'|a-b| ' + format(d, '.3e'):>16} {'(zero in exact arithmetic)':>16}")
            if not d <= (NOISE if f64 else NOISE_F32):
                failures.append(f"{tname}: max |a - b| = {d:.3g} where PyTorch's is zero up to rounding")
            continue
        e = {k: rel_err(a, b, k) for k in ("max", "l2")}
        print(f"{tname:<34} {e['max']:>16.3e} {e['l2']:>16.3e}")
        if f64 and not e["max"] <= TOL_F64:
            failures.append(f"{tname}: relative error (max norm) {e['max']:.3g} > {TOL_F64}")
        if not f64 and not e["l2"] <= TOL_F32_PARAM_L2:
            failures.append(f"{tname}: relative error (l2 norm) {e['l2']:.3g} > {TOL_F32_PARAM_L2}")
    moved = rel_err(got["bn1.running_mean"], init["bn1.running_mean"])
    u.check(moved > 1e-2, f"the running mean barely moved ({moved:.3g}): nothing was compared")
    if failures:
        raise u.Failure("bn_mlp training parity with PyTorch float64:\n  " + "\n  ".join(failures))

    # 2. the checkpoint into PyTorch's module
    loaded = make_net(torch).double()
    state = {k: torch.tensor(np.array(v)) for k, v in got.items() if not k.endswith(".momentum_buffer")}
    loaded.load_state_dict(state, strict=True)
    tracked = int(loaded.bn1.num_batches_tracked)
    u.check(tracked == 3 + steps and loaded.bn1.num_batches_tracked.dtype == torch.int64,
            f"bn1.num_batches_tracked after loading: {loaded.bn1.num_batches_tracked!r}, expected {3 + steps}")
    print(f"checkpoint loaded into nn.BatchNorm1d (strict): num_batches_tracked {tracked}")

    # 3. eval mode: the inference program against model.eval()
    out = os.path.join(work, "eval.npy")
    u.run([opt.infer, "--weights", ckpt, "--name-map", name_map, f"--input=x={files['tx']}", "--batch", "256",
           "--output", out, "--threads", "1"])
    mine = np.load(out)
    loaded.eval()
    with torch.no_grad():
        theirs = loaded(torch.tensor(xs[n_train:])).numpy()
    e = rel_err(mine, theirs)
    tol = TOL_F64 if f64 else 1e-5
    print(f"eval outputs of {n_test} examples vs model.eval(): relative error (max norm) {e:.3e} (limit {tol})")
    u.check(e <= tol, f"eval outputs differ from PyTorch model.eval(): {e:.3g} > {tol}")

    # 4. one example alone against the same inside a batch of 256
    worst = 0.0
    for i in (0, 7, 100, 255, 299):
        one = os.path.join(work, f"one_{i}.npy")
        np.save(one, xs[n_train + i:n_train + i + 1])
        alone = os.path.join(work, f"alone_{i}.npy")
        u.run([opt.infer, "--weights", ckpt, "--name-map", name_map, f"--input=x={one}", "--batch", "1",
               "--output", alone])
        worst = max(worst, rel_err(np.load(alone)[0], mine[i]))
    print(f"an example alone vs inside a batch of 256: relative error (max norm) {worst:.3e} (limit 1e-6)")
    u.check(worst <= 1e-6, f"an example alone gives another output than inside a batch: {worst:.3g}")

    # 5. a step on one example (one value per channel: PyTorch refuses it) blends in variance 0
    one_ckpt = os.path.join(work, "one.safetensors")
    u.run([opt.trainer, f"--data=x={files['x']}", f"--data=y={files['y']}", "--steps", "1", "--batch", "1",
           "--no-shuffle", "--init", init_path, "--name-map", name_map, "--checkpoint", one_ckpt, "--quiet"])
    t1, _, _ = u.read_safetensors(one_ckpt)
    want_var = 0.9 * init["bn1.running_var"]
    e1 = rel_err(t1["bn1.running_var"], want_var)
    u.check(e1 <= (TOL_F64 if f64 else 1e-6), f"running_var after a step on one example: {t1['bn1.running_var']}, "
            f"expected 0.9 * the initial ({want_var})")
    print(f"a step on one example: running_var = 0.9 running_var (variance 0), error {e1:.1e}")
    print(f"PARITY bn_mlp {header['l1.weight']['dtype']}: {steps} sgd steps of {batch} in train mode, "
          f"{len(want)} tensors; eval {e:.1e}; alone vs batch {worst:.1e}")


if __name__ == "__main__":
    u.run_main(main)
