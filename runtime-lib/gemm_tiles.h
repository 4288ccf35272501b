/* gemm_tiles.h - the register tiles of gemm_kernel.h, 1 to MR rows: gemm_tile.h once per
 * row count; not installed. Included twice by gemm_kernel.h, with GK_STRIDED_A 0 (A packed)
 * and 1 (A read in place). */
#define GK_R 1
#include "gemm_tile.h"
#if GK_MR >= 2
#define GK_R 2
#include "gemm_tile.h"
#endif
#if GK_MR >= 3
#define GK_R 3
#include "gemm_tile.h"
#endif
#if GK_MR >= 4
#define GK_R 4
#include "gemm_tile.h"
#endif
#if GK_MR >= 5
#define GK_R 5
#include "gemm_tile.h"
#endif
#if GK_MR >= 6
#define GK_R 6
#include "gemm_tile.h"
#endif
#if GK_MR >= 7
#define GK_R 7
#include "gemm_tile.h"
#endif
#if GK_MR >= 8
#define GK_R 8
#include "gemm_tile.h"
#endif
#if GK_MR >= 9
#define GK_R 9
#include "gemm_tile.h"
#endif
#if GK_MR >= 10
#define GK_R 10
#include "gemm_tile.h"
#endif
#if GK_MR >= 11
#define GK_R 11
#include "gemm_tile.h"
#endif
#if GK_MR >= 12
#define GK_R 12
#include "gemm_tile.h"
#endif
#if GK_MR >= 13
#define GK_R 13
#include "gemm_tile.h"
#endif
#if GK_MR >= 14
#define GK_R 14
#include "gemm_tile.h"
#endif
#if GK_MR > 14
#error "gemm_kernel.h: tiles of up to 14 rows"
#endif
