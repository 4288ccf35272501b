/* train_dist_cuda.c - cannl_cuda_train_main_mpi: a CUDA model's training program over MPI
 * ranks (docs/distributed.md, "GPUs"). Compiled twice: the library cannl_cuda_rt_nccl
 * (CANNL_HAVE_NCCL, where CMake finds NCCL) and cannl_cuda_rt_mpi (without). Run alone it is
 * cannl_train_main_ext. Under a launcher each rank takes a GPU of its node (its rank among the
 * node's ranks, modulo the node's GPU count) before the model is created, and the trainer's
 * gradient all-reduce (train_dist.h) works on the model's grad block in device memory:
 *   NCCL      ncclAllReduce in place on the model's stream, each rank's part scaled by its
 *             weight on the way (ncclRedOpCreatePreMulSum); MPI only to hand out the NCCL id
 *             and for the other collectives (the loss sums, the exit status)
 *   host      (no NCCL, CANNL_NCCL=0, or ranks sharing a GPU, which NCCL refuses) the block
 *             copied to a pinned host buffer, scaled, MPI_Allreduce, copied back
 * Both are blocking: the block goes once, after train_grads (no gradient hook: kernels are
 * queued ahead of the host, so a hook would not know when a gradient is done). A failing
 * NCCL or CUDA call is reported naming the rank, and the trainer stops every rank
 * (MPI_Abort), as for an MPI error; a failure while setting up stops every rank at once. */
#include "cannl_cuda.h"
#include "train_dist.h"
#include "train_internal.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CANNL_HAVE_NCCL
#include <nccl.h>
#endif

typedef struct device_reduce {
    char *block; /* the grad block (device) */
    cannl_dtype dtype;
    double scale, t0;
    char *host; /* host path: pinned copy of the block */
    size_t host_bytes;
    int use_nccl;
#ifdef CANNL_HAVE_NCCL
    ncclComm_t comm;
#endif
    int failed;
    char msg[800]; /* the first failure (with room for a cannl_error message) */
} device_reduce;

static void fail_msg(cannl__dist *d, device_reduce *s, const char *what, const char *why) {
    if (s->failed) return;
    s->failed = 1;
    snprintf(s->msg, sizeof s->msg, "rank %d of %d: %s failed: %s", d->rank, d->size, what, why);
}

/* A CUDA call's failure (cannl_cuda_check's message: file:line, the call, CUDA's text). */
static int cuda_ok(cannl__dist *d, device_reduce *s, cudaError_t rc, const char *call, int line) {
    if (rc == cudaSuccess) return 1;
    cannl_error e;
    cannl_cuda_check(rc, call, __FILE__, line, &e);
    fail_msg(d, s, "a CUDA call", e.msg);
    return 0;
}
#define CUDA_OK(d, s, call) cuda_ok((d), (s), (call), #call, __LINE__)

static void dev_reduce_begin(cannl__dist *d, void *block, cannl_dtype dtype, double scale) {
    device_reduce *s = d->impl;
    s->block = block;
    s->dtype = dtype;
    s->scale = scale;
    s->t0 = MPI_Wtime();
}

#ifdef CANNL_HAVE_NCCL
static int nccl_ok(cannl__dist *d, device_reduce *s, ncclResult_t rc, const char *what) {
    if (rc == ncclSuccess) return 1;
    char why[300];
    const char *last = s->comm ? ncclGetLastError(s->comm) : NULL;
    snprintf(why, sizeof why, "%s%s%s", ncclGetErrorString(rc), last && *last ? ": " : "", last ? last : "");
    fail_msg(d, s, what, why);
    return 0;
}

/* In place on the model's stream: sum over the ranks of scale * x (the scale applied by
   NCCL as it reads this rank's part). Every rank uses such an operator, whatever its scale
   (1 when alone: x * 1 is x), so that all of them call the collective alike. */
static void nccl_part(cannl__dist *d, device_reduce *s, char *p, int64_t count) {
    const ncclDataType_t type = s->dtype == CANNL_F64 ? ncclFloat64 : ncclFloat32;
    float f = (float)s->scale;
    ncclRedOp_t op;
    if (!nccl_ok(d, s,
                 ncclRedOpCreatePreMulSum(&op, s->dtype == CANNL_F64 ? (void *)&s->scale : (void *)&f, type,
                                          ncclScalarHostImmediate, s->comm),
                 "ncclRedOpCreatePreMulSum"))
        return;
    nccl_ok(d, s, ncclAllReduce(p, p, (size_t)count, type, op, s->comm, (cudaStream_t)d->stream),
            "ncclAllReduce of the gradients");
    /* (an operator may go as soon as the last call given it has returned) */
    nccl_ok(d, s, ncclRedOpDestroy(op, s->comm), "ncclRedOpDestroy");
}
#endif

/* Through host memory: down, scaled, MPI_Allreduce, up; in pieces of at most INT32_MAX
   elements (MPI's int counts). */
static void host_part(cannl__dist *d, device_reduce *s, int64_t offset, int64_t count) {
    const size_t elem = cannl_dtype_size(s->dtype), end = (size_t)(offset + count) * elem;
    const cudaStream_t stream = (cudaStream_t)d->stream;
    if (end > s->host_bytes) {
        cannl_error e;
        cannl_pinned_free(s->host);
        s->host_bytes = 0;
        if (!(s->host = cannl_pinned_alloc(end, &e))) {
            fail_msg(d, s, "allocating the pinned gradient buffer", e.msg);
            return;
        }
        s->host_bytes = end;
    }
    char *h = s->host + (size_t)offset * elem, *g = s->block + (size_t)offset * elem;
    const size_t bytes = (size_t)count * elem;
    if (!CUDA_OK(d, s, cudaMemcpyAsync(h, g, bytes, cudaMemcpyDeviceToHost, stream)) ||
        !CUDA_OK(d, s, cudaStreamSynchronize(stream)))
        return;
    if (s->scale != 1) {
        if (s->dtype == CANNL_F64) {
            double *x = (double *)(void *)h;
            for (int64_t i = 0; i < count; i++) x[i] *= s->scale;
        } else {
            float *x = (float *)(void *)h;
            const float f = (float)s->scale;
            for (int64_t i = 0; i < count; i++) x[i] *= f;
        }
    }
    const MPI_Datatype type = s->dtype == CANNL_F64 ? MPI_DOUBLE : MPI_FLOAT;
    for (int64_t lo = 0; lo < count; lo += INT32_MAX) {
        const int k = (int)(count - lo < INT32_MAX ? count - lo : INT32_MAX);
        const int rc = MPI_Allreduce(MPI_IN_PLACE, h + (size_t)lo * elem, k, type, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            char err[MPI_MAX_ERROR_STRING];
            int len = 0;
            if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "MPI error %d", rc);
            fail_msg(d, s, "MPI_Allreduce of the gradients", err);
            return;
        }
    }
    if (CUDA_OK(d, s, cudaMemcpyAsync(g, h, bytes, cudaMemcpyHostToDevice, stream)))
        CUDA_OK(d, s, cudaStreamSynchronize(stream)); /* the pinned buffer is free again */
}

static void dev_reduce_part(cannl__dist *d, int64_t offset, int64_t count) {
    device_reduce *s = d->impl;
    if (s->failed || count <= 0) return;
#ifdef CANNL_HAVE_NCCL
    if (s->use_nccl) {
        nccl_part(d, s, s->block + (size_t)offset * cannl_dtype_size(s->dtype), count);
        d->bytes_reduced += count * (int64_t)cannl_dtype_size(s->dtype);
        return;
    }
#endif
    host_part(d, s, offset, count);
    d->bytes_reduced += count * (int64_t)cannl_dtype_size(s->dtype);
}

static int dev_reduce_end(cannl__dist *d, char *msg, size_t cap) {
    device_reduce *s = d->impl;
#ifdef CANNL_HAVE_NCCL
    if (s->use_nccl && !s->failed && CUDA_OK(d, s, cudaStreamSynchronize((cudaStream_t)d->stream))) {
        ncclResult_t async = ncclSuccess;
        if (nccl_ok(d, s, ncclCommGetAsyncError(s->comm, &async), "ncclCommGetAsyncError"))
            nccl_ok(d, s, async, "ncclAllReduce of the gradients (asynchronously)");
    }
#endif
    d->reduce_s += MPI_Wtime() - s->t0;
    if (!s->failed) return 0;
    snprintf(msg, cap, "%s", s->msg);
    return -1;
}

/* A failure before training: said by the rank that had it, then every rank stops (the
   others may be waiting in a collective). */
static void setup_fail(const char *prog, const cannl__dist *d, const char *msg) {
    fprintf(stderr, "%s: error: rank %d of %d: %s\n", prog, d->rank, d->size, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, CANNL__EXIT_FAIL);
    exit(CANNL__EXIT_FAIL); /* not reached */
}

/* This rank's GPU: its place among its node's ranks modulo the node's GPU count; sets
   *shared when more ranks than GPUs run on some node (every rank learns it). */
static void pick_device(const char *prog, cannl__dist *d, int *shared) {
    MPI_Comm node;
    int local = 0, nlocal = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        setup_fail(prog, d, "MPI_Comm_split_type (the ranks of this node) failed");
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &nlocal);
    MPI_Comm_free(&node);
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    char msg[400];
    if (rc != cudaSuccess || count < 1) {
        snprintf(msg, sizeof msg, "no usable CUDA device (cudaGetDeviceCount: %s)",
                 rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
        setup_fail(prog, d, msg);
    }
    const int dev = local % count;
    const cudaError_t set = cudaSetDevice(dev);
    if (set != cudaSuccess) {
        snprintf(msg, sizeof msg, "cudaSetDevice(%d): %s (%s)", dev, cudaGetErrorString(set), cudaGetErrorName(set));
        setup_fail(prog, d, msg);
    }
    int over = nlocal > count;
    if (MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        setup_fail(prog, d, "MPI_Allreduce (agreeing on the GPUs) failed");
    *shared = over;
}

#ifdef CANNL_HAVE_NCCL
/* The NCCL communicator of every rank: rank 0's unique id, broadcast over MPI. */
static void nccl_setup(const char *prog, cannl__dist *d, device_reduce *s) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int rc = d->rank == 0 ? (int)ncclGetUniqueId(&id) : (int)ncclSuccess;
    if (MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        setup_fail(prog, d, "MPI_Bcast of the NCCL id failed");
    char msg[400];
    if (rc != ncclSuccess) {
        snprintf(msg, sizeof msg, "ncclGetUniqueId on rank 0: %s", ncclGetErrorString((ncclResult_t)rc));
        setup_fail(prog, d, msg);
    }
    const ncclResult_t init = ncclCommInitRank(&s->comm, d->size, id, d->rank);
    if (init != ncclSuccess) {
        snprintf(msg, sizeof msg, "ncclCommInitRank: %s: %s", ncclGetErrorString(init), ncclGetLastError(NULL));
        setup_fail(prog, d, msg);
    }
}
#endif

int cannl_cuda_train_main_mpi(const cannl_model_api *api, const cannl_model_ext *ext, int argc, char **argv) {
    if (!cannl__dist_mpi_launched()) return cannl_train_main_ext(api, ext, argc, argv);
    const char *prog = argc > 0 ? argv[0] : "cannl_train";
    cannl__dist d;
    if (cannl__dist_mpi_init(&d, &argc, &argv)) return CANNL__EXIT_FAIL;
    device_reduce s;
    memset(&s, 0, sizeof s);
    int shared = 0;
    pick_device(prog, &d, &shared);
    const char *env = getenv("CANNL_NCCL");
    const int nccl_wanted = !(env && strcmp(env, "0") == 0);
#ifdef CANNL_HAVE_NCCL
    s.use_nccl = nccl_wanted && !shared;
    if (s.use_nccl) nccl_setup(prog, &d, &s);
    d.how = s.use_nccl     ? "NCCL"
            : !nccl_wanted ? "MPI on host buffers: CANNL_NCCL=0"
                           : "MPI on host buffers: ranks share a GPU, which NCCL does not allow";
#else
    (void)shared;
    d.how = nccl_wanted ? "MPI on host buffers: built without NCCL" : "MPI on host buffers: CANNL_NCCL=0";
#endif
    d.device = 1;
    d.impl = &s;
    d.reduce_begin = dev_reduce_begin;
    d.reduce_part = dev_reduce_part;
    d.reduce_end = dev_reduce_end;
    const int rc = cannl__train_main_dist(api, ext, &d, argc, argv);
    (void)cudaDeviceSynchronize();
#ifdef CANNL_HAVE_NCCL
    if (s.comm) ncclCommDestroy(s.comm);
#endif
    cannl_pinned_free(s.host);
    MPI_Finalize();
    return rc;
}
