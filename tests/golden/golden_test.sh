#!/usr/bin/env bash
# golden_test.sh — checks of generated/, the committed generator output (tests golden.*,
# see CMakeLists.txt here).
#   golden_test.sh regenerate SRC CANNL WORK
#       regenerates every spec of SRC/specs with CANNL into WORK and fails on any difference
#       from SRC/generated (changed, missing or extra files)
#   golden_test.sh warnings SRC CC PLAIN OPENMP [FLAGS...]
#       compiles every generated/<model>/*.c with CC at -std=c11 -Wall -Wextra -Wpedantic
#       -Werror and FLAGS, without -fopenmp (PLAIN) and with it (OPENMP), each `full` (a whole
#       compile: the optimiser's warnings too), `syntax` (-fsyntax-only: the front end's) or
#       `skip` (the build already compiled it so)
#   golden_test.sh build SRC WORK CMAKE GENERATOR MAKE CC
#       configures every generated/<model>/ through its own CMakeLists.txt (build_generated/,
#       with runtime-lib/ for cannl::rt), checks that each model's programs would be compiled
#       from its own sources, builds the smallest model (the others' sources are the build's:
#       golden.regenerate) and runs its <model>_train --help and <model>_infer --help
#   golden_test.sh cuda SRC WORK NVCC ARCHS RT_LIB CUDA_RT_LIB
#       compiles every generated/<model>/cuda/*.cu once with NVCC for the architectures ARCHS
#       (a CMake list: 90;80), nvcc and host warnings as errors, links each training program
#       and inference program with the runtime libraries and cuBLAS, and runs their --help (no GPU needed)
#   golden_test.sh help SRC PROGRAM...
#       runs each PROGRAM --help: it must succeed and print its usage line (the build's CUDA
#       programs, which need no GPU for that)
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
  cc=$3 plain=$4 openmp=$5
  shift 5
  status=0
  done_what=()
  for variant in plain openmp; do
    how=${!variant}
    case $how in
      full) mode=(-c) ;;
      syntax) mode=(-fsyntax-only) ;;
      skip) continue ;;
      *) echo "golden_test.sh warnings: $variant: full, syntax or skip, not '$how'" >&2; exit 2 ;;
    esac
    omp=()
    [ $variant = openmp ] && omp=(-fopenmp)
    done_what+=("$variant ($how)")
    for m in "${models[@]}"; do
      for f in "$src/generated/$m"/*.c; do
        cmd=("$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "$@" "${omp[@]}" -I "$src/runtime-lib" "${mode[@]}" "$f" -o /dev/null)
        if ! "${cmd[@]}"; then
          echo "FAIL: ${cmd[*]}" >&2
          status=1
        fi
      done
    done
  done
  [ $status -eq 0 ] && echo "ok: ${models[*]} with $cc $*: ${done_what[*]}"
  exit $status
  ;;
build)
  work=$3 cmake=$4 generator=$5 make=$6 cc=$7
  rm -rf "$work"
  "$cmake" -S "$src/tests/golden/build_generated" -B "$work" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$cc" -DCANNL_SOURCE_DIR="$src" -DCANNL_QUICK_KERNELS=ON >"$work.log" 2>&1 \
    || { cat "$work.log" >&2; echo "FAIL: configure build_generated" >&2; exit 1; }
  # Each model's programs are compiled from its own sources (ninja's plan; other generators:
  # trusted to the configure step, which checks that every source exists).
  if [ "$generator" = Ninja ]; then
    for m in "${models[@]}"; do
      for prog in train infer; do
        "$make" -C "$work" -t commands "${m}_$prog" >"$work.log" 2>&1 \
          || { cat "$work.log" >&2; echo "FAIL: no target ${m}_$prog" >&2; exit 1; }
        for f in "$m.c" "${m}_inference.c" "${m}_$prog.c"; do
          grep -q "generated/$m/$f" "$work.log" || { echo "FAIL: ${m}_$prog would not compile generated/$m/$f" >&2; exit 1; }
        done
      done
    done
  fi
  # The smallest model built and run (the build compiles the others' sources with the same flags).
  small=$(for m in "${models[@]}"; do echo "$(cat "$src/generated/$m"/*.c | wc -c) $m"; done | sort -n | head -n 1 | cut -d' ' -f2)
  "$cmake" --build "$work" --target "${small}_train" "${small}_infer" >"$work.log" 2>&1 \
    || { cat "$work.log" >&2; echo "FAIL: build $small" >&2; exit 1; }
  for prog in train infer; do
    "$work/$small/${small}_$prog" --help >"$work.log" 2>&1 \
      || { cat "$work.log" >&2; echo "FAIL: ${small}_$prog --help" >&2; exit 1; }
    grep -q "usage: ${small}_$prog" "$work.log" || { cat "$work.log" >&2; echo "FAIL: ${small}_$prog --help: no usage" >&2; exit 1; }
  done
  echo "ok: configured ${models[*]}; built and ran $small"
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
help)
  shift 2
  [ $# -gt 0 ] || { echo "FAIL: no programs" >&2; exit 1; }
  for prog in "$@"; do
    out=$("$prog" --help 2>&1) || { echo "$out" >&2; echo "FAIL: $prog --help" >&2; exit 1; }
    grep -q "usage: $(basename "$prog")" <<<"$out" || { echo "$out" >&2; echo "FAIL: $prog --help: no usage" >&2; exit 1; }
  done
  echo "ok: $# programs"
  ;;
*)
  echo "usage: golden_test.sh regenerate|warnings|build|cuda|help SRC ..." >&2
  exit 2
  ;;
esac
