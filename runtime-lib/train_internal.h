/* train_internal.h - the pieces of cannl_train_main that need no running trainer, shared with
 * the inference program and the data-parallel libraries: the parsed command line
 * (train_args.c), the data bindings (train_data.c), the token streams (train_stream.c). The
 * running trainer is trainer.h's. Not installed. */
#ifndef CANNL_TRAIN_INTERNAL_H
#define CANNL_TRAIN_INTERNAL_H

#include "cannl_rt.h"
#include "cli_flags.h" /* exit statuses, the flag parser */
#include "rt_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* Defaults of the command line. */
#define CANNL__DEFAULT_EPOCHS 1
#define CANNL__DEFAULT_BATCH 128
#define CANNL__DEFAULT_LOG_EVERY 100
#define CANNL__DEFAULT_EVAL_BATCHES 10
/* Periodic checkpoints (--checkpoint-every, --checkpoint-minutes): a save every 1000 steps or
   10 minutes of training, whichever comes first. */
#define CANNL__DEFAULT_CHECKPOINT_EVERY 1000
#define CANNL__DEFAULT_CHECKPOINT_MINUTES 10.0
/* Upper bounds of count flags beyond cli_flags.h's CANNL__MAX_COUNT (docs/generated-code.md,
   "Flag bounds"): --eval-batches, --generate; --threads 4096, --batch the model's maximum. */
#define CANNL__MAX_EVAL_BATCHES 1000000
#define CANNL__MAX_GENERATE 100000000

/* Bytes per element of input i's buffers: int32 ids for an integer input, else the model's dtype. */
static inline size_t cannl__input_elem_size(const cannl_model_api *api, int32_t i) {
    return api->inputs[i].ids > 0 ? sizeof(int32_t) : cannl_dtype_size(api->dtype);
}

/* "<prog>: <kind>: <message>" on stderr, stdout flushed first (train_output.c). */
void cannl__vmessage(const char *prog, const char *kind, const char *fmt, va_list ap);

/* One NAME=PATH of --data / --test (pointers into argv). */
typedef struct cannl__binding {
    const char *name;
    size_t name_len;
    const char *path;
} cannl__binding;

/* The parsed command line. `*_set` says whether the flag was given. */
typedef struct cannl__train_opts {
    const char *prog;              /* basename of argv[0], for messages */
    cannl__binding *data, *test;   /* malloc'd, argc entries each */
    int ndata, ntest;
    int64_t epochs;   int epochs_set;
    int64_t steps;    int steps_set;
    int64_t batch;    int batch_set;
    double lr;        int lr_set;
    int cosine;       int schedule_set;  /* --lr-schedule cosine */
    uint64_t seed;    int seed_set;
    int no_shuffle;
    int threads;                   /* 0: not given */
    int zero;                      /* --zero: 1 = ZeRO-1 (optimiser state sharded over MPI ranks) */
    const char *init, *checkpoint, *resume, *metrics;
    int init_partial;                 /* --init-partial: params --init lacks keep the spec's init */
    int64_t checkpoint_every;         /* --checkpoint-every N: a save every N steps (0: none) */
    double checkpoint_minutes;        /* --checkpoint-minutes M: a save after M minutes of training (0: none) */
    int64_t keep_last;                /* --keep-last K: the K newest saves kept as PATH.stepN (0: none) */
    const char *name_map;             /* --name-map FILE, or NULL */
    int64_t log_every;
    int quiet, help;
    const char *stream, *val_stream;  /* --stream / --val-stream INPUT,TARGET=PATH, or NULL */
    int64_t eval_every;               /* --eval-every N: validate every N steps (0: at the end only) */
    int64_t eval_batches;             /* --eval-batches K */
    int eval_every_set, eval_batches_set;
} cannl__train_opts;

/* train_args.c --------------------------------------------------------- */

/* Parse argv into *o (defaults filled in). Returns CANNL__EXIT_OK, or
 * CANNL__EXIT_USAGE with a one-line message (no prefix) in msg. Also checks
 * combinations that need no file (e.g. --init with --resume). Free o with
 * cannl__train_opts_free in every case. */
int cannl__train_parse(const cannl_model_api *api, int argc, char **argv, cannl__train_opts *o, char *msg,
                       size_t cap);
void cannl__train_opts_free(cannl__train_opts *o);

/* The --help text. */
void cannl__train_usage(const cannl_model_api *api, const char *prog, FILE *out);

/* train_data.c --------------------------------------------------------- */

/* Check that the bindings name each input of the model exactly once (flag is
 * "--data" or "--test"); CANNL__EXIT_OK or CANNL__EXIT_USAGE with msg. */
int cannl__bind_check(const cannl_model_api *api, const cannl__binding *b, int n, const char *flag, char *msg,
                      size_t cap);

/* Load the file bound to each input into ds[0..num_inputs) (in input order),
 * one-hot encoding class-index files (one value per example) for the inputs i
 * with one_hot[i] != 0 (one_hot NULL: any input; the training program, which
 * cannot tell targets apart), and check that all files have the same number of
 * examples (*count). On failure every ds[i] is freed. */
cannl_status cannl__bind_load(const cannl_model_api *api, const cannl__binding *b, int n,
                              const unsigned char *one_hot, cannl_dataset *ds, int64_t *count, cannl_error *err);

/* Gather examples idx[0..n) of every input's dataset into bufs[i]. */
cannl_status cannl__bind_gather(const cannl_model_api *api, const cannl_dataset *ds, const int64_t *idx, int64_t n,
                                void *const *bufs, cannl_error *err);

/* train_stream.c ------------------------------------------------------- */

/* A token stream bound to a pair of integer inputs [ctx |] (--stream / --val-stream). */
typedef struct cannl__stream {
    int32_t input, target;   /* the model inputs fed the first and the last ctx tokens of a window */
    int64_t ctx;             /* tokens per example */
    int64_t vocab;           /* the smaller of the two inputs' ids: every token must be below it */
    const char *path;        /* into argv */
    cannl_token_stream tokens;
} cannl__stream;

/* Parse INPUT,TARGET=PATH of flag (--stream, --val-stream) against the model: two distinct
   integer inputs of rank 1 and equal length, and no other input. CANNL__EXIT_OK or
   CANNL__EXIT_USAGE with msg. Nothing is opened. */
int cannl__stream_bind(const cannl_model_api *api, const char *flag, const char *spec, cannl__stream *s, char *msg,
                       size_t cap);
/* Load the stream's file (errors name it: see cannl_token_stream_open). */
cannl_status cannl__stream_open(cannl__stream *s, cannl_error *err);
void cannl__stream_close(cannl__stream *s);
/* The n windows of training step `step` (0-based) into the two inputs' int32 buffers of bufs;
   offsets: room for n. */
void cannl__stream_train_batch(const cannl__stream *s, uint64_t seed, int64_t step, int64_t n, int64_t *offsets,
                               void *const *bufs);
/* Windows lo .. lo + count - 1 of step `step`'s batch of n (a data-parallel rank's slice of the
   same global batch), into bufs from their start; offsets holds n. */
void cannl__stream_train_slice(const cannl__stream *s, uint64_t seed, int64_t step, int64_t n, int64_t lo,
                               int64_t count, int64_t *offsets, void *const *bufs);
/* Validation batch k (of `batches`, n windows each; the same at every evaluation) into bufs. */
void cannl__stream_val_batch(const cannl__stream *s, int64_t batches, int64_t n, int64_t k, void *const *bufs);

#endif /* CANNL_TRAIN_INTERNAL_H */
