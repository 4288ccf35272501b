/* infer_internal.h - the pieces of cannl_infer_main shared between its files
 * (infer_args.c, infer_main.c, infer_generate.c); not installed. Bindings (NAME=PATH) and the
 * data loading are the training program's (train_internal.h). */
#ifndef CANNL_INFER_INTERNAL_H
#define CANNL_INFER_INTERNAL_H

#include "train_internal.h"

/* The parsed command line of the inference program. */
typedef struct cannl__infer_opts {
    const char *prog;              /* basename of argv[0], for messages */
    const char *weights;           /* --weights PATH, or NULL */
    const char *name_map;          /* --name-map FILE, or NULL */
    cannl__binding *inputs;        /* --input NAME=PATH (malloc'd, argc entries) */
    int ninputs;
    const char **out_paths;        /* per output: where to write it, or NULL (malloc'd) */
    const char *out_scheme;        /* the plain --output PATH, or NULL */
    char **derived;                /* per output: a path made from out_scheme (malloc'd) */
    int32_t noutputs;              /* entries of out_paths and derived */
    int64_t batch;    int batch_set;
    int threads;                   /* 0: not given */
    int metric, help;
    /* --generate N --prompt TEXT [--temperature T] [--top-k K] [--seed S] */
    int64_t generate;  int generate_set;
    const char *prompt;            /* NULL: not given */
    const char *prompts;           /* --prompts FILE: one prompt per line; NULL: not given */
    double temperature;            /* default 1; 0: argmax */
    int64_t top_k;                 /* 0: no top-k */
    uint64_t seed;                 /* default 0 */
    int32_t gen_input;             /* the model's one forward input (checked by the parser) */
} cannl__infer_opts;

/* Parse argv into *o: CANNL__EXIT_OK, or CANNL__EXIT_USAGE with a one-line message
 * in msg. Also checks what needs no file: the input names (each at most once, the
 * ones forward reads all given, the others only with --metric, which needs them
 * all), the output names, --batch against the model's maximum, and that there is
 * something to do (--output or --metric). Free o with cannl__infer_opts_free. */
int cannl__infer_parse(const cannl_infer_model *model, int argc, char **argv, cannl__infer_opts *o, char *msg,
                       size_t cap);
void cannl__infer_opts_free(cannl__infer_opts *o);

/* --generate: the prompt and o->generate sampled tokens to stdout, re-running forward on the
 * current window per token (infer_generate.c). m holds the params. Returns the exit status. */
int cannl__infer_generate(const cannl_infer_model *model, void *m, const cannl__infer_opts *o);
/* The rows a state runs for --generate: with the model's batched decode steps, --prompts'
   --batch lines at once (default CANNL__PROMPTS_AT_ONCE; one prompt: its prefill's positions
   CANNL__PROMPTS_AT_ONCE per step), at most the model's max batch (the state is created for that
   many: one KV cache slot each, untouched unless used); else 1. */
int64_t cannl__generate_rows(const cannl_infer_model *model, const cannl__infer_opts *o);
#define CANNL__MAX_PROMPTS 65536   /* --prompts: lines at most */
#define CANNL__PROMPTS_AT_ONCE 8   /* --prompts: lines per batched decode without --batch */

/* The --help text. */
void cannl__infer_usage(const cannl_infer_model *model, const char *prog, FILE *out);

#endif /* CANNL_INFER_INTERNAL_H */
