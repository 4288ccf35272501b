/* attention_impl.h - the body of cannl_attention.h's functions for one element type. Included by
 * attention.c once per type with R (float or double), SFX (f32 or f64), EXP and LOG defined.
 *
 * Both passes walk the keys in tiles of KB (attn_tile): a tile of K (and, backward, of V) is
 * copied transposed into a stack buffer, zero-padded to a multiple of 8 keys, once per tile;
 * then, for each block of QB (4) queries that see the tile, their scores against the tile's keys
 * are one loop over the key index (q[t][x] broadcast times a row of the transposed tile:
 * vectorised across keys, no horizontal sums, each row loaded once for the block), and so are
 * the exponentials (vector exp); P V and the dk, dv updates likewise read each key's row once
 * per block. Forward keeps, per query, the
 * output row normalised so far and the running log-sum-exp in lse[t] (no other state): a new
 * tile of log-sum-exp Lb merges as L' = logaddexp(L, Lb), o' = o e^(L - L') + (sum p v) e^(mb - L').
 * Backward recomputes p = exp(scale q.k - lse) and adds into dq, dk and dv rows in place.
 * Every sum runs in one fixed order per (sequence, head) pair: thread-count independent. */

#define CANNL__CAT2(a, b) a##b
#define CANNL__CAT(a, b) CANNL__CAT2(a, b)
#define FN(name) CANNL__CAT(cannl_attention_##name##_, SFX)
#define DOT CANNL__CAT(attn_dot_, SFX)
#define TRANSPOSE CANNL__CAT(attn_transpose_, SFX)
#define SCORES CANNL__CAT(attn_scores_, SFX)

/* x . y over n values. */
static inline R DOT(const R *x, const R *y, int64_t n) {
  R acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * y[i];
  return acc;
}

/* Rows s0 .. s0 + nb of a (row stride st, width w) into t[x * kb + j], keys nb .. nb8 zero. */
static inline void TRANSPOSE(R *restrict t, const R *restrict a, int64_t st, int64_t w, int64_t s0, int64_t nb,
                             int64_t nb8, int64_t kb) {
  for (int64_t j = 0; j < nb; ++j) {
    const R *row = a + (s0 + j) * st;
    for (int64_t x = 0; x < w; ++x) t[x * kb + j] = row[x];
  }
  for (int64_t x = 0; x < w; ++x)
    for (int64_t j = nb; j < nb8; ++j) t[x * kb + j] = 0;
}

/* s[j] = row . key j for j < n8: from the transposed tile t when there is one, else from the
 * key rows k + j * k_st (widths beyond the stack buffer). */
static inline void SCORES(R *restrict s, const R *restrict row, const R *restrict t, int64_t kb, const R *k,
                          int64_t k_st, int64_t w, int64_t n8) {
  if (!t) {
    for (int64_t j = 0; j < n8; ++j) s[j] = DOT(row, k + j * k_st, w);
    return;
  }
  for (int64_t j = 0; j < n8; ++j) s[j] = 0;
  for (int64_t x = 0; x < w; ++x) {
    const R rx = row[x];
    const R *restrict tx = t + x * kb;
    for (int64_t j = 0; j < n8; ++j) s[j] += rx * tx[j];
  }
}

/* Scores of a block of QB queries (rows r[i]) against the tile: s[i * CANNL_ATTN_TILE + j] for
 * j < n8 (a transposed tile t: each of its rows loaded once for the QB queries). */
static inline void CANNL__CAT(attn_scores4_, SFX)(R *restrict s, const R *const r[QB], const R *restrict t, int64_t kb,
                                                 const R *k, int64_t k_st, int64_t w, int64_t n8) {
  if (!t) {
    for (int i = 0; i < QB; ++i) SCORES(s + i * CANNL_ATTN_TILE, r[i], NULL, kb, k, k_st, w, n8);
    return;
  }
  R *restrict s0 = s, *restrict s1 = s + CANNL_ATTN_TILE, *restrict s2 = s + 2 * CANNL_ATTN_TILE,
    *restrict s3 = s + 3 * CANNL_ATTN_TILE;
  for (int64_t j = 0; j < n8; ++j) s0[j] = s1[j] = s2[j] = s3[j] = 0;
  for (int64_t x = 0; x < w; ++x) {
    const R a0 = r[0][x], a1 = r[1][x], a2 = r[2][x], a3 = r[3][x];
    const R *restrict tx = t + x * kb;
    for (int64_t j = 0; j < n8; ++j) {
      const R kx = tx[j];
      s0[j] += a0 * kx;
      s1[j] += a1 * kx;
      s2[j] += a2 * kx;
      s3[j] += a3 * kx;
    }
  }
}
#define SCORES4 CANNL__CAT(attn_scores4_, SFX)

/* The queries of a block: QB rows from t (the last one repeated past tq, with no keys), and
 * how many keys of the tile at s0 (of nb) each sees; returns the most. */
static inline int64_t CANNL__CAT(attn_block_, SFX)(const cannl_attn_dims *d, int64_t t, int64_t s0, int64_t nb,
                                                  int64_t n[QB]) {
  int64_t most = 0;
  for (int i = 0; i < QB; ++i) {
    int64_t seen = t + i < d->tq ? cannl__attn_keys_seen(d, t + i) - s0 : 0;
    n[i] = seen < 0 ? 0 : seen < nb ? seen : nb;
    most = n[i] > most ? n[i] : most;
  }
  return most;
}
#define BLOCK CANNL__CAT(attn_block_, SFX)

CANNL_ATTN_MULTIVERSION
void FN(forward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                 const R *v, int64_t v_st, R *o, int64_t o_st, R *lse) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f, kb = attn_tile(e);
  R kt[CANNL_ATTN_BUF], s[QB * CANNL_ATTN_TILE], acc[CANNL_ATTN_BUF];
  const int use_acc = QB * f <= CANNL_ATTN_BUF;
  for (int64_t t = 0; t < d->tq; ++t) {
    lse[t] = -INFINITY;
    for (int64_t y = 0; y < f; ++y) o[t * o_st + y] = 0;
  }
  for (int64_t s0 = 0; s0 < d->tk; s0 += kb) {
    const int64_t nb = d->tk - s0 < kb ? d->tk - s0 : kb;
    const int64_t first = attn_first_query(d, s0);
    if (first >= d->tq) continue;
    const int use_t = e * kb <= CANNL_ATTN_BUF;
    if (use_t) TRANSPOSE(kt, k, k_st, e, s0, nb, (nb + 7) & ~(int64_t)7, kb);
    for (int64_t t = first; t < d->tq; t += QB) {
      int64_t n[QB];
      const int64_t most = BLOCK(d, t, s0, nb, n);
      const int64_t n8 = use_t ? (most + 7) & ~(int64_t)7 : most;
      const R *r[QB];
      for (int i = 0; i < QB; ++i) r[i] = q + (t + i < d->tq ? t + i : t) * q_st;
      SCORES4(s, r, use_t ? kt : NULL, kb, k + s0 * k_st, k_st, e, n8);
      R alpha[QB], beta[QB];
      for (int i = 0; i < QB; ++i) {
        R *si = s + i * CANNL_ATTN_TILE;
        R mb = -INFINITY, l = 0;
        for (int64_t j = 0; j < n[i]; ++j) {
          si[j] *= scale;
          mb = si[j] > mb ? si[j] : mb;
        }
        for (int64_t j = 0; j < n[i]; ++j) {
          si[j] = EXP(si[j] - mb);
          l += si[j];
        }
        for (int64_t j = n[i]; j < most; ++j) si[j] = 0;
        alpha[i] = 0, beta[i] = 0;
        if (n[i] == 0) continue;
        /* merge: L' = logaddexp(L, Lb) */
        const R lb = mb + LOG(l), la = lse[t + i];
        const R hi = la > lb ? la : lb, lo = la > lb ? lb : la;
        const R nl = lo == -INFINITY ? hi : hi + LOG((R)1 + EXP(lo - hi));
        alpha[i] = la == -INFINITY ? 0 : EXP(la - nl);
        beta[i] = EXP(mb - nl);
        lse[t + i] = nl;
      }
      if (use_acc) {
        R *restrict a0 = acc, *restrict a1 = acc + f, *restrict a2 = acc + 2 * f, *restrict a3 = acc + 3 * f;
        for (int64_t y = 0; y < f; ++y) a0[y] = a1[y] = a2[y] = a3[y] = 0;
        for (int64_t j = 0; j < most; ++j) {
          const R p0 = s[j], p1 = s[CANNL_ATTN_TILE + j], p2 = s[2 * CANNL_ATTN_TILE + j], p3 = s[3 * CANNL_ATTN_TILE + j];
          const R *restrict vj = v + (s0 + j) * v_st;
          for (int64_t y = 0; y < f; ++y) {
            const R vy = vj[y];
            a0[y] += p0 * vy;
            a1[y] += p1 * vy;
            a2[y] += p2 * vy;
            a3[y] += p3 * vy;
          }
        }
        for (int i = 0; i < QB; ++i) {
          if (n[i] == 0) continue;
          R *ot = o + (t + i) * o_st;
          for (int64_t y = 0; y < f; ++y) ot[y] = alpha[i] * ot[y] + beta[i] * acc[i * f + y];
        }
      } else {
        for (int i = 0; i < QB; ++i) {
          if (n[i] == 0) continue;
          R *ot = o + (t + i) * o_st;
          const R *si = s + i * CANNL_ATTN_TILE;
          for (int64_t y = 0; y < f; ++y) {
            R a = 0;
            for (int64_t j = 0; j < n[i]; ++j) a += si[j] * v[(s0 + j) * v_st + y];
            ot[y] = alpha[i] * ot[y] + beta[i] * a;
          }
        }
      }
    }
  }
}

CANNL_ATTN_MULTIVERSION
void FN(backward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                  const R *v, int64_t v_st, const R *o, int64_t o_st, const R *dout, int64_t do_st,
                  const R *lse, R *delta, R *dq, int64_t dq_st, R *dk, int64_t dk_st, R *dv,
                  int64_t dv_st) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f, kb = attn_tile(e > f ? e : f);
  R kt[CANNL_ATTN_BUF], vt[CANNL_ATTN_BUF], p[QB * CANNL_ATTN_TILE], ds[QB * CANNL_ATTN_TILE];
  for (int64_t t = 0; t < d->tq; ++t) delta[t] = DOT(dout + t * do_st, o + t * o_st, f);
  for (int64_t s0 = 0; s0 < d->tk; s0 += kb) {
    const int64_t nb = d->tk - s0 < kb ? d->tk - s0 : kb, nb8 = (nb + 7) & ~(int64_t)7;
    const int64_t first = attn_first_query(d, s0);
    if (first >= d->tq) continue;
    const int use_t = (e > f ? e : f) * kb <= CANNL_ATTN_BUF;
    if (use_t) {
      TRANSPOSE(kt, k, k_st, e, s0, nb, nb8, kb);
      TRANSPOSE(vt, v, v_st, f, s0, nb, nb8, kb);
    }
    for (int64_t t = first; t < d->tq; t += QB) {
      int64_t n[QB];
      const int64_t most = BLOCK(d, t, s0, nb, n);
      const int64_t n8 = use_t ? (most + 7) & ~(int64_t)7 : most;
      const R *qr[QB], *dr[QB];
      for (int i = 0; i < QB; ++i) {
        const int64_t ti = t + i < d->tq ? t + i : t;
        qr[i] = q + ti * q_st, dr[i] = dout + ti * do_st;
      }
      SCORES4(p, qr, use_t ? kt : NULL, kb, k + s0 * k_st, k_st, e, n8);
      SCORES4(ds, dr, use_t ? vt : NULL, kb, v + s0 * v_st, v_st, f, n8);
      for (int i = 0; i < QB; ++i) {
        R *pi = p + i * CANNL_ATTN_TILE, *dsi = ds + i * CANNL_ATTN_TILE;
        const R lt = n[i] ? lse[t + i] : 0, dt = n[i] ? delta[t + i] : 0;
        for (int64_t j = 0; j < n[i]; ++j) pi[j] = EXP(scale * pi[j] - lt);
        for (int64_t j = n[i]; j < n8; ++j) pi[j] = 0;
        for (int64_t j = 0; j < n8; ++j) dsi[j] = pi[j] * (dsi[j] - dt) * scale;
      }
      /* dv[j] += sum_i p[i][j] dout[i], dk[j] += sum_i ds[i][j] q[i] (keys no query of the block
       * sees have p = ds = 0 for all: skipped) */
      for (int64_t j = 0; j < most; ++j) {
        const R p0 = p[j], p1 = p[CANNL_ATTN_TILE + j], p2 = p[2 * CANNL_ATTN_TILE + j], p3 = p[3 * CANNL_ATTN_TILE + j];
        const R g0 = ds[j], g1 = ds[CANNL_ATTN_TILE + j], g2 = ds[2 * CANNL_ATTN_TILE + j], g3 = ds[3 * CANNL_ATTN_TILE + j];
        R *restrict dvj = dv + (s0 + j) * dv_st;
        R *restrict dkj = dk + (s0 + j) * dk_st;
        for (int64_t y = 0; y < f; ++y) dvj[y] += p0 * dr[0][y] + p1 * dr[1][y] + p2 * dr[2][y] + p3 * dr[3][y];
        for (int64_t x = 0; x < e; ++x) dkj[x] += g0 * qr[0][x] + g1 * qr[1][x] + g2 * qr[2][x] + g3 * qr[3][x];
      }
      for (int i = 0; i < QB; ++i) {
        if (n[i] == 0) continue;
        const R *dsi = ds + i * CANNL_ATTN_TILE;
        R *dqt = dq + (t + i) * dq_st;
        if (use_t) {
          for (int64_t x = 0; x < e; ++x) dqt[x] += DOT(dsi, kt + x * kb, n8);
        } else {
          for (int64_t j = 0; j < n[i]; ++j) {
            const R *kj = k + (s0 + j) * k_st;
            for (int64_t x = 0; x < e; ++x) dqt[x] += dsi[j] * kj[x];
          }
        }
      }
    }
  }
}

#undef SCORES4
#undef BLOCK
#undef FN
#undef DOT
#undef TRANSPOSE
#undef SCORES
#undef CANNL__CAT
#undef CANNL__CAT2
