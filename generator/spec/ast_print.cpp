#include "spec/ast_print.h"

#include <fmt/format.h>

namespace cannl {

std::string dump_tokens(const std::vector<Token>& tokens, const SourceFile& file) {
  std::string out;
  for (const Token& t : tokens) {
    LineCol lc = file.line_col(t.range.begin);
    out += fmt::format("{}:{}\t{}", lc.line, lc.col, tok_name(t.kind));
    if (t.kind == Tok::Ident || t.kind == Tok::Number) out += " " + t.text;
    if (t.kind == Tok::String) out += " \"" + t.text + "\"";
    out += "\n";
  }
  return out;
}

static std::string axis_text(const AxisSpec& a) {
  switch (a.kind) {
    case AxisSpec::Size: return std::to_string(a.size);
    case AxisSpec::DimName: return a.name;
    case AxisSpec::Wildcard: return "_";
    case AxisSpec::RowVar: return "..";
    case AxisSpec::Product: {
      std::string r;
      for (const AxisSpec& f : a.factors) r += (r.empty() ? "" : " * ") + axis_text(f);
      return r;
    }
  }
  return "?";
}

std::string print_shape_spec(const ShapeSpec& s) {
  auto part = [](const std::vector<AxisSpec>& axes) {
    std::string r;
    for (size_t i = 0; i < axes.size(); ++i) r += (i ? ", " : "") + axis_text(axes[i]);
    return r;
  };
  std::string r = "[";
  if (!s.parts[0].empty()) r += part(s.parts[0]) + " | ";
  if (!s.parts[1].empty()) r += part(s.parts[1]) + " -> ";
  return r + part(s.parts[2]) + "]";
}

// What is between the brackets of x[...]: i, a:b, or the instance index's name (its value
// once resolved: t=3).
static std::string index_text(const Expr& e) {
  if (e.slice_end > 0) return fmt::format("{}:{}", e.number, e.slice_end);
  if (e.name.empty()) return fmt::format("{}", e.number);
  return e.is_integer ? fmt::format("{}={}", e.name, e.number) : e.name;
}

std::string print_expr(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Number: return fmt::format("{}", e.number);
    case ExprKind::Name: return e.name;
    case ExprKind::String: return "\"" + e.name + "\"";
    case ExprKind::Neg: return "(-" + print_expr(*e.operands[0]) + ")";
    case ExprKind::Index: return print_expr(*e.operands[0]) + "[" + index_text(e) + "]";
    case ExprKind::Call: {
      std::string s = e.name + "(";
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) s += ", ";
        if (!e.args[i].keyword.empty()) s += e.args[i].keyword + " = ";
        s += print_expr(*e.args[i].value);
      }
      return s + ")";
    }
    default:
      return "(" + print_expr(*e.operands[0]) + " " + expr_op_spelling(e.kind) + " " +
             print_expr(*e.operands[1]) + ")";
  }
}

namespace {

const char* kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::Number: return "number";
    case ExprKind::Name: return "name";
    case ExprKind::String: return "string";
    case ExprKind::Neg: return "neg";
    case ExprKind::Add: return "add";
    case ExprKind::Sub: return "sub";
    case ExprKind::MatMul: return "matmul";
    case ExprKind::Mul: return "mul";
    case ExprKind::Div: return "div";
    case ExprKind::Pow: return "pow";
    case ExprKind::Call: return "call";
    case ExprKind::Index: return "index";
  }
  return "?";
}

void dump_expr(std::string& out, const Expr& e, const SourceFile& f, int indent,
               const std::string& label = {}) {
  LineCol lc = f.line_col(e.range.begin);
  out += std::string(indent * 2, ' ') + label + fmt::format("({} @{}:{}", kind_name(e.kind), lc.line, lc.col);
  switch (e.kind) {
    case ExprKind::Number: out += " " + fmt::format("{}", e.number); break;
    case ExprKind::Name: out += " " + e.name; break;
    case ExprKind::String:
      out += " \"" + e.name + "\"";
      if (e.einsum) out += " einsum[" + print_einsum(*e.einsum) + "]";
      break;
    case ExprKind::Call: out += " " + e.name; break;
    case ExprKind::Index: out += " [" + index_text(e) + "]"; break;
    default: break;
  }
  if (e.operands.empty() && e.args.empty()) {
    out += ")\n";
    return;
  }
  out += "\n";
  for (const auto& o : e.operands) dump_expr(out, *o, f, indent + 1);
  for (const auto& a : e.args)
    dump_expr(out, *a.value, f, indent + 1, a.keyword.empty() ? "" : a.keyword + "=");
  out += std::string(indent * 2, ' ') + ")\n";
}

const char* stmt_name(StmtKind k) {
  switch (k) {
    case StmtKind::Model: return "model";
    case StmtKind::Dim: return "dim";
    case StmtKind::Input: return "input";
    case StmtKind::Param: return "param";
    case StmtKind::Define: return "define";
    case StmtKind::Output: return "output";
    case StmtKind::Metric: return "metric";
    case StmtKind::Minimize: return "minimize";
    case StmtKind::Repeat: return "repeat";
  }
  return "?";
}

void dump_stmts(std::string& out, const std::vector<Stmt>& stmts, const SourceFile& file, int indent) {
  const std::string pad(static_cast<size_t>(indent) * 2, ' ');
  for (const Stmt& s : stmts) {
    LineCol lc = file.line_col(s.range.begin);
    out += pad + fmt::format("({} @{}:{}", stmt_name(s.kind), lc.line, lc.col);
    if (s.kind == StmtKind::Repeat) {
      if (!s.index.name.empty()) out += " " + s.index.name + " in";
      out += " " + (s.count.name.empty() ? std::to_string(s.dim_value) : s.count.name);
      if (!s.names.empty()) out += " carry";
    }
    for (const NameRef& n : s.names) out += " " + n.name;
    if (s.kind == StmtKind::Dim) out += fmt::format(" = {}", s.dim_value);
    if (s.shape) out += " : " + print_shape_spec(*s.shape);
    if (s.is_int) out += " int";
    if (s.is_buffer) out += " buffer";
    if (s.frozen) out += " frozen";
    if (!s.expr && !s.optimizer && s.body.empty()) {
      out += ")\n";
      continue;
    }
    out += "\n";
    if (s.expr) dump_expr(out, *s.expr, file, indent + 1, s.kind == StmtKind::Param ? "init=" : "");
    for (const OptGroup& g : s.groups) {
      std::string on;
      if (g.has_on && !g.word.name.empty()) on = " on=" + g.word.name;
      if (g.has_on && g.word.name.empty()) {
        on = " on=[";
        for (const NameRef& n : g.names) on += (on.back() == '[' ? "" : ", ") + n.name;
        on += "]";
      }
      dump_expr(out, *g.optimizer, file, indent + 1, "with" + on + "=");
    }
    for (const auto& [opt, value] : s.options) dump_expr(out, *value, file, indent + 1, opt.name + "=");
    dump_stmts(out, s.body, file, indent + 1);
    out += pad + ")\n";
  }
}

}  // namespace

std::string dump_ast(const Spec& spec, const SourceFile& file) {
  std::string out;
  dump_stmts(out, spec.stmts, file, 0);
  return out;
}

}  // namespace cannl
