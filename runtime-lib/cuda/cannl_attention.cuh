/* cannl_attention.cuh - scaled dot-product attention on the GPU, forward and backward, without a
 * T x S score matrix: the device counterpart of cannl_attention.h, included (header-only) by
 * generated .cu files so that it is compiled for their architectures.
 *
 * Operands are strided views over (sequence b, head h, position t, x): element (b, h, t, x) of
 * a view is p[b * sb + h * sh + t * st + x], x contiguous (views of a fused qkv buffer are
 * fine). `lse` and `delta` are contiguous [B, H, T]. The semantics are cannl_attention.h's:
 * causal masking with the queries at q_offset among the keys, lse saved by the forward pass,
 * gradients accumulated (+=).
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

// Keys seen by query t.
__device__ __forceinline__ int keys_seen(int t, int S, int q_offset, int causal) {
  if (!causal) return S;
  int last = q_offset + t + 1;
  return last < 0 ? 0 : last > S ? S : last;
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
               R* __restrict__ o, cannl_attn_view ov, R* __restrict__ lse) {
  const int lane = threadIdx.x % 32, t = blockIdx.y * kWarps + threadIdx.x / 32;
  const int b = blockIdx.x / H, h = blockIdx.x % H;
  if (t >= T) return;
  R qr[(E + 31) / 32], acc[(F + 31) / 32];
  load_row<R, E>(qr, q + at(qv, b, h, t), lane);
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) acc[i] = 0;
  R m = -INFINITY, l = 0;
  const int seen = keys_seen(t, S, q_offset, causal);
  for (int j = 0; j < seen; ++j) {
    const R s = scale * dot_row<R, E>(qr, k + at(kv, b, h, j), lane);
    const R mn = s > m ? s : m, alpha = exp_(m - mn), p = exp_(s - mn);
    l = l * alpha + p;
    const R* vj = v + at(vv, b, h, j);
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
    if (x < F) ot[x] = seen ? acc[i] / l : R(0);
  }
  if (lane == 0) lse[(long long)blockIdx.x * T + t] = seen ? m + log_(l) : R(-INFINITY);
}

// dq for each query row, and delta = dout . o (read by dkdv_kernel).
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
dq_kernel(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
          const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
          const R* __restrict__ o, cannl_attn_view ov, const R* __restrict__ dout, cannl_attn_view dov,
          const R* __restrict__ lse, R* __restrict__ delta, R* __restrict__ dq, cannl_attn_view dqv) {
  const int lane = threadIdx.x % 32, t = blockIdx.y * kWarps + threadIdx.x / 32;
  const int b = blockIdx.x / H, h = blockIdx.x % H;
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
  for (int j = 0; j < seen; ++j) {
    const R* kj = k + at(kv, b, h, j);
    const R p = exp_(scale * dot_row<R, E>(qr, kj, lane) - lt);
    const R ds = p * (dot_row<R, F>(dor, v + at(vv, b, h, j), lane) - dl) * scale;
#pragma unroll
    for (int i = 0; i < (E + 31) / 32; ++i) {
      int x = lane + 32 * i;
      if (x < E) dqr[i] += ds * kj[x];
    }
  }
  add_row<R, E>(dq + at(dqv, b, h, t), dqr, lane);
}

// dk and dv for each key row, over the queries that see it.
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
dkdv_kernel(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
            const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
            const R* __restrict__ dout, cannl_attn_view dov, const R* __restrict__ lse,
            const R* __restrict__ delta, R* __restrict__ dk, cannl_attn_view dkv, R* __restrict__ dv,
            cannl_attn_view dvv) {
  const int lane = threadIdx.x % 32, j = blockIdx.y * kWarps + threadIdx.x / 32;
  const int b = blockIdx.x / H, h = blockIdx.x % H;
  if (j >= S) return;
  R kr[(E + 31) / 32], vr[(F + 31) / 32], dkr[(E + 31) / 32], dvr[(F + 31) / 32];
  load_row<R, E>(kr, k + at(kv, b, h, j), lane);
  load_row<R, F>(vr, v + at(vv, b, h, j), lane);
#pragma unroll
  for (int i = 0; i < (E + 31) / 32; ++i) dkr[i] = 0;
#pragma unroll
  for (int i = 0; i < (F + 31) / 32; ++i) dvr[i] = 0;
  // Query t sees key j when j < keys_seen(t): t >= j - q_offset.
  int first = causal ? j - q_offset : 0;
  if (first < 0) first = 0;
  for (int t = first; t < T; ++t) {
    const long long row = (long long)blockIdx.x * T + t;
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
  add_row<R, E>(dk + at(dkv, b, h, j), dkr, lane);
  add_row<R, F>(dv + at(dvv, b, h, j), dvr, lane);
}

}  // namespace cannl_attn

// Launches on `stream`; B sequences of H heads, T queries, S keys. Check cudaGetLastError after.
template <typename R, int E, int F>
static inline void cannl_attention_forward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                           R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                           const R* v, cannl_attn_view vv, R* o, cannl_attn_view ov, R* lse) {
  dim3 grid(B * H, (T + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::forward_kernel<R, E, F><<<grid, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv,
                                                                                   k, kv, v, vv, o, ov, lse);
}

// `delta` is scratch [B, H, T]; dq, dk, dv are accumulated.
template <typename R, int E, int F>
static inline void cannl_attention_backward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                            R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                            const R* v, cannl_attn_view vv, const R* o, cannl_attn_view ov,
                                            const R* dout, cannl_attn_view dov, const R* lse, R* delta, R* dq,
                                            cannl_attn_view dqv, R* dk, cannl_attn_view dkv, R* dv,
                                            cannl_attn_view dvv) {
  dim3 gq(B * H, (T + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::dq_kernel<R, E, F><<<gq, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv,
                                                                            v, vv, o, ov, dout, dov, lse, delta, dq, dqv);
  dim3 gk(B * H, (S + cannl_attn::kWarps - 1) / cannl_attn::kWarps);
  cannl_attn::dkdv_kernel<R, E, F><<<gk, 32 * cannl_attn::kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k,
                                                                              kv, v, vv, dout, dov, lse, delta, dk, dkv,
                                                                              dv, dvv);
}

#endif
