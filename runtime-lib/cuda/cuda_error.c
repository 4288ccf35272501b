/* cuda_error.c - checked CUDA calls: the one-line message naming the call and where it was made. */
#include "cannl_cuda.h"

#include <stdio.h>

cannl_status cannl_cuda_check(cudaError_t e, const char *call, const char *file, int line, cannl_error *err) {
    if (e == cudaSuccess) return CANNL_OK;
    if (err) {
        snprintf(err->msg, sizeof err->msg, "%s:%d: %s: %s (%s)", file, line, call, cudaGetErrorString(e),
                 cudaGetErrorName(e));
        for (char *c = err->msg; *c; c++)
            if (*c == '\n' || *c == '\r') *c = ' ';
    }
    return CANNL_E_DEVICE;
}

int cannl_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return 0;
    }
    return n;
}
