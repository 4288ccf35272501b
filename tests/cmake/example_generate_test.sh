#!/usr/bin/env bash
# example_generate_test.sh — examples/generate configured (add_subdirectory of this source
# tree, with the generator of this build) from a briefly trained gpt_tiny checkpoint (the
# build's gpt_tiny_train, 30 steps on a repeated sentence), built (the params compiled in) and
# run in an empty directory: it must print the prompt and 200 more bytes, the same for the
# same seed. The environment is consumer_test.sh's, plus CANNL_GPT_TRAIN (gpt_tiny_train).
set -euo pipefail
work=$CANNL_WORK
rm -rf "$work"
mkdir -p "$work/empty"
build=$work/build
log=$work/log
fail() {
  echo "FAIL: $*" >&2
  if [ -s "$log" ]; then echo "--- last output:" >&2; tail -n 40 "$log" >&2; fi
  exit 1
}
echo "== train gpt_tiny 30 steps"
python3 -c "import sys; sys.stdout.write('In the beginning God created the heaven and the earth. ' * 300)" >"$work/text.txt"
"$CANNL_GPT_TRAIN" --stream tokens,next="$work/text.txt" --steps 30 --batch 8 --seed 1 --quiet \
  --checkpoint "$work/ck.safetensors" >"$log" 2>&1 || fail "training gpt_tiny"
echo "== configure and build examples/generate (gpt_tiny, the checkpoint compiled in)"
"$CANNL_CMAKE" -S "$CANNL_SRC/examples/generate" -B "$build" -G "$CANNL_CMAKE_GENERATOR" \
  -DCMAKE_MAKE_PROGRAM="$CANNL_MAKE_PROGRAM" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$CANNL_CC" \
  -DCMAKE_CXX_COMPILER="$CANNL_CXX" -DCANNL_SOURCE_DIR="$CANNL_SRC" -DCANNL_GENERATOR="$CANNL_EXE" -DCANNL_QUICK_KERNELS=ON \
  -DGPT_SPEC="$CANNL_SRC/specs/gpt_tiny.cannl" -DGPT_MODEL=gpt_tiny -DGPT_CHECKPOINT="$work/ck.safetensors" \
  -DCMAKE_EXE_LINKER_FLAGS="$CANNL_LINK_FLAGS" >"$log" 2>&1 || fail "configure"
"$CANNL_CMAKE" --build "$build" --target generate_text >"$log" 2>&1 || fail "build"
[ -f "$build/cannl/gpt/gpt_tiny_weights.c" ] || fail "no gpt_tiny_weights.c: the params are not compiled in"
echo "== run generate_text in an empty directory (no file beside it)"
cp "$build/generate_text" "$work/empty/"
rm -f "$work/ck.safetensors"
(cd "$work/empty" && ./generate_text "In the beginning" 200 7) >"$work/a.txt" 2>"$log" || fail "generate_text"
(cd "$work/empty" && ./generate_text "In the beginning" 200 7) >"$work/b.txt" 2>"$log" || fail "generate_text (again)"
head -c 300 "$work/a.txt"
python3 - "$work/a.txt" "$work/b.txt" <<'PY' || fail "the output"
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert a == b, "two runs with seed 7 differ"
assert a.startswith(b"In the beginning"), "the prompt is not printed first"
assert len(a) == len(b"In the beginning") + 200 + 1, f"{len(a)} bytes, not the prompt + 200 + a newline"
letters = sum(c in b"abcdefghijklmnopqrstuvwxyz " for c in a[16:])
assert letters > 100, f"only {letters} of the 200 bytes are lower-case letters or spaces: not text"
PY
echo "== ok"
