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
#   4. the comparing parts, `run --parts parity,infer,generate,train` not dry, with the C programs
#      standing in for the CUDA ones: they pass with no difference, and parity catches a trainer run
#      at another learning rate
#   5. `land` refuses a dry run's report and, with --allow-dry-run, names it DATE-COMMIT-dry-run.md
#   6. bad usage exits 2
# Skipped (77) without nvcc, Fashion-MNIST or the `bible` program (scripts/install-deps.sh --data).
set -uo pipefail
work=$1 cannl=$2 nvcc=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/scripts/gpu-check.sh
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then echo "SKIP: no nvcc"; exit 77; fi
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
if ! command -v bible >/dev/null 2>&1 && [ ! -s "$work/build/kjv/train.txt" ]; then
  echo "SKIP: no 'bible' (bible-kjv)"
  exit 77
fi
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
rm -rf "$work/stage" "$work/stage2" "$work/stage3" "$work"/out* "$work/landed"

bash -n "$script"
check $? "bash -n scripts/gpu-check.sh"
t0=$SECONDS
PATH=$(dirname "$nvcc"):$PATH "$script" stage --ci --stage "$work/stage" --build-dir "$work/build" --generator "$cannl"
rc=$?
check $rc "stage --ci ($((SECONDS - t0)) s)"
[ $rc = 0 ] || { echo "FAIL: the staging failed: nothing else to check"; exit 1; }

for f in MANIFEST bin.tar.xz refs/parity_fashion_mlp.npz refs/parity_gpt_tiny.npz refs/infer_fashion_mlp/logits.npy \
         refs/generate_gpt_tiny/tokens.bin data/fashion/train-images-idx3-ubyte.gz data/kjv/train.txt \
         data/kjv/train.bin; do
  [ -s "$work/stage/$f" ]
  check $? "staged $f"
done
bytes=$(du -sb "$work/stage" | cut -f1)
[ "$bytes" -le $((60 * 1048576)) ]
check $? "the staging is $bytes bytes, at most 60 MiB"
grep -q '^kind: ci$' "$work/stage/MANIFEST"
check $? "the manifest says kind: ci"
# (Python's tarfile, not tar -J: xz-utils may be missing; stage falls back to Python too)
python3 -c 'import sys, tarfile; print("\n".join(tarfile.open(sys.argv[1]).getnames()))' "$work/stage/bin.tar.xz" \
  >"$work/bin.list"
grep -qx 'bin/gc_cuda_check_all' "$work/bin.list"
check $? "bin.tar.xz holds gc_cuda_check_all"

expect_rc 0 "run --dry-run" "$script" run "$work/stage" "$work/out" --dry-run
report=$work/out/gpu-check-report.md
[ -s "$report" ] && [ -s "$work/out/gpu-check-log.txt" ]
check $? "the dry run wrote the report and the log"
for part in device runtime gradcheck parity infer generate profile bench train precision memcheck; do
  grep -q "^| $part | dry run |" "$report"
  check $? "the report's row for $part"
done
ms='(n/a|[0-9.]+ ms)'
line="^gpt2_124m (bf16|fp32) B=(8|16) T=1024: cannl $ms, torch\\.compile $ms, eager $ms, ratio (n/a|[0-9.]+)\$"
n=$(grep -cE "$line" "$report")
[ "$n" = 4 ]
check $? "the report has the four GPT-2 lines in the outside check's form ($n)"
grep -q 'mlp --selftest' "$work/out/gpu-check-log.txt"
check $? "the gradcheck part lists its jobs from gc_cuda_check_all --list"

# A program missing: its part is reported and the next ones still run.
mkdir -p "$work/stage2"
cp -r "$work/stage/MANIFEST" "$work/stage/refs" "$work/stage/data" "$work/stage2/"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$work/stage/bin.tar.xz" \
  "$work/stage2" && rm -f "$work/stage2/bin/gc_cuda_check_all"
expect_rc 1 "run --dry-run without gc_cuda_check_all fails" "$script" run "$work/stage2" "$work/out2" --dry-run
grep -q '^| gradcheck | FAIL' "$work/out2/gpu-check-report.md" &&
  grep -q '^| memcheck | dry run |' "$work/out2/gpu-check-report.md"
check $? "gradcheck reported failed, the parts after it still ran"
rm -rf "$work/stage2"

# The budget: with 5 s, no part starts.
expect_rc 1 "run --dry-run --budget 5 fails" "$script" run "$work/stage" "$work/out3" --dry-run --budget 5
grep -q '^| device | not run' "$work/out3/gpu-check-report.md"
check $? "with a 5 s budget the parts are reported as not run"

# The parts that compare, without a GPU: the C programs stand in for the CUDA ones (the same command
# line) in a staging with its programs unpacked; `run` (not a dry run) of parity, infer, generate and
# train passes, every difference 0; a trainer with another learning rate fails parity.
mkdir -p "$work/stage3/bin"
cp -r "$work/stage/MANIFEST" "$work/stage/refs" "$work/stage/data" "$work/stage3/"
for m in fashion_mlp gpt_tiny; do
  ln -s "$work/build/${m}_train" "$work/stage3/bin/${m}_cuda_train"
  ln -s "$work/build/${m}_infer" "$work/stage3/bin/${m}_cuda_infer"
done
expect_rc 0 "run --parts parity,infer,generate,train with the C programs as stand-ins" \
  "$script" run "$work/stage3" "$work/out5" --parts parity,infer,generate,train --budget 300
grep -q '^| train | pass |' "$work/out5/gpu-check-report.md" &&
  grep -qE '^  fashion_mlp_init \(fp32-sgd\): .*worst loss rel 0\.00e\+00' "$work/out5/gpu-check-report.md"
check $? "the report of the stand-ins: parts passed, no difference"
rm "$work/stage3/bin/fashion_mlp_cuda_train"
printf '#!/bin/sh\nexec "%s" "$@" --lr 0.101\n' "$work/build/fashion_mlp_train" \
  >"$work/stage3/bin/fashion_mlp_cuda_train"
chmod +x "$work/stage3/bin/fashion_mlp_cuda_train"
expect_rc 1 "run --parts parity with fashion_mlp at another learning rate fails" \
  "$script" run "$work/stage3" "$work/out6" --parts parity --budget 100
grep -q '^FAIL fashion_mlp: losses' "$work/out6/gpu-check-report.md"
check $? "the report says where: FAIL fashion_mlp: losses ..."
rm -rf "$work/stage3"

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
