/* gemm_base.c - the matrix-product kernels every CPU runs: SSE2 on x86-64 (its baseline; no
 * FMA, so a product is rounded before it is added), portable C elsewhere. */
#include "gemm_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>

#include "gemm_transpose.h"
#endif

/* Tile sizes (docs/gemm-tiles.md; bench/tile_search.sh overrides the float ones through -D). */
#ifndef CANNL_MR
#define CANNL_MR 3
#endif
#ifndef CANNL_NV
#define CANNL_NV 4
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

#if defined(__SSE2__)
#define GK_REAL float
#define GK_TAG f32
#define GK_NAME cannl__gemm_base_f32
#define GK_VL 4
#define GK_VEC __m128
#define GK_VLOAD(p) _mm_loadu_ps(p)
#define GK_VSTORE(p, v) _mm_storeu_ps(p, v)
#define GK_VSET1(x) _mm_set1_ps(x)
#define GK_VFMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define GK_VMUL(a, b) _mm_mul_ps(a, b)
#define GK_VADD(a, b) _mm_add_ps(a, b)
#define GK_MR CANNL_MR
#define GK_NV CANNL_NV
#define GK_KC CANNL_KC
#define GK_MC CANNL_MC
#define GK_NC CANNL_NC
#define GK_TB 4
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose4_f32(s, ls, d, ld)
#include "gemm_kernel.h"

#define GK_REAL double
#define GK_TAG f64
#define GK_NAME cannl__gemm_base_f64
#define GK_VL 2
#define GK_VEC __m128d
#define GK_VLOAD(p) _mm_loadu_pd(p)
#define GK_VSTORE(p, v) _mm_storeu_pd(p, v)
#define GK_VSET1(x) _mm_set1_pd(x)
#define GK_VFMA(a, b, c) _mm_add_pd(_mm_mul_pd(a, b), c)
#define GK_VMUL(a, b) _mm_mul_pd(a, b)
#define GK_VADD(a, b) _mm_add_pd(a, b)
#define GK_MR 4
#define GK_NV 2
#define GK_KC 256
#define GK_MC 64
#define GK_NC 512
#define GK_TB 2
#define GK_TRANSPOSE(s, ls, d, ld) cannl__transpose2_f64(s, ls, d, ld)
#include "gemm_kernel.h"

#else /* portable C: "vectors" of one element, unrolled by the compiler */
#define GK_REAL float
#define GK_TAG f32
#define GK_NAME cannl__gemm_base_f32
#define GK_VL 1
#define GK_VEC float
#define GK_VLOAD(p) (*(p))
#define GK_VSTORE(p, v) (*(p) = (v))
#define GK_VSET1(x) (x)
#define GK_VFMA(a, b, c) ((a) * (b) + (c))
#define GK_VMUL(a, b) ((a) * (b))
#define GK_VADD(a, b) ((a) + (b))
#define GK_MR 4
#define GK_NV 8
#define GK_KC 256
#define GK_MC 64
#define GK_NC 512
#include "gemm_kernel.h"

#define GK_REAL double
#define GK_TAG f64
#define GK_NAME cannl__gemm_base_f64
#define GK_VL 1
#define GK_VEC double
#define GK_VLOAD(p) (*(p))
#define GK_VSTORE(p, v) (*(p) = (v))
#define GK_VSET1(x) (x)
#define GK_VFMA(a, b, c) ((a) * (b) + (c))
#define GK_VMUL(a, b) ((a) * (b))
#define GK_VADD(a, b) ((a) + (b))
#define GK_MR 4
#define GK_NV 4
#define GK_KC 256
#define GK_MC 64
#define GK_NC 512
#include "gemm_kernel.h"
#endif
