#!/usr/bin/env bash
# scripts/gpu-check.sh — what a session does first when it is lent a GPU (DEVELOPERS.md): built and
# staged here, where there is no GPU, run there in one device call, its report committed here.
#
#   scripts/gpu-check.sh stage [--ci] [--stage DIR] [--build-dir DIR] [--generator CANNL] [--jobs N]
#       Here. Builds with nvcc for sm_90 (CANNL_CUDART=static: libcudart_static, cuBLAS shared, no MPI,
#       zlib static) what the check runs: the CUDA trainers and inference programs of the examples,
#       GPT-2 124M at batch <= 16 in fp32 and bf16, the gradient check of every gradcheck spec in one
#       program (gc_cuda_check_all), the CUDA runtime's tests; runs the C target's programs for the
#       references (scripts/gpu-check/refs.py make); stages the stripped programs, a Fashion-MNIST and
#       KJV subset, the references and a MANIFEST into DIR (default build/gpu-stage, under the
#       ignored build/): at most 60 MiB, checked. Prints the device call to make. --ci: a subset
#       (fashion_mlp, gpt_tiny, three gradcheck specs; no GPT-2, whose nvcc compile takes minutes),
#       what the ctest nvcc.gpu_check_stage stages. Build directory: build/gpu-sm90 (--ci:
#       build/gpu-sm90-ci); --generator: a built `cannl` to use instead of building one there.
#   scripts/gpu-check.sh run STAGE_DIR OUT_DIR [--dry-run] [--budget SECONDS] [--parts NAME,...]
#       There (the device machine: one GPU, the CUDA toolkit's shared cuBLAS, python3 with PyTorch).
#       Runs the parts below in order, each under `timeout` (its guard, or what is left of the budget,
#       default 470 s), writes ONE report, OUT_DIR/gpu-check-report.md, and the parts' whole output,
#       OUT_DIR/gpu-check-log.txt; exits 0 only when every part passed. A failed part is reported and
#       the next one runs; only `device` failing stops the run (no GPU, or a library missing).
#       --dry-run: checks the staging and lists what each part would run, without a GPU; the report
#       says so. --parts: only these parts (a second call for the ones that failed).
#   scripts/gpu-check.sh land OUT_DIR [--to DIR] [--allow-dry-run]
#       Here. Copies OUT_DIR/gpu-check-report.md to bench/gpu/DATE-COMMIT-DEVICE.md (e.g.
#       bench/gpu/2026-11-28-1a2b3c4-h200.md) for committing; a dry run's report only with
#       --allow-dry-run (the tests).
#
# The parts of `run` and their time guards (seconds):
#   device    20   nvidia-smi, nvcc and PyTorch versions, the cuBLAS found, every staged program's
#                  libraries resolved (ldd), a CUDA device usable (test_cuda_rt probe)
#   runtime   30   runtime.cuda_gpu and runtime.attention_cuda: the CUDA runtime's buffers, streams,
#                  events, and the attention kernels against the CPU ones
#   gradcheck 60   every gradcheck spec's gradients on its CUDA model (float64) against finite
#                  differences, 16 at a time (one a core), and the extra batch sizes and the harness's self-test
#   parity    90   C against CUDA: losses and state after N steps from the same seed (refs.py parity;
#                  fp32, tf32 and bf16 tolerances in refs.py)
#   infer     20   the CUDA inference program's outputs and test metrics against C's
#   generate  75   --generate at T = 0 against C's tokens (refs.py generate), tests/e2e/generate.py
#                  on the CUDA gpt_tiny (gpu.generate), and the KV-cache decode steps on the GPU against
#                  the full forward pass at every position (gpu.decode.*: tests/e2e/decode.c, 1e-4 in f32)
#   profile   40   the attention kernels, tiled fp32 against tensor cores, at GPT-2's shape
#                  (bench/gpu/attention_bench.cu); where GPT-2 124M's bf16 step goes (B=8, T=1024, 4 steps):
#                  device time per kernel and per kind (attention, cuBLAS, reductions, elementwise, copies),
#                  from a CUPTI injection library (scripts/gpu-check/kprof.c, built at staging with the
#                  toolkit's CUPTI, staged with it)
#   bench     240  GPT-2 124M's step, B=8 (then 16) x T=1024, fp32 and bf16: cannl against PyTorch
#                  eager and torch.compile (scripts/gpu-check/bench.py)
#   train     75   each example trains a few steps (scripts/gpu-check/smoke.py, tests/e2e/train.py)
#   precision 60   gpt_char with tf32 and bf16 products tracks fp32 over 300 steps (gpu.precision.*)
#   memcheck  45   compute-sanitizer on fashion_mlp's trainer (skipped where it does not run)
# shellcheck disable=SC2317 # (the part_* functions are called by name: _part)
set -uo pipefail
SELF=$(readlink -f "$0")
ROOT=$(cd "$(dirname "$SELF")/.." && pwd)
HELPERS=$ROOT/scripts/gpu-check
LIMIT_MIB=60
BUDGET=470
PARTS=(device:20 runtime:30 gradcheck:60 parity:90 infer:20 generate:75 profile:40 bench:240 train:75 precision:60
  memcheck:45)

die() {
  echo "gpu-check: $*" >&2
  exit 2
}

usage() {
  awk 'NR == 1 || /shellcheck/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$SELF"
  exit "${1:-0}"
}

# A python3 with NumPy (Debian's /usr/bin/python3 here, where python3 may be another one; the device's
# python3, which has PyTorch too, there).
pick_python() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' >/dev/null 2>&1; then
      command -v "$p"
      return 0
    fi
  done
  return 1
}

# ------------------------------------------------------------------------------------------ stage

# The programs the check runs, by target name: staged (CUDA), and run here for the references (C).
cuda_targets() {
  local ci=$1
  echo fashion_mlp_cuda_train fashion_mlp_cuda_infer gpt_tiny_cuda_train gpt_tiny_cuda_infer \
    gc_cuda_check_all test_cuda_rt
  [ "$ci" = 1 ] && return
  echo fashion_cnn_cuda_train fashion_einsum_cuda_train moons_mlp_cuda_train \
    gpu_gpt_tiny_v100_cuda_train gpu_gpt_tiny_v100_cuda_infer \
    gpt_char_cuda_train gpt_char_cuda_infer gpt_char_tf32_cuda_train gpt_char_bf16_cuda_train \
    gpu_gpt2_124m_cuda_train gpu_gpt2_124m_bf16_cuda_train test_attention_cuda
  decode_checks
  [ -f "$ROOT/specs/llama_char.cannl" ] && echo llama_char_cuda_train llama_char_cuda_infer
}
# gpu.decode.*'s programs (tests/gpu/CMakeLists.txt): decode = full forward on the GPU.
decode_checks() {
  local m
  for m in gpt_tiny rope_tiny decode_gqa decode_gqa_f64; do echo "gpu_decode_${m}_cuda_check"; done
  [ -f "$ROOT/specs/llama_char.cannl" ] && echo gpu_decode_llama_char_cuda_check
}
c_targets() {
  local ci=$1
  echo fashion_mlp_train fashion_mlp_infer gpt_tiny_train gpt_tiny_infer
  [ "$ci" = 1 ] && return
  echo fashion_cnn_train gpt_char_train gpt_char_infer gpu_gpt2_124m_b1_train
  [ -f "$ROOT/specs/llama_char.cannl" ] && echo llama_char_train
}
CI_GC_SPECS="mlp;conv2d;dropout"      # gc_cuda_check_all's specs under --ci (dropout: training mode)
CI_REF_CASES="fashion_mlp,fashion_mlp_init,gpt_tiny,infer"
# Libraries a staged program may need from the device machine: the C library, the C++ runtime, and
# cuBLAS from the CUDA toolkit there (everything else is linked statically).
ALLOWED_LIBS='^(libc|libm|libmvec|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux-x86-64|libcublas|libcublasLt)'
ALLOWED_LIBS+='\.so'

stage() {
  local ci=0 stage_dir=$ROOT/build/gpu-stage build="" generator="" jobs=2
  while [ $# -gt 0 ]; do
    case $1 in
      --ci) ci=1; shift ;;
      --stage) stage_dir=$2; shift 2 ;;
      --build-dir) build=$2; shift 2 ;;
      --generator) generator=$2; shift 2 ;;
      --jobs) jobs=$2; shift 2 ;;
      -h | --help) usage ;;
      *) die "stage: unknown argument '$1' (scripts/gpu-check.sh --help)" ;;
    esac
  done
  [ -n "$build" ] || build=$ROOT/build/gpu-sm90$([ $ci = 1 ] && echo -ci)
  local t0=$SECONDS py nvcc
  py=$(pick_python) || die "stage: no python3 with NumPy (Debian: python3-numpy)"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || die "stage: nvcc not found (the CUDA toolkit; /usr/local/cuda/bin)"
  [ -z "$generator" ] || [ -x "$generator" ] || die "stage: --generator $generator is not an executable"
  case $stage_dir in /*) ;; *) stage_dir=$PWD/$stage_dir ;; esac
  case $build in /*) ;; *) build=$PWD/$build ;; esac

  echo "== gpu-check stage: build $build, stage $stage_dir$([ $ci = 1 ] && echo ', --ci subset')"
  local cfg=(-S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCANNL_CUDART=static -DCANNL_MPI=OFF -DZLIB_USE_STATIC_LIBS=ON
    -DCANNL_TEST_SET=all -DCANNL_BUILD_TESTS=ON -DCANNL_BUILD_EXAMPLES=ON -DCANNL_SKIP_EXAMPLES=
    "-DCANNL_GPU_CHECK_GC_SPECS=$([ $ci = 1 ] && echo "$CI_GC_SPECS")" "-DCANNL_GENERATOR=$generator")
  cmake "${cfg[@]}" >"$build.configure.log" 2>&1 ||
    { tail -30 "$build.configure.log"; die "stage: cmake configure failed ($build.configure.log)"; }
  grep -q 'CANNL_CUDART:STRING=static' "$build/CMakeCache.txt" ||
    die "stage: $build is not configured with CANNL_CUDART=static"
  grep -q '^ZLIB_LIBRARY_RELEASE:FILEPATH=.*\.a$' "$build/CMakeCache.txt" ||
    echo "gpu-check: note: no static zlib (libz.a) found: the programs need the device's libz.so.1"
  local cuda c
  read -r -a cuda <<<"$(cuda_targets $ci | tr '\n' ' ')"
  read -r -a c <<<"$(c_targets $ci | tr '\n' ' ')"
  echo "== building ${#cuda[@]} CUDA and ${#c[@]} C programs (-j$jobs)"
  local tb=$SECONDS
  cmake --build "$build" -j "$jobs" --target "${cuda[@]}" "${c[@]}" >"$build.build.log" 2>&1 ||
    { tail -40 "$build.build.log"; die "stage: the build failed ($build.build.log)"; }
  local build_s=$((SECONDS - tb))

  # (replaced only when it is an earlier staging, or empty)
  if [ -e "$stage_dir" ] && [ ! -f "$stage_dir/MANIFEST" ] && [ -n "$(ls -A "$stage_dir" 2>/dev/null)" ]; then
    die "stage: $stage_dir exists and is not a staging (no MANIFEST): not replacing it"
  fi
  rm -rf "${stage_dir:?}"
  mkdir -p "$stage_dir/bin" "$stage_dir/cards" "$stage_dir/data" "$stage_dir/refs" ||
    die "stage: cannot create $stage_dir"
  local t f bad=""
  for t in "${cuda[@]}"; do
    f=$(find "$build" -maxdepth 3 -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] || die "stage: $t was built but is not found under $build"
    strip -o "$stage_dir/bin/$t" "$f" || die "stage: strip $f failed"
    # Everything but the C library, the C++ runtime and cuBLAS must be linked in.
    local lib
    for lib in $(readelf -d "$stage_dir/bin/$t" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'); do
      [[ $lib =~ $ALLOWED_LIBS ]] || bad+=" $t:$lib"
    done
  done
  [ -z "$bad" ] || die "stage: programs need libraries the device machine may lack:$bad"
  for t in gpu_gpt2_124m_cuda gpu_gpt2_124m_bf16_cuda; do
    f=$(find "$build/tests/gpu/cannl/$t" -maxdepth 1 -name 'gpt2_124m.json' 2>/dev/null | head -1)
    [ -z "$f" ] || cp "$f" "$stage_dir/cards/$t.json"
  done

  # The profiler (part profile): kprof.c against the toolkit's CUPTI, staged with its libcupti.
  mkdir -p "$stage_dir/prof"
  local cuda_root cupti
  cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  cupti=$(find "$cuda_root" "$cuda_root/extras/CUPTI" -maxdepth 3 -name 'libcupti.so.[0-9]*' 2>/dev/null |
    sort | head -1)
  if [ -n "$cupti" ] && [ -f "$cuda_root/include/cupti.h" ]; then
    # shellcheck disable=SC2016 # ($ORIGIN: the loader's, not the shell's)
    cc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC "$HELPERS/kprof.c" -o "$stage_dir/prof/libkprof.so" \
      -I "$cuda_root/include" "$cupti" -Wl,-rpath,'$ORIGIN' || die "stage: building kprof.c failed"
    cp "$cupti" "$stage_dir/prof/" || die "stage: copying $cupti failed"
  else
    echo "gpu-check: note: no CUPTI in $cuda_root: the profile part will be skipped"
  fi
  # ... and the attention kernels' timing (bench/gpu/attention_bench.cu: tiled fp32 against tensor cores).
  "$nvcc" -std=c++17 -O3 -gencode arch=compute_90,code=sm_90 -Werror all-warnings -Xcompiler=-Wall,-Wextra \
    -I "$ROOT/runtime-lib" -I "$ROOT/runtime-lib/cuda" "$ROOT/bench/gpu/attention_bench.cu" \
    -o "$stage_dir/prof/attention_bench" || die "stage: building bench/gpu/attention_bench.cu failed"
  strip "$stage_dir/prof/attention_bench"

  echo "== data"
  "$py" "$HELPERS/data.py" fashion /usr/share/datasets/fashion-mnist "$stage_dir/data/fashion" ||
    die "stage: Fashion-MNIST (/usr/share/datasets/fashion-mnist: scripts/install-deps.sh --data)"
  if [ ! -s "$build/kjv/train.txt" ]; then
    "$ROOT/scripts/kjv-data.sh" "$build/kjv" || die "stage: the KJV text (scripts/kjv-data.sh)"
  fi
  "$py" "$HELPERS/data.py" kjv "$build/kjv" "$stage_dir/data/kjv" || die "stage: the KJV subset"

  echo "== the C target's references (scripts/gpu-check/refs.py make)"
  local tr=$SECONDS only=()
  [ $ci = 1 ] && only=(--only "$CI_REF_CASES")
  "$py" "$HELPERS/refs.py" make --stage "$stage_dir" --build "$build" --work "$build/gpu-check-refs" "${only[@]}" ||
    die "stage: the references failed"
  local refs_s=$((SECONDS - tr))

  # The manifest: what was built, from which commit, for what.
  local commit dirty="" os cublas
  os=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null)
  cublas=$(readelf -d "$stage_dir/bin/fashion_mlp_cuda_train" | sed -n 's/.*NEEDED.*\[\(libcublas[^]]*\)\].*/\1/p' |
    paste -sd ' ')
  commit=$(git -C "$ROOT" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
  [ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty="-dirty"
  {
    echo "gpu-check staging"
    echo "commit: $commit$dirty"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kind: $([ $ci = 1 ] && echo ci || echo full)"
    echo "host: $os, $(uname -m), $(nproc) cores"
    echo "nvcc: $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_90 only" \
      "(CMAKE_CUDA_ARCHITECTURES=90)"
    echo "linking: libcudart_static, zlib static, no MPI; shared: cuBLAS ($cublas), libstdc++, libc"
    echo "build: $build_s s, references: $refs_s s, total: $((SECONDS - t0)) s"
    echo "programs:"
    (cd "$stage_dir/bin" && for f in *; do printf '  %-34s %9d bytes\n' "$f" "$(stat -c %s "$f")"; done)
    echo "references:"
    (cd "$stage_dir/refs" && find . -type f | sort | sed 's|^\./|  |')
    echo "data:"
    (cd "$stage_dir/data" && find . -type f | sort | while read -r f; do
      printf '  %-34s %9d bytes\n' "${f#./}" "$(stat -c %s "$f")"
    done)
    echo "not staged: $([ $ci = 1 ] && echo "the --ci subset: only ${cuda[*]}" || echo "nothing left out")"
  } >"$stage_dir/MANIFEST"

  # The programs, packed: xz finds the CUDA runtime, cannl's runtime and each model's code repeated across
  # them (48 MB of stripped programs become about 5); `run` unpacks them.
  # (xz, or Python's lzma where xz-utils is not installed: a minimal Debian lacks it)
  if command -v xz >/dev/null 2>&1; then
    tar -C "$stage_dir" -cf - bin | xz -6 -T "$jobs" >"$stage_dir/bin.tar.xz"
  else
    "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "w:xz").add(sys.argv[2], "bin")' \
      "$stage_dir/bin.tar.xz" "$stage_dir/bin"
  fi || die "stage: packing the programs failed"
  rm -rf "${stage_dir:?}/bin"
  echo "packed: bin.tar.xz, $(stat -c %s "$stage_dir/bin.tar.xz") bytes (run unpacks it)" >>"$stage_dir/MANIFEST"

  # Size: at most LIMIT_MIB, and with the working tree that travels too, under the device's 64 MiB.
  local bytes tree
  bytes=$(du -sb "$stage_dir" | cut -f1)
  tree=$( (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) || echo 0)
  echo "size: $bytes bytes ($((bytes / 1048576)) MiB; limit $LIMIT_MIB MiB); the working tree besides: $tree bytes" \
    >>"$stage_dir/MANIFEST"
  if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
    du -sb "$stage_dir"/* | sort -n
    die "stage: $stage_dir is $((bytes / 1048576)) MiB, over the $LIMIT_MIB MiB limit"
  fi
  if [ $((bytes + tree)) -gt $((63 * 1048576)) ]; then
    die "stage: $stage_dir ($bytes bytes) and the working tree ($tree bytes) exceed the 63 MiB that may travel"
  fi
  cat "$stage_dir/MANIFEST"
  local rel=${stage_dir#"$ROOT"/}
  if [ "$rel" = "$stage_dir" ]; then
    echo "gpu-check: note: $stage_dir is outside the repository: only a staging inside it (and ignored by git, as"
    echo "  build/ is) can be carried to the device"
  elif ! git -C "$ROOT" check-ignore -q "$rel"; then
    echo "gpu-check: note: $rel is not ignored by git: it would travel as part of the working tree"
  fi
  echo
  echo "== staged in $((SECONDS - t0)) s: $rel ($((bytes / 1048576)) MiB). The device call (the run tool, one call):"
  echo "   run(command='bash scripts/gpu-check.sh run $rel \"\$OUT\"', carry=[\"$rel\"], timeout_s=540)"
  echo "   (at most 470 s of parts; rerun failed ones only at once, while the machine is warm:"
  echo "   --parts a,b --budget S, timeout_s S + 60; else give_back)"
  echo "Then, here: scripts/gpu-check.sh land <the folder its files came back to>, and commit bench/gpu/*.md."
}

# -------------------------------------------------------------------------------------------- run

# The directory with the cuBLAS the staged programs need: beside the device's nvcc, the usual CUDA
# directories, then the NVIDIA wheels PyTorch brings. Prints it (nothing when the loader finds it).
find_cublas() {
  local want=$1 d cands=() sp
  if grep -q "$want" <<<"$(ldconfig -p 2>/dev/null)"; then  # (not a pipe: grep -q would cut ldconfig off)
    return 0
  fi
  if command -v nvcc >/dev/null 2>&1; then
    d=$(dirname "$(readlink -f "$(command -v nvcc)")")/..
    cands+=("$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib")
  fi
  cands+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib)
  for d in "${cands[@]}"; do
    [ -e "$d/$want" ] && { readlink -f "$d"; return 0; }
  done
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    2>/dev/null); do
    d=$(find "$sp/nvidia" -name "$want" -printf '%h\n' 2>/dev/null | head -1)
    [ -n "$d" ] && { echo "$d"; return 0; }
  done
  return 1
}

# x CMD...: runs CMD, or under --dry-run prints it (and fails when CMD is a staged program that is missing).
x() {
  if [ "$DRY" = 1 ]; then
    echo "would run: $*"
    case $1 in "$BIN"/*) [ -x "$1" ] || { echo "FAIL: $(basename "$1") is not staged"; return 1; } ;; esac
    return 0
  fi
  "$@"
}

part_device() {
  local n bad=0 f
  if [ "$DRY" = 1 ]; then
    echo "would run: nvidia-smi; nvcc --version; python3 -c 'import torch'; \$BIN/test_cuda_rt probe"
  else
    nvidia-smi || { echo "FAIL device: nvidia-smi failed: no GPU driver here"; return 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_cap --format=csv || true
    { command -v nvcc && nvcc --version | tail -2; } || echo "no nvcc on the PATH"
    "$PY" -c 'import sys, torch; c = torch.cuda.is_available()
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if c else None)' ||
      echo "PyTorch not importable: the bench part will time cannl only"
  fi
  echo "cuBLAS: ${CUBLAS_DIR:-found by the loader}"
  for f in "$BIN"/*; do
    n=$(ldd "$f" 2>&1 | grep -c 'not found')
    if [ "$n" != 0 ]; then
      echo "FAIL device: $(basename "$f") misses libraries:"
      ldd "$f" | grep 'not found'
      bad=1
    fi
  done
  [ "$bad" = 0 ] || return 1
  echo "every staged program's libraries resolve"
  x "$BIN/test_cuda_rt" probe || { echo "FAIL device: test_cuda_rt probe: no usable CUDA device"; return 1; }
}

part_runtime() {
  local rc=0
  x "$BIN/test_cuda_rt" gpu || { echo "FAIL runtime.cuda_gpu"; rc=1; }
  if [ -x "$BIN/test_attention_cuda" ]; then
    x "$BIN/test_attention_cuda" || { echo "FAIL runtime.attention_cuda"; rc=1; }
  else
    echo "skip runtime.attention_cuda: not staged"
  fi
  return "$rc"
}

part_gradcheck() {
  local gc=$BIN/gc_cuda_check_all dir=$WORK/gradcheck
  mkdir -p "$dir"
  [ -x "$gc" ] || { echo "FAIL gradcheck: gc_cuda_check_all not staged"; return 1; }
  "$gc" --list >"$dir/specs" || { echo "FAIL gradcheck: gc_cuda_check_all --list"; return 1; }
  {
    cat "$dir/specs"
    grep -qx batch_mean "$dir/specs" && printf 'batch_mean --batch 2\nbatch_mean --batch 8\n'
    grep -qx mlp "$dir/specs" && printf 'mlp --batch 1\nmlp --selftest\n'
  } >"$dir/jobs"
  echo "$(wc -l <"$dir/jobs") checks ($(wc -l <"$dir/specs") specs), 16 at a time"
  if [ "$DRY" = 1 ]; then
    echo "would run: gc_cuda_check_all SPEC [ARGS] for each line of: $(tr '\n' ',' <"$dir/jobs")"
    return 0
  fi
  # Each job line: SPEC [ARGS]; its output in $dir/<SPEC_ARGS>.log; one result line "RC SPEC ARGS" (124: it
  # hung for 40 s), also printed as it comes (a part cut off by its guard still shows which ran).
  # shellcheck disable=SC2016 # (expanded by the inner bash)
  GC_BIN=$gc GC_DIR=$dir xargs -P 16 -L 1 bash -c \
    'log=$GC_DIR/$(printf "%s_" "$0" "$@" | tr -c "A-Za-z0-9_" "_").log
     timeout 40 "$GC_BIN" "$0" "$@" >"$log" 2>&1; echo "$? $0 $*"' \
    <"$dir/jobs" 2>&1 | tee "$dir/results"
  local failed
  failed=$(awk '$1 != 0' "$dir/results")
  echo "$(awk '$1 == 0' "$dir/results" | wc -l) of $(wc -l <"$dir/jobs") passed"
  if [ -n "$failed" ]; then
    echo "$failed" | while read -r rc spec args; do
      echo "FAIL gradcheck $spec $args (exit $rc):"
      # shellcheck disable=SC2086 # (the arguments, split as the job line had them)
      tail -5 "$dir/$(printf '%s_' "$spec" $args | tr -c 'A-Za-z0-9_' '_').log" | sed 's/^/    /'
    done
    return 1
  fi
  [ "$(wc -l <"$dir/results")" = "$(wc -l <"$dir/jobs")" ] || { echo "FAIL gradcheck: results missing"; return 1; }
}

part_parity() {
  if [ "$DRY" = 1 ]; then "$PY" "$HELPERS/refs.py" list --stage "$STAGE" --bin "$BIN"; return; fi
  "$PY" "$HELPERS/refs.py" parity --stage "$STAGE" --bin "$BIN" --work "$WORK/parity"
}

part_infer() {
  if [ "$DRY" = 1 ]; then "$PY" "$HELPERS/refs.py" list --stage "$STAGE" --bin "$BIN" | grep '^infer'; return 0; fi
  "$PY" "$HELPERS/refs.py" infer --stage "$STAGE" --bin "$BIN" --work "$WORK/infer"
}

# decode = full forward at every position, after prefills and past ctx (tests/e2e/decode.c on the GPU)
run_decode_checks() {
  local t name rc=0
  for t in $(decode_checks); do
    name=${t#gpu_decode_}
    name=${name%_cuda_check}
    if [ ! -x "$BIN/$t" ]; then
      echo "skip gpu.decode.$name: not staged"
    elif [ "$DRY" = 1 ]; then
      echo "would run: $t"
    else
      timeout 30 "$BIN/$t" || { echo "FAIL gpu.decode.$name"; rc=1; }
    fi
  done
  return "$rc"
}

part_generate() {
  local rc=0
  if [ "$DRY" = 1 ]; then
    "$PY" "$HELPERS/refs.py" list --stage "$STAGE" --bin "$BIN" | grep '^generate'
    echo "would run: tests/e2e/generate.py on gpt_tiny_cuda_* and gpu_gpt_tiny_v100_cuda_*"
    run_decode_checks
    return 0
  fi
  "$PY" "$HELPERS/refs.py" generate --stage "$STAGE" --bin "$BIN" --work "$WORK/generate_refs" || rc=1
  if [ -x "$BIN/gpu_gpt_tiny_v100_cuda_infer" ]; then
    "$PY" "$ROOT/tests/e2e/generate.py" "$WORK/generate" "$BIN/gpt_tiny_cuda_train" "$BIN/gpt_tiny_cuda_infer" \
      "$BIN/gpu_gpt_tiny_v100_cuda_train" "$BIN/gpu_gpt_tiny_v100_cuda_infer" || { echo "FAIL gpu.generate"; rc=1; }
  else
    echo "skip gpu.generate: gpu_gpt_tiny_v100_cuda_* not staged"
  fi
  run_decode_checks || rc=1
  return "$rc"
}

part_bench() {
  local dry=()
  [ "$DRY" = 1 ] && dry=(--dry-run)
  "$PY" "$HELPERS/bench.py" --stage "$STAGE" --bin "$BIN" --work "$WORK/bench" --deadline "$PART_DEADLINE" \
    --lines "$WORK/bench.lines" --python "$PY" "${dry[@]}"
}

part_train() {
  local rc=0 m
  if [ "$DRY" = 1 ]; then
    "$PY" "$HELPERS/smoke.py" --stage "$STAGE" --bin "$BIN" --list
    echo "would run: tests/e2e/train.py --case fashion_cnn, fashion_einsum, moons_mlp on their CUDA trainers"
    return 0
  fi
  "$PY" "$HELPERS/smoke.py" --stage "$STAGE" --bin "$BIN" --work "$WORK/train" || rc=1
  for m in fashion_cnn fashion_einsum moons_mlp; do
    if [ -x "$BIN/${m}_cuda_train" ]; then
      "$PY" "$ROOT/tests/e2e/train.py" --case "$m" --trainer "$BIN/${m}_cuda_train" --fashion "$STAGE/data/fashion" \
        --work "$WORK/train_$m" || { echo "FAIL gpu.train.$m"; rc=1; }
    else
      echo "skip gpu.train.$m: not staged"
    fi
  done
  return "$rc"
}

part_precision() {
  local rc=0 p
  for p in tf32 bf16; do
    if [ ! -x "$BIN/gpt_char_${p}_cuda_train" ]; then
      echo "skip gpu.precision.$p: not staged"
      continue
    fi
    x "$PY" "$ROOT/tests/gpu/precision_track.py" --fp32 "$BIN/gpt_char_cuda_train" \
      --other "$BIN/gpt_char_${p}_cuda_train" \
      --precision "$p" --text-dir "$ROOT" --work "$WORK/precision_$p" || { echo "FAIL gpu.precision.$p"; rc=1; }
  done
  return "$rc"
}

part_memcheck() {
  local cs f
  cs=$(command -v compute-sanitizer)
  for f in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -n "$cs" ] || [ ! -x "$f" ] || cs=$f
  done
  [ -n "$cs" ] || { echo "skip memcheck: no compute-sanitizer"; return 0; }
  [ "$DRY" = 1 ] && { echo "would run: $cs --tool memcheck fashion_mlp_cuda_train --steps 3"; return 0; }
  f=$STAGE/data/fashion
  "$cs" --tool memcheck --error-exitcode 1 --leak-check full "$BIN/fashion_mlp_cuda_train" \
    "--data=image=$f/train-images-idx3-ubyte.gz" "--data=label=$f/train-labels-idx1-ubyte.gz" \
    "--test=image=$f/t10k-images-idx3-ubyte.gz" "--test=label=$f/t10k-labels-idx1-ubyte.gz" \
    --steps 3 --batch 100 --quiet --checkpoint "$WORK/memcheck.safetensors" >"$WORK/memcheck.out" 2>&1
  local rc=$?
  tail -20 "$WORK/memcheck.out"
  if [ "$rc" != 0 ] && grep -q 'Device not supported' "$WORK/memcheck.out"; then
    echo "skip memcheck: compute-sanitizer does not support this device here (gVisor?)"
    return 0
  fi
  return "$rc"
}

part_profile() {
  local trainer=$BIN/gpu_gpt2_124m_bf16_cuda_train steps=4 prof=$WORK/profile.txt rc=0
  [ -x "$trainer" ] || trainer=$BIN/gpu_gpt2_124m_cuda_train
  if [ -x "$STAGE/prof/attention_bench" ]; then
    x timeout 60 "$STAGE/prof/attention_bench" | sed 's/^/  /' ||
      { echo "FAIL profile: attention_bench"; rc=1; }
  fi
  [ -f "$STAGE/prof/libkprof.so" ] || { echo "skip profile: kprof not staged (no CUPTI at staging)"; return "$rc"; }
  [ -x "$trainer" ] || { echo "skip profile: no gpt2_124m trainer staged"; return "$rc"; }
  if [ "$DRY" = 1 ]; then
    echo "would run: CUDA_INJECTION64_PATH=prof/libkprof.so $(basename "$trainer") --steps $steps --batch 8"
    return "$rc"
  fi
  CUDA_INJECTION64_PATH=$STAGE/prof/libkprof.so KPROF_OUT=$prof \
    "$trainer" --stream "tokens,next=$STAGE/data/kjv/train.bin" --steps "$steps" --batch 8 --seed 1 --quiet \
    --log-every 0 >"$WORK/profile.out" 2>&1 ||
    { tail -5 "$WORK/profile.out"; echo "FAIL profile: the trainer"; return 1; }
  [ -s "$prof" ] || { echo "FAIL profile: kprof wrote nothing (CUDA_INJECTION64_PATH not honoured?)"; return 1; }
  cat "$prof"
  # Per step (start-up kernels, the params' upload among them, are counted in too), by kind, then the
  # heaviest kernels.
  echo "  $(basename "$trainer"), B=8 T=1024, $steps steps: device ms a step by kind"
  awk -v s="$steps" 'NR > 2 {
      name = substr($0, index($0, $5))
      if (name ~ /cannl_attn/) k = "attention"
      else if (name ~ /gemm|xmma|cutlass|splitK|gemv|dot_kernel|cublas/) k = "cuBLAS"
      else if (name ~ /^_Z[0-9]+sum_/) k = "reductions (sum_*)"
      else if (name ~ /^_Z[0-9]+set_/) k = "elementwise (set_*)"
      else if (name ~ /^\[mem/) k = "copies and fills"
      else k = "other kernels"
      ms[k] += $2 / s; all += $2 / s
    }
    END {
      for (k in ms) printf "  %9.2f ms %5.1f%%  %s\n", ms[k], 100 * ms[k] / all, k
      printf "  %9.2f ms %5.1f%%  %s\n", all, 100, "(all)"
    }' "$prof" | sort -nr
  echo "  the heaviest kernels (ms a step, launches a step, name):"
  awk -v s="$steps" 'NR > 2 && NR <= 22 {
      printf "  %9.3f %6.1f  %s\n", $2 / s, $1 / s, substr(substr($0, index($0, $5)), 1, 150)
    }' "$prof"
  return "$rc"
}

# One part, in a process of its own under timeout; records STATUS_name, TIME_name.
declare -A STATUS TIME GUARD
run_part() {
  local name=$1 guard=$2 left t0 rc t
  left=$((DEADLINE - $(date +%s)))
  GUARD[$name]=$guard
  if [ "$left" -lt 10 ]; then
    STATUS[$name]="not run (${left} s of the budget left)"
    TIME[$name]=0
    echo "== $name: not run, the budget is spent" | tee -a "$LOG"
    return
  fi
  t=$((guard < left ? guard : left))
  [ "$DRY" = 1 ] && t=$guard
  echo "== $name (guard $t s)" | tee -a "$LOG"
  t0=$SECONDS
  PART_DEADLINE=$(($(date +%s) + t - 5)) timeout -k 10 "$t" bash "$SELF" _part "$name" >"$WORK/$name.log" 2>&1
  rc=$?
  TIME[$name]=$((SECONDS - t0))
  cat "$WORK/$name.log" >>"$LOG"
  case $rc in
    0) STATUS[$name]=$([ "$DRY" = 1 ] && echo "dry run" || echo pass) ;;
    124 | 137) STATUS[$name]="TIMEOUT after $t s" ;;
    *) STATUS[$name]="FAIL (exit $rc)" ;;
  esac
  echo "-- $name: ${STATUS[$name]} (${TIME[$name]} s)" | tee -a "$LOG"
  if [ $rc != 0 ]; then  # (where: the part's failures, then its last lines)
    grep -E '^(FAIL|skip)' "$WORK/$name.log" | head -12 | cut -c1-240
    tail -5 "$WORK/$name.log" | cut -c1-240 | sed 's/^/   | /'
  fi
}

manifest_field() {
  sed -n "s/^$1: //p" "$STAGE/MANIFEST" | head -1
}

write_report() {
  local report=$1 total=$2 result=$3 device slug name
  device=$(cat "$WORK/device.name" 2>/dev/null ||
    if [ "$DRY" = 1 ]; then echo "no device (dry run)"; else echo "no device (nvidia-smi found none)"; fi)
  slug=$(echo "$device" | tr '[:upper:]' '[:lower:]' | sed 's/nvidia//; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
  [ -n "$slug" ] || slug=unknown
  [ "$DRY" = 1 ] && slug="dry-run"
  {
    echo "<!-- gpu-check date=$(date -u +%Y-%m-%d) commit=$(manifest_field commit) device=$slug -->"
    echo "# gpu-check report: $(manifest_field commit) on $device"
    echo
    echo "- result: **$result**"
    echo "- run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $total s of a $BUDGET s budget$([ "$DRY" = 1 ] &&
      echo ', DRY RUN (nothing ran on a GPU)')"
    echo "- staging: $(manifest_field kind), commit $(manifest_field commit), staged $(manifest_field date) on" \
      "$(manifest_field host); $(manifest_field nvcc); $(manifest_field linking)"
    echo "- device: $device; $(cat "$WORK/device.info" 2>/dev/null || echo 'not read')"
    echo "- cuBLAS: ${CUBLAS_DIR:-found by the loader}; python: $PY"
    echo
    echo "| part | status | time | guard |"
    echo "| --- | --- | --- | --- |"
    for name in "${ORDER[@]}"; do
      echo "| $name | ${STATUS[$name]:-not run} | ${TIME[$name]:-0} s | ${GUARD[$name]:-} s |"
    done
    echo
    echo "## GPT-2 124M training step"
    echo
    echo "B sequences of T = 1024 tokens a step; cannl's trainers (fp32: CUBLAS_COMPUTE_32F products; bf16:"
    echo "CUBLAS_COMPUTE_32F_FAST_16BF products, fp32 elsewhere) against PyTorch eager and torch.compile (default"
    echo "mode) of the same model, AdamW and clipping (bf16: autocast; fp32: TF32 off), median over runs of the"
    echo "mean warm step (cannl: two runs of S1 and S2 steps, start-up cancelled; PyTorch: S2 - S1 steps after"
    echo "S1 warm-up steps, compilation among those). Peak device memory: cannl from nvidia-smi over the idle"
    echo "baseline (the whole process), PyTorch's max_memory_allocated."
    echo
    echo '```'
    if [ -s "$WORK/bench.lines" ]; then cat "$WORK/bench.lines"; else echo "(the bench part wrote nothing)"; fi
    echo '```'
    echo
    echo "## Parts"
    for name in "${ORDER[@]}"; do
      [ -f "$WORK/$name.log" ] || continue
      # (bench: above, unless it did not pass)
      if [ "$name" = bench ] && [[ ${STATUS[$name]:-} == pass || ${STATUS[$name]:-} == "dry run" ]]; then continue; fi
      echo
      echo "### $name: ${STATUS[$name]:-not run}"
      echo
      echo '```'
      if [ "$name" = device ]; then  # all of it: nvidia-smi, the versions, the libraries
        head -60 "$WORK/$name.log" | cut -c1-300
        echo '```'
        continue
      fi
      # The summary lines of the part (its whole output is in gpu-check-log.txt).
      local summary='^(pass|FAIL|skip|ok|PASS|  |[a-z0-9_. ]+: [0-9]+ passed|[0-9]+ of [0-9]+ passed|-- |would run'
      summary+='|(parity|infer|generate|train) [a-z0-9_]+: )'
      grep -E "$summary" "$WORK/$name.log" | head -60 | cut -c1-300
      if [[ ${STATUS[$name]:-} != pass && ${STATUS[$name]:-} != "dry run" ]]; then
        echo "... last lines:"
        tail -15 "$WORK/$name.log" | cut -c1-300
      fi
      echo '```'
    done
    echo
    echo "## Staging manifest"
    echo
    echo '```'
    cat "$STAGE/MANIFEST"
    echo '```'
  } >"$report"
}

run() {
  local stage="" out="" budget=$BUDGET parts_only=""
  DRY=0
  while [ $# -gt 0 ]; do
    case $1 in
      --dry-run) DRY=1; shift ;;
      --budget) budget=$2; shift 2 ;;
      --parts) parts_only=,$2,; shift 2 ;;
      -h | --help) usage ;;
      -*) die "run: unknown option '$1'" ;;
      *)
        if [ -z "$stage" ]; then stage=$1; elif [ -z "$out" ]; then out=$1; else die "run: too many arguments"; fi
        shift ;;
    esac
  done
  if [ -z "$stage" ] || [ -z "$out" ]; then
    die "run: usage: scripts/gpu-check.sh run STAGE_DIR OUT_DIR [--dry-run] [--budget S]"
  fi
  [[ $budget =~ ^[0-9]+$ ]] || die "run: --budget $budget: expected seconds"
  local p known=,
  for p in "${PARTS[@]}"; do known+=${p%%:*},; done
  for p in ${parts_only//,/ }; do
    [[ $known == *",$p,"* ]] || die "run: --parts: no part '$p' (the parts: ${known:1:-1})"
  done
  BUDGET=$budget
  STAGE=$(readlink -f "$stage")
  [ -f "$STAGE/MANIFEST" ] || die "run: $stage has no MANIFEST: stage it first (scripts/gpu-check.sh stage)"
  mkdir -p "$out" || die "run: cannot create $out"
  OUT=$(readlink -f "$out")
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
  BIN=$STAGE/bin
  if [ ! -d "$BIN" ]; then  # the packed programs (stage)
    BIN=$WORK/bin
    [ -f "$STAGE/bin.tar.xz" ] || die "run: $stage has neither bin/ nor bin.tar.xz"
    tar -C "$WORK" -xJf "$STAGE/bin.tar.xz" 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$STAGE/bin.tar.xz" "$WORK" ||
      die "run: cannot unpack $STAGE/bin.tar.xz"
  fi
  LOG=$OUT/gpu-check-log.txt
  DEADLINE=$(($(date +%s) + BUDGET))
  : >"$LOG"
  PY=$(pick_python) || PY=python3
  local want
  want=$(readelf -d "$BIN/fashion_mlp_cuda_train" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(libcublas\.so[^]]*\)\].*/\1/p')
  CUBLAS_DIR=$(find_cublas "${want:-libcublas.so.13}") || CUBLAS_DIR="NOT FOUND (${want:-libcublas.so.13})"
  if [ -d "$CUBLAS_DIR" ]; then
    export LD_LIBRARY_PATH=$CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  export STAGE OUT BIN WORK PY DRY CUBLAS_DIR HELPERS ROOT
  export PYTHONUNBUFFERED=1
  echo "gpu-check run: stage $STAGE (commit $(manifest_field commit), $(manifest_field kind)), out $OUT," \
    "work $WORK, budget $BUDGET s$([ "$DRY" = 1 ] && echo ', DRY RUN')" | tee -a "$LOG"
  if [ "$DRY" != 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
    timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >"$WORK/device.name"
    timeout 20 nvidia-smi --query-gpu=driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null |
      head -1 | sed 's/^/driver, memory, compute capability: /' >"$WORK/device.info"
    [ -s "$WORK/device.name" ] || rm -f "$WORK/device.name"
  fi
  local t0=$SECONDS name guard failed=0 ran=0
  ORDER=()
  for p in "${PARTS[@]}"; do
    name=${p%%:*}
    guard=${p#*:}
    [ -z "$parts_only" ] || [[ $parts_only == *",$name,"* ]] || continue
    ORDER+=("$name")
    ran=$((ran + 1))
    run_part "$name" "$guard"
    [ "${STATUS[$name]}" = pass ] || [ "${STATUS[$name]}" = "dry run" ] || failed=$((failed + 1))
    if [ "$name" = device ] && [ "${STATUS[$name]}" != pass ] && [ "${STATUS[$name]}" != "dry run" ]; then
      echo "gpu-check: the device part failed: nothing else can run (see above)" | tee -a "$LOG"
      break
    fi
  done
  local result
  if [ "$DRY" = 1 ] && [ $failed = 0 ]; then
    result="dry run of a $(manifest_field kind) staging: nothing ran on a GPU"
  elif [ "$DRY" = 1 ]; then
    result="dry run of a $(manifest_field kind) staging: $failed of $ran parts would not run"
  elif [ $failed = 0 ]; then
    result="PASS: every part passed"
  else
    result="FAIL: $failed of $ran parts did not pass"
  fi
  write_report "$OUT/gpu-check-report.md" $((SECONDS - t0)) "$result"
  # (the device tool brings back files of at most 16 MiB)
  if [ "$(stat -c %s "$LOG")" -gt $((15 * 1048576)) ]; then
    truncate -s 15M "$LOG" && echo "... (gpu-check: the log was cut at 15 MiB)" >>"$LOG"
  fi
  echo "== $result ($((SECONDS - t0)) s); report: $OUT/gpu-check-report.md"
  [ -s "$WORK/bench.lines" ] && grep '^gpt2_124m' "$WORK/bench.lines"
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
  [ $failed = 0 ]
}

# ------------------------------------------------------------------------------------------- land

land() {
  local out="" to=$ROOT/bench/gpu allow_dry=0
  while [ $# -gt 0 ]; do
    case $1 in
      --to) to=$2; shift 2 ;;
      --allow-dry-run) allow_dry=1; shift ;;
      -h | --help) usage ;;
      -*) die "land: unknown option '$1'" ;;
      *) [ -z "$out" ] || die "land: too many arguments"; out=$1; shift ;;
    esac
  done
  [ -n "$out" ] || die "land: usage: scripts/gpu-check.sh land OUT_DIR [--to DIR]"
  local report=$out/gpu-check-report.md head date commit device dest
  [ -f "$report" ] || die "land: no $report"
  head=$(head -1 "$report")
  [[ $head =~ ^'<!-- gpu-check date='([0-9-]+)' commit='([^ ]+)' device='([a-z0-9-]+)' -->'$ ]] ||
    die "land: $report does not start with gpu-check's header line"
  date=${BASH_REMATCH[1]} commit=${BASH_REMATCH[2]} device=${BASH_REMATCH[3]}
  if [ "$device" = dry-run ] && [ $allow_dry = 0 ]; then
    die "land: $report is a dry run's: nothing to commit"
  fi
  mkdir -p "$to" || die "land: cannot create $to"
  dest=$to/$date-$commit-$device.md
  [ -e "$dest" ] && echo "gpu-check: replacing $dest"
  cp "$report" "$dest" || die "land: cannot write $dest"
  [ -f "$out/gpu-check-log.txt" ] && echo "gpu-check: the whole log stays in $out/gpu-check-log.txt (not committed)"
  echo "gpu-check: landed $dest; commit it: git add $dest && git commit -m 'bench/gpu: gpu-check on $device at $commit'"
}

# ------------------------------------------------------------------------------------------- main

main() {
  case ${1:-} in
    stage) shift; stage "$@" ;;
    run) shift; run "$@" ;;
    land) shift; land "$@" ;;
    _part)  # internal: one part of run, in its own process (run_part)
      declare -F "part_$2" >/dev/null || die "no part $2"
      "part_$2" ;;
    -h | --help | help) usage 0 ;;
    *) usage 2 >&2 ;;
  esac
}
# (one line: bash has read the whole script before running it, so editing it meanwhile is safe)
main "$@"; exit $?
