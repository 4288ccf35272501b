#!/usr/bin/env python3
"""A generated training program (fashion_mlp_train) against what kills or poisons real runs.

  robustness.py --case CASE --trainer BIN --fashion DIR --work DIR [--small]

  diverge       --resume good --checkpoint good --lr 1e6: exit 1, "training diverged", the good
                checkpoint byte-identical (and the metrics log cut back on the next resume); a
                test loss that turns nan (params finite but overflowing) likewise
  nan_data      one nan pixel in an .npy file, inf and 1e999 in a CSV file, a nan in a float32
                IDX file, a nan param in --init: each refused with exit 1, naming the file, the
                example and the value, before anything is trained or written
  sigterm       SIGTERM from outside (as `timeout`, `docker stop`, Slurm send) mid-epoch: the
                step finishes, the checkpoint is saved, exit 143; --resume then ends with the
                uninterrupted run's checkpoint and metrics log, byte for byte
  killed_save   SIGKILL while a checkpoint is being written leaves PATH.tmp.<pid>; the next
                run removes it (and only temporaries of processes that no longer run)
  crash_resume  SIGKILL past the last checkpoint, then --resume: the metrics log has every
                step once and equals the uninterrupted run's

On the first 2048 examples of Fashion-MNIST (.npy files), batch 64 (--small: 256, batch 32).
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def error_line(stderr, *needles):
    """stderr is one '<prog>: error: ...' line holding every needle."""
    lines = stderr.strip().splitlines()
    u.check(len(lines) == 1 and ": error: " in lines[0], f"expected one error line, got:\n{stderr}")
    for n in needles:
        u.check(n in lines[0], f"expected '{n}' in: {lines[0]}")
    return lines[0]


def start(cmd):
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_step(p, step, spe):
    """Reads the progress lines ("epoch E/N  step S/T ...", one per step with --log-every 1 off
    a terminal) until the run has done `step` steps in all."""
    for line in p.stdout:
        m = re.match(r"epoch (\d+)/\d+  step (\d+)/", line)
        if m and (int(m.group(1)) - 1) * spe + int(m.group(2)) >= step:
            return
    raise u.Failure(f"the trainer ended before step {step}: exit {p.wait()}\n{p.stderr.read()}")


def case_diverge(opt, common, work, paths):
    good = os.path.join(work, "good.safetensors")
    metrics = os.path.join(work, "good.jsonl")
    u.run(common + ["--epochs", "1", "--checkpoint", good, "--metrics", metrics])
    before = read_bytes(good)
    step = u.read_safetensors(good)[1]["step"]
    _, err = u.run(common + ["--resume", good, "--checkpoint", good, "--metrics", metrics, "--epochs", "3",
                             "--lr", "1e6"], expect_rc=1)
    line = error_line(err, "training diverged at step ", f"{good} keeps step {step}")
    print(line)
    u.check(read_bytes(good) == before, "the good checkpoint changed")
    u.check(not [f for f in os.listdir(work) if ".tmp." in f], "a temporary file was left")
    # The records the diverged run wrote after step `step` go when the run resumes from it.
    n_logged = len(u.read_jsonl(metrics))
    out, _ = u.run(common + ["--resume", good, "--metrics", metrics, "--epochs", "2"])
    records = u.read_jsonl(metrics)
    steps = [r["step"] for r in records if "loss" in r]  # the per-step records
    u.check(steps == sorted(set(steps)), f"a step is logged twice: {steps}")
    print(f"metrics log: {n_logged} lines after the diverged run; {len(records)} after the resumed one")
    # An epoch of one batch at lr 1e30: its step's loss is finite (computed before the update),
    # the params after it finite but so large that the test set's loss is nan: diverged too,
    # exit 1, the good checkpoint kept (it used to end with exit 0, 'test loss: nan', the
    # checkpoint overwritten).
    one = u.fashion_subset(paths, u.fresh_dir(os.path.join(work, "one")), 64, 100)
    base = [opt.trainer] + u.data_flags(one) + ["--batch", "64", "--seed", "3", "--quiet", "--threads", "1"]
    good1 = os.path.join(work, "one", "good.safetensors")
    u.run(base + ["--steps", "2", "--checkpoint", good1])
    before = read_bytes(good1)
    _, err = u.run(base + ["--resume", good1, "--checkpoint", good1, "--epochs", "4", "--lr", "1e30"], expect_rc=1)
    print(error_line(err, "training diverged at step 3: the test loss is nan", f"{good1} keeps step 2"))
    u.check(read_bytes(good1) == before, "the good checkpoint changed (test loss nan)")


def case_nan_data(opt, paths, work, n):
    import numpy as np
    image = np.ascontiguousarray(u.read_idx(paths["train_image"])[:n]).astype(np.float32)
    label = np.ascontiguousarray(u.read_idx(paths["train_label"])[:n])
    lab = os.path.join(work, "label.npy")
    np.save(lab, label)
    ck = os.path.join(work, "ck.safetensors")

    def refused(img_path, *needles):
        _, err = u.run([opt.trainer, f"--data=image={img_path}", f"--data=label={lab}", "--checkpoint", ck],
                       expect_rc=1)
        print(error_line(err, img_path, *needles))
        u.check(not os.path.exists(ck), "a checkpoint was written")

    bad = image.copy()
    bad[17, 5, 9] = np.nan  # example 17, value 5 * 28 + 9
    np.save(os.path.join(work, "nan.npy"), bad)
    refused(os.path.join(work, "nan.npy"), "example 17, value 149: nan")
    flat = image.reshape(n, 784)
    for token, msg in (("inf", "is not a finite number"), ("1e999", "is too large for float32")):
        path = os.path.join(work, f"{token}.csv")
        with open(path, "w") as f:
            for e in range(n):
                row = [f"{v:g}" for v in flat[e]]
                if e == 3:
                    row[100] = token
                f.write(",".join(row) + "\n")
        refused(path, f"line 4: field 101 ('{token}') {msg}")
    idx = os.path.join(work, "nan-images-idx3-float")
    bad = image.copy()
    bad[n - 1, 27, 27] = np.nan
    with open(idx, "wb") as f:
        f.write(bytes([0, 0, 0x0D, 3]) + np.array([n, 28, 28], dtype=">u4").tobytes())
        f.write(bad.astype(">f4").tobytes())
    refused(idx, f"example {n - 1}, value 783: nan")
    # A nan param for --init: refused before anything is trained.
    good = os.path.join(work, "init.safetensors")
    np.save(os.path.join(work, "image.npy"), image)
    u.run([opt.trainer, f"--data=image={os.path.join(work, 'image.npy')}", f"--data=label={lab}", "--epochs", "0",
           "--checkpoint", good])
    tensors, meta, _ = u.read_safetensors(good)
    tensors = {k: v.copy() for k, v in tensors.items() if "." not in k}
    tensors["w2"][3, 4] = np.inf
    init = os.path.join(work, "nan_init.safetensors")
    u.write_safetensors(init, tensors)
    _, err = u.run([opt.trainer, f"--data=image={os.path.join(work, 'image.npy')}", f"--data=label={lab}",
                    "--init", init, "--checkpoint", ck], expect_rc=1)
    print(error_line(err, init, "param 'w2' holds a non-finite value (inf) at element "))
    u.check(not os.path.exists(ck), "a checkpoint was written")


def case_sigterm(opt, common, work, spe):
    a_ck, a_m = os.path.join(work, "a.safetensors"), os.path.join(work, "a.jsonl")
    b_ck, b_m = os.path.join(work, "b.safetensors"), os.path.join(work, "b.jsonl")
    u.run(common + ["--epochs", "2", "--checkpoint", a_ck, "--metrics", a_m])
    loud = [c for c in common if c != "--quiet"]
    p = start(loud + ["--epochs", "2", "--checkpoint", b_ck, "--metrics", b_m])
    wait_for_step(p, spe + 2, spe)  # in epoch 2, after its first checkpoint
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=600)
    u.check(p.returncode == 143, f"exit status {p.returncode} after SIGTERM, expected 143; stderr:\n{err}")
    step = int(u.read_safetensors(b_ck)[1]["step"])
    u.check(f"interrupted by SIGTERM after step {step}; checkpoint saved to {b_ck}" in err, f"stderr: {err}")
    u.check(spe + 2 <= step < 2 * spe, f"stopped at step {step}, expected mid-epoch 2 ({spe} steps per epoch)")
    print(f"SIGTERM: stopped at step {step} of {2 * spe}, checkpoint saved")
    u.run(common + ["--resume", b_ck, "--epochs", "2", "--checkpoint", b_ck, "--metrics", b_m])
    u.check(read_bytes(a_ck) == read_bytes(b_ck), "the resumed run's checkpoint differs from the uninterrupted one's")
    u.check(u.log_lines(a_m) == u.log_lines(b_m), "the resumed run's metrics log differs from the uninterrupted one's")


def case_killed_save(opt, paths, work):
    # One step per epoch (64 examples, batch 64), so that most of the time goes to the saves.
    files = u.fashion_subset(paths, work, 64, 64)
    common = [opt.trainer] + u.data_flags(files, test=False) + ["--batch", "64", "--quiet", "--threads", "1"]
    ck = os.path.join(work, "ck.safetensors")
    # A temporary of a process that no longer runs (a child that has exited) and one of a live
    # process (this one): only the first goes.
    child = subprocess.Popen(["true"])
    child.wait()
    dead, live = f"{ck}.tmp.{child.pid}", f"{ck}.tmp.{os.getpid()}"
    for path in (dead, live):
        with open(path, "wb") as f:
            f.write(b"partial")
    _, err = u.run(common + ["--epochs", "0", "--checkpoint", ck])
    u.check("removed 1 temporary file of" in err, f"stderr: {err}")
    u.check(not os.path.exists(dead) and os.path.exists(live), "the wrong temporary was removed")
    os.remove(live)
    # Killed while saving: every epoch (one step) ends with a save of the whole state (params
    # and momentum, 5.4 MB, written and fsync'ed), so a kill at a random time soon lands in one.
    loud = [c for c in common if c != "--quiet"] + ["--log-every", "1"]
    for tries in range(1, 101):
        p = start(loud + ["--epochs", "100000", "--checkpoint", ck])
        wait_for_step(p, 1, 1)
        time.sleep(0.02 + 0.007 * (tries % 13))
        p.kill()
        p.communicate()
        left = [f for f in os.listdir(work) if f.startswith("ck.safetensors.tmp.")]
        if left:
            break
    print(f"SIGKILL during a save: {left} left after {tries} tries")
    u.check(left, "no kill landed in a save")
    _, err = u.run(common + ["--epochs", "1", "--checkpoint", ck])
    u.check("removed 1 temporary file of" in err, f"stderr: {err}")
    u.check(not [f for f in os.listdir(work) if ".tmp." in f], "a temporary file is still there")


def case_crash_resume(opt, common, work, spe):
    a_ck, a_m = os.path.join(work, "a.safetensors"), os.path.join(work, "a.jsonl")
    b_ck, b_m = os.path.join(work, "b.safetensors"), os.path.join(work, "b.jsonl")
    u.run(common + ["--epochs", "2", "--checkpoint", a_ck, "--metrics", a_m])
    loud = [c for c in common if c != "--quiet"]
    p = start(loud + ["--epochs", "2", "--checkpoint", b_ck, "--metrics", b_m])
    wait_for_step(p, spe + 3, spe)
    p.kill()
    p.communicate()
    step = int(u.read_safetensors(b_ck)[1]["step"])
    logged = [r["step"] for r in u.read_jsonl(b_m) if "loss" in r]
    print(f"SIGKILL at step {max(logged)}: checkpoint at step {step}")
    u.check(max(logged) > step, "the crash did not come after the checkpoint")
    out, _ = u.run(common + ["--resume", b_ck, "--epochs", "2", "--checkpoint", b_ck, "--metrics", b_m])
    steps = [r["step"] for r in u.read_jsonl(b_m) if "loss" in r]
    u.check(steps == sorted(set(steps)), f"a step is logged twice: {steps}")
    u.check(u.log_lines(a_m) == u.log_lines(b_m), "the metrics log differs from the uninterrupted run's")
    u.check(read_bytes(a_ck) == read_bytes(b_ck), "the checkpoint differs from the uninterrupted run's")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=("diverge", "nan_data", "sigterm", "killed_save", "crash_resume"))
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--fashion", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--small", action="store_true", help="less data (sanitiser builds)")
    opt = ap.parse_args()
    u.need_numpy()
    paths = u.need_fashion(opt.fashion)
    work = u.fresh_dir(opt.work)
    n, batch = (256, 32) if opt.small else (2048, 64)
    spe = -(-n // batch)
    if opt.case == "nan_data":
        return case_nan_data(opt, paths, work, n)
    if opt.case == "killed_save":
        return case_killed_save(opt, paths, work)
    files = u.fashion_subset(paths, work, n, 200)
    common = [opt.trainer] + u.data_flags(files, test=False) + ["--batch", str(batch), "--seed", "3",
                                                                 "--log-every", "1", "--quiet", "--threads", "1"]
    if opt.case == "diverge":
        case_diverge(opt, common, work, paths)
    elif opt.case == "sigterm":
        case_sigterm(opt, common, work, spe)
    else:
        case_crash_resume(opt, common, work, spe)


if __name__ == "__main__":
    u.run_main(main)
