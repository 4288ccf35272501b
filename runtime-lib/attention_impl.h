/* attention_impl.h - the body of cannl_attention.h's functions for one element type. Included by
 * attention.c once per type with R (float or double), SFX (f32 or f64), EXP and LOG defined.
 *
 * Both passes walk the keys in tiles of KB (attn_tile): a tile of K (and, backward, of V) is
 * copied transposed into a stack buffer, zero-padded to a multiple of 8 keys, once per tile;
 * then, for each query that sees the tile, its scores against the tile's keys are one loop over
 * the key index (q[t][x] broadcast times a row of the transposed tile: vectorised across keys,
 * no horizontal sums), and so are the exponentials (vector exp). Forward keeps, per query, the
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

CANNL_ATTN_MULTIVERSION
void FN(forward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                 const R *v, int64_t v_st, R *o, int64_t o_st, R *lse) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f, kb = attn_tile(e);
  R kt[CANNL_ATTN_BUF], s[CANNL_ATTN_TILE], acc[CANNL_ATTN_BUF];
  R *accp = f <= CANNL_ATTN_BUF ? acc : NULL;
  for (int64_t t = 0; t < d->tq; ++t) {
    lse[t] = -INFINITY;
    for (int64_t y = 0; y < f; ++y) o[t * o_st + y] = 0;
  }
  for (int64_t s0 = 0; s0 < d->tk; s0 += kb) {
    const int64_t nb = d->tk - s0 < kb ? d->tk - s0 : kb;
    const int64_t t0 = attn_first_query(d, s0);
    if (t0 >= d->tq) continue;
    const int use_t = e * kb <= CANNL_ATTN_BUF;
    if (use_t) TRANSPOSE(kt, k, k_st, e, s0, nb, (nb + 7) & ~(int64_t)7, kb);
    for (int64_t t = t0; t < d->tq; ++t) {
      const int64_t seen = cannl__attn_keys_seen(d, t) - s0;
      const int64_t n = seen < nb ? seen : nb;
      const int64_t n8 = use_t ? (n + 7) & ~(int64_t)7 : n;
      const R *qt = q + t * q_st;
      R *ot = o + t * o_st;
      SCORES(s, qt, use_t ? kt : NULL, kb, k + s0 * k_st, k_st, e, n8);
      R mb = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        s[j] *= scale;
        mb = s[j] > mb ? s[j] : mb;
      }
      R l = 0;
      for (int64_t j = 0; j < n; ++j) {
        s[j] = EXP(s[j] - mb);
        l += s[j];
      }
      /* merge: L' = logaddexp(L, Lb) */
      const R lb = mb + LOG(l), la = lse[t];
      const R hi = la > lb ? la : lb, lo = la > lb ? lb : la;
      const R nl = lo == -INFINITY ? hi : hi + LOG((R)1 + EXP(lo - hi));
      const R alpha = la == -INFINITY ? 0 : EXP(la - nl), beta = EXP(mb - nl);
      lse[t] = nl;
      if (accp) {
        for (int64_t y = 0; y < f; ++y) accp[y] = 0;
        for (int64_t j = 0; j < n; ++j) {
          const R pj = s[j];
          const R *restrict vj = v + (s0 + j) * v_st;
          for (int64_t y = 0; y < f; ++y) accp[y] += pj * vj[y];
        }
        for (int64_t y = 0; y < f; ++y) ot[y] = alpha * ot[y] + beta * accp[y];
      } else {
        for (int64_t y = 0; y < f; ++y) {
          R a = 0;
          for (int64_t j = 0; j < n; ++j) a += s[j] * v[(s0 + j) * v_st + y];
          ot[y] = alpha * ot[y] + beta * a;
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
  R kt[CANNL_ATTN_BUF], vt[CANNL_ATTN_BUF], p[CANNL_ATTN_TILE], ds[CANNL_ATTN_TILE];
  for (int64_t t = 0; t < d->tq; ++t) delta[t] = DOT(dout + t * do_st, o + t * o_st, f);
  for (int64_t s0 = 0; s0 < d->tk; s0 += kb) {
    const int64_t nb = d->tk - s0 < kb ? d->tk - s0 : kb, nb8 = (nb + 7) & ~(int64_t)7;
    const int64_t t0 = attn_first_query(d, s0);
    if (t0 >= d->tq) continue;
    const int use_t = (e > f ? e : f) * kb <= CANNL_ATTN_BUF;
    if (use_t) {
      TRANSPOSE(kt, k, k_st, e, s0, nb, nb8, kb);
      TRANSPOSE(vt, v, v_st, f, s0, nb, nb8, kb);
    }
    for (int64_t t = t0; t < d->tq; ++t) {
      const int64_t seen = cannl__attn_keys_seen(d, t) - s0;
      const int64_t n = seen < nb ? seen : nb;
      const int64_t n8 = use_t ? (n + 7) & ~(int64_t)7 : n;
      const R *qt = q + t * q_st, *dot = dout + t * do_st;
      R *dqt = dq + t * dq_st;
      const R lt = lse[t], dt = delta[t];
      SCORES(p, qt, use_t ? kt : NULL, kb, k + s0 * k_st, k_st, e, n8);
      SCORES(ds, dot, use_t ? vt : NULL, kb, v + s0 * v_st, v_st, f, n8);
      for (int64_t j = 0; j < n; ++j) p[j] = EXP(scale * p[j] - lt);
      for (int64_t j = n; j < n8; ++j) p[j] = 0;
      for (int64_t j = 0; j < n8; ++j) ds[j] = p[j] * (ds[j] - dt) * scale;
      for (int64_t j = 0; j < n; ++j) {
        const R pj = p[j], dsj = ds[j];
        R *restrict dvj = dv + (s0 + j) * dv_st;
        R *restrict dkj = dk + (s0 + j) * dk_st;
        for (int64_t y = 0; y < f; ++y) dvj[y] += pj * dot[y];
        for (int64_t x = 0; x < e; ++x) dkj[x] += dsj * qt[x];
      }
      if (use_t) {
        for (int64_t x = 0; x < e; ++x) dqt[x] += DOT(ds, kt + x * kb, n8);
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const R dsj = ds[j];
          const R *kj = k + (s0 + j) * k_st;
          for (int64_t x = 0; x < e; ++x) dqt[x] += dsj * kj[x];
        }
      }
    }
  }
}

#undef FN
#undef DOT
#undef TRANSPOSE
#undef SCORES
#undef CANNL__CAT
#undef CANNL__CAT2
