#!/usr/bin/env python3
"""The data scripts/gpu-check.sh stages (small: the whole staging travels in 60 MiB).

  data.py fashion SRC OUT [--train N] [--test N]   the first N training and test examples of
                                                    Fashion-MNIST (SRC: its four IDX .gz files)
                                                    as IDX .gz files of the same names in OUT
  data.py kjv SRC OUT [--train-bytes N] [--val-bytes N]
                                                    the first N bytes of SRC/train.txt and
                                                    SRC/val.txt (scripts/kjv-data.sh) cut after
                                                    a line break, as OUT/train.txt and val.txt
                                                    (raw bytes: the byte-level models' streams),
                                                    and the same bytes as llm.c token shards
                                                    OUT/train.bin, val.bin (header of 256 int32:
                                                    20240520, 1, count; uint16 tokens), GPT-2's
                                                    input: byte values are valid token ids
Only the standard library: it runs where NumPy is missing.
"""
import argparse
import array
import gzip
import os
import struct
import sys

FASHION = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
           "t10k-labels-idx1-ubyte.gz")


def idx_head(path, n):
    """The first n items of an IDX file, as a new IDX file's bytes."""
    with gzip.open(path, "rb") as f:
        head = f.read(4)
        zero, type_code, ndims = struct.unpack(">HBB", head)
        if zero != 0 or type_code != 0x08:
            sys.exit(f"data.py: {path}: not an IDX file of unsigned bytes")
        dims = list(struct.unpack(">" + "I" * ndims, f.read(4 * ndims)))
        if dims[0] < n:
            sys.exit(f"data.py: {path} holds {dims[0]} items, fewer than {n}")
        item = 1
        for d in dims[1:]:
            item *= d
        body = f.read(n * item)
    dims[0] = n
    return head + struct.pack(">" + "I" * ndims, *dims) + body


def fashion(opt):
    os.makedirs(opt.out, exist_ok=True)
    for name in FASHION:
        n = opt.train if name.startswith("train") else opt.test
        # mtime=0: the same bytes every time (the staging's manifest lists checksums)
        with open(os.path.join(opt.out, name), "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(idx_head(os.path.join(opt.src, name), n))
    print(f"data.py: {opt.out}: Fashion-MNIST's first {opt.train} training and {opt.test} test examples")


def shard(path, data):
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, len(data)
    tokens = array.array("H", list(data))  # one token per byte (bytes would be read as raw uint16 pairs)
    if sys.byteorder != "little":
        header.byteswap()
        tokens.byteswap()
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def kjv(opt):
    os.makedirs(opt.out, exist_ok=True)
    for split, n in (("train", opt.train_bytes), ("val", opt.val_bytes)):
        with open(os.path.join(opt.src, f"{split}.txt"), "rb") as f:
            text = f.read(n)
        if b"\n" in text:
            text = text[:text.rindex(b"\n") + 1]
        with open(os.path.join(opt.out, f"{split}.txt"), "wb") as f:
            f.write(text)
        shard(os.path.join(opt.out, f"{split}.bin"), text)
    print(f"data.py: {opt.out}: KJV train.txt/.bin, val.txt/.bin (up to {opt.train_bytes} and {opt.val_bytes} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("fashion")
    f.add_argument("src")
    f.add_argument("out")
    f.add_argument("--train", type=int, default=2560)
    f.add_argument("--test", type=int, default=1000)
    k = sub.add_parser("kjv")
    k.add_argument("src")
    k.add_argument("out")
    k.add_argument("--train-bytes", type=int, default=1 << 20)
    k.add_argument("--val-bytes", type=int, default=1 << 17)
    opt = ap.parse_args()
    {"fashion": fashion, "kjv": kjv}[opt.what](opt)


if __name__ == "__main__":
    main()
