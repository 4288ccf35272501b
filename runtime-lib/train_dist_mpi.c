/* train_dist_mpi.c - cannl_train_main_mpi: the training program over MPI ranks (the library
 * cannl_rt_mpi, built only when CMake finds MPI). Run alone (no mpirun/srun around it) it is
 * cannl_train_main, without initialising MPI; under a launcher every rank runs
 * cannl_train_main on its slice of each global batch (train_dist.h), the gradients averaged
 * with MPI_Iallreduce in buckets sent as the backward pass finishes them. Errors of MPI calls come back (MPI_ERRORS_RETURN) and are
 * reported naming the rank; a rank that fails mid-run stops every rank (MPI_Abort), and
 * mpirun stops the others when one dies. */
#include "train_dist.h"
#include "train_internal.h"

#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bucket size of the gradient all-reduce: CANNL_MPI_BUCKET_MB (default 4 MiB). */
static int64_t bucket_bytes(void) {
    const char *s = getenv("CANNL_MPI_BUCKET_MB");
    long mb = s ? strtol(s, NULL, 10) : 4;
    return (int64_t)(mb > 0 ? mb : 4) << 20;
}

static int fail(const cannl__dist *d, int rc, const char *what, char *msg, size_t cap) {
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "MPI error %d", rc);
    snprintf(msg, cap, "rank %d of %d: %s failed: %s (another rank died or failed?)", d->rank, d->size, what, err);
    return -1;
}

/* The gradient all-reduce in flight (one per process: the training program runs one). */
typedef struct reduce_state {
    char *block;
    cannl_dtype dtype;
    double scale, t0;
    MPI_Request *req;
    int nreq, cap;
    int rc;               /* the first failing call's code, or MPI_SUCCESS */
    const char *what;     /* and its name */
} reduce_state;

static void mpi_reduce_begin(cannl__dist *d, void *block, cannl_dtype dtype, double scale) {
    reduce_state *s = d->impl;
    s->block = block;
    s->dtype = dtype;
    s->scale = scale;
    s->nreq = 0;
    s->rc = MPI_SUCCESS;
    s->what = NULL;
    s->t0 = MPI_Wtime();
}

static void mpi_reduce_part(cannl__dist *d, int64_t offset, int64_t count) {
    reduce_state *s = d->impl;
    if (s->rc != MPI_SUCCESS) return;
    const size_t elem = cannl_dtype_size(s->dtype);
    const int64_t per = bucket_bytes() / (int64_t)elem;
    MPI_Datatype type = s->dtype == CANNL_F64 ? MPI_DOUBLE : MPI_FLOAT;
    for (int64_t lo = offset; lo < offset + count; lo += per) {
        const int64_t k = offset + count - lo < per ? offset + count - lo : per;
        void *p = s->block + (size_t)lo * elem;
        if (s->scale != 1) {
            if (s->dtype == CANNL_F64) {
                double *x = p;
                for (int64_t i = 0; i < k; i++) x[i] *= s->scale;
            } else {
                float *x = p;
                const float f = (float)s->scale;
                for (int64_t i = 0; i < k; i++) x[i] *= f;
            }
        }
        if (s->nreq == s->cap) {
            const int cap = s->cap ? 2 * s->cap : 64;
            MPI_Request *r = realloc(s->req, (size_t)cap * sizeof *r);
            if (!r) {
                s->rc = MPI_ERR_NO_MEM;
                s->what = "growing the request list";
                return;
            }
            s->req = r;
            s->cap = cap;
        }
        const int rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)k, type, MPI_SUM, MPI_COMM_WORLD, &s->req[s->nreq]);
        if (rc != MPI_SUCCESS) {
            s->rc = rc;
            s->what = "MPI_Iallreduce of the gradients";
            return;
        }
        s->nreq++;
        d->bytes_reduced += k * (int64_t)elem;
    }
    /* Push the ones in flight on (MPI makes progress inside its calls). */
    int done = 0;
    const int rc = MPI_Testall(s->nreq, s->req, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        s->rc = rc;
        s->what = "MPI_Testall of the gradients";
    }
}

static int mpi_reduce_end(cannl__dist *d, char *msg, size_t cap) {
    reduce_state *s = d->impl;
    const int rc = s->rc == MPI_SUCCESS && s->nreq > 0 ? MPI_Waitall(s->nreq, s->req, MPI_STATUSES_IGNORE) : s->rc;
    d->reduce_s += MPI_Wtime() - s->t0;
    if (rc != MPI_SUCCESS) return fail(d, rc, s->what ? s->what : "MPI_Waitall of the gradients", msg, cap);
    return 0;
}

static MPI_Datatype mpi_type(cannl_dtype dtype) { return dtype == CANNL_F64 ? MPI_DOUBLE : MPI_FLOAT; }

/* The receive buffer and counts of the reduce-scatter (kept between steps). */
typedef struct scatter_state {
    char *recv;
    size_t recv_bytes;
    int *counts;
} scatter_state;
static scatter_state g_scatter; /* one per process: the training program runs one */

static int mpi_reduce_scatter(cannl__dist *d, void *block, cannl_dtype dtype, const int64_t *start, char *msg,
                              size_t cap) {
    const double t0 = MPI_Wtime();
    scatter_state *s = &g_scatter;
    const size_t elem = cannl_dtype_size(dtype);
    if (!s->counts && !(s->counts = malloc((size_t)d->size * sizeof *s->counts))) {
        snprintf(msg, cap, "rank %d of %d: out of memory", d->rank, d->size);
        return -1;
    }
    for (int r = 0; r < d->size; r++) {
        if (start[r + 1] - start[r] > INT32_MAX) {
            snprintf(msg, cap, "rank %d of %d: a shard of %" PRId64 " gradient elements is more than MPI's int count",
                     d->rank, d->size, start[r + 1] - start[r]);
            return -1;
        }
        s->counts[r] = (int)(start[r + 1] - start[r]);
    }
    const size_t mine = (size_t)s->counts[d->rank] * elem;
    if (mine > s->recv_bytes) {
        char *p = realloc(s->recv, mine);
        if (!p) {
            snprintf(msg, cap, "rank %d of %d: out of memory", d->rank, d->size);
            return -1;
        }
        s->recv = p;
        s->recv_bytes = mine;
    }
    const int rc = MPI_Reduce_scatter(block, s->recv, s->counts, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(d, rc, "MPI_Reduce_scatter of the gradients", msg, cap);
    memcpy((char *)block + (size_t)start[d->rank] * elem, s->recv, mine);
    d->bytes_reduced += (start[d->size] - start[0]) * (int64_t)elem;
    d->reduce_s += MPI_Wtime() - t0;
    return 0;
}

/* MPI counts are ints: longer buffers go in pieces. */
static int mpi_bcast(cannl__dist *d, void *buf, int64_t count, cannl_dtype dtype, int root, char *msg, size_t cap) {
    const size_t elem = cannl_dtype_size(dtype);
    for (int64_t lo = 0; lo < count; lo += INT32_MAX) {
        const int k = (int)(count - lo < INT32_MAX ? count - lo : INT32_MAX);
        const int rc = MPI_Bcast((char *)buf + (size_t)lo * elem, k, mpi_type(dtype), root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(d, rc, "MPI_Bcast of the params", msg, cap);
    }
    return 0;
}

static int mpi_gather(cannl__dist *d, const void *mine, void *all, cannl_dtype dtype, const int64_t *start, char *msg,
                      size_t cap) {
    int *counts = malloc(2 * (size_t)d->size * sizeof *counts);
    if (!counts) {
        snprintf(msg, cap, "rank %d of %d: out of memory", d->rank, d->size);
        return -1;
    }
    int *displs = counts + d->size;
    for (int r = 0; r < d->size; r++) {
        if (start[r + 1] > INT32_MAX) {
            free(counts);
            snprintf(msg, cap, "rank %d of %d: %" PRId64 " elements of optimiser state are more than MPI's int count",
                     d->rank, d->size, start[r + 1]);
            return -1;
        }
        counts[r] = (int)(start[r + 1] - start[r]);
        displs[r] = (int)start[r];
    }
    const MPI_Datatype type = mpi_type(dtype);
    const int rc = d->rank == 0 ? MPI_Gatherv(MPI_IN_PLACE, 0, type, all, counts, displs, type, 0, MPI_COMM_WORLD)
                                : MPI_Gatherv(mine, counts[d->rank], type, NULL, NULL, NULL, type, 0, MPI_COMM_WORLD);
    free(counts);
    return rc == MPI_SUCCESS ? 0 : fail(d, rc, "MPI_Gatherv of the optimiser state", msg, cap);
}

static int mpi_sum(cannl__dist *d, double *v, int count, char *msg, size_t cap) {
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(d, rc, "MPI_Allreduce", msg, cap);
}

static int mpi_max(cannl__dist *d, int *v, char *msg, size_t cap) {
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(d, rc, "MPI_Allreduce", msg, cap);
}

static void mpi_abort(cannl__dist *d, int code) {
    (void)d;
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* not reached */
}

/* Whether a launcher started this process as one of several ranks (Open MPI, MPICH/Hydra,
   Slurm's PMI/PMIx): only then is MPI initialised. */
static int launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int cannl_train_main_mpi(const cannl_model_api *api, int argc, char **argv) {
    if (!launched()) return cannl_train_main(api, argc, argv);
    cannl__dist d;
    if (cannl__dist_mpi_init(&d, &argc, &argv)) return CANNL__EXIT_FAIL;
    reduce_state rs;
    memset(&rs, 0, sizeof rs);
    d.impl = &rs;
    d.reduce_begin = mpi_reduce_begin;
    d.reduce_part = mpi_reduce_part;
    d.reduce_end = mpi_reduce_end;
    const int rc = cannl__train_main_dist(api, NULL, &d, argc, argv);
    free(rs.req);
    free(g_scatter.recv);
    free(g_scatter.counts);
    MPI_Finalize();
    return rc;
}

int cannl__dist_mpi_init(cannl__dist *d, int *argc, char ***argv) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: error: MPI_Init failed\n", *argc > 0 ? (*argv)[0] : "cannl_train");
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(d, 0, sizeof *d);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    d->reduce_scatter = mpi_reduce_scatter;
    d->bcast = mpi_bcast;
    d->gather = mpi_gather;
    d->sum = mpi_sum;
    d->max = mpi_max;
    d->abort = mpi_abort;
    return 0;
}

int cannl__dist_mpi_launched(void) { return launched(); }
