#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzers of files (corpus/{safetensors,idx,npy,csv,tokens,
name_map,plot}/): small valid files of every kind the readers accept, and a few near misses. Run
it from anywhere; the files are committed (the spec fuzzer's seeds are the repository's specs)."""
import gzip
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(kind, name, data):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    with open(os.path.join(HERE, kind, name), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None, pad=True):
    """tensors: [(name, dtype, shape, raw bytes)]"""
    header, off, blob = {}, 0, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blob += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + blob


f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
f64 = lambda *v: struct.pack(f"<{len(v)}d", *v)
put("safetensors", "checkpoint", safetensors(
    [("w", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)), ("b", "F64", [2], f64(0.5, -0.5)),
     ("w.momentum_buffer", "F32", [2, 3], f32(0, 0, 0, 0, 0, 0))],
    {"model": "m", "step": "12", "lr": "0.1", "epoch": "1", "lr_schedule": "spec"}))
put("safetensors", "empty_tensors", safetensors(
    [("e", "F32", [0], b""), ("s", "F64", [], f64(3)), ("z", "F32", [4, 0, 2], b"")]))
put("safetensors", "other_dtypes", safetensors(
    [("i", "I64", [2], struct.pack("<2q", 1, -1)), ("h", "BF16", [3], b"\x80\x3f" * 3),
     ("u", "U8", [4], b"\x00\x01\x02\xff"), ("f", "F16", [1], b"\x00\x3c")]))
put("safetensors", "metadata_only", safetensors([], {"model": "caf\u00e9 \u20ac", "note": "a\nb\"c\\d"}))
put("safetensors", "rank9", safetensors([("r", "F32", [1] * 8 + [2], f32(1, 2)), ("t", "F32", [1], f32(7))]))
put("safetensors", "unpadded", safetensors([("x", "F64", [1, 1], f64(2.5))], pad=False))

be = lambda fmt, *v: struct.pack(">" + fmt, *v)
def idx(code, dims, payload):
    return bytes([0, 0, code, len(dims)]) + be(f"{len(dims)}I", *dims) + payload
put("idx", "u8_images", idx(0x08, [3, 2, 2], bytes(range(12))))
put("idx", "u8_labels", idx(0x08, [5], bytes([0, 9, 3, 1, 2])))
put("idx", "i8", idx(0x09, [2, 2], be("4b", -1, 2, -128, 127)))
put("idx", "i16", idx(0x0B, [2, 1], be("2h", -300, 300)))
put("idx", "i32", idx(0x0C, [1, 2], be("2i", -70000, 70000)))
put("idx", "f32", idx(0x0D, [2, 2], be("4f", 0.5, -1.5, 3e38, 1e-40)))
put("idx", "f64", idx(0x0E, [1, 1, 1, 2], be("2d", 1e300, -2.25)))
put("idx", "gzip", gzip.compress(idx(0x08, [2, 3], bytes(range(6))), mtime=0))

def npy(descr, shape, payload, version=1, fortran=False):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", "(" + "".join(f"{s}, " if len(shape) == 1 else f"{s}," for s in shape).rstrip(",") + ")" if shape else "()")
    pre = 10 if version == 1 else 12
    h = d.encode() + b" " * (-(pre + len(d) + 1) % 64) + b"\n"
    ln = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + ln + h + payload
put("npy", "f4", npy("<f4", [2, 3], f32(1, 2, 3, 4, 5, 6)))
put("npy", "f8_1d", npy("<f8", [3], f64(0.25, -1, 2)))
put("npy", "u1", npy("|u1", [2, 2], bytes([0, 1, 254, 255])))
put("npy", "i4", npy("<i4", [2, 1], struct.pack("<2i", -5, 7)))
put("npy", "i8", npy("<i8", [1, 2], struct.pack("<2q", 2**40, -3)))
put("npy", "v2", npy("<f4", [1, 2], f32(9, 8), version=2))
put("npy", "v3", npy("<f8", [1, 1], f64(4), version=3))
put("npy", "fortran_1d", npy("<f4", [2], f32(1, 2), fortran=True))
put("npy", "empty", npy("<f4", [0, 3], b""))
put("npy", "gzip", gzip.compress(npy("|u1", [3], bytes([1, 2, 3])), mtime=0))

put("csv", "header", b"x1,x2,label\n0.5,-1,1\n2e3,.25,0\n")
put("csv", "crlf_blank", b"1,2\r\n\r\n3,4\r\n  \r\n5,6")
put("csv", "one_column", b"7\n8\n9\n")
put("csv", "pandas_index", b",a,b\n0,1.5,2\n1,3,4.75\n")
put("csv", "spaces", b" 1 , 2 \n+3,-4e-2\n")
put("csv", "numeric_header", b"1,2,3\n4,5,6\n")
put("csv", "gzip", gzip.compress(b"a,b\n1,2\n3,4\n", mtime=0))

# Token streams (--stream, token_stream.c): llm.c shards (a header of 256 int32: magic 20240520,
# version 1, token count; then uint16 tokens) and raw bytes, one token per byte.
def shard(tokens, version=1, declared=None, header_ints=256):
    h = struct.pack("<3i", 20240520, version, len(tokens) if declared is None else declared)
    h += b"\0" * (4 * header_ints - len(h))
    return h + struct.pack(f"<{len(tokens)}H", *tokens)
put("tokens", "shard", shard([50256, 464, 3290, 318, 257, 3797, 13, 50256, 0, 65535]))
put("tokens", "shard_one", shard([7]))
put("tokens", "shard_empty", shard([]))
put("tokens", "shard_v2", shard([1, 2, 3], version=2))
put("tokens", "shard_count_off", shard([1, 2, 3], declared=4))
put("tokens", "shard_short_header", shard([1, 2], header_ints=8))
put("tokens", "shard_odd_bytes", shard([1, 2]) + b"\x05")
put("tokens", "text", "In the beginning God created the heaven and the earth.\ncaf\u00e9\n".encode())
put("tokens", "binary", bytes(range(256)))

# Name maps (--name-map, name_map.c): `cannl_name = file.key` lines, `#` comments.
put("name_map", "sequential", b"# moons_mlp <- nn.Sequential\nw1 = net.0.weight\nb1 = net.0.bias   # first layer\n\n"
    b"w2 = net.2.weight\nb2 = net.2.bias\nw3 = net.4.weight\nb3 = net.4.bias\n")
put("name_map", "bom_crlf_tabs", b"\xef\xbb\xbfw1\t=\tfc1.weight\r\n  \r\nb1 = fc1.bias\r\n")
put("name_map", "state", b"w1 = fc1.weight\nw1.exp_avg = fc1.weight.exp_avg\nw1.exp_avg_sq = m.v\n"
    b"w2.momentum_buffer = fc2.weight.momentum_buffer\n")
put("name_map", "blocks", b"w_qkv.0 = h.0.attn.c_attn.weight\nw_qkv.1 = h.1.attn.c_attn.weight\n"
    b"ln1_g.0 = h.0.ln_1.weight\n")
put("name_map", "utf8", "poids = couche.\u00e9paisseur\n\u03b8 = \u4e2d\u6587.w\n".encode())
put("name_map", "errors", b"w1 = a\nw1 = b\nw2 = a\nw3 = __metadata__\nw4 = x.exp_avg\nno equals\n")
put("name_map", "long", b"w = " + b"k" * 300 + b"\n")

# Metrics logs (`cannl plot`): one JSON object per line, numbers by name.
put("plot", "lm", b"".join(json.dumps(r).encode() + b"\n" for r in [
    {"step": s, "train_loss": 5.5 / (1 + s / 100), "lr": 3e-4 * (1 - s / 400), "elapsed": s * 0.1}
    for s in range(10, 101, 10)] + [{"step": 100, "val_loss": 2.9, "val_accuracy": 0.41}]))
put("plot", "epochs", b'{"epoch": 1, "train_loss": 0.52, "test_loss": 0.48, "accuracy": 0.83}\n'
    b'{"epoch": 2, "train_loss": 0.41, "test_loss": 0.44, "accuracy": 0.85}\n')
put("plot", "positions", b'{"loss": 3}\n{"loss": 2.5}\r\n\n{"loss": 2.25, "note": "x"}\n')
put("plot", "before_first_step", b'{"epoch": 0, "test_loss": 1}\n{"step": 5, "train_loss": 0.5, "lr": 0.1}\n'
    b'{"step": 6, "train_loss": 0.4, "lr": 0.1}\n{"step": 7, "train_lo')
put("plot", "extremes", b'{"step": 1e308, "loss": -1.7e308, "acc": 5e-324}\n{"step": -1e308, "loss": 1.7e308, '
    b'"acc": 0}\n{"step": 2, "loss": 1e400}\n')
put("plot", "names", '{"step": 1, "<loss> & \\"q\\"": 1, "caf\u00e9": 2, "lr": 1}\n{"step": 2, "lr": 2}\n'.encode())
put("plot", "not_object", b'{"step": 1, "loss": 1}\n[1, 2]\n')
put("plot", "flat", b'{"step": 3, "loss": 2}\n{"step": 3, "loss": 2}\n')
