#!/usr/bin/env bash
# Runs the tests (docs/testing.md): installs what is missing, then for each preset configures,
# builds and runs ctest, printing each stage's time and, at the end, where the time went.
#
#   scripts/test.sh          what CI runs (about 30 minutes on 2 cores):
#     release  the README's build (-O3, warnings as errors) with every test: the functional
#              suite, the golden files, the CUDA sources compiled once each for sm_90
#     asan     AddressSanitizer + UndefinedBehaviorSanitizer on the tests labelled `memory`
#              (CANNL_TEST_SET=memory: the runtime, the parsers, the fuzz corpora, the CLI,
#              every gradient check, the generated programs' error, robustness, decode and
#              generation paths, MPI usage and a killed rank), their models compiled at -O1
#     fuzz     clang + libFuzzer: each harness of tests/fuzz fuzzes for CANNL_FUZZ_SECONDS
#              (default 10) from its seed corpus
#   scripts/test.sh --full   for a release or a change to the build system (well over an hour):
#     dev, asan, release and fuzz with every test in each (the CUDA sources for the default
#     architectures, sm_90 and sm_80); the tests labelled `once` (compiles that do not depend
#     on the preset) in the first preset only, the nvcc ones not in release
#   scripts/test.sh [--full] PRESET...   some of them
#
# CANNL_SKIP_LONG=1 leaves out the tests labelled `long` (the accuracy runs, the GPU check's
# staging: CI does). Every
# preset's build directory is build/<preset>; `ctest --preset release -L LABEL` (or -R NAME)
# runs part of the suite again after a build.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = --full ]; then
  full=1
  shift
fi
scripts/install-deps.sh --all
presets=("$@")
if [ ${#presets[@]} -eq 0 ]; then
  if [ $full = 1 ]; then presets=(dev asan release fuzz); else presets=(release asan fuzz); fi
fi

# The fresh-install test (cmake.install_fresh) builds cannl again from a copy of the tree, as
# the README's install commands do: it runs in full when the build system changed in the last
# commit (or when this is not a git checkout); otherwise it checks the copy configures and
# refuses to install before building, and builds nothing (CANNL_INSTALL_FRESH=configure).
build_files='^(CMakeLists.txt|CMakePresets.json|cmake/|generator/CMakeLists.txt|generator/templates.cmake|runtime-lib/CMakeLists.txt|runtime-lib/cuda/CMakeLists.txt|scripts/install-deps.sh)'
install_fresh=full
if [ $full = 0 ] && git rev-parse --verify -q HEAD~1 >/dev/null 2>&1 &&
   ! git diff --name-only HEAD~1 -- | grep -Eq "$build_files" &&
   ! git status --porcelain | cut -c4- | grep -Eq "$build_files"; then
  install_fresh=configure
fi
echo "== cmake.install_fresh: $install_fresh (the build files changed since HEAD~1: $([ $install_fresh = full ] && echo yes or --full || echo no))"

summary=()
first=1
for p in "${presets[@]}"; do
  echo "== preset $p"
  start=$SECONDS
  args=()
  case $p in
    asan) args+=(-DCANNL_TEST_SET="$([ $full = 1 ] && echo all || echo memory)") ;;
    dev | release)
      args+=(-DCANNL_TEST_SET=all)
      # The one example no test runs (its constructs are gpt_char's and gpt_tiny's): built by --full.
      args+=(-DCANNL_SKIP_EXAMPLES="$([ $full = 1 ] && echo "" || echo gpt2_124m)") ;;
  esac
  if [ $full = 0 ] && [ "$p" != fuzz ]; then
    args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  elif [ "$p" != fuzz ]; then
    args+=(-UCMAKE_CUDA_ARCHITECTURES)
  fi
  cmake --preset "$p" "${args[@]}" >/dev/null
  cmake --build --preset "$p"
  built=$SECONDS
  exclude=()
  [ -n "${CANNL_SKIP_LONG:-}" ] && exclude+=(long)
  if [ $full = 1 ]; then
    [ "$p" = release ] && exclude+=(nvcc)
    [ $first = 0 ] && exclude+=(once)
  fi
  ctest_args=()
  [ ${#exclude[@]} -gt 0 ] && ctest_args+=(-LE "$(IFS='|'; echo "${exclude[*]}")")
  CANNL_INSTALL_FRESH=$install_fresh ctest --preset "$p" "${ctest_args[@]}"
  # Every test passed: their scratch folders (checkpoints, datasets and programs the tests wrote,
  # 1.3 GB in release) go, so that the presets after this one have the disk (a rerun of a test
  # makes its folder again).
  rm -rf build/"$p"/tests/*/work
  summary+=("$p: $((SECONDS - start)) s (build $((built - start)) s, tests $((SECONDS - built)) s)")
  first=0
done
for p in "${presets[@]}"; do
  echo "== where the time went: $p"
  python3 scripts/test-times.py "build/$p" 10 || true
done
printf '== %s\n' "${summary[@]}"
