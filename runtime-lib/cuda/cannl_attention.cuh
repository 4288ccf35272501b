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
 * Tiled kernels (FlashAttention-2's loop order, on the CUDA cores): a block of 16 x 16 threads
 * holds a tile of BM query rows (forward, dq) or key rows (dk, dv) and walks the tiles of BN
 * keys (queries) that the mask leaves, its operands transposed in shared memory; each thread
 * owns BM / 16 rows and every 16th column. Every sum runs in a fixed order and each output row
 * has one writer, so results are the same bits on every run (no atomics). The tile shape is the
 * largest of 64 x 64 ... 16 x 16 whose shared memory fits 96 KiB (any GPU since Volta); for head
 * widths too wide for that, a warp per row (the *_rows kernels). E and F (row widths) are
 * template constants.
 *
 * Tensor cores (the launchers' TensorCores = true: the CUDA emitter's --precision bf16, fp32
 * buffers): for R = float, E and F multiples of 16 and a device of sm_80 or later, forward_tc,
 * dq_tc and dkdv_tc, the same loop order and semantics (masks, windows, groups, views, lse,
 * delta = rowsum(dout * o), one writer per row, fixed order, no atomics) with the six products
 * on nvcuda::wmma 16 x 16 x 16 fragments: bf16 operands (Q, K, V, dout, P, dS rounded to
 * nearest), fp32 accumulation; softmax, lse, delta and the masks in fp32. Blocks of 4 warps
 * (128 threads) hold 64 rows, 16 a warp (a fragment's height), so that a warp computes its rows'
 * S = Q K^T (dP) tile alone and needs no block barrier between the products and the softmax;
 * the tile of BN keys (queries) is the largest of 64, 32, 16 within 96 KiB. Shared memory at
 * E = F = 64, BN = 64, and what it allows a multiprocessor of an H100/H200 (228 KiB, 64 K
 * registers): forward 53 KiB, 128 registers a thread (4 blocks, 16 warps); dq 79 KiB, 86
 * registers (2 blocks, 8 warps); dk/dv 88.5 KiB, 254 registers (__launch_bounds__(128, 2): 2
 * blocks, 8 warps). Not timed yet: the switch is the emitter's attention_tensor_cores().
 * Without TensorCores, for f64 and for other widths: the kernels above, unchanged.
 */
#ifndef CANNL_ATTENTION_CUH
#define CANNL_ATTENTION_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <mma.h>

#include <type_traits>

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
forward_rows(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
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

// dq for each query row, and delta = dout . o (read by dkdv_rows).
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
dq_rows(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
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
dkdv_rows(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
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

// ---------------------------------------------------------------------------------------- tiles

constexpr int kThreads = 256;  // a 16 x 16 grid of threads per tile
constexpr size_t kSmemMax = 96 * 1024;
constexpr int kShapeM[5] = {64, 64, 32, 32, 16}, kShapeN[5] = {64, 32, 32, 16, 16};

// Shared memory of each kernel at a BM x BN tile (transposed operands padded by one column).
template <typename R, int E, int F>
constexpr size_t smem_forward(int m, int n) {
  return sizeof(R) * ((size_t)E * (m + 1) + (size_t)(E + F) * (n + 1) + (size_t)m * (n + 1));
}
template <typename R, int E, int F>
constexpr size_t smem_dq(int m, int n) {
  return sizeof(R) * ((size_t)(E + F) * (m + 1) + (size_t)(E + F) * (n + 1) + (size_t)m * (n + 1));
}
template <typename R, int E, int F>
constexpr size_t smem_dkdv(int m, int n) {
  return sizeof(R) * ((size_t)(E + F) * (m + 1) + (size_t)(E + F) * (n + 1) + 2 * (size_t)m * (n + 1) + 2 * (size_t)n);
}
// The first tile shape whose shared memory fits, or -1.
template <size_t (*Bytes)(int, int)>
constexpr int fit() {
  for (int i = 0; i < 5; ++i)
    if (Bytes(kShapeM[i], kShapeN[i]) <= kSmemMax) return i;
  return -1;
}

#ifdef CANNL_CUDA_EMU
#define CANNL_ATTN_SMEM(R, name) R* name = (R*)emu_dynamic_smem()
#else
#define CANNL_ATTN_SMEM(R, name)                            \
  extern __shared__ __align__(16) unsigned char name##_[]; \
  R* name = (R*)name##_
#endif

// Rows r0 .. r0 + N - 1 of head h of sequence b (zero past `rows`) into dst[x][r], W wide.
template <typename R, int W, int N>
__device__ __forceinline__ void load_t(R* dst, const R* __restrict__ src, const cannl_attn_view& sv, int b, int h,
                                       int r0, int rows) {
  for (int i = threadIdx.x; i < N * W; i += kThreads) {
    const int r = i / W, x = i % W;
    dst[x * (N + 1) + r] = r0 + r < rows ? src[at(sv, b, h, r0 + r) + x] : R(0);
  }
}

// Sums over the 16 threads of a tile row (a half warp).
template <typename R>
__device__ __forceinline__ R row_max(R x) {
  for (int o = 8; o > 0; o >>= 1) {
    const R y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}
template <typename R>
__device__ __forceinline__ R row_sum(R x) {
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// acc[i][j] = sum over x < W of a[x][ty + 16 i] * b[x][tx + 16 j] (a: [W][M + 1], b: [W][N + 1]).
template <typename R, int W, int M, int N>
__device__ __forceinline__ void tile_dot(R (&acc)[M / 16][N / 16], const R* a, const R* b, int ty, int tx) {
#pragma unroll
  for (int i = 0; i < M / 16; ++i)
#pragma unroll
    for (int j = 0; j < N / 16; ++j) acc[i][j] = 0;
#pragma unroll 4
  for (int x = 0; x < W; ++x) {
    R av[M / 16], bv[N / 16];
#pragma unroll
    for (int i = 0; i < M / 16; ++i) av[i] = a[x * (M + 1) + ty + 16 * i];
#pragma unroll
    for (int j = 0; j < N / 16; ++j) bv[j] = b[x * (N + 1) + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < M / 16; ++i)
#pragma unroll
      for (int j = 0; j < N / 16; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// acc[i][y] += sum over c < N of p[ty + 16 i][c] * b[tx + 16 y][c] (p: [M][N + 1], b: [W][N + 1]).
template <typename R, int W, int M, int N>
__device__ __forceinline__ void tile_acc(R (&acc)[M / 16][(W + 15) / 16], const R* p, const R* b, int ty, int tx) {
#pragma unroll 4
  for (int c = 0; c < N; ++c) {
    R pv[M / 16], bv[(W + 15) / 16];
#pragma unroll
    for (int i = 0; i < M / 16; ++i) pv[i] = p[(ty + 16 * i) * (N + 1) + c];
#pragma unroll
    for (int y = 0; y < (W + 15) / 16; ++y) bv[y] = tx + 16 * y < W ? b[(tx + 16 * y) * (N + 1) + c] : R(0);
#pragma unroll
    for (int i = 0; i < M / 16; ++i)
#pragma unroll
      for (int y = 0; y < (W + 15) / 16; ++y) acc[i][y] += pv[i] * bv[y];
  }
}

// A tile's key range [begin, end) for its query rows t0 .. t_last.
__device__ __forceinline__ void key_range(int t0, int t_last, int S, int q_offset, int causal, int window, int& begin,
                                          int& end) {
  begin = first_key(t0, q_offset, causal, window);
  end = keys_seen(t_last, S, q_offset, causal);
}

template <typename R, int E, int F, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
forward_tiled(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
              const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
              R* __restrict__ o, cannl_attn_view ov, R* __restrict__ lse, int group, int window) {
  constexpr int TM = BM / 16, TN = BN / 16, FN = (F + 15) / 16;
  CANNL_ATTN_SMEM(R, smem);
  R* qT = smem;                // [E][BM + 1]
  R* kT = qT + E * (BM + 1);   // [E][BN + 1]
  R* vT = kT + E * (BN + 1);   // [F][BN + 1]
  R* p = vT + F * (BN + 1);    // [BM][BN + 1]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group, t0 = blockIdx.y * BM;
  load_t<R, E, BM>(qT, q, qv, b, h, t0, T);
  R m[TM], l[TM], acc[TM][FN];
  int seen[TM], first[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int t = t0 + ty + 16 * i;
    seen[i] = t < T ? keys_seen(t, S, q_offset, causal) : 0;
    first[i] = first_key(t, q_offset, causal, window);
    m[i] = -INFINITY, l[i] = 0;
#pragma unroll
    for (int y = 0; y < FN; ++y) acc[i][y] = 0;
  }
  int begin, end;
  key_range(t0, (t0 + BM < T ? t0 + BM : T) - 1, S, q_offset, causal, window, begin, end);
  for (int j0 = begin; j0 < end; j0 += BN) {
    __syncthreads();  // (the last tile's reads of kT, vT and p are done)
    load_t<R, E, BN>(kT, k, kv, b, g, j0, S);
    load_t<R, F, BN>(vT, v, vv, b, g, j0, S);
    __syncthreads();
    R s[TM][TN];
    tile_dot<R, E, BM, BN>(s, qT, kT, ty, tx);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      R mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int key = j0 + tx + 16 * j;
        s[i][j] = key >= first[i] && key < seen[i] ? scale * s[i][j] : R(-INFINITY);
        mx = s[i][j] > mx ? s[i][j] : mx;
      }
      mx = row_max(mx);
      const R mn = mx > m[i] ? mx : m[i];
      const R alpha = mn == R(-INFINITY) ? R(1) : exp_(m[i] - mn);
      R rs = 0;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const R pv = s[i][j] == R(-INFINITY) ? R(0) : exp_(s[i][j] - mn);
        p[(ty + 16 * i) * (BN + 1) + tx + 16 * j] = pv;
        rs += pv;
      }
      l[i] = l[i] * alpha + row_sum(rs);
      m[i] = mn;
#pragma unroll
      for (int y = 0; y < FN; ++y) acc[i][y] *= alpha;
    }
    __syncthreads();
    tile_acc<R, F, BM, BN>(acc, p, vT, ty, tx);
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int t = t0 + ty + 16 * i;
    if (t >= T) continue;
    R* ot = o + at(ov, b, h, t);
#pragma unroll
    for (int y = 0; y < FN; ++y)
      if (tx + 16 * y < F) ot[tx + 16 * y] = l[i] > 0 ? acc[i][y] / l[i] : R(0);
    if (tx == 0) lse[(long long)blockIdx.x * T + t] = l[i] > 0 ? m[i] + log_(l[i]) : R(-INFINITY);
  }
}

// dq for each query row, and delta = dout . o (read by dkdv_tiled).
template <typename R, int E, int F, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
dq_tiled(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
         const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
         const R* __restrict__ o, cannl_attn_view ov, const R* __restrict__ dout, cannl_attn_view dov,
         const R* __restrict__ lse, R* __restrict__ delta, R* __restrict__ dq, cannl_attn_view dqv, int group,
         int window) {
  constexpr int TM = BM / 16, TN = BN / 16, EN = (E + 15) / 16;
  CANNL_ATTN_SMEM(R, smem);
  R* qT = smem;                 // [E][BM + 1]
  R* doT = qT + E * (BM + 1);   // [F][BM + 1]
  R* kT = doT + F * (BM + 1);   // [E][BN + 1]
  R* vT = kT + E * (BN + 1);    // [F][BN + 1]
  R* ds = vT + F * (BN + 1);    // [BM][BN + 1]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group, t0 = blockIdx.y * BM;
  load_t<R, E, BM>(qT, q, qv, b, h, t0, T);
  load_t<R, F, BM>(doT, dout, dov, b, h, t0, T);
  __syncthreads();
  R lt[TM], dl[TM], acc[TM][EN];
  int seen[TM], first[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = ty + 16 * i, t = t0 + r;
    seen[i] = t < T ? keys_seen(t, S, q_offset, causal) : 0;
    first[i] = first_key(t, q_offset, causal, window);
    R d = 0;
    if (t < T) {
      const R* ot = o + at(ov, b, h, t);
      for (int y = tx; y < F; y += 16) d += doT[y * (BM + 1) + r] * ot[y];
    }
    dl[i] = row_sum(d);
    const long long row = (long long)blockIdx.x * T + t;
    if (t < T && tx == 0) delta[row] = dl[i];
    lt[i] = t < T ? lse[row] : R(0);
#pragma unroll
    for (int x = 0; x < EN; ++x) acc[i][x] = 0;
  }
  int begin, end;
  key_range(t0, (t0 + BM < T ? t0 + BM : T) - 1, S, q_offset, causal, window, begin, end);
  for (int j0 = begin; j0 < end; j0 += BN) {
    __syncthreads();
    load_t<R, E, BN>(kT, k, kv, b, g, j0, S);
    load_t<R, F, BN>(vT, v, vv, b, g, j0, S);
    __syncthreads();
    R s[TM][TN], dp[TM][TN];
    tile_dot<R, E, BM, BN>(s, qT, kT, ty, tx);
    tile_dot<R, F, BM, BN>(dp, doT, vT, ty, tx);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int key = j0 + tx + 16 * j;
        R d = 0;
        if (key >= first[i] && key < seen[i]) d = exp_(scale * s[i][j] - lt[i]) * (dp[i][j] - dl[i]) * scale;
        ds[(ty + 16 * i) * (BN + 1) + tx + 16 * j] = d;
      }
    __syncthreads();
    tile_acc<R, E, BM, BN>(acc, ds, kT, ty, tx);
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int t = t0 + ty + 16 * i;
    if (t >= T) continue;
    R* dqt = dq + at(dqv, b, h, t);
#pragma unroll
    for (int x = 0; x < EN; ++x)
      if (tx + 16 * x < E) dqt[tx + 16 * x] += acc[i][x];
  }
}

// dk and dv for each key row of each key/value head g (blockIdx.x = b * (H / group) + g), over
// the queries of its query heads g * group .. (g + 1) * group - 1 that see it, in that order.
template <typename R, int E, int F, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
dkdv_tiled(int H, int T, int S, int q_offset, int causal, R scale, const R* __restrict__ q, cannl_attn_view qv,
           const R* __restrict__ k, cannl_attn_view kv, const R* __restrict__ v, cannl_attn_view vv,
           const R* __restrict__ dout, cannl_attn_view dov, const R* __restrict__ lse, const R* __restrict__ delta,
           R* __restrict__ dk, cannl_attn_view dkv, R* __restrict__ dv, cannl_attn_view dvv, int group, int window) {
  constexpr int TM = BM / 16, TN = BN / 16, EN = (E + 15) / 16, FN = (F + 15) / 16;
  CANNL_ATTN_SMEM(R, smem);
  R* kT = smem;                 // [E][BM + 1]
  R* vT = kT + E * (BM + 1);    // [F][BM + 1]
  R* qT = vT + F * (BM + 1);    // [E][BN + 1]
  R* doT = qT + E * (BN + 1);   // [F][BN + 1]
  R* pT = doT + F * (BN + 1);   // [BM][BN + 1]
  R* dsT = pT + BM * (BN + 1);  // [BM][BN + 1]
  R* lse_s = dsT + BM * (BN + 1);  // [BN]
  R* dl_s = lse_s + BN;            // [BN]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int G = H / group, b = blockIdx.x / G, g = blockIdx.x % G, j0 = blockIdx.y * BM;
  load_t<R, E, BM>(kT, k, kv, b, g, j0, S);
  load_t<R, F, BM>(vT, v, vv, b, g, j0, S);
  R dka[TM][EN], dva[TM][FN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int x = 0; x < EN; ++x) dka[i][x] = 0;
#pragma unroll
    for (int y = 0; y < FN; ++y) dva[i][y] = 0;
  }
  // Query t sees key j when first_key(t) <= j < keys_seen(t): t >= j - q_offset; in a window,
  // t < j - q_offset + window.
  const int j_last = (j0 + BM < S ? j0 + BM : S) - 1;
  int t_begin = causal ? j0 - q_offset : 0, t_end = causal && window > 0 ? j_last - q_offset + window : T;
  if (t_begin < 0) t_begin = 0;
  if (t_end > T) t_end = T;
  for (int u = 0; u < group; ++u) {
    const int h = g * group + u;
    for (int t0 = t_begin; t0 < t_end; t0 += BN) {
      __syncthreads();
      load_t<R, E, BN>(qT, q, qv, b, h, t0, T);
      load_t<R, F, BN>(doT, dout, dov, b, h, t0, T);
      for (int c = threadIdx.x; c < BN; c += kThreads) {
        const long long row = ((long long)b * H + h) * T + t0 + c;
        lse_s[c] = t0 + c < T ? lse[row] : R(0);
        dl_s[c] = t0 + c < T ? delta[row] : R(0);
      }
      __syncthreads();
      R s[TM][TN], dp[TM][TN];
      tile_dot<R, E, BM, BN>(s, kT, qT, ty, tx);
      tile_dot<R, F, BM, BN>(dp, vT, doT, ty, tx);
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int c = tx + 16 * j, t = t0 + c;
        const int seen = t < T ? keys_seen(t, S, q_offset, causal) : 0, first = first_key(t, q_offset, causal, window);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int key = j0 + ty + 16 * i;
          R pv = 0, d = 0;
          if (key >= first && key < seen) {
            pv = exp_(scale * s[i][j] - lse_s[c]);
            d = pv * (dp[i][j] - dl_s[c]) * scale;
          }
          pT[(ty + 16 * i) * (BN + 1) + c] = pv;
          dsT[(ty + 16 * i) * (BN + 1) + c] = d;
        }
      }
      __syncthreads();
      tile_acc<R, F, BM, BN>(dva, pT, doT, ty, tx);
      tile_acc<R, E, BM, BN>(dka, dsT, qT, ty, tx);
    }
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int j = j0 + ty + 16 * i;
    if (j >= S) continue;
    R *dkj = dk + at(dkv, b, g, j), *dvj = dv + at(dvv, b, g, j);
#pragma unroll
    for (int x = 0; x < EN; ++x)
      if (tx + 16 * x < E) dkj[tx + 16 * x] += dka[i][x];
#pragma unroll
    for (int y = 0; y < FN; ++y)
      if (tx + 16 * y < F) dvj[tx + 16 * y] += dva[i][y];
  }
}

// A kernel's shared memory beyond the default 48 KiB, allowed once.
template <typename K>
static inline void allow_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// ------------------------------------------------------------------------------ tensor cores

// The bf16 path (cannl_attention_forward/backward<float, E, F, true>, --precision bf16): the tiled
// kernels' loop order with the products on the tensor cores (nvcuda::wmma 16 x 16 x 16, bf16
// operands, fp32 accumulation). A block of kTcWarps warps holds kTcBM = 16 * kTcWarps query rows
// (forward, dq) or key rows (dk, dv), 16 per warp, and walks tiles of BN keys (queries); the
// operands sit in shared memory as bf16 rows (padded by 8), each warp's scores S (and dP) go
// through its own fp32 rows of shared memory, where the warp's lanes (two a row) mask them and
// take the softmax (or dS) in fp32, and come back as bf16 for the second product. Only the
// fragments' own calls touch them (the layout is opaque); O of the forward pass is kept by the
// lanes (rescaled by each tile's running maximum), dq, dk and dv in accumulator fragments.
constexpr int kTcWarps = 4, kTcThreads = 32 * kTcWarps, kTcBM = 16 * kTcWarps;
constexpr int kTcShapeN[3] = {64, 32, 16};

// Shared memory of each kernel at BN (bf16 rows padded by 8, fp32 rows by 4).
constexpr size_t tc_max(size_t a, size_t b) { return a > b ? a : b; }
template <int E, int F>
constexpr size_t tc_smem_forward(int n) {
  return 2 * ((size_t)kTcBM * (E + 8) + (size_t)n * (E + 8) + (size_t)n * (F + 8) + (size_t)kTcBM * (n + 8)) +
         4 * (size_t)kTcBM * (tc_max(n, F) + 4);
}
template <int E, int F>
constexpr size_t tc_smem_dq(int n) {
  return 2 * ((size_t)(kTcBM + n) * (E + 8) + (size_t)(kTcBM + n) * (F + 8) + (size_t)kTcBM * (n + 8)) +
         4 * (size_t)kTcBM * (tc_max(n, E) + 4 + n + 4);
}
template <int E, int F>
constexpr size_t tc_smem_dkdv(int n) {
  return 2 * ((size_t)(kTcBM + n) * (E + 8) + (size_t)(kTcBM + n) * (F + 8) + 2 * (size_t)kTcBM * (n + 8)) +
         4 * ((size_t)kTcBM * (tc_max(tc_max(n, E), F) + 4 + n + 4) + 2 * (size_t)n);
}
template <size_t (*Bytes)(int)>
constexpr int tc_fit() {
  for (int i = 0; i < 3; ++i)
    if (Bytes(kTcShapeN[i]) <= kSmemMax) return i;
  return -1;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CANNL_ATTN_TC 0  // (bf16 fragments need sm_80; the launchers do not pick these kernels there)
#else
#define CANNL_ATTN_TC 1
#endif

#ifdef CANNL_CUDA_EMU
#define CANNL_ATTN_TC_SMEM(name) unsigned char* name = (unsigned char*)emu_dynamic_smem()
#else
#define CANNL_ATTN_TC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace wm = nvcuda::wmma;
using bf16 = __nv_bfloat16;
using frag_acc = wm::fragment<wm::accumulator, 16, 16, 16, float>;
template <typename L>
using frag_a = wm::fragment<wm::matrix_a, 16, 16, 16, bf16, L>;
template <typename L>
using frag_b = wm::fragment<wm::matrix_b, 16, 16, 16, bf16, L>;

// Rows r0 .. r0 + N - 1 of head h of sequence b (zero past `rows`) into dst[r][x] as bf16, W + 8 apart.
template <int W, int N>
__device__ __forceinline__ void tc_load(bf16* dst, const float* __restrict__ src, const cannl_attn_view& sv, int b,
                                        int h, int r0, int rows) {
  for (int i = threadIdx.x; i < N * W; i += kTcThreads) {
    const int r = i / W, x = i % W;
    dst[r * (W + 8) + x] = __float2bfloat16(r0 + r < rows ? src[at(sv, b, h, r0 + r) + x] : 0.0f);
  }
}

// out[16][N] (ld LO, fp32) = a[16][W] (ld LA) times b^T where b is [N][W] (ld LB): rows x rows.
template <int W, int N, int LA, int LB, int LO>
__device__ __forceinline__ void tc_abt(float* out, const bf16* a, const bf16* b) {
#pragma unroll
  for (int n = 0; n < N / 16; ++n) {
    frag_acc c;
    wm::fill_fragment(c, 0.0f);
#pragma unroll
    for (int x = 0; x < W / 16; ++x) {
      frag_a<wm::row_major> fa;
      frag_b<wm::col_major> fb;
      wm::load_matrix_sync(fa, a + 16 * x, LA);
      wm::load_matrix_sync(fb, b + 16 * n * LB + 16 * x, LB);
      wm::mma_sync(c, fa, fb, c);
    }
    wm::store_matrix_sync(out + 16 * n, c, LO, wm::mem_row_major);
  }
}

// acc[y] += a[16][N] (ld LA) times b[N][W] (ld LB), column block y of 16.
template <int W, int N, int LA, int LB>
__device__ __forceinline__ void tc_ab(frag_acc (&acc)[W / 16], const bf16* a, const bf16* b) {
#pragma unroll
  for (int c = 0; c < N / 16; ++c) {
    frag_a<wm::row_major> fa;
    wm::load_matrix_sync(fa, a + 16 * c, LA);
#pragma unroll
    for (int y = 0; y < W / 16; ++y) {
      frag_b<wm::row_major> fb;
      wm::load_matrix_sync(fb, b + 16 * c * LB + 16 * y, LB);
      wm::mma_sync(acc[y], fa, fb, acc[y]);
    }
  }
}

// Adds the warp's accumulators (16 rows of W) to rows r0 .. r0 + 15 of head h (those below `rows`),
// through the warp's fp32 rows `stage` (ld LO).
template <int W, int LO>
__device__ __forceinline__ void tc_add_rows(float* __restrict__ dst, const cannl_attn_view& dv, int b, int h, int r0,
                                            int rows, frag_acc (&acc)[W / 16], float* stage) {
  __syncwarp();
#pragma unroll
  for (int y = 0; y < W / 16; ++y) wm::store_matrix_sync(stage + 16 * y, acc[y], LO, wm::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < 16; ++r) {
    if (r0 + r >= rows) break;
    float* p = dst + at(dv, b, h, r0 + r);
    for (int x = lane; x < W; x += 32) p[x] += stage[r * LO + x];
  }
}

template <int E, int F, int BN>
__global__ void __launch_bounds__(kTcThreads)
forward_tc(int H, int T, int S, int q_offset, int causal, float scale, const float* __restrict__ q, cannl_attn_view qv,
           const float* __restrict__ k, cannl_attn_view kv, const float* __restrict__ v, cannl_attn_view vv,
           float* __restrict__ o, cannl_attn_view ov, float* __restrict__ lse, int group, int window) {
#if CANNL_ATTN_TC
  constexpr int BM = kTcBM, LE = E + 8, LF = F + 8, LN = BN + 8, LS = (BN > F ? BN : F) + 4;
  CANNL_ATTN_TC_SMEM(smem);
  bf16* qs = (bf16*)smem;     // [BM][LE]
  bf16* ks = qs + BM * LE;    // [BN][LE]
  bf16* vs = ks + BN * LE;    // [BN][LF]
  bf16* ps = vs + BN * LF;    // [BM][LN]
  float* ss = (float*)(ps + BM * LN);  // [BM][LS]: S, then P V
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = 16 * warp + lane / 2, half = lane % 2;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group, t0 = blockIdx.y * BM, t = t0 + r;
  tc_load<E, BM>(qs, q, qv, b, h, t0, T);
  const int seen = t < T ? keys_seen(t, S, q_offset, causal) : 0, first = first_key(t, q_offset, causal, window);
  float m = -INFINITY, l = 0, acc[F / 2];  // the lane's columns half, half + 2, ...
#pragma unroll
  for (int y = 0; y < F / 2; ++y) acc[y] = 0;
  int begin, end;
  key_range(t0, (t0 + BM < T ? t0 + BM : T) - 1, S, q_offset, causal, window, begin, end);
  float* sr = ss + r * LS;
  for (int j0 = begin; j0 < end; j0 += BN) {
    __syncthreads();  // (the last tile's reads of ks and vs are done)
    tc_load<E, BN>(ks, k, kv, b, g, j0, S);
    tc_load<F, BN>(vs, v, vv, b, g, j0, S);
    __syncthreads();
    tc_abt<E, BN, LE, LE, LS>(ss + 16 * warp * LS, qs + 16 * warp * LE, ks);
    __syncwarp();
    float mx = -INFINITY;
    for (int c = half; c < BN; c += 2) {
      const int key = j0 + c;
      const float s = key >= first && key < seen ? scale * sr[c] : -INFINITY;
      sr[c] = s;
      mx = s > mx ? s : mx;
    }
    {
      const float y = __shfl_xor_sync(0xffffffffu, mx, 1);
      mx = y > mx ? y : mx;
    }
    const float mn = mx > m ? mx : m, alpha = mn == -INFINITY ? 1.0f : expf(m - mn);
    float rs = 0;
    for (int c = half; c < BN; c += 2) {
      const float pv = sr[c] == -INFINITY ? 0.0f : expf(sr[c] - mn);
      ps[r * LN + c] = __float2bfloat16(pv);
      rs += pv;
    }
    l = l * alpha + rs + __shfl_xor_sync(0xffffffffu, rs, 1);
    m = mn;
    __syncwarp();
    frag_acc pv[F / 16];
#pragma unroll
    for (int y = 0; y < F / 16; ++y) wm::fill_fragment(pv[y], 0.0f);
    tc_ab<F, BN, LN, LF>(pv, ps + 16 * warp * LN, vs);
#pragma unroll
    for (int y = 0; y < F / 16; ++y) wm::store_matrix_sync(ss + 16 * warp * LS + 16 * y, pv[y], LS, wm::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int y = 0; y < F / 2; ++y) acc[y] = acc[y] * alpha + sr[half + 2 * y];
  }
  if (t < T) {
    float* ot = o + at(ov, b, h, t);
#pragma unroll
    for (int y = 0; y < F / 2; ++y) ot[half + 2 * y] = l > 0 ? acc[y] / l : 0.0f;
    if (half == 0) lse[(long long)blockIdx.x * T + t] = l > 0 ? m + logf(l) : -INFINITY;
  }
#endif
}

// dq for each query row, and delta = dout . o (read by dkdv_tc).
template <int E, int F, int BN>
__global__ void __launch_bounds__(kTcThreads)
dq_tc(int H, int T, int S, int q_offset, int causal, float scale, const float* __restrict__ q, cannl_attn_view qv,
      const float* __restrict__ k, cannl_attn_view kv, const float* __restrict__ v, cannl_attn_view vv,
      const float* __restrict__ o, cannl_attn_view ov, const float* __restrict__ dout, cannl_attn_view dov,
      const float* __restrict__ lse, float* __restrict__ delta, float* __restrict__ dq, cannl_attn_view dqv, int group,
      int window) {
#if CANNL_ATTN_TC
  constexpr int BM = kTcBM, LE = E + 8, LF = F + 8, LN = BN + 8, LS = (BN > E ? BN : E) + 4, LP = BN + 4;
  CANNL_ATTN_TC_SMEM(smem);
  bf16* qs = (bf16*)smem;     // [BM][LE]
  bf16* dos = qs + BM * LE;   // [BM][LF]
  bf16* ks = dos + BM * LF;   // [BN][LE]
  bf16* vs = ks + BN * LE;    // [BN][LF]
  bf16* dss = vs + BN * LF;   // [BM][LN]
  float* ss = (float*)(dss + BM * LN);  // [BM][LS]: S, at the end dq
  float* dps = ss + BM * LS;            // [BM][LP]: dP = dout V^T
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = 16 * warp + lane / 2, half = lane % 2;
  const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / group, t0 = blockIdx.y * BM, t = t0 + r;
  tc_load<E, BM>(qs, q, qv, b, h, t0, T);
  tc_load<F, BM>(dos, dout, dov, b, h, t0, T);
  const int seen = t < T ? keys_seen(t, S, q_offset, causal) : 0, first = first_key(t, q_offset, causal, window);
  const long long row = (long long)blockIdx.x * T + t;
  float dl = 0, lt = 0;
  if (t < T) {
    const float *ot = o + at(ov, b, h, t), *dot = dout + at(dov, b, h, t);
    for (int y = half; y < F; y += 2) dl += dot[y] * ot[y];
    lt = lse[row];
  }
  dl += __shfl_xor_sync(0xffffffffu, dl, 1);
  if (t < T && half == 0) delta[row] = dl;
  frag_acc acc[E / 16];
#pragma unroll
  for (int x = 0; x < E / 16; ++x) wm::fill_fragment(acc[x], 0.0f);
  int begin, end;
  key_range(t0, (t0 + BM < T ? t0 + BM : T) - 1, S, q_offset, causal, window, begin, end);
  float *sr = ss + r * LS, *dpr = dps + r * LP;
  for (int j0 = begin; j0 < end; j0 += BN) {
    __syncthreads();
    tc_load<E, BN>(ks, k, kv, b, g, j0, S);
    tc_load<F, BN>(vs, v, vv, b, g, j0, S);
    __syncthreads();
    tc_abt<E, BN, LE, LE, LS>(ss + 16 * warp * LS, qs + 16 * warp * LE, ks);
    tc_abt<F, BN, LF, LF, LP>(dps + 16 * warp * LP, dos + 16 * warp * LF, vs);
    __syncwarp();
    for (int c = half; c < BN; c += 2) {
      const int key = j0 + c;
      float d = 0;
      if (key >= first && key < seen) d = expf(scale * sr[c] - lt) * (dpr[c] - dl) * scale;
      dss[r * LN + c] = __float2bfloat16(d);
    }
    __syncwarp();
    tc_ab<E, BN, LN, LE>(acc, dss + 16 * warp * LN, ks);
  }
  tc_add_rows<E, LS>(dq, dqv, b, h, t0 + 16 * warp, T, acc, ss + 16 * warp * LS);
#endif
}

// dk and dv for each key row of each key/value head g (blockIdx.x = b * (H / group) + g), over
// the queries of its query heads g * group .. (g + 1) * group - 1 that see it, in that order.
template <int E, int F, int BN>
__global__ void __launch_bounds__(kTcThreads, 2)  // (2 blocks of 88.5 KiB a multiprocessor at 64: up to 255 registers)
dkdv_tc(int H, int T, int S, int q_offset, int causal, float scale, const float* __restrict__ q, cannl_attn_view qv,
        const float* __restrict__ k, cannl_attn_view kv, const float* __restrict__ v, cannl_attn_view vv,
        const float* __restrict__ dout, cannl_attn_view dov, const float* __restrict__ lse,
        const float* __restrict__ delta, float* __restrict__ dk, cannl_attn_view dkv, float* __restrict__ dv,
        cannl_attn_view dvv, int group, int window) {
#if CANNL_ATTN_TC
  constexpr int BM = kTcBM, LE = E + 8, LF = F + 8, LN = BN + 8, LP = BN + 4;
  constexpr int LS = (BN > E ? (BN > F ? BN : F) : (E > F ? E : F)) + 4;
  CANNL_ATTN_TC_SMEM(smem);
  bf16* ks = (bf16*)smem;     // [BM][LE]
  bf16* vs = ks + BM * LE;    // [BM][LF]
  bf16* qs = vs + BM * LF;    // [BN][LE]
  bf16* dos = qs + BN * LE;   // [BN][LF]
  bf16* ps = dos + BN * LF;   // [BM][LN]: P^T
  bf16* dss = ps + BM * LN;   // [BM][LN]: dS^T
  float* ss = (float*)(dss + BM * LN);  // [BM][LS]: S^T, at the end dk, dv
  float* dps = ss + BM * LS;            // [BM][LP]: dP^T = V dout^T
  float* lse_s = dps + BM * LP;         // [BN]
  float* dl_s = lse_s + BN;             // [BN]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = 16 * warp + lane / 2, half = lane % 2;
  const int G = H / group, b = blockIdx.x / G, g = blockIdx.x % G, j0 = blockIdx.y * BM, j = j0 + r;
  tc_load<E, BM>(ks, k, kv, b, g, j0, S);
  tc_load<F, BM>(vs, v, vv, b, g, j0, S);
  frag_acc dka[E / 16], dva[F / 16];
#pragma unroll
  for (int x = 0; x < E / 16; ++x) wm::fill_fragment(dka[x], 0.0f);
#pragma unroll
  for (int y = 0; y < F / 16; ++y) wm::fill_fragment(dva[y], 0.0f);
  // Query t sees key j when first_key(t) <= j < keys_seen(t): t >= j - q_offset; in a window,
  // t < j - q_offset + window.
  const int j_last = (j0 + BM < S ? j0 + BM : S) - 1;
  int t_begin = causal ? j0 - q_offset : 0, t_end = causal && window > 0 ? j_last - q_offset + window : T;
  if (t_begin < 0) t_begin = 0;
  if (t_end > T) t_end = T;
  float *sr = ss + r * LS, *dpr = dps + r * LP;
  for (int u = 0; u < group; ++u) {
    const int h = g * group + u;
    for (int t0 = t_begin; t0 < t_end; t0 += BN) {
      __syncthreads();
      tc_load<E, BN>(qs, q, qv, b, h, t0, T);
      tc_load<F, BN>(dos, dout, dov, b, h, t0, T);
      for (int c = threadIdx.x; c < BN; c += kTcThreads) {
        const long long row = ((long long)b * H + h) * T + t0 + c;
        lse_s[c] = t0 + c < T ? lse[row] : 0.0f;
        dl_s[c] = t0 + c < T ? delta[row] : 0.0f;
      }
      __syncthreads();
      tc_abt<E, BN, LE, LE, LS>(ss + 16 * warp * LS, ks + 16 * warp * LE, qs);
      tc_abt<F, BN, LF, LF, LP>(dps + 16 * warp * LP, vs + 16 * warp * LF, dos);
      __syncwarp();
      for (int c = half; c < BN; c += 2) {
        const int t = t0 + c;
        const int seen = t < T ? keys_seen(t, S, q_offset, causal) : 0, first = first_key(t, q_offset, causal, window);
        float pv = 0, d = 0;
        if (j >= first && j < seen) {
          pv = expf(scale * sr[c] - lse_s[c]);
          d = pv * (dpr[c] - dl_s[c]) * scale;
        }
        ps[r * LN + c] = __float2bfloat16(pv);
        dss[r * LN + c] = __float2bfloat16(d);
      }
      __syncwarp();
      tc_ab<F, BN, LN, LF>(dva, ps + 16 * warp * LN, dos);
      tc_ab<E, BN, LN, LE>(dka, dss + 16 * warp * LN, qs);
    }
  }
  tc_add_rows<E, LS>(dk, dkv, b, g, j0 + 16 * warp, S, dka, ss + 16 * warp * LS);
  tc_add_rows<F, LS>(dv, dvv, b, g, j0 + 16 * warp, S, dva, ss + 16 * warp * LS);
#endif
}

// Whether the device takes the bf16 fragments (compute capability 8.0 or later), asked once.
static inline bool tc_device() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 8;
  }();
  return ok;
}

// Whether cannl_attention_forward/backward<R, E, F, TensorCores> take the kernels above: asked
// for (TensorCores, the emitter's choice for --precision bf16), fp32, widths multiples of 16 and
// every kernel's tile within kSmemMax; else (and on a device before sm_80) the tiled kernels.
template <typename R, int E, int F, bool TensorCores>
constexpr bool tc_takes() {
  if constexpr (!TensorCores || !std::is_same<R, float>::value || E % 16 != 0 || F % 16 != 0) return false;
  else
    return tc_fit<tc_smem_forward<E, F>>() >= 0 && tc_fit<tc_smem_dq<E, F>>() >= 0 &&
           tc_fit<tc_smem_dkdv<E, F>>() >= 0;
}

// A decode step (cannl_attention.h's cannl_attention_ring_*): the one query of each head h at
// position pos against the cached keys of positions max(0, pos - window + 1) .. pos (window 0:
// from 0), that of position s in row s % rows of k and v (rows: the cache's, a ring of the
// last `rows` positions or the whole sequence), in position order with forward_rows'
// running maximum and sum. A warp per head: q and o rows of head h at q + h * E, o + h * F;
// key/value head h / group at k + row * k_st + (h / group) * E, likewise v; lse[h * lse_sh].
// (decode_head: head h's warp; decode_rows_kernel launches it)
template <typename R, int E, int F>
__device__ __forceinline__ void decode_head(int h, int group, int pos, int rows, int window, R scale,
                                            const R* __restrict__ q, const R* __restrict__ k, long long k_st,
                                            const R* __restrict__ v, long long v_st, R* __restrict__ o,
                                            R* __restrict__ lse, long long lse_sh) {
  const int lane = threadIdx.x % 32;
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

// Over rows (a batched decode step): row r = blockIdx.y at position pos[r] of sequence slot
// seq[r], its heads one warp each (decode_head: the same warp per head whatever the number of rows):
// q of row r at q + r * q_rs + seq[r] * q_ss + (pos[r] % rows) * q_ps (q_ss, q_ps: a query in
// the cache, a fused projection's), o and lse at o + r * o_rs, lse + r * lse_rs; its keys and
// values in slot seq[r] at k + seq[r] * k_ss, v + seq[r] * v_ss.
template <typename R, int E, int F>
__global__ void __launch_bounds__(32 * kWarps)
decode_rows_kernel(int H, int group, const int64_t* __restrict__ pos, const int64_t* __restrict__ seq, int rows,
                   int window, R scale, const R* __restrict__ q, long long q_rs, long long q_ss, long long q_ps,
                   const R* __restrict__ k,
                   long long k_st, long long k_ss, const R* __restrict__ v, long long v_st, long long v_ss,
                   R* __restrict__ o, long long o_rs, R* __restrict__ lse, long long lse_rs, long long lse_sh) {
  const int h = blockIdx.x * kWarps + threadIdx.x / 32;
  if (h >= H) return;
  const long long r = blockIdx.y, sl = seq[r], p = pos[r];
  decode_head<R, E, F>(h, group, (int)p, rows, window, scale, q + r * q_rs + sl * q_ss + (p % rows) * q_ps,
                       k + sl * k_ss, k_st, v + sl * v_ss, v_st, o + r * o_rs, lse + r * lse_rs, lse_sh);
}

}  // namespace cannl_attn

// Launches on `stream`; B sequences of H query heads (H / group key/value heads), T queries, S
// keys, a sliding window of `window` keys (0: none). Check cudaGetLastError after.
template <typename R, int E, int F, bool TensorCores = false>
static inline void cannl_attention_forward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                           R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                           const R* v, cannl_attn_view vv, R* o, cannl_attn_view ov, R* lse,
                                           int group = 1, int window = 0) {
  using namespace cannl_attn;
  if constexpr (tc_takes<R, E, F, TensorCores>()) {
    if (tc_device()) {
      constexpr int BN = kTcShapeN[tc_fit<tc_smem_forward<E, F>>()];
      constexpr size_t bytes = tc_smem_forward<E, F>(BN);
      auto kern = forward_tc<E, F, BN>;
      allow_smem(kern, bytes);
      dim3 grid(B * H, (T + kTcBM - 1) / kTcBM);
      kern<<<grid, kTcThreads, bytes, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o, ov, lse,
                                                group, window);
      return;
    }
  }
  constexpr int shape = fit<smem_forward<R, E, F>>();
  if constexpr (shape >= 0) {
    constexpr int BM = kShapeM[shape], BN = kShapeN[shape];
    constexpr size_t bytes = smem_forward<R, E, F>(BM, BN);
    auto kern = forward_tiled<R, E, F, BM, BN>;
    allow_smem(kern, bytes);
    dim3 grid(B * H, (T + BM - 1) / BM);
    kern<<<grid, kThreads, bytes, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o, ov, lse, group,
                                            window);
  } else {
    dim3 grid(B * H, (T + kWarps - 1) / kWarps);
    forward_rows<R, E, F><<<grid, 32 * kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o,
                                                            ov, lse, group, window);
  }
}

// `delta` is scratch [B, H, T]; dq, dk, dv are accumulated.
template <typename R, int E, int F, bool TensorCores = false>
static inline void cannl_attention_backward(cudaStream_t stream, int B, int H, int T, int S, int q_offset, int causal,
                                            R scale, const R* q, cannl_attn_view qv, const R* k, cannl_attn_view kv,
                                            const R* v, cannl_attn_view vv, const R* o, cannl_attn_view ov,
                                            const R* dout, cannl_attn_view dov, const R* lse, R* delta, R* dq,
                                            cannl_attn_view dqv, R* dk, cannl_attn_view dkv, R* dv,
                                            cannl_attn_view dvv, int group = 1, int window = 0) {
  using namespace cannl_attn;
  if constexpr (tc_takes<R, E, F, TensorCores>()) {
    if (tc_device()) {
      constexpr int BQ = kTcShapeN[tc_fit<tc_smem_dq<E, F>>()], BK = kTcShapeN[tc_fit<tc_smem_dkdv<E, F>>()];
      constexpr size_t bq = tc_smem_dq<E, F>(BQ), bk = tc_smem_dkdv<E, F>(BK);
      auto kq = dq_tc<E, F, BQ>;
      auto kk = dkdv_tc<E, F, BK>;
      allow_smem(kq, bq);
      allow_smem(kk, bk);
      dim3 gq(B * H, (T + kTcBM - 1) / kTcBM), gk(B * (H / group), (S + kTcBM - 1) / kTcBM);
      kq<<<gq, kTcThreads, bq, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o, ov, dout, dov, lse,
                                         delta, dq, dqv, group, window);
      kk<<<gk, kTcThreads, bk, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, dout, dov, lse, delta,
                                         dk, dkv, dv, dvv, group, window);
      return;
    }
  }
  constexpr int sq = fit<smem_dq<R, E, F>>(), sk = fit<smem_dkdv<R, E, F>>();
  if constexpr (sq >= 0) {
    constexpr int BM = kShapeM[sq], BN = kShapeN[sq];
    constexpr size_t bytes = smem_dq<R, E, F>(BM, BN);
    auto kern = dq_tiled<R, E, F, BM, BN>;
    allow_smem(kern, bytes);
    dim3 grid(B * H, (T + BM - 1) / BM);
    kern<<<grid, kThreads, bytes, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o, ov, dout, dov,
                                            lse, delta, dq, dqv, group, window);
  } else {
    dim3 grid(B * H, (T + kWarps - 1) / kWarps);
    dq_rows<R, E, F><<<grid, 32 * kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, o, ov,
                                                       dout, dov, lse, delta, dq, dqv, group, window);
  }
  if constexpr (sk >= 0) {
    constexpr int BM = kShapeM[sk], BN = kShapeN[sk];
    constexpr size_t bytes = smem_dkdv<R, E, F>(BM, BN);
    auto kern = dkdv_tiled<R, E, F, BM, BN>;
    allow_smem(kern, bytes);
    dim3 grid(B * (H / group), (S + BM - 1) / BM);
    kern<<<grid, kThreads, bytes, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, dout, dov, lse,
                                            delta, dk, dkv, dv, dvv, group, window);
  } else {
    dim3 grid(B * (H / group), (S + kWarps - 1) / kWarps);
    dkdv_rows<R, E, F><<<grid, 32 * kWarps, 0, stream>>>(H, T, S, q_offset, causal, scale, q, qv, k, kv, v, vv, dout,
                                                         dov, lse, delta, dk, dkv, dv, dvv, group, window);
  }
}

// A batched decode step (decode_rows_kernel): n rows, row r at position pos[r] of slot seq[r]
// (pos and seq on the device). Check cudaGetLastError after.
template <typename R, int E, int F>
static inline void cannl_attention_decode_rows(cudaStream_t stream, int n, int H, int group, const int64_t* pos,
                                               const int64_t* seq, int rows, int window, R scale, const R* q,
                                               long long q_rs, long long q_ss, long long q_ps, const R* k,
                                               long long k_st, long long k_ss,
                                               const R* v, long long v_st, long long v_ss, R* o, long long o_rs,
                                               R* lse, long long lse_rs, long long lse_sh) {
  if (n < 1) return;
  const dim3 grid((unsigned)((H + cannl_attn::kWarps - 1) / cannl_attn::kWarps), (unsigned)n);
  cannl_attn::decode_rows_kernel<R, E, F><<<grid, 32 * cannl_attn::kWarps, 0, stream>>>(
      H, group, pos, seq, rows, window, scale, q, q_rs, q_ss, q_ps, k, k_st, k_ss, v, v_st, v_ss, o, o_rs, lse, lse_rs, lse_sh);
}

#endif
