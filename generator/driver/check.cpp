// `cannl check SPEC`: parse and infer, then print every tensor's shape.
#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "driver/commands.h"
#include "driver/frontend.h"
#include "spec/ast_print.h"

namespace cannl {

bool parse_dim_override(const std::string& arg, std::map<std::string, long>& dims, std::string& error) {
  size_t eq = arg.find('=');
  std::string name = arg.substr(0, eq == std::string::npos ? arg.size() : eq);
  std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
  bool ident = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (eq == std::string::npos || !ident) {
    error = fmt::format("--dim {}: expected NAME=VALUE, e.g. --dim ctx=128", arg);
    return false;
  }
  bool digits = !value.empty() && value.size() <= 15;
  for (char c : value) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::stol(value) < 1) {
    error = fmt::format("--dim {}: the value of '{}' must be a positive integer, not '{}'", arg, name, value);
    return false;
  }
  if (dims.count(name)) {
    error = fmt::format("--dim {}: '{}' is given twice", arg, name);
    return false;
  }
  dims[name] = std::stol(value);
  return true;
}

bool read_file(const std::string& path, std::string& text, std::string& error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = fmt::format("cannot read '{}': it is a directory, not a spec file", path);
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = fmt::format("cannot read '{}': no such file or not readable", path);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    error = fmt::format("cannot read '{}': read error", path);
    return false;
  }
  text = ss.str();
  return true;
}

namespace {

nlohmann::json axes_json(const std::vector<Axis>& row) {
  nlohmann::json a = nlohmann::json::array();
  for (const Axis& x : row) {
    if (x.is_batch) a.push_back("batch");
    else a.push_back(x.size);
  }
  return a;
}

// `NAME : SHAPE`, and ` int` for integer tensors (ids): `tokens : [batch, 64 | ] int`.
std::string tensor_line(const Model& m, const ShapeInfo& shapes, size_t i) {
  const Tensor& t = m.tensors[i];
  return t.name + " : " + print_shape(shapes.tensors[i]) + (t.dtype == DType::Int32 ? " int" : "");
}

void dump_shapes(const Frontend& fe, std::ostream& out) {
  const Model& m = fe.model;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const Tensor& t = m.tensors[i];
    out << tensor_line(m, fe.shapes, i) << "   # " << tensor_kind_name(t.kind) << "\n";
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
      out << fmt::format("    {}:{} {} : {}{}\n", lc.line, lc.col, fe.file.slice(e->range),
                         print_shape(fe.shapes.of(e)), m.is_int(e) ? " int" : "");
    }
  }
}

}  // namespace

int check_text(const std::string& path, const std::string& text, const CheckOptions& opt,
               std::ostream& out, std::ostream& err) {
  Stage last = opt.dump == "tokens" ? Stage::Tokens : opt.dump == "ast" ? Stage::Ast : Stage::Shapes;
  auto fe = run_frontend(path, text, last, opt.dims);
  if (!fe->usage_error.empty()) {
    err << "cannl: error: " << fe->usage_error << "\n";
    return 2;
  }
  if (!fe->ok()) {
    fe->diags.render(err, opt.color);
    err << fmt::format("{}: {} error{}\n", path, fe->diags.error_count(),
                       fe->diags.error_count() == 1 ? "" : "s");
    return 1;
  }
  fe->diags.render(err, opt.color);  // warnings
  if (opt.dump == "tokens") {
    out << dump_tokens(fe->tokens, fe->file);
    return 0;
  }
  if (opt.dump == "ast") {
    out << dump_ast(fe->spec, fe->file);
    return 0;
  }
  if (opt.dump == "shapes") {
    dump_shapes(*fe, out);
    return 0;
  }
  const Model& m = fe->model;
  if (opt.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const Shape& s = fe->shapes.tensors[i];
      arr.push_back({{"name", m.tensors[i].name},
                     {"kind", tensor_kind_name(m.tensors[i].kind)},
                     {"dtype", dtype_name(m.tensors[i].dtype)},
                     {"shape", print_shape(s)},
                     {"batch", axes_json(s.row(AxisKind::Batch))},
                     {"input", axes_json(s.row(AxisKind::Input))},
                     {"output", axes_json(s.row(AxisKind::Output))}});
    }
    out << arr.dump(2) << "\n";
    return 0;
  }
  for (size_t i = 0; i < m.tensors.size(); ++i) out << tensor_line(m, fe->shapes, i) << "\n";
  return 0;
}

int check_file(const std::string& path, const CheckOptions& opt, std::ostream& out, std::ostream& err) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  return check_text(path, text, opt, out, err);
}

}  // namespace cannl
