// fold_fills.cpp — a fill followed by an accumulation into the same cells becomes one nest.
//
// Takes: any Program. A fill is a nest `B[...] = c` over the whole of B; lowering and
// autodiff put one before every accumulated buffer (= 0 before +=, = -inf before max=), and
// autodiff zeroes every gradient at the start of the backward pass.
// Guarantees: when the next nest that touches B accumulates into the whole of B with the
// matching identity (0 for +=, -inf for max=, inf for min=) and does not otherwise read B, the
// fill is removed and that nest marked `zero_first` (its cells start from the identity; the
// fill moves down past nests that do not touch B, so nothing else sees the difference).
// A zero_first += with no reduction loop (each point its own cell) becomes a plain
// assignment  B[...] = value.
#include <algorithm>
#include <cmath>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

double identity(ir::Accum a) {
  switch (a) {
    case ir::Accum::Add: return 0;
    case ir::Accum::Max: return -INFINITY;
    case ir::Accum::Min: return INFINITY;
    case ir::Accum::Set: break;
  }
  return NAN;
}

bool is_fill(const ir::Program& p, const ir::Stmt& s) {
  return s.single() && s.only().accum == ir::Accum::Set && s.only().body->op == ir::Op::Const && !s.sequential &&
         passes::covers_buffer(p, s, s.only().out);
}

}  // namespace

void fold_fills(ir::Program& p, const PassOptions&) {
  for (ir::Routine* rp : ir::all_routines(p)) {
    ir::Routine& r = *rp;
    std::vector<bool> drop(r.stmts.size(), false);
    // The nests touching each buffer, in order (folding does not change which nests do).
    std::vector<std::vector<size_t>> touching(p.buffers.size());
    for (size_t j = 0; j < r.stmts.size(); ++j) {
      std::set<int> t = passes::reads(r.stmts[j]);
      for (int w : passes::writes(r.stmts[j])) t.insert(w);
      for (int b : t) touching[static_cast<size_t>(b)].push_back(j);
    }
    for (size_t i = 0; i < r.stmts.size(); ++i) {
      const ir::Stmt& f = r.stmts[i];
      if (!is_fill(p, f)) continue;
      const int b = f.only().out.buf;
      const auto& t = touching[static_cast<size_t>(b)];
      for (auto next = std::upper_bound(t.begin(), t.end(), i); next != t.end();) {  // the next nest touching B
        ir::Stmt& s = r.stmts[*next];
        if (s.single() && s.only().out.buf == b && s.only().accum != ir::Accum::Set && !s.zero_first &&
            f.only().body->value == identity(s.only().accum) && passes::count_loads(s, b) == 0 &&
            passes::always_in_range(p, s, s.only().out) && [&] {
              // the out access reaches every cell of B: an injective map onto the whole buffer
              const ir::Access& out = s.only().out;
              if (!passes::injective(out)) return false;
              const auto& dims = p.buffers[static_cast<size_t>(b)].dims;
              for (size_t d = 0; d < dims.size(); ++d) {
                const ir::Iter& it = s.iters[static_cast<size_t>(out.index[d].terms[0].iter)];
                if (it.size != dims[d].size || it.batch != dims[d].batch) return false;
              }
              return true;
            }()) {
          drop[i] = true;
          s.zero_first = true;
          if (s.only().accum == ir::Accum::Add && passes::pointwise(s)) {
            s.zero_first = false;
            s.only().accum = ir::Accum::Set;
          }
        }
        break;
      }
    }
    std::vector<ir::Stmt> kept;
    for (size_t i = 0; i < r.stmts.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(r.stmts[i]));
    r.stmts = std::move(kept);
  }
}

}  // namespace cannl
