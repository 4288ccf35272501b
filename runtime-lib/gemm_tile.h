/* gemm_tile.h - one register tile of gemm_kernel.h: GK_R rows (a constant, 1 to GK_TMR) of
 * GK_TNV vectors (NV, or NV / 2 for a half tile); not installed. Included by gemm_tiles.h once
 * per row count, which defines GK_R first (undefined again at the end), GK_STRIDED_A 0 or 1,
 * GK_TNV and GK_TILE_NAME(r). Defines
 *   tile<R>_<tag>:  C[0:R, 0:nr] (=|+=) alpha * an a-sliver (kc x R, row-major, packed)
 *                   * the first TNV VL columns of a b-sliver (kc x NR, rows ldb apart),
 *                   nr <= TNV VL, kc >= 1 (ars, aks unused);
 *   tiles<R>_<tag>: the same with A read in place, A[i, p] at a[i * ars + p * aks]
 *                   (GK_STRIDED_A 1).
 * (htile, htiles for the half tiles.) Every element of C gets the same operations, in the same
 * order, in a tile of any height or width: the product at p = 0, an FMA for each later p, alpha,
 * then C. */
#if GK_STRIDED_A
#define GK_AI(i) a[(i) * ars]
#define GK_ANEXT aks
#else
#define GK_AI(i) a[i]
#define GK_ANEXT GK_R
#endif
#define GK_TW (GK_TNV * GK_VL) /* the tile's columns */
static inline void GK_TILE_NAME(GK_R)(long kc, const GK_REAL *restrict a, long ars, long aks, const GK_REAL *restrict b,
                                long ldb, GK_REAL alpha, GK_REAL *restrict c, long c_m, long c_n, long nr,
                                int overwrite) {
#if !GK_STRIDED_A
    (void)ars;
    (void)aks;
#endif
    GK_VEC acc[GK_R][GK_TNV];
    if (kc >= GK_SHORT_K)
        GK_UNROLL for (int i = 0; i < GK_R; ++i) { /* C's rows of the tile are wanted in cache by the end */
            GK_PREFETCH(c + i * c_m);
            GK_PREFETCH(c + i * c_m + (nr - 1) * c_n);
        }
    { /* p = 0: the products themselves (no zeroed registers) */
        GK_VEC bv[GK_TNV];
        GK_UNROLL for (int v = 0; v < GK_TNV; ++v) bv[v] = GK_VLOAD(b + v * GK_VL);
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            const GK_VEC ai = GK_VSET1(GK_AI(i));
            GK_UNROLL for (int v = 0; v < GK_TNV; ++v) acc[i][v] = GK_VMUL(ai, bv[v]);
        }
        a += GK_ANEXT;
        b += ldb;
    }
    for (long p = 1; p < kc; ++p) {
        GK_VEC bv[GK_TNV];
#if GK_STRIDED_A
        GK_PREFETCH_R(a + GK_A_AHEAD * aks); /* A's rows side by side, a step along K a line or more on */
#endif
        GK_UNROLL for (int v = 0; v < GK_TNV; ++v) bv[v] = GK_VLOAD(b + v * GK_VL);
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            const GK_VEC ai = GK_VSET1(GK_AI(i));
            GK_UNROLL for (int v = 0; v < GK_TNV; ++v) acc[i][v] = GK_VFMA(ai, bv[v], acc[i][v]);
        }
        a += GK_ANEXT;
        b += ldb;
    }
    if (alpha != 1) {
        const GK_VEC va = GK_VSET1(alpha);
        GK_UNROLL for (int i = 0; i < GK_R; ++i)
            GK_UNROLL for (int v = 0; v < GK_TNV; ++v) acc[i][v] = GK_VMUL(va, acc[i][v]);
    }
    if (nr == GK_TW && c_n == 1) { /* whole rows: vector stores */
        GK_UNROLL for (int i = 0; i < GK_R; ++i) {
            GK_REAL *ci = c + i * c_m;
            GK_UNROLL for (int v = 0; v < GK_TNV; ++v) {
                GK_VEC x = acc[i][v];
#ifdef GK_VSTREAM
                if (overwrite == 2) { /* C to memory (run: `stream`) */
                    GK_VSTREAM(ci + v * GK_VL, x);
                    continue;
                }
#endif
                if (!overwrite) x = GK_VADD(GK_VLOAD(ci + v * GK_VL), x);
                GK_VSTORE(ci + v * GK_VL, x);
            }
        }
        return;
    }
    GK_REAL t[GK_R * GK_TW];
    GK_UNROLL for (int i = 0; i < GK_R; ++i)
        GK_UNROLL for (int v = 0; v < GK_TNV; ++v) GK_VSTORE(t + i * GK_TW + v * GK_VL, acc[i][v]);
    GK_UNROLL for (int i = 0; i < GK_R; ++i)
        for (long j = 0; j < nr; ++j) {
            GK_REAL *cij = c + i * c_m + j * c_n;
            *cij = overwrite ? t[i * GK_TW + j] : *cij + t[i * GK_TW + j];
        }
}

#undef GK_R
#undef GK_TW
#undef GK_AI
#undef GK_ANEXT
