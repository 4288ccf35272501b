#!/usr/bin/env bash
# Installs the Debian packages cannl needs to build, test and train.
# Idempotent: packages already present are skipped; apt is only touched when something is missing.
# libopenblas-dev: for `cannl gen --blas` models (and it is the BLAS Debian's PyTorch then uses).
# libclang-rt-dev: clang's libFuzzer and sanitizer runtimes, for the fuzz preset (tests/fuzz).
# openmpi-bin, libopenmpi-dev: data-parallel training programs (cannl_rt_mpi, tests/mpi).
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --data   also the data sets: Fashion-MNIST, and the King James Bible (bible-kjv: the LM demo)
#   scripts/install-deps.sh --torch  also PyTorch (reference for parity tests and benchmarks)
set -euo pipefail

pkgs=(build-essential cmake ninja-build g++ clang libomp-dev zlib1g-dev
      libfmt-dev libcli11-dev nlohmann-json3-dev catch2 libkainjow-mustache-dev
      python3 python3-numpy libopenblas-dev libclang-rt-dev qemu-user openmpi-bin libopenmpi-dev)
for arg in "$@"; do
  case "$arg" in
    --data) pkgs+=(dataset-fashion-mnist bible-kjv bible-kjv-text) ;;
    --torch) pkgs+=(python3-torch) ;;
    --all) pkgs+=(dataset-fashion-mnist bible-kjv bible-kjv-text python3-torch) ;;
    *) echo "install-deps.sh: unknown option '$arg' (expected --data, --torch or --all)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
