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
         awk -F', ' '{ gsub(/\<n\>/, "128"); print $1, $2, $3, $6, $7, $9, $10, $12, $13 }' | sort -u)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "| MR | KC | MC | NC | products' time (us) | GFLOP/s |"
echo "| --- | --- | --- | --- | --- | --- |"
for cand in "12 256 144 512" "14 256 168 512" "8 256 96 512" "6 256 72 512" "12 128 144 512" "12 384 144 512" \
            "12 256 48 512" "12 256 144 256" "12 256 144 1024"; do
  read -r mr kc mc nc <<<"$cand"
  bin=$out/tile_${mr}_${kc}_${mc}_${nc}
  cc "${cflags[@]}" -DCANNL_MR="$mr" -DCANNL_KC="$kc" -DCANNL_MC="$mc" -DCANNL_NC="$nc" \
     -DCANNL_BENCH_MODEL_C="\"$root/$src\"" bench/gemm_bench.c "$rt" -lopenblas -lz -lm -o "$bin"
  best=$(while read -r M N K am ak bk bn cm cn; do
           "$bin" "$M" "$N" "$K" "$am" "$ak" "$bk" "$bn" "$cm" "$cn" 1
         done <<<"$shapes" | /usr/bin/python3 -c '
import json, sys
t = f = 0.0
for line in sys.stdin:
    r = json.loads(line)
    fl = 2.0 * r["M"] * r["N"] * r["K"]
    t += fl / (r["cannl_gflops"] * 1e3)   # microseconds
    f += fl
print(f"{t:.1f} {f / t / 1e3:.1f}")')
  echo "| $mr | $kc | $mc | $nc | ${best%% *} | ${best##* } |"
done
