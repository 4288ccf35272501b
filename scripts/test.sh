#!/usr/bin/env bash
# Runs every test: installs what is missing, builds with the `dev` preset and runs ctest,
# then does the same under the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer).
#   scripts/test.sh            both presets
#   scripts/test.sh dev        one preset
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --all
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(dev asan)
for p in "${presets[@]}"; do
  echo "== preset $p"
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p"
  # CANNL_SKIP_LONG=1 leaves out the tests labelled `long` (the 5-epoch accuracy run,
  # whose result sits close to its bar and depends on the CPU's vector width).
  ctest --preset "$p" ${CANNL_SKIP_LONG:+-LE long}
done
