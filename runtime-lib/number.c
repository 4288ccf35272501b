/* number.c - numbers in text and in memory: the one decimal-number syntax that CSV fields,
 * flag values (--lr) and checkpoint metadata ("lr") accept, and the finiteness scans of data
 * files, loaded params and the training state. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }

cannl__num cannl__parse_decimal(const char *s, double *out) {
    /* [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?  and nothing else: no spaces,
       no hexadecimal floats (0x1p3), no nan/inf words, which strtod would all accept. */
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (is_digit(*p)) p++, digits++;
    if (*p == '.') {
        p++;
        while (is_digit(*p)) p++, digits++;
    }
    if (!digits) return CANNL__NUM_SYNTAX;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return CANNL__NUM_SYNTAX;
        while (is_digit(*p)) p++;
    }
    if (*p) return CANNL__NUM_SYNTAX;
    errno = 0;
    char *end;
    const double v = strtod(s, &end);
    if (end != p) return CANNL__NUM_SYNTAX; /* a locale whose decimal point is not '.' */
    if (!isfinite(v)) return CANNL__NUM_RANGE; /* 1e999: strtod gives HUGE_VAL (underflow is fine) */
    *out = v;
    return CANNL__NUM_OK;
}

int64_t cannl__first_nonfinite(const void *p, size_t n, cannl_dtype dtype) {
    /* By the exponent bits (all ones: inf or nan), so that it holds under -ffinite-math-only
       too; the loop vectorises. Blocks of 4096 keep the early exit cheap. */
    for (size_t start = 0; start < n; start += 4096) {
        const size_t end = n - start < 4096 ? n : start + 4096;
        unsigned bad = 0;
        if (dtype == CANNL_F32) {
            const unsigned char *b = (const unsigned char *)p + start * 4;
            for (size_t i = 0; i < end - start; i++) {
                uint32_t u;
                memcpy(&u, b + i * 4, 4);
                bad |= (u & 0x7f800000u) == 0x7f800000u;
            }
        } else {
            const unsigned char *b = (const unsigned char *)p + start * 8;
            for (size_t i = 0; i < end - start; i++) {
                uint64_t u;
                memcpy(&u, b + i * 8, 8);
                bad |= (u & 0x7ff0000000000000u) == 0x7ff0000000000000u;
            }
        }
        if (!bad) continue;
        for (size_t i = start; i < end; i++) {
            const double v = dtype == CANNL_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
            if (!isfinite(v)) return (int64_t)i;
        }
    }
    return -1;
}

const char *cannl__nonfinite_name(double v) {
    if (isnan(v)) return "nan";
    return v > 0 ? "inf" : "-inf";
}
