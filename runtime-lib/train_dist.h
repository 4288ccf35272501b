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
    /* Sum `count` elements of `dtype` at `data` over the ranks, in place, each rank's first
       multiplied by `scale`: the array is cut into buckets, each scaled and then sent on its
       way (non-blocking) while the next is scaled; returns once every bucket is reduced. */
    int (*allreduce)(cannl__dist *d, void *data, int64_t count, cannl_dtype dtype, double scale, char *msg,
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
};

/* cannl_train_main_ext over the ranks of `dist` (NULL: one process). */
int cannl__train_main_dist(const cannl_model_api *api, const cannl_model_ext *ext, cannl__dist *dist, int argc,
                           char **argv);

#endif /* CANNL_TRAIN_DIST_H */
