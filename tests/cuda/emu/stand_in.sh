# stand_in.sh — sourced by emu_decode.sh and emu_train.sh: a generated model's .cu built with g++
# against the CPU stand-in of this folder (the CUDA runtime's device side and cuBLAS).
#   emu_headers NVCC            sets `inc` to the CUDA toolkit's include directory (the runtime's
#                               and cuBLAS's headers), or exits 77 (skipped) without them
#   emu_objects WORK GEN MODEL  compiles GEN/MODEL.cu for the stand-in and the runtime's CUDA
#                               part; sets `objs` (the objects to link) and `emu_inc` (the -I
#                               flags a C file that includes GEN/MODEL.h needs)
emu_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
emu_rt=$emu_here/../../../runtime-lib

emu_headers() {
  local nvcc=$1
  if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "SKIP: nvcc not found (the CUDA toolkit's headers)"
    exit 77
  fi
  inc=$(dirname "$(readlink -f "$(command -v "$nvcc")")")/../include
  if [ ! -f "$inc/cuda_runtime_api.h" ] || [ ! -f "$inc/cublas_v2.h" ]; then
    echo "SKIP: no cuda_runtime_api.h and cublas_v2.h in $inc"
    exit 77
  fi
}

emu_objects() {
  local work=$1 gen=$2 model=$3 f
  mkdir -p "$work/inc"
  python3 "$emu_here/launch_rewrite.py" "$emu_rt/cuda/cannl_attention.cuh" "$work/inc/cannl_attention_emu.cuh"
  python3 "$emu_here/launch_rewrite.py" "$gen/$model.cu" "$work/model_emu.cpp"
  local cxx=(g++ -std=c++20 -O1 -I "$emu_here" -I "$work/inc" -I "$inc" -I "$emu_rt" -I "$emu_rt/cuda" -I "$gen")
  "${cxx[@]}" -w -c "$work/model_emu.cpp" -o "$work/model.o"
  "${cxx[@]}" -c "$emu_here/emu.cpp" -o "$work/emu.o"
  objs=("$work/model.o" "$work/emu.o")
  for f in cuda_buffer cuda_error cuda_event cuda_stream; do
    gcc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -I "$emu_rt" -I "$emu_rt/cuda" -I "$inc" -c "$emu_rt/cuda/$f.c" \
      -o "$work/$f.o"
    objs+=("$work/$f.o")
  done
  emu_inc=(-I "$emu_rt" -I "$gen" -I "$inc")
}
