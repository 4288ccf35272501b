/* quant_avx512.c - the int8 product (quant_kernel.h) with AVX-512 VNNI: vpdpbusd adds 64
 * products of unsigned by signed bytes into 16 int32 lanes per instruction. X is stored as
 * q + 128 (unsigned), so each lane gets sum (q + 128) w, and a second vpdpbusd per weight vector
 * (once for the tile's rows of X) sums 128 w, which is subtracted at the end: exact modulo 2^32,
 * and the true sum fits. The last K % 64 weights are read with a masked load (AVX-512BW).
 * CMakeLists.txt compiles this file alone with -march=x86-64-v4 -mavx512vnni; quant.c calls it
 * only on a CPU that has AVX-512F, BW and VNNI. */
#include "gemm_internal.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VNNI__)
#error "quant_avx512.c is compiled with -march=x86-64-v4 -mavx512vnni (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

#define QK_NAME cannl__q8_avx512
#define QK_VL 64
#define QK_IVEC __m512i
#define QK_IZERO _mm512_setzero_si512()
#define QK_LOADX(p) _mm512_loadu_si512((const void *)(p))
#define QK_LOADW(p) _mm512_loadu_si512((const void *)(p))
#define QK_LOADW_PART(p, n) _mm512_maskz_loadu_epi8((__mmask64)(~0ull >> (64 - (n))), (const void *)(p))
#define QK_WPREP(w) (w)
#define QK_DOT(a, x, w, wp) _mm512_dpbusd_epi32(a, x, w)
#define QK_OFFSET 1
#define QK_CORR(c, w) _mm512_dpbusd_epi32(c, _mm512_set1_epi8((char)0x80), w)
#define QK_HSUM(v) ((uint32_t)_mm512_reduce_add_epi32(v))
#define QK_JW 3 /* a tile of 3 weight rows by 8 rows of X: 24 accumulators and 3 corrections of the 32 registers */
#define QK_IX 8
#define QK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#include "quant_kernel.h"
