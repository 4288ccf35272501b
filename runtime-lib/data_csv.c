/* data_csv.c - CSV reader: one example per line, comma-separated numbers.
 *
 * Blank lines are skipped, "\r\n" endings are accepted, fields may carry
 * spaces around them. If the first non-blank line has a field that is not
 * a number it is taken as a header and skipped; later such fields are errors.
 * All rows must have the same number of fields. Numbers are parsed with
 * strtod, i.e. in the C locale unless the program changed LC_NUMERIC. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct line_buf {
    char *p;
    size_t cap, len;
} line_buf;

/* Read one line (without its newline) into lb. Returns 1 with a line, 0 at
 * end of file, -1 on error (*st and err filled). */
static int read_line(cannl__src *s, line_buf *lb, cannl_status *st, cannl_error *err) {
    lb->len = 0;
    for (;;) {
        if (lb->cap - lb->len < 2 || lb->cap == 0) {
            size_t ncap = lb->cap ? lb->cap * 2 : 4096;
            if (ncap > INT32_MAX) {
                *st = cannl__fail(err, CANNL_E_FORMAT, s->path, "line longer than 1 GiB");
                return -1;
            }
            char *np = realloc(lb->p, ncap);
            if (!np) {
                *st = cannl__fail(err, CANNL_E_NOMEM, s->path, "out of memory");
                return -1;
            }
            lb->p = np;
            lb->cap = ncap;
        }
        char *r = gzgets(s->gz, lb->p + lb->len, (int)(lb->cap - lb->len));
        if (!r) {
            int zerr = 0;
            const char *m = gzerror(s->gz, &zerr);
            if (zerr != Z_OK && zerr != Z_BUF_ERROR) {
                *st = cannl__fail(err, zerr == Z_ERRNO ? CANNL_E_IO : CANNL_E_FORMAT, s->path, "read error: %s",
                            m ? m : "?");
                return -1;
            }
            if (lb->len == 0) return 0;
            break;
        }
        lb->len += strlen(lb->p + lb->len);
        if (lb->len > 0 && lb->p[lb->len - 1] == '\n') {
            lb->p[--lb->len] = '\0';
            break;
        }
        if (gzeof(s->gz)) break;
    }
    if (lb->len > 0 && lb->p[lb->len - 1] == '\r') lb->p[--lb->len] = '\0';
    return 1;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

static int is_blank(const char *s) {
    for (; *s; s++)
        if (!is_space(*s)) return 0;
    return 1;
}

/* Split the line at commas (in place) and parse every field. Returns the
 * field count; *bad is set to the 1-based index of the first non-numeric
 * field (0 if all are numbers) and *bad_text to it. Values go to vals
 * (grown as needed). */
static int64_t parse_fields(char *line, double **vals, size_t *vcap, int64_t *bad, const char **bad_text) {
    int64_t n = 0;
    *bad = 0;
    char *f = line;
    for (;;) {
        char *comma = strchr(f, ',');
        if (comma) *comma = '\0';
        while (is_space(*f)) f++;
        char *e = f + strlen(f);
        while (e > f && is_space(e[-1])) *--e = '\0';
        if ((size_t)n >= *vcap) {
            size_t ncap = *vcap ? *vcap * 2 : 64;
            double *nv = realloc(*vals, ncap * sizeof **vals);
            if (!nv) return -1;
            *vals = nv;
            *vcap = ncap;
        }
        char *end = NULL;
        errno = 0;
        double v = *f ? strtod(f, &end) : 0.0;
        if (!*f || end != e) {
            if (!*bad) {
                *bad = n + 1;
                *bad_text = f;
            }
            v = 0.0;
        }
        (*vals)[n++] = v;
        if (!comma) break;
        f = comma + 1;
    }
    return n;
}

cannl_status cannl__load_csv(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl_error *err) {
    cannl__src s;
    cannl_status st = cannl__src_open(&s, path, err);
    if (st != CANNL_OK) return st;
    line_buf lb = {NULL, 0, 0};
    double *vals = NULL;
    size_t vcap = 0;
    unsigned char *store = NULL; /* rows in the target dtype */
    size_t store_cap = 0, store_len = 0;
    const size_t es = cannl_dtype_size(dtype);
    int64_t cols = -1, rows = 0, lineno = 0;
    int seen_first = 0;
    for (;;) {
        int r = read_line(&s, &lb, &st, err);
        if (r < 0) goto done;
        if (r == 0) break;
        lineno++;
        if (is_blank(lb.p)) continue;
        int64_t bad;
        const char *bad_text = NULL;
        int64_t n = parse_fields(lb.p, &vals, &vcap, &bad, &bad_text);
        if (n < 0) {
            st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
            goto done;
        }
        if (!seen_first) {
            seen_first = 1;
            if (bad) continue; /* header line */
        }
        if (bad) {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "line %" PRId64 ": field %" PRId64 " ('%.40s') is not a number",
                             lineno, bad, bad_text);
            goto done;
        }
        if (cols < 0) {
            cols = n;
        } else if (n != cols) {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "line %" PRId64 ": %" PRId64 " values, but earlier rows have %" PRId64,
                             lineno, n, cols);
            goto done;
        }
        size_t need = (size_t)n * es;
        if (store_cap - store_len < need) {
            size_t ncap = store_cap ? store_cap : 1 << 16;
            while (ncap - store_len < need) {
                if (ncap > SIZE_MAX / 2) {
                    st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
                    goto done;
                }
                ncap *= 2;
            }
            unsigned char *ns = realloc(store, ncap);
            if (!ns) {
                st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory after %" PRId64 " rows", rows);
                goto done;
            }
            store = ns;
            store_cap = ncap;
        }
        for (int64_t i = 0; i < n; i++) {
            if (dtype == CANNL_F32) {
                float f = (float)vals[i];
                memcpy(store + store_len + (size_t)i * 4, &f, 4);
            } else {
                memcpy(store + store_len + (size_t)i * 8, &vals[i], 8);
            }
        }
        store_len += need;
        rows++;
    }
    if (rows == 0) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "no data rows");
        goto done;
    }
    {
        int64_t dims[1] = {cols};
        st = cannl__dataset_init(ds, path, dtype, rows, 1, dims, NULL, CANNL__F64, 0, err);
        if (st != CANNL_OK) goto done;
        memcpy(ds->data, store, store_len);
    }
done:
    free(store);
    free(vals);
    free(lb.p);
    cannl__src_close(&s);
    return st;
}
