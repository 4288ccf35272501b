// mma.h — the CPU stand-in's nvcuda::wmma (cuda_runtime.h): 16 x 16 x 16 fragments of bf16 operands
// and fp32 accumulators. Lane l of a warp holds elements i * 32 + l (i < 8) of a fragment's 16 x 16
// matrix in row-major order, a layout of its own (the device's is opaque: correct code touches a
// fragment only through these calls and element-wise loops). mma_sync gathers the warp's elements
// in its scratch (emu_warp_scratch) and sums each product in fp32, k in order, onto c.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the stand-in has the 16 x 16 x 16 shape only");
  enum { num_elements = 8 };
  using element_type = T;
  T x[num_elements];
};

namespace emu {
inline int row(int i) { return (i * 32 + (int)(threadIdx.x % 32)) / 16; }
inline int col(int i) { return (i * 32 + (int)(threadIdx.x % 32)) % 16; }
// The device's rules for load_matrix_sync and store_matrix_sync: the pointer 256-bit aligned, ldm a
// multiple of 16 bytes. The stand-in runs misaligned code; the device does not: stop here.
template <typename T>
inline void check(const T* p, unsigned ldm, const char* what) {
  if ((uintptr_t)p % 32 == 0 && (ldm * sizeof(T)) % 16 == 0) return;
  fprintf(stderr, "wmma::%s: pointer %p is not 32-byte aligned or ldm %u is not a multiple of 16 bytes\n", what,
          (const void*)p, ldm);
  abort();
}
inline float val(float x) { return x; }
inline float val(__nv_bfloat16 x) { return __bfloat162float(x); }
}  // namespace emu

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}
// An operand: element (r, c) at p[r * ldm + c] (row_major) or p[r + c * ldm] (col_major).
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  constexpr bool rm = std::is_same<Layout, row_major>::value;
  emu::check(p, ldm, "load_matrix_sync");
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = emu::row(i), c = emu::col(i);
    f.x[i] = rm ? p[r * ldm + c] : p[r + c * ldm];
  }
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  emu::check(p, ldm, "load_matrix_sync");
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = emu::row(i), c = emu::col(i);
    f.x[i] = l == mem_row_major ? p[r * ldm + c] : p[r + c * ldm];
  }
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  emu::check(p, ldm, "store_matrix_sync");
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = emu::row(i), c = emu::col(i);
    (l == mem_row_major ? p[r * ldm + c] : p[r + c * ldm]) = f.x[i];
  }
}
template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float* s = (float*)emu_warp_scratch();  // a [16][16], b [16][16], c [16][16]
  for (int i = 0; i < 8; ++i) {
    const int e = emu::row(i) * 16 + emu::col(i);
    s[e] = emu::val(a.x[i]);
    s[256 + e] = emu::val(b.x[i]);
    s[512 + e] = c.x[i];
  }
  emu_warp_sync();
  float out[8];
  for (int i = 0; i < 8; ++i) {
    const int r = emu::row(i), cc = emu::col(i);
    float sum = s[512 + r * 16 + cc];
    for (int k = 0; k < 16; ++k) sum += s[r * 16 + k] * s[256 + k * 16 + cc];
    out[i] = sum;
  }
  emu_warp_sync();
  for (int i = 0; i < 8; ++i) d.x[i] = out[i];
}
}  // namespace wmma
}  // namespace nvcuda
