#!/usr/bin/env bash
# nvcc.gpu_check_stage — scripts/gpu-check.sh without a GPU: its first phase as a build test, and
# what of the second can run here.
#   gpu_check_stage.sh WORK CANNL NVCC
#   1. `stage --ci` into WORK/stage, building in WORK/build with CANNL (this build's generator) and
#      NVCC for sm_90: the --ci subset (fashion_mlp, gpt_tiny, three gradcheck specs, the CUDA
#      runtime's test; not GPT-2, whose two nvcc compiles take minutes); it checks on its own that
#      the programs need no library but libc, libstdc++ and cuBLAS, and that the staging fits 60 MiB
#   2. the staging: a MANIFEST, the packed programs, the references, at most 60 MiB
#   3. the device script passes `bash -n`; `run --dry-run` lists every part, exits 0, writes the
#      report with a row per part and the GPT-2 lines in the form the outside check reads; with a
#      program taken out it reports that part and carries on (exit 1); with a 5 s budget no part runs
#   4. `land` refuses a dry run's report and, with --allow-dry-run, names it DATE-COMMIT-dry-run.md
#   5. bad usage exits 2
# Skipped (77) without nvcc, Fashion-MNIST or the `bible` program (scripts/install-deps.sh --data).
set -uo pipefail
work=$1 cannl=$2 nvcc=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/scripts/gpu-check.sh
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then echo "SKIP: no nvcc"; exit 77; fi
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
command -v bible >/dev/null 2>&1 || [ -s "$work/build/kjv/train.txt" ] || { echo "SKIP: no 'bible' (bible-kjv)"; exit 77; }
fails=0
check() {  # check CONDITION-EXIT-STATUS WHAT
  if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi
}
expect_rc() {  # expect_rc RC WHAT CMD...
  local want=$1 what=$2 rc
  shift 2
  "$@" >"$work/last.out" 2>&1
  rc=$?
  [ $rc = "$want" ] || { echo "--- output of: $*"; tail -20 "$work/last.out"; }
  [ $rc = "$want" ]
  check $? "$what (exit $rc, expected $want)"
}
mkdir -p "$work"
rm -rf "$work/stage" "$work/out" "$work/out2" "$work/out3" "$work/landed"

bash -n "$script"
check $? "bash -n scripts/gpu-check.sh"
t0=$SECONDS
PATH=$(dirname "$nvcc"):$PATH "$script" stage --ci --stage "$work/stage" --build-dir "$work/build" --generator "$cannl"
rc=$?
check $rc "stage --ci ($((SECONDS - t0)) s)"
[ $rc = 0 ] || { echo "FAIL: the staging failed: nothing else to check"; exit 1; }

for f in MANIFEST bin.tar.xz refs/parity_fashion_mlp.npz refs/parity_gpt_tiny.npz refs/infer_fashion_mlp/logits.npy \
         refs/generate_gpt_tiny/tokens.bin data/fashion/train-images-idx3-ubyte.gz data/kjv/train.txt data/kjv/train.bin; do
  [ -s "$work/stage/$f" ]
  check $? "staged $f"
done
bytes=$(du -sb "$work/stage" | cut -f1)
[ "$bytes" -le $((60 * 1048576)) ]
check $? "the staging is $bytes bytes, at most 60 MiB"
grep -q '^kind: ci$' "$work/stage/MANIFEST"
check $? "the manifest says kind: ci"
tar -tJf "$work/stage/bin.tar.xz" >"$work/bin.list"
grep -qx 'bin/gc_cuda_check_all' "$work/bin.list"
check $? "bin.tar.xz holds gc_cuda_check_all"

expect_rc 0 "run --dry-run" "$script" run "$work/stage" "$work/out" --dry-run
report=$work/out/gpu-check-report.md
[ -s "$report" ] && [ -s "$work/out/gpu-check-log.txt" ]
check $? "the dry run wrote the report and the log"
for part in device runtime gradcheck parity infer generate bench train precision memcheck; do
  grep -q "^| $part | dry run |" "$report"
  check $? "the report's row for $part"
done
n=$(grep -cE '^gpt2_124m (bf16|fp32) B=(8|16) T=1024: cannl (n/a|[0-9.]+ ms), torch\.compile (n/a|[0-9.]+ ms), eager (n/a|[0-9.]+ ms), ratio (n/a|[0-9.]+)$' "$report")
[ "$n" = 4 ]
check $? "the report has the four GPT-2 lines in the outside check's form ($n)"
grep -q 'mlp --selftest' "$work/out/gpu-check-log.txt"
check $? "the gradcheck part lists its jobs from gc_cuda_check_all --list"

# A program missing: its part is reported and the next ones still run.
mkdir -p "$work/stage2"
cp -r "$work/stage/MANIFEST" "$work/stage/refs" "$work/stage/data" "$work/stage2/"
tar -C "$work/stage2" -xJf "$work/stage/bin.tar.xz" && rm -f "$work/stage2/bin/gc_cuda_check_all"
expect_rc 1 "run --dry-run without gc_cuda_check_all fails" "$script" run "$work/stage2" "$work/out2" --dry-run
grep -q '^| gradcheck | FAIL' "$work/out2/gpu-check-report.md" && grep -q '^| memcheck | dry run |' "$work/out2/gpu-check-report.md"
check $? "gradcheck reported failed, the parts after it still ran"
rm -rf "$work/stage2"

# The budget: with 5 s, no part starts.
expect_rc 1 "run --dry-run --budget 5 fails" "$script" run "$work/stage" "$work/out3" --dry-run --budget 5
grep -q '^| device | not run' "$work/out3/gpu-check-report.md"
check $? "with a 5 s budget the parts are reported as not run"

expect_rc 2 "land refuses a dry run's report" "$script" land "$work/out" --to "$work/landed"
expect_rc 0 "land --allow-dry-run" "$script" land "$work/out" --to "$work/landed" --allow-dry-run
landed=$(cd "$work/landed" && echo *)
[[ $landed =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9a-f]{7}(-dirty)?-dry-run\.md$ ]]
check $? "landed as DATE-COMMIT-dry-run.md: $landed"

expect_rc 2 "run without arguments" "$script" run
expect_rc 2 "run with an unknown part" "$script" run "$work/stage" "$work/out4" --parts bogus
expect_rc 2 "run on a folder that is no staging" "$script" run "$work/landed" "$work/out4"
expect_rc 2 "stage with an unknown option" "$script" stage --bogus
expect_rc 2 "an unknown command" "$script" bogus

if [ $fails = 0 ]; then echo "PASS"; else echo "FAILED: $fails checks"; exit 1; fi
