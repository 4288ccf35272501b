/* test_idx.c - IDX reader: every element type, raw and gzip, written here;
 * plus truncated / corrupt / missing / bad-magic / oversized-header files. */
#include "rt_test.h"

#include <math.h>
#include <stdint.h>
#include <zlib.h>

enum { COUNT = 7, D1 = 3, D2 = 2, TOTAL = COUNT * D1 * D2 };

typedef struct idx_type {
    unsigned char code;
    int size;
    const char *name;
} idx_type;

static const idx_type TYPES[] = {
    {0x08, 1, "u8"}, {0x09, 1, "i8"}, {0x0B, 2, "i16"}, {0x0C, 4, "i32"}, {0x0D, 4, "f32"}, {0x0E, 8, "f64"},
};

/* The value element i of a file of type `code` holds. */
static double value(unsigned char code, int i) {
    switch (code) {
    case 0x08: return (double)((i * 37) % 256);
    case 0x09: return (double)((i * 37) % 256 - 128);
    case 0x0B: return (double)(i * 1499 - 30000);
    case 0x0C: return (double)((int64_t)i * 100003 - 2000000000LL);
    case 0x0D: return (double)(float)(i * 0.25 - 3.5);
    default: {
        double m = i * 1e-3; /* separate statement: never contracted to an fma */
        return m - 0.123456789012345;
    }
    }
}

/* Big-endian bytes of element i. */
static void encode(unsigned char code, int i, unsigned char *out) {
    uint64_t bits = 0;
    int size = 1;
    double v = value(code, i);
    switch (code) {
    case 0x08: bits = (uint8_t)v; size = 1; break;
    case 0x09: bits = (uint8_t)(int8_t)v; size = 1; break;
    case 0x0B: bits = (uint16_t)(int16_t)v; size = 2; break;
    case 0x0C: bits = (uint32_t)(int32_t)v; size = 4; break;
    case 0x0D: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
        size = 4;
        break;
    }
    default: memcpy(&bits, &v, 8); size = 8; break;
    }
    for (int k = 0; k < size; k++) out[k] = (unsigned char)(bits >> (8 * (size - 1 - k)));
}

/* An in-memory IDX image: header + data. */
static size_t make_idx(unsigned char *buf, unsigned char code, int size) {
    size_t n = 0;
    buf[n++] = 0;
    buf[n++] = 0;
    buf[n++] = code;
    buf[n++] = 3;
    const uint32_t dims[3] = {COUNT, D1, D2};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++) buf[n++] = (unsigned char)(dims[d] >> (8 * (3 - k)));
    for (int i = 0; i < TOTAL; i++) {
        encode(code, i, buf + n);
        n += (size_t)size;
    }
    return n;
}

static int write_gz(const char *path, const void *data, size_t n) {
    gzFile g = gzopen(path, "wb");
    if (!g) return -1;
    int w = gzwrite(g, data, (unsigned)n);
    return (gzclose(g) == Z_OK && w == (int)n) ? 0 : -1;
}

static void check_values(const cannl_dataset *ds, unsigned char code, const char *what) {
    CHECK(ds->count == COUNT && ds->elems == D1 * D2 && ds->ndims == 2 && ds->dims[0] == D1 && ds->dims[1] == D2);
    int bad = 0;
    for (int i = 0; i < TOTAL && ds->data; i++) {
        double want = value(code, i);
        if (ds->dtype == CANNL_F32) {
            if (((const float *)ds->data)[i] != (float)want) bad++;
        } else {
            if (((const double *)ds->data)[i] != want) bad++;
        }
    }
    if (bad) fprintf(stderr, "%s: %d wrong values\n", what, bad);
    CHECK(bad == 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_idx WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    char p[1024], p2[1024];
    unsigned char buf[16 + TOTAL * 8];

    /* Round trip: every type, raw and gzip, F32 and F64, auto and explicit. */
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        size_t n = make_idx(buf, TYPES[t].code, TYPES[t].size);
        char name[64];
        snprintf(name, sizeof name, "%s-idx3", TYPES[t].name);
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, name), buf, n) == 0);
        snprintf(name, sizeof name, "%s.idx.gz", TYPES[t].name);
        CHECK(write_gz(rt_path(p2, sizeof p2, dir, name), buf, n) == 0);
        const char *files[2] = {p, p2};
        for (int f = 0; f < 2; f++) {
            for (int dt = 0; dt < 2; dt++) {
                cannl_dataset ds;
                CHECK_OK(cannl_dataset_load(&ds, files[f], dt ? CANNL_FMT_IDX : CANNL_FMT_AUTO,
                                            dt ? CANNL_F64 : CANNL_F32, &err));
                check_values(&ds, TYPES[t].code, files[f]);
                CHECK(strcmp(ds.source, files[f]) == 0);
                cannl_dataset_free(&ds);
                CHECK(ds.data == NULL && ds.count == 0);
            }
        }
    }

    /* A 1-D file: one scalar per example (labels). */
    {
        unsigned char lab[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 3, 0, 9, 1, 4};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "labels-idx1-ubyte"), lab, sizeof lab) == 0);
        cannl_dataset ds;
        CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
        CHECK(ds.count == 5 && ds.elems == 1 && ds.ndims == 0);
        const float *v = ds.data;
        CHECK(v && v[0] == 3 && v[1] == 0 && v[2] == 9 && v[3] == 1 && v[4] == 4);
        cannl_dataset_free(&ds);
    }

    /* ---- errors ---- */
    cannl_dataset ds;
    size_t n = make_idx(buf, 0x0D, 4);

    /* Missing file. */
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "nope.idx"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_IO, "nope.idx: cannot open", "No such file");
    CHECK(ds.data == NULL && ds.count == 0);

    /* Truncated raw file: the size check happens before reading. */
    CHECK(rt_write_file(rt_path(p, sizeof p, dir, "trunc.idx"), buf, n - 5) == 0);
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trunc.idx: truncated",
              "168 data bytes");

    /* Truncated gzip stream (compressed file cut short). */
    CHECK(write_gz(rt_path(p, sizeof p, dir, "full.idx.gz"), buf, n) == 0);
    {
        size_t glen;
        char *g = rt_read_file(p, &glen);
        CHECK(g != NULL);
        CHECK(rt_write_file(rt_path(p2, sizeof p2, dir, "trunc.idx.gz"), g, glen / 2) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p2, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trunc.idx.gz:",
                  "truncated");
        /* Corrupt the CRC of the gzip trailer: zlib's check must surface. */
        g[glen - 6] ^= 0x5A;
        CHECK(rt_write_file(rt_path(p2, sizeof p2, dir, "badcrc.idx.gz"), g, glen) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p2, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "badcrc.idx.gz:",
                  "corrupt compressed data");
        free(g);
    }

    /* Trailing bytes after the declared data. */
    {
        unsigned char big[sizeof buf + 3];
        memcpy(big, buf, n);
        memset(big + n, 7, 3);
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "trail.idx"), big, n + 3) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trail.idx:",
                  "3 unexpected bytes");
        CHECK(write_gz(rt_path(p, sizeof p, dir, "trail.idx.gz"), big, n + 3) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trail.idx.gz:",
                  "unexpected bytes");
    }

    /* Bad magic (explicit IDX format and by name). */
    CHECK(rt_write_file(rt_path(p, sizeof p, dir, "magic.idx"), "P5\n28 28\n255\n", 13) == 0);
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "magic.idx: bad magic",
              "not an IDX file");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F32, &err), CANNL_E_FORMAT, "magic.idx: bad magic",
              "not an IDX file");
    /* Unknown format altogether. */
    CHECK(rt_write_file(rt_path(p, sizeof p, dir, "mystery.bin"), "hello world", 11) == 0);
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "mystery.bin:",
              "unrecognised data format");
    /* Empty file. */
    CHECK(rt_write_file(rt_path(p, sizeof p, dir, "empty.idx"), "", 0) == 0);
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "empty.idx:", "empty file");

    /* Unsupported element type, zero dimensions, truncated header. */
    {
        unsigned char h[12] = {0, 0, 0x0A, 1, 0, 0, 0, 1, 0};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "type.idx"), h, 9) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F32, &err), CANNL_E_FORMAT, "type.idx:",
                  "unsupported IDX element type 0x0a");
        unsigned char z[4] = {0, 0, 8, 0};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "zero.idx"), z, 4) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F32, &err), CANNL_E_FORMAT, "zero.idx:",
                  "0 dimensions");
        unsigned char th[6] = {0, 0, 8, 2, 0, 0};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "hdr.idx"), th, 6) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F32, &err), CANNL_E_FORMAT, "hdr.idx:",
                  "truncated IDX header");
    }

    /* Hostile headers: a per-example dimension beyond int32, and a shape
     * whose element count overflows; both must fail cleanly, not allocate. */
    {
        unsigned char h[4 + 4 * 3] = {0, 0, 8, 3, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "hugedim.idx"), h, sizeof h) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F32, &err), CANNL_E_FORMAT, "hugedim.idx:",
                  "dimension 1 has size 4294967295");
        unsigned char o[4 + 4 * 9];
        o[0] = 0, o[1] = 0, o[2] = 0x0E, o[3] = 9;
        for (int d = 0; d < 9; d++) {
            o[4 + 4 * d] = 0x7F;
            o[5 + 4 * d] = o[6 + 4 * d] = o[7 + 4 * d] = 0xFF;
        }
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "overflow.idx"), o, sizeof o) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F64, &err), CANNL_E_FORMAT, "overflow.idx:",
                  "too large");
        /* A huge (but representable) size in a raw file: rejected by the size check. */
        unsigned char b[4 + 4 * 2] = {0, 0, 0x0E, 2, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0x10, 0};
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "claims.idx"), b, sizeof b) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_IDX, CANNL_F64, &err), CANNL_E_FORMAT, "claims.idx:",
                  "truncated");
    }

    /* Non-finite values in float files are refused, naming the example and the value; so is
       a float64 value beyond float32's range when loaded as float32. */
    for (int k = 0; k < 3; k++) {
        unsigned char buf[16 + TOTAL * 8];
        const unsigned char code = k == 0 ? 0x0D : 0x0E;
        const int size = code == 0x0D ? 4 : 8;
        size_t n = make_idx(buf, code, size);
        const int at = 2 * D1 * D2 + 5; /* example 2, value 5 */
        double v = k == 0 ? NAN : k == 1 ? INFINITY : 3e38 * 10;
        uint64_t bits;
        if (size == 4) {
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            bits = u;
        } else {
            memcpy(&bits, &v, 8);
        }
        for (int b = 0; b < size; b++) buf[16 + at * size + b] = (unsigned char)(bits >> (8 * (size - 1 - b)));
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "nonfinite.idx"), buf, n) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT,
                  "nonfinite.idx: example 2, value 5: ",
                  k == 0 ? "nan (the data must be finite numbers)" : k == 1 ? "inf (the data" : "3e+39 is too large for float32");
        CHECK(ds.data == NULL);
        if (k == 2) {
            CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
            cannl_dataset_free(&ds);
        } else {
            CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err), CANNL_E_FORMAT,
                      "nonfinite.idx: example 2, value 5: ", "must be finite");
        }
    }

    /* A directory is not a data file; NULL arguments are rejected. */
    CHECK_ERR(cannl_dataset_load(&ds, dir, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_IO, dir, "is a directory");
    CHECK_ERR(cannl_dataset_load(&ds, NULL, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_ARG, "path is NULL", "");
    CHECK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, NULL) != CANNL_OK); /* err may be NULL */

    return rt_finish("test_idx");
}
