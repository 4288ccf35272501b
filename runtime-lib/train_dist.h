/* train_dist.h - the training program's view of data-parallel training: P processes (ranks)
 * that each run cannl_train_main on a slice of every global batch and combine their results
 * through these few collective operations. cannl_rt itself has no MPI: train_dist_mpi.c (the
 * cannl_rt_mpi library, built when CMake finds MPI) implements them; a NULL cannl__dist is
 * one process alone. Not installed. */
#ifndef CANNL_TRAIN_DIST_H
#define CANNL_TRAIN_DIST_H

#include "cannl_rt.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cannl__dist cannl__dist;
struct cannl__dist {
    int rank, size;
    /* Every operation is collective (every rank calls it, in the same order) and returns 0,
       or -1 with a message naming the failure and the rank into msg. */
    /* The gradient all-reduce, in three calls: reduce_begin (the block of `dtype` elements to
       sum over the ranks, in place, each rank's part first multiplied by `scale`), then
       reduce_part for pieces of it as they become final (offset and count in elements; each
       is scaled and sent at once, non-blocking, in buckets of at most CANNL_MPI_BUCKET_MB,
       and earlier ones are pushed on: the model's gradient hook calls it during the backward
       pass), then reduce_end, which returns once every piece is reduced. Every rank sends
       the same pieces in the same order. reduce_part cannot fail: reduce_end reports. */
    void (*reduce_begin)(cannl__dist *d, void *block, cannl_dtype dtype, double scale);
    void (*reduce_part)(cannl__dist *d, int64_t offset, int64_t count);
    int (*reduce_end)(cannl__dist *d, char *msg, size_t cap);
    /* ZeRO-1 (--zero 1), blocking. reduce_scatter: sum the block of `dtype` elements over the
       ranks into this rank's part only, [start[rank], start[rank + 1]) of the P + 1 element
       boundaries `start`; the rest of the block keeps this rank's values. bcast: `count`
       elements at buf from rank `root` to every rank (a param from the rank that updated it).
       gather: each rank's part of a block of `dtype` elements to rank 0, for the checkpoint
       (the optimiser state): rank r's [start[r], start[r + 1]) at `mine`, into `all` (rank 0,
       whose own part is there already; the others pass NULL). */
    int (*reduce_scatter)(cannl__dist *d, void *block, cannl_dtype dtype, const int64_t *start, char *msg, size_t cap);
    int (*bcast)(cannl__dist *d, void *buf, int64_t count, cannl_dtype dtype, int root, char *msg, size_t cap);
    int (*gather)(cannl__dist *d, const void *mine, void *all, cannl_dtype dtype, const int64_t *start, char *msg,
                  size_t cap);
    /* Sum `count` doubles over the ranks, in place (blocking). */
    int (*sum)(cannl__dist *d, double *v, int count, char *msg, size_t cap);
    /* The largest of every rank's `v` (blocking), for agreeing on an exit status. */
    int (*max)(cannl__dist *d, int *v, char *msg, size_t cap);
    /* Stop every rank now with exit status `code` (after one rank's failure mid-run, which
       the others cannot learn of at a collective they wait in). Does not return. */
    void (*abort)(cannl__dist *d, int code);
    int64_t bytes_reduced; /* gradient bytes this rank all-reduced, for the summary */
    double reduce_s;       /* seconds spent in allreduce (scaling, sending, waiting) */
    void *impl;
    /* A CUDA model's ranks (runtime-lib/cuda/train_dist_cuda.c): the gradient all-reduce takes
       the grad block in device memory, queued on `stream` (the model's, cannl_model_ext's
       device_stream, set by the trainer before reduce_begin). 0 and NULL: host memory. */
    int device;
    void *stream;
    const char *how;       /* how the gradients travel, for the summary ("NCCL"), or NULL */
};

/* MPI initialised (errors returned, not fatal) and d filled with the rank, the size and every
   operation but the gradient all-reduce (reduce_begin/part/end: the caller's, host or device
   memory); -1 with a message on stderr when MPI_Init fails. And whether a launcher started
   this process (else MPI is not to be initialised). */
int cannl__dist_mpi_init(cannl__dist *d, int *argc, char ***argv);
int cannl__dist_mpi_launched(void);

/* cannl_train_main_ext over the ranks of `dist` (NULL: one process). */
int cannl__train_main_dist(const cannl_model_api *api, const cannl_model_ext *ext, cannl__dist *dist, int argc,
                           char **argv);

#endif /* CANNL_TRAIN_DIST_H */
