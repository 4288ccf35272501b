#!/usr/bin/env bash
# The main job: generate, build and train the README's Fashion-MNIST example end to end.
#
#   specs/fashion_mlp_adam.cannl  (the contract's 784-512-512-10 classifier, trained with Adam)
#     -> cannl gen -> plain C -> CMake/Ninja -> build/release/fashion_mlp_adam_train
#     -> trains EPOCHS epochs (default 10; Adam lr 1e-3 with a cosine decay, batch 128) on the
#        real Fashion-MNIST files and prints the test accuracy, the wall time and examples/s.
# Extra arguments go to the training program (e.g. --epochs 3, --threads 2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --data
cmake --preset release >/dev/null
cmake --build --preset release --target fashion_mlp_adam_train

D=/usr/share/datasets/fashion-mnist
out=build/release/main
mkdir -p "$out"
echo "== generated C: build/release/cannl/fashion_mlp_adam/ (see also generated/fashion_mlp_adam/)"
start=$(date +%s.%N)
build/release/fashion_mlp_adam_train \
  --data image=$D/train-images-idx3-ubyte.gz --data label=$D/train-labels-idx1-ubyte.gz \
  --test image=$D/t10k-images-idx3-ubyte.gz --test label=$D/t10k-labels-idx1-ubyte.gz \
  --epochs "${EPOCHS:-10}" --batch 128 --lr-schedule cosine --seed 1 \
  --checkpoint "$out/fashion_mlp_adam.safetensors" --metrics "$out/fashion_mlp_adam.jsonl" "$@"
end=$(date +%s.%N)
echo "== wall time (training program, data loading included): $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
echo "== checkpoint: $out/fashion_mlp_adam.safetensors   metrics: $out/fashion_mlp_adam.jsonl"
