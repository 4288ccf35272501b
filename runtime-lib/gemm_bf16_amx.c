/* gemm_bf16_amx.c - the float matrix product in bf16 with fp32 accumulation (gemm_bf16.c's
 * contract) on AMX-BF16 tiles: one tdpbf16ps adds the products of 16 rows of A by 16 columns of
 * B over 32 k (16 pairs) into 16 x 16 fp32 sums, 8192 multiplications where vdpbf16ps does 32.
 *
 *   for each NC-column panel of B
 *     for each K block (K cut into equal blocks of at most KC, each an even length but perhaps
 *     the last)
 *       pack the panel of B as gemm_bf16.c does (gemm_bf16_pack.h: slivers of NR = 32 columns,
 *       rows of 32 pair words), each sliver's rows padded with zeros to a multiple of 16: a
 *       B tile is 16 of its rows by 16 words (64 bytes of each 128-byte row)
 *       for each MC-row block of A
 *         pack it in tiles: for each 16 rows and each 16 pairs of k, 16 rows of 16 words
 *         (A[i, 2q], A[i, 2q + 1]), 1 KiB; rows past the block and pairs past K zero
 *         for each sliver of B, for each 32 rows of the block: four sum tiles (2 x 2 tiles
 *         of 16 x 16) updated by two A tiles and two B tiles per 32 k, then stored in a
 *         buffer and added to C alpha times (or stored in it) while the next block's
 *         tdpbf16ps run
 *
 * KC is 1024, not gemm_bf16.c's 512: a layer's 784 inputs sum in one block, and the adds of a
 * block's sums to C come half as often (one thread, 512 x 512 x 2048, before those adds overlapped
 * the next block: 1985 to 1731 us; shorter K unchanged).
 *
 * The padding is zero in both operands, so it adds +0 to sums: every element of C is summed by
 * the same sequence of tdpbf16ps (32 k each, in k order), in each K block from zero, the K
 * blocks added to C in order, whatever the blocks of M and N the caller hands a thread, so the
 * results do not depend on the thread count (not gemm_bf16.c's bits: other blocks, and it sums
 * two k at a time). Every shape goes through the tiles (a tail of M, N or K is padding), the
 * stores to C masked to the tile's real part.
 * CMakeLists.txt compiles this file alone with -march=x86-64-v4 -mavx512bf16 -mamx-tile
 * -mamx-bf16; gemm.c calls it in a context set to bf16 where amx.c grants AMX-BF16. */
#include "gemm_internal.h"
#include "amx_tile.h"

/* (GCC's names of the AMX macros, then Clang's) */
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_BF16__) || defined(__AMXBF16__)) || \
    !defined(__AVX512BF16__)
#error "gemm_bf16_amx.c is compiled with -mavx512bf16 -mamx-tile -mamx-bf16 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gemm_transpose.h"

#define BF_KC 1024 /* K elements of a block (512 pairs: a b-sliver of 64 KiB) */
#include "gemm_bf16_pack.h" /* NR = 32: two B tiles across */

#define AX_MR 32   /* rows of a block of sum tiles: two A tiles */
#define AX_MC 128  /* rows of a packed block of A */
#define AX_NC 512  /* columns of a packed panel of B */

/* Tiles: sums 0..3 (A tile a = 0, 1 by B tile b = 0, 1 at 2 a + b), A 4 and 5, B 6 and 7; all 16
   rows of 64 bytes. */
static void configure(void) {
    cannl__tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
}

/* A[0:mc, 0:kc] as tiles: pa[((g * chunks + c) * 16 + r) * 16 + w] = pair(A[16 g + r, 32 c + 2 w],
   A[16 g + r, 32 c + 2 w + 1]) for the (mc + 15) / 16 groups of rows g and the chunks of 16 pairs
   c, zero past mc rows and past kc. */
static void pack_a(long mc, long kc, long chunks, const float *restrict A, long a_m, long a_k,
                   uint32_t *restrict pa) {
    const long kc2 = (kc + 1) / 2, groups = (mc + 15) / 16;
    if (a_k == 1) { /* a row's 32 k of a chunk: one vcvtne2ps2bf16 makes its 16 words */
        for (long i = 0; i < 16 * groups; ++i)
            for (long c = 0; c < chunks; ++c) {
                const float *s = A + (i < mc ? i : 0) * a_m + 32 * c;
                const long n = i < mc ? kc - 32 * c : 0;
                const __m512 lo = _mm512_maskz_loadu_ps(lanes(n), s);
                const __m512 hi = _mm512_maskz_loadu_ps(lanes(n - 16), s + 16);
                _mm512_storeu_si512(pa + ((i / 16 * chunks + c) * 16 + i % 16) * 16,
                                    (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            }
    } else if (a_m == 1) { /* 16 rows' words of a pair along a vector, then 16 x 16 transposed */
        for (long g = 0; g < groups; ++g) {
            const __mmask16 m = lanes(mc - 16 * g);
            for (long c = 0; c < chunks; ++c) {
                uint32_t col[16 * 16];
                for (long w = 0; w < 16; ++w) {
                    const long q = 16 * c + w;
                    __m512 lo = _mm512_setzero_ps(), hi = lo;
                    if (q < kc2) lo = _mm512_maskz_loadu_ps(m, A + 16 * g + 2 * q * a_k);
                    if (2 * q + 1 < kc) hi = _mm512_maskz_loadu_ps(m, A + 16 * g + (2 * q + 1) * a_k);
                    _mm512_storeu_si512(col + w * 16, vpair(lo, hi));
                }
                uint32_t *t = pa + (g * chunks + c) * 256;
                for (int r = 0; r < 16; r += 8)
                    for (int w = 0; w < 16; w += 8)
                        cannl__transpose8_f32((const float *)(col + w * 16 + r), 16, (float *)(t + r * 16 + w), 16);
            }
        }
    } else {
        memset(pa, 0, sizeof *pa * (size_t)(groups * chunks * 256));
        for (long i = 0; i < mc; ++i)
            for (long q = 0; q < kc2; ++q) {
                const float *a = A + i * a_m + 2 * q * a_k;
                pa[((i / 16 * chunks + q / 16) * 16 + i % 16) * 16 + q % 16] =
                    pair(a[0], 2 * q + 1 < kc ? a[a_k] : 0.f);
            }
    }
}

/* A block's sums stored from its tiles, to be added to C[0:mr, 0:nr] (c) alpha times. */
typedef struct pending {
    float s[AX_MR * BF_NR] __attribute__((aligned(64)));
    float *c;
    long mr, nr;
    int overwrite;
} pending;

/* C (=|+=) alpha times p's sums. */
static void finish(const pending *p, float alpha, long c_m, long c_n) {
    const __m512 va = _mm512_set1_ps(alpha);
    for (long i = 0; i < p->mr; ++i)
        for (long v = 0; v < p->nr; v += 16) {
            __m512 t = _mm512_load_ps(p->s + i * BF_NR + v);
            if (alpha != 1) t = _mm512_mul_ps(va, t);
            float *o = p->c + i * c_m + v * c_n;
            if (c_n == 1) {
                const __mmask16 m = lanes(p->nr - v);
                _mm512_mask_storeu_ps(o, m, p->overwrite ? t : _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), t));
            } else {
                float u[16];
                _mm512_storeu_ps(u, t);
                for (long j = 0; j < 16 && v + j < p->nr; ++j) o[j * c_n] = p->overwrite ? u[j] : o[j * c_n] + u[j];
            }
        }
}

/* The sums of mr (1 to 32) rows of packed A (the tiles at a, chunks apart per 16 rows) by nr (1 to
   32) columns of a sliver of B (b), over `chunks` chunks of 32 k, stored into next for C[0:mr,
   0:nr] (c). TWO_A and TWO_B (constants where inlined): mr, nr above 16. The previous block's
   sums (prev, if any) are added to C while the tdpbf16ps run: added right after the tiles'
   stores, their reloads waited for them (one thread, 512 x 384 x 512 +=: 405 to 296 us), and
   the tiles stored straight into C were slower still where C is large (4096 x 384 x 128 =:
   1000 to 760 us). */
static inline __attribute__((always_inline)) void block(const int two_a, const int two_b, long chunks,
                                                        const uint32_t *a, const uint32_t *b, float alpha,
                                                        float *c, long c_m, long c_n, long mr, long nr,
                                                        int overwrite, const pending *prev, pending *next) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long k = 0; k < chunks; ++k) {
        _tile_loadd(4, a + k * 256, 64);
        _tile_loadd(6, b + k * 16 * BF_NR, BF_NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        if (two_b) {
            _tile_loadd(7, b + k * 16 * BF_NR + 16, BF_NR * 4);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (two_a) {
            _tile_loadd(5, a + (chunks + k) * 256, 64);
            _tile_dpbf16ps(2, 5, 6);
            if (two_b) _tile_dpbf16ps(3, 5, 7);
        }
    }
    if (prev) finish(prev, alpha, c_m, c_n);
    next->c = c, next->mr = mr, next->nr = nr, next->overwrite = overwrite;
    _tile_stored(0, next->s, BF_NR * 4);
    if (two_b) _tile_stored(1, next->s + 16, BF_NR * 4);
    if (two_a) _tile_stored(2, next->s + 16 * BF_NR, BF_NR * 4);
    if (two_a && two_b) _tile_stored(3, next->s + 16 * BF_NR + 16, BF_NR * 4);
}

static void run(long M, long N, long K, double alpha_d, const void *A_, long a_m, long a_k, const void *B_, long b_k,
                long b_n, void *C_, long c_m, long c_n, int overwrite, void *slot) {
    const float *A = (const float *)A_, *B = (const float *)B_;
    float *C = (float *)C_;
    const float alpha = (float)alpha_d;
    uint32_t *pa = (uint32_t *)slot, *pb = pa + (long)AX_MC * (BF_KC / 2);
    if (K == 0) {
        if (overwrite)
            for (long i = 0; i < M; ++i)
                for (long j = 0; j < N; ++j) C[i * c_m + j * c_n] = 0;
        return;
    }
    configure();
    pending q[2]; /* the sums of a block waiting for C, and of the next */
    int cur = 0, waiting = 0;
    const long kblocks = (K + BF_KC - 1) / BF_KC;
    const long kb = ((K + kblocks - 1) / kblocks + 1) / 2 * 2;
    for (long j0 = 0; j0 < N; j0 += AX_NC) {
        const long nc = N - j0 < AX_NC ? N - j0 : AX_NC;
        for (long p0 = 0; p0 < K; p0 += kb) {
            const long kc = K - p0 < kb ? K - p0 : kb, chunks = (kc + 31) / 32, kp = 16 * chunks;
            pack_b(kc, kp, nc, B + p0 * b_k + j0 * b_n, b_k, b_n, pb);
            for (long i0 = 0; i0 < M; i0 += AX_MC) {
                const long mc = M - i0 < AX_MC ? M - i0 : AX_MC;
                pack_a(mc, kc, chunks, A + i0 * a_m + p0 * a_k, a_m, a_k, pa);
                for (long jr = 0; jr < nc; jr += BF_NR)
                    for (long ir = 0; ir < mc; ir += AX_MR) {
                        const long mr = mc - ir < AX_MR ? mc - ir : AX_MR, nr = nc - jr < BF_NR ? nc - jr : BF_NR;
                        const uint32_t *a = pa + ir / 16 * chunks * 256, *b = pb + jr * kp;
                        float *c = C + (i0 + ir) * c_m + (j0 + jr) * c_n;
                        const int ow = overwrite && p0 == 0;
                        const pending *prev = waiting ? &q[cur ^ 1] : NULL;
                        if (mr > 16 && nr > 16)
                            block(1, 1, chunks, a, b, alpha, c, c_m, c_n, mr, nr, ow, prev, &q[cur]);
                        else if (mr > 16)
                            block(1, 0, chunks, a, b, alpha, c, c_m, c_n, mr, nr, ow, prev, &q[cur]);
                        else if (nr > 16)
                            block(0, 1, chunks, a, b, alpha, c, c_m, c_n, mr, nr, ow, prev, &q[cur]);
                        else
                            block(0, 0, chunks, a, b, alpha, c, c_m, c_n, mr, nr, ow, prev, &q[cur]);
                        waiting = 1, cur ^= 1;
                    }
            }
        }
    }
    if (waiting) finish(&q[cur ^ 1], alpha, c_m, c_n);
    _tile_release();
}

/* No dot-product form: gemm.c hands cannl_sgemm_dot's products to run. The workspace: a packed
   block of A (MC x KC/2 words) and a packed panel of B (KC/2 x NC words). */
const cannl__gemm_kernel cannl__gemm_amxbf16_f32 = {AX_MR, BF_NR, BF_KC, AX_MC, AX_NC, run, NULL};
