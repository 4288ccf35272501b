#!/usr/bin/env python3
"""`cannl plot METRICS.jsonl -o curve.svg`: the SVG parses, has one panel per kind of series
(losses, metrics, a varying learning rate), one polyline per series with one point per record
carrying it, placed inside its panel in step order; bad logs and unwritable outputs are errors.
    plot_test.py CANNL WORKDIR"""
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

cannl, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    return subprocess.run([cannl, "plot", *args], capture_output=True, text=True)


SVG = "{http://www.w3.org/2000/svg}"

# A language-model run: train loss and lr every 10 steps (cosine), validation every 50.
log = os.path.join(work, "lm.jsonl")
with open(log, "w") as f:
    for step in range(10, 301, 10):
        rec = {"step": step, "train_loss": 5.5 * math.exp(-step / 100) + 1.2,
               "lr": 3e-4 * 0.5 * (1 + math.cos(math.pi * step / 300)), "elapsed": step * 0.1}
        if step % 50 == 0:
            rec.update({"val_loss": 5.6 * math.exp(-step / 110) + 1.3, "val_accuracy": 0.2 + step / 1000})
        f.write(json.dumps(rec) + "\n")
    f.write("\n")  # a trailing blank line is fine
out = os.path.join(work, "lm.svg")
r = run(log, "-o", out, "--title", "gpt_char on the KJV")
check(r.returncode == 0, f"plot exit {r.returncode}: {r.stderr}")
root = ET.parse(out).getroot()
check(root.tag == SVG + "svg", "root element is svg")
panels = {g.get("data-panel"): g for g in root.iter(SVG + "g") if g.get("class") == "panel"}
check(sorted(panels) == ["learning rate", "loss", "metrics"], f"panels {sorted(panels)}")
series = {p.get("data-series"): (name, p) for name, g in panels.items() for p in g.iter(SVG + "polyline")}
check(sorted(series) == ["lr", "train_loss", "val_accuracy", "val_loss"], f"series {sorted(series)}")
check(series["train_loss"][0] == "loss" and series["val_loss"][0] == "loss", "losses in the loss panel")
check(series["val_accuracy"][0] == "metrics" and series["lr"][0] == "learning rate", "metric and lr panels")
for name, want in [("train_loss", 30), ("val_loss", 6), ("lr", 30), ("val_accuracy", 6)]:
    pts = [tuple(map(float, p.split(","))) for p in series[name][1].get("points").split()]
    check(len(pts) == want, f"{name}: {len(pts)} points, expected {want}")
    xs = [x for x, _ in pts]
    check(xs == sorted(xs) and len(set(xs)) == len(xs), f"{name}: x increasing")
    rect = series[name][1]
    frame = [e for e in panels[series[name][0]].iter(SVG + "rect")][0]
    x0, y0 = float(frame.get("x")), float(frame.get("y"))
    x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
    check(all(x0 - 0.01 <= x <= x1 + 0.01 and y0 - 0.01 <= y <= y1 + 0.01 for x, y in pts), f"{name}: inside its panel")
# A falling loss is drawn falling (SVG y grows downwards).
pts = [tuple(map(float, p.split(","))) for p in series["train_loss"][1].get("points").split()]
check(pts[0][1] < pts[-1][1], "train_loss falls")
texts = [t.text for t in root.iter(SVG + "text")]
check("gpt_char on the KJV" in texts and "val_loss" in texts and "step" in texts, "title, legend and axis label")

# A classifier's log as the training program writes it: step losses, epoch test records
# without a step (placed at the last step before them), a constant lr (no lr panel).
log2 = os.path.join(work, "mlp.jsonl")
with open(log2, "w") as f:
    for e in range(2):
        for s in range(1, 4):
            f.write(json.dumps({"epoch": e + 1, "step": e * 3 + s, "loss": 1.0 / (e * 3 + s), "lr": 0.1}) + "\n")
        f.write(json.dumps({"epoch": e + 1, "test_loss": 0.5 - e * 0.1, "accuracy": 0.8 + e * 0.05}) + "\n")
r = run(log2, "-o", os.path.join(work, "mlp.svg"))
check(r.returncode == 0, f"mlp plot exit {r.returncode}: {r.stderr}")
root = ET.parse(os.path.join(work, "mlp.svg")).getroot()
panels = sorted(g.get("data-panel") for g in root.iter(SVG + "g") if g.get("class") == "panel")
check(panels == ["loss", "metrics"], f"mlp panels {panels}")
acc = [p for p in root.iter(SVG + "polyline") if p.get("data-series") == "accuracy"][0]
check(len(acc.get("points").split()) == 2, "two accuracy points")

# Errors.
bad = os.path.join(work, "bad.jsonl")
with open(bad, "w") as f:
    f.write('{"step": 1, "loss": 2}\n[1, 2]\n')
r = run(bad, "-o", os.path.join(work, "bad.svg"))
check(r.returncode == 1 and "bad.jsonl:2:" in r.stderr, f"malformed line: {r.returncode} {r.stderr}")
check(not os.path.exists(os.path.join(work, "bad.svg")), "nothing written for a bad log")
# A line that is not JSON at all says what the parser found (a number past a double: not "not an object").
with open(bad, "w") as f:
    f.write('{"step": 1, "loss": 2}\n{"step": 2, "loss": 1e999}\n')
r = run(bad, "-o", os.path.join(work, "bad.svg"))
check(r.returncode == 1 and "bad.jsonl:2: not valid JSON (number overflow parsing '1e999'" in r.stderr,
      f"a number out of range: {r.returncode} {r.stderr}")
# A log being written (or cut by a kill): its last line, without a newline, is not a whole
# record yet and is left out; the records before it are drawn.
live = os.path.join(work, "live.jsonl")
with open(live, "w") as f:
    f.write('{"step": 1, "loss": 2}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
r = run(live, "-o", os.path.join(work, "live.svg"))
check(r.returncode == 0, f"log with a partial last line: {r.returncode} {r.stderr}")
if r.returncode == 0:
    root = ET.parse(os.path.join(work, "live.svg")).getroot()
    pts = [p for p in root.iter(SVG + "polyline") if p.get("data-series") == "loss"]
    check(len(pts) == 1 and len(pts[0].get("points").split()) == 2, "partial last line: two loss points")
empty = os.path.join(work, "empty.jsonl")
open(empty, "w").close()
r = run(empty, "-o", os.path.join(work, "empty.svg"))
check(r.returncode == 1 and "no numeric series" in r.stderr, f"empty log: {r.returncode} {r.stderr}")
r = run(os.path.join(work, "missing.jsonl"), "-o", os.path.join(work, "x.svg"))
check(r.returncode == 2 and "missing.jsonl" in r.stderr, f"missing log: {r.returncode} {r.stderr}")
r = run(log, "-o", os.path.join(work, "no", "such", "dir", "x.svg"))
check(r.returncode == 2 and "cannot write" in r.stderr, f"unwritable output: {r.returncode} {r.stderr}")
check(not [n for n in os.listdir(work) if "cannl-tmp" in n], "no temporary files left")
with open(log, "rb") as f:
    before = f.read()
r = run(log, "-o", os.path.join(work, ".", "lm.jsonl"))
check(r.returncode == 2 and "is the metrics log itself" in r.stderr, f"-o the log itself: {r.returncode} {r.stderr}")
with open(log, "rb") as f:
    check(f.read() == before, "-o the log itself replaced the log")
r = subprocess.run([cannl, "plot", log], capture_output=True, text=True)
check(r.returncode == 2, "missing -o is a usage error")

# Only a regular file of this user's is replaced (issue 36): as root, `-o /dev/null` replaced
# the device with the SVG. A FIFO, a device node of our own, a directory and a symbolic link
# are refused and left as they are (the link's target unwritten).
import stat
special = os.path.join(work, "special")
os.makedirs(special, exist_ok=True)
for n in os.listdir(special):
    p = os.path.join(special, n)
    os.rmdir(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
victim = os.path.join(special, "victim.svg")
with open(victim, "w") as f:
    f.write("keep me\n")
targets = {"fifo": ("is a FIFO", stat.S_IFIFO), "dir": ("is a directory", stat.S_IFDIR),
           "link": ("is a symbolic link", stat.S_IFLNK)}
os.mkfifo(os.path.join(special, "fifo"))
os.mkdir(os.path.join(special, "dir"))
os.symlink("victim.svg", os.path.join(special, "link"))
if os.geteuid() == 0:
    os.mknod(os.path.join(special, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    targets["null"] = ("is a device", stat.S_IFCHR)
for name, (needle, keeps) in targets.items():
    path = os.path.join(special, name)
    try:
        r = subprocess.run([cannl, "plot", log, "-o", path], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and f"cannot write {path}: it {needle}" in r.stderr, f"-o {name}: {r.returncode} {r.stderr}")
    except subprocess.TimeoutExpired:
        check(False, f"-o {name}: hung")
    check(stat.S_IFMT(os.lstat(path).st_mode) == keeps, f"-o {name} replaced it")
with open(victim) as f:
    check(f.read() == "keep me\n", "-o a link wrote its target")
# The temporary is created exclusively, without following links: one planted under its name
# (this pid's: the child plants it, then execs cannl) makes the write fail, never redirects it.
out = os.path.join(special, "out.svg")
err_path = os.path.join(special, "stderr.txt")
pid = os.fork()
if pid == 0:
    os.symlink(victim, f"{out}.cannl-tmp-{os.getpid()}")
    fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.execv(cannl, [cannl, "plot", log, "-o", out])
_, status = os.waitpid(pid, 0)
with open(err_path) as f:
    err_text = f.read()
check(os.waitstatus_to_exitcode(status) == 2 and "cannot create" in err_text,
      f"a planted temporary link: {os.waitstatus_to_exitcode(status)} {err_text}")
with open(victim) as f:
    check(f.read() == "keep me\n", "a planted temporary link redirected the SVG")
check(not os.path.exists(out), "the SVG was written through a planted link")


# Any finite input ends (issue 36): x values one ulp apart near 1e20 looped forever in the tick
# loop; values near the largest doubles overflowed the ranges into NaN coordinates.
def finite_svg(name, records):
    path = os.path.join(work, name + ".jsonl")
    with open(path, "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    svg = os.path.join(work, name + ".svg")
    try:
        r = subprocess.run([cannl, "plot", path, "-o", svg], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        check(False, f"{name}: cannl plot did not end")
        return
    check(r.returncode == 0, f"{name}: exit {r.returncode} {r.stderr}")
    if r.returncode != 0:
        return
    bad = []
    for e in ET.parse(svg).getroot().iter():
        for k, v in e.attrib.items():
            nums = v.replace(",", " ").split() if k == "points" else [v]
            for x in nums:
                try:
                    if not math.isfinite(float(x)):
                        bad.append(f"{k}={v[:40]}")
                except ValueError:
                    pass
        if e.text and e.text.strip().lower() in ("nan", "inf", "-inf"):
            bad.append(f"text {e.text}")
    check(not bad, f"{name}: non-finite coordinates {bad[:5]}")


big = 1e20
finite_svg("ulp_x", [{"step": big, "loss": 1.0}, {"step": math.nextafter(big, math.inf), "loss": 0.5}])
finite_svg("ulp_y", [{"step": 1, "loss": big}, {"step": 2, "loss": math.nextafter(big, math.inf)}])
finite_svg("huge_y", [{"step": 1, "loss": -1.7e308}, {"step": 2, "loss": 1.7e308}, {"step": 3, "loss": 0.0}])
finite_svg("huge_x", [{"step": -1.7e308, "loss": 1.0}, {"step": 1.7e308, "loss": 2.0}])
finite_svg("max_both", [{"step": -1.7976931348623157e308, "loss": 1.7976931348623157e308},
                        {"step": 1.7976931348623157e308, "loss": -1.7976931348623157e308}])
finite_svg("tiny", [{"step": 1, "loss": 5e-324}, {"step": 2, "loss": 1e-323}, {"step": 3, "loss": -5e-324}])

print(f"plot_test: {'all checks passed' if not failures else f'{len(failures)} failed'}")
sys.exit(1 if failures else 0)
