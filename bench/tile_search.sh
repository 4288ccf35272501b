#!/usr/bin/env bash
# bench/tile_search.sh — the measured search behind the generated kernel's tile sizes
# (docs/gemm-tiles.md). Needs libopenblas-dev (gemm_bench links it); takes a minute or two.
#
# Compiles bench/gemm_bench.c against the generated fashion_mlp.c once per candidate
# (register tile MR rows; K block KC; A block MC rows; B panel NC columns; NR is two vector
# widths), times every product of the fashion_mlp step at batch 128 on one thread, and
# prints per candidate the total time of the eight products and their combined GFLOP/s.
#   bench/tile_search.sh          (each product: the best of gemm_bench's three timed rounds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build/bench
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
rt=build/release/runtime-lib/libcannl_rt.a
rm -rf "$out/tile_src"
build/release/generator/cannl gen specs/fashion_mlp.cannl -o "$out/tile_src"
src=$out/tile_src/fashion_mlp.c
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -march=native -fopenmp
        -Iruntime-lib -I"$out/tile_src")
# The products of the step, as bench.py reads them from the generated source (n = 128).
shapes=$(grep -o 'cannl_gemm([^;]*);' "$src" | grep -v 'long M' | sed 's/cannl_gemm(//; s/);//' |
         awk -F', ' '{ for (i = 1; i <= NF; ++i) if ($i == "n") $i = 128; print $1, $2, $3, $6, $7, $9, $10, $12, $13 }' | sort -u)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cands=("12 256 144 512" "14 256 168 512" "8 256 96 512" "6 256 72 512" "12 128 144 512" "12 384 144 512"
       "12 256 48 512" "12 256 144 256" "12 256 144 1024")
bins=()
for cand in "${cands[@]}"; do
  read -r mr kc mc nc <<<"$cand"
  bin=$out/tile_${mr}_${kc}_${mc}_${nc}
  cc "${cflags[@]}" -DCANNL_MR="$mr" -DCANNL_KC="$kc" -DCANNL_MC="$mc" -DCANNL_NC="$nc" \
     -DCANNL_BENCH_MODEL_C="\"$root/$src\"" bench/gemm_bench.c "$rt" -lopenblas -lz -lm -o "$bin"
  bins+=("$bin")
done
# Five rounds over all candidates, in a different order each round (slow phases of the
# machine hit them alike); each product's best time over the rounds counts.
/usr/bin/python3 - "$shapes" "${bins[@]}" <<'PY'
import json, subprocess, sys
shapes = [line.split() for line in sys.argv[1].splitlines()]
bins = sys.argv[2:]
best = {b: {} for b in bins}
for rnd in range(5):
    order = bins[rnd % len(bins):] + bins[:rnd % len(bins)]  # a different candidate first each round
    if rnd % 2:
        order.reverse()
    for b in order:
        for sh in shapes:
            r = json.loads(subprocess.run([b] + sh + ["1"], capture_output=True, text=True, check=True).stdout)
            us = 2.0 * r["M"] * r["N"] * r["K"] / (r["cannl_gflops"] * 1e3)
            best[b][tuple(sh)] = min(us, best[b].get(tuple(sh), 1e30))
print("| MR | KC | MC | NC | products' time (us) | GFLOP/s |")
print("| --- | --- | --- | --- | --- | --- |")
flops = sum(2.0 * int(s[0]) * int(s[1]) * int(s[2]) for s in shapes)
for b in bins:
    mr, kc, mc, nc = b.rsplit("/", 1)[1].split("_")[1:]
    t = sum(best[b].values())
    print(f"| {mr} | {kc} | {mc} | {nc} | {t:.0f} | {flops / t / 1e3:.1f} |")
PY
