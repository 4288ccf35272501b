/* test_attention_cuda.cu - cannl_attention.cuh against cannl_attention.h (the CPU kernels, tested
 * against a long-double reference by test_attention.c) on the same cases, float and double, with
 * strided views and several sequences and heads, grouped-query heads and sliding windows; the
 * tensor-core kernels (bf16 operands, <float, E, F, true>) against the CPU kernels given the
 * operands rounded to bf16, within what the rounding of P and dS to bf16 leaves. Exits 77
 * (skipped) without a CUDA device. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "cannl_attention.cuh"
#include "cannl_attention.h"

static int failures = 0;

static double next_value(unsigned long long* s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / (double)(1ULL << 52) - 1.0;
}

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

template <typename R>
static void cpu_forward(const cannl_attn_dims* d, const R* q, long long qs, const R* k, long long ks, const R* v,
                        long long vs, R* o, long long os, R* lse);
template <>
void cpu_forward<float>(const cannl_attn_dims* d, const float* q, long long qs, const float* k, long long ks,
                        const float* v, long long vs, float* o, long long os, float* lse) {
  cannl_attention_forward_f32(d, q, qs, k, ks, v, vs, o, os, lse);
}
template <>
void cpu_forward<double>(const cannl_attn_dims* d, const double* q, long long qs, const double* k, long long ks,
                         const double* v, long long vs, double* o, long long os, double* lse) {
  cannl_attention_forward_f64(d, q, qs, k, ks, v, vs, o, os, lse);
}
static void cpu_backward(const cannl_attn_dims* d, const float* q, long long qs, const float* k, long long ks,
                         const float* v, long long vs, const float* o, long long os, const float* g, const float* lse,
                         float* delta, float* dq, float* dk, float* dv) {
  cannl_attention_backward_f32(d, q, qs, k, ks, v, vs, o, os, g, os, lse, delta, dq, qs, dk, ks, dv, vs);
}
static void cpu_backward(const cannl_attn_dims* d, const double* q, long long qs, const double* k, long long ks,
                         const double* v, long long vs, const double* o, long long os, const double* g,
                         const double* lse, double* delta, double* dq, double* dk, double* dv) {
  cannl_attention_backward_f64(d, q, qs, k, ks, v, vs, o, os, g, os, lse, delta, dq, qs, dk, ks, dv, vs);
}

// x rounded to bf16 (to nearest, ties to even), as __float2bfloat16 does.
static float bf16_round(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

template <typename R>
static R* dev(const std::vector<R>& h) {
  R* p;
  CK(cudaMalloc((void**)&p, h.size() * sizeof(R) + 1));
  CK(cudaMemcpy(p, h.data(), h.size() * sizeof(R), cudaMemcpyHostToDevice));
  return p;
}
template <typename R>
static std::vector<R> host(const R* p, size_t n) {
  std::vector<R> h(n);
  CK(cudaMemcpy(h.data(), p, n * sizeof(R), cudaMemcpyDeviceToHost));
  return h;
}

// B sequences, H query heads over G = H / R key/value heads (grouped-query when R > 1), T = S
// positions (or a decode step), widths E = F = W, a sliding window of `window` keys (0: none);
// q, k, v interleaved in one buffer [B, T, H + 2 G, W] as a fused product lays them out.
// TC: the tensor-core kernels (float only), against the CPU on operands rounded to bf16.
template <typename R, int W, bool TC = false>
static void run(int B, int H, int T, int S, int q_offset, int causal, double tol, unsigned long long seed, int R_ = 1,
                int window = 0) {
  if constexpr (TC) static_assert(cannl_attn::tc_takes<R, W, W, TC>(), "the launchers take the tensor cores");
  if (TC && !cannl_attn::tc_device()) {
    printf("bf16 W %d: a device before sm_80, the tensor-core kernels not taken: skipped\n", W);
    return;
  }
  const int G = H / R_;
  const long long st = (long long)(H + 2 * G) * W, sh = W, sb = (long long)S * st;  // S >= T rows per sequence
  const long long ko = (long long)H * W, vo = (long long)(H + G) * W;  // k's and v's heads in a row
  std::vector<R> qkv((size_t)(B * sb)), g((size_t)B * T * H * W);
  for (auto& x : qkv) x = (R)next_value(&seed);
  for (auto& x : g) x = (R)next_value(&seed);
  const R scale = (R)(1.0 / sqrt((double)W));
  std::vector<R> qkv_ref = qkv, g_ref = g;  // what the CPU takes
  if (TC) {
    for (auto& x : qkv_ref) x = (R)bf16_round((float)x);
    for (auto& x : g_ref) x = (R)bf16_round((float)x);
  }
  // CPU, per (b, h).
  std::vector<R> o((size_t)B * T * H * W), lse((size_t)B * H * T), delta((size_t)T);
  std::vector<R> dqkv(qkv.size(), R(0));
  cannl_attn_dims d = {T, S, W, W, q_offset, causal, (double)scale, window};
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const R *base = qkv_ref.data() + b * sb + h * sh, *kv = qkv_ref.data() + b * sb + (h / R_) * sh;
      R* ob = o.data() + (size_t)b * T * H * W + h * W;
      cpu_forward<R>(&d, base, st, kv + ko, st, kv + vo, st, ob, (long long)H * W,
                     lse.data() + ((size_t)b * H + h) * T);
    }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const R *base = qkv_ref.data() + b * sb + h * sh, *kv = qkv_ref.data() + b * sb + (h / R_) * sh;
      R *db = dqkv.data() + b * sb + h * sh, *dkv = dqkv.data() + b * sb + (h / R_) * sh;
      size_t off = (size_t)b * T * H * W + h * W;
      cpu_backward(&d, base, st, kv + ko, st, kv + vo, st, o.data() + off, (long long)H * W, g_ref.data() + off,
                   lse.data() + ((size_t)b * H + h) * T, delta.data(), db, dkv + ko, dkv + vo);
    }
  // GPU.
  R *d_qkv = dev(qkv), *d_g = dev(g), *d_dqkv = dev(std::vector<R>(qkv.size(), R(0)));
  R *d_o = dev(std::vector<R>(o.size(), R(0))), *d_lse = dev(std::vector<R>(lse.size(), R(0)));
  R* d_delta = dev(std::vector<R>(lse.size(), R(0)));
  cannl_attn_view qv = {sb, sh, st}, ov = {(long long)T * H * W, W, (long long)H * W};
  auto launch = [&] {
    cannl_attention_forward<R, W, W, TC>(0, B, H, T, S, q_offset, causal, scale, d_qkv, qv, d_qkv + ko, qv,
                                         d_qkv + vo, qv, d_o, ov, d_lse, R_, window);
    CK(cudaGetLastError());
    cannl_attention_backward<R, W, W, TC>(0, B, H, T, S, q_offset, causal, scale, d_qkv, qv, d_qkv + ko, qv,
                                          d_qkv + vo, qv, d_o, ov, d_g, ov, d_lse, d_delta, d_dqkv, qv, d_dqkv + ko,
                                          qv, d_dqkv + vo, qv, R_, window);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  };
  launch();
  auto go = host(d_o, o.size()), gl = host(d_lse, lse.size()), gd = host(d_dqkv, dqkv.size());
#ifndef CANNL_CUDA_EMU
  if (TC) {  // the same bits again (one writer a row, a fixed order)
    CK(cudaMemset(d_dqkv, 0, dqkv.size() * sizeof(R)));
    launch();
    auto go2 = host(d_o, o.size()), gl2 = host(d_lse, lse.size()), gd2 = host(d_dqkv, dqkv.size());
    if (memcmp(go.data(), go2.data(), o.size() * sizeof(R)) || memcmp(gl.data(), gl2.data(), lse.size() * sizeof(R)) ||
        memcmp(gd.data(), gd2.data(), dqkv.size() * sizeof(R))) {
      fprintf(stderr, "bf16 W %d: a second run differs\n", W);
      ++failures;
    }
  }
#endif
  double worst = 0;
  auto track = [&](double a, double b) {
    if (isinf(a) && isinf(b) && a == b) return;
    double e = fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1);
    if (!(e <= worst)) worst = e;
  };
  for (size_t i = 0; i < o.size(); ++i) track(go[i], o[i]);
  for (size_t i = 0; i < lse.size(); ++i) track(gl[i], lse[i]);
  for (size_t i = 0; i < dqkv.size(); ++i) track(gd[i], dqkv[i]);
  printf("%s B %d H %d (group %d) T %d S %d offset %d causal %d window %d W %d: largest difference %.2e\n",
         TC ? "bf16" : sizeof(R) == 4 ? "f32" : "f64", B, H, R_, T, S, q_offset, causal, window, W, worst);
  if (!(worst <= tol)) {
    fprintf(stderr, "  more than %.1e\n", tol);
    ++failures;
  }
  cudaFree(d_qkv), cudaFree(d_g), cudaFree(d_dqkv), cudaFree(d_o), cudaFree(d_lse), cudaFree(d_delta);
}

// The tensor-core kernels against the CPU on the same bf16 operands: what rounding P and dS to bf16
// for the second products leaves (relative 2^-9 a term).
static const double kTcTol = 1e-2;

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("test_attention_cuda: no CUDA device, skipped\n");
    return 77;
  }
  run<double, 16>(2, 3, 65, 65, 0, 1, 1e-12, 1);
  run<double, 32>(1, 2, 130, 130, 0, 0, 1e-12, 2);
  run<double, 40>(2, 1, 1, 97, 96, 1, 1e-12, 3);
#ifdef CANNL_CUDA_EMU  // (a thread per GPU thread: the largest cases smaller in the stand-in)
  run<float, 64>(1, 2, 150, 150, 0, 1, 2e-5, 4);
#else
  run<float, 64>(2, 4, 200, 200, 0, 1, 2e-5, 4);
#endif
  run<float, 32>(3, 2, 33, 33, 0, 0, 2e-5, 5);
  run<float, 32>(1, 2, 5, 40, 35, 1, 2e-5, 6);
  // grouped-query (4 query heads over 2 key/value heads), sliding windows
  run<double, 16>(2, 4, 65, 65, 0, 1, 1e-12, 7, 2);
  run<double, 16>(2, 2, 70, 70, 0, 1, 1e-12, 8, 1, 9);
#ifdef CANNL_CUDA_EMU
  run<float, 32>(1, 6, 100, 100, 0, 1, 2e-5, 9, 3, 40);
#else
  run<float, 32>(2, 6, 100, 100, 0, 1, 2e-5, 9, 3, 40);
#endif
  // the tensor-core kernels (--precision bf16) on the float cases, widths 16 * n
#ifdef CANNL_CUDA_EMU
  run<float, 64, true>(1, 2, 150, 150, 0, 1, kTcTol, 4);
#else
  run<float, 64, true>(2, 4, 200, 200, 0, 1, kTcTol, 4);
#endif
  run<float, 32, true>(3, 2, 33, 33, 0, 0, kTcTol, 5);
  run<float, 32, true>(1, 2, 5, 40, 35, 1, kTcTol, 6);
  run<float, 32, true>(1, 6, 100, 100, 0, 1, kTcTol, 9, 3, 40);
  run<float, 16, true>(1, 2, 70, 70, 0, 1, kTcTol, 10, 1, 9);
  if (failures) {
    fprintf(stderr, "test_attention_cuda: %d case(s) failed\n", failures);
    return 1;
  }
  printf("test_attention_cuda: all checks passed\n");
  return 0;
}
