/* metrics_log.c - a JSON-lines metrics log: one object per line, e.g.
 *   {"epoch":3,"step":1407,"loss":0.31415,"accuracy":0.8812}
 * Each line is built in memory, written with one fwrite and flushed, so a
 * crashed run leaves at most the last line incomplete. Doubles are written
 * in the shortest form that reads back exactly; NaN/inf become null. */
#define _POSIX_C_SOURCE 200809L

#include "json_min.h"
#include "rt_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cannl_metrics_log {
    FILE *f;
    char *path;
};

cannl_status cannl_metrics_open(const char *path, int append, cannl_metrics_log **out, cannl_error *err) {
    if (!out) return cannl__fail(err, CANNL_E_ARG, "cannl_metrics_open", "out is NULL");
    *out = NULL;
    if (!path) return cannl__fail(err, CANNL_E_ARG, "cannl_metrics_open", "path is NULL");
    cannl_metrics_log *log = calloc(1, sizeof *log);
    size_t len = strlen(path);
    if (!log || !(log->path = malloc(len + 1))) {
        free(log);
        return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    }
    memcpy(log->path, path, len + 1);
    log->f = fopen(path, append ? "ab" : "wb");
    if (!log->f) {
        char eb[128];
        cannl_status st = cannl__fail(err, CANNL_E_IO, path, "cannot open metrics log: %s",
                                      cannl__strerror(errno, eb, sizeof eb));
        free(log->path);
        free(log);
        return st;
    }
    *out = log;
    return CANNL_OK;
}

static void put_number(cannl__sbuf *b, double v, int is_int) {
    if (!isfinite(v)) {
        cannl__sb_append(b, "null", 4);
        return;
    }
    if (is_int && v >= -9.2e18 && v <= 9.2e18) {
        cannl__sb_printf(b, "%lld", (long long)llround(v));
        return;
    }
    char s[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    cannl__sb_append(b, s, strlen(s));
}

cannl_status cannl_metrics_write(cannl_metrics_log *log, const cannl_metric *m, size_t n, cannl_error *err) {
    if (!log) return cannl__fail(err, CANNL_E_ARG, "cannl_metrics_write", "log is NULL");
    if (n > 0 && !m) return cannl__fail(err, CANNL_E_ARG, log->path, "metric list is NULL");
    cannl__sbuf b = {0};
    cannl__sb_append(&b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        if (!m[i].key) {
            cannl__sb_free(&b);
            return cannl__fail(err, CANNL_E_ARG, log->path, "metric %zu has a NULL key", i);
        }
        if (i) cannl__sb_append(&b, ",", 1);
        cannl__sb_json_string(&b, m[i].key);
        cannl__sb_append(&b, ":", 1);
        put_number(&b, m[i].value, m[i].is_int);
    }
    cannl__sb_append(&b, "}\n", 2);
    if (b.oom) {
        cannl__sb_free(&b);
        return cannl__fail(err, CANNL_E_NOMEM, log->path, "out of memory");
    }
    int bad = fwrite(b.p, 1, b.len, log->f) != b.len;
    if (!bad) bad = fflush(log->f) != 0;
    cannl__sb_free(&b);
    if (bad) {
        char eb[128];
        clearerr(log->f);
        return cannl__fail(err, CANNL_E_IO, log->path, "cannot write metrics: %s", cannl__strerror(errno, eb, sizeof eb));
    }
    return CANNL_OK;
}

cannl_status cannl_metrics_close(cannl_metrics_log *log, cannl_error *err) {
    if (!log) return CANNL_OK;
    cannl_status st = CANNL_OK;
    if (fclose(log->f) != 0) {
        char eb[128];
        st = cannl__fail(err, CANNL_E_IO, log->path, "cannot close metrics log: %s", cannl__strerror(errno, eb, sizeof eb));
    }
    free(log->path);
    free(log);
    return st;
}
