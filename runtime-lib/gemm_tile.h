/* gemm_tile.h - one register tile of gemm_kernel.h: GK_R rows (a constant, 1 to GK_TMR) of
 * NV vectors; not installed. Included by gemm_tiles.h once per row count, which defines GK_R
 * first (undefined again at the end), GK_STRIDED_A 0 or 1 and GK_TILE_NAME(r). Defines
 *   tile<R>_<tag>:  C[0:R, 0:nr] (=|+=) alpha * an a-sliver (kc x R, row-major, packed)
 *                   * a b-sliver (kc x NR, rows ldb apart), kc >= 1 (ars, aks unused);
 *   tiles<R>_<tag>: the same with A read in place, A[i, p] at a[i * ars + p * aks]
 *                   (GK_STRIDED_A 1). */
#if GK_STRIDED_A
#define GK_AI(i) a[(i) * ars]
#define GK_ANEXT aks
#else
#define GK_AI(i) a[i]
#define GK_ANEXT GK_R
#endif
static inline void GK_TILE_NAME(GK_R)(long kc, const GK_REAL *restrict a, long ars, long aks, const GK_REAL *restrict b,
                                long ldb, GK_REAL alpha, GK_REAL *restrict c, long c_m, long c_n, long nr,
                                int overwrite) {
#if !GK_STRIDED_A
    (void)ars;
    (void)aks;
#endif
    GK_VEC acc[GK_R][GK_NV];
    if (kc >= GK_SHORT_K)
        GK_UNROLL for (int i = 0; i < GK_R; ++i) { /* C's rows of the tile are wanted in cache by the end */
            GK_PREFETCH(c + i * c_m);
            GK_PREFETCH(c + i * c_m + (nr - 1) * c_n);
        }
    { /* p = 0: the products themselves (no zeroed registers) */
        GK_VEC bv[GK_NV];
        GK_UNROLL for (int v = 0; v < GK_NV; ++v) bv[v] = GK_VLOAD(b + v * GK_VL);
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            const GK_VEC ai = GK_VSET1(GK_AI(i));
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VMUL(ai, bv[v]);
        }
        a += GK_ANEXT;
        b += ldb;
    }
    for (long p = 1; p < kc; ++p) {
        GK_VEC bv[GK_NV];
        GK_UNROLL for (int v = 0; v < GK_NV; ++v) bv[v] = GK_VLOAD(b + v * GK_VL);
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            const GK_VEC ai = GK_VSET1(GK_AI(i));
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VFMA(ai, bv[v], acc[i][v]);
        }
        a += GK_ANEXT;
        b += ldb;
    }
    if (alpha != 1) {
        const GK_VEC va = GK_VSET1(alpha);
        GK_UNROLL for (int i = 0; i < GK_R; ++i)
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) acc[i][v] = GK_VMUL(va, acc[i][v]);
    }
    if (nr == GK_NR && c_n == 1) { /* whole rows: vector stores */
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            GK_REAL *ci = c + i * c_m;
            GK_UNROLL for (int v = 0; v < GK_NV; ++v) {
                GK_VEC x = acc[i][v];
                if (!overwrite) x = GK_VADD(GK_VLOAD(ci + v * GK_VL), x);
                GK_VSTORE(ci + v * GK_VL, x);
            }
        }
        return;
    }
    GK_REAL t[GK_R * GK_NR];
    GK_UNROLL for (int i = 0; i < GK_R; ++i)
        GK_UNROLL for (int v = 0; v < GK_NV; ++v) GK_VSTORE(t + i * GK_NR + v * GK_VL, acc[i][v]);
    GK_UNROLL for (int i = 0; i < GK_R; ++i)
        for (long j = 0; j < nr; ++j) {
            GK_REAL *cij = c + i * c_m + j * c_n;
            *cij = overwrite ? t[i * GK_NR + j] : *cij + t[i * GK_NR + j];
        }
}

#undef GK_R
#undef GK_AI
#undef GK_ANEXT
