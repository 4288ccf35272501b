/* quant.c - int8 weights (`cannl gen --quantize int8`): a matrix stored as rows of int8 with
 * one float scale per row, symmetric, and the products that read it. The scheme
 * (docs/generated-code.md, "int8 weights"): scale = max |w| / 127 over the row (0 for a row of
 * zeros), q = w / scale rounded to the nearest integer, halves away from zero (roundf), so
 * that w is q * scale within scale / 2. The generator quantises an embedded checkpoint with
 * the same float operations (generator/emit/quantize_rows.cpp), so both give the same bytes.
 *
 * The product (cannl_sgemm_q8) is of integers: each call quantises X's rows by the same
 * scheme (one scale per row: xd = max |x| / 127, xq = round(x / xd), halves away from zero),
 * then each output is alpha * scale[j] * (xd[i] * (float)S) with S = sum_k xq[i, k] W[j, k] an
 * exact int32. One scale per row of X rather than per block of k: the integer sum then runs
 * over the whole row, one conversion to float per output, so the result is the same bits on
 * every instruction set and the kernels do nothing but integer multiply-adds (per-block scales
 * would add a conversion and a float multiply-add per block and output; the quality measured
 * with one per row is in docs/generated-code.md). A kernel per instruction set (quant_kernel.h:
 * quant.c's plain C, quant_avx2.c, quant_avx512.c with VNNI), the one of the context's
 * cannl_gemm_isa; the weight rows split between threads, each weight read once per call. */
#include "gemm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define QK_NAME cannl__q8_base
#define QK_VL 1
#define QK_IVEC int32_t /* no overflow: without the offset |sum| <= 127 * 127 * 2^17 < 2^31 */
#define QK_IZERO 0
#define QK_LOADX(p) ((int32_t)(int8_t) * (p))
#define QK_LOADW(p) ((int32_t) * (p))
#define QK_WPREP(w) (w)
#define QK_DOT(a, x, w, wp) ((a) + (x) * (w))
#define QK_OFFSET 0
#define QK_HSUM(v) ((uint32_t)(v))
#define QK_JW 2
#define QK_IX 4
#define QK_PREFETCH(p) ((void)(p))
#include "quant_kernel.h"

void cannl_dequantize_rows_q8(const int8_t *q, const float *scale, int64_t rows, int64_t cols, float *w) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) w[r * cols + k] = (float)q[r * cols + k] * scale[r];
}

/* The kernel of g's instruction set: AVX-512 needs VNNI and BW too (an AVX-512 CPU without them
   runs the AVX2 kernel, which every AVX-512 CPU has). */
static cannl__q8_kernel kernel_for(const cannl_gemm *g) {
#ifdef CANNL_GEMM_X86
#ifdef CANNL_GEMM_AMX
    if (g && cannl__gemm_vnni(g) && (cannl__gemm_amx(g) & CANNL__AMX_INT8)) return cannl__q8_amx;
#endif
    if (g && cannl__gemm_vnni(g)) return cannl__q8_avx512; /* decided once, when g was created */
    if (g && cannl_gemm_isa(g) >= CANNL_ISA_AVX2) return cannl__q8_avx2;
#else
    (void)g;
#endif
    return cannl__q8_base;
}

/* Threads for a product of M x N x K against N * K weight bytes: OpenMP's count when the
   multiply-adds or the weights are large enough (a decoded position's rows: reading 128 KiB is
   worth a second thread) and not already in a parallel region. */
static int q8_threads(long M, long N, long K) {
#ifdef _OPENMP
    if ((2.0 * (double)M * (double)N * (double)K >= 4.0e6 || (double)N * (double)K >= 131072.0) && !omp_in_parallel())
        return omp_get_max_threads();
#else
    (void)M, (void)N, (void)K;
#endif
    return 1;
}

/* v rounded to the nearest integer, halves away from zero, within [-127, 127], for a finite v:
   roundf's result clamped, in operations that vectorise (quiet comparisons, an integer clamp:
   clamping v first to +-127 rounds to the same integer). */
static inline int quantize_scaled(float v) {
    const int t = (int)v;         /* towards zero */
    const float f = v - (float)t; /* exact */
    const int r = t + __builtin_isgreaterequal(f, 0.5f) - __builtin_islessequal(f, -0.5f);
    return r > 127 ? 127 : r < -127 ? -127 : r;
}

/* x / d by quantize_scaled, 0 when d is 0 or NaN (the row's outputs are then 0 or NaN). */
static inline int quantize_one(float x, float d) {
    return d > 0.0f ? quantize_scaled(x / d) : 0;
}

/* The largest |x| over K elements at stride x_k, as its bits (a float's magnitude orders as its
   bits do, an infinity's and a NaN's above FLT_MAX's; as int32, which SSE2 compares, so that the
   loop vectorises there too); skip_nan: a NaN counts as 0. */
static inline int32_t abs_max_bits(const float *x, long x_k, long K, int skip_nan) {
    int32_t m = 0;
    for (long k = 0; k < K; ++k) {
        int32_t u;
        memcpy(&u, x + k * x_k, sizeof u);
        u &= 0x7fffffff;
        if (skip_nan) u = u > 0x7f800000 ? 0 : u;
        m = u > m ? u : m;
    }
    return m;
}

/* A row of X's scale (K elements at stride x_k): max|x| / 127, or NaN when an element is an
   infinity or a NaN (its outputs are then NaN). The largest |x| is found on the bits (a float's
   magnitude orders as its bits do; an infinity's or a NaN's exceed FLT_MAX's), so that the loop
   vectorises. */
static float row_scale(const float *x, long x_k, long K) {
    const int32_t m = abs_max_bits(x, x_k, K, 0);
    if (m > 0x7f7fffff) return NAN;
    float a;
    memcpy(&a, &m, sizeof a);
    return a / 127.0f;
}

/* The weights' scheme, in loops that vectorise (quant.c is compiled with -fno-trapping-math, so
   that the NaN test below is a select): the row's max |w| with a NaN counting as 0, as the float
   comparison it replaces never passed one; each q by quantize_scaled, and 0 for a NaN quotient (a
   NaN weight, or an infinite one in a row whose scale is infinite), the byte x86's conversion
   gave it before. The same bytes as roundf's, written out. */
void cannl_quantize_rows_q8(const float *w, int64_t rows, int64_t cols, int8_t *q, float *scale) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *x = w + r * cols;
        int8_t *qr = q + r * cols;
        const int32_t mb = abs_max_bits(x, 1, (long)cols, 1);
        float m;
        memcpy(&m, &mb, sizeof m);
        const float s = m / 127.0f;
        scale[r] = s;
        if (!(s > 0.0f)) {
            memset(qr, 0, (size_t)cols);
            continue;
        }
        for (int64_t k = 0; k < cols; ++k) {
            const float v = x[k] / s;
            qr[k] = (int8_t)quantize_scaled(v == v ? v : 0.0f);
        }
    }
}

/* One row of X by the weights' scheme: returns its scale d, writes q = round(x / d) to q, then
   zeros up to x_r bytes, and the sums of q over each KCHUNK elements to s[0], s[M], s[2 M], ...
   Compiled for AVX2 as well (CANNL_MULTIVERSION: the same bits, IEEE division being correctly
   rounded on every instruction set); a
   batch of decoded rows spent an eighth of its products here in scalar code. */
enum { KCHUNK = 1 << 17 };
CANNL_MULTIVERSION static float quantize_x(const float *restrict x, long x_k, long K, uint8_t *restrict q, long x_r,
                                           int32_t *restrict s, long M) {
    const float d = row_scale(x, x_k, K);
    for (long k0 = 0; k0 < K; k0 += KCHUNK) {
        const long end = K - k0 < KCHUNK ? K : k0 + KCHUNK;
        int32_t sum = 0;
        if (d > 0.0f && x_k == 1) /* the same, in a loop the compiler vectorises */
            for (long k = k0; k < end; ++k) {
                const int v = quantize_scaled(x[k] / d);
                q[k] = (uint8_t)(int8_t)v;
                sum += v;
            }
        else
            for (long k = k0; k < end; ++k) {
                const int v = quantize_one(x[k * x_k], d);
                q[k] = (uint8_t)(int8_t)v;
                sum += v;
            }
        s[k0 / KCHUNK * M] = sum;
    }
    memset(q + K, 0, (size_t)(x_r - K));
    return d;
}

/* The kernel on weight rows [lo, lo + n) (threads split them), K at most KCHUNK at a time. */
static void run_rows(cannl__q8_kernel run, long M, long n, long K, float alpha, const uint8_t *xq, long x_r,
                     const float *xd, const int32_t *xs, const int8_t *W, long w_r, const float *scale, float *C,
                     long c_x, long c_w, int overwrite) {
    for (long k0 = 0; k0 < K; k0 += KCHUNK) {
        const long kn = K - k0 < KCHUNK ? K - k0 : KCHUNK;
        run(M, n, kn, alpha, xq + k0, x_r, xd, xs + k0 / KCHUNK * M, W + k0, w_r, scale, C, c_x, c_w,
            overwrite && k0 == 0);
    }
}

void cannl_sgemm_q8(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *X, int64_t x_r,
                    int64_t x_k, const int8_t *W, int64_t w_r, const float *scale, float *C, int64_t c_x, int64_t c_w,
                    int overwrite) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* empty sums */
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                float *c = C + i * c_x + j * c_w;
                *c = overwrite ? 0.0f * alpha : *c + 0.0f * alpha;
            }
        return;
    }
    const cannl__q8_kernel run = kernel_for(g);
    const long xq_r = ((long)K + 63) / 64 * 64, chunks = ((long)K + KCHUNK - 1) / KCHUNK;
    const size_t bytes = (size_t)M * (size_t)xq_r + (size_t)M * sizeof(float) + (size_t)(M * chunks) * sizeof(int32_t);
    void *mine = NULL, *scratch = cannl__gemm_scratch(g, bytes);
#ifdef _OPENMP
    if (omp_in_parallel()) scratch = NULL; /* (a call per thread: g's workspace is not each one's) */
#endif
    if (!scratch) scratch = mine = malloc(bytes);
    if (!scratch) { /* out of memory: the scheme element by element, a row of X at a time */
        for (int64_t i = 0; i < M; ++i) {
            const float d = row_scale(X + i * x_r, (long)x_k, (long)K);
            for (int64_t j = 0; j < N; ++j) {
                int64_t part = 0;
                for (int64_t k = 0; k < K; ++k) {
                    part += quantize_one(X[i * x_r + k * x_k], d) * (int32_t)W[j * w_r + k];
                    if ((k + 1) % KCHUNK == 0 || k + 1 == K) { /* the kernels' chunks of K */
                        float *c = C + i * c_x + j * c_w;
                        const float v = alpha * scale[j] * (d * (float)(int32_t)part);
                        *c = overwrite && k < KCHUNK ? v : *c + v;
                        part = 0;
                    }
                }
            }
        }
        return;
    }
    uint8_t *xq = scratch;
    float *xd = (float *)(void *)(xq + (size_t)M * (size_t)xq_r);
    int32_t *xs = (int32_t *)(void *)(xd + M);
    int threads = q8_threads((long)M, (long)N, (long)K);
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) if (threads > 1 && M >= 16)
#endif
    for (long i = 0; i < (long)M; ++i)
        xd[i] = quantize_x(X + i * x_r, (long)x_k, (long)K, xq + i * xq_r, xq_r, xs + i, (long)M);
    const long blocks = ((long)N + 3) / 4;
    if (threads > blocks) threads = (int)blocks;
    if (threads <= 1) {
        run_rows(run, (long)M, (long)N, (long)K, alpha, xq, xq_r, xd, xs, W, (long)w_r, scale, C, (long)c_x,
                 (long)c_w, overwrite);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const long lo = blocks * t / nt * 4, hi = blocks * (t + 1) / nt * 4;
            const long end = hi < (long)N ? hi : (long)N;
            if (end > lo)
                run_rows(run, (long)M, end - lo, (long)K, alpha, xq, xq_r, xd, xs, W + lo * (long)w_r, (long)w_r,
                         scale + lo, C + lo * (long)c_w, (long)c_x, (long)c_w, overwrite);
        }
#endif
    }
    free(mine);
}
