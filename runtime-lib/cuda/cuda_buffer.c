/* cuda_buffer.c - device memory (a model's arena) and pinned host staging memory. */
#include "cannl_cuda.h"

void *cannl_device_alloc(size_t bytes, cannl_error *err) {
    void *p = NULL;
    if (bytes == 0) bytes = 256;
    if (CANNL_CUDA_CHECK(cudaMalloc(&p, bytes), err) != CANNL_OK) return NULL;
    if (CANNL_CUDA_CHECK(cudaMemset(p, 0, bytes), err) != CANNL_OK) {
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
