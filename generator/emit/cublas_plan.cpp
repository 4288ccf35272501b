// cublas_plan.cpp — matrix products among the loop nests, as cuBLAS calls (see cublas_plan.h).
#include "emit/cublas_plan.h"

#include <algorithm>
#include <climits>
#include <vector>

namespace cannl {

std::string GemmSize::str() const {
  if (!n) return std::to_string(c);
  return c == 1 ? "n" : "n * " + std::to_string(c);
}

namespace {

// The element stride of loop `it` in an access (0 when it does not index it); false when
// an index is not a single loop variable or 0.
bool strides(const ir::Program& p, const ir::Access& a, size_t loops, std::vector<long>& out) {
  out.assign(loops, 0);
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  long stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    const ir::Affine& f = a.index[d];
    if (f.is_single_iter())
      out[static_cast<size_t>(f.terms[0].iter)] += stride;
    else if (!(f.terms.empty() && f.offset == 0))
      return false;
    stride *= dims[d].size;
  }
  return true;
}

struct Group {
  GemmSize size;
  std::vector<long> stride;  // per operand (out, A, B); 0 where the group does not index it
  bool ok = true;
};

// Flattens the loops of a group into one index: in every operand the group indexes, the
// loops, ordered by decreasing stride, must be contiguous (each stride the next one's times
// its size) and in the same order.
Group flatten(const ir::Stmt& s, const std::vector<int>& loops, const std::vector<std::vector<long>>& st) {
  Group g;
  g.stride.assign(3, 0);
  std::vector<int> ls;
  for (int l : loops)
    if (s.iters[static_cast<size_t>(l)].size != 1 || s.iters[static_cast<size_t>(l)].batch) ls.push_back(l);
  if (ls.empty()) return g;
  int ref = st[0][static_cast<size_t>(ls[0])] ? 0 : st[1][static_cast<size_t>(ls[0])] ? 1 : 2;
  std::sort(ls.begin(), ls.end(), [&](int x, int y) {
    return st[static_cast<size_t>(ref)][static_cast<size_t>(x)] > st[static_cast<size_t>(ref)][static_cast<size_t>(y)];
  });
  for (size_t i = 0; i < ls.size(); ++i) {
    const ir::Iter& it = s.iters[static_cast<size_t>(ls[i])];
    if (it.batch) {
      if (i != 0 || g.size.n) g.ok = false;  // the run-time extent must be the outermost
      g.size.n = true;
    } else {
      g.size.c *= it.size;
    }
  }
  for (size_t o = 0; o < 3; ++o) {
    if (st[o][static_cast<size_t>(ls[0])] == 0) continue;
    for (size_t i = 0; i + 1 < ls.size(); ++i) {
      long outer = st[o][static_cast<size_t>(ls[i])], inner = st[o][static_cast<size_t>(ls[i + 1])];
      if (inner == 0 || outer != inner * s.iters[static_cast<size_t>(ls[i + 1])].size) g.ok = false;
    }
    g.stride[o] = st[o][static_cast<size_t>(ls.back())];
  }
  return g;
}

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

}  // namespace

std::optional<GemmPlan> plan_cublas_gemm(const ir::Program& p, const ir::Stmt& s) {
  if (s.accum != ir::Accum::Add || s.sequential || !s.fused.empty() || !s.body || s.body->op != ir::Op::Mul)
    return std::nullopt;
  const ir::Expr* prod = s.body.get();
  double alpha = 1;
  std::string alpha_scalar;
  if (prod->args[0]->op == ir::Op::Mul && prod->args[1]->op == ir::Op::Const) {
    alpha = prod->args[1]->value;
    prod = prod->args[0].get();
  } else if (prod->args[0]->op == ir::Op::Mul && prod->args[1]->op == ir::Op::Scalar) {
    alpha_scalar = prod->args[1]->name;
    prod = prod->args[0].get();
  }
  const ir::Expr& ea = *prod->args[0];
  const ir::Expr& eb = *prod->args[1];
  if (ea.op != ir::Op::Load || eb.op != ir::Op::Load) return std::nullopt;
  if (ea.access.buf == s.out.buf || eb.access.buf == s.out.buf) return std::nullopt;
  const size_t loops = s.iters.size();
  std::vector<std::vector<long>> st(3);
  if (!strides(p, s.out, loops, st[0]) || !strides(p, ea.access, loops, st[1]) || !strides(p, eb.access, loops, st[2]))
    return std::nullopt;
  std::vector<int> batch, mg, ng, kg;
  for (size_t l = 0; l < loops; ++l) {
    const bool o = st[0][l] != 0, a = st[1][l] != 0, b = st[2][l] != 0;
    const ir::Iter& it = s.iters[l];
    if (!o && !a && !b) {
      if (it.size != 1 || it.batch) return std::nullopt;  // a loop that indexes nothing repeats the sum
      continue;
    }
    if (o && a && b) batch.push_back(static_cast<int>(l));
    else if (o && a) mg.push_back(static_cast<int>(l));
    else if (o && b) ng.push_back(static_cast<int>(l));
    else if (a && b) kg.push_back(static_cast<int>(l));
    else return std::nullopt;
  }
  Group gb = flatten(s, batch, st), gm = flatten(s, mg, st), gn = flatten(s, ng, st), gk = flatten(s, kg, st);
  if (!gb.ok || !gm.ok || !gn.ok || !gk.ok) return std::nullopt;
  const long mb = p.max_batch;
  for (const Group* g : {&gb, &gm, &gn, &gk})
    if (g->size.max(mb) > INT_MAX) return std::nullopt;

  // C = out as m x n. Untransposed (out's M stride 1): C = A B. Otherwise compute the
  // transpose, C^T = B^T A^T: cuBLAS's m, n are our N, M and its A, B are our B, A.
  GemmPlan plan;
  plan.alpha = alpha;
  plan.alpha_scalar = alpha_scalar;
  plan.overwrite = s.zero_first;
  plan.count = gb.size;
  plan.stride_c = gb.stride[0];
  plan.k = gk.size;
  bool t_c = false;
  long ld = 0;
  const long M = gm.size.max(mb), N = gn.size.max(mb), K = gk.size.max(mb);
  if (layout(M, gm.stride[0], N, gn.stride[0], t_c, ld) && !t_c) {
    plan.m = gm.size;
    plan.n = gn.size;
    plan.c = s.out.buf;
    plan.ldc = ld;
    plan.a = ea.access.buf;
    plan.b = eb.access.buf;
    plan.stride_a = gb.stride[1];
    plan.stride_b = gb.stride[2];
    if (!layout(M, gm.stride[1], K, gk.stride[1], plan.trans_a, plan.lda)) return std::nullopt;
    if (!layout(K, gk.stride[2], N, gn.stride[2], plan.trans_b, plan.ldb)) return std::nullopt;
  } else if (layout(N, gn.stride[0], M, gm.stride[0], t_c, ld) && !t_c) {
    plan.m = gn.size;
    plan.n = gm.size;
    plan.c = s.out.buf;
    plan.ldc = ld;
    plan.a = eb.access.buf;
    plan.b = ea.access.buf;
    plan.stride_a = gb.stride[2];
    plan.stride_b = gb.stride[1];
    if (!layout(N, gn.stride[2], K, gk.stride[2], plan.trans_a, plan.lda)) return std::nullopt;
    if (!layout(K, gk.stride[1], M, gm.stride[1], plan.trans_b, plan.ldb)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (plan.lda > INT_MAX || plan.ldb > INT_MAX || plan.ldc > INT_MAX) return std::nullopt;
  return plan;
}

}  // namespace cannl
