#!/usr/bin/env bash
# consumer_test.sh subdir|package|fresh — a CMake project using cannl, configured, built and run
# (tests cmake.subdir_consumer, cmake.package_consumer and cmake.install_fresh, see
# CMakeLists.txt here).
#   subdir   subdir_consumer/: add_subdirectory of the cannl source tree. Checks that the build
#            would make the generator and run it, then builds with the generator of this
#            build (CANNL_GENERATOR, so the C++ is not compiled again), runs the program, and
#            edits the spec to check that the model is regenerated.
#   package  `cmake --install` of this build tree into a scratch prefix, then
#            package_consumer/: find_package(cannl). Runs the program and mymodel_train
#            --help, and touches the installed generator to check that the model is
#            regenerated. With cannl built with MPI (lib/libcannl_rt_mpi.a installed), also
#            cannl_add_model(... MPI): its training program under `mpirun -np 2` (when mpirun
#            runs here) trains data-parallel.
#   fresh    the README's install commands from a fresh clone: the source tree as a clone has it
#            (the files git knows, no build/) copied to a scratch directory, `cmake --install`
#            before building refused with nothing written, then `cmake --preset release
#            -DCANNL_BUILD_TESTS=OFF -DCANNL_BUILD_EXAMPLES=OFF`, `cmake --build --preset release`,
#            `cmake --install build/release --prefix P`, and package_consumer/ on P. With
#            CANNL_INSTALL_FRESH=configure (scripts/test.sh, when the last commit changed no
#            build file) it stops after the refused install: no build.
# The environment (from CMakeLists.txt) names the tools: CANNL_CMAKE, CANNL_CMAKE_GENERATOR,
# CANNL_MAKE_PROGRAM, CANNL_CC, CANNL_CXX, CANNL_SRC (the source tree), CANNL_BUILD (this
# build tree), CANNL_EXE (its generator), CANNL_WORK (a scratch directory) and
# CANNL_LINK_FLAGS (link flags of the consumer: the sanitizers when the installed runtime
# was built with them).
set -euo pipefail
mode=$1
work=$CANNL_WORK
rm -rf "$work"
mkdir -p "$work/src"
cp -r "$CANNL_SRC/tests/cmake/tiny.cannl" "$CANNL_SRC/tests/cmake/use_model.c" \
      "$CANNL_SRC/tests/cmake/subdir_consumer" "$CANNL_SRC/tests/cmake/package_consumer" "$work/src/"
build=$work/build
log=$work/log

fail() {
  echo "FAIL: $*" >&2
  if [ -s "$log" ]; then echo "--- last output:" >&2; tail -n 40 "$log" >&2; fi
  exit 1
}
start=$(date +%s.%N)
step() { echo "== [$(echo "$(date +%s.%N) - $start" | bc | xargs printf %.1f) s] $*"; }
configure() {  # configure DIR ARGS...
  local dir=$1
  shift
  "$CANNL_CMAKE" -S "$work/src/$dir" -B "$build" -G "$CANNL_CMAKE_GENERATOR" \
    -DCMAKE_MAKE_PROGRAM="$CANNL_MAKE_PROGRAM" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER="$CANNL_CC" -DCMAKE_EXE_LINKER_FLAGS="$CANNL_LINK_FLAGS" "$@" \
    >"$log" 2>&1 || fail "configure $dir"
}
build_it() { "$CANNL_CMAKE" --build "$build" >"$log" 2>&1 || fail "build"; }
run_model() {  # run_model EXPECTED_W1_COUNT
  "$build/use_model" >"$log" 2>&1 || fail "use_model"
  cat "$log"
  grep -qx "w1 $1" "$log" || fail "use_model: expected w1 $1"
}
regenerated() { grep -q "cannl: generating mymodel" "$log"; }

case "$mode" in
subdir)
  step "configure subdir_consumer: add_subdirectory($CANNL_SRC)"
  configure subdir_consumer -DCMAKE_CXX_COMPILER="$CANNL_CXX" -DCANNL_SOURCE_DIR="$CANNL_SRC" -DCANNL_QUICK_KERNELS=ON
  if [ "$CANNL_CMAKE_GENERATOR" = Ninja ]; then
    step "the build plan makes the generator, then runs it on the spec"
    "$CANNL_MAKE_PROGRAM" -C "$build" -t commands use_model >"$log" 2>&1 || fail "ninja -t commands"
    grep -q -- "-o cannl/generator/cannl " "$log" || fail "the build would not link the generator"
    grep -q "cannl/generator/cannl gen .*tiny.cannl" "$log" || fail "the build would not run the generator"
  fi
  step "build with CANNL_GENERATOR=$CANNL_EXE, run"
  configure subdir_consumer -DCANNL_GENERATOR="$CANNL_EXE" -DCANNL_QUICK_KERNELS=ON
  build_it
  regenerated || fail "the generator did not run"
  [ ! -e "$build/cannl/generator/cannl" ] || fail "the generator was built despite CANNL_GENERATOR"
  run_model 32
  grep -q "w1  \[4 -> 16\]" "$build/cannl/mymodel_wide/tiny.h" || fail "DIMS hidden=16: tiny.h of mymodel_wide has no w1 [4 -> 16]"
  step "edit the spec (hidden 8 -> 12): regenerated and rebuilt"
  sed -i 's/^dim hidden = 8$/dim hidden = 12/' "$work/src/tiny.cannl"
  grep -q "^dim hidden = 12$" "$work/src/tiny.cannl" || fail "could not edit the spec copy"
  build_it
  regenerated || fail "the generator did not run after the spec changed"
  grep -q "w1  \[4 -> 12\]" "$build/cannl/mymodel/tiny.h" || fail "tiny.h does not have the new w1 shape"
  grep -q "w1  \[4 -> 16\]" "$build/cannl/mymodel_wide/tiny.h" || fail "DIMS hidden=16 did not override the edited spec"
  run_model 48
  step "nothing changed: nothing to do"
  build_it
  if regenerated; then fail "the generator ran again with nothing changed"; fi
  ;;
package | fresh)
  prefix=$work/prefix
  build_tree=$CANNL_BUILD
  if [ "$mode" = fresh ]; then
    clone=$work/clone
    step "the source tree as a fresh clone has it: $clone"
    mkdir -p "$clone"
    if git -C "$CANNL_SRC" rev-parse --git-dir >/dev/null 2>&1; then
      # tracked and new files that are not ignored (uncommitted edits included), none of build/
      (cd "$CANNL_SRC" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -t "$clone") || fail "copy the source tree"
    else
      (cd "$CANNL_SRC" && tar --exclude=./build -cf - .) | (cd "$clone" && tar -xf -) || fail "copy the source tree"
    fi
    [ ! -e "$clone/build" ] || fail "the copy has a build directory"
    step "cmake --preset release -DCANNL_BUILD_TESTS=OFF -DCANNL_BUILD_EXAMPLES=OFF"
    (cd "$clone" && "$CANNL_CMAKE" --preset release -DCANNL_BUILD_TESTS=OFF -DCANNL_BUILD_EXAMPLES=OFF \
      -DCMAKE_MAKE_PROGRAM="$CANNL_MAKE_PROGRAM") >"$log" 2>&1 || fail "configure"
    build_tree=$clone/build/release
    step "cmake --install before building: refused, nothing written"
    if (cd "$clone" && "$CANNL_CMAKE" --install build/release --prefix "$prefix") >"$log" 2>&1; then
      fail "cmake --install of an unbuilt tree succeeded"
    fi
    grep -q "Nothing was installed" "$log" || fail "cmake --install did not say what is missing"
    [ ! -e "$prefix" ] || fail "cmake --install of an unbuilt tree wrote $(cd "$prefix" && find . -type f | head -3)"
    if [ "${CANNL_INSTALL_FRESH:-full}" = configure ]; then
      # scripts/test.sh when the build files did not change in the last commit: the copy
      # configures (every source file CMake names is in it) and refuses an early install.
      step "CANNL_INSTALL_FRESH=configure: not built (the build files did not change)"
      exit 0
    fi
    step "cmake --build --preset release (the generator and the runtime only)"
    (cd "$clone" && "$CANNL_CMAKE" --build --preset release) >"$log" 2>&1 || fail "build"
    step "cmake --install build/release --prefix $prefix"
    (cd "$clone" && "$CANNL_CMAKE" --install build/release --prefix "$prefix") >"$log" 2>&1 || fail "cmake --install"
  else
    step "cmake --install $CANNL_BUILD --prefix $prefix"
    "$CANNL_CMAKE" --install "$CANNL_BUILD" --prefix "$prefix" >"$log" 2>&1 || fail "cmake --install"
  fi
  for f in bin/cannl lib/libcannl_rt.a include/cannl/cannl_rt.h lib/cmake/cannl/cannlConfig.cmake \
           lib/cmake/cannl/cannlConfigVersion.cmake lib/cmake/cannl/cannlTargets.cmake \
           lib/cmake/cannl/Cannl.cmake; do
    [ -f "$prefix/$f" ] || fail "not installed: $f"
  done
  mpi=0
  if [ -f "$build_tree/runtime-lib/libcannl_rt_mpi.a" ]; then  # built with MPI
    [ -f "$prefix/lib/libcannl_rt_mpi.a" ] || fail "not installed: lib/libcannl_rt_mpi.a"
    mpi=1
  fi
  if [ -f "$build_tree/runtime-lib/cuda/libcannl_cuda_rt.a" ]; then  # built with the CUDA toolkit
    for f in lib/libcannl_cuda_rt.a include/cannl/cannl_cuda.h; do
      [ -f "$prefix/$f" ] || fail "not installed: $f"
    done
  fi
  # Models built by cannl's own build (examples, tests) are not part of the install.
  extra=$(cd "$prefix" && find bin include lib -mindepth 1 -maxdepth 1 \
             ! -path bin/cannl ! -path include/cannl ! -path lib/libcannl_rt.a ! -path lib/cmake \
             ! -path lib/libcannl_cuda_rt.a ! -path lib/libcannl_rt_mpi.a)  # CUDA, MPI parts when built
  [ -z "$extra" ] || fail "installed besides cannl: $extra"
  step "configure package_consumer: find_package(cannl) in $prefix, build, run"
  configure package_consumer -DCMAKE_PREFIX_PATH="$prefix"
  build_it
  regenerated || fail "the generator did not run"
  run_model 32
  "$build/mymodel_train" --help >"$log" 2>&1 || fail "mymodel_train --help"
  grep -q "usage: mymodel_train" "$log" || fail "mymodel_train --help: no usage line"
  if [ "$mpi" = 1 ]; then
    [ -x "$build/mymodel_mpi_train" ] || fail "cannl_add_model(... MPI) built no mymodel_mpi_train"
    if command -v mpirun >/dev/null && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
         mpirun --oversubscribe -np 1 true >/dev/null 2>&1; then
      step "mpirun -np 2 mymodel_mpi_train: data-parallel"
      for i in $(seq 0 63); do echo "$((i % 5)),$((i % 3)),$((i % 7)),$((i % 2)),$((i % 3))"; done >"$work/d.csv"
      # (under the sanitizers: Open MPI's own allocations read as leaks, as in tests/mpi)
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        mpirun --oversubscribe -x ASAN_OPTIONS -np 2 "$build/mymodel_mpi_train" --data "x=$work/d.csv:0-3" \
        --data "label=$work/d.csv:4" --batch 16 --steps 4 --quiet >"$log" 2>&1 || fail "mpirun -np 2 mymodel_mpi_train"
      grep -q "data-parallel: 2 ranks" "$log" || fail "mymodel_mpi_train under mpirun -np 2 did not train data-parallel"
    else
      step "mpirun cannot run here: mymodel_mpi_train built, not run"
    fi
  fi
  step "the installed generator changed: regenerated"
  touch "$prefix/bin/cannl"
  build_it
  regenerated || fail "the generator did not run after it changed"
  run_model 32
  ;;
*)
  echo "usage: consumer_test.sh subdir|package|fresh" >&2
  exit 2
  ;;
esac
step "ok"
