#!/usr/bin/env bash
# opt_levels.sh — training-step time at -O2 against -O0 for the example specs (issue 4).
#
#   bench/opt_levels.sh [-b BUILD_DIR] [-r REPS] [-s STEPS] [-t THREADS] [SPEC...]
#
# For each spec (default: specs/*.cannl) generates the model at -O0 and -O2 (f32, max batch
# 128) with BUILD_DIR's cannl (default build/dev, built first), compiles each with the flags
# of the generated CMakeLists.txt (-O3, reassociation, OpenMP) and
# bench/opt_levels.c, then runs the two programs interleaved (O0 O2 O0 O2 ..., REPS fresh
# processes each, default 7; each times STEPS steps after 3 warm-up steps, default 20) with
# THREADS OpenMP threads (default 1, passive waiting), as /work/shared/benchmarking.md asks.
# Prints per spec the median ms per step at each level, the spread (min-max) and the median of
# the pairwise ratios O2/O0 (below 1: -O2 is faster). Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/dev reps=7 steps=20 threads=1
while getopts "b:r:s:t:" o; do
  case $o in
    b) build=$(cd "$OPTARG" && pwd) ;;
    r) reps=$OPTARG ;;
    s) steps=$OPTARG ;;
    t) threads=$OPTARG ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("$root"/specs/*.cannl)
cmake --build "$build" --target cannl cannl_rt >/dev/null
cannl=$build/generator/cannl
rt=$build/runtime-lib/libcannl_rt.a
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$threads

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf "%-18s %12s %12s %20s %20s %10s\n" spec "-O0 ms/step" "-O2 ms/step" "-O0 min-max" "-O2 min-max" "O2/O0"
for spec in "${specs[@]}"; do
  name=$(basename "$spec" .cannl)
  model=$(sed -nE 's/^[ \t]*model[ \t]+([A-Za-z_][A-Za-z0-9_]*).*/\1/p' "$spec" | head -1)
  for level in 0 2; do
    d=$tmp/$name-O$level
    "$cannl" gen "$spec" -o "$d" -O$level --max-batch 128
    $cc -std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp \
      -DOB_MODEL="$model" -I"$d" -I"$root/runtime-lib" "$d/$model.c" "$root/bench/opt_levels.c" "$rt" -lz -lm \
      -o "$tmp/$name-O$level.bin"
  done
  : >"$tmp/t0"; : >"$tmp/t2"; : >"$tmp/ratio"
  for ((i = 0; i < reps; ++i)); do
    a=$("$tmp/$name-O0.bin" "$steps" | cut -d' ' -f1)
    b=$("$tmp/$name-O2.bin" "$steps" | cut -d' ' -f1)
    echo "$a" >>"$tmp/t0"; echo "$b" >>"$tmp/t2"
    awk -v a="$a" -v b="$b" 'BEGIN {print b / a}' >>"$tmp/ratio"
  done
  printf "%-18s %12.3f %12.3f %20s %20s %10.3f\n" "$name" "$(median <"$tmp/t0")" "$(median <"$tmp/t2")" \
    "$(sort -g "$tmp/t0" | head -1)-$(sort -g "$tmp/t0" | tail -1)" \
    "$(sort -g "$tmp/t2" | head -1)-$(sort -g "$tmp/t2" | tail -1)" "$(median <"$tmp/ratio")"
done
