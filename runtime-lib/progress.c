/* progress.c - the one-line training progress display.
 *
 * cannl_progress_format does all the formatting into a caller buffer (so it
 * can be tested); cannl_progress_print decides between rewriting one line
 * on a terminal and printing plain lines to a file or pipe. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* Append to buf at *n like snprintf, tracking the full length. */
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) CANNL__PRINTF(4, 5);

static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r;
    if (*n < cap)
        r = vsnprintf(buf + *n, cap - *n, fmt, ap);
    else
        r = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (r > 0) *n += (size_t)r;
}

static void put_duration(char *buf, size_t cap, size_t *n, double s) {
    if (!(s >= 0) || s > 1e9) {
        put(buf, cap, n, "--");
        return;
    }
    long long t = (long long)(s + 0.5);
    long long h = t / 3600, m = (t / 60) % 60, sec = t % 60;
    if (h > 0)
        put(buf, cap, n, "%lldh%02lldm%02llds", h, m, sec);
    else if (m > 0)
        put(buf, cap, n, "%lldm%02llds", m, sec);
    else
        put(buf, cap, n, "%llds", sec);
}

size_t cannl_progress_format(char *buf, size_t cap, const cannl_progress *p) {
    size_t n = 0;
    if (cap > 0) buf[0] = '\0';
    if (!p) return 0;
    if (p->epoch > 0) {
        put(buf, cap, &n, "epoch %" PRId64, p->epoch);
        if (p->epochs > 0) put(buf, cap, &n, "/%" PRId64, p->epochs);
        put(buf, cap, &n, "  ");
    }
    put(buf, cap, &n, "step %" PRId64, p->step);
    if (p->steps > 0) put(buf, cap, &n, "/%" PRId64, p->steps);
    if (isnan(p->loss))
        put(buf, cap, &n, "  loss nan");
    else
        put(buf, cap, &n, "  loss %.4g", p->loss);
    if (p->examples_per_s >= 0) put(buf, cap, &n, "  %.1f ex/s", p->examples_per_s);
    put(buf, cap, &n, "  ETA ");
    put_duration(buf, cap, &n, p->eta_s);
    return n;
}

void cannl_progress_print(FILE *out, const cannl_progress *p) {
    if (!out || !p) return;
    char line[256];
    cannl_progress_format(line, sizeof line, p);
    if (isatty(fileno(out)))
        fprintf(out, "\r%s\033[K", line);
    else
        fprintf(out, "%s\n", line);
    fflush(out);
}

void cannl_progress_finish(FILE *out) {
    if (!out) return;
    if (isatty(fileno(out))) {
        fputc('\n', out);
        fflush(out);
    }
}
