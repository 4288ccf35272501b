/* test_csv.c - CSV reader (with/without header, CRLF, blanks, gzip) and its
 * errors; one-hot encoding and batch gather on the loaded data. */
#include "rt_internal.h" /* cannl__dataset_load_bound: PATH:header */
#include "rt_test.h"

#include <zlib.h>

static void write_text(const char *path, const char *text) { CHECK(rt_write_file(path, text, strlen(text)) == 0); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_csv WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    cannl_dataset ds;
    char p[1024];

    /* No header. */
    write_text(rt_path(p, sizeof p, dir, "plain.csv"), "1,2,3\n4.5,-6,7e2\n0.125, 8 ,9\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 3 && ds.elems == 3 && ds.ndims == 1 && ds.dims[0] == 3 && ds.dtype == CANNL_F64);
    {
        const double want[9] = {1, 2, 3, 4.5, -6, 700, 0.125, 8, 9};
        const double *v = ds.data;
        for (int i = 0; i < 9 && v; i++) CHECK(v[i] == want[i]);
    }
    cannl_dataset_free(&ds);

    /* Header, CRLF endings, blank lines, no final newline, F32. */
    write_text(rt_path(p, sizeof p, dir, "header.csv"), "x, y\r\n\r\n1.5,2\r\n  \r\n3,4.25\r\n-1,1e-3");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_CSV, CANNL_F32, &err));
    CHECK(ds.count == 3 && ds.elems == 2 && ds.dtype == CANNL_F32);
    {
        const float want[6] = {1.5f, 2, 3, 4.25f, -1, 1e-3f};
        const float *v = ds.data;
        for (int i = 0; i < 6 && v; i++) CHECK(v[i] == want[i]);
    }
    cannl_dataset_free(&ds);

    /* Single column .txt, gzip-compressed. */
    {
        gzFile g = gzopen(rt_path(p, sizeof p, dir, "labels.txt.gz"), "wb");
        CHECK(g != NULL);
        if (g) {
            gzputs(g, "label\n2\n0\n1\n2\n");
            gzclose(g);
        }
        CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
        CHECK(ds.count == 4 && ds.elems == 1);

        /* One-hot into 3 classes. */
        CHECK_OK(cannl_dataset_one_hot(&ds, 3, &err));
        CHECK(ds.count == 4 && ds.elems == 3 && ds.ndims == 1 && ds.dims[0] == 3);
        const float want[12] = {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1};
        const float *v = ds.data;
        for (int i = 0; i < 12 && v; i++) CHECK(v[i] == want[i]);

        /* Gather examples 3, 0, 3 (a batch in permutation order). */
        float batch[9];
        const int64_t idx[3] = {3, 0, 3};
        CHECK_OK(cannl_dataset_gather(&ds, idx, 3, batch, &err));
        const float wb[9] = {0, 0, 1, 0, 0, 1, 0, 0, 1};
        for (int i = 0; i < 9; i++) CHECK(batch[i] == wb[i]);
        const int64_t bad_idx[2] = {1, 4};
        CHECK_ERR(cannl_dataset_gather(&ds, bad_idx, 2, batch, &err), CANNL_E_RANGE, "labels.txt.gz:",
                  "index 4 (position 1) is out of range [0, 4)");
        /* One-hot needs one value per example. */
        CHECK_ERR(cannl_dataset_one_hot(&ds, 3, &err), CANNL_E_MISMATCH, "labels.txt.gz:", "1 class index per example");
        cannl_dataset_free(&ds);
    }

    /* Gather on a multi-column dataset keeps whole rows. */
    write_text(rt_path(p, sizeof p, dir, "rows.csv"), "1,2\n3,4\n5,6\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    {
        double out[6];
        const int64_t idx[3] = {2, 0, 1};
        CHECK_OK(cannl_dataset_gather(&ds, idx, 3, out, &err));
        const double want[6] = {5, 6, 1, 2, 3, 4};
        for (int i = 0; i < 6; i++) CHECK(out[i] == want[i]);
        CHECK_OK(cannl_dataset_gather(&ds, idx, 0, NULL, &err)); /* empty batch */
    }
    cannl_dataset_free(&ds);

    /* A leading UTF-8 byte-order mark (Excel's "CSV UTF-8") is skipped, before data or a header;
     * one anywhere else is text. */
    write_text(rt_path(p, sizeof p, dir, "bom.csv"), "\xEF\xBB\xBF" "1.5,2\n3,4\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 2 && ds.elems == 2 && ((double *)ds.data)[0] == 1.5 && ((double *)ds.data)[3] == 4.0);
    cannl_dataset_free(&ds);
    write_text(rt_path(p, sizeof p, dir, "bomhdr.csv"), "\xEF\xBB\xBF" "a,b\n1,2\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 1 && ds.elems == 2 && ((double *)ds.data)[1] == 2.0);
    cannl_dataset_free(&ds);
    write_text(rt_path(p, sizeof p, dir, "bom2.csv"), "1,2\n\xEF\xBB\xBF" "3,4\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err), CANNL_E_FORMAT, "bom2.csv: line 2:",
              "is not a number");

    /* Bad one-hot labels: out of range, negative, not an integer. The
     * dataset is left unchanged after a failure. */
    write_text(rt_path(p, sizeof p, dir, "badlab.csv"), "0\n1\n10\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
    CHECK_ERR(cannl_dataset_one_hot(&ds, 10, &err), CANNL_E_RANGE, "badlab.csv: example 2:",
              "label 10 is out of range [0, 10)");
    CHECK(ds.elems == 1 && ds.count == 3 && ((float *)ds.data)[2] == 10.0f);
    CHECK_OK(cannl_dataset_one_hot(&ds, 11, &err));
    cannl_dataset_free(&ds);
    write_text(rt_path(p, sizeof p, dir, "neglab.csv"), "0\n-1\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK_ERR(cannl_dataset_one_hot(&ds, 10, &err), CANNL_E_RANGE, "neglab.csv: example 1:", "label -1 is out of range");
    cannl_dataset_free(&ds);
    write_text(rt_path(p, sizeof p, dir, "fraclab.csv"), "0\n1\n2\n2.5\n");
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK_ERR(cannl_dataset_one_hot(&ds, 10, &err), CANNL_E_RANGE, "fraclab.csv: example 3:",
              "label 2.5 is not an integer");
    CHECK_ERR(cannl_dataset_one_hot(&ds, 0, &err), CANNL_E_ARG, "fraclab.csv:", "class count 0");
    cannl_dataset_free(&ds);

    /* Ragged rows: the error names the file and the line. */
    write_text(rt_path(p, sizeof p, dir, "ragged.csv"), "a,b,c\n1,2,3\n\n4,5,6\n7,8\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "ragged.csv: line 5:",
              "2 values, but earlier rows have 3");
    CHECK(ds.data == NULL && ds.count == 0);
    /* A non-numeric field after the first line. */
    write_text(rt_path(p, sizeof p, dir, "text.csv"), "1,2\n3,abc\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "text.csv: line 2:",
              "field 2 ('abc') is not a number");
    /* Empty fields are not numbers. */
    write_text(rt_path(p, sizeof p, dir, "emptyfield.csv"), "1,2\n3,\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "emptyfield.csv: line 2:",
              "field 2");
    /* Header only / empty file. */
    write_text(rt_path(p, sizeof p, dir, "onlyheader.csv"), "a,b\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "onlyheader.csv:",
              "no data rows");
    write_text(rt_path(p, sizeof p, dir, "empty.csv"), "");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "empty.csv:",
              "no data rows");
    /* Missing file. */
    CHECK_ERR(cannl_dataset_load(&ds, rt_path(p, sizeof p, dir, "absent.csv"), CANNL_FMT_AUTO, CANNL_F32, &err),
              CANNL_E_IO, "absent.csv: cannot open", "No such file");
    /* The first row is a header only when none of its fields is a number: a typo in the first
       data row is an error naming it, not a silently dropped example. */
    write_text(rt_path(p, sizeof p, dir, "typo.csv"), "1,2,3x,4\n5,6,7,8\n");
    CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT,
              "typo.csv: line 1: field 3 ('3x') is not a number, but the row has numbers too",
              "declare one with ");
    write_text(rt_path(p, sizeof p, dir, "pandas.csv"), ",a,b\n0,1,2\n1,3,4\n"); /* an unnamed index column */
    CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 2 && ds.elems == 3);
    cannl_dataset_free(&ds);
    /* A declared header (PATH:header, internal loader of the bindings) is skipped whatever it holds. */
    write_text(rt_path(p, sizeof p, dir, "numhead.csv"), "1,2\n3,4\n");
    {
        char ph[1100];
        snprintf(ph, sizeof ph, "%s:header", p);
        CHECK_OK(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err));
        CHECK(ds.count == 1 && ds.elems == 2 && ds.data && ((float *)ds.data)[0] == 3);
        cannl_dataset_free(&ds);
        CHECK_OK(cannl__dataset_load_bound(&ds, p, CANNL_F32, &err));
        CHECK(ds.count == 2);
        cannl_dataset_free(&ds);
        write_text(rt_path(p, sizeof p, dir, "typo2.csv"), "1,2,3x,4\n5,6,7,8\n");
        snprintf(ph, sizeof ph, "%s:header", p);
        CHECK_OK(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err));
        CHECK(ds.count == 1);
        cannl_dataset_free(&ds);
        snprintf(ph, sizeof ph, "%s/missing.csv:header", dir);
        CHECK_ERR(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err), CANNL_E_IO, "missing.csv: cannot open", "");
        /* ... its columns too: a declared title line shorter than the columns taken is skipped. */
        write_text(rt_path(p, sizeof p, dir, "title.csv"), "house prices\n1,2,3\n4,5,6\n");
        snprintf(ph, sizeof ph, "%s:header:2", p);
        CHECK_OK(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err));
        CHECK(ds.count == 2 && ds.elems == 1 && ds.data && ((float *)ds.data)[1] == 6);
        cannl_dataset_free(&ds);
        /* A detected header names the columns: data rows with another field count are an error
           (a header of 4 names over rows of 3 read silently before), whatever the columns taken. */
        write_text(rt_path(p, sizeof p, dir, "longhead.csv"), "a,b,c,d\n1,2,3\n4,5,6\n");
        CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT,
                  "longhead.csv: line 2: 3 values, but the header (line 1) names 4 columns", ":header to skip it");
        snprintf(ph, sizeof ph, "%s:0-1", p);
        CHECK_ERR(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err), CANNL_E_FORMAT,
                  "longhead.csv: line 2: 3 values, but the header (line 1) names 4 columns", "");
        snprintf(ph, sizeof ph, "%s:header:0-1", p); /* declared: skipped whatever it holds */
        CHECK_OK(cannl__dataset_load_bound(&ds, ph, CANNL_F32, &err));
        CHECK(ds.count == 2 && ds.elems == 2);
        cannl_dataset_free(&ds);
    }
    /* Numbers are decimal and finite, and must fit the dtype: no hexadecimal floats, nan, inf
       or overflow (1e999, or 1e39 for float32); an underflow to 0 is fine. */
    {
        static const struct {
            const char *text;
            int f64_ok;
            const char *msg;
        } cases[] = {
            {"1,2\n3,0x1p3\n", 0, "line 2: field 2 ('0x1p3') is not a number"},
            {"1,2\n3,nan\n", 0, "line 2: field 2 ('nan') is not a finite number"},
            {"1,2\n-inf,4\n", 0, "line 2: field 1 ('-inf') is not a finite number"},
            {"1,2\n3,Infinity\n", 0, "line 2: field 2 ('Infinity') is not a finite number"},
            {"1,2\n3,1e999\n", 0, "line 2: field 2 ('1e999') is too large for float"},
            {"nan,2\n3,4\n", 0, "line 1: field 1 ('nan') is not a finite number"},
            {"1,2\n3,1e39\n", 1, "line 2: field 2 ('1e39') is too large for float32"},
            {"1,2\n3,.5e-400\n", 1, NULL},
            {"1,2\n3,+.5\n", 1, NULL},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            write_text(rt_path(p, sizeof p, dir, "num.csv"), cases[i].text);
            if (cases[i].msg) {
                CHECK_ERR(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err), CANNL_E_FORMAT, "num.csv: ",
                          cases[i].msg);
            } else {
                CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
                cannl_dataset_free(&ds);
            }
            if (cases[i].f64_ok) {
                CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err));
                CHECK(ds.count == 2);
                cannl_dataset_free(&ds);
            } else {
                CHECK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F64, &err) == CANNL_E_FORMAT);
            }
        }
    }
    /* Long lines grow the buffer. */
    {
        size_t cols = 5000, cap = cols * 8 + 16, n = 0;
        char *big = malloc(cap);
        CHECK(big != NULL);
        if (big) {
            for (int r = 0; r < 2; r++) {
                for (size_t c = 0; c < cols; c++) n += (size_t)snprintf(big + n, cap - n, c ? ",%zu" : "%zu", c % 100);
                big[n++] = '\n';
            }
            CHECK(rt_write_file(rt_path(p, sizeof p, dir, "wide.csv"), big, n) == 0);
            CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
            CHECK(ds.count == 2 && ds.elems == (int64_t)cols);
            CHECK(ds.data && ((float *)ds.data)[cols + 4999] == 99.0f);
            cannl_dataset_free(&ds);
            free(big);
        }
    }
    return rt_finish("test_csv");
}
