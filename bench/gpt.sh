#!/usr/bin/env bash
# bench/gpt.sh — the GPT specs' training step, cannl vs PyTorch 1.13 (not part of the test suite;
# takes about ten minutes on 2 cores).
#
#   bench/gpt.sh                                   gpt_char (batch 8, ctx 128), gpt2_124m at ctx
#                                                  64 (batch 4) and llama_char (batch 8, ctx 128),
#                                                  7 interleaved repetitions, 1 and 2 threads,
#                                                  then the loss comparison
#   bench/gpt.sh --reps 3 --models gpt_char --no-loss
#
# Builds `cannl` and the runtime (release preset); generates each model into build/bench/gpt/
# (`cannl gen`, gpt2_124m with --dim ctx=64) and compiles it with the flags of the generated
# CMakeLists.txt into a step timer (bench/step_bench.c) and the training program, and
# bench/fma_peak.c (the products' bound: the products' time at the FMA peak); extracts the
# King James Bible (scripts/kjv-data.sh) for the loss comparison's windows; then
# bench/gpt_bench.py runs both and prints the markdown tables of bench/README.md. Needs
# python3-torch (scripts/install-deps.sh --torch) and the bible-kjv packages (--data).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh --torch --data
scripts/kjv-data.sh data/kjv >/dev/null
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
out=build/bench/gpt
mkdir -p "$out"
cc=${CC:-cc}
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp -Iruntime-lib)
declare -A gen_args=([gpt_char]="" [gpt2_124m]="--dim ctx=64" [llama_char]="")
for model in gpt_char gpt2_124m llama_char; do
  g=$out/$model/src
  rm -rf "$g"
  read -r -a extra <<<"${gen_args[$model]}"
  "$cannl" gen "specs/$model.cannl" "${extra[@]}" -o "$g"
  "$cc" "${cflags[@]}" -I"$g" -DCANNL_BENCH_API="${model}_api" bench/step_bench.c "$g/$model.c" "$rt" \
    -lz -lm -o "$out/$model/step"
  "$cc" "${cflags[@]}" -I"$g" "$g/${model}_train.c" "$g/$model.c" "$g/${model}_inference.c" "$rt" -lz -lm \
    -o "$out/$model/train"
done
"$cc" -O3 -march=native -fopenmp bench/fma_peak.c -o "$out/fma_peak"  # the products' bound (gpt_bench.py)
echo "bench/gpt.sh: built into $out; running (this takes a while); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
/usr/bin/python3 bench/gpt_bench.py "$out" --text data/kjv/train.txt --val data/kjv/val.txt "$@"
