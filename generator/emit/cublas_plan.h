// cublas_plan.h — matrix products among the loop nests, as cuBLAS calls (the CUDA back end's;
// the C back end prints its own GEMM kernels for the same products).
//
// Takes: a nest. Gives, when it is a contraction (recognise_contraction with Products::Any:
// out[..] += f * A[..] * B[..], each loop an M, N, K or batch loop, see contraction.h) that
// one strided batched GEMM computes, that GEMM: column-major, cuBLAS's view of the row-major
// buffers. From the Gemm: M, N and K with their strides in each operand; the scale f as
// alpha (constants and at most one run-time scalar); a zero_first nest as beta = 0 (the call
// overwrites C). It must also be one call: no constant index other than 0, the outer loops
// (loops of one iteration aside) flattening to one batch index with one stride per operand
// (see batch() in the .cpp), the run-time count n outermost, and strides that make a legal
// GEMM (one unit stride per matrix, leading dimensions that cover a column). Matrix products,
// their gradients and einsums are such contractions; convolutions (shifted indices) are not,
// their im2col products are. Sizes that involve n keep it as a factor. Anything else:
// nullopt (the CUDA emitter prints a kernel).
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
  // The decode routine's nests (ir::Iter::at_pos): the stride of its position in cuBLAS's A, B
  // and C (0: not indexed). Over rows each row is at its own position pos[r], no one offset: the
  // emitter makes a nest with one a kernel (CudaEmitter::gemm_at_rows).
  long pos_a = 0, pos_b = 0, pos_c = 0;
};

std::optional<GemmPlan> plan_cublas_gemm(const ir::Program& p, const ir::Stmt& s);

}  // namespace cannl
