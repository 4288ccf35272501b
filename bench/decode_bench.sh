#!/usr/bin/env bash
# bench/decode_bench.sh — generation at batch 1 against the memory-bandwidth bound (issue 39,
# item 2), and at batch 8 (item 3: 8 sequences per batched step): fp32 and int8 weights
# (`cannl gen --quantize int8`), 1 and 2 threads.
#
#   bench/decode_bench.sh [--spec SPEC] [--dim NAME=VALUE]... [--prompt P] [--steps N] [--reps R] [--batch B] [BUILD_DIR]
#
# Generates SPEC (default specs/gpt2_124m.cannl, ctx 1024) twice with BUILD_DIR's generator
# (default build/release; cannl and the runtime are built first) at --max-batch B (default 8: the KV
# cache's sequences), compiles each forward-only
# state as the generated CMakeLists.txt does (-O3, reassociation allowed, OpenMP) with
# bench/decode_bench.c (random params; a prompt of P ids, default 64, then N decode steps,
# default 256, best of R runs, default 3), and bench/stream_read.c (a STREAM-like read of
# 1 GiB). Prints per precision and thread count: tokens/s, the bytes a step reads (the
# weights as the forward-only state holds them: the model card's parameter bytes, or its
# `quantized.bytes` for int8; the KV cache and one embedding row per token left out), the
# read bandwidth at that thread count, the bound (bandwidth / bytes) and tokens/s as a share of
# it; then batch B's total tokens/s (B sequences, each its own prompt, N batched steps) and its
# ratio to batch 1's. Each run also prints tokens per CPU second (a loaded machine's figure).
# Not part of the test suite (a timing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=specs/gpt2_124m.cannl prompt=64 steps=256 reps=3 batch=8 dims=()
while [ $# -gt 0 ]; do
  case $1 in
    --spec) spec=$2; shift 2 ;;
    --dim) dims+=(--dim "$2"); shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    -*) echo "usage: bench/decode_bench.sh [--spec SPEC] [--dim NAME=VALUE]... [--prompt P] [--steps N] [--reps R] [--batch B] [BUILD_DIR]" >&2
        exit 2 ;;
    *) break ;;
  esac
done
cd "$root"
if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
else
  build=$root/build/release
  [ -f "$build/build.ninja" ] || cmake --preset release >/dev/null
fi
cmake --build "$build" --target cannl cannl_rt >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-std=c11 -O3 -march=native -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp
       -I"$root/runtime-lib")
rt=$build/runtime-lib/libcannl_rt.a
cc -O3 -march=native -fopenmp bench/stream_read.c -o "$work/stream_read"
declare -A bw
for t in 1 2; do
  bw[$t]=$(OMP_NUM_THREADS=$t "$work/stream_read" 1024 5 | sed -n 's/^read GB\/s: \([0-9.]*\).*/\1/p')
  echo "read bandwidth, $t thread(s): ${bw[$t]} GB/s"
done
for prec in fp32 int8; do
  q=()
  [ "$prec" = int8 ] && q=(--quantize int8)
  "$build/generator/cannl" gen "$spec" "${dims[@]}" "${q[@]}" --max-batch "$batch" -o "$work/$prec" >/dev/null
  model=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model'])" "$work/$prec"/*.json)
  bytes=$(python3 - "$work/$prec/$model.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
q = c.get("quantized")
print(q["bytes"] if q else sum(p["values"] for p in c["params"]) * 4)
PY
)
  cc "${flags[@]}" -I"$work/$prec" -c "$work/$prec/${model}_inference.c" -o "$work/$prec.o"
  cc "${flags[@]}" -I"$work/$prec" -DHEADER="\"$model.h\"" -DAPI="${model}_infer_api" -DDECODE="${model}_decode_api" \
    bench/decode_bench.c "$work/$prec.o" "$rt" -lz -lm -o "$work/bench_$prec"
  for t in 1 2; do
    out=$(OMP_NUM_THREADS=$t "$work/bench_$prec" "$prompt" "$steps" "$reps")
    tps=$(echo "$out" | sed -n 's/^tokens\/s: \([0-9.]*\).*/\1/p')
    python3 - "$prec" "$t" "$tps" "$bytes" "${bw[$t]}" "$out" <<'PY'
import sys
prec, t, tps, nbytes, bw, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
bound = bw * 1e9 / nbytes
print(f"{prec} {t} thread(s): {tps:.2f} tokens/s, {nbytes / 1e6:.1f} MB read per token, "
      f"{tps * nbytes / 1e9:.2f} GB/s, bound {bound:.2f} tokens/s ({100 * tps / bound:.0f}% of it)  [{out}]")
PY
    if [ "$batch" -gt 1 ]; then
      outb=$(OMP_NUM_THREADS=$t "$work/bench_$prec" "$prompt" "$steps" "$reps" "$batch")
      python3 - "$prec" "$t" "$batch" "$out" "$outb" <<'PY'
import re, sys
prec, t, b, one, many = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
tps = lambda s: float(re.search(r"tokens/s: ([0-9.]+)", s).group(1))
cpu = lambda s: float(re.search(r"per CPU second ([0-9.]+)", s).group(1))
print(f"{prec} {t} thread(s) batch {b}: {tps(many):.2f} tokens/s in all, {tps(many) / tps(one):.2f}x batch 1 "
      f"(per CPU second {cpu(many):.2f}, {cpu(many) / cpu(one):.2f}x)  [{many}]")
PY
    fi
  done
done
