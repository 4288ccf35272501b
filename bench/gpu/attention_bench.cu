/* attention_bench.cu - cannl_attention.cuh's kernels timed on one GPU at one shape (default GPT-2
 * 124M's: 8 sequences, 12 heads, 1024 positions, width 64, causal, q, k and v views of one fused
 * buffer as the generated code passes them): the tiled fp32 kernels against the tensor-core ones
 * (bf16 operands, fp32 accumulation), forward and backward, medians of cudaEvent-timed repetitions,
 * and how far the two paths' outputs are apart (relative L2 of o, and of dq, dk, dv together).
 * What decides kAttentionTensorCores (generator/emit/cuda_emit.cpp). scripts/gpu-check.sh builds
 * it at staging and runs it in its profile part.
 *
 *   attention_bench [B H T [REPS]]      (width 64)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "cannl_attention.cuh"

#define CK(call)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "attention_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
              cudaGetErrorString(e_));                                                            \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

constexpr int D = 64;

struct Problem {
  int B = 8, H = 12, T = 1024;
  float *qkv = nullptr, *o = nullptr, *lse = nullptr, *delta = nullptr, *dout = nullptr, *dqkv = nullptr;
  cannl_attn_view qv = {0, 0, 0}, ov = {0, 0, 0};
  size_t n_qkv = 0, n_o = 0;
};

template <bool TC>
static void forward(const Problem& p) {
  const float scale = 1.0f / sqrtf((float)D);
  cannl_attention_forward<float, D, D, TC>(0, p.B, p.H, p.T, p.T, 0, 1, scale, p.qkv, p.qv, p.qkv + p.H * D, p.qv,
                                           p.qkv + 2 * p.H * D, p.qv, p.o, p.ov, p.lse);
}

template <bool TC>
static void backward(const Problem& p) {
  const float scale = 1.0f / sqrtf((float)D);
  cannl_attention_backward<float, D, D, TC>(0, p.B, p.H, p.T, p.T, 0, 1, scale, p.qkv, p.qv, p.qkv + p.H * D, p.qv,
                                            p.qkv + 2 * p.H * D, p.qv, p.o, p.ov, p.dout, p.ov, p.lse, p.delta,
                                            p.dqkv, p.qv, p.dqkv + p.H * D, p.qv, p.dqkv + 2 * p.H * D, p.qv);
}

// The median of `reps` timed calls of f, in ms.
template <typename F>
static double median_ms(F f, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {  // (two untimed)
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    if (r >= 2) ms.push_back(t);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

static std::vector<float> host(const float* p, size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

static double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    n += (double)b[i] * b[i];
  }
  return n > 0 ? sqrt(d / n) : sqrt(d);
}

// One forward and backward pass of a path from zeroed gradients: o, then dq, dk, dv.
template <bool TC>
static void outputs(const Problem& p, std::vector<float>& o, std::vector<float>& g) {
  CK(cudaMemset(p.dqkv, 0, p.n_qkv * sizeof(float)));
  forward<TC>(p);
  backward<TC>(p);
  CK(cudaDeviceSynchronize());
  o = host(p.o, p.n_o);
  g = host(p.dqkv, p.n_qkv);
}

int main(int argc, char** argv) {
  Problem p;
  int reps = 20;
  if (argc >= 4) p.B = atoi(argv[1]), p.H = atoi(argv[2]), p.T = atoi(argv[3]);
  if (argc >= 5) reps = atoi(argv[4]);
  if (p.B <= 0 || p.H <= 0 || p.T <= 0 || reps <= 0) {
    fprintf(stderr, "usage: attention_bench [B H T [REPS]] (positive integers)\n");
    return 2;
  }
  p.n_qkv = (size_t)p.B * p.T * 3 * p.H * D;
  p.n_o = (size_t)p.B * p.T * p.H * D;
  p.qv = {(long long)p.T * 3 * p.H * D, D, 3LL * p.H * D};
  p.ov = {(long long)p.T * p.H * D, D, (long long)p.H * D};
  std::vector<float> h(p.n_qkv);
  unsigned long long s = 1;
  for (auto& x : h) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = (float)((double)(s >> 11) / (double)(1ULL << 53) * 2 - 1);
  }
  CK(cudaMalloc((void**)&p.qkv, p.n_qkv * sizeof(float)));
  CK(cudaMalloc((void**)&p.dqkv, p.n_qkv * sizeof(float)));
  CK(cudaMalloc((void**)&p.o, p.n_o * sizeof(float)));
  CK(cudaMalloc((void**)&p.dout, p.n_o * sizeof(float)));
  CK(cudaMalloc((void**)&p.lse, (size_t)p.B * p.H * p.T * sizeof(float)));
  CK(cudaMalloc((void**)&p.delta, (size_t)p.B * p.H * p.T * sizeof(float)));
  CK(cudaMemcpy(p.qkv, h.data(), p.n_qkv * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.dout, h.data(), p.n_o * sizeof(float), cudaMemcpyHostToDevice));  // (any values)

  // Causal: half the T x T scores; forward 2 products, backward 5 (dq's recomputes QK^T).
  const double flop = 2.0 * p.B * p.H * (double)p.T * p.T * D / 2;
  const double f32_fwd = median_ms([&] { forward<false>(p); }, reps);
  const double f32_bwd = median_ms([&] { backward<false>(p); }, reps);
  const double tc_fwd = median_ms([&] { forward<true>(p); }, reps);
  const double tc_bwd = median_ms([&] { backward<true>(p); }, reps);
  std::vector<float> o32, g32, otc, gtc;
  outputs<false>(p, o32, g32);
  outputs<true>(p, otc, gtc);
  printf("attention B=%d H=%d T=%d D=%d causal, median of %d: fp32 tiled forward %.3f ms (%.1f TFLOP/s), backward "
         "%.3f ms (%.1f TFLOP/s); tensor cores forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f TFLOP/s); "
         "relative L2 between them: o %.2e, dq dk dv %.2e\n",
         p.B, p.H, p.T, D, reps, f32_fwd, 2 * flop / f32_fwd / 1e9, f32_bwd, 5 * flop / f32_bwd / 1e9, tc_fwd,
         2 * flop / tc_fwd / 1e9, tc_bwd, 5 * flop / tc_bwd / 1e9, rel_l2(otc, o32), rel_l2(gtc, g32));
  cudaFree(p.qkv), cudaFree(p.dqkv), cudaFree(p.o), cudaFree(p.dout), cudaFree(p.lse), cudaFree(p.delta);
  return 0;
}
