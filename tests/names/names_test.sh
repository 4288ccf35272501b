#!/usr/bin/env bash
# names_test.sh — every name the spec language accepts generates C (and CUDA) that compiles
# (issue 13, item 9), or is refused at the spec with a message where the public C API name
# itself cannot be valid C.
#   names_test.sh CANNL CC RUNTIME_DIR RT_LIB WORK [NVCC]
# For each model name below (a spec each) and for one spec whose params, inputs, outputs and
# metrics carry names of C keywords, library functions, macros and the generated code's own
# identifiers: `cannl gen` (C, and CUDA with NVCC), then every .c compiled with CC at
# -std=c11 -Wall -Wextra -Wpedantic -Werror (with OpenMP), the training and inference
# programs linked with the runtime, and every .cu compiled with NVCC (warnings as errors).
set -uo pipefail
cannl=$1 cc=$2 rtdir=$3 rtlib=$4 work=$5 nvcc=${6:-}
rm -rf "$work"
mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }

spec_body() {  # a small model with every routine: params, an input, a target, an output, a metric
  cat <<'SPEC'
input x : [3]
input y : [2]
param w : [3 -> 2] = uniform(-1, 1)
param b : [2]
z = w * x + b
loss = mean(cross_entropy(z, y))
output z
metric acc = accuracy(z, y)
minimize loss with adam(lr = 0.01)
SPEC
}

compile() {  # compile() DIR MODEL [cuda]: the generated sources compile (and the programs link)
  local d=$1 model=$2
  for f in "$d"/*.c; do
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fopenmp -I "$rtdir" -I "$d" -c "$f" -o "${f%.c}.o" \
      2>"$d/cc.log" || { cat "$d/cc.log" >&2; return 1; }
  done
  "$cc" -fopenmp ${CANNL_NAMES_LDFLAGS:-} -o "$d/train" "$d/$model.o" "$d/${model}_train.o" "$rtlib" -lz -lm 2>"$d/ld.log" \
    && "$cc" -fopenmp ${CANNL_NAMES_LDFLAGS:-} -o "$d/infer" "$d/${model}_inference.o" "$d/${model}_infer.o" "$rtlib" -lz -lm 2>>"$d/ld.log" \
    || { cat "$d/ld.log" >&2; return 1; }
}

compile_cuda() {  # compile_cuda DIR
  local d=$1
  for f in "$d"/*.cu; do
    "$nvcc" -std=c++17 -Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror -I "$rtdir" -I "$rtdir/cuda" -I "$d" \
      -c "$f" -o "${f%.cu}.o" 2>"$d/nvcc.log" || { cat "$d/nvcc.log" >&2; return 1; }
  done
}

generate() {  # generate SPEC DIR MODEL: C and CUDA, each compiled
  local spec=$1 d=$2 model=$3
  "$cannl" gen "$spec" -o "$d/c" 2>"$d.err" || { cat "$d.err" >&2; bad "gen $model"; return; }
  compile "$d/c" "$model" && ok || bad "C of $model"
  if [ -n "$nvcc" ]; then
    "$cannl" gen "$spec" --target cuda -o "$d/cuda" 2>"$d.err" || { cat "$d.err" >&2; bad "gen --target cuda $model"; return; }
    compile_cuda "$d/cuda" && ok || bad "CUDA of $model"
  fi
}

# Model names: the public API is <model>_create, struct <model>, <MODEL>_MAX_BATCH, ...
accepted=(m n s e loss real api main sqrt exp free inputs outputs metrics step lr work forward train_step
          eval_metrics init_params init fail gemm restrict_ x j0 log2 memcpy malloc assert
          __metadata__ acc v seed rng state)
refused=(int NULL size_t stdout FILE cannl_model_api float4 dim3 uint64_t cudaStream M_PI errno INFINITY
         math stdio string omp zlib cblas)
# C++ keywords: a C model (examples/embed is `model xor`), refused for the CUDA target.
cxx=(class new xor)
for name in "${accepted[@]}"; do
  { echo "model $name"; spec_body; } >"$work/$name.cannl"
  generate "$work/$name.cannl" "$work/$name" "$name"
done
for name in "${refused[@]}"; do
  { echo "model $name"; spec_body; } >"$work/$name.cannl"
  "$cannl" gen "$work/$name.cannl" -o "$work/$name" >/dev/null 2>"$work/$name.err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "model name '$name' cannot name the generated C API" "$work/$name.err" \
    && [ ! -e "$work/$name" ] && ok || bad "model $name: rc $rc, $(head -c 300 "$work/$name.err")"
done

for name in "${cxx[@]}"; do
  { echo "model $name"; spec_body; } >"$work/$name.cannl"
  "$cannl" gen "$work/$name.cannl" -o "$work/$name/c" 2>"$work/$name.err" && compile "$work/$name/c" "$name" \
    && ok || bad "C of $name"
  "$cannl" gen "$work/$name.cannl" --target cuda -o "$work/$name/cuda" >/dev/null 2>"$work/$name.err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "model name '$name' cannot name the generated C API (.*): '$name' is a keyword of C++" "$work/$name.err" \
    && ok || bad "model $name --target cuda: rc $rc, $(head -c 300 "$work/$name.err")"
done

# Tensor names: params, inputs, outputs and metrics named after what C, its library, CUDA and
# the generated code use; a param beside its own gradient's and optimiser state's names.
cat >"$work/tensors.cannl" <<'SPEC'
model tensors
input NULL : [3]
input int64_t : [3]
input inputs : [3]
input outputs : [2]
param arena, _Bool, sqrt, memcpy, size_t, restrict, class, threadIdx : [3 -> 2] = uniform(-1, 1)
param w, w_grad, w_exp_avg, w_exp_avg_sq, bc1, sqrt_bc2, step, lr, n, m, real : [2] = uniform(-0.5, 0.5)
param expf, j0, cannl_relu, CANNL_PRAGMA, INFINITY, stdout, errno, main, forward, set_loss, work : [2] = uniform(-0.5, 0.5)
param compute, host_view, dev, grads_host, i_, lane_, acc, v, rng, TENSORS_MAX_BATCH : [2] = uniform(-0.5, 0.5)
loss = arena * NULL + _Bool * int64_t + sqrt * inputs + memcpy * NULL + size_t * inputs + restrict * int64_t + class * NULL + threadIdx * inputs
mm = loss *. w *. w_grad *. w_exp_avg *. w_exp_avg_sq *. bc1 *. sqrt_bc2 *. step *. lr *. n *. m *. real
mx = mm + expf + j0 + cannl_relu + CANNL_PRAGMA + INFINITY + stdout + errno + main + forward + set_loss + work
free = mx + compute + host_view + dev + grads_host + i_ + lane_ + acc + v + rng + TENSORS_MAX_BATCH
memset = mean(cross_entropy(free, outputs))
output free
metric NAN = accuracy(free, outputs)
minimize memset with adam(lr = 0.01)
SPEC
generate "$work/tensors.cannl" "$work/tensors" tensors
grep -q '"arena"' "$work/tensors/c/tensors.c" && grep -q 'TENSORS_INPUT_NULL 0' "$work/tensors/c/tensors.h" \
  && ok || bad "the API's names stay as written"

# Refused tensor names: a checkpoint cannot hold a param called __metadata__; macros of the API
# that would differ in case only.
printf 'model t\ninput x : [3]\nparam __metadata__ : [3]\nloss = sum(x *. __metadata__)\nminimize loss with sgd(lr = 0.1)\n' >"$work/meta.cannl"
"$cannl" gen "$work/meta.cannl" -o "$work/meta" 2>"$work/meta.err"; rc=$?
[ $rc -eq 1 ] && grep -q "meta.cannl:3:7: error: a param cannot be called '__metadata__'" "$work/meta.err" && [ ! -e "$work/meta" ] \
  && ok || bad "param __metadata__: rc $rc, $(cat "$work/meta.err")"
printf 'model t\ninput x : [3]\ninput X : [3]\nparam w : [3]\nloss = sum(x *. X *. w)\nminimize loss with sgd(lr = 0.1)\n' >"$work/case.cannl"
"$cannl" gen "$work/case.cannl" -o "$work/case" 2>"$work/case.err"; rc=$?
[ $rc -eq 1 ] && grep -q "case.cannl:3:7: error: 'x' and 'X' both name the C API's macro T_INPUT_X" "$work/case.err" \
  && ok || bad "inputs x and X: rc $rc, $(cat "$work/case.err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
