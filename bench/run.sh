#!/usr/bin/env bash
# bench/run.sh — the cannl vs PyTorch benchmark (not part of the test suite; takes minutes).
#
#   bench/run.sh                       every model, 7 interleaved repetitions, 1 and 2 threads,
#                                      on this CPU's best instruction set
#   bench/run.sh --isa all             and on each lower one (AVX2 + FMA, SSE2) in turn
#   bench/run.sh --isa avx2 --reps 3 --threads 1 --models fashion_mlp moons_mlp --no-train
#
# Builds `cannl` and the runtime (release preset) and, for each instruction-set path into
# build/bench/<isa>/: every model generated twice (the runtime's kernels, and --blas:
# OpenBLAS's cblas_sgemm) and compiled with the flags of the generated CMakeLists.txt into a
# step timer (bench/step_bench.c) and the training program, the product timer
# (bench/gemm_bench.c) and the FMA peak (bench/fma_peak.c). The CPU's best path is the
# shipped build (no -march: multiversioned routines, run-time kernels); a lower path compiles
# the models' loops for that level (-march=x86-64-v3 for avx2; the baseline without
# multiversioning for sse2) and runs with CANNL_ISA lowering the kernels. Then bench/bench.py
# runs everything and prints the markdown tables of bench/README.md. Needs python3-torch and
# libopenblas-dev (scripts/install-deps.sh --torch installs both) and, for the training
# programs, Fashion-MNIST (--data).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
isas=() args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --isa)
      shift
      while [ $# -gt 0 ] && [[ $1 != --* ]]; do isas+=("$1"); shift; done
      ;;
    *) args+=("$1"); shift ;;
  esac
done
scripts/install-deps.sh --torch
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
out=build/bench
mkdir -p "$out"
cc=${CC:-cc}

# This CPU's best instruction set, as the runtime chooses it.
printf '#include "cannl_rt.h"\n#include <stdio.h>\nint main(void) { cannl_isa i; cannl_isa_select(&i, NULL); puts(cannl_isa_name(i)); return 0; }\n' >"$out/isa.c"
"$cc" -std=c11 -Iruntime-lib "$out/isa.c" "$rt" -fopenmp -lz -lm -o "$out/isa"
best=$(env -u CANNL_ISA "$out/isa")
all=()  # the best and each lower path
seen=0
for i in avx512 avx2 sse2; do
  [ "$i" = "$best" ] && seen=1
  [ $seen = 1 ] && all+=("$i")
done
if [ ${#isas[@]} -eq 0 ]; then isas=("$best"); fi
if [ "${isas[*]}" = all ]; then isas=("${all[@]}"); fi
for i in "${isas[@]}"; do
  [[ " ${all[*]} " == *" $i "* ]] || { echo "bench/run.sh: --isa $i: this CPU has ${all[*]}" >&2; exit 2; }
done

# The generated CMakeLists.txt's flags (CANNL_NATIVE off), and each path's.
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp -Iruntime-lib)
declare -A isa_flags=([avx2]="-march=x86-64-v3" [sse2]="-DCANNL_NO_MULTIVERSION" [avx512]="-march=x86-64-v4")
declare -A peak_flags=([avx512]="-march=x86-64-v4" [avx2]="-march=x86-64-v3" [sse2]="")
for isa in "${isas[@]}"; do
  d=$out/$isa
  mkdir -p "$d"
  flags=("${cflags[@]}")
  if [ "$isa" != "$best" ]; then read -r -a extra <<<"${isa_flags[$isa]}"; flags+=("${extra[@]}"); fi
  for model in fashion_mlp fashion_mlp_adam moons_mlp fashion_cnn cnn_dense256; do
    spec=specs/$model.cannl
    [ -f "$spec" ] || spec=bench/specs/$model.cannl
    for variant in "" _blas; do
      g=$d/$model$variant
      rm -rf "$g"
      if [ -n "$variant" ]; then "$cannl" gen "$spec" --blas -o "$g"; else "$cannl" gen "$spec" -o "$g"; fi
      "$cc" "${flags[@]}" -I"$g" -DCANNL_BENCH_API="${model}_api" bench/step_bench.c "$g/$model.c" "$rt" \
        -lopenblas -lz -lm -o "$d/${model}${variant}_step"
    done
    "$cc" "${flags[@]}" -I"$d/$model" "$d/$model/${model}_train.c" "$d/$model/$model.c" "$d/$model/${model}_inference.c" \
      "$rt" -lz -lm -o "$d/${model}_train"
  done
  "$cc" "${cflags[@]}" bench/gemm_bench.c "$rt" -lopenblas -lz -lm -o "$d/gemm_bench"
  read -r -a pf <<<"${peak_flags[$isa]}"
  "$cc" -O3 "${pf[@]}" -fopenmp bench/fma_peak.c -o "$d/fma_peak"
done
echo "bench/run.sh: built into $out (paths: ${isas[*]}); running (this takes a while)" >&2
/usr/bin/python3 bench/bench.py "$out" --best "$best" --isa "${isas[@]}" "${args[@]}"
