// emu.cpp — the CPU stand-in's definitions (cuda_runtime.h): launches, barriers, shuffles, atomics,
// the CUDA runtime functions cannl's runtime and generated models call, and
// cublasGemmStridedBatchedEx as cuBLAS defines it (column-major), summed in double.
#include <cublas_v2.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_runtime.h"
thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;
static thread_local std::barrier<>* warp_bar;
static thread_local std::barrier<>* block_bar;
static thread_local double* slots;
static thread_local double* dynamic_smem;
static thread_local float* warp_scratch;
static std::mutex atomics;
void emu_warp_sync() { warp_bar->arrive_and_wait(); }
void __syncthreads() { block_bar->arrive_and_wait(); }
void* emu_slot() { return slots; }
void* emu_dynamic_smem() { return dynamic_smem; }
void* emu_warp_scratch() { return warp_scratch; }
void emu_launch(dim3 g, dim3 b, std::function<void()> f) {
  const unsigned n = b.x * b.y * b.z;
  if (b.y != 1 || b.z != 1) abort();
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        std::barrier<> block(n);
        std::vector<std::barrier<>*> warps;
        for (unsigned w = 0; w < (n + 31) / 32; ++w) warps.push_back(new std::barrier<>(std::min(32u, n - 32 * w)));
        std::vector<double> sl(n * 2);
        // (a block's dynamic shared memory: 256 KiB, zeroed, 128-byte aligned as the device's)
        struct alignas(128) line { double d[16]; };
        std::vector<line> smem(256 * 1024 / sizeof(line));
        std::vector<float> scratch((n + 31) / 32 * 768);
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < n; ++t)
          ts.emplace_back([&, t] {
            threadIdx = uint3{t, 0, 0};
            blockIdx = uint3{bx, by, bz};
            blockDim = b;
            gridDim = g;
            warp_bar = warps[t / 32];
            block_bar = &block;
            slots = sl.data();
            dynamic_smem = smem.data()->d;
            warp_scratch = scratch.data() + t / 32 * 768;
            f();
            warp_bar->arrive_and_drop();
            block_bar->arrive_and_drop();
          });
        for (auto& t : ts) t.join();
        for (auto* w : warps) delete w;
      }
}
float atomicAdd(float* p, float v) {
  std::lock_guard<std::mutex> l(atomics);
  float o = *p;
  *p = o + v;
  return o;
}
double atomicAdd(double* p, double v) {
  std::lock_guard<std::mutex> l(atomics);
  double o = *p;
  *p = o + v;
  return o;
}
unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) {
  std::lock_guard<std::mutex> l(atomics);
  unsigned o = *p;
  if (o == c) *p = v;
  return o;
}
unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  std::lock_guard<std::mutex> l(atomics);
  unsigned long long o = *p;
  if (o == c) *p = v;
  return o;
}

extern "C" {
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = calloc(1, n ? n : 1);
  for (size_t i = 0; i < n / 4; ++i) ((float*)*p)[i] = NAN;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  *p = calloc(1, n ? n : 1);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* d, int v, size_t n) {
  memset(d, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) { return cudaSuccess; }
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) {
  memset(d, v, n);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = (cudaStream_t)malloc(8);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  free(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = (cudaEvent_t)malloc(8);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  free(e);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : 0;  // an sm_90 as far as the launchers ask
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "emu"; }
const char* cudaGetErrorString(cudaError_t) { return "emu"; }

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = (cublasHandle_t)malloc(8);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusName(cublasStatus_t) { return "emu"; }
const char* cublasGetStatusString(cublasStatus_t) { return "emu"; }
}
template <typename R>
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha, const void* A,
                 int lda, long long sa, const void* B, int ldb, long long sb, const void* beta, void* C, int ldc,
                 long long sc, int count) {
  const R al = *(const R*)alpha, be = *(const R*)beta;
  for (int i = 0; i < count; ++i)
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < n; ++c) {
        double sum = 0;
        for (int p = 0; p < k; ++p) {
          const R x = ta == CUBLAS_OP_T ? ((const R*)A)[i * sa + p + (long long)r * lda]
                                        : ((const R*)A)[i * sa + r + (long long)p * lda];
          const R y = tb == CUBLAS_OP_T ? ((const R*)B)[i * sb + c + (long long)p * ldb]
                                        : ((const R*)B)[i * sb + p + (long long)c * ldb];
          sum += (double)x * y;
        }
        R& out = ((R*)C)[i * sc + r + (long long)c * ldc];
        out = (R)(al * sum + (be == 0 ? 0 : be * out));
      }
}
extern "C" cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                     int n, int k, const void* alpha, const void* A, cudaDataType at,
                                                     int lda, long long sa, const void* B, cudaDataType, int ldb,
                                                     long long sb, const void* beta, void* C, cudaDataType, int ldc,
                                                     long long sc, int count, cublasComputeType_t, cublasGemmAlgo_t) {
  if (at == CUDA_R_64F)
    gemm<double>(ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, count);
  else
    gemm<float>(ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, count);
  return CUBLAS_STATUS_SUCCESS;
}
