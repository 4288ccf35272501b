// ir.cpp — constructors and small queries of the loop IR.
#include "ir/ir.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "support/diagnostic.h"

namespace cannl::ir {

const char* role_name(Role r) {
  switch (r) {
    case Role::Input: return "input";
    case Role::Param: return "param";
    case Role::Computed: return "computed";
    case Role::Temp: return "temporary";
    case Role::Grad: return "gradient";
    case Role::OptState: return "optimiser state";
    case Role::Cache: return "cache";
    case Role::Constant: return "constant";
  }
  return "?";
}

long Buffer::elements() const {
  long n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

bool Buffer::batched() const {
  return std::any_of(dims.begin(), dims.end(), [](const Dim& d) { return d.batch; });
}

long Buffer::example_elements() const {
  long n = 1;
  for (const Dim& d : dims) n *= d.batch ? 1 : d.size;
  return n;
}

bool Affine::operator==(const Affine& o) const {
  if (offset != o.offset || terms.size() != o.terms.size()) return false;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].iter != o.terms[i].iter || terms[i].coef != o.terms[i].coef) return false;
  return true;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Const: return "const";
    case Op::Scalar: return "scalar";
    case Op::Index: return "index";
    case Op::Load: return "load";
    case Op::Neg: return "neg";
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::Pow: return "pow";
    case Op::Eq: return "==";
    case Op::Gt: return ">";
    case Op::Select: return "select";
    case Op::Prim: return "prim";
    case Op::Uniform: return "uniform";
    case Op::Normal: return "normal";
    case Op::Keep: return "keep";
  }
  return "?";
}

const char* accum_symbol(Accum a) {
  switch (a) {
    case Accum::Set: return "=";
    case Accum::Add: return "+=";
    case Accum::Max: return "max=";
    case Accum::Min: return "min=";
  }
  return "?";
}

ExprP cnst(double v) {
  auto e = std::make_shared<Expr>();
  e->op = Op::Const;
  e->value = v;
  return e;
}

ExprP scalar(const std::string& name) {
  auto e = std::make_shared<Expr>();
  e->op = Op::Scalar;
  e->name = name;
  return e;
}

ExprP load(const Access& a, bool nograd) {
  auto e = std::make_shared<Expr>();
  e->op = Op::Load;
  e->access = a;
  e->nograd = nograd;
  return e;
}

ExprP keep(const Affine& counter, double p) {
  auto e = std::make_shared<Expr>();
  e->op = Op::Keep;
  e->value = p;
  e->access.index = {counter};
  e->args = {scalar("rng_key")};
  return e;
}

ExprP index_value(const Affine& a) {
  auto e = std::make_shared<Expr>();
  e->op = Op::Index;
  e->access.index = {a};
  return e;
}

bool is_const(const ExprP& e, double v) { return e->op == Op::Const && e->value == v; }

ExprP unary(Op op, ExprP a) {
  if (op != Op::Neg) CANNL_BUG("unary() makes negations; functions are prims.h calls");
  if (a->op == Op::Const && std::isfinite(a->value)) return cnst(-a->value);
  if (a->op == Op::Neg) return a->args[0];
  auto e = std::make_shared<Expr>();
  e->op = op;
  e->args = {std::move(a)};
  return e;
}

ExprP binary(Op op, ExprP a, ExprP b) {
  const bool ca = a->op == Op::Const, cb = b->op == Op::Const;
  if (ca && cb) {
    double x = a->value, y = b->value;
    switch (op) {
      case Op::Add: return cnst(x + y);
      case Op::Sub: return cnst(x - y);
      case Op::Mul: return cnst(x * y);
      case Op::Div: if (y != 0) return cnst(x / y); break;
      case Op::Eq: return cnst(x == y);
      case Op::Gt: return cnst(x > y);
      default: break;
    }
  }
  switch (op) {
    case Op::Add:
      if (is_const(a, 0)) return b;
      if (is_const(b, 0)) return a;
      if (b->op == Op::Neg) return binary(Op::Sub, a, b->args[0]);
      break;
    case Op::Sub:
      if (is_const(b, 0)) return a;
      if (is_const(a, 0)) return unary(Op::Neg, b);
      if (b->op == Op::Neg) return binary(Op::Add, a, b->args[0]);
      break;
    case Op::Mul:
      if (is_const(a, 0) || is_const(b, 0)) return cnst(0);
      if (is_const(a, 1)) return b;
      if (is_const(b, 1)) return a;
      if (is_const(a, -1)) return unary(Op::Neg, b);
      if (is_const(b, -1)) return unary(Op::Neg, a);
      if (a->op == Op::Neg) return unary(Op::Neg, binary(Op::Mul, a->args[0], b));
      if (b->op == Op::Neg) return unary(Op::Neg, binary(Op::Mul, a, b->args[0]));
      break;
    case Op::Div:
      if (is_const(a, 0)) return cnst(0);
      if (is_const(b, 1)) return a;
      if (a->op == Op::Neg) return unary(Op::Neg, binary(Op::Div, a->args[0], b));
      break;
    default: break;
  }
  auto e = std::make_shared<Expr>();
  e->op = op;
  e->args = {std::move(a), std::move(b)};
  return e;
}

ExprP pow(ExprP a, double exponent) {
  if (exponent == 1) return a;
  if (exponent == 0) return cnst(1);
  if (a->op == Op::Const) return cnst(std::pow(a->value, exponent));
  auto e = std::make_shared<Expr>();
  e->op = Op::Pow;
  e->value = exponent;
  e->args = {std::move(a)};
  return e;
}

ExprP select(ExprP c, ExprP a, ExprP b) {
  if (c->op == Op::Const) return c->value != 0 ? a : b;
  if (same_expr(*a, *b)) return a;
  auto e = std::make_shared<Expr>();
  e->op = Op::Select;
  e->args = {std::move(c), std::move(a), std::move(b)};
  return e;
}

bool same_expr(const Expr& a, const Expr& b) {
  if (&a == &b) return true;
  if (a.op != b.op || a.value != b.value || a.prim != b.prim || a.name != b.name || a.nograd != b.nograd ||
      a.wide != b.wide || a.args.size() != b.args.size())
    return false;
  if ((a.op == Op::Load || a.op == Op::Index || a.op == Op::Keep) && !(a.access == b.access)) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!same_expr(*a.args[i], *b.args[i])) return false;
  return true;
}

std::string Program::unique_name(const std::string& base, int block) const {
  auto taken = [&](const std::string& n) {
    for (const Buffer& b : buffers)
      if (b.block == block && b.name == n) return true;
    return false;
  };
  std::string name = base;
  for (int k = 2; taken(name); ++k) name = fmt::format("{}{}", base, k);
  return name;
}

int Program::find(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

const char* routine_name(RoutineKind k) {
  switch (k) {
    case RoutineKind::Init: return "init";
    case RoutineKind::TrainStep: return "train_step";
    case RoutineKind::Forward: return "forward";
    case RoutineKind::Eval: return "eval_metrics";
    case RoutineKind::Decode: return "decode";
    case RoutineKind::TrainGrads: return "train_grads";
    case RoutineKind::TrainUpdate: return "train_update";
    case RoutineKind::BlockTrain: return "train body";
    case RoutineKind::BlockInfer: return "inference body";
    case RoutineKind::BlockInit: return "init body";
    case RoutineKind::BlockNorm: return "norm body";
    case RoutineKind::BlockDecode: return "decode body";
    case RoutineKind::Constants: return "init_constants";
  }
  return "?";
}

Routine* Program::routine(RoutineKind k) {
  for (auto& r : routines)
    if (r.kind == k) return &r;
  return nullptr;
}

const Routine* Program::routine(RoutineKind k) const {
  for (const auto& r : routines)
    if (r.kind == k) return &r;
  return nullptr;
}

int storage(const Program& p, int buf) {
  const int v = p.buffers[static_cast<size_t>(buf)].view_of;
  return v >= 0 ? v : buf;
}

bool has_ring_cache(const Program& p) {
  return std::any_of(p.buffers.begin(), p.buffers.end(),
                     [](const Buffer& b) { return b.role == Role::Cache && b.ring > 0; });
}

int Program::grad(int buf) const {
  auto it = grads.find(buf);
  return it == grads.end() ? -1 : it->second;
}

long Arena::field_at(int b, long cap) const {
  const auto i = static_cast<size_t>(b);
  if (i < field_example.size() && field_example[i] >= 0) return fixed_bytes + field_example[i] * cap;
  return field[i];
}

long Arena::address_at(const Routine& r, int b, long cap) const {
  const auto i = static_cast<size_t>(b);
  if (i < own.size() && own[i]) return field_at(b, cap);
  if (work >= 0 && r.scaled(b)) return fixed_bytes + r.example_offset(b, max_batch) * cap;
  if (work >= 0 && r.planned(b)) return work + r.offsets[i];
  return -1;
}

std::set<int> live_out(const Program& p, const Routine& r) {
  std::set<int> live;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].role == Role::Param || p.buffers[i].role == Role::OptState || p.buffers[i].role == Role::Constant)
      live.insert(static_cast<int>(i));
  for (const std::vector<int>* l : {&r.io.outputs, &r.io.values, &r.io.kept})
    for (int b : *l) {
      live.insert(b);
      live.insert(storage(p, b));  // a view kept: what writes it writes its stacked buffer (a block call)
    }
  return live;
}

std::vector<Routine*> all_routines(Program& p) {
  std::vector<Routine*> out;
  for (Block& bl : p.blocks)
    for (Routine* r : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode})
      if (!r->stmts.empty()) out.push_back(r);
  for (Routine& r : p.routines) out.push_back(&r);
  return out;
}

std::vector<const Routine*> all_routines(const Program& p) {
  std::vector<const Routine*> out;
  for (Routine* r : all_routines(const_cast<Program&>(p))) out.push_back(r);
  return out;
}

int block_of(const Program& p, const Routine& r) {
  for (size_t k = 0; k < p.blocks.size(); ++k) {
    const Block& bl = p.blocks[k];
    for (const Routine* b : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode})
      if (b == &r) return static_cast<int>(k);
  }
  return -1;
}

Routine& body_of(Block& bl, Call::Kind k) {
  switch (k) {
    case Call::Kind::BlockForward: case Call::Kind::BlockBackward: return bl.train;
    case Call::Kind::BlockInfer: return bl.infer;
    case Call::Kind::BlockInit: return bl.init;
    case Call::Kind::BlockNorm: return bl.norm;
    case Call::Kind::BlockDecode: return bl.decode;
    default: break;
  }
  CANNL_BUG("the body of a call that calls no block");
}

const Routine& body_of(const Block& bl, Call::Kind k) { return body_of(const_cast<Block&>(bl), k); }

size_t barrier_at(const Routine& body) {
  for (size_t i = 0; i < body.stmts.size(); ++i)
    if (body.stmts[i].call && body.stmts[i].call->kind == Call::Kind::BlockRest) return i;
  return body.stmts.size();
}

std::pair<long, long> formal_live(const Program& p, const Routine& body, size_t lo, size_t hi, int f, bool dead_after) {
  const Buffer& fb = p.buffers[static_cast<size_t>(f)];
  long first = -1, last = -1;
  std::vector<const Expr*> loads;
  for (size_t i = lo; i < hi; ++i) {
    const Stmt& s = body.stmts[i];
    bool reads = false, writes = false;
    if (s.call) {
      for (int b : call_reads(*s.call)) reads = reads || b == f;
      for (int b : call_writes(*s.call)) writes = writes || b == f;
    } else {
      loads.clear();
      collect_loads(s, loads);
      for (const Expr* l : loads) reads = reads || l->access.buf == f;
      for (const Assign& a : s.assigns) writes = writes || a.out.buf == f;
    }
    if (!reads && !writes) continue;
    if (first < 0) {
      first = static_cast<long>(i);
      bool covers = !reads && !s.call;
      for (const Assign& a : s.assigns) {
        if (!covers || a.out.buf != f) continue;
        std::set<int> its;
        covers = a.accum == Accum::Set && a.out.index.size() == s.iters.size() && a.out.index.size() == fb.dims.size();
        for (size_t d = 0; covers && d < fb.dims.size(); ++d) {
          const Affine& ix = a.out.index[d];
          covers = ix.is_single_iter() && its.insert(ix.terms[0].iter).second &&
                   s.iters[static_cast<size_t>(ix.terms[0].iter)].size == fb.dims[d].size &&
                   s.iters[static_cast<size_t>(ix.terms[0].iter)].batch == fb.dims[d].batch;
        }
      }
      if (!covers) first = static_cast<long>(lo) - 1;
    }
    last = static_cast<long>(i);
  }
  if (last < 0) return {static_cast<long>(lo) - 1, static_cast<long>(hi)};
  return {first, dead_after ? last : static_cast<long>(hi)};
}

std::pair<size_t, size_t> body_span(const Block& bl, Call::Kind k) {
  const Routine& r = body_of(bl, k);
  if (k == Call::Kind::BlockForward) return {0, barrier_at(r)};
  if (k == Call::Kind::BlockBackward) return {std::min(barrier_at(r) + 1, r.stmts.size()), r.stmts.size()};
  return {0, r.stmts.size()};
}

bool is_block_call(Call::Kind k) {
  switch (k) {
    case Call::Kind::BlockForward: case Call::Kind::BlockBackward: case Call::Kind::BlockInfer:
    case Call::Kind::BlockInit: case Call::Kind::BlockNorm: case Call::Kind::BlockDecode:
      return true;
    default: return false;
  }
}

const Assign& Stmt::only() const {
  if (assigns.size() != 1) CANNL_BUG("a nest of one assignment expected");
  return assigns[0];
}

Assign& Stmt::only() {
  if (assigns.size() != 1) CANNL_BUG("a nest of one assignment expected");
  return assigns[0];
}

Stmt nest(std::vector<Iter> iters, Access out, Accum accum, ExprP body) {
  Stmt s;
  s.iters = std::move(iters);
  s.assigns = {{std::move(out), accum, std::move(body)}};
  return s;
}

Stmt elementwise(const Program& p, int buf, std::string what) {
  const Buffer& b = p.buffers[static_cast<size_t>(buf)];
  std::vector<Iter> iters;
  Access out{buf, {}};
  for (size_t d = 0; d < b.dims.size(); ++d) {
    iters.push_back({b.dims.size() == 1 ? std::string("j") : "j" + std::to_string(d), b.dims[d].size, b.dims[d].batch});
    out.index.push_back(Affine::of(static_cast<int>(d)));
  }
  Stmt s = nest(std::move(iters), std::move(out), Accum::Set, cnst(0));
  s.what = std::move(what);
  return s;
}

ExprP load_all(const Stmt& s, int buf) { return load({buf, s.assigns[0].out.index}); }

void collect_loads(const ExprP& e, std::vector<const Expr*>& out) {
  if (e->op == Op::Load) out.push_back(e.get());
  for (const auto& a : e->args) collect_loads(a, out);
}

void collect_loads(const Stmt& s, std::vector<const Expr*>& out) {
  for (const Assign& a : s.assigns) collect_loads(a.body, out);
}

namespace {
// Each buffer once, in order of first mention (q, k and v may be views of one buffer).
std::vector<int> distinct(std::initializer_list<int> bufs) {
  std::vector<int> out;
  for (int b : bufs)
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}
}  // namespace

std::vector<int> call_reads(const Call& c) {
  switch (c.kind) {
    case Call::Kind::AttentionForward: return distinct({c.q, c.k, c.v});
    case Call::Kind::AttentionBackward: return distinct({c.q, c.k, c.v, c.o, c.dout, c.lse, c.dq, c.dk, c.dv});
    case Call::Kind::EmbeddingForward: return {c.table, c.ids};
    case Call::Kind::EmbeddingBackward: return {c.ids, c.dout, c.dtable};
    default: return c.reads;  // a block call, the barrier
  }
}

std::vector<int> call_writes(const Call& c) {
  switch (c.kind) {
    case Call::Kind::AttentionForward: return {c.o, c.lse};
    case Call::Kind::AttentionBackward: return distinct({c.delta, c.dq, c.dk, c.dv});
    case Call::Kind::EmbeddingForward: return {c.o};
    case Call::Kind::EmbeddingBackward: return {c.dtable};
    default: return c.writes;
  }
}

const char* call_name(Call::Kind k) {
  switch (k) {
    case Call::Kind::AttentionForward: return "attention_forward";
    case Call::Kind::AttentionBackward: return "attention_backward";
    case Call::Kind::EmbeddingForward: return "embedding_forward";
    case Call::Kind::EmbeddingBackward: return "embedding_backward";
    case Call::Kind::BlockForward: return "block_forward";
    case Call::Kind::BlockBackward: return "block_backward";
    case Call::Kind::BlockInfer: return "block_infer";
    case Call::Kind::BlockInit: return "block_init";
    case Call::Kind::BlockNorm: return "block_norm";
    case Call::Kind::BlockDecode: return "block_decode";
    case Call::Kind::BlockRest: return "rest_of_model";
  }
  return "?";
}

std::vector<int> written_buffers(const Stmt& s) {
  if (s.call) return call_writes(*s.call);
  std::vector<int> w;
  for (const Assign& a : s.assigns) w.push_back(a.out.buf);
  return w;
}

}  // namespace cannl::ir
