/* npy_write.c - writing a float32/float64 array as a NumPy .npy (v1.0)
 * file, atomically: the data goes to PATH.tmp.<pid>, which is renamed over
 * PATH only once it is complete (the inference program's --output). */
#define _POSIX_C_SOURCE 200809L
#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cannl_status cannl_npy_save(const char *path, cannl_dtype dtype, int32_t ndims, const int64_t *shape,
                            const void *data, cannl_error *err) {
    if (!path || !path[0]) return cannl__fail(err, CANNL_E_ARG, "cannl_npy_save", "path is NULL or empty");
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

    /* Header: magic, version 1.0, little-endian length, a Python dict literal
     * padded with spaces and ended by '\n' so that the data starts at a
     * multiple of 64 bytes. */
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

    size_t tmp_cap = strlen(path) + 32;
    char *tmp = malloc(tmp_cap);
    if (!tmp) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    snprintf(tmp, tmp_cap, "%s.tmp.%ld", path, (long)getpid());
    char eb[128];
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        cannl_status st = cannl__fail(err, CANNL_E_IO, path, "cannot create %s: %s", tmp,
                                      cannl__strerror(e, eb, sizeof eb));
        free(tmp);
        return st;
    }
    int bad = fwrite(head, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)len, f) != (size_t)len;
    for (size_t i = 0; i < pad && !bad; i++) bad = fputc(' ', f) == EOF;
    if (!bad) bad = fputc('\n', f) == EOF;
    if (!bad && bytes > 0) bad = fwrite(data, 1, bytes, f) != bytes;
    if (!bad) bad = fflush(f) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    cannl_status st = CANNL_OK;
    if (bad) {
        remove(tmp);
        st = cannl__fail(err, CANNL_E_IO, path, "cannot write: %s", cannl__strerror(e, eb, sizeof eb));
    } else if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        st = cannl__fail(err, CANNL_E_IO, path, "cannot rename %s over it: %s", tmp, cannl__strerror(e, eb, sizeof eb));
    }
    free(tmp);
    return st;
}
