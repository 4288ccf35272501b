/* cannl_attention.cuh - scaled dot-product attention on the GPU, forward and backward, without a
 * T x S score matrix: the device counterpart of cannl_attention.h, included (header-only) by
 * generated .cu files so that it is compiled for their architectures.
 *
 * Operands are strided views over (sequence b, head h, position t, x): element (b, h, t, x) of
 * a view is p[b * sb + h * sh + t * st + x], x contiguous (views of a fused qkv buffer are
 * fine). `lse` and `delta` are contiguous [B, H, T]. The semantics are cannl_attention.h's:
 * causal masking with the queries at q_offset among the keys, lse saved by the forward pass,
 * gradients accumulated (+=), a sliding window (`window` > 0, causal: query t sees the keys
 * q_offset + t - window < s <= q_offset + t).
 *
 * Grouped-query attention: H query heads over H / R key/value heads, query head h reading
 * key/value head h / R (R = 1: one each). k, v, dk and dv are views over the key/value heads;
 * the dk, dv kernel sums the R query heads of its key/value head in order (one writer).
 *
 * One warp per query row (forward, dq) or per key row (dk, dv): a row's sums run in a fixed
 * order and each output row has one writer, so results are the same bits on every run (no
 * atomics). E and F (row widths) are template constants.
 */
#ifndef CANNL_ATTENTION_CUH
#define CANNL_ATTENTION_CUH

#include <cuda_runtime.h>
#include <math.h>

struct cannl_attn_view {
  long long sb, sh, st;
};

namespace cannl_attn {

constexpr int kWarps = 4;  // rows per block

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }

template <typename R>
__device__ __forceinline__ R warp_sum(R x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ long long at(const cannl_attn_view& v, int b, int h, int t) {
  return b * v.sb + h * v.sh + t * v.st;
}

// Keys seen by query t: from first_key to keys_seen (exclusive).
__device__ __forceinline__ int keys_seen(int t, int S, int q_offset, int causal) {
  if (!causal) return S;
  int last = q_offset + t + 1;
  return last < 0 ? 0 : last > S ? S : last;
}
__device__ __forceinline__ int first_key(int t, int q_offset, int causal, int window) {
  if (!causal || window <= 0) return 0;
  int s = q_offset + t - window + 1;
  return s < 0 ? 0 : s;
}

template <typename R, int N>
__device__ __forceinline__ void load_row(R (&r)[(N + 31) / 32], const R* p, int lane) {
#pragma unroll
  for (int i = 0; i < (N + 31) / 32; ++i) {
    int x = lane + 32 * i;
    r[i] = x < N ? p[x] : R(0);
  }
}

template <typename R, int N>
__device__ __forceinline__ R dot_row(const R (&r)[(N + 31) / 32], const R* p, int lane) {
  R s = 0;
#pragma unroll
  for (int i = 0; i < (N + 31) / 32; ++i) {
    int x = lane + 32 * i;
    if (x < N) s += r[i] * p[x];
  }
  return warp_sum(s);
}

template <typename R, int N>
__device__ __forceinline__ void add_row(R* p, const R (&r)[(N + 31) / 32], int lane) {
#pragma unroll
  for (int i = 0; i < (N + 31) / 32; ++i) {
    int x = lane + 32 * i;
    if (x < N) p[x] += r[i];
  }
}

template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
forward_kernel(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
               const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
               R* __restrict__ o, cannl_attn_view ov, R* __restrict__ lse, int group, int window) {
  const int lane = threadIdx.x % 32, t = blockIdx.y * kWarps + threadIdx.x / 32;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group;
  if (t >= T) return;
  R qr[(E + 31) / 32], acc[(F + 31) / 32];
  load_row<R, E>(qr, q + at(qv, b, h, t), lane);
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) acc[i] = 0;
  R m = -INFINITY, l = 0;
  const int seen = keys_seen(t, S, q_offset, causal), j0 = first_key(t, q_offset, causal, window);
  for (int j = j0; j < seen; ++j) {
    const R s = scale * dot_row<R, E>(qr, k + at(kv, b, g, j), lane);
    const R mn = s > m ? s : m, alpha = exp_(m - mn), p = exp_(s - mn);
    l = l * alpha + p;
    const R* vj = v + at(vv, b, g, j);
#pragma unroll
    for (int i = 0; i < (F + 31) / 32; ++i) {
      int x = lane + 32 * i;
      acc[i] = acc[i] * alpha + (x < F ? p * vj[x] : R(0));
    }
    m = mn;
  }
  R* ot = o + at(ov, b, h, t);
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) {
    int x = lane + 32 * i;
    if (x < F) ot[x] = seen > j0 ? acc[i] / l : R(0);
  }
  if (lane == 0) lse[(long long)blockIdx.x * T + t] = seen > j0 ? m + log_(l) : R(-INFINITY);
}

// dq for each query row, and delta = dout . o (read by dkdv_kernel).
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
dq_kernel(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
          const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
          const R* __restrict__ o, cannl_attn_view ov, const R* __restrict__ dout, cannl_attn_view dov,
          const R* __restrict__ lse, R* __restrict__ delta, R* __restrict__ dq, cannl_attn_view dqv, int group,
          int window) {
  const int lane = threadIdx.x % 32, t = blockIdx.y * kWarps + threadIdx.x / 32;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group;
  if (t >= T) return;
  R qr[(E + 31) / 32], dor[(F + 31) / 32], dqr[(E + 31) / 32];
  load_row<R, E>(qr, q + at(qv, b, h, t), lane);
  load_row<R, F>(dor, dout + at(dov, b, h, t), lane);
  const R dl = dot_row<R, F>(dor, o + at(ov, b, h, t), lane);
  const long long row = (long long)blockIdx.x * T + t;
  if (lane == 0) delta[row] = dl;
#pragma unroll
  for (int i = 0; i < (E + 31) / 32; ++i) dqr[i] = 0;
  const R lt = lse[row];
  const int seen = keys_seen(t, S, q_offset, causal);
  for (int j = first_key(t, q_offset, causal, window); j < seen; ++j) {
    const R* kj = k + at(kv, b, g, j);
    const R p = exp_(scale * dot_row<R, E>(qr, kj, lane) - lt);
    const R ds = p * (dot_row<R, F>(dor, v + at(vv, b, g, j), lane) - dl) * scale;
#pragma unroll
    for (int i = 0; i < (E + 31) / 32; ++i) {
      int x = lane + 32 * i;
      if (x < E) dqr[i] += ds * kj[x];
    }
  }
  add_row<R, E>(dq + at(dqv, b, h, t), dqr, lane);
}

// dk and dv for each key row of each key/value head g (blockIdx.x = b * (H / group) + g), over
// the queries of its query heads g * group .. (g + 1) * group - 1 that see it, in that order.
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
dkdv_kernel(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
            const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
            const R* __restrict__ dout, cannl_attn_view dov, const R* __restrict__ lse,
            const R* __restrict__ delta, R* __restrict__ dk, cannl_attn_view dkv, R* __restrict__ dv,
            cannl_attn_view dvv, int group, int window) {
  const int lane = threadIdx.x % 32, j = blockIdx.y * kWarps + threadIdx.x / 32;
  const int G = H / group, b = blockIdx.x / G, g = blockIdx.x % G;
  if (j >= S) return;
  R kr[(E + 31) / 32], vr[(F + 31) / 32], dkr[(E + 31) / 32], dvr[(F + 31) / 32];
  load_row<R, E>(kr, k + at(kv, b, g, j), lane);
  load_row<R, F>(vr, v + at(vv, b, g, j), lane);
#pragma unroll
  for (int i = 0; i < (E + 31) / 32; ++i) dkr[i] = 0;
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) dvr[i] = 0;
  // Query t sees key j when j < keys_seen(t): t >= j - q_offset; in a window, t < j - q_offset + window.
  int first = causal ? j - q_offset : 0, end = causal && window > 0 ? j - q_offset + window : T;
  if (first < 0) first = 0;
  if (end > T) end = T;
  const int n = end > first ? end - first : 0;
  for (int u = 0; u < group * n; ++u) {  // query head g * group + u / n, query first + u % n
    const int h = g * group + u / n, t = first + u % n;
    const long long row = ((long long)b * H + h) * T + t;
    const R* qt = q + at(qv, b, h, t);
    const R* dot = dout + at(dov, b, h, t);
    const R p = exp_(scale * dot_row<R, E>(kr, qt, lane) - lse[row]);
    const R ds = p * (dot_row<R, F>(vr, dot, lane) - delta[row]) * scale;
#pragma unroll
    for (int i = 0; i < (F + 31) / 32; ++i) {
      int x = lane + 32 * i;
      if (x < F) dvr[i] += p * dot[x];
    }
#pragma unroll
    for (int i = 0; i < (E + 31) / 32; ++i) {
      int x = lane + 32 * i;
      if (x < E) dkr[i] += ds * qt[x];
    }
  }
  add_row<R, E>(dk + at(dkv, b, g, j), dkr, lane);
  add_row<R, F>(dv + at(dvv, b, g, j), dvr, lane);
}

// A decode step (cannl_attention.h's cannl_attention_ring_*): the one query of each head h at
// position pos against the cached keys of positions max(0, pos - window + 1) .. pos (window 0:
// from 0), that of position s in row s % rows of k and v (rows: the cache's, a ring of the
// last `rows` positions or the whole sequence), in position order with forward_kernel's
// running maximum and sum. A warp per head: q and o rows of head h at q + h * E, o + h * F;
// key/value head h / group at k + row * k_st + (h / group) * E, likewise v; lse[h * lse_sh].
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
decode_kernel(int H, int group, int pos, int rows, int window, R scale, const R* __restrict__ q,
              const R* __restrict__ k, long long k_st, const R* __restrict__ v, long long v_st, R* __restrict__ o,
              R* __restrict__ lse, long long lse_sh) {
  const int lane = threadIdx.x % 32, h = blockIdx.x * kWarps + threadIdx.x / 32;
  if (h >= H) return;
  const int g = h / group;
  R qr[(E + 31) / 32], acc[(F + 31) / 32];
  load_row<R, E>(qr, q + (long long)h * E, lane);
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) acc[i] = 0;
  R m = -INFINITY, l = 0;
  const int j0 = first_key(0, pos, 1, window);
  for (int j = j0; j <= pos; ++j) {
    const long long row = j % rows;
    const R s = scale * dot_row<R, E>(qr, k + row * k_st + (long long)g * E, lane);
    const R mn = s > m ? s : m, alpha = exp_(m - mn), p = exp_(s - mn);
    l = l * alpha + p;
    const R* vj = v + row * v_st + (long long)g * F;
#pragma unroll
    for (int i = 0; i < (F + 31) / 32; ++i) {
      int x = lane + 32 * i;
      acc[i] = acc[i] * alpha + (x < F ? p * vj[x] : R(0));
    }
    m = mn;
  }
  R* ot = o + (long long)h * F;
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) {
    int x = lane + 32 * i;
    if (x < F) ot[x] = acc[i] / l;
  }
  if (lane == 0) lse[(long long)h * lse_sh] = m + log_(l);
}

}  // namespace cannl_attn

// Launches on `stream`; B sequences of H query heads (H / group key/value heads), T queries, S
// keys, a sliding window of `window` keys (0: none). Check cudaGetLastError after.
template <typename R, int E, int F>
static inline void cannl_attention_forward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                           R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                           const R* v, cannl_attn_view vv, R* o, cannl_attn_view ov, R* lse,
                                           int group = 1, int window = 0) {
  dim3 grid(B * H, (T + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::forward_kernel<R, E, F><<<grid, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv,
                                                                                   k, kv, v, vv, o, ov, lse, group, window);
}

// `delta` is scratch [B, H, T]; dq, dk, dv are accumulated.
template <typename R, int E, int F>
static inline void cannl_attention_backward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                            R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                            const R* v, cannl_attn_view vv, const R* o, cannl_attn_view ov,
                                            const R* dout, cannl_attn_view dov, const R* lse, R* delta, R* dq,
                                            cannl_attn_view dqv, R* dk, cannl_attn_view dkv, R* dv,
                                            cannl_attn_view dvv, int group = 1, int window = 0) {
  dim3 gq(B * H, (T + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::dq_kernel<R, E, F><<<gq, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv,
                                                                            v, vv, o, ov, dout, dov, lse, delta, dq, dqv,
                                                                            group, window);
  dim3 gk(B * (H / group), (S + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::dkdv_kernel<R, E, F><<<gk, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k,
                                                                              kv, v, vv, dout, dov, lse, delta, dk, dkv,
                                                                              dv, dvv, group, window);
}

// A decode step (decode_kernel): H query heads at position pos, one sequence. Check
// cudaGetLastError after.
template <typename R, int E, int F>
static inline void cannl_attention_decode(cudaStream_t stream, int H, int group, int pos, int rows, int window, R scale,
                                          const R* q, const R* k, long long k_st, const R* v, long long v_st, R* o,
                                          R* lse, long long lse_sh) {
  const int blocks = (H + cannl_attn::kWarps - 1) / cannl_attn::kWarps;
  cannl_attn::decode_kernel<R, E, F><<<blocks, 32 * cannl_attn::kWarps, 0, stream>>>(H, group, pos, rows, window, scale, q, k,
                                                                                   k_st, v, v_st, o, lse, lse_sh);
}

#endif
