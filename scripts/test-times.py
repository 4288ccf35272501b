#!/usr/bin/env python3
"""test-times.py BUILD_DIR [N] — where a preset's time went, from its last build and test run.

Reads BUILD_DIR/.ninja_log (the build steps of the last `cmake --build`) and
BUILD_DIR/Testing/Temporary/LastTest.log (the tests of the last `ctest`), and prints
  - the build: its wall time and the sum of its steps' times, then the N slowest steps;
  - the tests: their count and summed time, the summed time per label (a test counts under
    each of its labels), then the N slowest tests with their labels.
scripts/test.sh prints this after each preset; docs/testing.md keeps the tables. N defaults to 20.
"""
import json
import os
import re
import subprocess
import sys
from collections import defaultdict


def build_steps(build_dir):
    """[(seconds, output)], one per build command (a command with several outputs once)."""
    path = os.path.join(build_dir, ".ninja_log")
    if not os.path.exists(path):
        return [], 0.0
    steps = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            start, end, _mtime, output, cmd_hash = parts
            # The log appends: a later record of an output replaces the earlier one. (Builds
            # that ran again, e.g. from a test, restart ninja's clock: the wall time is then
            # only approximate.)
            steps[output] = (int(start), int(end), cmd_hash)
    # A command with several outputs is one step: count it once.
    by_cmd = {}
    for output, (start, end, cmd_hash) in steps.items():
        key = (start, end, cmd_hash)
        if key not in by_cmd or output < by_cmd[key]:
            by_cmd[key] = output
    result = [((end - start) / 1000.0, output) for (start, end, _), output in by_cmd.items()]
    wall = (max(e for (_, e, _) in by_cmd) - min(s for (s, _, _) in by_cmd)) / 1000.0 if by_cmd else 0.0
    return result, wall


def test_times(build_dir):
    """{name: seconds} of the last ctest run."""
    path = os.path.join(build_dir, "Testing", "Temporary", "LastTest.log")
    times = {}
    if not os.path.exists(path):
        return times
    name = None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"^\d+/\d+ Test: (.+)$", line)
            if m:
                name = m.group(1)
                continue
            m = re.match(r"^Test time =\s*([0-9.]+) sec", line)
            if m and name:
                times[name] = float(m.group(1))
                name = None
    return times


def test_labels(build_dir):
    # `ctest --show-only` rewrites LastTest.log (as an empty run): keep the real one.
    log = os.path.join(build_dir, "Testing", "Temporary", "LastTest.log")
    kept = open(log, "rb").read() if os.path.exists(log) else None
    try:
        out = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"], capture_output=True,
                             text=True, check=False).stdout
    finally:
        if kept is not None:
            with open(log, "wb") as f:
                f.write(kept)
    labels = {}
    try:
        for t in json.loads(out).get("tests", []):
            ls = []
            for p in t.get("properties", []):
                if p["name"] == "LABELS":
                    ls = p["value"]
            labels[t["name"]] = ls
    except json.JSONDecodeError:
        pass
    return labels


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    build_dir = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    steps, wall = build_steps(build_dir)
    print(f"build: {len(steps)} steps, {wall:.0f} s wall, {sum(s for s, _ in steps):.0f} s summed")
    for secs, output in sorted(steps, reverse=True)[:n]:
        print(f"  {secs:8.1f} s  {output}")
    times = test_times(build_dir)
    labels = test_labels(build_dir)
    print(f"tests: {len(times)} run, {sum(times.values()):.0f} s summed")
    per_label = defaultdict(lambda: [0, 0.0])
    for name, secs in times.items():
        for label in labels.get(name, []) or ["(none)"]:
            per_label[label][0] += 1
            per_label[label][1] += secs
    for label, (count, secs) in sorted(per_label.items(), key=lambda kv: -kv[1][1]):
        print(f"  label {label:10s} {count:4d} tests {secs:8.0f} s")
    for name, secs in sorted(times.items(), key=lambda kv: -kv[1])[:n]:
        print(f"  {secs:8.1f} s  {name}  [{','.join(labels.get(name, []))}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
