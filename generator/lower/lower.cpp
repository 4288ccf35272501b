// lower.cpp — spec expressions to forward loop nests (see lower.h).
//
// The Lowerer walks the spec tensors in order and stores each one's value: pointwise
// sub-expressions inline, matrix products and the reductions of pointwise losses here, any
// other built-in through the lowering its op table row names (OpInfo::lower_call,
// lower/lowerings.h), which sees the Lowerer as a LowerContext (lower/lower_context.h).
#include "lower/lower.h"

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "ir/prims.h"
#include "lower/lower_context.h"
#include "lower/roll.h"
#include "lower/training_config.h"
#include "ops/op_table.h"
#include "support/diagnostic.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;

namespace {

class Lowerer final : public LowerContext {
public:
  Lowerer(const Model& m, const ShapeInfo& sh, const SourceFile& f, long max_batch)
      : m_(m), sh_(sh), file_(f), max_batch_(max_batch) {
    out_.prog.model = m.name;
    out_.prog.max_batch = max_batch;
  }

  Lowered run() {
    out_.tensor_buf.assign(m_.tensors.size(), -1);
    for (size_t i = 0; i < m_.tensors.size(); ++i) {
      const Tensor& t = m_.tensors[i];
      ir::Role role = t.kind == TensorKind::Input   ? ir::Role::Input
                      : t.kind == TensorKind::Param ? ir::Role::Param
                                                    : ir::Role::Computed;
      // A repeat block's instance NAME.INDEX: buffer NAME_INDEX (a C identifier; the
      // checkpoint keeps NAME.INDEX as the param's state_name).
      std::string bname = t.name;
      std::replace(bname.begin(), bname.end(), '.', '_');
      tensor_ = static_cast<int>(i);
      int b = new_buffer(bname, sh_.tensors[i], role);
      out_.prog.buffers[static_cast<size_t>(b)].tensor = static_cast<int>(i);
      out_.prog.buffers[static_cast<size_t>(b)].frozen = t.frozen;
      if (t.dtype == DType::Int32) out_.prog.buffers[static_cast<size_t>(b)].ids = kUnbounded;
      out_.prog.buffers[static_cast<size_t>(b)].shape = t.name + " : " + print_shape(sh_.tensors[i]);
      out_.tensor_buf[i] = b;
      if (t.kind != TensorKind::Computed) continue;
      base_ = out_.prog.buffers[static_cast<size_t>(b)].name;
      tensor_name_ = t.name;
      root_ = t.expr;
      line_ = static_cast<int>(file_.line_col(t.stmt->range.begin).line);
      what_ = one_line(file_.slice(t.stmt->range));
      materialise(t.expr, b);
    }
    tensor_ = -1;
    ir::Program& p = out_.prog;
    for (size_t i = 0; i < m_.tensors.size(); ++i) {
      const int b = out_.tensor_buf[i];
      if (m_.tensors[i].kind == TensorKind::Input) p.inputs.push_back(b);
      if (m_.tensors[i].kind == TensorKind::Param) {
        p.params.push_back(b);
        ir::Buffer& buf = p.buffers[static_cast<size_t>(b)];
        buf.state_name = m_.tensors[i].name;
        buf.init = param_init(m_, sh_, file_, static_cast<int>(i));
        buf.matrix = !sh_.tensors[i].row(AxisKind::Input).empty();
      }
    }
    p.opt = optimizer_config(m_, file_);
    for (int b : state_) p.params.push_back(b);  // checkpointed with the params, frozen
    for (int o : m_.outputs) p.outputs.push_back(out_.tensor_buf[static_cast<size_t>(o)]);
    for (int mt : m_.metrics) p.metrics.push_back(out_.tensor_buf[static_cast<size_t>(mt)]);
    if (m_.loss >= 0) p.loss = out_.tensor_buf[static_cast<size_t>(m_.loss)];  // inference-only specs have none
    for (const auto& [e, c] : m_.calls) {  // the range of each integer input (Buffer::ids)
      if (e->name == "embedding") bound_ids(c.tensors[1], shape(c.tensors[0]).row(AxisKind::Output).at(0).size);
      if ((e->name == "cross_entropy" || e->name == "accuracy" || e->name == "nll_loss") && m_.is_int(c.tensors[1]))
        bound_ids(c.tensors[1], shape(c.tensors[0]).row(AxisKind::Output).at(0).size);
    }
    return std::move(out_);
  }

  // ---- LowerContext -------------------------------------------------------------------------

  const Shape& shape(const Expr* e) const override { return sh_.of(e); }
  bool is_int(const Expr* e) const override { return m_.is_int(e); }
  long max_batch() const override { return max_batch_; }
  const ir::Buffer& buffer(int b) const override { return out_.prog.buffers[static_cast<size_t>(b)]; }
  int tensor_buffer(const Expr* e) const override {
    if (e->kind != ExprKind::Name) return -1;
    auto it = m_.index.find(e->name);
    return it == m_.index.end() ? -1 : out_.tensor_buf[static_cast<size_t>(it->second)];
  }

  ExprP value(const Expr* e, const IndexMap& map) override {
    const Shape& s = shape(e);
    auto child = [&](const Expr* c) { return value(c, align(s, map, shape(c))); };
    switch (e->kind) {
      case ExprKind::Number: return ir::cnst(e->number);
      case ExprKind::Name: {
        auto it = m_.index.find(e->name);
        if (it == m_.index.end()) {
          auto d = m_.dims.find(e->name);
          if (d == m_.dims.end()) CANNL_BUG("unknown name after resolution: " + e->name);
          return ir::cnst(static_cast<double>(d->second));
        }
        return ir::load({out_.tensor_buf[static_cast<size_t>(it->second)], map});
      }
      case ExprKind::Neg: return ir::unary(Op::Neg, child(e->operands[0].get()));
      case ExprKind::Add: return ir::binary(Op::Add, child(e->operands[0].get()), child(e->operands[1].get()));
      case ExprKind::Sub: return ir::binary(Op::Sub, child(e->operands[0].get()), child(e->operands[1].get()));
      case ExprKind::Mul: return ir::binary(Op::Mul, child(e->operands[0].get()), child(e->operands[1].get()));
      case ExprKind::Div: return ir::binary(Op::Div, child(e->operands[0].get()), child(e->operands[1].get()));
      case ExprKind::Pow: return ir::pow(child(e->operands[0].get()), *constant_value(*e->operands[1], m_.dims));
      case ExprKind::Index: {  // x[i]: index i of x's first output axis
        const Expr* x = e->operands[0].get();
        const Shape& xs = shape(x);
        IndexMap xm;
        for (const FlatAxis& a : flat(xs)) {
          if (a.kind != AxisKind::Output) xm.push_back(map[static_cast<size_t>(flat_index(s, a.kind, a.pos))]);
          else if (a.pos == 0) xm.push_back(Affine::constant(static_cast<long>(e->number)));
          else xm.push_back(map[static_cast<size_t>(flat_index(s, AxisKind::Output, a.pos - 1))]);
        }
        return value(x, xm);
      }
      case ExprKind::Call:
        if (e->name == "position") return ir::index_value(last_batch(s, map));
        if (positional_embedding(e)) {
          const Expr* table = call(e).tensors[0];
          return operand(table, table_map(s, map, shape(table), last_batch(s, map)));
        }
        if (const PointwiseLowering* lower = pointwise_call(e)) {
          std::vector<ExprP> x;
          for (const Expr* t : call(e).tensors) x.push_back(child(t));
          return (*lower)(x, call(e));
        }
        break;
      default: break;
    }
    return ir::load({materialise(e, -1), map});
  }

  ExprP operand(const Expr* e, const IndexMap& map) override {
    if (e->kind == ExprKind::Name || e->kind == ExprKind::Number) return value(e, map);
    return ir::load({materialise(e, -1), map});
  }

  int stored(const Expr* e, const char* what, const std::set<int>& avoid) override {
    int b = tensor_buffer(e);
    if (b < 0) b = materialise(e, done_.count(e) ? -1 : temp(what, shape(e)));
    if (!avoid.count(b)) return b;
    const int copy = temp(what, shape(e));
    Nest n;
    IndexMap id = loops_for(shape(e), n);
    emit(n, copy, id, ir::Accum::Set, ir::load({b, id}));
    return copy;
  }

  int temp(const std::string& suffix, const Shape& s) override {
    return new_buffer(base_ + "_" + suffix, s, ir::Role::Temp);
  }
  int temp_dims(const std::string& suffix, std::vector<ir::Dim> dims, std::string what) override {
    return new_buffer_dims(base_ + "_" + suffix, std::move(dims), ir::Role::Temp, std::move(what));
  }

  std::string state_prefix(const Expr* call) const override {
    std::vector<const Expr*> calls;  // the statement's calls of the same built-in, in source order
    std::function<void(const Expr*)> walk = [&](const Expr* e) {
      if (e->kind == ExprKind::Call && e->name == call->name) calls.push_back(e);
      for (const auto& o : e->operands) walk(o.get());
      for (const auto& a : e->args) walk(a.value.get());
    };
    walk(root_);
    if (calls.size() < 2) return tensor_name_;
    const long k = std::find(calls.begin(), calls.end(), call) - calls.begin();
    return fmt::format("{}.{}", tensor_name_, k + 1);
  }
  int state_param(const std::string& state_name, const Shape& s, double init) override {
    std::string cname = state_name;
    std::replace(cname.begin(), cname.end(), '.', '_');
    const int b = new_buffer(cname, s, ir::Role::Param);
    ir::Buffer& buf = out_.prog.buffers[static_cast<size_t>(b)];
    buf.frozen = true;
    buf.state_name = state_name;
    buf.shape = buf.state_name + " : " + print_shape(s);
    state_.push_back(b);
    out_.state_init.push_back({b, init});
    return b;
  }

  void emit(const Nest& n, int buf, IndexMap index, ir::Accum acc, ExprP body) override {
    ir::Stmt s = ir::nest(n.iters, {buf, std::move(index)}, acc, std::move(body));
    s.line = line_;
    s.what = what_;
    push(std::move(s));
  }
  void emit_call(ir::Call call) override {
    ir::Stmt s;
    s.call = std::move(call);
    s.line = line_;
    s.what = what_;
    push(std::move(s));
  }
  void set_phase(Phase phase) override { phase_ = phase; }
  void to_updates(bool on) override { to_updates_ = on; }
  long next_stream() override { return streams_++; }

private:
  static constexpr long kUnbounded = 2147483647;  // INT32_MAX: ids nothing bounds

  const Model& m_;
  const ShapeInfo& sh_;
  const SourceFile& file_;
  long max_batch_;
  Lowered out_;
  std::map<const Expr*, int> done_;
  std::string base_, what_;
  int line_ = 0;
  Phase phase_ = Phase::Both;  // of the nests emitted now
  bool to_updates_ = false;    // emit() appends to train_updates
  std::string tensor_name_;    // the spec tensor being lowered (NAME.INDEX in a repeat block)
  const Expr* root_ = nullptr; // and its expression
  long streams_ = 0;           // random streams handed out so far (dropout: one per call)
  std::vector<int> state_;     // the state params' buffers (batch_norm's running statistics), in order
  int tensor_ = -1;            // the spec tensor being lowered (Lowered::buffer_tensor, nest_tensor)

  // The inputs whose ids `ids` reads (through names of computed tensors and x[i]) must lie
  // in [0, n).
  void bound_ids(const Expr* ids, long n) {
    if (ids->kind == ExprKind::Index) return bound_ids(ids->operands[0].get(), n);
    if (ids->kind != ExprKind::Name) return;
    auto it = m_.index.find(ids->name);
    if (it == m_.index.end()) return;
    const Tensor& t = m_.tensors[static_cast<size_t>(it->second)];
    if (t.kind == TensorKind::Computed) return bound_ids(t.expr, n);
    long& b = out_.prog.buffers[static_cast<size_t>(out_.tensor_buf[static_cast<size_t>(it->second)])].ids;
    if (t.kind == TensorKind::Input && b > n) b = n;
  }

  static std::string one_line(std::string_view s) {
    std::string out;
    bool space = false;
    for (char c : s) {
      if (c == '\n' || c == '\t' || c == ' ' || c == '\r') {
        space = !out.empty();
        continue;
      }
      if (space) out += ' ';
      space = false;
      out += c;
    }
    return out;
  }

  int new_buffer(const std::string& name, const Shape& s, ir::Role role) {
    return new_buffer_dims(name, storage_dims(s, max_batch_), role, print_shape(s));
  }
  int new_buffer_dims(std::string name, std::vector<ir::Dim> dims, ir::Role role, std::string shape) {
    for (int i = 2; out_.prog.find(name) >= 0; ++i) name = fmt::format("{}{}", name, i);
    ir::Buffer b;
    b.name = name;
    b.dims = std::move(dims);
    b.role = role;
    b.shape = std::move(shape);
    out_.prog.buffers.push_back(std::move(b));
    out_.buffer_tensor.push_back(tensor_);
    return static_cast<int>(out_.prog.buffers.size()) - 1;
  }

  // Appends a nest to the forward nests in the current phase (or to the training step's updates).
  void push(ir::Stmt s) {
    if (to_updates_) {
      out_.train_updates.push_back(std::move(s));
      out_.update_tensor.push_back(tensor_);
      return;
    }
    out_.forward.push_back(std::move(s));
    out_.phase.push_back(phase_);
    out_.nest_tensor.push_back(tensor_);
  }

  const BoundCall& call(const Expr* e) const { return m_.calls.at(e); }

  // A pointwise built-in's lowering (its op table entry), or null. A loss reduced to a
  // scalar (reduction = "mean" or "sum") is not pointwise: lower_reduced stores it.
  const PointwiseLowering* pointwise_call(const Expr* e) const {
    const OpInfo* op = find_op(e->name);
    if (!op || !op->lower) return nullptr;
    auto r = call(e).strings.find("reduction");
    return r == call(e).strings.end() || r->second == "none" ? &op->lower : nullptr;
  }
  bool is_pointwise(const Expr* e) const {
    switch (e->kind) {
      case ExprKind::Number: case ExprKind::Name: case ExprKind::Neg: case ExprKind::Add:
      case ExprKind::Sub: case ExprKind::Mul: case ExprKind::Div: case ExprKind::Pow: case ExprKind::Index:
        return true;
      case ExprKind::Call:
        return pointwise_call(e) != nullptr || e->name == "position" || positional_embedding(e);
      default: return false;
    }
  }
  // embedding(table, position(x)): row t of the table at position t, an affine read.
  bool positional_embedding(const Expr* e) const {
    return e->kind == ExprKind::Call && e->name == "embedding" && call(e).tensors[1]->kind == ExprKind::Call &&
           call(e).tensors[1]->name == "position";
  }
  // The index (in `map`, over shape s) of s's last batch axis: the position (contract v1 §3).
  static Affine last_batch(const Shape& s, const IndexMap& map) {
    const int nb = static_cast<int>(s.row(AxisKind::Batch).size());
    if (nb < 1) CANNL_BUG("position of a value without batch axes");
    return map[static_cast<size_t>(flat_index(s, AxisKind::Batch, nb - 1))];
  }
  // The read of table [d.. -> n] (stored [n, d..]) at `row` for a result [B.. | d..] at `map`.
  static IndexMap table_map(const Shape& rs, const IndexMap& map, const Shape& ts, Affine row) {
    IndexMap tm = {std::move(row)};
    const int nd = static_cast<int>(ts.row(AxisKind::Input).size());
    for (int k = 0; k < nd; ++k) tm.push_back(map[static_cast<size_t>(flat_index(rs, AxisKind::Output, k))]);
    return tm;
  }

  // Stores the value of `e` in buffer `target` (or a new temporary) and returns the buffer.
  int materialise(const Expr* e, int target) {
    if (auto it = done_.find(e); it != done_.end()) return it->second;
    const Shape& s = shape(e);
    auto out = [&](const std::string& suffix) { return target >= 0 ? target : temp(suffix, s); };
    int b = -1;
    if (is_pointwise(e)) {
      b = out("v");
      Nest n;
      IndexMap id = loops_for(s, n);
      emit(n, b, id, ir::Accum::Set, value(e, id));
    } else if (e->kind == ExprKind::MatMul) {
      b = out("mm");
      lower_matmul(e, b);
    } else if (e->kind == ExprKind::Call) {
      const BoundCall& c = call(e);
      const OpInfo* op = find_op(e->name);
      if (!op || (!op->lower && !op->lower_call)) CANNL_BUG("no lowering for built-in " + e->name);
      b = out(op->temp_suffix.empty() ? op->name : op->temp_suffix);
      if (op->lower)  // a pointwise loss reduced to a scalar
        lower_reduced(c, op->lower, c.strings.at("reduction") == "mean", b);
      else
        op->lower_call(*this, c, b);
    } else {
      CANNL_BUG("no lowering for this expression");
    }
    if (m_.is_int(e)) out_.prog.buffers[static_cast<size_t>(b)].ids = kUnbounded;
    done_[e] = b;
    return b;
  }

  // a * b: contracts a's input axes with b's output axes; batch axes broadcast.
  void lower_matmul(const Expr* e, int r) {
    const Expr* a = e->operands[0].get();
    const Expr* b = e->operands[1].get();
    const Shape &rs = shape(e), &as = shape(a), &bs = shape(b);
    Nest n;
    IndexMap rmap = loops_for(rs, n);
    std::vector<std::string> rnames;
    for (const auto& it : n.iters) rnames.push_back(it.name);
    fill_buffer(r, 0, rnames);
    std::vector<Affine> contracted;
    const auto& arow = as.row(AxisKind::Input);
    for (size_t k = 0; k < arow.size(); ++k)
      contracted.push_back(Affine::of(n.add(arow.size() > 1 ? fmt::format("k{}", k) : "k", arow[k].size, false)));
    auto map_for = [&](const Shape& os, bool is_a) {
      IndexMap m;
      for (const FlatAxis& fa : flat(os)) {
        if (fa.kind == AxisKind::Batch) {
          m.push_back(aligned(rs, rmap, os, fa));
        } else if ((fa.kind == AxisKind::Input) == is_a) {
          m.push_back(contracted[static_cast<size_t>(fa.pos)]);
        } else {
          AxisKind rk = is_a ? AxisKind::Output : AxisKind::Input;
          m.push_back(rmap[static_cast<size_t>(flat_index(rs, rk, fa.pos))]);
        }
      }
      return m;
    };
    ExprP body = ir::binary(Op::Mul, operand(a, map_for(as, true)), operand(b, map_for(bs, false)));
    emit(n, r, rmap, ir::Accum::Add, body);
  }

  // The shape the operands of a pointwise call broadcast to (each kind of axes aligned from
  // the right, a size-1 axis taking the other's size).
  Shape broadcast_shape(const std::vector<const Expr*>& xs) const {
    Shape out = shape(xs[0]);
    for (size_t i = 1; i < xs.size(); ++i) {
      const Shape& o = shape(xs[i]);
      for (AxisKind k : kStorageOrder) {
        const auto& a = out.row(k);
        const auto& b = o.row(k);
        std::vector<Axis> row = a.size() >= b.size() ? a : b;
        const auto& shorter = a.size() >= b.size() ? b : a;
        for (size_t j = 0; j < shorter.size(); ++j) {
          Axis& x = row[row.size() - shorter.size() + j];
          if (!x.is_batch && x.size == 1) x = shorter[j];
        }
        out.row(k) = row;
      }
    }
    return out;
  }

  // A pointwise loss reduced over every element of its operands' broadcast (the mean or sum).
  void lower_reduced(const BoundCall& c, const PointwiseLowering& lower, bool mean, int r) {
    const Shape es = broadcast_shape(c.tensors);
    fill_buffer(r, 0);
    Nest n;
    IndexMap id = loops_for(es, n);
    std::vector<ExprP> x;
    for (const Expr* t : c.tensors) x.push_back(value(t, align(es, id, shape(t))));
    ExprP v = lower(x, c);
    if (mean) {
      std::vector<int> all;
      for (size_t i = 0; i < n.iters.size(); ++i) all.push_back(static_cast<int>(i));
      v = ir::binary(Op::Div, v, count_of(n, all));
    }
    emit(n, r, {}, ir::Accum::Add, v);
  }
};

}  // namespace

std::vector<ir::Dim> storage_dims(const Shape& s, long max_batch) {
  std::vector<ir::Dim> dims;
  for (const FlatAxis& a : flat(s)) dims.push_back({a.axis.is_batch ? max_batch : a.axis.size, a.axis.is_batch});
  return dims;
}

Lowered lower_forward(const Model& m, const ShapeInfo& shapes, const SourceFile& file, long max_batch, bool roll) {
  Lowered low = Lowerer(m, shapes, file, max_batch).run();
  if (roll) roll_blocks(low, m, file);
  return low;
}

}  // namespace cannl
