/* attention_impl.h - the body of cannl_attention.h's functions for one element type. Included by
 * attention.c once per type with R (float or double), SFX (f32 or f64), EXP and LOG defined. */

#define CANNL__CAT2(a, b) a##b
#define CANNL__CAT(a, b) CANNL__CAT2(a, b)
#define FN(name) CANNL__CAT(cannl_attention_##name##_, SFX)
#define DOT CANNL__CAT(attn_dot_, SFX)
#define AXPY CANNL__CAT(attn_axpy_, SFX)
#define SCALE CANNL__CAT(attn_scale_, SFX)

/* x . y over n values: 8 partial sums in a fixed order (vectorisable without reassociating). */
static R DOT(const R *x, const R *y, int64_t n) {
  R part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) part[l] += x[i + l] * y[i + l];
  for (int l = 0; i < n; ++i, ++l) part[l] += x[i] * y[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

/* y += a x over n values. */
static void AXPY(R *restrict y, R a, const R *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

static void SCALE(R *y, R a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

void FN(forward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                 const R *v, int64_t v_st, R *o, int64_t o_st, R *lse) {
  const R scale = (R)d->scale;
  R s[CANNL_ATTN_TILE];
  for (int64_t t = 0; t < d->tq; ++t) {
    const R *qt = q + t * q_st;
    R *ot = o + t * o_st;
    const int64_t seen = cannl__attn_keys_seen(d, t);
    for (int64_t x = 0; x < d->f; ++x) ot[x] = 0;
    R m = -INFINITY, l = 0;
    for (int64_t s0 = 0; s0 < seen; s0 += CANNL_ATTN_TILE) {
      const int64_t nb = seen - s0 < CANNL_ATTN_TILE ? seen - s0 : CANNL_ATTN_TILE;
      R mb = m;
      for (int64_t j = 0; j < nb; ++j) {
        s[j] = scale * DOT(qt, k + (s0 + j) * k_st, d->e);
        mb = s[j] > mb ? s[j] : mb;
      }
      const R alpha = EXP(m - mb); /* 0 on the first tile (m = -inf) */
      l *= alpha;
      SCALE(ot, alpha, d->f);
      for (int64_t j = 0; j < nb; ++j) {
        const R p = EXP(s[j] - mb);
        l += p;
        AXPY(ot, p, v + (s0 + j) * v_st, d->f);
      }
      m = mb;
    }
    if (seen == 0) {
      lse[t] = -INFINITY;
      continue;
    }
    SCALE(ot, (R)1 / l, d->f);
    lse[t] = m + LOG(l);
  }
}

void FN(backward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                  const R *v, int64_t v_st, const R *o, int64_t o_st, const R *dout, int64_t do_st,
                  const R *lse, R *delta, R *dq, int64_t dq_st, R *dk, int64_t dk_st, R *dv,
                  int64_t dv_st) {
  const R scale = (R)d->scale;
  for (int64_t t = 0; t < d->tq; ++t) delta[t] = DOT(dout + t * do_st, o + t * o_st, d->f);
  for (int64_t t = 0; t < d->tq; ++t) {
    const int64_t seen = cannl__attn_keys_seen(d, t);
    const R *qt = q + t * q_st, *dot = dout + t * do_st;
    R *dqt = dq + t * dq_st;
    for (int64_t j = 0; j < seen; ++j) {
      const R *kj = k + j * k_st, *vj = v + j * v_st;
      const R p = EXP(scale * DOT(qt, kj, d->e) - lse[t]);
      AXPY(dv + j * dv_st, p, dot, d->f);
      const R ds = p * (DOT(dot, vj, d->f) - delta[t]) * scale;
      AXPY(dqt, ds, kj, d->e);
      AXPY(dk + j * dk_st, ds, qt, d->e);
    }
  }
}

#undef FN
#undef DOT
#undef AXPY
#undef SCALE
#undef CANNL__CAT
#undef CANNL__CAT2
