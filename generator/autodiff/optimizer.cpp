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

// A stacked param's optimiser state (lower/roll.h): one buffer [instances, kinds, dims...] so
// that each instance's state is contiguous (ZeRO-1 shards by instance), each instance's state
// of each kind a view named as a param's own (`w_qkv_3_exp_avg`, saved as w_qkv_3.exp_avg).
int stacked_state(ir::Program& p, int stack, const std::vector<int>& views, const std::vector<std::string>& kinds) {
  ir::Buffer s = p.buffers[static_cast<size_t>(stack)];
  const std::string sname = s.name;
  const long slice = s.elements() / s.stack;
  s.name = sname + "_state";
  for (int i = 2; p.find(s.name) >= 0; ++i) s.name = fmt::format("{}_state{}", sname, i);
  s.dims.insert(s.dims.begin() + 1, ir::Dim{static_cast<long>(kinds.size()), false});
  s.state_name.clear();
  s.role = ir::Role::OptState;
  s.state_of = stack;
  s.tensor = -1;
  s.init.reset();
  s.matrix = false;
  std::string list;
  for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
  s.shape = fmt::format("optimiser state of {}: [instance, {{{}}}, ...]", sname, list);
  p.buffers.push_back(std::move(s));
  const int si = static_cast<int>(p.buffers.size()) - 1;
  for (size_t l = 0; l < views.size(); ++l)
    for (size_t k = 0; k < kinds.size(); ++k) {
      const int v = state_buffer(p, views[l], kinds[k]);
      p.buffers[static_cast<size_t>(v)].view_of = si;
      p.buffers[static_cast<size_t>(v)].view_offset = static_cast<long>(l * kinds.size() + k) * slice;
    }
  return si;
}

// The params whose updates are one nest: a stacked param whose instances all have gradients
// (autodiff's stack_gradients), listed consecutively in Program::params in instance order.
// Returns the instances' views (p.params[k] the first) or {} for a param of its own.
std::vector<int> stacked_run(const ir::Program& p, size_t k) {
  const int v = p.params[k];
  const int s = p.buffers[static_cast<size_t>(v)].view_of;
  if (s < 0 || p.grad(s) < 0) return {};
  const long count = p.buffers[static_cast<size_t>(s)].stack, slice = p.buffers[static_cast<size_t>(v)].elements();
  std::vector<int> views;
  for (long l = 0; l < count; ++l) {
    const size_t at = k + static_cast<size_t>(l);
    if (at >= p.params.size() || p.buffers[static_cast<size_t>(p.params[at])].view_of != s ||
        p.buffers[static_cast<size_t>(p.params[at])].view_offset != l * slice)
      CANNL_BUG("a stacked param's instances are not consecutive params in instance order");
    views.push_back(p.params[at]);
  }
  return views;
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
    for (size_t k = 0; k < p.params.size(); ++k) {
      int g = p.grad(p.params[k]);
      if (g < 0) continue;
      if (const std::vector<int> run = stacked_run(p, k); !run.empty()) {  // one nest over the stacked gradient
        g = p.grad(p.buffers[static_cast<size_t>(p.params[k])].view_of);
        k += run.size() - 1;
      }
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
    const int first = p.params[k];
    if (p.grad(first) < 0) continue;  // not used by the loss: no gradient, no update (as PyTorch)
    // A stacked param's instances (lower/roll.h) are updated by one nest over the stacked
    // buffers, its state [instance, kind, ...]: the same formulas, each instance's elements.
    const std::vector<int> run = stacked_run(p, k);
    const bool stacked = !run.empty();
    const int param = stacked ? p.buffers[static_cast<size_t>(first)].view_of : first;
    const int g = p.grad(param);
    const double wd = options.no_decay.count(first) ? 0.0 : weight_decay;
    const std::string name = p.buffers[static_cast<size_t>(param)].name;  // a copy: buffers grow below
    std::vector<std::string> kinds;
    if (kind == "sgd" && momentum != 0) kinds = {"momentum_buffer"};
    if (kind == "adam" || kind == "adamw") kinds = {"exp_avg", "exp_avg_sq"};
    const int stack_state = stacked && !kinds.empty() ? stacked_state(p, param, run, kinds) : -1;
    ir::Stmt shape = ir::elementwise(p, param, "");
    // The state of kind j at the nest's point: its own buffer, or the stacked state's [l, j, ...].
    std::vector<ir::Access> state;
    for (size_t j = 0; j < kinds.size(); ++j) {
      if (!stacked) {
        state.push_back(shape.only().out);
        state.back().buf = state_buffer(p, param, kinds[j]);
        continue;
      }
      ir::Access a = shape.only().out;
      a.buf = stack_state;
      a.index.insert(a.index.begin() + 1, ir::Affine::constant(static_cast<long>(j)));
      state.push_back(a);
    }
    ir::Stmt update;  // a stacked param's: one nest of every assignment (its own: one nest each)
    auto nest = [&](const ir::Access& to, ExprP body) {
      ir::Stmt s = ir::elementwise(p, param, stacked ? fmt::format("{} update of {} ({} instances)", kind, name, run.size())
                                                     : fmt::format("{} update of {}", kind, name));
      s.only() = {to, ir::Accum::Set, std::move(body)};
      s.line = line;
      s.update_of = static_cast<int>(k);
      s.update_count = stacked ? static_cast<int>(run.size()) : 1;
      if (!stacked) out.push_back(std::move(s));
      else if (update.assigns.empty()) update = std::move(s);
      else update.assigns.push_back(std::move(s.only()));
    };
    const ir::Access P_at = shape.only().out;
    auto P = [&] { return ir::load(P_at); };
    ExprP grad = ir::load_all(shape, g);
    if (clip) grad = mul(grad, clip);
    if (kind == "sgd") {
      if (wd != 0) grad = add(grad, mul(num(wd), P()));
      ExprP update_value = grad;
      if (momentum != 0) {
        ExprP B = ir::load(state[0]);
        // PyTorch: the first step sets the buffer to the gradient, undamped.
        nest(state[0], ir::select(ir::binary(Op::Eq, ir::scalar("step"), num(1)), grad,
                                  add(mul(num(momentum), B), mul(num(1 - dampening), grad))));
        update_value = nesterov ? add(grad, mul(num(momentum), B)) : B;
      }
      nest(P_at, sub(P(), mul(LR(), update_value)));
    } else {  // adam, adamw
      if (kind == "adamw" && wd != 0) nest(P_at, mul(P(), sub(num(1), mul(LR(), num(wd)))));
      if (kind == "adam" && wd != 0) grad = add(grad, mul(num(wd), P()));
      ExprP M = ir::load(state[0]), V = ir::load(state[1]);
      nest(state[0], add(mul(num(beta1), M), mul(num(1 - beta1), grad)));
      nest(state[1], add(mul(num(beta2), V), mul(num(1 - beta2), mul(grad, grad))));
      ExprP denom = add(div(ir::call("sqrt", {V}), ir::scalar("sqrt_bc2")), num(eps));
      nest(P_at, sub(P(), mul(div(LR(), ir::scalar("bc1")), div(M, denom))));
    }
    if (stacked) {
      out.push_back(std::move(update));
      k += run.size() - 1;
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
    s.update_count = 1;
    train.stmts.push_back(std::move(s));
  }
  p.routines.push_back(std::move(grads));
  p.routines.push_back(std::move(update));

  // init zeroes the optimiser state, each param's apart (a ZeRO-1 rank holds some params' only);
  // a stacked param's in one nest over its instances (their views: nothing of their own).
  ir::Routine& init = *p.routine(ir::RoutineKind::Init);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role == ir::Role::OptState && p.buffers[b].view_of < 0) {
      ir::Stmt s = ir::elementwise(p, static_cast<int>(b), "zero " + p.buffers[b].name);
      int of = p.buffers[b].state_of;
      if (p.buffers[b].stack > 0) {  // the stacked param's first instance, and their count
        s.update_count = static_cast<int>(p.buffers[b].stack);
        for (int v : p.params)
          if (p.buffers[static_cast<size_t>(v)].view_of == of && p.buffers[static_cast<size_t>(v)].view_offset == 0) of = v;
      }
      s.update_of = static_cast<int>(std::find(p.params.begin(), p.params.end(), of) - p.params.begin());
      init.stmts.push_back(std::move(s));
    }
}

}  // namespace cannl
