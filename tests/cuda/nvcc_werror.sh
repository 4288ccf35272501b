#!/usr/bin/env bash
# nvcc_werror.sh — the CUDA source cannl generates for one spec compiles with nvcc, with nvcc's
# and the host compiler's warnings as errors (tests nvcc.*, see CMakeLists.txt here). No GPU is
# needed: a GPU machine builds the same sources (gpu.build) and one unused variable there fails
# every gpu test.
#   nvcc_werror.sh SPEC WORK CANNL NVCC ARCH FILES [GEN_ARGS...]
#     cannl gen SPEC --target cuda GEN_ARGS into WORK, then nvcc -c of the model's .cu (FILES
#     model) or of it and the training and inference programs' (FILES all) for the one GPU architecture ARCH
#     (90: sm_90), with the warnings of the build (CANNL_CUDA_FLAGS, CMakeLists.txt) at -O1: the
#     build compiles every example's CUDA at -O3 with them; these hundred compiles of small models
#     take 30% less time at -O1 and check the same warnings of the emitted code. Without nvcc
#     (NVCC empty or not found) it says so and exits 77: skipped.
set -euo pipefail
spec=$1 work=$2 cannl=$3 nvcc=$4 arch=$5 files=$6
shift 6
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "SKIP: nvcc not found (install the CUDA toolkit, or set CANNL_NVCC)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
rt=$here/../../runtime-lib
rm -rf "$work"
mkdir -p "$work"
"$cannl" gen "$spec" -o "$work/gen" --target cuda "$@"
model=$(basename "$(ls "$work"/gen/*_train.cu)" _train.cu)
sources=("$work/gen/$model.cu")
[ "$files" = all ] && sources+=("$work/gen/${model}_train.cu" "$work/gen/${model}_infer.cu")
status=0
for f in "${sources[@]}"; do
  cmd=("$nvcc" -std=c++17 -O1 -gencode "arch=compute_$arch,code=sm_$arch" -Werror all-warnings
       -Xcompiler=-Wall,-Wextra,-Werror -I "$rt" -I "$rt/cuda" -I "$work/gen" -c "$f" -o "$work/$(basename "$f" .cu).o")
  if "${cmd[@]}"; then
    echo "ok: $(basename "$f")"
  else
    echo "FAIL: ${cmd[*]}" >&2
    status=1
  fi
done
exit $status
