#!/usr/bin/env bash
# bench/gen_scaling.sh — how `cannl gen` scales with the length of a spec (issue 13, item 10).
#
#   bench/gen_scaling.sh [--reps R] [CANNL]
#
# Writes two shapes of spec at N = 500, 1000 and 2000 statements (a chain of [8 -> 8] layers,
# a param and a layer each; a chain of [1] params each in a pointwise statement), times
# `cannl gen SPEC -o DIR` (C, -O2) on each, best of R runs (default 3), and prints the times,
# the ratios time(2N) / time(N) and the slowest stages at N = 2000 (cannl gen --time).
# Fails (exit 1) unless both shapes take at most 2 s at 2000 statements and
# time(2000) / time(1000) <= 2.5: near-linear. Not part of the test suite (a timing); CANNL
# defaults to the release build's generator, built first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
if [ "${1:-}" = --reps ]; then reps=$2; shift 2; fi
if [ $# -ge 1 ]; then
  cannl=$1
else
  cd "$root"
  cmake --preset release >/dev/null
  cmake --build --preset release --target cannl >/dev/null
  cannl=$root/build/release/generator/cannl
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
spec() {  # spec SHAPE N FILE
  python3 - "$1" "$2" "$3" <<'PY'
import sys
shape, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
k = n // 2
lines = [f"model {shape}"]
if shape == "layers":
    lines.append("input x : [8]")
    prev = "x"
    for i in range(1, k + 1):
        lines += [f"param w{i} : [8 -> 8] = uniform(-0.3, 0.3)", f"h{i} = tanh(w{i} * {prev})"]
        prev = f"h{i}"
    lines.append(f"loss = sum({prev})")
else:
    lines.append("input x : [4]")
    prev = "x"
    for i in range(1, k + 1):
        lines += [f"param p{i} : [1] = uniform(-1, 1)", f"a{i} = {prev} + p{i} *. x"]
        prev = f"a{i}"
    lines.append(f"loss = sum({prev} *. {prev})")
lines.append("minimize loss with sgd(lr = 0.01)")
open(path, "w").write("\n".join(lines) + "\n")
PY
}
best() {  # best SPEC: the best wall time of $reps runs, in seconds
  python3 - "$cannl" "$1" "$work/out" "$reps" <<'PY'
import subprocess, sys, time
cannl, spec, out, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
best = float("inf")
for _ in range(reps):
    t = time.perf_counter()
    subprocess.run([cannl, "gen", spec, "-o", out], check=True)
    best = min(best, time.perf_counter() - t)
print(f"{best:.3f}")
PY
}
status=0
printf '%-8s %10s %10s %10s %10s\n' shape "N=500 s" "N=1000 s" "N=2000 s" "2000/1000"
for shape in layers params; do
  declare -A t=()
  for n in 500 1000 2000; do
    spec $shape $n "$work/$shape$n.cannl"
    t[$n]=$(best "$work/$shape$n.cannl")
  done
  ratio=$(python3 -c "print(f'{${t[2000]} / ${t[1000]}:.2f}')")
  printf '%-8s %10s %10s %10s %10s\n' $shape "${t[500]}" "${t[1000]}" "${t[2000]}" "$ratio"
  python3 -c "import sys; sys.exit(0 if ${t[2000]} <= 2.0 and ${t[2000]} / ${t[1000]} <= 2.5 else 1)" || status=1
  echo "  slowest stages at N = 2000:"
  "$cannl" gen "$work/${shape}2000.cannl" -o "$work/out" --time 2>&1 | sort -k3 -g -r | head -4 | sed 's/^cannl: /    /'
  unset t
done
[ $status -eq 0 ] && echo "ok: near-linear (<= 2 s at 2000 statements, time(2000)/time(1000) <= 2.5)" \
  || echo "FAIL: slower than near-linear" >&2
exit $status
