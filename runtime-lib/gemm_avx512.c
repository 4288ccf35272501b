/* gemm_avx512.c - the matrix-product kernels for AVX-512 (gemm_kernel.h with 512-bit
 * vectors). CMakeLists.txt compiles this file alone with -march=x86-64-v4; gemm.c calls it
 * only on a CPU that has AVX-512F. */
#include "gemm_internal.h"

#if !defined(__AVX512F__)
#error "gemm_avx512.c is compiled with -march=x86-64-v4 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

#include "gemm_transpose.h"

/* Tile sizes (docs/gemm-tiles.md: bench/tile_search.sh, which overrides the float ones
 * through -DCANNL_MR=... -DCANNL_NV=... -DCANNL_KC=... -DCANNL_MC=... -DCANNL_NC=...). */
#ifndef CANNL_MR
#define CANNL_MR 8
#endif
#ifndef CANNL_NV
#define CANNL_NV 2
#endif
#ifndef CANNL_MR1
#define CANNL_MR1 12
#endif
#ifndef CANNL_KC
#define CANNL_KC 256
#endif
#ifndef CANNL_MC
#define CANNL_MC (16 * CANNL_MR)
#endif
#ifndef CANNL_NC
#define CANNL_NC 512
#endif

/* s[e] = the 16 lanes of v[e] summed, for e < 16, by the tree of gemm_dot.h's lane_sum
 * (x[l] + x[l + w] for w = 8, 4, 2, 1), four vectors of sums at a time: each step adds the
 * low and high halves of a part of the lanes (128-bit quarters, then pairs, then single lanes)
 * of two vectors into one. Lane 4q + t of the last vector is the sum of v[4t + q]. */
static inline void dot_sum16(const __m512 *v, float *s) {
    __m512 r[8], u[4], w[2];
    for (int k = 0; k < 8; ++k) /* lanes 0-7: v[2k]'s l + (l + 8); lanes 8-15: v[2k + 1]'s */
        r[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int k = 0; k < 4; ++k) /* quarter q: v[4k + q]'s l + (l + 4) */
        u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int k = 0; k < 2; ++k) /* quarter q: v[8k + q]'s l + (l + 2) (lanes 0, 1), v[8k + 4 + q]'s (2, 3) */
        w[k] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 sum = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    float t[16];
    _mm512_storeu_ps(t, sum);
    for (int e = 0; e < 16; ++e) s[e] = t[4 * (e % 4) + e / 4];
}

#define GK_REAL float
#define GK_TAG f32
#define GK_NAME cannl__gemm_avx512_f32
#define GK_VL 16
#define GK_VEC __m512
#define GK_VLOAD(p) _mm512_loadu_ps(p)
#define GK_VSTORE(p, v) _mm512_storeu_ps(p, v)
#define GK_VSET1(x) _mm512_set1_ps(x)
#define GK_VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define GK_VMUL(a, b) _mm512_mul_ps(a, b)
#define GK_VADD(a, b) _mm512_add_ps(a, b)
#define GK_VSTREAM(p, v) _mm512_stream_ps(p, v)
#define GK_SFENCE() _mm_sfence()
#define GK_MR CANNL_MR
#define GK_MR1 CANNL_MR1
#define GK_NV CANNL_NV
#define GK_KC CANNL_KC
#define GK_MC CANNL_MC
#define GK_NC CANNL_NC
#define GK_TB 8
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose8_f32(s, ls, d, ld)
#define GK_TB2 4
#define GK_TRANSPOSE2(s, ls, d, ld) cannl__transpose4_f32(s, ls, d, ld)
#define GK_DOT_SUM16(acc, s) dot_sum16(acc, s)
#include "gemm_kernel.h"

#define GK_REAL double
#define GK_TAG f64
#define GK_NAME cannl__gemm_avx512_f64
#define GK_VL 8
#define GK_VEC __m512d
#define GK_VLOAD(p) _mm512_loadu_pd(p)
#define GK_VSTORE(p, v) _mm512_storeu_pd(p, v)
#define GK_VSET1(x) _mm512_set1_pd(x)
#define GK_VFMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define GK_VMUL(a, b) _mm512_mul_pd(a, b)
#define GK_VADD(a, b) _mm512_add_pd(a, b)
#define GK_VSTREAM(p, v) _mm512_stream_pd(p, v)
#define GK_SFENCE() _mm_sfence()
#define GK_MR 8
#define GK_NV 2
#define GK_KC 256
#define GK_MC 128
#define GK_NC 512
#define GK_TB 4
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose4_f64(s, ls, d, ld)
#define GK_TB2 2
#define GK_TRANSPOSE2(s, ls, d, ld) cannl__transpose2_f64(s, ls, d, ld)
#include "gemm_kernel.h"
