#include "spec/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cannl {

const char* tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::Input: return "input";
    case TensorKind::Param: return "param";
    case TensorKind::Computed: return "computed";
  }
  return "?";
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  if (name.size() <= 2) return "";
  size_t best_d = name.size() <= 4 ? 1 : 2;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d <= best_d && (best.empty() || d < best_d)) {
      best = c;
      best_d = d;
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

std::string signature_text(const std::string& name, const std::vector<ArgSig>& sig) {
  std::string s = name + "(";
  for (size_t i = 0; i < sig.size(); ++i) {
    if (i) s += ", ";
    s += sig[i].name;
    if (!sig[i].required) {
      if (sig[i].type == ArgType::Tensor || sig[i].type == ArgType::Spec) s += "?";
      else s += fmt::format(" = {}", sig[i].default_value);
    }
  }
  return s + ")";
}

class Builder {
public:
  Builder(const Spec& s, DiagEngine& d) : spec_(s), diags_(d), syntax_errors_(d.has_errors()) {}

  std::string_view file_text_slice(const Expr& e) const { return diags_.file().slice(e.range); }

  Model run() {
    if (spec_.stmts.empty()) {
      if (!diags_.has_errors())
        diags_.error({0, 0}, "empty spec: expected 'model NAME' as the first statement");
      return std::move(m_);
    }
    for (size_t i = 0; i < spec_.stmts.size(); ++i) {
      const Stmt& s = spec_.stmts[i];
      if (i == 0 && s.kind != StmtKind::Model && !syntax_errors_) {
        auto it = std::find_if(spec_.stmts.begin(), spec_.stmts.end(),
                               [](const Stmt& x) { return x.kind == StmtKind::Model; });
        if (it != spec_.stmts.end())
          diags_.error(it->range, "'model NAME' must be the first statement of a spec");
        else
          diags_.error(s.range, "a spec must start with 'model NAME' (the name of the generated "
                                "files and C symbols)");
      }
      statement(s);
    }
    finish();
    return std::move(m_);
  }

private:
  void redefined(const NameRef& n, SourceRange previous, const char* what) {
    auto& d = diags_.error(n.range, fmt::format("'{}' is already defined (as {})", n.name, what));
    DiagEngine::note(d, previous, fmt::format("'{}' was first defined here", n.name));
  }

  bool check_new_name(const NameRef& n) {
    if (auto it = m_.index.find(n.name); it != m_.index.end()) {
      const Tensor& t = m_.tensors[it->second];
      redefined(n, t.decl, t.kind == TensorKind::Param ? "a param"
                           : t.kind == TensorKind::Input ? "an input" : "a tensor");
      return false;
    }
    if (auto it = dim_decl_.find(n.name); it != dim_decl_.end()) {
      redefined(n, it->second, "a dim");
      return false;
    }
    return true;
  }

  void check_shape(const ShapeSpec& sh, bool allow_batch, const char* what) {
    if (!allow_batch && !sh.parts[0].empty())
      diags_.error(sh.parts[0].front().range,
                   fmt::format("{} have no batch axes{}", what,
                               std::string(what) == "inputs"
                                   ? ": the runner adds the batch axis; write only the "
                                     "per-example shape, e.g. [784]"
                                   : ""));
    for (const auto& part : sh.parts)
      for (const AxisSpec& a : part)
        if (a.kind == AxisSpec::DimName && !m_.dims.count(a.name)) {
          std::vector<std::string> names;
          for (auto& [k, v] : m_.dims) names.push_back(k);
          diags_.error(a.range, fmt::format("unknown dim '{}' in shape (define it with 'dim {} = "
                                            "SIZE' before use){}",
                                            a.name, a.name, suggestion(a.name, names)));
        }
  }

  int add_tensor(const NameRef& n, TensorKind k, const Stmt& s) {
    Tensor t;
    t.name = n.name;
    t.kind = k;
    t.decl = n.range;
    t.stmt = &s;
    t.shape = s.shape ? &*s.shape : nullptr;
    t.expr = (k == TensorKind::Computed) ? s.expr.get() : nullptr;
    t.is_metric = s.kind == StmtKind::Metric;
    int idx = static_cast<int>(m_.tensors.size());
    m_.tensors.push_back(std::move(t));
    m_.index[n.name] = idx;
    return idx;
  }

  void statement(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::Model:
        if (!m_.name.empty()) {
          auto& d = diags_.error(s.range, "a spec has exactly one 'model' statement");
          DiagEngine::note(d, m_.name_range, "the model was already named here");
          return;
        }
        m_.name = s.names[0].name;
        m_.name_range = s.names[0].range;
        return;
      case StmtKind::Dim:
        if (s.names[0].name == "_") {
          diags_.error(s.names[0].range, "'_' cannot name a dim: in a shape it means an inferred axis");
          return;
        }
        if (!check_new_name(s.names[0])) return;
        m_.dims[s.names[0].name] = s.dim_value;
        dim_decl_[s.names[0].name] = s.names[0].range;
        return;
      case StmtKind::Input:
        check_shape(*s.shape, false, "inputs");
        if (check_new_name(s.names[0])) add_tensor(s.names[0], TensorKind::Input, s);
        return;
      case StmtKind::Param: {
        if (s.shape) check_shape(*s.shape, false, "parameters");
        std::optional<CallConfig> init;
        if (s.expr) init = initializer(*s.expr);
        for (const NameRef& n : s.names) {
          if (!check_new_name(n)) continue;
          int idx = add_tensor(n, TensorKind::Param, s);
          if (init) m_.inits[idx] = *init;
        }
        return;
      }
      case StmtKind::Define:
      case StmtKind::Metric:
        expr(*s.expr, s.kind == StmtKind::Metric);
        if (check_new_name(s.names[0])) {
          int idx = add_tensor(s.names[0], TensorKind::Computed, s);
          if (s.kind == StmtKind::Metric) m_.metrics.push_back(idx);
        }
        return;
      case StmtKind::Output:
        pending_outputs_.push_back(&s);
        return;
      case StmtKind::Minimize:
        if (minimize_) {
          auto& d = diags_.error(s.range, "a spec has at most one 'minimize' statement");
          DiagEngine::note(d, minimize_->range, "the objective was already given here");
          return;
        }
        minimize_ = &s;
        m_.optimizer = optimizer(*s.optimizer);
        if (m_.optimizer) check_optimizer(*m_.optimizer);
        training_options(s);
        return;
    }
  }

  void finish() {
    if (m_.name.empty() && !spec_.stmts.empty() && !diags_.has_errors() && !syntax_errors_)
      diags_.error(spec_.stmts[0].range, "a spec must start with 'model NAME'");
    for (const Stmt* s : pending_outputs_)
      for (const NameRef& n : s->names) {
        int idx = lookup_tensor(n, "output");
        if (idx < 0) continue;
        if (std::find(m_.outputs.begin(), m_.outputs.end(), idx) != m_.outputs.end())
          diags_.error(n.range, fmt::format("'{}' is already an output", n.name));
        else
          m_.outputs.push_back(idx);
      }
    if (minimize_) {
      int idx = lookup_tensor(minimize_->names[0], "minimize");
      m_.loss_range = minimize_->names[0].range;
      if (idx >= 0 && m_.tensors[idx].kind != TensorKind::Computed)
        diags_.error(minimize_->names[0].range,
                     fmt::format("'{}' is {}; minimize needs a computed scalar loss",
                                 minimize_->names[0].name,
                                 m_.tensors[idx].kind == TensorKind::Param ? "a param" : "an input"));
      else if (idx >= 0 && m_.tensors[idx].is_metric)
        diags_.error(minimize_->names[0].range,
                     fmt::format("'{}' is a metric, which is not differentiated; minimize a "
                                 "tensor defined with NAME = EXPR", minimize_->names[0].name));
      else
        m_.loss = idx;
    }
  }

  std::vector<std::string> all_names() const {
    std::vector<std::string> v;
    for (const Tensor& t : m_.tensors) v.push_back(t.name);
    for (auto& [k, _] : m_.dims) v.push_back(k);
    return v;
  }

  // A name used where a tensor must already exist (output, minimize: any position in the file).
  int lookup_tensor(const NameRef& n, const char* where) {
    auto it = m_.index.find(n.name);
    if (it != m_.index.end()) return it->second;
    if (spec_.broken_names.count(n.name)) return -1;
    if (m_.dims.count(n.name))
      diags_.error(n.range, fmt::format("'{}' is a dim, not a tensor ({} needs a tensor)", n.name, where));
    else
      diags_.error(n.range, fmt::format("unknown tensor '{}' in '{}'{}", n.name, where,
                                        suggestion(n.name, all_names())));
    return -1;
  }

  SourceRange defined_later(const std::string& name) const {
    for (const Stmt& s : spec_.stmts)
      if (s.kind == StmtKind::Define || s.kind == StmtKind::Metric || s.kind == StmtKind::Param ||
          s.kind == StmtKind::Input)
        for (const NameRef& n : s.names)
          if (n.name == name) return n.range;
    return {0, 0};
  }

  void expr(const Expr& e, bool in_metric) {
    switch (e.kind) {
      case ExprKind::Number:
        return;
      case ExprKind::Name: {
        if (m_.index.count(e.name) || m_.dims.count(e.name) || spec_.broken_names.count(e.name)) return;
        if (find_op(e.name)) {
          diags_.error(e.range, fmt::format("'{}' is a function; call it, e.g. {}(x)", e.name, e.name));
          return;
        }
        SourceRange later = defined_later(e.name);
        if (later.end > 0) {
          auto& d = diags_.error(e.range, fmt::format("'{}' is used before its definition", e.name));
          DiagEngine::note(d, later, fmt::format("'{}' is defined here", e.name));
          return;
        }
        diags_.error(e.range, fmt::format("unknown tensor '{}'{}", e.name,
                                          suggestion(e.name, all_names())));
        return;
      }
      case ExprKind::String:
        diags_.error(e.range, "a string is only allowed as the spec argument of einsum, sum, mean "
                              "or max");
        return;
      case ExprKind::Pow: {
        expr(*e.operands[0], in_metric);
        const Expr& ex = *e.operands[1];
        if (!constant_value(ex, m_.dims))
          diags_.error(ex.range, fmt::format("the exponent of '**' must be a number, not '{}' (for a "
                                             "tensor exponent write exp(b *. log(a)))",
                                             std::string(file_text_slice(ex))));
        return;
      }
      case ExprKind::Call:
        call(e, in_metric);
        return;
      default:
        for (const auto& o : e.operands) expr(*o, in_metric);
        return;
    }
  }

  void call(const Expr& e, bool in_metric) {
    const OpInfo* op = find_op(e.name);
    if (!op) {
      if (find_initializer(e.name))
        diags_.error(e.op_range, fmt::format("'{}' is an initialiser; it is only allowed after "
                                             "'param NAME ='", e.name));
      else if (find_optimizer(e.name))
        diags_.error(e.op_range, fmt::format("'{}' is an optimiser; it is only allowed after "
                                             "'minimize LOSS with'", e.name));
      else {
        std::vector<std::string> names;
        for (const OpInfo& o : all_ops()) names.push_back(o.name);
        diags_.error(e.op_range, fmt::format("unknown function '{}'{}", e.name, suggestion(e.name, names)));
      }
      for (const Arg& a : e.args)
        if (a.value->kind != ExprKind::String) expr(*a.value, in_metric);
      return;
    }
    if (op->metric_only && !in_metric)
      diags_.error(e.op_range, fmt::format("'{}' is not differentiable and is only allowed in a "
                                           "metric (metric NAME = {}(...))", e.name, e.name));
    BoundCall bc;
    for (const Arg& a : e.args)
      if (a.value->kind != ExprKind::String && a.value->kind != ExprKind::Number) expr(*a.value, in_metric);
    if (bind_args(e, op->args, m_, diags_, bc)) m_.calls[&e] = bc;
  }

  std::optional<CallConfig> config(const Expr& e, const CallSig* sig, const char* what,
                                   const std::vector<std::string>& names) {
    if (e.kind != ExprKind::Call && e.kind != ExprKind::Name) {
      diags_.error(e.range, fmt::format("expected {} such as {}", what, known_names(names)));
      return std::nullopt;
    }
    if (!sig) {
      diags_.error(e.kind == ExprKind::Call ? e.op_range : e.range,
                   fmt::format("unknown {} '{}' (known: {}){}", what, e.name, known_names(names),
                               suggestion(e.name, names)));
      return std::nullopt;
    }
    CallConfig c;
    c.name = e.name;
    c.range = e.range;
    BoundCall bc;
    if (e.kind == ExprKind::Call) {
      if (!bind_args(e, sig->args, m_, diags_, bc)) return std::nullopt;
    } else {
      for (const ArgSig& a : sig->args) {
        if (a.required) {
          diags_.error(e.range, fmt::format("{} '{}' needs its argument '{}': write {}", what,
                                            e.name, a.name, signature_text(e.name, sig->args)));
          return std::nullopt;
        }
        bc.values[a.name] = a.default_value;
      }
    }
    c.args = bc.values;
    return c;
  }

  std::optional<CallConfig> initializer(const Expr& e) {
    return config(e, find_initializer(e.name), "initialiser", initializer_names());
  }
  std::optional<CallConfig> optimizer(const Expr& e) {
    return config(e, find_optimizer(e.name), "optimiser", optimizer_names());
  }

  // `, schedule = SCHEDULE(ARGS)` and `, clip_grad_norm = NUMBER` after the optimiser.
  void training_options(const Stmt& s) {
    static const std::vector<std::string> known = {"schedule", "clip_grad_norm"};
    std::map<std::string, SourceRange> seen;
    for (const auto& [opt, value] : s.options) {
      if (auto it = seen.find(opt.name); it != seen.end()) {
        auto& d = diags_.error(opt.range, fmt::format("'{}' is given twice", opt.name));
        DiagEngine::note(d, it->second, "first given here");
        continue;
      }
      seen[opt.name] = opt.range;
      if (opt.name == "schedule") {
        m_.schedule = config(*value, find_schedule(value->name), "schedule", schedule_names());
        if (m_.schedule) check_schedule(*m_.schedule);
      } else if (opt.name == "clip_grad_norm") {
        auto v = constant_value(*value, m_.dims);
        if (!v || !(*v > 0))
          diags_.error(value->range, "clip_grad_norm must be a positive number (the largest global L2 "
                                     "norm of the gradients, as torch.nn.utils.clip_grad_norm_)");
        else
          m_.clip_grad_norm = *v;
      } else {
        diags_.error(opt.range, fmt::format("unknown training option '{}' (known: {}){}", opt.name,
                                            known_names(known), suggestion(opt.name, known)));
      }
    }
  }
  // The ranges PyTorch's optimisers accept (they raise "Invalid learning rate" and the like).
  void check_optimizer(const CallConfig& c) {
    auto at_least_zero = [&](const char* k) {
      if (c.args.count(k) && !(c.args.at(k) >= 0))
        diags_.error(c.range, fmt::format("{}'s '{}' must be >= 0, not {}", c.name, k, c.args.at(k)));
    };
    for (const char* k : {"lr", "momentum", "weight_decay", "eps"}) at_least_zero(k);
    for (const char* k : {"beta1", "beta2"})
      if (c.args.count(k) && !(c.args.at(k) >= 0 && c.args.at(k) < 1))
        diags_.error(c.range, fmt::format("{}'s '{}' must be in [0, 1), not {}", c.name, k, c.args.at(k)));
    if (c.name == "sgd" && c.args.at("nesterov") != 0 &&
        !(c.args.at("momentum") > 0 && c.args.at("dampening") == 0))
      diags_.error(c.range, "sgd with nesterov needs a momentum > 0 and dampening = 0 (as torch.optim.SGD)");
  }

  void check_schedule(const CallConfig& c) {
    auto whole = [&](const char* k, double min) {
      double v = c.args.at(k);
      if (v != std::floor(v) || v < min) {
        diags_.error(c.range, fmt::format("{}'s '{}' must be a whole number of steps >= {}, not {}", c.name,
                                          k, static_cast<long>(min), v));
        return false;
      }
      return true;
    };
    whole("warmup", 0);
    if (c.name == "step") {
      whole("every", 1);
      if (!(c.args.at("gamma") > 0)) diags_.error(c.range, "step's 'gamma' must be positive");
    }
    if (c.name == "cosine" && whole("steps", 1) && c.args.at("steps") <= c.args.at("warmup"))
      diags_.error(c.range, fmt::format("cosine's 'steps' ({}) must be larger than its 'warmup' ({}): "
                                        "steps counts the whole run, warm-up included",
                                        c.args.at("steps"), c.args.at("warmup")));
    if (c.name == "cosine" && c.args.at("min_lr") < 0) diags_.error(c.range, "cosine's 'min_lr' must be >= 0");
  }

  const Spec& spec_;
  DiagEngine& diags_;
  Model m_;
  std::map<std::string, SourceRange> dim_decl_;
  std::vector<const Stmt*> pending_outputs_;
  const Stmt* minimize_ = nullptr;
  bool syntax_errors_;  // the parser already reported errors: statements may be missing
};

}  // namespace

bool bind_args(const Expr& call, const std::vector<ArgSig>& sig, const Model& m,
               DiagEngine& diags, BoundCall& out) {
  out.call = &call;
  std::vector<const Expr*> slot(sig.size(), nullptr);
  bool ok = true;
  size_t positional = 0;
  for (const Arg& a : call.args) {
    size_t i;
    if (a.keyword.empty()) {
      i = positional++;
      if (i >= sig.size()) {
        diags.error(a.value->range, fmt::format("too many arguments to '{}' (expected {})",
                                                call.name, signature_text(call.name, sig)));
        return false;
      }
    } else {
      auto it = std::find_if(sig.begin(), sig.end(), [&](const ArgSig& s) { return s.name == a.keyword; });
      if (it == sig.end()) {
        std::vector<std::string> names;
        for (const ArgSig& s : sig) names.push_back(s.name);
        diags.error(a.keyword_range, fmt::format("'{}' has no argument '{}'{} (expected {})",
                                                 call.name, a.keyword, suggestion(a.keyword, names),
                                                 signature_text(call.name, sig)));
        ok = false;
        continue;
      }
      i = static_cast<size_t>(it - sig.begin());
      if (slot[i]) {
        diags.error(a.keyword_range, fmt::format("argument '{}' of '{}' is given twice", a.keyword,
                                                 call.name));
        ok = false;
        continue;
      }
    }
    slot[i] = a.value.get();
  }
  for (size_t i = 0; i < sig.size(); ++i) {
    const ArgSig& s = sig[i];
    const Expr* v = slot[i];
    if (!v) {
      if (s.required) {
        diags.error(call.op_range, fmt::format("missing argument '{}' in the call of '{}' (expected {})",
                                               s.name, call.name, signature_text(call.name, sig)));
        ok = false;
      } else if (s.type == ArgType::Int || s.type == ArgType::Number) {
        out.values[s.name] = s.default_value;
      }
      continue;
    }
    switch (s.type) {
      case ArgType::Tensor:
        if (v->kind == ExprKind::String) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be a tensor, not a string",
                                            s.name, call.name));
          ok = false;
        } else {
          out.tensors.push_back(v);
        }
        break;
      case ArgType::Spec:
        if (v->kind != ExprKind::String || !v->einsum) {
          if (v->kind != ExprKind::String)
            diags.error(v->range, fmt::format("argument '{}' of '{}' must be an einsum spec string "
                                              "like \"b|i => b\"", s.name, call.name));
          ok = false;
        } else {
          out.spec = &*v->einsum;
        }
        break;
      case ArgType::Int:
      case ArgType::Number: {
        double value = 0;
        bool is_int = false;
        if (v->kind == ExprKind::Number) {
          value = v->number;
          is_int = v->is_integer;
        } else if (v->kind == ExprKind::Neg && v->operands[0]->kind == ExprKind::Number) {  // -0.5
          value = -v->operands[0]->number;
          is_int = v->operands[0]->is_integer;
        } else if (v->kind == ExprKind::Name && m.dims.count(v->name)) {
          value = static_cast<double>(m.dims.at(v->name));
          is_int = true;
        } else {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be a {} written in the spec",
                                            s.name, call.name,
                                            s.type == ArgType::Int ? "whole number" : "number"));
          ok = false;
          break;
        }
        if (s.type == ArgType::Int && !is_int) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be a whole number, not {}",
                                            s.name, call.name, value));
          ok = false;
          break;
        }
        if (value < s.min_value) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be at least {}, not {}",
                                            s.name, call.name, s.min_value, value));
          ok = false;
          break;
        }
        out.values[s.name] = value;
        break;
      }
    }
  }
  if (ok && out.spec && call.name != "einsum" && out.spec->operands.size() != 1) {
    diags.error(out.spec->range, fmt::format("the spec of '{}' must have exactly one operand, it has {}",
                                             call.name, out.spec->operands.size()));
    ok = false;
  }
  if (ok && out.spec && call.name == "einsum" && out.spec->operands.size() != out.tensors.size()) {
    diags.error(out.spec->range,
                fmt::format("the einsum spec has {} operand{} but {} tensor{} given",
                            out.spec->operands.size(), out.spec->operands.size() == 1 ? "" : "s",
                            out.tensors.size(), out.tensors.size() == 1 ? " is" : "s are"));
    ok = false;
  }
  return ok;
}

Model build_model(const Spec& spec, DiagEngine& diags) { return Builder(spec, diags).run(); }

std::optional<double> constant_value(const Expr& e, const std::map<std::string, long>& dims) {
  const bool neg = e.kind == ExprKind::Neg;
  const Expr& v = neg ? *e.operands[0] : e;
  std::optional<double> r;
  if (v.kind == ExprKind::Number) r = v.number;
  if (v.kind == ExprKind::Name)
    if (auto it = dims.find(v.name); it != dims.end()) r = static_cast<double>(it->second);
  if (r && neg) *r = -*r;
  return r;
}

}  // namespace cannl
