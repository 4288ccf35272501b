#!/usr/bin/env bash
# bench/gpu/gpt.sh — the GPT specs on one GPU (issue 18): the CUDA trainers of gpt2_124m (batch 8,
# ctx 1024) and gpt_char (batch 32, ctx 128) at --precision fp32, tf32 and bf16 against PyTorch
# 2.x eager and torch.compile (bf16 autocast, scaled_dot_product_attention), one table per model
# (bench_gpt.py says how each is timed).
#   bench/gpu/gpt.sh [--runs N] [--models "gpt2_124m gpt_char"] [--peak-tflops 989]
# Builds the release preset's cannl and runtime (nvcc must be found: the CUDA toolkit), generates
# each model with `cannl gen --target cuda --precision P` into build/bench/gpu/<model>_<P>/ and
# compiles it with nvcc for CANNL_BENCH_ARCH (default 90: H100). Needs a GPU and, for the PyTorch
# rows, a CUDA build of PyTorch (python3, or $PYTHON).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=3 models="gpt2_124m gpt_char" peak=989
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --peak-tflops) peak=$2; shift 2 ;;
    *) echo "usage: bench/gpu/gpt.sh [--runs N] [--models \"gpt2_124m gpt_char\"] [--peak-tflops T]" >&2; exit 2 ;;
  esac
done
arch=${CANNL_BENCH_ARCH:-90}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "bench/gpu/gpt.sh: nvcc not found (set CUDACXX)" >&2; exit 2; }
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt cannl_cuda_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
cuda_rt=build/release/runtime-lib/cuda/libcannl_cuda_rt.a
out=build/bench/gpu
mkdir -p "$out"
for model in $models; do
  case $model in
    gpt2_124m) batch=8 ctx=1024 ;;
    gpt_char) batch=32 ctx=128 ;;
    *) echo "bench/gpu/gpt.sh: unknown model $model" >&2; exit 2 ;;
  esac
  args=()
  for p in fp32 tf32 bf16; do
    dir=$out/${model}_$p
    "$cannl" gen "specs/$model.cannl" --target cuda --precision $p --dim ctx=$ctx --max-batch $batch -o "$dir/gen"
    for f in "$model" "${model}_train"; do
      "$nvcc" -std=c++17 -O3 -gencode "arch=compute_$arch,code=sm_$arch" -I runtime-lib -I runtime-lib/cuda \
        -I "$dir/gen" -c "$dir/gen/$f.cu" -o "$dir/$f.o"
    done
    "$nvcc" -gencode "arch=compute_$arch,code=sm_$arch" -o "$dir/${model}_train" "$dir/${model}_train.o" "$dir/$model.o" \
      "$cuda_rt" "$rt" -lcublas -lz -lm -lpthread
    args+=(--cannl "$p=$dir/${model}_train")
  done
  "${PYTHON:-python3}" bench/gpu/bench_gpt.py --model "$model" --batch $batch --ctx $ctx --runs "$runs" --peak-tflops "$peak" \
    --card "$out/${model}_bf16/gen/$model.json" --work "$out" "${args[@]}"
done
