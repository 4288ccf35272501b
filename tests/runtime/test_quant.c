/* test_quant.c - int8 weights (runtime-lib/quant.c): the quantiser's documented rounding on
 * known rows, the round trip within half a scale, and cannl_sgemm_q8 of every instruction set
 * this CPU has (CANNL_ISA lowers the choice) against the documented scheme computed here
 * (X's rows quantised with one scale each, the integer sums exact, in long double) and against
 * the float product within the activations' rounding; the same bits on every instruction set,
 * for 1, 2 and 3 threads and for each row computed alone as among others (M across the
 * kernels' tiles of rows and their tails), K past the kernels' chunk of 2^17, and NaN rows. */
#include "rt_test.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static uint64_t rng_state = 777;
static float next_value(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1);
}

static void set_threads(int t) {
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

/* C (M x N at strides c_x, c_w) = product of X (x_k 1: rows contiguous; else transposed) and
   the int8 weights, with context g on `threads` threads. */
static void run(cannl_gemm *g, long M, long N, long K, int transposed, float alpha, int overwrite, const float *X,
                const int8_t *W, const float *scale, float *C, int threads) {
    set_threads(threads);
    const long x_r = transposed ? 1 : K, x_k = transposed ? M : 1;
    cannl_sgemm_q8(g, M, N, K, alpha, X, x_r, x_k, W, K + 3, scale, C, 1, M + 1, overwrite);
}

/* The documented scheme for one output, written out: X's row scale d = max|x| / 127, q =
   roundf(x / d) (0 when d is 0), S the exact sum of q w, then alpha * scale * (d * (float)S) in
   float (*bits; the store through a volatile keeps the compiler from fusing it with the add) and
   in long double (the return value, before the float roundings); *err_bound: how far the float
   product of the unrounded x can be from it (half a step of x times sum |w|). */
static long double scheme(const float *x, long x_k, const int8_t *w, long K, float alpha, float scale, float *bits,
                          long double *err_bound) {
    float m = 0.0f;
    for (long k = 0; k < K; ++k) m = fabsf(x[k * x_k]) > m ? fabsf(x[k * x_k]) : m;
    const float d = m / 127.0f;
    long long S = 0, wabs = 0;
    for (long k = 0; k < K; ++k) {
        const long q = d > 0.0f ? lroundf(x[k * x_k] / d) : 0;
        S += q * w[k];
        wabs += labs((long)w[k]);
    }
    volatile float v = alpha * scale * (d * (float)(int32_t)S);
    *bits = v;
    *err_bound = fabsl((long double)alpha * scale) * ((long double)d / 2 * (long double)wabs);
    return (long double)alpha * scale * d * (long double)S;
}

int main(void) {
    /* The scheme on known rows: scale = max|w| / 127, halves away from zero. */
    const float w[8] = {0.0f, 1.0f, -2.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
    int8_t q[8];
    float s[2], back[8];
    cannl_quantize_rows_q8(w, 2, 4, q, s);
    CHECK(s[0] == 2.0f / 127.0f && s[1] == 0.0f);
    CHECK(q[0] == 0 && q[1] == 64 && q[2] == -127 && q[3] == 32); /* 63.5 -> 64, 31.75 -> 32 */
    CHECK(q[4] == 0 && q[5] == 0 && q[6] == 0 && q[7] == 0);
    cannl_dequantize_rows_q8(q, s, 2, 4, back);
    for (int k = 0; k < 8; ++k) CHECK(fabsf(back[k] - w[k]) <= s[k / 4] / 2);

    /* Random weights: the round trip within half a scale per row. */
    enum { R = 37, KMAX = 131, MMAX = 20 };
    static float wr[R * KMAX], wb[R * KMAX];
    static int8_t qr[R * (KMAX + 3)];
    static float sr[R];
    for (int i = 0; i < R * KMAX; ++i) wr[i] = next_value() * (float)(1 + i % 5);
    cannl_quantize_rows_q8(wr, R, KMAX, qr, sr);
    cannl_dequantize_rows_q8(qr, sr, R, KMAX, wb);
    for (int r = 0; r < R; ++r)
        for (int k = 0; k < KMAX; ++k) CHECK(fabsf(wb[r * KMAX + k] - wr[r * KMAX + k]) <= sr[r] * 0.5001f);

    /* The vectorised quantiser against the scheme written with roundf, on rows of exact halves
     * (k + 0.5 scales, both signs), the float below a half, NaN, infinities, -0, denormals and
     * a long row (the vector loops and their tails). */
    enum { QR = 6, QK = 45 };
    static float wq[QR * QK];
    static int8_t qq[QR * QK];
    static float sq[QR];
    for (int k = 0; k < QK; ++k) {
        wq[k] = (float)(k % 2 ? -1 : 1) * ((float)(k % 128) + 0.5f) / 127.0f; /* halves of scale 1/127 */
        wq[QK + k] = (float)(k - 22) * 1e-40f;                                 /* denormals */
        wq[2 * QK + k] = next_value();
        wq[3 * QK + k] = next_value();
        wq[4 * QK + k] = -0.0f;
        wq[5 * QK + k] = next_value() * 3.0f;
    }
    wq[0] = 1.0f, wq[1] = 0.49999997f / 127.0f, wq[2] = -1.5f / 127.0f;
    wq[2 * QK + 3] = NAN, wq[3 * QK + 7] = INFINITY, wq[3 * QK + 8] = -INFINITY, wq[5 * QK + 44] = NAN;
    cannl_quantize_rows_q8(wq, QR, QK, qq, sq);
    int ties = 0;
    for (int r = 0; r < QR; ++r) {
        float m = 0.0f;
        for (int k = 0; k < QK; ++k) m = fabsf(wq[r * QK + k]) > m ? fabsf(wq[r * QK + k]) : m;
        const float sc = m / 127.0f;
        CHECK(memcmp(&sq[r], &sc, sizeof sc) == 0);
        for (int k = 0; k < QK; ++k) {
            const float v = sc > 0.0f ? wq[r * QK + k] / sc : 0.0f;
            const float rv = roundf(v);
            ties += fabsf(v - truncf(v)) == 0.5f;
            const int want = rv != rv ? 0 : rv > 127.0f ? 127 : rv < -127.0f ? -127 : (int)rv;
            CHECK(qq[r * QK + k] == want);
        }
    }
    CHECK(ties >= 10); /* the rows did hold exact halves */

    /* Products: weight rows at a stride of K + 3 (padding left random). */
    static int8_t W[R * (KMAX + 3)];
    for (int i = 0; i < R * (KMAX + 3); ++i) W[i] = (int8_t)((int)(next_value() * 127.0f));
    static float X[MMAX * KMAX], C[(MMAX + 1) * R], C1[(MMAX + 1) * R], Cp[(MMAX + 1) * R], Crow[(MMAX + 1) * R];
    for (int i = 0; i < MMAX * KMAX; ++i) X[i] = next_value();
    const long Ms[] = {1, 2, 3, 5, 6, 7, 8, 9, 15, 16, 20}, Ns[] = {1, 3, 4, 7, 33, 37}, Ks[] = {1, 7, 8, 16, 17, 100, 131};
    cannl_gemm *base = NULL;
    setenv("CANNL_ISA", "sse2", 1);
    base = cannl_gemm_create(CANNL_F32, 1);
    CHECK(base && cannl_gemm_isa(base) == CANNL_ISA_SSE2);
    int tested = 0;
    for (int v = CANNL_ISA_SSE2; v <= CANNL_ISA_AVX512 + 1; ++v) { /* and AVX-512 with AMX where there is */
        const cannl_isa isa = v > CANNL_ISA_AVX512 ? CANNL_ISA_AVX512 : (cannl_isa)v;
        setenv("CANNL_ISA", v > CANNL_ISA_AVX512 ? "amx" : cannl_isa_name(isa), 1);
        cannl_gemm *g = cannl_gemm_create(CANNL_F32, 3);
        if (!g || cannl_gemm_isa(g) != isa) { /* this CPU has not got it */
            cannl_gemm_free(g);
            continue;
        }
        tested++;
        for (size_t a = 0; a < sizeof Ms / sizeof *Ms; ++a)
            for (size_t b = 0; b < sizeof Ns / sizeof *Ns; ++b)
                for (size_t c = 0; c < sizeof Ks / sizeof *Ks; ++c)
                    for (int t = 0; t < 2; ++t) {
                        const long M = Ms[a], N = Ns[b], K = Ks[c];
                        const int overwrite = (int)((a + b + c) % 2);
                        const float alpha = overwrite ? 1.0f : -0.5f;
                        for (long i = 0; i < (M + 1) * N; ++i) C[i] = C1[i] = Cp[i] = Crow[i] = (float)i * 0.25f;
                        run(g, M, N, K, t, alpha, overwrite, X, W, sr, C, 1);
                        run(g, M, N, K, t, alpha, overwrite, X, W, sr, C1, 3);
                        run(base, M, N, K, t, alpha, overwrite, X, W, sr, Cp, 1);
                        /* each row alone (its X row, contiguous) */
                        for (long i = 0; i < M; ++i) {
                            float x0[KMAX];
                            for (long k = 0; k < K; ++k) x0[k] = t ? X[k * M + i] : X[i * K + k];
                            set_threads(2);
                            cannl_sgemm_q8(g, 1, N, K, alpha, x0, K, 1, W, K + 3, sr, Crow + i, 1, M + 1, overwrite);
                        }
                        for (long i = 0; i < M; ++i)
                            for (long j = 0; j < N; ++j) {
                                const float *xi = t ? X + i : X + i * K;
                                const long xk = t ? M : 1;
                                float bits;
                                long double bound;
                                const long double want =
                                    scheme(xi, xk, W + j * (K + 3), K, alpha, sr[j], &bits, &bound);
                                long double exact = 0; /* the float product, x unrounded */
                                for (long k = 0; k < K; ++k) exact += (long double)xi[k * xk] * W[j * (K + 3) + k];
                                exact *= (long double)alpha * sr[j];
                                const long at = i + j * (M + 1);
                                const float c0 = (float)at * 0.25f;
                                volatile float expect = overwrite ? bits : c0 + bits;
                                CHECK(memcmp(&C[at], (const float *)&expect, sizeof(float)) == 0);
                                CHECK(fabsl(C[at] - (overwrite ? 0 : c0) - want) <=
                                      1e-6L * (fabsl(want) + fabsf(c0)) + 1e-30L);
                                CHECK(fabsl(C[at] - (overwrite ? 0 : c0) - exact) <=
                                      bound * 1.0001L + 1e-6L * (fabsl(want) + fabsf(c0)) + 1e-30L);
                                CHECK(memcmp(&C[at], &Cp[at], sizeof(float)) == 0);   /* the portable path */
                                CHECK(memcmp(&C[at], &C1[at], sizeof(float)) == 0);   /* threads */
                                CHECK(memcmp(&C[at], &Crow[at], sizeof(float)) == 0); /* alone */
                            }
                        for (long j = 0; j < N; ++j) CHECK(C[M + j * (M + 1)] == (float)(M + j * (M + 1)) * 0.25f);
                    }
        /* Large enough for threads (N * K >= 128 KiB): one, three and eight rows, 1 and 3 threads. */
        {
            enum { BN = 300, BK = 512 };
            int8_t *bw = malloc((size_t)BN * BK);
            float *bs = malloc(sizeof(float) * BN), *bx = malloc(sizeof(float) * 8 * BK);
            float *b1 = malloc(sizeof(float) * 8 * BN), *b3 = malloc(sizeof(float) * 8 * BN);
            CHECK(bw && bs && bx && b1 && b3);
            if (bw && bs && bx && b1 && b3) {
                for (long i = 0; i < (long)BN * BK; ++i) bw[i] = (int8_t)((int)(next_value() * 127.0f));
                for (long j = 0; j < BN; ++j) bs[j] = 0.01f * (1.0f + (float)(j % 7));
                for (long i = 0; i < 8 * BK; ++i) bx[i] = next_value();
                for (long m = 1; m <= 8; m += m < 3 ? 2 : 5) {
                    set_threads(1);
                    cannl_sgemm_q8(g, m, BN, BK, 1.0f, bx, BK, 1, bw, BK, bs, b1, BN, 1, 1);
                    set_threads(3);
                    cannl_sgemm_q8(g, m, BN, BK, 1.0f, bx, BK, 1, bw, BK, bs, b3, BN, 1, 1);
                    CHECK(memcmp(b1, b3, sizeof(float) * (size_t)(m * BN)) == 0);
                    for (long i = 0; i < m; ++i)
                        for (long j = 0; j < BN; ++j) {
                            float bits;
                            long double bound;
                            (void)scheme(bx + i * BK, 1, bw + j * BK, BK, 1.0f, bs[j], &bits, &bound);
                            CHECK(memcmp(&b1[i * BN + j], &bits, sizeof(float)) == 0);
                        }
                }
            }
            free(bw), free(bs), free(bx), free(b1), free(b3);
        }
        /* K past the kernels' chunk of 2^17: each chunk's sum converted and added in order
           (the row's one scale); and a row with a NaN: its outputs NaN, the other row's as alone. */
        {
            enum { LK = (1 << 17) + 77, LN = 5 };
            int8_t *lw = malloc((size_t)LN * LK);
            float *lx = malloc(sizeof(float) * 2 * LK), lc[2 * LN], l1[LN];
            CHECK(lw && lx);
            if (lw && lx) {
                for (long i = 0; i < (long)LN * LK; ++i) lw[i] = (int8_t)(i % 255 - 127);
                for (long i = 0; i < 2 * LK; ++i) lx[i] = 1.0f - (float)(i % 3) * 0.001f;
                set_threads(2);
                cannl_sgemm_q8(g, 2, LN, LK, 0.5f, lx, LK, 1, lw, LK, sr, lc, LN, 1, 1);
                for (long j = 0; j < LN; ++j) {
                    float b0, b1v;
                    long double bound;
                    (void)scheme(lx, 1, lw + j * LK, 1 << 17, 0.5f, sr[j], &b0, &bound);
                    /* the second chunk's q with the row's scale: the row is periodic, its max the same */
                    (void)scheme(lx + (1 << 17), 1, lw + j * LK + (1 << 17), 77, 0.5f, sr[j], &b1v, &bound);
                    volatile float sum = b0 + b1v;
                    CHECK(memcmp(&lc[j], (const float *)&sum, sizeof(float)) == 0);
                }
                lx[LK + 5] = NAN;
                cannl_sgemm_q8(g, 2, LN, 300, 1.0f, lx, LK, 1, lw, LK, sr, lc, LN, 1, 1);
                cannl_sgemm_q8(g, 1, LN, 300, 1.0f, lx, LK, 1, lw, LK, sr, l1, LN, 1, 1);
                for (long j = 0; j < LN; ++j) CHECK(isnan(lc[LN + j]) && memcmp(&lc[j], &l1[j], sizeof(float)) == 0);
            }
            free(lw), free(lx);
        }
        /* One weight row for every output (w_r 0), one row of X and eight: each output the row's. */
        {
            enum { BK = 72, BN = 18 }; /* (AMX: 16 rows of a tile from one) */
            float bc[8 * BN];
            for (long m = 1; m <= 8; m += 7) {
                cannl_sgemm_q8(g, m, BN, BK, 1.0f, wr, KMAX, 1, qr, 0, sr, bc, BN, 1, 1);
                for (long i = 0; i < m; ++i)
                    for (long j = 0; j < BN; ++j) {
                        float bits;
                        long double bound;
                        (void)scheme(wr + i * KMAX, 1, qr, BK, 1.0f, sr[j], &bits, &bound);
                        CHECK(memcmp(&bc[i * BN + j], &bits, sizeof(float)) == 0);
                    }
            }
        }
        cannl_gemm_free(g);
    }
    CHECK(tested >= 1);
    cannl_gemm_free(base);
    if (rt_failures) fprintf(stderr, "%d failure(s)\n", rt_failures);
    return rt_failures ? 1 : 0;
}
