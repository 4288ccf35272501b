// autodiff.cpp — reverse-mode differentiation of forward loop nests (see autodiff.h).
#include "autodiff/autodiff.h"

#include <cmath>
#include <map>
#include <set>

#include "autodiff/block_grad.h"
#include "autodiff/reverse.h"
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

void differentiate(ir::Program& p) {
  ir::Routine& train = *p.routine(ir::RoutineKind::TrainStep);
  const std::vector<ir::Stmt> forward = train.stmts;
  const int loss = p.loss;
  // Which buffers depend on a param (only those get gradients).
  std::vector<bool> needs(p.buffers.size(), false);
  for (size_t i = 0; i < p.buffers.size(); ++i) needs[i] = p.buffers[i].role == ir::Role::Param && !p.buffers[i].frozen;
  propagate_needs(forward, needs);

  std::map<int, int> grads;  // buffer -> its gradient
  std::vector<ir::Stmt> zero_fills, contributions;
  // The gradient of `buf`, made on first use: its zero fill (the loss's: 1) among the fills
  // unless `fill` is off (a block's backward writes it first: autodiff/block_grad.h).
  auto gradient = [&](int buf, double init, bool fill) {
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
    if (!fill) return gi;
    const std::string& name = p.buffers[static_cast<size_t>(buf)].name;
    ir::Stmt f = ir::elementwise(p, gi, init == 1 ? "d " + name + " / d " + name : "zero the gradient of " + name);
    f.only().body = ir::cnst(init);
    zero_fills.push_back(std::move(f));
    return gi;
  };
  Reverse rv{p, needs, grads, [&](int b) { return gradient(b, 0, true); },
             [&](ir::Buffer b) {
               p.buffers.push_back(std::move(b));
               return static_cast<int>(p.buffers.size()) - 1;
             },
             zero_fills, contributions};
  BlockOuter outer{needs, grads, [&](int b) { return gradient(b, 0, true); }, [&](int b) { return gradient(b, 0, false); }};

  gradient(loss, 1, true);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    if (it->call && it->call->kind == ir::Call::Kind::BlockForward) {  // a rolled block: its body once, a call
      for (ir::Stmt& back : block_backward(p, *it, outer)) contributions.push_back(std::move(back));
      continue;
    }
    rv.nest(*it);
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
    if (p.buffers[s].stack <= 0 || p.buffers[s].role != ir::Role::Param || p.grad(static_cast<int>(s)) >= 0) continue;
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
