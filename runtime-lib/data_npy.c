/* data_npy.c - NumPy .npy reader (format versions 1.0, 2.0 and 3.0).
 *
 * Layout: "\x93NUMPY", major, minor, header length (uint16 LE for v1, uint32
 * LE for v2/v3), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * and the raw C-order elements. Supported dtypes: <f4 <f8 |u1 <i4 <i8. */
#define _POSIX_C_SOURCE 200809L

#include "data_readers.h"
#include "data_source.h"
#include "rt_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { NPY_MAX_HEADER = 1 << 20, NPY_MAX_NDIM = CANNL_MAX_DIMS + 1 };

typedef struct npy_header {
    char descr[32];
    int have_descr, have_order, have_shape;
    int fortran;
    int ndim;
    int64_t shape[NPY_MAX_NDIM];
} npy_header;

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int accept_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes into out (truncated to cap-1). */
static int parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\') return 0;
        if (n + 1 < cap) out[n++] = *c->p;
        c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[n] = '\0';
    return 1;
}

static int parse_int(cursor *c, int64_t *v) {
    skip_ws(c);
    const char *start = c->p;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p - '0';
        if (x > (INT64_MAX - d) / 10) return -1; /* overflow */
        x = x * 10 + d;
        c->p++;
    }
    if (c->p == start) return 0;
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++; /* Python 2 longs */
    *v = x;
    return 1;
}

/* Returns NULL on success, else a description of the problem. */
static const char *parse_header(const char *text, size_t len, npy_header *h) {
    cursor c = {text, text + len};
    memset(h, 0, sizeof *h);
    if (!accept(&c, '{')) return "header is not a dict (expected '{')";
    for (;;) {
        if (accept(&c, '}')) break;
        char key[32];
        if (!parse_str(&c, key, sizeof key)) return "expected a quoted key in the header dict";
        if (!accept(&c, ':')) return "expected ':' after a header key";
        if (strcmp(key, "descr") == 0) {
            if (!parse_str(&c, h->descr, sizeof h->descr))
                return "'descr' is not a simple dtype string (structured dtypes are not supported)";
            h->have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (accept_word(&c, "True")) h->fortran = 1;
            else if (accept_word(&c, "False")) h->fortran = 0;
            else return "'fortran_order' must be True or False";
            h->have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (!accept(&c, '(')) return "'shape' must be a tuple";
            h->ndim = 0;
            while (!accept(&c, ')')) {
                int64_t v;
                int r = parse_int(&c, &v);
                if (r < 0) return "a 'shape' entry overflows int64";
                if (r == 0) return "'shape' must be a tuple of non-negative integers";
                if (h->ndim >= NPY_MAX_NDIM) return "array has too many dimensions (at most 9 supported)";
                h->shape[h->ndim++] = v;
                if (!accept(&c, ',')) {
                    if (!accept(&c, ')')) return "expected ',' or ')' in 'shape'";
                    break;
                }
            }
            h->have_shape = 1;
        } else {
            return "unexpected key in the header dict (expected descr, fortran_order, shape)";
        }
        if (!accept(&c, ',')) {
            if (!accept(&c, '}')) return "expected ',' or '}' in the header dict";
            break;
        }
    }
    if (!h->have_descr || !h->have_order || !h->have_shape)
        return "header dict lacks one of 'descr', 'fortran_order', 'shape'";
    return NULL;
}

cannl_status cannl__load_npy(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl_error *err) {
    cannl__src s;
    char *text = NULL;
    cannl_status st = cannl__src_open(&s, path, err);
    if (st != CANNL_OK) return st;
    unsigned char pre[12];
    size_t got;
    st = cannl__src_read(&s, pre, 10, &got, err);
    if (st != CANNL_OK) goto done;
    if (got < 6 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        st = got == 0 ? cannl__fail(err, CANNL_E_FORMAT, path, "empty file (expected a .npy header)")
                      : cannl__fail(err, CANNL_E_FORMAT, path, "bad magic (not a .npy file: must start with \\x93NUMPY)");
        goto done;
    }
    if (got < 10) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "truncated .npy preamble");
        goto done;
    }
    const int major = pre[6];
    int64_t hlen, pre_len;
    if (major == 1) {
        hlen = (int64_t)pre[8] | ((int64_t)pre[9] << 8);
        pre_len = 10;
    } else if (major == 2 || major == 3) {
        st = cannl__src_read(&s, pre + 10, 2, &got, err);
        if (st != CANNL_OK) goto done;
        if (got < 2) {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "truncated .npy preamble");
            goto done;
        }
        hlen = (int64_t)pre[8] | ((int64_t)pre[9] << 8) | ((int64_t)pre[10] << 16) | ((int64_t)pre[11] << 24);
        pre_len = 12;
    } else {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "unsupported .npy format version %d.%d (expected 1.x, 2.x or 3.x)",
                         major, pre[7]);
        goto done;
    }
    if (hlen > NPY_MAX_HEADER || (s.direct && pre_len + hlen > s.file_size)) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "header length %" PRId64 " exceeds the %s", hlen,
                         hlen > NPY_MAX_HEADER ? "1 MiB limit" : "file size (truncated?)");
        goto done;
    }
    text = malloc((size_t)hlen + 1);
    if (!text) {
        st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        goto done;
    }
    st = cannl__src_read(&s, text, (size_t)hlen, &got, err);
    if (st != CANNL_OK) goto done;
    if (got < (size_t)hlen) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "truncated .npy header (%zu of %" PRId64 " bytes)", got, hlen);
        goto done;
    }
    text[hlen] = '\0';
    npy_header h;
    const char *why = parse_header(text, (size_t)hlen, &h);
    if (why) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "bad .npy header: %s", why);
        goto done;
    }
    cannl__etype t;
    const char *d = h.descr;
    if (strcmp(d, "<f4") == 0) t = CANNL__F32;
    else if (strcmp(d, "<f8") == 0) t = CANNL__F64;
    else if (strcmp(d, "|u1") == 0 || strcmp(d, "<u1") == 0 || strcmp(d, "u1") == 0) t = CANNL__U8;
    else if (strcmp(d, "<i4") == 0) t = CANNL__I32;
    else if (strcmp(d, "<i8") == 0) t = CANNL__I64;
    else {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "unsupported dtype '%s' (expected float32/float64/uint8/int32/int64%s)",
                         d, d[0] == '>' ? ", little-endian" : "");
        goto done;
    }
    if (h.fortran && h.ndim > 1) {
        st = cannl__fail(err, CANNL_E_FORMAT, path,
                         "Fortran-order arrays are not supported (save a C-order array, e.g. np.ascontiguousarray(a))");
        goto done;
    }
    if (h.ndim == 0) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "0-d array has no example axis (expected shape (count, ...))");
        goto done;
    }
    st = cannl__dataset_init(ds, path, dtype, h.shape[0], h.ndim - 1, h.shape + 1, &s, t, pre_len + hlen, err);
    if (st != CANNL_OK) goto done;
    st = cannl__read_payload(&s, ds, t, 0, err);
done:
    free(text);
    cannl__src_close(&s);
    return st;
}
