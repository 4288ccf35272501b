#!/usr/bin/env bash
# gpu_run.sh PROBE CMD [ARGS...] — runs CMD when PROBE (`test_cuda_rt probe`, which asks
# cudaGetDeviceCount) finds a usable CUDA device; otherwise prints why and exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE 77).
set -uo pipefail
probe=$1
shift
"$probe" probe >/dev/null 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "SKIP: no usable CUDA device (cudaGetDeviceCount); this test needs a GPU"
  exit 77
fi
exec "$@"
