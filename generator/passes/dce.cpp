// dce.cpp — dead code elimination: nests whose results nobody reads.
//
// Takes: any Program. Guarantees: in each routine, a nest is kept only when it writes a
// buffer the routine hands out or keeps (ir.h live_out: params, optimiser state, param
// gradients, loss, metrics, outputs) or one that a later kept nest reads; the others are
// removed (gradients of tensors nothing reads, forward tensors no loss needs, fills of
// buffers left unread by inlining). Results the host can see are unchanged.
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

void dce(ir::Program& p, const PassOptions&) {
  for (ir::Routine* rp : ir::all_routines(p)) {
    ir::Routine& r = *rp;
    std::set<int> needed = ir::live_out(p, r);
    std::vector<bool> keep(r.stmts.size(), false);
    for (size_t i = r.stmts.size(); i-- > 0;) {
      const ir::Stmt& s = r.stmts[i];
      for (int w : passes::writes(s)) keep[i] = keep[i] || needed.count(w) > 0;
      if (!keep[i]) continue;
      for (int b : passes::reads(s)) needed.insert(b);
    }
    std::vector<ir::Stmt> kept;
    for (size_t i = 0; i < r.stmts.size(); ++i)
      if (keep[i]) kept.push_back(std::move(r.stmts[i]));
    r.stmts = std::move(kept);
  }
}

}  // namespace cannl
