#!/usr/bin/env python3
"""--name-map FILE (issue 20 item 5): `cannl_name = pytorch.key` lines rename a model's tensors
in the files the training program reads (--init, --resume) and writes (--checkpoint), and in
the inference program's --weights; a param's optimiser state follows it; a missing tensor's
error lists what the file holds; a mapped tensor of another shape with the same elements loads
(issue 35 item 4).

usage: name_map.py WORKDIR BIGRAM_TRAIN BIGRAM_INFER SOFTMAX_TRAIN      (exit 77 without NumPy)"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("name_map: NumPy not available, skipped")
    sys.exit(77)

work, train, infer, softmax = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def save_safetensors(path, tensors):
    """tensors: {name: float32 array}, written as a PyTorch state_dict saved with safetensors."""
    head, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        head[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            out[k] = np.frombuffer(data[b:e], dtype=np.float32 if v["dtype"] == "F32" else np.float64).reshape(v["shape"])
    return out


rng = np.random.default_rng(3)
emb = rng.normal(0, 0.5, size=(256, 256)).astype(np.float32)
save_safetensors("torch.safetensors", {"emb.weight": emb})
with open("map.txt", "w") as f:
    f.write("# fake_bigram <- nn.Embedding(256, 256)\n\ntable = emb.weight   # the bigram table\n")
text = bytes(rng.integers(97, 123, size=5000).astype(np.uint8))
with open("train.txt", "wb") as f:
    f.write(text)
stream = ["--stream", "tokens,next=train.txt", "--batch", "4"]

# --init through the map; the checkpoint written carries the mapped name.
rc, out, err = run(train, *stream, "--steps", "0", "--init", "torch.safetensors", "--name-map", "map.txt",
                   "--checkpoint", "init.ck")
check(rc == 0, f"--init with --name-map: {rc} {err}")
if rc == 0:
    ck = read_safetensors("init.ck")
    check(sorted(ck) == ["emb.weight"], f"checkpoint names {sorted(ck)}")
    check(np.array_equal(ck.get("emb.weight"), emb), "--init read emb.weight into table")
rc, out, err = run(train, *stream, "--steps", "3", "--init", "torch.safetensors", "--name-map", "map.txt",
                   "--checkpoint", "a.ck")
check(rc == 0, f"training from the state_dict: {rc} {err}")
rc, out, err = run(train, *stream, "--steps", "5", "--resume", "a.ck", "--name-map", "map.txt", "--checkpoint", "a.ck")
check(rc == 0 and "trained to step 5" in out, f"--resume with --name-map: {rc} {err}")

# Through the map, a tensor of another shape with the same elements in the same row-major order
# loads (contract v2 §6: an nn.Linear weight into a param of several output axes), for training
# and inference; the checkpoint written keeps the model's shape. Another element count is refused.
save_safetensors("reshaped.safetensors", {"emb.weight": emb.reshape(256, 16, 16)})
rc, out, err = run(train, *stream, "--steps", "0", "--init", "reshaped.safetensors", "--name-map", "map.txt",
                   "--checkpoint", "reshaped.ck")
check(rc == 0, f"--init of another shape through the map: {rc} {err}")
if rc == 0:
    ck = read_safetensors("reshaped.ck")
    check(ck["emb.weight"].shape == (256, 256) and np.array_equal(ck["emb.weight"], emb),
          "--init read emb.weight [256, 16, 16] into table [256, 256] in row-major order")
save_safetensors("short.safetensors", {"emb.weight": emb[:, :255]})
rc, out, err = run(train, *stream, "--steps", "0", "--init", "short.safetensors", "--name-map", "map.txt")
check(rc == 1 and "tensor 'emb.weight' has shape [256, 255] (65280 elements), expected [256, 256] (65536 elements)"
      in err, f"another element count through the map: {rc} {err}")
rc, out, err = run(train, *stream, "--steps", "0", "--init", "reshaped.safetensors")
check(rc == 1 and "missing tensor 'table'" in err, f"without the map: {rc} {err}")
save_safetensors("plain.safetensors", {"table": emb.reshape(256, 16, 16)})
rc, out, err = run(train, *stream, "--steps", "0", "--init", "plain.safetensors")
check(rc == 1 and "tensor 'table' has shape [256, 16, 16], expected [256, 256]" in err,
      f"another shape without a map is refused: {rc} {err}")

# A shape after the key is the one the files hold the tensor under: the checkpoint is written
# so (PyTorch's shape, its optimiser state too) and read back from it; it must have the model's
# element count, and be a shape.
with open("shaped.txt", "w") as f:
    f.write("table = emb.weight [256, 16, 16]   # as the state_dict has it\n")
rc, out, err = run(train, *stream, "--steps", "2", "--init", "reshaped.safetensors", "--name-map", "shaped.txt",
                   "--checkpoint", "shaped.ck")
check(rc == 0, f"--checkpoint under a mapped shape: {rc} {err}")
if rc == 0:
    ck = read_safetensors("shaped.ck")
    check(all(v.shape == (256, 16, 16) for v in ck.values()) and "emb.weight" in ck,
          f"tensors written under the mapped shape: { {k: v.shape for k, v in ck.items()} }")
    rc, out, err = run(train, *stream, "--steps", "3", "--resume", "shaped.ck", "--name-map", "shaped.txt",
                       "--checkpoint", "shaped.ck")
    check(rc == 0 and "trained to step 3" in out, f"--resume from a file of the mapped shape: {rc} {err}")
for content, needle in (("table = emb.weight [256, 15]\n",
                         "bad.txt:1: 'table' is [256, 256] (65536 elements): the shape [256, 15] given for the files "
                         "has 3840"),
                        ("table = emb.weight [256, x]\n", "bad.txt:1: expected a shape like [128, 128] after 'emb.weight'")):
    with open("bad.txt", "w") as f:
        f.write(content)
    rc, out, err = run(train, *stream, "--steps", "1", "--name-map", "bad.txt", "--checkpoint", "bad.ck")
    check(rc == 1 and needle in err and not os.path.exists("bad.ck"), f"map {content!r}: {rc} {err}")

# Without the map the names do not match: the error lists what the file holds.
for args in (["--init", "torch.safetensors"], ["--resume", "a.ck"]):
    rc, out, err = run(train, *stream, "--steps", "6", *args)
    check(rc == 1 and "missing tensor 'table'; the file holds: emb.weight" in err, f"{args}: {rc} {err}")
with open("wrong.txt", "w") as f:
    f.write("table = embedding.weight\n")
rc, out, err = run(train, *stream, "--steps", "1", "--init", "torch.safetensors", "--name-map", "wrong.txt")
check(rc == 1 and "missing tensor 'embedding.weight' (param 'table' through the name map); the file holds: emb.weight"
      in err, f"mapped name missing: {err}")

# A map saved with a UTF-8 byte-order mark (a Windows editor's) reads the same.
with open("bom.txt", "wb") as f:
    f.write(b"\xef\xbb\xbftable = emb.weight\r\n")
rc, out, err = run(train, *stream, "--steps", "0", "--init", "torch.safetensors", "--name-map", "bom.txt")
check(rc == 0, f"name map with a byte-order mark: {rc} {err}")

# The inference program reads --weights through the map.
with open("tok.csv", "w") as f:
    f.write("97,98,99,100,101,102,103,104\n")
rc, out, err = run(infer, "--weights", "a.ck", "--name-map", "map.txt", "--input", "tokens=tok.csv", "--output", "o.npy")
check(rc == 0, f"inference with --name-map: {rc} {err}")
if rc == 0:
    table = read_safetensors("a.ck")["emb.weight"]
    check(np.array_equal(np.load("o.npy")[0], table[97:105]), "inference used the mapped table")
rc, out, err = run(infer, "--weights", "a.ck", "--input", "tokens=tok.csv", "--output", "o.npy")
check(rc == 1 and "missing tensor 'table'; the file holds: emb.weight" in err, f"inference without the map: {err}")
rc, out, err = run(infer, "--weights", "reshaped.safetensors", "--name-map", "map.txt", "--input", "tokens=tok.csv",
                   "--output", "o3.npy")
check(rc == 0 and np.array_equal(np.load("o3.npy")[0], emb[97:105]) if rc == 0 else False,
      f"inference with weights of another shape through the map: {rc} {err}")
rc, out, err = run(infer, "--name-map", "map.txt", "--input", "tokens=tok.csv", "--output", "o.npy")
check(rc == 2 and "--weights" in err, f"--name-map without --weights: {rc} {err}")

# Optimiser state follows its param (fake_softmax: SGD with momentum).
x = rng.normal(size=(20, 4)).astype(np.float32)
np.save("x.npy", x)
np.save("y.npy", rng.integers(0, 3, size=20).astype(np.int64))
with open("lin.txt", "w") as f:
    f.write("w = lin.w\nb = lin.b\n")
sm = ["--data", "x=x.npy", "--data", "y=y.npy", "--batch", "8", "--name-map", "lin.txt"]
rc, out, err = run(softmax, *sm, "--epochs", "1", "--checkpoint", "s.ck")
check(rc == 0, f"softmax with a name map: {rc} {err}")
if rc == 0:
    names = sorted(read_safetensors("s.ck"))
    check(names == ["lin.b", "lin.b.momentum_buffer", "lin.w", "lin.w.momentum_buffer"], f"state names {names}")
    rc, out, err = run(softmax, *sm, "--epochs", "2", "--resume", "s.ck", "--checkpoint", "s.ck")
    check(rc == 0, f"softmax resume through the map: {rc} {err}")

# Bad maps: refused at start (nothing trained, nothing written) with one error naming the file
# and the line.
def refused(prog, args, content, needle, what):
    with open("bad.txt", "wb") as f:
        f.write(content)
    for name in ("bad.ck",):
        if os.path.exists(name):
            os.remove(name)
    rc, out, err = run(prog, *args, "--name-map", "bad.txt")
    check(rc == 1 and needle in err and len(err.strip().splitlines()) == 1, f"{what} {content!r}: {rc} {err}")
    check(not os.path.exists("bad.ck"), f"{what} {content!r}: a checkpoint was written")


bigram = [*stream, "--steps", "2", "--checkpoint", "bad.ck"]
for content, needle in [
        (b"table emb.weight\n", "bad.txt:1: expected 'cannl_name = file.key'"),
        (b"# x\ntabel = emb.weight\n", "bad.txt:2: 'tabel' is no tensor of model 'fake_bigram' (its params: table)"),
        (b"table = a\ntable = b\n", "bad.txt:2: 'table' is mapped twice (line 1 too)"),
        # issue 36: names that the checkpoint cannot hold, or that its header cannot carry
        (b"table = __metadata__\n", "bad.txt:1: 'table' is mapped onto '__metadata__'"),
        (b"# gpt\n\ntable = wpe.exp_avg\n", "bad.txt:3: 'table' is mapped onto 'wpe.exp_avg', the name a checkpoint "
         "gives the exp_avg of a param 'wpe'"),
        (b"table = emb.weight.exp_avg_sq\n", "bad.txt:1: 'table' is mapped onto 'emb.weight.exp_avg_sq'"),
        (b"table = x.momentum_buffer  # SGD\n", "bad.txt:1: 'table' is mapped onto 'x.momentum_buffer'"),
        (b"table = emb\xffweight\n", "bad.txt:1: byte 12 (0xFF) is not valid UTF-8"),
        (b"t\xc3able = emb.weight\n", "bad.txt:1: byte 2 (0xC3) is not valid UTF-8"),
        (b"table = \xed\xa0\x80\n", "bad.txt:1: byte 9 (0xED) is not valid UTF-8"),  # an encoded surrogate
        (b"table = \xc0\xae\n", "bad.txt:1: byte 9 (0xC0) is not valid UTF-8"),  # an overlong '.'
        (b"table = emb\x1b[31mweight\n", "bad.txt:1: control character U+001B"),
        (b"table = emb\x7fweight\n", "bad.txt:1: control character U+007F"),
        (b"table = emb\xc2\x85weight\n", "bad.txt:1: control character U+0085"),
        (b"table\x00 = emb.weight\n", "bad.txt:1: control character U+0000")]:
    refused(train, bigram, content, needle, "bad map")
# fake_softmax (SGD with momentum): w, b and their momentum_buffer.
sm_ck = ["--data", "x=x.npy", "--data", "y=y.npy", "--batch", "8", "--epochs", "1", "--checkpoint", "bad.ck"]
for content, needle in [
        (b"w = b\n", "bad.txt:1: 'w' is mapped onto 'b', the name of another tensor of model 'fake_softmax'"),
        (b"w = lin.w\nb = w\n", "bad.txt:2: 'b' is mapped onto 'w', the name of another tensor"),
        (b"b = w\nw = b\n", "bad.txt:1: 'b' is mapped onto 'w', the name of another tensor"),  # a swap
        (b"w = b.momentum_buffer\n", "bad.txt:1: 'w' is mapped onto 'b.momentum_buffer'"),
        (b"w = w.momentum_buffer\n", "bad.txt:1: 'w' is mapped onto 'w.momentum_buffer'"),
        (b"w = lin.w\nw.momentum_buffer = lin.b.momentum_buffer\nb = lin.b\n",
         "would both be named 'lin.b.momentum_buffer' in the files"),
        (b"w.momentum_buffer = b.momentum_buffer\n", "bad.txt:1: 'w.momentum_buffer' is mapped onto "
         "'b.momentum_buffer', the name of another tensor")]:
    refused(softmax, sm_ck, content, needle, "bad softmax map")
# A state mapped onto a state name of its own kind is fine.
with open("state.txt", "w") as f:
    f.write("w = lin.w\nw.momentum_buffer = lin.w.velocity.momentum_buffer\n")
rc, out, err = run(softmax, "--data", "x=x.npy", "--data", "y=y.npy", "--batch", "8", "--epochs", "1",
                   "--name-map", "state.txt", "--checkpoint", "state.ck")
check(rc == 0, f"a state mapped onto its own kind of name: {rc} {err}")
if rc == 0:
    names = sorted(read_safetensors("state.ck"))
    check(names == ["b", "b.momentum_buffer", "lin.w", "lin.w.velocity.momentum_buffer"], f"state names {names}")
# The inference program checks the map as the training program does.
with open("bad.txt", "wb") as f:
    f.write(b"table = __metadata__\n")
rc, out, err = run(infer, "--weights", "a.ck", "--name-map", "bad.txt", "--input", "tokens=tok.csv", "--output", "o2.npy")
check(rc == 1 and "bad.txt:1: 'table' is mapped onto '__metadata__'" in err and not os.path.exists("o2.npy"),
      f"inference with a bad map: {rc} {err}")
rc, out, err = run(train, *stream, "--steps", "1", "--name-map", "none.txt")
check(rc == 1 and "none.txt: cannot open the name map" in err, f"missing map: {err}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("name_map: all checks passed")
