#!/usr/bin/env bash
# bench/generate_bench.sh — generation with the KV cache against re-running the full forward
# pass per token (issue 17, item 4: the cache must be >= 20x faster with prompt + N <= ctx).
#
#   bench/generate_bench.sh [--reps R] [--threads T] [--ctx C] [BUILD_DIR]
#
# Generates specs/gpt_char.cannl at ctx = C (default 256, `cannl gen --dim ctx=C`) with
# BUILD_DIR's generator (default build/release, configured and built first: cannl and the
# runtime), compiles it as the generated CMakeLists.txt does (-O3, reassociation allowed,
# OpenMP), makes a checkpoint (one training step on a few KB of text: the timing does not
# depend on the values), then times
#   gpt_char_infer --generate N --prompt "And God said" --temperature 0.8 --top-k 40
# with N = C - 12 (the prompt and the N tokens fill the context exactly once: no window
# shift), with the KV cache (the default) and with CANNL_GENERATE_FULL_FORWARD=1 (one
# forward pass over the ctx window per token, as --generate did before the cache), and the
# same with N = 1 (start-up, the checkpoint's loading and the prompt: what both runs share),
# alternating fresh processes, best of R (default 3) each, at T threads (default 1). The
# generation's time is the difference of the two lengths (the steady state, as
# /work/shared/benchmarking.md times steps); the whole process's times are printed too.
# Checks that both print the same text, and prints the times and their ratios. Not part of
# the test suite (a timing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=3 threads=1 ctx=256
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    -*) echo "usage: bench/generate_bench.sh [--reps R] [--threads T] [--ctx C] [BUILD_DIR]" >&2; exit 2 ;;
    *) break ;;
  esac
done
cd "$root"
if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
else
  build=$root/build/release
  cmake --preset release >/dev/null
fi
cmake --build "$build" --target cannl cannl_rt >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$build/generator/cannl" gen specs/gpt_char.cannl --dim ctx="$ctx" -o "$work/gen" >/dev/null
flags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp
       -I"$work/gen" -I"$root/runtime-lib")
for f in gpt_char gpt_char_inference gpt_char_train gpt_char_infer; do
  cc "${flags[@]}" -c "$work/gen/$f.c" -o "$work/$f.o" &
done
wait
rt=$build/runtime-lib/libcannl_rt.a
cc -fopenmp "$work/gpt_char.o" "$work/gpt_char_inference.o" "$work/gpt_char_train.o" "$rt" -lz -lm -o "$work/train"
cc -fopenmp "$work/gpt_char_inference.o" "$work/gpt_char_infer.o" "$rt" -lz -lm -o "$work/infer"

python3 -c "import sys; sys.stdout.write('In the beginning God created the heaven and the earth. ' * 100)" > "$work/text.txt"
"$work/train" --stream tokens,next="$work/text.txt" --steps 1 --batch 2 --seed 1 --threads "$threads" \
  --checkpoint "$work/ck.safetensors" --quiet >/dev/null

prompt="And God said"
n=$((ctx - ${#prompt}))
gen() {  # gen FULL OUT N: one run generating N tokens; prints its wall time in seconds
  local t0 t1
  t0=$(date +%s.%N)
  CANNL_GENERATE_FULL_FORWARD=$1 "$work/infer" --weights "$work/ck.safetensors" --threads "$threads" \
    --generate "$3" --prompt "$prompt" --temperature 0.8 --top-k 40 --seed 1 > "$2"
  t1=$(date +%s.%N)
  awk "BEGIN { printf \"%.4f\", $t1 - $t0 }"
}
min() { awk "BEGIN { print ($1 < $2) ? $1 : $2 }"; }
best_cache=1e9 best_full=1e9 best_cache1=1e9 best_full1=1e9
for ((r = 0; r < reps; r++)); do
  best_cache=$(min "$(gen 0 "$work/cache.txt" "$n")" $best_cache)
  best_full=$(min "$(gen 1 "$work/full.txt" "$n")" $best_full)
  best_cache1=$(min "$(gen 0 "$work/cache1.txt" 1)" $best_cache1)
  best_full1=$(min "$(gen 1 "$work/full1.txt" 1)" $best_full1)
done
if ! cmp -s "$work/cache.txt" "$work/full.txt"; then
  echo "generate_bench: the KV cache and the full forward pass printed different text" >&2
  exit 1
fi
echo "gpt_char, ctx $ctx, prompt ${#prompt} bytes + $n generated, $threads thread(s), best of $reps:"
awk -v c="$best_cache" -v f="$best_full" -v c1="$best_cache1" -v f1="$best_full1" -v n="$n" 'BEGIN {
  printf "  whole process, %d tokens:   KV cache %.4f s, full forward per token %.4f s: %.1fx\n", n, c, f, f / c
  printf "  whole process, 1 token:     KV cache %.4f s, full forward per token %.4f s (start-up, prompt)\n", c1, f1
  printf "  the %d tokens after the first (the difference): KV cache %.2f ms/token, full forward %.2f ms/token: speedup %.1fx\n",
         n - 1, (c - c1) * 1000 / (n - 1), (f - f1) * 1000 / (n - 1), (f - f1) / (c - c1)
}'
