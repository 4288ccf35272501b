/* train_output.c - what the training program says: its messages ("<prog>: error: ..."), the
 * metrics log's records (a step's loss, an epoch's end, a stream run's step), the progress
 * line, the per-epoch and validation lines, and the final summary. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double cannl__train_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "<prog>: <kind>: <message>" on stderr (also the inference program's). */
void cannl__vmessage(const char *prog, const char *kind, const char *fmt, va_list ap) {
    fflush(stdout);
    fprintf(stderr, "%s: %s: ", prog, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* Print "<prog>: error: <message>" and return the exit status `code`. */
int cannl__train_report(const cannl__trainer *t, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(t->o.prog, "error", fmt, ap);
    va_end(ap);
    return code;
}

void cannl__train_warn(const cannl__trainer *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(t->o.prog, "warning", fmt, ap);
    va_end(ap);
}

static int write_record(cannl__trainer *t, size_t n) {
    if (!t->log) return CANNL__EXIT_OK;
    cannl_error err;
    if (cannl_metrics_write(t->log, t->record, n, &err) != CANNL_OK)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    return CANNL__EXIT_OK;
}

/* A record's "lr": the learning rate the last step used (the spec's schedule applied, in the
   model's precision); before this process's first step, the resumed checkpoint's (its
   "last_lr"); else (no step taken, or a model that cannot say) the lr as set. */
static double record_lr(const cannl__trainer *t) {
    if (t->api->get_last_lr && t->steps_run > 0) return t->api->get_last_lr(t->m);
    if (t->api->get_last_lr && !isnan(t->last_lr)) return t->last_lr;
    return t->api->get_lr ? t->api->get_lr(t->m) : t->base_lr;
}

/* The record of a step (every --log-every): epoch (1-based), step, the loss train_step returned. */
int cannl__train_log_step(cannl__trainer *t, int64_t epoch, double loss) {
    t->record[0] = (cannl_metric)CANNL_METRIC_INT("epoch", epoch + 1);
    t->record[1] = (cannl_metric)CANNL_METRIC_INT("step", t->step);
    t->record[2] = (cannl_metric)CANNL_METRIC("loss", loss);
    return write_record(t, 3);
}

/* The record of an epoch's end (train_loss: its mean training loss), or of the final test
   evaluation of a run that stopped mid-epoch (train_loss NaN: left out): epoch, step,
   train_loss, lr, test_loss and the metrics when there is a test set, elapsed seconds. */
int cannl__train_log_epoch(cannl__trainer *t, int64_t epoch, double train_loss, int tested) {
    size_t n = 0;
    t->record[n++] = (cannl_metric)CANNL_METRIC_INT("epoch", epoch);
    t->record[n++] = (cannl_metric)CANNL_METRIC_INT("step", t->step);
    if (!isnan(train_loss)) t->record[n++] = (cannl_metric)CANNL_METRIC("train_loss", train_loss);
    t->record[n++] = (cannl_metric)CANNL_METRIC("lr", record_lr(t));
    if (tested) {
        t->record[n++] = (cannl_metric)CANNL_METRIC("test_loss", t->test_loss);
        for (int32_t k = 0; k < t->api->num_metrics; k++)
            t->record[n++] = (cannl_metric)CANNL_METRIC(t->api->metric_names[k], t->metrics[k]);
    }
    t->record[n++] = (cannl_metric)CANNL_METRIC("elapsed", cannl__train_now() - t->t_start);
    return write_record(t, n);
}

/* The record of a stream run at this step: step, train_loss (the mean of the steps since the last
   multiple of --log-every; with --log-every 0, since the start),
   lr, val_loss and val_<metric> when it was validated now, elapsed seconds. */
int cannl__train_stream_record(cannl__trainer *t, int validated) {
    const cannl_model_api *api = t->api;
    size_t n = 0;
    t->record[n++] = (cannl_metric)CANNL_METRIC_INT("step", t->step);
    t->record[n++] =
        (cannl_metric)CANNL_METRIC("train_loss", t->ep_examples > 0 ? t->ep_loss / (double)t->ep_examples : NAN);
    t->record[n++] = (cannl_metric)CANNL_METRIC("lr", record_lr(t));
    char (*keys)[72] = NULL;
    if (validated) {
        keys = calloc((size_t)api->num_metrics + 1, sizeof *keys);
        if (!keys) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
        t->record[n++] = (cannl_metric)CANNL_METRIC("val_loss", t->val_loss);
        for (int32_t j = 0; j < api->num_metrics; j++) {
            snprintf(keys[j], sizeof keys[j], "val_%s", api->metric_names[j]);
            t->record[n++] = (cannl_metric)CANNL_METRIC(keys[j], t->val_metrics[j]);
        }
    }
    t->record[n++] = (cannl_metric)CANNL_METRIC("elapsed", cannl__train_now() - t->t_start);
    if (t->o.log_every > 0 && t->step % t->o.log_every == 0) { /* a record depends on its step alone */
        t->ep_loss = 0;
        t->ep_examples = 0;
    }
    int rc = write_record(t, n);
    free(keys);
    return rc;
}

void cannl__train_end_line(cannl__trainer *t) {
    if (t->line_open) cannl_progress_finish(stdout);
    t->line_open = 0;
}

void cannl__train_progress(cannl__trainer *t, int64_t epoch, int64_t step_in_epoch, double loss) {
    if (t->o.quiet) return;
    double now = cannl__train_now();
    if (t->tty) {
        if (now - t->last_print < 0.1 && t->step != t->target) return;
    } else if (t->o.log_every == 0 || t->step % t->o.log_every != 0) {
        return;
    }
    t->last_print = now;
    double el = now - t->t_start;
    cannl_progress p = {t->streamed ? 0 : epoch + 1, t->epochs_total, step_in_epoch,
                        t->has_inputs && !t->streamed ? t->spe : t->target, loss,
                        el > 0 ? (double)t->examples_run / el : -1,
                        t->steps_run > 0 ? (double)(t->target - t->step) * el / (double)t->steps_run : -1};
    cannl_progress_print(stdout, &p);
    t->line_open = t->tty;
}

/* The line after an epoch (0-based): its mean training loss, the test results, its time. */
void cannl__train_print_epoch(cannl__trainer *t, int64_t epoch, double train_loss, int64_t seen, double t_epoch) {
    if (t->o.quiet) return;
    double el = cannl__train_now() - t_epoch;
    printf("epoch %" PRId64 "/%" PRId64 "  train_loss %.4f", epoch + 1, t->epochs_total, train_loss);
    if (t->ntest > 0 && t->tested_step == t->step) {
        printf("  test_loss %.4f", t->test_loss);
        for (int32_t k = 0; k < t->api->num_metrics; k++) printf("  %s %.4f", t->api->metric_names[k], t->metrics[k]);
    }
    printf("  (%.1f s, %.1f ex/s)\n", el, el > 0 ? (double)seen / el : 0.0);
    fflush(stdout);
}

/* Print a validation's line. */
void cannl__train_print_validation(cannl__trainer *t) {
    if (t->o.quiet) return;
    cannl__train_end_line(t);
    printf("step %" PRId64 "/%" PRId64 "  val_loss %.4f", t->step, t->target, t->val_loss);
    for (int32_t j = 0; j < t->api->num_metrics; j++) printf("  val_%s %.4f", t->api->metric_names[j], t->val_metrics[j]);
    printf("\n");
    fflush(stdout);
}

/* Final test evaluation (unless the last epoch's is current) and the summary. */
int cannl__train_finish(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->val.path && !cannl__train_stopping(t)) {
        if (t->validated_step != t->step) { /* (its record unless a run resumed here logged it) */
            int rc = cannl__train_validate(t);
            if (!rc && !t->val_logged) rc = cannl__train_stream_record(t, 1);
            if (rc) return rc;
        }
        printf("val loss: %.4f\n", t->val_loss);
        for (int32_t k = 0; k < api->num_metrics; k++) printf("val %s: %.4f\n", api->metric_names[k], t->val_metrics[k]);
    }
    if (t->ntest > 0 && !cannl__train_stopping(t)) {
        if (t->tested_step != t->step) {
            int rc = cannl__train_evaluate(t);
            /* (epoch: the one the last step belongs to, also at an epoch's end a resumed run logs) */
            const int64_t epoch = t->step > 0 ? (t->step - 1) / t->spe + 1 : 1;
            if (!rc && !t->test_logged) rc = cannl__train_log_epoch(t, epoch, NAN, 1);
            if (rc) return rc;
        }
        printf("test loss: %.4f\n", t->test_loss);
        for (int32_t k = 0; k < api->num_metrics; k++) printf("test %s: %.4f\n", api->metric_names[k], t->metrics[k]);
    }
    double el = cannl__train_now() - t->t_start;
    printf("trained to step %" PRId64 " in %.2f s (%.1f ex/s)\n", t->step, el,
           el > 0 ? (double)t->examples_run / el : 0.0);
    if (t->dist && t->steps_run > 0)
        printf("data-parallel%s: %d ranks, %" PRId64 " gradient bytes %s per step%s%s%s, %.2f ms per step in the "
               "%s (rank 0: %.1f%% of the time)\n",
               t->o.zero ? " (ZeRO-1)" : "", t->dist->size, t->dist->bytes_reduced / t->steps_run,
               t->o.zero ? "reduce-scattered" : "all-reduced", t->dist->how ? " (" : "",
               t->dist->how ? t->dist->how : "", t->dist->how ? ")" : "", 1e3 * t->dist->reduce_s / (double)t->steps_run,
               t->o.zero ? "reduce-scatter" : "all-reduce", el > 0 ? 100 * t->dist->reduce_s / el : 0.0);
    if (t->opt_bytes) { /* what each rank holds: all of it, or with ZeRO-1 its shard's */
        const int64_t all = t->api->opt_state_start[t->api->num_params];
        printf("optimiser state: %.0f bytes on this rank of %" PRId64 "%s", t->opt_bytes[0], all,
               t->o.zero ? " (ZeRO-1; per rank:" : " (each rank holds all of it)\n");
        for (int r = 0; t->o.zero && r < t->dist->size; r++)
            printf(" %.0f%s", t->opt_bytes[r], r + 1 < t->dist->size ? "" : ")\n");
    }
    fflush(stdout);
    return CANNL__EXIT_OK;
}
