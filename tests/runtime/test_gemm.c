/* test_gemm.c - the runtime's matrix products (gemm.c) against a plain triple loop, for every
 * instruction set this CPU has (CANNL_ISA lowers the choice), float and double, shapes at and
 * around the tile and block sizes, transposed and strided operands, alpha, = and +=; the same
 * bits for 1, 2 and 3 threads (a context made for one), and for a row or a band of columns
 * computed alone as among others, and into a C large enough to be streamed to memory; the
 * dot-product variant's exact order of sums; CANNL_ISA's checks. */
#include "rt_test.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static uint64_t rng_state = 12345;
static double next_value(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* One case: sizes, the layout of each operand (0 row-major, 1 transposed, 2 row-major with
 * padded rows), alpha, overwrite. */
typedef struct gcase {
    long M, N, K;
    int la, lb, lc;
    double alpha;
    int overwrite;
} gcase;

/* Strides of a rows x cols matrix in layout l: {row stride, column stride}, and its size. */
static void strides(int l, long rows, long cols, long *s0, long *s1, long *size) {
    if (l == 1) {
        *s0 = 1, *s1 = rows > 0 ? rows : 1;
    } else {
        *s0 = cols + (l == 2 ? 3 : 0), *s1 = 1;
        if (*s0 == 0) *s0 = 1;
    }
    *size = rows * cols == 0 ? 1 : (rows - 1) * *s0 + (cols - 1) * *s1 + 1;
}

/* Runs case c with context g (dtype f64 or not) on `threads` threads into C (size nc, from C0);
 * with `check`, returns the largest error relative to the sum of |terms| (and |C0|). */
static double run_case(cannl_gemm *g, int f64, const gcase *c, int threads, int check, void *Cout) {
    long a0, a1, na, b0, b1, nb, c0, c1, nc;
    strides(c->la, c->M, c->K, &a0, &a1, &na);
    strides(c->lb, c->K, c->N, &b0, &b1, &nb);
    strides(c->lc, c->M, c->N, &c0, &c1, &nc);
    double *A = malloc(sizeof(double) * (size_t)na), *B = malloc(sizeof(double) * (size_t)nb);
    double *C0 = malloc(sizeof(double) * (size_t)nc);
    float *Af = malloc(sizeof(float) * (size_t)na), *Bf = malloc(sizeof(float) * (size_t)nb);
    if (!A || !B || !C0 || !Af || !Bf) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    uint64_t seed = rng_state;
    rng_state = 99 + (uint64_t)(c->M * 131 + c->N * 17 + c->K);
    for (long i = 0; i < na; ++i) Af[i] = (float)(A[i] = (float)next_value());
    for (long i = 0; i < nb; ++i) Bf[i] = (float)(B[i] = (float)next_value());
    for (long i = 0; i < nc; ++i) C0[i] = (float)next_value();
    rng_state = seed;
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    if (f64) {
        double *C = Cout;
        memcpy(C, C0, sizeof(double) * (size_t)nc);
        cannl_dgemm(g, c->M, c->N, c->K, c->alpha, A, a0, a1, B, b0, b1, C, c0, c1, c->overwrite);
    } else {
        float *C = Cout;
        for (long i = 0; i < nc; ++i) C[i] = (float)C0[i];
        cannl_sgemm(g, c->M, c->N, c->K, (float)c->alpha, Af, a0, a1, Bf, b0, b1, C, c0, c1, c->overwrite);
    }
    double worst = 0;
    for (long i = 0; i < (check ? c->M : 0); ++i)
        for (long j = 0; j < c->N; ++j) {
            double sum = 0, mag = 0;
            for (long p = 0; p < c->K; ++p) {
                const double t = A[i * a0 + p * a1] * B[p * b0 + j * b1];
                sum += t;
                mag += fabs(t);
            }
            const double before = c->overwrite ? 0 : C0[i * c0 + j * c1];
            const double want = before + c->alpha * sum;
            const double got = f64 ? ((double *)Cout)[i * c0 + j * c1] : ((float *)Cout)[i * c0 + j * c1];
            const double e = fabs(got - want) / (fabs(before) + fabs(c->alpha) * mag + 1e-30);
            if (e > worst) worst = e;
        }
    /* Cells of C outside the matrix (padding) are untouched. */
    if (check && c->lc == 2)
        for (long i = 0; i < c->M; ++i)
            for (long j = c->N; j < c0 && i * c0 + j < nc; ++j) {
                const double got = f64 ? ((double *)Cout)[i * c0 + j] : ((float *)Cout)[i * c0 + j];
                if (got != (f64 ? C0[i * c0 + j] : (double)(float)C0[i * c0 + j])) worst = 1;
            }
    free(A), free(B), free(C0), free(Af), free(Bf);
    return worst;
}

static long c_size(const gcase *c) {
    long s0, s1, n;
    strides(c->lc, c->M, c->N, &s0, &s1, &n);
    return n;
}

/* A row of C computed alone (M = 1: a position decoded, an example inferred by itself) has the
 * bits it has among M rows (each example's outputs are its own), for B in layout lb and C in
 * lc, for each row r. Returns the rows that differ. */
static int row_alone_case(cannl_gemm *g, int f64, long M, long N, long K, int lb, int lc, double alpha, int overwrite) {
    long a0, a1, na, b0, b1, nb, c0, c1, nc;
    strides(0, M, K, &a0, &a1, &na);
    strides(lb, K, N, &b0, &b1, &nb);
    strides(lc, M, N, &c0, &c1, &nc);
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    char *A = malloc(es * (size_t)na), *B = malloc(es * (size_t)nb), *C0 = malloc(es * (size_t)nc);
    char *Cm = malloc(es * (size_t)nc), *C1 = malloc(es * (size_t)nc);
    if (!A || !B || !C0 || !Cm || !C1) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (long i = 0; i < na + nb + nc; ++i) {
        const double v = next_value();
        char *dst = i < na ? A + es * (size_t)i : i < na + nb ? B + es * (size_t)(i - na) : C0 + es * (size_t)(i - na - nb);
        if (f64)
            memcpy(dst, &v, es);
        else {
            const float f = (float)v;
            memcpy(dst, &f, es);
        }
    }
#define CANNL_TEST_PRODUCT(rows, a, c)                                                                              \
    (f64 ? cannl_dgemm(g, rows, N, K, alpha, (const double *)(a), a0, a1, (const double *)B, b0, b1, (double *)(c), c0, \
                       c1, overwrite)                                                                               \
         : cannl_sgemm(g, rows, N, K, (float)alpha, (const float *)(a), a0, a1, (const float *)B, b0, b1, (float *)(c), \
                       c0, c1, overwrite))
    memcpy(Cm, C0, es * (size_t)nc);
    CANNL_TEST_PRODUCT(M, A, Cm);
    int bad = 0;
    for (long r = 0; r < M; ++r) {
        memcpy(C1, C0, es * (size_t)nc);
        CANNL_TEST_PRODUCT(1, A + es * (size_t)(r * a0), C1 + es * (size_t)(r * c0));
        for (long j = 0; j < N; ++j)
            if (memcmp(C1 + es * (size_t)(r * c0 + j * c1), Cm + es * (size_t)(r * c0 + j * c1), es) != 0) {
                fprintf(stderr, "%s %ldx%ldx%ld layouts 0%d%d alpha %g overwrite %d: row %ld alone differs at %ld\n",
                        f64 ? "f64" : "f32", M, N, K, lb, lc, alpha, overwrite, r, j);
                ++bad;
                break;
            }
    }
#undef CANNL_TEST_PRODUCT
    free(A), free(B), free(C0), free(Cm), free(C1);
    return bad;
}

/* A band of columns of C computed alone has the bits it has among N columns: a band of 16 or
 * fewer (a half tile, gemm_kernel.h) against the same columns in whole tiles, for B in layout lb
 * and C in lc. Returns the bands that differ. */
static int cols_alone_case(cannl_gemm *g, int f64, long M, long N, long K, int lb, int lc, int overwrite) {
    long a0, a1, na, b0, b1, nb, c0, c1, nc;
    strides(0, M, K, &a0, &a1, &na);
    strides(lb, K, N, &b0, &b1, &nb);
    strides(lc, M, N, &c0, &c1, &nc);
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    char *A = malloc(es * (size_t)na), *B = malloc(es * (size_t)nb), *C0 = malloc(es * (size_t)nc);
    char *Cm = malloc(es * (size_t)nc), *C1 = malloc(es * (size_t)nc);
    if (!A || !B || !C0 || !Cm || !C1) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (long i = 0; i < na + nb + nc; ++i) {
        const double v = next_value();
        char *dst = i < na ? A + es * (size_t)i : i < na + nb ? B + es * (size_t)(i - na) : C0 + es * (size_t)(i - na - nb);
        if (f64)
            memcpy(dst, &v, es);
        else {
            const float f = (float)v;
            memcpy(dst, &f, es);
        }
    }
#define CANNL_TEST_PRODUCT(cols, b, c)                                                                             \
    (f64 ? cannl_dgemm(g, M, cols, K, 1.0, (const double *)A, a0, a1, (const double *)(b), b0, b1, (double *)(c), c0, \
                       c1, overwrite)                                                                              \
         : cannl_sgemm(g, M, cols, K, 1.0f, (const float *)A, a0, a1, (const float *)(b), b0, b1, (float *)(c), c0, \
                       c1, overwrite))
    memcpy(Cm, C0, es * (size_t)nc);
    CANNL_TEST_PRODUCT(N, B, Cm);
    const long bands[][2] = {{0, 16}, {16, 16}, {40, 9}, {N - 16, 16}, {3, 8}}; /* first column, width */
    int bad = 0;
    for (int k = 0; k < 5; ++k) {
        const long j0 = bands[k][0], w = bands[k][1];
        memcpy(C1, C0, es * (size_t)nc);
        CANNL_TEST_PRODUCT(w, B + es * (size_t)(j0 * b1), C1 + es * (size_t)(j0 * c1));
        for (long i = 0; i < M && !(i > 0 && bad); ++i)
            for (long j = j0; j < j0 + w; ++j)
                if (memcmp(C1 + es * (size_t)(i * c0 + j * c1), Cm + es * (size_t)(i * c0 + j * c1), es) != 0) {
                    fprintf(stderr, "%s %ldx%ldx%ld layouts 0%d%d: columns %ld-%ld alone differ at (%ld, %ld)\n",
                            f64 ? "f64" : "f32", M, N, K, lb, lc, j0, j0 + w - 1, i, j);
                    ++bad;
                    break;
                }
    }
#undef CANNL_TEST_PRODUCT
    free(A), free(B), free(C0), free(Cm), free(C1);
    return bad;
}

/* A short K overwriting a C of 8 MB or more, 64-byte aligned, streams C's stores to memory
 * (gemm_kernel.h): the same bits as into a C one element off (not aligned: stored as usual),
 * and each element the triple loop's within rounding, for rows of C 4 KiB apart. */
static int stream_case(cannl_gemm *g, int f64) {
    const long M = f64 ? 1030 : 2050, N = 1024, K = 7;
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    char *A = malloc(es * (size_t)(M * K)), *B = malloc(es * (size_t)(K * N));
    char *Ca = cannl_alloc(es * (size_t)(M * N)), *Cu = malloc(es * (size_t)(M * N + 1));
    if (!A || !B || !Ca || !Cu) return 1;
#ifdef _OPENMP
    omp_set_num_threads(1); /* all of C one thread's: split, each part would be under 8 MB */
#endif
    for (long i = 0; i < M * K + K * N; ++i) {
        const double v = next_value();
        char *dst = i < M * K ? A + es * (size_t)i : B + es * (size_t)(i - M * K);
        if (f64)
            memcpy(dst, &v, es);
        else {
            const float f = (float)v;
            memcpy(dst, &f, es);
        }
    }
    for (int k = 0; k < 2; ++k) {
        char *C = k ? Cu + es : Ca;
        memset(C, 0x7f, es * (size_t)(M * N)); /* overwritten */
        if (f64)
            cannl_dgemm(g, M, N, K, 1.0, (const double *)A, K, 1, (const double *)B, N, 1, (double *)C, N, 1, 1);
        else
            cannl_sgemm(g, M, N, K, 1.0f, (const float *)A, K, 1, (const float *)B, N, 1, (float *)C, N, 1, 1);
    }
    int bad = memcmp(Ca, Cu + es, es * (size_t)(M * N)) != 0;
    for (long i = 0; i < M; i += 97)
        for (long j = 0; j < N; ++j) {
            double want = 0, mag = 0;
            for (long p = 0; p < K; ++p) {
                const double t = f64 ? ((double *)A)[i * K + p] * ((double *)B)[p * N + j]
                                     : (double)((float *)A)[i * K + p] * ((float *)B)[p * N + j];
                want += t, mag += fabs(t);
            }
            const double got = f64 ? ((double *)Ca)[i * N + j] : ((float *)Ca)[i * N + j];
            if (fabs(got - want) > (f64 ? 1e-13 : 2e-6) * (mag + 1e-30)) bad = 1;
        }
    if (bad) fprintf(stderr, "%s %ldx%ldx%ld into an aligned C: wrong, or not the bits of an unaligned one\n",
                     f64 ? "f64" : "f32", M, N, K);
    free(A), free(B), cannl_free(Ca), free(Cu);
    return bad;
}

/* cannl_sgemm_dot / cannl_dgemm_dot (gemm_dot.h): each element of C must have exactly the bits
 * of the order promised there, computed here one element at a time: lane l of the path's vl
 * lanes sums the p = l mod vl from 0 (an FMA, or on SSE2 a product then a sum), a last partial
 * vector zero-padded, then the lanes by halves; alpha, then = or +=. Whatever M, N, the
 * strides and the thread count: an element's bits never depend on the others. */
#define DOT_EXPECT(name, T, FMA)                                                 \
    static T name(const T *a, const T *b, long K, int vl, int fma_) {            \
        T lane[16];                                                              \
        for (int l = 0; l < vl; ++l) {                                           \
            T acc = 0;                                                           \
            for (long p = l; p < (K + vl - 1) / vl * vl; p += vl) {              \
                const T x = p < K ? a[p] : 0, y = p < K ? b[p] : 0;              \
                if (fma_)                                                        \
                    acc = FMA(x, y, acc);                                        \
                else {                                                           \
                    const T t = x * y;                                           \
                    acc = t + acc;                                               \
                }                                                                \
            }                                                                    \
            lane[l] = acc;                                                       \
        }                                                                        \
        for (int w = vl / 2; w >= 1; w /= 2)                                     \
            for (int l = 0; l < w; ++l) lane[l] = lane[l] + lane[l + w];         \
        return lane[0];                                                          \
    }
DOT_EXPECT(dot_f32, float, fmaf)
DOT_EXPECT(dot_f64, double, fma)
#undef DOT_EXPECT

/* One dot case on `threads` threads: 0 when every element has the promised bits. */
static int dot_case(cannl_gemm *g, int f64, cannl_isa isa, long M, long N, long K, int c_rows, double alpha,
                    int overwrite, int threads) {
#if defined(__x86_64__) || defined(_M_X64)
    const int vl = (isa == CANNL_ISA_AVX512 ? 16 : isa == CANNL_ISA_AVX2 ? 8 : 4) / (f64 ? 2 : 1);
    const int fma_ = isa != CANNL_ISA_SSE2;
#else
    const int vl = 1, fma_ = 0;
    (void)isa;
#endif
    const long a_m = K + 3, b_n = K + 1; /* padded rows: the strides are honoured */
    const long c_m = c_rows ? N + 2 : 1, c_n = c_rows ? 1 : M + 2;
    const long na = M * a_m + 1, nb = N * b_n + 1, nc = M * N * 2 + 4 * (M + N) + 8;
    double *A = malloc(sizeof(double) * (size_t)na), *B = malloc(sizeof(double) * (size_t)nb);
    double *C = malloc(sizeof(double) * (size_t)nc), *E = malloc(sizeof(double) * (size_t)nc);
    float *Af = malloc(sizeof(float) * (size_t)na), *Bf = malloc(sizeof(float) * (size_t)nb);
    float *Cf = malloc(sizeof(float) * (size_t)nc), *Ef = malloc(sizeof(float) * (size_t)nc);
    if (!A || !B || !C || !E || !Af || !Bf || !Cf || !Ef) return 1;
    for (long i = 0; i < na; ++i) Af[i] = (float)(A[i] = (float)next_value());
    for (long i = 0; i < nb; ++i) Bf[i] = (float)(B[i] = (float)next_value());
    for (long i = 0; i < nc; ++i) Cf[i] = Ef[i] = (float)(C[i] = E[i] = (float)next_value());
    for (long i = 0; i < M; ++i)
        for (long j = 0; j < N; ++j) {
            const long at = i * c_m + j * c_n;
            if (f64) {
                double x = dot_f64(A + i * a_m, B + j * b_n, K, vl, fma_);
                if (alpha != 1) x = alpha * x;
                E[at] = overwrite ? x : E[at] + x;
            } else {
                float x = dot_f32(Af + i * a_m, Bf + j * b_n, K, vl, fma_);
                if (alpha != 1) x = (float)alpha * x;
                Ef[at] = overwrite ? x : Ef[at] + x;
            }
        }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    if (f64)
        cannl_dgemm_dot(g, M, N, K, alpha, A, a_m, B, b_n, C, c_m, c_n, overwrite);
    else
        cannl_sgemm_dot(g, M, N, K, (float)alpha, Af, a_m, Bf, b_n, Cf, c_m, c_n, overwrite);
    const int bad = f64 ? memcmp(C, E, sizeof(double) * (size_t)nc) : memcmp(Cf, Ef, sizeof(float) * (size_t)nc);
    if (bad)
        fprintf(stderr, "dot %s %s %ldx%ldx%ld C %s alpha %g overwrite %d threads %d: not the promised bits\n",
                cannl_isa_name(isa), f64 ? "f64" : "f32", M, N, K, c_rows ? "by rows" : "by columns", alpha, overwrite,
                threads);
    free(A), free(B), free(C), free(E), free(Af), free(Bf), free(Cf), free(Ef);
    return bad != 0;
}

/* A A^T by cannl_?gemm_sym against cannl_?gemm with B = A^T: the same bits, on `threads`
 * threads (A row-major or transposed in place, C by rows or by columns, each padded). */
static int sym_case(cannl_gemm *g, int f64, long N, long K, int a_rows, int c_rows, double alpha, int threads) {
    const long a_m = a_rows ? K + 3 : 1, a_k = a_rows ? 1 : N + 2;
    const long c_m = c_rows ? N + 1 : 1, c_n = c_rows ? 1 : N + 1;
    const long na = N * K + 3 * (N + K) + 8, nc = (N + 1) * (N + 1);
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    char *A = malloc(es * (size_t)na), *C = malloc(es * (size_t)nc), *E = malloc(es * (size_t)nc);
    if (!A || !C || !E) return 1;
    for (long i = 0; i < na; ++i) {
        const double v = next_value();
        if (f64) ((double *)(void *)A)[i] = v;
        else ((float *)(void *)A)[i] = (float)v;
    }
    for (long i = 0; i < nc; ++i) {
        const double v = next_value();
        if (f64) ((double *)(void *)C)[i] = ((double *)(void *)E)[i] = v;
        else ((float *)(void *)C)[i] = ((float *)(void *)E)[i] = (float)v;
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    if (f64) {
        const double *a = (const double *)(void *)A;
        cannl_dgemm(g, N, N, K, alpha, a, a_m, a_k, a, a_k, a_m, (double *)(void *)E, c_m, c_n, 1);
        cannl_dgemm_sym(g, N, K, alpha, a, a_m, a_k, (double *)(void *)C, c_m, c_n);
    } else {
        const float *a = (const float *)(void *)A;
        cannl_sgemm(g, N, N, K, (float)alpha, a, a_m, a_k, a, a_k, a_m, (float *)(void *)E, c_m, c_n, 1);
        cannl_sgemm_sym(g, N, K, (float)alpha, a, a_m, a_k, (float *)(void *)C, c_m, c_n);
    }
    const int bad = memcmp(C, E, es * (size_t)nc) != 0;
    if (bad)
        fprintf(stderr, "sym %s %ldx%ld A %s C %s alpha %g threads %d: not cannl_gemm's bits\n", f64 ? "f64" : "f32", N,
                K, a_rows ? "by rows" : "transposed", c_rows ? "by rows" : "by columns", alpha, threads);
    free(A), free(C), free(E);
    return bad;
}

int main(void) {
    cannl_error err;
    /* CANNL_ISA: a bad name is refused; a name only lowers the CPU's best. */
    unsetenv("CANNL_ISA");
    cannl_isa best;
    CHECK_OK(cannl_isa_select(&best, &err));
    setenv("CANNL_ISA", "avx3", 1);
    cannl_isa got;
    CHECK_ERR(cannl_isa_select(&got, &err), CANNL_E_ARG, "CANNL_ISA=avx3", "avx512, avx2 or sse2");
    CHECK(got == best);
    for (int i = CANNL_ISA_SSE2; i <= CANNL_ISA_AVX512; ++i) {
        setenv("CANNL_ISA", cannl_isa_name((cannl_isa)i), 1);
        CHECK_OK(cannl_isa_select(&got, &err));
        CHECK(got == ((cannl_isa)i < best ? (cannl_isa)i : best));
    }
    printf("this CPU: %s\n", cannl_isa_name(best));

    const long sizes[][3] = {{1, 1, 1},    {0, 5, 3},     {4, 0, 3},     {3, 4, 0},    {7, 13, 5},
                             {12, 32, 64}, {13, 33, 65},  {16, 48, 31},  {37, 100, 1}, {100, 37, 300},
                             {128, 10, 512}, {10, 128, 512}, {130, 530, 520}, {64, 600, 70}, {300, 40, 784},
                             {32, 25, 1500}, {40, 200, 2100},  /* these two computed as C^T (gemm.c) */
                             {1, 300, 70}, {1, 129, 513}, {64, 1024, 10},  /* one row; a short K, rows 4 KiB apart */
                             {200, 64, 800}, {70, 60, 3000},  /* A in place, up to 64 columns; its panel too large */
                             {32, 25, 5000},  /* as C^T, A and B in place, K blocks outermost */
                             /* 16 or 9 columns, or 16 past whole slivers: the half tiles, B's 16 read in place */
                             {50, 16, 9}, {37, 16, 3000}, {13, 144, 40}, {9, 16, 2500}, {16, 144, 2100}, {30, 9, 600}};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    /* Each row alone: the one-row tile (B's K axis contiguous, a layer's weights [out, in]) and
       the other paths, widths around its 4 slivers, K blocks of every kind. */
    const long rows_alone[][3] = {{5, 384, 128}, {3, 129, 513}, {4, 50, 600}, {6, 300, 70}, {2, 1000, 10}, {9, 16, 3}};
    /* Dot products: blocks of 4 x 4 and 5 x 3 and their edges, K below, at and around the lanes,
       a product large enough for threads (10 x 600 x 1030: 12 MFLOP), empty ones. */
    const long dots[][3] = {{1, 1, 1},   {10, 64, 1024}, {10, 7, 513}, {3, 5, 17},  {16, 33, 300}, {5, 3, 16},
                            {10, 1, 20}, {4, 4, 0},      {0, 3, 5},    {9, 13, 15}, {10, 600, 1030}};
    /* Bands of columns alone: half tiles against whole ones, K short and long (blocks). */
    const long cols_alone[][3] = {{21, 64, 9}, {19, 64, 700}, {8, 64, 40}};
    /* A A^T: one band and several, a last band short, K short and in blocks, a square Muon matrix. */
    const long syms[][2] = {{1, 1}, {0, 4}, {5, 0}, {7, 13}, {32, 64}, {45, 300}, {128, 128}, {100, 1500}};
    int cases = 0, alone = 0, dotted = 0, sym = 0;
    for (int isa = CANNL_ISA_SSE2; isa <= (int)best; ++isa) {
        setenv("CANNL_ISA", cannl_isa_name((cannl_isa)isa), 1);
        for (int f64 = 0; f64 <= 1; ++f64) {
            /* Workspace for one thread: the runs on 2 and 3 threads enlarge it. */
            cannl_gemm *g = cannl_gemm_create(f64 ? CANNL_F64 : CANNL_F32, 1);
            CHECK(g != NULL);
            if (!g) continue;
            CHECK(cannl_gemm_isa(g) == (cannl_isa)isa);
            for (int s = 0; s < nsizes; ++s)
                for (int layout = 0; layout < 6; ++layout) {
                    const gcase c = {sizes[s][0], sizes[s][1], sizes[s][2], layout % 3, (layout / 3 + s) % 2,
                                     (layout + s) % 3, layout == 4 ? 0.5 : 1.0, (layout + s) % 2};
                    const size_t es = f64 ? sizeof(double) : sizeof(float);
                    void *C1 = malloc(es * (size_t)c_size(&c)), *C2 = malloc(es * (size_t)c_size(&c));
                    if (!C1 || !C2) return 1;
                    const double e = run_case(g, f64, &c, 1, 1, C1);
                    const double tol = f64 ? 1e-13 : 2e-6;
                    if (e > tol)
                        fprintf(stderr, "%s %s %ldx%ldx%ld layouts %d%d%d alpha %g overwrite %d: error %g\n",
                                cannl_isa_name((cannl_isa)isa), f64 ? "f64" : "f32", c.M, c.N, c.K, c.la, c.lb, c.lc,
                                c.alpha, c.overwrite, e);
                    CHECK(e <= tol);
                    for (int threads = 2; threads <= 3; ++threads) {
                        run_case(g, f64, &c, threads, 0, C2);
                        CHECK(memcmp(C1, C2, es * (size_t)c_size(&c)) == 0);
                    }
                    free(C1), free(C2);
                    ++cases;
                }
            for (int s = 0; s < (int)(sizeof dots / sizeof dots[0]); ++s)
                for (int v = 0; v < 4; ++v) {
                    CHECK(dot_case(g, f64, (cannl_isa)isa, dots[s][0], dots[s][1], dots[s][2], v % 2,
                                   v == 2 ? 0.5 : 1.0, v < 2, 1 + (s + v) % 3) == 0);
                    ++dotted;
                }
            for (int s = 0; s < (int)(sizeof rows_alone / sizeof rows_alone[0]); ++s)
                for (int layout = 0; layout < 6; ++layout) {
                    CHECK(row_alone_case(g, f64, rows_alone[s][0], rows_alone[s][1], rows_alone[s][2], layout % 2,
                                         layout / 2, layout == 3 ? 0.5 : 1.0, (layout + s) % 2) == 0);
                    ++alone;
                }
            CHECK(stream_case(g, f64) == 0);
            for (int s = 0; s < (int)(sizeof syms / sizeof syms[0]); ++s)
                for (int layout = 0; layout < 4; ++layout) {
                    CHECK(sym_case(g, f64, syms[s][0], syms[s][1], layout % 2, layout / 2, layout == 1 ? 0.5 : 1.0,
                                   1 + (s + layout) % 2) == 0);
                    ++sym;
                }
            for (int s = 0; s < (int)(sizeof cols_alone / sizeof cols_alone[0]); ++s)
                for (int layout = 0; layout < 4; ++layout) {
                    CHECK(cols_alone_case(g, f64, cols_alone[s][0], cols_alone[s][1], cols_alone[s][2], layout % 2,
                                          layout / 2, (layout + s) % 2) == 0);
                    ++alone;
                }
            cannl_gemm_free(g);
        }
    }
    unsetenv("CANNL_ISA");
    printf("%d cases, %d of rows or columns alone, %d dot products, %d symmetric\n", cases, alone, dotted, sym);
    return rt_failures ? 1 : 0;
}
