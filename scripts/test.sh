#!/usr/bin/env bash
# Runs every test: installs what is missing, then for each preset builds everything and runs
# ctest:
#   dev      debug build, every test
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, every test
#   release  the README's `cmake --preset release && cmake --build --preset release` (with
#            -Werror at -O3: gcc finds other warnings there), every test but the nvcc.* ones
#            (the generated CUDA does not depend on the build type; dev runs them), plus
#            cmake.install_fresh (the README's install commands in a fresh copy of the tree)
#   fuzz     clang + libFuzzer: each harness of tests/fuzz fuzzes for CANNL_FUZZ_SECONDS
#            (default 10) from its seed corpus
# The tests labelled `once` compile code whose text and flags do not depend on the preset (the
# committed generated/ with the models' own flags, consumer projects, the CUDA sources with
# nvcc): the first preset runs them, the later ones leave them out.
#   scripts/test.sh                every preset, in that order
#   scripts/test.sh dev release    some of them
# CANNL_SKIP_LONG=1 leaves out the tests labelled `long` (the accuracy runs, whose results sit
# close to their bars and depend on the CPU's vector width). Prints each stage's time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --all
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(dev asan release fuzz)
summary=()
for p in "${presets[@]}"; do
  echo "== preset $p"
  start=$SECONDS
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p"
  exclude=()
  [ -n "${CANNL_SKIP_LONG:-}" ] && exclude+=(long)
  [ "$p" = release ] && exclude+=(nvcc)
  [ ${#summary[@]} -gt 0 ] && exclude+=(once)
  if [ ${#exclude[@]} -gt 0 ]; then
    ctest --preset "$p" -LE "$(IFS='|'; echo "${exclude[*]}")"
  else
    ctest --preset "$p"
  fi
  summary+=("$p: $((SECONDS - start)) s")
done
printf '== %s\n' "${summary[@]}"
