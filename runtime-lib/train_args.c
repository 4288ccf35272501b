/* train_args.c - the training program's command line: its flag table (parsed by
 * cli_flags.c: `--flag value` and `--flag=value`), the values stored and checked, the
 * combinations that need no file, and the --help text. Only --data and --test may be
 * repeated (once per input); any other flag given twice is a usage error, and so is a flag
 * where a value belongs (`--checkpoint --quiet`). */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"
#include "train_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_BOOL = CANNL__FLAG_SWITCH, F_INT, F_U64, F_REAL, F_PATH, F_BIND, F_STREAM } flag_kind;
enum { ONCE = CANNL__FLAG_ONCE, MANY = CANNL__FLAG_REPEAT };

static const cannl__flag FLAGS[] = {
    {"--data", F_BIND, MANY, 0, "NAME=PATH", "training data for input NAME (one per input; .npy, .csv, IDX, maybe .gz; "
                                             "PATH:header: a CSV whose first row is a header; PATH:0-5: columns of a CSV)"},
    {"--test", F_BIND, MANY, 0, "NAME=PATH", "test data for input NAME (evaluated after every epoch)"},
    {"--stream", F_STREAM, ONCE, 0, "IN,TGT=PATH", "train a language model on a token stream: windows of ctx + 1 tokens at "
                                                   "random offsets (seeded by --seed and the step) feed integer inputs IN "
                                                   "(the first ctx) and TGT (the last ctx); an llm.c token shard or raw bytes; "
                                                   "needs --steps"},
    {"--val-stream", F_STREAM, ONCE, 0, "IN,TGT=PATH", "validation stream: val_loss and val_<metric> over --eval-batches fixed "
                                                       "batches, every --eval-every steps and at the end"},
    {"--eval-every", F_INT, ONCE, 1, "N", "steps between validations of --val-stream (default: at the end only)"},
    {"--eval-batches", F_INT, ONCE, 1, "K", "batches of --batch windows per validation (default 10)"},
    {"--epochs", F_INT, ONCE, 0, "N", "epochs to train (default 1; unlimited when only --steps is given)"},
    {"--steps", F_INT, ONCE, 0, "N", "stop after N optimisation steps in total (resumed steps included)"},
    {"--batch", F_INT, ONCE, 1, "N", "examples per step (default 128, or the model's maximum if smaller)"},
    {"--lr", F_REAL, ONCE, 0, "X", "learning rate (default: the spec's)"},
    {"--lr-schedule", F_PATH, ONCE, 0, "NAME", "constant or cosine: lr * (1 + cos(pi * step / steps)) / 2 (default: the spec's schedule)"},
    {"--seed", F_U64, ONCE, 0, "N", "seed of the initial params and the shuffling (default 0)"},
    {"--no-shuffle", F_BOOL, ONCE, 0, NULL, "visit the examples in file order"},
    {"--threads", F_INT, ONCE, 1, "N", "OpenMP threads"},
    {"--zero", F_INT, ONCE, 0, "N", "under mpirun: 1 shards the optimiser state over the ranks (ZeRO-1); 0 (default) does not"},
    {"--init", F_PATH, ONCE, 0, "PATH", "initial params from a safetensors file (PyTorch's or a checkpoint)"},
    {"--init-partial", F_BOOL, ONCE, 0, NULL, "with --init: the params the file holds from it, the others from the spec's "
                                              "init (each listed)"},
    {"--checkpoint", F_PATH, ONCE, 0, "PATH", "save the whole state after every epoch, periodically and at exit (never a "
                                              "diverged one)"},
    {"--checkpoint-every", F_INT, ONCE, 0, "N", "also save every N steps (default 1000; 0: only after epochs and at exit)"},
    {"--checkpoint-minutes", F_REAL, ONCE, 0, "M", "also save after M minutes of training since the last save (default 10; "
                                                   "0: never by time)"},
    {"--keep-last", F_INT, ONCE, 0, "K", "keep the K newest saves as PATH.stepN beside PATH, deleting older ones this run "
                                         "wrote (default 0: none)"},
    {"--resume", F_PATH, ONCE, 0, "PATH", "continue the run saved in this checkpoint"},
    {"--name-map", F_PATH, ONCE, 0, "FILE", "tensor names in --init, --resume and --checkpoint files: lines "
                                            "'cannl_name = pytorch.key' (# comments); optimiser state follows its param"},
    {"--metrics", F_PATH, ONCE, 0, "PATH", "write JSON lines with the loss and the test metrics (with --resume: cut back to "
                                           "the checkpoint's step, then appended to)"},
    {"--log-every", F_INT, ONCE, 0, "N", "steps between logged losses and checks that params are finite (default 100; 0 = never)"},
    {"--quiet", F_BOOL, ONCE, 0, NULL, "no progress or per-epoch lines"},
    {"--help", F_BOOL, ONCE, 0, NULL, "show this help"},
};
enum { NFLAGS = sizeof FLAGS / sizeof FLAGS[0] };

/* The row of flag `name` in FLAGS. */
static int flag_index(const char *name) {
    for (int i = 0; i < NFLAGS; i++)
        if (strcmp(FLAGS[i].name, name) == 0) return i;
    return 0;
}

static int parse_real(const char *flag, const char *v, double *out, char *msg, size_t cap) {
    double x = 0;
    const cannl__num r = cannl__parse_decimal(v, &x);
    if (r == CANNL__NUM_RANGE) return cannl__usage_error(msg, cap, "%s: '%s' is too large", flag, v);
    if (r != CANNL__NUM_OK) return cannl__usage_error(msg, cap, "%s: '%s' is not a number", flag, v);
    if (x < 0) return cannl__usage_error(msg, cap, "%s: %s must not be negative", flag, v);
    *out = x;
    return CANNL__EXIT_OK;
}

/* Store one flag's value into o (a cannl__train_opts). */
static int apply(void *ctx, const cannl__flag *f, const char *v, char *msg, size_t cap) {
    cannl__train_opts *o = ctx;
    const char *n = f->name;
    int rc = CANNL__EXIT_OK;
    if (f->kind == F_BOOL) {
        if (strcmp(n, "--no-shuffle") == 0) o->no_shuffle = 1;
        if (strcmp(n, "--quiet") == 0) o->quiet = 1;
        if (strcmp(n, "--init-partial") == 0) o->init_partial = 1;
        if (strcmp(n, "--help") == 0) o->help = 1;
    } else if (f->kind == F_BIND) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) return cannl__usage_error(msg, cap, "%s expects NAME=PATH, got '%s'", n, v);
        cannl__binding b = {v, (size_t)(eq - v), eq + 1};
        if (strcmp(n, "--data") == 0)
            o->data[o->ndata++] = b;
        else
            o->test[o->ntest++] = b;
    } else if (f->kind == F_STREAM) {
        if (strcmp(n, "--stream") == 0) o->stream = v;
        else o->val_stream = v;
    } else if (f->kind == F_PATH) {
        if (!*v) return cannl__usage_error(msg, cap, "%s: empty path", n);
        if (strcmp(n, "--init") == 0) o->init = v;
        if (strcmp(n, "--checkpoint") == 0) o->checkpoint = v;
        if (strcmp(n, "--resume") == 0) o->resume = v;
        if (strcmp(n, "--metrics") == 0) o->metrics = v;
        if (strcmp(n, "--name-map") == 0) o->name_map = v;
        if (strcmp(n, "--lr-schedule") == 0) {
            if (strcmp(v, "constant") != 0 && strcmp(v, "cosine") != 0)
                return cannl__usage_error(msg, cap, "--lr-schedule: '%s' is not constant or cosine", v);
            o->cosine = strcmp(v, "cosine") == 0;
            o->schedule_set = 1;
        }
    } else if (f->kind == F_INT) {
        int64_t x = 0;
        const int64_t max = strcmp(n, "--eval-batches") == 0 ? CANNL__MAX_EVAL_BATCHES
                            : strcmp(n, "--threads") == 0    ? CANNL__MAX_THREADS
                                                             : CANNL__MAX_COUNT;
        rc = cannl__parse_int(n, v, f->min, max, &x, msg, cap);
        if (rc) return rc;
        if (strcmp(n, "--epochs") == 0) {
            o->epochs = x;
            o->epochs_set = 1;
        }
        if (strcmp(n, "--steps") == 0) {
            o->steps = x;
            o->steps_set = 1;
        }
        if (strcmp(n, "--batch") == 0) {
            o->batch = x;
            o->batch_set = 1;
        }
        if (strcmp(n, "--log-every") == 0) o->log_every = x;
        if (strcmp(n, "--checkpoint-every") == 0) o->checkpoint_every = x;
        if (strcmp(n, "--keep-last") == 0) o->keep_last = x;
        if (strcmp(n, "--eval-every") == 0) {
            o->eval_every = x;
            o->eval_every_set = 1;
        }
        if (strcmp(n, "--eval-batches") == 0) {
            o->eval_batches = x;
            o->eval_batches_set = 1;
        }
        if (strcmp(n, "--threads") == 0) o->threads = (int)x;
        if (strcmp(n, "--zero") == 0) {
            if (x > 1) return cannl__usage_error(msg, cap, "%s: stage %s is not supported (0: off, 1: optimiser state sharded)", n, v);
            o->zero = (int)x;
        }
    } else if (f->kind == F_U64) {
        rc = cannl__parse_u64(n, v, &o->seed, msg, cap);
        o->seed_set = 1;
    } else if (f->kind == F_REAL && strcmp(n, "--lr") == 0) {
        rc = parse_real(n, v, &o->lr, msg, cap);
        o->lr_set = 1;
    } else if (f->kind == F_REAL) { /* --checkpoint-minutes */
        rc = parse_real(n, v, &o->checkpoint_minutes, msg, cap);
    }
    return rc;
}

/* An output (--checkpoint, --metrics) that names a file the run reads would overwrite it
   (training data, --init params, the name map) or mix with the other output: a usage error.
   --checkpoint may name the --resume file: the run continues it in place. */
static int check_outputs(const cannl__train_opts *o, char *msg, size_t cap) {
    if (o->checkpoint && o->metrics && cannl__same_file(o->checkpoint, o->metrics))
        return cannl__usage_error(msg, cap, "--checkpoint and --metrics name the same file (%s)", o->metrics);
    const char *flags[2] = {"--checkpoint", "--metrics"}, *outs[2] = {o->checkpoint, o->metrics};
    for (int k = 0; k < 2; k++) {
        const char *out = outs[k];
        if (!out) continue;
        char why[64]; /* the checkpoint is renamed over its path (the metrics log is written in place) */
        if (k == 0 && !cannl__tmp_replaceable(out, why, sizeof why))
            return cannl__usage_error(msg, cap, "--checkpoint %s: it %s (cannl replaces only regular files you own)", out, why);
        for (int pass = 0; pass < 2; pass++) {
            const cannl__binding *b = pass ? o->test : o->data;
            for (int i = 0; i < (pass ? o->ntest : o->ndata); i++)
                if (cannl__reads_file(b[i].path, out))
                    return cannl__usage_error(msg, cap, "%s %s would overwrite the file of %s %.*s", flags[k], out,
                                              pass ? "--test" : "--data", (int)b[i].name_len, b[i].name);
        }
        const char *streams[2] = {o->stream, o->val_stream};
        for (int i = 0; i < 2; i++) {
            const char *eq = streams[i] ? strchr(streams[i], '=') : NULL;
            if (eq && cannl__same_file(eq + 1, out))
                return cannl__usage_error(msg, cap, "%s %s would overwrite the token stream of %s", flags[k], out,
                                          i ? "--val-stream" : "--stream");
        }
        const char *reads[3] = {o->init, k == 1 ? o->resume : NULL, o->name_map};
        const char *names[3] = {"--init", "--resume", "--name-map"};
        for (int i = 0; i < 3; i++)
            if (reads[i] && cannl__same_file(reads[i], out))
                return cannl__usage_error(msg, cap, "%s %s would overwrite the %s file", flags[k], out, names[i]);
    }
    return CANNL__EXIT_OK;
}

int cannl__train_parse(const cannl_model_api *api, int argc, char **argv, cannl__train_opts *o, char *msg,
                       size_t cap) {
    memset(o, 0, sizeof *o);
    o->prog = cannl__prog_name(argc, argv, "train");
    o->epochs = CANNL__DEFAULT_EPOCHS;
    o->batch = CANNL__DEFAULT_BATCH;
    o->lr = NAN;
    o->log_every = CANNL__DEFAULT_LOG_EVERY;
    o->checkpoint_every = CANNL__DEFAULT_CHECKPOINT_EVERY;
    o->checkpoint_minutes = CANNL__DEFAULT_CHECKPOINT_MINUTES;
    o->eval_batches = CANNL__DEFAULT_EVAL_BATCHES;
    o->data = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o->data);
    o->test = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o->test);
    if (!o->data || !o->test) return cannl__usage_error(msg, cap, "out of memory");

    const char *seen[NFLAGS] = {0}; /* the value of a flag that is given once */
    int rc = cannl__flags_parse(FLAGS, NFLAGS, argc, argv, seen, apply, o, msg, cap);
    if (rc) return rc;
    if (o->help) return CANNL__EXIT_OK;

    if (o->init && o->resume)
        return cannl__usage_error(msg, cap, "--init and --resume cannot be used together (a checkpoint already holds the params)");
    if (o->init_partial && !o->init) return cannl__usage_error(msg, cap, "--init-partial needs --init FILE");
    if (!o->checkpoint) { /* the periodic saves' flags say how to save --checkpoint */
        const char *names[3] = {"--checkpoint-every", "--checkpoint-minutes", "--keep-last"};
        for (int i = 0; i < 3; i++)
            if (seen[flag_index(names[i])])
                return cannl__usage_error(msg, cap, "%s needs --checkpoint PATH", names[i]);
    }
    if (o->batch_set && o->batch > api->max_batch)
        return cannl__usage_error(msg, cap,
                    "--batch %" PRId64 " is larger than the model's maximum batch %" PRId64
                    " (regenerate with cannl gen --max-batch N)",
                    o->batch, api->max_batch);
    if (o->stream) {
        const char *other = o->ndata ? "--data" : o->ntest ? "--test (validate with --val-stream)" : o->epochs_set ? "--epochs"
                          : o->no_shuffle ? "--no-shuffle" : NULL;
        if (other) return cannl__usage_error(msg, cap, "--stream cannot be combined with %s", other);
        if (!o->steps_set)
            return cannl__usage_error(msg, cap, "--stream needs --steps N (a stream has no epochs)");
    } else if (o->val_stream) {
        return cannl__usage_error(msg, cap, "--val-stream needs --stream (the training stream)");
    }
    if (!o->val_stream && (o->eval_every_set || o->eval_batches_set))
        return cannl__usage_error(msg, cap, "%s needs --val-stream", o->eval_every_set ? "--eval-every" : "--eval-batches");
    if (api->num_inputs == 0 && !o->steps_set)
        return cannl__usage_error(msg, cap, "model '%s' has no inputs: pass --steps N", api->name);
    return check_outputs(o, msg, cap);
}

void cannl__train_opts_free(cannl__train_opts *o) {
    if (!o) return;
    free(o->data);
    free(o->test);
    o->data = o->test = NULL;
}

void cannl__train_usage(const cannl_model_api *api, const char *prog, FILE *out) {
    fprintf(out, "usage: %s [flags]\n\nTrains model '%s' (%s, spec learning rate %g, batch at most %" PRId64 ").\n",
            prog, api->name, api->dtype == CANNL_F64 ? "float64" : "float32", api->lr, api->max_batch);
    if (api->num_inputs == 0)
        fprintf(out, "It has no inputs: --steps N is required.\n");
    else
        fprintf(out, "Inputs (each needs --data NAME=PATH; a file with one class index per example is one-hot "
                     "encoded; integer inputs [ctx] take int32/int64 .npy or integer CSV, or a token stream: "
                     "--stream IN,TGT=PATH):\n");
    for (int32_t i = 0; i < api->num_inputs; i++) {
        fprintf(out, "  %-12s ", api->inputs[i].name);
        cannl__print_dims(out, &api->inputs[i]);
        if (api->inputs[i].ids > 0)
            fprintf(out, "  int: %" PRId64 " id%s per example, each in [0, %" PRId64 ")\n", api->inputs[i].size,
                    api->inputs[i].size == 1 ? "" : "s", api->inputs[i].ids);
        else
            fprintf(out, "  (%" PRId64 " value%s per example)\n", api->inputs[i].size, api->inputs[i].size == 1 ? "" : "s");
    }
    cannl__flags_help(out, FLAGS, NFLAGS);
    fprintf(out, "\nExit status: 0 done, 1 bad data, file or checkpoint, or training diverged (a nan or inf loss or "
                 "param; nothing saved), 2 bad usage, 128 + the signal after SIGINT (130), SIGTERM (143) or SIGHUP "
                 "(129): the step finishes and the checkpoint is saved.\n");
}
