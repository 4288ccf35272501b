// simplify.cpp — constant folding and algebraic simplification of every nest's expressions.
//
// Takes: any Program. Guarantees: each body is rebuilt bottom-up with the simplifying
// constructors of ir.h (constants folded; x + 0, x * 1, x * 0, x / 1, --x removed), and
//   x / c           ->  x * (1/c)          when 1/c is exact (c a power of two)
//   (x * c1) * c2   ->  x * (c1*c2)        constants gather at the right of a product,
//   c * x           ->  x * c              so a contraction keeps its form  (a * b) * c;
//   x * (y * c)     ->  (x * y) * c
// Values change at most by float rounding (a reassociated constant).
// The rules live in rewrite.cpp (simplify_expr), which other passes call on what they rewrite.
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

void simplify(ir::Program& p, const PassOptions&) {
  for (ir::Routine* r : ir::all_routines(p))
    for (ir::Stmt& s : r->stmts)
      for (ir::Assign& a : s.assigns) a.body = passes::simplify_expr(a.body);
}

}  // namespace cannl
