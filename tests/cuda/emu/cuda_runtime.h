// cuda_runtime.h — a CPU stand-in for the CUDA runtime's device side (tests/cuda/emu_decode.sh): enough
// of it to compile a generated .cu with g++ and run it on the host, each GPU thread an OS thread
// (emu.cpp), each launch `k<<<g, b, 0, s>>>(args)` rewritten as emu_launch (launch_rewrite.py).
// For index arithmetic, not numerics: cuBLAS is a reference loop summing in double, and device
// memory is host memory (allocations start NaN-filled). The host API keeps the real
// cuda_runtime_api.h's declarations (emu.cpp defines the few the runtime and the model call).
#pragma once
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
// Kernels that take dynamic shared memory (cannl_attention.cuh's tiles) ask the stand-in for it:
// a block's own 256 KiB, zeroed at its start.
#define CANNL_CUDA_EMU 1
void* emu_dynamic_smem();
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;
void emu_launch(dim3 g, dim3 b, std::function<void()> f);
void emu_warp_sync();
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_sync(); }
// The calling warp's own scratch (mma.h's mma_sync: 3 KiB).
void* emu_warp_scratch();
void __syncthreads();
void* emu_slot();
template <typename T>
T emu_shfl(T v, int src_lane) {
  T* slots = (T*)emu_slot();
  const unsigned lane = threadIdx.x % 32, base = threadIdx.x - lane;
  slots[threadIdx.x] = v;
  emu_warp_sync();
  T r = src_lane >= 0 && src_lane < 32 ? slots[base + src_lane] : v;
  emu_warp_sync();
  return r;
}
template <typename T>
T __shfl_down_sync(unsigned, T v, int d) {
  return emu_shfl(v, (int)(threadIdx.x % 32) + d);
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int d) {
  return emu_shfl(v, (int)(threadIdx.x % 32) ^ d);
}
float atomicAdd(float* p, float v);
double atomicAdd(double* p, double v);
unsigned atomicCAS(unsigned* p, unsigned c, unsigned v);
unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v);
inline unsigned __float_as_uint(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
inline long long __double_as_longlong(double x) {
  long long u;
  memcpy(&u, &x, 8);
  return u;
}
inline double __longlong_as_double(long long u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}
