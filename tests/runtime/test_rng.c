/* test_rng.c - seeded generator: golden values (from the independent Python
 * model in rng_reference.py), determinism, ranges, shuffle properties,
 * normal moments. `test_rng --dump SEED` prints the values the Python
 * model checks. */
#include "rt_test.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>

static int dump(uint64_t seed) {
    cannl_rng r;
    cannl_rng_seed(&r, seed);
    for (int i = 0; i < 8; i++) printf("%016" PRIx64 "\n", cannl_rng_next(&r));
    for (int i = 0; i < 4; i++) printf("%.17g\n", cannl_rng_uniform(&r));
    int64_t idx[20];
    for (int i = 0; i < 20; i++) idx[i] = i;
    cannl_shuffle(&r, idx, 20);
    for (int i = 0; i < 20; i++) printf(i ? " %" PRId64 : "%" PRId64, idx[i]);
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) return dump(strtoull(argv[2], NULL, 0));

    /* Golden raw values: same on every platform. */
    cannl_rng r;
    cannl_rng_seed(&r, 0);
    CHECK(cannl_rng_next(&r) == UINT64_C(0x99ec5f36cb75f2b4));
    CHECK(cannl_rng_next(&r) == UINT64_C(0xbf6e1f784956452a));
    cannl_rng_seed(&r, 42);
    CHECK(cannl_rng_next(&r) == UINT64_C(0x15780b2e0c2ec716));
    CHECK(cannl_rng_next(&r) == UINT64_C(0x6104d9866d113a7e));
    for (int i = 0; i < 6; i++) cannl_rng_next(&r);
    CHECK(cannl_rng_uniform(&r) == 0.76137438100576338);
    {
        cannl_rng_seed(&r, 42);
        for (int i = 0; i < 12; i++) cannl_rng_next(&r);
        int64_t idx[20];
        for (int i = 0; i < 20; i++) idx[i] = i;
        cannl_shuffle(&r, idx, 20);
        const int64_t want[20] = {17, 13, 11, 12, 16, 4, 15, 0, 2, 9, 8, 1, 19, 3, 18, 5, 14, 7, 6, 10};
        CHECK(memcmp(idx, want, sizeof want) == 0);
    }

    /* Same seed, same stream; reseeding restarts it; seeds differ. */
    {
        cannl_rng a, b;
        cannl_rng_seed(&a, 1234);
        cannl_rng_seed(&b, 1234);
        int same = 1;
        for (int i = 0; i < 1000; i++) same &= cannl_rng_next(&a) == cannl_rng_next(&b);
        CHECK(same);
        cannl_rng_seed(&b, 1235);
        CHECK(cannl_rng_next(&a) != cannl_rng_next(&b));
        cannl_rng_seed(&a, 7);
        double n1 = cannl_rng_normal(&a);
        cannl_rng_seed(&a, 7); /* drops the cached Box-Muller value */
        CHECK(cannl_rng_normal(&a) == n1);
    }

    /* Ranges. */
    {
        cannl_rng_seed(&r, 99);
        int ok = 1;
        for (int i = 0; i < 200000; i++) {
            double u = cannl_rng_uniform(&r);
            float f = cannl_rng_uniformf(&r);
            uint64_t k = cannl_rng_below(&r, 7);
            ok &= u >= 0.0 && u < 1.0 && f >= 0.0f && f < 1.0f && k < 7;
        }
        CHECK(ok);
        CHECK(cannl_rng_below(&r, 0) == 0);
        CHECK(cannl_rng_below(&r, 1) == 0);
        uint64_t big = UINT64_C(0x8000000000000001); /* heavy rejection case */
        for (int i = 0; i < 100; i++) CHECK(cannl_rng_below(&r, big) < big);
    }

    /* Normal: mean ~ 0, variance ~ 1, pairs and spare values all finite. */
    {
        cannl_rng_seed(&r, 2024);
        const int n = 200000;
        double sum = 0, sq = 0;
        int finite = 1;
        for (int i = 0; i < n; i++) {
            double z = cannl_rng_normal(&r);
            finite &= isfinite(z);
            sum += z;
            sq += z * z;
        }
        double mean = sum / n, var = sq / n - mean * mean;
        CHECK(finite);
        CHECK(fabs(mean) < 0.01);
        CHECK(fabs(var - 1.0) < 0.02);
    }

    /* Shuffle: a permutation; determinism; every ordering of 4 about equally likely. */
    {
        enum { N = 1000 };
        static int64_t a[N], b[N];
        for (int i = 0; i < N; i++) a[i] = b[i] = i;
        cannl_rng ra, rb;
        cannl_rng_seed(&ra, 5);
        cannl_rng_seed(&rb, 5);
        cannl_shuffle(&ra, a, N);
        cannl_shuffle(&rb, b, N);
        CHECK(memcmp(a, b, sizeof a) == 0);
        static int seen[N];
        int perm = 1, moved = 0;
        for (int i = 0; i < N; i++) {
            perm &= a[i] >= 0 && a[i] < N && !seen[a[i]];
            if (a[i] >= 0 && a[i] < N) seen[a[i]] = 1;
            moved += a[i] != i;
        }
        CHECK(perm);
        CHECK(moved > N / 2);
        cannl_shuffle(&ra, NULL, 10); /* tolerated */
        cannl_shuffle(&ra, a, 0);
        cannl_shuffle(&ra, a, 1);

        int counts[24] = {0};
        cannl_rng_seed(&r, 77);
        const int trials = 48000;
        for (int t = 0; t < trials; t++) {
            int64_t p[4] = {0, 1, 2, 3};
            cannl_shuffle(&r, p, 4);
            /* Lehmer code of the permutation -> 0..23 */
            int code = 0;
            for (int i = 0; i < 4; i++) {
                int smaller = 0;
                for (int j = i + 1; j < 4; j++) smaller += p[j] < p[i];
                code = code * (4 - i) + smaller;
            }
            counts[code]++;
        }
        int ok = 1;
        for (int k = 0; k < 24; k++) ok &= counts[k] > 1800 && counts[k] < 2200; /* expected 2000 */
        CHECK(ok);
    }
    return rt_finish("test_rng");
}
