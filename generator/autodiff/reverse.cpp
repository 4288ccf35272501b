// reverse.cpp — one forward nest's contributions to gradients (see reverse.h).
#include "autodiff/reverse.h"

#include <cmath>

#include "autodiff/autodiff.h"
#include "support/diagnostic.h"

namespace cannl {

using ir::ExprP;
using ir::Op;

namespace {

// Replaces every sub-expression equal to `target` by `with`.
ExprP substitute(const ExprP& e, const ir::Expr& target, const ExprP& with) {
  if (ir::same_expr(*e, target)) return with;
  if (e->args.empty()) return e;
  bool changed = false;
  std::vector<ExprP> args;
  for (const auto& a : e->args) {
    args.push_back(substitute(a, target, with));
    changed |= args.back() != a;
  }
  if (!changed) return e;
  auto copy = std::make_shared<ir::Expr>(*e);
  copy->args = std::move(args);
  return copy;
}

// For a max= or min= nest: a buffer holding, per written element, the row-major position
// (over the reduced loops, in nest order) of the first element equal to the result, and the
// nests filling it. The gradient then goes to that one element: ties to the first, as
// PyTorch's max_pool2d and max do.
ir::Affine reduced_position(const ir::Stmt& s) {
  std::vector<bool> written(s.iters.size(), false);
  for (const ir::Affine& a : s.only().out.index)
    for (const auto& t : a.terms) written[static_cast<size_t>(t.iter)] = true;
  ir::Affine pos;
  long stride = 1;
  for (size_t i = s.iters.size(); i-- > 0;) {
    if (written[i] || s.iters[i].size == 1) continue;
    pos.terms.insert(pos.terms.begin(), {static_cast<int>(i), stride});
    stride *= s.iters[i].size;
  }
  return pos;
}

int first_extremum(const Reverse& rv, const ir::Stmt& s) {
  const ir::Assign& a = s.only();
  ir::Buffer ab = rv.p.buffers[static_cast<size_t>(a.out.buf)];
  const std::string of = ab.name;
  ab.name = of + "_arg";
  ab.role = ir::Role::Temp;
  ab.tensor = -1;
  ab.state_name.clear();
  ab.shape = "position of the first extremum of " + of;
  const int arg = rv.scratch(ab);
  ir::Stmt fill = ir::elementwise(rv.p, arg, "first extremum of " + of);
  fill.only().body = ir::cnst(INFINITY);
  fill.line = s.line;
  rv.fills.push_back(std::move(fill));
  ir::Stmt find = s;
  find.only().out.buf = arg;
  find.only().accum = ir::Accum::Min;
  find.only().body = ir::select(ir::binary(Op::Eq, a.body, ir::load(a.out)), ir::index_value(reduced_position(s)),
                                ir::cnst(INFINITY));
  find.what = "first extremum: " + s.what;
  rv.fills.push_back(std::move(find));
  return arg;
}

}  // namespace

void propagate_needs(const std::vector<ir::Stmt>& nests, std::vector<bool>& needs) {
  for (const ir::Stmt& s : nests) {
    if (s.call) {
      bool any = false;
      for (int b : ir::call_reads(*s.call)) any = any || needs[static_cast<size_t>(b)];
      for (int w : ir::call_writes(*s.call)) needs[static_cast<size_t>(w)] = needs[static_cast<size_t>(w)] || any;
      continue;
    }
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads)
      if (!l->nograd && needs[static_cast<size_t>(l->access.buf)]) needs[static_cast<size_t>(s.only().out.buf)] = true;
  }
}

void Reverse::nest(const ir::Stmt& s) {
  if (s.call && s.call->kind == ir::Call::Kind::EmbeddingForward) {  // the scatter-add
    auto og = grads.find(s.call->o);
    if (og == grads.end() || !needs[static_cast<size_t>(s.call->table)]) return;
    ir::Call back = *s.call;
    back.kind = ir::Call::Kind::EmbeddingBackward;
    back.dout = og->second;
    back.dtable = gradient(s.call->table);
    ir::Stmt c;
    c.call = back;
    c.line = s.line;
    c.what = "backward: " + s.what;
    contributions.push_back(std::move(c));
    return;
  }
  if (s.call) {  // attention: the runtime's backward call, from the saved log-sum-exp
    if (s.call->kind != ir::Call::Kind::AttentionForward) CANNL_BUG("autodiff: a call it has no rule for");
    auto og = grads.find(s.call->o);
    if (og == grads.end()) return;
    ir::Call back = *s.call;
    back.kind = ir::Call::Kind::AttentionBackward;
    back.dout = og->second;
    ir::Buffer delta = p.buffers[static_cast<size_t>(s.call->lse)];
    delta.name = p.buffers[static_cast<size_t>(s.call->o)].name + "_delta";
    delta.shape = "scratch of the attention backward: dout . o per query";
    back.delta = scratch(delta);
    back.dq = gradient(s.call->q);
    back.dk = gradient(s.call->k);
    back.dv = gradient(s.call->v);
    ir::Stmt c;
    c.call = back;
    c.line = s.line;
    c.what = "backward: " + s.what;
    contributions.push_back(std::move(c));
    return;
  }
  const ir::Assign& a = s.only();
  auto og = grads.find(a.out.buf);
  if (og == grads.end()) return;
  const int out_grad = og->second;
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(a.body, loads);
  std::vector<ir::Access> seen;
  int arg = -1;  // max=/min=: the first extremum's position
  for (const ir::Expr* l : loads) {
    if (l->nograd || !needs[static_cast<size_t>(l->access.buf)]) continue;
    bool dup = false;
    for (const auto& x : seen) dup |= x == l->access;
    if (dup) continue;
    seen.push_back(l->access);
    ExprP db = derivative(a.body, l->access);
    if (ir::is_const(db, 0)) continue;
    ExprP out_value = ir::load(a.out);
    if (a.accum == ir::Accum::Set) db = substitute(db, *a.body, out_value);
    if (a.accum == ir::Accum::Max || a.accum == ir::Accum::Min) {
      if (arg < 0) arg = first_extremum(*this, s);
      ir::ExprP first = ir::binary(Op::Eq, ir::index_value(reduced_position(s)), ir::load({arg, a.out.index}));
      db = ir::binary(Op::Mul, first, db);
    }
    const int target = gradient(l->access.buf);
    ir::Stmt c = ir::nest(s.iters, {target, l->access.index}, ir::Accum::Add,
                          ir::binary(Op::Mul, ir::load({out_grad, a.out.index}), db));
    c.line = s.line;
    c.what = "backward: " + s.what;
    contributions.push_back(std::move(c));
  }
}

}  // namespace cannl
