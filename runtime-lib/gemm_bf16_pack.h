/* gemm_bf16_pack.h - the packing the bf16 products share (gemm_bf16.c on AVX512_BF16,
 * gemm_bf16_amx.c on AMX-BF16 tiles): float operands rounded to bf16 (to nearest, ties to even)
 * and paired along K in 32-bit words, pair(lo, hi) = lo's bf16 in the low half, hi's in the
 * high; B packed into slivers of NR columns, rows of NR words (B[2q, j], B[2q + 1, j]), the
 * layout of vdpbf16ps's register tiles and of AMX's B tiles. Static functions, included by
 * files compiled with -march=x86-64-v4 -mavx512bf16 after <immintrin.h>, <stdint.h>,
 * <string.h> and gemm_transpose.h; not installed. */
#ifndef CANNL_GEMM_BF16_PACK_H
#define CANNL_GEMM_BF16_PACK_H

#ifndef BF_NV
#define BF_NV 2             /* vectors of a packed row of B */
#endif
#define BF_NR (BF_NV * 16)  /* columns of a sliver of B */
#ifndef BF_KC
#define BF_KC 512           /* K elements of a block (256 pairs: a b-sliver of 32 KiB, L1's size on Zen 4) */
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BF_UNROLL _Pragma("GCC unroll 16")
#else
#define BF_UNROLL
#endif

/* The bits of x rounded to bf16 in their upper half (to nearest, ties to even; a NaN stays a
 * quiet NaN), as vcvtne2ps2bf16 rounds (which reads a subnormal as zero; vdpbf16ps reads
 * subnormal operands as zero either way) and tests/runtime/test_gemm_bf16.c rounds its
 * reference's operands: for the scalar ends of rows. */
static inline uint32_t round_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return u | 0x00400000u;
    return u + 0x7FFFu + ((u >> 16) & 1u);
}

/* The 32-bit word of a pair: lo's bf16 in the low half, hi's in the high half. */
static inline uint32_t pair(float lo, float hi) { return (round_bits(lo) >> 16) | (round_bits(hi) & 0xFFFF0000u); }

/* 16 words pair(lo[l], hi[l]): both rounded by one vcvtne2ps2bf16 (lo's in the low 16 halves,
 * hi's in the high), then interleaved. */
static inline __m512i vpair(__m512 lo, __m512 hi) {
    static const short interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                         8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* dst[q] = pair(src[2q], src[2q + 1]) for q < (kc + 1) / 2, src[kc] read as 0 when kc is odd:
 * a row of an operand whose K axis is contiguous. 32 floats at a time give 16 words, their
 * bf16 in order: one vcvtne2ps2bf16. */
static void pack_kline(long kc, const float *restrict src, uint32_t *restrict dst) {
    long q = 0;
    for (; 2 * q + 32 <= kc; q += 16)
        _mm512_storeu_si512(dst + q, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 2 * q + 16),
                                                                   _mm512_loadu_ps(src + 2 * q)));
    for (; 2 * q < kc; ++q) dst[q] = pair(src[2 * q], 2 * q + 1 < kc ? src[2 * q + 1] : 0.f);
}

/* dst[q * ld + j] = pair(src[j * ls + 2q], src[j * ls + 2q + 1]) for j < n (at most 8) and
 * q < (kc + 1) / 2 (kc at most KC): n rows of an operand whose K axis is contiguous, each made
 * into words along K first, then 8 rows at a time transposed by 8 x 8 blocks of words. */
static void pack_krows(long n, long kc, const float *restrict src, long ls, uint32_t *restrict dst, long ld) {
    uint32_t rows[8 * (BF_KC / 2)];
    const long kc2 = (kc + 1) / 2;
    for (long j = 0; j < n; ++j) pack_kline(kc, src + j * ls, rows + j * kc2);
    long q = 0;
    if (n == 8)
        for (; q + 8 <= kc2; q += 8) cannl__transpose8_f32((const float *)(rows + q), kc2, (float *)(dst + q * ld), ld);
    for (; q < kc2; ++q)
        for (long j = 0; j < n; ++j) dst[q * ld + j] = rows[j * kc2 + q];
}

/* The lanes below n (0 to 16). */
static inline __mmask16 lanes(long n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* B[0:kc, 0:nc] as slivers of NR columns, each kp rows of NR words ((kc + 1) / 2 rows of B's pairs,
   then rows of zeros), zero-padded past nc. */
static void pack_b(long kc, long kp, long nc, const float *restrict B, long b_k, long b_n, uint32_t *restrict pb) {
    const long kc2 = (kc + 1) / 2;
    for (long j0 = 0; j0 < nc; j0 += BF_NR, pb += kp * BF_NR) {
        for (long t = kc2 * BF_NR; t < kp * BF_NR; ++t) pb[t] = 0;
        const long nr = nc - j0 < BF_NR ? nc - j0 : BF_NR;
        if (b_n == 1) {
            for (long q = 0; q < kc2; ++q) {
                const float *r0 = B + 2 * q * b_k + j0;
                BF_UNROLL for (int v = 0; v < BF_NV; ++v) {
                    const __mmask16 m = lanes(nr - 16 * v);
                    const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + 16 * v);
                    const __m512 hi =
                        2 * q + 1 < kc ? _mm512_maskz_loadu_ps(m, r0 + b_k + 16 * v) : _mm512_setzero_ps();
                    _mm512_storeu_si512(pb + q * BF_NR + 16 * v, vpair(lo, hi));
                }
            }
            continue;
        }
        if (nr < BF_NR)
            for (long t = 0; t < kc2 * BF_NR; ++t) pb[t] = 0;
        if (b_k == 1) {
            for (long j = 0; j < nr; j += 8)
                pack_krows(nr - j < 8 ? nr - j : 8, kc, B + (j0 + j) * b_n, b_n, pb + j, BF_NR);
        } else {
            for (long q = 0; q < kc2; ++q)
                for (long j = 0; j < nr; ++j) {
                    const float *b = B + 2 * q * b_k + (j0 + j) * b_n;
                    pb[q * BF_NR + j] = pair(b[0], 2 * q + 1 < kc ? b[b_k] : 0.f);
                }
        }
    }
}

#endif /* CANNL_GEMM_BF16_PACK_H */
