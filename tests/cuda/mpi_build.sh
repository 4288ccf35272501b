#!/usr/bin/env bash
# mpi_build.sh CMAKE BUILD NCCL NCCL_TRAINER HOST_TRAINER — test nvcc.mpi_build (CMakeLists.txt
# here): builds the two data-parallel CUDA training programs (cannl gen --target cuda, nvcc with
# warnings as errors, linked with MPI) and checks what each links: NCCL_TRAINER the NCCL
# all-reduce (ncclAllReduce, ncclCommInitRank) when NCCL is 1 (CMake found NCCL), HOST_TRAINER
# no NCCL at all and MPI_Allreduce for the host path; both cannl_cuda_train_main_mpi.
set -euo pipefail
cmake=$1 build=$2 nccl=$3 with=$4 host=$5
"$cmake" --build "$build" --target "$(basename "$with")" "$(basename "$host")"
status=0
check() { # check PROGRAM yes|no SYMBOL
  local n
  n=$(nm "$1" | grep -c " [TU] $3\$" || true)
  if { [ "$2" = yes ] && [ "$n" -eq 0 ]; } || { [ "$2" = no ] && [ "$n" -ne 0 ]; }; then
    echo "FAIL: $(basename "$1") should $([ "$2" = yes ] || echo "not ")link $3"
    status=1
  else
    echo "ok: $(basename "$1") $([ "$2" = yes ] && echo links || echo "does not link") $3"
  fi
}
for p in "$with" "$host"; do
  check "$p" yes cannl_cuda_train_main_mpi
  check "$p" yes MPI_Allreduce
done
if [ "$nccl" = 1 ]; then
  check "$with" yes ncclAllReduce
  check "$with" yes ncclCommInitRank
else
  echo "note: CMake found no NCCL (nccl.h, libnccl): $(basename "$with") all-reduces through host buffers too"
  check "$with" no ncclAllReduce
fi
check "$host" no ncclAllReduce
check "$host" no ncclCommInitRank
exit $status
