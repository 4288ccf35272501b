/* cuda_host_path.c - the CUDA trainer's data-parallel step on the CPU (tests mpi.cuda_host_*):
 * runtime-lib/cuda/train_dist_cuda.c (built without NCCL: MPI on host buffers) and the trainer's
 * branches for a grad block in device memory, with the C model fashion_mlp posing as a CUDA
 * model. Below, the few CUDA runtime calls train_dist_cuda.c makes, done on the host ("device"
 * memory is host memory, the stream a null handle), and the cannl_model_ext entries a CUDA
 * model gives the data-parallel trainer (device_stream, zero_grads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cannl_cuda.h"
#include "fashion_mlp.h"

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    (void)kind;
    (void)stream;
    memcpy(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    (void)stream;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "an error (stand-in)"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaError"; }
cannl_status cannl_cuda_check(cudaError_t e, const char *call, const char *file, int line, cannl_error *err) {
    if (e == cudaSuccess) return CANNL_OK;
    if (err) snprintf(err->msg, sizeof err->msg, "%s:%d: %s: %s", file, line, call, cudaGetErrorString(e));
    return CANNL_E_DEVICE;
}
void *cannl_pinned_alloc(size_t bytes, cannl_error *err) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p && err) snprintf(err->msg, sizeof err->msg, "out of memory");
    return p;
}
void cannl_pinned_free(void *p) { free(p); }

static void *device_stream(void *m) {
    (void)m;
    return NULL;
}
static void zero_grads(void *m) {
    int64_t count = 0;
    void *block = fashion_mlp_grad_block((struct fashion_mlp *)m, &count);
    memset(block, 0, (size_t)count * sizeof(fashion_mlp_real));
}
static const cannl_model_ext ext = {NULL, NULL, device_stream, zero_grads};

int main(int argc, char **argv) { return cannl_cuda_train_main_mpi(&fashion_mlp_api, &ext, argc, argv); }
