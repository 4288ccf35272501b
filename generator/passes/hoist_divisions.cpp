// hoist_divisions.cpp — a division by what the innermost loop does not change becomes a
// product with its reciprocal, which the C compiler computes once outside that loop.
//
// Takes: any Program, loops in their final order (after fuse). Guarantees: in every nest, each
// x / y whose divisor y reads nothing the innermost loop indexes (loads, indices, dropout's
// draws) while x does is x * (1 / y): layer_norm's (x[b, t, o] - mean[b, t]) /
// sqrt(var[b, t] + eps) and its variance gradient's division by var + eps cost a multiply per
// element and one division per row instead of a division per element (a vector division takes
// 5 or more cycles where a product takes one; without -freciprocal-math the compiler may not
// do this itself). Values change by float rounding (one more rounding per element).
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

bool uses_iter(const ir::Expr& e, int it) {
  if (e.op == ir::Op::Load || e.op == ir::Op::Index || e.op == ir::Op::Keep)
    for (const ir::Affine& a : e.access.index)
      for (const auto& t : a.terms)
        if (t.iter == it) return true;
  for (const ir::ExprP& a : e.args)
    if (uses_iter(*a, it)) return true;
  return false;
}

ir::ExprP hoist(const ir::ExprP& e, int inner) {
  std::vector<ir::ExprP> args;
  bool changed = false;
  for (const ir::ExprP& a : e->args) {
    args.push_back(hoist(a, inner));
    changed = changed || args.back() != a;
  }
  if (e->op == ir::Op::Div && args[1]->op != ir::Op::Const && uses_iter(*args[0], inner) && !uses_iter(*args[1], inner))
    return ir::binary(ir::Op::Mul, args[0], ir::binary(ir::Op::Div, ir::cnst(1), args[1]));
  return changed ? passes::rebuild(*e, std::move(args)) : e;
}

}  // namespace

void hoist_divisions(ir::Program& p, const PassOptions&) {
  for (ir::Routine* r : ir::all_routines(p))
    for (ir::Stmt& s : r->stmts) {
      if (s.call || s.iters.empty()) continue;
      const int inner = static_cast<int>(s.iters.size()) - 1;
      if (s.iters.back().size == 1) continue;
      for (ir::Assign& a : s.assigns) a.body = hoist(a.body, inner);
    }
}

}  // namespace cannl
