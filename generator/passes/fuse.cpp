// fuse.cpp — loop fusion of pointwise nests over the same loops.
//
// Takes: any Program. Two nests A (earlier) and B of a routine fuse when
//   - both are pointwise (each point writes its own cell of each buffer it writes: no
//     reduction), neither is sequential nor starts from zero, and their loops have the same
//     bounds in the same order (A's loop k stands for B's loop k);
//   - at each point B reads what A writes only at the cell A writes there, and A reads what
//     B writes only at the cell B writes there (so running B's assignment right after A's,
//     point by point, reads the same values as running the nests one after the other);
//   - the nests between them can all move below B's new place or above A's (independent).
// Guarantees: one nest in A's loops doing A's assignments then B's (B's `+=` into the cell A
// has just assigned is merged:  c = x; c += y  ->  c = x + y). Optimiser updates of one param
// (moment, then param), the two contributions to a gradient, bias + activation chains of
// pointwise tensors become single nests. Contractions are never fused (they stay GEMM-shaped).
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

using ir::Access;

bool fusible(const ir::Stmt& s) { return !s.sequential && !s.zero_first && passes::pointwise(s); }

bool same_loops(const ir::Stmt& a, const ir::Stmt& b) {
  if (a.iters.size() != b.iters.size()) return false;
  for (size_t k = 0; k < a.iters.size(); ++k)
    if (a.iters[k].size != b.iters[k].size || a.iters[k].batch != b.iters[k].batch) return false;
  return true;
}

// Each write of the nest: (buffer, access).
std::vector<Access> write_accesses(const ir::Stmt& s) {
  std::vector<Access> w;
  for (const ir::Assign& a : s.assigns) w.push_back(a.out);
  return w;
}

// Each read of the nest (loads, and the cells a non-Set accumulation reads).
std::vector<Access> read_accesses(const ir::Stmt& s) {
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  std::vector<Access> r;
  for (const ir::Expr* l : loads) r.push_back(l->access);
  for (const ir::Assign& a : s.assigns)
    if (a.accum != ir::Accum::Set) r.push_back(a.out);
  return r;
}

// Every access of `others` to a buffer written by `writer` is exactly the writer's access.
bool same_cells(const ir::Stmt& writer, const std::vector<Access>& others) {
  for (const Access& w : write_accesses(writer))
    for (const Access& o : others)
      if (o.buf == w.buf && !(o == w)) return false;
  return true;
}

bool can_fuse(const ir::Stmt& a, const ir::Stmt& b) {
  if (!same_loops(a, b)) return false;
  std::vector<Access> wb = write_accesses(b), rb = read_accesses(b);
  std::vector<Access> b_all = rb;
  b_all.insert(b_all.end(), wb.begin(), wb.end());
  std::vector<Access> a_all = read_accesses(a);
  for (const Access& x : write_accesses(a)) a_all.push_back(x);
  return same_cells(a, b_all) && same_cells(b, a_all);
}

void merge(ir::Stmt& a, ir::Stmt&& b) {
  ir::Assign& last = a.assigns.back();
  if (b.single() && b.only().accum == ir::Accum::Add && last.accum == ir::Accum::Set && b.only().out == last.out &&
      passes::count_loads(b, b.only().out.buf) == 0) {
    last.body = ir::binary(ir::Op::Add, last.body, b.only().body);
  } else {
    for (ir::Assign& f : b.assigns) a.assigns.push_back(std::move(f));
  }
  if (a.what != b.what && a.what.find("; " + b.what) == std::string::npos) a.what += "; " + b.what;
}

}  // namespace

void fuse(ir::Program& p, const PassOptions&) {
  for (ir::Routine& r : p.routines) {
    for (size_t i = 0; i < r.stmts.size(); ++i) {
      if (!fusible(r.stmts[i])) continue;
      for (size_t j = i + 1; j < r.stmts.size();) {
        ir::Stmt& a = r.stmts[i];
        ir::Stmt& b = r.stmts[j];
        if (!fusible(b) || !can_fuse(a, b)) {
          ++j;
          continue;
        }
        bool up = true, down = true;  // B moves up to A / A moves down to B
        for (size_t k = i + 1; k < j; ++k) {
          up = up && passes::independent(r.stmts[k], b);
          down = down && passes::independent(r.stmts[k], a);
        }
        if (!up && !down) {
          ++j;
          continue;
        }
        ir::Stmt moved = std::move(b);
        r.stmts.erase(r.stmts.begin() + static_cast<long>(j));
        merge(r.stmts[i], std::move(moved));
        if (!up) {  // the fused nest goes where B was
          ir::Stmt fused = std::move(r.stmts[i]);
          r.stmts.erase(r.stmts.begin() + static_cast<long>(i));
          r.stmts.insert(r.stmts.begin() + static_cast<long>(j - 1), std::move(fused));
          --i;  // look at whatever now sits at position i
          break;
        }
        j = i + 1;
      }
    }
  }
}

}  // namespace cannl
