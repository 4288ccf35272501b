/* train_main.c - cannl_train_main, the training program every generated
 * model shares: set up the model (fresh, --init or --resume), load and bind
 * the data, run the epochs, evaluate, log, checkpoint.
 *
 * Step bookkeeping: the global step s counts optimisation steps since the
 * start of the run (including resumed ones). With spe = ceil(count / batch)
 * steps per epoch, step s+1 is batch s % spe of epoch s / spe, and epoch e
 * visits the examples in the order of a Fisher-Yates shuffle seeded by
 * epoch_seed(seed, e). So the batch of any step follows from (seed, batch,
 * count, s) alone, which is what makes a resumed run continue bit for bit.
 *
 * The stop flag is the one piece of global state in the runtime: a signal
 * handler can reach nothing else. SIGINT, SIGTERM and SIGHUP (Ctrl-C,
 * `timeout`, `docker stop`, systemd, Slurm, Kubernetes; a closed terminal)
 * set it while the training loop and the final save run (the previous
 * handlers are restored afterwards): the step finishes, the checkpoint is
 * saved, and the program exits with 128 + the signal's number.
 *
 * Divergence: the loss of every step is checked (it is returned anyway), and
 * every state tensor (params and optimiser state) at each --log-every step
 * and before every save. A nan or inf stops the run with exit status 1
 * before anything is saved, so the last checkpoint stays good. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"
#include "train_dist.h"
#include "train_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define M_PI_VALUE 3.14159265358979323846

static volatile sig_atomic_t g_interrupted = 0; /* the signal that asked us to stop, or 0 */

static void on_stop_signal(int sig) { g_interrupted = sig; }

/* The signals that stop training gracefully, and their names for the message. */
static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
enum { NSTOP = sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0] };
static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

typedef struct trainer {
    const cannl_model_api *api;
    cannl__dist *dist;             /* data-parallel ranks (train_dist.h), or NULL: one process */
    char prog[96];                 /* a rank's name in messages: "<prog> (rank r)" */
    cannl__train_opts o;
    void *m;
    int has_inputs;
    int streamed;                  /* --stream: batches of token windows, one endless epoch */
    cannl__stream stream, val;     /* --stream, --val-stream (val.path NULL: none) */
    int64_t *offsets;              /* a stream batch's window offsets (batch) */
    cannl__name_map *names;        /* --name-map, or NULL */
    int64_t validated_step;        /* step of the last validation, -1: none */
    double val_loss;               /* its loss (metrics in ->val_metrics) */
    double *val_metrics;           /* num_metrics */
    cannl_dataset *train, *test;   /* num_inputs each */
    int64_t ntrain, ntest;
    int64_t ck_examples;           /* a resumed run's example count, 0: unknown */
    void **bufs;                   /* one batch buffer per input */
    const cannl_model_ext *ext;    /* the model's extras, or NULL */
    void **next;                   /* with ext->prefetch: the next batch, gathered ahead */
    int staged;                    /* next holds the batch of the coming step */
    int64_t *perm, *idx;           /* epoch order (ntrain), eval indices (batch) */
    double *metrics;               /* num_metrics */
    cannl_metric *record;          /* a JSONL record: epoch, step, loss, metrics */
    cannl_metrics_log *log;
    cannl_tensor *state;           /* every state tensor (params first), for the finiteness scan */
    size_t nstate;

    uint64_t seed;
    int shuffle;
    int64_t batch, spe, target, epochs_total;
    int64_t horizon;               /* steps of the whole run (--epochs), for the lr schedule */
    int64_t step;                  /* global step count */
    double base_lr;                /* the learning rate before any schedule */
    int cosine;                    /* cosine decay of the lr over the run's target steps */
    int override;                  /* --lr-schedule (or the resumed run's) replaces the spec's */
    int64_t saved_step;            /* step of the last checkpoint, -1: none */
    int64_t resumed_step;          /* step of the --resume checkpoint, -1: none */
    int64_t tested_step;           /* step of the last test evaluation, -1: none */
    double test_loss;              /* results of that evaluation (metrics in ->metrics) */
    double ep_loss;                /* the current epoch's sum of loss * examples so far (a stream run's: */
    int64_t ep_examples;           /* since its last record), resumed runs too (checkpoint metadata), */
                                   /* and its examples: the train_loss of its record */

    double t_start, last_print;
    int64_t steps_run, examples_run;
    int tty, line_open;
    int stop;                      /* data-parallel: the signal some rank got, agreed at the last step */
    /* ZeRO-1 (--zero 1 under mpirun): rank r updates params [shard[r], shard[r + 1]), whose
       gradients are the grad block's elements [shard_start[r], shard_start[r + 1]) */
    int32_t *shard;
    int64_t *shard_start;
    int checkpointing;             /* rank 0 writes checkpoints: with ZeRO-1 every rank gathers for them */
    double *opt_bytes;             /* data-parallel: the optimiser-state bytes each rank holds (P) */
} trainer;

/* The signal that stops the run, or 0: this process's, or with ranks the one they agreed on
   (every rank stops after the same step). */
static int stopping(const trainer *t) { return t->dist ? t->stop : g_interrupted; }

/* ------------------------------------------------------------ helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cannl__vmessage(const char *prog, const char *kind, const char *fmt, va_list ap) {
    fflush(stdout);
    fprintf(stderr, "%s: %s: ", prog, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static int report(const trainer *t, int code, const char *fmt, ...) CANNL__PRINTF(3, 4);

/* Print "<prog>: error: <message>" and return the exit status `code`. */
static int report(const trainer *t, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(t->o.prog, "error", fmt, ap);
    va_end(ap);
    return code;
}

static void warn(const trainer *t, const char *fmt, ...) CANNL__PRINTF(2, 3);

static void warn(const trainer *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(t->o.prog, "warning", fmt, ap);
    va_end(ap);
}

/* A well-mixed, distinct seed for each (seed, epoch) pair (splitmix64 finaliser). */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
    return mix64(mix64(seed) + ((uint64_t)epoch + 1) * 0x9E3779B97F4A7C15u);
}

/* Metadata value as an integer / real; 0 ok, 1 absent, -1 malformed. */
static int meta_u64(const cannl_checkpoint *ck, const char *key, uint64_t *out) {
    const char *s = cannl_checkpoint_meta(ck, key);
    if (!s) return 1;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}
/* A learning rate, read as --lr reads it: a non-negative decimal number. */
static int meta_lr(const cannl_checkpoint *ck, const char *key, double *out) {
    const char *s = cannl_checkpoint_meta(ck, key);
    if (!s) return 1;
    double v;
    if (cannl__parse_decimal(s, &v) != CANNL__NUM_OK || v < 0) return -1;
    *out = v;
    return 0;
}

static int check_api(const trainer *t) {
    const cannl_model_api *a = t->api;
    const char *missing = !a->create ? "create" : !a->destroy ? "destroy" : !a->train_step ? "train_step"
                        : !a->state_tensors ? "state_tensors" : !a->get_step ? "get_step" : !a->set_step ? "set_step"
                        : NULL;
    if (!a->name || (a->dtype != CANNL_F32 && a->dtype != CANNL_F64) || a->max_batch < 1 || a->num_inputs < 0 ||
        a->num_metrics < 0 || (a->num_inputs > 0 && !a->inputs) || (a->num_metrics > 0 && !a->metric_names))
        return report(t, CANNL__EXIT_FAIL, "the model table is malformed");
    if (missing) return report(t, CANNL__EXIT_FAIL, "model '%s': the model table has no %s function", a->name, missing);
    return CANNL__EXIT_OK;
}

/* ------------------------------------------------------------ setup */

/* Settings a resumed run takes from its checkpoint (unless given again). */
static int resume_settings(trainer *t, const cannl_checkpoint *ck) {
    const char *path = t->o.resume;
    uint64_t v;
    double lr;
    int r = meta_u64(ck, "batch", &v);
    if (r < 0) return report(t, CANNL__EXIT_FAIL, "%s: metadata \"batch\" is not an integer", path);
    if (r == 0 && t->has_inputs) {
        if (t->o.batch_set && (uint64_t)t->o.batch != v)
            return report(t, CANNL__EXIT_USAGE,
                          "--batch %" PRId64 " differs from the batch %" PRIu64 " of checkpoint %s (a resumed run keeps "
                          "its batch size)",
                          t->o.batch, v, path);
        if (v < 1 || v > (uint64_t)t->api->max_batch)
            return report(t, CANNL__EXIT_FAIL, "%s: checkpoint was trained with batch %" PRIu64
                          ", but the model's maximum batch is %" PRId64, path, v, t->api->max_batch);
        t->batch = (int64_t)v;
    }
    r = meta_u64(ck, "seed", &v);
    if (r < 0) return report(t, CANNL__EXIT_FAIL, "%s: metadata \"seed\" is not an integer", path);
    if (r == 0 && !t->o.seed_set) t->seed = v;
    if (r == 0 && t->o.seed_set && t->o.seed != v)
        warn(t, "--seed %" PRIu64 " differs from the checkpoint's seed %" PRIu64 "; %s with %" PRIu64, t->o.seed, v,
             t->o.stream ? "drawing the stream's windows" : "shuffling", t->o.seed);
    r = meta_u64(ck, "shuffle", &v);
    if (r < 0 || (r == 0 && v > 1)) return report(t, CANNL__EXIT_FAIL, "%s: metadata \"shuffle\" is not 0 or 1", path);
    if (r == 0 && !t->o.no_shuffle) t->shuffle = (int)v;
    if (r == 0 && t->o.no_shuffle && v == 1 && t->has_inputs)
        warn(t, "--no-shuffle: the checkpoint's run shuffled; continuing without shuffling");
    r = meta_lr(ck, "lr", &lr);
    if (r < 0)
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"lr\" is '%s', not a non-negative number (as --lr takes)",
                      path, cannl_checkpoint_meta(ck, "lr"));
    if (r == 0 && !t->o.lr_set && t->api->set_lr) t->api->set_lr(t->m, lr);
    const char *sched = cannl_checkpoint_meta(ck, "lr_schedule");
    if (sched && strcmp(sched, "spec") != 0 && strcmp(sched, "constant") != 0 && strcmp(sched, "cosine") != 0)
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"lr_schedule\" is '%s', not spec, constant or cosine", path,
                      sched);
    if (sched && !t->o.schedule_set) {
        t->cosine = strcmp(sched, "cosine") == 0;
        t->override = strcmp(sched, "spec") != 0;
    }
    r = meta_u64(ck, "examples", &v);
    if (r < 0 || (r == 0 && (v < 1 || v > INT64_MAX || !t->has_inputs || t->streamed)))
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"examples\" is '%s', %s", path,
                      cannl_checkpoint_meta(ck, "examples"),
                      !t->has_inputs ? "but a model without inputs has no examples"
                      : t->streamed  ? "but a --stream run has no examples (the checkpoint is of a --data run)"
                                     : "not a positive integer");
    if (r == 0) t->ck_examples = (int64_t)v;
    /* The sums of a checkpoint saved mid-epoch (absent: the epoch's train_loss covers the
       steps this run takes). */
    const char *el = cannl_checkpoint_meta(ck, "epoch_loss_sum");
    r = meta_u64(ck, "epoch_loss_examples", &v);
    if ((el != NULL) != (r == 0) || r < 0 || (el && (cannl__parse_decimal(el, &lr) != CANNL__NUM_OK || v > INT64_MAX)))
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch_loss_sum\" '%s' and \"epoch_loss_examples\" '%s' are "
                      "not a number and a count", path, el ? el : "(none)",
                      cannl_checkpoint_meta(ck, "epoch_loss_examples") ? cannl_checkpoint_meta(ck, "epoch_loss_examples") : "(none)");
    if (el) {
        t->ep_loss = lr;
        t->ep_examples = (int64_t)v;
    }
    /* "epoch" counts the completed epochs: step / steps per epoch (0 without inputs). */
    uint64_t epoch;
    r = meta_u64(ck, "epoch", &epoch);
    const int64_t step = t->api->get_step(t->m);
    int64_t spe = 0, want = 0;
    if (t->has_inputs && t->ck_examples > 0) {
        spe = (t->ck_examples + t->batch - 1) / t->batch;
        want = step / spe;
    }
    if (r < 0)
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch\" is '%s', not a non-negative integer", path,
                      cannl_checkpoint_meta(ck, "epoch"));
    if (r == 0 && (!t->has_inputs || t->streamed) && epoch != 0)
        return report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch\" is %" PRIu64 ", not 0 (%s runs one endless epoch)",
                      path, epoch, t->streamed ? "a --stream run" : "a model without inputs");
    if (r == 0 && spe > 0 && epoch != (uint64_t)want)
        return report(t, CANNL__EXIT_FAIL,
                      "%s: metadata \"epoch\" is %" PRIu64 ", but its step %" PRId64 " at %" PRId64
                      " steps per epoch makes %" PRId64 " completed epochs (a corrupt or edited checkpoint)",
                      path, epoch, step, spe, want);
    return CANNL__EXIT_OK;
}

/* Checkpoint metadata "lr_schedule": "spec" while the spec's schedule drives the lr, else
   what --lr-schedule chose ("constant" also for a model without a schedule). */
static const char *lr_schedule_name(const trainer *t) {
    if (t->cosine) return "cosine";
    return t->api->schedule && !t->override ? "spec" : "constant";
}

/* Create the model, then --resume or --init. */
static int setup_model(trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->o.resume && !t->o.seed_set) {
        /* The state is created with the run's seed, the checkpoint's: dropout's masks follow
           from it and the step, so the resumed run draws the masks the first one would have.
           (Any problem with the file is reported by the load below.) */
        cannl_checkpoint *ck = NULL;
        cannl_error err;
        uint64_t v;
        if (cannl_checkpoint_open(t->o.resume, NULL, &ck, &err) == CANNL_OK) {
            if (meta_u64(ck, "seed", &v) == 0) t->seed = v;
            cannl_checkpoint_close(ck);
        }
    }
    t->m = api->create(t->seed);
    if (!t->m)
        return report(t, CANNL__EXIT_FAIL, "cannot create model '%s' (out of memory%s)", api->name,
                      t->ext ? ", or its device failed: see above" : "");
    cannl_error err;
    if (t->o.name_map && (cannl__name_map_load(t->o.name_map, &t->names, &err) != CANNL_OK ||
                          cannl__name_map_check(api, t->m, t->names, t->o.name_map, &err) != CANNL_OK))
        return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    if (t->o.resume) {
        cannl_checkpoint *ck = NULL;
        if (cannl__model_load_named(api, t->m, t->o.resume, CANNL_LOAD_ALL, t->names, &ck, &err) != CANNL_OK)
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        int rc = resume_settings(t, ck);
        cannl_checkpoint_close(ck);
        if (rc) return rc;
        t->step = t->resumed_step = api->get_step(t->m);
    } else if (t->o.init) {
        if (cannl__model_load_named(api, t->m, t->o.init, CANNL_LOAD_PARAMS, t->names, NULL, &err) != CANNL_OK)
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    }
    if (t->o.lr_set) {
        if (!api->set_lr) return report(t, CANNL__EXIT_FAIL, "--lr: model '%s' cannot change its learning rate", api->name);
        api->set_lr(t->m, t->o.lr);
    }
    if (t->o.threads > 0 && api->set_threads) api->set_threads(t->o.threads);
    t->base_lr = api->get_lr ? api->get_lr(t->m) : api->lr;
    if (t->cosine && !api->set_lr)
        return report(t, CANNL__EXIT_FAIL, "--lr-schedule: model '%s' cannot change its learning rate", api->name);
    if (t->override && api->schedule && api->set_schedule) api->set_schedule(t->m, 0);
    return CANNL__EXIT_OK;
}

/* Load --data and --test, check a resumed run's example count. */
static int setup_data(trainer *t) {
    const cannl_model_api *api = t->api;
    if (!t->has_inputs) return CANNL__EXIT_OK;
    cannl_error err;
    if (t->streamed) {
        if (cannl__stream_open(&t->stream, &err) != CANNL_OK || (t->val.path && cannl__stream_open(&t->val, &err) != CANNL_OK))
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        return CANNL__EXIT_OK;
    }
    /* One-hot encoding of class-index files only into targets (inputs forward does not read). */
    unsigned char *one_hot = NULL;
    if (api->forward_reads) {
        one_hot = calloc((size_t)api->num_inputs + 1, 1);
        if (!one_hot) return report(t, CANNL__EXIT_FAIL, "out of memory");
        for (int32_t i = 0; i < api->num_inputs; i++) one_hot[i] = !api->forward_reads[i];
    }
    cannl_status st = cannl__bind_load(api, t->o.data, t->o.ndata, one_hot, t->train, &t->ntrain, &err);
    if (st == CANNL_OK && t->o.ntest > 0)
        st = cannl__bind_load(api, t->o.test, t->o.ntest, one_hot, t->test, &t->ntest, &err);
    free(one_hot);
    if (st != CANNL_OK)
        return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    if (t->ck_examples > 0 && t->ck_examples != t->ntrain)
        return report(t, CANNL__EXIT_FAIL,
                      "%s: checkpoint was trained on %" PRId64 " examples, but the training data has %" PRId64,
                      t->o.resume, t->ck_examples, t->ntrain);
    return CANNL__EXIT_OK;
}

/* Steps per epoch, the step to stop at, buffers. */
static int setup_run(trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->streamed) {
        t->spe = INT64_MAX; /* one endless epoch of random windows */
        t->target = t->horizon = t->o.steps;
        t->epochs_total = 1;
    } else if (t->has_inputs) {
        t->spe = (t->ntrain + t->batch - 1) / t->batch;
        int64_t by_epochs = INT64_MAX;
        if ((t->o.epochs_set || !t->o.steps_set) && cannl__mul_i64(t->o.epochs, t->spe, &by_epochs)) by_epochs = INT64_MAX;
        t->target = t->o.steps_set && t->o.steps < by_epochs ? t->o.steps : by_epochs;
        t->horizon = by_epochs != INT64_MAX ? by_epochs : t->target;
        t->epochs_total = t->target / t->spe + (t->target % t->spe != 0);
    } else {
        t->batch = 1;
        t->spe = INT64_MAX; /* one endless epoch */
        t->target = t->o.steps;
        t->horizon = t->target;
        t->epochs_total = 1;
    }
    const int32_t nin = api->num_inputs;
    t->bufs = calloc((size_t)nin + 1, sizeof *t->bufs);
    t->idx = malloc((size_t)t->batch * sizeof *t->idx);
    t->perm = malloc(((size_t)t->ntrain + 1) * sizeof *t->perm);
    t->metrics = calloc((size_t)api->num_metrics + 1, sizeof *t->metrics);
    t->record = calloc((size_t)api->num_metrics * 2 + 8, sizeof *t->record);
    t->val_metrics = calloc((size_t)api->num_metrics + 1, sizeof *t->val_metrics);
    t->offsets = malloc((size_t)t->batch * sizeof *t->offsets);
    /* (not on data-parallel ranks: they gather their slice of each step, not the batch) */
    const int prefetching = t->ext && t->ext->prefetch && !t->dist;
    if (prefetching) t->next = calloc((size_t)nin + 1, sizeof *t->next);
    int oom = !t->bufs || !t->idx || !t->perm || !t->metrics || !t->record || !t->val_metrics || !t->offsets ||
              (prefetching && !t->next);
    for (int32_t i = 0; i < nin && !oom; i++) {
        size_t bytes = (size_t)t->batch * (size_t)api->inputs[i].size * cannl__input_elem_size(api, i);
        oom = !(t->bufs[i] = cannl_alloc(bytes)) || (t->next && !(t->next[i] = cannl_alloc(bytes)));
    }
    if (oom) return report(t, CANNL__EXIT_FAIL, "out of memory allocating batch buffers");
    t->nstate = api->state_tensors(t->m, NULL, 0);
    if (!(t->state = calloc(t->nstate + 1, sizeof *t->state))) return report(t, CANNL__EXIT_FAIL, "out of memory");
    if (t->o.metrics) {
        cannl_error err;
        /* A resumed run continues the log: first the records an earlier run wrote after the
           checkpoint (before it crashed or diverged) go, so that every step appears once. */
        int64_t removed = 0;
        if (t->o.resume && cannl__metrics_trim(t->o.metrics, t->step, t->has_inputs && !t->streamed ? t->spe : 0, &removed, &err))
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        if (removed > 0 && !t->o.quiet)
            printf("%s: removed %" PRId64 " record%s after step %" PRId64 " (the checkpoint's) from %s\n", t->o.prog,
                   removed, removed == 1 ? "" : "s", t->step, t->o.metrics);
        if (cannl_metrics_open(t->o.metrics, t->o.resume != NULL, &t->log, &err) != CANNL_OK)
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    }
    return CANNL__EXIT_OK;
}

/* A checkpoint that cannot be written is reported before training, not after an epoch; the
   temporary files of saves a killed run left behind are removed. */
static int check_checkpoint_dir(const trainer *t) {
    const char *p = t->o.checkpoint;
    if (!p) return CANNL__EXIT_OK;
    struct stat sb;
    if (stat(p, &sb) == 0 && !S_ISREG(sb.st_mode))
        return report(t, CANNL__EXIT_FAIL, "%s: cannot write the checkpoint: %s", p,
                      S_ISDIR(sb.st_mode) ? "it is a directory (--checkpoint names a file)" : "not a regular file");
    const char *slash = strrchr(p, '/');
    char dir[1024];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    if (access(dir, W_OK) != 0) {
        char eb[128];
        return report(t, CANNL__EXIT_FAIL, "%s: cannot write the checkpoint in %s: %s", p, dir,
                      cannl__strerror(errno, eb, sizeof eb));
    }
    const int stale = cannl__tmp_clean_stale(p);
    if (stale > 0)
        warn(t, "removed %d temporary file%s of %s left by an interrupted save (%s.tmp.<pid>)", stale,
             stale == 1 ? "" : "s", p, p);
    return CANNL__EXIT_OK;
}

/* ------------------------------------------------------------ divergence */

/* Stop a diverged run: one line naming the step and the value, and what became of the
   checkpoint (nothing is saved after this). */
static int diverged(const trainer *t, const char *what) {
    char ck[1200] = "";
    if (t->o.checkpoint && t->saved_step >= 0)
        snprintf(ck, sizeof ck, "; %s keeps step %" PRId64, t->o.checkpoint, t->saved_step);
    else if (t->o.checkpoint && t->resumed_step >= 0 && strcmp(t->o.checkpoint, t->o.resume) == 0)
        snprintf(ck, sizeof ck, "; %s keeps step %" PRId64, t->o.checkpoint, t->resumed_step);
    else if (t->o.checkpoint)
        snprintf(ck, sizeof ck, "; %s was not written", t->o.checkpoint);
    return report(t, CANNL__EXIT_FAIL, "training diverged at step %" PRId64 ": %s (try a lower --lr)%s", t->step, what,
                  ck);
}

/* A loss (`which`: "loss", "test loss", "validation loss") that is nan or inf: the run
   diverged (params so large that the forward pass overflows, or a step's nan). */
static int check_loss(const trainer *t, const char *which, double loss) {
    if (isfinite(loss)) return CANNL__EXIT_OK;
    char what[64];
    snprintf(what, sizeof what, "the %s is %s", which, cannl__nonfinite_name(loss));
    return diverged(t, what);
}

/* Every state tensor (params, then optimiser state) must be finite. */
static int check_state(trainer *t) {
    if (t->api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts", t->api->name);
    if (t->ext && t->ext->error && t->ext->error(t->m)) return report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
    for (size_t i = 0; i < t->nstate; i++) {
        const cannl_tensor *x = &t->state[i];
        if (!x->data) continue; /* ZeRO-1: optimiser state another rank holds */
        int64_t count = 1;
        for (int32_t d = 0; d < x->ndims; d++) count *= x->shape[d];
        const int64_t bad = cannl__first_nonfinite(x->data, (size_t)count, x->dtype);
        if (bad >= 0) {
            const double v = x->dtype == CANNL_F32 ? (double)((const float *)x->data)[bad] : ((const double *)x->data)[bad];
            char what[256];
            snprintf(what, sizeof what, "%s '%s' holds %s at element %" PRId64,
                     i < (size_t)t->api->num_params ? "param" : "state tensor", x->name, cannl__nonfinite_name(v), bad);
            return diverged(t, what);
        }
    }
    return CANNL__EXIT_OK;
}

/* ------------------------------------------------------------ training */

/* ZeRO-1: every rank's optimiser state to rank 0, which holds all of it for the checkpoint
   (which then holds what one process's would); every rank calls it at every save, and rank 0
   calls zero_hold after the save. */
static int gather_state(trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    const int32_t np = api->num_params;
    const int64_t elem = (int64_t)cannl_dtype_size(api->dtype);
    char msg[256];
    if (d->rank == 0 && api->shard_opt_state(t->m, 0, np))
        return report(t, CANNL__EXIT_FAIL, "out of memory gathering the optimiser state (%" PRId64 " bytes)",
                      api->opt_state_start[np]);
    int64_t *start = calloc((size_t)d->size + 1, sizeof *start); /* each rank's part, in elements */
    if (!start) return report(t, CANNL__EXIT_FAIL, "out of memory");
    for (int r = 0; r <= d->size; r++) start[r] = api->opt_state_start[t->shard[r]] / elem;
    const int rc = d->gather(d, api->opt_state(t->m), d->rank == 0 ? api->opt_state(t->m) : NULL, api->dtype, start, msg,
                             sizeof msg);
    free(start);
    return rc ? report(t, CANNL__EXIT_FAIL, "%s", msg) : CANNL__EXIT_OK;
}

/* ZeRO-1: this rank's optimiser state only, that of the params it updates. */
static int zero_hold(trainer *t) {
    const int r = t->dist->rank;
    if (t->api->shard_opt_state(t->m, t->shard[r], t->shard[r + 1]))
        return report(t, CANNL__EXIT_FAIL, "out of memory sharding the optimiser state");
    return CANNL__EXIT_OK;
}

static int save_checkpoint_now(trainer *t);

static int save_checkpoint(trainer *t) {
    if (t->dist && t->o.zero && t->checkpointing) {
        int rc = gather_state(t);
        if (!rc) rc = save_checkpoint_now(t);
        if (t->dist->rank == 0) { /* back to its shard, saved or not */
            const int held = zero_hold(t);
            if (!rc) rc = held;
        }
        if (!rc) t->saved_step = t->step; /* as rank 0's: every rank gathers at the same saves */
        if (rc) t->dist->abort(t->dist, rc); /* the others would wait for this rank at the next collective */
        return rc;
    }
    return save_checkpoint_now(t);
}

static int save_checkpoint_now(trainer *t) {
    if (!t->o.checkpoint) return CANNL__EXIT_OK;
    int rc = check_state(t); /* a diverged state never replaces the last good checkpoint */
    if (rc) return rc;
    char seed[32], batch[32], epoch[32], lr[40], examples[32], ep_loss[40], ep_examples[32];
    snprintf(seed, sizeof seed, "%" PRIu64, t->seed);
    snprintf(batch, sizeof batch, "%" PRId64, t->batch);
    snprintf(epoch, sizeof epoch, "%" PRId64, t->has_inputs && !t->streamed ? t->step / t->spe : 0);
    snprintf(lr, sizeof lr, "%.17g", t->base_lr);
    snprintf(examples, sizeof examples, "%" PRId64, t->ntrain);
    snprintf(ep_loss, sizeof ep_loss, "%.17g", t->ep_loss);
    snprintf(ep_examples, sizeof ep_examples, "%" PRId64, t->ep_examples);
    cannl_meta meta[9] = {{"seed", seed}, {"batch", batch}, {"epoch", epoch}, {"shuffle", t->shuffle ? "1" : "0"},
                          {"lr", lr}, {"lr_schedule", lr_schedule_name(t)}};
    size_t nmeta = 6;
    if (t->has_inputs && !t->streamed) meta[nmeta++] = (cannl_meta){"examples", examples};
    /* Mid-epoch (a stream run: between records), the sums behind the next record's train_loss,
       so that a resumed run logs the same. */
    if (t->has_inputs && (t->streamed ? t->ep_examples > 0 : t->step % t->spe != 0)) {
        meta[nmeta++] = (cannl_meta){"epoch_loss_sum", ep_loss};
        meta[nmeta++] = (cannl_meta){"epoch_loss_examples", ep_examples};
    }
    cannl_error err;
    if (cannl__model_save_named(t->api, t->m, t->o.checkpoint, meta, nmeta, t->names, &err) != CANNL_OK)
        return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    t->saved_step = t->step;
    return CANNL__EXIT_OK;
}

static int write_record(trainer *t, size_t n) {
    if (!t->log) return CANNL__EXIT_OK;
    cannl_error err;
    if (cannl_metrics_write(t->log, t->record, n, &err) != CANNL_OK) return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    return CANNL__EXIT_OK;
}

/* Evaluate the test set in order, in batches; averages weighted by n. */
/* Evaluation over ranks: rank r takes the batches k with k % P == r (eval_first, then every
   eval_stride-th); sum_over_ranks then adds up the ranks' sums in place (reporting a failure:
   nonzero). One process: every batch, and the sums stay. */
static int64_t eval_first(const trainer *t) { return t->dist ? (int64_t)t->dist->rank : 0; }
static int64_t eval_stride(const trainer *t) { return t->dist ? (int64_t)t->dist->size : 1; }

static int sum_over_ranks(trainer *t, double *sum, int32_t count) {
    char msg[256];
    if (!t->dist || t->dist->sum(t->dist, sum, count, msg, sizeof msg) == 0) return 0;
    report(t, CANNL__EXIT_FAIL, "%s", msg);
    return 1;
}

/* Data-parallel: the state no gradient moves set to rank 0's on every rank (batch_norm's
   running statistics, which each rank updates from its own slices; buffers and frozen params
   are the same everywhere), so that an evaluation split over the ranks is that of the
   checkpoint rank 0 writes. Not for a CUDA model (its state is device memory). */
static int sync_untrained(trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    char msg[256];
    if (!d || d->size == 1 || d->device || !api->grad_offsets) return CANNL__EXIT_OK;
    if (api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts", api->name);
    for (int32_t i = 0; i < api->num_params; i++)
        if (api->grad_offsets[i] < 0 &&
            d->bcast(d, t->state[i].data, api->params[i].size, api->dtype, 0, msg, sizeof msg))
            return report(t, CANNL__EXIT_FAIL, "%s", msg);
    return CANNL__EXIT_OK;
}

static int evaluate(trainer *t) {
    const cannl_model_api *api = t->api;
    const int synced = sync_untrained(t);
    if (synced) return synced;
    double loss_sum = 0;
    double *sum = calloc((size_t)api->num_metrics + 1, sizeof *sum); /* the metrics, then the loss */
    if (!sum) return report(t, CANNL__EXIT_FAIL, "out of memory");
    cannl_error err;
    const int64_t first = eval_first(t), stride = eval_stride(t);
    for (int64_t start = first * t->batch; start < t->ntest; start += stride * t->batch) {
        int64_t n = t->ntest - start < t->batch ? t->ntest - start : t->batch;
        for (int64_t j = 0; j < n; j++) t->idx[j] = start + j;
        if (cannl__bind_gather(api, t->test, t->idx, n, t->bufs, &err) != CANNL_OK) {
            free(sum);
            return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        }
        double loss = 0;
        api->eval(t->m, (const void *const *)t->bufs, n, &loss, t->metrics);
        if (t->ext && t->ext->error && t->ext->error(t->m)) {
            free(sum);
            return report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
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
    const int rc = check_loss(t, "test loss", t->test_loss);
    if (rc) return rc;
    t->tested_step = t->step;
    return CANNL__EXIT_OK;
}

/* A record's "lr": the learning rate the last step used (the spec's schedule applied), or, with
   no step taken by this process yet or a model that cannot say, the lr as set. */
static double record_lr(const trainer *t) {
    if (t->api->get_last_lr && t->steps_run > 0) return t->api->get_last_lr(t->m);
    return t->api->get_lr ? t->api->get_lr(t->m) : t->base_lr;
}

/* The record of an epoch's end (train_loss: its mean training loss), or of the final test
   evaluation of a run that stopped mid-epoch (train_loss NaN: left out): epoch, step,
   train_loss, lr, test_loss and the metrics when there is a test set, elapsed seconds. */
static int log_epoch(trainer *t, int64_t epoch, double train_loss, int tested) {
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
    t->record[n++] = (cannl_metric)CANNL_METRIC("elapsed", now_s() - t->t_start);
    return write_record(t, n);
}

static void end_line(trainer *t) {
    if (t->line_open) cannl_progress_finish(stdout);
    t->line_open = 0;
}

static void show_progress(trainer *t, int64_t epoch, int64_t step_in_epoch, double loss) {
    if (t->o.quiet) return;
    double now = now_s();
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

/* After the last batch of epoch `epoch` (0-based). */
static int end_epoch(trainer *t, int64_t epoch, int64_t seen, double t_epoch) {
    const double train_loss = t->ep_examples > 0 ? t->ep_loss / (double)t->ep_examples : NAN;
    int rc;
    end_line(t);
    if (t->ntest > 0 && (rc = evaluate(t))) return rc;
    if ((rc = log_epoch(t, epoch + 1, train_loss, t->ntest > 0))) return rc;
    if (!t->o.quiet) {
        double el = now_s() - t_epoch;
        printf("epoch %" PRId64 "/%" PRId64 "  train_loss %.4f", epoch + 1, t->epochs_total, train_loss);
        if (t->ntest > 0) {
            printf("  test_loss %.4f", t->test_loss);
            for (int32_t k = 0; k < t->api->num_metrics; k++)
                printf("  %s %.4f", t->api->metric_names[k], t->metrics[k]);
        }
        printf("  (%.1f s, %.1f ex/s)\n", el, el > 0 ? (double)seen / el : 0.0);
        fflush(stdout);
    }
    return save_checkpoint(t);
}

/* ------------------------------------------------------------ token streams */

/* Whether --val-stream is evaluated after step `step`: every --eval-every steps and at the last. */
static int validation_due(const trainer *t, int64_t step) {
    return t->val.path && ((t->o.eval_every > 0 && step % t->o.eval_every == 0) || step == t->target);
}

/* val_loss and val_<metric> over --eval-batches fixed batches of --batch windows of --val-stream. */
static int validate(trainer *t) {
    const cannl_model_api *api = t->api;
    const int synced = sync_untrained(t);
    if (synced) return synced;
    const int64_t batches = t->o.eval_batches, n = t->batch;
    double loss_sum = 0;
    double *sum = calloc((size_t)api->num_metrics + 1, sizeof *sum); /* the metrics, then the loss */
    if (!sum) return report(t, CANNL__EXIT_FAIL, "out of memory");
    const int64_t first = eval_first(t), stride = eval_stride(t);
    for (int64_t k = first; k < batches; k += stride) {
        cannl__stream_val_batch(&t->val, batches, n, k, t->bufs);
        double loss = 0;
        api->eval(t->m, (const void *const *)t->bufs, n, &loss, t->val_metrics);
        if (t->ext && t->ext->error && t->ext->error(t->m)) {
            free(sum);
            return report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
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
    const int rc = check_loss(t, "validation loss", t->val_loss);
    if (rc) return rc;
    t->validated_step = t->step;
    return CANNL__EXIT_OK;
}

/* The record of a stream run at this step: step, train_loss (the mean of the steps since the last
   multiple of --log-every; with --log-every 0, since the start),
   lr, val_loss and val_<metric> when it was validated now, elapsed seconds. */
static int stream_record(trainer *t, int validated) {
    const cannl_model_api *api = t->api;
    size_t n = 0;
    t->record[n++] = (cannl_metric)CANNL_METRIC_INT("step", t->step);
    t->record[n++] =
        (cannl_metric)CANNL_METRIC("train_loss", t->ep_examples > 0 ? t->ep_loss / (double)t->ep_examples : NAN);
    t->record[n++] = (cannl_metric)CANNL_METRIC("lr", record_lr(t));
    char (*keys)[72] = NULL;
    if (validated) {
        keys = calloc((size_t)api->num_metrics + 1, sizeof *keys);
        if (!keys) return report(t, CANNL__EXIT_FAIL, "out of memory");
        t->record[n++] = (cannl_metric)CANNL_METRIC("val_loss", t->val_loss);
        for (int32_t j = 0; j < api->num_metrics; j++) {
            snprintf(keys[j], sizeof keys[j], "val_%s", api->metric_names[j]);
            t->record[n++] = (cannl_metric)CANNL_METRIC(keys[j], t->val_metrics[j]);
        }
    }
    t->record[n++] = (cannl_metric)CANNL_METRIC("elapsed", now_s() - t->t_start);
    if (t->o.log_every > 0 && t->step % t->o.log_every == 0) { /* a record depends on its step alone */
        t->ep_loss = 0;
        t->ep_examples = 0;
    }
    int rc = write_record(t, n);
    free(keys);
    return rc;
}

/* Print a validation's line. */
static void print_validation(trainer *t) {
    if (t->o.quiet) return;
    end_line(t);
    printf("step %" PRId64 "/%" PRId64 "  val_loss %.4f", t->step, t->target, t->val_loss);
    for (int32_t j = 0; j < t->api->num_metrics; j++) printf("  val_%s %.4f", t->api->metric_names[j], t->val_metrics[j]);
    printf("\n");
    fflush(stdout);
}

/* After a step of a stream run: the finiteness check and the record every --log-every steps,
   the validation when it is due. */
static int stream_step_done(trainer *t) {
    int rc;
    const int log = t->o.log_every > 0 && t->step % t->o.log_every == 0, val = validation_due(t, t->step);
    if (log && (rc = check_state(t))) return rc;
    if (val) {
        if ((rc = validate(t))) return rc;
        print_validation(t);
    }
    return log || val ? stream_record(t, val) : CANNL__EXIT_OK;
}

/* Rank r's slice [lo, lo + count) of a global batch of n examples (the first n % P ranks
   get one more): the whole batch alone. */
static void slice(const trainer *t, int64_t n, int64_t *lo, int64_t *count) {
    const int64_t p = t->dist ? t->dist->size : 1, r = t->dist ? t->dist->rank : 0;
    const int64_t q = n / p, extra = n % p;
    *lo = r * q + (r < extra ? r : extra);
    *count = q + (r < extra);
}

/* A data-parallel step on this rank's `count` of the global batch's n examples: its
   gradients (zero for an empty slice) weighted by count / n, summed over the ranks into the
   average of the whole batch (the loss is a mean over a slice), then the same update on
   every rank. Returns the global batch's loss; agrees on a stop signal (any rank's). */
/* The model's gradient hook: a gradient is final, send it. */
static void grad_ready(void *ctx, int64_t offset, int64_t count) {
    cannl__dist *d = ctx;
    d->reduce_part(d, offset, count);
}

/* ZeRO-1's shards: params in api order cut into P contiguous ranges of about equal element
   counts (gradients), and the grad block's elements they cover; the state tensors' pointers. */
static int zero_shards(trainer *t) {
    if (t->shard_start) return CANNL__EXIT_OK;
    const cannl_model_api *api = t->api;
    const int p = t->dist->size;
    const int32_t np = api->num_params;
    int64_t elems = 0;
    api->grad_block(t->m, &elems);
    if (api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts", api->name);
    int64_t total = 0, last = -1;
    for (int32_t i = 0; i < np; i++) {
        const int64_t at = api->grad_offsets[i];
        if (at < 0) continue;
        if (at <= last || at + api->params[i].size > elems)
            return report(t, CANNL__EXIT_FAIL, "model '%s': the grad block is not in param order (param '%s')", api->name,
                          api->params[i].name);
        last = at;
        total += api->params[i].size;
    }
    t->shard = calloc((size_t)p + 1, sizeof *t->shard);
    t->shard_start = calloc((size_t)p + 1, sizeof *t->shard_start);
    if (!t->shard || !t->shard_start) return report(t, CANNL__EXIT_FAIL, "out of memory");
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
static int setup_zero(trainer *t) {
    int rc = zero_shards(t);
    return rc ? rc : zero_hold(t);
}

/* Data-parallel: the optimiser-state bytes each rank holds, for the summary. */
static int count_opt_bytes(trainer *t) {
    const cannl_model_api *api = t->api;
    cannl__dist *d = t->dist;
    char msg[256];
    if (!api->opt_state_start) return CANNL__EXIT_OK;
    if (!(t->opt_bytes = calloc((size_t)d->size, sizeof *t->opt_bytes))) return report(t, CANNL__EXIT_FAIL, "out of memory");
    const int32_t first = t->o.zero ? t->shard[d->rank] : 0, last = t->o.zero ? t->shard[d->rank + 1] : api->num_params;
    t->opt_bytes[d->rank] = (double)(api->opt_state_start[last] - api->opt_state_start[first]);
    if (d->sum(d, t->opt_bytes, d->size, msg, sizeof msg)) return report(t, CANNL__EXIT_FAIL, "%s", msg);
    return CANNL__EXIT_OK;
}

/* A ZeRO-1 step: the weighted gradients reduce-scattered (each rank receives the sum of its
   shard), clip_grad_norm's squared norm summed over the shards, each rank's update of its
   params (reading and writing only their optimiser state), then each param broadcast from the
   rank that updated it. */
static int zero_step(trainer *t, int64_t first, int64_t count, int64_t n, double *loss) {
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
            return report(t, CANNL__EXIT_FAIL, "%s", msg);
        for (int64_t i = lo; i < hi; i++) sq += x[i] * x[i];
    } else {
        float *x = block;
        const float f = (float)w;
        if (w != 1)
            for (int64_t i = 0; i < elems; i++) x[i] *= f;
        if (d->reduce_scatter(d, block, api->dtype, t->shard_start, msg, sizeof msg))
            return report(t, CANNL__EXIT_FAIL, "%s", msg);
        for (int64_t i = lo; i < hi; i++) sq += (double)x[i] * x[i];
    }
    const int sig = g_interrupted; /* read once: a signal may come at any time */
    double v[3] = {local * w, sig > 0 ? 1 : 0, sq};
    if (d->sum(d, v, 3, msg, sizeof msg)) return report(t, CANNL__EXIT_FAIL, "%s", msg);
    if (v[1] > 0) t->stop = sig > 0 ? sig : SIGTERM; /* some rank was asked to stop: all stop after this step */
    api->set_update_shard(t->m, t->shard[d->rank], t->shard[d->rank + 1], v[2]);
    api->train_update(t->m);
    for (int32_t i = 0, owner = 0; i < api->num_params; i++) {
        while (owner + 1 < d->size && t->shard[owner + 1] <= i) owner++;
        /* Only what the update changed: not a frozen param or a buffer (the same everywhere),
           nor batch_norm's running statistics (each rank's own, as without ZeRO-1). */
        if (api->grad_offsets[i] < 0) continue;
        if (d->bcast(d, t->state[i].data, api->params[i].size, api->dtype, owner, msg, sizeof msg))
            return report(t, CANNL__EXIT_FAIL, "%s", msg);
    }
    *loss = v[0];
    return CANNL__EXIT_OK;
}

static int dist_step(trainer *t, int64_t lo, int64_t count, int64_t n, double *loss) {
    if (t->o.zero) return zero_step(t, lo, count, n, loss);
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
    const int sig = g_interrupted; /* read once: a signal may come at any time */
    double v[2] = {local * w, sig > 0 ? 1 : 0};
    if (!hooked) d->reduce_part(d, 0, elems);
    if (d->reduce_end(d, msg, sizeof msg) || d->sum(d, v, 2, msg, sizeof msg))
        return report(t, CANNL__EXIT_FAIL, "%s", msg);
    if (v[1] > 0) t->stop = sig > 0 ? sig : SIGTERM; /* some rank was asked to stop: all stop after this step */
    api->train_update(t->m);
    *loss = v[0];
    return CANNL__EXIT_OK;
}

static int train(trainer *t) {
    const cannl_model_api *api = t->api;
    cannl_error err;
    while (t->step < t->target && !stopping(t)) {
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
        const double t_epoch = now_s();
        int64_t seen = 0;
        if (b == 0) { /* a new epoch (else: a resumed one, its sums from the checkpoint) */
            t->ep_loss = 0;
            t->ep_examples = 0;
        }
        for (; b < t->spe && t->step < t->target && !stopping(t); b++) {
            int64_t n = 1, lo = 0, count = 1; /* the global batch; this rank's slice of it */
            if (t->streamed) {
                n = t->batch;
                slice(t, n, &lo, &count);
                if (t->dist)
                    cannl__stream_train_slice(&t->stream, t->seed, t->step, n, lo, count, t->offsets, t->bufs);
                else if (!t->staged)
                    cannl__stream_train_batch(&t->stream, t->seed, t->step, n, t->offsets, t->bufs);
                t->staged = 0;
                /* The next step's windows go to a prefetching model now, unless a validation,
                   which uses the batch buffers, comes first. */
                if (t->next && t->step + 1 < t->target && !validation_due(t, t->step + 1)) {
                    cannl__stream_train_batch(&t->stream, t->seed, t->step + 1, n, t->offsets, t->next);
                    t->ext->prefetch(t->m, (const void *const *)t->next, n);
                    t->staged = 1;
                }
            } else if (t->has_inputs) {
                n = t->ntrain - b * t->batch < t->batch ? t->ntrain - b * t->batch : t->batch;
                slice(t, n, &lo, &count);
                if (!t->staged && count > 0 &&
                    cannl__bind_gather(api, t->train, t->perm + b * t->batch + lo, count, t->bufs, &err) != CANNL_OK) {
                    report(t, CANNL__EXIT_FAIL, "%s", err.msg);
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
                        return report(t, CANNL__EXIT_FAIL, "%s", err.msg);
                    t->ext->prefetch(t->m, (const void *const *)t->next, n2);
                    t->staged = 1;
                }
            }
            if (t->cosine) /* the lr of step s (0-based) of a run of `horizon` steps */
                api->set_lr(t->m, t->base_lr * 0.5 * (1 + cos(M_PI_VALUE * (double)t->step / (double)t->horizon)));
            double loss = NAN;
            if (t->dist) {
                int rc = dist_step(t, lo, count, n, &loss);
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
                report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
                if (t->dist) t->dist->abort(t->dist, CANNL__EXIT_FAIL); /* the others wait for this rank */
                return CANNL__EXIT_FAIL;
            }
            t->step++;
            const int rc_loss = check_loss(t, "loss", loss);
            if (rc_loss) return rc_loss;
            t->steps_run++;
            t->examples_run += n;
            t->ep_loss += loss * (double)n;
            t->ep_examples += n;
            seen += n;
            if (t->streamed) {
                int rc = stream_step_done(t);
                if (rc) return rc;
            } else if (t->o.log_every > 0 && t->step % t->o.log_every == 0) {
                int rc = check_state(t);
                if (rc) return rc;
                t->record[0] = (cannl_metric)CANNL_METRIC_INT("epoch", epoch + 1);
                t->record[1] = (cannl_metric)CANNL_METRIC_INT("step", t->step);
                t->record[2] = (cannl_metric)CANNL_METRIC("loss", loss);
                if ((rc = write_record(t, 3))) return rc;
            }
            show_progress(t, epoch, b + 1, loss);
        }
        if (b == t->spe) {
            int rc = end_epoch(t, epoch, seen, t_epoch);
            if (rc) return rc;
        }
    }
    end_line(t);
    return CANNL__EXIT_OK;
}

/* Final test evaluation (unless the last epoch's is current) and the summary. */
static int finish(trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->val.path && !stopping(t)) {
        if (t->validated_step != t->step) {
            int rc = validate(t);
            if (!rc) rc = stream_record(t, 1);
            if (rc) return rc;
        }
        printf("val loss: %.4f\n", t->val_loss);
        for (int32_t k = 0; k < api->num_metrics; k++) printf("val %s: %.4f\n", api->metric_names[k], t->val_metrics[k]);
    }
    if (t->ntest > 0 && !stopping(t)) {
        if (t->tested_step != t->step) {
            int rc = evaluate(t);
            if (!rc) rc = log_epoch(t, t->step / t->spe + 1, NAN, 1);
            if (rc) return rc;
        }
        printf("test loss: %.4f\n", t->test_loss);
        for (int32_t k = 0; k < api->num_metrics; k++) printf("test %s: %.4f\n", api->metric_names[k], t->metrics[k]);
    }
    double el = now_s() - t->t_start;
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

static int run(trainer *t) {
    int rc;
    if ((rc = check_api(t))) return rc;
    if ((t->o.ntest > 0 || t->val.path) && !t->api->eval)
        return report(t, CANNL__EXIT_FAIL, "%s: model '%s' has no eval function", t->val.path ? "--val-stream" : "--test",
                      t->api->name);
    rc = setup_model(t);
    if (!rc) rc = setup_data(t);
    if (!rc) rc = check_checkpoint_dir(t);
    if (!rc) rc = setup_run(t);
    if (!rc && t->dist && t->o.zero) rc = setup_zero(t);
    if (t->dist) { /* every rank goes on, or none (the one that failed said why) */
        char msg[256];
        int worst = rc;
        if (t->dist->max(t->dist, &worst, msg, sizeof msg)) return report(t, CANNL__EXIT_FAIL, "%s", msg);
        if (!rc) rc = worst;
        if (!rc) rc = count_opt_bytes(t);
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
    t->t_start = t->last_print = now_s();
    rc = train(t);
    if (!rc && t->saved_step != t->step) rc = save_checkpoint(t);
    for (int i = 0; i < NSTOP; i++) sigaction(STOP_SIGNALS[i], &old[i], NULL);
    if (rc) return rc;
    const int sig = stopping(t);
    if (sig) {
        fprintf(stderr, "%s: interrupted by %s after step %" PRId64 "%s%s\n", t->o.prog, signal_name(sig), t->step,
                t->o.checkpoint ? "; checkpoint saved to " : "", t->o.checkpoint ? t->o.checkpoint : "");
        finish(t);
        return 128 + sig;
    }
    return finish(t);
}

static void cleanup(trainer *t) {
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
    cannl__train_opts_free(&t->o);
}

int cannl_train_main(const cannl_model_api *api, int argc, char **argv) {
    return cannl_train_main_ext(api, NULL, argc, argv);
}

int cannl_train_main_ext(const cannl_model_api *api, const cannl_model_ext *ext, int argc, char **argv) {
    return cannl__train_main_dist(api, ext, NULL, argc, argv);
}

/* Ranks other than 0 train quietly: no output but errors (named "<prog> (rank r)"), no
   metrics log, no checkpoint (rank 0 writes the one checkpoint). */
static int setup_rank(trainer *t) {
    const cannl_model_api *api = t->api;
    if (!api->train_grads || !api->train_update || !api->grad_block)
        return report(t, CANNL__EXIT_USAGE, "model '%s' cannot train data-parallel (its table has no train_grads)",
                      api->name);
    const int device = t->ext && t->ext->device_stream && t->ext->zero_grads; /* gradients on a GPU */
    if (device != (t->dist->device != 0))
        return report(t, CANNL__EXIT_USAGE, "model '%s' keeps its gradients in %s memory, but this program's ranks reduce "
                      "them in %s memory (link the CUDA model with cannl_cuda_rt_mpi, a C model with cannl_rt_mpi)",
                      api->name, device ? "device" : "host", device ? "host" : "device");
    if (device && t->o.zero)
        return report(t, CANNL__EXIT_USAGE, "--zero 1: not for a CUDA model (its optimiser state is not sharded): "
                      "run without it");
    if (t->o.zero && (!api->grad_offsets || !api->set_update_shard || !api->shard_opt_state || !api->opt_state_start ||
                      !api->opt_state))
        return report(t, CANNL__EXIT_USAGE, "--zero 1: model '%s' cannot shard its optimiser state (regenerate it)",
                      api->name);
    t->checkpointing = t->o.checkpoint != NULL;
    if (t->dist->rank == 0) return CANNL__EXIT_OK;
    snprintf(t->prog, sizeof t->prog, "%s (rank %d)", t->o.prog, t->dist->rank);
    t->o.prog = t->prog;
    t->o.metrics = NULL;
    t->o.checkpoint = NULL;
    t->o.quiet = 1;
    if (!freopen("/dev/null", "w", stdout)) return report(t, CANNL__EXIT_FAIL, "cannot redirect stdout to /dev/null");
    return CANNL__EXIT_OK;
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
    trainer t;
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
    t.tty = isatty(fileno(stdout));
    t.train = calloc((size_t)api->num_inputs + 1, sizeof *t.train);
    t.test = calloc((size_t)api->num_inputs + 1, sizeof *t.test);
    if (!t.train || !t.test)
        rc = report(&t, CANNL__EXIT_FAIL, "out of memory");
    else if (!dist || (rc = setup_rank(&t)) == CANNL__EXIT_OK)
        rc = run(&t);

    cannl_error err;
    if (t.log && cannl_metrics_close(t.log, &err) != CANNL_OK && rc == CANNL__EXIT_OK)
        rc = report(&t, CANNL__EXIT_FAIL, "%s", err.msg);
    cleanup(&t);
    return rc;
}
