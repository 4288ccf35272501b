#!/usr/bin/env bash
# example_test.sh — examples/embed configured (add_subdirectory of this source tree, with the
# generator of this build), built (which trains the model and compiles its params in) and
# run, by itself and through its own ctest (test cmake.example_embed); then trained again:
# the build after the new checkpoint generates and compiles xor_weights.c alone and relinks
# (the model's sources are compiled once). The environment is consumer_test.sh's (see
# CMakeLists.txt here).
set -euo pipefail
work=$CANNL_WORK
rm -rf "$work"
mkdir -p "$work"
build=$work/build
log=$work/log
fail() {
  echo "FAIL: $*" >&2
  if [ -s "$log" ]; then echo "--- last output:" >&2; tail -n 40 "$log" >&2; fi
  exit 1
}
start=$(date +%s.%N)
step() { echo "== [$(echo "$(date +%s.%N) - $start" | bc | xargs printf %.1f) s] $*"; }
step "configure examples/embed"
"$CANNL_CMAKE" -S "$CANNL_SRC/examples/embed" -B "$build" -G "$CANNL_CMAKE_GENERATOR" \
  -DCMAKE_MAKE_PROGRAM="$CANNL_MAKE_PROGRAM" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$CANNL_CC" \
  -DCMAKE_CXX_COMPILER="$CANNL_CXX" -DCANNL_SOURCE_DIR="$CANNL_SRC" -DCANNL_GENERATOR="$CANNL_EXE" -DCANNL_QUICK_KERNELS=ON \
  -DCMAKE_EXE_LINKER_FLAGS="$CANNL_LINK_FLAGS" >"$log" 2>&1 || fail "configure"
step "build: train xor, generate it with the checkpoint compiled in, link classify"
"$CANNL_CMAKE" --build "$build" >"$log" 2>&1 || fail "build"
grep -q "Training xor" "$log" || fail "the build did not train the model"
[ -f "$build/cannl/xor_trained/xor_weights.c" ] || fail "no xor_weights.c"
step "run classify alone (no files), then with the checkpoint"
(cd "$work" && "$build/classify") >"$log" 2>&1 || fail "classify"
cat "$log"
grep -q "1 xor 1 = 0" "$log" || fail "classify printed no classes"
(cd "$build" && ctest --output-on-failure) >"$log" 2>&1 || fail "the example's ctest"
step "xor_trained_infer runs without --weights"
printf "0,1\n1,1\n" >"$work/in.csv"
"$build/xor_trained_infer" --input bits="$work/in.csv" --output "$work/out.npy" >"$log" 2>&1 || fail "xor_trained_infer"
[ -f "$work/out.npy" ] || fail "no out.npy"
step "a new checkpoint: only xor_weights.c is generated and compiled again, the model is not"
data="--data bits=$CANNL_SRC/examples/embed/bits.csv --data label=$CANNL_SRC/examples/embed/labels.csv"
# shellcheck disable=SC2086
"$build/xor_train" $data --steps 400 --batch 4 --quiet --checkpoint "$build/xor.safetensors" >"$log" 2>&1 ||
  fail "training xor again"
"$CANNL_CMAKE" --build "$build" >"$log" 2>&1 || fail "the build after a new checkpoint"
cat "$log"
grep -q "compiling the params of .*xor.safetensors into xor_trained" "$log" || fail "xor_weights.c not generated again"
grep -q "xor_trained\.dir/.*xor_weights\.c\.o" "$log" || fail "xor_weights.c not compiled again"
grep -q "generating xor_trained" "$log" && fail "the model's files were generated again"
grep -Eq "xor_trained\.dir/.*/xor(_inference)?\.c\.o" "$log" && fail "the model's sources were compiled again"
(cd "$work" && "$build/classify" "$build/xor.safetensors") >"$log" 2>&1 || fail "classify with the new params"
step "ok"
