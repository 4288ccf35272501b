/* quant_kernel.h - one thread's product against int8 weight rows (quant.c), compiled once per
 * instruction set (quant.c for the baseline, quant_avx2.c and quant_avx512.c with their own
 * -march). Not installed.
 *
 * The includer defines QK_NAME (the function), QK_VL (floats per vector; 1: plain C), QK_VEC,
 * QK_ZERO, QK_LOADX(p) (QK_VL floats), QK_LOADW(p) (QK_VL int8 as floats), QK_FMA(a, b, c)
 * (a * b + c) and QK_HSUM(v) (the lanes' sum, as a float).
 *
 * C[i * c_x + j * c_w] (=|+=) alpha * scale[j] * sum_k X[i * x_r + k] * W[j * w_r + k] for
 * i < M, j < N: tiles of 4 rows of X against 2 weight rows (each weight vector converted once
 * for four rows); one row of X (decode's one-row products) against 4 weight rows, which are
 * read once each, streaming. Each element's sum: vector lanes over k in steps of QK_VL, the
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
    for (; j + 2 <= N; j += 2) {
        const int8_t *w0 = W + j * w_r, *w1 = w0 + w_r;
        long i = 0;
        for (; i + 4 <= M; i += 4) {
            const float *x0 = X + i * x_r, *x1 = x0 + x_r, *x2 = x1 + x_r, *x3 = x2 + x_r;
            QK_VEC a00 = QK_ZERO, a10 = QK_ZERO, a20 = QK_ZERO, a30 = QK_ZERO;
            QK_VEC a01 = QK_ZERO, a11 = QK_ZERO, a21 = QK_ZERO, a31 = QK_ZERO;
            long k = 0;
            for (; k + QK_VL <= K; k += QK_VL) {
                const QK_VEC v0 = QK_LOADW(w0 + k), v1 = QK_LOADW(w1 + k);
                QK_VEC x = QK_LOADX(x0 + k);
                a00 = QK_FMA(x, v0, a00);
                a01 = QK_FMA(x, v1, a01);
                x = QK_LOADX(x1 + k);
                a10 = QK_FMA(x, v0, a10);
                a11 = QK_FMA(x, v1, a11);
                x = QK_LOADX(x2 + k);
                a20 = QK_FMA(x, v0, a20);
                a21 = QK_FMA(x, v1, a21);
                x = QK_LOADX(x3 + k);
                a30 = QK_FMA(x, v0, a30);
                a31 = QK_FMA(x, v1, a31);
            }
            float s[4][2] = {{QK_HSUM(a00), QK_HSUM(a01)}, {QK_HSUM(a10), QK_HSUM(a11)},
                             {QK_HSUM(a20), QK_HSUM(a21)}, {QK_HSUM(a30), QK_HSUM(a31)}};
            const float *xs[4] = {x0, x1, x2, x3};
            for (int r = 0; r < 4; ++r) {
                for (long kk = k; kk < K; ++kk) {
                    s[r][0] += xs[r][kk] * (float)w0[kk];
                    s[r][1] += xs[r][kk] * (float)w1[kk];
                }
                QK_OUT(i + r, j, s[r][0]);
                QK_OUT(i + r, j + 1, s[r][1]);
            }
        }
        for (; i < M; ++i) {
            QK_OUT(i, j, QK_CAT(QK_NAME, _dot1)(X + i * x_r, w0, K));
            QK_OUT(i, j + 1, QK_CAT(QK_NAME, _dot1)(X + i * x_r, w1, K));
        }
    }
    for (; j < N; ++j)
        for (long i = 0; i < M; ++i) QK_OUT(i, j, QK_CAT(QK_NAME, _dot1)(X + i * x_r, W + j * w_r, K));
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
