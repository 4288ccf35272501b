/* quant_kernel.h - one thread's product of int8 rows of X against int8 weight rows as integer
 * dot products (quant.c), compiled once per instruction set (quant.c for the portable path,
 * quant_avx2.c and quant_avx512.c with their own -march). Not installed.
 *
 * X arrives quantised (quant.c: one float scale xd[i] per row, its int8 values q padded with
 * zeros to a whole number of 64-byte vectors, x_r bytes apart, and xs[i] the sum of the row's q).
 * For i < M, j < N:
 *   S = sum over k < K of xq[i, k] * W[j * w_r + k]        (an int32, exact: K <= 2^17)
 *   C[i * c_x + j * c_w] (=|+=) alpha * scale[j] * (xd[i] * (float)S)
 * The sum is of integers, so its order does not matter: every tile shape, thread split and
 * instruction set gives the same S, and the float expression is the same C in each: an
 * element's bits depend on nothing but its row of X, its weight row and alpha.
 *
 * The includer defines QK_NAME (the function), QK_VL (int8 elements per vector step; 1: plain
 * C), QK_IVEC (an accumulator: int32 lanes), QK_IZERO, QK_LOADX(p) (QK_VL bytes of X: whole,
 * the rows are padded), QK_LOADW(p) (QK_VL weights), QK_WPREP(w) (what QK_DOT needs of a weight
 * vector, computed once for a tile's rows of X), QK_DOT(a, x, w, wp) (a plus the products of x
 * and w, summed in int32 lanes), QK_OFFSET (1: QK_DOT sums (w + 128) q, and 128 xs[i] is
 * subtracted from each element's sum), QK_HSUM(v) (the lanes' sum as an uint32_t, modulo 2^32),
 * QK_HSUM4(out, a0, a1, a2, a3) (optional: four such sums at once), QK_LOADW_PART(p, n)
 * (optional: n < QK_VL weights, the rest zero; without it the last K % QK_VL elements are summed
 * one by one), QK_JW and QK_IX (the tile: weight rows by rows of X, QK_IX at most 8) and
 * QK_PREFETCH(p) (a hint into L2, or nothing).
 *
 * One row of X (decode at batch 1) runs against 4 weight rows, which are read once each,
 * streaming; more rows (a batch of decoded sequences) in register tiles of QK_JW weight rows by
 * up to QK_IX rows of X, each weight vector loaded once for the tile's rows of X. Either way the
 * weights about QK_AHEAD bytes on are prefetched while a tile runs (streamed from memory, they
 * otherwise arrive too slowly for the arithmetic). */
#ifndef QK_NAME
#error "define QK_NAME and the vector macros before including quant_kernel.h"
#endif
#if QK_OFFSET && !defined(QK_LOADW_PART)
#error "QK_OFFSET needs QK_LOADW_PART: the scalar tail sums q w, not (w + 128) q"
#endif
#ifndef QK_CAT
#define QK_CAT2(a, b) a##b
#define QK_CAT(a, b) QK_CAT2(a, b)
#endif
#define QK_JMAX (QK_JW > 4 ? QK_JW : 4)

/* One tile: jw weight rows (at most QK_JMAX) against ix rows of X (at most QK_IX), jw, ix and
   prefetch constants where it is inlined; while it runs it prefetches the jw rows at `next`. */
static inline __attribute__((always_inline)) void QK_CAT(QK_NAME, _tile)(int jw, int ix, int prefetch, long K,
                                                                         float alpha, const uint8_t *X, long x_r,
                                                                         const float *xd, const int32_t *xs,
                                                                         const int8_t *W, const int8_t *next, long w_r,
                                                                         const float *scale, float *C, long c_x,
                                                                         long c_w, int overwrite) {
    QK_IVEC a[QK_JMAX][QK_IX];
#pragma GCC unroll 16
    for (int c = 0; c < jw; ++c)
#pragma GCC unroll 16
        for (int r = 0; r < ix; ++r) a[c][r] = QK_IZERO;
    long k = 0;
#define QK_STEP(LOAD)                                                                 \
    do {                                                                              \
        QK_IVEC w[QK_JMAX], wp[QK_JMAX];                                              \
        _Pragma("GCC unroll 16") for (int c = 0; c < jw; ++c) {                       \
            w[c] = LOAD;                                                              \
            wp[c] = QK_WPREP(w[c]);                                                   \
        }                                                                             \
        (void)wp;                                                                     \
        _Pragma("GCC unroll 16") for (int r = 0; r < ix; ++r) {                       \
            const QK_IVEC x = QK_LOADX(X + r * x_r + k);                              \
            _Pragma("GCC unroll 16") for (int c = 0; c < jw; ++c) a[c][r] = QK_DOT(a[c][r], x, w[c], wp[c]); \
        }                                                                             \
    } while (0)
    for (; k + QK_VL <= K; k += QK_VL) {
        if (prefetch && (k & (64 - QK_VL)) == 0) /* a cache line of each of the next tile's rows per 64 k */
#pragma GCC unroll 16
            for (int c = 0; c < jw; ++c) QK_PREFETCH(next + c * w_r + k);
        QK_STEP(QK_LOADW(W + c * w_r + k));
    }
#ifdef QK_LOADW_PART
    if (k < K) {
        QK_STEP(QK_LOADW_PART(W + c * w_r + k, K - k));
        k = K;
    }
#endif
#undef QK_STEP
    for (int c = 0; c < jw; ++c) {
        const int8_t *wc = W + c * w_r;
        uint32_t sums[QK_IX];
#ifdef QK_HSUM4
        if (ix % 4 == 0)
            for (int r = 0; r < ix; r += 4) QK_HSUM4(sums + r, a[c][r], a[c][r + 1], a[c][r + 2], a[c][r + 3]);
        else
#endif
            for (int r = 0; r < ix; ++r) sums[r] = QK_HSUM(a[c][r]);
        for (int r = 0; r < ix; ++r) {
            uint32_t u = sums[r] - (QK_OFFSET ? 128u * (uint32_t)xs[r] : 0u);
            for (long kk = k; kk < K; ++kk) /* the tail, without QK_LOADW_PART */
                u += (uint32_t)((int32_t)(int8_t)X[r * x_r + kk] * (int32_t)wc[kk]);
            const int32_t s = (int32_t)u; /* the exact sum, which fits (|S| <= 127 * 127 * K) */
            float *o = C + r * c_x + c * c_w;
            const float v = alpha * scale[c] * (xd[r] * (float)s);
            *o = overwrite ? v : *o + v;
        }
    }
}

/* jw weight rows (QK_JW or 1) against all M rows of X: tiles of QK_IX rows, then the rest in halves. */
static inline __attribute__((always_inline)) void QK_CAT(QK_NAME, _rows)(int jw, long M, long K, float alpha,
                                                                         const uint8_t *X, long x_r, const float *xd,
                                                                         const int32_t *xs, const int8_t *W,
                                                                         const int8_t *next, long w_r,
                                                                         const float *scale, float *C, long c_x,
                                                                         long c_w, int overwrite) {
    long i = 0;
#define QK_TILE_AT(IX)                                                                                                \
    QK_CAT(QK_NAME, _tile)(jw, IX, 1, K, alpha, X + i * x_r, x_r, xd + i, xs + i, W, i ? W : next, w_r, scale,      \
                           C + i * c_x, c_x, c_w, overwrite)
    for (; i + QK_IX <= M; i += QK_IX) QK_TILE_AT(QK_IX);
#if QK_IX > 4
    if (i + 4 <= M) QK_TILE_AT(4), i += 4;
#endif
#if QK_IX > 2
    if (i + 2 <= M) QK_TILE_AT(2), i += 2;
#endif
    if (i < M) QK_TILE_AT(1);
#undef QK_TILE_AT
}

/* How far ahead the weights are prefetched: tiles of `rows` weight rows, w_r bytes apart, that
   make about QK_AHEAD bytes (at least one tile). Into L2, not L1: on one Zen 4 core the batch-1
   product read 9 GB/s prefetching the next 3 KB into L1 and 17-20 GB/s prefetching 6-48 KB ahead
   into L2 (a STREAM-like read: 24-27 GB/s), the same at every distance in that range. */
enum { QK_AHEAD = 12288 };
static inline long QK_CAT(QK_NAME, _ahead)(long rows, long w_r) {
    const long bytes = rows * (w_r > 0 ? w_r : -w_r), tiles = bytes > 0 ? QK_AHEAD / bytes : 1;
    return tiles > 1 ? tiles : 1;
}

void QK_NAME(long M, long N, long K, float alpha, const uint8_t *X, long x_r, const float *xd, const int32_t *xs,
             const int8_t *W, long w_r, const float *scale, float *C, long c_x, long c_w, int overwrite) {
    long j = 0;
    if (M == 1) { /* 4 weight rows at a time, streamed, prefetching the rows QK_AHEAD bytes on: rows of a
                     few hundred bytes are too short for the hardware prefetcher */
        const long ahead = 4 * QK_CAT(QK_NAME, _ahead)(4, w_r);
        for (; j + 4 <= N; j += 4) /* (the last rows prefetch the last tile's) */
            QK_CAT(QK_NAME, _tile)(4, 1, 1, K, alpha, X, x_r, xd, xs, W + j * w_r,
                                   W + (j + ahead + 4 <= N ? j + ahead : N - 4) * w_r, w_r, scale + j, C + j * c_w,
                                   c_x, c_w, overwrite);
        for (; j < N; ++j)
            QK_CAT(QK_NAME, _tile)(1, 1, 0, K, alpha, X, x_r, xd, xs, W + j * w_r, W, w_r, scale + j, C + j * c_w,
                                   c_x, c_w, overwrite);
        return;
    }
    const long ahead = QK_JW * QK_CAT(QK_NAME, _ahead)(QK_JW, w_r);
    for (; j + QK_JW <= N; j += QK_JW) {
        const int8_t *w = W + j * w_r, *next = W + (j + ahead + QK_JW <= N ? j + ahead : N - QK_JW) * w_r;
        QK_CAT(QK_NAME, _rows)(QK_JW, M, K, alpha, X, x_r, xd, xs, w, next, w_r, scale + j, C + j * c_w, c_x, c_w,
                               overwrite);
    }
    for (; j < N; ++j)
        QK_CAT(QK_NAME, _rows)(1, M, K, alpha, X, x_r, xd, xs, W + j * w_r, W + j * w_r, w_r, scale + j,
                               C + j * c_w, c_x, c_w, overwrite);
}

#undef QK_JMAX
#undef QK_NAME
#undef QK_VL
#undef QK_IVEC
#undef QK_IZERO
#undef QK_LOADX
#undef QK_LOADW
#undef QK_LOADW_PART
#undef QK_WPREP
#undef QK_DOT
#undef QK_OFFSET
#undef QK_HSUM
#undef QK_HSUM4
#undef QK_JW
#undef QK_IX
#undef QK_PREFETCH
