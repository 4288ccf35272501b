/* attention_impl.h - the body of cannl_attention.h's functions for one element type, named
 * ATTN_PREFIX<name>_SFX. Included by attention_inst.h once per type with R (float or double), SFX
 * (f32 or f64), EXP and LOG defined.
 *
 * Every product of a (tile of ATTN_KB keys, chunk of ATTN_QC queries) pair is a small matrix
 * product (GEMM below: blocks of ATTN_MR rows x one or two vectors of columns, the accumulators
 * in registers, the reduction index outermost). The scores Q K^T (and, backward, dO V^T) read
 * the tile's keys packed transposed into a stack buffer (ATTN_XB of their columns at a time,
 * zero-padded to whole vectors). Rows up to ATTN_XB wide are copied into contiguous stack
 * blocks first (a chunk's queries, dO rows and outputs; a tile's keys and values) and dq, dk,
 * dv summed there, then added back once: rows of a fused qkv buffer lie a few KiB apart and
 * share a few cache sets. Wider rows are read and written in place. Causal masking trims each
 * block of ATTN_MR rows to the keys its last query sees (and dk, dv's blocks of keys to the
 * queries that see them); masked scores become p = 0.
 *
 * Forward walks the query chunks, and within one the key tiles, with a running maximum mx and
 * sum l = sum_j e^(s_j - mx) per query and o = sum_j e^(s_j - mx) v_j (rescaled by e^(mx - mx')
 * when the maximum grows); at the end o /= l and lse = mx + log l.
 * One query (tq = 1) takes ONE instead: the same running maximum and sum, without packing or copies.
 * Backward walks the key tiles, and within one the query chunks that see it: it recomputes
 * p = exp(scale q.k - lse), dP = dO V^T, dS = p (dP - delta) scale, then dv += P^T dO,
 * dk += dS^T Q, dq += dS K.
 * A sliding window (cannl_attn_dims.window) starts each chunk's tiles at its first query's first
 * key, zeroes the scores of the keys before each row's first, and ends each tile's walk of the
 * query chunks at the last query that sees one of its keys.
 * Every sum runs in one fixed order per (sequence, head) pair: thread-count independent. */

#define CANNL__CAT2(a, b) a##b
#define CANNL__CAT(a, b) CANNL__CAT2(a, b)
#define FN(name) CANNL__CAT(CANNL__CAT(ATTN_PREFIX, name##_), SFX)
#define VEC CANNL__CAT(attn_vec_, SFX)
#define VECU CANNL__CAT(attn_vecu_, SFX)
#define TILE CANNL__CAT(attn_tile_, SFX)
#define ROWS CANNL__CAT(attn_rows_, SFX)
#define GEMM CANNL__CAT(attn_gemm_, SFX)
#define PACK CANNL__CAT(attn_pack_, SFX)
#define SCORES CANNL__CAT(attn_scores_, SFX)
#define ROWMAX CANNL__CAT(attn_rowmax_, SFX)
#define COPY CANNL__CAT(attn_copy_, SFX)
#define ADDBACK CANNL__CAT(attn_addback_, SFX)
#define DOT4 CANNL__CAT(attn_dot4_, SFX)
#define AXPY CANNL__CAT(attn_axpy_, SFX)
#define ONE CANNL__CAT(attn_one_, SFX)

/* One vector of R (32 bytes: 8 floats or 4 doubles); a generic vector, lowered to what the
 * clone's instruction set has. */
typedef R VEC __attribute__((vector_size(ATTN_VBYTES)));
enum { CANNL__CAT(attn_vn_, SFX) = ATTN_VBYTES / sizeof(R) };
#define VN CANNL__CAT(attn_vn_, SFX)

/* The same, at any element's address (unaligned loads and stores, as __m256_u). */
typedef R VECU __attribute__((vector_size(ATTN_VBYTES), aligned(sizeof(R)), may_alias));
#define VLOAD(p) ((VEC)(*(const VECU *)(p)))
#define VSTORE(p, v) (*(VECU *)(p) = (v))

/* c[i * c_rs + y] (= or +=) sum_{x < kd} a[i * a_rs + x * a_cs] b[x * b_rs + y] for i < mr,
 * y < nv * VN; mr and nv are constants where this is inlined (the accumulators in registers). */
static inline __attribute__((always_inline)) void TILE(const int mr, const int nv, int64_t kd, const R *a,
                                                       int64_t a_rs, int64_t a_cs, const R *b, int64_t b_rs, R *c,
                                                       int64_t c_rs, int acc) {
  VEC cv[ATTN_MR][2];
  for (int i = 0; i < mr; ++i)
    for (int u = 0; u < nv; ++u) cv[i][u] = acc ? VLOAD(c + i * c_rs + u * VN) : (VEC){0};
  for (int64_t x = 0; x < kd; ++x) {
    VEC bv[2];
    for (int u = 0; u < nv; ++u) bv[u] = VLOAD(b + x * b_rs + u * VN);
    for (int i = 0; i < mr; ++i) {
      const VEC ai = (VEC){0} + a[i * a_rs + x * a_cs];
      for (int u = 0; u < nv; ++u) cv[i][u] += ai * bv[u];
    }
  }
  for (int i = 0; i < mr; ++i)
    for (int u = 0; u < nv; ++u) VSTORE(c + i * c_rs + u * VN, cv[i][u]);
}

/* TILE's product for mr (constant) rows and n columns: blocks of two vectors, one vector, then
 * the columns past the last whole vector one at a time. */
static inline __attribute__((always_inline)) void ROWS(const int mr, int64_t n, int64_t kd, const R *a, int64_t a_rs,
                                                       int64_t a_cs, const R *b, int64_t b_rs, R *c, int64_t c_rs,
                                                       int acc) {
  int64_t y = 0;
  for (; y + 2 * VN <= n; y += 2 * VN) TILE(mr, 2, kd, a, a_rs, a_cs, b + y, b_rs, c + y, c_rs, acc);
  for (; y + VN <= n; y += VN) TILE(mr, 1, kd, a, a_rs, a_cs, b + y, b_rs, c + y, c_rs, acc);
  for (; y < n; ++y)
    for (int i = 0; i < mr; ++i) {
      R sum = acc ? c[i * c_rs + y] : 0;
      for (int64_t x = 0; x < kd; ++x) sum += a[i * a_rs + x * a_cs] * b[x * b_rs + y];
      c[i * c_rs + y] = sum;
    }
}

/* C (= or +=) A B: C is m x n (rows c + i * c_rs), A is m x kd (element (i, x) at
 * a[i * a_rs + x * a_cs]: a row-major block or a transposed one), B is kd x n (rows b + x * b_rs). */
CANNL_ATTN_MULTIVERSION
static void GEMM(int64_t m, int64_t n, int64_t kd, const R *a, int64_t a_rs, int64_t a_cs, const R *b, int64_t b_rs,
                 R *c, int64_t c_rs, int acc) {
  int64_t i = 0;
  for (; i + ATTN_MR <= m; i += ATTN_MR)
    ROWS(ATTN_MR, n, kd, a + i * a_rs, a_rs, a_cs, b, b_rs, c + i * c_rs, c_rs, acc);
  /* the last m - i < ATTN_MR (at most 7) rows: blocks of 4, 2, 1 */
  _Static_assert(ATTN_MR >= 4 && ATTN_MR <= 8, "GEMM's tail takes blocks of 4, 2 and 1 rows");
  if ((m - i) & 4) ROWS(4, n, kd, a + i * a_rs, a_rs, a_cs, b, b_rs, c + i * c_rs, c_rs, acc), i += 4;
  if ((m - i) & 2) ROWS(2, n, kd, a + i * a_rs, a_rs, a_cs, b, b_rs, c + i * c_rs, c_rs, acc), i += 2;
  if ((m - i) & 1) ROWS(1, n, kd, a + i * a_rs, a_rs, a_cs, b, b_rs, c + i * c_rs, c_rs, acc);
}

/* Columns x0 .. x0 + w of rows 0 .. n of a (row stride st) into t[x * ATTN_KB + j], rows n .. np
 * zero. */
static inline void PACK(R *restrict t, const R *restrict a, int64_t st, int64_t x0, int64_t w, int64_t n, int64_t np) {
  for (int64_t j = 0; j < n; ++j) {
    const R *row = a + j * st + x0;
    for (int64_t x = 0; x < w; ++x) t[x * ATTN_KB + j] = row[x];
  }
  for (int64_t x = 0; x < w; ++x)
    for (int64_t j = n; j < np; ++j) t[x * ATTN_KB + j] = 0;
}

/* s[i * ATTN_KB + j] = a row (t0 + i) . b row j over w columns, for the m queries of a chunk
 * (rows a + i * a_st) and the keys j of the tile each block of ATTN_MR queries sees (the
 * tile's rows b + j * b_st; each block's count rounded up to whole vectors, at most np). */
CANNL_ATTN_MULTIVERSION
static void SCORES(R *s, const cannl_attn_dims *d, int64_t t0, int64_t s0, int64_t m, const R *a, int64_t a_st,
                   const R *b, int64_t b_st, int64_t n, int64_t np, int64_t w, R *buf) {
  for (int64_t x0 = 0; x0 < w || x0 == 0; x0 += ATTN_XB) {
    const int64_t xw = w - x0 < ATTN_XB ? w - x0 : ATTN_XB;
    PACK(buf, b, b_st, x0, xw, n, np);
    for (int64_t i = 0; i < m; i += ATTN_MR) {
      const int64_t mr = m - i < ATTN_MR ? m - i : ATTN_MR;
      int64_t nk = cannl__attn_keys_seen(d, t0 + i + mr - 1) - s0;
      nk = nk < n ? (nk + VN - 1) / VN * VN : np;
      GEMM(mr, nk, xw, a + i * a_st + x0, a_st, 1, buf, ATTN_KB, s + i * ATTN_KB, ATTN_KB, x0 > 0);
    }
  }
}

/* The largest of s[0 .. n) (n > 0), a vector at a time. */
static inline R ROWMAX(const R *s, int64_t n) {
  R mx = s[0];
  int64_t j = 0;
  if (n >= VN) {
    VEC mv = VLOAD(s);
    for (j = VN; j + VN <= n; j += VN) {
      const VEC x = VLOAD(s + j);
      const __typeof__(x > mv) gt = x > mv;
      mv = (VEC)((gt & (__typeof__(gt))x) | (~gt & (__typeof__(gt))mv));
    }
    for (int u = 0; u < VN; ++u) mx = mv[u] > mx ? mv[u] : mx;
  }
  for (; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  return mx;
}

/* dst[r * w + x] = src[r * st + x] for r < n, x < w: rows into a contiguous block. */
static inline void COPY(R *restrict dst, const R *restrict src, int64_t st, int64_t n, int64_t w) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t x = 0; x < w; ++x) dst[r * w + x] = src[r * st + x];
}

/* dst[r * st + x] += src[r * w + x]. */
static inline void ADDBACK(R *restrict dst, int64_t st, const R *restrict src, int64_t n, int64_t w) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t x = 0; x < w; ++x) dst[r * st + x] += src[r * w + x];
}

/* s[j] = q . k row j over e columns for nk (1 .. 4, constant) keys of rows k + j * k_st: one
 * vector of sums per key, summed across at the end. */
static inline __attribute__((always_inline)) void DOT4(const int nk, R *s, const R *q, const R *k, int64_t k_st,
                                                       int64_t e) {
  VEC acc[4];
  for (int j = 0; j < nk; ++j) acc[j] = (VEC){0};
  int64_t x = 0;
  for (; x + VN <= e; x += VN) {
    const VEC qv = VLOAD(q + x);
    for (int j = 0; j < nk; ++j) acc[j] += qv * VLOAD(k + j * k_st + x);
  }
  for (int j = 0; j < nk; ++j) {
    R sum = 0;
    for (int u = 0; u < VN; ++u) sum += acc[j][u];
    for (int64_t t = x; t < e; ++t) sum += q[t] * k[j * k_st + t];
    s[j] = sum;
  }
}

/* o[y] += sum_{j < n} p[j] b[j * b_st + y] for y < nv * VN (nv constant): the sums in registers. */
static inline __attribute__((always_inline)) void AXPY(const int nv, R *o, const R *p, const R *b, int64_t b_st,
                                                       int64_t n) {
  VEC acc[4];
  for (int u = 0; u < nv; ++u) acc[u] = VLOAD(o + u * VN);
  for (int64_t j = 0; j < n; ++j) {
    const VEC pj = (VEC){0} + p[j];
    for (int u = 0; u < nv; ++u) acc[u] += pj * VLOAD(b + j * b_st + u * VN);
  }
  for (int u = 0; u < nv; ++u) VSTORE(o + u * VN, acc[u]);
}

/* forward for one query (tq = 1: a decode step), without the tiles' packing and copies: per
 * block of ATTN_KB keys, the scores q . k (four keys at a time, vectors along the row), their
 * running maximum and sum as forward's, and o += p V (blocks of four vectors of the row). */
static inline __attribute__((always_inline)) void ONE(const cannl_attn_dims *d, const R *q, const R *k, int64_t k_st,
                                                      const R *v, int64_t v_st, R *o, R *lse) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f, keys = cannl__attn_keys_seen(d, 0);
  R s[ATTN_KB], mx = -INFINITY, l = 0;
  for (int64_t y = 0; y < f; ++y) o[y] = 0;
  for (int64_t s0 = attn_first_key(d, 0); s0 < keys; s0 += ATTN_KB) {
    const int64_t n = keys - s0 < ATTN_KB ? keys - s0 : ATTN_KB;
    const R *kb = k + s0 * k_st, *vb = v + s0 * v_st;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) DOT4(4, s + j, q, kb + j * k_st, k_st, e);
    for (; j < n; ++j) DOT4(1, s + j, q, kb + j * k_st, k_st, e);
    for (j = 0; j < n; ++j) s[j] *= scale;
    const R mb = ROWMAX(s, n), mnew = mb > mx ? mb : mx;
    R sum = 0;
    for (j = 0; j < n; ++j) {
      s[j] = EXP(s[j] - mnew);
      sum += s[j];
    }
    if (mnew > mx) {
      const R alpha = mx == -INFINITY ? 0 : EXP(mx - mnew);
      for (int64_t y = 0; y < f; ++y) o[y] *= alpha;
      l *= alpha;
      mx = mnew;
    }
    l += sum;
    int64_t y = 0;
    for (; y + 4 * VN <= f; y += 4 * VN) AXPY(4, o + y, s, vb + y, v_st, n);
    for (; y + VN <= f; y += VN) AXPY(1, o + y, s, vb + y, v_st, n);
    for (; y < f; ++y) {
      R acc = o[y];
      for (j = 0; j < n; ++j) acc += s[j] * vb[j * v_st + y];
      o[y] = acc;
    }
  }
  const R r = l > 0 ? 1 / l : 0;
  for (int64_t y = 0; y < f; ++y) o[y] *= r;
  *lse = l > 0 ? mx + LOG(l) : -INFINITY;
}

/* Rows of widths up to ATTN_XB (`local`) are worked on in contiguous stack blocks (a chunk's
 * queries and output rows, a tile's values): the strided rows of a fused qkv buffer share a few
 * cache sets. Wider rows are read and written in place. */
CANNL_ATTN_MULTIVERSION
void FN(forward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                 const R *v, int64_t v_st, R *o, int64_t o_st, R *lse) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f;
  const int local = e <= ATTN_XB && f <= ATTN_XB;
  R kt[ATTN_XB * ATTN_KB], s[ATTN_QC * ATTN_KB], mx[ATTN_QC], l[ATTN_QC];
  if (d->tq == 1) { /* a decode step: no tiles */
    ONE(d, q, k, k_st, v, v_st, o, lse);
    return;
  }
  R qc[ATTN_QC * ATTN_XB], vc[ATTN_KB * ATTN_XB], oc[ATTN_QC * ATTN_XB];
  for (int64_t t0 = 0; t0 < d->tq; t0 += ATTN_QC) {
    const int64_t m = d->tq - t0 < ATTN_QC ? d->tq - t0 : ATTN_QC;
    const R *qa = local ? qc : q + t0 * q_st;
    const int64_t qa_st = local ? e : q_st, oa_st = local ? f : o_st;
    /* a tile's values are copied when more than one block of queries reads them (not in a
     * decode step) */
    const int vlocal = local && m > ATTN_MR;
    R *oa = local ? oc : o + t0 * o_st;
    if (local) COPY(qc, q + t0 * q_st, q_st, m, e);
    /* per query: the running maximum of the scores, the sum of their exponentials less it, and
     * oa = sum_j e^(s_j - mx) v_j */
    for (int64_t i = 0; i < m; ++i) {
      mx[i] = -INFINITY, l[i] = 0;
      for (int64_t y = 0; y < f; ++y) oa[i * oa_st + y] = 0;
    }
    const int64_t keys = cannl__attn_keys_seen(d, t0 + m - 1);
    for (int64_t s0 = attn_first_key(d, t0); s0 < keys; s0 += ATTN_KB) {
      const int64_t nb = d->tk - s0 < ATTN_KB ? d->tk - s0 : ATTN_KB;
      const int64_t most = keys - s0 < nb ? keys - s0 : nb;
      const R *va = vlocal ? vc : v + s0 * v_st;
      const int64_t va_st = vlocal ? f : v_st;
      if (vlocal) COPY(vc, v + s0 * v_st, v_st, most, f);
      /* the chunk's queries from i1 see the tile */
      const int64_t i1 = attn_first_query(d, s0) > t0 ? attn_first_query(d, s0) - t0 : 0;
      SCORES(s + i1 * ATTN_KB, d, t0 + i1, s0, m - i1, qa + i1 * qa_st, qa_st, k + s0 * k_st, k_st, most,
             (most + VN - 1) / VN * VN, e, kt);
      for (int64_t i = i1; i < m; ++i) {
        int64_t n = cannl__attn_keys_seen(d, t0 + i) - s0;
        n = n < nb ? n : nb;
        /* the keys the row's block reads in P V: those its last query sees */
        const int64_t last = i1 + (i - i1) / ATTN_MR * ATTN_MR + ATTN_MR - 1;
        int64_t lim = cannl__attn_keys_seen(d, t0 + (last < m ? last : m - 1)) - s0;
        lim = lim < nb ? lim : nb;
        R *si = s + i * ATTN_KB;
        /* a sliding window: the row's keys from lo (those before: p = 0) */
        int64_t lo = attn_first_key(d, t0 + i) - s0;
        lo = lo < 0 ? 0 : lo;
        if (lo >= n) {
          for (int64_t j = 0; j < lim; ++j) si[j] = 0;
          continue;
        }
        for (int64_t j = lo; j < n; ++j) si[j] *= scale;
        const R mb = ROWMAX(si + lo, n - lo), mnew = mb > mx[i] ? mb : mx[i];
        R sum = 0;
        for (int64_t j = lo; j < n; ++j) {
          si[j] = EXP(si[j] - mnew);
          sum += si[j];
        }
        for (int64_t j = 0; j < lo; ++j) si[j] = 0;
        for (int64_t j = n; j < lim; ++j) si[j] = 0;
        if (mnew > mx[i]) {
          const R alpha = mx[i] == -INFINITY ? 0 : EXP(mx[i] - mnew);
          R *ot = oa + i * oa_st;
          for (int64_t y = 0; y < f; ++y) ot[y] *= alpha;
          l[i] *= alpha;
          mx[i] = mnew;
        }
        l[i] += sum;
      }
      for (int64_t i = i1; i < m; i += ATTN_MR) {
        const int64_t mr = m - i < ATTN_MR ? m - i : ATTN_MR;
        int64_t lim = cannl__attn_keys_seen(d, t0 + i + mr - 1) - s0;
        lim = lim < nb ? lim : nb;
        GEMM(mr, f, lim, s + i * ATTN_KB, ATTN_KB, 1, va, va_st, oa + i * oa_st, oa_st, 1);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      const R r = l[i] > 0 ? 1 / l[i] : 0;
      R *ot = o + (t0 + i) * o_st;
      const R *src = oa + i * oa_st;
      for (int64_t y = 0; y < f; ++y) ot[y] = src[y] * r;
      lse[t0 + i] = l[i] > 0 ? mx[i] + LOG(l[i]) : -INFINITY;
    }
  }
}

CANNL_ATTN_MULTIVERSION
void FN(backward)(const cannl_attn_dims *d, const R *q, int64_t q_st, const R *k, int64_t k_st,
                  const R *v, int64_t v_st, const R *o, int64_t o_st, const R *dout, int64_t do_st,
                  const R *lse, R *delta, R *dq, int64_t dq_st, R *dk, int64_t dk_st, R *dv,
                  int64_t dv_st) {
  const R scale = (R)d->scale;
  const int64_t e = d->e, f = d->f;
  const int local = e <= ATTN_XB && f <= ATTN_XB;
  R buf[ATTN_XB * ATTN_KB], p[ATTN_QC * ATTN_KB], ds[ATTN_QC * ATTN_KB];
  R kc[ATTN_KB * ATTN_XB], dkc[ATTN_KB * ATTN_XB], dvc[ATTN_KB * ATTN_XB];
  R qc[ATTN_QC * ATTN_XB], gc[ATTN_QC * ATTN_XB], dqc[ATTN_QC * ATTN_XB];
  for (int64_t t = 0; t < d->tq; ++t) {
    const R *gt = dout + t * do_st, *ot = o + t * o_st;
    R acc = 0;
    for (int64_t y = 0; y < f; ++y) acc += gt[y] * ot[y];
    delta[t] = acc;
    /* meanwhile, the rows of q, k, v and their gradients towards the cache (the first and last
     * line of each row: a pair's rows are usually cold; a few per cent of the backward pass) */
    __builtin_prefetch(q + t * q_st, 0, 2), __builtin_prefetch(q + t * q_st + e - 1, 0, 2);
    __builtin_prefetch(dq + t * dq_st, 1, 2), __builtin_prefetch(dq + t * dq_st + e - 1, 1, 2);
    if (t < d->tk) {
      __builtin_prefetch(k + t * k_st, 0, 2), __builtin_prefetch(k + t * k_st + e - 1, 0, 2);
      __builtin_prefetch(v + t * v_st, 0, 2), __builtin_prefetch(v + t * v_st + f - 1, 0, 2);
      __builtin_prefetch(dk + t * dk_st, 1, 2), __builtin_prefetch(dk + t * dk_st + e - 1, 1, 2);
      __builtin_prefetch(dv + t * dv_st, 1, 2), __builtin_prefetch(dv + t * dv_st + f - 1, 1, 2);
    }
  }
  const int64_t keys = d->tq > 0 ? cannl__attn_keys_seen(d, d->tq - 1) : 0;
  for (int64_t s0 = attn_first_key(d, 0); s0 < keys; s0 += ATTN_KB) {
    const int64_t nb = d->tk - s0 < ATTN_KB ? d->tk - s0 : ATTN_KB;
    const int64_t nt = keys - s0 < nb ? keys - s0 : nb; /* the tile's keys some query sees */
    const int64_t tend = attn_end_query(d, s0 + nt - 1); /* past the last query that sees one */
    const R *ka = local ? kc : k + s0 * k_st;
    R *dka = local ? dkc : dk + s0 * dk_st, *dva = local ? dvc : dv + s0 * dv_st;
    const int64_t ka_st = local ? e : k_st, dka_st = local ? e : dk_st, dva_st = local ? f : dv_st;
    if (local) {
      COPY(kc, k + s0 * k_st, k_st, nt, e);
      for (int64_t j = 0; j < nt * e; ++j) dkc[j] = 0;
      for (int64_t j = 0; j < nt * f; ++j) dvc[j] = 0;
    }
    for (int64_t t0 = attn_first_query(d, s0); t0 < tend; t0 += ATTN_QC) {
      const int64_t m = tend - t0 < ATTN_QC ? tend - t0 : ATTN_QC;
      int64_t most = cannl__attn_keys_seen(d, t0 + m - 1) - s0;
      most = most < nb ? most : nb;
      const int64_t np = (most + VN - 1) / VN * VN;
      const R *qa = local ? qc : q + t0 * q_st, *ga = local ? gc : dout + t0 * do_st;
      R *dqa = local ? dqc : dq + t0 * dq_st;
      const int64_t qa_st = local ? e : q_st, ga_st = local ? f : do_st, dqa_st = local ? e : dq_st;
      if (local) {
        COPY(qc, q + t0 * q_st, q_st, m, e);
        COPY(gc, dout + t0 * do_st, do_st, m, f);
        for (int64_t j = 0; j < m * e; ++j) dqc[j] = 0;
      }
      SCORES(p, d, t0, s0, m, qa, qa_st, ka, ka_st, most, np, e, buf);
      SCORES(ds, d, t0, s0, m, ga, ga_st, v + s0 * v_st, v_st, most, np, f, buf);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t t = t0 + i;
        int64_t n = cannl__attn_keys_seen(d, t) - s0;
        n = n < 0 ? 0 : n < nb ? n : nb;
        int64_t lo = attn_first_key(d, t) - s0; /* a sliding window: the keys from lo */
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        R *pi = p + i * ATTN_KB, *dsi = ds + i * ATTN_KB;
        const R lt = n > lo ? lse[t] : 0, dt = n > lo ? delta[t] : 0;
        for (int64_t j = lo; j < n; ++j) pi[j] = EXP(scale * pi[j] - lt);
        for (int64_t j = lo; j < n; ++j) dsi[j] = pi[j] * (dsi[j] - dt) * scale;
        for (int64_t j = 0; j < lo; ++j) pi[j] = dsi[j] = 0;
        for (int64_t j = n; j < most; ++j) pi[j] = dsi[j] = 0;
      }
      /* dv[j] += sum_i p[i][j] dout[i], dk[j] += sum_i ds[i][j] q[i], over the queries that see
       * the block of keys j */
      for (int64_t j = 0; j < most; j += ATTN_MR) {
        const int64_t mr = most - j < ATTN_MR ? most - j : ATTN_MR;
        const int64_t i0 = attn_first_query(d, s0 + j) - t0 > 0 ? attn_first_query(d, s0 + j) - t0 : 0;
        const int64_t i9 = attn_end_query(d, s0 + j + mr - 1) - t0 < m ? attn_end_query(d, s0 + j + mr - 1) - t0 : m;
        if (i0 >= i9) continue;
        GEMM(mr, f, i9 - i0, p + i0 * ATTN_KB + j, 1, ATTN_KB, ga + i0 * ga_st, ga_st, dva + j * dva_st, dva_st, 1);
        GEMM(mr, e, i9 - i0, ds + i0 * ATTN_KB + j, 1, ATTN_KB, qa + i0 * qa_st, qa_st, dka + j * dka_st, dka_st, 1);
      }
      /* dq[i] += sum_j ds[i][j] k[j] */
      for (int64_t i = 0; i < m; i += ATTN_MR) {
        const int64_t mr = m - i < ATTN_MR ? m - i : ATTN_MR;
        int64_t lim = cannl__attn_keys_seen(d, t0 + i + mr - 1) - s0;
        lim = lim < nb ? lim : nb;
        GEMM(mr, e, lim, ds + i * ATTN_KB, ATTN_KB, 1, ka, ka_st, dqa + i * dqa_st, dqa_st, 1);
      }
      if (local) ADDBACK(dq + t0 * dq_st, dq_st, dqc, m, e);
    }
    if (local) {
      ADDBACK(dk + s0 * dk_st, dk_st, dkc, nt, e);
      ADDBACK(dv + s0 * dv_st, dv_st, dvc, nt, f);
    }
  }
}

/* A decode step over a ring of cached keys (cannl_attention.h): the keys in position order,
 * one at a time, with a running maximum and sum as forward's. */
void FN(ring)(const cannl_attn_dims *d, const R *q, const R *k, int64_t k_st, const R *v, int64_t v_st, R *o,
              R *lse) {
  const R scale = (R)d->scale;
  const int64_t pos = d->q_offset, e = d->e, f = d->f;
  int64_t s = d->window > 0 ? pos - d->window + 1 : 0;
  s = s < 0 ? 0 : s;
  R mx = -INFINITY, l = 0;
  for (int64_t y = 0; y < f; ++y) o[y] = 0;
  for (; s <= pos; ++s) {
    const R *kr = k + (s % d->tk) * k_st, *vr = v + (s % d->tk) * v_st;
    R sc = 0;
    for (int64_t x = 0; x < e; ++x) sc += q[x] * kr[x];
    sc *= scale;
    if (sc > mx) {
      const R alpha = mx == -INFINITY ? 0 : EXP(mx - sc);
      for (int64_t y = 0; y < f; ++y) o[y] *= alpha;
      l *= alpha;
      mx = sc;
    }
    const R p = EXP(sc - mx);
    l += p;
    for (int64_t y = 0; y < f; ++y) o[y] += p * vr[y];
  }
  const R r = l > 0 ? 1 / l : 0;
  for (int64_t y = 0; y < f; ++y) o[y] *= r;
  *lse = l > 0 ? mx + LOG(l) : -INFINITY;
}

#undef VN
#undef FN
#undef VEC
#undef VECU
#undef VLOAD
#undef VSTORE
#undef VLOAD
#undef VSTORE
#undef TILE
#undef ROWS
#undef GEMM
#undef PACK
#undef SCORES
#undef ROWMAX
#undef COPY
#undef ADDBACK
#undef DOT4
#undef AXPY
#undef ONE
#undef CANNL__CAT
#undef CANNL__CAT2
