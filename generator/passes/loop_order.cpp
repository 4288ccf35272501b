// loop_order.cpp — each nest's loop order and the loop run in parallel.
//
// Takes: any Program. Guarantees: every nest with its loops permuted (indices rewritten):
//   outermost, a loop whose variable alone indexes some axis of the written buffer, so
//     that different iterations of it write different elements: it is marked parallel
//     when the nest is large enough and not sequential (results do not depend on the
//     thread count: each element is accumulated by one thread, in loop order);
//   innermost, the loop with the most unit-stride accesses (the write counting double but in
//     a reduction (+=, max=, min=), where each access walking the loop at another stride, a
//     gather, counts -3; on a tie the reduction loop, which the C emitter turns into a
//     vectorised dot product, then the loop the write walks at unit stride);
//   in between, the other written-index loops, then the remaining reduction loops (a sum
//     scattered through windows, a convolution's input gradient: as its largest read walks
//     them, when every cell still gets its terms in the same order; stream_window_reads);
//   except a sum into at most 4096 cells (no batch axis) along their own unit-stride loop
//   when no reduction loop has a unit stride (a bias gradient): the reduction loops outside,
//   the written loops inside (rows added into the cells, vectorised), on one thread.
// order_sums (pass `order_sums`, after inline_virtual) applies the same rules again to the
// reductions only, whose reads inlining has changed: layer_norm's backward row sums read x,
// dy and the gain along the row once their virtual factors are inlined, and cross_entropy's
// row max and picked log-probability read the logits along the row.
#include <algorithm>
#include <limits>

#include "passes/pipeline.h"

namespace cannl {

namespace {

using ir::Affine;

// Element stride of loop `it` in an access (sum over dims of coef * dim stride).
long stride_of(const ir::Program& p, const ir::Access& a, int it) {
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  long stride = 1, total = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    for (const auto& t : a.index[d].terms)
      if (t.iter == it) total += t.coef * stride;
    stride *= dims[d].size;
  }
  return total;
}

bool writes_alone(const ir::Access& out, int it) {
  for (const Affine& a : out.index)
    if (a.terms.size() == 1 && a.terms[0].iter == it) return true;
  return false;
}

bool in_access(const ir::Access& a, int it) {
  for (const Affine& f : a.index)
    for (const auto& t : f.terms)
      if (t.iter == it) return true;
  return false;
}

Affine remap(const Affine& a, const std::vector<int>& new_pos) {
  Affine r = a;
  for (auto& t : r.terms) t.iter = new_pos[static_cast<size_t>(t.iter)];
  return r;
}

ir::Access remap(const ir::Access& a, const std::vector<int>& new_pos) {
  ir::Access r = a;
  for (auto& f : r.index) f = remap(f, new_pos);
  return r;
}

ir::ExprP remap(const ir::ExprP& e, const std::vector<int>& new_pos) {
  auto c = std::make_shared<ir::Expr>(*e);
  if (c->op == ir::Op::Load || c->op == ir::Op::Index || c->op == ir::Op::Keep) c->access = remap(c->access, new_pos);
  for (auto& a : c->args) a = remap(a, new_pos);
  return c;
}

// A sum scattered through windows (a written axis indexed by two loops: a convolution's
// input gradient, col2im, x_grad[b, y + ky, x + kx, c] += col_grad[b, y, x, ky, kx, c]): the
// loops between the outermost and the innermost (order[first..), the innermost not placed
// yet) as the largest read walks them, its stride descending (stable), so that it streams in
// storage order while the few cells written meanwhile stay in cache (b, y, x, ky, kx instead
// of the written index's b, y, ky, x, kx: 20% less time on a 16-channel 28 x 28 map, the
// same sums bit for bit). Kept only when every cell
// still receives its terms in the same order: a cell fixes each written axis's later loops
// given its first one, so its terms come in the order of the loops that are first of their
// axis and the loops the write does not name; their relative order must not change.
void stream_window_reads(const ir::Program& p, const ir::Stmt& s, const std::vector<ir::Access>& reads,
                         std::vector<int>& order, size_t first) {
  const ir::Access& out = s.assigns[0].out;
  bool window = false;
  for (const Affine& a : out.index) {
    if (a.terms.size() > 2) return;  // (one loop of a written axis fixes the other)
    window = window || a.terms.size() == 2;
  }
  if (!window || !s.single() || s.only().accum != ir::Accum::Add || reads.empty() || order.size() < first + 2) return;
  auto elems = [&](const ir::Access& a) {
    long e = 1;
    for (const ir::Dim& d : p.buffers[static_cast<size_t>(a.buf)].dims) e *= d.size;
    return e;
  };
  const ir::Access* big = &reads[0];
  for (const ir::Access& r : reads)
    if (elems(r) > elems(*big)) big = &r;
  if (big->buf == out.buf || elems(*big) <= elems(out)) return;
  std::vector<int> moved = order;
  std::stable_sort(moved.begin() + static_cast<long>(first), moved.end(),
                   [&](int a, int b) { return stride_of(p, *big, a) > stride_of(p, *big, b); });
  // The loops that order a cell's terms: the first of each written axis's loops, and the loops
  // the write does not name.
  auto keys = [&](const std::vector<int>& o) {
    std::vector<int> k;
    std::vector<bool> axis_seen(out.index.size(), false);
    for (int it : o) {
      bool named = false;
      for (size_t d = 0; d < out.index.size(); ++d)
        for (const auto& t : out.index[d].terms)
          if (t.iter == it) {
            named = true;
            if (!axis_seen[d]) k.push_back(it), axis_seen[d] = true;
          }
      if (!named) k.push_back(it);
    }
    return k;
  };
  if (keys(moved) == keys(order)) order = std::move(moved);
}

void order_nest(const ir::Program& p, ir::Stmt& s) {
  const int n = static_cast<int>(s.iters.size());
  if (n == 0) return;
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  std::vector<ir::Access> reads;
  for (const ir::Expr* l : loads)
    if (std::find(reads.begin(), reads.end(), l->access) == reads.end()) reads.push_back(l->access);

  std::vector<int> order;  // old loop indices, outermost first
  auto placed = [&](int i) { return std::find(order.begin(), order.end(), i) != order.end(); };

  // Outermost: a loop that alone indexes a written axis (of the first assignment), the batch
  // loop first.
  const ir::Access& out = s.assigns[0].out;
  // A nest over a stacked buffer's instances (an optimiser update over [l, ...]): the instance
  // loop outermost, run in order, the parallel loop inside it (a few instances would leave
  // threads idle; an instance's elements are plenty).
  int inst = -1;
  if (!s.sequential && p.buffers[static_cast<size_t>(out.buf)].stack > 0 && !out.index.empty() &&
      out.index[0].is_single_iter() && n > 1)
    inst = out.index[0].terms[0].iter;
  int outer = -1;
  if (!s.sequential) {
    for (int i = 0; i < n && outer < 0; ++i)
      if (i != inst && s.iters[static_cast<size_t>(i)].batch && writes_alone(out, i)) outer = i;
    for (const Affine& a : out.index)
      if (outer < 0 && a.terms.size() == 1 && a.terms[0].iter != inst &&
          s.iters[static_cast<size_t>(a.terms[0].iter)].size > 1)
        outer = a.terms[0].iter;
  }
  // Innermost: the most unit-stride accesses. In a sum (`+=`, `max=`, `min=` over a loop the written cell
  // does not name) the write does not count double: its cells stay put while the reads
  // stream, so a row mean or variance (mean[b, t] += x[b, t, o]) reads its rows along o, a
  // vectorised dot, instead of walking x's columns at the row stride.
  const bool sum = s.single() && s.assigns[0].accum != ir::Accum::Set && [&] {
    for (int i = 0; i < n; ++i)
      if (!in_access(out, i) && s.iters[static_cast<size_t>(i)].size > 1) return true;
    return false;
  }();
  int inner = -1, best = std::numeric_limits<int>::min();
  if (!s.sequential && n > 1) {
    for (int i = 0; i < n; ++i) {
      if (i == outer || s.iters[static_cast<size_t>(i)].size == 1) continue;
      int score = (sum ? 1 : 2) * (stride_of(p, out, i) == 1);
      for (const auto& r : reads) score += stride_of(p, r, i) == 1;
      // In a reduction, an access walking the loop at a stride (a gather) costs more than a
      // contiguous one gains: layer_norm's backward row sums (d var[b, t] += dy[b, t, o] *
      // (x[b, t, o] - mean[b, t]) ...) read their rows along o, not x's columns along t.
      if (sum) {
        const long so = stride_of(p, out, i);
        score -= 3 * (so != 0 && so != 1);
        for (const auto& r : reads) {
          const long sr = stride_of(p, r, i);
          score -= 3 * (sr != 0 && sr != 1);
        }
      }
      // On a tie the reduction loop, then the loop the write walks at unit stride: a store
      // at a row's stride costs more than a read (cross_entropy's gradient, logits_grad[b, t, o]
      // = -(next[b, t] == o) / N, reads next along t but writes along o).
      bool reduction = !in_access(out, i);
      int key = 4 * score + 2 * reduction + (stride_of(p, out, i) == 1);
      if (key > best) best = key, inner = i;
    }
  }
  // A sum over whole axes into a few cells whose own loop is the only unit-stride one (a
  // bias gradient: c_grad[c] += g[b, y, x, c]): the reduction loops go outside and the
  // written loops inside, so that the innermost loop adds contiguous rows into the cells
  // (vectorised) instead of walking a column at the row stride; one thread, every cell
  // summed in loop order.
  if (outer >= 0 && inner >= 0 && s.single() && s.assigns[0].accum == ir::Accum::Add && best < 2 &&
      stride_of(p, out, outer) == 1) {
    long cells = 1;
    bool batch_written = false;
    for (const Affine& a : out.index)
      for (const auto& t : a.terms) {
        cells *= s.iters[static_cast<size_t>(t.iter)].size;
        batch_written = batch_written || s.iters[static_cast<size_t>(t.iter)].batch;
      }
    if (!batch_written && cells <= 4096) {
      for (int i = 0; i < n; ++i)
        if (!in_access(out, i)) order.push_back(i);
      for (const Affine& a : out.index)
        for (const auto& t : a.terms)
          if (!placed(t.iter)) order.push_back(t.iter);
      outer = -1;
      inner = -1;
    }
  }
  if (outer >= 0) order.push_back(outer);
  for (const Affine& a : out.index)  // written-index loops, in the buffer's order
    for (const auto& t : a.terms)
      if (t.iter != inner && !placed(t.iter)) order.push_back(t.iter);
  for (int i = 0; i < n; ++i)
    if (i != inner && !placed(i)) order.push_back(i);
  if (!s.sequential) stream_window_reads(p, s, reads, order, outer >= 0 ? 1 : 0);  // (inner after them)
  if (inner >= 0 && !placed(inner)) order.push_back(inner);
  if (s.sequential) {  // keep the written order: the random stream fills in storage order
    order.clear();
    for (int i = 0; i < n; ++i) order.push_back(i);
  }
  if (inst >= 0) {
    order.erase(std::find(order.begin(), order.end(), inst));
    order.insert(order.begin(), inst);
  }

  std::vector<int> new_pos(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) new_pos[static_cast<size_t>(order[static_cast<size_t>(k)])] = k;
  std::vector<ir::Iter> iters;
  for (int k = 0; k < n; ++k) iters.push_back(s.iters[static_cast<size_t>(order[static_cast<size_t>(k)])]);
  s.iters = std::move(iters);
  for (ir::Assign& a : s.assigns) {
    a.out = remap(a.out, new_pos);
    a.body = remap(a.body, new_pos);
  }

  long work = 1;
  for (const auto& it : s.iters) work *= it.size;
  s.parallel = (outer >= 0 && work >= (1L << 15)) ? 0 : -1;
}

}  // namespace

void order_loops(ir::Program& p, const PassOptions&) {
  for (ir::Routine* r : ir::all_routines(p))
    for (ir::Stmt& s : r->stmts)
      if (!s.call) order_nest(p, s);
}

void order_sums(ir::Program& p, const PassOptions&) {
  for (ir::Routine* r : ir::all_routines(p))
    for (ir::Stmt& s : r->stmts)
      if (!s.call && s.single() && s.assigns[0].accum != ir::Accum::Set) order_nest(p, s);
}

}  // namespace cannl
