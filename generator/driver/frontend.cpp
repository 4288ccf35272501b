#include "driver/frontend.h"

#include <algorithm>
#include <fmt/format.h>

#include "shapes/size_limits.h"
#include "shapes/zero_gain.h"
#include "spec/lexer.h"
#include "spec/parser.h"

namespace cannl {

std::unique_ptr<Frontend> run_frontend(std::string path, std::string text, Stage last,
                                       const std::map<std::string, long>& dims) {
  auto fe = std::make_unique<Frontend>(std::move(path), std::move(text));
  fe->tokens = lex(fe->file, fe->diags);
  if (last == Stage::Tokens) return fe;
  fe->spec = parse(fe->tokens, fe->diags);
  if (last == Stage::Ast) return fe;
  std::vector<std::string> names = spec_dim_names(fe->spec);
  for (const auto& [name, value] : dims)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      fe->usage_error = fmt::format("--dim {}={}: the spec has no dim '{}' ({})", name, value, name,
                                    known.empty() ? "it has no dims" : "its dims: " + known);
      return fe;
    }
  // Name resolution runs even after syntax errors (statements that failed to parse are
  // skipped, and the names they define are not reported again), so independent mistakes on
  // other lines are reported in the same run.
  if (!fe->spec.stmts.empty() || fe->ok()) fe->model = build_model(fe->spec, fe->diags, dims);
  if (last == Stage::Model || !fe->ok()) return fe;
  fe->shapes = infer_shapes(fe->model, fe->file, fe->diags);
  if (fe->ok()) check_size_limits(fe->model, fe->shapes, fe->diags);
  if (fe->ok()) warn_zero_gains(fe->model, fe->shapes, fe->diags);
  return fe;
}

std::string tensor_line(const Model& m, const ShapeInfo& shapes, size_t i) {
  const Tensor& t = m.tensors[i];
  return t.name + " : " + print_shape(shapes.tensors[i]) + (t.dtype == DType::Int32 ? " int" : "");
}

std::string print_shapes(const Frontend& fe) {
  std::string out;
  const Model& m = fe.model;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const Tensor& t = m.tensors[i];
    out += fmt::format("{}   # {}\n", tensor_line(m, fe.shapes, i), tensor_kind_name(t.kind));
    if (!t.expr) continue;
    // Sub-expressions in evaluation order (post-order), with their shapes.
    std::vector<const Expr*> order;
    auto walk = [&](auto&& self, const Expr* e) -> void {
      for (const auto& o : e->operands) self(self, o.get());
      for (const Arg& a : e->args) self(self, a.value.get());
      if (e->kind != ExprKind::String && e->kind != ExprKind::Name && e->kind != ExprKind::Number)
        order.push_back(e);
    };
    walk(walk, t.expr);
    for (const Expr* e : order) {
      if (e == t.expr) continue;
      LineCol lc = fe.file.line_col(e->range.begin);
      out += fmt::format("    {}:{} {} : {}{}\n", lc.line, lc.col, fe.file.slice(e->range),
                         print_shape(fe.shapes.of(e)), m.is_int(e) ? " int" : "");
    }
  }
  return out;
}

}  // namespace cannl
