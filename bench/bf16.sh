#!/usr/bin/env bash
# bench/bf16.sh — the training step with `cannl gen --precision bf16` against fp32 on the CPU
# (issue 38 item 3: the products in bf16 with fp32 sums, AVX512_BF16). Not part of the test suite.
#
#   bench/bf16.sh                                    fashion_mlp and gpt_char, 5 repetitions, 1 and 2 threads
#   bench/bf16.sh --reps 3 --threads "1" --models "gpt_char" --steps 40
#
# Builds `cannl` and the runtime (release preset), generates each model twice into build/bench/bf16/
# (--precision fp32 and bf16), compiles each with the flags of the generated CMakeLists.txt into a
# step timer (bench/step_bench.c), and runs them as fresh processes, fp32 and bf16 in turn for
# each repetition, thread count and model (interleaved: a slow phase of a shared machine hits both).
# Prints, per model and thread count, the median over the repetitions of each process's median step
# (wall clock) and of its CPU time per step (on one thread the step's time while it had a core:
# steadier on a loaded machine), and the median of the pairwise bf16/fp32 ratios of each.
# On a CPU without AVX512_BF16 the bf16 timers run fp32 and say so on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
reps=5 threads="1 2" models="fashion_mlp gpt_char" steps=60 warmup=5
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $0 [--reps N] [--threads \"1 2\"] [--models \"fashion_mlp gpt_char\"] [--steps N]" >&2; exit 2 ;;
  esac
done
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
out=build/bench/bf16
mkdir -p "$out"
cc=${CC:-cc}
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp -Iruntime-lib)
declare -A batch=([fashion_mlp]=128 [fashion_mlp_adam]=128 [fashion_cnn]=64 [cnn_dense256]=64 [gpt_char]=8)
for model in $models; do
  spec=specs/$model.cannl
  [ -f "$spec" ] || spec=bench/specs/$model.cannl
  for p in fp32 bf16; do
    g=$out/${model}_$p
    rm -rf "$g"
    "$cannl" gen "$spec" --precision $p -o "$g"
    "$cc" "${cflags[@]}" -I"$g" -DCANNL_BENCH_API="${model}_api" bench/step_bench.c "$g/$model.c" "$rt" -lz -lm \
      -o "$out/${model}_${p}_step"
  done
done
has=no
grep -qw avx512_bf16 /proc/cpuinfo && has=yes
echo "bench/bf16.sh: AVX512_BF16: $has;$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-);" \
  "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
log=$out/results.jsonl
: >"$log"
for ((r = 0; r < reps; ++r)); do
  for t in $threads; do
    for model in $models; do
      for p in fp32 bf16; do
        wait_policy=ACTIVE
        [ "$t" -gt 1 ] && wait_policy=PASSIVE
        line=$(OMP_NUM_THREADS=$t OMP_WAIT_POLICY=$wait_policy "$out/${model}_${p}_step" "${batch[$model]:-64}" \
          "$warmup" "$steps" "$t")
        echo "{\"precision\": \"$p\", \"rep\": $r, ${line#\{}" >>"$log"
      done
    done
  done
done
python3 - "$log" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| model | threads | fp32 step (ms) | bf16 step (ms) | bf16/fp32 | fp32 CPU/step (ms) | bf16 CPU/step (ms) | bf16/fp32 (CPU) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for model in dict.fromkeys(r["model"] for r in rows):
    for t in sorted({r["threads"] for r in rows if r["model"] == model}):
        by = {p: {r["rep"]: r for r in rows if r["model"] == model and r["threads"] == t and r["precision"] == p}
              for p in ("fp32", "bf16")}
        reps = sorted(set(by["fp32"]) & set(by["bf16"]))
        med = lambda p, k: statistics.median(by[p][i][k] for i in reps) / 1e3
        ratio = lambda k: statistics.median(by["bf16"][i][k] / by["fp32"][i][k] for i in reps)
        print(f"| {model} | {t} | {med('fp32', 'median_us'):.2f} | {med('bf16', 'median_us'):.2f} | "
              f"{ratio('median_us'):.2f} | {med('fp32', 'cpu_us'):.2f} | {med('bf16', 'cpu_us'):.2f} | "
              f"{ratio('cpu_us'):.2f} |")
EOF
