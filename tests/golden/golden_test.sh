#!/usr/bin/env bash
# golden_test.sh — checks of generated/, the committed generator output (tests golden.*,
# see CMakeLists.txt here).
#   golden_test.sh regenerate SRC CANNL WORK
#       regenerates every spec of SRC/specs with CANNL into WORK and fails on any difference
#       from SRC/generated (changed, missing or extra files)
#   golden_test.sh warnings SRC CC [FLAGS...]
#       compiles every generated/<model>/*.c with CC at -std=c11 -Wall -Wextra -Wpedantic
#       -Werror and FLAGS, without and with -fopenmp
#   golden_test.sh build SRC WORK CMAKE GENERATOR MAKE CC
#       builds every generated/<model>/ through its own CMakeLists.txt (build_generated/,
#       with runtime-lib/ for cannl::rt) and runs each <model>_train --help and <model>_infer --help
#   golden_test.sh cuda SRC WORK NVCC ARCHS RT_LIB CUDA_RT_LIB
#       compiles every generated/<model>/cuda/*.cu once with NVCC for the architectures ARCHS
#       (a CMake list: 90;80), nvcc and host warnings as errors, links each training program
#       and inference program with the runtime libraries and cuBLAS, and runs their --help (no GPU needed)
set -euo pipefail
mode=$1
src=$2

models=()
for d in "$src"/generated/*/; do
  [ -f "$d/CMakeLists.txt" ] && models+=("$(basename "$d")")
done
[ ${#models[@]} -gt 0 ] || { echo "FAIL: no models in $src/generated" >&2; exit 1; }

case "$mode" in
regenerate)
  cannl=$3
  work=$4
  rm -rf "$work"
  bash "$src/scripts/regen.sh" -o "$work" "$cannl" >/dev/null
  if ! diff -r -u -x README.md "$src/generated" "$work" >"$work.diff"; then
    lines=$(wc -l <"$work.diff")
    head -n 300 "$work.diff"
    [ "$lines" -le 300 ] || echo "... ($lines lines in all: $work.diff)"
    cat >&2 <<MSG

FAIL: generated/ differs from what the generator writes for specs/ (diff above: - committed,
+ regenerated). If the change is intended (a generator, template or spec change), update it
and commit generated/ with that change:
    scripts/regen.sh
MSG
    exit 1
  fi
  echo "ok: ${models[*]}"
  ;;
warnings)
  cc=$3
  shift 3
  status=0
  for m in "${models[@]}"; do
    for omp in "" -fopenmp; do
      for f in "$src/generated/$m"/*.c; do
        cmd=("$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "$@" $omp -I "$src/runtime-lib" -c "$f" -o /dev/null)
        if ! "${cmd[@]}"; then
          echo "FAIL: ${cmd[*]}" >&2
          status=1
        fi
      done
    done
  done
  [ $status -eq 0 ] && echo "ok: ${models[*]} with $cc $*, without and with -fopenmp"
  exit $status
  ;;
build)
  work=$3 cmake=$4 generator=$5 make=$6 cc=$7
  rm -rf "$work"
  "$cmake" -S "$src/tests/golden/build_generated" -B "$work" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$cc" -DCANNL_SOURCE_DIR="$src" >"$work.log" 2>&1 \
    || { cat "$work.log" >&2; echo "FAIL: configure build_generated" >&2; exit 1; }
  "$cmake" --build "$work" >"$work.log" 2>&1 || { cat "$work.log" >&2; echo "FAIL: build" >&2; exit 1; }
  for m in "${models[@]}"; do
    "$work/$m/${m}_train" --help >"$work.log" 2>&1 || { cat "$work.log" >&2; echo "FAIL: ${m}_train --help" >&2; exit 1; }
    grep -q "usage: ${m}_train" "$work.log" || { cat "$work.log" >&2; echo "FAIL: ${m}_train --help: no usage" >&2; exit 1; }
    "$work/$m/${m}_infer" --help >"$work.log" 2>&1 || { cat "$work.log" >&2; echo "FAIL: ${m}_infer --help" >&2; exit 1; }
    grep -q "usage: ${m}_infer" "$work.log" || { cat "$work.log" >&2; echo "FAIL: ${m}_infer --help: no usage" >&2; exit 1; }
  done
  echo "ok: built ${models[*]}"
  ;;
cuda)
  work=$3 nvcc=$4 archs=$5 rt=$6 cuda_rt=$7
  rm -rf "$work"
  mkdir -p "$work"
  gencode=()
  for a in ${archs//;/ }; do
    a=${a%-real}
    a=${a%-virtual}
    gencode+=(-gencode "arch=compute_$a,code=sm_$a")
  done
  flags=(-std=c++17 -O3 "${gencode[@]}" -Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror
         -I "$src/runtime-lib" -I "$src/runtime-lib/cuda")
  status=0
  for m in "${models[@]}"; do
    d=$src/generated/$m/cuda
    [ -d "$d" ] || { echo "FAIL: no $d" >&2; status=1; continue; }
    start=$SECONDS
    for f in "$d"/*.cu; do
      cmd=("$nvcc" "${flags[@]}" -I "$d" -c "$f" -o "$work/$(basename "$f" .cu).o")
      "${cmd[@]}" || { echo "FAIL: ${cmd[*]}" >&2; status=1; }
    done
    [ $status -eq 0 ] || continue
    cmd=("$nvcc" "${gencode[@]}" -o "$work/${m}_train" "$work/${m}_train.o" "$work/$m.o" "$cuda_rt" "$rt" -lcublas -lz -lm -lpthread)
    "${cmd[@]}" || { echo "FAIL: ${cmd[*]}" >&2; status=1; continue; }
    cmd=("$nvcc" "${gencode[@]}" -o "$work/${m}_infer" "$work/${m}_infer.o" "$work/$m.o" "$cuda_rt" "$rt" -lcublas -lz -lm -lpthread)
    "${cmd[@]}" || { echo "FAIL: ${cmd[*]}" >&2; status=1; continue; }
    for prog in train infer; do
      "$work/${m}_$prog" --help >"$work/help.log" 2>&1 && grep -q "usage: ${m}_$prog" "$work/help.log" \
        || { cat "$work/help.log" >&2; echo "FAIL: ${m}_$prog --help" >&2; status=1; }
    done
    echo "$m: compiled and linked in $((SECONDS - start)) s"
  done
  [ $status -eq 0 ] && echo "ok: ${models[*]} with $nvcc for $archs"
  exit $status
  ;;
*)
  echo "usage: golden_test.sh regenerate|warnings|build|cuda SRC ..." >&2
  exit 2
  ;;
esac
