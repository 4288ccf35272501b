/* train_dist_mpi.c - cannl_train_main_mpi: the training program over MPI ranks (the library
 * cannl_rt_mpi, built only when CMake finds MPI). Run alone (no mpirun/srun around it) it is
 * cannl_train_main, without initialising MPI; under a launcher every rank runs
 * cannl_train_main on its slice of each global batch (train_dist.h), the gradients averaged
 * with MPI_Iallreduce in buckets. Errors of MPI calls come back (MPI_ERRORS_RETURN) and are
 * reported naming the rank; a rank that fails mid-run stops every rank (MPI_Abort), and
 * mpirun stops the others when one dies. */
#include "train_dist.h"
#include "train_internal.h"

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

static int mpi_allreduce(cannl__dist *d, void *data, int64_t count, cannl_dtype dtype, double scale, char *msg,
                         size_t cap) {
    const size_t elem = cannl_dtype_size(dtype);
    const int64_t per = bucket_bytes() / (int64_t)elem;
    const int64_t nb = count > 0 ? (count + per - 1) / per : 0;
    const double t0 = MPI_Wtime();
    MPI_Request *req = malloc((size_t)(nb + 1) * sizeof *req);
    if (!req) {
        snprintf(msg, cap, "rank %d: out of memory", d->rank);
        return -1;
    }
    MPI_Datatype type = dtype == CANNL_F64 ? MPI_DOUBLE : MPI_FLOAT;
    int64_t issued = 0;
    int rc = MPI_SUCCESS;
    for (int64_t b = 0; b < nb && rc == MPI_SUCCESS; b++) {
        const int64_t lo = b * per, k = count - lo < per ? count - lo : per;
        if (scale != 1) {
            if (dtype == CANNL_F64) {
                double *x = (double *)data + lo;
                for (int64_t i = 0; i < k; i++) x[i] *= scale;
            } else {
                float *x = (float *)data + lo;
                const float s = (float)scale;
                for (int64_t i = 0; i < k; i++) x[i] *= s;
            }
        }
        rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)data + (size_t)lo * elem, (int)k, type, MPI_SUM, MPI_COMM_WORLD,
                            &req[b]);
        if (rc == MPI_SUCCESS) issued++;
    }
    const int wrc = issued > 0 ? MPI_Waitall((int)issued, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    free(req);
    if (rc != MPI_SUCCESS) return fail(d, rc, "MPI_Iallreduce of the gradients", msg, cap);
    if (wrc != MPI_SUCCESS) return fail(d, wrc, "MPI_Waitall of the gradients", msg, cap);
    d->bytes_reduced += count * (int64_t)elem;
    d->reduce_s += MPI_Wtime() - t0;
    return 0;
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
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: error: MPI_Init failed\n", argc > 0 ? argv[0] : "cannl_train");
        return CANNL__EXIT_FAIL;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    cannl__dist d;
    memset(&d, 0, sizeof d);
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.size);
    d.allreduce = mpi_allreduce;
    d.sum = mpi_sum;
    d.max = mpi_max;
    d.abort = mpi_abort;
    const int rc = cannl__train_main_dist(api, NULL, &d, argc, argv);
    MPI_Finalize();
    return rc;
}
