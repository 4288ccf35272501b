#!/usr/bin/env bash
# bench/run.sh — the cannl vs PyTorch benchmark (not part of the test suite; takes minutes).
#
#   bench/run.sh                       every model, 7 interleaved repetitions, 1 and 2 threads
#   bench/run.sh --reps 3 --models fashion_mlp moons_mlp --threads 1
#
# Builds `cannl` and the runtime (release preset), generates the example specs twice into
# build/bench/ (generated kernels, and --blas: OpenBLAS), compiles each with the flags of the
# generated CMakeLists.txt into a step timer (bench/step_bench.c), plus the contraction timer
# (bench/gemm_bench.c) and the FMA peak (bench/fma_peak.c), then runs bench/bench.py, which
# prints the markdown tables of bench/README.md. Needs python3-torch and libopenblas-dev
# (scripts/install-deps.sh --torch installs both).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh --torch
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
out=build/bench
mkdir -p "$out"
cc=${CC:-cc}
# The generated CMakeLists.txt's flags (with CANNL_NATIVE on).
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -march=native
        -fopenmp -Iruntime-lib)
for model in fashion_mlp fashion_mlp_adam moons_mlp fashion_cnn; do
  for variant in "" _blas; do
    dir=$out/$model$variant
    rm -rf "$dir"
    if [ -n "$variant" ]; then "$cannl" gen "specs/$model.cannl" --blas -o "$dir"; else "$cannl" gen "specs/$model.cannl" -o "$dir"; fi
    "$cc" "${cflags[@]}" -I"$dir" -DCANNL_BENCH_API="${model}_api" bench/step_bench.c "$dir/$model.c" "$rt" \
      -lopenblas -lz -lm -o "$out/${model}${variant}_step"
  done
done
"$cc" "${cflags[@]}" -I"$out/fashion_mlp" -DCANNL_BENCH_MODEL_C="\"$root/$out/fashion_mlp/fashion_mlp.c\"" \
  bench/gemm_bench.c "$rt" -lopenblas -lz -lm -o "$out/gemm_bench"
"$cc" -O3 -march=native -fopenmp bench/fma_peak.c -o "$out/fma_peak"
echo "bench/run.sh: built into $out; running (this takes a few minutes)" >&2
/usr/bin/python3 bench/bench.py "$out" "$@"
