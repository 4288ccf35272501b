/* cannl_attention.h - scaled dot-product attention for one (sequence, head) pair, forward and
 * backward, without a T x S score matrix (flash-attention style: keys are visited in tiles with
 * a running maximum and sum; the backward pass recomputes the scores from the saved
 * log-sum-exp). Generated models call these from their own loop over sequences and heads, so
 * the threading is the caller's (one pair per thread: results do not depend on thread count).
 *
 * Speed (runtime-lib/attention_impl.h): each (tile of keys, chunk of queries) is a handful of
 * small matrix products - Q K^T and P V forward; Q K^T, dO V^T, P^T dO, dS^T Q and dS K
 * backward - run by one register-blocked kernel (6 rows x 8 or 16 columns of float, the sums in
 * registers, AVX2 + FMA where the CPU has it), the keys packed transposed for the scores, the
 * rows copied into contiguous blocks, causal blocks trimmed to the keys they see. No heap: the
 * tiles live on the stack (up to 144 KiB for the float backward pass, 72 KiB for double).
 * A forward call with one query (tq = 1) skips the tiles: the scores four keys at a time along
 * the row, then o += p V per block of keys, the row's sums in vector registers (the same results
 * within float rounding). The generated decode routines call cannl_attention_decode_* instead
 * (below: all of a row's heads per call, the cache read once in storage order).
 *
 * Layout: row t of q is q[t * q_st + 0 .. e), row s of k is k[s * k_st + 0 .. e), row s of v is
 * v[s * v_st + 0 .. f), row t of the output o[t * o_st + 0 .. f): rows may be strided (a view
 * of a fused qkv buffer), a row is contiguous.
 *
 *   o[t]   = sum_s p[t, s] v[s],   p[t, s] = softmax_s(scale * q[t] . k[s])   (masked keys: p = 0)
 *   lse[t] = log sum_s exp(scale * q[t] . k[s])                               (saved for backward)
 *
 * Causal masking: query t sits at position q_offset + t of the key sequence and sees the keys
 * s <= q_offset + t (q_offset = 0 and tq = tk in training; in a decode step tq = 1 and
 * q_offset = the position, the keys being the cache). A query that sees no key gets o = 0.
 * A sliding window (window = W > 0, causal only) also hides the keys before the last W: query t
 * sees the keys q_offset + t - W < s <= q_offset + t. Grouped-query attention (several query
 * heads sharing one key/value head) is the caller's: it calls these once per query head with
 * that head's key and value rows (the backward calls of one key/value head one after the
 * other: they add into the same dk, dv).
 *
 * cannl_attention_ring_* is a decode step over a ring of cached keys (one head, one key at a time;
 * cannl_attention_decode_* does the same for several heads at once): one query at position
 * q_offset against the keys of positions max(0, q_offset - W + 1) .. q_offset (W = window, or
 * every position from 0 when window is 0), that of position s in row s % tk of k and v (tk the
 * ring's rows, at least W). The keys are visited in position order.
 *
 * cannl_attention_decode_* is a decode row's attention for the query heads [h0, h1) at once (the
 * generated decode routines' call: one per (row, part of its heads), the parts in parallel): one
 * query per head at position q_offset (d->tq is 1) against the cached keys of positions
 * max(0, q_offset - W + 1, q_offset - tk + 1) .. q_offset (causal; W = window, or every position
 * when window is 0), that of position s in row s % tk (a ring of tk rows, or the whole cache when
 * q_offset < tk); not causal, every row 0 .. tk - 1. Query head h is q[h * e ..], its output
 * o[h * f ..] and its log-sum-exp lse[h * lse_st]; it reads key/value head h / group: the key of
 * position s at k[(s % tk) * k_st + (h / group) * e ..], its value at v[(s % tk) * v_st +
 * (h / group) * f ..]. The cache is read once per call, in storage order (each position's row of
 * the heads' keys, then of their values, in blocks of positions, prefetched ahead), in the widest
 * vectors of cannl_isa_select's instruction set (cannl_rt.h; chosen once). A head's result is the
 * same bits whatever [h0, h1) holds it (and is the forward's within float rounding).
 * cannl_attention_decode_parts is how many parts a decode step's rows should split their key/value
 * heads into: 1 on one thread (`parallel` 0: the work is too small to wake threads, or OpenMP's
 * thread count is 1), else the fewest (at most kv_heads) that give every thread the same number
 * of (row, part) items, or four items per thread.
 *
 * The backward pass accumulates (+=) into dq, dk and dv (gradient buffers zeroed by the
 * caller), and needs `delta`, a scratch row of tq values.
 */
#ifndef CANNL_ATTENTION_H
#define CANNL_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cannl_attn_dims {
  int64_t tq;        /* query positions */
  int64_t tk;        /* key (and value) positions */
  int64_t e;         /* width of a query / key row */
  int64_t f;         /* width of a value / output row */
  int64_t q_offset;  /* causal: position of query 0 among the keys */
  int causal;        /* 0: every query sees every key */
  double scale;      /* usually 1 / sqrt(e) */
  int64_t window;    /* causal: > 0 sees only the last `window` keys (itself included); 0: all */
} cannl_attn_dims;

void cannl_attention_forward_f32(const cannl_attn_dims *d,
                                 const float *q, int64_t q_st, const float *k, int64_t k_st,
                                 const float *v, int64_t v_st, float *o, int64_t o_st, float *lse);
void cannl_attention_backward_f32(const cannl_attn_dims *d,
                                  const float *q, int64_t q_st, const float *k, int64_t k_st,
                                  const float *v, int64_t v_st, const float *o, int64_t o_st,
                                  const float *dout, int64_t do_st, const float *lse, float *delta,
                                  float *dq, int64_t dq_st, float *dk, int64_t dk_st,
                                  float *dv, int64_t dv_st);

void cannl_attention_ring_f32(const cannl_attn_dims *d, const float *q, const float *k, int64_t k_st,
                              const float *v, int64_t v_st, float *o, float *lse);
void cannl_attention_ring_f64(const cannl_attn_dims *d, const double *q, const double *k, int64_t k_st,
                              const double *v, int64_t v_st, double *o, double *lse);

void cannl_attention_decode_f32(const cannl_attn_dims *d, int64_t h0, int64_t h1, int64_t group, const float *q,
                                const float *k, int64_t k_st, const float *v, int64_t v_st, float *o, float *lse,
                                int64_t lse_st);
void cannl_attention_decode_f64(const cannl_attn_dims *d, int64_t h0, int64_t h1, int64_t group, const double *q,
                                const double *k, int64_t k_st, const double *v, int64_t v_st, double *o, double *lse,
                                int64_t lse_st);
int64_t cannl_attention_decode_parts(int64_t rows, int64_t kv_heads, int parallel);

void cannl_attention_forward_f64(const cannl_attn_dims *d,
                                 const double *q, int64_t q_st, const double *k, int64_t k_st,
                                 const double *v, int64_t v_st, double *o, int64_t o_st, double *lse);
void cannl_attention_backward_f64(const cannl_attn_dims *d,
                                  const double *q, int64_t q_st, const double *k, int64_t k_st,
                                  const double *v, int64_t v_st, const double *o, int64_t o_st,
                                  const double *dout, int64_t do_st, const double *lse, double *delta,
                                  double *dq, int64_t dq_st, double *dk, int64_t dk_st,
                                  double *dv, int64_t dv_st);

#ifdef __cplusplus
}
#endif

#endif
