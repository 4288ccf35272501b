/* test_attention.c - cannl_attention.h against a direct computation in long double (the full
 * score matrix, softmax, and its exact gradient), for float and double, causal or not, tiles
 * partly filled, strided rows, decode steps (one query at an offset), keyless queries and
 * sliding windows; and the decode step over a ring of keys against the forward kernel; and the
 * decode row over several heads (cannl_attention_decode_*) against the forward kernel, the same
 * bits for any split of its heads. */
#include "cannl_attention.h"
#include "rt_test.h"

#include <math.h>
#include <string.h>

typedef long double LD;

/* Deterministic values in [-1, 1). */
static double next_value(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / (double)(1ULL << 52) - 1.0;
}

typedef struct {
  cannl_attn_dims d;
  int64_t q_st, k_st, v_st, o_st;  /* row strides (>= row widths) */
} Case;

static int64_t first(const cannl_attn_dims *d, int64_t t) {
  if (!d->causal || d->window <= 0) return 0;
  int64_t s = d->q_offset + t - d->window + 1;
  return s < 0 ? 0 : s;
}

static int64_t seen(const cannl_attn_dims *d, int64_t t) {
  if (!d->causal) return d->tk;
  int64_t last = d->q_offset + t + 1;
  return last < 0 ? 0 : last > d->tk ? d->tk : last;
}

/* Reference forward and backward in long double: o, lse, and dq, dk, dv for the loss
 * sum(o * g). */
static void reference(const Case *c, const double *q, const double *k, const double *v, const double *g,
                      LD *o, LD *lse, LD *dq, LD *dk, LD *dv) {
  const cannl_attn_dims *d = &c->d;
  LD *p = calloc((size_t)d->tk, sizeof(LD));
  for (int64_t i = 0; i < d->tq * d->e; ++i) dq[i] = 0;
  for (int64_t i = 0; i < d->tk * d->e; ++i) dk[i] = 0;
  for (int64_t i = 0; i < d->tk * d->f; ++i) dv[i] = 0;
  for (int64_t t = 0; t < d->tq; ++t) {
    int64_t n = seen(d, t), j0 = first(d, t) < n ? first(d, t) : n;
    LD m = -INFINITY, sum = 0;
    for (int64_t j = j0; j < n; ++j) {
      LD s = 0;
      for (int64_t x = 0; x < d->e; ++x) s += (LD)q[t * c->q_st + x] * k[j * c->k_st + x];
      p[j] = s * (LD)d->scale;
      if (p[j] > m) m = p[j];
    }
    for (int64_t j = j0; j < n; ++j) sum += expl(p[j] - m);
    lse[t] = n > j0 ? m + logl(sum) : -INFINITY;
    for (int64_t j = j0; j < n; ++j) p[j] = expl(p[j] - m) / sum;
    for (int64_t x = 0; x < d->f; ++x) {
      LD acc = 0;
      for (int64_t j = j0; j < n; ++j) acc += p[j] * v[j * c->v_st + x];
      o[t * d->f + x] = acc;
    }
    /* d/dp[j] = g . v[j]; softmax backward: ds[j] = p[j] (dp[j] - sum_i p[i] dp[i]). */
    LD mean = 0;
    for (int64_t j = j0; j < n; ++j) {
      LD dp = 0;
      for (int64_t x = 0; x < d->f; ++x) dp += (LD)g[t * d->f + x] * v[j * c->v_st + x];
      mean += p[j] * dp;
    }
    for (int64_t j = j0; j < n; ++j) {
      LD dp = 0;
      for (int64_t x = 0; x < d->f; ++x) {
        dp += (LD)g[t * d->f + x] * v[j * c->v_st + x];
        dv[j * d->f + x] += p[j] * g[t * d->f + x];
      }
      LD ds = p[j] * (dp - mean) * (LD)d->scale;
      for (int64_t x = 0; x < d->e; ++x) {
        dq[t * d->e + x] += ds * k[j * c->k_st + x];
        dk[j * d->e + x] += ds * q[t * c->q_st + x];
      }
    }
  }
  free(p);
}

static double rel_err(LD got, LD want) {
  LD den = fabsl(want) > 1 ? fabsl(want) : 1;
  return (double)(fabsl(got - want) / den);
}

/* Runs one case in float (f32 = 1) or double; returns the largest relative error. */
static double run(const Case *c, int f32, uint64_t seed) {
  const cannl_attn_dims *d = &c->d;
  size_t nq = (size_t)(d->tq * c->q_st), nk = (size_t)(d->tk * c->k_st), nv = (size_t)(d->tk * c->v_st);
  size_t no = (size_t)(d->tq * c->o_st);
  double *q = malloc(nq * 8), *k = malloc(nk * 8), *v = malloc(nv * 8), *g = malloc((size_t)(d->tq * d->f) * 8);
  for (size_t i = 0; i < nq; ++i) q[i] = 2 * next_value(&seed);
  for (size_t i = 0; i < nk; ++i) k[i] = 2 * next_value(&seed);
  for (size_t i = 0; i < nv; ++i) v[i] = next_value(&seed);
  for (int64_t i = 0; i < d->tq * d->f; ++i) g[i] = next_value(&seed);
  LD *o = malloc((size_t)(d->tq * d->f) * sizeof(LD)), *lse = malloc((size_t)d->tq * sizeof(LD));
  LD *dq = malloc((size_t)(d->tq * d->e) * sizeof(LD)), *dk = malloc((size_t)(d->tk * d->e) * sizeof(LD));
  LD *dv = malloc((size_t)(d->tk * d->f) * sizeof(LD));
  reference(c, q, k, v, g, o, lse, dq, dk, dv);

  /* The kernel's gradients accumulate: start them at 1 and subtract it again. */
  double *got_o = malloc(no * 8), *got_lse = malloc((size_t)d->tq * 8), *got_dq = malloc(nq * 8);
  double *got_dk = malloc(nk * 8), *got_dv = malloc(nv * 8), *gs = malloc((size_t)(d->tq * c->o_st) * 8);
  for (int64_t t = 0; t < d->tq; ++t)
    for (int64_t x = 0; x < d->f; ++x) gs[t * c->o_st + x] = g[t * d->f + x];
  if (f32) {
    float *fq = malloc(nq * 4), *fk = malloc(nk * 4), *fv = malloc(nv * 4), *fo = malloc(no * 4);
    float *fl = malloc((size_t)d->tq * 4), *fdel = malloc((size_t)d->tq * 4), *fg = malloc(no * 4);
    float *fdq = malloc(nq * 4), *fdk = malloc(nk * 4), *fdv = malloc(nv * 4);
    for (size_t i = 0; i < nq; ++i) fq[i] = (float)q[i], fdq[i] = 1;
    for (size_t i = 0; i < nk; ++i) fk[i] = (float)k[i], fdk[i] = 1;
    for (size_t i = 0; i < nv; ++i) fv[i] = (float)v[i], fdv[i] = 1;
    for (size_t i = 0; i < no; ++i) fg[i] = (float)gs[i];
    cannl_attention_forward_f32(d, fq, c->q_st, fk, c->k_st, fv, c->v_st, fo, c->o_st, fl);
    cannl_attention_backward_f32(d, fq, c->q_st, fk, c->k_st, fv, c->v_st, fo, c->o_st, fg, c->o_st, fl, fdel,
                                 fdq, c->q_st, fdk, c->k_st, fdv, c->v_st);
    for (size_t i = 0; i < no; ++i) got_o[i] = fo[i];
    for (int64_t i = 0; i < d->tq; ++i) got_lse[i] = fl[i];
    for (size_t i = 0; i < nq; ++i) got_dq[i] = (double)fdq[i] - 1;
    for (size_t i = 0; i < nk; ++i) got_dk[i] = (double)fdk[i] - 1;
    for (size_t i = 0; i < nv; ++i) got_dv[i] = (double)fdv[i] - 1;
    free(fq), free(fk), free(fv), free(fo), free(fl), free(fdel), free(fg), free(fdq), free(fdk), free(fdv);
  } else {
    double *del = malloc((size_t)d->tq * 8);
    for (size_t i = 0; i < nq; ++i) got_dq[i] = 1;
    for (size_t i = 0; i < nk; ++i) got_dk[i] = 1;
    for (size_t i = 0; i < nv; ++i) got_dv[i] = 1;
    cannl_attention_forward_f64(d, q, c->q_st, k, c->k_st, v, c->v_st, got_o, c->o_st, got_lse);
    cannl_attention_backward_f64(d, q, c->q_st, k, c->k_st, v, c->v_st, got_o, c->o_st, gs, c->o_st, got_lse, del,
                                 got_dq, c->q_st, got_dk, c->k_st, got_dv, c->v_st);
    for (size_t i = 0; i < nq; ++i) got_dq[i] -= 1;
    for (size_t i = 0; i < nk; ++i) got_dk[i] -= 1;
    for (size_t i = 0; i < nv; ++i) got_dv[i] -= 1;
    free(del);
  }
  double worst = 0;
#define TRACK(got, want)                     \
  do {                                       \
    double e_ = rel_err((got), (want));      \
    if (!(e_ <= worst)) worst = e_;          \
  } while (0)
  for (int64_t t = 0; t < d->tq; ++t) {
    if (isinf(lse[t])) CHECK(isinf(got_lse[t]) && got_lse[t] < 0);
    else TRACK(got_lse[t], lse[t]);
    for (int64_t x = 0; x < d->f; ++x) TRACK(got_o[t * c->o_st + x], o[t * d->f + x]);
    for (int64_t x = 0; x < d->e; ++x) TRACK(got_dq[t * c->q_st + x], dq[t * d->e + x]);
  }
  for (int64_t j = 0; j < d->tk; ++j) {
    for (int64_t x = 0; x < d->e; ++x) TRACK(got_dk[j * c->k_st + x], dk[j * d->e + x]);
    for (int64_t x = 0; x < d->f; ++x) TRACK(got_dv[j * c->v_st + x], dv[j * d->f + x]);
  }
#undef TRACK
  free(q), free(k), free(v), free(g), free(o), free(lse), free(dq), free(dk), free(dv);
  free(got_o), free(got_lse), free(got_dq), free(got_dk), free(got_dv), free(gs);
  return worst;
}

/* The decode step over a ring (cannl_attention_ring_*): a query at each position pos of a
 * sequence of `len` keys, the keys of positions 0 .. pos written into a ring of `rows` rows
 * (position s in row s % rows), against the forward kernel on the whole sequence at q_offset
 * pos. Returns the largest relative difference in double; *e32 that in float. */
static double run_ring(int64_t len, int64_t rows, int64_t window, int64_t e, int64_t f, uint64_t seed, double *e32) {
  double *q = malloc((size_t)(len * e) * 8), *k = malloc((size_t)(len * e) * 8), *v = malloc((size_t)(len * f) * 8);
  double *rk = malloc((size_t)(rows * e) * 8), *rv = malloc((size_t)(rows * f) * 8);
  float *fq = malloc((size_t)e * 4), *frk = malloc((size_t)(rows * e) * 4), *frv = malloc((size_t)(rows * f) * 4);
  for (int64_t i = 0; i < len * e; ++i) q[i] = 2 * next_value(&seed), k[i] = 2 * next_value(&seed);
  for (int64_t i = 0; i < len * f; ++i) v[i] = next_value(&seed);
  double worst = 0, worst32 = 0, o[64], lse, ro[64], rlse;
  float fo[64], flse;
  for (int64_t pos = 0; pos < len; ++pos) {
    for (int64_t x = 0; x < e; ++x) rk[(pos % rows) * e + x] = k[pos * e + x], frk[(pos % rows) * e + x] = (float)k[pos * e + x];
    for (int64_t x = 0; x < f; ++x) rv[(pos % rows) * f + x] = v[pos * f + x], frv[(pos % rows) * f + x] = (float)v[pos * f + x];
    for (int64_t x = 0; x < e; ++x) fq[x] = (float)q[pos * e + x];
    const cannl_attn_dims full = {1, pos + 1, e, f, pos, 1, 0.4, window};
    const cannl_attn_dims ring = {1, rows, e, f, pos, 1, 0.4, window};
    cannl_attention_forward_f64(&full, q + pos * e, e, k, e, v, f, o, f, &lse);
    cannl_attention_ring_f64(&ring, q + pos * e, rk, e, rv, f, ro, &rlse);
    cannl_attention_ring_f32(&ring, fq, frk, e, frv, f, fo, &flse);
    double d = fabs(rlse - lse) / fmax(1, fabs(lse)), d32 = fabs(flse - lse) / fmax(1, fabs(lse));
    for (int64_t x = 0; x < f; ++x) {
      d = fmax(d, fabs(ro[x] - o[x]) / fmax(1, fabs(o[x])));
      d32 = fmax(d32, fabs(fo[x] - o[x]) / fmax(1, fabs(o[x])));
    }
    worst = fmax(worst, d), worst32 = fmax(worst32, d32);
  }
  *e32 = worst32;
  free(q), free(k), free(v), free(rk), free(rv), free(fq), free(frk), free(frv);
  return worst;
}

/* A decode row over `heads` query heads in groups of `group` (cannl_attention_decode_*): a fused
 * cache row per position [queries | keys | values] (kv = heads / group key/value heads), the
 * position s in row s % rows (a ring when rows < len); at each position pos (causal), or once over
 * every row (not causal: rows = len), against the forward kernel per head on the whole sequence
 * in double. Returns the largest relative difference in double; *e32 that in float. Also every
 * head computed alone, and the heads split in two, must give the same bits as all of them. */
static double run_decode(int64_t heads, int64_t group, int64_t e, int64_t f, int64_t len, int64_t rows,
                         int64_t window, int causal, uint64_t seed, double *e32) {
  const int64_t kv = heads / group, w = heads * e + kv * e + kv * f, ko = heads * e, vo = heads * e + kv * e;
  double *q = malloc((size_t)(len * heads * e) * 8), *k = malloc((size_t)(len * kv * e) * 8);
  double *v = malloc((size_t)(len * kv * f) * 8), *c = calloc((size_t)(rows * w), 8);
  float *fq = malloc((size_t)(heads * e) * 4), *fc = calloc((size_t)(rows * w), 4);
  double *o = malloc((size_t)(heads * f) * 8), *ro = malloc((size_t)(heads * f) * 8);
  double *ho = malloc((size_t)(heads * f) * 8);
  float *fo = malloc((size_t)(heads * f) * 4), *fho = malloc((size_t)(heads * f) * 4);
  double lse[64], rl[64], hl[64];
  float fl[64], fhl[64];
  for (int64_t i = 0; i < len * heads * e; ++i) q[i] = 2 * next_value(&seed);
  for (int64_t i = 0; i < len * kv * e; ++i) k[i] = 2 * next_value(&seed);
  for (int64_t i = 0; i < len * kv * f; ++i) v[i] = next_value(&seed);
  double worst = 0, worst32 = 0;
  for (int64_t pos = 0; pos < len; ++pos) {
    double *cr = c + (pos % rows) * w;
    float *fcr = fc + (pos % rows) * w;
    for (int64_t x = 0; x < kv * e; ++x) cr[ko + x] = k[pos * kv * e + x], fcr[ko + x] = (float)k[pos * kv * e + x];
    for (int64_t x = 0; x < kv * f; ++x) cr[vo + x] = v[pos * kv * f + x], fcr[vo + x] = (float)v[pos * kv * f + x];
    if (!causal && pos < len - 1) continue;
    const double *qp = q + pos * heads * e;
    for (int64_t x = 0; x < heads * e; ++x) fq[x] = (float)qp[x];
    const cannl_attn_dims full = {1, causal ? pos + 1 : len, e, f, pos, causal, 0.3, window};
    const cannl_attn_dims dd = {1, rows, e, f, pos, causal, 0.3, window};
    for (int64_t h = 0; h < heads; ++h)
      cannl_attention_forward_f64(&full, qp + h * e, e, k + (h / group) * e, kv * e, v + (h / group) * f, kv * f,
                                  ro + h * f, f, rl + h);
    cannl_attention_decode_f64(&dd, 0, heads, group, qp, c + ko, w, c + vo, w, o, lse, 1);
    cannl_attention_decode_f32(&dd, 0, heads, group, fq, fc + ko, w, fc + vo, w, fo, fl, 1);
    for (int64_t h = 0; h < heads; ++h) {
      worst = fmax(worst, fabs(lse[h] - rl[h]) / fmax(1, fabs(rl[h])));
      worst32 = fmax(worst32, fabs(fl[h] - rl[h]) / fmax(1, fabs(rl[h])));
      for (int64_t x = 0; x < f; ++x) {
        const double r = ro[h * f + x];
        worst = fmax(worst, fabs(o[h * f + x] - r) / fmax(1, fabs(r)));
        worst32 = fmax(worst32, fabs(fo[h * f + x] - r) / fmax(1, fabs(r)));
      }
    }
    /* each head alone, then the heads split at heads / 2 + 1 */
    for (int split = 0; split < 2; ++split) {
      const int64_t cut = heads / 2 + 1 < heads ? heads / 2 + 1 : heads;
      for (int64_t h = 0; h < heads; h += split ? cut : 1) {
        const int64_t h1 = split ? (h + cut < heads ? h + cut : heads) : h + 1;
        cannl_attention_decode_f64(&dd, h, h1, group, qp, c + ko, w, c + vo, w, ho, hl, 1);
        cannl_attention_decode_f32(&dd, h, h1, group, fq, fc + ko, w, fc + vo, w, fho, fhl, 1);
      }
      CHECK(memcmp(ho, o, (size_t)(heads * f) * 8) == 0 && memcmp(hl, lse, (size_t)heads * 8) == 0);
      CHECK(memcmp(fho, fo, (size_t)(heads * f) * 4) == 0 && memcmp(fhl, fl, (size_t)heads * 4) == 0);
    }
  }
  *e32 = worst32;
  free(q), free(k), free(v), free(c), free(fq), free(fc), free(o), free(ro), free(ho), free(fo), free(fho);
  return worst;
}

/* One query (tq = 1: the decode step's fast path) against the tiled path: the same query as the
 * second row of a two-query call (q_offset one less; each row's result is its own), in a fused
 * buffer of `heads` query heads that share one key/value head (grouped-query attention: one call
 * per query head, the rows strided views). Returns the largest relative difference of o and
 * lse; *e32 that in float. A query that sees no key must give o = 0 and lse = -inf in both. */
static double run_single(const Case *c, int64_t heads, uint64_t seed, double *e32) {
  const cannl_attn_dims *d = &c->d;
  const int64_t qw = heads * c->q_st; /* a row of the fused query buffer: the heads side by side */
  const size_t nq = (size_t)(2 * qw), nk = (size_t)(d->tk * c->k_st), nv = (size_t)(d->tk * c->v_st);
  double *q = malloc(nq * 8), *k = malloc(nk * 8), *v = malloc(nv * 8);
  float *fq = malloc(nq * 4), *fk = malloc(nk * 4), *fv = malloc(nv * 4);
  for (size_t i = 0; i < nq; ++i) q[i] = 2 * next_value(&seed), fq[i] = (float)q[i];
  for (size_t i = 0; i < nk; ++i) k[i] = 2 * next_value(&seed), fk[i] = (float)k[i];
  for (size_t i = 0; i < nv; ++i) v[i] = next_value(&seed), fv[i] = (float)v[i];
  cannl_attn_dims two = *d;
  two.tq = 2, two.q_offset = d->q_offset - 1;
  double worst = 0, worst32 = 0, o1[2 * 600], o2[2 * 600], l1[2], l2[2];
  float fo1[2 * 600], fo2[2 * 600], fl1[2], fl2[2];
  for (int64_t h = 0; h < heads; ++h) {
    const double *qh = q + h * c->q_st;
    const float *fqh = fq + h * c->q_st;
    cannl_attention_forward_f64(d, qh + qw, qw, k, c->k_st, v, c->v_st, o1, c->o_st, l1);
    cannl_attention_forward_f64(&two, qh, qw, k, c->k_st, v, c->v_st, o2, c->o_st, l2);
    cannl_attention_forward_f32(d, fqh + qw, qw, fk, c->k_st, fv, c->v_st, fo1, c->o_st, fl1);
    cannl_attention_forward_f32(&two, fqh, qw, fk, c->k_st, fv, c->v_st, fo2, c->o_st, fl2);
    if (isinf(l2[1]) || isinf(fl2[1])) {
      CHECK(isinf(l1[0]) && l1[0] < 0 && isinf(l2[1]) && l2[1] < 0);
      CHECK(isinf(fl1[0]) && fl1[0] < 0 && isinf(fl2[1]) && fl2[1] < 0);
      for (int64_t x = 0; x < d->f; ++x) CHECK(o1[x] == 0 && fo1[x] == 0 && o2[c->o_st + x] == 0);
      continue;
    }
    worst = fmax(worst, fabs(l1[0] - l2[1]) / fmax(1, fabs(l2[1])));
    worst32 = fmax(worst32, fabs((double)fl1[0] - fl2[1]) / fmax(1, fabs(fl2[1])));
    for (int64_t x = 0; x < d->f; ++x) {
      worst = fmax(worst, fabs(o1[x] - o2[c->o_st + x]) / fmax(1, fabs(o2[c->o_st + x])));
      worst32 = fmax(worst32, fabs((double)fo1[x] - fo2[c->o_st + x]) / fmax(1, fabs(fo2[c->o_st + x])));
    }
  }
  *e32 = worst32;
  free(q), free(k), free(v), free(fq), free(fk), free(fv);
  return worst;
}

int main(void) {
  /* tq, tk, e, f, q_offset, causal, scale, window; strides */
  const Case cases[] = {
      {{1, 1, 4, 4, 0, 1, 0.5, 0}, 4, 4, 4, 4},
      {{7, 7, 8, 8, 0, 1, 0.35355339059327373, 0}, 8, 8, 8, 8},
      {{64, 64, 16, 16, 0, 1, 0.25, 0}, 16, 16, 16, 16},       /* exactly one tile */
      {{65, 65, 16, 16, 0, 1, 0.25, 0}, 16, 16, 16, 16},       /* one more than a tile */
      {{130, 130, 12, 20, 0, 1, 0.3, 0}, 36, 36, 36, 20},      /* strided rows (a qkv view), e != f */
      {{33, 50, 9, 5, 0, 0, 0.4, 0}, 9, 9, 5, 5},              /* not causal, tq != tk, odd widths */
      {{1, 97, 16, 16, 96, 1, 0.25, 0}, 16, 16, 16, 16},       /* a decode step at position 96 */
      {{5, 40, 8, 8, 35, 1, 0.3, 0}, 8, 8, 8, 8},              /* a prefill continuing at 35 */
      {{6, 4, 8, 8, -3, 1, 0.3, 0}, 8, 8, 8, 8},               /* the first queries see no key */
      {{200, 200, 64, 64, 0, 1, 0.125, 0}, 192, 192, 192, 64}, /* GPT-like */
      {{90, 90, 100, 72, 0, 1, 0.1, 0}, 100, 100, 72, 72},     /* tiles of 40 keys (wide rows) */
      {{70, 70, 600, 520, 0, 1, 0.04, 0}, 600, 600, 520, 520}, /* rows too wide to transpose */
      {{150, 140, 40, 24, 0, 0, 0.2, 0}, 120, 120, 120, 24},   /* not causal, several tiles and chunks */
      {{70, 130, 32, 32, 60, 1, 0.2, 0}, 96, 96, 96, 32},      /* a prefill at 60, across tiles */
      /* sliding windows: within a tile, across tiles and chunks, wider than the sequence, of one
       * key, a prefill at 60, a decode step at 96, rows too wide to transpose */
      {{9, 9, 8, 8, 0, 1, 0.3, 3}, 8, 8, 8, 8},
      {{150, 150, 16, 12, 0, 1, 0.25, 40}, 48, 48, 48, 12},
      {{70, 70, 16, 16, 0, 1, 0.25, 100}, 16, 16, 16, 16},
      {{40, 40, 8, 8, 0, 1, 0.3, 1}, 8, 8, 8, 8},
      {{70, 130, 32, 32, 60, 1, 0.2, 50}, 96, 96, 96, 32},
      {{1, 97, 16, 16, 96, 1, 0.25, 20}, 16, 16, 16, 16},
      {{70, 70, 600, 520, 0, 1, 0.04, 33}, 600, 600, 520, 520},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    double e64 = run(&cases[i], 0, 1000 + i), e32 = run(&cases[i], 1, 2000 + i);
    printf("case %zu (tq %lld tk %lld e %lld f %lld causal %d window %lld): f64 %.2e, f32 %.2e\n", i,
           (long long)cases[i].d.tq, (long long)cases[i].d.tk, (long long)cases[i].d.e, (long long)cases[i].d.f,
           cases[i].d.causal, (long long)cases[i].d.window, e64, e32);
    CHECK(e64 < 1e-12);
    CHECK(e32 < 2e-5);
  }
  /* decode over a ring: the whole sequence kept (rows = len), a window's ring (rows = W), a
   * ring longer than the window */
  const int64_t rings[][5] = {{30, 30, 0, 8, 8}, {30, 7, 7, 8, 5}, {40, 16, 9, 12, 12}};
  for (size_t i = 0; i < sizeof rings / sizeof rings[0]; ++i) {
    const int64_t *r = rings[i];
    double e32 = 0, e = run_ring(r[0], r[1], r[2], r[3], r[4], 3000 + i, &e32);
    printf("ring %zu (len %lld rows %lld window %lld): f64 %.2e, f32 %.2e\n", i, (long long)r[0], (long long)r[1],
           (long long)r[2], e, e32);
    CHECK(e < 1e-12);
    CHECK(e32 < 2e-5);
  }
  /* a decode row over several heads: GPT-like, grouped-query, a window's ring, a ring longer than
   * the window, odd widths (the vectors' tails), more heads than a chunk, not causal */
  const int64_t dec[][8] = {{4, 1, 64, 64, 40, 40, 0, 1},  {6, 3, 16, 16, 37, 37, 0, 1}, {4, 2, 8, 8, 30, 7, 7, 1},
                            {3, 1, 12, 12, 45, 20, 9, 1},  {5, 5, 13, 11, 19, 19, 0, 1}, {20, 2, 8, 8, 21, 21, 0, 1},
                            {3, 1, 16, 8, 33, 33, 0, 0}, {2, 1, 8, 8, 40, 40, 1, 1}};
  for (size_t i = 0; i < sizeof dec / sizeof dec[0]; ++i) {
    const int64_t *r = dec[i];
    double e32 = 0, e = run_decode(r[0], r[1], r[2], r[3], r[4], r[5], r[6], (int)r[7], 5000 + i, &e32);
    printf("decode %zu (heads %lld group %lld e %lld f %lld len %lld rows %lld window %lld causal %d): "
           "f64 %.2e, f32 %.2e\n", i, (long long)r[0], (long long)r[1], (long long)r[2], (long long)r[3],
           (long long)r[4], (long long)r[5], (long long)r[6], (int)r[7], e, e32);
    CHECK(e < 1e-12);
    CHECK(e32 < 2e-5);
  }
  CHECK(cannl_attention_decode_parts(8, 12, 0) == 1);
  for (int64_t rows = 1; rows <= 9; ++rows) {
    const int64_t p = cannl_attention_decode_parts(rows, 12, 1);
    CHECK(p >= 1 && p <= 12);
  }
  CHECK(cannl_attention_decode_parts(1, 1, 1) == 1);
  /* one query against the tiled path: q_st here is the offset between query heads in the
   * fused row; decode at several positions (tiles partly filled, the 4-key blocks' tails), odd
   * widths (the vectors' tails), windows, not causal, no key seen, rows too wide to transpose */
  const struct { Case c; int64_t heads; } singles[] = {
      {{{1, 97, 16, 16, 96, 1, 0.25, 0}, 16, 48, 48, 16}, 1},
      {{{1, 200, 64, 64, 130, 1, 0.125, 0}, 64, 192, 192, 64}, 4}, /* GPT-like qkv view, 4 heads per kv head */
      {{{1, 200, 64, 64, 199, 1, 0.125, 0}, 64, 64, 64, 64}, 2},
      {{{1, 70, 13, 11, 66, 1, 0.3, 0}, 13, 13, 11, 11}, 3},      /* odd widths */
      {{{1, 150, 16, 12, 140, 1, 0.25, 40}, 16, 48, 48, 12}, 2},  /* a window across tiles */
      {{{1, 150, 16, 12, 100, 1, 0.25, 1}, 16, 48, 48, 12}, 1},   /* a window of one key */
      {{{1, 50, 9, 5, 0, 0, 0.4, 0}, 9, 9, 5, 5}, 2},             /* not causal */
      {{{1, 8, 8, 8, -1, 1, 0.3, 0}, 8, 8, 8, 8}, 1},             /* sees no key */
      {{{1, 3, 8, 8, 0, 1, 0.3, 0}, 8, 8, 8, 8}, 1},              /* the first position */
      {{{1, 90, 600, 520, 77, 1, 0.04, 33}, 600, 600, 520, 520}, 1},
  };
  for (size_t i = 0; i < sizeof singles / sizeof singles[0]; ++i) {
    const cannl_attn_dims *d = &singles[i].c.d;
    double e32 = 0, e = run_single(&singles[i].c, singles[i].heads, 4000 + i, &e32);
    printf("single %zu (tk %lld e %lld f %lld at %lld causal %d window %lld heads %lld): f64 %.2e, f32 %.2e\n", i,
           (long long)d->tk, (long long)d->e, (long long)d->f, (long long)d->q_offset, d->causal,
           (long long)d->window, (long long)singles[i].heads, e, e32);
    CHECK(e < 1e-12);
    CHECK(e32 < 1e-5);
  }
  return rt_finish("test_attention");
}
