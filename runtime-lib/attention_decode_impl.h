/* attention_decode_impl.h - the body of cannl_attention_decode_* (cannl_attention.h) for one element
 * type and vector width. Included by attention_decode.c (16-byte vectors: baseline x86-64 or any CPU)
 * and, on x86-64, attention_decode_avx2.c (32 bytes) and attention_decode_avx512.c (64 bytes), each
 * compiled with its own -march, through attention_decode_types.h, with AD_R (float or double),
 * AD_NAME (the function), AD_EXP and AD_LOG (expf and logf, or exp and log) and AD_VBYTES defined.
 *
 * One decode row, its query heads [h0, h1) (AD_HB at a time), against the cached keys and values,
 * the cache read once, in one pass over blocks of AD_KB key positions (online softmax per block):
 *   1. the scores of every head and key of the block: per head, the q . k of its AD_KB key rows
 *      with the rows' loads interleaved (AD_KB streams of the cache in flight at once; the heads
 *      one after the other sweep each row's run of key heads in storage order);
 *   2. per head, the block's maximum, the rescaling e^(mx - mx') of the running sums and the
 *      weights e^(s - mx'): vectors across the heads (one lane per head), the exponentials
 *      vectorised (libmvec);
 *   3. per head, o = o e^(mx - mx') + sum_j p_j v_j, the row's vectors in registers across the
 *      block's AD_KB value rows (again interleaved), o stored once per block.
 * A block past the last key repeats its first key's row, weighed 0. Measured on gpt2_124m's cache
 * (12 heads of 64, a fused qkv row of 9 KiB per position) this reads it at about 1.5x the rate
 * of one head at a time (cannl_attention_forward_*'s tq = 1 path) on one core.
 * Each head's sums run in one fixed order that depends only on the key positions, never on h0, h1,
 * its lane or the thread: a head gives the same bits whichever range (and row batch) holds it. */

#define AD_CAT2(a, b) a##b
#define AD_CAT(a, b) AD_CAT2(a, b)
#define AD_VEC AD_CAT(AD_NAME, _vec)
#define AD_VECU AD_CAT(AD_NAME, _vecu)
#define AD_DOTS AD_CAT(AD_NAME, _dots)
#define AD_PV AD_CAT(AD_NAME, _pv)
#define AD_VN ((int64_t)(AD_VBYTES / sizeof(AD_R)))
#ifndef AD_KB
#define AD_KB 16
#endif
#ifndef AD_HB
#define AD_HB 16
#endif

typedef AD_R AD_VEC __attribute__((vector_size(AD_VBYTES)));
typedef AD_R AD_VECU __attribute__((vector_size(AD_VBYTES), aligned(sizeof(AD_R)), may_alias));
#define AD_LOAD(p) ((AD_VEC)(*(const AD_VECU *)(p)))
#define AD_STORE(p, x) (*(AD_VECU *)(p) = (x))

/* t[j] = q . k_j over e elements for the AD_KB rows k_j = kr[j] + off: one vector of sums per
 * row (the rows' loads interleaved: AD_KB streams of the cache at once), then its lanes, then the
 * tail. */
static inline void AD_DOTS(AD_R *t, const AD_R *q, const AD_R *const *kr, int64_t off, int64_t e) {
  AD_VEC acc[AD_KB];
  for (int j = 0; j < AD_KB; ++j) acc[j] = (AD_VEC){0};
  int64_t x = 0;
  for (; x + AD_VN <= e; x += AD_VN) {
    const AD_VEC qv = AD_LOAD(q + x);
    for (int j = 0; j < AD_KB; ++j) acc[j] += qv * AD_LOAD(kr[j] + off + x);
  }
  for (int j = 0; j < AD_KB; ++j) {
    AD_R sum = 0;
    for (int u = 0; u < (int)AD_VN; ++u) sum += acc[j][u];
    for (int64_t y = x; y < e; ++y) sum += q[y] * kr[j][off + y];
    t[j] = sum;
  }
}

/* o[y] = a o[y] + sum_j p[j * AD_HB] vr[j][off + y] for y < f: nv (constant) vectors of o at a
 * time in registers. */
static inline __attribute__((always_inline)) void AD_PV(const int nv, AD_R *o, AD_R a, const AD_R *p,
                                                        const AD_R *const *vr, int64_t off) {
  AD_VEC acc[4];
  for (int u = 0; u < nv; ++u) acc[u] = AD_LOAD(o + u * AD_VN) * a;
  for (int j = 0; j < AD_KB; ++j) {
    const AD_VEC pj = (AD_VEC){0} + p[j * AD_HB];
    for (int u = 0; u < nv; ++u) acc[u] += pj * AD_LOAD(vr[j] + off + u * AD_VN);
  }
  for (int u = 0; u < nv; ++u) AD_STORE(o + u * AD_VN, acc[u]);
}

void AD_NAME(const cannl_attn_dims *d, int64_t h0, int64_t h1, int64_t group, const AD_R *q, const AD_R *k,
             int64_t k_st, const AD_R *v, int64_t v_st, AD_R *o, AD_R *lse, int64_t lse_st) {
  const int64_t e = d->e, f = d->f, tk = d->tk, pos = d->q_offset;
  const AD_R scale = (AD_R)d->scale;
  /* the keys: positions [first, end), position s in row s % tk (a ring's; row s otherwise) */
  int64_t first = 0, end = tk;
  if (d->causal) {
    end = pos + 1;
    first = d->window > 0 && pos - d->window + 1 > first ? pos - d->window + 1 : first;
    first = pos - tk + 1 > first ? pos - tk + 1 : first;
  }
  /* per block: the scores, then the weights p, of key j for head c0 + i at s[j][i]; per head the
   * running maximum mx, sum l and rescaling al (lanes past the chunk's heads: finite filler) */
  AD_R s[AD_KB][AD_HB], mx[AD_HB], l[AD_HB], al[AD_HB], t[AD_KB];
  for (int64_t c0 = h0; c0 < h1; c0 += AD_HB) {
    const int64_t nh = h1 - c0 < AD_HB ? h1 - c0 : AD_HB;
    /* the key/value heads of [c0, c0 + nh): a contiguous run of each cached row */
    const int64_t g0 = c0 / group;
    const AD_R *kc = k + g0 * e, *vc = v + g0 * f;
    for (int i = 0; i < AD_HB; ++i) {
      mx[i] = -INFINITY, l[i] = 0;
      for (int j = 0; j < AD_KB; ++j) s[j][i] = 0;
    }
    for (int64_t i = 0; i < nh; ++i)
      for (int64_t y = 0; y < f; ++y) o[(c0 + i) * f + y] = 0;
    for (int64_t s0 = first; s0 < end; s0 += AD_KB) {
      const int64_t nb = end - s0 < AD_KB ? end - s0 : AD_KB;
      /* the block's rows (past its last key: its first key's row again, weighed 0) */
      const AD_R *kr[AD_KB], *vr[AD_KB];
      for (int j = 0; j < AD_KB; ++j) {
        const int64_t row = (s0 + (j < nb ? j : 0)) % tk;
        kr[j] = kc + row * k_st, vr[j] = vc + row * v_st;
      }
      for (int64_t i = 0; i < nh; ++i) {
        AD_DOTS(t, q + (c0 + i) * e, kr, ((c0 + i) / group - g0) * e, e);
        for (int j = 0; j < AD_KB; ++j) s[j][i] = j < nb ? t[j] * scale : -INFINITY;
      }
      /* each head's maximum, rescaling and weights: every head the same lane-wise operations */
      for (int i = 0; i < AD_HB; ++i) {
        AD_R mn = mx[i];
        for (int j = 0; j < AD_KB; ++j) mn = s[j][i] > mn ? s[j][i] : mn;
        al[i] = AD_EXP(mx[i] - mn);
        mx[i] = mn;
      }
      for (int j = 0; j < AD_KB; ++j)
        for (int i = 0; i < AD_HB; ++i) s[j][i] = AD_EXP(s[j][i] - mx[i]);
      for (int i = 0; i < AD_HB; ++i) {
        AD_R sum = 0;
        for (int j = 0; j < AD_KB; ++j) sum += s[j][i];
        l[i] = l[i] * al[i] + sum;
      }
      for (int64_t i = 0; i < nh; ++i) {
        AD_R *oh = o + (c0 + i) * f;
        const AD_R a = al[i];
        const int64_t off = ((c0 + i) / group - g0) * f;
        int64_t y = 0;
        for (; y + 4 * AD_VN <= f; y += 4 * AD_VN) AD_PV(4, oh + y, a, &s[0][i], vr, off + y);
        for (; y + AD_VN <= f; y += AD_VN) AD_PV(1, oh + y, a, &s[0][i], vr, off + y);
        for (; y < f; ++y) {
          AD_R acc = oh[y] * a;
          for (int j = 0; j < AD_KB; ++j) acc += s[j][i] * vr[j][off + y];
          oh[y] = acc;
        }
      }
    }
    for (int64_t i = 0; i < nh; ++i) {
      const AD_R r = l[i] > 0 ? 1 / l[i] : 0;
      AD_R *oh = o + (c0 + i) * f;
      for (int64_t y = 0; y < f; ++y) oh[y] *= r;
      lse[(c0 + i) * lse_st] = l[i] > 0 ? mx[i] + AD_LOG(l[i]) : -INFINITY;
    }
  }
}

#undef AD_CAT2
#undef AD_CAT
#undef AD_VEC
#undef AD_VECU
#undef AD_DOTS
#undef AD_PV
#undef AD_KB
#undef AD_HB
#undef AD_VN
#undef AD_LOAD
#undef AD_STORE
