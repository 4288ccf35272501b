/* data.c - datasets: format detection and dispatch to the readers (data_readers.h), the
 * PATH[:header][:COLUMNS] binding, free, one-hot, batch gather. The readers' shared pieces
 * (byte source, element decoding, size checks) are data_source.c's. */
#define _POSIX_C_SOURCE 200809L

#include "data_readers.h"
#include "data_source.h"
#include "rt_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ public API */

static int ends_with_ci(const char *s, size_t len, const char *suffix) {
    size_t n = strlen(suffix);
    if (len < n) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[len - n + i]) != suffix[i]) return 0;
    return 1;
}

static cannl_format detect(const char *path, cannl_error *err, cannl_status *st) {
    cannl__src s;
    *st = cannl__src_open(&s, path, err);
    if (*st != CANNL_OK) return CANNL_FMT_AUTO;
    unsigned char m[6] = {0};
    size_t got = 0;
    *st = cannl__src_read(&s, m, sizeof m, &got, err);
    cannl__src_close(&s);
    if (*st != CANNL_OK) return CANNL_FMT_AUTO;
    if (got >= 6 && memcmp(m, "\x93NUMPY", 6) == 0) return CANNL_FMT_NPY;
    if (got >= 4 && m[0] == 0 && m[1] == 0 && m[3] >= 1 &&
        (m[2] == 0x08 || m[2] == 0x09 || m[2] == 0x0B || m[2] == 0x0C || m[2] == 0x0D || m[2] == 0x0E))
        return CANNL_FMT_IDX;
    /* No magic: go by the name (without a .gz suffix). */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (ends_with_ci(base, len, ".gz")) len -= 3;
    if (ends_with_ci(base, len, ".csv") || ends_with_ci(base, len, ".txt")) return CANNL_FMT_CSV;
    if (ends_with_ci(base, len, ".npy")) return CANNL_FMT_NPY;
    for (size_t i = 0; i + 3 <= len; i++)
        if (tolower((unsigned char)base[i]) == 'i' && tolower((unsigned char)base[i + 1]) == 'd' &&
            tolower((unsigned char)base[i + 2]) == 'x')
            return CANNL_FMT_IDX;
    if (got == 0) {
        *st = cannl__fail(err, CANNL_E_FORMAT, path, "empty file");
        return CANNL_FMT_AUTO;
    }
    *st = cannl__fail(err, CANNL_E_FORMAT, path,
                      "unrecognised data format (no IDX or .npy magic, and the name does not end in .csv/.txt)");
    return CANNL_FMT_AUTO;
}

static cannl_status load(cannl_dataset *ds, const char *path, cannl_format format, cannl_dtype dtype,
                         cannl__csv_header header, const int64_t *cols, int64_t ncols, const char *col_text,
                         cannl_error *err) {
    if (!ds) return cannl__fail(err, CANNL_E_ARG, "cannl_dataset_load", "dataset pointer is NULL");
    memset(ds, 0, sizeof *ds);
    if (!path) return cannl__fail(err, CANNL_E_ARG, "cannl_dataset_load", "path is NULL");
    if (dtype != CANNL_F32 && dtype != CANNL_F64 && dtype != CANNL_I32)
        return cannl__fail(err, CANNL_E_ARG, path, "invalid dtype %d (expected CANNL_F32, CANNL_F64 or CANNL_I32)",
                           (int)dtype);
    cannl_status st = CANNL_OK;
    if (format == CANNL_FMT_AUTO) {
        format = detect(path, err, &st);
        if (st != CANNL_OK) return st;
    }
    if ((header == CANNL__CSV_HEADER || ncols > 0) && format != CANNL_FMT_CSV)
        return cannl__fail(err, CANNL_E_ARG, path, "'%s%s' %s of a CSV file, but this is %s",
                           ncols > 0 ? ":" : ":header", ncols > 0 ? col_text : "",
                           ncols > 0 ? "selects columns" : "declares the header row",
                           format == CANNL_FMT_NPY ? "a .npy file" : "an IDX file");
    switch (format) {
    case CANNL_FMT_IDX: st = cannl__load_idx(ds, path, dtype, err); break;
    case CANNL_FMT_NPY: st = cannl__load_npy(ds, path, dtype, err); break;
    case CANNL_FMT_CSV: st = cannl__load_csv(ds, path, dtype, header, ncols > 0 ? cols : NULL, ncols, err); break;
    default: return cannl__fail(err, CANNL_E_ARG, path, "invalid format %d", (int)format);
    }
    if (st != CANNL_OK) cannl_dataset_free(ds);
    return st;
}

cannl_status cannl_dataset_load(cannl_dataset *ds, const char *path, cannl_format format, cannl_dtype dtype,
                                cannl_error *err) {
    return load(ds, path, format, dtype, CANNL__CSV_AUTO_HEADER, NULL, 0, NULL, err);
}

enum { MAX_COLUMNS = 1 << 20 };

/* A column selection "0-5", "6", "0,2,4-7" (0-based, ranges inclusive) into *cols (malloc'd,
 * *n entries). 1: s is no selection (other characters); -1: it looks like one but is not
 * well formed (an open range, too many columns); -2: out of memory; -3: a reversed range
 * (its ends in rev[0], rev[1]). */
static int parse_columns(const char *s, int64_t **cols, int64_t *n, long long rev[2]) {
    if (!*s || strspn(s, "0123456789,-") != strlen(s)) return 1;
    *cols = NULL;
    *n = 0;
    size_t cap = 0;
    const char *p = s;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') goto bad;
        errno = 0;
        long long a = strtoll(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            if (p[1] < '0' || p[1] > '9') goto bad;
            b = strtoll(p + 1, &end, 10);
            p = end;
        }
        if (!errno && b < a) {
            rev[0] = a;
            rev[1] = b;
            free(*cols);
            *cols = NULL;
            *n = 0;
            return -3;
        }
        if (errno || b - a >= MAX_COLUMNS || *n + (b - a + 1) > MAX_COLUMNS) goto bad;
        for (long long c = a; c <= b; c++) {
            if ((size_t)*n == cap) {
                cap = cap ? cap * 2 : 16;
                int64_t *nc = realloc(*cols, cap * sizeof *nc);
                if (!nc) {
                    free(*cols);
                    *cols = NULL;
                    return -2;
                }
                *cols = nc;
            }
            (*cols)[(*n)++] = (int64_t)c;
        }
        if (!*p) return 0;
        if (*p != ',') goto bad;
        p++;
    }
bad:
    free(*cols);
    *cols = NULL;
    *n = 0;
    return -1;
}

cannl_status cannl__dataset_load_bound(cannl_dataset *ds, const char *path_spec, cannl_dtype dtype, cannl_error *err) {
    if (ds) memset(ds, 0, sizeof *ds);
    struct stat sb;
    if (!path_spec || stat(path_spec, &sb) == 0) /* a file of that very name: no suffixes */
        return load(ds, path_spec, CANNL_FMT_AUTO, dtype, CANNL__CSV_AUTO_HEADER, NULL, 0, NULL, err);
    const size_t len = strlen(path_spec);
    char *path = malloc(len + 1), *col_text = malloc(len + 1);
    if (!path || !col_text) {
        free(path);
        free(col_text);
        return cannl__fail(err, CANNL_E_NOMEM, path_spec, "out of memory");
    }
    memcpy(path, path_spec, len + 1);
    col_text[0] = '\0';
    cannl__csv_header header = CANNL__CSV_AUTO_HEADER;
    int64_t *cols = NULL, ncols = 0;
    cannl_status st = CANNL_OK;
    /* PATH[:header][:COLUMNS] or PATH[:COLUMNS][:header], taken off the end */
    for (int k = 0; k < 2 && st == CANNL_OK; k++) {
        char *colon = strrchr(path, ':');
        if (!colon || colon == path) break;
        if (strcmp(colon + 1, "header") == 0 && header == CANNL__CSV_AUTO_HEADER) {
            header = CANNL__CSV_HEADER;
            *colon = '\0';
            continue;
        }
        if (cols) break;
        long long rev[2] = {0, 0};
        const int r = parse_columns(colon + 1, &cols, &ncols, rev);
        if (r == 1) break;
        if (r == -2) st = cannl__fail(err, CANNL_E_NOMEM, path_spec, "out of memory");
        if (r == -3)
            st = cannl__fail(err, CANNL_E_ARG, path_spec,
                             "bad column selection '%s': the range %lld-%lld is reversed (ranges count up: %lld-%lld)",
                             colon + 1, rev[0], rev[1], rev[1], rev[0]);
        if (r == -1)
            st = cannl__fail(err, CANNL_E_ARG, path_spec,
                             "bad column selection '%s' (0-based columns: N, N-M or a comma-separated list of them, "
                             "e.g. 0-5 or 0,2,4-7)", colon + 1);
        if (r == 0) {
            memcpy(col_text, colon + 1, strlen(colon + 1) + 1);
            *colon = '\0';
        }
    }
    if (st == CANNL_OK) st = load(ds, path, CANNL_FMT_AUTO, dtype, header, cols, ncols, col_text, err);
    free(cols);
    free(col_text);
    free(path);
    return st;
}

void cannl_dataset_free(cannl_dataset *ds) {
    if (!ds) return;
    cannl_free(ds->data);
    memset(ds, 0, sizeof *ds);
}

static double get_value(const cannl_dataset *ds, int64_t i) {
    return ds->dtype == CANNL_F32 ? (double)((const float *)ds->data)[i] : ((const double *)ds->data)[i];
}

cannl_status cannl_dataset_one_hot(cannl_dataset *ds, int32_t classes, cannl_error *err) {
    if (!ds || (!ds->data && ds->count > 0))
        return cannl__fail(err, CANNL_E_ARG, "cannl_dataset_one_hot", "dataset is NULL or empty");
    const char *src = ds->source[0] ? ds->source : "dataset";
    if (ds->dtype == CANNL_I32)
        return cannl__fail(err, CANNL_E_ARG, src, "one-hot: a dataset of ids (CANNL_I32) is used as it is");
    if (classes < 1) return cannl__fail(err, CANNL_E_ARG, src, "one-hot: class count %d must be >= 1", (int)classes);
    if (ds->elems != 1)
        return cannl__fail(err, CANNL_E_MISMATCH, src,
                           "one-hot needs 1 class index per example, but examples have %" PRId64 " elements",
                           ds->elems);
    for (int64_t i = 0; i < ds->count; i++) {
        double v = get_value(ds, i);
        if (!(v == floor(v)))
            return cannl__fail(err, CANNL_E_RANGE, src, "example %" PRId64 ": label %g is not an integer", i, v);
        if (v < 0 || v >= (double)classes)
            return cannl__fail(err, CANNL_E_RANGE, src, "example %" PRId64 ": label %.0f is out of range [0, %d)",
                               i, v, (int)classes);
    }
    int64_t total;
    size_t bytes;
    const size_t es = cannl_dtype_size(ds->dtype);
    if (cannl__mul_i64(ds->count, classes, &total) || (uint64_t)total > SIZE_MAX ||
        cannl__mul_size((size_t)total, es, &bytes))
        return cannl__fail(err, CANNL_E_RANGE, src, "one-hot: %" PRId64 " x %d values overflow", ds->count,
                           (int)classes);
    void *out = cannl_alloc(bytes);
    if (!out) return cannl__fail(err, CANNL_E_NOMEM, src, "one-hot: out of memory allocating %zu bytes", bytes);
    for (int64_t i = 0; i < ds->count; i++) {
        int64_t c = (int64_t)get_value(ds, i);
        if (ds->dtype == CANNL_F32)
            ((float *)out)[i * classes + c] = 1.0f;
        else
            ((double *)out)[i * classes + c] = 1.0;
    }
    cannl_free(ds->data);
    ds->data = out;
    ds->elems = classes;
    ds->ndims = 1;
    memset(ds->dims, 0, sizeof ds->dims);
    ds->dims[0] = classes;
    return CANNL_OK;
}

cannl_status cannl_dataset_gather(const cannl_dataset *ds, const int64_t *idx, int64_t n, void *dst,
                                  cannl_error *err) {
    if (!ds) return cannl__fail(err, CANNL_E_ARG, "cannl_dataset_gather", "dataset is NULL");
    const char *src = ds->source[0] ? ds->source : "dataset";
    if (n < 0) return cannl__fail(err, CANNL_E_ARG, src, "gather: negative count %" PRId64, n);
    if (n == 0) return CANNL_OK;
    if (!idx || !dst || !ds->data) return cannl__fail(err, CANNL_E_ARG, src, "gather: NULL index, destination or data");
    const size_t row = (size_t)ds->elems * cannl_dtype_size(ds->dtype);
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= ds->count)
            return cannl__fail(err, CANNL_E_RANGE, src, "gather: index %" PRId64 " (position %" PRId64
                               ") is out of range [0, %" PRId64 ")", idx[i], i, ds->count);
    unsigned char *d = dst;
    const unsigned char *s = ds->data;
    for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * row, s + (size_t)idx[i] * row, row);
    return CANNL_OK;
}
