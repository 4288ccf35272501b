/* quant_kernel.h - one thread's product against int8 weight rows (quant.c), compiled once per
 * instruction set (quant.c for the baseline, quant_avx2.c and quant_avx512.c with their own
 * -march). Not installed.
 *
 * The includer defines QK_NAME (the function), QK_VL (floats per vector; 1: plain C), QK_VEC,
 * QK_ZERO, QK_LOADX(p) (QK_VL floats), QK_LOADW(p) (QK_VL int8 as floats), QK_FMA(a, b, c)
 * (a * b + c), QK_HSUM(v) (the lanes' sum, as a float), QK_JW and QK_IX (the tile: weight rows
 * by rows of X, QK_IX at most 8) and QK_PREFETCH(p) (a hint to fetch p's cache line, or nothing).
 *
 * C[i * c_x + j * c_w] (=|+=) alpha * scale[j] * sum_k X[i * x_r + k] * W[j * w_r + k] for
 * i < M, j < N: one row of X (decode's one-row products) against 4 weight rows, which are read
 * once each, streaming; more rows (a batch of decoded sequences) in register tiles of QK_JW
 * weight rows by up to QK_IX rows of X (the includer's: 3 x 8 with AVX-512, 2 x 6 with AVX2),
 * each weight vector converted once for the tile's rows of X, the next tile's weights
 * prefetched (QK_PREFETCH). Each element's sum: vector lanes over k in steps of QK_VL, the
 * lanes added, then the tail in order; the same for every tile shape, so the result of an
 * element does not depend on M, N or the split between threads. */
#ifndef QK_NAME
#error "define QK_NAME and the vector macros before including quant_kernel.h"
#endif
#ifndef QK_CAT
#define QK_CAT2(a, b) a##b
#define QK_CAT(a, b) QK_CAT2(a, b)
#endif

static inline float QK_CAT(QK_NAME, _dot1)(const float *x, const int8_t *w, long K) {
    QK_VEC a = QK_ZERO;
    long k = 0;
    for (; k + QK_VL <= K; k += QK_VL) a = QK_FMA(QK_LOADX(x + k), QK_LOADW(w + k), a);
    float s = QK_HSUM(a);
    for (; k < K; ++k) s += x[k] * (float)w[k];
    return s;
}

/* One tile: jw weight rows (at most QK_JW) against ix rows of X (at most QK_IX), jw and ix constants
   where it is inlined: each weight vector converted once for the ix rows, each vector of X loaded once
   for the jw weight rows, jw * ix accumulators. Each element's sum in _dot1's order. While it runs it
   prefetches the jw rows at `next` (the next tile's weights, or W itself for the last): streamed from
   memory, the weights of an 8-row product arrive too slowly for the FMAs without it. */
static inline __attribute__((always_inline)) void QK_CAT(QK_NAME, _tile)(int jw, int ix, long K, float alpha,
                                                                         const float *X, long x_r, const int8_t *W,
                                                                         const int8_t *next, long w_r,
                                                                         const float *scale, float *C, long c_x,
                                                                         long c_w, int overwrite) {
    QK_VEC a[QK_JW][QK_IX];
#pragma GCC unroll 16
    for (int c = 0; c < jw; ++c)
#pragma GCC unroll 16
        for (int r = 0; r < ix; ++r) a[c][r] = QK_ZERO;
    long k = 0;
    for (; k + QK_VL <= K; k += QK_VL) {
        QK_VEC w[QK_JW];
#pragma GCC unroll 16
        for (int c = 0; c < jw; ++c) w[c] = QK_LOADW(W + c * w_r + k);
        if ((k & (64 - QK_VL)) == 0) /* a cache line of each of the next tile's rows per 64 k */
#pragma GCC unroll 16
            for (int c = 0; c < jw; ++c) QK_PREFETCH(next + c * w_r + k);
#pragma GCC unroll 16
        for (int r = 0; r < ix; ++r) {
            const QK_VEC x = QK_LOADX(X + r * x_r + k);
#pragma GCC unroll 16
            for (int c = 0; c < jw; ++c) a[c][r] = QK_FMA(x, w[c], a[c][r]);
        }
    }
    for (int c = 0; c < jw; ++c)
        for (int r = 0; r < ix; ++r) {
            const float *x = X + r * x_r;
            const int8_t *wc = W + c * w_r;
            float s = QK_HSUM(a[c][r]);
            for (long kk = k; kk < K; ++kk) s += x[kk] * (float)wc[kk];
            float *o = C + r * c_x + c * c_w;
            const float v = alpha * scale[c] * s;
            *o = overwrite ? v : *o + v;
        }
}

/* jw weight rows (QK_JW or 1) against all M rows of X: tiles of QK_IX rows, then the rest in halves. */
static inline __attribute__((always_inline)) void QK_CAT(QK_NAME, _rows)(int jw, long M, long K, float alpha,
                                                                         const float *X, long x_r, const int8_t *W,
                                                                         const int8_t *next, long w_r,
                                                                         const float *scale, float *C, long c_x,
                                                                         long c_w, int overwrite) {
    long i = 0;
#define QK_TILE_AT(IX)                                                                                              \
    QK_CAT(QK_NAME, _tile)(jw, IX, K, alpha, X + i * x_r, x_r, W, i ? W : next, w_r, scale, C + i * c_x, c_x, c_w, \
                           overwrite)
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

void QK_NAME(long M, long N, long K, float alpha, const float *X, long x_r, const int8_t *W, long w_r,
                    const float *scale, float *C, long c_x, long c_w, int overwrite) {
#define QK_OUT(i, j, s)                                                                 \
    do {                                                                                \
        float *c_ = C + (i) * c_x + (j) * c_w;                                          \
        const float v_ = alpha * scale[j] * (s);                                        \
        *c_ = overwrite ? v_ : *c_ + v_;                                                \
    } while (0)
    long j = 0;
    if (M == 1) {
        for (; j + 4 <= N; j += 4) {
            const int8_t *w0 = W + j * w_r, *w1 = w0 + w_r, *w2 = w1 + w_r, *w3 = w2 + w_r;
            QK_VEC a0 = QK_ZERO, a1 = QK_ZERO, a2 = QK_ZERO, a3 = QK_ZERO;
            long k = 0;
            for (; k + QK_VL <= K; k += QK_VL) {
                const QK_VEC x = QK_LOADX(X + k);
                a0 = QK_FMA(x, QK_LOADW(w0 + k), a0);
                a1 = QK_FMA(x, QK_LOADW(w1 + k), a1);
                a2 = QK_FMA(x, QK_LOADW(w2 + k), a2);
                a3 = QK_FMA(x, QK_LOADW(w3 + k), a3);
            }
            float s0 = QK_HSUM(a0), s1 = QK_HSUM(a1), s2 = QK_HSUM(a2), s3 = QK_HSUM(a3);
            for (; k < K; ++k) {
                s0 += X[k] * (float)w0[k];
                s1 += X[k] * (float)w1[k];
                s2 += X[k] * (float)w2[k];
                s3 += X[k] * (float)w3[k];
            }
            QK_OUT(0, j, s0);
            QK_OUT(0, j + 1, s1);
            QK_OUT(0, j + 2, s2);
            QK_OUT(0, j + 3, s3);
        }
        for (; j < N; ++j) QK_OUT(0, j, QK_CAT(QK_NAME, _dot1)(X, W + j * w_r, K));
        return;
    }
    for (; j + QK_JW <= N; j += QK_JW) {
        const int8_t *w = W + j * w_r, *next = j + 2 * QK_JW <= N ? w + QK_JW * w_r : w;
        QK_CAT(QK_NAME, _rows)(QK_JW, M, K, alpha, X, x_r, w, next, w_r, scale + j, C + j * c_w, c_x, c_w, overwrite);
    }
    for (; j < N; ++j)
        QK_CAT(QK_NAME, _rows)(1, M, K, alpha, X, x_r, W + j * w_r, W + j * w_r, w_r, scale + j, C + j * c_w, c_x, c_w,
                               overwrite);
#undef QK_OUT
}

#undef QK_NAME
#undef QK_VL
#undef QK_VEC
#undef QK_ZERO
#undef QK_LOADX
#undef QK_LOADW
#undef QK_FMA
#undef QK_HSUM
#undef QK_JW
#undef QK_IX
#undef QK_PREFETCH
