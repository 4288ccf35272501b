/* quant_avx512.c - the int8-weight product (quant_kernel.h) with 512-bit vectors: sixteen
 * int8 weights widened to floats in registers. CMakeLists.txt compiles this file alone with
 * -march=x86-64-v4; quant.c calls it only on a CPU that has AVX-512F. (VNNI's int8 dot
 * products would need the activations in int8 too: another rounding, not taken.) */
#include "gemm_internal.h"

#if !defined(__AVX512F__)
#error "quant_avx512.c is compiled with -march=x86-64-v4 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

static inline __m512 load16_q8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}

#define QK_NAME cannl__q8_avx512
#define QK_VL 16
#define QK_VEC __m512
#define QK_ZERO _mm512_setzero_ps()
#define QK_LOADX(p) _mm512_loadu_ps(p)
#define QK_LOADW(p) load16_q8(p)
#define QK_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define QK_HSUM(v) _mm512_reduce_add_ps(v)
#define QK_JW 3 /* a tile of 3 weight rows by 8 rows of X: 24 accumulators of the 32 registers */
#define QK_IX 8
#define QK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#include "quant_kernel.h"
