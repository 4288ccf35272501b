/* quant_amx.c - the int8 product (the CANNL__Q8_KERNEL contract, gemm_internal.h) on AMX tiles,
 * for two or more rows of X (a batch of decoded sequences, a prompt): one tdpbssd adds the
 * signed-by-signed byte products of 16 weight rows by 64 k into 16 x (rows of X) int32 sums.
 *
 * The weights are the A operand as they are stored (a tile is 16 weight rows of 64 bytes, w_r
 * apart); X, in tiles of 16 rows (and one of the rest), is the B operand, repacked once per call
 * into the tile unit's layout (per 64 k: 16 rows of 4 consecutive k of each row of X). Four sum
 * tiles take 32 weight rows by 2 tiles of X; each block of weight rows is read from memory once
 * for every tile of X. The last K % 64 k are added in AVX-512 (a tile row of weights would read
 * past the matrix); the weight rows past the last whole 16, a lone last row of X and a call with
 * one row go to the AVX-512 VNNI kernel. The sums are exact integers, so the outputs are the
 * other kernels' bits (the same float expression, -ffp-contract=off).
 * CMakeLists.txt compiles this file alone with -march=x86-64-v4 -mavx512vnni -mamx-tile
 * -mamx-int8; quant.c calls it only when amx.c grants AMX-INT8. */
#include "gemm_internal.h"
#include "amx_tile.h"

#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_INT8__) || defined(__AMXINT8__))
#error "quant_amx.c is compiled with -mamx-tile -mamx-int8 (runtime-lib/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* Tiles: sums 0..3 (weight block b = 0, 1 by tile of X x = 0, 1 at 2 b + x: 16 weight rows by m
   rows of X), weights 4, 5 (16 rows by 64 k), X 6, 7 (16 rows of 4 k by m). */
static void configure(int m) {
    cannl__tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; ++t) c.colsb[t] = (uint16_t)(t == 4 || t == 5 ? 64 : 4 * m), c.rows[t] = 16;
    _tile_loadconfig(&c);
}

/* The sum of a[k] b[k] over n < 64 signed bytes (exact). */
static inline int32_t dot_tail(const int8_t *a, const uint8_t *b, int n) {
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < n; k += 32) {
        const __mmask32 mk = (__mmask32)(n - k >= 32 ? ~0u : (1u << (n - k)) - 1);
        const __m512i x = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, a + k));
        const __m512i y = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, b + k));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
    }
    return _mm512_reduce_add_epi32(acc);
}

/* Sums S[j][i] (row j 64 bytes apart) of weight rows j < 16 (w) by rows of X i < m (x, x_r apart)
   plus their last kt k at kf, then to C: a row of C (16 weight rows) per vector where c_w is 1
   (S's column gathered), else per weight row, in the other kernels' float operations
   (alpha * scale[j] * (xd[i] * (float)S)). */
static void finish(int m, int32_t (*S)[16], long kf, int kt, const int8_t *w, long w_r, const uint8_t *x, long x_r,
                   float alpha, const float *xd, const float *scale, float *C, long c_x, long c_w, int overwrite) {
    if (kt)
        for (int j = 0; j < 16; ++j)
            for (int i = 0; i < m; ++i) S[j][i] += dot_tail(w + j * w_r + kf, x + i * x_r + kf, kt);
    if (c_w == 1) {
        const __m512 as = _mm512_mul_ps(_mm512_set1_ps(alpha), _mm512_loadu_ps(scale));
        const __m512i col = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32(16));
        for (int i = 0; i < m; ++i) {
            const __m512i si = _mm512_i32gather_epi32(col, (const void *)&S[0][i], 4);
            const __m512 v = _mm512_mul_ps(as, _mm512_mul_ps(_mm512_set1_ps(xd[i]), _mm512_cvtepi32_ps(si)));
            float *o = C + i * c_x;
            _mm512_storeu_ps(o, overwrite ? v : _mm512_add_ps(_mm512_loadu_ps(o), v));
        }
        return;
    }
    const __mmask16 mk = (__mmask16)((1u << m) - 1);
    const __m512 d = _mm512_maskz_loadu_ps(mk, xd);
    for (int j = 0; j < 16; ++j) {
        const __m512 t = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_maskz_load_epi32(mk, (const void *)S[j])));
        float v[16];
        _mm512_storeu_ps(v, _mm512_mul_ps(_mm512_set1_ps(alpha * scale[j]), t));
        float *o = C + j * c_w;
        if (overwrite)
            for (int i = 0; i < m; ++i) o[i * c_x] = v[i];
        else
            for (int i = 0; i < m; ++i) o[i * c_x] += v[i];
    }
}

/* One pass over the weight rows [0, n16) (n16 a multiple of 16) for nx tiles of m rows of X each
   (P: X's tile x's 64 k at block k of P + (x * blocks + k / 64) * 64 m), in blocks of 32 weight
   rows by 2 tiles of X; each weight block read from memory once (the tiles of X after the
   first read it from L2), the next one prefetched into L2 meanwhile. */
static void pass(int m, long nx, long n16, long K, float alpha, const uint8_t *P, long blocks, const uint8_t *X,
                 long x_r, const float *xd, const int8_t *W, long w_r, const float *scale, float *C, long c_x, long c_w,
                 int overwrite) {
    const long kf = K / 64 * 64, pt = blocks * 64 * (long)m; /* bytes of one tile of X's packing */
    const int kt = (int)(K - kf), xs = 4 * m;
    int32_t S[4][16][16] __attribute__((aligned(64)));
    configure(m);
    for (long j = 0; j < n16; j += 32) {
        const int two = j + 32 <= n16;
        const int8_t *w0 = W + j * w_r, *w1 = w0 + 16 * w_r;
        const int8_t *next = W + (j + 64 <= n16 ? j + 32 : j) * w_r;
        for (long x = 0; x < nx; x += 2) {
            const int pair = x + 2 <= nx;
            const uint8_t *p0 = P + x * pt, *p1 = p0 + pt;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (long k = 0; k < kf; k += 64) {
                if (x == 0)
                    for (int r = 0; r < 32; ++r) _mm_prefetch((const char *)(next + r * w_r + k), _MM_HINT_T1);
                _tile_loadd(4, w0 + k, w_r);
                _tile_loadd(6, p0 + k * m, xs);
                _tile_dpbssd(0, 4, 6);
                if (pair) {
                    _tile_loadd(7, p1 + k * m, xs);
                    _tile_dpbssd(1, 4, 7);
                }
                if (two) {
                    _tile_loadd(5, w1 + k, w_r);
                    _tile_dpbssd(2, 5, 6);
                    if (pair) _tile_dpbssd(3, 5, 7);
                }
            }
            _tile_stored(0, S[0], 64);
            if (pair) _tile_stored(1, S[1], 64);
            if (two) _tile_stored(2, S[2], 64);
            if (two && pair) _tile_stored(3, S[3], 64);
            for (int b = 0; b <= two; ++b)
                for (int t = 0; t <= pair; ++t) {
                    const long i0 = (x + t) * m, j0 = j + 16 * b;
                    finish(m, S[2 * b + t], kf, kt, W + j0 * w_r, w_r, X + i0 * x_r, x_r,
                           alpha, xd + i0, scale + j0, C + i0 * c_x + j0 * c_w, c_x, c_w, overwrite);
                }
        }
    }
}

/* P for nx tiles of m rows of X: P[x][b][r][4 i + t] = X[x m + i][64 b + 4 r + t] for the whole
   blocks b < K / 64. */
static void pack(uint8_t *P, long nx, int m, long blocks, const uint8_t *X, long x_r) {
    for (long x = 0; x < nx; ++x)
        for (long b = 0; b < blocks; ++b)
            for (int r = 0; r < 16; ++r)
                for (int i = 0; i < m; ++i)
                    memcpy(P + ((x * blocks + b) * 16 + r) * 4 * m + 4 * i, X + (x * m + i) * x_r + 64 * b + 4 * r, 4);
}

CANNL__Q8_KERNEL(cannl__q8_amx) {
    const long n16 = N / 16 * 16, blocks = K / 64, full = M / 16, rest = M % 16;
    uint8_t *P = NULL;
    if (M >= 2 && n16 > 0) P = aligned_alloc(64, (size_t)(full + 1) * (size_t)(blocks > 0 ? blocks : 1) * 1024);
    if (!P) {
        cannl__q8_avx512(M, N, K, alpha, X, x_r, xd, xs, W, w_r, scale, C, c_x, c_w, overwrite);
        return;
    }
    if (full > 0) { /* tiles of 16 rows of X */
        pack(P, full, 16, blocks, X, x_r);
        pass(16, full, n16, K, alpha, P, blocks, X, x_r, xd, W, w_r, scale, C, c_x, c_w, overwrite);
    }
    const long i0 = full * 16;
    if (rest >= 2) { /* one tile of the rest */
        pack(P, 1, (int)rest, blocks, X + i0 * x_r, x_r);
        pass((int)rest, 1, n16, K, alpha, P, blocks, X + i0 * x_r, x_r, xd + i0, W, w_r, scale, C + i0 * c_x, c_x,
             c_w, overwrite);
    } else if (rest == 1) {
        cannl__q8_avx512(1, n16, K, alpha, X + i0 * x_r, x_r, xd + i0, xs + i0, W, w_r, scale, C + i0 * c_x, c_x, c_w,
                         overwrite);
    }
    _tile_release();
    free(P);
    if (n16 < N)
        cannl__q8_avx512(M, N - n16, K, alpha, X, x_r, xd, xs, W + n16 * w_r, w_r, scale + n16, C + n16 * c_w, c_x,
                         c_w, overwrite);
}
