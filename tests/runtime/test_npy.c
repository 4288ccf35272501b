/* test_npy.c - checks the .npy files npy_roundtrip.py wrote with NumPy
 * (values by the same formulas), and the error cases. Usage: test_npy DIR */
#include "rt_test.h"

#include <stdint.h>

enum { N0 = 5, N1 = 3, N2 = 2, TOTAL = N0 * N1 * N2 };

static double value(const char *code, int i) {
    if (!strcmp(code, "f4")) return (double)(float)(i * 0.25 - 3.5);
    if (!strcmp(code, "f8")) {
        /* Two statements: a compiler may not fuse them into one fma (which
         * NumPy did not do either), unlike a single expression (clang -O3
         * constant-folds such an expression as a fused multiply-add). */
        double m = i * 1e-3;
        return m - 0.123456789012345;
    }
    if (!strcmp(code, "u1")) return (double)((i * 37) % 256);
    if (!strcmp(code, "i4")) return (double)((int64_t)i * 100003 - 2000000000LL);
    return (double)((int64_t)i * 1000000007LL - 5);
}

static void check(const char *dir, const char *file, const char *code) {
    cannl_error err;
    char p[1024];
    rt_path(p, sizeof p, dir, file);
    for (int dt = 0; dt < 2; dt++) {
        cannl_dataset ds;
        CHECK_OK(cannl_dataset_load(&ds, p, dt ? CANNL_FMT_NPY : CANNL_FMT_AUTO, dt ? CANNL_F64 : CANNL_F32, &err));
        CHECK(ds.count == N0 && ds.elems == N1 * N2 && ds.ndims == 2 && ds.dims[0] == N1 && ds.dims[1] == N2);
        int bad = 0;
        for (int i = 0; i < TOTAL && ds.data; i++) {
            double want = value(code, i);
            if (dt ? ((double *)ds.data)[i] != want : ((float *)ds.data)[i] != (float)want) bad++;
        }
        if (bad) fprintf(stderr, "%s (%s): %d wrong values\n", file, dt ? "f64" : "f32", bad);
        CHECK(bad == 0);
        cannl_dataset_free(&ds);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_npy DIR (run through npy_roundtrip.py)\n");
        return 2;
    }
    const char *dir = argv[1];
    cannl_error err;
    cannl_dataset ds;
    char p[1024];

    check(dir, "f4.npy", "f4");
    check(dir, "f8.npy", "f8");
    check(dir, "u1.npy", "u1");
    check(dir, "i4.npy", "i4");
    check(dir, "i8.npy", "i8");
    check(dir, "v2.npy", "f4");
    check(dir, "v3.npy", "f4");
    check(dir, "f4.npy.gz", "f4");

    /* 1-D: one scalar per example. */
    CHECK_OK(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "vec.npy"), CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 4 && ds.elems == 1 && ds.ndims == 0);
    for (int i = 0; i < 4 && ds.data; i++) CHECK(((double *)ds.data)[i] == i * 1.5);
    cannl_dataset_free(&ds);
    /* Zero examples. */
    CHECK_OK(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "empty0.npy"), CANNL_FMT_AUTO, CANNL_F32, &err));
    CHECK(ds.count == 0 && ds.elems == 3 && ds.data != NULL);
    cannl_dataset_free(&ds);

    /* Errors. */
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "fortran.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "fortran.npy: Fortran-order arrays are not supported", "ascontiguousarray");
    CHECK(ds.data == NULL);
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "c8.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "c8.npy: unsupported dtype '<c8' (expected float32/float64/uint8/int32/int64)", "");
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "be.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "be.npy: unsupported dtype '>f4'", "little-endian");
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "scalar.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "scalar.npy:", "0-d array has no example axis");
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "structured.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "structured.npy: bad .npy header", "structured dtypes are not supported");

    /* Non-finite values: the example and the value (its index in the example) are named. */
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "nan.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "nan.npy: example 2, value 2: nan", "must be finite");
    CHECK(ds.data == NULL);
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "inf.npy"), CANNL_FMT_AUTO, CANNL_F64, &err),
              CANNL_E_FORMAT, "inf.npy: example 1, value 1: -inf", "must be finite");
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "big.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_FORMAT, "big.npy: example 2, value 0: 1e+300", "too large for float32");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.data && ((double *)ds.data)[4] == 1e300);
    cannl_dataset_free(&ds);

    /* Truncated copies of f8.npy: data cut short, and header cut short. */
    size_t len;
    char *bytes = rt_read_file(rt_path(p, sizeof p, dir, "f8.npy"), &len);
    CHECK(bytes != NULL && len > 128 + 8);
    if (bytes) {
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "trunc.npy"), bytes, len - 8) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trunc.npy: truncated",
                  "240 data bytes but the file holds 232");
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "trunchdr.npy"), bytes, 40) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "trunchdr.npy:",
                  "exceeds the file size");
        /* Bad magic in a file named .npy. */
        bytes[1] = 'X';
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "magic.npy"), bytes, len) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "magic.npy: bad magic",
                  "not a .npy file");
        bytes[1] = 'N';
        /* Unsupported version. */
        bytes[6] = 9;
        CHECK(rt_write_file(rt_path(p, sizeof p, dir, "ver.npy"), bytes, len) == 0);
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "ver.npy:",
                  "unsupported .npy format version 9.0");
        bytes[6] = 1;
        /* A shape that overflows int64 inside the header text. */
        char *sh = NULL; /* the header follows a NUL byte (minor version), so no strstr */
        for (size_t i = 10; i + 18 <= len && !sh; i++)
            if (memcmp(bytes + i, "'shape': (5, 3, 2)", 18) == 0) sh = bytes + i;
        CHECK(sh != NULL);
        if (sh) {
            memcpy(sh, "'shape': (99999999999999999999,", 31);
            CHECK(rt_write_file(rt_path(p, sizeof p, dir, "bigshape.npy"), bytes, len) == 0);
            CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "bigshape.npy:",
                      "overflows int64");
        }
        free(bytes);
    }
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "missing.npy"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_IO, "missing.npy: cannot open", "No such file");
    return rt_finish("test_npy");
}
