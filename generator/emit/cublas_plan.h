// cublas_plan.h — matrix products among the loop nests, as cuBLAS calls (the CUDA back end's;
// the C back end has its own GEMM kernels).
//
// Takes: a nest. Gives, when the nest is a contraction, the strided batched GEMM that computes
// it (column-major, cuBLAS's view of the row-major buffers). A contraction is
//     out[..] += A[..] * B[..]        or        out[..] += A[..] * B[..] * c
// (c a constant or a run-time scalar: cuBLAS's alpha; passes::is_contraction's pattern), also
// as a zero_first nest (out[..] = 0 += ...: beta = 0, the GEMM overwrites C), with every index a single loop variable (or 0), out distinct from A and B, and every loop
// in two or three of the accesses: in all three it is a batch loop, in out and A an M loop,
// in out and B an N loop, in A and B a K loop (summed). Each group must flatten to one stride
// per buffer (its loops nested in the same order, contiguous, in every buffer it indexes) and
// the strides must make a legal GEMM (one unit stride per matrix, leading dimensions that
// cover a column). Matrix products, their gradients and einsums are contractions;
// convolutions (shifted indices) are not. Sizes that involve the run-time batch count n keep
// it as a factor.
#pragma once

#include <optional>
#include <string>

#include "ir/ir.h"

namespace cannl {

struct GemmSize {
  long c = 1;      // constant factor
  bool n = false;  // times the run-time batch count
  std::string str() const;  // "512", "n", "n * 49"
  long max(long max_batch) const { return n ? c * max_batch : c; }
};

struct GemmPlan {
  bool trans_a = false, trans_b = false;  // cuBLAS's op of its A and B
  GemmSize m, n, k, count;                // C is m x n, the sum runs over k, count matrices
  int a = -1, b = -1, c = -1;             // buffers of cuBLAS's A, B and C
  long lda = 1, ldb = 1, ldc = 1;
  long stride_a = 0, stride_b = 0, stride_c = 0;  // between the matrices of a batch
  double alpha = 1;          // C = alpha op(A) op(B) + beta C (alpha_scalar: a run-time scalar)
  std::string alpha_scalar;  // "" or the name of the scalar that is alpha (times `alpha`)
  bool overwrite = false;    // beta = 0 (a zero_first nest) instead of 1
};

std::optional<GemmPlan> plan_cublas_gemm(const ir::Program& p, const ir::Stmt& s);

}  // namespace cannl
