#include "shapes/infer.h"

#include <fmt/format.h>

#include <set>

#include "shapes/shape_context.h"

namespace cannl {

void ShapeContext::same_shape(const Expr* x, const std::string& verb) {
  Origin o = origin(verb, {x});
  for (int k = 0; k < 3; ++k)
    solver().equal_rows(result().rows[k], shape(x).rows[k], o,
                        fmt::format("the result keeps the {} axes", axis_kind_name(AxisKind(k))));
}

void ShapeContext::scalar_result() {
  for (RowT& r : result().rows) r = RowT::closed({});
}

// Whether the operands' rows that are closed by now have as many axes as the spec's parts
// (at least as many where the part has '...'). Open rows are no evidence either way.
bool ShapeContext::fits(const EinsumSpec& spec, const std::vector<const Expr*>& operands) {
  for (size_t i = 0; i < operands.size() && i < spec.operands.size(); ++i) {
    for (int k = 0; k < 3; ++k) {
      RowT row = solver().resolve(shape(operands[i]).rows[k]);
      if (!row.is_closed()) continue;
      size_t named = 0;
      bool ellipsis = false;
      for (const EinAxis& a : spec.operands[i].parts[k]) {
        if (a.kind == EinAxis::Ellipsis) ellipsis = true;
        else ++named;
      }
      if (ellipsis ? row.known_len() < named : row.known_len() != named) return false;
    }
  }
  return true;
}

void ShapeContext::einsum(const EinsumSpec& spec, const std::vector<const Expr*>& operands,
                          const std::string& verb) {
  ShapeT res = einsum_result(spec, operands, verb);
  Origin o = origin(verb, operands);
  for (int k = 0; k < 3; ++k)
    solver().equal_rows(result().rows[k], res.rows[k], o, "the result must match the spec");
}

ShapeT ShapeContext::einsum_result(const EinsumSpec& given, const std::vector<const Expr*>& operands,
                                   const std::string& verb) {
  // "b|inp->out" is axes i, n, p -> o, u, t by letters, or inp -> out by words (einsum.h):
  // the letters win unless the shapes known here rule them out and fit the words.
  const EinsumSpec* chosen = &given;
  if (given.words && !fits(given, operands) && fits(*given.words, operands)) {
    chosen = given.words.get();
    use_reading(*chosen);
  }
  const EinsumSpec& spec = *chosen;
  Solver& s = solver();
  Origin o = origin(verb, operands);
  std::map<std::string, DimT> names;
  std::array<int, 3> ellipsis{-1, -1, -1};
  auto dim = [&](const std::string& n) {
    auto it = names.find(n);
    if (it != names.end()) return it->second;
    return names[n] = s.fresh_dim();
  };
  auto build = [&](const EinOperand& op) {
    ShapeT sh;
    for (int k = 0; k < 3; ++k) {
      RowT row;
      bool after = false;
      for (const EinAxis& a : op.parts[k]) {
        DimT d;
        switch (a.kind) {
          case EinAxis::Ellipsis:
            if (ellipsis[k] < 0) ellipsis[k] = s.fresh_row().var;
            row.var = ellipsis[k];
            after = true;
            continue;
          case EinAxis::Name:
            d = dim(a.name);
            break;
          case EinAxis::Offset: {  // v+c: v's size; the runner's batch axis is not shifted
            d = dim(a.name);
            const std::string text = a.name;
            check_after_solving(o, [&s, d, text]() -> std::string {
              if (s.resolve(d).kind != DimT::Batch) return "";
              return fmt::format("the index expression on '{}' shifts the batch axis: the examples of a batch are "
                                 "independent, so an offset may shift any axis but that one", text);
            });
            break;
          }
          case EinAxis::Affine: {
            d = s.fresh_dim();
            std::optional<DimT> kernel;
            if (!a.kernel.empty()) kernel = dim(a.kernel);
            s.affine(d, a.stride, dim(a.name), kernel, a.padding, o);
            break;
          }
        }
        (after ? row.right : row.left).push_back(d);
      }
      if (row.var < 0) row = RowT::closed(row.left);  // a closed row keeps its axes in `right`
      sh.rows[k] = row;
    }
    return sh;
  };
  auto part_text = [](const EinOperand& op, int k) {
    std::string t;
    for (const EinAxis& a : op.parts[k]) t += (t.empty() ? "" : ",") + (a.kind == EinAxis::Ellipsis ? "..." : a.name);
    return t;
  };
  for (size_t i = 0; i < operands.size() && i < spec.operands.size(); ++i) {
    ShapeT want = build(spec.operands[i]);
    for (int k = 0; k < 3; ++k)
      s.equal_rows(shape(operands[i]).rows[k], want.rows[k], o,
                   fmt::format("the {} axes of {} must match \"{}\" in the spec",
                               axis_kind_name(AxisKind(k)), name_of(operands[i]),
                               part_text(spec.operands[i], k)));
  }
  return build(spec.result);
}

namespace {

class Inferrer final : public ShapeContext {
public:
  Inferrer(const Model& m, const SourceFile& f, DiagEngine& d)
      : m_(m), file_(f), diags_(d),
        solver_([this](const Origin& o, const std::string& detail) { report(o, detail); }) {}

  ShapeInfo run() {
    for (size_t i = 0; i < m_.tensors.size(); ++i) {
      const Tensor& t = m_.tensors[i];
      current_tensor_ = static_cast<int>(i);
      tensor_shapes_.push_back(declared(t));
      if (t.kind == TensorKind::Computed) {
        ShapeT& e = walk(t.expr);
        Origin o{t.decl, [&t] {
                   return fmt::format("the definition of '{}'", t.name);
                 }};
        for (int k = 0; k < 3; ++k)
          solver_.equal_rows(tensor_shapes_[i].rows[k], e.rows[k], o, "internal: tensor and expression differ");
      }
    }
    solver_.solve([this] {
      std::vector<ShapeT> out;
      for (size_t i = 0; i < m_.tensors.size(); ++i)
        if (m_.tensors[i].kind != TensorKind::Computed) out.push_back(tensor_shapes_[i]);
      return out;
    });
    return finish();
  }

  Solver& solver() override { return solver_; }
  ShapeT& shape(const Expr* e) override { return expr_shapes_.at(e); }
  ShapeT& result() override { return expr_shapes_.at(current_); }
  std::string name_of(const Expr* e) override {
    std::string text;
    for (char c : file_.slice(e->range)) {
      if (c == '\n' || c == '\t' || c == '\r') c = ' ';
      if (c == ' ' && !text.empty() && text.back() == ' ') continue;
      text += c;
    }
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return "'" + text + "'";
  }
  void use_reading(const EinsumSpec& chosen) override { readings_[current_] = &chosen; }
  bool is_int(const Expr* e) override { return m_.is_int(e); }
  void check_after_solving(Origin o, std::function<std::string()> check) override {
    after_solving_.push_back({std::move(o), std::move(check)});
  }
  void explain_free(const Expr* e, AxisKind kind, std::string why) override {
    if (e->kind != ExprKind::Name) return;
    auto it = m_.index.find(e->name);
    if (it != m_.index.end() && m_.tensors[it->second].kind == TensorKind::Param)
      free_advice_[{it->second, static_cast<int>(kind)}] = std::move(why);
  }
  const std::map<const Expr*, const EinsumSpec*>& readings() const { return readings_; }
  Origin origin(const std::string& verb, const std::vector<const Expr*>& operands) override {
    const Expr* at = current_;
    return Origin{at->op_range, [this, verb, operands] {
                    std::string s = verb;
                    for (size_t i = 0; i < operands.size(); ++i) {
                      s += i == 0 ? " " : (i + 1 == operands.size() ? " and " : ", ");
                      s += name_of(operands[i]) + " : " + solver_.print(shape(operands[i]));
                    }
                    return s;
                  },
                  current_tensor_};
  }

private:
  void report(const Origin& o, const std::string& detail) {
    std::string msg = o.describe() + ": " + detail;
    // The same fault twice, or a second fault of a call that already failed: the first
    // leaves the call's axes unsolved, and what follows from them (a window larger than a
    // dropped axis) only restates it.
    std::string prefix = o.describe() + ": ";
    for (const Diagnostic& d : diags_.all())
      if (d.range.begin == o.at.begin && d.message.compare(0, prefix.size(), prefix) == 0) return;
    // Nor is a statement that reads a tensor whose definition failed (u = x + y failed; then
    // v = u + y would fail for the shape u was left with, not for a mistake of its own).
    if (o.tensor >= 0) {
      if (reads_failed(m_.tensors[static_cast<size_t>(o.tensor)].expr)) return;
      failed_.insert(o.tensor);
    }
    Diagnostic& d = diags_.error(o.at, msg);
    if (o.tensor >= 0) note_instance(d, m_.tensors[static_cast<size_t>(o.tensor)]);
    if (o.hint)
      if (std::string h = o.hint(); !h.empty()) DiagEngine::note(d, o.at, h);
  }
  bool reads_failed(const Expr* e) const {
    if (!e) return false;
    if (e->kind == ExprKind::Name)
      if (auto it = m_.index.find(e->name); it != m_.index.end() && failed_.count(it->second)) return true;
    for (const ExprPtr& x : e->operands)
      if (reads_failed(x.get())) return true;
    for (const Arg& a : e->args)
      if (reads_failed(a.value.get())) return true;
    return false;
  }
  // The repeat-block instance a diagnostic comes from (its statements share their source).
  void note_instance(Diagnostic& d, const Tensor& t) {
    if (!t.block) return;
    long count = 0;
    for (const Tensor& x : m_.tensors)
      if (x.block == t.block && x.instance + 1 > count) count = x.instance + 1;
    DiagEngine::note(d, t.block->range, fmt::format("in instance {} (of {}) of this repeat block", t.instance, count));
  }

  RowT written_part(const std::vector<AxisSpec>& axes) {
    RowT row;
    bool after = false;
    for (const AxisSpec& a : axes) {
      switch (a.kind) {
        case AxisSpec::Size:
        case AxisSpec::DimName:
        case AxisSpec::Product:
          (after ? row.right : row.left).push_back(DimT::known(written_size(a, m_.dims)));
          break;
        case AxisSpec::Wildcard: (after ? row.right : row.left).push_back(solver_.fresh_dim()); break;
        case AxisSpec::RowVar:
          row.var = solver_.fresh_row().var;
          after = true;
          break;
      }
    }
    if (row.var < 0) row = RowT::closed(row.left);
    return row;
  }

  ShapeT declared(const Tensor& t) {
    ShapeT s;
    switch (t.kind) {
      case TensorKind::Input: {  // the runner's batch axis, then the declared ones
        s.rows[0] = written_part(t.shape->parts[0]);
        std::vector<DimT>& leading = s.rows[0].is_closed() ? s.rows[0].right : s.rows[0].left;
        leading.insert(leading.begin(), DimT::batch());
        s.rows[1] = written_part(t.shape->parts[1]);
        s.rows[2] = written_part(t.shape->parts[2]);
        break;
      }
      case TensorKind::Param:
        s.rows[0] = RowT::closed({});
        if (t.shape) {
          s.rows[1] = written_part(t.shape->parts[1]);
          s.rows[2] = written_part(t.shape->parts[2]);
        } else {
          s.rows[1] = solver_.fresh_row();
          s.rows[2] = solver_.fresh_row();
        }
        break;
      case TensorKind::Computed:
        for (RowT& r : s.rows) r = solver_.fresh_row();
        break;
    }
    return s;
  }

  ShapeT scalar() { return ShapeT{{RowT::closed({}), RowT::closed({}), RowT::closed({})}}; }
  ShapeT fresh() { return ShapeT{{solver_.fresh_row(), solver_.fresh_row(), solver_.fresh_row()}}; }

  bool is_constant(const Expr* e) const {
    return e->kind == ExprKind::Number || (e->kind == ExprKind::Name && m_.dims.count(e->name));
  }

  ShapeT& walk(const Expr* e) {
    for (const auto& o : e->operands) walk(o.get());
    for (const Arg& a : e->args)
      if (a.value->kind != ExprKind::String) walk(a.value.get());
    const Expr* saved = current_;
    current_ = e;
    ShapeT& r = expr_shapes_[e];
    switch (e->kind) {
      case ExprKind::Number:
      case ExprKind::String:
        r = scalar();
        break;
      case ExprKind::Name:
        if (auto it = m_.index.find(e->name); it != m_.index.end()) r = tensor_shapes_[it->second];
        else r = scalar();
        break;
      case ExprKind::Neg:
      case ExprKind::Pow:
        r = fresh();
        same_shape(e->operands[0].get(), e->kind == ExprKind::Neg ? "negating" : "raising");
        break;
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Div: {
        r = fresh();
        const Expr* a = e->operands[0].get();
        const Expr* b = e->operands[1].get();
        const char* verb = e->kind == ExprKind::Add   ? "cannot add"
                           : e->kind == ExprKind::Sub ? "cannot subtract"
                           : e->kind == ExprKind::Mul ? "cannot multiply pointwise"
                                                      : "cannot divide";
        Origin o = origin(verb, {a, b});
        for (int k = 0; k < 3; ++k)
          solver_.broadcast(r.rows[k], {shape(a).rows[k], shape(b).rows[k]}, o,
                            axis_kind_name(AxisKind(k)));
        break;
      }
      case ExprKind::MatMul: {
        r = fresh();
        const Expr* a = e->operands[0].get();
        const Expr* b = e->operands[1].get();
        // A number in a matrix product takes whatever shape the contraction needs (OCANNL).
        if (is_constant(a)) expr_shapes_[a] = ShapeT{{RowT::closed({}), solver_.fresh_row(), solver_.fresh_row()}};
        if (is_constant(b)) expr_shapes_[b] = ShapeT{{RowT::closed({}), solver_.fresh_row(), solver_.fresh_row()}};
        Origin o = origin("cannot multiply (matrix product)", {a, b});
        // Nothing of a's to contract: most likely PyTorch's `*` (pointwise) was meant.
        o.hint = [this, a]() -> std::string {
          RowT in = solver_.resolve(shape(a).row(AxisKind::Input));
          if (!in.left.empty() || !in.right.empty() || in.var >= 0) return "";
          return "'*' is the matrix product in cannl (PyTorch's '@'); for the pointwise product (PyTorch's '*') "
                 "write '*.', e.g. x *. y";
        };
        solver_.equal_rows(shape(a).row(AxisKind::Input), shape(b).row(AxisKind::Output), o,
                           fmt::format("the input axes of {} must equal the output axes of {}",
                                       name_of(a), name_of(b)));
        solver_.broadcast(r.row(AxisKind::Batch),
                          {shape(a).row(AxisKind::Batch), shape(b).row(AxisKind::Batch)}, o, "batch");
        solver_.equal_rows(r.row(AxisKind::Input), shape(b).row(AxisKind::Input), o, "input axes");
        solver_.equal_rows(r.row(AxisKind::Output), shape(a).row(AxisKind::Output), o, "output axes");
        break;
      }
      case ExprKind::Call: {
        r = fresh();
        const OpInfo* op = find_op(e->name);
        auto it = m_.calls.find(e);
        if (op && it != m_.calls.end()) op->shape(*this, it->second);
        break;
      }
      case ExprKind::Index:
        r = fresh();
        index(e);
        break;
    }
    current_ = saved;
    return expr_shapes_[e];
  }

  // x[i]: drops x's first output axis, which must have more than i entries. x[a:b] keeps it,
  // of size b - a, and it must have at least b.
  void index(const Expr* e) {
    const Expr* x = e->operands[0].get();
    const bool slice = e->slice_end > 0;
    Origin o = origin(slice ? "cannot slice" : "cannot index", {x});
    DimT first = solver_.fresh_dim();
    RowT rest = solver_.fresh_row();
    solver_.equal_rows(shape(x).row(AxisKind::Output), RowT{{first}, rest.var, {}}, o,
                       slice ? fmt::format("{} needs an output axis to slice (x[a:b] slices the first one)", name_of(x))
                             : fmt::format("{} needs an output axis to index (x[i] indexes the first one)", name_of(x)));
    ShapeT& r = expr_shapes_[e];
    for (AxisKind k : {AxisKind::Batch, AxisKind::Input}) r.row(k) = shape(x).row(k);
    r.row(AxisKind::Output) = slice ? RowT{{DimT::known(e->slice_end - static_cast<long>(e->number))}, rest.var, {}} : rest;
    long i = static_cast<long>(e->number);
    const long end = e->slice_end;
    const std::string counter = e->name;  // the instance index, if any
    check_after_solving(o, [this, first, i, end, counter, x]() -> std::string {
      DimT d = solver_.resolve(first);
      const char* what = end > 0 ? "sliced" : "indexed";
      if (d.kind == DimT::Batch)
        return fmt::format("the first output axis of {} is the batch axis, which cannot be {}", name_of(x), what);
      if (d.kind != DimT::Known) return "";
      if (end > d.size)
        return fmt::format("slice {}:{} is out of range: the first output axis of {} has size {} (a slice a:b needs "
                           "b <= {})", i, end, name_of(x), d.size, d.size);
      if (end == 0 && !counter.empty() && i == d.size)  // reported once, by the first instance out of range
        return fmt::format("the instance index {} reaches {}, out of range: the first output axis of {} has size {} "
                           "(indices 0 to {}); the block repeats more often than {} has rows", counter, i, name_of(x),
                           d.size, d.size - 1, name_of(x));
      if (end == 0 && counter.empty() && i >= d.size)
        return fmt::format("index {} is out of range: the first output axis of {} has size {} (indices 0 to {})", i,
                           name_of(x), d.size, d.size - 1);
      return "";
    });
  }

  Shape concrete(const ShapeT& s, bool* free) {
    Shape out;
    for (int k = 0; k < 3; ++k) {
      RowT r = solver_.resolve(s.rows[k]);
      if (!r.is_closed()) *free = true;
      for (const DimT& d : r.left) out.rows[k].push_back(axis(d, free));
      for (const DimT& d : r.right) out.rows[k].push_back(axis(d, free));
    }
    return out;
  }
  Axis axis(const DimT& d, bool* free) {
    switch (d.kind) {
      case DimT::Known: return Axis{d.size, false};
      case DimT::Batch: return Axis{0, true};
      case DimT::Var: *free = true; return Axis{1, false};
    }
    return {};
  }

  // One error per param/input whose axes nothing constrains, naming every free part (once
  // for all the instances of a repeat block).
  void report_free(size_t idx, const Tensor& t, const ShapeT& s) {
    std::vector<std::string> parts;
    std::string how;
    for (int k = 1; k < 3; ++k) {
      if (!solver_.is_free(s.rows[k])) continue;
      parts.push_back(fmt::format("its {} axes {}", axis_kind_name(AxisKind(k)), solver_.print(s.rows[k])));
      if (auto it = free_advice_.find({static_cast<int>(idx), k}); it != free_advice_.end()) how = it->second;
    }
    if (parts.empty()) return;
    for (const Diagnostic& d : diags_.all())
      if (t.block && d.range.begin == t.decl.begin) return;
    if (how.empty())
      how = t.kind == TensorKind::Param
                ? fmt::format("write them in its declaration, e.g. 'param {} : [784 -> 512]'",
                              diags_.file().slice(t.decl))
                : "write every axis size of an input";
    Diagnostic& d = diags_.error(t.decl, fmt::format("cannot infer the shape of {} '{}': nothing constrains {} "
                                                     "('_' is an unknown size, '..' unknown axes); {}",
                                                     tensor_kind_name(t.kind), t.name,
                                                     parts.size() == 2 ? parts[0] + " and " + parts[1] : parts[0],
                                                     how));
    note_instance(d, t);
  }

  ShapeInfo finish() {
    ShapeInfo info;
    for (const auto& [o, check] : after_solving_)
      if (std::string detail = check(); !detail.empty()) report(o, detail);
    for (size_t i = 0; i < m_.tensors.size(); ++i) {
      const Tensor& t = m_.tensors[i];
      bool free = false;
      info.tensors.push_back(concrete(tensor_shapes_[i], &free));
      if (!free) continue;
      if (t.kind != TensorKind::Computed) report_free(i, t, tensor_shapes_[i]);
      else if (!diags_.has_errors())  // free only through a param or input reported above
        CANNL_INTERNAL(diags_, t.decl, fmt::format("'{}' still has free axes after defaulting", t.name));
    }
    for (auto& [e, s] : expr_shapes_) {
      bool free = false;
      info.exprs[e] = concrete(s, &free);
    }
    if (diags_.has_errors()) return info;
    if (m_.loss >= 0 && !info.tensors[m_.loss].is_scalar()) {
      const Tensor& t = m_.tensors[m_.loss];
      diags_.error(m_.loss_range,
                   fmt::format("the loss '{}' must be a scalar [], but it is {}; reduce it, e.g. "
                               "mean({})", t.name, print_shape(info.tensors[m_.loss]), t.name));
    }
    for (int idx : m_.metrics) {
      const Tensor& t = m_.tensors[idx];
      if (!info.tensors[idx].is_scalar())
        diags_.error(t.decl, fmt::format("metric '{}' must be a scalar [], but it is {}; reduce it, "
                                         "e.g. mean(...)", t.name, print_shape(info.tensors[idx])));
    }
    return info;
  }

  const Model& m_;
  const SourceFile& file_;
  DiagEngine& diags_;
  Solver solver_;
  std::vector<ShapeT> tensor_shapes_;
  std::map<const Expr*, ShapeT> expr_shapes_;
  const Expr* current_ = nullptr;
  std::set<int> failed_;  // tensors whose definition had a shape error
  int current_tensor_ = -1;  // the tensor whose definition is being walked
  std::map<const Expr*, const EinsumSpec*> readings_;  // calls whose spec is read as words
  std::vector<std::pair<Origin, std::function<std::string()>>> after_solving_;
  std::map<std::pair<int, int>, std::string> free_advice_;  // (param, axis kind) -> explain_free
};

}  // namespace

ShapeInfo infer_shapes(Model& m, const SourceFile& file, DiagEngine& diags) {
  Inferrer inferrer(m, file, diags);
  ShapeInfo info = inferrer.run();
  for (const auto& [call, spec] : inferrer.readings()) m.calls.at(call).spec = spec;
  return info;
}

}  // namespace cannl
