// contraction.h — a contraction nest mapped to a strided matrix product.
//
// Takes: a nest that passes/mark_contractions.cpp marked a contraction (Stmt::product:
// `out[...] += f * A[...] * B[...]`, f a product of constants and run-time scalars, every
// index a single loop variable or a constant inside the axis, out neither A nor B; unmarked
// nests are not products here). Its loops fall into four roles:
//   M  in out and A only        N  in out and B only
//   K  in A and B, not in out   batch  in all three
// Guarantees: for a contraction, a Gemm: C[i, j] += alpha * sum_p A[i, p] * B[p, j] with
// M, N and K each the product of the loops of its role that merge into one strided axis
// (outermost first: stride(outer) = size(inner) * stride(inner) in every operand), every
// other loop (batch loops, loops that do not merge) an outer loop around the product with
// its pointer offsets. B is the operand that carries the written buffer's unit-stride axis
// when it can (so the register tile is stored with vector stores), unless that makes N
// narrow (< 16) against a wider M (then the roles swap); `dot` when both operands are
// contiguous along K and one side is a small constant (the runtime's dot products);
// `symmetric` when the product is A A^T. Anything
// else (a loop in one operand only, an empty K, a loop in out alone) is not a contraction:
// nullopt, and the nest is printed as loops (Products below: what a library call takes
// besides).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct Gemm {
  // A merged axis: the loops it stands for (outermost first), its element count as a C
  // expression (`512`, `n`, `n * 16`), and its stride in each operand (0: not indexed).
  struct Axis {
    std::vector<int> iters;
    std::string size;   // C expression
    long max_size = 1;  // with batch loops at their maximum
    long stride_a = 0, stride_b = 0, stride_c = 0;
  };
  Axis m, n, k;
  std::vector<int> outer;   // loops around the product (outermost first), by iter index
  ir::Access a, b;          // the two operands (a: rows of the product, b: its columns)
  ir::ExprP alpha;          // the scalar factor; nullptr for 1
  bool outer_k = false;     // some K loop is an outer loop (calls accumulate into C)
  std::vector<bool> one_pass;  // per loop: one iteration and not the batch loop (no loop to print)
  std::vector<bool> at_pos;    // per loop: the decode routine's position (its variable is `pos[r]`; ir.h)
  bool dot = false;            // tiled only: summed as dot products (cannl_sgemm_dot; recognise_contraction)
  // Tiled only: A A^T, B the same elements as A with the roles of M and N swapped (one buffer,
  // the same offsets and strides; M = N): C is symmetric, and an overwriting product may
  // compute its upper triangle and mirror it (cannl_sgemm_sym: the same bits).
  bool symmetric = false;
  long flops() const { return 2 * m.max_size * n.max_size * k.max_size; }
};

// The flat stride of each axis of buffer `buf` (row-major).
std::vector<long> buffer_strides(const ir::Program& p, int buf);

// The stride of loop `iter` in an access (0 when it does not index it).
long iter_stride(const ir::Program& p, const ir::Access& a, int iter);

// The offset of an access's constant indices (its element at loop variables 0).
long access_base(const ir::Program& p, const ir::Access& a);

// Which contractions to take. Tiled (the C back end's GEMM kernels): a K loop and an M or N
// loop, and the operand roles chosen for the register tile, as above. Any (one library call
// each: cuBLAS, cublas_plan.h): also products without K loops (outer products) or without M
// and N loops (dot products; elementwise products, a batch of 1 x 1 products); a loop of one
// iteration (not the batch loop) is an outer loop whatever it indexes, so it never splits an
// axis; and A is the product's first factor as written (the library orients the product).
enum class Products { Tiled, Any };

std::optional<Gemm> recognise_contraction(const ir::Program& p, const ir::Stmt& s,
                                          Products which = Products::Tiled);

}  // namespace cannl
