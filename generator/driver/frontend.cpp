#include "driver/frontend.h"

#include <algorithm>
#include <fmt/format.h>

#include "shapes/size_limits.h"
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
  return fe;
}

}  // namespace cannl
