// plan_memory.cpp — liveness and one arena per routine.
//
// Takes: any Program (after the other passes), the element size and the target's alignment.
// For each routine that
// uses arena buffers (computed tensors, temporaries, gradients), each such buffer lives
// from the first nest that touches it to the last (to the routine's end when the routine
// hands it out: ir.h live_out — param gradients stay valid after train_step, the loss,
// metrics and outputs are read by the routine's epilogue; a buffer read before any nest
// writes it lives from the start).
// Guarantees: Routine::offsets gives each such buffer a byte offset in the routine's arena
// (a multiple of the alignment) and Routine::arena_bytes its size at max_batch; two buffers
// share bytes only when their lifetimes do not overlap, or in place: a pointwise nest that reads A for
// the last time only at the very cells it assigns B (same shape, same offset), as
// `h_mm_grad = h_grad * step(h)` over h_grad. Placement is first fit, the better of two
// orders (by first use, by size). Each routine has its own arena: what one routine leaves
// in its buffers (the gradients `<model>_grad` returns) no other routine touches.
#include <algorithm>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

struct Life {
  int buf;
  long bytes;
  long first, last;  // nest indices (-1: from the start; n: to the end)
  long offset = -1;
};

long align_up(long x, long a) { return (x + a - 1) / a * a; }

// A and B may share their offset in place at nest k: k's assignments write B pointwise
// (Set) and read A only at the cells they write B, every assignment reading A comes no later
// than the first writing B (a fused nest runs its assignments in order at each point), and
// k is A's last use and B's first.
bool in_place(const ir::Program& p, const ir::Stmt& s, int a, int b) {
  if (p.buffers[static_cast<size_t>(a)].dims != p.buffers[static_cast<size_t>(b)].dims) return false;
  if (s.assigns[0].out.buf == b && !passes::pointwise(s)) return false;
  int first_write = -1;
  std::vector<ir::Access> outs;
  for (size_t i = 0; i < s.assigns.size(); ++i) {
    const ir::Assign& as = s.assigns[i];
    if (as.out.buf == a) return false;
    if (as.out.buf != b) continue;
    if (as.accum != ir::Accum::Set) return false;
    if (first_write < 0) first_write = static_cast<int>(i);
    outs.push_back(as.out);
  }
  if (outs.empty()) return false;
  for (size_t i = 0; i < s.assigns.size(); ++i) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s.assigns[i].body, loads);
    for (const ir::Expr* l : loads) {
      if (l->access.buf != a) continue;
      if (static_cast<int>(i) > first_write) return false;
      for (const ir::Access& o : outs)
        if (!(l->access.index == o.index)) return false;
    }
  }
  return true;
}

long place(std::vector<Life>& lives, const std::vector<int>& order, const ir::Program& p, const ir::Routine& r,
           long align) {
  auto aligned = [&](long x) { return align_up(x, align); };
  long top = 0;
  for (Life& l : lives) l.offset = -1;
  for (int idx : order) {
    Life& l = lives[static_cast<size_t>(idx)];
    std::vector<long> candidates = {0};
    std::vector<const Life*> clash;  // lifetimes overlapping l, already placed
    std::vector<const Life*> partner;  // in-place partners (may share l's exact offset)
    for (const Life& o : lives) {
      if (o.offset < 0 || &o == &l) continue;
      const bool overlap = !(o.last < l.first || l.last < o.first);
      if (!overlap) continue;
      bool inpl = false;
      if (o.last == l.first && l.first >= 0 && l.first < static_cast<long>(r.stmts.size()))
        inpl = in_place(p, r.stmts[static_cast<size_t>(l.first)], o.buf, l.buf);
      else if (l.last == o.first && o.first >= 0 && o.first < static_cast<long>(r.stmts.size()))
        inpl = in_place(p, r.stmts[static_cast<size_t>(o.first)], l.buf, o.buf);
      (inpl ? partner : clash).push_back(&o);
      candidates.push_back(o.offset + aligned(o.bytes));
      if (inpl) candidates.push_back(o.offset);
    }
    std::sort(candidates.begin(), candidates.end());
    for (long c : candidates) {
      bool ok = true;
      for (const Life* o : clash) ok = ok && (c + l.bytes <= o->offset || o->offset + aligned(o->bytes) <= c);
      for (const Life* o : partner)
        ok = ok && (c == o->offset || c + l.bytes <= o->offset || o->offset + aligned(o->bytes) <= c);
      if (ok) {
        l.offset = c;
        break;
      }
    }
    top = std::max(top, l.offset + aligned(l.bytes));
  }
  return top;
}

}  // namespace

void plan_memory(ir::Program& p, const PassOptions& o) {
  for (ir::Routine& r : p.routines) {
    r.offsets.assign(p.buffers.size(), -1);
    r.arena_bytes = 0;
    const long n = static_cast<long>(r.stmts.size());
    std::vector<Life> lives;
    std::vector<int> at(p.buffers.size(), -1);
    auto touch = [&](int b, long k, bool read_first) {
      if (!passes::in_arena(p.buffers[static_cast<size_t>(b)])) return;
      if (at[static_cast<size_t>(b)] < 0) {
        at[static_cast<size_t>(b)] = static_cast<int>(lives.size());
        lives.push_back({b, p.buffers[static_cast<size_t>(b)].elements() * o.elem_bytes, read_first ? -1 : k, k});
      }
      lives[static_cast<size_t>(at[static_cast<size_t>(b)])].last = k;
    };
    for (long k = 0; k < n; ++k) {
      const ir::Stmt& s = r.stmts[static_cast<size_t>(k)];
      std::set<int> rs = passes::reads(s);
      for (int b : rs) touch(b, k, true);
      for (int b : passes::writes(s)) touch(b, k, false);
    }
    for (int b : ir::live_out(p, r))
      if (at[static_cast<size_t>(b)] >= 0) lives[static_cast<size_t>(at[static_cast<size_t>(b)])].last = n;
    if (lives.empty()) continue;
    std::vector<int> by_first(lives.size()), by_size(lives.size());
    for (size_t i = 0; i < lives.size(); ++i) by_first[i] = by_size[i] = static_cast<int>(i);
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](int a, int b) { return lives[static_cast<size_t>(a)].bytes > lives[static_cast<size_t>(b)].bytes; });
    long best = place(lives, by_first, p, r, o.align);
    std::vector<long> offsets;
    for (const Life& l : lives) offsets.push_back(l.offset);
    long other = place(lives, by_size, p, r, o.align);
    if (best <= other)
      for (size_t i = 0; i < lives.size(); ++i) lives[i].offset = offsets[i];
    else
      best = other;
    for (const Life& l : lives) r.offsets[static_cast<size_t>(l.buf)] = l.offset;
    r.arena_bytes = best;
  }
}

}  // namespace cannl
