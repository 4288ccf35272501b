// mark_contractions.cpp — contractions and scaled sums, marked once for every reader.
//
// Takes: any Program (after the passes that rewrite nests). Guarantees: every nest of one
// assignment that is a contraction (ir.h Product: out += alpha * a * b, as split here: the
// body a product of two loads, constants and run-time scalars, negations, and divisions by
// constants or scalars) carries Stmt::product; every zero_first `+=` nest whose body is
// `x * c` (c a constant) carries Stmt::scaled_sum. The C emitter's matrix-product calls
// (emit/contraction.h), the cuBLAS plan and the cost model (ir/stats.cpp) read these marks;
// none of them re-derives the pattern. Nothing else changes.
#include "passes/pipeline.h"

namespace cannl {

namespace {

using ir::Op;

// Splits a body into its loads and a scalar factor: products of loads, constants and run-time
// scalars, negations, and divisions by constants or scalars.
bool split_factors(const ir::ExprP& e, std::vector<ir::ExprP>& loads, ir::ExprP& alpha) {
  auto times = [&](ir::ExprP f) { alpha = alpha ? ir::binary(Op::Mul, alpha, f) : f; };
  switch (e->op) {
    case Op::Load: loads.push_back(e); return true;
    case Op::Const: case Op::Scalar: times(e); return true;
    case Op::Neg:
      if (!split_factors(e->args[0], loads, alpha)) return false;
      alpha = alpha ? ir::unary(Op::Neg, alpha) : ir::cnst(-1);
      return true;
    case Op::Mul: return split_factors(e->args[0], loads, alpha) && split_factors(e->args[1], loads, alpha);
    case Op::Div: {
      const ir::ExprP& d = e->args[1];
      if (d->op != Op::Const && d->op != Op::Scalar) return false;
      if (!split_factors(e->args[0], loads, alpha)) return false;
      alpha = ir::binary(Op::Div, alpha ? alpha : ir::cnst(1), d);
      return true;
    }
    default: return false;
  }
}

// Every index a single loop variable (each at most once) or a constant inside the axis, and
// no loop longer than the axis it indexes.
bool plain_access(const ir::Program& p, const ir::Stmt& s, const ir::Access& a) {
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  std::vector<bool> seen(s.iters.size(), false);
  for (size_t d = 0; d < dims.size(); ++d) {
    const ir::Affine& f = a.index[d];
    if (f.terms.empty()) {
      if (f.offset < 0 || f.offset >= dims[d].size) return false;
      continue;
    }
    if (!f.is_single_iter()) return false;
    const auto it = static_cast<size_t>(f.terms[0].iter);
    if (seen[it] || s.iters[it].size > dims[d].size) return false;
    seen[it] = true;
  }
  return true;
}

std::optional<ir::Product> product(const ir::Program& p, const ir::Stmt& s) {
  if (!s.single() || s.only().accum != ir::Accum::Add || s.sequential) return std::nullopt;
  const ir::Access& out = s.only().out;
  std::vector<ir::ExprP> loads;
  ir::ExprP alpha;
  if (!split_factors(s.only().body, loads, alpha) || loads.size() != 2) return std::nullopt;
  const ir::Access& a = loads[0]->access;
  const ir::Access& b = loads[1]->access;
  if (a.buf == out.buf || b.buf == out.buf) return std::nullopt;
  for (const ir::Access* x : {&out, &a, &b})
    if (!plain_access(p, s, *x)) return std::nullopt;
  return ir::Product{a, b, alpha && !ir::is_const(alpha, 1) ? alpha : nullptr};
}

std::optional<ir::ScaledSum> scaled_sum(const ir::Stmt& s) {
  if (!s.zero_first || !s.single() || s.only().accum != ir::Accum::Add) return std::nullopt;
  const ir::Expr& body = *s.only().body;
  if (body.op != Op::Mul || body.args[1]->op != Op::Const) return std::nullopt;
  return ir::ScaledSum{body.args[0], body.args[1]};
}

}  // namespace

void mark_contractions(ir::Program& p, const PassOptions&) {
  for (ir::Routine* r : ir::all_routines(p))
    for (ir::Stmt& s : r->stmts) {
      s.product = product(p, s);
      s.scaled_sum = scaled_sum(s);
    }
}

}  // namespace cannl
