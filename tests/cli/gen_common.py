"""What the `cannl gen` tests of this folder share: their work directory, checks, the moons_mlp
generator call and a float32 safetensors writer. Usage:

    from gen_common import GenTest
    t = GenTest(sys.argv)       # CANNL SPECS_DIR WORKDIR: WORKDIR made anew and entered
    r = t.gen("-o", "out")      # cannl gen specs/moons_mlp.cannl -o out
    t.check(r.returncode == 0, "what failed")
    t.finish("name")            # exit 1 when a check failed
"""
import json
import os
import shutil
import struct
import subprocess
import sys


class GenTest:
    def __init__(self, argv):
        self.cannl, specs, work = argv[1], argv[2], argv[3]
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        os.chdir(work)
        self.spec = os.path.join(specs, "moons_mlp.cannl")
        self.failures = []

    def check(self, cond, what):
        if not cond:
            self.failures.append(what)
            print("FAIL:", what)

    def gen(self, *args):
        return subprocess.run([self.cannl, "gen", self.spec, *args], capture_output=True, text=True)

    def finish(self, name):
        if self.failures:
            print(f"{len(self.failures)} check(s) failed")
            sys.exit(1)
        print(f"{name}: all checks passed")


def write_safetensors(path, shapes, metadata=None):
    """Tensors of the given shapes (name -> tuple), float32, every value of the i-th 0.125 * (i + 1)."""
    head, blobs, off = ({"__metadata__": metadata} if metadata else {}), [], 0
    for i, (k, sh) in enumerate(shapes.items()):
        n = 1
        for d in sh:
            n *= d
        b = struct.pack(f"<{n}f", *([0.125 * (i + 1)] * n))
        head[k] = {"dtype": "F32", "shape": list(sh), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
