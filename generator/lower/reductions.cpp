// reductions.cpp — sum, mean, max, einsum and logsumexp as reductions into a buffer (see
// lowerings.h).
#include "lower/lowerings.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "ir/prims.h"
#include "lower/lower_context.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;

namespace {

void reduce_all(LowerContext& c, const Expr* x, ir::Accum acc, bool mean, int r) {
  c.fill_buffer(r, acc == ir::Accum::Max ? -INFINITY : 0.0);
  Nest n;
  IndexMap id = c.loops_for(c.shape(x), n);
  ExprP v = c.value(x, id);
  if (mean) {
    std::vector<int> all;
    for (size_t i = 0; i < n.iters.size(); ++i) all.push_back(static_cast<int>(i));
    v = ir::binary(Op::Div, v, count_of(n, all));
  }
  c.emit(n, r, {}, acc, v);
}

// Of a sum of two operands, the one read through a sliding window (an index with two loop
// variables, `2*h+i-1`) when the other has plain indices only: -1 otherwise.
int windowed_operand(const std::vector<IndexMap>& maps) {
  if (maps.size() != 2) return -1;
  auto plain = [](const IndexMap& m) {
    for (const Affine& f : m)
      if (f.terms.size() > 1 || (f.terms.size() == 1 && (f.terms[0].coef != 1 || f.offset != 0))) return false;
    return true;
  };
  auto window = [](const IndexMap& m) {
    for (const Affine& f : m)
      if (f.terms.size() > 1) return true;
    return false;
  };
  for (int i = 0; i < 2; ++i)
    if (window(maps[static_cast<size_t>(i)]) && plain(maps[static_cast<size_t>(1 - i)])) return i;
  return -1;
}

// An einsum operand read through a window, as lower_conv2d's im2col: gathered into a
// buffer with one axis per loop variable of its index (zero outside the operand), which the
// sum then reads at single loop variables, so that it is a matrix product (K = the window's
// loops times the channels) and its gradients are two more and a scatter-add. The axes:
// the result's loops in the result's order (n's first `result_loops`), then the summed
// ones in the order the other operand (`other`) has them, so that both merge into one
// axis each. Returns the read of the gathered buffer in nest `n`.
ExprP gather_window(LowerContext& c, const Expr* x, const IndexMap& map, const IndexMap& other, size_t result_loops,
                    const Nest& n) {
  auto uses = [](const IndexMap& m, int it) {
    for (const Affine& f : m)
      for (const auto& t : f.terms)
        if (t.iter == it) return true;
    return false;
  };
  std::vector<int> loops;  // n's loops in the index, in the gathered buffer's order
  for (size_t it = 0; it < result_loops; ++it)
    if (uses(map, static_cast<int>(it))) loops.push_back(static_cast<int>(it));
  for (const IndexMap* m : {&other, &map})
    for (const Affine& f : *m)
      for (const auto& t : f.terms)
        if (static_cast<size_t>(t.iter) >= result_loops && uses(map, t.iter) &&
            std::find(loops.begin(), loops.end(), t.iter) == loops.end())
          loops.push_back(t.iter);
  Shape cs;
  std::vector<std::string> names;
  for (int it : loops) {
    const ir::Iter& iv = n.iters[static_cast<size_t>(it)];
    cs.row(iv.batch ? AxisKind::Batch : AxisKind::Output).push_back({iv.batch ? 1 : iv.size, iv.batch});
    names.push_back(iv.name);
  }
  const int col = c.temp("col", cs);
  Nest g;
  IndexMap cmap = c.loops_for(cs, g, names);
  std::vector<int> to_g(n.iters.size(), -1);
  for (size_t j = 0; j < loops.size(); ++j) to_g[static_cast<size_t>(loops[j])] = cmap[j].terms[0].iter;
  IndexMap xmap = map;
  for (Affine& f : xmap)
    for (auto& t : f.terms) t.iter = to_g[static_cast<size_t>(t.iter)];
  c.emit(g, col, cmap, ir::Accum::Set, c.operand(x, xmap));
  IndexMap read;
  for (int it : loops) read.push_back(Affine::of(it));
  return ir::load({col, read});
}

// einsum (contract §6) with one or two operands; also sum/mean/max with a spec.
// `wrap`, when given, turns the product of the operands into the summand (logsumexp's
// exp(x - max)); it sees the result's index.
void einsum_nests(LowerContext& c, const EinsumSpec& spec, const std::vector<const Expr*>& ops, ir::Accum acc,
                  bool mean, int r, const Shape& rs,
                  const std::function<ExprP(ExprP, const IndexMap&)>& wrap = {}) {
  Nest n;
  std::map<std::string, int> iter_of;  // axis name (or "...K#j") -> loop
  auto get_iter = [&](const std::string& key, const Axis& ax, const std::string& display) {
    auto it = iter_of.find(key);
    if (it != iter_of.end()) return it->second;
    int i = n.add(display, ax.is_batch ? c.max_batch() : ax.size, ax.is_batch);
    iter_of[key] = i;
    return i;
  };
  auto display = [](const Slot& s) {
    if (s.axis) return s.axis->name;
    return fmt::format("e{}", s.key.substr(s.key.find('#') + 1));
  };
  // An offset v+c reads (or writes) at v's loop plus c: outside the axis, a read is 0 and a write skipped.
  auto shifted = [](Affine f, const Slot& s) {
    if (s.axis && s.axis->kind == EinAxis::Offset && !f.terms.empty()) f.offset += s.axis->offset;
    return f;
  };
  IndexMap rmap;
  for (const Slot& s : expand(spec.result, rs))
    rmap.push_back(shifted(Affine::of(get_iter(s.key, s.concrete, display(s))), s));
  size_t result_loops = n.iters.size();
  std::vector<std::vector<Slot>> slots;
  for (size_t i = 0; i < ops.size(); ++i) slots.push_back(expand(spec.operands[i], c.shape(ops[i])));
  for (const auto& os : slots)  // plain names first: they give the sizes
    for (const Slot& s : os)
      if (!s.axis || s.axis->kind == EinAxis::Name || s.axis->kind == EinAxis::Offset)
        get_iter(s.key, s.concrete, display(s));
  std::vector<IndexMap> maps(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    for (const Slot& s : slots[i]) {
      if (s.axis && s.axis->kind == EinAxis::Affine) {
        const EinAxis& a = *s.axis;
        Affine f = Affine::of(get_iter(a.name, {1, false}, a.name));
        f.terms[0].coef = a.stride;
        if (!a.kernel.empty()) f.terms.push_back({get_iter(a.kernel, {a.stride, false}, a.kernel), 1});
        f.offset = -a.padding;
        maps[i].push_back(f);
        continue;
      }
      int it = iter_of.at(s.key);
      const ir::Iter& iv = n.iters[static_cast<size_t>(it)];
      bool bcast = !s.concrete.is_batch && s.concrete.size == 1 && (iv.batch || iv.size != 1);
      maps[i].push_back(bcast ? Affine::constant(0) : shifted(Affine::of(it), s));
    }
  // A read that may fall outside its operand (an offset, a padded window) reads the operand
  // stored: a pointwise expression inlined there would be computed at 0 (exp(0) = 1), not 0.
  auto may_leave = [](const IndexMap& m) {
    for (const Affine& f : m)
      if (f.offset != 0 && !f.terms.empty()) return true;
    return false;
  };
  const int windowed = acc == ir::Accum::Add ? windowed_operand(maps) : -1;
  ExprP body;
  for (size_t i = 0; i < ops.size(); ++i) {
    ExprP v = static_cast<int>(i) == windowed ? gather_window(c, ops[i], maps[i], maps[1 - i], result_loops, n)
              : ops.size() == 1 && !may_leave(maps[i]) ? c.value(ops[i], maps[i])
                                                : c.operand(ops[i], maps[i]);
    body = body ? ir::binary(Op::Mul, body, v) : v;
  }
  if (wrap) body = wrap(body, rmap);
  if (mean) {
    std::vector<int> reduced;
    for (size_t i = result_loops; i < n.iters.size(); ++i) reduced.push_back(static_cast<int>(i));
    body = ir::binary(Op::Div, body, count_of(n, reduced));
  }
  std::vector<std::string> rnames;
  for (size_t i = 0; i < result_loops; ++i) rnames.push_back(n.iters[i].name);
  c.fill_buffer(r, acc == ir::Accum::Max ? -INFINITY : 0.0, rnames);
  c.emit(n, r, rmap, acc, body);
}

// sum, mean or max: over the axes a spec sums away, or over all of them.
void reduce(LowerContext& c, const BoundCall& call, ir::Accum acc, bool mean, int r) {
  if (call.spec)
    einsum_nests(c, *call.spec, call.tensors, acc, mean, r, c.shape(call.call));
  else
    reduce_all(c, call.tensors[0], acc, mean, r);
}

}  // namespace

void lower_sum(LowerContext& c, const BoundCall& call, int r) { reduce(c, call, ir::Accum::Add, false, r); }
void lower_mean(LowerContext& c, const BoundCall& call, int r) { reduce(c, call, ir::Accum::Add, true, r); }
void lower_max(LowerContext& c, const BoundCall& call, int r) { reduce(c, call, ir::Accum::Max, false, r); }

void lower_einsum(LowerContext& c, const BoundCall& call, int r) {
  einsum_nests(c, *call.spec, call.tensors, ir::Accum::Add, false, r, c.shape(call.call));
}

// log(sum(exp(x - m))) + m, m the maximum over the same axes (a constant shift for autodiff).
void lower_logsumexp(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  const Shape& rs = c.shape(call.call);
  int mx = c.temp("max", rs), sum = c.temp("sumexp", rs);
  auto shifted = [&](ExprP v, const IndexMap& rmap) {
    return ir::call("exp", {ir::binary(Op::Sub, std::move(v), ir::load({mx, rmap}, true))});
  };
  if (call.spec) {
    einsum_nests(c, *call.spec, {x}, ir::Accum::Max, false, mx, rs);
    einsum_nests(c, *call.spec, {x}, ir::Accum::Add, false, sum, rs, shifted);
  } else {
    c.fill_buffer(mx, -INFINITY);
    c.fill_buffer(sum, 0);
    Nest n;
    IndexMap id = c.loops_for(c.shape(x), n);
    c.emit(n, mx, {}, ir::Accum::Max, c.value(x, id));
    c.emit(n, sum, {}, ir::Accum::Add, shifted(c.value(x, id), {}));
  }
  Nest n;
  IndexMap id = c.loops_for(rs, n);
  c.emit(n, r, id, ir::Accum::Set,
         ir::binary(Op::Add, ir::call("log", {ir::load({sum, id})}), ir::load({mx, id}, true)));
}

}  // namespace cannl
