/* train_main.c - cannl_train_main, the training program every generated model shares: the
 * command line parsed and bound to the model, then one run, in this order (run below):
 *   train_setup.c       the model (fresh, --init or --resume: train_resume.c), the data, the
 *                       steps, the buffers, the metrics log
 *   train_checkpoint.c  the checkpoint's directory checked (and, later, every save and the
 *                       divergence checks before it)
 *   train_parallel.c    data-parallel ranks (train_dist.h), with ZeRO-1 train_zero.c
 *   train_loop.c        the epochs and steps, evaluations (train_eval.c) and records
 *   train_output.c      messages, records, progress and the final summary
 * trainer.h holds the run's state they share.
 *
 * The stop flag is the one piece of global state in the runtime: a signal handler can reach
 * nothing else. SIGINT, SIGTERM and SIGHUP (Ctrl-C, `timeout`, `docker stop`, systemd, Slurm,
 * Kubernetes; a closed terminal) set it while the training loop and the final save run (the
 * previous handlers are restored afterwards): the step finishes, the checkpoint is saved, and
 * the program exits with 128 + the signal's number. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted = 0; /* the signal that asked us to stop, or 0 */

static void on_stop_signal(int sig) { g_interrupted = sig; }

/* The signals that stop training gracefully, and their names for the message. */
static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
enum { NSTOP = sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0] };
static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

int cannl__train_interrupted(void) { return g_interrupted; }

/* One run: set up (every rank agreeing to go on), train with the stop signals caught, save,
   and the summary. Returns the exit status. */
static int run(cannl__trainer *t) {
    int rc;
    if ((rc = cannl__train_check_api(t))) return rc;
    if ((t->o.ntest > 0 || t->val.path) && !t->api->eval)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: model '%s' has no eval function",
                                   t->val.path ? "--val-stream" : "--test", t->api->name);
    rc = cannl__train_setup_model(t);
    if (!rc) rc = cannl__train_setup_data(t);
    if (!rc) rc = cannl__train_check_checkpoint_dir(t);
    if (!rc) rc = cannl__train_setup_run(t);
    if (!rc && t->dist && t->o.zero) rc = cannl__train_setup_zero(t);
    if (t->dist) { /* every rank goes on, or none (the one that failed said why) */
        char msg[256];
        int worst = rc;
        if (t->dist->max(t->dist, &worst, msg, sizeof msg)) return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", msg);
        if (!rc) rc = worst;
        if (!rc) rc = cannl__train_count_opt_bytes(t);
    }
    if (rc) return rc;
    if (t->step >= t->target && !t->o.quiet)
        printf("nothing to train: the run is at step %" PRId64 " and stops at step %" PRId64 "\n", t->step, t->target);

    /* SIGINT, SIGTERM, SIGHUP: finish the step, save, exit 128 + the signal. SA_RESETHAND: the
       same signal a second time ends the process at once. */
    struct sigaction sa, old[NSTOP];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    g_interrupted = 0;
    for (int i = 0; i < NSTOP; i++) sigaction(STOP_SIGNALS[i], &sa, &old[i]);
    t->t_start = t->last_print = t->saved_at = cannl__train_now();
    rc = cannl__train_loop(t);
    if (!rc && t->saved_step != t->step) rc = cannl__train_save(t);
    for (int i = 0; i < NSTOP; i++) sigaction(STOP_SIGNALS[i], &old[i], NULL);
    if (rc) return rc;
    const int sig = cannl__train_stopping(t);
    if (sig) {
        fprintf(stderr, "%s: interrupted by %s after step %" PRId64 "%s%s\n", t->o.prog, signal_name(sig), t->step,
                t->o.checkpoint ? "; checkpoint saved to " : "", t->o.checkpoint ? t->o.checkpoint : "");
        cannl__train_finish(t);
        return 128 + sig;
    }
    return cannl__train_finish(t);
}

static void cleanup(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->m) api->destroy(t->m);
    for (int32_t i = 0; i < api->num_inputs; i++) {
        if (t->train) cannl_dataset_free(&t->train[i]);
        if (t->test) cannl_dataset_free(&t->test[i]);
        if (t->bufs) cannl_free(t->bufs[i]);
        if (t->next) cannl_free(t->next[i]);
    }
    free(t->train);
    free(t->test);
    free(t->bufs);
    free(t->next);
    free(t->perm);
    free(t->idx);
    free(t->metrics);
    free(t->record);
    free(t->val_metrics);
    free(t->offsets);
    cannl__name_map_free(t->names);
    cannl__stream_close(&t->stream);
    cannl__stream_close(&t->val);
    free(t->state);
    free(t->shard);
    free(t->shard_start);
    free(t->opt_bytes);
    free(t->kept);
    cannl__train_opts_free(&t->o);
}

int cannl_train_main(const cannl_model_api *api, int argc, char **argv) {
    return cannl_train_main_ext(api, NULL, argc, argv);
}

int cannl_train_main_ext(const cannl_model_api *api, const cannl_model_ext *ext, int argc, char **argv) {
    return cannl__train_main_dist(api, ext, NULL, argc, argv);
}

int cannl__train_main_dist(const cannl_model_api *api, const cannl_model_ext *ext, cannl__dist *dist, int argc,
                           char **argv) {
    if (!api) {
        fprintf(stderr, "cannl_train_main: no model table\n");
        return CANNL__EXIT_USAGE;
    }
#ifdef SIGXFSZ
    /* Past a file-size limit (ulimit -f) a write fails with EFBIG and is reported like any
       other write error (the checkpoint's temporary file removed) instead of killing us. */
    signal(SIGXFSZ, SIG_IGN);
#endif
    cannl__trainer t;
    memset(&t, 0, sizeof t);
    t.api = api;
    t.ext = ext;
    t.dist = dist;
    char msg[512];
    /* Under mpirun every rank has the same command line: rank 0 alone prints the help and
       what is wrong with the flags (a bad CANNL_ISA, from a host's environment, every rank). */
    const int speaks = !dist || dist->rank == 0;
    int rc = cannl__train_parse(api, argc, argv, &t.o, msg, sizeof msg);
    if (rc == CANNL__EXIT_OK && t.o.help) {
        if (speaks) cannl__train_usage(api, t.o.prog, stdout);
        cannl__train_opts_free(&t.o);
        return CANNL__EXIT_OK;
    }
    if (rc == CANNL__EXIT_OK && t.o.stream) {
        rc = cannl__stream_bind(api, "--stream", t.o.stream, &t.stream, msg, sizeof msg);
        if (rc == CANNL__EXIT_OK && t.o.val_stream)
            rc = cannl__stream_bind(api, "--val-stream", t.o.val_stream, &t.val, msg, sizeof msg);
        if (rc == CANNL__EXIT_OK && t.o.val_stream && (t.val.input != t.stream.input || t.val.target != t.stream.target)) {
            snprintf(msg, sizeof msg, "--val-stream %s: binds %s,%s but --stream binds %s,%s (validation feeds the inputs "
                     "training feeds)", t.o.val_stream, api->inputs[t.val.input].name, api->inputs[t.val.target].name,
                     api->inputs[t.stream.input].name, api->inputs[t.stream.target].name);
            rc = CANNL__EXIT_USAGE;
        }
    } else if (rc == CANNL__EXIT_OK) {
        rc = cannl__bind_check(api, t.o.data, t.o.ndata, "--data", msg, sizeof msg);
        if (rc == CANNL__EXIT_OK && t.o.ntest > 0)
            rc = cannl__bind_check(api, t.o.test, t.o.ntest, "--test", msg, sizeof msg);
    }
    cannl_isa isa;
    cannl_error isa_err;
    int isa_bad = 0;
    if (rc == CANNL__EXIT_OK && cannl_isa_select(&isa, &isa_err) != CANNL_OK) { /* a bad CANNL_ISA */
        snprintf(msg, sizeof msg, "%s", isa_err.msg);
        rc = CANNL__EXIT_USAGE;
        isa_bad = 1;
    }
    if (rc != CANNL__EXIT_OK) {
        if (speaks)
            fprintf(stderr, "%s: error: %s\n", t.o.prog, msg);
        else if (isa_bad)
            fprintf(stderr, "%s (rank %d): error: %s\n", t.o.prog, dist->rank, msg);
        cannl__train_opts_free(&t.o);
        return rc;
    }

    t.has_inputs = api->num_inputs > 0;
    t.streamed = t.o.stream != NULL;
    t.seed = t.o.seed;
    t.shuffle = !t.o.no_shuffle;
    t.cosine = t.o.cosine;
    t.override = t.o.schedule_set;
    t.batch = t.o.batch_set ? t.o.batch : (CANNL__DEFAULT_BATCH < api->max_batch ? CANNL__DEFAULT_BATCH : api->max_batch);
    t.saved_step = t.tested_step = t.resumed_step = t.validated_step = -1;
    t.last_lr = NAN;
    t.checkpointing = t.o.checkpoint != NULL; /* (also on ranks that do not write it: ZeRO-1 gathers for it) */
    t.tty = isatty(fileno(stdout));
    t.train = calloc((size_t)api->num_inputs + 1, sizeof *t.train);
    t.test = calloc((size_t)api->num_inputs + 1, sizeof *t.test);
    if (!t.train || !t.test)
        rc = cannl__train_report(&t, CANNL__EXIT_FAIL, "out of memory");
    else if (!dist || (rc = cannl__train_setup_rank(&t)) == CANNL__EXIT_OK)
        rc = run(&t);

    cannl_error err;
    if (t.log && cannl_metrics_close(t.log, &err) != CANNL_OK && rc == CANNL__EXIT_OK)
        rc = cannl__train_report(&t, CANNL__EXIT_FAIL, "%s", err.msg);
    cleanup(&t);
    return rc;
}
