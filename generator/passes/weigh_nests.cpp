// weigh_nests.cpp — each parallel nest's work per point, for the run-time thread test.
//
// Takes: any Program (after the passes that rewrite nests' bodies). Guarantees: every nest
// with a parallel loop carries Stmt::point_work, the work of one point of its loops in units
// of a plain point (a load or two, an operation, a store): 1, or the arithmetic of its bodies
// in units of a transcendental function or division (rewrite.h cost / 4) when that is more.
// The C emitter multiplies the nest's points by it and runs the nest on threads when that
// reaches CANNL_PARALLEL_MIN (cannl_rt.h): AdamW's update of gpt_char's four w_fc (65536
// points of 26 units: 150-230 us on one thread) goes to every thread, a residual add of
// 65536 points stays on one. Measured (gpt_char, one thread, 2026-11-24): 131072 plain
// points take 20-130 us, a fused AdamW point ~3 ns. Which loop is parallel, and the
// results, do not change (each element is computed by one thread in loop order).
#include <algorithm>
#include <cmath>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

void weigh_nests(ir::Program& p, const PassOptions&) {
  for (ir::Routine& r : p.routines)
    for (ir::Stmt& s : r.stmts) {
      if (s.call || s.parallel < 0) continue;
      double arithmetic = 0;
      for (const ir::Assign& a : s.assigns) arithmetic += passes::cost(*a.body);
      s.point_work = std::max(1L, std::lround(arithmetic / 4));
    }
}

}  // namespace cannl
