/* quant_avx2.c - the int8 product (quant_kernel.h) with 256-bit integer vectors: 32 int8
 * products per step, vpmaddubsw on |w| (unsigned) and x with w's sign moved onto it (vpsignb:
 * x * w = |w| * (x sign(w)); a pair of products is at most 2 * 127 * 127, so the 16-bit sums do
 * not saturate), then vpmaddwd by ones into int32 lanes. X is stored as q (signed). CMakeLists.txt
 * compiles this file alone with -march=x86-64-v3; quant.c calls it only on a CPU that has AVX2
 * (and on an AVX-512 CPU without VNNI). */
#include "gemm_internal.h"

#if !defined(__AVX2__)
#error "quant_avx2.c is compiled with -march=x86-64-v3 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

static inline __m256i dot32(__m256i a, __m256i x, __m256i w, __m256i wabs) {
    const __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(a, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

static inline uint32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return (uint32_t)_mm_cvtsi128_si32(s);
}

#define QK_NAME cannl__q8_avx2
#define QK_VL 32
#define QK_IVEC __m256i
#define QK_IZERO _mm256_setzero_si256()
#define QK_LOADX(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define QK_LOADW(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define QK_WPREP(w) _mm256_abs_epi8(w)
#define QK_DOT(a, x, w, wp) dot32(a, x, w, wp)
#define QK_OFFSET 0
#define QK_HSUM(v) hsum8_epi32(v)
#define QK_JW 2 /* a tile of 2 weight rows by 4 rows of X: 8 accumulators, 4 weight vectors, x, ones */
#define QK_IX 4
#define QK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
#include "quant_kernel.h"
