#include "driver/frontend.h"

#include <fmt/format.h>

#include "shapes/size_limits.h"
#include "spec/lexer.h"
#include "spec/parser.h"

namespace cannl {

std::unique_ptr<Frontend> run_frontend(std::string path, std::string text, Stage last) {
  auto fe = std::make_unique<Frontend>(std::move(path), std::move(text));
  fe->tokens = lex(fe->file, fe->diags);
  if (last == Stage::Tokens) return fe;
  fe->spec = parse(fe->tokens, fe->diags);
  if (last == Stage::Ast) return fe;
  // Name resolution runs even after syntax errors (statements that failed to parse are
  // skipped, and the names they define are not reported again), so independent mistakes on
  // other lines are reported in the same run.
  if (!fe->spec.stmts.empty() || fe->ok()) fe->model = build_model(fe->spec, fe->diags);
  if (last == Stage::Model || !fe->ok()) return fe;
  fe->shapes = infer_shapes(fe->model, fe->file, fe->diags);
  if (fe->ok()) check_size_limits(fe->model, fe->shapes, fe->diags);
  return fe;
}

std::string print_shapes(const Frontend& fe) {
  std::string out;
  const Model& m = fe.model;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const Tensor& t = m.tensors[i];
    out += fmt::format("{} : {}   # {}\n", t.name, print_shape(fe.shapes.tensors[i]), tensor_kind_name(t.kind));
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
      out += fmt::format("    {}:{} {} : {}\n", lc.line, lc.col, fe.file.slice(e->range), print_shape(fe.shapes.of(e)));
    }
  }
  return out;
}

}  // namespace cannl
