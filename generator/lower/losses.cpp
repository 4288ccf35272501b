// losses.cpp — cross_entropy, nll_loss and accuracy: statistics of logits against targets
// (see lowerings.h).
#include "lower/lowerings.h"

#include <cmath>

#include <fmt/format.h>

#include "ir/prims.h"
#include "lower/lower_context.h"
#include "lower/statistics.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;

// -sum over outputs(target * log_softmax(logits)), the log_softmax inline. With integer
// targets (class indices) the target is (ids == class): one term of the sum, no one-hot.
void lower_cross_entropy(LowerContext& c, const BoundCall& call, int r) {
  const Expr *logits = call.tensors[0], *target = call.tensors[1];
  const Shape js = joint(c.shape(logits), c.shape(target));
  StatNest sn = stat_nest(c, js);
  ExprP lv = c.value(logits, align(js, sn.x, c.shape(logits)));
  auto [mx, sum] = softmax_stats(c, sn, lv);
  ExprP tv = c.value(target, align(js, sn.x, c.shape(target)));
  if (c.is_int(target)) tv = ir::binary(Op::Eq, tv, ir::index_value(Affine::of(sn.out_loops.at(0))));
  ExprP logp = ir::binary(Op::Sub, ir::binary(Op::Sub, lv, ir::load({mx, sn.stat}, true)),
                          ir::call("log", {ir::load({sum, sn.stat})}));
  c.fill_buffer(r, 0, stat_names(sn));
  c.emit(sn.n, r, sn.stat, ir::Accum::Add, ir::unary(Op::Neg, ir::binary(Op::Mul, tv, logp)));
}

// -sum over outputs(target * logp), per example ("none") or its mean over the examples
// (batch and input indices) or sum.
void lower_nll_loss(LowerContext& c, const BoundCall& call, int r) {
  const Expr *logp = call.tensors[0], *target = call.tensors[1];
  const std::string& reduction = call.strings.at("reduction");
  const Shape js = joint(c.shape(logp), c.shape(target));
  StatNest sn = stat_nest(c, js);
  ExprP tv = c.value(target, align(js, sn.x, c.shape(target)));
  if (c.is_int(target)) tv = ir::binary(Op::Eq, tv, ir::index_value(Affine::of(sn.out_loops.at(0))));  // class ids
  ExprP body = ir::unary(Op::Neg, ir::binary(Op::Mul, tv, c.value(logp, align(js, sn.x, c.shape(logp)))));
  if (reduction == "none") {
    c.fill_buffer(r, 0, stat_names(sn));
    c.emit(sn.n, r, sn.stat, ir::Accum::Add, body);
    return;
  }
  if (reduction == "mean") {
    std::vector<int> examples;
    for (const Affine& a : sn.stat) examples.push_back(a.terms[0].iter);
    body = ir::binary(Op::Div, body, count_of(sn.n, examples));
  }
  c.fill_buffer(r, 0);
  c.emit(sn.n, r, {}, ir::Accum::Add, body);
}

// mean over batch (and input) indices of [argmax(logits) == argmax(target)], first
// maximum winning, as torch.argmax; with integer targets, [argmax(logits) == ids].
void lower_accuracy(LowerContext& c, const BoundCall& call, int r) {
  const Expr *logits = call.tensors[0], *target = call.tensors[1];
  const Shape ls = joint(c.shape(logits), c.shape(target));
  const Shape ss = stat_nest(c, ls).stat_shape;
  auto argmax = [&](const Expr* v, const char* what) {
    StatNest sn = stat_nest(c, ls);
    ExprP xv = c.value(v, align(ls, sn.x, c.shape(v)));
    int mx = c.temp(fmt::format("{}_max", what), ss), arg = c.temp(fmt::format("{}_argmax", what), ss);
    c.fill_buffer(mx, -INFINITY, stat_names(sn));
    c.emit(sn.n, mx, sn.stat, ir::Accum::Max, xv);
    // row-major position within the output axes
    Affine pos;
    long stride = 1;
    for (size_t k = sn.out_loops.size(); k-- > 0;) {
      pos.terms.insert(pos.terms.begin(), {sn.out_loops[k], stride});
      stride *= sn.n.iters[static_cast<size_t>(sn.out_loops[k])].size;
    }
    c.fill_buffer(arg, INFINITY, stat_names(sn));
    c.emit(sn.n, arg, sn.stat, ir::Accum::Min,
           ir::select(ir::binary(Op::Eq, xv, ir::load({mx, sn.stat})), ir::index_value(pos), ir::cnst(INFINITY)));
    return arg;
  };
  const bool ids = c.is_int(target);
  int al = argmax(logits, "pred"), at = ids ? -1 : argmax(target, "true");
  c.fill_buffer(r, 0);
  Nest n;
  IndexMap id = c.loops_for(ss, n);
  std::vector<int> all;
  for (size_t i = 0; i < n.iters.size(); ++i) all.push_back(static_cast<int>(i));
  ExprP truth = ids ? c.value(target, align(ss, id, c.shape(target))) : ir::load({at, id});
  c.emit(n, r, {}, ir::Accum::Add,
         ir::binary(Op::Div, ir::binary(Op::Eq, ir::load({al, id}), truth), count_of(n, all)));
}

}  // namespace cannl
