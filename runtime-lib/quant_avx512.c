/* quant_avx512.c - the int8 product (quant_kernel.h) with AVX-512 VNNI: vpdpbusd adds 64
 * products of unsigned by signed bytes into 16 int32 lanes per instruction. The weights enter as
 * w + 128 (unsigned: w xor 0x80, once per weight vector for the tile's rows of X) and X as q
 * (signed), so each lane gets sum (w + 128) q; 128 times the sum of the row of X (quant.c,
 * computed once per call) is subtracted at the end: exact modulo 2^32, and the true sum fits.
 * The last K % 64 weights are read with a masked load (AVX-512BW; X is padded with zeros).
 * CMakeLists.txt compiles this file alone with -march=x86-64-v4 -mavx512vnni; quant.c calls it
 * only on a CPU that has AVX-512F, BW and VNNI. */
#include "gemm_internal.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VNNI__)
#error "quant_avx512.c is compiled with -march=x86-64-v4 -mavx512vnni (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

/* The lanes' sums of four accumulators at once, to out[0..3] (modulo 2^32): pairs of lanes added
   in each 128-bit quarter by unpacking, then the four quarters. */
static inline void hsum4(uint32_t *out, __m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    _mm_storeu_si128((__m128i *)(void *)out,
                     _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

#define QK_NAME cannl__q8_avx512
#define QK_VL 64
#define QK_IVEC __m512i
#define QK_IZERO _mm512_setzero_si512()
#define QK_LOADX(p) _mm512_loadu_si512((const void *)(p))
#define QK_LOADW(p) _mm512_loadu_si512((const void *)(p))
#define QK_LOADW_PART(p, n) _mm512_maskz_loadu_epi8((__mmask64)(~0ull >> (64 - (n))), (const void *)(p))
#define QK_WPREP(w) _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80))
#define QK_DOT(a, x, w, wp) _mm512_dpbusd_epi32(a, wp, x)
#define QK_OFFSET 1
#define QK_HSUM(v) ((uint32_t)_mm512_reduce_add_epi32(v))
#define QK_HSUM4(out, a0, a1, a2, a3) hsum4(out, a0, a1, a2, a3)
/* A tile of 1 weight row by 8 rows of X: the weight vector feeds 8 vpdpbusd, the rows of X come
   from L1. Of 1x8, 2x4, 2x8 and 4x4, the fastest on a batch of 8 decoded rows of gpt2_124m
   (10.1-10.3 ms against 11.2-11.7 ms for its products on one Zen 4 core; 3x8 spills). */
#define QK_JW 1
#define QK_IX 8
#define QK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
#include "quant_kernel.h"
