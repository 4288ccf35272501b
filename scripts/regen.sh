#!/usr/bin/env bash
# Regenerates generated/: the committed output of `cannl gen` for every example spec,
#   generated/<name>/       =  cannl gen specs/<name>.cannl -o generated/<name>  (but the skipped ones below)
#   generated/<name>/cuda/  =  cannl gen specs/<name>.cannl -o generated/<name>/cuda --target cuda
# The test golden.regenerate fails when generated/ differs from what the generator writes;
# after an intended change to the generator, its templates or specs/, run this and commit
# generated/ with the change.
#   scripts/regen.sh                 builds build/dev's generator (configuring the dev preset
#                                    if needed) and rewrites generated/
#   scripts/regen.sh -o DIR [CANNL]  writes into DIR instead (the test does), with the cannl
#                                    executable CANNL (default: build/dev's, built first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/generated
if [ "${1:-}" = -o ]; then
  [ $# -ge 2 ] || { echo "usage: scripts/regen.sh [-o DIR] [CANNL]" >&2; exit 2; }
  out=$2
  shift 2
fi
if [ $# -ge 1 ]; then
  cannl=$1
else
  cd "$root"
  [ -f build/dev/build.ninja ] || cmake --preset dev >/dev/null
  cmake --build build/dev --target cannl >/dev/null
  cannl=$root/build/dev/generator/cannl
fi
mkdir -p "$out"
# Every model directory is written afresh: one whose spec is gone disappears.
find "$out" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
# gpt_char is here for its rolled repeat block (the layer loop: a block's functions called
# over the instances, a stacked param per block param, the tables' folded rows). The other deep
# language models are left out: gpt2_124m (gpt_char's constructs at GPT-2's dims; its CUDA is
# 1.4 MB), llama_char and speedrun_char (gpt_char's size; their v2 built-ins have their
# gradcheck specs), and gru_rows (1.7 MB: its 28 instances read different rows, x[t], and stay
# expanded, not rolled).
skip=" gpt2_124m gru_rows llama_char speedrun_char "
for spec in "$root"/specs/*.cannl; do
  name=$(basename "$spec" .cannl)
  case "$skip" in *" $name "*) continue ;; esac
  "$cannl" gen "$spec" -o "$out/$name"
  "$cannl" gen "$spec" -o "$out/$name/cuda" --target cuda
done
echo "regen.sh: wrote $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) models into $out"
