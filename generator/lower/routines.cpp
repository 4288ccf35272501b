// routines.cpp — routine assembly (see routines.h).
#include "lower/routines.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

#include "support/diagnostic.h"

namespace cannl {

namespace {

// The nests of `fwd` that the `targets` buffers depend on, in order.
std::vector<ir::Stmt> needed(const std::vector<ir::Stmt>& fwd, std::set<int> targets) {
  std::vector<bool> keep(fwd.size(), false);
  for (size_t i = fwd.size(); i-- > 0;) {
    bool wanted = false;
    for (int w : ir::written_buffers(fwd[i])) wanted = wanted || targets.count(w) > 0;
    if (!wanted) continue;
    keep[i] = true;
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(fwd[i], loads);
    for (const ir::Expr* l : loads) targets.insert(l->access.buf);
    if (fwd[i].call)
      for (int b : ir::call_reads(*fwd[i].call)) targets.insert(b);
  }
  std::vector<ir::Stmt> out;
  for (size_t i = 0; i < fwd.size(); ++i)
    if (keep[i]) out.push_back(fwd[i]);
  return out;
}

// One param's initialisation (contract §8; PyTorch's formulas for kaiming and xavier).
ir::Stmt init_param(const ir::Program& p, int buf) {
  const ir::Buffer& b = p.buffers[static_cast<size_t>(buf)];
  const ir::Init& init = *b.init;
  const double fan_in = static_cast<double>(init.fan_in);
  const double fan_out = static_cast<double>(init.fan_out);
  auto arg = [&](const char* k, double d) {
    auto it = init.args.find(k);
    return it == init.args.end() ? d : it->second;
  };
  const std::string& name = init.name;
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
  else if (name == "kaiming_uniform") { double bound = gain() * std::sqrt(3 / fan_in); body = uniform(-bound, bound); }
  else if (name == "kaiming_normal") body = normal(0, gain() / std::sqrt(fan_in));
  else if (name == "xavier_uniform") { double bound = arg("gain", 1) * std::sqrt(6 / (fan_in + fan_out)); body = uniform(-bound, bound); }
  else if (name == "xavier_normal") body = normal(0, arg("gain", 1) * std::sqrt(2 / (fan_in + fan_out)));
  else CANNL_BUG("unknown initialiser " + name);
  ir::Stmt s = ir::elementwise(p, buf, name == "default" ? b.name + " = uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))"
                                                          : fmt::format("{} = {}", b.name, name));
  s.only().body = body;
  s.sequential = body->op == ir::Op::Uniform || body->op == ir::Op::Normal;
  s.line = init.line;
  return s;
}

// The forward nests of the routines that run in `phase` (Train: the training step; Infer:
// forward and eval_metrics).
std::vector<ir::Stmt> in_phase(const Lowered& low, Phase phase) {
  if (low.phase.size() != low.forward.size()) CANNL_BUG("a forward nest without its phase");
  std::vector<ir::Stmt> out;
  for (size_t i = 0; i < low.forward.size(); ++i)
    if (low.phase[i] == Phase::Both || low.phase[i] == phase) out.push_back(low.forward[i]);
  return out;
}

}  // namespace

void assemble_routines(ir::Program& p, const Lowered& low) {
  ir::Routine init{ir::RoutineKind::Init};
  // The spec params in declaration order (their spec tensors' order: a rolled block's params
  // are listed group-major in Program::params, lower/roll.h, but drawn instance by instance,
  // as without rolling), one random stream.
  std::vector<int> declared;
  for (int b : p.params)
    if (p.buffers[static_cast<size_t>(b)].init) declared.push_back(b);
  std::stable_sort(declared.begin(), declared.end(), [&](int a, int b) {
    return p.buffers[static_cast<size_t>(a)].tensor < p.buffers[static_cast<size_t>(b)].tensor;
  });
  for (int b : declared) init.stmts.push_back(init_param(p, b));
  for (const auto& [buf, v] : low.state_init) {  // batch_norm's running statistics
    const ir::Buffer& b = p.buffers[static_cast<size_t>(buf)];
    ir::Stmt s = ir::elementwise(p, buf, fmt::format("{} = {}", b.name, v));
    s.only().body = ir::cnst(v);
    init.stmts.push_back(std::move(s));
  }
  const std::vector<ir::Stmt> train_fwd = in_phase(low, Phase::Train), infer_fwd = in_phase(low, Phase::Infer);

  ir::Routine train{ir::RoutineKind::TrainStep};
  train.io.batch = true;
  train.io.values = {p.loss};
  std::set<int> train_targets = {p.loss};  // and the batch statistics the running ones blend in
  for (const ir::Stmt& s : low.train_updates) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads) train_targets.insert(l->access.buf);
  }
  train.stmts = needed(train_fwd, train_targets);
  train.stmts.insert(train.stmts.end(), low.train_updates.begin(), low.train_updates.end());

  ir::Routine forward{ir::RoutineKind::Forward};
  forward.io.batch = true;
  forward.io.outputs = p.outputs;
  forward.stmts = needed(infer_fwd, std::set<int>(p.outputs.begin(), p.outputs.end()));

  ir::Routine eval{ir::RoutineKind::Eval};
  eval.io.batch = true;
  eval.io.values = {p.loss};
  eval.io.values.insert(eval.io.values.end(), p.metrics.begin(), p.metrics.end());
  eval.stmts = needed(infer_fwd, std::set<int>(eval.io.values.begin(), eval.io.values.end()));

  p.routines = {std::move(init), std::move(train), std::move(forward), std::move(eval)};
}

}  // namespace cannl
