// zero_gain.cpp — the zero-gain trap (see zero_gain.h).
#include "shapes/zero_gain.h"

#include <fmt/format.h>

#include <set>

namespace cannl {

namespace {

const std::set<std::string>& gained_calls() {
  static const std::set<std::string> names = {"layer_norm", "batch_norm", "rms_norm", "relu",    "leaky_relu",
                                              "elu",        "gelu",       "silu",     "sigmoid", "tanh",
                                              "softplus"};
  return names;
}

bool is_norm(const std::string& f) { return f == "layer_norm" || f == "batch_norm" || f == "rms_norm"; }

// Why trainable param i starts at zero ("no initialiser and no input axes", "= zeros"); "" when
// it does not, or is no trainable param.
std::string zero_start(const Model& m, const ShapeInfo& shapes, size_t i) {
  const Tensor& t = m.tensors[i];
  if (t.kind != TensorKind::Param || t.frozen) return "";
  const auto it = m.inits.find(static_cast<int>(i));
  if (it == m.inits.end())
    return shapes.tensors[i].row(AxisKind::Input).empty() ? "no initialiser and no input axes" : "";
  const CallConfig& c = it->second;
  auto arg = [&](const char* name, double missing) {
    const auto a = c.args.find(name);
    return a == c.args.end() ? missing : a->second;
  };
  if (c.name == "zeros") return "= zeros";
  if (c.name == "constant" && arg("v", 1) == 0) return "= constant(0)";
  if (c.name == "uniform" && arg("lo", 0) == 0 && arg("hi", 1) == 0) return "= uniform(0, 0)";
  if (c.name == "normal" && arg("mean", 0) == 0 && arg("std", 1) == 0) return "= normal(0, 0)";
  return "";
}

// The normalisation or activation e is, called there or as the definition of the tensor it
// names: its name, or "".
std::string gained(const Model& m, const Expr& e) {
  const Expr* x = &e;
  if (x->kind == ExprKind::Name)
    if (const Tensor* t = m.find(x->name); t && t->kind == TensorKind::Computed && t->expr) x = t->expr;
  return x->kind == ExprKind::Call && gained_calls().count(x->name) ? x->name : "";
}

class Walker {
public:
  Walker(const Model& m, const ShapeInfo& shapes, DiagEngine& diags) : m_(m), shapes_(shapes), diags_(diags) {}

  void walk(const Expr& e) {
    if (e.kind == ExprKind::Mul)
      for (int k = 0; k < 2; ++k) check(*e.operands[static_cast<size_t>(k)], *e.operands[static_cast<size_t>(1 - k)]);
    for (const auto& o : e.operands) walk(*o);
    for (const auto& a : e.args) walk(*a.value);
  }

private:
  const Model& m_;
  const ShapeInfo& shapes_;
  DiagEngine& diags_;
  std::set<uint32_t> reported_;  // a repeat block's instances share their statements' ranges

  void check(const Expr& gain, const Expr& other) {
    if (gain.kind != ExprKind::Name) return;
    const auto it = m_.index.find(gain.name);
    if (it == m_.index.end()) return;
    const std::string why = zero_start(m_, shapes_, static_cast<size_t>(it->second));
    const std::string f = why.empty() ? "" : gained(m_, other);
    if (f.empty() || !reported_.insert(gain.range.begin).second) return;
    const Tensor& p = m_.tensors[static_cast<size_t>(it->second)];
    const SourceFile& file = diags_.file();
    const std::string name(file.slice(p.decl));
    const std::string what =
        other.kind == ExprKind::Name ? fmt::format("'{}' ({}(...))", file.slice(other.range), f) : f + "(...)";
    Diagnostic& d = diags_.warning(
        gain.range, fmt::format("param '{0}' starts at zero ({1}) and multiplies {2} pointwise: the product starts at "
                                "0 and sends no gradient back until '{0}' moves, and '{0}' never moves if a relu "
                                "follows (its gradient at 0 is 0), which leaves every unit after it dead",
                                name, why, what));
    const std::string shape = p.shape ? " : " + std::string(file.slice(p.shape->range)) : "";
    DiagEngine::note(d, p.decl,
                     fmt::format("start it at one: param {}{} = ones{}{}", name, shape,
                                 p.stmt && p.stmt->names.size() > 1 ? ", a statement of its own" : "",
                                 is_norm(f) ? " (PyTorch's norm layers start their weight at one)" : ""));
  }
};

}  // namespace

void warn_zero_gains(const Model& m, const ShapeInfo& shapes, DiagEngine& diags) {
  Walker w(m, shapes, diags);
  for (const Tensor& t : m.tensors)
    if (t.kind == TensorKind::Computed && t.expr) w.walk(*t.expr);
}

}  // namespace cannl
