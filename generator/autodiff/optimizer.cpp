// optimizer.cpp — optimiser updates as elementwise nests (see optimizer.h).
#include "autodiff/optimizer.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "ir/prims.h"
#include "support/diagnostic.h"

namespace cannl {

using ir::ExprP;
using ir::Op;

namespace {

ExprP add(ExprP a, ExprP b) { return ir::binary(Op::Add, std::move(a), std::move(b)); }
ExprP sub(ExprP a, ExprP b) { return ir::binary(Op::Sub, std::move(a), std::move(b)); }
ExprP mul(ExprP a, ExprP b) { return ir::binary(Op::Mul, std::move(a), std::move(b)); }
ExprP div(ExprP a, ExprP b) { return ir::binary(Op::Div, std::move(a), std::move(b)); }
ExprP num(double v) { return ir::cnst(v); }

int scalar_buffer(ir::Program& p, const std::string& name, const std::string& what) {
  ir::Buffer b;
  b.name = name;
  for (int i = 2; p.find(b.name) >= 0; ++i) b.name = fmt::format("{}{}", name, i);
  b.role = ir::Role::Temp;
  b.shape = what;
  p.buffers.push_back(b);
  return static_cast<int>(p.buffers.size()) - 1;
}

int state_buffer(ir::Program& p, int param, const std::string& state) {
  ir::Buffer b = p.buffers[static_cast<size_t>(param)];
  const std::string pname = b.name;
  b.name = pname + "_" + state;
  b.state_name = pname + "." + state;
  b.role = ir::Role::OptState;
  b.state_of = param;
  b.tensor = -1;
  b.init.reset();
  b.matrix = false;
  b.shape = state + " of " + pname;
  p.buffers.push_back(b);
  return static_cast<int>(p.buffers.size()) - 1;
}

}  // namespace

ExprP schedule_lr(const ir::Schedule& c, const ExprP& base) {
  auto a = [&](const char* k) { return c.args.at(k); };
  const double warmup = c.args.count("warmup") ? a("warmup") : 0;
  const ExprP s = sub(ir::scalar("step"), num(1));  // steps taken before this one
  ExprP after;                                      // the lr once warmed up
  if (c.name == "constant") {
    after = base;
  } else if (c.name == "step") {  // base * gamma ** floor((s - warmup) / every), whole steps
    const double w = static_cast<double>(static_cast<long>(warmup)), every = static_cast<double>(static_cast<long>(a("every")));
    after = mul(base, ir::call("pow", {num(a("gamma")), ir::call("floor", {div(sub(s, num(w)), num(every))})}));
  } else if (c.name == "exponential") {  // base * gamma ** (s - warmup)
    after = mul(base, ir::call("pow", {num(a("gamma")), sub(s, num(warmup))}));
  } else if (c.name == "linear") {  // base * (start + (end - start) * min(s - warmup, steps) / steps)
    const ExprP t = div(sub(s, num(warmup)), num(a("steps")));
    const ExprP capped = ir::select(ir::binary(Op::Gt, t, num(1)), num(1), t);
    after = mul(base, add(num(a("start_factor")), mul(num(a("end_factor") - a("start_factor")), capped)));
  } else if (c.name == "onecycle") {
    // PyTorch's OneCycleLR (anneal_strategy "cos", two phases): from max_lr / div_factor up to
    // max_lr at step pct_start * steps - 1, then down to that / final_div_factor at steps - 1.
    const double top = a("max_lr"), low = top / a("div_factor"), bottom = low / a("final_div_factor");
    const double end1 = a("pct_start") * a("steps") - 1, end2 = a("steps") - 1;
    auto anneal = [&](double from, double to, ExprP pct) {  // to + (from - to) / 2 * (1 + cos(pi pct))
      const ExprP capped = ir::select(ir::binary(Op::Gt, pct, num(1)), num(1), pct);
      return add(num(to), mul(num((from - to) / 2), add(num(1), ir::call("cos", {mul(num(3.141592653589793), capped)}))));
    };
    after = ir::select(ir::binary(Op::Gt, s, num(end1)), anneal(top, bottom, div(sub(s, num(end1)), num(end2 - end1))),
                       anneal(low, top, div(s, num(end1))));
  } else {  // cosine: min_lr + (base - min_lr) * 0.5 * (1 + cos(pi * min(1, (s - warmup) / (steps - warmup))))
    const double min_lr = a("min_lr");
    const ExprP t = div(sub(s, num(warmup)), num(a("steps") - warmup));
    const ExprP capped = ir::select(ir::binary(Op::Gt, t, num(1)), num(1), t);
    after = add(num(min_lr), mul(mul(sub(base, num(min_lr)), num(0.5)),
                                 add(num(1), ir::call("cos", {mul(num(3.141592653589793), capped)}))));
  }
  if (warmup == 0) return after;
  // Linear warmup: base * (s + 1) / warmup for the first `warmup` steps.
  return ir::select(ir::binary(Op::Gt, num(warmup), s), div(mul(base, add(s, num(1))), num(warmup)), after);
}

namespace {

struct TrainingOptions {
  const ir::Schedule* schedule = nullptr;  // null: constant lr
  double clip_grad_norm = 0;               // 0: no clipping
  std::set<int> no_decay;                  // params the weight decay skips (decay = "matrices": no input axes)
};

std::vector<ir::Stmt> update_nests(ir::Program& p, ir::Routine& train_step, const ir::OptimizerConfig& opt,
                                   const TrainingOptions& options, int line) {
  auto arg = [&](const char* k, double dflt) {
    auto it = opt.args.find(k);
    return it == opt.args.end() ? dflt : it->second;
  };
  const std::string& kind = opt.name;
  const double weight_decay = arg("weight_decay", kind == "adamw" ? 0.01 : 0.0);
  const double momentum = arg("momentum", 0), dampening = arg("dampening", 0);
  const bool nesterov = arg("nesterov", 0) != 0;
  const double beta1 = arg("beta1", 0.9), beta2 = arg("beta2", 0.999), eps = arg("eps", 1e-8);

  // Adam's bias corrections.
  const ExprP step = ir::scalar("step");
  if (kind == "adam" || kind == "adamw") {
    train_step.scalars.push_back({"bc1", sub(num(1), ir::call("pow", {num(beta1), step}))});
    train_step.scalars.push_back({"sqrt_bc2", ir::call("sqrt", {sub(num(1), ir::call("pow", {num(beta2), step}))})});
  }

  // The learning rate of this step: the spec's schedule unless switched off at run time.
  std::string lr_name = "lr";
  if (options.schedule) {
    lr_name = "lr_t";
    const ExprP lr = ir::scalar("lr");
    train_step.scalars.push_back({lr_name, ir::select(ir::scalar("schedule"), schedule_lr(*options.schedule, lr), lr)});
  }
  train_step.lr_scalar = lr_name;
  auto LR = [&] { return ir::scalar(lr_name); };

  std::vector<ir::Stmt> out;
  // Gradient clipping: the global L2 norm over every param's gradient.
  ExprP clip;
  if (options.clip_grad_norm > 0) {
    const std::string what = fmt::format("clip_grad_norm(max_norm = {})", options.clip_grad_norm);
    int norm = scalar_buffer(p, "grad_norm", "the sum of the squares of every gradient");
    int coef = scalar_buffer(p, "clip_coef", "the factor of every gradient: min(1, max_norm / (norm + 1e-6))");
    ir::Stmt zero = ir::nest({}, {norm, {}}, ir::Accum::Set, num(0));
    zero.line = line;
    zero.what = what + ": the squared norm";
    zero.update_of = ir::kUpdateNorm;
    out.push_back(zero);
    for (int param : p.params) {
      const int g = p.grad(param);
      if (g < 0) continue;
      ir::Stmt s = ir::elementwise(p, g, zero.what);
      ExprP gv = ir::load_all(s, g);
      s.only() = {{norm, {}}, ir::Accum::Add, mul(gv, gv)};
      s.line = line;
      s.update_of = ir::kUpdateNorm;
      out.push_back(std::move(s));
    }
    ExprP ratio = div(num(options.clip_grad_norm), add(ir::call("sqrt", {ir::load({norm, {}})}), num(1e-6)));
    ir::Stmt c = ir::nest({}, {coef, {}}, ir::Accum::Set, ir::select(ir::binary(Op::Gt, ratio, num(1)), num(1), ratio));
    c.line = line;
    c.what = what + ": the factor";
    out.push_back(std::move(c));
    clip = ir::load({coef, {}});
  }

  for (size_t k = 0; k < p.params.size(); ++k) {
    const int param = p.params[k];
    const int g = p.grad(param);
    if (g < 0) continue;  // not used by the loss: no gradient, no update (as PyTorch)
    const double wd = options.no_decay.count(param) ? 0.0 : weight_decay;
    const std::string name = p.buffers[static_cast<size_t>(param)].name;  // a copy: buffers grow below
    auto nest = [&](int buf, ExprP body) {
      ir::Stmt s = ir::elementwise(p, buf, fmt::format("{} update of {}", kind, name));
      s.only().body = std::move(body);
      s.line = line;
      s.update_of = static_cast<int>(k);
      out.push_back(std::move(s));
    };
    ir::Stmt shape = ir::elementwise(p, param, "");
    auto P = [&] { return ir::load_all(shape, param); };
    ExprP grad = ir::load_all(shape, g);
    if (clip) grad = mul(grad, clip);
    if (kind == "sgd") {
      if (wd != 0) grad = add(grad, mul(num(wd), P()));
      ExprP update = grad;
      if (momentum != 0) {
        int buf = state_buffer(p, param, "momentum_buffer");
        ExprP B = ir::load_all(shape, buf);
        // PyTorch: the first step sets the buffer to the gradient, undamped.
        nest(buf, ir::select(ir::binary(Op::Eq, ir::scalar("step"), num(1)), grad,
                             add(mul(num(momentum), B), mul(num(1 - dampening), grad))));
        update = nesterov ? add(grad, mul(num(momentum), B)) : B;
      }
      nest(param, sub(P(), mul(LR(), update)));
    } else {  // adam, adamw
      if (kind == "adamw" && wd != 0) nest(param, mul(P(), sub(num(1), mul(LR(), num(wd)))));
      if (kind == "adam" && wd != 0) grad = add(grad, mul(num(wd), P()));
      int m = state_buffer(p, param, "exp_avg"), v = state_buffer(p, param, "exp_avg_sq");
      ExprP M = ir::load_all(shape, m), V = ir::load_all(shape, v);
      nest(m, add(mul(num(beta1), M), mul(num(1 - beta1), grad)));
      nest(v, add(mul(num(beta2), V), mul(num(1 - beta2), mul(grad, grad))));
      ExprP denom = add(div(ir::call("sqrt", {V}), ir::scalar("sqrt_bc2")), num(eps));
      nest(param, sub(P(), mul(div(LR(), ir::scalar("bc1")), div(M, denom))));
    }
  }
  return out;
}

}  // namespace

void add_optimizer(ir::Program& p) {
  const ir::OptimizerConfig& opt = p.opt;
  if (opt.name.empty()) CANNL_BUG("a training program without an optimiser");
  p.lr = opt.args.at("lr");
  p.optimizer = opt.text;
  if (opt.schedule) p.schedule = opt.schedule_text;
  if (opt.schedule) p.optimizer += ", schedule = " + p.schedule;
  if (opt.clip_grad_norm > 0) p.optimizer += fmt::format(", clip_grad_norm = {}", opt.clip_grad_norm);

  TrainingOptions topt;
  topt.schedule = opt.schedule ? &*opt.schedule : nullptr;
  topt.clip_grad_norm = opt.clip_grad_norm;
  // adamw(decay = "matrices"): weight decay only on params with input axes (weights, tables,
  // kernels), nanoGPT's and llm.c's rule in cannl's axis kinds; a bias does not decay.
  if (auto d = opt.strings.find("decay"); d != opt.strings.end() && d->second == "matrices")
    for (int b : p.params)
      if (!p.buffers[static_cast<size_t>(b)].matrix) topt.no_decay.insert(b);
  ir::Routine& train = *p.routine(ir::RoutineKind::TrainStep);
  // The halves of a data-parallel step: train_grads, the forward and backward so far;
  // train_update, the update nests and their scalars.
  ir::Routine grads = train;
  grads.kind = ir::RoutineKind::TrainGrads;
  ir::Routine update{ir::RoutineKind::TrainUpdate};
  update.stmts = update_nests(p, train, opt, topt, opt.line);
  update.scalars = train.scalars;
  update.lr_scalar = train.lr_scalar;
  for (ir::Stmt s : update.stmts) {  // train_step fuses the updates of every param
    s.update_of = -1;
    train.stmts.push_back(std::move(s));
  }
  p.routines.push_back(std::move(grads));
  p.routines.push_back(std::move(update));

  // init zeroes the optimiser state, each param's apart (a ZeRO-1 rank holds some params' only).
  ir::Routine& init = *p.routine(ir::RoutineKind::Init);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role == ir::Role::OptState) {
      ir::Stmt s = ir::elementwise(p, static_cast<int>(b), "zero " + p.buffers[b].name);
      s.update_of = static_cast<int>(std::find(p.params.begin(), p.params.end(), p.buffers[b].state_of) - p.params.begin());
      init.stmts.push_back(std::move(s));
    }
}

}  // namespace cannl
