/* train_eval.c - the test set's evaluation (--test, after every epoch and at the end) and a
 * stream run's validation (--val-stream): the loss and every metric as means over the
 * examples, in fixed batches, split over the ranks of a data-parallel run and summed. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <stdlib.h>

/* Evaluation over ranks: rank r takes the batches k with k % P == r (eval_first, then every
   eval_stride-th); sum_over_ranks then adds up the ranks' sums in place (reporting a failure:
   nonzero). One process: every batch, and the sums stay. */
static int64_t eval_first(const cannl__trainer *t) { return t->dist ? (int64_t)t->dist->rank : 0; }
static int64_t eval_stride(const cannl__trainer *t) { return t->dist ? (int64_t)t->dist->size : 1; }

/* SIGINT, SIGTERM or SIGHUP during an evaluation of one process ends it after the batch in
   hand (an evaluation of a large test set or many --eval-batches takes minutes): nothing is
   recorded for it, tested_step / validated_step stay, and the run saves and stops. Ranks of a
   data-parallel run sum their batches together, so they finish the evaluation and stop after it. */
static int eval_cut(const cannl__trainer *t) { return !t->dist && cannl__train_interrupted(); }

static int sum_over_ranks(cannl__trainer *t, double *sum, int32_t count) {
    char msg[256];
    if (!t->dist || t->dist->sum(t->dist, sum, count, msg, sizeof msg) == 0) return 0;
    cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    return 1;
}

/* Data-parallel: the state no gradient moves set to rank 0's on every rank (batch_norm's
   running statistics, which each rank updates from its own slices; buffers and frozen params
   are the same everywhere), so that an evaluation split over the ranks is that of the
   checkpoint rank 0 writes. Not for a CUDA model (its state is device memory). */
static int sync_untrained(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    char msg[256];
    if (!d || d->size == 1 || d->device || !api->grad_offsets) return CANNL__EXIT_OK;
    if (api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts",
                                   api->name);
    for (int32_t i = 0; i < api->num_params; i++)
        if (api->grad_offsets[i] < 0 &&
            d->bcast(d, t->state[i].data, api->params[i].size, api->dtype, 0, msg, sizeof msg))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
    return CANNL__EXIT_OK;
}

/* Evaluate the test set in order, in batches; averages weighted by n. Sets tested_step unless
   cut short by a signal (eval_cut). */
int cannl__train_evaluate(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    const int synced = sync_untrained(t);
    if (synced) return synced;
    double loss_sum = 0;
    double *sum = calloc((size_t)api->num_metrics + 1, sizeof *sum); /* the metrics, then the loss */
    if (!sum) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    cannl_error err;
    const int64_t first = eval_first(t), stride = eval_stride(t);
    for (int64_t start = first * t->batch; start < t->ntest; start += stride * t->batch) {
        if (eval_cut(t)) {
            free(sum);
            return CANNL__EXIT_OK;
        }
        int64_t n = t->ntest - start < t->batch ? t->ntest - start : t->batch;
        for (int64_t j = 0; j < n; j++) t->idx[j] = start + j;
        if (cannl__bind_gather(api, t->test, t->idx, n, t->bufs, &err) != CANNL_OK) {
            free(sum);
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        }
        double loss = 0;
        api->eval(t->m, (const void *const *)t->bufs, n, &loss, t->metrics);
        if (t->ext && t->ext->error && t->ext->error(t->m)) {
            free(sum);
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
        }
        loss_sum += loss * (double)n;
        for (int32_t k = 0; k < api->num_metrics; k++) sum[k] += t->metrics[k] * (double)n;
    }
    sum[api->num_metrics] = loss_sum;
    if (sum_over_ranks(t, sum, api->num_metrics + 1)) {
        free(sum);
        return CANNL__EXIT_FAIL;
    }
    loss_sum = sum[api->num_metrics];
    t->test_loss = loss_sum / (double)t->ntest;
    for (int32_t k = 0; k < api->num_metrics; k++) t->metrics[k] = sum[k] / (double)t->ntest;
    free(sum);
    const int rc = cannl__train_check_loss(t, "test loss", t->test_loss);
    if (rc) return rc;
    t->tested_step = t->step;
    return CANNL__EXIT_OK;
}

/* val_loss and val_<metric> over --eval-batches fixed batches of --batch windows of --val-stream.
   Sets validated_step unless cut short by a signal (eval_cut). */
int cannl__train_validate(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    const int synced = sync_untrained(t);
    if (synced) return synced;
    const int64_t batches = t->o.eval_batches, n = t->batch;
    double loss_sum = 0;
    double *sum = calloc((size_t)api->num_metrics + 1, sizeof *sum); /* the metrics, then the loss */
    if (!sum) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    const int64_t first = eval_first(t), stride = eval_stride(t);
    for (int64_t k = first; k < batches; k += stride) {
        if (eval_cut(t)) {
            free(sum);
            return CANNL__EXIT_OK;
        }
        cannl__stream_val_batch(&t->val, batches, n, k, t->bufs);
        double loss = 0;
        api->eval(t->m, (const void *const *)t->bufs, n, &loss, t->val_metrics);
        if (t->ext && t->ext->error && t->ext->error(t->m)) {
            free(sum);
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
        }
        loss_sum += loss;
        for (int32_t j = 0; j < api->num_metrics; j++) sum[j] += t->val_metrics[j];
    }
    sum[api->num_metrics] = loss_sum;
    if (sum_over_ranks(t, sum, api->num_metrics + 1)) {
        free(sum);
        return CANNL__EXIT_FAIL;
    }
    loss_sum = sum[api->num_metrics];
    t->val_loss = loss_sum / (double)batches;
    for (int32_t j = 0; j < api->num_metrics; j++) t->val_metrics[j] = sum[j] / (double)batches;
    free(sum);
    const int rc = cannl__train_check_loss(t, "validation loss", t->val_loss);
    if (rc) return rc;
    t->validated_step = t->step;
    return CANNL__EXIT_OK;
}
