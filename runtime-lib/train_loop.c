/* train_loop.c - the training loop: epochs of batches (or a stream run's steps), each step
 * on this process's batch or its rank's slice of it, the lr schedule, the records and checks
 * after a step, the periodic checkpoints (--checkpoint-every, --checkpoint-minutes), and what ends
 * an epoch (test evaluation, its record and line, a checkpoint).
 *
 * Step bookkeeping: the global step s counts optimisation steps since the start of the run
 * (including resumed ones). With spe = ceil(count / batch) steps per epoch, step s+1 is batch
 * s % spe of epoch s / spe, and epoch e visits the examples in the order of a Fisher-Yates
 * shuffle seeded by epoch_seed(seed, e). So the batch of any step follows from (seed, batch,
 * count, s) alone, which is what makes a resumed run continue bit for bit. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define M_PI_VALUE 3.14159265358979323846

/* A well-mixed, distinct seed for each (seed, epoch) pair (splitmix64 finaliser). */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
    return mix64(mix64(seed) + ((uint64_t)epoch + 1) * 0x9E3779B97F4A7C15u);
}

/* Whether --val-stream is evaluated after step `step`: every --eval-every steps and at the last. */
static int validation_due(const cannl__trainer *t, int64_t step) {
    return t->val.path && ((t->o.eval_every > 0 && step % t->o.eval_every == 0) || step == t->target);
}

/* Rank r's slice [lo, lo + count) of a global batch of n examples (the first n % P ranks
   get one more): the whole batch alone. */
static void slice(const cannl__trainer *t, int64_t n, int64_t *lo, int64_t *count) {
    const int64_t p = t->dist ? t->dist->size : 1, r = t->dist ? t->dist->rank : 0;
    const int64_t q = n / p, extra = n % p;
    *lo = r * q + (r < extra ? r : extra);
    *count = q + (r < extra);
}

/* After the last batch of epoch `epoch` (0-based). */
static int end_epoch(cannl__trainer *t, int64_t epoch, int64_t seen, double t_epoch) {
    const double train_loss = t->ep_examples > 0 ? t->ep_loss / (double)t->ep_examples : NAN;
    int rc;
    cannl__train_end_line(t);
    if (t->ntest > 0 && (rc = cannl__train_evaluate(t))) return rc;
    if ((rc = cannl__train_log_epoch(t, epoch + 1, train_loss, t->tested_step == t->step))) return rc;
    cannl__train_print_epoch(t, epoch, train_loss, seen, t_epoch);
    return cannl__train_save(t);
}

/* After a step of a stream run: the finiteness check and the record every --log-every steps,
   the validation when it is due. */
static int stream_step_done(cannl__trainer *t) {
    int rc;
    const int log = t->o.log_every > 0 && t->step % t->o.log_every == 0;
    int val = validation_due(t, t->step);
    if (log && (rc = cannl__train_check_state(t))) return rc;
    if (val) {
        if ((rc = cannl__train_validate(t))) return rc;
        val = t->validated_step == t->step; /* not when a signal cut it short */
        if (val) cannl__train_print_validation(t);
    }
    return log || val ? cannl__train_stream_record(t, val) : CANNL__EXIT_OK;
}

/* Batch b of the current epoch (a stream run: the step's windows) into the batch buffers, unless
   a prefetching model was handed it already, and the next one to such a model: the global
   batch's n examples, this rank's slice [lo, lo + count) of them. */
static int stage_batch(cannl__trainer *t, int64_t b, int64_t *n, int64_t *lo, int64_t *count) {
    const cannl_model_api *api = t->api;
    cannl_error err;
    if (t->streamed) {
        *n = t->batch;
        slice(t, *n, lo, count);
        if (t->dist)
            cannl__stream_train_slice(&t->stream, t->seed, t->step, *n, *lo, *count, t->offsets, t->bufs);
        else if (!t->staged)
            cannl__stream_train_batch(&t->stream, t->seed, t->step, *n, t->offsets, t->bufs);
        t->staged = 0;
        /* The next step's windows go to a prefetching model now, unless a validation,
           which uses the batch buffers, comes first. */
        if (t->next && t->step + 1 < t->target && !validation_due(t, t->step + 1)) {
            cannl__stream_train_batch(&t->stream, t->seed, t->step + 1, *n, t->offsets, t->next);
            t->ext->prefetch(t->m, (const void *const *)t->next, *n);
            t->staged = 1;
        }
    } else if (t->has_inputs) {
        *n = t->ntrain - b * t->batch < t->batch ? t->ntrain - b * t->batch : t->batch;
        slice(t, *n, lo, count);
        if (!t->staged && *count > 0 &&
            cannl__bind_gather(api, t->train, t->perm + b * t->batch + *lo, *count, t->bufs, &err) != CANNL_OK) {
            cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
            if (t->dist) t->dist->abort(t->dist, CANNL__EXIT_FAIL); /* the others wait for this rank */
            return CANNL__EXIT_FAIL;
        }
        t->staged = 0;
        /* A model that prefetches gets the next batch of this epoch now: it copies it
           to its device while this step runs. */
        if (t->next && b + 1 < t->spe && t->step + 1 < t->target) {
            const int64_t b2 = b + 1;
            const int64_t n2 = t->ntrain - b2 * t->batch < t->batch ? t->ntrain - b2 * t->batch : t->batch;
            if (cannl__bind_gather(api, t->train, t->perm + b2 * t->batch, n2, t->next, &err) != CANNL_OK)
                return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
            t->ext->prefetch(t->m, (const void *const *)t->next, n2);
            t->staged = 1;
        }
    }
    return CANNL__EXIT_OK;
}

int cannl__train_loop(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    while (t->step < t->target && !cannl__train_stopping(t)) {
        const int64_t epoch = t->step / t->spe;
        int64_t b = t->step % t->spe;
        if (t->has_inputs && !t->streamed) {
            for (int64_t i = 0; i < t->ntrain; i++) t->perm[i] = i;
            if (t->shuffle) {
                cannl_rng rng;
                cannl_rng_seed(&rng, epoch_seed(t->seed, epoch));
                cannl_shuffle(&rng, t->perm, t->ntrain);
            }
        }
        const double t_epoch = cannl__train_now();
        int64_t seen = 0;
        if (b == 0) { /* a new epoch (else: a resumed one, its sums from the checkpoint) */
            t->ep_loss = 0;
            t->ep_examples = 0;
        }
        for (; b < t->spe && t->step < t->target && !cannl__train_stopping(t); b++) {
            int64_t n = 1, lo = 0, count = 1; /* the global batch; this rank's slice of it */
            int rc = stage_batch(t, b, &n, &lo, &count);
            if (rc) return rc;
            if (t->cosine) /* the lr of step s (0-based) of a run of `horizon` steps */
                api->set_lr(t->m, t->base_lr * 0.5 * (1 + cos(M_PI_VALUE * (double)t->step / (double)t->horizon)));
            double loss = NAN;
            if (t->dist) {
                rc = cannl__train_dist_step(t, lo, count, n, &loss);
                if (rc) {
                    t->dist->abort(t->dist, rc);
                    return rc;
                }
            } else {
                loss = api->train_step(t->m, (const void *const *)t->bufs, n);
            }
            if (t->staged) {
                void **swap = t->bufs;
                t->bufs = t->next;
                t->next = swap;
            }
            if (t->ext && t->ext->error && t->ext->error(t->m)) {
                cannl__train_report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
                if (t->dist) t->dist->abort(t->dist, CANNL__EXIT_FAIL); /* the others wait for this rank */
                return CANNL__EXIT_FAIL;
            }
            t->step++;
            if ((rc = cannl__train_check_loss(t, "loss", loss))) return rc;
            t->steps_run++;
            t->examples_run += n;
            t->ep_loss += loss * (double)n;
            t->ep_examples += n;
            seen += n;
            if (t->streamed) {
                if ((rc = stream_step_done(t))) return rc;
            } else if (t->o.log_every > 0 && t->step % t->o.log_every == 0) {
                if ((rc = cannl__train_check_state(t)) || (rc = cannl__train_log_step(t, epoch, loss))) return rc;
            }
            cannl__train_progress(t, epoch, b + 1, loss);
            /* A periodic save, after the step's records (so a checkpoint at step S has every record
               up to S behind it); not at an epoch's last step, whose end saves after its record. */
            if (b + 1 < t->spe && t->saved_step != t->step && cannl__train_checkpoint_due(t) &&
                (rc = cannl__train_save(t)))
                return rc;
        }
        if (b == t->spe) {
            int rc = end_epoch(t, epoch, seen, t_epoch);
            if (rc) return rc;
        }
    }
    cannl__train_end_line(t);
    return CANNL__EXIT_OK;
}
