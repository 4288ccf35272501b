/* gemm_transpose.h - small square transposes with vector shuffles, d[p * ld + j] =
 * s[j * ls + p], for packing operands whose K axis is contiguous (gemm_kernel.h's
 * GK_TRANSPOSE); not installed. Included by the kernels' files after <immintrin.h> or
 * <emmintrin.h>: the AVX versions need a file compiled for AVX. */
#ifndef CANNL_GEMM_TRANSPOSE_H
#define CANNL_GEMM_TRANSPOSE_H

#if defined(__AVX__)
/* 8 x 8 floats. */
static inline void cannl__transpose8_f32(const float *s, long ls, float *d, long ld) {
    const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls),
                 r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls),
                 r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* 4 x 4 doubles. */
static inline void cannl__transpose4_f64(const double *s, long ls, double *d, long ld) {
    const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + ls), r2 = _mm256_loadu_pd(s + 2 * ls),
                  r3 = _mm256_loadu_pd(s + 3 * ls);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
                  t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ld, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ld, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ld, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#endif

#if defined(__SSE2__)
/* 4 x 4 floats. */
static inline void cannl__transpose4_f32(const float *s, long ls, float *d, long ld) {
    __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + ls), r2 = _mm_loadu_ps(s + 2 * ls), r3 = _mm_loadu_ps(s + 3 * ls);
    const __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpackhi_ps(r0, r1), t2 = _mm_unpacklo_ps(r2, r3),
                 t3 = _mm_unpackhi_ps(r2, r3);
    _mm_storeu_ps(d, _mm_movelh_ps(t0, t2));
    _mm_storeu_ps(d + ld, _mm_movehl_ps(t2, t0));
    _mm_storeu_ps(d + 2 * ld, _mm_movelh_ps(t1, t3));
    _mm_storeu_ps(d + 3 * ld, _mm_movehl_ps(t3, t1));
}

/* 2 x 2 doubles. */
static inline void cannl__transpose2_f64(const double *s, long ls, double *d, long ld) {
    const __m128d r0 = _mm_loadu_pd(s), r1 = _mm_loadu_pd(s + ls);
    _mm_storeu_pd(d, _mm_unpacklo_pd(r0, r1));
    _mm_storeu_pd(d + ld, _mm_unpackhi_pd(r0, r1));
}
#endif

#endif /* CANNL_GEMM_TRANSPOSE_H */
