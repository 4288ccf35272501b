/* quant.c - int8 weights (`cannl gen --quantize int8`): a matrix stored as rows of int8 with
 * one float scale per row, symmetric, and the products that read it. The scheme
 * (docs/generated-code.md, "int8 weights"): scale = max |w| / 127 over the row (0 for a row of
 * zeros), q = w / scale rounded to the nearest integer, halves away from zero (roundf), so
 * that w is q * scale within scale / 2. The generator quantises an embedded checkpoint with
 * the same float operations (generator/emit/quantize_rows.cpp), so both give the same bytes.
 *
 * The product (cannl_sgemm_q8) converts the weights to floats in registers, never in memory:
 * a kernel per instruction set (quant_kernel.h: quant.c's plain C, quant_avx2.c,
 * quant_avx512.c), the one of the context's cannl_gemm_isa; the weight rows split between
 * threads, each weight read once per call. */
#include "gemm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define QK_NAME cannl__q8_base
#define QK_VL 1
#define QK_VEC float
#define QK_ZERO 0.0f
#define QK_LOADX(p) (*(p))
#define QK_LOADW(p) ((float)*(p))
#define QK_FMA(a, b, c) ((a) * (b) + (c))
#define QK_HSUM(v) (v)
#define QK_JW 2
#define QK_IX 4
#define QK_PREFETCH(p) ((void)(p))
#include "quant_kernel.h"

void cannl_quantize_rows_q8(const float *w, int64_t rows, int64_t cols, int8_t *q, float *scale) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *x = w + r * cols;
        float m = 0.0f;
        for (int64_t k = 0; k < cols; ++k) m = fabsf(x[k]) > m ? fabsf(x[k]) : m;
        const float s = m / 127.0f;
        scale[r] = s;
        for (int64_t k = 0; k < cols; ++k) {
            float v = s > 0.0f ? roundf(x[k] / s) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[r * cols + k] = (int8_t)v;
        }
    }
}

void cannl_dequantize_rows_q8(const int8_t *q, const float *scale, int64_t rows, int64_t cols, float *w) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) w[r * cols + k] = (float)q[r * cols + k] * scale[r];
}

static cannl__q8_kernel kernel_for(const cannl_gemm *g) {
#ifdef CANNL_GEMM_X86
    const cannl_isa isa = g ? cannl_gemm_isa(g) : CANNL_ISA_SSE2;
    if (isa == CANNL_ISA_AVX512) return cannl__q8_avx512;
    if (isa == CANNL_ISA_AVX2) return cannl__q8_avx2;
#else
    (void)g;
#endif
    return cannl__q8_base;
}

/* Threads for a product of M x N x K against N * K weight bytes: OpenMP's count when the
   flops or the weights are large enough (a decoded position's rows: reading 128 KiB is worth
   a second thread) and not already in a parallel region. */
static int q8_threads(long M, long N, long K) {
#ifdef _OPENMP
    if ((2.0 * (double)M * (double)N * (double)K >= 4.0e6 || (double)N * (double)K >= 131072.0) && !omp_in_parallel())
        return omp_get_max_threads();
#else
    (void)M, (void)N, (void)K;
#endif
    return 1;
}

void cannl_sgemm_q8(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *X, int64_t x_r,
                    int64_t x_k, const int8_t *W, int64_t w_r, const float *scale, float *C, int64_t c_x, int64_t c_w,
                    int overwrite) {
    if (M <= 0 || N <= 0) return;
    const cannl__q8_kernel run = kernel_for(g);
    float *packed = NULL;
    if (x_k != 1 && K > 1) { /* X's rows contiguous along K first (the activations, not the weights) */
        packed = malloc((size_t)M * (size_t)K * sizeof *packed);
        if (!packed) { /* out of memory: element by element, in the kernels' tail order */
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                    float s = 0.0f;
                    for (int64_t k = 0; k < K; ++k) s += X[i * x_r + k * x_k] * (float)W[j * w_r + k];
                    float *c = C + i * c_x + j * c_w;
                    *c = (overwrite ? 0.0f : *c) + alpha * scale[j] * s;
                }
            return;
        }
        for (int64_t i = 0; i < M; ++i)
            for (int64_t k = 0; k < K; ++k) packed[i * K + k] = X[i * x_r + k * x_k];
        X = packed;
        x_r = K;
    }
    int threads = q8_threads((long)M, (long)N, (long)K);
    const long blocks = ((long)N + 3) / 4;
    if (threads > blocks) threads = (int)blocks;
    if (threads <= 1) {
        run((long)M, (long)N, (long)K, alpha, X, (long)x_r, W, (long)w_r, scale, C, (long)c_x, (long)c_w, overwrite);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const long lo = blocks * t / nt * 4, hi = blocks * (t + 1) / nt * 4;
            const long end = hi < (long)N ? hi : (long)N;
            if (end > lo)
                run((long)M, end - lo, (long)K, alpha, X, (long)x_r, W + lo * (long)w_r, (long)w_r, scale + lo,
                    C + lo * (long)c_w, (long)c_x, (long)c_w, overwrite);
        }
#endif
    }
    free(packed);
}
