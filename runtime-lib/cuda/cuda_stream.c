/* cuda_stream.c - streams: in-order queues of kernels and copies. */
#include "cannl_cuda.h"

#include <stdio.h>
#include <stdlib.h>

struct cannl_stream {
    cudaStream_t s;
};

cannl_status cannl_stream_create(cannl_stream **out, cannl_error *err) {
    *out = NULL;
    cannl_stream *s = calloc(1, sizeof *s);
    if (!s) {
        if (err) snprintf(err->msg, sizeof err->msg, "out of memory creating a stream");
        return CANNL_E_NOMEM;
    }
    cannl_status st = CANNL_CUDA_CHECK(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking), err);
    if (st != CANNL_OK) {
        free(s);
        return st;
    }
    *out = s;
    return CANNL_OK;
}

void cannl_stream_destroy(cannl_stream *s) {
    if (!s) return;
    (void)cudaStreamDestroy(s->s);
    free(s);
}

cudaStream_t cannl_stream_cuda(const cannl_stream *s) { return s->s; }

cannl_status cannl_stream_copy(cannl_stream *s, void *dst, const void *src, size_t bytes, cannl_error *err) {
    if (bytes == 0) return CANNL_OK;
    return CANNL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->s), err);
}

cannl_status cannl_stream_sync(cannl_stream *s, cannl_error *err) {
    return CANNL_CUDA_CHECK(cudaStreamSynchronize(s->s), err);
}
