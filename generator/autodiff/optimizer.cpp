// optimizer.cpp — optimiser updates as elementwise nests (see optimizer.h).
#include "autodiff/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
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
int stacked_state(ir::Program& p, int stack, const std::vector<int>& views, const std::vector<std::string>& kinds,
                  std::vector<int>* view_states = nullptr) {
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
      if (view_states) view_states->push_back(v);
      p.buffers[static_cast<size_t>(v)].view_of = si;
      p.buffers[static_cast<size_t>(v)].view_offset = static_cast<long>(l * kinds.size() + k) * slice;
    }
  return si;
}

// Buffer b's elements at `index` (one affine per dim of b). When b is an instance's view (a
// stacked param's, gradient's or state's, ir.h Buffer::view_of), the stacked buffer's, its
// leading dims at the view's constant slice: the optimiser's nests come after the block calls,
// which use the stacked buffers, and a routine may not use a view after its stacked buffer
// (the passes compare buffers, not bytes). The same elements, the same values.
ir::Access slice_of(const ir::Program& p, int b, std::vector<ir::Affine> index) {
  const ir::Buffer& v = p.buffers[static_cast<size_t>(b)];
  if (v.view_of < 0) return {b, std::move(index)};
  const std::vector<ir::Dim>& sd = p.buffers[static_cast<size_t>(v.view_of)].dims;
  const long n = v.elements();
  if (n <= 0 || v.view_offset % n != 0 || sd.size() <= v.dims.size() ||
      !std::equal(v.dims.begin(), v.dims.end(), sd.end() - static_cast<long>(v.dims.size())))
    CANNL_BUG(fmt::format("the view {} is not a slice of its stacked buffer", v.name));
  long q = v.view_offset / n;
  for (size_t d = sd.size() - v.dims.size(); d-- > 0;) {
    index.insert(index.begin(), ir::Affine::constant(q % sd[d].size));
    q /= sd[d].size;
  }
  return {v.view_of, std::move(index)};
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
};

// A muon update of one param (or one instance of a stacked param), torch.optim.Muon's steps in
// the param's own type: the momentum buffer, the update (Nesterov's or the buffer), divided by
// its Frobenius norm (at least eps), ns_steps Newton-Schulz iterations on the matrix
// [prod(output axes), prod(input axes)] of the param's storage (its transpose when it has more
// rows than columns: X is always [r, c], r <= c), then decoupled weight decay and the step by
// the adjusted lr. The matrix products are contractions (passes/mark_contractions.cpp): the
// runtime's GEMM on C, cuBLAS on CUDA.
struct MuonArgs {
  double momentum = 0.95, weight_decay = 0.1, eps = 1e-7;
  bool nesterov = true, match_rms_adamw = false;
  int ns_steps = 5;
};

void muon_nests(ir::Program& p, std::vector<ir::Stmt>& out, int param, int grad, int buf, const ExprP& clip,
                const ExprP& lr, const MuonArgs& a, int update_of, int line) {
  const std::string name = p.buffers[static_cast<size_t>(param)].name;  // a copy: buffers grow below
  const ir::Init& init = *p.buffers[static_cast<size_t>(param)].init;
  const long rows = init.fan_out, cols = init.fan_in;
  const bool transposed = rows > cols;
  const long r = std::min(rows, cols), c = std::max(rows, cols);
  auto emit = [&](ir::Stmt s, const std::string& what) {
    s.line = line;
    s.what = fmt::format("muon update of {}: {}", name, what);
    s.update_of = update_of;
    out.push_back(std::move(s));
  };
  auto temp = [&](const std::string& suffix, std::vector<ir::Dim> dims, const std::string& what) {
    const int b = scalar_buffer(p, name + "_" + suffix, what);
    p.buffers[static_cast<size_t>(b)].dims = std::move(dims);
    return b;
  };
  const int x0 =
      temp("ns_x", {{r, false}, {c, false}}, fmt::format("muon's orthogonalised update of {}: [{}, {}]", name, r, c));
  const int x1 = temp("ns_y", {{r, false}, {c, false}}, fmt::format("muon's next Newton-Schulz iterate of {}", name));
  const int gram = temp("ns_gram", {{r, false}, {r, false}}, fmt::format("X X^T of {}: [{}, {}]", name, r, r));
  const int poly = temp("ns_poly", {{r, false}, {r, false}}, fmt::format("b A + c A A of {}", name));
  const int norm = temp("ns_norm", {}, fmt::format("the squared Frobenius norm of {}'s update", name));

  // The param's elements as the matrix [rows, cols]: its first dims (product rows) are the row.
  ir::Stmt shape = ir::elementwise(p, param, "");
  const auto& dims = p.buffers[static_cast<size_t>(param)].dims;
  size_t split = 0;
  for (long prod = 1; split < dims.size() && prod != rows; ++split) prod *= dims[split].size;
  ir::Affine row, col;
  for (size_t d = dims.size(); d-- > 0;) {
    ir::Affine& f = d < split ? row : col;
    const long stride = f.terms.empty() ? 1 : f.terms.back().coef * dims[d + 1].size;
    f.terms.push_back({static_cast<int>(d), stride});
  }
  const std::vector<ir::Affine>& idx = shape.only().out.index;
  const ir::Access P_at = slice_of(p, param, idx), B_at = slice_of(p, buf, idx);
  ir::Access X_at{x0, transposed ? std::vector<ir::Affine>{col, row} : std::vector<ir::Affine>{row, col}};
  ExprP g = ir::load(slice_of(p, grad, idx));
  if (clip) g = mul(g, clip);
  auto at = [&](ir::Access to, ExprP body) {
    ir::Stmt s = shape;
    s.only() = {std::move(to), ir::Accum::Set, std::move(body)};
    return s;
  };
  // buf <- buf + (1 - momentum) (g - buf); the update g + momentum (buf - g), or buf.
  emit(at(B_at, add(ir::load(B_at), mul(num(1 - a.momentum), sub(g, ir::load(B_at))))), "the momentum buffer");
  emit(at(X_at, a.nesterov ? add(g, mul(num(a.momentum), sub(ir::load(B_at), g))) : ir::load(B_at)),
       transposed ? "the update, transposed" : "the update");
  // X / max(||X||_F, eps)
  auto mat = [&](int b, int i, int j) { return ir::Access{b, {ir::Affine::of(i), ir::Affine::of(j)}}; };
  const std::vector<ir::Iter> rc = {{"i", r}, {"j", c}}, rr = {{"i", r}, {"i2", r}};
  emit(ir::nest({}, {norm, {}}, ir::Accum::Set, num(0)), "the squared norm");
  const ExprP x = ir::load(mat(x0, 0, 1));
  emit(ir::nest(rc, {norm, {}}, ir::Accum::Add, mul(x, x)), "the squared norm");
  const ExprP fro = ir::call("sqrt", {ir::load({norm, {}})});
  emit(ir::nest(rc, mat(x0, 0, 1), ir::Accum::Set,
                div(ir::load(mat(x0, 0, 1)), ir::select(ir::binary(Op::Gt, fro, num(a.eps)), fro, num(a.eps)))),
       "divided by its Frobenius norm");
  // Newton-Schulz: A = X X^T; X <- a X + (b A + c A A) X.
  const double ka = 3.4445, kb = -4.7750, kc = 2.0315;
  int cur = x0, nxt = x1;
  for (int step = 1; step <= a.ns_steps; ++step, std::swap(cur, nxt)) {
    const std::string it = fmt::format("Newton-Schulz step {}", step);
    emit(ir::nest(rr, mat(gram, 0, 1), ir::Accum::Set, num(0)), it + ": A = X X^T");
    emit(ir::nest({{"i", r}, {"i2", r}, {"j", c}}, mat(gram, 0, 1), ir::Accum::Add,
                  mul(ir::load(mat(cur, 0, 2)), ir::load(mat(cur, 1, 2)))), it + ": A = X X^T");
    // c A A first, as A A^T (A = X X^T is symmetric; on the C target bit for bit, so A A^T sums
    // the terms of A A in their order): a product of one matrix with itself, which the C target
    // computes by halves (cannl_sgemm_sym).
    emit(ir::nest(rr, mat(poly, 0, 1), ir::Accum::Set, num(0)), it + ": b A + c A A");
    emit(ir::nest({{"i", r}, {"i2", r}, {"k", r}}, mat(poly, 0, 1), ir::Accum::Add,
                  mul(num(kc), mul(ir::load(mat(gram, 0, 2)), ir::load(mat(gram, 1, 2))))), it + ": b A + c A A");
    emit(ir::nest(rr, mat(poly, 0, 1), ir::Accum::Add, mul(num(kb), ir::load(mat(gram, 0, 1)))), it + ": b A + c A A");
    emit(ir::nest(rc, mat(nxt, 0, 1), ir::Accum::Set, mul(num(ka), ir::load(mat(cur, 0, 1)))),
         it + ": a X + (b A + c A A) X");
    emit(ir::nest({{"i", r}, {"j", c}, {"k", r}}, mat(nxt, 0, 1), ir::Accum::Add,
                  mul(ir::load(mat(poly, 0, 2)), ir::load(mat(cur, 2, 1)))), it + ": a X + (b A + c A A) X");
  }
  X_at.buf = cur;
  // p <- p (1 - lr weight_decay) - lr' X, lr' = lr max(1, rows/cols)^0.5 or lr 0.2 sqrt(max(rows, cols)).
  const double ratio = a.match_rms_adamw
                           ? 0.2 * std::sqrt(static_cast<double>(c))
                           : std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
  ExprP decayed = ir::load(P_at);
  if (a.weight_decay != 0) decayed = mul(decayed, sub(num(1), mul(lr, num(a.weight_decay))));
  emit(at(P_at, sub(decayed, mul(mul(lr, num(ratio)), ir::load(X_at)))), "the step");
}

std::vector<ir::Stmt> update_nests(ir::Program& p, ir::Routine& train_step, const ir::OptimizerConfig& opt,
                                   const TrainingOptions& options, int line) {
  // Adam's bias corrections, per (beta1, beta2) of the groups (the first pair's bc1, sqrt_bc2).
  const ExprP step = ir::scalar("step");
  std::map<std::pair<double, double>, std::string> corrections;  // betas -> the suffix of bc1, sqrt_bc2
  for (const ir::OptimizerGroup& grp : opt.groups) {
    if (grp.name != "adam" && grp.name != "adamw") continue;
    const std::pair<double, double> betas{grp.args.at("beta1"), grp.args.at("beta2")};
    if (corrections.count(betas)) continue;
    const std::string suffix = corrections.empty() ? "" : fmt::format("_{}", corrections.size() + 1);
    corrections[betas] = suffix;
    train_step.scalars.push_back({"bc1" + suffix, sub(num(1), ir::call("pow", {num(betas.first), step}))});
    train_step.scalars.push_back(
        {"sqrt_bc2" + suffix, ir::call("sqrt", {sub(num(1), ir::call("pow", {num(betas.second), step}))})});
  }

  // The learning rate of this step: the spec's schedule unless switched off at run time.
  std::string lr_name = "lr";
  if (options.schedule) {
    lr_name = "lr_t";
    const ExprP lr = ir::scalar("lr");
    train_step.scalars.push_back({lr_name, ir::select(ir::scalar("schedule"), schedule_lr(*options.schedule, lr), lr)});
  }
  train_step.lr_scalar = lr_name;
  // Each group's lr: the first group's is `lr` (<model>_set_lr), every other group's moves with
  // it (lr * its lr / the first's) and the schedule multiplies each alike.
  const double lr0 = opt.groups.front().args.at("lr");
  std::vector<std::string> group_lr;
  for (size_t g = 0; g < opt.groups.size(); ++g) {
    const double lr_g = opt.groups[g].args.at("lr");
    if (g == 0 || lr_g == lr0) {
      group_lr.push_back(lr_name);
      continue;
    }
    group_lr.push_back(fmt::format("lr_group{}", g + 1));
    ExprP value = lr0 > 0 ? mul(ir::scalar(lr_name), num(lr_g / lr0)) : num(lr_g);
    if (lr0 == 0 && options.schedule)
      value = ir::select(ir::scalar("schedule"), schedule_lr(*options.schedule, num(lr_g)), num(lr_g));
    train_step.scalars.push_back({group_lr.back(), value});
  }
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
    // Muon updates each instance's matrix apart, so its params' norms are summed instance by
    // instance too (each instance's slice of the stacked gradient: slice_of).
    auto muon = [&](int param) {
      for (const ir::OptimizerGroup& grp : opt.groups)
        if (grp.params.count(param)) return grp.name == "muon";
      return false;
    };
    for (size_t k = 0; k < p.params.size(); ++k) {
      int g = p.grad(p.params[k]);
      if (g < 0) continue;
      if (!muon(p.params[k]))
        if (const std::vector<int> run = stacked_run(p, k); !run.empty()) {  // one nest over the stacked gradient
          g = p.grad(p.buffers[static_cast<size_t>(p.params[k])].view_of);
          k += run.size() - 1;
        }
      ir::Stmt s = ir::elementwise(p, g, zero.what);
      ExprP gv = ir::load(slice_of(p, g, s.only().out.index));
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
    size_t gi = 0;
    while (gi < opt.groups.size() && !opt.groups[gi].params.count(first)) ++gi;
    if (gi == opt.groups.size())
      CANNL_BUG(fmt::format("the param {} is in no optimiser group", p.buffers[static_cast<size_t>(first)].name));
    const ir::OptimizerGroup& grp = opt.groups[gi];
    auto arg = [&](const char* key, double dflt) {
      auto it = grp.args.find(key);
      return it == grp.args.end() ? dflt : it->second;
    };
    const std::string& kind = grp.name;
    auto LR = [&] { return ir::scalar(group_lr[gi]); };
    // A stacked param's instances (lower/roll.h) are updated by one nest over the stacked
    // buffers, its state [instance, kind, ...]: the same formulas, each instance's elements.
    const std::vector<int> run = stacked_run(p, k);
    const bool stacked = !run.empty();
    const int param = stacked ? p.buffers[static_cast<size_t>(first)].view_of : first;
    const int g = p.grad(param);
    if (kind == "muon") {  // per instance matrix; a stacked param's state stacked all the same
      MuonArgs m;
      m.momentum = arg("momentum", 0.95);
      m.weight_decay = arg("weight_decay", 0.1);
      m.eps = arg("eps", 1e-7);
      m.nesterov = arg("nesterov", 1) != 0;
      m.ns_steps = static_cast<int>(arg("ns_steps", 5));
      m.match_rms_adamw = grp.strings.count("adjust_lr") && grp.strings.at("adjust_lr") == "match_rms_adamw";
      std::vector<int> states;
      if (stacked) stacked_state(p, param, run, {"momentum_buffer"}, &states);
      else states.push_back(state_buffer(p, param, "momentum_buffer"));
      const std::vector<int> views = stacked ? run : std::vector<int>{first};
      for (size_t l = 0; l < views.size(); ++l)
        muon_nests(p, out, views[l], p.grad(views[l]), states[l], clip, LR(), m, static_cast<int>(k + l), line);
      k += views.size() - 1;
      continue;
    }
    // adamw(decay = "matrices"): weight decay only on params with input axes (weights, tables,
    // kernels), nanoGPT's and llm.c's rule in cannl's axis kinds; a bias does not decay.
    const bool no_decay = grp.strings.count("decay") && grp.strings.at("decay") == "matrices" &&
                          !p.buffers[static_cast<size_t>(first)].matrix;
    const double weight_decay = arg("weight_decay", kind == "adamw" ? 0.01 : 0.0);
    const double momentum = arg("momentum", 0), dampening = arg("dampening", 0);
    const bool nesterov = arg("nesterov", 0) != 0;
    const double beta1 = arg("beta1", 0.9), beta2 = arg("beta2", 0.999), eps = arg("eps", 1e-8);
    const std::string bc = corrections.count({beta1, beta2}) ? corrections.at({beta1, beta2}) : "";
    const double wd = no_decay ? 0.0 : weight_decay;
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
      ExprP denom = add(div(ir::call("sqrt", {V}), ir::scalar("sqrt_bc2" + bc)), num(eps));
      nest(P_at, sub(P(), mul(div(LR(), ir::scalar("bc1" + bc)), div(M, denom))));
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
  if (opt.groups.empty()) CANNL_BUG("a training program without an optimiser");
  p.lr = opt.groups.front().args.at("lr");
  p.optimizer.clear();
  for (const ir::OptimizerGroup& g : opt.groups)
    p.optimizer += (p.optimizer.empty() ? "" : ", ") + g.text + (g.on.empty() ? "" : " on " + g.on);
  if (opt.schedule) p.schedule = opt.schedule_text;
  if (opt.schedule) p.optimizer += ", schedule = " + p.schedule;
  if (opt.clip_grad_norm > 0) p.optimizer += fmt::format(", clip_grad_norm = {}", opt.clip_grad_norm);

  TrainingOptions topt;
  topt.schedule = opt.schedule ? &*opt.schedule : nullptr;
  topt.clip_grad_norm = opt.clip_grad_norm;
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
