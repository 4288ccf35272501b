/* gemm_kernel.h - one thread's blocked matrix product, C (=|+=) alpha A B, BLIS/GotoBLAS
 * style; not installed. Included once per instruction set and element type (gemm_base.c,
 * gemm_avx2.c, gemm_avx512.c), after defining
 *   GK_REAL                      float or double
 *   GK_TAG                       a suffix for this inclusion's functions (f32, f64)
 *   GK_NAME                      the cannl__gemm_kernel table to define
 *   GK_VL                        lanes of a vector (1: scalar C)
 *   GK_VEC, GK_VLOAD(p), GK_VSTORE(p, v), GK_VSET1(x), GK_VFMA(a, b, c) = a b + c,
 *   GK_VMUL(a, b), GK_VADD(a, b) the vector type and its operations (unaligned loads/stores)
 *   GK_VSTREAM(p, v), GK_SFENCE()  optional: a 64-byte aligned store that bypasses the caches,
 *                                and the fence that orders such stores before the product returns
 *   GK_MR, GK_NV                 the register tile: MR rows x NV vectors (NR = NV VL columns)
 *   GK_MR1                       optional: a block of at most MR1 rows is one sliver (MR1 > MR)
 *   GK_KC, GK_MC, GK_NC          the cache blocks (docs/gemm-tiles.md)
 *   GK_TB, GK_TRANSPOSE(s, ls, d, ld)  optional: a TB x TB block transposed with vector
 *                                shuffles, d[p * ld + j] = s[j * ls + p] (p, j < TB), for the
 *                                packing of operands whose K axis is contiguous
 *   GK_TB2, GK_TRANSPOSE2        optional: the same for smaller blocks, for the rows left over
 * (all undefined again at the end of this file)
 *
 *   for each NC-column panel of B
 *     for each K block (K cut into equal blocks of at most KC: 784 = 4 x 196)
 *       pack the kc x NC panel of B into slivers of NR columns (kc x NR, row-major; a
 *       row-major B is read in place instead when A has at most two slivers of rows, or
 *       when A is read in place and B's rows are close together)
 *       for each MC-row block of A
 *         pack the MC x kc block of A into slivers of at most MR rows, as equal as
 *         possible (kc x height, row-major: 10 = 5 + 5 for MR 8; A is read in place instead
 *         when B has at most GK_DIRECT_A_COLS columns)
 *         for each NR sliver, for each row sliver: a register tile of C (its rows x NR)
 *         updated by kc rank-1 products, then added to (or stored in) C
 * When A is read in place and the whole K x NC panel of B (packed or not) fits the workspace's B
 * part, its packed blocks are all packed first and the K loop goes innermost (row sliver, K
 * block, NR sliver): the same blocks, C's tile kept in L1 between them.
 * Operands whose K axis is contiguous are packed with vector transposes (GK_TRANSPOSE).
 * A K block shorter than GK_SHORT_K takes the row slivers outermost (the tiles then store along
 * C's rows), and a K that short reads a row-major B in place. A product of one row packs
 * GK_ROW_SLIVERS slivers of B at a time, just before the one-row tile that reads them (each
 * sliver is used once).
 *
 * A sliver of at most NR / 2 columns is computed by a half tile (NV / 2 vectors, the same sums),
 * and a short K overwriting a large, aligned C stores it with GK_VSTREAM where defined.
 *
 * Every element of C is summed in the same order whatever the blocks of M and N a caller
 * hands a thread: the K blocks in order, each summed by p (from the first product), then
 * added to C. */

#include <stdint.h>
#include <string.h>

#ifndef GK_MR1
#define GK_MR1 GK_MR
#endif

#define GK_CAT_(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT_(a, b)
#define GK_FN(name) GK_CAT(name, GK_TAG)
#define GK_NR (GK_NV * GK_VL)
#define GK_SHORT_K 32 /* K (blocks) shorter than this: C not prefetched, B read in place, rows outermost */
#define GK_DIRECT_A_COLS 64 /* products of at most this many columns read A in place */

/* Loops over the rows and vectors of a tile are unrolled before the compiler decides what
 * stays in registers: the accumulators then never touch memory. */
#if defined(__GNUC__) || defined(__clang__)
#define GK_UNROLL _Pragma("GCC unroll 32")
#define GK_PREFETCH(p) __builtin_prefetch(p, 1, 3)
#define GK_PREFETCH_R(p) __builtin_prefetch(p, 0, 3)
#else
#define GK_UNROLL
#define GK_PREFETCH(p) ((void)(p))
#define GK_PREFETCH_R(p) ((void)(p))
#endif
#ifndef GK_A_AHEAD
#define GK_A_AHEAD 24
#endif

/* The register tiles of 1 to max(MR, MR1) rows, each function's loops of constant bounds
 * (kept in registers): A packed, and A read in place. */
#define GK_TMR (GK_MR1 > GK_MR ? GK_MR1 : GK_MR)
#define GK_HALF 0
#define GK_STRIDED_A 0
#include "gemm_tiles.h"
#undef GK_STRIDED_A
#define GK_STRIDED_A 1
#include "gemm_tiles.h"
#undef GK_STRIDED_A
#undef GK_HALF
/* The half tiles (NV / 2 vectors) for a sliver of at most NR / 2 columns: the last of N (N = 16
 * output channels against NR = 32 on AVX-512, or 144 = 4 x 32 + 16) would otherwise spend half
 * of its FMAs on zero padding and store through a buffer. */
#define GK_HALF_TILES (GK_NV % 2 == 0)
#if GK_HALF_TILES
#define GK_HALF 1
#define GK_STRIDED_A 0
#include "gemm_tiles.h"
#undef GK_STRIDED_A
#define GK_STRIDED_A 1
#include "gemm_tiles.h"
#undef GK_STRIDED_A
#undef GK_HALF
#endif
#undef GK_TMR

/* C[0:mr, 0:nr] (=|+=) alpha * mr rows of A (an a-sliver: kc x mr, row-major; or, with
 * `strided`, A in place: A[i, p] at a[i * ars + p * aks]) * a b-sliver (kc x NR, rows ldb
 * apart), by the tile of mr rows: a half tile when nr <= NR / 2 (the same sums). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline)) /* in run's loops, as before the half tiles: a short K's tiles are mostly call */
#endif
static inline void GK_FN(micro)(long kc, const GK_REAL *restrict a, int strided, long ars, long aks,
                                const GK_REAL *restrict b, long ldb, GK_REAL alpha, GK_REAL *restrict c, long c_m,
                                long c_n, long mr, long nr, int overwrite) {
#if GK_HALF_TILES
    if (nr <= GK_NR / 2) {
        if (strided)
            GK_FN(htiles)(mr, kc, a, ars, aks, b, ldb, alpha, c, c_m, c_n, nr, overwrite);
        else
            GK_FN(htile)(mr, kc, a, ars, aks, b, ldb, alpha, c, c_m, c_n, nr, overwrite);
        return;
    }
#endif
    if (strided)
        GK_FN(tiles)(mr, kc, a, ars, aks, b, ldb, alpha, c, c_m, c_n, nr, overwrite);
    else
        GK_FN(tile)(mr, kc, a, ars, aks, b, ldb, alpha, c, c_m, c_n, nr, overwrite);
}

/* C[0, 0:nr] (=|+=) alpha * one row of A (a[p * aks]) * GK_ROW_SLIVERS packed b-slivers one
 * after another (kc x NR each), nr <= GK_ROW_SLIVERS NR: the tile of a single row of C (one
 * position decoded), as wide as that many slivers so that enough accumulators are in flight
 * to hide the FMA's latency (tile 1 has NV). Each element's sum is tile 1's. */
#define GK_ROW_SLIVERS 4
static void GK_FN(row_tile)(long kc, const GK_REAL *restrict a, long aks, const GK_REAL *restrict b, GK_REAL alpha,
                            GK_REAL *restrict c, long c_n, long nr, int overwrite) {
    GK_VEC acc[GK_ROW_SLIVERS][GK_NV];
    {
        const GK_VEC ai = GK_VSET1(a[0]);
        GK_UNROLL for (int s = 0; s < GK_ROW_SLIVERS; ++s)
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) acc[s][v] = GK_VMUL(ai, GK_VLOAD(b + s * kc * GK_NR + v * GK_VL));
    }
    for (long p = 1; p < kc; ++p) {
        const GK_VEC ai = GK_VSET1(a[p * aks]);
        GK_UNROLL for (int s = 0; s < GK_ROW_SLIVERS; ++s)
            GK_UNROLL for (int v = 0; v < GK_NV; ++v)
                acc[s][v] = GK_VFMA(ai, GK_VLOAD(b + s * kc * GK_NR + p * GK_NR + v * GK_VL), acc[s][v]);
    }
    if (alpha != 1) {
        const GK_VEC va = GK_VSET1(alpha);
        GK_UNROLL for (int s = 0; s < GK_ROW_SLIVERS; ++s)
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) acc[s][v] = GK_VMUL(va, acc[s][v]);
    }
    if (nr == GK_ROW_SLIVERS * GK_NR && c_n == 1) {
        GK_UNROLL for (int s = 0; s < GK_ROW_SLIVERS; ++s)
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) {
                GK_REAL *cv = c + s * GK_NR + v * GK_VL;
                GK_VSTORE(cv, overwrite ? acc[s][v] : GK_VADD(GK_VLOAD(cv), acc[s][v]));
            }
        return;
    }
    GK_REAL t[GK_ROW_SLIVERS * GK_NR];
    GK_UNROLL for (int s = 0; s < GK_ROW_SLIVERS; ++s)
        GK_UNROLL for (int v = 0; v < GK_NV; ++v) GK_VSTORE(t + s * GK_NR + v * GK_VL, acc[s][v]);
    for (long j = 0; j < nr; ++j) c[j * c_n] = overwrite ? t[j] : c[j * c_n] + t[j];
}

/* The number of row slivers of a block of mc rows, and the height of the one that starts at
 * row i: one sliver when mc <= MR1 (10 classes for MR1 12: each sliver of B is then read
 * once, not twice), else the fewest slivers of at most MR rows, as equal as possible (128 =
 * 18 x 6 + 4 x 5 for MR 6: taller tiles keep more of the FMA units busy than a short last
 * one). */
static inline long GK_FN(slivers)(long mc) { return mc <= GK_MR1 ? 1 : (mc + GK_MR - 1) / GK_MR; }
static inline long GK_FN(sliver)(long mc, long i) {
    const long n = GK_FN(slivers)(mc), q = mc / n, r = mc % n;
    return i < r * (q + 1) ? q + 1 : q;
}

/* The first row of the s-th. */
static inline long GK_FN(sliver_start)(long mc, long s) {
    const long n = GK_FN(slivers)(mc), q = mc / n, r = mc % n;
    return s < r ? s * (q + 1) : r * (q + 1) + (s - r) * q;
}

/* dst[p * ld + j] = src[j * ls + p] for j < rows, p < kc: `rows` rows of an operand whose K
 * axis is contiguous, transposed into a packed sliver (row stride ld). */
static inline void GK_FN(transpose)(long rows, long kc, const GK_REAL *restrict src, long ls, GK_REAL *restrict dst,
                                    long ld) {
    long j = 0;
#ifdef GK_TB
    for (; j + GK_TB <= rows; j += GK_TB) {
        long p = 0;
        for (; p + GK_TB <= kc; p += GK_TB) GK_TRANSPOSE(src + j * ls + p, ls, dst + p * ld + j, ld);
        for (; p < kc; ++p)
            for (long t = j; t < j + GK_TB; ++t) dst[p * ld + t] = src[t * ls + p];
    }
#endif
#ifdef GK_TB2 /* the rows left, by smaller blocks (6 = 4 + 2 rows for MR 6) */
    for (; j + GK_TB2 <= rows; j += GK_TB2) {
        long p = 0;
        for (; p + GK_TB2 <= kc; p += GK_TB2) GK_TRANSPOSE2(src + j * ls + p, ls, dst + p * ld + j, ld);
        for (; p < kc; ++p)
            for (long t = j; t < j + GK_TB2; ++t) dst[p * ld + t] = src[t * ls + p];
    }
#endif
    for (; j < rows; ++j)
        for (long p = 0; p < kc; ++p) dst[p * ld + j] = src[j * ls + p];
}

/* A[0:mc, 0:kc] as row slivers (GK_FN(sliver)), each kc x its height, row-major. */
static void GK_FN(pack_a)(long mc, long kc, const GK_REAL *restrict A, long a_m, long a_k, GK_REAL *restrict pa) {
    for (long i0 = 0, mr; i0 < mc; i0 += mr, pa += kc * mr) {
        mr = GK_FN(sliver)(mc, i0);
        if (mr == GK_MR && a_m == 1) {
            for (long p = 0; p < kc; ++p)
                memcpy(pa + p * GK_MR, A + i0 + p * a_k, GK_MR * sizeof(GK_REAL)); /* inlined: a constant size */
        } else if (a_k == 1) {
            GK_FN(transpose)(mr, kc, A + i0 * a_m, a_m, pa, mr);
        } else {
            for (long p = 0; p < kc; ++p)
                for (long i = 0; i < mr; ++i) pa[p * mr + i] = A[(i0 + i) * a_m + p * a_k];
        }
    }
}

/* B[0:kc, 0:nc] as slivers of NR columns, each kc x NR, zero-padded to NR columns. */
static void GK_FN(pack_b)(long kc, long nc, const GK_REAL *restrict B, long b_k, long b_n, GK_REAL *restrict pb) {
    for (long j0 = 0; j0 < nc; j0 += GK_NR, pb += kc * GK_NR) {
        const long nr = nc - j0 < GK_NR ? nc - j0 : GK_NR;
        if (nr == GK_NR && b_n == 1) {
            for (long p = 0; p < kc; ++p)
                memcpy(pb + p * GK_NR, B + p * b_k + j0, GK_NR * sizeof(GK_REAL));
            continue;
        }
        if (b_n == 1) { /* a last, partial sliver of a row-major B: each row copied, then its padding */
            for (long p = 0; p < kc; ++p) {
                memcpy(pb + p * GK_NR, B + p * b_k + j0, (size_t)nr * sizeof(GK_REAL));
                for (long j = nr; j < GK_NR; ++j) pb[p * GK_NR + j] = 0;
            }
            continue;
        }
        if (nr < GK_NR)
            for (long t = 0; t < kc * GK_NR; ++t) pb[t] = 0;
        if (b_k == 1) {
            GK_FN(transpose)(nr, kc, B + j0 * b_n, b_n, pb, GK_NR);
        } else {
            for (long p = 0; p < kc; ++p)
                for (long j = 0; j < nr; ++j) pb[p * GK_NR + j] = B[p * b_k + (j0 + j) * b_n];
        }
    }
}

static void GK_FN(run)(long M, long N, long K, double alpha_d, const void *A_, long a_m, long a_k, const void *B_,
                       long b_k, long b_n, void *C_, long c_m, long c_n, int overwrite, void *slot) {
    const GK_REAL *A = (const GK_REAL *)A_, *B = (const GK_REAL *)B_;
    GK_REAL *C = (GK_REAL *)C_;
    const GK_REAL alpha = (GK_REAL)alpha_d;
    GK_REAL *pa = (GK_REAL *)slot, *pb = pa + (long)GK_MC * GK_KC;
    if (K == 0) {
        if (overwrite)
            for (long i = 0; i < M; ++i)
                for (long j = 0; j < N; ++j) C[i * c_m + j * c_n] = 0;
        return;
    }
    const long kblocks = (K + GK_KC - 1) / GK_KC;
    const long kb = (K + kblocks - 1) / kblocks;
    /* Few columns (at most GK_DIRECT_A_COLS: a convolution's d output channels): the tiles
       read A in place, its rows of a K block staying in L1 while they meet every sliver of B
       (12544 x 64 x 800 on AVX2, four slivers of 16: 28 -> 37 GFLOP/s, packed A against in
       place, on a Zen 1), unless A's rows are its contiguous axis and a step along K jumps
       1 KiB or more (a transposed im2col operand, 800 x 64 x n*196 for a weight gradient: each
       tile would then touch a new cache line and page at every p, for each sliver of B;
       packing reads each line once, 76 -> 81 GFLOP/s on AVX-512).
       Few rows (one or two slivers of A), a K shorter than GK_SHORT_K (an input gradient
       behind 10 classes, 64 x 1024 x 10), or A read in place and B's rows close together (a
       convolution's first weight gradient as C^T, 25 x 32 x n*784: nothing is then packed,
       26 -> 29 GFLOP/s on the Zen 1): the tiles read whole slivers of a row-major B in place;
       the last, partial one is packed (zero-padded). docs/gemm-tiles.md has the figures. The
       sums are the same either way. */
    const int direct_a = N <= GK_DIRECT_A_COLS && !(a_m == 1 && a_k * (long)sizeof(GK_REAL) >= 1024);
    const int direct_b = b_n == 1 && (M <= 2 * GK_MR || K < GK_SHORT_K ||
                                      (direct_a && b_k * (long)sizeof(GK_REAL) < 1024));
    /* A short K overwriting a C larger than the caches (an input gradient behind 16 channels,
       50176 x 144 x 16: 29 MB of C for 231 MFLOP) is bound by C's stores: whole rows of tiles
       then go to memory without reading C's lines first (GK_VSTREAM; C's rows and slivers
       64-byte aligned). The same values. */
#ifdef GK_VSTREAM
    const int stream = overwrite && c_n == 1 && K < GK_SHORT_K && (double)M * (double)N * sizeof(GK_REAL) >= 8e6 &&
                       (uintptr_t)C % 64 == 0 && c_m * (long)sizeof(GK_REAL) % 64 == 0 &&
                       GK_NR * sizeof(GK_REAL) % 64 == 0 && GK_NC % GK_NR == 0;
#else
    const int stream = 0;
#endif
    for (long j0 = 0; j0 < N; j0 += GK_NC) {
        const long nc = N - j0 < GK_NC ? N - j0 : GK_NC;
        /* Columns read in place: the whole slivers, and a last one of exactly NR / 2 columns,
           which the half tile reads without going past them (a 16-channel output gradient). */
        const long nfull = direct_b ? nc / GK_NR * GK_NR + (GK_HALF_TILES && nc % GK_NR == GK_NR / 2 ? GK_NR / 2 : 0)
                                    : 0;
        const long npack = (nc - nfull + GK_NR - 1) / GK_NR * GK_NR; /* columns packed, padded */
        if (direct_a && K * (nfull + npack) <= (long)GK_KC * GK_NC) { /* nfull + npack: nc padded */
            /* A read in place and the whole K x nc panel of B fits the workspace (a convolution,
               12544 x 64 x 800; a panel read in place counts as well: it is read again for each
               row sliver, and a larger one would come from memory each time, as 25 x 32 x n*784
               would): the K blocks are the innermost loop, C's tile stays in L1
               between them, and a tile's rows of A are read once, front to back. The blocks and
               sums are the same as below. */
            for (long p0 = 0; p0 < K; p0 += kb) {
                const long kc = K - p0 < kb ? K - p0 : kb;
                GK_FN(pack_b)(kc, nc - nfull, B + p0 * b_k + (j0 + nfull) * b_n, b_k, b_n, pb + p0 * npack);
            }
            for (long i0 = 0; i0 < M; i0 += GK_MC) {
                const long mc = M - i0 < GK_MC ? M - i0 : GK_MC;
                for (long ir = 0, mr; ir < mc; ir += mr) {
                    mr = GK_FN(sliver)(mc, ir);
                    for (long p0 = 0; p0 < K; p0 += kb) {
                        const long kc = K - p0 < kb ? K - p0 : kb;
                        for (long jr = 0; jr < nc; jr += GK_NR) {
                            const GK_REAL *bs = jr < nfull ? B + p0 * b_k + (j0 + jr) * b_n : pb + p0 * npack + (jr - nfull) * kc;
                            GK_FN(micro)(kc, A + (i0 + ir) * a_m + p0 * a_k, 1, a_m, a_k, bs, jr < nfull ? b_k : GK_NR,
                                         alpha, C + (i0 + ir) * c_m + (j0 + jr) * c_n, c_m, c_n, mr,
                                         nc - jr < GK_NR ? nc - jr : GK_NR, overwrite && p0 == 0);
                        }
                    }
                }
            }
            continue;
        }
        if (M == 1 && nfull == 0 && GK_NC >= GK_ROW_SLIVERS * GK_NR) {
            /* One row (a position decoded, 1 x 50304 x 768 against weights stored [out, in]):
               each sliver of B is used once, so GK_ROW_SLIVERS of them are packed just before
               their tile and read back from L1 (not packed with the whole panel into L2
               first), by the row tile. The blocks and sums are tile 1's. */
            for (long p0 = 0; p0 < K; p0 += kb) {
                const long kc = K - p0 < kb ? K - p0 : kb;
                for (long jr = 0; jr < nc; jr += GK_ROW_SLIVERS * GK_NR) {
                    const long nr = nc - jr < GK_ROW_SLIVERS * GK_NR ? nc - jr : GK_ROW_SLIVERS * GK_NR;
                    GK_FN(pack_b)(kc, nr, B + p0 * b_k + (j0 + jr) * b_n, b_k, b_n, pb);
                    for (long t = (nr + GK_NR - 1) / GK_NR * GK_NR * kc; t < GK_ROW_SLIVERS * GK_NR * kc; ++t)
                        pb[t] = 0; /* the slivers past the last column */
                    GK_FN(row_tile)(kc, A + p0 * a_k, a_k, pb, alpha, C + (j0 + jr) * c_n, c_n, nr,
                                    overwrite && p0 == 0);
                }
            }
            continue;
        }
        for (long p0 = 0; p0 < K; p0 += kb) {
            const long kc = K - p0 < kb ? K - p0 : kb;
            const GK_REAL *Bp = B + p0 * b_k + j0 * b_n;
            GK_FN(pack_b)(kc, nc - nfull, Bp + nfull * b_n, b_k, b_n, pb);
            for (long i0 = 0; i0 < M; i0 += GK_MC) {
                const long mc = M - i0 < GK_MC ? M - i0 : GK_MC;
                const GK_REAL *Ap = A + i0 * a_m + p0 * a_k;
                if (!direct_a) GK_FN(pack_a)(mc, kc, Ap, a_m, a_k, pa);
                /* A short K block (64 x 1024 x 10, an input gradient) makes the tiles little more
                   than their stores: the row slivers then go outermost, so that consecutive tiles
                   store along C's rows rather than down a column of C (at a row stride of 4 KiB
                   such a column falls into one L1 set; 39-43 -> 107-115 GFLOP/s on a Zen 5).
                   The packed blocks stay in L1 either way; the sums are the same. */
                const int rows_outer = kc < GK_SHORT_K && c_n == 1;
                const long nj = (nc + GK_NR - 1) / GK_NR, ni = GK_FN(slivers)(mc);
                for (long outer = 0; outer < (rows_outer ? ni : nj); ++outer)
                    for (long inner = 0; inner < (rows_outer ? nj : ni); ++inner) {
                        const long jr = (rows_outer ? inner : outer) * GK_NR, s = rows_outer ? outer : inner;
                        const long ir = GK_FN(sliver_start)(mc, s), mr = GK_FN(sliver)(mc, ir);
                        const GK_REAL *bs = jr < nfull ? Bp + jr : pb + (jr - nfull) * kc;
                        GK_FN(micro)(kc, direct_a ? Ap + ir * a_m : pa + ir * kc, direct_a, a_m, a_k, bs,
                                     jr < nfull ? b_k : GK_NR, alpha, C + (i0 + ir) * c_m + (j0 + jr) * c_n, c_m, c_n,
                                     mr, nc - jr < GK_NR ? nc - jr : GK_NR, overwrite && p0 == 0 ? 1 + stream : 0);
                    }
            }
        }
    }
#ifdef GK_VSTREAM
    if (stream) GK_SFENCE();
#endif
}

#include "gemm_dot.h"

const cannl__gemm_kernel GK_NAME = {GK_MR, GK_NR, GK_KC, GK_MC, GK_NC, GK_FN(run), GK_FN(dot)};

/* The parameters are consumed: the next inclusion defines its own. */
#undef GK_NR
#undef GK_ROW_SLIVERS
#undef GK_HALF_TILES
#undef GK_SHORT_K
#undef GK_DIRECT_A_COLS
#undef GK_UNROLL
#undef GK_PREFETCH
#undef GK_PREFETCH_R
#undef GK_A_AHEAD
#undef GK_FN
#undef GK_CAT
#undef GK_CAT_
#undef GK_REAL
#undef GK_TAG
#undef GK_NAME
#undef GK_VL
#undef GK_VEC
#undef GK_VLOAD
#undef GK_VSTORE
#undef GK_VSET1
#undef GK_VFMA
#undef GK_VMUL
#undef GK_VADD
#undef GK_VSTREAM
#undef GK_SFENCE
#undef GK_MR
#undef GK_MR1
#undef GK_NV
#undef GK_KC
#undef GK_MC
#undef GK_NC
#undef GK_TB
#undef GK_TRANSPOSE
#undef GK_TB2
#undef GK_TRANSPOSE2
