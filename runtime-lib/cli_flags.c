/* cli_flags.c - the flag-table parser of the training and inference programs (cli_flags.h).
 * Every message is one line naming the flag; the programs print it after "<prog>: error: ". */
#define _POSIX_C_SOURCE 200809L

#include "cli_flags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cannl__usage_error(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return CANNL__EXIT_USAGE;
}

int cannl__parse_int(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out, char *msg, size_t cap) {
    errno = 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || (*v != '-' && (*v < '0' || *v > '9')))
        return cannl__usage_error(msg, cap, "%s: '%s' is not an integer", flag, v);
    if (x < min) return cannl__usage_error(msg, cap, "%s: %s must be at least %" PRId64, flag, v, min);
    if (errno == ERANGE || x > max) /* ERANGE: x is LLONG_MAX or LLONG_MIN, which is below min */
        return cannl__usage_error(msg, cap, "%s: %s is too large (at most %" PRId64 ")", flag, v, max);
    *out = (int64_t)x;
    return CANNL__EXIT_OK;
}

int cannl__parse_u64(const char *flag, const char *v, uint64_t *out, char *msg, size_t cap) {
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || *v < '0' || *v > '9')
        return cannl__usage_error(msg, cap, "%s: '%s' is not a non-negative integer", flag, v);
    if (errno == ERANGE) return cannl__usage_error(msg, cap, "%s: '%s' is too large", flag, v);
    *out = (uint64_t)x;
    return CANNL__EXIT_OK;
}

const char *cannl__prog_name(int argc, char **argv, const char *fallback) {
    const char *argv0 = argc > 0 && argv[0] && argv[0][0] ? argv[0] : fallback;
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

/* The row of the flag spelled a[0 .. len), or NULL. */
static const cannl__flag *find(const cannl__flag *table, int n, const char *a, size_t len) {
    for (int k = 0; k < n; k++)
        if (strlen(table[k].name) == len && strncmp(table[k].name, a, len) == 0) return &table[k];
    return NULL;
}

/* s is one of the table's flags (--name or --name=value, or -h): the value a flag before it
   lacks, not a value of that flag (a file named so is written --flag=--name). */
static int is_flag(const cannl__flag *table, int n, const char *s) {
    if (strcmp(s, "-h") == 0) return 1;
    if (strncmp(s, "--", 2) != 0) return 0;
    const char *eq = strchr(s, '=');
    return find(table, n, s, eq ? (size_t)(eq - s) : strlen(s)) != NULL;
}

int cannl__flags_parse(const cannl__flag *table, int n, int argc, char **argv, const char **seen,
                       cannl__flag_apply apply, void *ctx, char *msg, size_t cap) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0) a = "--help";
        if (strncmp(a, "--", 2) != 0 || !a[2])
            return cannl__usage_error(msg, cap, "unexpected argument '%s' (see --help)", a);
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cannl__flag *f = find(table, n, a, len);
        if (!f) return cannl__usage_error(msg, cap, "unknown flag '%.*s' (see --help)", (int)len, a);
        const int once = f->repeat == CANNL__FLAG_ONCE;
        if (f->kind == CANNL__FLAG_SWITCH) {
            if (eq) return cannl__usage_error(msg, cap, "%s takes no value", f->name);
            if (seen[f - table] && strcmp(f->name, "--help") != 0) /* -h --help is fine */
                return cannl__usage_error(msg, cap, "%s given twice", f->name);
            seen[f - table] = "";
            int rc = apply(ctx, f, NULL, msg, cap);
            if (rc) return rc;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) return cannl__usage_error(msg, cap, "%s needs a value: %s %s", f->name, f->name, f->meta);
            if (is_flag(table, n, argv[i + 1]))
                return cannl__usage_error(msg, cap, "%s needs a value: %s %s, found the flag '%s'", f->name, f->name,
                                          f->meta, argv[i + 1]);
            v = argv[++i];
        }
        if (once && seen[f - table])
            return cannl__usage_error(msg, cap, "%s given twice (%s and %s)", f->name, seen[f - table], v);
        if (once) seen[f - table] = v;
        int rc = apply(ctx, f, v, msg, cap);
        if (rc) return rc;
    }
    return CANNL__EXIT_OK;
}

void cannl__flags_help(FILE *out, const cannl__flag *table, int n) {
    fprintf(out, "\nFlags (also --flag=value):\n");
    for (int k = 0; k < n; k++) {
        char left[40];
        snprintf(left, sizeof left, "%s%s%s", table[k].name, table[k].meta ? " " : "", table[k].meta ? table[k].meta : "");
        fprintf(out, "  %-24s %s\n", left, table[k].help);
    }
}

void cannl__print_dims(FILE *out, const cannl_tensor_info *t) {
    fputc('[', out);
    for (int32_t d = 0; d < t->ndims; d++) fprintf(out, "%s%" PRId64, d ? ", " : "", t->dims[d]);
    fputc(']', out);
}
