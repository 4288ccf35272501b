/* gemm_dot.h - products whose operands are both contiguous along K, as dot products
 * (cannl_sgemm_dot, gemm.c); not installed. Included by gemm_kernel.h, with its macros, and
 * optionally GK_DOT_SUM16(acc, s): the 16 float vectors acc[0..15] summed lane by lane into
 * s[0..15] by the same tree as GK_FN(lane_sum) (gemm_avx512.c: shuffles instead of stores).
 *
 * C[i, j] (=|+=) alpha * sum over p of A[i, p] B[p, j], A[i, p] at A[i * a_m + p] and B[p, j]
 * at B[j * b_n + p]: `w3 . h2`, 10 classes x n examples x 512, where the tiles would transpose
 * both operands into their packed slivers. Each element is one dot product: its K axis split
 * over the VL lanes (lane l sums the p = l mod VL in order, from 0; a last partial vector is
 * zero-padded), then the lanes added by a fixed tree (GK_FN(lane_sum)). A block of elements
 * shares its loads; an element's sum does not depend on the block it is in,
 * on M, N or the thread count. The order is not the tiles' (gemm_kernel.h): the generator
 * calls it only where the product's shape makes the choice once per model (the classes side
 * is a constant: docs/gemm-tiles.md). */

/* Each loaded vector kept in a register: without it GCC 12 folds the loads into the FMAs, one
 * load per FMA instead of one per row (5 x 3: 18 loads for 15 FMAs, load-bound). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX512F__)
#define GK_DOT_REG(v) __asm__("" : "+v"(v))
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__SSE2__)
#define GK_DOT_REG(v) __asm__("" : "+x"(v))
#else
#define GK_DOT_REG(v) ((void)0)
#endif

/* t[0] = the VL lanes of t summed by halves: t[l] += t[l + w] for w = VL/2, ..., 1. */
static inline GK_REAL GK_FN(lane_sum)(GK_REAL *t) {
    for (int w = GK_VL / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) t[l] = t[l] + t[l + w];
    return t[0];
}

/* The block of di x dj elements of C at (i0, j0) (di dj <= 16; constants where it is inlined).
 * Rows of A and columns of B past the end repeat the last: computed, not stored. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void GK_FN(dot_block)(const int di, const int dj, long i0, long j0, long M, long N, long K,
                                    GK_REAL alpha, const GK_REAL *A, long a_m, const GK_REAL *B, long b_n,
                                    GK_REAL *C, long c_m, long c_n, int overwrite) {
    const GK_REAL *a[16], *b[16];
    for (int r = 0; r < di; ++r) a[r] = A + (i0 + r < M ? i0 + r : M - 1) * a_m;
    for (int r = 0; r < dj; ++r) b[r] = B + (j0 + r < N ? j0 + r : N - 1) * b_n;
    const long kv = K / GK_VL * GK_VL;
    GK_VEC acc[16];
    GK_UNROLL for (int e = 0; e < 16; ++e) acc[e] = GK_VSET1(0);
    for (long p = 0; p < kv; p += GK_VL) {
        GK_VEC bv[16];
        /* The next block's rows of A, from memory while this block computes: a long M streams A
           once (50176 x 16 x 144, a 16-channel convolution, waited on its loads: 45 -> 46-50
           GFLOP/s, one core of a loaded Zen 4 by CPU time) */
        GK_UNROLL for (int r = 0; r < di; ++r) GK_PREFETCH_R(a[r] + di * a_m + p);
        GK_UNROLL for (int r = 0; r < dj; ++r) {
            bv[r] = GK_VLOAD(b[r] + p);
            GK_DOT_REG(bv[r]);
        }
        GK_UNROLL for (int i = 0; i < di; ++i) {
            GK_VEC av = GK_VLOAD(a[i] + p);
            GK_DOT_REG(av);
            GK_UNROLL for (int j = 0; j < dj; ++j) acc[i * dj + j] = GK_VFMA(av, bv[j], acc[i * dj + j]);
        }
    }
    if (kv < K) { /* the last partial vector, zero-padded */
        GK_REAL ta[16][GK_VL], tb[16][GK_VL];
        for (int r = 0; r < di; ++r)
            for (long l = 0; l < GK_VL; ++l) ta[r][l] = kv + l < K ? a[r][kv + l] : 0;
        for (int r = 0; r < dj; ++r)
            for (long l = 0; l < GK_VL; ++l) tb[r][l] = kv + l < K ? b[r][kv + l] : 0;
        GK_UNROLL for (int i = 0; i < di; ++i)
            GK_UNROLL for (int j = 0; j < dj; ++j)
                acc[i * dj + j] = GK_VFMA(GK_VLOAD(ta[i]), GK_VLOAD(tb[j]), acc[i * dj + j]);
    }
    GK_REAL s[16];
#ifdef GK_DOT_SUM16
    GK_DOT_SUM16(acc, s);
#else
    GK_UNROLL for (int e = 0; e < di * dj; ++e) {
        GK_REAL t[GK_VL];
        GK_VSTORE(t, acc[e]);
        s[e] = GK_FN(lane_sum)(t);
    }
#endif
    for (int i = 0; i < di && i0 + i < M; ++i)
        for (int j = 0; j < dj && j0 + j < N; ++j) {
            GK_REAL *c = C + (i0 + i) * c_m + (j0 + j) * c_n;
            const GK_REAL x = alpha != 1 ? alpha * s[i * dj + j] : s[i * dj + j];
            *c = overwrite ? x : *c + x;
        }
}

/* Blocks of 4 x 4 elements (eight vector loads for sixteen FMAs), or 5 x 3 where that computes
 * fewer padding rows (10 classes: 5 + 5, not 4 + 4 + 4); a block of A's rows is kept in L1 while
 * it meets every column of B. */
static void GK_FN(dot)(long M, long N, long K, double alpha_d, const void *A_, long a_m, const void *B_, long b_n,
                       void *C_, long c_m, long c_n, int overwrite) {
    const GK_REAL *A = (const GK_REAL *)A_, *B = (const GK_REAL *)B_;
    GK_REAL *C = (GK_REAL *)C_;
    const GK_REAL alpha = (GK_REAL)alpha_d;
    const long cells44 = (M + 3) / 4 * 4 * ((N + 3) / 4 * 4), cells53 = (M + 4) / 5 * 5 * ((N + 2) / 3 * 3);
    if (cells53 < cells44) {
        for (long i0 = 0; i0 < M; i0 += 5)
            for (long j0 = 0; j0 < N; j0 += 3)
                GK_FN(dot_block)(5, 3, i0, j0, M, N, K, alpha, A, a_m, B, b_n, C, c_m, c_n, overwrite);
        return;
    }
    for (long i0 = 0; i0 < M; i0 += 4)
        for (long j0 = 0; j0 < N; j0 += 4)
            GK_FN(dot_block)(4, 4, i0, j0, M, N, K, alpha, A, a_m, B, b_n, C, c_m, c_n, overwrite);
}

#undef GK_DOT_SUM16
#undef GK_DOT_REG
