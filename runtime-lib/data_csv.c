/* data_csv.c - CSV reader: one example per line, comma-separated numbers.
 *
 * Blank lines are skipped, "\r\n" endings are accepted, fields may carry
 * spaces around them, a leading UTF-8 byte-order mark is skipped. Numbers
 * are decimal (number.c: no hexadecimal floats, nan or inf) and must fit the
 * dtype. The first non-blank line is a header (skipped) when declared
 * (PATH:header) or when none of its fields is a number; a first line mixing
 * numbers and text is an error (a typo would otherwise silently drop the
 * first example). Ids (CANNL_I32) are written as integers ([+-]digits,
 * within int32). All rows must have the same number of fields. strtod
 * converts, i.e. the C locale is assumed for LC_NUMERIC. */
#define _POSIX_C_SOURCE 200809L

#include "data_readers.h"
#include "data_source.h"
#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
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

/* One field's problem, when it is not a usable number. */
typedef enum field_kind { FIELD_NUMBER = 0, FIELD_TEXT, FIELD_NONFINITE, FIELD_RANGE, FIELD_NOT_INT } field_kind;

/* [+-]? digits: how an id is written (CANNL_I32: no point, no exponent). */
static int is_integer_text(const char *f) {
    if (*f == '+' || *f == '-') f++;
    if (!*f) return 0;
    for (; *f; f++)
        if (*f < '0' || *f > '9') return 0;
    return 1;
}

/* The fields of a line and their parsed values (buffers reused from line to line). */
typedef struct fields {
    char **text;
    size_t cap;
    double *vals;
    size_t vcap;
} fields;

/* Split the line at commas (in place, each field trimmed of spaces) into f->text; the field
 * count, or -1 when out of memory. */
static int64_t split_fields(char *line, fields *f) {
    int64_t n = 0;
    char *p = line;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        while (is_space(*p)) p++;
        char *e = p + strlen(p);
        while (e > p && is_space(e[-1])) *--e = '\0';
        if ((size_t)n >= f->cap) {
            size_t ncap = f->cap ? f->cap * 2 : 64;
            char **nt = realloc(f->text, ncap * sizeof *nt);
            if (!nt) return -1;
            f->text = nt;
            f->cap = ncap;
        }
        f->text[n++] = p;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* Parse the selected fields (columns cols[0..ncols) of the nf split ones; cols NULL: all of
 * them, in order) as decimal numbers (number.c's syntax: no hexadecimal floats, nan or inf)
 * into f->vals. Returns the value count, or -1 when out of memory; *numbers counts the fields
 * meant as numbers (usable or not: 1e999 and nan count), and *bad / *bad_kind / *bad_text
 * describe the first that is not (*bad the 1-based field number in the line, 0 when all are).
 * A number that overflows the dtype (1e999; 1e39 for float32; past int32 for ids) is
 * FIELD_RANGE, a nan or inf word FIELD_NONFINITE, an id written with a point or an exponent
 * FIELD_NOT_INT, anything else FIELD_TEXT. */
static int64_t parse_fields(fields *f, int64_t nf, const int64_t *cols, int64_t ncols, cannl_dtype dtype,
                            int64_t *numbers, int64_t *bad, field_kind *bad_kind, const char **bad_text) {
    const int64_t n = cols ? ncols : nf;
    *numbers = 0;
    *bad = 0;
    if ((size_t)n > f->vcap) {
        size_t ncap = f->vcap ? f->vcap : 64;
        while (ncap < (size_t)n) ncap *= 2;
        double *nv = realloc(f->vals, ncap * sizeof *nv);
        if (!nv) return -1;
        f->vals = nv;
        f->vcap = ncap;
    }
    for (int64_t j = 0; j < n; j++) {
        const int64_t col = cols ? cols[j] : j;
        const char *t = f->text[col];
        double v = 0.0;
        field_kind kind = FIELD_NUMBER;
        cannl__num r = cannl__parse_decimal(t, &v);
        if (r == CANNL__NUM_RANGE || (r == CANNL__NUM_OK && dtype == CANNL_F32 && !isfinite((float)v)) ||
            (r == CANNL__NUM_OK && dtype == CANNL_I32 && is_integer_text(t) && (v < INT32_MIN || v > INT32_MAX))) {
            kind = FIELD_RANGE;
        } else if (r == CANNL__NUM_OK && dtype == CANNL_I32 && !is_integer_text(t)) {
            kind = FIELD_NOT_INT;
        } else if (r == CANNL__NUM_SYNTAX) {
            char *end;
            const double w = strtod(t, &end); /* what strtod alone would have taken */
            kind = *t && *end == '\0' && !isfinite(w) ? FIELD_NONFINITE : FIELD_TEXT;
        }
        if (kind != FIELD_TEXT) ++*numbers; /* nan and 1e999 are meant as numbers too */
        if (kind != FIELD_NUMBER) {
            if (!*bad) {
                *bad = col + 1;
                *bad_kind = kind;
                *bad_text = t;
            }
            v = 0.0;
        }
        f->vals[j] = v;
    }
    return n;
}

static cannl_status field_error(cannl_error *err, const char *path, int64_t lineno, int64_t field, field_kind kind,
                                const char *text, cannl_dtype dtype) {
    if (kind == FIELD_RANGE)
        return cannl__fail(err, CANNL_E_FORMAT, path, "line %" PRId64 ": field %" PRId64 " ('%.40s') is too large for %s",
                           lineno, field, text, dtype == CANNL_F32 ? "float32" : dtype == CANNL_I32 ? "int32" : "float64");
    if (kind == FIELD_NOT_INT)
        return cannl__fail(err, CANNL_E_MISMATCH, path,
                           "line %" PRId64 ": field %" PRId64 " ('%.40s') is not an integer, but integer ids are expected",
                           lineno, field, text);
    if (kind == FIELD_NONFINITE)
        return cannl__fail(err, CANNL_E_FORMAT, path,
                           "line %" PRId64 ": field %" PRId64 " ('%.40s') is not a finite number (the data must be finite)",
                           lineno, field, text);
    return cannl__fail(err, CANNL_E_FORMAT, path, "line %" PRId64 ": field %" PRId64 " ('%.40s') is not a number", lineno,
                       field, text);
}

cannl_status cannl__load_csv(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl__csv_header header,
                             const int64_t *sel, int64_t nsel, cannl_error *err) {
    cannl__src s;
    cannl_status st = cannl__src_open(&s, path, err);
    if (st != CANNL_OK) return st;
    line_buf lb = {NULL, 0, 0};
    fields fs = {NULL, 0, NULL, 0};
    int64_t width = -1; /* fields per data row */
    unsigned char *store = NULL; /* rows in the target dtype */
    size_t store_cap = 0, store_len = 0;
    const size_t es = cannl_dtype_size(dtype);
    int64_t rows = 0, lineno = 0;
    int64_t header_fields = -1, header_line = 0; /* a detected header: its field count, its line */
    int seen_first = 0;
    for (;;) {
        int r = read_line(&s, &lb, &st, err);
        if (r < 0) goto done;
        if (r == 0) break;
        lineno++;
        char *line = lb.p;
        if (lineno == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) line += 3; /* UTF-8 BOM (Excel's "CSV UTF-8") */
        if (is_blank(line)) continue;
        int64_t bad, numbers;
        field_kind kind = FIELD_NUMBER;
        const char *bad_text = NULL;
        const int64_t nf = split_fields(line, &fs);
        if (!seen_first && header == CANNL__CSV_HEADER && nf >= 0) { /* declared: skipped whatever it holds */
            seen_first = 1;
            continue;
        }
        for (int64_t j = 0; j < nsel && nf >= 0; j++)
            if (sel[j] >= nf) {
                st = cannl__fail(err, CANNL_E_FORMAT, path,
                                 "line %" PRId64 ": column %" PRId64 " was asked for, but the line has %" PRId64
                                 " field%s (columns 0-%" PRId64 ")",
                                 lineno, sel[j], nf, nf == 1 ? "" : "s", nf - 1);
                goto done;
            }
        const int64_t n = nf < 0 ? -1 : parse_fields(&fs, nf, sel, nsel, dtype, &numbers, &bad, &kind, &bad_text);
        if (n < 0) {
            st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
            goto done;
        }
        if (!seen_first) {
            seen_first = 1;
            /* The first row is a header when declared (PATH:header, skipped above), or when none
               of its fields is a number. One mixing numbers and text is neither: most likely a
               typo. A detected header names the columns: the data rows have as many. */
            if (numbers == 0) {
                header_fields = nf;
                header_line = lineno;
                continue;
            }
            if (bad && kind == FIELD_TEXT) {
                st = cannl__fail(err, CANNL_E_FORMAT, path,
                                 "line %" PRId64 ": field %" PRId64 " ('%.40s') is not a number, but the row has "
                                 "numbers too, so it is not a header (a header has no numeric field; declare one "
                                 "with %s:header)",
                                 lineno, bad, bad_text, path);
                goto done;
            }
        }
        if (bad) {
            st = field_error(err, path, lineno, bad, kind, bad_text, dtype);
            goto done;
        }
        if (width < 0 && header_fields >= 0 && nf != header_fields) {
            st = cannl__fail(err, CANNL_E_FORMAT, path,
                             "line %" PRId64 ": %" PRId64 " values, but the header (line %" PRId64 ") names %" PRId64
                             " column%s (declare the first row a header with %s:header to skip it whatever it holds)",
                             lineno, nf, header_line, header_fields, header_fields == 1 ? "" : "s", path);
            goto done;
        }
        if (width < 0) {
            width = nf;
        } else if (nf != width) {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "line %" PRId64 ": %" PRId64 " values, but earlier rows have %" PRId64,
                             lineno, nf, width);
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
            if (dtype == CANNL_I32) {
                int32_t id = (int32_t)fs.vals[i];
                memcpy(store + store_len + (size_t)i * 4, &id, 4);
            } else if (dtype == CANNL_F32) {
                float f = (float)fs.vals[i];
                memcpy(store + store_len + (size_t)i * 4, &f, 4);
            } else {
                memcpy(store + store_len + (size_t)i * 8, &fs.vals[i], 8);
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
        int64_t dims[1] = {nsel > 0 ? nsel : width};
        st = cannl__dataset_init(ds, path, dtype, rows, 1, dims, NULL, CANNL__F64, 0, err);
        if (st != CANNL_OK) goto done;
        memcpy(ds->data, store, store_len);
    }
done:
    free(store);
    free(fs.text);
    free(fs.vals);
    free(lb.p);
    cannl__src_close(&s);
    return st;
}
