#!/usr/bin/env python3
"""Writes .npy files with NumPy (all five supported dtypes, format versions
1/2/3, 1-D, empty, gzip, and the error cases) into WORKDIR, then runs the C
checker test_npy on them. Usage: npy_roundtrip.py TEST_NPY_EXE WORKDIR.
Exits 77 (skip) when NumPy is not available."""
import gzip
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy not available: skipping")
    sys.exit(77)

SHAPE = (5, 3, 2)


def values(code):
    """The same formulas as test_npy.c, by flat index i."""
    i = np.arange(int(np.prod(SHAPE)), dtype=np.int64)
    if code == "f4":
        return (i * 0.25 - 3.5).astype(np.float32)
    if code == "f8":
        return np.array([k * 1e-3 - 0.123456789012345 for k in range(i.size)], dtype=np.float64)
    if code == "u1":
        return ((i * 37) % 256).astype(np.uint8)
    if code == "i4":
        return (i * 100003 - 2000000000).astype(np.int32)
    if code == "i8":
        return (i * 1000000007 - 5).astype(np.int64)
    raise ValueError(code)


def main():
    exe, work = sys.argv[1], sys.argv[2]
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    j = lambda name: os.path.join(work, name)

    for code in ("f4", "f8", "u1", "i4", "i8"):
        a = values(code).reshape(SHAPE)
        assert a.dtype.str in ("<f4", "<f8", "|u1", "<i4", "<i8")
        np.save(j(code + ".npy"), a)
    f4 = values("f4").reshape(SHAPE)
    for ver in (2, 3):
        with open(j("v%d.npy" % ver), "wb") as f:
            np.lib.format.write_array(f, f4, version=(ver, 0))
    with open(j("f4.npy"), "rb") as src, gzip.open(j("f4.npy.gz"), "wb") as dst:
        dst.write(src.read())
    np.save(j("vec.npy"), np.arange(4, dtype=np.float64) * 1.5)
    np.save(j("empty0.npy"), np.zeros((0, 3), dtype=np.float32))
    # Error cases.
    np.save(j("fortran.npy"), np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    np.save(j("c8.npy"), np.zeros((2, 2), dtype=np.complex64))
    np.save(j("be.npy"), np.zeros((2, 2), dtype=">f4"))
    np.save(j("scalar.npy"), np.float32(3.0))
    np.save(j("structured.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    # Non-finite values (refused, naming the example and the value), and float64 values beyond
    # float32's range (refused when loaded as float32 only).
    nan = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    nan[2, 1, 0] = np.nan
    np.save(j("nan.npy"), nan)
    inf = np.arange(6, dtype=np.float64).reshape(3, 2)
    inf[1, 1] = -np.inf
    np.save(j("inf.npy"), inf)
    big = np.arange(6, dtype=np.float64).reshape(3, 2)
    big[2, 0] = 1e300
    np.save(j("big.npy"), big)
    with open(j("fortran.npy"), "rb") as f:
        assert b"'fortran_order': True" in f.read(128)

    r = subprocess.run([exe, work])
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
