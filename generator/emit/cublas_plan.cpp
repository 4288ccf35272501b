// cublas_plan.cpp — matrix products among the loop nests, as cuBLAS calls (see cublas_plan.h).
#include "emit/cublas_plan.h"

#include <algorithm>
#include <array>
#include <climits>
#include <vector>

#include "emit/contraction.h"

namespace cannl {

std::string GemmSize::str() const {
  if (!n) return std::to_string(c);
  return c == 1 ? "n" : "n * " + std::to_string(c);
}

namespace {

// A matrix of p x q elements with element (i, j) at i * sp + j * sq, as cuBLAS's column-major
// operand p x q: untransposed with leading dimension sq when sp == 1, transposed (stored
// q x p) with leading dimension sp when sq == 1. A group of one element has any stride.
bool layout(long p, long sp, long q, long sq, bool& trans, long& ld) {
  if (p == 1 && q == 1) {
    trans = false;
    ld = 1;
    return true;
  }
  if (sp == 1 || p == 1) {
    trans = false;
    ld = q == 1 ? p : sq;
    return ld >= p;
  }
  if (sq == 1 || q == 1) {
    trans = true;
    ld = p == 1 ? q : sp;
    return ld >= q;
  }
  return false;
}

// The element count of the loops `iters` (one merged axis or the batch loops).
GemmSize count(const ir::Stmt& s, const std::vector<int>& iters) {
  GemmSize z;
  for (int i : iters) {
    const ir::Iter& it = s.iters[static_cast<size_t>(i)];
    if (it.batch) z.n = true;
    else z.c *= it.size;
  }
  return z;
}

// A contraction's scale as cuBLAS's alpha: a product of constants (negations included) and at
// most one run-time scalar. A division stays a kernel (its reciprocal need not be exact).
bool alpha(const ir::Expr& e, double& c, std::string& scalar) {
  switch (e.op) {
    case ir::Op::Const: c *= e.value; return true;
    case ir::Op::Scalar:
      if (!scalar.empty()) return false;
      scalar = e.name;
      return true;
    case ir::Op::Neg: c = -c; return alpha(*e.args[0], c, scalar);
    case ir::Op::Mul: return alpha(*e.args[0], c, scalar) && alpha(*e.args[1], c, scalar);
    default: return false;
  }
}

// The outer loops of a Gemm as the one batch index of a strided batched call: its loops of
// more than one iteration, ordered by their stride in out (largest first), must each step
// out (a K loop outside the product would add calls into the same C) and be contiguous in
// every operand (each stride the next loop's times its size; all 0 in an operand the batch
// does not index: that matrix is shared), the run-time batch loop the outermost. Gives the
// batch's size and its stride in out, A and B.
bool batch(const ir::Program& p, const ir::Stmt& s, const Gemm& g, GemmSize& size, std::array<long, 3>& stride) {
  std::vector<int> loops;
  for (int it : g.outer)
    if (s.iters[static_cast<size_t>(it)].size != 1 || s.iters[static_cast<size_t>(it)].batch) loops.push_back(it);
  stride = {0, 0, 0};
  if (loops.empty()) return true;
  auto st = [&](int it) {
    return std::array<long, 3>{iter_stride(p, s.only().out, it), iter_stride(p, g.a, it), iter_stride(p, g.b, it)};
  };
  for (int it : loops)
    if (st(it)[0] == 0) return false;
  std::stable_sort(loops.begin(), loops.end(), [&](int x, int y) { return st(x)[0] > st(y)[0]; });
  for (size_t i = 1; i < loops.size(); ++i) {
    const ir::Iter& inner = s.iters[static_cast<size_t>(loops[i])];
    if (inner.batch) return false;
    const auto so = st(loops[i - 1]), si = st(loops[i]);
    for (size_t o = 0; o < 3; ++o)
      if (so[o] != si[o] * inner.size) return false;
  }
  stride = st(loops.back());
  size = count(s, loops);
  return true;
}

}  // namespace

std::optional<GemmPlan> plan_cublas_gemm(const ir::Program& p, const ir::Stmt& s) {
  if (!s.single()) return std::nullopt;
  const auto g = recognise_contraction(p, s, Products::Any);
  if (!g) return std::nullopt;
  // The call takes the buffers themselves: no constant index other than 0.
  for (const ir::Access* a : {&s.only().out, &g->a, &g->b})
    if (access_base(p, *a) != 0) return std::nullopt;
  GemmPlan plan;
  if (g->alpha && !alpha(*g->alpha, plan.alpha, plan.alpha_scalar)) return std::nullopt;
  plan.overwrite = s.zero_first;
  std::array<long, 3> bs{};
  if (!batch(p, s, *g, plan.count, bs)) return std::nullopt;
  plan.stride_c = bs[0];
  const GemmSize gm = count(s, g->m.iters), gn = count(s, g->n.iters), gk = count(s, g->k.iters);
  const long mb = p.max_batch;
  for (const GemmSize* z : {static_cast<const GemmSize*>(&plan.count), &gm, &gn, &gk})
    if (z->max(mb) > INT_MAX) return std::nullopt;
  plan.k = gk;
  plan.c = s.only().out.buf;
  const long K = gk.max(mb);
  // C = A B with out as the column-major m x n matrix C (M its rows: M's stride in out is 1),
  // else the transpose, C^T = B^T A^T (cuBLAS's m, n are the Gemm's N, M and its A, B the
  // Gemm's B, A).
  auto orient = [&](bool transposed) {
    const Gemm::Axis &rows = transposed ? g->n : g->m, &cols = transposed ? g->m : g->n;
    const GemmSize &r = transposed ? gn : gm, &c = transposed ? gm : gn;
    const long R = r.max(mb), C = c.max(mb);
    bool t_c = false;
    if (!layout(R, rows.stride_c, C, cols.stride_c, t_c, plan.ldc) || t_c) return false;
    plan.m = r;
    plan.n = c;
    plan.a = (transposed ? g->b : g->a).buf;
    plan.b = (transposed ? g->a : g->b).buf;
    plan.stride_a = bs[transposed ? 2 : 1];
    plan.stride_b = bs[transposed ? 1 : 2];
    for (size_t it = 0; it < s.iters.size(); ++it)
      if (s.iters[it].at_pos) {
        plan.pos_a = iter_stride(p, transposed ? g->b : g->a, static_cast<int>(it));
        plan.pos_b = iter_stride(p, transposed ? g->a : g->b, static_cast<int>(it));
        plan.pos_c = iter_stride(p, s.only().out, static_cast<int>(it));
      }
    const auto ra = transposed ? rows.stride_b : rows.stride_a, ka = transposed ? g->k.stride_b : g->k.stride_a;
    const auto kb = transposed ? g->k.stride_a : g->k.stride_b, cb = transposed ? cols.stride_a : cols.stride_b;
    return layout(R, ra, K, ka, plan.trans_a, plan.lda) && layout(K, kb, C, cb, plan.trans_b, plan.ldb);
  };
  if (!orient(false) && !orient(true)) return std::nullopt;
  if (plan.lda > INT_MAX || plan.ldb > INT_MAX || plan.ldc > INT_MAX) return std::nullopt;
  return plan;
}

}  // namespace cannl
