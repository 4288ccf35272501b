/* cli_flags.h - the command line the training and inference programs share (cli_flags.c):
 * their exit statuses, a table-driven flag parser (`--flag value` and `--flag=value`, `-h` for
 * `--help`, each flag at most once unless its row says it repeats, a flag where a value belongs
 * a missing value), the checks of integer values, and the --help rows. Each program keeps its
 * own table and stores the values itself (train_args.c, infer_args.c). Not installed. */
#ifndef CANNL_CLI_FLAGS_H
#define CANNL_CLI_FLAGS_H

#include "cannl_rt.h"
#include "rt_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of the training and inference programs. */
enum { CANNL__EXIT_OK = 0, CANNL__EXIT_FAIL = 1, CANNL__EXIT_USAGE = 2 }; /* after SIGINT, SIGTERM, SIGHUP: 128 + it */

/* The kind of value a switch takes (none): every program's kinds start with it. */
enum { CANNL__FLAG_SWITCH = 0 };
/* A row's `repeat`: at most once (a second one is "given twice"), or any number of times. */
enum { CANNL__FLAG_ONCE = 0, CANNL__FLAG_REPEAT = 1 };

/* One row of a program's flag table. */
typedef struct cannl__flag {
    const char *name; /* "--name" */
    int kind;         /* the program's kind of value; CANNL__FLAG_SWITCH: it takes none */
    int repeat;       /* CANNL__FLAG_ONCE or CANNL__FLAG_REPEAT (the program checks those values) */
    int64_t min;      /* integer flags: the smallest value accepted */
    const char *meta; /* the value's name, for --help and "needs a value" (NULL for a switch) */
    const char *help;
} cannl__flag;

/* Store flag f's value v (NULL for a switch) into the program's options (ctx): CANNL__EXIT_OK,
   or CANNL__EXIT_USAGE with a one-line message in msg. */
typedef int (*cannl__flag_apply)(void *ctx, const cannl__flag *f, const char *v, char *msg, size_t cap);

/* Parse argv[1 .. argc) against table[0 .. n), calling apply once per flag in order. seen (n
   entries, zeroed by the caller) receives the value each flag given once had ("" for a
   switch), for checks after the parse. CANNL__EXIT_OK, or the first error: CANNL__EXIT_USAGE
   with a one-line message (no prefix) in msg. */
int cannl__flags_parse(const cannl__flag *table, int n, int argc, char **argv, const char **seen,
                       cannl__flag_apply apply, void *ctx, char *msg, size_t cap);

/* The --help section "Flags (also --flag=value):", one line per row. */
void cannl__flags_help(FILE *out, const cannl__flag *table, int n);

/* The program's name for messages: the basename of argv[0], or fallback without one. */
const char *cannl__prog_name(int argc, char **argv, const char *fallback);

/* A usage error: the message into msg, returns CANNL__EXIT_USAGE. */
int cannl__usage_error(char *msg, size_t cap, const char *fmt, ...) CANNL__PRINTF(3, 4);
/* An integer flag value of at least min and at most max (CANNL__MAX_COUNT for every count flag
   but those with a bound of their own, docs/generated-code.md, "Flag bounds"); a non-negative
   integer that fits uint64 (--seed). */
#define CANNL__MAX_COUNT 1000000000
#define CANNL__MAX_THREADS 4096 /* --threads */
int cannl__parse_int(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out, char *msg, size_t cap);
int cannl__parse_u64(const char *flag, const char *v, uint64_t *out, char *msg, size_t cap);

/* A tensor's dims as [d0, d1, ...], for --help. */
void cannl__print_dims(FILE *out, const cannl_tensor_info *t);

#endif /* CANNL_CLI_FLAGS_H */
