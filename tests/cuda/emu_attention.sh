#!/usr/bin/env bash
# emu_attention.sh — tests/runtime/test_attention_cuda.cu (cannl_attention.cuh against the CPU
# kernels of cannl_attention.h) run on the CPU: compiled by g++ against the stand-in of emu/ (a GPU
# thread an OS thread, a block's shared memory its own, wmma fragments emu/mma.h's), so that the tiled
# and tensor-core kernels' indexing, masks and tile loops are checked without a GPU (test
# nvcc.emu_attention, CMakeLists.txt). Numerics are the host's: the GPU's own run is
# runtime.attention_cuda (scripts/gpu-check.sh, part runtime).
#   emu_attention.sh WORK NVCC
#     NVCC: the CUDA toolkit's nvcc (its include directory has the runtime's headers). Without
#     it: exit 77, skipped.
set -euo pipefail
work=$1 nvcc=$2
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "SKIP: nvcc not found (the CUDA toolkit's headers)"
  exit 77
fi
inc=$(dirname "$(readlink -f "$(command -v "$nvcc")")")/../include
if [ ! -f "$inc/cuda_runtime_api.h" ]; then
  echo "SKIP: no cuda_runtime_api.h in $inc"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
rt=$here/../../runtime-lib
rm -rf "$work"
mkdir -p "$work"
python3 "$here/emu/launch_rewrite.py" "$rt/cuda/cannl_attention.cuh" "$work/cannl_attention_emu.cuh"
python3 "$here/emu/launch_rewrite.py" "$here/../runtime/test_attention_cuda.cu" "$work/test.cpp"
cxx=(g++ -std=c++20 -O2 -I "$here/emu" -I "$work" -I "$inc" -I "$rt" -I "$rt/cuda")
"${cxx[@]}" -c "$work/test.cpp" -o "$work/test.o"
"${cxx[@]}" -c "$here/emu/emu.cpp" -o "$work/emu.o"
gcc -std=c11 -O2 -I "$rt" -c "$rt/attention.c" -o "$work/attention.o"
g++ -o "$work/check" "$work/test.o" "$work/emu.o" "$work/attention.o" -lm -lpthread
"$work/check"
