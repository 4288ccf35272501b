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
here=$(cd "$(dirname "$0")" && pwd)
source "$here/emu/stand_in.sh"
emu_headers "$nvcc"
rm -rf "$work"
mkdir -p "$work"
"$cannl" gen "$spec" -o "$work/gen" --target cuda --max-batch 4 "$@"
emu_objects "$work" "$work/gen" "$model"
gcc -std=c11 -O1 -DDECODE_CUDA -DDECODE_EMU "-DDECODE_MODEL=$model" "-DDECODE_MODEL_UC=$uc" \
  "-DDECODE_HEADER=\"$model.h\"" \
  "${emu_inc[@]}" -c "$here/../e2e/decode.c" -o "$work/decode.o"
g++ -o "$work/check" "$work/decode.o" "${objs[@]}" "$rtlib" -lz -lm -lpthread -fopenmp
"$work/check"
