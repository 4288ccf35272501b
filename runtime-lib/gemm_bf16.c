/* gemm_bf16.c - the float matrix product in bf16 with fp32 accumulation, for models generated
 * with `cannl gen --precision bf16` (docs/cuda.md, "Precision": the CUDA target's contract,
 * on the CPU). A and B are rounded to bf16 (to nearest, ties to even) while they are packed,
 * pairs of them along K are multiplied and summed into fp32 accumulators by AVX512_BF16's
 * vdpbf16ps (32 products per instruction, twice the fp32 FMA's), and C stays fp32.
 * CMakeLists.txt compiles this file alone with -march=x86-64-v4 -mavx512bf16; gemm.c
 * calls it only in a context set to bf16 (cannl_gemm_set_precision) on a CPU that has
 * AVX512_BF16 and no AMX-BF16 granted (else gemm_bf16_amx.c, the same contract on AMX tiles).
 *
 *   for each NC-column panel of B
 *     for each K block (K cut into equal blocks of at most KC, each an even length but
 *     perhaps the last)
 *       pack the kc x NC panel of B into slivers of NR columns: kc/2 rows of NR 32-bit
 *       words, word j of row q the pair (B[2q, j], B[2q + 1, j]) in bf16 (low half first;
 *       an odd kc's last pair ends in a zero; gemm_bf16_pack.h)
 *       for each MC-row block of A
 *         pack it into slivers of at most MR rows: kc/2 rows of `height` words (A[i, 2q],
 *         A[i, 2q + 1])
 *         for each NR sliver, for each row sliver: a register tile of C updated by kc/2
 *         vdpbf16ps steps, then added to (or stored in) C
 *
 * KC is 512, not the fp32 kernel's 256: a product with K of 257 to 512 (a layer's 512 inputs, a
 * head's 384) then sums in one block instead of adding a second block's sums to C, and its
 * tiles run twice as many vdpbf16ps per load and store of C (one thread, Zen 4, CPU time:
 * 1024 x 128 x 512 from 755 to 681 us, 1024 x 128 x 384 from 535 to 508, shorter and longer K
 * unchanged within the noise).
 *
 * Every element of C is summed in the same order whatever the blocks of M and N a caller
 * hands a thread (the K blocks in order, each from zero, then added to C), so the results do
 * not depend on the thread count. */
#include "gemm_internal.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512BF16__)
#error "gemm_bf16.c is compiled with -march=x86-64-v4 -mavx512bf16 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gemm_transpose.h"

#ifndef BF_MR
#define BF_MR 8             /* rows of a register tile (at most 12) */
#endif
#ifndef BF_MC
#define BF_MC 128
#endif
#define BF_NC 512

#if defined(__GNUC__) || defined(__clang__)
#define BF_INLINE static inline __attribute__((always_inline))
#else
#define BF_INLINE static inline
#endif

#include "gemm_bf16_pack.h" /* register tiles of MR rows x its NR columns */

/* A[0:mc, 0:kc] as row slivers of at most MR rows, each (kc + 1) / 2 rows of its height in words. */
static void pack_a(long mc, long kc, const float *restrict A, long a_m, long a_k, uint32_t *restrict pa) {
    const long kc2 = (kc + 1) / 2;
    long i0 = 0;
    if (a_m == 1 && BF_MR == 8) /* two whole slivers at a time: a vector of 16 words, 8 for each */
        for (; i0 + 16 <= mc; i0 += 16, pa += kc2 * 16)
            for (long q = 0; q < kc2; ++q) {
                const float *r0 = A + i0 + 2 * q * a_k;
                const __m512 hi = 2 * q + 1 < kc ? _mm512_loadu_ps(r0 + a_k) : _mm512_setzero_ps();
                const __m512i w = vpair(_mm512_loadu_ps(r0), hi);
                _mm256_storeu_si256((__m256i *)(pa + q * 8), _mm512_castsi512_si256(w));
                _mm256_storeu_si256((__m256i *)(pa + kc2 * 8 + q * 8), _mm512_extracti64x4_epi64(w, 1));
            }
    for (; i0 < mc; i0 += BF_MR, pa += kc2 * BF_MR) {
        const long mr = mc - i0 < BF_MR ? mc - i0 : BF_MR;
        if (a_m == 1) { /* A's rows contiguous: two rows of A^T make a row of words */
            const __mmask16 m = lanes(mr);
            for (long q = 0; q < kc2; ++q) {
                const float *r0 = A + i0 + 2 * q * a_k;
                const __m512 lo = _mm512_maskz_loadu_ps(m, r0);
                const __m512 hi = 2 * q + 1 < kc ? _mm512_maskz_loadu_ps(m, r0 + a_k) : _mm512_setzero_ps();
                _mm512_mask_storeu_epi32(pa + q * mr, m, vpair(lo, hi));
            }
        } else if (a_k == 1) {
            for (long i = 0; i < mr; i += 8)
                pack_krows(mr - i < 8 ? mr - i : 8, kc, A + (i0 + i) * a_m, a_m, pa + i, mr);
        } else {
            for (long q = 0; q < kc2; ++q)
                for (long i = 0; i < mr; ++i) {
                    const float *a = A + (i0 + i) * a_m + 2 * q * a_k;
                    pa[q * mr + i] = pair(a[0], 2 * q + 1 < kc ? a[a_k] : 0.f);
                }
        }
    }
}

/* C[0:R, 0:nr] (=|+=) alpha * an a-sliver (kc2 x R words) * a b-sliver (kc2 x NR words). */
BF_INLINE void tile(const int R, long kc2, const uint32_t *restrict a, const uint32_t *restrict b, float alpha,
                    float *restrict c, long c_m, long c_n, long nr, int overwrite) {
    __m512 acc[BF_MR][BF_NV];
    BF_UNROLL for (int i = 0; i < R; ++i) BF_UNROLL for (int v = 0; v < BF_NV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (long q = 0; q < kc2; ++q) {
        __m512bh bv[BF_NV];
        BF_UNROLL for (int v = 0; v < BF_NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + q * BF_NR + 16 * v);
        BF_UNROLL for (int i = 0; i < R; ++i) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[q * R + i]);
            BF_UNROLL for (int v = 0; v < BF_NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
        }
    }
    if (alpha != 1) {
        const __m512 va = _mm512_set1_ps(alpha);
        BF_UNROLL for (int i = 0; i < R; ++i) BF_UNROLL for (int v = 0; v < BF_NV; ++v) acc[i][v] =
            _mm512_mul_ps(va, acc[i][v]);
    }
    if (nr == BF_NR && c_n == 1) { /* whole rows: vector stores */
        BF_UNROLL for (int i = 0; i < R; ++i) BF_UNROLL for (int v = 0; v < BF_NV; ++v) {
            float *cv = c + i * c_m + 16 * v;
            _mm512_storeu_ps(cv, overwrite ? acc[i][v] : _mm512_add_ps(_mm512_loadu_ps(cv), acc[i][v]));
        }
        return;
    }
    float t[BF_MR * BF_NR];
    BF_UNROLL for (int i = 0; i < R; ++i) BF_UNROLL for (int v = 0; v < BF_NV; ++v)
        _mm512_storeu_ps(t + i * BF_NR + 16 * v, acc[i][v]);
    for (int i = 0; i < R; ++i)
        for (long j = 0; j < nr; ++j) {
            float *cij = c + i * c_m + j * c_n;
            *cij = overwrite ? t[i * BF_NR + j] : *cij + t[i * BF_NR + j];
        }
}

/* The tile of mr rows (1 to MR), each with constant loop bounds. */
static void micro(long mr, long kc2, const uint32_t *a, const uint32_t *b, float alpha, float *c, long c_m, long c_n,
                  long nr, int overwrite) {
    switch (mr) {
#define BF_CASE(r) \
    case r: tile(r < BF_MR ? r : BF_MR, kc2, a, b, alpha, c, c_m, c_n, nr, overwrite); break;
        BF_CASE(1) BF_CASE(2) BF_CASE(3) BF_CASE(4) BF_CASE(5) BF_CASE(6) BF_CASE(7) BF_CASE(8) BF_CASE(9)
        BF_CASE(10) BF_CASE(11)
#undef BF_CASE
        default: tile(BF_MR, kc2, a, b, alpha, c, c_m, c_n, nr, overwrite); break;
    }
}

static void run(long M, long N, long K, double alpha_d, const void *A_, long a_m, long a_k, const void *B_, long b_k,
                long b_n, void *C_, long c_m, long c_n, int overwrite, void *slot) {
    const float *A = (const float *)A_, *B = (const float *)B_;
    float *C = (float *)C_;
    const float alpha = (float)alpha_d;
    uint32_t *pa = (uint32_t *)slot, *pb = pa + (long)BF_MC * (BF_KC / 2);
    if (K == 0) {
        if (overwrite)
            for (long i = 0; i < M; ++i)
                for (long j = 0; j < N; ++j) C[i * c_m + j * c_n] = 0;
        return;
    }
    const long kblocks = (K + BF_KC - 1) / BF_KC;
    const long kb = ((K + kblocks - 1) / kblocks + 1) / 2 * 2; /* even: only the last block pads a zero */
    for (long j0 = 0; j0 < N; j0 += BF_NC) {
        const long nc = N - j0 < BF_NC ? N - j0 : BF_NC;
        for (long p0 = 0; p0 < K; p0 += kb) {
            const long kc = K - p0 < kb ? K - p0 : kb, kc2 = (kc + 1) / 2;
            pack_b(kc, kc2, nc, B + p0 * b_k + j0 * b_n, b_k, b_n, pb);
            for (long i0 = 0; i0 < M; i0 += BF_MC) {
                const long mc = M - i0 < BF_MC ? M - i0 : BF_MC;
                pack_a(mc, kc, A + i0 * a_m + p0 * a_k, a_m, a_k, pa);
                for (long jr = 0; jr < nc; jr += BF_NR)
                    for (long ir = 0; ir < mc; ir += BF_MR) {
                        const long mr = mc - ir < BF_MR ? mc - ir : BF_MR;
                        micro(mr, kc2, pa + ir * kc2, pb + jr * kc2, alpha, C + (i0 + ir) * c_m + (j0 + jr) * c_n, c_m,
                              c_n, nc - jr < BF_NR ? nc - jr : BF_NR, overwrite && p0 == 0);
                    }
            }
        }
    }
}

/* No dot-product form: gemm.c hands cannl_sgemm_dot's products to run. The workspace: a packed
   block of A (MC x KC/2 words) and a packed panel of B (KC/2 x NC words). */
const cannl__gemm_kernel cannl__gemm_avx512bf16_f32 = {BF_MR, BF_NR, BF_KC, BF_MC, BF_NC, run, NULL};
