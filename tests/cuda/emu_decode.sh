#!/usr/bin/env bash
# emu_decode.sh — tests/e2e/decode.c against a model's generated CUDA run on the CPU: the .cu compiled
# by g++ against the stand-in of emu/ (the CUDA runtime's device side and cuBLAS; a GPU thread an OS
# thread), linked with the CUDA runtime part of runtime-lib, and run: decode = full forward at every
# position, after prefills and past ctx (tests nvcc.emu_decode.*, CMakeLists.txt). It checks the
# index arithmetic of the kernels, the cuBLAS calls' operands and the attention kernels without a
# GPU, not the GPU's numerics (the stand-in's products sum in double).
#   emu_decode.sh SPEC MODEL MODEL_UC WORK CANNL RT_LIB NVCC [GEN_ARGS...]
#     RT_LIB: libcannl_rt.a; NVCC: the CUDA toolkit's nvcc (its include directory has the runtime's
#     and cuBLAS's headers). Without them: exit 77, skipped.
set -euo pipefail
spec=$1 model=$2 uc=$3 work=$4 cannl=$5 rtlib=$6 nvcc=$7
shift 7
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "SKIP: nvcc not found (the CUDA toolkit's headers)"
  exit 77
fi
inc=$(dirname "$(readlink -f "$(command -v "$nvcc")")")/../include
if [ ! -f "$inc/cuda_runtime_api.h" ] || [ ! -f "$inc/cublas_v2.h" ]; then
  echo "SKIP: no cuda_runtime_api.h and cublas_v2.h in $inc"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
rt=$here/../../runtime-lib
rm -rf "$work"
mkdir -p "$work/inc"
"$cannl" gen "$spec" -o "$work/gen" --target cuda --max-batch 4 "$@"
python3 "$here/emu/launch_rewrite.py" "$rt/cuda/cannl_attention.cuh" "$work/inc/cannl_attention_emu.cuh"
python3 "$here/emu/launch_rewrite.py" "$work/gen/$model.cu" "$work/model_emu.cpp"
cxx=(g++ -std=c++20 -O1 -I "$here/emu" -I "$work/inc" -I "$inc" -I "$rt" -I "$rt/cuda" -I "$work/gen")
"${cxx[@]}" -w -c "$work/model_emu.cpp" -o "$work/model.o"
"${cxx[@]}" -c "$here/emu/emu.cpp" -o "$work/emu.o"
objs=("$work/model.o" "$work/emu.o")
for f in cuda_buffer cuda_error cuda_event cuda_stream; do
  gcc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -I "$rt" -I "$rt/cuda" -I "$inc" -c "$rt/cuda/$f.c" -o "$work/$f.o"
  objs+=("$work/$f.o")
done
gcc -std=c11 -O1 -DDECODE_CUDA "-DDECODE_MODEL=$model" "-DDECODE_MODEL_UC=$uc" "-DDECODE_HEADER=\"$model.h\"" \
  -I "$rt" -I "$work/gen" -I "$inc" -c "$here/../e2e/decode.c" -o "$work/decode.o"
g++ -o "$work/check" "$work/decode.o" "${objs[@]}" "$rtlib" -lz -lm -lpthread -fopenmp
"$work/check"
