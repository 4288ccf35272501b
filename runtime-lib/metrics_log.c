/* metrics_log.c - a JSON-lines metrics log: one object per line, e.g.
 *   {"epoch":3,"step":1407,"loss":0.31415,"accuracy":0.8812}
 * Each line is built in memory, written with one fwrite and flushed, so a
 * crashed run leaves at most the last line incomplete. Doubles are written
 * in the shortest form that reads back exactly; NaN/inf become null.
 * cannl__metrics_trim cuts a log back to a checkpoint's step before a
 * resumed run appends to it; cannl__metrics_has says whether it holds a
 * record of a step with a key. A log that is not a regular file (a FIFO, a
 * device such as /dev/null or /dev/stdout) is written in place and never read
 * back: reading a FIFO waits for a writer that never comes. A FIFO no process
 * reads is refused at open (opening it to write would wait for ever). */
#define _POSIX_C_SOURCE 200809L

#include "json_min.h"
#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h> /* truncate */

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
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode)) {
        /* Without O_NONBLOCK, opening a FIFO to write waits until a process opens it to read. */
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
        if (flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) log->f = fdopen(fd, "wb");
        if (!log->f) {
            int e = errno;
            if (fd >= 0) close(fd);
            errno = e;
        }
    } else {
        log->f = fopen(path, append ? "ab" : "wb");
    }
    if (!log->f) {
        char eb[128];
        cannl_status st = errno == ENXIO ? cannl__fail(err, CANNL_E_IO, path, "cannot open metrics log: it is a FIFO "
                                                                      "that no process reads (start the reader first)")
                                         : cannl__fail(err, CANNL_E_IO, path, "cannot open metrics log: %s",
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

/* The step at which the training program wrote record `line`: its "step", else (a test record
   after an epoch) "epoch" * steps_per_epoch. 0 ok, 1 not such a record. */
static int record_step(const char *line, size_t len, int64_t steps_per_epoch, int64_t *at) {
    cannl__json j;
    char why[160];
    if (cannl__json_parse(&j, line, len, why, sizeof why)) return 1;
    int rc = 1;
    uint64_t epoch = 0, step = 0;
    int has_epoch = 0, has_step = 0;
    const cannl__jnode *root = &j.nodes[0];
    for (int32_t c = root->type == CANNL__J_OBJ ? root->child : -1; c >= 0; c = j.nodes[c].next) {
        const cannl__jnode *v = &j.nodes[c];
        if (strcmp(v->key, "epoch") == 0) has_epoch = !cannl__json_u64(v, &epoch);
        if (strcmp(v->key, "step") == 0) has_step = !cannl__json_u64(v, &step);
    }
    if (has_step && step <= INT64_MAX) {
        *at = (int64_t)step;
        rc = 0;
    } else if (has_epoch && epoch <= INT64_MAX) {
        *at = steps_per_epoch > 0 && (int64_t)epoch > INT64_MAX / steps_per_epoch ? INT64_MAX
                                                                                  : (int64_t)epoch * steps_per_epoch;
        rc = 0;
    }
    cannl__json_free(&j);
    return rc;
}

cannl_status cannl__metrics_trim(const char *path, int64_t step, int64_t steps_per_epoch, int64_t *removed,
                                 cannl_error *err) {
    *removed = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return CANNL_OK; /* written in place, never read */
    FILE *f = fopen(path, "rb");
    char eb[128];
    if (!f) {
        if (errno == ENOENT) return CANNL_OK;
        return cannl__fail(err, CANNL_E_IO, path, "cannot open metrics log: %s", cannl__strerror(errno, eb, sizeof eb));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t offset = 0, lineno = 0, cut = -1;
    cannl_status st = CANNL_OK;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        int64_t at = 0;
        if (line[len - 1] != '\n') { /* the last record, cut short by a crash */
            cut = offset;
            break;
        }
        if (len > 1 && record_step(line, (size_t)len - 1, steps_per_epoch, &at)) {
            st = cannl__fail(err, CANNL_E_FORMAT, path,
                             "line %" PRId64 " is not a record of a training program (a JSON object with a step or an "
                             "epoch): cannot cut this metrics log back to the checkpoint's step %" PRId64,
                             lineno, step);
            break;
        }
        if (len > 1 && at > step) {
            cut = offset;
            break;
        }
        offset += len;
    }
    if (st == CANNL_OK && ferror(f))
        st = cannl__fail(err, CANNL_E_IO, path, "cannot read metrics log: %s", cannl__strerror(errno, eb, sizeof eb));
    if (st == CANNL_OK && cut >= 0) {
        /* Count what goes, then cut. */
        int64_t lines = len > 0 && line[len - 1] != '\n' ? 1 : 0;
        if (lines == 0) {
            lines = 1;
            while ((len = getline(&line, &cap, f)) > 0) lines++;
        }
        *removed = lines;
        if (truncate(path, (off_t)cut) != 0)
            st = cannl__fail(err, CANNL_E_IO, path, "cannot cut the metrics log back to step %" PRId64 ": %s", step,
                             cannl__strerror(errno, eb, sizeof eb));
    }
    free(line);
    fclose(f);
    return st;
}

cannl_status cannl__metrics_has(const char *path, int64_t step, const char *key, int *found, cannl_error *err) {
    *found = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return CANNL_OK; /* written in place, never read */
    FILE *f = fopen(path, "rb");
    char eb[128];
    if (!f) {
        if (errno == ENOENT) return CANNL_OK;
        return cannl__fail(err, CANNL_E_IO, path, "cannot open metrics log: %s", cannl__strerror(errno, eb, sizeof eb));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (!*found && (len = getline(&line, &cap, f)) > 0) {
        if (len < 2 || line[len - 1] != '\n') continue; /* a blank line, a last one cut short */
        cannl__json j;
        char why[160];
        if (cannl__json_parse(&j, line, (size_t)len - 1, why, sizeof why)) continue;
        const cannl__jnode *root = &j.nodes[0];
        uint64_t at = 0;
        int at_step = 0, has_key = 0;
        for (int32_t c = root->type == CANNL__J_OBJ ? root->child : -1; c >= 0; c = j.nodes[c].next) {
            if (strcmp(j.nodes[c].key, "step") == 0) at_step = !cannl__json_u64(&j.nodes[c], &at) && at == (uint64_t)step;
            if (strcmp(j.nodes[c].key, key) == 0) has_key = 1;
        }
        *found = at_step && has_key;
        cannl__json_free(&j);
    }
    cannl_status st = CANNL_OK;
    if (ferror(f))
        st = cannl__fail(err, CANNL_E_IO, path, "cannot read metrics log: %s", cannl__strerror(errno, eb, sizeof eb));
    free(line);
    fclose(f);
    return st;
}
