#!/usr/bin/env bash
# bench/peers.sh — cannl's training step against today's CPU peers: PyTorch 2 eager, torch.compile
# (default and max-autotune-no-cudagraphs) and JAX + optax under jax.jit (not part of the test suite;
# the full run takes tens of minutes on 2 cores).
#
#   bench/peers.sh                                 every bench model, 7 repetitions, 1 and 2 threads
#   bench/peers.sh --venv /path/to/venv --quick --reps 1
#   bench/peers.sh --reps 3 --models fashion_mlp gpt_char --peers cannl eager jax --threads 1
#   bench/peers.sh --check --reps 2 --models llama_char gru_rows     the zoo's Llama and GRU, the losses first
#
# The peers live in a Python virtual environment OUTSIDE the repo, never a dependency of the build or
# the tests: --venv PATH, or CANNL_PEERS_VENV, default $HOME/venv-peers. This script installs nothing;
# when the venv or a package is missing it prints the commands that make it (bench/README.md, "Peers").
# Builds `cannl` and the runtime (release preset), generates each model into build/bench/peers/ and
# compiles it with the flags of the generated CMakeLists.txt into a step timer (bench/step_bench.c), builds
# bench/fma_peak.c for this CPU, then runs bench/peers.py (the venv's python runs the peers) and prints
# the markdown table of bench/README.md. --models builds only those models. --check first runs
# bench/peer_check.py (the venv's python): the loss of the first step from the same init and batch in cannl's
# training program (built for it) and in each peer, for the models it knows (llama_char, gru_rows).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=${CANNL_PEERS_VENV:-$HOME/venv-peers}
args=()
models=(fashion_mlp fashion_mlp_adam fashion_cnn cnn_dense256 gpt_char resnet_bn mlp_ln_dropout llama_char gru_rows)
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv=$2; shift 2 ;;
    --check) check=1; shift ;;
    --models)
      args+=("$1"); shift; models=()
      while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do models+=("$1"); args+=("$1"); shift; done ;;
    *) args+=("$1"); shift ;;
  esac
done
py=$venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c 'import torch, jax, optax' 2>/dev/null; then
  cat >&2 <<EOF
bench/peers.sh: no peers' virtual environment with torch, jax and optax at $venv. Make one outside
the repo (a few GB), then rerun with --venv $venv (or CANNL_PEERS_VENV=$venv):
  python3 -m venv $venv
  $venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
  $venv/bin/pip install 'jax[cpu]' optax numpy
(where download.pytorch.org is out of reach, PyPI's CUDA wheel without most of its CUDA packages:
 $venv/bin/pip install --no-deps torch
 $venv/bin/pip install filelock typing-extensions sympy networkx jinja2 fsspec
 $venv/bin/pip install --no-deps nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 nvidia-cufile nvidia-nccl-cu13
 the last line because libtorch_cuda.so links them even on a CPU; bench/README.md, "Peers")
EOF
  exit 2
fi
cmake --preset release >/dev/null
cmake --build --preset release --target cannl cannl_rt >/dev/null
cannl=build/release/generator/cannl
rt=build/release/runtime-lib/libcannl_rt.a
out=build/bench/peers
mkdir -p "$out"
cc=${CC:-cc}
cflags=(-std=c11 -O3 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math -fopenmp -Iruntime-lib)
for model in "${models[@]}"; do
  spec=specs/$model.cannl
  [ -f "$spec" ] || spec=bench/specs/$model.cannl
  g=$out/$model
  rm -rf "$g"
  "$cannl" gen "$spec" -o "$g"
  "$cc" "${cflags[@]}" -I"$g" -DCANNL_BENCH_API="${model}_api" bench/step_bench.c "$g/$model.c" "$rt" -lz -lm \
    -o "$out/${model}_step"
  if [ $check = 1 ]; then
    "$cc" "${cflags[@]}" -I"$g" "$g/${model}_train.c" "$g/$model.c" "$g/${model}_inference.c" "$rt" -lz -lm \
      -o "$out/${model}_train"
  fi
done
"$cc" -O3 -march=native -fopenmp bench/fma_peak.c -o "$out/fma_peak"
echo "bench/peers.sh: built into $out; running with $py (this takes a while);" \
  "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ $check = 1 ]; then
  echo "bench/peers.sh: the loss of the first step from the same init and batch (bench/peer_check.py):" >&2
  OMP_NUM_THREADS=1 "$py" bench/peer_check.py "$out" "${models[@]}"
fi
/usr/bin/python3 bench/peers.py "$out" --python "$py" "${args[@]}"
