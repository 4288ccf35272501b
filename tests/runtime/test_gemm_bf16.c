/* test_gemm_bf16.c - the bf16 products (cannl_gemm_set_precision: gemm_bf16_amx.c on AMX-BF16
 * tiles, gemm_bf16.c on AVX512_BF16) against a reference with the same arithmetic: A and B
 * rounded to bf16 (to nearest, ties to even), their products (exact in fp32) summed in double.
 * The kernels sum in fp32, so each element may differ by the rounding of K fp32 additions:
 * (K + 4) 2^-24 of the sum of |terms| (and |C0|). Shapes at and around the tile and block sizes
 * (both kernels'), odd K, transposed and strided operands, alpha, = and +=, the dot-product
 * form; the same bits on 1, 2 and 3 threads; and a check that the products are bf16's (an fp32
 * kernel passing for one would be far closer to the unrounded operands). Each kernel this CPU
 * and build have: the AMX one (CANNL_ISA=amx, where amx.c grants AMX-BF16), the AVX512_BF16 one
 * (CANNL_ISA=avx512). Exits 77 (skipped) on a CPU without AVX512_BF16, saying so; and checks
 * that such a CPU, or CANNL_ISA below avx512, gets fp32. */
#include "rt_internal.h" /* cannl__amx_features */
#include "rt_test.h"

#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static uint64_t rng_state = 4242;
static double next_value(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* x rounded to bf16 (to nearest, ties to even), as a float. */
static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return x;
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Strides of a rows x cols matrix in layout l (0 row-major, 1 transposed, 2 row-major with
   padded rows) and its size. */
static void strides(int l, long rows, long cols, long *s0, long *s1, long *size) {
    if (l == 1) {
        *s0 = 1, *s1 = rows > 0 ? rows : 1;
    } else {
        *s0 = cols + (l == 2 ? 3 : 0), *s1 = 1;
        if (*s0 == 0) *s0 = 1;
    }
    *size = rows * cols == 0 ? 1 : (rows - 1) * *s0 + (cols - 1) * *s1 + 1;
}

static void set_threads(int t) {
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

/* One product (dot form when `dot`: A row-major, B transposed, both K-contiguous) on 1, 2 and 3
   threads. Returns the largest error against the bf16 reference relative to its bound (> 1
   fails), and in *fp32_err the largest relative error against the unrounded operands. */
static double run_case(cannl_gemm *g, long M, long N, long K, int la, int lb, int lc, float alpha, int overwrite,
                       int dot, double *fp32_err) {
    long a0, a1, na, b0, b1, nb, c0, c1, nc;
    if (dot) la = 0, lb = 1;
    strides(la, M, K, &a0, &a1, &na);
    strides(lb, K, N, &b0, &b1, &nb);
    strides(lc, M, N, &c0, &c1, &nc);
    float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
    float *C0 = malloc(sizeof(float) * (size_t)nc), *C = malloc(sizeof(float) * (size_t)nc);
    float *C2 = malloc(sizeof(float) * (size_t)nc);
    if (!A || !B || !C0 || !C || !C2) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (long i = 0; i < na; ++i) A[i] = (float)next_value();
    for (long i = 0; i < nb; ++i) B[i] = (float)next_value();
    for (long i = 0; i < nc; ++i) C0[i] = (float)next_value();
    double worst = 0;
    for (int threads = 1; threads <= 3; ++threads) {
        set_threads(threads);
        float *out = threads == 1 ? C : C2;
        memcpy(out, C0, sizeof(float) * (size_t)nc);
        if (dot)
            cannl_sgemm_dot(g, M, N, K, alpha, A, a0, B, b1, out, c0, c1, overwrite);
        else
            cannl_sgemm(g, M, N, K, alpha, A, a0, a1, B, b0, b1, out, c0, c1, overwrite);
        if (threads > 1 && memcmp(C, C2, sizeof(float) * (size_t)nc) != 0) {
            fprintf(stderr, "%ldx%ldx%ld: other bits on %d threads\n", M, N, K, threads);
            worst = 1e9;
        }
    }
    set_threads(1);
    for (long i = 0; i < M; ++i)
        for (long j = 0; j < N; ++j) {
            double sum = 0, exact = 0, mag = 0;
            for (long p = 0; p < K; ++p) {
                const double a = A[i * a0 + p * a1], b = B[p * b0 + j * b1];
                const double t = (double)bf16((float)a) * (double)bf16((float)b);
                sum += t, exact += a * b, mag += fabs(t);
            }
            const double before = overwrite ? 0 : C0[i * c0 + j * c1];
            const double got = C[i * c0 + j * c1], scale = fabs(before) + fabs(alpha) * mag + 1e-30;
            const double e = fabs(got - (before + alpha * sum)) / ((double)(K + 4) * ldexp(1, -24) * scale);
            const double e32 = fabs(got - (before + alpha * exact)) / scale;
            if (e > worst) worst = e;
            if (e32 > *fp32_err) *fp32_err = e32;
        }
    /* C's padding (layout 2) is untouched. */
    if (lc == 2)
        for (long i = 0; i < M; ++i)
            for (long j = N; j < c0 && i * c0 + j < nc; ++j)
                if (C[i * c0 + j] != C0[i * c0 + j]) worst = 1e9;
    free(A), free(B), free(C0), free(C), free(C2);
    return worst;
}

/* Every case on a float context created under CANNL_ISA=isa and set to bf16; false when the
   context gets fp32 (no AVX512_BF16). */
static int run_kernel(const char *isa, const char *kernel) {
    setenv("CANNL_ISA", isa, 1);
    cannl_gemm *g = cannl_gemm_create(CANNL_F32, 1);
    CHECK(g != NULL);
    if (!g) return 0;
    if (cannl_gemm_set_precision(g, CANNL_PRECISION_BF16) != CANNL_PRECISION_BF16) {
        cannl_gemm_free(g);
        return 0;
    }
    const long sizes[][3] = {{1, 1, 1},       {3, 4, 0},       {0, 5, 3},       {7, 13, 5},     {8, 32, 2},
                             {9, 33, 3},      {12, 32, 64},    {13, 33, 65},    {16, 48, 31},   {37, 100, 1},
                             {100, 37, 300},  {128, 10, 512},  {10, 128, 257},  {130, 530, 520}, {64, 600, 70},
                             {1, 129, 513},   {64, 1024, 10},  {200, 64, 801},  {33, 17, 1100}, {48, 47, 2049},
                             {129, 65, 33},   {17, 16, 1024},  {160, 32, 600}};
    int cases = 0;
    double worst = 0, fp32_err = 0;
    for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); ++s)
        for (int v = 0; v < 7; ++v) {
            const long M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            const int dot = v == 6;
            const float alpha = v == 4 ? 0.5f : 1.0f;
            const double e = run_case(g, M, N, K, v % 3, (v / 3 + s) % 2, (v + s) % 3, alpha, (v + s) % 2, dot,
                                      &fp32_err);
            if (e > 1)
                fprintf(stderr, "%s: %ldx%ldx%ld variant %d%s: error %.3g of the bound\n", kernel, M, N, K, v,
                        dot ? " (dot)" : "", e);
            CHECK(e <= 1);
            if (e > worst) worst = e;
            ++cases;
        }
    /* bf16 operands carry 8 significant bits: against the unrounded ones the error is of the
       order of 2^-9 of the terms, far above fp32's (a kernel that ignored the precision would
       be within the bound above too). */
    CHECK(fp32_err > 1e-4);
    /* Asking for fp32 again restores the fp32 kernel: the unrounded products. */
    CHECK(cannl_gemm_set_precision(g, CANNL_PRECISION_FP32) == CANNL_PRECISION_FP32);
    double back = 0;
    run_case(g, 40, 50, 60, 0, 0, 0, 1.0f, 1, 0, &back);
    CHECK(back < 1e-5);
    cannl_gemm_free(g);
    printf("%s: %d bf16 cases: worst error %.3g of the fp32-summation bound; against unrounded operands %.3g "
           "(bf16's rounding); fp32 again %.3g\n",
           kernel, cases, worst, fp32_err, back);
    return 1;
}

int main(void) {
    /* A double context never runs bf16. */
    cannl_gemm *gd = cannl_gemm_create(CANNL_F64, 1);
    CHECK(gd && cannl_gemm_set_precision(gd, CANNL_PRECISION_BF16) == CANNL_PRECISION_FP32);
    cannl_gemm_free(gd);
    /* CANNL_ISA below avx512: fp32 (the fallback every CPU without AVX512_BF16 takes). */
    setenv("CANNL_ISA", "avx2", 1);
    cannl_gemm *g2 = cannl_gemm_create(CANNL_F32, 1);
    CHECK(g2 && cannl_gemm_set_precision(g2, CANNL_PRECISION_BF16) == CANNL_PRECISION_FP32);
    cannl_gemm_free(g2);
    if (!run_kernel("avx512", "AVX512_BF16 (CANNL_ISA=avx512)")) {
        unsetenv("CANNL_ISA");
        printf("skipped: this CPU (or this build's compiler) has no AVX512_BF16; bf16 products run in fp32 here\n");
        return rt_failures ? 1 : 77;
    }
    setenv("CANNL_ISA", "amx", 1);
#ifdef CANNL_GEMM_BF16_AMX
    if (cannl__amx_features() & CANNL__AMX_BF16)
        run_kernel("amx", "AMX-BF16 (CANNL_ISA=amx)");
    else
        printf("AMX-BF16: not on this CPU (or not granted by the OS); its kernel not run\n");
#else
    printf("AMX-BF16: this build's compiler lacks -mamx-bf16; no such kernel\n");
#endif
    unsetenv("CANNL_ISA");
    return rt_failures ? 1 : 0;
}
