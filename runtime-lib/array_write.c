/* array_write.c - writing a float32/float64 array as a NumPy .npy (v1.0) file
 * or as CSV (one line per row of the first axis, values comma-separated, as
 * many digits as round-trip: %.9g / %.17g). Every file is written to a
 * temporary next to its target (PATH.tmp.<pid>, created exclusively), which is
 * renamed over PATH only once it is complete: by cannl_npy_save /
 * cannl_csv_save at once, by the inference program only after every output was
 * written (all-or-nothing --output). */
#define _POSIX_C_SOURCE 200809L
#include "rt_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cannl__out_format cannl__out_format_of(const char *path) {
    size_t n = strlen(path);
    if (n >= 4 && path[n - 4] == '.' && tolower((unsigned char)path[n - 3]) == 'c' &&
        tolower((unsigned char)path[n - 2]) == 's' && tolower((unsigned char)path[n - 1]) == 'v')
        return CANNL__OUT_CSV;
    return CANNL__OUT_NPY;
}

/* Header: magic, version 1.0, little-endian length, a Python dict literal padded with spaces
   and ended by '\n' so that the data starts at a multiple of 64 bytes. 0 when written. */
static int write_npy(FILE *f, cannl_dtype dtype, int32_t ndims, const int64_t *shape, const void *data,
                     size_t bytes) {
    char dict[64 + 24 * CANNL_MAX_DIMS];
    int len = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                       cannl__host_le() ? '<' : '>', dtype == CANNL_F32 ? "f4" : "f8");
    for (int32_t d = 0; d < ndims; d++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%" PRId64 "%s", shape[d],
                        ndims == 1 || d + 1 < ndims ? "," : "");
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = (size_t)len + pad + 1;
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    int bad = fwrite(head, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)len, f) != (size_t)len;
    for (size_t i = 0; i < pad && !bad; i++) bad = fputc(' ', f) == EOF;
    if (!bad) bad = fputc('\n', f) == EOF;
    if (!bad && bytes > 0) bad = fwrite(data, 1, bytes, f) != bytes;
    return bad;
}

/* One line per row of the first axis (a 0-d array is one row), no header. 0 when written. */
static int write_csv(FILE *f, cannl_dtype dtype, int32_t ndims, const int64_t *shape, const void *data,
                     int64_t count) {
    int64_t rows = ndims > 0 ? shape[0] : 1;
    int64_t per = rows > 0 ? count / rows : 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < per; c++) {
            int64_t i = r * per + c;
            double v = dtype == CANNL_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
            if (fprintf(f, dtype == CANNL_F32 ? "%s%.9g" : "%s%.17g", c ? "," : "", v) < 0) return 1;
        }
        if (fputc('\n', f) == EOF) return 1;
    }
    return 0;
}

cannl_status cannl__array_write_tmp(const char *path, cannl__out_format fmt, cannl_dtype dtype, int32_t ndims,
                                    const int64_t *shape, const void *data, char **tmp_out, cannl_error *err) {
    *tmp_out = NULL;
    if (!path || !path[0]) return cannl__fail(err, CANNL_E_ARG, "array write", "path is NULL or empty");
    if (dtype != CANNL_F32 && dtype != CANNL_F64)
        return cannl__fail(err, CANNL_E_ARG, path, "invalid dtype %d", (int)dtype);
    if (ndims < 0 || ndims > CANNL_MAX_DIMS || (ndims > 0 && !shape))
        return cannl__fail(err, CANNL_E_ARG, path, "invalid shape (%d dims)", (int)ndims);
    int64_t count = 1;
    for (int32_t d = 0; d < ndims; d++)
        if (cannl__mul_i64(count, shape[d], &count))
            return cannl__fail(err, CANNL_E_ARG, path, "invalid or overflowing shape");
    size_t bytes;
    if ((uint64_t)count > SIZE_MAX || cannl__mul_size((size_t)count, cannl_dtype_size(dtype), &bytes))
        return cannl__fail(err, CANNL_E_ARG, path, "array too large");
    if (bytes > 0 && !data) return cannl__fail(err, CANNL_E_ARG, path, "data is NULL");

    char *tmp;
    FILE *f;
    cannl_status st = cannl__tmp_create(path, &f, &tmp, err);
    if (st != CANNL_OK) return st;
    char eb[128];
    int bad = fmt == CANNL__OUT_CSV ? write_csv(f, dtype, ndims, shape, data, count)
                                    : write_npy(f, dtype, ndims, shape, data, bytes);
    if (!bad) bad = fflush(f) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        remove(tmp);
        free(tmp);
        return cannl__fail(err, CANNL_E_IO, path, "cannot write: %s", cannl__strerror(e, eb, sizeof eb));
    }
    *tmp_out = tmp;
    return CANNL_OK;
}

static cannl_status save(const char *path, cannl__out_format fmt, cannl_dtype dtype, int32_t ndims,
                         const int64_t *shape, const void *data, cannl_error *err) {
    char *tmp;
    cannl_status st = cannl__array_write_tmp(path, fmt, dtype, ndims, shape, data, &tmp, err);
    return st != CANNL_OK ? st : cannl__tmp_commit(tmp, path, err);
}

cannl_status cannl_npy_save(const char *path, cannl_dtype dtype, int32_t ndims, const int64_t *shape,
                            const void *data, cannl_error *err) {
    if (!path || !path[0]) return cannl__fail(err, CANNL_E_ARG, "cannl_npy_save", "path is NULL or empty");
    return save(path, CANNL__OUT_NPY, dtype, ndims, shape, data, err);
}

cannl_status cannl_csv_save(const char *path, cannl_dtype dtype, int32_t ndims, const int64_t *shape,
                            const void *data, cannl_error *err) {
    if (!path || !path[0]) return cannl__fail(err, CANNL_E_ARG, "cannl_csv_save", "path is NULL or empty");
    return save(path, CANNL__OUT_CSV, dtype, ndims, shape, data, err);
}
