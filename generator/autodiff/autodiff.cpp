// autodiff.cpp — reverse-mode differentiation of forward loop nests (see autodiff.h).
#include "autodiff/autodiff.h"

#include <cmath>
#include <map>
#include <set>

#include "ir/prims.h"
#include "support/diagnostic.h"

namespace cannl {

using ir::ExprP;
using ir::Op;

ExprP derivative(const ExprP& e, const ir::Access& wrt) {
  auto d = [&](size_t i) { return derivative(e->args[i], wrt); };
  auto mul = [](ExprP a, ExprP b) { return ir::binary(Op::Mul, std::move(a), std::move(b)); };
  const ExprP zero = ir::cnst(0);
  switch (e->op) {
    case Op::Const: case Op::Scalar: case Op::Index: case Op::Eq: case Op::Gt: case Op::Uniform: case Op::Normal:
    case Op::Keep:
      return zero;
    case Op::Load: return !e->nograd && e->access == wrt ? ir::cnst(1) : zero;
    case Op::Neg: return ir::unary(Op::Neg, d(0));
    case Op::Add: return ir::binary(Op::Add, d(0), d(1));
    case Op::Sub: return ir::binary(Op::Sub, d(0), d(1));
    case Op::Mul: return ir::binary(Op::Add, mul(d(0), e->args[1]), mul(e->args[0], d(1)));
    case Op::Div: {
      const ExprP &a = e->args[0], &b = e->args[1];
      ExprP da = d(0), db = d(1);
      return ir::binary(Op::Sub, ir::binary(Op::Div, da, b),
                        ir::binary(Op::Div, mul(a, db), mul(b, b)));
    }
    case Op::Pow:
      return mul(mul(ir::cnst(e->value), ir::pow(e->args[0], e->value - 1)), d(0));
    case Op::Select: return ir::select(e->args[0], d(1), d(2));
    case Op::Prim: {  // the function's own rule (ir/prims.cpp)
      if (!e->prim->derivative) CANNL_BUG(std::string("no derivative of ") + e->prim->name);
      std::vector<ExprP> dx;
      for (size_t i = 0; i < e->args.size(); ++i) dx.push_back(d(i));
      return e->prim->derivative(e->args, e, dx);
    }
  }
  CANNL_BUG("no derivative rule for this operation");
}

// Replaces every sub-expression equal to `target` by `with`.
static ExprP substitute(const ExprP& e, const ir::Expr& target, const ExprP& with) {
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
static ir::Affine reduced_position(const ir::Stmt& s) {
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

static int first_extremum(ir::Program& p, const ir::Stmt& s, std::vector<ir::Stmt>& nests) {
  const ir::Assign& a = s.only();
  ir::Buffer ab = p.buffers[static_cast<size_t>(a.out.buf)];
  const std::string of = ab.name;
  ab.name = of + "_arg";
  ab.role = ir::Role::Temp;
  ab.tensor = -1;
  ab.state_name.clear();
  ab.shape = "position of the first extremum of " + of;
  p.buffers.push_back(ab);
  const int arg = static_cast<int>(p.buffers.size()) - 1;
  ir::Stmt fill = ir::elementwise(p, arg, "first extremum of " + of);
  fill.only().body = ir::cnst(INFINITY);
  fill.line = s.line;
  nests.push_back(std::move(fill));
  ir::Stmt find = s;
  find.only().out.buf = arg;
  find.only().accum = ir::Accum::Min;
  find.only().body = ir::select(ir::binary(Op::Eq, a.body, ir::load(a.out)), ir::index_value(reduced_position(s)),
                                ir::cnst(INFINITY));
  find.what = "first extremum: " + s.what;
  nests.push_back(std::move(find));
  return arg;
}

void differentiate(ir::Program& p) {
  ir::Routine& train = *p.routine(ir::RoutineKind::TrainStep);
  const std::vector<ir::Stmt> forward = train.stmts;
  const int loss = p.loss;
  // Which buffers depend on a param (only those get gradients).
  std::vector<bool> needs(p.buffers.size(), false);
  for (size_t i = 0; i < p.buffers.size(); ++i) needs[i] = p.buffers[i].role == ir::Role::Param && !p.buffers[i].frozen;
  for (const ir::Stmt& s : forward) {
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

  std::map<int, int> grads;  // buffer -> its gradient
  std::vector<ir::Stmt> zero_fills, contributions;
  auto gradient = [&](int buf, double init, std::vector<ir::Stmt>& fills) {
    auto it = grads.find(buf);
    if (it != grads.end()) return it->second;
    ir::Buffer gb = p.buffers[static_cast<size_t>(buf)];
    gb.name += "_grad";
    gb.role = ir::Role::Grad;
    gb.tensor = -1;
    gb.state_name.clear();  // gradients are not saved
    gb.init.reset();        // nor initialised
    gb.matrix = false;
    gb.view_of = -1;        // a stacked param's view: its gradient is stacked below (stack_gradients)
    gb.view_offset = 0;
    gb.stack = 0;
    gb.shape = "gradient of " + p.buffers[static_cast<size_t>(buf)].name;
    p.buffers.push_back(gb);
    int gi = static_cast<int>(p.buffers.size()) - 1;
    grads[buf] = gi;
    const std::string& name = p.buffers[static_cast<size_t>(buf)].name;
    ir::Stmt fill = ir::elementwise(p, gi, init == 1 ? "d " + name + " / d " + name : "zero the gradient of " + name);
    fill.only().body = ir::cnst(init);
    fills.push_back(std::move(fill));
    return gi;
  };

  gradient(loss, 1, zero_fills);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const ir::Stmt& s = *it;
    if (s.call && s.call->kind == ir::Call::Kind::EmbeddingForward) {  // the scatter-add
      auto og = grads.find(s.call->o);
      if (og == grads.end() || !needs[static_cast<size_t>(s.call->table)]) continue;
      ir::Call back = *s.call;
      back.kind = ir::Call::Kind::EmbeddingBackward;
      back.dout = og->second;
      back.dtable = gradient(s.call->table, 0, zero_fills);
      ir::Stmt c;
      c.call = back;
      c.line = s.line;
      c.what = "backward: " + s.what;
      contributions.push_back(std::move(c));
      continue;
    }
    if (s.call) {  // attention: the runtime's backward call, from the saved log-sum-exp
      auto og = grads.find(s.call->o);
      if (og == grads.end()) continue;
      ir::Call back = *s.call;
      back.kind = ir::Call::Kind::AttentionBackward;
      back.dout = og->second;
      ir::Buffer delta = p.buffers[static_cast<size_t>(s.call->lse)];
      delta.name = p.buffers[static_cast<size_t>(s.call->o)].name + "_delta";
      delta.shape = "scratch of the attention backward: dout . o per query";
      p.buffers.push_back(delta);
      back.delta = static_cast<int>(p.buffers.size()) - 1;
      back.dq = gradient(s.call->q, 0, zero_fills);
      back.dk = gradient(s.call->k, 0, zero_fills);
      back.dv = gradient(s.call->v, 0, zero_fills);
      ir::Stmt c;
      c.call = back;
      c.line = s.line;
      c.what = "backward: " + s.what;
      contributions.push_back(std::move(c));
      continue;
    }
    const ir::Assign& a = s.only();
    auto og = grads.find(a.out.buf);
    if (og == grads.end()) continue;
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(a.body, loads);
    std::vector<ir::Access> seen;
    int arg = -1;  // max=/min=: the first extremum's position
    for (const ir::Expr* l : loads) {
      if (l->nograd || !needs[static_cast<size_t>(l->access.buf)]) continue;
      bool dup = false;
      for (const auto& a : seen) dup |= a == l->access;
      if (dup) continue;
      seen.push_back(l->access);
      ExprP db = derivative(a.body, l->access);
      if (ir::is_const(db, 0)) continue;
      ExprP out_value = ir::load(a.out);
      if (a.accum == ir::Accum::Set) db = substitute(db, *a.body, out_value);
      if (a.accum == ir::Accum::Max || a.accum == ir::Accum::Min) {
        if (arg < 0) arg = first_extremum(p, s, zero_fills);
        ir::ExprP first = ir::binary(Op::Eq, ir::index_value(reduced_position(s)), ir::load({arg, a.out.index}));
        db = ir::binary(Op::Mul, first, db);
      }
      int target = gradient(l->access.buf, 0, zero_fills);
      ir::Stmt c = ir::nest(s.iters, {target, l->access.index}, ir::Accum::Add,
                            ir::binary(Op::Mul, ir::load({og->second, a.out.index}), db));
      c.line = s.line;
      c.what = "backward: " + s.what;
      contributions.push_back(std::move(c));
    }
  }
  for (auto& f : zero_fills) train.stmts.push_back(std::move(f));
  for (auto& c : contributions) train.stmts.push_back(std::move(c));
  p.grads = std::move(grads);
  for (int param : p.params)
    if (p.grad(param) >= 0) train.io.kept.push_back(p.grad(param));
  stack_gradients(p);
}

void stack_gradients(ir::Program& p) {
  for (size_t s = 0; s < p.buffers.size(); ++s) {
    if (p.buffers[s].stack <= 0 || p.buffers[s].role != ir::Role::Param) continue;
    std::vector<int> views;
    size_t with_grad = 0;
    for (int b : p.params)
      if (p.buffers[static_cast<size_t>(b)].view_of == static_cast<int>(s)) {
        views.push_back(b);
        with_grad += p.grad(b) >= 0;
      }
    if (with_grad == 0) continue;  // frozen, or the loss reads none of its instances
    if (with_grad < views.size()) {  // the loss reads some instances only: each its own param again
      for (int v : views) p.buffers[static_cast<size_t>(v)].view_of = -1, p.buffers[static_cast<size_t>(v)].view_offset = 0;
      continue;
    }
    ir::Buffer g = p.buffers[s];
    g.name += "_grad";
    for (int k = 2; p.find(g.name) >= 0; ++k) g.name = p.buffers[s].name + "_grad" + std::to_string(k);
    g.role = ir::Role::Grad;
    g.tensor = -1;
    g.state_name.clear();
    g.init.reset();
    g.matrix = false;
    g.shape = "gradient of " + p.buffers[s].name;
    p.buffers.push_back(std::move(g));
    const int gi = static_cast<int>(p.buffers.size()) - 1;
    for (int v : views) {
      ir::Buffer& vg = p.buffers[static_cast<size_t>(p.grad(v))];
      vg.view_of = gi;
      vg.view_offset = p.buffers[static_cast<size_t>(v)].view_offset;
    }
    p.grads[static_cast<int>(s)] = gi;
  }
}

}  // namespace cannl
