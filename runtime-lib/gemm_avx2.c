/* gemm_avx2.c - the matrix-product kernels for AVX2 + FMA (gemm_kernel.h with 256-bit
 * vectors). CMakeLists.txt compiles this file alone with -march=x86-64-v3; gemm.c calls it
 * only on a CPU that has AVX2 and FMA. */
#include "gemm_internal.h"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "gemm_avx2.c is compiled with -march=x86-64-v3 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>

#include "gemm_transpose.h"

/* The sums of a vector's lanes (the dot-product path's last step). */
static inline float hsum_f32(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
static inline double hsum_f64(__m256d v) {
    const __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}

/* Tile sizes (docs/gemm-tiles.md; bench/tile_search.sh overrides the float ones through -D). */
#ifndef CANNL_MR
#define CANNL_MR 6
#endif
#ifndef CANNL_NV
#define CANNL_NV 2
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

#define GK_REAL float
#define GK_TAG f32
#define GK_NAME cannl__gemm_avx2_f32
#define GK_VL 8
#define GK_VEC __m256
#define GK_VLOAD(p) _mm256_loadu_ps(p)
#define GK_VSTORE(p, v) _mm256_storeu_ps(p, v)
#define GK_VSET1(x) _mm256_set1_ps(x)
#define GK_VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define GK_VMUL(a, b) _mm256_mul_ps(a, b)
#define GK_VADD(a, b) _mm256_add_ps(a, b)
#define GK_MR CANNL_MR
#define GK_NV CANNL_NV
#define GK_KC CANNL_KC
#define GK_MC CANNL_MC
#define GK_NC CANNL_NC
#define GK_TB 8
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose8_f32(s, ls, d, ld)
#define GK_TB2 4
#define GK_TRANSPOSE2(s, ls, d, ld) cannl__transpose4_f32(s, ls, d, ld)
#define GK_VHSUM(v) hsum_f32(v)
#include "gemm_kernel.h"

#define GK_REAL double
#define GK_TAG f64
#define GK_NAME cannl__gemm_avx2_f64
#define GK_VL 4
#define GK_VEC __m256d
#define GK_VLOAD(p) _mm256_loadu_pd(p)
#define GK_VSTORE(p, v) _mm256_storeu_pd(p, v)
#define GK_VSET1(x) _mm256_set1_pd(x)
#define GK_VFMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define GK_VMUL(a, b) _mm256_mul_pd(a, b)
#define GK_VADD(a, b) _mm256_add_pd(a, b)
#define GK_MR 6
#define GK_NV 2
#define GK_KC 256
#define GK_MC 96
#define GK_NC 512
#define GK_TB 4
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose4_f64(s, ls, d, ld)
#define GK_TB2 2
#define GK_TRANSPOSE2(s, ls, d, ld) cannl__transpose2_f64(s, ls, d, ld)
#define GK_VHSUM(v) hsum_f64(v)
#include "gemm_kernel.h"
