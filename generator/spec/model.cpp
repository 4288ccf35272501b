#include "spec/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "spec/pytorch_names.h"

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

// Edit distance counting a swap of two neighbours as one edit (rleu -> relu).
size_t swap_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// An unknown function: PyTorch's spelling of something cannl writes otherwise
// (spec/pytorch_names.h, with the call's arguments `args`), else the nearest built-ins (at most
// three, by edit distance).
std::string unknown_function_hint(const std::string& name, const std::string& args,
                                  const std::vector<std::string>& builtins) {
  if (std::string torch = pytorch_function_hint(name, args); !torch.empty()) return fmt::format(" ({})", torch);
  std::vector<std::pair<size_t, std::string>> near;
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  for (const std::string& c : builtins) {
    // A prefix of a built-in's words (mse -> mse_loss, nll -> nll_loss) is as near as one edit.
    size_t d = c.rfind(name + "_", 0) == 0 ? 1 : swap_distance(name, c);
    if (d <= limit && d < c.size()) near.push_back({d, c});
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  if (near.empty()) return " (the built-in functions are listed in docs/language.md, section 8)";
  std::string list;
  for (size_t i = 0; i < near.size() && i < 3; ++i) list += (i ? ", " : "") + near[i].second;
  return fmt::format(" (nearest built-ins: {})", list);
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
      else if (!sig[i].default_text.empty()) s += " = " + sig[i].default_text;
      else if (sig[i].type == ArgType::Bool) s += sig[i].default_value != 0 ? " = true" : " = false";
      else if (sig[i].type == ArgType::Choice) s += " = \"" + sig[i].choices.front() + "\"";
      else s += fmt::format(" = {}", sig[i].default_value);
    }
  }
  return s + ")";
}

// Copies an expression, renaming the tensor names `rename` maps (a repeat block's instance).
ExprPtr clone_expr(const Expr& e, const std::map<std::string, std::string>& rename) {
  auto c = std::make_unique<Expr>();
  c->kind = e.kind;
  c->range = e.range;
  c->op_range = e.op_range;
  c->number = e.number;
  c->is_integer = e.is_integer;
  c->name = e.name;
  c->einsum = e.einsum;
  c->height = e.height;
  if (e.kind == ExprKind::Name)
    if (auto it = rename.find(e.name); it != rename.end()) c->name = it->second;
  for (const auto& o : e.operands) c->operands.push_back(clone_expr(*o, rename));
  for (const Arg& a : e.args) c->args.push_back(Arg{a.keyword, a.keyword_range, clone_expr(*a.value, rename)});
  return c;
}

bool mentions(const Expr& e, const std::map<std::string, std::string>& names) {
  if (e.kind == ExprKind::Name && names.count(e.name)) return true;
  for (const auto& o : e.operands)
    if (mentions(*o, names)) return true;
  for (const Arg& a : e.args)
    if (mentions(*a.value, names)) return true;
  return false;
}

// The largest size an axis of a written shape may have (a product of dims may be huge; the
// shape stage bounds whole tensors).
constexpr long kMaxAxisSize = 1L << 40;

// The largest count of a repeat block (docs/language.md §17): every instance is expanded into
// statements of its own, so a count of 10^15 ran out of memory or for hours.
constexpr long kMaxRepeat = 1024;

class Builder {
public:
  Builder(const Spec& s, DiagEngine& d, const std::map<std::string, long>& overrides)
      : spec_(s), diags_(d), overrides_(overrides), syntax_errors_(d.has_errors()) {}

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
    if (auto it = block_locals_.find(n.name); it != block_locals_.end()) {
      redefined(n, it->second.decl, "a tensor of a repeat block");
      return false;
    }
    if (auto it = instance_defs_.find(n.name); block_ && it != instance_defs_.end()) {
      redefined(n, it->second, "a tensor of this repeat block");
      return false;
    }
    return true;
  }

  void check_shape(const ShapeSpec& sh, bool allow_batch, const char* what) {
    if (!allow_batch && !sh.parts[0].empty())
      diags_.error(sh.parts[0].front().range, fmt::format("{} have no batch axes", what));
    for (const auto& part : sh.parts)
      for (const AxisSpec& a : part) {
        if (a.kind == AxisSpec::DimName) known_dim(a);
        if (a.kind != AxisSpec::Product) continue;
        bool ok = true;
        for (const AxisSpec& f : a.factors) ok = (f.kind != AxisSpec::DimName || known_dim(f)) && ok;
        long size = 1;
        for (const AxisSpec& f : a.factors) {
          long v = f.kind == AxisSpec::Size ? f.size : f.kind == AxisSpec::DimName && ok ? m_.dims.at(f.name) : 1;
          if (__builtin_mul_overflow(size, v, &size) || size > kMaxAxisSize) {
            diags_.error(a.range, fmt::format("the axis '{}' is too large (more than 2^40)",
                                              std::string(diags_.file().slice(a.range))));
            break;
          }
        }
      }
  }
  bool known_dim(const AxisSpec& a) {
    if (m_.dims.count(a.name)) return true;
    std::vector<std::string> names;
    for (auto& [k, v] : m_.dims) names.push_back(k);
    diags_.error(a.range, fmt::format("unknown dim '{}' in shape (define it with 'dim {} = SIZE' before use){}",
                                      a.name, a.name, suggestion(a.name, names)));
    return false;
  }

  int add_tensor(const NameRef& n, TensorKind k, const Stmt& s, DType dtype = DType::Float) {
    Tensor t;
    t.name = n.name;
    t.kind = k;
    t.decl = n.range;
    t.stmt = &s;
    t.shape = s.shape ? &*s.shape : nullptr;
    t.expr = (k == TensorKind::Computed) ? s.expr.get() : nullptr;
    t.is_metric = s.kind == StmtKind::Metric;
    t.frozen = s.frozen || s.is_buffer;
    t.dtype = dtype;
    t.block = block_;
    t.instance = instance_;
    int idx = static_cast<int>(m_.tensors.size());
    m_.tensors.push_back(std::move(t));
    m_.index[n.name] = idx;
    return idx;
  }

  // The tensor a name means at this point of the file: a repeat block's instance, or a name a
  // block carries (its last instance after the block).
  std::string actual(const std::string& name) const {
    auto it = rename_.find(name);
    return it == rename_.end() ? name : it->second;
  }

  // A copy of a statement whose expression reads renamed names, owned by the Model.
  const Stmt& renamed_copy(const Stmt& s, const NameRef& name) {
    auto c = std::make_unique<Stmt>();
    c->kind = s.kind;
    c->range = s.range;
    c->names = {name};
    c->expr = clone_expr(*s.expr, rename_);
    m_.expanded.push_back(std::move(c));
    return *m_.expanded.back();
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
      case StmtKind::Dim: {
        if (s.names[0].name == "_") {
          diags_.error(s.names[0].range, "'_' cannot name a dim: in a shape it means an inferred axis");
          return;
        }
        if (!check_new_name(s.names[0])) return;
        auto over = overrides_.find(s.names[0].name);
        m_.dims[s.names[0].name] = over != overrides_.end() ? over->second : s.dim_value;
        dim_decl_[s.names[0].name] = s.names[0].range;
        return;
      }
      case StmtKind::Input:
        check_shape(*s.shape, true, "inputs");
        if (check_new_name(s.names[0]))
          add_tensor(s.names[0], TensorKind::Input, s, s.is_int ? DType::Int32 : DType::Float);
        return;
      case StmtKind::Param: {
        if (s.shape) check_shape(*s.shape, false, "parameters");
        std::optional<CallConfig> init;
        if (s.expr) init = initializer(*s.expr);
        for (const NameRef& n : s.names) {
          if (!check_new_name(n)) continue;
          NameRef name = n;
          if (block_) {
            name.name = instance_name(n.name);
            instance_defs_[n.name] = n.range;
            rename_[n.name] = name.name;
          }
          int idx = add_tensor(name, TensorKind::Param, s);
          if (init) m_.inits[idx] = *init;
        }
        return;
      }
      case StmtKind::Define:
      case StmtKind::Metric: {
        const NameRef& n = s.names[0];
        bool carried = block_ && carried_.count(n.name);
        NameRef name = n;
        if (block_) name.name = instance_name(n.name);
        const Stmt& st = block_ || mentions(*s.expr, rename_) ? renamed_copy(s, name) : s;
        bool metric = s.kind == StmtKind::Metric;
        DType dtype = expr(*st.expr, metric);
        if (metric && dtype == DType::Int32)
          diags_.error(n.range, fmt::format("metric '{}' holds integers (ids); a metric is a float scalar", n.name));
        if (carried && instance_defs_.count(n.name)) {
          redefined(n, instance_defs_.at(n.name), "a tensor of this repeat block");
          return;
        }
        if (!carried && !check_new_name(n)) return;
        int idx = add_tensor(name, TensorKind::Computed, st, dtype);
        if (metric) m_.metrics.push_back(idx);
        if (block_) {
          instance_defs_[n.name] = n.range;
          rename_[n.name] = name.name;
        }
        return;
      }
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
      case StmtKind::Repeat:
        repeat(s);
        return;
    }
  }

  std::string instance_name(const std::string& name) const { return fmt::format("{}.{}", name, instance_); }
  static const char* stmt_keyword(StmtKind k) {
    switch (k) {
      case StmtKind::Model: return "model";
      case StmtKind::Dim: return "dim";
      case StmtKind::Input: return "input";
      case StmtKind::Output: return "output";
      case StmtKind::Metric: return "metric";
      case StmtKind::Minimize: return "minimize";
      default: return "repeat";
    }
  }

  // ---- repeat COUNT [carry NAME, ...] ... end (docs/language.md §17, contract v1 §5) ----

  // Expands the block: its statements once per instance, in order, each name NAME.INDEX. A
  // carried name reads the previous instance's value (the tensor defined before the block,
  // for instance 0) until the block redefines it; after the block it means the last instance.
  void repeat(const Stmt& b) {
    auto give_up = [&] {  // the block's names are not reported again as unknown below
      for (const Stmt& st : b.body)
        for (const NameRef& n : st.names) broken_.insert(n.name);
    };
    // Its first line did not parse, it has no `end` (the rest of the file is in it), or it is
    // nested: reported by the parser.
    if (b.broken || b.end_range.end == 0 || block_) return give_up();
    long count = b.dim_value;
    if (!b.count.name.empty()) {
      auto it = m_.dims.find(b.count.name);
      if (it == m_.dims.end()) {
        diags_.error(b.count.range, fmt::format("the count of a repeat block must be a positive integer or a dim; "
                                                "'{}' is no dim (define it with 'dim {} = N' before the block)",
                                                b.count.name, b.count.name));
        return give_up();
      }
      count = it->second;
    }
    if (count > kMaxRepeat) {
      diags_.error(b.count.range,
                   fmt::format("the count of a repeat block must be at most {}, not {}{}: each instance is a copy of "
                               "the block's params and tensors", kMaxRepeat, count,
                               b.count.name.empty() ? "" : fmt::format(" (dim '{}')", b.count.name)));
      return give_up();
    }
    bool ok = true;
    std::set<std::string> defined;
    for (const Stmt& st : b.body) {
      if (st.kind == StmtKind::Param || st.kind == StmtKind::Define) {
        for (const NameRef& n : st.names) defined.insert(n.name);
        continue;
      }
      if (st.kind == StmtKind::Repeat) continue;  // nested: reported by the parser
      diags_.error(st.range, fmt::format("a repeat block holds only param and NAME = EXPR statements, not "
                                         "'{}'; write it before or after the block", stmt_keyword(st.kind)));
      ok = false;
    }
    std::set<std::string> carried;
    for (const NameRef& n : b.names) {
      if (!carried.insert(n.name).second) {
        diags_.error(n.range, fmt::format("'{}' is carried twice", n.name));
        ok = false;
      } else if (!m_.index.count(actual(n.name))) {
        if (!spec_.broken_names.count(n.name) && !broken_.count(n.name))
          diags_.error(n.range, fmt::format("'{}' must be defined before the repeat block that carries it: "
                                            "instance 0 reads it", n.name));
        ok = false;
      } else if (!defined.count(n.name)) {
        diags_.error(n.range, fmt::format("'{}' is carried, but the block does not redefine it: write "
                                          "'{} = ...' inside the block (what the next instance reads)",
                                          n.name, n.name));
        ok = false;
      } else if (m_.index.count(n.name + ".0")) {
        diags_.error(n.range, fmt::format("'{}' is already carried by another repeat block, whose instances are "
                                          "{}.0, {}.1, ...; name the result of that block (y = {}) and carry y",
                                          n.name, n.name, n.name, n.name));
        ok = false;
      }
    }
    if (!ok) return give_up();
    block_ = &b;
    carried_ = carried;
    for (long i = 0; i < count; ++i) {
      instance_ = static_cast<int>(i);
      instance_defs_.clear();
      for (const std::string& n : defined)  // an instance sees only what it defined so far
        if (!carried.count(n)) rename_.erase(n);
      size_t first = diags_.all().size();
      int errors = diags_.error_count();
      for (const Stmt& st : b.body) statement(st);
      if (diags_.error_count() > errors) {  // every instance would say the same
        diags_.note_since(first, b.range, fmt::format("in instance 0 (of {}) of this repeat block", count));
        give_up();
        break;
      }
    }
    for (const Stmt& st : b.body)
      for (const NameRef& n : st.names) {
        if (carried.count(n.name) || st.kind == StmtKind::Repeat) continue;
        rename_.erase(n.name);
        block_locals_[n.name] = {&b, count, n.range};
      }
    block_ = nullptr;
    instance_ = -1;
    carried_.clear();
    instance_defs_.clear();
  }

  std::string block_local_message(const std::string& name) const {
    const BlockLocal& l = block_locals_.at(name);
    LineCol lc = diags_.file().line_col(l.block->range.begin);
    return fmt::format("'{}' is defined inside the repeat block of line {}, one tensor per instance ({}.0 to {}.{}), "
                       "and cannot be used after it; a block passes on only what it carries (repeat {} carry NAME)",
                       name, lc.line, name, name, l.count - 1,
                       l.block->count.name.empty() ? std::to_string(l.block->dim_value) : l.block->count.name);
  }

  void finish() {
    if (m_.name.empty() && !spec_.stmts.empty() && !diags_.has_errors() && !syntax_errors_)
      diags_.error(spec_.stmts[0].range, "a spec must start with 'model NAME'");
    for (const Stmt* s : pending_outputs_)
      for (const NameRef& n : s->names) {
        int idx = lookup_tensor(n, "output");
        if (idx < 0) continue;
        if (std::find(m_.outputs.begin(), m_.outputs.end(), idx) != m_.outputs.end()) {
          diags_.error(n.range, fmt::format("'{}' is already an output", n.name));
        } else {
          m_.outputs.push_back(idx);
          m_.output_ranges.push_back(n.range);
        }
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
      else if (idx >= 0 && m_.tensors[idx].dtype == DType::Int32)
        diags_.error(minimize_->names[0].range,
                     fmt::format("'{}' holds integers (ids); minimize needs a float scalar loss",
                                 minimize_->names[0].name));
      else
        m_.loss = idx;
    }
  }

  std::vector<std::string> all_names() const {
    std::vector<std::string> v;
    for (const Tensor& t : m_.tensors)
      if (t.instance < 0) v.push_back(t.name);
    for (auto& [k, _] : m_.dims) v.push_back(k);
    return v;
  }

  // A name used where a tensor must already exist (output, minimize: any position in the file).
  int lookup_tensor(const NameRef& n, const char* where) {
    auto it = m_.index.find(actual(n.name));
    if (it != m_.index.end()) return it->second;
    if (spec_.broken_names.count(n.name) || broken_.count(n.name)) return -1;
    if (block_locals_.count(n.name))
      diags_.error(n.range, block_local_message(n.name));
    else if (m_.dims.count(n.name))
      diags_.error(n.range, fmt::format("'{}' is a dim, not a tensor ({} needs a tensor)", n.name, where));
    else
      diags_.error(n.range, fmt::format("unknown tensor '{}' in '{}'{}", n.name, where,
                                        suggestion(n.name, all_names())));
    return -1;
  }

  static SourceRange defined_in(const std::vector<Stmt>& stmts, const std::string& name) {
    for (const Stmt& s : stmts) {
      if (s.kind == StmtKind::Define || s.kind == StmtKind::Metric || s.kind == StmtKind::Param ||
          s.kind == StmtKind::Input)
        for (const NameRef& n : s.names)
          if (n.name == name) return n.range;
      if (s.kind == StmtKind::Repeat)
        if (SourceRange r = defined_in(s.body, name); r.end > 0) return r;
    }
    return {0, 0};
  }

  // An integer tensor where a float is expected: the error is at its use.
  void int_misuse(const Expr& e, const std::string& where) {
    diags_.error(e.range, fmt::format("'{}' holds integers (ids): they can only be the ids of embedding, the "
                                      "target of cross_entropy or accuracy, or the argument of position, not {}",
                                      name_text(e), where));
  }
  std::string name_text(const Expr& e) const {
    std::string t(diags_.file().slice(e.range));
    return t.size() > 40 ? t.substr(0, 37) + "..." : t;
  }
  DType float_operand(const Expr& e, bool in_metric, const std::string& where) {
    if (expr(e, in_metric) == DType::Int32) int_misuse(e, where);
    return DType::Float;
  }

  // Checks names and calls below `e`; returns the element type of its values.
  DType expr(const Expr& e, bool in_metric) {
    switch (e.kind) {
      case ExprKind::Number:
        return DType::Float;
      case ExprKind::Name: {
        if (auto it = m_.index.find(e.name); it != m_.index.end()) {
          DType d = m_.tensors[it->second].dtype;
          if (d == DType::Int32) m_.int_exprs.insert(&e);
          return d;
        }
        if (m_.dims.count(e.name) || spec_.broken_names.count(e.name) || broken_.count(e.name))
          return DType::Float;
        if (find_op(e.name)) {
          diags_.error(e.range, fmt::format("'{}' is a function; call it, e.g. {}(x)", e.name, e.name));
          return DType::Float;
        }
        if (block_locals_.count(e.name)) {
          diags_.error(e.range, block_local_message(e.name));
          return DType::Float;
        }
        SourceRange later = defined_in(spec_.stmts, e.name);
        if (later.end > 0) {
          auto& d = diags_.error(e.range, fmt::format("'{}' is used before its definition", e.name));
          DiagEngine::note(d, later, fmt::format("'{}' is defined here", e.name));
          return DType::Float;
        }
        diags_.error(e.range, fmt::format("unknown tensor '{}'{}", e.name,
                                          suggestion(e.name, all_names())));
        return DType::Float;
      }
      case ExprKind::String:
        diags_.error(e.range, "a string is only allowed as an argument of a built-in: an einsum spec "
                              "(einsum, sum, mean, max, softmax, log_softmax, layer_norm) or an option value");
        return DType::Float;
      case ExprKind::Pow: {
        float_operand(*e.operands[0], in_metric, "the base of '**'");
        const Expr& ex = *e.operands[1];
        if (!constant_value(ex, m_.dims))
          diags_.error(ex.range, fmt::format("the exponent of '**' must be a number, not '{}' (for a "
                                             "tensor exponent write exp(b *. log(a)))",
                                             std::string(file_text_slice(ex))));
        return DType::Float;
      }
      case ExprKind::Call:
        return call(e, in_metric);
      case ExprKind::Index: {
        DType d = expr(*e.operands[0], in_metric);
        if (d == DType::Int32) m_.int_exprs.insert(&e);
        return d;
      }
      default:
        for (const auto& o : e.operands)
          float_operand(*o, in_metric, e.kind == ExprKind::Neg
                                           ? "the operand of '-'"
                                           : fmt::format("an operand of '{}'", expr_op_spelling(e.kind)));
        return DType::Float;
    }
  }

  // Whether a call argument can be a tensor (not a string, number or true/false): the
  // arguments walked for name errors when the call does not bind.
  static bool maybe_tensor(const Expr& v) {
    if (v.kind == ExprKind::String || v.kind == ExprKind::Number) return false;
    return !(v.kind == ExprKind::Name && (v.name == "true" || v.name == "false"));
  }

  DType call(const Expr& e, bool in_metric) {
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
        std::string args;  // the text of the arguments, for a hint that repeats them
        if (!e.args.empty())
          args = diags_.file().slice({e.args.front().value->range.begin, e.args.back().value->range.end});
        if (!e.args.empty() && !e.args.front().keyword.empty()) args.clear();
        diags_.error(e.op_range,
                     fmt::format("unknown function '{}'{}", e.name, unknown_function_hint(e.name, args, names)));
      }
      for (const Arg& a : e.args)
        if (maybe_tensor(*a.value)) expr(*a.value, in_metric);
      return DType::Float;
    }
    if (op->metric_only && !in_metric)
      diags_.error(e.op_range, fmt::format("'{}' is not differentiable and is only allowed in a "
                                           "metric (metric NAME = {}(...))", e.name, e.name));
    BoundCall bc;
    if (!bind_args(e, op->args, m_, diags_, bc)) {
      for (const Arg& a : e.args) {  // name errors in what may be tensors (options are reported)
        auto sig = std::find_if(op->args.begin(), op->args.end(),
                                [&](const ArgSig& x) { return x.name == a.keyword; });
        bool tensor = a.keyword.empty() ? maybe_tensor(*a.value)
                                        : sig != op->args.end() && sig->type == ArgType::Tensor;
        if (tensor) expr(*a.value, in_metric);
      }
      return DType::Float;
    }
    for (size_t i = 0; i < bc.tensors.size(); ++i) {
      const Expr& v = *bc.tensors[i];
      const ArgSig& sig = *bc.tensor_args[i];
      int before = diags_.error_count();
      DType d = expr(v, in_metric);
      if (d == DType::Int32 && sig.elem == Elem::Float)
        int_misuse(v, fmt::format("the argument '{}' of {}", sig.name, e.name));
      // An argument that was itself wrong (ids used in arithmetic: embedding(e, t *. 1)) was
      // reported; its being float now is that error, not a second one.
      if (d == DType::Float && sig.elem == Elem::Int && diags_.error_count() == before)
        diags_.error(v.range, fmt::format("the {} of {} must be integers, but '{}' holds floats (declare "
                                          "the input 'int': input tokens : [ctx |] int)",
                                          sig.name, e.name, name_text(v)));
    }
    m_.calls[&e] = bc;
    if (e.name == "position") {
      m_.int_exprs.insert(&e);
      return DType::Int32;
    }
    return DType::Float;
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
        if (a.type == ArgType::Choice) bc.strings[a.name] = a.choices.front();
        else bc.values[a.name] = a.default_value;
      }
    }
    c.args = bc.values;
    c.strings = bc.strings;
    return c;
  }

  std::optional<CallConfig> initializer(const Expr& e) {
    auto c = config(e, find_initializer(e.name), "initialiser", initializer_names());
    if (c) check_initializer(*c);
    return c;
  }
  // The ranges torch.nn.init accepts (uniform_ raises "expects to return a [from, to) range",
  // normal_ "expects std >= 0.0").
  void check_initializer(const CallConfig& c) {
    if (c.name == "uniform" && !(c.args.at("lo") <= c.args.at("hi")))
      diags_.error(c.range, fmt::format("uniform's 'lo' ({}) must not be larger than its 'hi' ({})",
                                        c.args.at("lo"), c.args.at("hi")));
    if (c.name == "normal" && !(c.args.at("std") >= 0))
      diags_.error(c.range, fmt::format("normal's 'std' must be >= 0, not {}", c.args.at("std")));
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
    if (c.args.count("warmup")) whole("warmup", 0);
    if (c.name == "exponential" && !(c.args.at("gamma") > 0)) diags_.error(c.range, "exponential's 'gamma' must be positive");
    if (c.name == "linear") {
      whole("steps", 1);
      for (const char* k : {"start_factor", "end_factor"})
        if (!(c.args.at(k) >= 0 && c.args.at(k) <= 1))  // LinearLR's rule
          diags_.error(c.range, fmt::format("linear's '{}' must be between 0 and 1, not {}", k, c.args.at(k)));
    }
    if (c.name == "onecycle") {
      if (!(c.args.at("max_lr") > 0)) diags_.error(c.range, "onecycle's 'max_lr' must be positive");
      const double p = c.args.at("pct_start");
      if (whole("steps", 1) && !(p > 0 && p < 1 && p * c.args.at("steps") - 1 > 0 && p * c.args.at("steps") < c.args.at("steps") - 1))
        diags_.error(c.range, fmt::format("onecycle's 'pct_start' ({}) must leave each phase at least one step of "
                                          "its 'steps' ({})", p, c.args.at("steps")));
      for (const char* k : {"div_factor", "final_div_factor"})
        if (!(c.args.at(k) > 0)) diags_.error(c.range, fmt::format("onecycle's '{}' must be positive", k));
    }
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
  const std::map<std::string, long>& overrides_;  // cannl gen --dim NAME=VALUE
  Model m_;
  std::map<std::string, SourceRange> dim_decl_;
  std::vector<const Stmt*> pending_outputs_;
  const Stmt* minimize_ = nullptr;
  bool syntax_errors_;  // the parser already reported errors: statements may be missing
  // Repeat blocks. rename_: a name as written -> the tensor it means here (NAME.INDEX inside
  // a block; a carried name after its block). block_locals_: names defined inside finished
  // blocks (not visible after them). broken_: names of blocks that failed (not reported again).
  struct BlockLocal {
    const Stmt* block;
    long count;
    SourceRange decl;
  };
  std::map<std::string, std::string> rename_;
  std::map<std::string, BlockLocal> block_locals_;
  std::set<std::string> broken_;
  const Stmt* block_ = nullptr;  // the block being expanded, and its instance
  int instance_ = -1;
  std::set<std::string> carried_;
  std::map<std::string, SourceRange> instance_defs_;  // names the instance has defined so far
};

}  // namespace

// softmax(x, "b, t|d => b, t|"): normalised over the axes the spec sums away, so there must be
// one, and no index expressions.
static bool normalisation_spec(const EinsumSpec& spec, const std::string& f, DiagEngine& diags) {
  std::set<std::string> kept;
  for (const auto& part : spec.result.parts)
    for (const EinAxis& a : part) kept.insert(a.kind == EinAxis::Ellipsis ? "..." : a.name);
  bool reduces = false;
  for (const auto& part : spec.operands[0].parts)
    for (const EinAxis& a : part) {
      if (a.kind == EinAxis::Affine) {
        diags.error(a.range, fmt::format("the spec of '{}' names the axes to normalise over: no index "
                                         "expressions", f));
        return false;
      }
      reduces = reduces || !kept.count(a.kind == EinAxis::Ellipsis ? "..." : a.name);
    }
  if (!reduces)
    diags.error(spec.range, fmt::format("the spec of '{}' keeps every axis: leave out of the result the axes "
                                        "to normalise over (\"b, t|d => b, t|\" normalises over d)", f));
  return reduces;
}

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
      // An optional spec string may be left out: layer_norm(x, 1e-6) is layer_norm(x, eps = 1e-6).
      while (i < sig.size() && sig[i].type == ArgType::Spec && !sig[i].required &&
             a.value->kind != ExprKind::String)
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
      } else if (s.type == ArgType::Choice) {
        out.strings[s.name] = s.choices.front();
      } else if ((s.type == ArgType::Int || s.type == ArgType::Number || s.type == ArgType::Bool) &&
                 s.default_text.empty()) {
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
          out.tensor_args.push_back(&s);
        }
        break;
      case ArgType::Bool: {  // true, false, or (as before there were booleans) a number: 0 is false
        std::optional<double> num = constant_value(*v, m.dims);
        if (v->kind == ExprKind::Name && (v->name == "true" || v->name == "false")) {
          out.values[s.name] = v->name == "true" ? 1 : 0;
        } else if (num) {
          out.values[s.name] = *num != 0 ? 1 : 0;
        } else {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be true or false", s.name, call.name));
          ok = false;
        }
        break;
      }
      case ArgType::Choice: {
        std::string values;
        for (size_t k = 0; k < s.choices.size(); ++k)
          values += (k ? (k + 1 == s.choices.size() ? " or " : ", ") : "") + ("\"" + s.choices[k] + "\"");
        if (v->kind != ExprKind::String) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be a string: {}", s.name, call.name, values));
          ok = false;
        } else if (std::find(s.choices.begin(), s.choices.end(), v->name) == s.choices.end()) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be {}, not \"{}\"", s.name, call.name,
                                            values, v->name));
          ok = false;
        } else {
          out.strings[s.name] = v->name;
        }
        break;
      }
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
        if (s.positive && value <= 0) {
          diags.error(v->range, fmt::format("argument '{}' of '{}' must be positive, not {}", s.name, call.name,
                                            value));
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
  if (ok && out.spec && (call.name == "softmax" || call.name == "log_softmax" || call.name == "layer_norm"))
    ok = normalisation_spec(*out.spec, call.name, diags);
  if (ok && out.spec && call.name == "einsum" && out.spec->operands.size() != out.tensors.size()) {
    diags.error(out.spec->range,
                fmt::format("the einsum spec has {} operand{} but {} tensor{} given",
                            out.spec->operands.size(), out.spec->operands.size() == 1 ? "" : "s",
                            out.tensors.size(), out.tensors.size() == 1 ? " is" : "s are"));
    ok = false;
  }
  return ok;
}

Model build_model(const Spec& spec, DiagEngine& diags, const std::map<std::string, long>& dim_overrides) {
  return Builder(spec, diags, dim_overrides).run();
}

std::vector<std::string> spec_dim_names(const Spec& spec) {
  std::vector<std::string> names;
  for (const Stmt& s : spec.stmts)
    if (s.kind == StmtKind::Dim) names.push_back(s.names[0].name);
  return names;
}

long written_size(const AxisSpec& a, const std::map<std::string, long>& dims) {
  switch (a.kind) {
    case AxisSpec::Size: return a.size;
    case AxisSpec::DimName: return dims.at(a.name);
    case AxisSpec::Product: {
      long n = 1;
      for (const AxisSpec& f : a.factors) n *= written_size(f, dims);
      return n;
    }
    default: return 1;
  }
}

const char* dtype_name(DType d) { return d == DType::Int32 ? "int32" : "float"; }

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
