// routines.cpp — forward nests, autodiff and the optimiser assembled into routines.
#include "lower/routines.h"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "autodiff/autodiff.h"
#include "autodiff/optimizer.h"
#include "lower/lower.h"
#include "passes/loop_order.h"

namespace cannl {

namespace {

// The nests of `fwd` that the `targets` buffers depend on, in order.
std::vector<ir::Stmt> needed(const std::vector<ir::Stmt>& fwd, std::set<int> targets) {
  std::vector<bool> keep(fwd.size(), false);
  for (size_t i = fwd.size(); i-- > 0;) {
    if (!targets.count(fwd[i].out.buf)) continue;
    keep[i] = true;
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(fwd[i].body, loads);
    for (const ir::Expr* l : loads) targets.insert(l->access.buf);
  }
  std::vector<ir::Stmt> out;
  for (size_t i = 0; i < fwd.size(); ++i)
    if (keep[i]) out.push_back(fwd[i]);
  return out;
}

long product(const std::vector<Axis>& row) {
  long n = 1;
  for (const Axis& a : row) n *= a.size;
  return n;
}

// One param's initialisation (contract §8; PyTorch's formulas for kaiming and xavier).
ir::Stmt init_param(const ir::Program& p, int buf, const Shape& shape, const CallConfig* init, int line) {
  const double fan_in = static_cast<double>(product(shape.row(AxisKind::Input)));
  const double fan_out = static_cast<double>(product(shape.row(AxisKind::Output)));
  auto arg = [&](const char* k, double d) {
    if (!init) return d;
    auto it = init->args.find(k);
    return it == init->args.end() ? d : it->second;
  };
  std::string name = init ? init->name : (shape.row(AxisKind::Input).empty() ? "zeros" : "default");
  ir::ExprP body;
  auto uniform = [](double lo, double hi) { return ir::binary(ir::Op::Uniform, ir::cnst(lo), ir::cnst(hi)); };
  auto normal = [](double mean, double std) { return ir::binary(ir::Op::Normal, ir::cnst(mean), ir::cnst(std)); };
  auto gain = [&] { double a = arg("a", 0); return std::sqrt(2.0 / (1 + a * a)); };
  if (name == "default") body = uniform(-1 / std::sqrt(fan_in), 1 / std::sqrt(fan_in));
  else if (name == "uniform") body = uniform(arg("lo", 0), arg("hi", 1));
  else if (name == "normal") body = normal(arg("mean", 0), arg("std", 1));
  else if (name == "zeros") body = ir::cnst(0);
  else if (name == "ones") body = ir::cnst(1);
  else if (name == "constant") body = ir::cnst(arg("v", 0));
  else if (name == "kaiming_uniform") { double b = gain() * std::sqrt(3 / fan_in); body = uniform(-b, b); }
  else if (name == "kaiming_normal") body = normal(0, gain() / std::sqrt(fan_in));
  else if (name == "xavier_uniform") { double b = arg("gain", 1) * std::sqrt(6 / (fan_in + fan_out)); body = uniform(-b, b); }
  else if (name == "xavier_normal") body = normal(0, arg("gain", 1) * std::sqrt(2 / (fan_in + fan_out)));
  else CANNL_BUG("unknown initialiser " + name);
  const std::string& pname = p.buffers[static_cast<size_t>(buf)].name;
  ir::Stmt s = ir::elementwise(p, buf, name == "default" ? pname + " = uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))"
                                                          : fmt::format("{} = {}", pname, name));
  s.body = body;
  s.sequential = body->op == ir::Op::Uniform || body->op == ir::Op::Normal;
  s.line = line;
  return s;
}

}  // namespace

ir::Program build_program(const Model& m, const ShapeInfo& shapes, const SourceFile& file,
                          const ProgramOptions& opt) {
  Lowered low = lower_forward(m, shapes, file, opt.max_batch);
  ir::Program p = std::move(low.prog);
  auto line_of = [&](const Stmt* st) { return st ? static_cast<int>(file.line_col(st->range.begin).line) : 0; };
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    int b = low.tensor_buf[i];
    const Tensor& t = m.tensors[i];
    if (t.kind == TensorKind::Input) p.inputs.push_back(b);
    if (t.kind == TensorKind::Param) {
      p.params.push_back(b);
      p.buffers[static_cast<size_t>(b)].state_name = t.name;
    }
  }
  for (int o : m.outputs) p.outputs.push_back(low.tensor_buf[static_cast<size_t>(o)]);
  for (int mt : m.metrics) p.metrics.push_back(low.tensor_buf[static_cast<size_t>(mt)]);
  p.loss = low.tensor_buf[static_cast<size_t>(m.loss)];
  p.lr = m.optimizer->args.at("lr");
  p.optimizer = std::string(file.slice(m.optimizer->range));
  auto one_line = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
      if (space && (out.empty() || out.back() == ' ')) continue;
      out += space ? ' ' : c;
    }
    return out;
  };
  if (m.schedule) p.schedule = one_line(file.slice(m.schedule->range));
  if (m.schedule) p.optimizer += ", schedule = " + p.schedule;
  if (m.clip_grad_norm > 0) p.optimizer += fmt::format(", clip_grad_norm = {}", m.clip_grad_norm);

  ir::Routine init{"init", {}, {}};
  ir::Routine train{"train_step", {}, {}};
  train.stmts = needed(low.forward, {p.loss});
  Gradients g = differentiate(p, train.stmts, p.loss);
  for (auto& s : g.stmts) train.stmts.push_back(std::move(s));
  const int minimize_line = static_cast<int>(file.line_col(m.loss_range.begin).line);
  TrainingOptions topt;
  topt.schedule = m.schedule ? &*m.schedule : nullptr;
  topt.clip_grad_norm = m.clip_grad_norm;
  for (auto& s : lower_optimizer(p, train, *m.optimizer, topt, g.grad, minimize_line))
    train.stmts.push_back(std::move(s));

  for (size_t i = 0; i < m.tensors.size(); ++i) {
    if (m.tensors[i].kind != TensorKind::Param) continue;
    auto it = m.inits.find(static_cast<int>(i));
    init.stmts.push_back(init_param(p, low.tensor_buf[i], shapes.tensors[i],
                                    it == m.inits.end() ? nullptr : &it->second, line_of(m.tensors[i].stmt)));
  }
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role == ir::Role::OptState)
      init.stmts.push_back(ir::elementwise(p, static_cast<int>(b), "zero " + p.buffers[b].name));

  ir::Routine forward{"forward", {}, needed(low.forward, std::set<int>(p.outputs.begin(), p.outputs.end()))};
  std::set<int> eval_targets(p.metrics.begin(), p.metrics.end());
  eval_targets.insert(p.loss);
  ir::Routine eval{"eval_metrics", {}, needed(low.forward, eval_targets)};

  p.routines = {std::move(init), std::move(train), std::move(forward), std::move(eval)};
  for (auto& r : p.routines)
    for (auto& s : r.stmts) order_loops(p, s);
  return p;
}

}  // namespace cannl
