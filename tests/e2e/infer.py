#!/usr/bin/env python3
"""The inference program and embedded weights, on fashion_mlp.

  infer.py --case accuracy --trainer BIN --infer BIN --fashion DIR --work DIR [--small]
  infer.py --case embed --trainer BIN --cannl BIN --spec SPEC --cc CC --rt-lib LIB --rt-include DIR
           --fashion DIR --work DIR [--cflags FLAGS] [--rt-ldflags FLAGS] [--small]
  infer.py --case errors --trainer BIN --infer BIN --cannl BIN --spec SPEC --fashion DIR --work DIR
  infer.py --case nehalem --trainer BIN --infer BIN --fashion DIR --work DIR [--small]

accuracy: a few hundred steps of training with --test and --checkpoint; then
  `fashion_mlp_infer --weights CK --metric` prints the trainer's `test loss:` and
  `test accuracy:` lines exactly, and the logits of --output give that accuracy.
embed: `cannl gen --weights CK --embed` (--embed-format c and incbin) and a plain `cannl gen`, each compiled (same flags)
  into an inference program; the embedded one, run in an empty folder with the checkpoint
  gone, writes the same bits as the plain one with --weights (and as itself with --weights).
  Prints the sizes of both programs and the compile time of <model>_weights.c.
nehalem: the inference program, trained params, run under `qemu-x86_64 -cpu Nehalem` (no AVX)
  gives the same argmax per example as natively and logits within 1e-5 relative (skipped
  without qemu-user).
errors: bad flags, inputs, weights (another model's, missing or misshapen params, a non-finite
  value) and outputs give one `<prog>: error:` line naming the problem, exit status 2 (usage)
  or 1 (data, files), and no output file; `cannl gen --embed` with those checkpoints exits 1
  with `cannl: error: FILE: problem` and writes nothing.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402


def train(opt, paths, work, steps, n_train=60000):
    """Trains fashion_mlp for `steps` steps on the first n_train examples (6400 with --small);
    returns (checkpoint, trainer stdout, test files)."""
    n_test = 2000 if opt.small else 10000
    files = u.fashion_subset(paths, work, 6400 if opt.small else n_train, n_test)
    ck = os.path.join(work, "ck.safetensors")
    out, _ = u.run([opt.trainer, *u.data_flags(files), "--steps", str(steps), "--batch", "128", "--checkpoint", ck,
                    "--quiet"])
    return ck, out, files


def lines(stdout, prefix):
    return [l for l in stdout.splitlines() if l.startswith(prefix)]


def case_accuracy(opt, paths, work):
    import numpy as np
    ck, out, files = train(opt, paths, work, 60 if opt.small else 300)
    want = lines(out, "test ")
    u.check(any(l.startswith("test accuracy: ") for l in want), f"no test accuracy from the trainer:\n{out}")
    pred = os.path.join(work, "pred.npy")
    got, _ = u.run([opt.infer, "--weights", ck, "--input", f"image={files['test_image']}",
                    "--input", f"label={files['test_label']}", "--metric", "--output", pred])
    u.check(lines(got, "test ") == want, f"the inference program printed\n{got}\nbut the trainer\n" + "\n".join(want))
    logits = np.load(pred)
    labels = np.load(files["test_label"])
    u.check(logits.shape == (len(labels), 10) and logits.dtype == np.float32, f"pred.npy is {logits.dtype} {logits.shape}")
    acc = float((logits.argmax(axis=1) == labels).mean())
    printed = u.printed_value(out, "test accuracy")
    u.check(abs(acc - printed) <= 0.5e-4 + 1e-12, f"argmax of the logits gives accuracy {acc}, the trainer {printed}")
    # --batch changes the split but not the outputs (each example's logits are its own).
    pred7 = os.path.join(work, "pred7.npy")
    u.run([opt.infer, "--weights", ck, "--input", f"image={files['test_image']}", "--batch", "7", "--output", pred7])
    u.check(np.array_equal(np.load(pred7), logits), "--batch 7 gives other logits than --batch 128")
    # --output PATH.csv: the same logits as text, one line per example, that read back exactly.
    pred_csv = os.path.join(work, "pred.csv")
    u.run([opt.infer, "--weights", ck, "--input", f"image={files['test_image']}", "--output", pred_csv])
    with open(pred_csv, "rb") as f:
        u.check(not f.read(6).startswith(b"\x93NUMPY"), "pred.csv holds NumPy bytes")
    text = np.loadtxt(pred_csv, delimiter=",", dtype=np.float32, ndmin=2)
    u.check(np.array_equal(text, logits), f"pred.csv {text.shape} differs from pred.npy {logits.shape}")
    print(f"trainer and inference program: {' / '.join(want)}")


def case_nehalem(opt, paths, work):
    """A shipped inference program built here (the default flags: no -march=native) runs on a
    CPU without AVX, emulated by qemu-user as an Intel Nehalem (SSE4.2), with the same class
    for every example as natively and logits within 1e-5 relative (another instruction set
    rounds otherwise: cannl_rt.h, docs/gemm-tiles.md)."""
    import numpy as np
    qemu = shutil.which("qemu-x86_64")
    if not qemu:
        u.skip("qemu-x86_64 is not installed (Debian's qemu-user; scripts/install-deps.sh installs it)")
    ck, _, files = train(opt, paths, work, 40 if opt.small else 300, 6400)
    image = os.path.join(work, "image.npy")
    np.save(image, np.load(files["test_image"])[:500 if opt.small else 2000])
    native, emulated = os.path.join(work, "native.npy"), os.path.join(work, "nehalem.npy")
    u.run([opt.infer, "--weights", ck, "--input", f"image={image}", "--output", native])
    t0 = time.monotonic()
    _, err = u.run([qemu, "-cpu", "Nehalem", opt.infer, "--weights", ck, "--input", f"image={image}", "--output", emulated])
    secs = time.monotonic() - t0
    a, b = np.load(native), np.load(emulated)
    u.check(a.shape == b.shape, f"natively {a.shape}, on Nehalem {b.shape}")
    same = a.argmax(axis=1) == b.argmax(axis=1)
    u.check(same.all(), f"{int((~same).sum())} of {len(a)} examples get another class on Nehalem")
    rel = float((np.abs(a - b).max(axis=1) / np.abs(a).max(axis=1)).max())
    u.check(rel <= 1e-5, f"the logits on Nehalem differ by up to {rel:.3g} of an example's largest")
    print(f"qemu-x86_64 -cpu Nehalem: {len(a)} examples in {secs:.1f} s, the same classes, logits within "
          f"{rel:.2g} relative (natively: {'the same bits' if np.array_equal(a, b) else 'another instruction set'})")


def compile_infer(opt, gen_dir, out, embed):
    model = "fashion_mlp"
    srcs = [f"{model}_infer.c", f"{model}_inference.c"] + ([f"{model}_weights.c"] if embed else [])
    flags = ["-std=c11", "-O3", "-fno-math-errno", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math",
             *opt.cflags.split()]
    objs, weights_s = [], None
    for s in srcs:
        obj = os.path.join(gen_dir, s[:-2] + ".o")
        t0 = time.monotonic()
        u.run([opt.cc, *flags, "-I", gen_dir, "-I", opt.rt_include, "-c", os.path.join(gen_dir, s), "-o", obj])
        if s.endswith("_weights.c"):
            weights_s = time.monotonic() - t0
        objs.append(obj)
    u.run([opt.cc, *opt.cflags.split(), *objs, opt.rt_lib, *opt.rt_ldflags.split(), "-lz", "-lm", "-o", out])
    return weights_s


def case_embed(opt, paths, work):
    import numpy as np
    ck, out, files = train(opt, paths, work, 20, 2560)
    plain_dir = os.path.join(work, "plain")
    u.run([opt.cannl, "gen", opt.spec, "-o", plain_dir])
    plain = os.path.join(work, "infer_plain")
    compile_infer(opt, plain_dir, plain, False)
    image = files["test_image"]
    ref = os.path.join(work, "ref.npy")
    u.run([plain, "--weights", ck, "--input", f"image={image}", "--output", ref])
    a = np.load(ref)
    # The values printed in <model>_weights.c, and their bytes in <model>_weights.bin (.incbin).
    for fmt in ("c", "incbin"):
        emb_dir = os.path.join(work, f"embedded_{fmt}")
        t0 = time.monotonic()
        u.run([opt.cannl, "gen", opt.spec, "-o", emb_dir, "--weights", ck, "--embed", "--embed-format", fmt])
        gen_s = time.monotonic() - t0
        bin_file = os.path.join(emb_dir, "fashion_mlp_weights.bin")
        u.check(os.path.exists(bin_file) == (fmt == "incbin"), f"--embed-format {fmt}: {bin_file} written or not")
        emb = os.path.join(work, f"infer_embedded_{fmt}")
        weights_s = compile_infer(opt, emb_dir, emb, True)
        # The embedded program in an empty folder, the checkpoint and the generated code gone.
        alone = u.fresh_dir(os.path.join(work, f"alone_{fmt}"))
        shutil.copy(image, os.path.join(alone, "image.npy"))
        shutil.copy(emb, os.path.join(alone, "infer"))
        moved = ck + ".away"
        os.rename(ck, moved)
        shutil.rmtree(emb_dir)
        p = subprocess.run(["./infer", "--input", "image=image.npy", "--output", "out.npy"], cwd=alone,
                           capture_output=True, text=True, timeout=600)
        u.check(p.returncode == 0, f"the embedded program ({fmt}) failed alone: {p.stderr}")
        os.rename(moved, ck)
        b = np.load(os.path.join(alone, "out.npy"))
        u.check(a.shape == b.shape and a.tobytes() == b.tobytes(), f"embedded ({fmt}) and --weights outputs differ")
        again = os.path.join(work, "again.npy")
        u.run([emb, "--weights", ck, "--input", f"image={image}", "--output", again])
        u.check(np.load(again).tobytes() == a.tobytes(), f"the embedded program ({fmt}) with --weights gives other bits")
        print(f"--embed-format {fmt}: bit-identical outputs {a.shape}; cannl gen --embed {gen_s:.2f} s; compiling "
              f"fashion_mlp_weights.c {weights_s:.2f} s; program sizes: plain {os.path.getsize(plain)} bytes, "
              f"embedded {os.path.getsize(emb)} bytes")


def case_errors(opt, paths, work):
    import numpy as np
    ck, _, files = train(opt, paths, work, 5, 640)
    image, label = files["test_image"], files["test_label"]
    out = os.path.join(work, "out.npy")

    def expect(args, rc, *needles):
        if os.path.exists(out):
            os.remove(out)
        _, err = u.run([opt.infer, *args], expect_rc=rc)
        err_lines = err.strip().splitlines()
        u.check(len(err_lines) == 1 and err_lines[0].startswith("fashion_mlp_infer: error: "),
                f"expected one error line, got:\n{err}")
        for n in needles:
            u.check(n in err_lines[0], f"'{n}' not in: {err_lines[0]}")
        u.check(not os.path.exists(out), f"{out} written by a failed run")
        u.check(not [f for f in os.listdir(work) if ".tmp." in f], "temporary file left behind")

    w = ["--weights", ck]
    img = ["--input", f"image={image}"]
    expect(["--bogus"], 2, "unknown flag '--bogus'")
    expect([*w, *img], 2, "nothing to do")
    expect([*img, "--output", out], 2, "no weights", "--weights")
    expect([*w, "--output", out], 2, "no data for input 'image'")
    expect([*w, *img, "--input", f"label={label}", "--output", out], 2, "only read with --metric")
    expect([*w, *img, "--metric"], 2, "no data for input 'label'")
    expect([*w, "--input", f"pixels={image}", "--output", out], 2, "no input 'pixels'", "image, label")
    expect([*w, *img, *img, "--output", out], 2, "given twice")
    expect([*w, *w, *img, "--output", out], 2, "--weights given twice")
    expect([*w, *img, "--batch", "257", "--output", out], 2, "larger than the model's maximum batch 256")
    expect([*w, *img, "--batch", "0", "--output", out], 2, "--batch")
    expect([*w, *img, "--threads", "x", "--output", out], 2, "not an integer")
    expect([*w, *img, "--output"], 2, "needs a value")
    np.save(os.path.join(work, "image_783.npy"), np.load(image).reshape(-1, 784)[:, :783])
    expect([*w, "--input", f"image={os.path.join(work, 'image_783.npy')}", "--output", out], 1,
           "783 values per example", "image")
    # One value per example for image, which forward reads: never one-hot encoded for it.
    np.save(os.path.join(work, "one_image_784.npy"), np.load(image).reshape(-1, 784)[0].astype(np.float32) / 255)
    np.savetxt(os.path.join(work, "labels.csv"), np.load(label)[:50], fmt="%d")
    one_value = [os.path.join(work, "one_image_784.npy"), os.path.join(work, "labels.csv"), label,
                 paths["test_label"]]  # a (784,) array, a 1-column CSV, labels as .npy and as IDX
    for path in one_value:
        expect([*w, "--input", f"image={path}", "--output", out], 1,
               f"{path}: 1 value per example, but input 'image' takes 784")
    np.save(os.path.join(work, "label_short.npy"), np.load(label)[:-1])
    expect([*w, *img, "--input", f"label={os.path.join(work, 'label_short.npy')}", "--metric"], 1, "examples")
    expect(["--weights", os.path.join(work, "none.safetensors"), *img, "--output", out], 1, "none.safetensors")
    expect([*w, "--input", f"image={os.path.join(work, 'none.npy')}", "--output", out], 1, "none.npy")
    expect([*w, *img, "--output", os.path.join(work, "no_dir", "out.npy")], 1, "no_dir")

    # Checkpoints that do not fit: for the inference program (1) and for cannl gen --embed (1).
    tensors, meta, _ = u.read_safetensors(ck)
    params = {k: v for k, v in tensors.items() if "." not in k}
    bad = {}
    bad["other_model"] = (params, {**meta, "model": "moons_mlp"}, "checkpoint of model 'moons_mlp'")
    bad["missing"] = ({k: v for k, v in params.items() if k != "w2"}, meta, "'w2'")
    shaped = dict(params)
    shaped["w1"] = np.ascontiguousarray(params["w1"].T)
    bad["shape"] = (shaped, meta, "w1")
    nan = dict(params)
    nan["b3"] = params["b3"].copy()
    nan["b3"][4] = np.nan
    bad["nan"] = (nan, meta, "non-finite")
    for name, (t, m, needle) in bad.items():
        path = os.path.join(work, f"{name}.safetensors")
        u.write_safetensors(path, t, m)
        expect(["--weights", path, *img, "--output", out], 1, f"{name}.safetensors", needle)
        gen_dir = os.path.join(work, f"gen_{name}")
        _, err = u.run([opt.cannl, "gen", opt.spec, "-o", gen_dir, "--weights", path, "--embed"], expect_rc=1)
        u.check(err.startswith("cannl: error: ") and f"{name}.safetensors: " in err and needle in err,
                f"cannl gen --embed with {name}: {err}")
        u.check(not os.path.exists(gen_dir), f"cannl gen --embed wrote {gen_dir} for a bad checkpoint")
    junk = os.path.join(work, "junk.safetensors")
    with open(junk, "wb") as f:
        f.write(b"not a checkpoint at all")
    _, err = u.run([opt.cannl, "gen", opt.spec, "-o", os.path.join(work, "gen_junk"), "--weights", junk, "--embed"],
                   expect_rc=1)
    u.check("junk.safetensors" in err, f"cannl gen --embed with junk: {err}")
    _, err = u.run([opt.cannl, "gen", opt.spec, "-o", os.path.join(work, "gen_noweights"), "--embed"], expect_rc=2)
    u.check("--weights" in err, f"cannl gen --embed alone: {err}")
    u.check(not os.path.exists(os.path.join(work, "gen_noweights")), "cannl gen --embed alone wrote files")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=["accuracy", "embed", "errors", "nehalem"])
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--infer")
    ap.add_argument("--cannl")
    ap.add_argument("--spec")
    ap.add_argument("--cc")
    ap.add_argument("--cflags", default="")
    ap.add_argument("--rt-lib")
    ap.add_argument("--rt-ldflags", default="", help="what linking the runtime needs beyond zlib and libm (OpenMP)")
    ap.add_argument("--rt-include")
    ap.add_argument("--fashion", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--small", action="store_true")
    opt = ap.parse_args()
    u.need_numpy()
    paths = u.need_fashion(opt.fashion)
    work = u.fresh_dir(opt.work)
    {"accuracy": case_accuracy, "embed": case_embed, "errors": case_errors, "nehalem": case_nehalem}[opt.case](
        opt, paths, work)


if __name__ == "__main__":
    u.run_main(main)
