/* train_parallel.c - the trainer's side of data-parallel training (train_dist.h; the ranks
 * themselves are train_dist_mpi.c's): a rank set up (quiet but for errors unless it is rank
 * 0), a step on its slice of the global batch with the gradients all-reduced (or, with --zero
 * 1, train_zero.c's step), and the optimiser-state bytes each rank holds, for the summary. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ranks other than 0 train quietly: no output but errors (named "<prog> (rank r)"), no
   metrics log, no checkpoint (rank 0 writes the one checkpoint). */
int cannl__train_setup_rank(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (!api->train_grads || !api->train_update || !api->grad_block)
        return cannl__train_report(t, CANNL__EXIT_USAGE,
                                   "model '%s' cannot train data-parallel (its table has no train_grads)", api->name);
    const int device = t->ext && t->ext->device_stream && t->ext->zero_grads; /* gradients on a GPU */
    if (device != (t->dist->device != 0))
        return cannl__train_report(t, CANNL__EXIT_USAGE,
                                   "model '%s' keeps its gradients in %s memory, but this program's ranks reduce "
                                   "them in %s memory (link the CUDA model with cannl_cuda_rt_mpi, a C model with "
                                   "cannl_rt_mpi)",
                                   api->name, device ? "device" : "host", device ? "host" : "device");
    if (device && t->o.zero)
        return cannl__train_report(t, CANNL__EXIT_USAGE,
                                   "--zero 1: not for a CUDA model (its optimiser state is not sharded): "
                                   "run without it");
    if (t->o.zero && (!api->grad_offsets || !api->set_update_shard || !api->shard_opt_state || !api->opt_state_start ||
                      !api->opt_state))
        return cannl__train_report(t, CANNL__EXIT_USAGE,
                                   "--zero 1: model '%s' cannot shard its optimiser state (regenerate it)", api->name);
    if (t->dist->rank == 0) return CANNL__EXIT_OK;
    snprintf(t->prog, sizeof t->prog, "%s (rank %d)", t->o.prog, t->dist->rank);
    t->o.prog = t->prog;
    t->o.metrics = NULL;
    t->o.checkpoint = NULL;
    t->o.quiet = 1;
    if (!freopen("/dev/null", "w", stdout))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "cannot redirect stdout to /dev/null");
    return CANNL__EXIT_OK;
}

/* The model's gradient hook: a gradient is final, send it. */
static void grad_ready(void *ctx, int64_t offset, int64_t count) {
    cannl__dist *d = ctx;
    d->reduce_part(d, offset, count);
}

/* Data-parallel: the optimiser-state bytes each rank holds, for the summary. */
int cannl__train_count_opt_bytes(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    char msg[256];
    if (!api->opt_state_start) return CANNL__EXIT_OK;
    if (!(t->opt_bytes = calloc((size_t)d->size, sizeof *t->opt_bytes)))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    const int32_t first = t->o.zero ? t->shard[d->rank] : 0, last = t->o.zero ? t->shard[d->rank + 1] : api->num_params;
    t->opt_bytes[d->rank] = (double)(api->opt_state_start[last] - api->opt_state_start[first]);
    if (d->sum(d, t->opt_bytes, d->size, msg, sizeof msg)) return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    return CANNL__EXIT_OK;
}

/* A data-parallel step on this rank's `count` of the global batch's n examples: its
   gradients (zero for an empty slice) weighted by count / n, summed over the ranks into the
   average of the whole batch (the loss is a mean over a slice), then the same update on
   every rank. Returns the global batch's loss; agrees on a stop signal (any rank's). With
   --zero 1, train_zero.c's step. */
int cannl__train_dist_step(cannl__trainer *t, int64_t lo, int64_t count, int64_t n, double *loss) {
    if (t->o.zero) return cannl__train_zero_step(t, lo, count, n, loss);
    const cannl_model_api *api = t->api;
    char msg[256];
    double local = 0;
    int64_t elems = 0;
    void *block = api->grad_block(t->m, &elems);
    const double w = (double)count / (double)n;
    cannl__dist *d = t->dist;
    if (d->device) d->stream = t->ext->device_stream(t->m);
    d->reduce_begin(d, block, api->dtype, w);
    /* With the model's hook each gradient goes out as the backward pass finishes it (the
       same gradients in the same order on every rank); else the block after the pass: also
       when a batch smaller than P leaves some rank without examples, which therefore runs no
       backward pass to send them from (every rank decides alike, from n and P). */
    const int hooked = api->set_grad_hook != NULL && n >= d->size;
    if (hooked) api->set_grad_hook(t->m, grad_ready, d);
    if (api->set_example_offset) api->set_example_offset(t->m, lo); /* dropout's masks: one process's */
    if (count > 0)
        local = api->train_grads(t->m, (const void *const *)t->bufs, count);
    else if (d->device)
        t->ext->zero_grads(t->m);
    else
        memset(block, 0, (size_t)elems * cannl_dtype_size(api->dtype));
    if (hooked) api->set_grad_hook(t->m, NULL, NULL);
    const int sig = cannl__train_interrupted(); /* read once: a signal may come at any time */
    /* (and whether --checkpoint-minutes have passed on rank 0's clock: every rank saves alike) */
    double v[3] = {local * w, sig > 0 ? 1 : 0, d->rank == 0 && cannl__train_clock_due(t) ? 1 : 0};
    if (!hooked) d->reduce_part(d, 0, elems);
    if (d->reduce_end(d, msg, sizeof msg) || d->sum(d, v, 3, msg, sizeof msg))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    if (v[1] > 0) t->stop = sig > 0 ? sig : SIGTERM; /* some rank was asked to stop: all stop after this step */
    t->time_due = v[2] > 0;
    api->train_update(t->m);
    *loss = v[0];
    return CANNL__EXIT_OK;
}
