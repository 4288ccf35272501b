/* data_source.c - what the IDX / .npy / CSV readers (and the checkpoint reader's
 * conversions) share: the zlib byte source (plain or gzip files alike), element decoding from a
 * file's type and byte order to float / double / int32, and the size-checked dataset setup and
 * payload streaming (the payload a header declares is checked against the file before anything
 * is allocated; trailing bytes, short data and non-finite floats are errors). data_source.h
 * declares it; it depends on nothing else of the data layer. */
#define _POSIX_C_SOURCE 200809L

#include "data_source.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ byte source */

cannl_status cannl__src_open(cannl__src *s, const char *path, cannl_error *err) {
    char eb[128];
    memset(s, 0, sizeof *s);
    s->path = path;
    struct stat st;
    if (stat(path, &st) != 0)
        return cannl__fail(err, CANNL_E_IO, path, "cannot open: %s", cannl__strerror(errno, eb, sizeof eb));
    if (S_ISDIR(st.st_mode)) return cannl__fail(err, CANNL_E_IO, path, "cannot open: is a directory");
    s->file_size = (int64_t)st.st_size;
    errno = 0;
    s->gz = gzopen(path, "rb");
    if (!s->gz) {
        int e = errno ? errno : ENOMEM;
        return cannl__fail(err, CANNL_E_IO, path, "cannot open: %s", cannl__strerror(e, eb, sizeof eb));
    }
    gzbuffer(s->gz, 1u << 16);
    s->direct = gzdirect(s->gz);
    return CANNL_OK;
}

/* zlib's message for the stream's error, without the "<path>: " it prepends. */
static const char *gz_message(const cannl__src *s, int *zerr) {
    const char *m = gzerror(s->gz, zerr);
    if (!m) return "?";
    size_t n = strlen(s->path);
    if (strncmp(m, s->path, n) == 0 && m[n] == ':' && m[n + 1] == ' ') m += n + 2;
    return m;
}

cannl_status cannl__src_read(cannl__src *s, void *buf, size_t n, size_t *got, cannl_error *err) {
    unsigned char *p = buf;
    size_t total = 0;
    while (total < n) {
        size_t want = n - total;
        if (want > (1u << 30)) want = 1u << 30;
        int r = gzread(s->gz, p + total, (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *m = gz_message(s, &zerr);
            *got = total;
            if (zerr == Z_ERRNO) {
                char eb[128];
                return cannl__fail(err, CANNL_E_IO, s->path, "read error: %s", cannl__strerror(errno, eb, sizeof eb));
            }
            return cannl__fail(err, CANNL_E_FORMAT, s->path, "corrupt compressed data: %s", m);
        }
        if (r == 0) break;
        total += (size_t)r;
    }
    *got = total;
    if (total < n) {
        /* A truncated gzip stream ends with Z_BUF_ERROR (the caller reports
         * the short read); any other error is corruption. */
        int zerr = 0;
        const char *m = gz_message(s, &zerr);
        if (zerr != Z_OK && zerr != Z_BUF_ERROR)
            return cannl__fail(err, CANNL_E_FORMAT, s->path, "corrupt compressed data: %s", m);
    }
    return CANNL_OK;
}

void cannl__src_close(cannl__src *s) {
    if (s->gz) gzclose(s->gz);
    s->gz = NULL;
}

/* ------------------------------------------------------------ elements */

size_t cannl__etype_size(cannl__etype t) {
    switch (t) {
    case CANNL__U8: case CANNL__I8: return 1;
    case CANNL__I16: return 2;
    case CANNL__I32: case CANNL__F32: return 4;
    case CANNL__I64: case CANNL__F64: return 8;
    }
    return 0;
}

static uint64_t load_uint(const unsigned char *p, size_t size, int big_endian) {
    uint64_t v = 0;
    if (big_endian)
        for (size_t i = 0; i < size; i++) v = (v << 8) | p[i];
    else
        for (size_t i = size; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

static double decode_one(const unsigned char *p, cannl__etype t, int be) {
    switch (t) {
    case CANNL__U8: return (double)p[0];
    case CANNL__I8: return (double)(int8_t)p[0];
    case CANNL__I16: return (double)(int16_t)(uint16_t)load_uint(p, 2, be);
    case CANNL__I32: return (double)(int32_t)(uint32_t)load_uint(p, 4, be);
    case CANNL__I64: return (double)(int64_t)load_uint(p, 8, be);
    case CANNL__F32: {
        uint32_t u = (uint32_t)load_uint(p, 4, be);
        float f;
        memcpy(&f, &u, 4);
        return (double)f;
    }
    case CANNL__F64: {
        uint64_t u = load_uint(p, 8, be);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
    return 0.0;
}

void cannl__decode(const unsigned char *src, size_t n, cannl__etype t, int big_endian, void *dst,
                   cannl_dtype dtype) {
    const size_t es = cannl__etype_size(t);
    if (dtype == CANNL_I32) { /* integer element types only, values checked to fit */
        int32_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = (int32_t)decode_one(src + i * es, t, big_endian);
    } else if (dtype == CANNL_F32) {
        float *d = dst;
        if (t == CANNL__U8) {
            for (size_t i = 0; i < n; i++) d[i] = (float)src[i];
        } else if (t == CANNL__F32 && big_endian != cannl__host_le()) {
            memcpy(d, src, n * 4);
        } else {
            for (size_t i = 0; i < n; i++) d[i] = (float)decode_one(src + i * es, t, big_endian);
        }
    } else {
        double *d = dst;
        if (t == CANNL__U8) {
            for (size_t i = 0; i < n; i++) d[i] = (double)src[i];
        } else if (t == CANNL__F64 && big_endian != cannl__host_le()) {
            memcpy(d, src, n * 8);
        } else {
            for (size_t i = 0; i < n; i++) d[i] = decode_one(src + i * es, t, big_endian);
        }
    }
}

/* ------------------------------------------------------------ dataset setup */

static void set_source(cannl_dataset *ds, const char *path) {
    size_t len = strlen(path), cap = sizeof ds->source;
    if (len < cap) {
        memcpy(ds->source, path, len + 1);
    } else { /* keep the tail, which names the file */
        memcpy(ds->source, "...", 3);
        memcpy(ds->source + 3, path + len - (cap - 4), cap - 4);
        ds->source[cap - 1] = '\0';
    }
}

/* Check the payload a header declares against the file before anything is
 * allocated: exact size for plain files; for gzip at most the 1032:1
 * maximum ratio of deflate (plus slack), so a corrupt header cannot make us
 * allocate absurd amounts. */
static cannl_status check_payload(const cannl__src *s, int64_t total, cannl__etype t, int64_t header_bytes,
                                  cannl_error *err) {
    size_t payload;
    if ((uint64_t)total > SIZE_MAX || cannl__mul_size((size_t)total, cannl__etype_size(t), &payload) ||
        payload > (size_t)(INT64_MAX - header_bytes))
        return cannl__fail(err, CANNL_E_FORMAT, s->path, "shape is too large (byte count overflows)");
    if (s->direct) {
        int64_t expect = header_bytes + (int64_t)payload;
        if (s->file_size < expect)
            return cannl__fail(err, CANNL_E_FORMAT, s->path,
                               "truncated: header declares %zu data bytes but the file holds %" PRId64, payload,
                               s->file_size > header_bytes ? s->file_size - header_bytes : 0);
        if (s->file_size > expect)
            return cannl__fail(err, CANNL_E_FORMAT, s->path,
                               "%" PRId64 " unexpected bytes after the %zu data bytes the header declares",
                               s->file_size - expect, payload);
    } else if (s->file_size < INT64_MAX / 2048 && (int64_t)payload > s->file_size * 1100 + (1 << 20)) {
        return cannl__fail(err, CANNL_E_FORMAT, s->path,
                           "truncated or corrupt: header declares %zu data bytes, more than a %" PRId64
                           "-byte gzip file can hold", payload, s->file_size);
    }
    return CANNL_OK;
}

cannl_status cannl__dataset_init(cannl_dataset *ds, const char *path, cannl_dtype dtype, int64_t count,
                                 int32_t ndims, const int64_t *dims, const cannl__src *s, cannl__etype t,
                                 int64_t header_bytes, cannl_error *err) {
    memset(ds, 0, sizeof *ds);
    if (dtype == CANNL_I32 && s && (t == CANNL__F32 || t == CANNL__F64))
        return cannl__fail(err, CANNL_E_MISMATCH, path,
                           "holds %s values, but integer ids are expected",
                           t == CANNL__F32 ? "float32" : "float64");
    if (ndims < 0 || ndims > CANNL_MAX_DIMS)
        return cannl__fail(err, CANNL_E_FORMAT, path, "%d dimensions per example (at most %d supported)",
                           (int)ndims, CANNL_MAX_DIMS);
    if (count < 0) return cannl__fail(err, CANNL_E_FORMAT, path, "negative example count");
    int64_t elems = 1;
    for (int32_t i = 0; i < ndims; i++) {
        if (dims[i] < 0 || dims[i] > INT32_MAX)
            return cannl__fail(err, CANNL_E_FORMAT, path, "dimension %d has size %" PRId64 " (must be 0..%d)",
                               (int)i + 1, dims[i], INT32_MAX);
        if (cannl__mul_i64(elems, dims[i], &elems))
            return cannl__fail(err, CANNL_E_FORMAT, path, "shape is too large (element count overflows)");
    }
    int64_t total;
    size_t bytes;
    if (cannl__mul_i64(count, elems, &total) || (uint64_t)total > SIZE_MAX ||
        cannl__mul_size((size_t)total, cannl_dtype_size(dtype), &bytes))
        return cannl__fail(err, CANNL_E_FORMAT, path, "shape is too large (%" PRId64 " examples x %" PRId64
                           " elements overflows)", count, elems);
    if (s) {
        cannl_status st = check_payload(s, total, t, header_bytes, err);
        if (st != CANNL_OK) return st;
    }
    void *data = cannl_alloc(bytes);
    if (!data)
        return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory allocating %zu bytes for %" PRId64
                           " examples x %" PRId64 " elements", bytes, count, elems);
    ds->count = count;
    ds->elems = elems;
    ds->ndims = ndims;
    for (int32_t i = 0; i < ndims; i++) ds->dims[i] = (int32_t)dims[i];
    ds->dtype = dtype;
    ds->data = data;
    set_source(ds, path);
    return CANNL_OK;
}

cannl_status cannl__read_payload(cannl__src *s, cannl_dataset *ds, cannl__etype t, int big_endian,
                                 cannl_error *err) {
    const size_t es = cannl__etype_size(t);
    const size_t total = (size_t)(ds->count * ds->elems); /* checked by dataset_init */
    const size_t payload = total * es;                     /* likewise */
    enum { CHUNK = 1 << 16 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return cannl__fail(err, CANNL_E_NOMEM, s->path, "out of memory");
    const size_t per_chunk = CHUNK / es;
    const size_t out_es = cannl_dtype_size(ds->dtype);
    size_t done = 0;
    cannl_status st = CANNL_OK;
    while (done < total) {
        size_t n = total - done < per_chunk ? total - done : per_chunk, got;
        st = cannl__src_read(s, buf, n * es, &got, err);
        if (st != CANNL_OK) break;
        if (got < n * es) {
            st = s->direct ? cannl__fail(err, CANNL_E_FORMAT, s->path,
                                         "truncated: header declares %zu data bytes but the file holds %zu", payload,
                                         done * es + got)
                           : cannl__fail(err, CANNL_E_FORMAT, s->path,
                                         "truncated: header declares %zu data bytes but the decompressed data "
                                         "ends after %zu", payload, done * es + got);
            break;
        }
        if (ds->dtype == CANNL_I32 && t == CANNL__I64) { /* ids are int32 */
            for (size_t i = 0; i < n && st == CANNL_OK; i++) {
                const double v = decode_one(buf + i * es, t, big_endian);
                const int64_t at = (int64_t)(done + i);
                if (v < (double)INT32_MIN || v > (double)INT32_MAX)
                    st = cannl__fail(err, CANNL_E_RANGE, s->path,
                                     "example %" PRId64 ", value %" PRId64 ": %.0f does not fit int32", at / ds->elems,
                                     at % ds->elems, v);
            }
            if (st != CANNL_OK) break;
        }
        unsigned char *out = (unsigned char *)ds->data + done * out_es;
        cannl__decode(buf, n, t, big_endian, out, ds->dtype);
        /* Floating-point files may hold inf or nan, and float64 values may overflow float32:
           one such value would poison every param it reaches, so the file is refused. */
        const int64_t bad = t == CANNL__F32 || t == CANNL__F64 ? cannl__first_nonfinite(out, n, ds->dtype) : -1;
        if (bad >= 0) {
            const double raw = decode_one(buf + (size_t)bad * es, t, big_endian);
            const int64_t at = (int64_t)done + bad;
            st = isfinite(raw) ? cannl__fail(err, CANNL_E_FORMAT, s->path,
                                             "example %" PRId64 ", value %" PRId64 ": %g is too large for float32",
                                             at / ds->elems, at % ds->elems, raw)
                               : cannl__fail(err, CANNL_E_FORMAT, s->path,
                                             "example %" PRId64 ", value %" PRId64
                                             ": %s (the data must be finite numbers)",
                                             at / ds->elems, at % ds->elems, cannl__nonfinite_name(raw));
            break;
        }
        done += n;
    }
    if (st == CANNL_OK && !s->direct) {
        size_t got;
        st = cannl__src_read(s, buf, 1, &got, err);
        if (st == CANNL_OK && got != 0)
            st = cannl__fail(err, CANNL_E_FORMAT, s->path,
                             "unexpected bytes after the %zu data bytes the header declares", payload);
    }
    free(buf);
    return st;
}
