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
// (a multiple of the alignment) and Routine::arena_bytes its size at max_batch: the
// batch-independent buffers in [0, Routine::fixed_bytes), the batched ones after, each at
// fixed_bytes + (a per-example offset) * max_batch with its bytes per example (aligned) times
// max_batch, so that the plan holds with max_batch replaced by any cap the state is created for
// (run-time-sized states, issue 36); two buffers
// share bytes only when their lifetimes do not overlap, or in place: a pointwise nest that reads A for
// the last time only at the very cells it assigns B (same shape, same offset), as
// `h_mm_grad = h_grad * step(h)` over h_grad. Placement is first fit, the better of two
// orders (by first use, by size; by first use alone past 512 buffers). Each routine has its
// own arena: what one routine leaves in its buffers no other routine touches. The params'
// gradients are not planned: they live in the layout's grad block (plan_layout.cpp), which
// train_grads fills and train_update reads. Block bodies are planned by plan_blocks
// (passes/plan_blocks.cpp, with plan_routine below); what their calls use here are outer buffers.
#include <algorithm>
#include <functional>
#include <set>

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

// Routines with more buffers than this are placed in first-use order only (the second order's
// placement costs the square of their number: a long spec's routine keeps near-linear).
constexpr size_t kBothOrders = 512;

// Places the lifetimes in `order` (`by_first`: in order of first use), first fit; returns the
// arena's size.
long place(std::vector<Life>& lives, const std::vector<int>& order, bool by_first, const ir::Program& p,
           const ir::Routine& r, long align) {
  auto aligned = [&](long x) { return ir::align_up(x, align); };
  long top = 0;
  for (Life& l : lives) l.offset = -1;
  std::vector<const Life*> placed;  // by offset
  // In first-use order, the placed lifetimes that end before every lifetime still to place
  // begins are dropped now and then: none of those can overlap them.
  std::vector<long> later_first(order.size() + 1, r.stmts.size() + 1);
  for (size_t k = order.size(); k-- > 0;)
    later_first[k] = std::min(later_first[k + 1], lives[static_cast<size_t>(order[k])].first);
  long pruned = -2;
  for (size_t k = 0; k < order.size(); ++k) {
    Life& l = lives[static_cast<size_t>(order[k])];
    if (by_first && later_first[k] > pruned + 64) {
      const long from = later_first[k];
      placed.erase(std::remove_if(placed.begin(), placed.end(), [&](const Life* o) { return o->last < from; }),
                   placed.end());
      pruned = from;
    }
    // The placed lifetimes overlapping l's, by offset; in-place partners may share l's exact
    // offset (the rest must not share a byte).
    std::vector<const Life*> clash, partner, all;  // `all` in offset order: both
    for (const Life* o : placed) {
      if (o->last < l.first || l.last < o->first) continue;
      bool inpl = false;
      if (o->last == l.first && l.first >= 0 && l.first < static_cast<long>(r.stmts.size()))
        inpl = in_place(p, r.stmts[static_cast<size_t>(l.first)], o->buf, l.buf);
      else if (l.last == o->first && o->first >= 0 && o->first < static_cast<long>(r.stmts.size()))
        inpl = in_place(p, r.stmts[static_cast<size_t>(o->first)], l.buf, o->buf);
      (inpl ? partner : clash).push_back(o);
      all.push_back(o);
    }
    // First fit over 0 and the ends of the overlapping buffers (the lowest where l shares no
    // byte with any), found in one sweep in offset order...
    long c = 0;
    for (const Life* o : all) {
      if (c + l.bytes <= o->offset) break;
      c = std::max(c, o->offset + aligned(o->bytes));
    }
    // ... or, lower, an in-place partner's own offset, where l shares no byte with the rest.
    if (!partner.empty()) {
      std::vector<std::pair<long, long>> used;  // the clashing bytes, disjoint, in order
      for (const Life* o : clash) {
        const long lo = o->offset, hi = o->offset + aligned(o->bytes);
        if (!used.empty() && lo <= used.back().second) used.back().second = std::max(used.back().second, hi);
        else used.push_back({lo, hi});
      }
      for (const Life* q : partner) {
        const long at = q->offset;
        if (at >= c) continue;
        auto it = std::upper_bound(used.begin(), used.end(), at,
                                   [](long x, const std::pair<long, long>& u) { return x < u.second; });
        bool ok = it == used.end() || at + l.bytes <= it->first;
        for (const Life* o : partner)
          ok = ok && (at == o->offset || at + l.bytes <= o->offset || o->offset + aligned(o->bytes) <= at);
        if (ok) c = at;
      }
    }
    l.offset = c;
    placed.insert(std::upper_bound(placed.begin(), placed.end(), l.offset,
                                   [](long x, const Life* o) { return x < o->offset; }),
                  &l);
    top = std::max(top, l.offset + aligned(l.bytes));
  }
  return top;
}

}  // namespace

// A and B may share their offset in place at nest k: k's assignments write B pointwise
// (Set) and read A only at the cells they write B, every assignment reading A comes no later
// than the first writing B (a fused nest runs its assignments in order at each point), and
// k is A's last use and B's first.
// Whether each point of s writes cells of its own, an axis held at position 0 aside (a decode
// over rows: each row's values at position 0, passes/decode.cpp): pointwise but for those.
static bool pointwise_at_0(const ir::Stmt& s) {
  if (s.call) return false;
  for (const ir::Assign& a : s.assigns) {
    std::vector<bool> seen(s.iters.size(), false);
    size_t used = 0;
    for (const ir::Affine& f : a.out.index) {
      if (f.terms.empty() && f.offset == 0) continue;
      if (!f.is_single_iter() || seen[static_cast<size_t>(f.terms[0].iter)]) return false;
      seen[static_cast<size_t>(f.terms[0].iter)] = true;
      ++used;
    }
    if (used != s.iters.size()) return false;
  }
  return true;
}

bool in_place(const ir::Program& p, const ir::Stmt& s, int a, int b) {
  if (s.call || p.buffers[static_cast<size_t>(a)].dims != p.buffers[static_cast<size_t>(b)].dims) return false;
  if (s.assigns[0].out.buf == b && !passes::pointwise(s) && !pointwise_at_0(s)) return false;
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

long plan_unit_bytes(const ir::Buffer& b, const PassOptions& o) {
  return ir::align_up((b.batched() ? b.example_elements() : b.elements()) * o.elem_bytes, o.align);
}

namespace {

// One region of a plan: `lives` placed (sharing bytes when `share`), their offsets set; returns
// the region's size (aligned).
long plan_region(const ir::Program& p, const ir::Routine& r, std::vector<Life>& lives, long align, bool share) {
  if (lives.empty()) return 0;
  if (!share) {  // each buffer its own bytes, in order of first use
    long top = 0;
    for (Life& l : lives) {
      l.offset = top;
      top += ir::align_up(l.bytes, align);
    }
    return top;
  }
  std::vector<int> by_first(lives.size()), by_size(lives.size());
  for (size_t i = 0; i < lives.size(); ++i) by_first[i] = by_size[i] = static_cast<int>(i);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int a, int b) { return lives[static_cast<size_t>(a)].bytes > lives[static_cast<size_t>(b)].bytes; });
  long best = place(lives, by_first, true, p, r, align);
  if (lives.size() <= kBothOrders) {
    std::vector<long> offsets;
    for (const Life& l : lives) offsets.push_back(l.offset);
    long other = place(lives, by_size, false, p, r, align);
    if (best <= other)
      for (size_t i = 0; i < lives.size(); ++i) lives[i].offset = offsets[i];
    else
      best = other;
  }
  return ir::align_up(best, align);
}

}  // namespace

void plan_routine(const ir::Program& p, ir::Routine& r, const PassOptions& o, const std::function<bool(int)>& planned,
                  bool share, bool all_per_example) {
  r.offsets.assign(p.buffers.size(), -1);
  r.arena_bytes = 0;
  r.fixed_bytes = 0;
  const long n = static_cast<long>(r.stmts.size());
  std::vector<Life> lives;
  std::vector<int> at(p.buffers.size(), -1);
  auto touch = [&](int b, long k, bool read_first) {
    if (!planned(b)) return;
    if (at[static_cast<size_t>(b)] < 0) {
      at[static_cast<size_t>(b)] = static_cast<int>(lives.size());
      lives.push_back({b, plan_unit_bytes(p.buffers[static_cast<size_t>(b)], o), read_first ? -1 : k, k});
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
  if (lives.empty()) return;
  // Two regions: the batch-independent buffers at byte offsets, then the batched ones at
  // per-example offsets (their sizes per example, aligned), times max_batch here and times the
  // state's cap at run time: a plan whose buffers share no byte at one cap shares none at any,
  // since every batched offset and size scales by the same factor. A block body's locals all go
  // in the batched region (`all_per_example`: its scratch is one batched buffer), a
  // batch-independent one taking its bytes per example (rare: a body's locals are activations).
  std::vector<Life> fixed, batched;
  for (const Life& l : lives)
    (all_per_example || p.buffers[static_cast<size_t>(l.buf)].batched() ? batched : fixed).push_back(l);
  r.fixed_bytes = plan_region(p, r, fixed, o.align, share);
  const long per_example = plan_region(p, r, batched, o.align, share);
  for (const Life& l : fixed) r.offsets[static_cast<size_t>(l.buf)] = l.offset;
  for (const Life& l : batched) r.offsets[static_cast<size_t>(l.buf)] = r.fixed_bytes + l.offset * p.max_batch;
  r.arena_bytes = r.fixed_bytes + per_example * p.max_batch;
}

void plan_memory(ir::Program& p, const PassOptions& o) {
  std::set<int> param_grads;
  for (int b : p.params)
    if (p.grad(b) >= 0) param_grads.insert(p.grad(b));
  for (ir::Routine& r : p.routines)
    plan_routine(
        p, r, o, [&](int b) { return passes::in_arena(p.buffers[static_cast<size_t>(b)]) && !param_grads.count(b); },
        true);
}

}  // namespace cannl
