// split_threads.cpp — how each nest goes to threads: column sums split into blocks of
// columns, and each parallel nest's work per point for the run-time thread test.
//
// Takes: any Program (after the passes that rewrite nests). Guarantees:
//   - (PassOptions::cpu_threads: not for the CUDA target, whose kernels sum a column per warp)
//     a sum into the cells of one axis that loop_order left on one thread (a bias or gain
//     gradient, c[o] += g[b, t, o]: the reduction loops outside, the written loop innermost,
//     at least 64 cells in whole blocks of 32) has its written loop split in two, blocks of 32
//     cells outermost and parallel, the 32 cells of a block innermost: each thread sums whole
//     columns, every cell in the same order as before (the same bits on any thread count);
//     gpt_char has 30 (its layer norms' gains and biases, b_fc, b_o, b_pr), up to 110 us each
//     on one thread;
//   - every nest with a parallel loop carries Stmt::point_work, the work of one point of its
//     loops in units of a plain point (a load or two, an operation, a store): 1, or the
//     arithmetic of its bodies in units of a transcendental function or division (rewrite.h
//     cost / 4) when that is more. The C emitter multiplies the nest's points by it and runs
//     the nest on threads when that reaches CANNL_PARALLEL_MIN (cannl_rt.h): AdamW's update of
//     gpt_char's four w_fc (65536 points of 7 units, 150-230 us on one thread) goes to every
//     thread, a residual add of 65536 points stays on one.
// Results do not change: each element is computed by one thread, in loop order.
#include <algorithm>
#include <cmath>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

constexpr long kBlock = 32;  // cells per block of a split column sum

// Loop `k` of n becomes blocks (new loop 0) and cells (new loop n); loop i < k moves to i + 1.
ir::Affine split(const ir::Affine& a, int k, int n) {
  ir::Affine r;
  r.offset = a.offset;
  for (const auto& t : a.terms) {
    if (t.iter == k) {
      r.terms.push_back({0, t.coef * kBlock});
      r.terms.push_back({n, t.coef});
    } else {
      r.terms.push_back({t.iter + 1, t.coef});
    }
  }
  return r;
}

ir::Access split(const ir::Access& a, int k, int n) {
  ir::Access r = a;
  for (auto& f : r.index) f = split(f, k, n);
  return r;
}

ir::ExprP split(const ir::ExprP& e, int k, int n) {
  auto c = std::make_shared<ir::Expr>(*e);
  if (c->op == ir::Op::Load || c->op == ir::Op::Index || c->op == ir::Op::Keep) c->access = split(c->access, k, n);
  for (auto& a : c->args) a = split(a, k, n);
  return c;
}

void split_column_sum(ir::Stmt& s) {
  if (s.call || s.parallel >= 0 || s.sequential || !s.single()) return;
  const ir::Assign& a = s.only();
  const int n = static_cast<int>(s.iters.size());
  if (a.accum != ir::Accum::Add || n < 2) return;
  const int k = n - 1;  // the written loop, innermost, alone in the out access
  int terms = 0;
  for (const ir::Affine& f : a.out.index)
    for (const auto& t : f.terms) terms += t.iter == k && t.coef == 1 ? 1 : 100;
  const ir::Iter& w = s.iters[static_cast<size_t>(k)];
  if (terms != 1 || w.batch || w.at_pos || w.size < 2 * kBlock || w.size % kBlock != 0) return;
  long work = 1;
  for (const ir::Iter& it : s.iters) {
    if (it.at_pos) return;
    work *= it.size;
  }
  if (work < (1L << 15)) return;
  std::vector<ir::Iter> iters = {{w.name + "_blk", w.size / kBlock, false, false}};
  for (int i = 0; i < k; ++i) iters.push_back(s.iters[static_cast<size_t>(i)]);
  iters.push_back({w.name, kBlock, false, false});
  ir::Assign& m = s.only();
  m.out = split(m.out, k, n);
  m.body = split(m.body, k, n);
  if (s.product) {  // (mark_contractions: its factors, to the emitters)
    s.product->a = split(s.product->a, k, n);
    s.product->b = split(s.product->b, k, n);
  }
  if (s.scaled_sum) s.scaled_sum->summand = split(s.scaled_sum->summand, k, n);
  s.iters = std::move(iters);
  s.parallel = 0;
}

}  // namespace

void split_threads(ir::Program& p, const PassOptions& o) {
  for (ir::Routine& r : p.routines)
    for (ir::Stmt& s : r.stmts) {
      if (o.cpu_threads) split_column_sum(s);
      if (s.call || s.parallel < 0) continue;
      double arithmetic = 0;
      for (const ir::Assign& a : s.assigns) arithmetic += passes::cost(*a.body);
      s.point_work = std::max(1L, std::lround(arithmetic / 4));
    }
}

}  // namespace cannl
