/* checkpoint.c - safetensors checkpoints: atomic writer and validating reader.
 *
 * File layout: 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"model": "...", ...},
 *    "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
 * (padded with spaces so the data starts 8-byte aligned), then the tensor
 * bytes, little-endian and row-major, offsets relative to the data start. */
#define _POSIX_C_SOURCE 200809L

#include "data_source.h" /* cannl__decode: F32 <-> F64 on reading */
#include "json_min.h"
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER_MAX = 100 * 1000 * 1000, IO_CHUNK = 1 << 20 };

/* ============================================================ writer */

static const char *dtype_name(cannl_dtype d) { return d == CANNL_F64 ? "F64" : "F32"; }

static cannl_status validate_tensors(const char *path, const cannl_tensor *t, size_t n, const cannl_meta *meta,
                                     size_t nmeta, cannl_error *err) {
    if (n > 0 && !t) return cannl__fail(err, CANNL_E_ARG, path, "tensor list is NULL");
    if (nmeta > 0 && !meta) return cannl__fail(err, CANNL_E_ARG, path, "metadata list is NULL");
    for (size_t i = 0; i < n; i++) {
        const cannl_tensor *x = &t[i];
        if (!x->name || !x->name[0]) return cannl__fail(err, CANNL_E_ARG, path, "tensor %zu has no name", i);
        if (strcmp(x->name, "__metadata__") == 0)
            return cannl__fail(err, CANNL_E_ARG, path, "tensor name '__metadata__' is reserved");
        if (x->dtype != CANNL_F32 && x->dtype != CANNL_F64)
            return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': invalid dtype %d", x->name, (int)x->dtype);
        if (x->ndims < 0 || x->ndims > CANNL_MAX_DIMS)
            return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': %d dimensions (0..%d allowed)", x->name,
                               (int)x->ndims, CANNL_MAX_DIMS);
        int64_t count = 1;
        for (int32_t d = 0; d < x->ndims; d++)
            if (cannl__mul_i64(count, x->shape[d], &count))
                return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': bad shape (negative or overflowing)",
                                   x->name);
        if ((uint64_t)count > SIZE_MAX / 8 || count > INT64_MAX / 8)
            return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': too large", x->name);
        if (count > 0 && !x->data) return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': data is NULL", x->name);
        for (size_t k = 0; k < i; k++)
            if (strcmp(t[k].name, x->name) == 0)
                return cannl__fail(err, CANNL_E_ARG, path, "duplicate tensor name '%s'", x->name);
    }
    for (size_t i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value)
            return cannl__fail(err, CANNL_E_ARG, path, "metadata entry %zu has a NULL key or value", i);
        for (size_t k = 0; k < i; k++)
            if (strcmp(meta[k].key, meta[i].key) == 0)
                return cannl__fail(err, CANNL_E_ARG, path, "duplicate metadata key '%s'", meta[i].key);
    }
    return CANNL_OK;
}

static size_t tensor_bytes(const cannl_tensor *x) {
    size_t count = 1;
    for (int32_t d = 0; d < x->ndims; d++) count *= (size_t)x->shape[d];
    return count * cannl_dtype_size(x->dtype);
}

/* Header JSON, padded with spaces so that 8 + length is a multiple of 8. */
static cannl_status build_header(const char *path, const cannl_tensor *t, size_t n, const cannl_meta *meta,
                                 size_t nmeta, cannl__sbuf *b, cannl_error *err) {
    cannl__sb_append(b, "{", 1);
    int first = 1;
    if (nmeta > 0) {
        cannl__sb_append(b, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < nmeta; i++) {
            if (i) cannl__sb_append(b, ",", 1);
            cannl__sb_json_string(b, meta[i].key);
            cannl__sb_append(b, ":", 1);
            cannl__sb_json_string(b, meta[i].value);
        }
        cannl__sb_append(b, "}", 1);
        first = 0;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (!first) cannl__sb_append(b, ",", 1);
        first = 0;
        cannl__sb_json_string(b, t[i].name);
        cannl__sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", dtype_name(t[i].dtype));
        for (int32_t d = 0; d < t[i].ndims; d++) cannl__sb_printf(b, "%s%" PRId64, d ? "," : "", t[i].shape[d]);
        uint64_t bytes = tensor_bytes(&t[i]);
        cannl__sb_printf(b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + bytes);
        off += bytes;
    }
    cannl__sb_append(b, "}", 1);
    while (!b->oom && b->len % 8 != 0) cannl__sb_append(b, " ", 1);
    if (b->oom) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory building the header");
    return CANNL_OK;
}

/* fwrite the values of x as little-endian bytes. */
static int write_data(FILE *f, const cannl_tensor *x) {
    size_t bytes = tensor_bytes(x);
    if (bytes == 0) return 0;
    if (cannl__host_le()) return fwrite(x->data, 1, bytes, f) == bytes ? 0 : -1;
    /* Big-endian host: byte-swap through a small buffer. */
    unsigned char buf[4096];
    const size_t es = cannl_dtype_size(x->dtype);
    const unsigned char *src = x->data;
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < sizeof buf ? bytes - done : sizeof buf;
        for (size_t i = 0; i < n; i += es)
            for (size_t k = 0; k < es; k++) buf[i + k] = src[done + i + es - 1 - k];
        if (fwrite(buf, 1, n, f) != n) return -1;
        done += n;
    }
    return 0;
}

cannl_status cannl_checkpoint_save(const char *path, const cannl_tensor *tensors, size_t n, const cannl_meta *meta,
                                   size_t nmeta, cannl_error *err) {
    if (!path || !path[0]) return cannl__fail(err, CANNL_E_ARG, "cannl_checkpoint_save", "path is NULL or empty");
    cannl_status st = validate_tensors(path, tensors, n, meta, nmeta, err);
    if (st != CANNL_OK) return st;

    cannl__sbuf hdr = {0};
    st = build_header(path, tensors, n, meta, nmeta, &hdr, err);
    if (st != CANNL_OK) {
        cannl__sb_free(&hdr);
        return st;
    }

    char *tmp;
    FILE *f;
    st = cannl__tmp_create(path, &f, &tmp, err);
    if (st != CANNL_OK) {
        cannl__sb_free(&hdr);
        return st;
    }
    char eb[128];

    unsigned char len8[8];
    cannl__store_le64(len8, (uint64_t)hdr.len);
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(hdr.p, 1, hdr.len, f) != hdr.len;
    for (size_t i = 0; i < n && !bad; i++) bad = write_data(f, &tensors[i]) != 0;
    if (!bad) bad = fflush(f) != 0;
    if (!bad) bad = fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    cannl__sb_free(&hdr);
    if (bad) {
        remove(tmp);
        free(tmp);
        return cannl__fail(err, CANNL_E_IO, path, "cannot write checkpoint: %s", cannl__strerror(e, eb, sizeof eb));
    }
    return cannl__tmp_commit(tmp, path, err);
}

/* ============================================================ reader */

typedef struct ck_tensor {
    const char *name;     /* in json.strings */
    const char *dtype;    /* as in the file */
    size_t esize;
    int readable;         /* F32 or F64, or I64 (read as numbers: PyTorch's num_batches_tracked) */
    int i64;
    cannl_dtype dt;
    int32_t ndims;        /* may exceed CANNL_MAX_DIMS (then only the first are kept) */
    int64_t shape[CANNL_MAX_DIMS];
    uint64_t begin, end;  /* relative to data_start */
} ck_tensor;

struct cannl_checkpoint {
    char *path;
    int fd;
    uint64_t data_start;
    size_t n;
    ck_tensor *t;
    size_t nmeta;
    const char **mkeys, **mvals;
    cannl__json json;
};

static size_t dtype_size_of(const char *s, int *readable, cannl_dtype *dt, int *i64) {
    static const struct {
        const char *name;
        size_t size;
    } table[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
                 {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},   {"BOOL", 1}, {"F8_E5M2", 1},
                 {"F8_E4M3", 1}};
    *readable = 0;
    *i64 = 0;
    if (strcmp(s, "I64") == 0) {
        *readable = 1;
        *i64 = 1;
        *dt = CANNL_F64;
    } else if (strcmp(s, "F32") == 0) {
        *readable = 1;
        *dt = CANNL_F32;
    } else if (strcmp(s, "F64") == 0) {
        *readable = 1;
        *dt = CANNL_F64;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) return table[i].size;
    return 0;
}

/* pread exactly n bytes at off; 0 ok, -1 error (errno), 1 short (EOF). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    unsigned char *p = buf;
    while (n > 0) {
        size_t want = n > (1u << 30) ? (1u << 30) : n;
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return 1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static const cannl__jnode *member(const cannl__json *j, const cannl__jnode *obj, const char *key) {
    for (int32_t c = obj->child; c >= 0; c = j->nodes[c].next)
        if (strcmp(j->nodes[c].key, key) == 0 && j->nodes[c].key_len == strlen(key)) return &j->nodes[c];
    return NULL;
}

static int cmp_begin(const void *a, const void *b) {
    const ck_tensor *x = *(const ck_tensor *const *)a, *y = *(const ck_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Validate the parsed header and fill ck's tensor and metadata tables. */
static cannl_status load_header(cannl_checkpoint *ck, uint64_t data_len, cannl_error *err) {
    const char *path = ck->path;
    const cannl__json *j = &ck->json;
    const cannl__jnode *root = &j->nodes[0];
    if (root->type != CANNL__J_OBJ) return cannl__fail(err, CANNL_E_FORMAT, path, "header is not a JSON object");
    ck->t = calloc((size_t)root->count + 1, sizeof *ck->t);
    if (!ck->t) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    for (int32_t c = root->child; c >= 0; c = j->nodes[c].next) {
        const cannl__jnode *v = &j->nodes[c];
        const char *name = v->key;
        if (strlen(name) != v->key_len)
            return cannl__fail(err, CANNL_E_FORMAT, path, "a tensor name contains a NUL character");
        if (strcmp(name, "__metadata__") == 0) {
            if (ck->mkeys) return cannl__fail(err, CANNL_E_FORMAT, path, "duplicate '__metadata__'");
            if (v->type != CANNL__J_OBJ)
                return cannl__fail(err, CANNL_E_FORMAT, path, "'__metadata__' is not an object");
            ck->mkeys = calloc((size_t)v->count + 1, sizeof *ck->mkeys);
            ck->mvals = calloc((size_t)v->count + 1, sizeof *ck->mvals);
            if (!ck->mkeys || !ck->mvals) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
            for (int32_t m = v->child; m >= 0; m = j->nodes[m].next) {
                const cannl__jnode *mv = &j->nodes[m];
                if (mv->type != CANNL__J_STR)
                    return cannl__fail(err, CANNL_E_FORMAT, path, "metadata value for '%s' is not a string", mv->key);
                if (strlen(mv->key) != mv->key_len)
                    return cannl__fail(err, CANNL_E_FORMAT, path, "a metadata key contains a NUL character");
                for (size_t k = 0; k < ck->nmeta; k++)
                    if (strcmp(ck->mkeys[k], mv->key) == 0)
                        return cannl__fail(err, CANNL_E_FORMAT, path, "duplicate metadata key '%s'", mv->key);
                ck->mkeys[ck->nmeta] = mv->key;
                ck->mvals[ck->nmeta] = mv->str;
                ck->nmeta++;
            }
            continue;
        }
        if (v->type != CANNL__J_OBJ)
            return cannl__fail(err, CANNL_E_FORMAT, path, "entry for tensor '%s' is not an object", name);
        for (size_t k = 0; k < ck->n; k++)
            if (strcmp(ck->t[k].name, name) == 0)
                return cannl__fail(err, CANNL_E_FORMAT, path, "duplicate tensor '%s'", name);
        for (int32_t a = v->child; a >= 0; a = j->nodes[a].next)
            for (int32_t b = j->nodes[a].next; b >= 0; b = j->nodes[b].next)
                if (j->nodes[a].key_len == j->nodes[b].key_len && strcmp(j->nodes[a].key, j->nodes[b].key) == 0)
                    return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': duplicate field \"%s\"", name,
                                       j->nodes[a].key);
        ck_tensor *t = &ck->t[ck->n];
        t->name = name;
        const cannl__jnode *dt = member(j, v, "dtype"), *sh = member(j, v, "shape"),
                           *off = member(j, v, "data_offsets");
        if (!dt || dt->type != CANNL__J_STR)
            return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': missing or non-string \"dtype\"", name);
        t->dtype = dt->str;
        t->esize = dtype_size_of(dt->str, &t->readable, &t->dt, &t->i64);
        if (t->esize == 0) return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': unknown dtype '%s'", name, dt->str);
        if (!sh || sh->type != CANNL__J_ARR)
            return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': missing or non-array \"shape\"", name);
        uint64_t count = 1;
        for (int32_t d = sh->child; d >= 0; d = j->nodes[d].next) {
            uint64_t v64;
            if (cannl__json_u64(&j->nodes[d], &v64) || v64 > (uint64_t)INT64_MAX)
                return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': shape entries must be non-negative integers",
                                   name);
            if (v64 != 0 && count > UINT64_MAX / v64)
                return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': shape overflows", name);
            count *= v64;
            if (t->ndims < CANNL_MAX_DIMS) t->shape[t->ndims] = (int64_t)v64; /* rank > 8: never readable */
            t->ndims++;
        }
        if (!off || off->type != CANNL__J_ARR || off->count != 2 ||
            cannl__json_u64(&j->nodes[off->child], &t->begin) ||
            cannl__json_u64(&j->nodes[j->nodes[off->child].next], &t->end))
            return cannl__fail(err, CANNL_E_FORMAT, path,
                               "tensor '%s': \"data_offsets\" must be [begin, end] non-negative integers", name);
        if (t->begin > t->end)
            return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                               "] end before they begin", name, t->begin, t->end);
        if (t->end > data_len)
            return cannl__fail(err, CANNL_E_FORMAT, path,
                               "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] outside the %" PRIu64
                               " data bytes (truncated file?)", name, t->begin, t->end, data_len);
        if (count > UINT64_MAX / t->esize || count * t->esize != t->end - t->begin)
            return cannl__fail(err, CANNL_E_FORMAT, path,
                               "tensor '%s': %s x %" PRIu64 " elements does not match its %" PRIu64 " data bytes", name,
                               t->dtype, count, t->end - t->begin);
        ck->n++;
    }
    /* The tensors tile the data exactly, as the safetensors format requires: sorted by offset,
       each begins where the previous one ends, the first at 0, the last at the end of the file.
       A hole or trailing bytes would be data no tensor owns. */
    ck_tensor **order = malloc((ck->n + 1) * sizeof *order);
    if (!order) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    for (size_t i = 0; i < ck->n; i++) order[i] = &ck->t[i];
    qsort(order, ck->n, sizeof *order, cmp_begin);
    cannl_status st = CANNL_OK;
    uint64_t reach = 0;             /* where the data covered so far ends */
    const ck_tensor *prev = NULL;   /* the tensor ending there */
    for (size_t i = 0; i < ck->n && st == CANNL_OK; i++) {
        const ck_tensor *x = order[i];
        if (x->begin < reach)
            st = cannl__fail(err, CANNL_E_FORMAT, path, "tensors '%s' and '%s' overlap in the file", prev->name, x->name);
        else if (x->begin > reach && prev)
            st = cannl__fail(err, CANNL_E_FORMAT, path,
                             "%" PRIu64 " bytes between tensors '%s' and '%s' belong to no tensor", x->begin - reach,
                             prev->name, x->name);
        else if (x->begin > reach)
            st = cannl__fail(err, CANNL_E_FORMAT, path,
                             "the first tensor, '%s', begins at data offset %" PRIu64 ", not 0", x->name, x->begin);
        reach = x->end;
        prev = x;
    }
    free(order);
    if (st == CANNL_OK && reach != data_len)
        st = cannl__fail(err, CANNL_E_FORMAT, path, "%" PRIu64 " bytes after the %s belong to no tensor", data_len - reach,
                         prev ? "last tensor" : "header (it lists no tensor)");
    return st;
}

cannl_status cannl_checkpoint_open(const char *path, const char *expect_model, cannl_checkpoint **out,
                                   cannl_error *err) {
    if (!out) return cannl__fail(err, CANNL_E_ARG, "cannl_checkpoint_open", "out is NULL");
    *out = NULL;
    if (!path) return cannl__fail(err, CANNL_E_ARG, "cannl_checkpoint_open", "path is NULL");
    char eb[128];
    cannl_checkpoint *ck = calloc(1, sizeof *ck);
    size_t plen = strlen(path);
    if (!ck || !(ck->path = malloc(plen + 1))) {
        free(ck);
        return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    }
    memcpy(ck->path, path, plen + 1);
    ck->fd = open(path, O_RDONLY);
    cannl_status st = CANNL_OK;
    char *text = NULL;
    if (ck->fd < 0) {
        st = cannl__fail(err, CANNL_E_IO, path, "cannot open: %s", cannl__strerror(errno, eb, sizeof eb));
        goto fail;
    }
    struct stat sb;
    if (fstat(ck->fd, &sb) != 0) {
        st = cannl__fail(err, CANNL_E_IO, path, "cannot stat: %s", cannl__strerror(errno, eb, sizeof eb));
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        st = cannl__fail(err, CANNL_E_IO, path, "cannot open: is a directory");
        goto fail;
    }
    const uint64_t fsize = (uint64_t)sb.st_size;
    unsigned char len8[8];
    if (fsize < 8 || pread_full(ck->fd, len8, 8, 0) != 0) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "too short for a safetensors header (%" PRIu64 " bytes)", fsize);
        goto fail;
    }
    const uint64_t hlen = cannl__load_le64(len8);
    if (hlen < 2 || hlen > HEADER_MAX || hlen > fsize - 8) {
        st = cannl__fail(err, CANNL_E_FORMAT, path,
                         "header length %" PRIu64 " is invalid (file has %" PRIu64 " bytes; limit %d)", hlen, fsize,
                         HEADER_MAX);
        goto fail;
    }
    text = malloc((size_t)hlen);
    if (!text) {
        st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory for a %" PRIu64 "-byte header", hlen);
        goto fail;
    }
    int r = pread_full(ck->fd, text, (size_t)hlen, 8);
    if (r != 0) {
        st = r < 0 ? cannl__fail(err, CANNL_E_IO, path, "read error: %s", cannl__strerror(errno, eb, sizeof eb))
                   : cannl__fail(err, CANNL_E_FORMAT, path, "truncated header");
        goto fail;
    }
    char why[160];
    if (cannl__json_parse(&ck->json, text, (size_t)hlen, why, sizeof why)) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "header is not valid JSON: %s", why);
        goto fail;
    }
    ck->data_start = 8 + hlen;
    st = load_header(ck, fsize - ck->data_start, err);
    if (st != CANNL_OK) goto fail;
    free(text); /* number nodes point into it; names and metadata do not */
    text = NULL;
    if (expect_model) {
        const char *m = cannl_checkpoint_meta(ck, CANNL_META_MODEL);
        if (!m) {
            st = cannl__fail(err, CANNL_E_MISMATCH, path, "no \"model\" in __metadata__ (expected model '%s')",
                             expect_model);
            goto fail;
        }
        if (strcmp(m, expect_model) != 0) {
            st = cannl__fail(err, CANNL_E_MISMATCH, path, "checkpoint is for model '%s', expected '%s'", m,
                             expect_model);
            goto fail;
        }
    }
    *out = ck;
    return CANNL_OK;
fail:
    free(text);
    cannl_checkpoint_close(ck);
    return st;
}

const char *cannl_checkpoint_meta(const cannl_checkpoint *ck, const char *key) {
    if (!ck || !key) return NULL;
    for (size_t i = 0; i < ck->nmeta; i++)
        if (strcmp(ck->mkeys[i], key) == 0) return ck->mvals[i];
    return NULL;
}

int cannl__checkpoint_tensor(const cannl_checkpoint *ck, size_t i, cannl_tensor *out) {
    if (!ck || i >= ck->n) return 0;
    const ck_tensor *t = &ck->t[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->readable ? t->dt : CANNL_F64;
    out->ndims = t->ndims;
    for (int32_t d = 0; d < t->ndims && d < CANNL_MAX_DIMS; d++) out->shape[d] = t->shape[d];
    return 1;
}

void cannl__format_shape(char *buf, size_t cap, int32_t nd, const int64_t *shape) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int32_t i = 0; i < nd && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* The element count of a shape; -1 on a bad or overflowing one. */
static int64_t shape_count(int32_t ndims, const int64_t *shape) {
    if (ndims < 0 || ndims > CANNL_MAX_DIMS) return -1;
    int64_t count = 1;
    for (int32_t d = 0; d < ndims; d++)
        if (shape[d] < 0 || cannl__mul_i64(count, shape[d], &count)) return -1;
    return count;
}

static cannl_status read_tensor(const cannl_checkpoint *ck, const cannl_tensor *want, int reshape, cannl_error *err);

cannl_status cannl_checkpoint_read(const cannl_checkpoint *ck, const cannl_tensor *want, cannl_error *err) {
    return read_tensor(ck, want, 0, err);
}

cannl_status cannl_checkpoint_read_reshaped(const cannl_checkpoint *ck, const cannl_tensor *want, cannl_error *err) {
    return read_tensor(ck, want, 1, err);
}

static cannl_status read_tensor(const cannl_checkpoint *ck, const cannl_tensor *want, int reshape, cannl_error *err) {
    if (!ck || !want || !want->name)
        return cannl__fail(err, CANNL_E_ARG, "cannl_checkpoint_read", "checkpoint, tensor or name is NULL");
    const char *path = ck->path;
    const ck_tensor *t = NULL;
    for (size_t i = 0; i < ck->n && !t; i++)
        if (strcmp(ck->t[i].name, want->name) == 0) t = &ck->t[i];
    if (!t) return cannl__fail(err, CANNL_E_NOTFOUND, path, "no tensor '%s' in the checkpoint", want->name);
    if (want->dtype != CANNL_F32 && want->dtype != CANNL_F64)
        return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': invalid requested dtype %d", want->name,
                           (int)want->dtype);
    if (!t->readable)
        return cannl__fail(err, CANNL_E_MISMATCH, path, "tensor '%s' has dtype %s (only F32, F64 and I64 can be read)",
                           t->name, t->dtype);
    if (t->ndims > CANNL_MAX_DIMS)
        return cannl__fail(err, CANNL_E_MISMATCH, path, "tensor '%s' has %d dimensions (at most %d supported)",
                           t->name, (int)t->ndims, CANNL_MAX_DIMS);
    int same = want->ndims == t->ndims;
    for (int32_t d = 0; same && d < t->ndims; d++) same = want->shape[d] == t->shape[d];
    const int64_t have_count = shape_count(t->ndims, t->shape), want_count = shape_count(want->ndims, want->shape);
    if (!same && !(reshape && have_count >= 0 && have_count == want_count)) {
        char a[160], b[160];
        cannl__format_shape(a, sizeof a, t->ndims, t->shape);
        cannl__format_shape(b, sizeof b, want->ndims < 0 || want->ndims > CANNL_MAX_DIMS ? 0 : want->ndims, want->shape);
        if (reshape)
            return cannl__fail(err, CANNL_E_MISMATCH, path,
                               "tensor '%s' has shape %s (%" PRId64 " elements), expected %s (%" PRId64
                               " elements): another shape loads only with as many elements",
                               t->name, a, have_count, b, want_count);
        return cannl__fail(err, CANNL_E_MISMATCH, path, "tensor '%s' has shape %s, expected %s", t->name, a, b);
    }
    const size_t count = (size_t)((t->end - t->begin) / t->esize);
    if (count == 0) return CANNL_OK;
    if (!want->data) return cannl__fail(err, CANNL_E_ARG, path, "tensor '%s': destination is NULL", t->name);
    const cannl__etype et = t->dt == CANNL_F32 ? CANNL__F32 : CANNL__F64;
    const size_t out_es = cannl_dtype_size(want->dtype);
    unsigned char *dst = want->data;
    char eb[128];
    if (t->dt == want->dtype && cannl__host_le() && !t->i64) {
        int r = pread_full(ck->fd, dst, count * t->esize, ck->data_start + t->begin);
        if (r < 0) return cannl__fail(err, CANNL_E_IO, path, "read error: %s", cannl__strerror(errno, eb, sizeof eb));
        if (r > 0) return cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': file was truncated", t->name);
        return CANNL_OK;
    }
    unsigned char *buf = malloc(IO_CHUNK);
    if (!buf) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    const size_t per = IO_CHUNK / t->esize;
    cannl_status st = CANNL_OK;
    for (size_t done = 0; done < count;) {
        size_t n = count - done < per ? count - done : per;
        int r = pread_full(ck->fd, buf, n * t->esize, ck->data_start + t->begin + done * t->esize);
        if (r != 0) {
            st = r < 0 ? cannl__fail(err, CANNL_E_IO, path, "read error: %s", cannl__strerror(errno, eb, sizeof eb))
                       : cannl__fail(err, CANNL_E_FORMAT, path, "tensor '%s': file was truncated", t->name);
            break;
        }
        if (t->i64) { /* little-endian int64 values, as numbers of the requested type */
            for (size_t k = 0; k < n; k++) {
                uint64_t u = 0;
                for (int b = 7; b >= 0; b--) u = (u << 8) | buf[k * 8 + (size_t)b];
                const double v = (double)(int64_t)u;
                if (want->dtype == CANNL_F64) memcpy(dst + (done + k) * out_es, &v, sizeof v);
                else {
                    const float f = (float)v;
                    memcpy(dst + (done + k) * out_es, &f, sizeof f);
                }
            }
        } else {
            cannl__decode(buf, n, et, 0, dst + done * out_es, want->dtype);
        }
        done += n;
    }
    free(buf);
    return st;
}

void cannl_checkpoint_close(cannl_checkpoint *ck) {
    if (!ck) return;
    if (ck->fd >= 0) close(ck->fd);
    free(ck->t);
    free(ck->mkeys);
    free(ck->mvals);
    cannl__json_free(&ck->json);
    free(ck->path);
    free(ck);
}
