#!/usr/bin/env bash
# bench/tile_search.sh — the measured search behind the kernels' tile sizes (docs/gemm-tiles.md).
# Needs libopenblas-dev (gemm_bench links it); takes a few minutes per instruction set.
#
#   bench/tile_search.sh                  this CPU's best instruction set
#   bench/tile_search.sh --isa avx2       another one (CANNL_ISA=avx2: the AVX2 + FMA kernels)
#   bench/tile_search.sh --isa sse2 "4 2 256 64 512" "6 2 256 96 512"   candidates of your own
#
# A candidate is "MR NV KC MC NC": register tile MR rows x NV vectors (NR = NV vector widths),
# K blocks of at most KC, A blocks of MC rows, B panels of NC columns. For each one it compiles
# the runtime's kernels (runtime-lib/gemm*.c, each file with its -march, as runtime-lib's
# CMakeLists.txt does) with -DCANNL_MR=.. -DCANNL_NV=.. -DCANNL_KC=.. -DCANNL_MC=.. -DCANNL_NC=..
# into bench/gemm_bench.c, times every product of the fashion_mlp step at batch 128 on one
# thread (the calls of the generated source, with their overwrite flags), five rounds in
# varying order, each product's best time over the rounds, and prints per candidate the
# eight products' total time and their combined GFLOP/s, and the same for OpenBLAS (its own
# kernel for the path: OPENBLAS_CORETYPE=Haswell for avx2, Nehalem for sse2). Times are the
# process's CPU time (gemm_bench's *_cpu figures): the machine's other jobs do not inflate them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
isa=
if [ "${1:-}" = --isa ]; then isa=$2; shift 2; fi
out=build/bench/tiles
mkdir -p "$out"
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
rt=build/release/runtime-lib/libcannl_rt.a
printf '#include "cannl_rt.h"\n#include <stdio.h>\nint main(void) { cannl_isa i; cannl_isa_select(&i, NULL); puts(cannl_isa_name(i)); return 0; }\n' >"$out/isa.c"
cc -std=c11 -Iruntime-lib "$out/isa.c" "$rt" -fopenmp -lz -lm -o "$out/isa"
best=$(env -u CANNL_ISA "$out/isa")
isa=${isa:-$best}
got=$(CANNL_ISA=$isa "$out/isa")
[ "$got" = "$isa" ] || { echo "tile_search.sh: --isa $isa: this CPU's best is $best" >&2; exit 2; }
rm -rf "$out/src"
build/release/generator/cannl gen specs/fashion_mlp.cannl -o "$out/src"
# The products of the step, as bench.py reads them (n = 128): M N K a_m a_k b_k b_n c_m c_n overwrite.
shapes=$(grep -o 'cannl_sgemm(m->gemm, [^;]*);' "$out/src/fashion_mlp.c" | sed 's/cannl_sgemm(m->gemm, //; s/);//' |
         awk -F', ' '{ for (i = 1; i <= NF; ++i) if ($i == "n") $i = 128; print $1, $2, $3, $6, $7, $9, $10, $12, $13, $14 }' |
         sort -u)
if [ $# -gt 0 ]; then
  cands=("$@")
else
  case $isa in
    avx512) cands=("8 2 256 128 512" "12 2 256 144 512" "14 2 256 168 512" "6 3 256 96 528" "8 3 256 128 528"
                   "8 2 128 128 512" "8 2 384 128 512" "8 2 256 64 512" "8 2 256 256 512" "8 2 256 128 1024") ;;
    avx2) cands=("6 2 256 96 512" "4 3 256 96 528" "3 4 256 96 512" "5 2 256 80 512" "4 2 256 96 512"
                 "6 2 128 96 512" "6 2 384 96 512" "6 2 256 48 512" "6 2 256 192 512" "6 2 256 96 1024") ;;
    sse2) cands=("4 2 256 64 512" "6 2 256 96 512" "4 3 256 64 528" "3 4 256 48 512" "2 4 256 64 512"
                 "4 2 128 64 512" "4 2 384 64 512" "4 2 256 128 512" "4 2 256 64 1024") ;;
  esac
fi
flags=(-std=c11 -O3 -fopenmp -DCANNL_GEMM_X86 -Iruntime-lib)
bins=()
for cand in "${cands[@]}"; do
  read -r mr nv kc mc nc <<<"$cand"
  tag=${mr}_${nv}_${kc}_${mc}_${nc}
  o=$out/obj_$tag
  mkdir -p "$o"
  d=(-DCANNL_MR="$mr" -DCANNL_NV="$nv" -DCANNL_KC="$kc" -DCANNL_MC="$mc" -DCANNL_NC="$nc")
  cc "${flags[@]}" "${d[@]}" -c runtime-lib/gemm.c -o "$o/gemm.o"
  cc "${flags[@]}" "${d[@]}" -c runtime-lib/gemm_base.c -o "$o/gemm_base.o"
  cc "${flags[@]}" "${d[@]}" -march=x86-64-v3 -c runtime-lib/gemm_avx2.c -o "$o/gemm_avx2.o"
  cc "${flags[@]}" "${d[@]}" -march=x86-64-v4 -c runtime-lib/gemm_avx512.c -o "$o/gemm_avx512.o"
  cc "${flags[@]}" bench/gemm_bench.c "$o"/*.o "$rt" -lopenblas -lz -lm -o "$out/tile_$tag"
  bins+=("$out/tile_$tag")
done
# Five rounds over all candidates, in a different order each round (slow phases of the
# machine hit them alike); each product's best time over the rounds counts.
export CANNL_ISA=$isa OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
case $isa in avx2) export OPENBLAS_CORETYPE=Haswell ;; sse2) export OPENBLAS_CORETYPE=Nehalem ;; esac
echo "tile_search.sh: $isa, ${#bins[@]} candidates, the products of the fashion_mlp step (batch 128, one thread)" >&2
/usr/bin/python3 - "$isa" "$shapes" "${bins[@]}" <<'PY'
import json, subprocess, sys
isa, shapes, bins = sys.argv[1], [line.split() for line in sys.argv[2].splitlines()], sys.argv[3:]
best = {b: {} for b in bins + ["OpenBLAS"]}
for rnd in range(5):
    order = bins[rnd % len(bins):] + bins[:rnd % len(bins)]  # a different candidate first each round
    if rnd % 2:
        order.reverse()
    for b in order:
        for sh in shapes:
            r = json.loads(subprocess.run([b] + sh + ["1"], capture_output=True, text=True, check=True).stdout)
            assert r["isa"] == isa, r
            flops = 2.0 * r["M"] * r["N"] * r["K"]
            for who, g in ((b, r["cannl_gflops_cpu"]), ("OpenBLAS", r["openblas_gflops_cpu"])):
                us = flops / (g * 1e3)
                best[who][tuple(sh)] = min(us, best[who].get(tuple(sh), 1e30))
flops = sum(2.0 * int(s[0]) * int(s[1]) * int(s[2]) for s in shapes)
print(f"| MR | NV | KC | MC | NC | products' time (us) | GFLOP/s |   ({isa})")
print("| --- | --- | --- | --- | --- | --- | --- |")
for b in bins + ["OpenBLAS"]:
    t = sum(best[b].values())
    cols = b.rsplit("/", 1)[1].split("_")[1:] if b != "OpenBLAS" else ["OpenBLAS", "", "", "", ""]
    print(f"| {' | '.join(cols)} | {t:.0f} | {flops / t / 1e3:.1f} |")
PY
