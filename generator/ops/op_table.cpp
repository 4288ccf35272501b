#include "ops/op_table.h"

#include <cmath>
#include <fmt/format.h>
#include <utility>

#include "ir/prims.h"
#include "lower/lowerings.h"
#include "shapes/shape_context.h"

namespace cannl {

namespace {

ArgSig tensor(const char* n, bool required = true) { return {n, ArgType::Tensor, required, 0}; }
ArgSig spec(const char* n, bool required = true) { return {n, ArgType::Spec, required, 0}; }
ArgSig integer(const char* n, double def, double min = -1e300) {
  return {n, ArgType::Int, false, def, min};
}
ArgSig number(const char* n, double def) { return {n, ArgType::Number, false, def}; }
ArgSig required_number(const char* n) { return {n, ArgType::Number, true, 0}; }
ArgSig positive_number(const char* n, double def) {
  ArgSig a{n, ArgType::Number, false, def, 0.0};
  a.positive = true;
  return a;
}

void pointwise(ShapeContext& c, const BoundCall& b) {
  c.same_shape(b.tensors[0], fmt::format("in {} of", b.call->name));
}

void reduction(ShapeContext& c, const BoundCall& b) {
  if (b.spec) c.einsum(*b.spec, {b.tensors[0]}, fmt::format("in {} of", b.call->name));
  else c.scalar_result();
}

// cross_entropy(logits, target): one value per example (and per input index). Integer
// targets are class indices: logits [B.. | n], ids [B.. | ] int.
void per_example_pair(ShapeContext& c, const BoundCall& b, bool scalar) {
  Solver& s = c.solver();
  const Expr* l = b.tensors[0];
  const Expr* t = b.tensors[1];
  Origin o = c.origin(fmt::format("in {} of", b.call->name), {l, t});
  if (c.is_int(t)) {
    s.equal_rows(c.shape(l).row(AxisKind::Output), RowT::closed({s.fresh_dim()}), o,
                 fmt::format("with integer targets (class indices) the logits {} must have one output axis, "
                             "the classes", c.name_of(l)));
    for (AxisKind k : {AxisKind::Input, AxisKind::Output})
      s.equal_rows(c.shape(t).row(k), RowT::closed({}), o,
                   fmt::format("the class indices {} must have no {} axes (one id per position: [ctx |] int)",
                               c.name_of(t), axis_kind_name(k)));
  } else {
    s.equal_rows(c.shape(l).row(AxisKind::Output), c.shape(t).row(AxisKind::Output), o,
                 fmt::format("the output axes of {} and {} must be equal", c.name_of(l), c.name_of(t)));
  }
  if (scalar) {
    c.scalar_result();
    return;
  }
  for (AxisKind k : {AxisKind::Batch, AxisKind::Input})
    s.broadcast(c.result().row(k), {c.shape(l).row(k), c.shape(t).row(k)}, o, axis_kind_name(k));
  c.result().row(AxisKind::Output) = RowT::closed({});
}

// conv2d(x : [b | h, w, c], k : [kh, kw, c -> d]) -> [b | h', w', d]
void conv2d(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* x = b.tensors[0];
  const Expr* k = b.tensors[1];
  long stride = static_cast<long>(b.values.at("stride"));
  long padding = static_cast<long>(b.values.at("padding"));
  Origin o = c.origin("in conv2d of", {x, k});
  DimT H = s.fresh_dim(), W = s.fresh_dim(), C = s.fresh_dim(), KH = s.fresh_dim(),
       KW = s.fresh_dim(), D = s.fresh_dim(), OH = s.fresh_dim(), OW = s.fresh_dim();
  s.equal_rows(c.shape(x).row(AxisKind::Input), RowT::closed({}), o,
               fmt::format("{} must have no input axes", c.name_of(x)));
  s.equal_rows(c.shape(x).row(AxisKind::Output), RowT::closed({H, W, C}), o,
               fmt::format("the image {} must have output axes [height, width, channels]", c.name_of(x)));
  s.equal_rows(c.shape(k).row(AxisKind::Batch), RowT::closed({}), o,
               fmt::format("the kernel {} must have no batch axes", c.name_of(k)));
  s.equal_rows(c.shape(k).row(AxisKind::Input), RowT::closed({KH, KW, C}), o,
               fmt::format("the kernel {} must have input axes [kh, kw, channels] with the image's "
                           "channels", c.name_of(k)));
  s.equal_rows(c.shape(k).row(AxisKind::Output), RowT::closed({D}), o,
               fmt::format("the kernel {} must have one output axis (the output channels)", c.name_of(k)));
  s.equal_rows(c.result().row(AxisKind::Batch), c.shape(x).row(AxisKind::Batch), o, "batch axes");
  c.result().row(AxisKind::Input) = RowT::closed({});
  c.result().row(AxisKind::Output) = RowT::closed({OH, OW, D});
  s.affine(H, stride, OH, KH, padding, o);
  s.affine(W, stride, OW, KW, padding, o);
}

// max_pool2d / avg_pool2d: the two leading output axes shrink by `size` (stride = size).
void pool2d(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* x = b.tensors[0];
  long size = static_cast<long>(b.values.at("size"));
  long stride = static_cast<long>(b.values.at("stride"));
  if (stride == 0) stride = size;
  Origin o = c.origin(fmt::format("in {} of", b.call->name), {x});
  DimT H = s.fresh_dim(), W = s.fresh_dim(), OH = s.fresh_dim(), OW = s.fresh_dim();
  RowT rest = s.fresh_row();
  s.equal_rows(c.shape(x).row(AxisKind::Output), RowT{{H, W}, rest.var, {}}, o,
               fmt::format("{} needs at least two output axes (height, width, ...)", c.name_of(x)));
  s.equal_rows(c.result().row(AxisKind::Batch), c.shape(x).row(AxisKind::Batch), o, "batch axes");
  s.equal_rows(c.result().row(AxisKind::Input), c.shape(x).row(AxisKind::Input), o, "input axes");
  c.result().row(AxisKind::Output) = RowT{{OH, OW}, rest.var, {}};
  s.affine(H, stride, OH, DimT::known(size), 0, o);
  s.affine(W, stride, OW, DimT::known(size), 0, o);
}

// ---- contract v1: sequence models and language models ----------------------------------

ArgSig ids(const char* n) {
  ArgSig a = tensor(n);
  a.elem = Elem::Int;
  return a;
}
ArgSig shape_only(const char* n) {  // a tensor of either element type: only its shape is read
  ArgSig a = tensor(n);
  a.elem = Elem::Either;
  return a;
}
ArgSig boolean(const char* n, bool def) { return {n, ArgType::Bool, false, def ? 1.0 : 0.0}; }
ArgSig choice(const char* n, std::vector<std::string> values) {
  ArgSig a{n, ArgType::Choice, false, 0};
  a.choices = std::move(values);
  return a;
}
ArgSig number_shown(const char* n, const char* shown) {
  ArgSig a{n, ArgType::Number, false, 0};
  a.default_text = shown;
  return a;
}

// softmax, log_softmax, layer_norm: the shape of x; with a spec (a one-operand reduction),
// over the axes it sums away: the spec must match x.
void normalised(ShapeContext& c, const BoundCall& b) {
  std::string verb = fmt::format("in {} of", b.call->name);
  if (b.spec) c.einsum_result(*b.spec, {b.tensors[0]}, verb);
  c.same_shape(b.tensors[0], verb);
}

// embedding(table : [d.. -> n], ids : [B.. | ] int) -> [B.. | d..]. Nothing about the ids
// fixes n: a table whose row count is not written must get it from another use.
void embedding(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* table = b.tensors[0];
  const Expr* ids = b.tensors[1];
  Origin o = c.origin("in embedding of", {table, ids});
  s.equal_rows(c.shape(table).row(AxisKind::Batch), RowT::closed({}), o,
               fmt::format("the table {} must have no batch axes", c.name_of(table)));
  s.equal_rows(c.shape(table).row(AxisKind::Output), RowT::closed({s.fresh_dim()}), o,
               fmt::format("the table {} must have one output axis, its rows (stored [n, d..] like "
                           "nn.Embedding: written [d -> n])", c.name_of(table)));
  for (AxisKind k : {AxisKind::Input, AxisKind::Output})
    s.equal_rows(c.shape(ids).row(k), RowT::closed({}), o,
                 fmt::format("the ids {} must have no {} axes (one id per position: [ctx |] int)",
                             c.name_of(ids), axis_kind_name(k)));
  s.equal_rows(c.result().row(AxisKind::Batch), c.shape(ids).row(AxisKind::Batch), o, "batch axes");
  c.result().row(AxisKind::Input) = RowT::closed({});
  c.result().row(AxisKind::Output) = c.shape(table).row(AxisKind::Input);
  c.explain_free(table, AxisKind::Output,
                 "the row count of an embedding table cannot come from the ids; write it in its "
                 "declaration, e.g. 'param wte : [768 -> 50304]', or use the table as a weight too (a "
                 "tied head: wte * x)");
}

// position(x): the index along x's last batch axis, as ids [B.. | ].
void position(ShapeContext& c, const BoundCall& b) {
  Origin o = c.origin("in position of", {b.tensors[0]});
  c.solver().equal_rows(c.result().row(AxisKind::Batch), c.shape(b.tensors[0]).row(AxisKind::Batch), o,
                        "batch axes");
  c.result().row(AxisKind::Input) = RowT::closed({});
  c.result().row(AxisKind::Output) = RowT::closed({});
  const Expr* x = b.tensors[0];
  c.check_after_solving(o, [&c, x]() -> std::string {
    RowT r = c.solver().resolve(c.shape(x).row(AxisKind::Batch));
    if (!r.right.empty() && r.right.back().kind != DimT::Batch) return "";
    return fmt::format("position needs a batch axis of positions after the runner's: {} has only the "
                       "runner's batch axis (declare the positions on the input, e.g. input tokens : [ctx |] int)",
                       c.name_of(x));
  });
}

// attention(q : [B.., t | H.., e], k : [B.., s | G.., e], v : [B.., s | G.., f]) -> [B.., t | H.., f],
// the key/value heads G.. the query heads H.. or a prefix of them (grouped-query, contract v2:
// H.. = G.., R..; told apart when the output axes of q and k are known at the call).
void attention(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* q = b.tensors[0];
  const Expr* k = b.tensors[1];
  const Expr* v = b.tensors[2];
  Origin o = c.origin("in attention of", {q, k, v});
  RowT B = s.fresh_row(), H = s.fresh_row();
  DimT T = s.fresh_dim(), S = s.fresh_dim(), E = s.fresh_dim(), F = s.fresh_dim();
  auto then = [](RowT r, DimT d) {  // r's axes, then d
    r.right.push_back(d);
    return r;
  };
  for (const Expr* x : {q, k, v})
    s.equal_rows(c.shape(x).row(AxisKind::Input), RowT::closed({}), o,
                 fmt::format("{} must have no input axes", c.name_of(x)));
  s.equal_rows(c.shape(q).row(AxisKind::Batch), then(B, T), o,
               fmt::format("the queries {} need a last batch axis, the positions", c.name_of(q)));
  s.equal_rows(c.shape(k).row(AxisKind::Batch), then(B, S), o,
               fmt::format("the keys {} must have the queries' batch axes but the last (their positions)",
                           c.name_of(k)));
  s.equal_rows(c.shape(v).row(AxisKind::Batch), c.shape(k).row(AxisKind::Batch), o,
               fmt::format("the values {} must have the keys' batch axes", c.name_of(v)));
  s.equal_rows(c.shape(q).row(AxisKind::Output), then(H, E), o,
               fmt::format("the queries {} need a last output axis, the head size", c.name_of(q)));
  // The key/value heads: the query heads, or their first axes when k has fewer output axes.
  RowT G = H;
  const RowT qo = s.resolve(c.shape(q).row(AxisKind::Output)), ko = s.resolve(c.shape(k).row(AxisKind::Output));
  if (qo.is_closed() && ko.is_closed() && !ko.right.empty() && ko.right.size() < qo.right.size())
    G = RowT::closed({qo.right.begin(), qo.right.begin() + static_cast<long>(ko.right.size()) - 1});
  s.equal_rows(c.shape(k).row(AxisKind::Output), then(G, E), o,
               fmt::format("the keys {} must have the queries' head axes or their first ones (grouped-query: q : "
                           "[B.., t | G.., R.., e] with k, v : [B.., s | G.., e]) and the queries' head size",
                           c.name_of(k)));
  s.equal_rows(c.shape(v).row(AxisKind::Output), then(G, F), o,
               fmt::format("the values {} must have the keys' output axes but the last (the heads)", c.name_of(v)));
  if (b.values.at("window") > 0 && b.values.at("causal") == 0)
    c.check_after_solving(o, [w = b.values.at("window")] {
      return fmt::format("a sliding window (window = {}) needs causal = true: each position sees the {} keys up "
                         "to its own", static_cast<long>(w), static_cast<long>(w));
    });
  if (b.values.at("causal") != 0)
    s.equal_dims(T, S, o, fmt::format("a causal attention needs as many keys as queries: the last batch axes "
                                      "of {} and {} must be equal", c.name_of(q), c.name_of(k)));
  c.result().row(AxisKind::Batch) = then(B, T);
  c.result().row(AxisKind::Input) = RowT::closed({});
  c.result().row(AxisKind::Output) = then(H, F);
  c.check_after_solving(o, [&c, &s, T, q]() -> std::string {
    if (s.resolve(T).kind != DimT::Batch) return "";
    return fmt::format("attention runs over the last batch axis (the positions), and for {} that is the "
                       "runner's batch axis: declare the positions on the input, e.g. input tokens : [ctx |] int",
                       c.name_of(q));
  });
}

// Adds or widens entries of the table above (contract v1), keeping their rows as they are.
template <typename F>
void amend(std::vector<OpInfo>& t, const char* name, F change) {
  for (OpInfo& o : t)
    if (o.name == name) change(o);
}

// The operands broadcast as those of + do: each kind of axes aligned from the right, size-1
// axes broadcast (minimum, maximum, where).
void broadcast(ShapeContext& c, const BoundCall& b) {
  Origin o = c.origin(fmt::format("in {} of", b.call->name), b.tensors);
  for (AxisKind k : {AxisKind::Batch, AxisKind::Input, AxisKind::Output}) {
    std::vector<RowT> rows;
    for (const Expr* t : b.tensors) rows.push_back(c.shape(t).row(k));
    c.solver().broadcast(c.result().row(k), rows, o, axis_kind_name(k));
  }
}

// Lowers to the primitive function `f` (ir/prims.cpp) of the tensor operands.
PointwiseLowering prim(const char* f) {
  return [f](const std::vector<ir::ExprP>& x, const BoundCall&) { return ir::call(f, x); };
}

// ---- losses, logsumexp, concat (issue 20) ----------------------------------------------

ArgSig reduction_arg() { return choice("reduction", {"mean", "sum", "none"}); }

// A pointwise loss of tensors broadcast as those of + (reduction = "none"), or its mean or
// sum over every element of that broadcast: a scalar (lower/lower.cpp reduces the pointwise
// lowering when reduction_of(call) is "mean" or "sum").
void pointwise_loss(ShapeContext& c, const BoundCall& b) {
  if (b.strings.at("reduction") == "none") return broadcast(c, b);
  Origin o = c.origin(fmt::format("in {} of", b.call->name), b.tensors);
  for (AxisKind k : {AxisKind::Batch, AxisKind::Input, AxisKind::Output}) {
    std::vector<RowT> rows;
    for (const Expr* t : b.tensors) rows.push_back(c.shape(t).row(k));
    c.solver().broadcast(c.solver().fresh_row(), rows, o, axis_kind_name(k));
  }
  c.scalar_result();
}

// nll_loss(logp, target): -sum over the output axes of target *. logp, one value per example
// (as cross_entropy; integer targets are class indices: -logp[class]), then reduced.
void nll_loss(ShapeContext& c, const BoundCall& b) { per_example_pair(c, b, b.strings.at("reduction") != "none"); }

// concat(a, b): torch.cat along the last output axis; the other output axes equal, batch and
// input axes broadcast as those of +.
void concat(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* x = b.tensors[0];
  const Expr* y = b.tensors[1];
  Origin o = c.origin("in concat of", {x, y});
  for (AxisKind k : {AxisKind::Batch, AxisKind::Input})
    s.broadcast(c.result().row(k), {c.shape(x).row(k), c.shape(y).row(k)}, o, axis_kind_name(k));
  RowT lx = s.fresh_row(), ly = s.fresh_row();
  DimT A = s.fresh_dim(), B = s.fresh_dim(), R = s.fresh_dim();
  auto then = [](const RowT& r, DimT d) { return RowT{{}, r.var, {d}}; };
  bool ok = s.equal_rows(c.shape(x).row(AxisKind::Output), then(lx, A), o,
                         fmt::format("{} needs an output axis to join along", c.name_of(x)));
  ok = s.equal_rows(c.shape(y).row(AxisKind::Output), then(ly, B), o,
                    fmt::format("{} needs an output axis to join along", c.name_of(y))) && ok;
  ok = ok && s.equal_rows(lx, ly, o, fmt::format("the output axes of {} and {} must be equal but the last",
                                                 c.name_of(x), c.name_of(y)));
  c.result().row(AxisKind::Output) = then(lx, R);
  if (ok) s.sum(A, B, R, o);
}

PointwiseLowering binary_loss(std::function<ir::ExprP(const ir::ExprP& d, const BoundCall& c)> f) {
  return [f](const std::vector<ir::ExprP>& x, const BoundCall& c) { return f(ir::binary(ir::Op::Sub, x[0], x[1]), c); };
}

void add_losses(std::vector<OpInfo>& t) {
  using ir::binary;
  using ir::cnst;
  using ir::ExprP;
  using ir::Op;
  t.push_back({"mse_loss", {tensor("x"), tensor("y"), reduction_arg()}, pointwise_loss, false,
               "(x - y) ** 2, reduced (reduction = \"mean\", \"sum\" or \"none\")",
               binary_loss([](const ExprP& d, const BoundCall&) { return ir::pow(d, 2); })});
  t.push_back({"l1_loss", {tensor("x"), tensor("y"), reduction_arg()}, pointwise_loss, false,
               "abs(x - y), reduced (reduction = \"mean\", \"sum\" or \"none\")",
               binary_loss([](const ExprP& d, const BoundCall&) { return ir::call("abs", {d}); })});
  t.push_back({"huber_loss", {tensor("x"), tensor("y"), positive_number("delta", 1.0), reduction_arg()},
               pointwise_loss, false,
               "0.5 (x - y) ** 2 where |x - y| < delta (> 0), else delta (|x - y| - 0.5 delta), reduced",
               binary_loss([](const ExprP& d, const BoundCall& c) {
                 const double delta = c.values.at("delta");
                 const ExprP a = ir::call("abs", {d});
                 return ir::select(binary(Op::Gt, cnst(delta), a), binary(Op::Mul, cnst(0.5), ir::pow(d, 2)),
                                   binary(Op::Mul, cnst(delta), binary(Op::Sub, a, cnst(0.5 * delta))));
               })});
  // log1pexp(x) - x y, log1pexp(x) = max(x, 0) + log1p(exp(-|x|)) as PyTorch computes it (no
  // overflow for any x), one primitive whose derivative is sigmoid(x) everywhere: sigmoid(x) - y,
  // 0.5 - y at x = 0 (the pieces max(x, 0) and |x| would each give 0 there).
  t.push_back({"bce_with_logits", {tensor("x"), tensor("y"), reduction_arg()}, pointwise_loss, false,
               "binary cross-entropy of sigmoid(x) against y, reduced",
               [](const std::vector<ExprP>& x, const BoundCall&) {
                 return binary(Op::Sub, ir::call("log1pexp", {x[0]}), binary(Op::Mul, x[0], x[1]));
               }});
  t.push_back({"nll_loss", {tensor("logp"), shape_only("target"), reduction_arg()}, nll_loss, false,
               "-sum over outputs(target *. logp) per example, reduced (mean over examples)", {}, lower_nll_loss,
               "nll"});
  t.push_back({"logsumexp", {tensor("x"), spec("spec", false)}, reduction, false,
               "log(sum(exp(x))) over all axes or as a one-operand einsum spec says, computed stably", {},
               lower_logsumexp, "lse"});
  t.push_back({"concat", {tensor("a"), tensor("b")}, concat, false, "a and b joined along the last output axis", {},
               lower_concat, "cat"});
}

// ---- train and eval modes (issue 20) -----------------------------------------------------

// dropout(x, p): the shape of x; p in [0, 1).
void dropout(ShapeContext& c, const BoundCall& b) {
  pointwise(c, b);
  const double p = b.values.at("p");
  if (p < 1) return;
  c.check_after_solving(c.origin("in dropout of", {b.tensors[0]}), [p]() {
    return fmt::format("dropout's p must be below 1 (it is {}): p is the probability of zeroing an element", p);
  });
}

// batch_norm(x, eps, momentum): the shape of x, which needs an output axis (the channels).
void batch_norm(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* x = b.tensors[0];
  Origin o = c.origin("in batch_norm of", {x});
  s.equal_rows(c.shape(x).row(AxisKind::Output), RowT{{}, s.fresh_row().var, {s.fresh_dim()}}, o,
               fmt::format("{} needs an output axis to normalise each index of (its last: the channels)",
                           c.name_of(x)));
  c.same_shape(x, "in batch_norm of");
}

void add_modes(std::vector<OpInfo>& t) {
  ArgSig p{"p", ArgType::Number, false, 0.5, 0.0};
  t.push_back({"dropout", {tensor("x"), p}, dropout, false,
               "x *. mask / (1 - p) in the training step (mask 0 with probability p), x elsewhere", {}, lower_dropout,
               "drop"});
  ArgSig momentum{"momentum", ArgType::Number, false, 0.1, 0.0};
  ArgSig eps{"eps", ArgType::Number, false, 1e-5, 0.0};
  t.push_back({"batch_norm", {tensor("x"), eps, momentum}, batch_norm, false,
               "each index of the last output axis normalised over all other axes: batch statistics in "
               "the training step, running statistics elsewhere",
               {}, lower_batch_norm, "bn"});
}

// ---- contract v2: the models the field trains now ----------------------------------------

// rope(x, theta, interleaved): the shape of x, whose last output axis (the head size e, even)
// is rotated in pairs at the position given by the index along x's last batch axis (a
// declared one: the sequence, as attention's).
void rope(ShapeContext& c, const BoundCall& b) {
  Solver& s = c.solver();
  const Expr* x = b.tensors[0];
  Origin o = c.origin("in rope of", {x});
  s.equal_rows(c.shape(x).row(AxisKind::Output), RowT{{}, s.fresh_row().var, {s.fresh_dim()}}, o,
               fmt::format("{} needs a last output axis to rotate (the head size, even)", c.name_of(x)));
  c.same_shape(x, "in rope of");
  c.check_after_solving(o, [&c, x]() -> std::string {
    const RowT batch = c.solver().resolve(c.shape(x).row(AxisKind::Batch));
    if (batch.right.empty() || batch.right.back().kind == DimT::Batch)
      return fmt::format("rope rotates at the position along the last batch axis, and {} has only the runner's "
                         "batch axis (declare the positions on the input, e.g. input tokens : [ctx |] int)",
                         c.name_of(x));
    const RowT out = c.solver().resolve(c.shape(x).row(AxisKind::Output));
    if (out.right.empty()) return "";
    const DimT e = c.solver().resolve(out.right.back());
    if (e.kind == DimT::Known && e.size % 2 != 0)
      return fmt::format("rope rotates pairs of the last output axis, whose size must be even: {} has {}",
                         c.name_of(x), e.size);
    return "";
  });
}

void add_v2(std::vector<OpInfo>& t) {
  ArgSig eps{"eps", ArgType::Number, false, 1e-6, 0.0};
  t.push_back({"rms_norm", {tensor("x"), spec("spec", false), eps}, normalised, false,
               "x / sqrt(mean(x ** 2) + eps) over the output axes (or the axes a spec sums away)", {},
               lower_rms_norm, "rms"});
  t.push_back({"rope", {tensor("x"), positive_number("theta", 10000), boolean("interleaved", false)}, rope, false,
               "rotary position embedding of the last output axis at the position along the last batch axis", {},
               lower_rope, "rope"});
}

std::vector<OpInfo> make_table() {
  std::vector<OpInfo> t;
  for (const char* f : {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "gelu"})
    t.push_back({f, {tensor("x")}, pointwise, false, "pointwise; the shape is unchanged", prim(f)});
  t.push_back({"where", {tensor("c"), tensor("a"), tensor("b")}, broadcast, false, "a where c > 0, else b, pointwise",
               [](const std::vector<ir::ExprP>& x, const BoundCall&) {
                 return ir::select(ir::binary(ir::Op::Gt, x[0], ir::cnst(0)), x[1], x[2]);
               }});
  t.push_back({"clamp", {tensor("x"), number("lo", -INFINITY), number("hi", INFINITY)}, pointwise, false,
               "min(max(x, lo), hi) (PyTorch's clamp: the gradient passes where lo <= x <= hi)",
               [](const std::vector<ir::ExprP>& x, const BoundCall& c) {
                 const double lo = c.values.at("lo"), hi = c.values.at("hi");
                 ir::ExprP y = x[0];
                 if (lo > -INFINITY) y = ir::select(ir::binary(ir::Op::Gt, ir::cnst(lo), y), ir::cnst(lo), y);
                 if (hi < INFINITY) y = ir::select(ir::binary(ir::Op::Gt, y, ir::cnst(hi)), ir::cnst(hi), y);
                 return y;
               }});
  t.push_back({"maximum", {tensor("a"), tensor("b")}, broadcast, false, "the larger of a and b, pointwise",
               prim("maximum")});
  t.push_back({"minimum", {tensor("a"), tensor("b")}, broadcast, false, "the smaller of a and b, pointwise",
               prim("minimum")});
  t.push_back({"leaky_relu", {tensor("x"), number("negative_slope", 0.01)}, pointwise, false,
               "x where x > 0, else negative_slope x (PyTorch's)",
               [](const std::vector<ir::ExprP>& x, const BoundCall& c) {
                 return ir::select(ir::binary(ir::Op::Gt, x[0], ir::cnst(0)), x[0],
                                   ir::binary(ir::Op::Mul, x[0], ir::cnst(c.values.at("negative_slope"))));
               }});
  t.push_back({"elu", {tensor("x"), number("alpha", 1)}, pointwise, false,
               "x where x > 0, else alpha (exp(x) - 1) (PyTorch's)",
               [](const std::vector<ir::ExprP>& x, const BoundCall& c) {
                 return ir::select(ir::binary(ir::Op::Gt, x[0], ir::cnst(0)), x[0],
                                   ir::binary(ir::Op::Mul, ir::binary(ir::Op::Sub, ir::call("exp", {x[0]}), ir::cnst(1)),
                                              ir::cnst(c.values.at("alpha"))));
               }});
  t.push_back({"softplus", {tensor("x"), number("beta", 1), number("threshold", 20)}, pointwise, false,
               "log(1 + exp(beta x)) / beta, x where beta x > threshold (PyTorch's)",
               [](const std::vector<ir::ExprP>& x, const BoundCall& c) {
                 const ir::ExprP beta = ir::cnst(c.values.at("beta")), bx = ir::binary(ir::Op::Mul, x[0], beta);
                 return ir::select(ir::binary(ir::Op::Gt, bx, ir::cnst(c.values.at("threshold"))), x[0],
                                   ir::binary(ir::Op::Div, ir::call("log1p", {ir::call("exp", {bx})}), beta));
               }});
  t.push_back({"silu", {tensor("x")}, pointwise, false, "x *. sigmoid(x), pointwise", prim("silu")});
  t.push_back({"log1p", {tensor("x")}, pointwise, false, "log(1 + x), pointwise", prim("log1p")});
  t.push_back({"cos", {tensor("x")}, pointwise, false, "cosine, pointwise", prim("cos")});
  t.push_back({"sin", {tensor("x")}, pointwise, false, "sine, pointwise", prim("sin")});
  // Built-ins with nests of their own: each names its lowering (lower/lowerings.h) and the
  // suffix of the temporary that holds its value.
  for (const auto& [f, lower] : {std::pair<const char*, CallLowering>{"sum", lower_sum}, {"mean", lower_mean},
                                 {"max", lower_max}})
    t.push_back({f, {tensor("x"), spec("spec", false)}, reduction, false,
                 "over all axes (a scalar), or as a one-operand einsum spec says", {}, lower});
  for (const auto& [f, lower] :
       {std::pair<const char*, CallLowering>{"softmax", lower_softmax}, {"log_softmax", lower_log_softmax}})
    t.push_back({f, {tensor("x")}, pointwise, false, "over the output axes", {}, lower});
  t.push_back({"layer_norm", {tensor("x"), number("eps", 1e-5)}, pointwise, false,
               "normalise over the output axes", {}, lower_layer_norm, "ln"});
  t.push_back({"cross_entropy", {tensor("logits"), tensor("target")},
               [](ShapeContext& c, const BoundCall& b) { per_example_pair(c, b, false); }, false,
               "-sum over outputs(target *. log_softmax(logits)), one value per example", {}, lower_cross_entropy,
               "ce"});
  t.push_back({"accuracy", {tensor("logits"), tensor("target")},
               [](ShapeContext& c, const BoundCall& b) { per_example_pair(c, b, true); }, true,
               "fraction of examples whose argmax over outputs agrees (metrics only)", {}, lower_accuracy, "acc"});
  t.push_back({"conv2d", {tensor("x"), tensor("k"), integer("stride", 1, 1), integer("padding", 0, 0)},
               conv2d, false, "2-D convolution, [b | h, w, c] with [kh, kw, c -> d]", {}, lower_conv2d, "conv"});
  for (const auto& [f, lower] :
       {std::pair<const char*, CallLowering>{"max_pool2d", lower_max_pool2d}, {"avg_pool2d", lower_avg_pool2d}})
    t.push_back({f, {tensor("x"), integer("size", 2, 1), integer("stride", 0, 0)}, pool2d, false,
                 "pooling over the two leading output axes", {}, lower, "pool"});
  t.push_back({"einsum", {spec("spec"), tensor("a"), tensor("b", false)},
               [](ShapeContext& c, const BoundCall& b) {
                 c.einsum(*b.spec, b.tensors, "in einsum of");
               },
               false, "generalised einsum", {}, lower_einsum, "ein"});
  // Contract v1 (sequence models and language models).
  t.push_back({"embedding", {tensor("table"), ids("ids")}, embedding, false,
               "rows of a table [d -> n] selected by integer ids", {}, lower_embedding, "emb"});
  // (always pointwise: lower/lower.cpp reads the position from the loop index)
  t.push_back({"position", {shape_only("x")}, position, false,
               "the index along the last batch axis, as ids (torch.arange(T))"});
  t.push_back({"attention", {tensor("q"), tensor("k"), tensor("v"), boolean("causal", false),
                             number_shown("scale", "1/sqrt(e)"), integer("window", 0, 0)},
               attention, false, "scaled dot-product attention over the last batch axis", {}, lower_attention,
               "attn"});
  amend(t, "gelu", [](OpInfo& o) {
    o.args.push_back(choice("approximate", {"none", "tanh"}));
    o.lower = [](const std::vector<ir::ExprP>& x, const BoundCall& c) {
      return ir::call(c.strings.at("approximate") == "tanh" ? "gelu_tanh" : "gelu", x);
    };
  });
  for (const char* f : {"softmax", "log_softmax", "layer_norm"})
    amend(t, f, [](OpInfo& o) {
      o.args.insert(o.args.begin() + 1, spec("spec", false));  // softmax(x, "SPEC"): over what SPEC sums away
      o.shape = normalised;
    });
  for (const char* f : {"cross_entropy", "accuracy"})
    amend(t, f, [](OpInfo& o) { o.args[1].elem = Elem::Either; });  // class indices or distributions
  add_losses(t);
  add_modes(t);
  add_v2(t);
  return t;
}

std::vector<CallSig> make_initializers() {
  return {
      {"uniform", {number("lo", 0), number("hi", 1)}},
      {"normal", {number("mean", 0), number("std", 1)}},
      {"zeros", {}},
      {"ones", {}},
      {"constant", {required_number("v")}},
      {"kaiming_uniform", {number("a", 0)}},
      {"kaiming_normal", {number("a", 0)}},
      {"xavier_uniform", {number("gain", 1)}},
      {"xavier_normal", {number("gain", 1)}},
  };
}

std::vector<CallSig> make_optimizers() {
  return {
      {"sgd", {required_number("lr"), number("momentum", 0), number("weight_decay", 0),
               number("dampening", 0), boolean("nesterov", false)}},
      {"adam", {number("lr", 1e-3), number("beta1", 0.9), number("beta2", 0.999),
                number("eps", 1e-8), number("weight_decay", 0)}},
      {"adamw", {number("lr", 1e-3), number("beta1", 0.9), number("beta2", 0.999),
                 number("eps", 1e-8), number("weight_decay", 0.01), choice("decay", {"all", "matrices"})}},
      // torch.optim.Muon (PyTorch >= 2.9; contract v2 §5), Newton-Schulz in the param's own type.
      {"muon", {number("lr", 1e-3), number("weight_decay", 0.1), number("momentum", 0.95),
                boolean("nesterov", true), number("ns_steps", 5), number("eps", 1e-7),
                choice("adjust_lr", {"original", "match_rms_adamw"})}},
  };
}

// Learning-rate schedules (docs/language.md §10): the factor of the optimiser's lr at each step.
std::vector<CallSig> make_schedules() {
  return {
      {"constant", {number("warmup", 0)}},
      {"step", {required_number("every"), number("gamma", 0.1), number("warmup", 0)}},
      {"cosine", {required_number("steps"), number("warmup", 0), number("min_lr", 0)}},
      // PyTorch's ExponentialLR, LinearLR (total_iters is `steps`) and OneCycleLR (cosine
      // annealing; the momentum is not cycled).
      {"exponential", {required_number("gamma"), number("warmup", 0)}},
      {"linear", {number("start_factor", 1.0 / 3), number("end_factor", 1), number("steps", 5), number("warmup", 0)}},
      {"onecycle", {required_number("max_lr"), required_number("steps"), number("pct_start", 0.3),
                    number("div_factor", 25), number("final_div_factor", 1e4)}},
  };
}

template <typename T>
const T* find_in(const std::vector<T>& v, const std::string& name) {
  for (const T& x : v)
    if (x.name == name) return &x;
  return nullptr;
}

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const T& x : v) out.push_back(x.name);
  return out;
}

const std::vector<CallSig>& initializers() {
  static const std::vector<CallSig> v = make_initializers();
  return v;
}
const std::vector<CallSig>& optimizers() {
  static const std::vector<CallSig> v = make_optimizers();
  return v;
}
const std::vector<CallSig>& schedules() {
  static const std::vector<CallSig> v = make_schedules();
  return v;
}

}  // namespace

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = make_table();
  return table;
}
const OpInfo* find_op(const std::string& name) { return find_in(all_ops(), name); }
const CallSig* find_initializer(const std::string& name) { return find_in(initializers(), name); }
const CallSig* find_optimizer(const std::string& name) { return find_in(optimizers(), name); }
std::vector<std::string> initializer_names() { return names_of(initializers()); }
std::vector<std::string> optimizer_names() { return names_of(optimizers()); }
const CallSig* find_schedule(const std::string& name) { return find_in(schedules(), name); }
std::vector<std::string> schedule_names() { return names_of(schedules()); }

std::string known_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) s += i + 1 == names.size() ? " or " : ", ";
    s += names[i];
  }
  return s;
}

}  // namespace cannl
