// lower.cpp — spec expressions to forward loop nests (see lower.h).
#include "lower/lower.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "ir/prims.h"
#include "lower/training_config.h"
#include "ops/op_table.h"
#include "support/diagnostic.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;
using Map = std::vector<Affine>;  // one index per storage dim of a value's shape

namespace {

struct FlatAxis {
  AxisKind kind;
  int pos;  // within its row
  Axis axis;
};

constexpr AxisKind kStorageOrder[3] = {AxisKind::Batch, AxisKind::Output, AxisKind::Input};

std::vector<FlatAxis> flat(const Shape& s) {
  std::vector<FlatAxis> out;
  for (AxisKind k : kStorageOrder) {
    const auto& row = s.row(k);
    for (size_t i = 0; i < row.size(); ++i) out.push_back({k, static_cast<int>(i), row[i]});
  }
  return out;
}

// Position of (kind, pos) in storage order.
int flat_index(const Shape& s, AxisKind kind, int pos) {
  int base = 0;
  for (AxisKind k : kStorageOrder) {
    if (k == kind) return base + pos;
    base += static_cast<int>(s.row(k).size());
  }
  return -1;
}

const char* kind_letter(AxisKind k) { return k == AxisKind::Batch ? "b" : k == AxisKind::Output ? "o" : "i"; }

// The loops of one nest under construction.
struct Nest {
  std::vector<ir::Iter> iters;
  int add(const std::string& base, long size, bool batch) {
    static const std::set<std::string> reserved = {"n", "m", "in", "out", "lr", "step", "acc", "bc1",
                                                    "bc2", "rng", "real", "int", "for", "do", "if"};
    std::string name = base;
    auto taken = [&](const std::string& s) {
      if (reserved.count(s)) return true;
      for (const auto& it : iters)
        if (it.name == s) return true;
      return false;
    };
    for (int i = 1; taken(name); ++i) name = fmt::format("{}{}", base, i);
    iters.push_back({name, size, batch});
    return static_cast<int>(iters.size()) - 1;
  }
};

class Lowerer {
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
      int b = new_buffer(bname, sh_.tensors[i], role);
      out_.prog.buffers[static_cast<size_t>(b)].tensor = static_cast<int>(i);
      out_.prog.buffers[static_cast<size_t>(b)].frozen = t.frozen;
      if (t.dtype == DType::Int32) out_.prog.buffers[static_cast<size_t>(b)].ids = kUnbounded;
      out_.prog.buffers[static_cast<size_t>(b)].shape = t.name + " : " + print_shape(sh_.tensors[i]);
      out_.tensor_buf[i] = b;
      if (t.kind != TensorKind::Computed) continue;
      base_ = out_.prog.buffers[static_cast<size_t>(b)].name;
      tensor_name_ = t.name;
      number_batch_norms(t.expr);
      line_ = static_cast<int>(file_.line_col(t.stmt->range.begin).line);
      what_ = one_line(file_.slice(t.stmt->range));
      materialise(t.expr, b);
    }
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
    for (int b : bn_state_) p.params.push_back(b);  // checkpointed with the params, frozen
    for (int o : m_.outputs) p.outputs.push_back(out_.tensor_buf[static_cast<size_t>(o)]);
    for (int mt : m_.metrics) p.metrics.push_back(out_.tensor_buf[static_cast<size_t>(mt)]);
    p.loss = out_.tensor_buf[static_cast<size_t>(m_.loss)];
    for (const auto& [e, c] : m_.calls) {  // the range of each integer input (Buffer::ids)
      if (e->name == "embedding") bound_ids(c.tensors[1], shape(c.tensors[0]).row(AxisKind::Output).at(0).size);
      if ((e->name == "cross_entropy" || e->name == "accuracy" || e->name == "nll_loss") && m_.is_int(c.tensors[1]))
        bound_ids(c.tensors[1], shape(c.tensors[0]).row(AxisKind::Output).at(0).size);
    }
    return std::move(out_);
  }

private:
  static constexpr long kUnbounded = 2147483647;  // INT32_MAX: ids nothing bounds

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
  std::map<const Expr*, int> bn_number_;  // its statement's batch_norm calls: 1, 2, ... (none: one)
  int dropouts_ = 0;           // dropout calls lowered so far: each draws its own stream
  std::vector<int> bn_state_;  // the running statistics' buffers, in order

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

  const Shape& shape(const Expr* e) const { return sh_.of(e); }

  // Numbers the batch_norm calls of a statement's expression in source order when there are
  // several (their state is NAME.1.running_mean, ...); one alone is NAME.running_mean.
  void number_batch_norms(const Expr* root) {
    bn_number_.clear();
    std::vector<const Expr*> calls;
    std::function<void(const Expr*)> walk = [&](const Expr* e) {
      if (e->kind == ExprKind::Call && e->name == "batch_norm") calls.push_back(e);
      for (const auto& o : e->operands) walk(o.get());
      for (const auto& a : e->args) walk(a.value.get());
    };
    walk(root);
    if (calls.size() > 1)
      for (size_t i = 0; i < calls.size(); ++i) bn_number_[calls[i]] = static_cast<int>(i) + 1;
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
    return static_cast<int>(out_.prog.buffers.size()) - 1;
  }
  int temp(const std::string& suffix, const Shape& s) {
    return new_buffer(base_ + "_" + suffix, s, ir::Role::Temp);
  }

  void emit(const Nest& n, int buf, Map index, ir::Accum acc, ExprP body) {
    ir::Stmt s = ir::nest(n.iters, {buf, std::move(index)}, acc, std::move(body));
    s.line = line_;
    s.what = what_;
    push(std::move(s));
  }
  // Appends a nest to the forward nests in the current phase (or to the training step's updates).
  void push(ir::Stmt s) {
    if (to_updates_) {
      out_.train_updates.push_back(std::move(s));
      return;
    }
    out_.forward.push_back(std::move(s));
    out_.phase.push_back(phase_);
  }

  // A nest with one loop per storage axis of `s`; returns the identity map.
  Map loops_for(const Shape& s, Nest& n, const std::vector<std::string>& names = {}) {
    Map map;
    std::map<AxisKind, int> seen;
    for (const FlatAxis& a : flat(s)) {
      int k = seen[a.kind]++;
      std::string base = static_cast<size_t>(map.size()) < names.size()
                             ? names[map.size()]
                             : (s.row(a.kind).size() > 1 ? fmt::format("{}{}", kind_letter(a.kind), k)
                                                         : kind_letter(a.kind));
      map.push_back(Affine::of(n.add(base, a.axis.is_batch ? max_batch_ : a.axis.size, a.axis.is_batch)));
    }
    return map;
  }

  // Broadcast (contract §5): each kind of axes aligned from the right, except that the
  // runner's batch axis meets the runner's batch axis (contract v1 §2: it leads its row, and
  // the declared batch axes after it align from the right); a size-1 axis of the child
  // against a larger one of the parent reads index 0.
  Map align(const Shape& parent, const Map& pmap, const Shape& child) {
    Map out;
    for (const FlatAxis& a : flat(child)) out.push_back(aligned(parent, pmap, child, a));
    return out;
  }
  // Where axis `pos` of child's row `kind` lies in parent's row.
  static int parent_pos(const Shape& parent, const Shape& child, AxisKind kind, int pos) {
    const auto &pr = parent.row(kind), &cr = child.row(kind);
    if (kind == AxisKind::Batch && pos == 0 && cr.front().is_batch) {
      if (pr.empty() || !pr.front().is_batch) CANNL_BUG("the runner's batch axis broadcast into a row without it");
      return 0;
    }
    int pp = pos + static_cast<int>(pr.size()) - static_cast<int>(cr.size());
    if (pp < 0) CANNL_BUG("broadcast of a longer row into a shorter one");
    return pp;
  }
  // The index of one axis of `child` broadcast into `parent`.
  static Affine aligned(const Shape& parent, const Map& pmap, const Shape& child, const FlatAxis& a) {
    int pp = parent_pos(parent, child, a.kind, a.pos);
    const Axis& pa = parent.row(a.kind)[static_cast<size_t>(pp)];
    if (!a.axis.is_batch && a.axis.size == 1 && (pa.is_batch || pa.size != 1)) return Affine::constant(0);
    return pmap[static_cast<size_t>(flat_index(parent, a.kind, pp))];
  }


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
  static Affine last_batch(const Shape& s, const Map& map) {
    const int nb = static_cast<int>(s.row(AxisKind::Batch).size());
    if (nb < 1) CANNL_BUG("position of a value without batch axes");
    return map[static_cast<size_t>(flat_index(s, AxisKind::Batch, nb - 1))];
  }
  // The read of table [d.. -> n] (stored [n, d..]) at `row` for a result [B.. | d..] at `map`.
  Map table_map(const Shape& rs, const Map& map, const Shape& ts, Affine row) {
    Map tm = {std::move(row)};
    const int nd = static_cast<int>(ts.row(AxisKind::Input).size());
    for (int k = 0; k < nd; ++k) tm.push_back(map[static_cast<size_t>(flat_index(rs, AxisKind::Output, k))]);
    return tm;
  }

  // The value of `e` at index `map` (one entry per storage dim of e's shape), pointwise
  // sub-expressions inline, anything else stored in a buffer first.
  ExprP value(const Expr* e, const Map& map) {
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
        Map xm;
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


  // An operand of a product: names and numbers inline, anything else stored first (it would
  // otherwise be recomputed for every term of the sum).
  ExprP operand(const Expr* e, const Map& map) {
    if (e->kind == ExprKind::Name || e->kind == ExprKind::Number) return value(e, map);
    return ir::load({materialise(e, -1), map});
  }

  const BoundCall& call(const Expr* e) const { return m_.calls.at(e); }

  // Stores the value of `e` in buffer `target` (or a new temporary) and returns the buffer.
  int materialise(const Expr* e, int target) {
    if (auto it = done_.find(e); it != done_.end()) return it->second;
    const Shape& s = shape(e);
    auto buffer = [&](const char* suffix) { return target >= 0 ? target : temp(suffix, s); };
    int b = -1;
    if (is_pointwise(e)) {
      b = buffer("v");
      Nest n;
      Map id = loops_for(s, n);
      emit(n, b, id, ir::Accum::Set, value(e, id));
    } else if (e->kind == ExprKind::MatMul) {
      b = buffer("mm");
      lower_matmul(e, b);
    } else if (e->kind == ExprKind::Call) {
      const BoundCall& c = call(e);
      const std::string& f = e->name;
      const OpInfo* op = find_op(f);
      if (op && op->lower) {
        b = buffer(f.c_str());
        lower_reduced(c, op->lower, c.strings.at("reduction") == "mean", b);
      } else if (f == "nll_loss") {
        b = buffer("nll");
        lower_nll(c.tensors[0], c.tensors[1], c.strings.at("reduction"), b);
      } else if (f == "logsumexp") {
        b = buffer("lse");
        lower_logsumexp(c, b, s);
      } else if (f == "concat") {
        b = buffer("cat");
        lower_concat(c.tensors[0], c.tensors[1], b, s);
      } else if (f == "sum" || f == "mean" || f == "max") {
        b = buffer(f.c_str());
        ir::Accum acc = f == "max" ? ir::Accum::Max : ir::Accum::Add;
        if (c.spec)
          lower_einsum(*c.spec, c.tensors, acc, f == "mean", b, s);
        else
          lower_reduce_all(c.tensors[0], acc, f == "mean", b);
      } else if (f == "einsum") {
        b = buffer("ein");
        lower_einsum(*c.spec, c.tensors, ir::Accum::Add, false, b, s);
      } else if (f == "softmax" || f == "log_softmax") {
        b = buffer(f.c_str());
        lower_softmax(c.tensors[0], c.spec, f == "log_softmax", b);
      } else if (f == "cross_entropy") {
        b = buffer("ce");
        lower_cross_entropy(c.tensors[0], c.tensors[1], b);
      } else if (f == "layer_norm") {
        b = buffer("ln");
        lower_layer_norm(c.tensors[0], c.spec, c.values.at("eps"), b);
      } else if (f == "dropout") {
        b = buffer("drop");
        lower_dropout(c.tensors[0], c.values.at("p"), b);
      } else if (f == "batch_norm") {
        b = buffer("bn");
        lower_batch_norm(e, c, b);
      } else if (f == "accuracy") {
        b = buffer("acc");
        lower_accuracy(c.tensors[0], c.tensors[1], b);
      } else if (f == "attention") {
        b = buffer("attn");
        lower_attention(c, b);
      } else if (f == "embedding") {
        b = buffer("emb");
        lower_embedding(c, b);
      } else if (f == "conv2d") {
        b = buffer("conv");
        lower_conv2d(c, b);
      } else if (f == "max_pool2d" || f == "avg_pool2d") {
        b = buffer("pool");
        lower_pool(c, f == "max_pool2d", b);
      } else {
        CANNL_BUG("no lowering for built-in " + f);
      }
    } else {
      CANNL_BUG("no lowering for this expression");
    }
    if (m_.is_int(e)) out_.prog.buffers[static_cast<size_t>(b)].ids = kUnbounded;
    done_[e] = b;
    return b;
  }

  // A buffer holding the value of `e`: its tensor's, or a new one; a copy when `avoid` holds
  // that buffer already (a kernel call takes distinct buffers).
  int stored(const Expr* e, const char* what, const std::set<int>& avoid) {
    int b = -1;
    if (e->kind == ExprKind::Name && m_.index.count(e->name)) b = out_.tensor_buf[static_cast<size_t>(m_.index.at(e->name))];
    else b = materialise(e, done_.count(e) ? -1 : temp(what, shape(e)));
    if (!avoid.count(b)) return b;
    const int copy = temp(what, shape(e));
    Nest n;
    Map id = loops_for(shape(e), n);
    emit(n, copy, id, ir::Accum::Set, ir::load({b, id}));
    return copy;
  }

  // An operand x[i] of a stored tensor x : [B.. | m, H.., w] (no input axes) is read in place:
  // the buffer of x at offset i * (H.. w) with rows of m * H.. * w (ir::Call's views).
  struct View {
    int buf = -1;
    long off = 0, row = 0;
  };
  std::optional<View> in_place(const Expr* e) {
    if (e->kind != ExprKind::Index) return std::nullopt;
    const Expr* x = e->operands[0].get();
    if (x->kind != ExprKind::Name || !m_.index.count(x->name)) return std::nullopt;
    const Shape &xs = shape(x), &es = shape(e);
    const auto& xo = xs.row(AxisKind::Output);
    if (!xs.row(AxisKind::Input).empty() || xo.size() < 2 || !(xs.row(AxisKind::Batch) == es.row(AxisKind::Batch)))
      return std::nullopt;
    long inner = 1;
    for (size_t i = 1; i < xo.size(); ++i) inner *= xo[i].size;
    return View{out_.tensor_buf[static_cast<size_t>(m_.index.at(x->name))], static_cast<long>(e->number) * inner,
                xo[0].size * inner};
  }

  // attention(q : [B.., t | H.., e], k : [B.., s | H.., e], v : [B.., s | H.., f]): an opaque
  // call of the runtime's flash-style kernel (runtime-lib/cannl_attention.h) per sequence and
  // head, which saves the log-sum-exp of each query's scores for the backward call; no T x S
  // buffer exists.
  void lower_attention(const BoundCall& c, int r) {
    const Expr *qe = c.tensors[0], *ke = c.tensors[1], *ve = c.tensors[2];
    ir::Call call;
    // q, k and v in place when they are parts of one stored tensor (a fused qkv projection);
    // otherwise each its own buffer (a copy when one would be another's).
    auto qv = in_place(qe), kv = in_place(ke), vv = in_place(ve);
    if (qv && kv && vv && qv->buf == kv->buf && kv->buf == vv->buf) {
      call.q = call.k = call.v = qv->buf;
      std::tie(call.q_off, call.q_row) = std::pair(qv->off, qv->row);
      std::tie(call.k_off, call.k_row) = std::pair(kv->off, kv->row);
      std::tie(call.v_off, call.v_row) = std::pair(vv->off, vv->row);
    } else {
      call.q = stored(qe, "q", {});
      call.k = stored(ke, "k", {call.q});
      call.v = stored(ve, "v", {call.q, call.k});
    }
    call.o = r;
    const Shape &qs = shape(qe), &ks = shape(ke), &vs = shape(ve);
    const auto& qb = qs.row(AxisKind::Batch);
    call.batch = qb.front().is_batch;
    for (size_t i = call.batch ? 1 : 0; i + 1 < qb.size(); ++i) call.seqs *= qb[i].size;
    call.tq = qb.back().size;
    call.tk = ks.row(AxisKind::Batch).back().size;
    const auto& qo = qs.row(AxisKind::Output);
    for (size_t i = 0; i + 1 < qo.size(); ++i) call.heads *= qo[i].size;
    call.e = qo.back().size;
    call.f = vs.row(AxisKind::Output).back().size;
    auto option = [&](const char* k) { auto it = c.values.find(k); return it == c.values.end() ? 0.0 : it->second; };
    call.causal = option("causal") != 0;
    const double scale = option("scale");  // absent (its default): 1 / sqrt(e)
    call.scale = scale != 0 ? scale : 1 / std::sqrt(static_cast<double>(call.e));
    // lse [B.., H.., t]: the sequences, the heads, the queries
    std::vector<ir::Dim> dims;
    for (size_t i = 0; i + 1 < qb.size(); ++i) dims.push_back({qb[i].is_batch ? max_batch_ : qb[i].size, qb[i].is_batch});
    for (size_t i = 0; i + 1 < qo.size(); ++i) dims.push_back({qo[i].size, false});
    dims.push_back({call.tq, false});
    call.lse = new_buffer_dims(base_ + "_lse", dims, ir::Role::Temp, "log-sum-exp of each query's scores");
    ir::Stmt s;
    s.call = call;
    s.line = line_;
    s.what = what_;
    push(std::move(s));
  }

  // embedding(table : [d.. -> n], ids : [B.. | ] int) -> [B.. | d..]: a gather, an opaque
  // call (ir::Call) whose gradient is a scatter-add into the table's gradient, each feature's
  // positions added in order (the same bits for any thread count). An id outside [0, n)
  // selects a zero row (the programs check ids against cannl_tensor_info.ids first).
  void lower_embedding(const BoundCall& c, int r) {
    const Expr *table = c.tensors[0], *ids = c.tensors[1];
    const Shape &rs = shape(c.call), &ts = shape(table);
    ir::Call call;
    call.kind = ir::Call::Kind::EmbeddingForward;
    call.table = stored(table, "table", {});
    call.ids = stored(ids, "ids", {});
    call.o = r;
    const auto& rb = rs.row(AxisKind::Batch);
    call.batch = !rb.empty() && rb.front().is_batch;
    for (size_t i = call.batch ? 1 : 0; i < rb.size(); ++i) call.seqs *= rb[i].size;
    call.rows = ts.row(AxisKind::Output).at(0).size;
    for (const Axis& a : ts.row(AxisKind::Input)) call.width *= a.size;
    ir::Stmt s;
    s.call = call;
    s.line = line_;
    s.what = what_;
    push(std::move(s));
  }


  void fill(int buf, const Map& index, const Nest& outer, double v) {
    emit(outer, buf, index, ir::Accum::Set, ir::cnst(v));
  }
  // A nest over the storage dims of buffer `b` only (for fills of statistics).
  Map loops_for_buffer(int b, Nest& n, const std::vector<std::string>& names) {
    Map map;
    const auto& dims = out_.prog.buffers[static_cast<size_t>(b)].dims;
    for (size_t i = 0; i < dims.size(); ++i)
      map.push_back(Affine::of(n.add(i < names.size() ? names[i] : fmt::format("j{}", i), dims[i].size, dims[i].batch)));
    return map;
  }
  void fill_buffer(int b, double v, const std::vector<std::string>& names = {}) {
    Nest n;
    Map id = loops_for_buffer(b, n, names);
    fill(b, id, n, v);
  }

  // a * b: contracts a's input axes with b's output axes; batch axes broadcast.
  void lower_matmul(const Expr* e, int r) {
    const Expr* a = e->operands[0].get();
    const Expr* b = e->operands[1].get();
    const Shape &rs = shape(e), &as = shape(a), &bs = shape(b);
    Nest n;
    Map rmap = loops_for(rs, n);
    std::vector<std::string> rnames;
    for (const auto& it : n.iters) rnames.push_back(it.name);
    fill_buffer(r, 0, rnames);
    std::vector<Affine> contracted;
    const auto& arow = as.row(AxisKind::Input);
    for (size_t k = 0; k < arow.size(); ++k)
      contracted.push_back(Affine::of(n.add(arow.size() > 1 ? fmt::format("k{}", k) : "k", arow[k].size, false)));
    auto map_for = [&](const Shape& os, bool is_a) {
      Map m;
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


  // Count of the iterations of the loops `which` of a nest, as an expression (n for batch).
  ExprP count_of(const Nest& n, const std::vector<int>& which) {
    long k = 1;
    int batches = 0;
    for (int i : which) {
      if (n.iters[static_cast<size_t>(i)].batch) ++batches;
      else k *= n.iters[static_cast<size_t>(i)].size;
    }
    ExprP c = ir::cnst(static_cast<double>(k));
    for (int i = 0; i < batches; ++i) c = ir::binary(Op::Mul, c, ir::scalar("n"));
    return c;
  }

  void lower_reduce_all(const Expr* x, ir::Accum acc, bool mean, int r) {
    fill_buffer(r, acc == ir::Accum::Max ? -INFINITY : 0.0);
    Nest n;
    Map id = loops_for(shape(x), n);
    ExprP v = value(x, id);
    if (mean) {
      std::vector<int> all;
      for (size_t i = 0; i < n.iters.size(); ++i) all.push_back(static_cast<int>(i));
      v = ir::binary(Op::Div, v, count_of(n, all));
    }
    emit(n, r, {}, acc, v);
  }

  // One axis of an einsum operand against its concrete shape.
  struct Slot {
    const EinAxis* axis;  // null for an axis of '...'
    std::string key;      // its name, or "...K#j" for the j-th from the right of '...' in row K
    Axis concrete;
  };
  // Expands one operand against its concrete shape: a key per storage axis.
  static std::vector<Slot> expand(const EinOperand& o, const Shape& s) {
    std::vector<Slot> slots;
    for (AxisKind k : kStorageOrder) {
      const auto& axes = o.part(k);
      const auto& row = s.row(k);
      bool has_ell = false;
      for (const auto& a : axes) has_ell |= a.kind == EinAxis::Ellipsis;
      long ell = static_cast<long>(row.size()) - static_cast<long>(axes.size()) + (has_ell ? 1 : 0);
      size_t ri = 0;
      for (const auto& a : axes) {
        if (a.kind == EinAxis::Ellipsis) {
          for (long j = 0; j < ell; ++j, ++ri)
            slots.push_back({nullptr, fmt::format("...{}#{}", kind_letter(k), ell - j), row[ri]});
        } else {
          slots.push_back({&a, a.name, row[ri++]});
        }
      }
    }
    return slots;
  }

  // einsum (contract §6) with one or two operands; also sum/mean/max with a spec.
  // `wrap`, when given, turns the product of the operands into the summand (logsumexp's
  // exp(x - max)); it sees the result's index.
  void lower_einsum(const EinsumSpec& spec, const std::vector<const Expr*>& ops, ir::Accum acc,
                    bool mean, int r, const Shape& rs,
                    const std::function<ExprP(ExprP, const Map&)>& wrap = {}) {
    Nest n;
    std::map<std::string, int> iter_of;  // axis name (or "...K#j") -> loop
    auto get_iter = [&](const std::string& key, const Axis& ax, const std::string& display) {
      auto it = iter_of.find(key);
      if (it != iter_of.end()) return it->second;
      int i = n.add(display, ax.is_batch ? max_batch_ : ax.size, ax.is_batch);
      iter_of[key] = i;
      return i;
    };
    auto display = [](const Slot& s) {
      if (s.axis) return s.axis->name;
      return fmt::format("e{}", s.key.substr(s.key.find('#') + 1));
    };
    Map rmap;
    for (const Slot& s : expand(spec.result, rs)) rmap.push_back(Affine::of(get_iter(s.key, s.concrete, display(s))));
    size_t result_loops = n.iters.size();
    std::vector<std::vector<Slot>> slots;
    for (size_t i = 0; i < ops.size(); ++i) slots.push_back(expand(spec.operands[i], shape(ops[i])));
    for (const auto& os : slots)  // plain names first: they give the sizes
      for (const Slot& s : os)
        if (!s.axis || s.axis->kind == EinAxis::Name) get_iter(s.key, s.concrete, display(s));
    std::vector<Map> maps(ops.size());
    for (size_t i = 0; i < ops.size(); ++i)
      for (const Slot& s : slots[i]) {
        if (s.axis && s.axis->kind == EinAxis::Affine) {
          const EinAxis& a = *s.axis;
          Affine f = Affine::of(get_iter(a.name, {1, false}, a.name));
          f.terms[0].coef = a.stride;
          if (!a.kernel.empty()) f.terms.push_back({get_iter(a.kernel, {a.stride, false}, a.kernel), 1});
          f.offset = -a.padding;
          maps[i].push_back(f);
          continue;
        }
        int it = iter_of.at(s.key);
        const ir::Iter& iv = n.iters[static_cast<size_t>(it)];
        bool bcast = !s.concrete.is_batch && s.concrete.size == 1 && (iv.batch || iv.size != 1);
        maps[i].push_back(bcast ? Affine::constant(0) : Affine::of(it));
      }
    const int windowed = acc == ir::Accum::Add ? windowed_operand(maps) : -1;
    ExprP body;
    for (size_t i = 0; i < ops.size(); ++i) {
      ExprP v = static_cast<int>(i) == windowed ? gather_window(ops[i], maps[i], maps[1 - i], result_loops, n)
                : ops.size() == 1                 ? value(ops[i], maps[i])
                                                  : operand(ops[i], maps[i]);
      body = body ? ir::binary(Op::Mul, body, v) : v;
    }
    if (wrap) body = wrap(body, rmap);
    if (mean) {
      std::vector<int> reduced;
      for (size_t i = result_loops; i < n.iters.size(); ++i) reduced.push_back(static_cast<int>(i));
      body = ir::binary(Op::Div, body, count_of(n, reduced));
    }
    std::vector<std::string> rnames;
    for (size_t i = 0; i < result_loops; ++i) rnames.push_back(n.iters[i].name);
    fill_buffer(r, acc == ir::Accum::Max ? -INFINITY : 0.0, rnames);
    emit(n, r, rmap, acc, body);
  }

  // Of a sum of two operands, the one read through a sliding window (an index with two loop
  // variables, `2*h+i-1`) when the other has plain indices only: -1 otherwise.
  static int windowed_operand(const std::vector<Map>& maps) {
    if (maps.size() != 2) return -1;
    auto plain = [](const Map& m) {
      for (const Affine& f : m)
        if (f.terms.size() > 1 || (f.terms.size() == 1 && (f.terms[0].coef != 1 || f.offset != 0))) return false;
      return true;
    };
    auto window = [](const Map& m) {
      for (const Affine& f : m)
        if (f.terms.size() > 1) return true;
      return false;
    };
    for (int i = 0; i < 2; ++i)
      if (window(maps[static_cast<size_t>(i)]) && plain(maps[static_cast<size_t>(1 - i)])) return i;
    return -1;
  }

  // An einsum operand read through a window, as lower_conv2d's im2col: gathered into a
  // buffer with one axis per loop variable of its index (zero outside the operand), which the
  // sum then reads at single loop variables, so that it is a matrix product (K = the window's
  // loops times the channels) and its gradients are two more and a scatter-add. The axes:
  // the result's loops in the result's order (n's first `result_loops`), then the summed
  // ones in the order the other operand (`other`) has them, so that both merge into one
  // axis each. Returns the read of the gathered buffer in nest `n`.
  ExprP gather_window(const Expr* x, const Map& map, const Map& other, size_t result_loops, const Nest& n) {
    auto uses = [](const Map& m, int it) {
      for (const Affine& f : m)
        for (const auto& t : f.terms)
          if (t.iter == it) return true;
      return false;
    };
    std::vector<int> loops;  // n's loops in the index, in the gathered buffer's order
    for (size_t it = 0; it < result_loops; ++it)
      if (uses(map, static_cast<int>(it))) loops.push_back(static_cast<int>(it));
    for (const Map* m : {&other, &map})
      for (const Affine& f : *m)
        for (const auto& t : f.terms)
          if (static_cast<size_t>(t.iter) >= result_loops && uses(map, t.iter) &&
              std::find(loops.begin(), loops.end(), t.iter) == loops.end())
            loops.push_back(t.iter);
    Shape cs;
    std::vector<std::string> names;
    for (int it : loops) {
      const ir::Iter& iv = n.iters[static_cast<size_t>(it)];
      cs.row(iv.batch ? AxisKind::Batch : AxisKind::Output).push_back({iv.batch ? 1 : iv.size, iv.batch});
      names.push_back(iv.name);
    }
    const int col = temp("col", cs);
    Nest g;
    Map cmap = loops_for(cs, g, names);
    std::vector<int> to_g(n.iters.size(), -1);
    for (size_t j = 0; j < loops.size(); ++j) to_g[static_cast<size_t>(loops[j])] = cmap[j].terms[0].iter;
    Map xmap = map;
    for (Affine& f : xmap)
      for (auto& t : f.terms) t.iter = to_g[static_cast<size_t>(t.iter)];
    emit(g, col, cmap, ir::Accum::Set, operand(x, xmap));
    Map read;
    for (int it : loops) read.push_back(Affine::of(it));
    return ir::load({col, read});
  }

  // Which storage axes of xs a statistic reduces over: the output axes, or (with a spec, a
  // one-operand reduction) the axes the spec sums away.
  std::vector<bool> reduced_axes(const Shape& xs, const EinsumSpec* spec) {
    std::vector<bool> red;
    if (!spec) {
      for (const FlatAxis& a : flat(xs)) red.push_back(a.kind == AxisKind::Output);
      return red;
    }
    std::set<std::string> kept;
    for (const Slot& sl : expand(spec->result, xs)) kept.insert(sl.key);
    for (const Slot& sl : expand(spec->operands[0], xs)) red.push_back(!kept.count(sl.key));
    return red;
  }
  // A nest over every axis of `xs`, and the index of its statistic (the axes not reduced).
  struct StatNest {
    Nest n;
    Map x;        // identity over xs
    Map stat;     // the kept axes only
    std::vector<int> out_loops;  // the reduced axes' loops
    Shape stat_shape;            // xs without the reduced axes
  };
  StatNest stat_nest(const Shape& xs, const EinsumSpec* spec = nullptr) {
    StatNest sn;
    sn.x = loops_for(xs, sn.n);
    const std::vector<bool> red = reduced_axes(xs, spec);
    auto fl = flat(xs);
    for (AxisKind k : kStorageOrder) sn.stat_shape.row(k).clear();
    for (size_t i = 0; i < fl.size(); ++i) {
      if (red[i]) {
        sn.out_loops.push_back(sn.x[i].terms[0].iter);
      } else {
        sn.stat.push_back(sn.x[i]);
        sn.stat_shape.row(fl[i].kind).push_back(fl[i].axis);
      }
    }
    return sn;
  }
  std::vector<std::string> stat_names(const StatNest& sn) {
    std::vector<std::string> out;
    for (const auto& a : sn.stat) out.push_back(sn.n.iters[static_cast<size_t>(a.terms[0].iter)].name);
    return out;
  }

  // max over the output axes (a constant shift for autodiff), then sum of exp(x - max).
  std::pair<int, int> softmax_stats(StatNest& sn, const ExprP& xv) {
    const Shape& ss = sn.stat_shape;
    int mx = temp("max", ss), sum = temp("sumexp", ss);
    fill_buffer(mx, -INFINITY, stat_names(sn));
    emit(sn.n, mx, sn.stat, ir::Accum::Max, xv);
    fill_buffer(sum, 0, stat_names(sn));
    emit(sn.n, sum, sn.stat, ir::Accum::Add,
         ir::call("exp", {ir::binary(Op::Sub, xv, ir::load({mx, sn.stat}, true))}));
    return {mx, sum};
  }

  void lower_softmax(const Expr* x, const EinsumSpec* spec, bool log, int r) {
    StatNest sn = stat_nest(shape(x), spec);
    ExprP xv = value(x, sn.x);
    auto [mx, sum] = softmax_stats(sn, xv);
    ExprP shifted = ir::binary(Op::Sub, xv, ir::load({mx, sn.stat}, true));
    ExprP s = ir::load({sum, sn.stat});
    emit(sn.n, r, sn.x, ir::Accum::Set,
         log ? ir::binary(Op::Sub, shifted, ir::call("log", {s}))
             : ir::binary(Op::Div, ir::call("exp", {shifted}), s));
  }

  // The index space of a two-operand statistic (cross_entropy, accuracy): logits' output axes,
  // and the batch and input axes of both operands broadcast (logits may be a param, the same
  // for every example, against a batch of targets).
  static Shape joint(const Shape& logits, const Shape& target) {
    Shape j = logits;
    for (AxisKind k : {AxisKind::Batch, AxisKind::Input}) {
      const auto &a = logits.row(k), &b = target.row(k);
      const bool a_longer = a.size() >= b.size();
      Shape longer = a_longer ? logits : target, shorter = a_longer ? target : logits;
      std::vector<Axis> row = longer.row(k);
      for (size_t i = 0; i < shorter.row(k).size(); ++i) {
        Axis& x = row[static_cast<size_t>(parent_pos(longer, shorter, k, static_cast<int>(i)))];
        if (!x.is_batch && x.size == 1) x = shorter.row(k)[i];
      }
      j.row(k) = row;
    }
    return j;
  }

  // -sum over outputs(target * log_softmax(logits)), the log_softmax inline. With integer
  // targets (class indices) the target is (ids == class): one term of the sum, no one-hot.
  void lower_cross_entropy(const Expr* logits, const Expr* target, int r) {
    const Shape js = joint(shape(logits), shape(target));
    StatNest sn = stat_nest(js);
    ExprP lv = value(logits, align(js, sn.x, shape(logits)));
    auto [mx, sum] = softmax_stats(sn, lv);
    ExprP tv = value(target, align(js, sn.x, shape(target)));
    if (m_.is_int(target)) tv = ir::binary(Op::Eq, tv, ir::index_value(Affine::of(sn.out_loops.at(0))));
    ExprP logp = ir::binary(Op::Sub, ir::binary(Op::Sub, lv, ir::load({mx, sn.stat}, true)),
                            ir::call("log", {ir::load({sum, sn.stat})}));
    fill_buffer(r, 0, stat_names(sn));
    emit(sn.n, r, sn.stat, ir::Accum::Add, ir::unary(Op::Neg, ir::binary(Op::Mul, tv, logp)));
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
    Map id = loops_for(es, n);
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

  // -sum over outputs(target * logp), per example ("none") or its mean over the examples
  // (batch and input indices) or sum.
  void lower_nll(const Expr* logp, const Expr* target, const std::string& reduction, int r) {
    const Shape js = joint(shape(logp), shape(target));
    StatNest sn = stat_nest(js);
    ExprP tv = value(target, align(js, sn.x, shape(target)));
    if (m_.is_int(target)) tv = ir::binary(Op::Eq, tv, ir::index_value(Affine::of(sn.out_loops.at(0))));  // class ids
    ExprP body = ir::unary(Op::Neg, ir::binary(Op::Mul, tv, value(logp, align(js, sn.x, shape(logp)))));
    if (reduction == "none") {
      fill_buffer(r, 0, stat_names(sn));
      emit(sn.n, r, sn.stat, ir::Accum::Add, body);
      return;
    }
    if (reduction == "mean") {
      std::vector<int> examples;
      for (const Affine& a : sn.stat) examples.push_back(a.terms[0].iter);
      body = ir::binary(Op::Div, body, count_of(sn.n, examples));
    }
    fill_buffer(r, 0);
    emit(sn.n, r, {}, ir::Accum::Add, body);
  }

  // log(sum(exp(x - m))) + m, m the maximum over the same axes (a constant shift for autodiff).
  void lower_logsumexp(const BoundCall& c, int r, const Shape& rs) {
    const Expr* x = c.tensors[0];
    int mx = temp("max", rs), sum = temp("sumexp", rs);
    auto shifted = [&](ExprP v, const Map& rmap) {
      return ir::call("exp", {ir::binary(Op::Sub, std::move(v), ir::load({mx, rmap}, true))});
    };
    if (c.spec) {
      lower_einsum(*c.spec, {x}, ir::Accum::Max, false, mx, rs);
      lower_einsum(*c.spec, {x}, ir::Accum::Add, false, sum, rs, shifted);
    } else {
      fill_buffer(mx, -INFINITY);
      fill_buffer(sum, 0);
      Nest n;
      Map id = loops_for(shape(x), n);
      emit(n, mx, {}, ir::Accum::Max, value(x, id));
      emit(n, sum, {}, ir::Accum::Add, shifted(value(x, id), {}));
    }
    Nest n;
    Map id = loops_for(rs, n);
    emit(n, r, id, ir::Accum::Set,
         ir::binary(Op::Add, ir::call("log", {ir::load({sum, id})}), ir::load({mx, id}, true)));
  }

  // r = a and b joined along the last output axis: two nests, b's written at an offset.
  void lower_concat(const Expr* a, const Expr* b, int r, const Shape& rs) {
    const int last = flat_index(rs, AxisKind::Output, static_cast<int>(rs.row(AxisKind::Output).size()) - 1);
    long offset = 0;
    for (const Expr* part : {a, b}) {
      Shape ps = rs;
      const long size = shape(part).row(AxisKind::Output).back().size;
      ps.row(AxisKind::Output).back().size = size;
      Nest n;
      Map id = loops_for(ps, n);
      Map at = id;
      at[static_cast<size_t>(last)].offset += offset;
      emit(n, r, at, ir::Accum::Set, value(part, align(ps, id, shape(part))));
      offset += size;
    }
  }

  void lower_layer_norm(const Expr* x, const EinsumSpec* spec, double eps, int r) {
    StatNest sn = stat_nest(shape(x), spec);
    ExprP xv = value(x, sn.x);
    const Shape ss = sn.stat_shape;
    ExprP count = count_of(sn.n, sn.out_loops);
    int mu = temp("mean", ss), var = temp("var", ss);
    fill_buffer(mu, 0, stat_names(sn));
    emit(sn.n, mu, sn.stat, ir::Accum::Add, ir::binary(Op::Div, xv, count));
    ExprP centred = ir::binary(Op::Sub, xv, ir::load({mu, sn.stat}));
    fill_buffer(var, 0, stat_names(sn));
    emit(sn.n, var, sn.stat, ir::Accum::Add, ir::binary(Op::Div, ir::pow(centred, 2), count));
    emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, centred,
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({var, sn.stat}), ir::cnst(eps))})));
  }

  // dropout(x, p): in the training step x * keep / (1 - p), keep 0 with probability p drawn
  // per element from (seed, step, stream, flat index) (ir::Op::Keep); x elsewhere.
  void lower_dropout(const Expr* x, double p, int r) {
    const long stream = dropouts_++;
    Nest n;
    Map id = loops_for(shape(x), n);
    const auto& dims = out_.prog.buffers[static_cast<size_t>(r)].dims;
    Affine counter = Affine::constant(stream << 40);  // 2^40 elements per stream
    long stride = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      counter.terms.insert(counter.terms.begin(), {id[i].terms[0].iter, stride});
      stride *= dims[i].size;
    }
    ExprP xv = value(x, id);  // (nests it needs are in every routine)
    if (p == 0) {             // the identity everywhere (PyTorch's Dropout(p = 0))
      emit(n, r, id, ir::Accum::Set, xv);
      return;
    }
    phase_ = Phase::Train;
    ExprP kept = ir::binary(Op::Mul, xv, ir::keep(counter, p));
    emit(n, r, id, ir::Accum::Set, ir::binary(Op::Mul, kept, ir::cnst(1 / (1 - p))));
    phase_ = Phase::Infer;
    emit(n, r, id, ir::Accum::Set, xv);
    phase_ = Phase::Both;
  }

  // A checkpointed, frozen state buffer of the statistic's shape: NAME[.K].what.
  int bn_buffer(const Expr* call, const char* what, const Shape& ss, double init) {
    auto k = bn_number_.find(call);
    const std::string prefix = k == bn_number_.end() ? tensor_name_ : fmt::format("{}.{}", tensor_name_, k->second);
    std::string cname = prefix + "_" + what;
    std::replace(cname.begin(), cname.end(), '.', '_');
    const int b = new_buffer(cname, ss, ir::Role::Param);
    ir::Buffer& buf = out_.prog.buffers[static_cast<size_t>(b)];
    buf.frozen = true;
    buf.state_name = prefix + "." + what;
    buf.shape = buf.state_name + " : " + print_shape(ss);
    bn_state_.push_back(b);
    out_.state_init.push_back({b, init});
    return b;
  }

  // batch_norm(x, eps, momentum): each index of x's last output axis normalised over all the
  // other axes, no affine part (nn.BatchNorm1d(affine=False) on channels-last values). The
  // training step uses the batch's mean and biased variance and updates the running
  // statistics as PyTorch does (the unbiased variance into running_var); the other routines
  // normalise with the running statistics.
  void lower_batch_norm(const Expr* call, const BoundCall& c, int r) {
    const Expr* x = c.tensors[0];
    const Shape& xs = shape(x);
    const double eps = c.values.at("eps"), momentum = c.values.at("momentum");
    StatNest sn;
    sn.x = loops_for(xs, sn.n);
    auto fl = flat(xs);
    for (AxisKind k : kStorageOrder) sn.stat_shape.row(k).clear();
    const int last = static_cast<int>(xs.row(AxisKind::Output).size()) - 1;
    for (size_t i = 0; i < fl.size(); ++i) {
      if (fl[i].kind == AxisKind::Output && fl[i].pos == last) {
        sn.stat.push_back(sn.x[i]);
        sn.stat_shape.row(AxisKind::Output).push_back(fl[i].axis);
      } else {
        sn.out_loops.push_back(sn.x[i].terms[0].iter);
      }
    }
    const Shape ss = sn.stat_shape;
    const int rmean = bn_buffer(call, "running_mean", ss, 0), rvar = bn_buffer(call, "running_var", ss, 1);
    Shape scalar;
    for (AxisKind k : kStorageOrder) scalar.row(k).clear();
    const int tracked = bn_buffer(call, "num_batches_tracked", scalar, 0);
    ExprP xv = value(x, sn.x);
    ExprP count = count_of(sn.n, sn.out_loops);
    // training step: the batch's statistics
    phase_ = Phase::Train;
    int mu = temp("mean", ss), var = temp("var", ss);
    fill_buffer(mu, 0, stat_names(sn));
    emit(sn.n, mu, sn.stat, ir::Accum::Add, ir::binary(Op::Div, xv, count));
    ExprP centred = ir::binary(Op::Sub, xv, ir::load({mu, sn.stat}));
    fill_buffer(var, 0, stat_names(sn));
    emit(sn.n, var, sn.stat, ir::Accum::Add, ir::binary(Op::Div, ir::pow(centred, 2), count));
    emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, centred,
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({var, sn.stat}), ir::cnst(eps))})));
    // ... and the running statistics updated from them
    to_updates_ = true;
    {
      Nest n;
      Map id = loops_for_buffer(rmean, n, stat_names(sn));
      auto blend = [&](int run, ExprP stat) {
        return ir::binary(Op::Add, ir::binary(Op::Mul, ir::cnst(1 - momentum), ir::load({run, id})),
                          ir::binary(Op::Mul, ir::cnst(momentum), std::move(stat)));
      };
      emit(n, rmean, id, ir::Accum::Set, blend(rmean, ir::load({mu, id}, true)));
      // m / (m - 1) (m values per channel); a batch of one value per channel, which PyTorch
      // refuses, has variance 0 and blends in 0 instead of 0 / 0
      ExprP unbiased = ir::binary(Op::Div, ir::binary(Op::Mul, ir::load({var, id}, true), count),
                                  ir::select(ir::binary(Op::Gt, count, ir::cnst(1)),
                                             ir::binary(Op::Sub, count, ir::cnst(1)), ir::cnst(1)));
      emit(n, rvar, id, ir::Accum::Set, blend(rvar, unbiased));
      emit(Nest{}, tracked, {}, ir::Accum::Set, ir::binary(Op::Add, ir::load({tracked, {}}), ir::cnst(1)));
    }
    to_updates_ = false;
    // forward, eval_metrics, inference: the running statistics
    phase_ = Phase::Infer;
    emit(sn.n, r, sn.x, ir::Accum::Set,
         ir::binary(Op::Div, ir::binary(Op::Sub, xv, ir::load({rmean, sn.stat})),
                    ir::call("sqrt", {ir::binary(Op::Add, ir::load({rvar, sn.stat}), ir::cnst(eps))})));
    phase_ = Phase::Both;
  }

  // mean over batch (and input) indices of [argmax(logits) == argmax(target)], first
  // maximum winning, as torch.argmax; with integer targets, [argmax(logits) == ids].
  void lower_accuracy(const Expr* logits, const Expr* target, int r) {
    const Shape ls = joint(shape(logits), shape(target));
    const Shape ss = stat_nest(ls).stat_shape;
    auto argmax = [&](const Expr* v, const char* what) {
      StatNest sn = stat_nest(ls);
      ExprP xv = value(v, align(ls, sn.x, shape(v)));
      int mx = temp(fmt::format("{}_max", what), ss), arg = temp(fmt::format("{}_argmax", what), ss);
      fill_buffer(mx, -INFINITY, stat_names(sn));
      emit(sn.n, mx, sn.stat, ir::Accum::Max, xv);
      // row-major position within the output axes
      Affine pos;
      long stride = 1;
      for (size_t k = sn.out_loops.size(); k-- > 0;) {
        pos.terms.insert(pos.terms.begin(), {sn.out_loops[k], stride});
        stride *= sn.n.iters[static_cast<size_t>(sn.out_loops[k])].size;
      }
      fill_buffer(arg, INFINITY, stat_names(sn));
      emit(sn.n, arg, sn.stat, ir::Accum::Min,
           ir::select(ir::binary(Op::Eq, xv, ir::load({mx, sn.stat})), ir::index_value(pos), ir::cnst(INFINITY)));
      return arg;
    };
    const bool ids = m_.is_int(target);
    int al = argmax(logits, "pred"), at = ids ? -1 : argmax(target, "true");
    fill_buffer(r, 0);
    Nest n;
    Map id = loops_for(ss, n);
    std::vector<int> all;
    for (size_t i = 0; i < n.iters.size(); ++i) all.push_back(static_cast<int>(i));
    ExprP truth = ids ? value(target, align(ss, id, shape(target))) : ir::load({at, id});
    emit(n, r, {}, ir::Accum::Add,
         ir::binary(Op::Div, ir::binary(Op::Eq, ir::load({al, id}), truth), count_of(n, all)));
  }

  // Loop names of an image-shaped result [b.. | y, x, ...]: b (or b0, b1, ...), `outputs`
  // for the leading output axes, then c, c1, ... for any further ones.
  static std::vector<std::string> image_loop_names(const Shape& rs, std::vector<std::string> outputs) {
    size_t nb = rs.row(AxisKind::Batch).size();
    std::vector<std::string> names;
    for (size_t i = 0; i < nb; ++i) names.push_back(nb > 1 ? fmt::format("b{}", i) : "b");
    const size_t lead = outputs.size();
    names.insert(names.end(), outputs.begin(), outputs.end());
    for (size_t i = lead; i < rs.row(AxisKind::Output).size(); ++i)
      names.push_back(i == lead ? "c" : fmt::format("c{}", i - lead));
    return names;
  }

  // x : [b | h, w, c], k : [kh, kw, c -> d] (stored [d, kh, kw, c]); r : [b | h', w', d].
  // Lowered as an im2col gather and a plain contraction (docs/design.md, "Convolution"):
  //   col[b, y, x, ky, kx, c] = x[b, s*y + ky - p, s*x + kx - p, c]     (zero outside x)
  //   r[b, y, x, d]          += col[b, y, x, ky, kx, c] * k[d, ky, kx, c]
  // The contraction is a matrix product (rows b*y*x, columns d, depth ky*kx*c) whose indices
  // are all single loop variables, so it runs as fast as the other matrix products; autodiff
  // turns it into two more such products and the gather into a scatter-add over b.
  void lower_conv2d(const BoundCall& c, int r) {
    const Expr* x = c.tensors[0];
    const Expr* k = c.tensors[1];
    long s = static_cast<long>(c.values.at("stride")), p = static_cast<long>(c.values.at("padding"));
    const Shape &rs = shape(c.call), &ks = shape(k);
    size_t nb = rs.row(AxisKind::Batch).size();
    const auto& kin = ks.row(AxisKind::Input);

    // The gather: one column of depth kh*kw*c per output position.
    Shape cs = rs;
    cs.row(AxisKind::Output) = {rs.row(AxisKind::Output)[0], rs.row(AxisKind::Output)[1], kin[0], kin[1], kin[2]};
    int col = temp("col", cs);
    std::vector<std::string> cnames = image_loop_names(rs, {"y", "x"});
    cnames.resize(nb + 2);
    for (const char* nm : {"ky", "kx", "c"}) cnames.push_back(nm);
    Nest g;
    Map cmap = loops_for(cs, g, cnames);
    Map xmap(cmap.begin(), cmap.begin() + static_cast<long>(nb));
    auto window = [&](const Affine& o, const Affine& kk) {
      return Affine{{{o.terms[0].iter, s}, {kk.terms[0].iter, 1}}, -p};
    };
    xmap.push_back(window(cmap[nb], cmap[nb + 2]));
    xmap.push_back(window(cmap[nb + 1], cmap[nb + 3]));
    xmap.push_back(cmap[nb + 4]);
    emit(g, col, cmap, ir::Accum::Set, operand(x, xmap));

    // The contraction.
    std::vector<std::string> names = image_loop_names(rs, {"y", "x", "d"});
    fill_buffer(r, 0, names);
    Nest n;
    Map rmap = loops_for(rs, n, names);
    int ky = n.add("ky", kin[0].size, false), kx = n.add("kx", kin[1].size, false), ci = n.add("c", kin[2].size, false);
    Map colmap(rmap.begin(), rmap.begin() + static_cast<long>(nb + 2));
    for (int it : {ky, kx, ci}) colmap.push_back(Affine::of(it));
    Map kmap = {rmap[nb + 2], Affine::of(ky), Affine::of(kx), Affine::of(ci)};
    emit(n, r, rmap, ir::Accum::Add, ir::binary(Op::Mul, ir::load({col, colmap}), operand(k, kmap)));
  }

  void lower_pool(const BoundCall& c, bool is_max, int r) {
    const Expr* x = c.tensors[0];
    long size = static_cast<long>(c.values.at("size"));
    long stride = static_cast<long>(c.values.at("stride"));
    if (stride == 0) stride = size;
    const Shape& rs = shape(c.call);
    size_t nb = rs.row(AxisKind::Batch).size();
    std::vector<std::string> names = image_loop_names(rs, {"y", "x"});
    fill_buffer(r, is_max ? -INFINITY : 0.0, names);
    Nest n;
    Map rmap = loops_for(rs, n, names);
    int ky = n.add("ky", size, false), kx = n.add("kx", size, false);
    Map xmap = rmap;
    xmap[nb] = Affine{{{rmap[nb].terms[0].iter, stride}, {ky, 1}}, 0};
    xmap[nb + 1] = Affine{{{rmap[nb + 1].terms[0].iter, stride}, {kx, 1}}, 0};
    ExprP v = value(x, xmap);
    if (!is_max) v = ir::binary(Op::Div, v, ir::cnst(static_cast<double>(size * size)));
    emit(n, r, rmap, is_max ? ir::Accum::Max : ir::Accum::Add, v);
  }
};

}  // namespace

std::vector<ir::Dim> storage_dims(const Shape& s, long max_batch) {
  std::vector<ir::Dim> dims;
  for (const FlatAxis& a : flat(s)) dims.push_back({a.axis.is_batch ? max_batch : a.axis.size, a.axis.is_batch});
  return dims;
}

Lowered lower_forward(const Model& m, const ShapeInfo& shapes, const SourceFile& file, long max_batch) {
  return Lowerer(m, shapes, file, max_batch).run();
}

}  // namespace cannl
