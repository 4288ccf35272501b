/* gemm_kernel.h - one thread's blocked matrix product, C (=|+=) alpha A B, BLIS/GotoBLAS
 * style; not installed. Included once per instruction set and element type (gemm_base.c,
 * gemm_avx2.c, gemm_avx512.c), after defining
 *   GK_REAL                      float or double
 *   GK_TAG                       a suffix for this inclusion's functions (f32, f64)
 *   GK_NAME                      the cannl__gemm_kernel table to define
 *   GK_VL                        lanes of a vector (1: scalar C)
 *   GK_VEC, GK_VZERO(), GK_VLOAD(p), GK_VSTORE(p, v), GK_VSET1(x), GK_VFMA(a, b, c) = a b + c,
 *   GK_VMUL(a, b), GK_VADD(a, b) the vector type and its operations (unaligned loads/stores)
 *   GK_MR, GK_NV                 the register tile: MR rows x NV vectors (NR = NV VL columns)
 *   GK_KC, GK_MC, GK_NC          the cache blocks (docs/gemm-tiles.md)
 * (all undefined again at the end of this file)
 *
 *   for each NC-column panel of B
 *     for each K block (K cut into equal blocks of at most KC: 784 = 4 x 196)
 *       pack the KC x NC panel of B into slivers of NR columns (kc x NR, row-major)
 *       for each MC-row block of A
 *         pack the MC x KC block of A into slivers of MR rows (kc x MR, row-major)
 *         for each NR sliver, for each MR sliver: the micro-kernel, an MR x NR tile of C in
 *         registers updated by kc rank-1 products, then added to (or stored in) C
 *
 * Every element of C is summed in the same order whatever the blocks of M and N a caller
 * hands a thread: the K blocks in order, each summed from zero by p, then added to C. */

#define GK_CAT_(a, b) a##_##b
#define GK_CAT(a, b) GK_CAT_(a, b)
#define GK_FN(name) GK_CAT(name, GK_TAG)
#define GK_NR (GK_NV * GK_VL)

/* C[0:mr, 0:nr] (=|+=) alpha * a-sliver (kc x MR) * b-sliver (kc x NR). */
static inline void GK_FN(micro)(long kc, const GK_REAL *restrict a, const GK_REAL *restrict b, GK_REAL alpha,
                                GK_REAL *restrict c, long c_m, long c_n, long mr, long nr, int overwrite) {
    GK_VEC acc[GK_MR][GK_NV];
    for (int i = 0; i < GK_MR; ++i)
        for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VZERO();
    for (long p = 0; p < kc; ++p) {
        GK_VEC bv[GK_NV];
        for (int v = 0; v < GK_NV; ++v) bv[v] = GK_VLOAD(b + v * GK_VL);
        for (int i = 0; i < GK_MR; ++i) {
            const GK_VEC ai = GK_VSET1(a[i]);
            for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VFMA(ai, bv[v], acc[i][v]);
        }
        a += GK_MR;
        b += GK_NR;
    }
    if (alpha != 1) {
        const GK_VEC va = GK_VSET1(alpha);
        for (int i = 0; i < GK_MR; ++i)
            for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VMUL(va, acc[i][v]);
    }
    if (nr == GK_NR && c_n == 1) { /* whole rows of the tile: vector stores */
        for (int i = 0; i < GK_MR; ++i) {
            if (i >= mr) break;
            GK_REAL *ci = c + i * c_m;
            for (int v = 0; v < GK_NV; ++v) {
                GK_VEC x = acc[i][v];
                if (!overwrite) x = GK_VADD(GK_VLOAD(ci + v * GK_VL), x);
                GK_VSTORE(ci + v * GK_VL, x);
            }
        }
        return;
    }
    GK_REAL tile[GK_MR * GK_NR];
    for (int i = 0; i < GK_MR; ++i)
        for (int v = 0; v < GK_NV; ++v) GK_VSTORE(tile + i * GK_NR + v * GK_VL, acc[i][v]);
    for (long i = 0; i < mr; ++i)
        for (long j = 0; j < nr; ++j) {
            GK_REAL *cij = c + i * c_m + j * c_n;
            *cij = overwrite ? tile[i * GK_NR + j] : *cij + tile[i * GK_NR + j];
        }
}

/* A[0:mc, 0:kc] as slivers of MR rows, each kc x MR, zero-padded to MR rows. */
static void GK_FN(pack_a)(long mc, long kc, const GK_REAL *restrict A, long a_m, long a_k, GK_REAL *restrict pa) {
    for (long i0 = 0; i0 < mc; i0 += GK_MR, pa += kc * GK_MR) {
        const long mr = mc - i0 < GK_MR ? mc - i0 : GK_MR;
        if (mr == GK_MR && a_m == 1) {
            for (long p = 0; p < kc; ++p)
                for (long i = 0; i < GK_MR; ++i) pa[p * GK_MR + i] = A[i0 + i + p * a_k];
            continue;
        }
        if (mr < GK_MR)
            for (long t = 0; t < kc * GK_MR; ++t) pa[t] = 0;
        if (a_k == 1) {
            for (long i = 0; i < mr; ++i) {
                const GK_REAL *src = A + (i0 + i) * a_m;
                for (long p = 0; p < kc; ++p) pa[p * GK_MR + i] = src[p];
            }
        } else {
            for (long p = 0; p < kc; ++p)
                for (long i = 0; i < mr; ++i) pa[p * GK_MR + i] = A[(i0 + i) * a_m + p * a_k];
        }
    }
}

/* B[0:kc, 0:nc] as slivers of NR columns, each kc x NR, zero-padded to NR columns. */
static void GK_FN(pack_b)(long kc, long nc, const GK_REAL *restrict B, long b_k, long b_n, GK_REAL *restrict pb) {
    for (long j0 = 0; j0 < nc; j0 += GK_NR, pb += kc * GK_NR) {
        const long nr = nc - j0 < GK_NR ? nc - j0 : GK_NR;
        if (nr == GK_NR && b_n == 1) {
            for (long p = 0; p < kc; ++p)
                for (long j = 0; j < GK_NR; ++j) pb[p * GK_NR + j] = B[p * b_k + j0 + j];
            continue;
        }
        if (nr < GK_NR)
            for (long t = 0; t < kc * GK_NR; ++t) pb[t] = 0;
        if (b_k == 1) {
            for (long j = 0; j < nr; ++j) {
                const GK_REAL *src = B + (j0 + j) * b_n;
                for (long p = 0; p < kc; ++p) pb[p * GK_NR + j] = src[p];
            }
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
    for (long j0 = 0; j0 < N; j0 += GK_NC) {
        const long nc = N - j0 < GK_NC ? N - j0 : GK_NC;
        for (long p0 = 0; p0 < K; p0 += kb) {
            const long kc = K - p0 < kb ? K - p0 : kb;
            GK_FN(pack_b)(kc, nc, B + p0 * b_k + j0 * b_n, b_k, b_n, pb);
            for (long i0 = 0; i0 < M; i0 += GK_MC) {
                const long mc = M - i0 < GK_MC ? M - i0 : GK_MC;
                GK_FN(pack_a)(mc, kc, A + i0 * a_m + p0 * a_k, a_m, a_k, pa);
                for (long jr = 0; jr < nc; jr += GK_NR)
                    for (long ir = 0; ir < mc; ir += GK_MR)
                        GK_FN(micro)(kc, pa + ir * kc, pb + jr * kc, alpha, C + (i0 + ir) * c_m + (j0 + jr) * c_n, c_m,
                                     c_n, mc - ir < GK_MR ? mc - ir : GK_MR, nc - jr < GK_NR ? nc - jr : GK_NR,
                                     overwrite && p0 == 0);
            }
        }
    }
}

const cannl__gemm_kernel GK_NAME = {GK_MR, GK_NR, GK_KC, GK_MC, GK_NC, GK_FN(run)};

/* The parameters are consumed: the next inclusion defines its own. */
#undef GK_NR
#undef GK_FN
#undef GK_CAT
#undef GK_CAT_
#undef GK_REAL
#undef GK_TAG
#undef GK_NAME
#undef GK_VL
#undef GK_VEC
#undef GK_VZERO
#undef GK_VLOAD
#undef GK_VSTORE
#undef GK_VSET1
#undef GK_VFMA
#undef GK_VMUL
#undef GK_VADD
#undef GK_MR
#undef GK_NV
#undef GK_KC
#undef GK_MC
#undef GK_NC
