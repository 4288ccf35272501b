/* test_corrupt.c - robustness: thousands of randomly damaged IDX, .npy, CSV
 * and safetensors files (bytes flipped, cut short, garbage appended). Every
 * load must either succeed or fail with a message naming the file; under
 * the asan preset this also proves there are no out-of-bounds accesses. */
#include "rt_test.h"

#include <stdint.h>

enum { ROUNDS = 600 };

static size_t make_idx(unsigned char *b) {
    const unsigned char hdr[16] = {0, 0, 0x0D, 3, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2};
    memcpy(b, hdr, 16);
    for (int i = 0; i < 24 * 4; i++) b[16 + i] = (unsigned char)(i * 7);
    return 16 + 24 * 4;
}

static size_t make_npy(unsigned char *b) {
    const char *h = "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 3), }";
    size_t hl = 118 - 1; /* 10 + 118 = 128 bytes of preamble + header */
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl + 1);
    b[9] = 0;
    memset(b + 10, ' ', hl);
    memcpy(b + 10, h, strlen(h));
    b[10 + hl] = '\n';
    for (int i = 0; i < 12; i++) { /* finite values (arbitrary bytes could be nan, or too large for float32) */
        const double v = (i - 5) * 0.375;
        uint64_t u;
        memcpy(&u, &v, 8);
        for (int k = 0; k < 8; k++) b[128 + 8 * i + k] = (unsigned char)(u >> (8 * k));
    }
    return 128 + 12 * 8;
}

static size_t make_csv(unsigned char *b) {
    const char *t = "a,b,c\n1,2,3\n4.5,-6,7e2\n\n0.125,8,9\n";
    memcpy(b, t, strlen(t));
    return strlen(t);
}

/* Apply one random damage to a copy of src. */
static size_t mutate(cannl_rng *r, const unsigned char *src, size_t n, unsigned char *dst) {
    memcpy(dst, src, n);
    switch (cannl_rng_below(r, 4)) {
    case 0: /* flip a few bytes */
        for (int k = 1 + (int)cannl_rng_below(r, 4); k > 0; k--) dst[cannl_rng_below(r, n)] ^= (unsigned char)(1 + cannl_rng_below(r, 255));
        return n;
    case 1: /* cut short */
        return (size_t)cannl_rng_below(r, n);
    case 2: /* garbage appended */
    {
        size_t extra = 1 + (size_t)cannl_rng_below(r, 16);
        for (size_t k = 0; k < extra; k++) dst[n + k] = (unsigned char)cannl_rng_next(r);
        return n + extra;
    }
    default: /* set a byte to an extreme value */
        dst[cannl_rng_below(r, n)] = cannl_rng_below(r, 2) ? 0xFF : 0x00;
        return n;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_corrupt WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    cannl_rng r;
    cannl_rng_seed(&r, 12345);
    static unsigned char orig[4096], bad[4096 + 64];
    char p[1024];

    /* Data readers. */
    struct {
        const char *name;
        size_t (*make)(unsigned char *);
    } kinds[] = {{"d.idx", make_idx}, {"d.npy", make_npy}, {"d.csv", make_csv}};
    int ok_loads = 0, failed_loads = 0;
    for (size_t k = 0; k < 3; k++) {
        size_t n = kinds[k].make(orig);
        rt_path(p, sizeof p, dir, kinds[k].name);
        CHECK(rt_write_file(p, orig, n) == 0);
        cannl_dataset ds;
        CHECK_OK(cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, CANNL_F32, &err));
        cannl_dataset_free(&ds);
        for (int i = 0; i < ROUNDS; i++) {
            size_t m = mutate(&r, orig, n, bad);
            /* A fresh name each time: rewriting one file in place makes ext4
             * flush it on every close (auto_da_alloc), which is slow. */
            char name[64];
            snprintf(name, sizeof name, "%d-%s", i, kinds[k].name);
            rt_path(p, sizeof p, dir, name);
            CHECK(rt_write_file(p, bad, m) == 0);
            err.msg[0] = '\0';
            cannl_status st = cannl_dataset_load(&ds, p, CANNL_FMT_AUTO, i % 2 ? CANNL_F64 : CANNL_F32, &err);
            if (st == CANNL_OK) {
                ok_loads++;
                CHECK(ds.data != NULL && ds.count >= 0 && ds.elems >= 0);
                cannl_dataset_one_hot(&ds, 3, &err); /* may fail; must not crash */
                cannl_dataset_free(&ds);
            } else {
                failed_loads++;
                CHECK(strstr(err.msg, name) != NULL);
                CHECK(ds.data == NULL);
            }
            unlink(p);
        }
    }

    /* Checkpoints. */
    float w[6] = {1, 2, 3, 4, 5, 6};
    double b[2] = {0.5, -0.5};
    const cannl_tensor ts[] = {{"w", CANNL_F32, 2, {2, 3}, w}, {"b", CANNL_F64, 1, {2}, b}};
    const cannl_meta meta[] = {{CANNL_META_MODEL, "m"}, {"step", "9"}};
    rt_path(p, sizeof p, dir, "c.safetensors");
    CHECK_OK(cannl_checkpoint_save(p, ts, 2, meta, 2, &err));
    size_t n;
    char *ck_bytes = rt_read_file(p, &n);
    CHECK(ck_bytes && n < sizeof orig);
    if (ck_bytes && n < sizeof orig) {
        memcpy(orig, ck_bytes, n);
        for (int i = 0; i < ROUNDS * 2; i++) {
            size_t m = mutate(&r, orig, n, bad);
            char name[64];
            snprintf(name, sizeof name, "%d-c.safetensors", i);
            rt_path(p, sizeof p, dir, name);
            CHECK(rt_write_file(p, bad, m) == 0);
            cannl_checkpoint *ck = NULL;
            err.msg[0] = '\0';
            if (cannl_checkpoint_open(p, "m", &ck, &err) == CANNL_OK) {
                ok_loads++;
                float w2[6];
                double b2[2];
                cannl_tensor rw = {"w", CANNL_F32, 2, {2, 3}, w2}, rb = {"b", CANNL_F32, 1, {2}, b2};
                cannl_checkpoint_read(ck, &rw, &err);
                rb.dtype = CANNL_F64;
                cannl_checkpoint_read(ck, &rb, &err);
                cannl_checkpoint_close(ck);
            } else {
                failed_loads++;
                CHECK(ck == NULL);
                CHECK(strstr(err.msg, name) != NULL);
            }
            unlink(p);
        }
    }
    free(ck_bytes);
    printf("damaged files: %d loaded, %d rejected\n", ok_loads, failed_loads);
    CHECK(failed_loads > ROUNDS);
    return rt_finish("test_corrupt");
}
