/* quant_avx2.c - the int8-weight product (quant_kernel.h) with 256-bit vectors: eight int8
 * weights widened to floats in registers. CMakeLists.txt compiles this file alone with
 * -march=x86-64-v3; quant.c calls it only on a CPU that has AVX2 and FMA. */
#include "gemm_internal.h"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "quant_avx2.c is compiled with -march=x86-64-v3 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <string.h>

static inline __m256 load8_q8(const int8_t *p) {
    long long b;
    memcpy(&b, p, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b)));
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define QK_NAME cannl__q8_avx2
#define QK_VL 8
#define QK_VEC __m256
#define QK_ZERO _mm256_setzero_ps()
#define QK_LOADX(p) _mm256_loadu_ps(p)
#define QK_LOADW(p) load8_q8(p)
#define QK_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define QK_HSUM(v) hsum8(v)
#define QK_JW 2 /* a tile of 2 weight rows by 6 rows of X: 12 accumulators of the 16 registers */
#define QK_IX 6
#define QK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#include "quant_kernel.h"
