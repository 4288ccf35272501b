#!/usr/bin/env python3
"""Checks the examples in docs/language.md against the `cannl` binary.

usage: check_docs.py CANNL_BINARY MARKDOWN_FILE

Fenced blocks are checked by their tag:

  ```cannl         a complete spec: `cannl check` must accept it (exit status 0) without a
                   warning.
  ```cannl-warning a spec `cannl check` accepts (exit status 0) with a warning.
  ```cannl-error   a bad spec: `cannl check` must reject it (exit status 1).

Either may be followed (blank lines allowed in between) by a ```text block whose first line
starts with `$ cannl check`. Options on that line (words starting with `--`) are passed to
`cannl check`; the last other word is only the file name shown to the reader. Then:

  * after a cannl block, the remaining lines must equal the tool's stdout exactly;
  * after a cannl-error or cannl-warning block, each remaining line must appear in stderr
    (and, after a cannl-warning block, stdout is not compared). Before comparing,
    every stderr line has its file-path prefix removed: everything up to the first
    `:LINE:COL:` (so `/tmp/x/spec.cannl:3:7: error: ...` becomes `3:7: error: ...`), and the
    path in the closing `PATH: N errors` line (it becomes `N errors`).

Any other tag starting with `cannl` is an error (a typo would silently skip a check).
Prints one line per failing block, with its line number in the markdown file, and exits 1 if
any block failed.
"""

import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^\s`]*)\s*$")
LOCATION = re.compile(r"^.*?:(\d+:\d+:)")


def is_closing(line, fence):
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def parse_blocks(lines):
    """Returns [(tag, first_line_number, body_lines)] for every fenced block."""
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2)
        start = i + 1  # 1-based line number of the opening fence
        body = []
        i += 1
        while i < len(lines) and not is_closing(lines[i], fence):
            body.append(lines[i])
            i += 1
        end = i + 1  # line number of the closing fence
        blocks.append({"tag": tag, "line": start, "end": end, "body": body})
        i += 1
    return blocks


def only_blank_between(lines, a_end, b_start):
    """True when the lines strictly between two fences (1-based) are all blank."""
    return all(not lines[k - 1].strip() for k in range(a_end + 1, b_start))


def normalise_stderr(text, path):
    out = []
    for line in text.splitlines():
        m = LOCATION.match(line)
        if m and not line.startswith(" "):
            line = line[m.start(1):]
        elif line.startswith(path + ": "):
            line = line[len(path) + 2:]
        out.append(line.rstrip())
    return out


def run_block(cannl, spec, options, workdir, index):
    path = os.path.join(workdir, "example%d.cannl" % index)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(spec) + "\n")
    try:
        p = subprocess.run([cannl, "check"] + options + [path], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return None, "", "", path
    return p.returncode, p.stdout, p.stderr, path


def check(cannl, md_path):
    with open(md_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = parse_blocks(lines)
    failures = []
    checked = 0
    with tempfile.TemporaryDirectory(prefix="cannl-docs-") as workdir:
        for n, b in enumerate(blocks):
            tag = b["tag"]
            if not tag.startswith("cannl"):
                continue
            where = "%s:%d" % (md_path, b["line"])
            if tag not in ("cannl", "cannl-error", "cannl-warning"):
                failures.append("%s: unknown block tag '%s' (expected cannl, cannl-warning or cannl-error)"
                                % (where, tag))
                continue
            expected = None
            options = []
            if n + 1 < len(blocks):
                nxt = blocks[n + 1]
                if (nxt["tag"] == "text" and nxt["body"] and nxt["body"][0].startswith("$ cannl check")
                        and only_blank_between(lines, b["end"], nxt["line"])):
                    words = nxt["body"][0].split()[3:]
                    options = [w for w in words if w.startswith("--")]
                    expected = [l.rstrip() for l in nxt["body"][1:]]
            checked += 1
            rc, out, err, path = run_block(cannl, b["body"], options, workdir, n)
            if rc is None:
                failures.append("%s: cannl check timed out" % where)
                continue
            warned = any(": warning: " in l for l in err.splitlines())
            if tag in ("cannl", "cannl-warning"):
                if rc != 0:
                    failures.append("%s: expected the spec to be accepted (exit 0), got exit %d:\n%s"
                                    % (where, rc, indent(err)))
                    continue
                if warned != (tag == "cannl-warning"):
                    failures.append("%s: %s:\n%s" % (where, "a warning in a cannl block (tag it cannl-warning)"
                                                      if warned else "no warning", indent(err)))
                    continue
                if tag == "cannl-warning":
                    have = set(normalise_stderr(err, path))
                    missing = [l for l in expected or [] if l.strip() and l not in have]
                    if missing:
                        failures.append("%s: these lines are not in stderr:\n%s\n  stderr was:\n%s"
                                        % (where, indent("\n".join(missing)),
                                           indent("\n".join(normalise_stderr(err, path)))))
                elif expected is not None:
                    got = [l.rstrip() for l in out.rstrip("\n").split("\n")] if out else []
                    while expected and not expected[-1]:
                        expected.pop()
                    if got != expected:
                        k = next((k for k in range(max(len(got), len(expected)))
                                  if k >= len(got) or k >= len(expected) or got[k] != expected[k]))
                        failures.append("%s: stdout differs from the text block (first at output line %d)."
                                        "\n  expected:\n%s\n  got:\n%s"
                                        % (where, k + 1, indent("\n".join(expected)), indent("\n".join(got))))
            else:
                if rc != 1:
                    failures.append("%s: expected the spec to be rejected (exit 1), got exit %s%s"
                                    % (where, rc, ":\n" + indent(err) if err else ""))
                    continue
                if out:
                    failures.append("%s: a rejected spec printed to stdout:\n%s" % (where, indent(out)))
                have = set(normalise_stderr(err, path))
                if expected is not None:
                    missing = [l for l in expected if l.strip() and l not in have]
                    if missing:
                        failures.append("%s: these lines are not in stderr:\n%s\n  stderr was:\n%s"
                                        % (where, indent("\n".join(missing)),
                                           indent("\n".join(normalise_stderr(err, path)))))
    return checked, failures


def indent(text):
    return "\n".join("    " + l for l in text.rstrip("\n").split("\n"))


def main(argv):
    if len(argv) != 3:
        print("usage: check_docs.py CANNL_BINARY MARKDOWN_FILE", file=sys.stderr)
        return 2
    cannl, md_path = argv[1], argv[2]
    checked, failures = check(cannl, md_path)
    for f in failures:
        print("FAIL " + f)
    if checked == 0:
        print("FAIL %s: no ```cannl or ```cannl-error blocks found" % md_path)
        return 1
    print("%d example blocks checked, %d failed" % (checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
