// norms.cpp — softmax, log_softmax, layer_norm, rms_norm and batch_norm as nests of primitives
// (see lowerings.h).
#include "lower/lowerings.h"

#include <algorithm>
#include <cmath>

#include "ir/prims.h"
#include "lower/lower_context.h"
#include "lower/statistics.h"

namespace cannl {

using ir::ExprP;
using ir::Op;

namespace {

void softmax(LowerContext& c, const Expr* x, const EinsumSpec* spec, bool log, int r) {
  StatNest sn = stat_nest(c, c.shape(x), spec);
  ExprP xv = c.value(x, sn.x);
  auto [mx, sum] = softmax_stats(c, sn, xv);
  ExprP shifted = ir::binary(Op::Sub, xv, ir::load({mx, sn.stat}, true));
  ExprP s = ir::load({sum, sn.stat});
  c.emit(sn.n, r, sn.x, ir::Accum::Set,
         log ? ir::binary(Op::Sub, shifted, ir::call("log", {s}))
             : ir::binary(Op::Div, ir::call("exp", {shifted}), s));
}

// What layer_norm and batch_norm's training step share: the mean and the biased variance of
// `xv` over the reduced axes of `sn` (the buffers <tensor>_mean and <tensor>_var; `count`
// values each), and r = (x - mean) / sqrt(var + eps). Returns the two buffers.
std::pair<int, int> normalise(LowerContext& c, const StatNest& sn, const ExprP& xv, const ExprP& count, double eps,
                              int r) {
  const Shape& ss = sn.stat_shape;
  int mu = c.temp("mean", ss), var = c.temp("var", ss);
  c.fill_buffer(mu, 0, stat_names(sn));
  c.emit(sn.n, mu, sn.stat, ir::Accum::Add, ir::binary(Op::Div, xv, count));
  ExprP centred = ir::binary(Op::Sub, xv, ir::load({mu, sn.stat}));
  c.fill_buffer(var, 0, stat_names(sn));
  c.emit(sn.n, var, sn.stat, ir::Accum::Add, ir::binary(Op::Div, ir::pow(centred, 2), count));
  c.emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, centred,
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({var, sn.stat}), ir::cnst(eps))})));
  return {mu, var};
}

// A nest over every axis of `xs` whose statistic keeps the last output axis only (the
// channels of batch_norm).
StatNest channel_stat_nest(LowerContext& c, const Shape& xs) {
  StatNest sn;
  sn.x = c.loops_for(xs, sn.n);
  auto fl = flat(xs);
  for (AxisKind k : kStorageOrder) sn.stat_shape.row(k).clear();
  const int last = static_cast<int>(xs.row(AxisKind::Output).size()) - 1;
  for (size_t i = 0; i < fl.size(); ++i) {
    if (fl[i].kind == AxisKind::Output && fl[i].pos == last) {
      sn.stat.push_back(sn.x[i]);
      sn.stat_shape.row(AxisKind::Output).push_back(fl[i].axis);
    } else {
      sn.out_loops.push_back(sn.x[i].terms[0].iter);
    }
  }
  return sn;
}

// A checkpointed, frozen state buffer of the statistic's shape: NAME[.K].what.
int bn_buffer(LowerContext& c, const Expr* call, const char* what, const Shape& ss, double init) {
  return c.state_param(c.state_prefix(call) + "." + what, ss, init);
}

}  // namespace

void lower_softmax(LowerContext& c, const BoundCall& call, int r) { softmax(c, call.tensors[0], call.spec, false, r); }
void lower_log_softmax(LowerContext& c, const BoundCall& call, int r) {
  softmax(c, call.tensors[0], call.spec, true, r);
}

void lower_layer_norm(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  StatNest sn = stat_nest(c, c.shape(x), call.spec);
  ExprP xv = c.value(x, sn.x);
  normalise(c, sn, xv, count_of(sn.n, sn.out_loops), call.values.at("eps"), r);
}

// rms_norm(x, "SPEC"?, eps): x / sqrt(mean(x ** 2) + eps) over layer_norm's axes, the mean
// of the squares in <tensor>_ms (PyTorch's F.rms_norm, without its weight).
void lower_rms_norm(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  StatNest sn = stat_nest(c, c.shape(x), call.spec);
  ExprP xv = c.value(x, sn.x);
  const int ms = c.temp("ms", sn.stat_shape);
  c.fill_buffer(ms, 0, stat_names(sn));
  c.emit(sn.n, ms, sn.stat, ir::Accum::Add, ir::binary(Op::Div, ir::pow(xv, 2), count_of(sn.n, sn.out_loops)));
  c.emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, xv,
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({ms, sn.stat}), ir::cnst(call.values.at("eps")))})));
}

// batch_norm(x, eps, momentum): each index of x's last output axis normalised over all the
// other axes, no affine part (nn.BatchNorm1d(affine=False) on channels-last values). The
// training step uses the batch's mean and biased variance and updates the running
// statistics as PyTorch does (the unbiased variance into running_var); the other routines
// normalise with the running statistics.
void lower_batch_norm(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  const Shape& xs = c.shape(x);
  const double eps = call.values.at("eps"), momentum = call.values.at("momentum");
  StatNest sn = channel_stat_nest(c, xs);
  const Shape ss = sn.stat_shape;
  const int rmean = bn_buffer(c, call.call, "running_mean", ss, 0);
  const int rvar = bn_buffer(c, call.call, "running_var", ss, 1);
  Shape scalar;
  for (AxisKind k : kStorageOrder) scalar.row(k).clear();
  const int tracked = bn_buffer(c, call.call, "num_batches_tracked", scalar, 0);
  ExprP xv = c.value(x, sn.x);
  ExprP count = count_of(sn.n, sn.out_loops);
  // training step: the batch's statistics
  c.set_phase(Phase::Train);
  auto [mu, var] = normalise(c, sn, xv, count, eps, r);
  // ... and the running statistics updated from them
  c.to_updates(true);
  {
    Nest n;
    IndexMap id = c.loops_for_buffer(rmean, n, stat_names(sn));
    auto blend = [&](int run, ExprP stat) {
      return ir::binary(Op::Add, ir::binary(Op::Mul, ir::cnst(1 - momentum), ir::load({run, id})),
                        ir::binary(Op::Mul, ir::cnst(momentum), std::move(stat)));
    };
    c.emit(n, rmean, id, ir::Accum::Set, blend(rmean, ir::load({mu, id}, true)));
    // m / (m - 1) (m values per channel); a batch of one value per channel, which PyTorch
    // refuses, has variance 0 and blends in 0 instead of 0 / 0
    ExprP unbiased = ir::binary(Op::Div, ir::binary(Op::Mul, ir::load({var, id}, true), count),
                                ir::select(ir::binary(Op::Gt, count, ir::cnst(1)),
                                           ir::binary(Op::Sub, count, ir::cnst(1)), ir::cnst(1)));
    c.emit(n, rvar, id, ir::Accum::Set, blend(rvar, unbiased));
    c.emit(Nest{}, tracked, {}, ir::Accum::Set, ir::binary(Op::Add, ir::load({tracked, {}}), ir::cnst(1)));
  }
  c.to_updates(false);
  // forward, eval_metrics, inference: the running statistics
  c.set_phase(Phase::Infer);
  c.emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, ir::binary(Op::Sub, xv, ir::load({rmean, sn.stat})),
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({rvar, sn.stat}), ir::cnst(eps))})));
  c.set_phase(Phase::Both);
}

}  // namespace cannl
