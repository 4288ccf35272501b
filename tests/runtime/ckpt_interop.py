#!/usr/bin/env python3
"""Safetensors interop between the C runtime and Python, with a tiny pure
Python reader and writer (json + struct + numpy; no safetensors package).
  1. C writes a checkpoint (ckpt_tool write), Python reads and checks it.
  2. Python writes one (escaped non-ASCII names, out-of-order data, an I64
     tensor, an empty tensor), C reads and checks it (ckpt_tool verify).
Usage: ckpt_interop.py CKPT_TOOL_EXE WORKDIR. Exits 77 without NumPy."""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy not available: skipping")
    sys.exit(77)

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}


def read_safetensors(path):
    """-> (metadata dict, {name: ndarray}); validates the layout."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out, spans = {}, []
    for name, info in header.items():
        dt = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        assert end - begin == int(np.prod(shape, dtype=np.int64)) * dt.itemsize, name
        assert 0 <= begin <= end <= len(data), name
        spans.append((begin, end))
        out[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(shape)
    spans.sort()
    for (b0, e0), (b1, e1) in zip(spans, spans[1:]):
        assert e0 <= b1, "overlapping tensors"
    return meta, out, n


def write_safetensors(path, tensors, meta):
    """Writes the data in the reverse order of the header entries."""
    header, blobs, off = {}, [], 0
    for name, arr in reversed(list(tensors.items())):
        b = np.ascontiguousarray(arr).tobytes()
        code = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}[arr.dtype]
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    ordered = {"__metadata__": meta}
    ordered.update({k: header[k] for k in tensors})  # header order != data order
    text = json.dumps(ordered).encode("utf-8")  # ensure_ascii: \uXXXX escapes
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)

    # 1. C -> Python
    c_path = os.path.join(work, "from_c.safetensors")
    subprocess.run([tool, "write", c_path], check=True)
    meta, t, hlen = read_safetensors(c_path)
    assert hlen % 8 == 0, "data section not 8-byte aligned"
    assert meta == {"model": "interop_net", "step": "77", "quote": 'say "hi"\n\\'}, meta
    i = np.arange(15)
    w = (1.0 / (i + 1)).astype(np.float32) - np.float32(0.5)
    assert t["layer.weight"].dtype == np.float32 and t["layer.weight"].shape == (3, 5)
    assert np.array_equal(t["layer.weight"], w.reshape(3, 5))
    assert t["layer.bias"].dtype == np.float64 and np.array_equal(t["layer.bias"], 1.0 / (np.arange(5) + 3))
    assert t["scalar"].shape == () and t["scalar"] == np.float32(42.5)
    assert np.array_equal(t["naïve/名前"], np.array([1, 2], dtype=np.float32))
    assert t["nothing"].shape == (0, 4) and t["nothing"].dtype == np.float64
    print("C -> Python: ok")

    # 2. Python -> C
    py_path = os.path.join(work, "from_py.safetensors")
    tensors = {
        "py.w": (1.0 / (np.arange(6) + 1)).astype(np.float32).reshape(2, 3),
        "py.b": np.arange(3) * 0.1,
        "ünï": np.array([3.0], dtype=np.float32),
        "py.i64": np.array([7, -7], dtype=np.int64),
        "py.empty": np.zeros((0, 4), dtype=np.float32),
    }
    write_safetensors(py_path, tensors, {"model": "py_net", "epoch": "5", "été": "☃"})
    assert b"\\u00fcn\\u00ef" in open(py_path, "rb").read(600)
    subprocess.run([tool, "verify", py_path], check=True)
    # And our own reader accepts what we wrote.
    read_safetensors(py_path)
    print("Python -> C: ok")


if __name__ == "__main__":
    main()
