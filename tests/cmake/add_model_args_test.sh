#!/bin/bash
# cannl_add_model's arguments are checked when the project is configured, each with a message
# naming the model and the argument (not left to fail at build time inside cannl gen).
#   add_model_args_test.sh CMAKE SRC WORK
set -u
cmake=$1 src=$2 work=$3
mkdir -p "$work"
script=$work/add_model.cmake
cat > "$script" <<'CM'
include(${SRC}/cmake/Cannl.cmake)
cannl_add_model(m ${SRC}/specs/fashion_mlp.cannl ${ARGS})
CM
fail=0
check() { # ARGS (;-separated) and the expected message
  local out rc
  out=$("$cmake" -Wno-dev -DSRC="$src" "-DARGS=$1" -P "$script" 2>&1); rc=$?
  if [ $rc -eq 0 ] || ! grep -qF "$2" <<<"$out"; then
    echo "FAIL: cannl_add_model(m SPEC ${1//;/ }): exit $rc, expected '$2':"; echo "$out"; fail=1
  else
    echo "ok: ${1//;/ }: $2"
  fi
}
check "TARGET;gpu" "cannl_add_model(m): TARGET gpu is not supported (use c or cuda)"
check "DTYPE;f16" "cannl_add_model(m): DTYPE f16 is not supported (use f32 or f64)"
check "MAX_BATCH;abc" "cannl_add_model(m): MAX_BATCH abc: expected a positive integer"
check "MAX_BATCH;0" "cannl_add_model(m): MAX_BATCH 0: expected a positive integer"
check "DIMS;hidden" "cannl_add_model(m): DIMS hidden: expected NAME=VALUE"
check "BOGUS" "cannl_add_model(m): unknown arguments: BOGUS"
exit $fail
