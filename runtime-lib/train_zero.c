/* train_zero.c - ZeRO-1 (--zero 1 under a launcher): the params cut into one shard per rank,
 * each rank holding the optimiser state of its shard only and updating those params, the
 * gradients reduce-scattered and the updated params broadcast from their owners; for each
 * checkpoint rank 0 gathers the whole optimiser state (then holds its shard again). */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ZeRO-1: every rank's optimiser state to rank 0, which holds all of it for the checkpoint
   (which then holds what one process's would); every rank calls it at every save, and rank 0
   calls zero_hold after the save. */
static int gather_state(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    const int32_t np = api->num_params;
    const int64_t elem = (int64_t)cannl_dtype_size(api->dtype);
    char msg[256];
    if (d->rank == 0 && api->shard_opt_state(t->m, 0, np))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory gathering the optimiser state (%" PRId64
                                   " bytes)", api->opt_state_start[np]);
    int64_t *start = calloc((size_t)d->size + 1, sizeof *start); /* each rank's part, in elements */
    if (!start) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    for (int r = 0; r <= d->size; r++) start[r] = api->opt_state_start[t->shard[r]] / elem;
    const int rc = d->gather(d, api->opt_state(t->m), d->rank == 0 ? api->opt_state(t->m) : NULL, api->dtype, start, msg,
                             sizeof msg);
    free(start);
    return rc ? cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg) : CANNL__EXIT_OK;
}

/* ZeRO-1: this rank's optimiser state only, that of the params it updates. */
static int zero_hold(cannl__trainer *t) {
    const int r = t->dist->rank;
    if (t->api->shard_opt_state(t->m, t->shard[r], t->shard[r + 1]))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory sharding the optimiser state");
    return CANNL__EXIT_OK;
}

/* A save with ZeRO-1: every rank's optimiser state gathered to rank 0, which saves and then
   holds its own shard again; every rank calls it at the same saves. */
int cannl__train_zero_save(cannl__trainer *t) {
    int rc = gather_state(t);
    if (!rc) rc = cannl__train_save_now(t);
    if (t->dist->rank == 0) { /* back to its shard, saved or not */
        const int held = zero_hold(t);
        if (!rc) rc = held;
    }
    if (!rc) t->saved_step = t->step; /* as rank 0's: every rank gathers at the same saves */
    if (rc) t->dist->abort(t->dist, rc); /* the others would wait for this rank at the next collective */
    return rc;
}

/* ZeRO-1's shards: params in api order cut into P contiguous ranges of about equal element
   counts (gradients), and the grad block's elements they cover; the state tensors' pointers. */
static int zero_shards(cannl__trainer *t) {
    if (t->shard_start) return CANNL__EXIT_OK;
    const cannl_model_api *api = t->api;
    const int p = t->dist->size;
    const int32_t np = api->num_params;
    int64_t elems = 0;
    api->grad_block(t->m, &elems);
    if (api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts",
                                   api->name);
    int64_t total = 0, last = -1;
    for (int32_t i = 0; i < np; i++) {
        const int64_t at = api->grad_offsets[i];
        if (at < 0) continue;
        if (at <= last || at + api->params[i].size > elems)
            return cannl__train_report(t, CANNL__EXIT_FAIL,
                                       "model '%s': the grad block is not in param order (param '%s')", api->name,
                                       api->params[i].name);
        last = at;
        total += api->params[i].size;
    }
    t->shard = calloc((size_t)p + 1, sizeof *t->shard);
    t->shard_start = calloc((size_t)p + 1, sizeof *t->shard_start);
    if (!t->shard || !t->shard_start) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    /* Rank r's first param: where the gradient elements before it come closest to r * total / P. */
    int32_t i = 0;
    int64_t before = 0; /* gradient elements of params [0, i) */
    for (int r = 1; r < p; r++) {
        const double target = (double)total * r / p;
        while (i < np) {
            const int64_t next = before + (api->grad_offsets[i] >= 0 ? api->params[i].size : 0);
            if (fabs((double)next - target) > fabs((double)before - target)) break;
            before = next;
            i++;
        }
        t->shard[r] = i;
    }
    t->shard[p] = np;
    for (int r = 1; r < p; r++) {
        int32_t j = t->shard[r];
        while (j < np && api->grad_offsets[j] < 0) j++;
        t->shard_start[r] = j < np ? api->grad_offsets[j] : elems;
    }
    t->shard_start[p] = elems;
    return CANNL__EXIT_OK;
}

/* ZeRO-1 under way: the shards, and this rank's optimiser state cut to its own. */
int cannl__train_setup_zero(cannl__trainer *t) {
    int rc = zero_shards(t);
    return rc ? rc : zero_hold(t);
}

/* A ZeRO-1 step: the weighted gradients reduce-scattered (each rank receives the sum of its
   shard), clip_grad_norm's squared norm summed over the shards, each rank's update of its
   params (reading and writing only their optimiser state), then each param broadcast from the
   rank that updated it. */
int cannl__train_zero_step(cannl__trainer *t, int64_t first, int64_t count, int64_t n, double *loss) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    char msg[256];
    int rc = zero_shards(t);
    if (rc) return rc;
    int64_t elems = 0;
    void *block = api->grad_block(t->m, &elems);
    const double w = (double)count / (double)n;
    double local = 0;
    if (api->set_example_offset) api->set_example_offset(t->m, first); /* dropout's masks: one process's */
    if (count > 0)
        local = api->train_grads(t->m, (const void *const *)t->bufs, count);
    else
        memset(block, 0, (size_t)elems * cannl_dtype_size(api->dtype));
    const int64_t lo = t->shard_start[d->rank], hi = t->shard_start[d->rank + 1];
    double sq = 0;
    if (api->dtype == CANNL_F64) {
        double *x = block;
        if (w != 1)
            for (int64_t i = 0; i < elems; i++) x[i] *= w;
        if (d->reduce_scatter(d, block, api->dtype, t->shard_start, msg, sizeof msg))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
        for (int64_t i = lo; i < hi; i++) sq += x[i] * x[i];
    } else {
        float *x = block;
        const float f = (float)w;
        if (w != 1)
            for (int64_t i = 0; i < elems; i++) x[i] *= f;
        if (d->reduce_scatter(d, block, api->dtype, t->shard_start, msg, sizeof msg))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
        for (int64_t i = lo; i < hi; i++) sq += (double)x[i] * x[i];
    }
    const int sig = cannl__train_interrupted(); /* read once: a signal may come at any time */
    /* (v[3]: --checkpoint-minutes passed on rank 0's clock; the gathering save is collective) */
    double v[4] = {local * w, sig > 0 ? 1 : 0, sq, d->rank == 0 && cannl__train_clock_due(t) ? 1 : 0};
    if (d->sum(d, v, 4, msg, sizeof msg)) return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    if (v[1] > 0) t->stop = sig > 0 ? sig : SIGTERM; /* some rank was asked to stop: all stop after this step */
    t->time_due = v[3] > 0;
    api->set_update_shard(t->m, t->shard[d->rank], t->shard[d->rank + 1], v[2]);
    api->train_update(t->m);
    for (int32_t i = 0, owner = 0; i < api->num_params; i++) {
        while (owner + 1 < d->size && t->shard[owner + 1] <= i) owner++;
        /* Only what the update changed: not a frozen param or a buffer (the same everywhere),
           nor batch_norm's running statistics (each rank's own, as without ZeRO-1). */
        if (api->grad_offsets[i] < 0) continue;
        if (d->bcast(d, t->state[i].data, api->params[i].size, api->dtype, owner, msg, sizeof msg))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    }
    *loss = v[0];
    return CANNL__EXIT_OK;
}
