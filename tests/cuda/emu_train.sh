#!/usr/bin/env bash
# emu_train.sh — training parity of the CUDA target against the C target without a GPU: the spec
# generated for both targets in float64, tests/e2e/train_parity.c built against each (the .cu
# compiled by g++ against the CPU stand-in of emu/: emu/stand_in.sh), both trained the same
# steps from the same seed, and every loss, param and optimiser-state value compared (1e-10
# relative). It checks the CUDA target's block functions (a rolled repeat block's kernels
# launched per instance over its slices), its cuBLAS calls' operands, its one update kernel per
# stacked param and its checkpoint names against the C target's, not the GPU's numerics (the
# stand-in's products sum in double). Both states are created for train_parity's 3 examples of
# the generated maximum of 4: the CUDA arena at its per-example offsets times the state's cap.
#   emu_train.sh SPEC MODEL WORK CANNL RT_LIB NVCC [GEN_ARGS...]
#     RT_LIB: libcannl_rt.a; NVCC: the CUDA toolkit's nvcc (its include directory has the runtime's
#     and cuBLAS's headers). Without them: exit 77, skipped.
set -euo pipefail
spec=$1 model=$2 work=$3 cannl=$4 rtlib=$5 nvcc=$6
shift 6
here=$(cd "$(dirname "$0")" && pwd)
source "$here/emu/stand_in.sh"
emu_headers "$nvcc"
rt=$here/../../runtime-lib
rm -rf "$work"
mkdir -p "$work"
gen=(--dtype f64 --max-batch 4 "$@")
"$cannl" gen "$spec" -o "$work/c" "${gen[@]}"
"$cannl" gen "$spec" -o "$work/cuda" --target cuda "${gen[@]}"
parity=(-DPARITY_API=${model}_api "-DPARITY_HEADER=\"$model.h\"")

# the C target
cc=(gcc -std=c11 -O1 -fopenmp -I "$rt" -I "$work/c")
"${cc[@]}" -w -c "$work/c/$model.c" -o "$work/c/model.o"
"${cc[@]}" "${parity[@]}" -c "$here/../e2e/train_parity.c" -o "$work/c/parity.o"
gcc -o "$work/c/parity" "$work/c/parity.o" "$work/c/model.o" "$rtlib" -lz -lm -fopenmp

# the CUDA target on the stand-in
emu_objects "$work" "$work/cuda" "$model"
gcc -std=c11 -O1 "${parity[@]}" "${emu_inc[@]}" -c "$here/../e2e/train_parity.c" -o "$work/parity.o"
g++ -o "$work/parity" "$work/parity.o" "${objs[@]}" "$rtlib" -lz -lm -lpthread -fopenmp

"$work/c/parity" "$work/c.txt"
"$work/parity" "$work/cuda.txt" "$work/c.txt"
