/* cuda_buffer.c - device memory (a model's arena) and pinned host staging memory. */
#include "cannl_cuda.h"

void *cannl_device_alloc(size_t bytes, cannl_error *err) {
    void *p = NULL;
    if (bytes == 0) bytes = 256;
    if (CANNL_CUDA_CHECK(cudaMalloc(&p, bytes), err) != CANNL_OK) return NULL;
    /* cudaMemset may still run when it returns, on the legacy default stream, which the
       non-blocking streams of cannl_stream_create do not wait for: finish it here. */
    if (CANNL_CUDA_CHECK(cudaMemset(p, 0, bytes), err) != CANNL_OK ||
        CANNL_CUDA_CHECK(cudaDeviceSynchronize(), err) != CANNL_OK) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

void cannl_device_free(void *p) {
    if (p) (void)cudaFree(p);
}

void *cannl_pinned_alloc(size_t bytes, cannl_error *err) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (CANNL_CUDA_CHECK(cudaMallocHost(&p, bytes), err) != CANNL_OK) return NULL;
    unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++) c[i] = 0;
    return p;
}

void cannl_pinned_free(void *p) {
    if (p) (void)cudaFreeHost(p);
}
