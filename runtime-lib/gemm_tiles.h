/* gemm_tiles.h - the register tiles of gemm_kernel.h, 1 to GK_TMR rows: gemm_tile.h once per
 * row count, then the function that calls the tile of a given height; not installed. Included
 * by gemm_kernel.h with GK_STRIDED_A 0 (A packed: tile<R>_<tag>, tile_<tag>) and 1 (A read in
 * place: tiles<R>_<tag>, tiles_<tag>), each with GK_HALF 0 (NV vectors) and, when NV is even,
 * GK_HALF 1 (NV / 2 vectors: htile..., htiles...). */
#if GK_HALF
#define GK_TNV (GK_NV / 2)
#if GK_STRIDED_A
#define GK_TILE_BASE htiles
#else
#define GK_TILE_BASE htile
#endif
#else
#define GK_TNV GK_NV
#if GK_STRIDED_A
#define GK_TILE_BASE tiles
#else
#define GK_TILE_BASE tile
#endif
#endif
#define GK_TILE_NAME(r) GK_CAT(GK_CAT(GK_TILE_BASE, r), GK_TAG)
#define GK_R 1
#include "gemm_tile.h"
#if GK_TMR >= 2
#define GK_R 2
#include "gemm_tile.h"
#endif
#if GK_TMR >= 3
#define GK_R 3
#include "gemm_tile.h"
#endif
#if GK_TMR >= 4
#define GK_R 4
#include "gemm_tile.h"
#endif
#if GK_TMR >= 5
#define GK_R 5
#include "gemm_tile.h"
#endif
#if GK_TMR >= 6
#define GK_R 6
#include "gemm_tile.h"
#endif
#if GK_TMR >= 7
#define GK_R 7
#include "gemm_tile.h"
#endif
#if GK_TMR >= 8
#define GK_R 8
#include "gemm_tile.h"
#endif
#if GK_TMR >= 9
#define GK_R 9
#include "gemm_tile.h"
#endif
#if GK_TMR >= 10
#define GK_R 10
#include "gemm_tile.h"
#endif
#if GK_TMR >= 11
#define GK_R 11
#include "gemm_tile.h"
#endif
#if GK_TMR >= 12
#define GK_R 12
#include "gemm_tile.h"
#endif
#if GK_TMR >= 13
#define GK_R 13
#include "gemm_tile.h"
#endif
#if GK_TMR >= 14
#define GK_R 14
#include "gemm_tile.h"
#endif
#if GK_TMR > 14
#error "gemm_kernel.h: tiles of up to 14 rows"
#endif

/* The tile of mr rows, 1 to GK_TMR. */
static inline void GK_CAT(GK_TILE_BASE, GK_TAG)(long mr, long kc, const GK_REAL *restrict a, long ars, long aks,
                                                const GK_REAL *restrict b, long ldb, GK_REAL alpha,
                                                GK_REAL *restrict c, long c_m, long c_n, long nr, int overwrite) {
#define GK_CASE(r)                                                                   \
    case r:                                                                          \
        GK_TILE_NAME(r)(kc, a, ars, aks, b, ldb, alpha, c, c_m, c_n, nr, overwrite); \
        break;
    switch (mr) {
        GK_CASE(1)
#if GK_TMR >= 2
        GK_CASE(2)
#endif
#if GK_TMR >= 3
        GK_CASE(3)
#endif
#if GK_TMR >= 4
        GK_CASE(4)
#endif
#if GK_TMR >= 5
        GK_CASE(5)
#endif
#if GK_TMR >= 6
        GK_CASE(6)
#endif
#if GK_TMR >= 7
        GK_CASE(7)
#endif
#if GK_TMR >= 8
        GK_CASE(8)
#endif
#if GK_TMR >= 9
        GK_CASE(9)
#endif
#if GK_TMR >= 10
        GK_CASE(10)
#endif
#if GK_TMR >= 11
        GK_CASE(11)
#endif
#if GK_TMR >= 12
        GK_CASE(12)
#endif
#if GK_TMR >= 13
        GK_CASE(13)
#endif
#if GK_TMR >= 14
        GK_CASE(14)
#endif
        default: break;
    }
#undef GK_CASE
}

#undef GK_TILE_BASE
#undef GK_TILE_NAME
#undef GK_TNV
