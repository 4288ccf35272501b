#!/usr/bin/env python3
"""`cannl gen SPEC --weights CK --name-map MAP --embed` (issue 20 item 5): a PyTorch state_dict's
names map onto the spec's params when they are compiled in; a missing mapped tensor, a map naming
no param, and --name-map without --weights are errors.
    gen_name_map.py CANNL SPECS_DIR WORKDIR"""
import os
import re
import sys

from gen_common import GenTest, write_safetensors

t = GenTest(sys.argv)
check, gen = t.check, t.gen


# nn.Sequential(Linear(2, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 1)) names; every value of
# tensor i is 0.125 * (i + 1), float32.
shapes = {"net.0.weight": (16, 2), "net.0.bias": (16,), "net.2.weight": (16, 16), "net.2.bias": (16,),
          "net.4.weight": (1, 16), "net.4.bias": (1,)}
write_safetensors("torch.safetensors", shapes)
with open("map.txt", "w") as f:
    f.write("# moons_mlp <- nn.Sequential\nw1 = net.0.weight\nb1 = net.0.bias   # first layer\n\n"
            "w2 = net.2.weight\nb2 = net.2.bias\nw3 = net.4.weight\nb3 = net.4.bias\n")

r = gen("-o", "out", "--weights", "torch.safetensors", "--name-map", "map.txt", "--embed")
check(r.returncode == 0, f"gen --name-map: {r.returncode} {r.stderr}")
if r.returncode == 0:
    with open("out/moons_mlp_weights.c") as f:
        text = f.read()
    # the params' arrays in the order the file defines them, each holding one value
    values = {m.group(1): set(re.findall(r"(-?[0-9.]+)f", m.group(2)))
              for m in re.finditer(r"(\w+)_values\[\d+\] = \{(.*?)\};", text, re.S)}
    want = {"w1": "0.125", "b1": "0.25", "w2": "0.375", "b2": "0.5", "w3": "0.625", "b3": "0.75"}
    for name, v in want.items():
        check(values.get(name) == {v}, f"{name}: compiled-in values {values.get(name)}, expected {v}")

# The same map saved with a UTF-8 byte-order mark and CRLF line ends (a Windows editor's).
with open("map.txt", "rb") as f:
    plain = f.read()
with open("bom.txt", "wb") as f:
    f.write(b"\xef\xbb\xbf" + plain.replace(b"\n", b"\r\n"))
r = gen("-o", "out_bom", "--weights", "torch.safetensors", "--name-map", "bom.txt", "--embed")
check(r.returncode == 0, f"gen --name-map with a byte-order mark: {r.returncode} {r.stderr}")

r = gen("-o", "out2", "--weights", "torch.safetensors", "--embed")
check(r.returncode == 1 and "no tensor 'w1'" in r.stderr, f"without the map: {r.returncode} {r.stderr}")
# The error lists what the file holds (issue 20 item 5), as the programs' --weights does.
check("; the file holds: net.0.weight, net.0.bias, net.2.weight" in r.stderr,
      f"without the map: the error does not list the file's tensors: {r.stderr}")
with open("wrong.txt", "w") as f:
    f.write("w1 = net.0.weights\n")
r = gen("-o", "out3", "--weights", "torch.safetensors", "--embed", "--name-map", "wrong.txt")
check(r.returncode == 1 and "net.0.weights" in r.stderr and "param 'w1' through the name map" in r.stderr
      and "the file holds: net.0.weight, " in r.stderr, f"a mapped name missing: {r.stderr}")
for content, needle in [("w9 = x\n", "bad.txt: line 1: 'w9' is no param of model 'moons_mlp'"),
                        ("w1 net.0.weight\n", "bad.txt: line 1: expected 'cannl_name = file.key'"),
                        ("w1 = a\nw1 = b\n", "bad.txt: line 2: 'w1' is mapped twice")]:
    with open("bad.txt", "w") as f:
        f.write(content)
    r = gen("-o", "out4", "--weights", "torch.safetensors", "--embed", "--name-map", "bad.txt")
    check(r.returncode == 1 and needle in r.stderr, f"map {content!r}: {r.returncode} {r.stderr}")
    check(not os.path.exists("out4"), "nothing written for a bad map")
r = gen("-o", "out5", "--name-map", "map.txt")
check(r.returncode == 2 and "--name-map" in r.stderr, f"--name-map without --weights: {r.returncode} {r.stderr}")

t.finish("gen_name_map")
