#!/usr/bin/env bash
# The main job: build cannl, then check the Fashion-MNIST example spec (shapes of every tensor).
# (Generating, building and training the model is added with the C backend.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --data
cmake --preset release >/dev/null
cmake --build --preset release
build/release/generator/cannl check specs/fashion_mlp.cannl
