#!/usr/bin/env bash
# bench/roll.sh — repeat blocks as loops (issue 34) against the code before them, side by side:
# generated size, `cannl gen` time and -O2 compile time of gpt2_124m at 12 and 48 layers, then the
# training step of gpt_char and gpt2_124m (ctx 64) at 1 and 2 threads, old and new binaries
# interleaved (not part of the test suite; 10-20 minutes on 2 cores).
#
#   bench/roll.sh                      the old code: this generator with --no-roll (every repeat
#                                      block expanded instance by instance, as before issue 34)
#   bench/roll.sh --base REV           the old code: revision REV's generator and runtime, built
#                                      from `git archive REV` in build/bench/roll/base/
#   bench/roll.sh --reps 3 --threads 1 --models gpt_char
#   bench/roll.sh --out DIR            build into DIR (default build/bench/roll)
#
# Each side generates from its own specs/ and times with its own bench/step_bench.c,, compiled with
# the flags of the generated CMakeLists.txt; bench/roll_bench.py runs them and prints the markdown tables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base=""
out=$root/build/bench/roll
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --base) [ $# -ge 2 ] || { echo "bench/roll.sh: --base needs a revision" >&2; exit 2; }
            base=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || { echo "bench/roll.sh: --out needs a folder" >&2; exit 2; }
           out=$(realpath -m "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
mkdir -p "$out"
new_cannl=$root/build/release/generator/cannl
new_rt=$root/build/release/runtime-lib/libcannl_rt.a
if [ -n "$base" ]; then
  rev=$(git rev-parse --verify --quiet "$base^{commit}") || { echo "bench/roll.sh: no revision $base" >&2; exit 2; }
  src=$out/base/src
  if [ "$(cat "$out/base/rev" 2>/dev/null)" != "$rev" ]; then
    rm -rf "$out/base"
    mkdir -p "$src"
    git archive "$rev" | tar -x -C "$src"
    echo "$rev" > "$out/base/rev"
  fi
  cmake -S "$src" -B "$out/base/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCANNL_BUILD_TESTS=OFF -DCANNL_BUILD_EXAMPLES=OFF -DCANNL_ENABLE_CUDA=OFF >/dev/null
  cmake --build "$out/base/build" --target cannl cannl_rt >/dev/null
  old_cannl=$out/base/build/generator/cannl
  old_rt=$out/base/build/runtime-lib/libcannl_rt.a
  old_src=$src
  old_flags=()
  old_name="$(git log -1 --format=%h "$rev")"
else
  old_cannl=$new_cannl
  old_rt=$new_rt
  old_src=$root
  old_flags=(--no-roll)
  old_name="--no-roll"
fi
cc=${CC:-cc}
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp)
declare -A gen_args=([gpt_char]="" [gpt2_124m]="--dim ctx=64")
for side in old new; do
  if [ $side = old ]; then c=$old_cannl rt=$old_rt s=$old_src flags=("${old_flags[@]}")
  else c=$new_cannl rt=$new_rt s=$root flags=(); fi
  for model in gpt_char gpt2_124m; do
    g=$out/$side/$model/src
    rm -rf "$g"
    read -r -a extra <<<"${gen_args[$model]}"
    "$c" gen "$s/specs/$model.cannl" "${extra[@]}" "${flags[@]}" -o "$g" >/dev/null
    "$cc" "${cflags[@]}" -I"$s/runtime-lib" -I"$g" -DCANNL_BENCH_API="${model}_api" "$s/bench/step_bench.c" \
      "$g/$model.c" "$rt" -lz -lm -o "$out/$side/$model/step"
  done
  echo "$c ${flags[*]}" > "$out/$side/generator"
  ln -sfn "$s" "$out/$side/root"
done
echo "bench/roll.sh: old = $old_name, built into $out; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
/usr/bin/python3 bench/roll_bench.py "$out" --old-name "$old_name" "${args[@]}"
