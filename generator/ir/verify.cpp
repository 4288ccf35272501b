// verify.cpp — the IR verifier (see verify.h).
#include "ir/verify.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "ir/prims.h"
#include "support/diagnostic.h"

namespace cannl::ir {

namespace {

constexpr size_t kMaxProblems = 20;

bool is_builtin_scalar(const std::string& s) {
  return s == "n" || s == "lr" || s == "step" || s == "schedule" || s == "rng_key";
}

struct Verifier {
  const Program& p;
  std::vector<std::string> problems = {};
  std::string where = {};  // what the problems found now are about ("program", "routine init")
  long nest_at = -1;       // or >= 0: nest nest_at of routine r (its text made only for a problem)

  void fail(const std::string& msg) { problems.push_back((nest_at >= 0 ? at(static_cast<size_t>(nest_at)) : where) + ": " + msg); }
  void about(std::string w) {
    where = std::move(w);
    nest_at = -1;
  }
  bool valid(int b) const { return b >= 0 && static_cast<size_t>(b) < p.buffers.size(); }
  const Buffer& buf(int b) const { return p.buffers[static_cast<size_t>(b)]; }
  std::string name(int b) const { return valid(b) ? "'" + buf(b).name + "'" : fmt::format("buffer #{}", b); }

  // -- the program ------------------------------------------------------------------------
  void program() {
    about("program");
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const Buffer& b = p.buffers[i];
      for (const Dim& d : b.dims) {
        if (d.size < 1) fail(fmt::format("'{}' has a dim of size {}", b.name, d.size));
        if (d.batch && d.size != p.max_batch) fail(fmt::format("'{}' has a batch dim of {}, not max_batch {}", b.name, d.size, p.max_batch));
      }
      if (b.role == Role::OptState && (!valid(b.state_of) || buf(b.state_of).role != Role::Param))
        fail(fmt::format("optimiser state '{}' belongs to {}, not a param", b.name, name(b.state_of)));
      storage(b);
    }
    blocks();
    auto list = [&](const char* what, const std::vector<int>& l, std::optional<Role> role) {
      for (int b : l)
        if (!valid(b) || (role && buf(b).role != *role)) fail(fmt::format("{} lists {}", what, name(b)));
    };
    list("inputs", p.inputs, Role::Input);
    list("params", p.params, Role::Param);
    list("outputs", p.outputs, std::nullopt);
    list("metrics", p.metrics, std::nullopt);
    if (p.loss != -1 && !valid(p.loss)) fail("the loss is " + name(p.loss));
    for (const auto& [b, g] : p.grads) {
      if (!valid(b) || !valid(g) || b == g || buf(g).role != Role::Grad) {
        fail(fmt::format("grads maps {} to {}", name(b), name(g)));
        continue;
      }
      if (buf(g).dims != buf(b).dims) fail(fmt::format("the gradient '{}' has other dims than '{}'", buf(g).name, buf(b).name));
    }
  }

  // Stacked storage: a stacked buffer's first dim is its instances; a view lies inside its
  // stacked buffer (not a view itself), inside one instance's slice, aligned to its own size.
  void storage(const Buffer& b) {
    if (b.stack < 0 || (b.stack > 0 && (b.dims.empty() || b.dims[0].size != b.stack || b.dims[0].batch)))
      fail(fmt::format("'{}' is stacked {} times but its first dim is not", b.name, b.stack));
    if (b.view_of == -1) return;
    if (!valid(b.view_of) || buf(b.view_of).stack <= 0 || buf(b.view_of).view_of != -1) {
      fail(fmt::format("'{}' is a view of {}, not of a stacked buffer", b.name, name(b.view_of)));
      return;
    }
    if (b.stack > 0 || b.block != -1) fail(fmt::format("the view '{}' is stacked or a body buffer", b.name));
    // (An instance's slice, or a part of it: one kind of a stacked optimiser state [l, kind, ...].)
    const Buffer& s = buf(b.view_of);
    const long slice = s.elements() / s.stack, e = b.elements();
    if (slice % e || b.view_offset < 0 || b.view_offset % e || b.view_offset + e > s.elements())
      fail(fmt::format("the view '{}' ({} elements at +{}) is not in a slice of '{}' ({} x {})", b.name, e,
                       b.view_offset, s.name, s.stack, slice));
  }

  // Each block's buffers are its own (Buffer::block), the formals and locals listed once;
  // its carried pairs are formals.
  void blocks() {
    std::vector<int> listed(p.buffers.size(), 0);
    for (size_t k = 0; k < p.blocks.size(); ++k) {
      const Block& bl = p.blocks[k];
      about("block " + bl.name);
      if (bl.count < 2 || bl.first < 0) fail(fmt::format("instances {} .. +{}", bl.first, bl.count));
      for (const std::vector<int>* l : {&bl.formals, &bl.locals})
        for (int b : *l) {
          if (!valid(b) || buf(b).block != static_cast<int>(k) || buf(b).formal != (l == &bl.formals)) {
            fail(fmt::format("lists {}, which is not its {}", name(b), l == &bl.formals ? "formal" : "local"));
            continue;
          }
          if (++listed[static_cast<size_t>(b)] > 1) fail(fmt::format("lists {} twice", name(b)));
        }
      for (const auto& [in, out] : bl.carried)
        if (std::find(bl.formals.begin(), bl.formals.end(), in) == bl.formals.end() ||
            std::find(bl.formals.begin(), bl.formals.end(), out) == bl.formals.end() || !valid(in) || !valid(out) ||
            buf(in).dims != buf(out).dims)
          fail(fmt::format("carries {} into {}: not two formals of the same dims", name(out), name(in)));
    }
    about("program");
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].block != -1 && !listed[b])
        fail(fmt::format("'{}' belongs to block {}, which does not list it", p.buffers[b].name, p.buffers[b].block));
  }

  // A call of block bl (Call::Kind::BlockForward ...): the half of the body it runs (ir.h
  // body_span) is not empty; every formal it uses bound once (a training body's saved locals
  // too, by the calls of its halves); each instance's actual a program buffer of the formal's
  // dims (a whole buffer, or a slot of one whose first dim is its slots), inside it; a formal
  // the half writes bound to the same buffer in every instance only when the half only adds
  // into it (a shared gradient, the norm); the formals it writes never overlap in an instance.
  void block_call(const Call& c) {
    if (c.block < 0 || static_cast<size_t>(c.block) >= p.blocks.size()) {
      fail(fmt::format("a block call of block #{}", c.block));
      return;
    }
    const Block& bl = p.blocks[static_cast<size_t>(c.block)];
    if (c.count != bl.count) fail(fmt::format("calls block {} for {} instances, not its {}", bl.name, c.count, bl.count));
    const Routine& body = body_of(bl, c.kind);
    auto [lo, hi] = body_span(bl, c.kind);
    const std::vector<Stmt>& nests = body.stmts.empty() && c.kind == Call::Kind::BlockForward ? bl.forward : body.stmts;
    if (body.stmts.empty()) lo = 0, hi = nests.size();
    if (lo >= hi) fail(fmt::format("calls block {}'s {}, which has no nests", bl.name, call_name(c.kind)));
    const bool train_half = c.kind == Call::Kind::BlockForward || c.kind == Call::Kind::BlockBackward;
    const std::set<int> saved(bl.saved.begin(), bl.saved.end());
    std::set<int> used, written, added;  // added: written only by accumulation
    std::set<int> set_written;
    std::vector<const Expr*> loads;
    for (size_t i = lo; i < hi && i < nests.size(); ++i) {
      const Stmt& st = nests[i];
      for (int w : written_buffers(st)) used.insert(w), written.insert(w);
      if (st.call)
        for (int b : call_reads(*st.call)) used.insert(b);
      loads.clear();
      collect_loads(st, loads);
      for (const Expr* l : loads) used.insert(l->access.buf);
      for (const Assign& a : st.assigns)
        if (a.accum == Accum::Set || st.zero_first) set_written.insert(a.out.buf);
      if (st.call)
        for (int w : call_writes(*st.call)) set_written.insert(w);
    }
    std::map<int, const Binding*> bound;
    for (const Binding& bd : c.binds) {
      const bool saved_formal = train_half && saved.count(bd.formal) > 0;
      if (!valid(bd.formal) || buf(bd.formal).block != c.block || !(buf(bd.formal).formal || saved_formal)) {
        fail(fmt::format("binds {}, not a formal of block {}", name(bd.formal), bl.name));
        continue;
      }
      if (bound.count(bd.formal)) fail(fmt::format("binds '{}' twice", buf(bd.formal).name));
      bound[bd.formal] = &bd;
      const Buffer& f = buf(bd.formal);
      for (int whole : {bd.first, bd.last}) {
        if (whole == -1) continue;
        if (!valid(whole) || buf(whole).block != -1 || buf(whole).dims != f.dims)
          fail(fmt::format("binds '{}' to {}, not a program buffer of its dims", f.name, name(whole)));
      }
      if (bd.buf == -1) {
        bool carried = false;
        for (const auto& [in, out] : bl.carried) carried = carried || in == bd.formal || out == bd.formal;
        if (!carried || (bd.first == -1 && bd.last == -1) || !body.stmts.empty())
          fail(fmt::format("binds '{}' to nothing, and it is not a value carried between lowering's instances", f.name));
        continue;
      }
      if (!valid(bd.buf) || buf(bd.buf).block != -1) {
        fail(fmt::format("binds '{}' to {}", f.name, name(bd.buf)));
        continue;
      }
      const Buffer& a = buf(bd.buf);
      if (bd.stride == 0 && bd.offset == 0 && bd.modulo == 0 && bd.shift == 0) {
        if (a.dims != f.dims) fail(fmt::format("binds '{}' to '{}' of other dims", f.name, a.name));
        if (set_written.count(bd.formal))
          fail(fmt::format("binds '{}', which its body writes (not only adding into it), to '{}' in every instance", f.name,
                           a.name));
        continue;
      }
      const long slots = a.dims.empty() ? 0 : a.dims[0].size;
      bool inside = !a.dims.empty() && !a.dims[0].batch && bd.stride >= f.elements() &&
                    std::vector<Dim>(a.dims.begin() + 1, a.dims.end()) == f.dims;
      for (long l = 0; l < c.count && inside; ++l) {
        if (bd.whole(l, c.count) >= 0) continue;
        const long slot = bd.slot(l);
        inside = slot >= 0 && slot < slots && bd.at(l) >= 0 && bd.at(l) + f.elements() <= a.elements();
      }
      if (!inside)
        fail(fmt::format("binds '{}' to slots of '{}' (+{} + slot * {}) outside it or of other dims", f.name, a.name,
                         bd.offset, bd.stride));
    }
    for (int u : used) {
      if (!valid(u) || buf(u).block != c.block) continue;
      const bool needs_binding = buf(u).formal || (train_half && saved.count(u));
      if (needs_binding && !bound.count(u))
        fail(fmt::format("leaves '{}' of block {} unbound, which its {} uses", buf(u).name, bl.name, call_name(c.kind)));
    }
    // The written formals' actuals apart in each instance (a few instances are enough to see
    // every pattern: the first two, the last two).
    for (long l = 0; l < c.count; ++l) {
      if (l >= 2 && l + 2 < c.count) continue;
      std::vector<std::tuple<int, long, long, int>> spans;  // buffer, start, end, formal
      for (int w : written) {
        auto it = bound.find(w);
        if (it == bound.end()) continue;
        const Binding& bd = *it->second;
        const long e = buf(w).elements();
        const int whole = bd.whole(l, c.count);
        if (whole >= 0) spans.emplace_back(whole, 0L, e, w);
        else if (bd.buf >= 0) spans.emplace_back(bd.buf, bd.at(l), bd.at(l) + e, w);
      }
      for (size_t i = 0; i < spans.size(); ++i)
        for (size_t j = i + 1; j < spans.size(); ++j) {
          const auto& [b1, s1, e1, f1] = spans[i];
          const auto& [b2, s2, e2, f2] = spans[j];
          if (b1 == b2 && s1 < e2 && s2 < e1)
            fail(fmt::format("instance {}: '{}' and '{}' are written into the same elements of '{}'", l, buf(f1).name,
                             buf(f2).name, buf(b1).name));
        }
    }
    for (const std::vector<int>* l : {&c.reads, &c.writes})
      for (int b : *l)
        if (!valid(b) || buf(b).block != -1) fail(fmt::format("lists {} among what it reads or writes", name(b)));
    if (c.scratch != -1 && (!valid(c.scratch) || std::find(c.writes.begin(), c.writes.end(), c.scratch) == c.writes.end()))
      fail(fmt::format("its scratch {} is not among what it writes", name(c.scratch)));
  }

  // -- nests ------------------------------------------------------------------------------
  const Routine* r = nullptr;  // the routine being checked
  int block_ = -1;             // the block whose body it is (-1: an API routine, lowering's nests)
  std::string rname = {};      // its name in messages
  const Stmt* s = nullptr;     // the nest being checked
  std::vector<std::string> scalars = {};  // the routine's defined scalars so far

  bool decode() const { return r->kind == RoutineKind::Decode || r->kind == RoutineKind::BlockDecode; }
  // A routine of the inference state (no optimiser state there).
  bool inference() const {
    return r->kind == RoutineKind::Forward || r->kind == RoutineKind::Eval || r->kind == RoutineKind::BlockInfer || decode();
  }

  void affine(const Affine& a, const char* what) {
    for (const auto& t : a.terms)
      if (t.iter < 0 || static_cast<size_t>(t.iter) >= s->iters.size())
        fail(fmt::format("{} names loop {} of {}", what, t.iter, s->iters.size()));
  }

  // Buffer, arity and loops in range (checked, and reported, by access()).
  bool well_formed(const Access& a) const {
    if (!valid(a.buf) || a.index.size() != buf(a.buf).dims.size()) return false;
    for (const Affine& f : a.index)
      for (const auto& t : f.terms)
        if (t.iter < 0 || static_cast<size_t>(t.iter) >= s->iters.size()) return false;
    return true;
  }

  // The nests being checked use their own buffers: a block body its block's, everything
  // else the program's.
  void owned(int b, const char* what) {
    if (valid(b) && buf(b).block != block_)
      fail(fmt::format("{} '{}' of {}", what, buf(b).name,
                       buf(b).block == -1 ? std::string("the program, in a block body") : fmt::format("block #{}", buf(b).block)));
  }

  bool access(const Access& a, const char* what) {
    if (!valid(a.buf)) {
      fail(fmt::format("{} of {}", what, name(a.buf)));
      return false;
    }
    owned(a.buf, what);
    if (a.index.size() != buf(a.buf).dims.size()) {
      fail(fmt::format("{} of '{}' has {} indices for {} dims", what, buf(a.buf).name, a.index.size(), buf(a.buf).dims.size()));
      return false;
    }
    for (const Affine& f : a.index) affine(f, what);
    return true;
  }

  void expr(const Expr& e) {
    auto arity = [&](size_t n) {
      if (e.args.size() != n) fail(fmt::format("'{}' has {} operands, not {}", op_name(e.op), e.args.size(), n));
    };
    switch (e.op) {
      case Op::Const: arity(0); break;
      case Op::Scalar:
        arity(0);
        if (!is_builtin_scalar(e.name) && std::find(scalars.begin(), scalars.end(), e.name) == scalars.end())
          fail(fmt::format("reads the scalar '{}', which the routine does not define before", e.name));
        if (e.name == "n" && !r->io.batch) fail("reads the batch count n in a routine not called on a batch");
        break;
      case Op::Load:
        arity(0);
        if (access(e.access, "a load")) read(e.access.buf, "reads");
        break;
      case Op::Index: case Op::Keep:
        arity(e.op == Op::Keep ? 1 : 0);
        if (e.access.index.size() != 1) fail(fmt::format("'{}' has {} indices, not 1", op_name(e.op), e.access.index.size()));
        for (const Affine& f : e.access.index) affine(f, op_name(e.op));
        break;
      case Op::Neg: case Op::Pow: arity(1); break;
      case Op::Select: arity(3); break;
      case Op::Prim:
        if (!e.prim) fail("a prim without its row");
        else arity(static_cast<size_t>(e.prim->arity));
        break;
      case Op::Uniform: case Op::Normal:
        arity(2);
        if (!s->sequential) fail(fmt::format("draws '{}' in a nest that is not sequential", op_name(e.op)));
        break;
      default: arity(2); break;  // the binary operators
    }
    for (const ExprP& a : e.args)
      if (!a) fail(fmt::format("'{}' has a null operand", op_name(e.op)));
      else expr(*a);
  }

  // The out access reaches every cell of its buffer: one loop per dim over the whole dim (in
  // decode, the sequence loop at the row's position, a sequence axis at position 0, and a
  // cache's sequence slot, ir::Interface::slots).
  bool covers(const Access& out) const {
    std::vector<bool> seen(s->iters.size(), false);
    const auto& dims = buf(out.buf).dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      const Affine& f = out.index[d];
      if (decode() && f.terms.empty() && f.offset == 0) continue;  // (a row's position 0)
      if (decode() && buf(out.buf).role == Role::Cache && d == 0 && f.is_single_iter() &&
          s->iters[static_cast<size_t>(f.terms[0].iter)].batch) {
        seen[static_cast<size_t>(f.terms[0].iter)] = true;
        continue;
      }
      if (!f.is_single_iter() || seen[static_cast<size_t>(f.terms[0].iter)]) return false;
      seen[static_cast<size_t>(f.terms[0].iter)] = true;
      const Iter& it = s->iters[static_cast<size_t>(f.terms[0].iter)];
      const bool whole = it.size == dims[d].size && it.batch == dims[d].batch;
      if (!whole && !(decode() && it.at_pos)) return false;
    }
    return true;
  }

  // One index per dim: a single loop, each at most once, no longer than the axis, or a constant
  // inside it (mark_contractions.cpp's plain access).
  bool plain(const Access& a) const {
    std::vector<bool> seen(s->iters.size(), false);
    const auto& dims = buf(a.buf).dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      const Affine& f = a.index[d];
      if (f.terms.empty()) {
        if (f.offset < 0 || f.offset >= dims[d].size) return false;
        continue;
      }
      if (!f.is_single_iter()) return false;
      const auto it = static_cast<size_t>(f.terms[0].iter);
      if (seen[it] || s->iters[it].size > dims[d].size) return false;
      seen[it] = true;
    }
    return true;
  }

  void marks() {
    bool acc = true;  // (fused sibling sums: several, passes/fuse.cpp)
    for (const Assign& a : s->assigns) acc = acc && a.accum != Accum::Set;
    if (s->zero_first && !acc) fail("zero_first on a nest that is not all accumulations");
    for (const Assign& a : s->assigns)
      if (s->zero_first && acc && well_formed(a.out) && !covers(a.out))
        fail("zero_first, but the out access does not cover its buffer");
    if (s->product) {
      const Product& pr = *s->product;
      std::vector<const Expr*> loads;
      if (s->single()) collect_loads(s->assigns[0].body, loads);
      const Access& out = s->assigns[0].out;
      if (!s->single() || s->assigns[0].accum != Accum::Add || s->sequential || loads.size() != 2 ||
          !(loads[0]->access == pr.a) || !(loads[1]->access == pr.b))
        fail("a product mark on a nest that is not out += alpha * a * b with those factors");
      else if (well_formed(out) && well_formed(pr.a) && well_formed(pr.b) &&
               (pr.a.buf == out.buf || pr.b.buf == out.buf || !plain(out) || !plain(pr.a) || !plain(pr.b)))
        fail("a product mark with an access that is not plain, or out among its factors");
    }
    if (s->scaled_sum) {
      const Expr* body = s->single() ? s->assigns[0].body.get() : nullptr;
      if (!s->zero_first || !s->single() || s->assigns[0].accum != Accum::Add || body->op != Op::Mul ||
          !s->scaled_sum->scale || s->scaled_sum->scale->op != Op::Const || !s->scaled_sum->summand ||
          !same_expr(*s->scaled_sum->summand, *body->args[0]) || !same_expr(*s->scaled_sum->scale, *body->args[1]))
        fail("a scaled-sum mark on a nest that is not out = 0 += summand * constant");
    }
  }

  void call(const Call& c) {
    using K = Call::Kind;
    for (const std::vector<int>& l : {call_reads(c), call_writes(c)})
      for (int b : l) owned(b, call_name(c.kind));
    if (is_block_call(c.kind)) {
      if (block_ != -1) fail("a block call inside a block body");
      block_call(c);
      return;
    }
    if (c.kind == K::BlockRest) {
      if (block_ == -1 || r->kind != RoutineKind::BlockTrain) fail("the barrier of a training body outside one");
      return;
    }
    const bool attention = c.kind == K::AttentionForward || c.kind == K::AttentionBackward;
    const bool backward = c.kind == K::AttentionBackward || c.kind == K::EmbeddingBackward;
    std::vector<std::pair<const char*, int>> need;
    if (attention) need = {{"q", c.q}, {"k", c.k}, {"v", c.v}, {"o", c.o}, {"lse", c.lse}};
    else need = {{"ids", c.ids}, {backward ? "dout" : "o", backward ? c.dout : c.o}, {backward ? "dtable" : "table", backward ? c.dtable : c.table}};
    if (c.kind == K::AttentionBackward)
      for (auto f : std::vector<std::pair<const char*, int>>{{"dout", c.dout}, {"delta", c.delta}, {"dq", c.dq}, {"dk", c.dk}, {"dv", c.dv}})
        need.push_back(f);
    bool ok = true;
    for (auto [field, b] : need)
      if (!valid(b)) ok = false, fail(fmt::format("{}: its {} is {}", call_name(c.kind), field, name(b)));
    for (int b : {c.q, c.k, c.v, c.o, c.lse, c.dout, c.delta, c.dq, c.dk, c.dv, c.table, c.ids, c.dtable})
      if (b != -1 && !valid(b)) ok = false, fail(fmt::format("{}: a field is {}", call_name(c.kind), name(b)));
    for (long n : {c.seqs, c.heads, c.tq, c.tk, c.e, c.f, c.rows, c.width, c.group})
      if (n < 1) ok = false, fail(fmt::format("{}: a size is {}", call_name(c.kind), n));
    if (attention && c.heads % c.group != 0)
      ok = false, fail(fmt::format("{}: {} heads in groups of {}", call_name(c.kind), c.heads, c.group));
    if (attention && c.window < 0) fail(fmt::format("{}: window {}", call_name(c.kind), c.window));
    if (attention && c.window > 0 && !c.causal) fail(fmt::format("{}: a window without causal", call_name(c.kind)));
    if (c.ring && (!c.at_pos || c.window <= 0))
      fail(fmt::format("{}: keys in rings outside decode, or without a window", call_name(c.kind)));
    if (c.at_pos && (c.batch || !decode())) fail(fmt::format("{} at pos outside decode, or on a batch", call_name(c.kind)));
    if (!ok) return;
    const long seqs = (c.batch ? p.max_batch : 1) * c.seqs;
    auto holds = [&](const char* field, int b, long need_elems) {
      if (buf(b).elements() < need_elems)
        fail(fmt::format("{}: its {} '{}' has {} elements, fewer than the {} it reads or writes", call_name(c.kind), field,
                         buf(b).name, buf(b).elements(), need_elems));
    };
    auto same = [&](const char* field, int b, int of) {
      if (buf(b).dims != buf(of).dims) fail(fmt::format("{}: its {} '{}' has other dims than '{}'", call_name(c.kind), field, buf(b).name, buf(of).name));
    };
    if (attention) {
      // A view's last element: row (seqs * t - 1), head (heads - 1), width elements.
      auto view = [&](long rows, long width, long off, long row, long heads) {
        return off + (rows - 1) * (row ? row : heads * width) + heads * width;
      };
      const long kvh = c.heads / c.group;
      // (decode: q in a window's ring too when it shares the fused buffer of k and v)
      holds("q", c.q, view(buf(c.q).ring ? buf(c.q).ring : seqs * c.tq, c.e, c.q_off, c.q_row, c.heads));
      holds("k", c.k, view(seqs * c.tk, c.e, c.k_off, c.k_row, kvh));
      holds("v", c.v, view(seqs * c.tk, c.f, c.v_off, c.v_row, kvh));
      if (c.ring)
        for (int b : {c.k, c.v})
          if (buf(b).ring != c.tk)
            fail(fmt::format("{}: '{}' is not a ring of {} rows", call_name(c.kind), buf(b).name, c.tk));
      holds("o", c.o, seqs * c.tq * c.heads * c.f);
      holds("lse", c.lse, seqs * c.heads * c.tq);
      if (c.kind == K::AttentionBackward) {
        same("dout", c.dout, c.o), same("delta", c.delta, c.lse);
        same("dq", c.dq, c.q), same("dk", c.dk, c.k), same("dv", c.dv, c.v);
      }
    } else {
      if (buf(c.ids).ids <= 0) fail(fmt::format("{}: its ids '{}' are not integer ids", call_name(c.kind), buf(c.ids).name));
      holds("ids", c.ids, seqs);
      const int table = backward ? c.dtable : c.table, out = backward ? c.dout : c.o;
      if (buf(table).elements() != c.rows * c.width)
        fail(fmt::format("{}: its table '{}' is not {} x {}", call_name(c.kind), buf(table).name, c.rows, c.width));
      holds(backward ? "dout" : "o", out, seqs * c.width);
      if (backward && c.table != -1) same("dtable", c.dtable, c.table);
    }
  }

  // -- definedness: what the routine has on entry, then what its nests wrote so far ----------
  std::vector<bool> def = {};

  // A view and its stacked buffer count as one buffer (a write of either defines both).
  void read(int b, const char* how) {
    if (!valid(b) || def[static_cast<size_t>(b)]) return;
    const int s = buf(b).view_of;
    if (!valid(s) || !def[static_cast<size_t>(s)]) fail(fmt::format("{} {}, which nothing wrote before", how, name(b)));
  }
  void wrote(int b) {
    if (!valid(b)) return;
    def[static_cast<size_t>(b)] = true;
    if (valid(buf(b).view_of)) def[static_cast<size_t>(buf(b).view_of)] = true;
  }

  std::string at(size_t i) const {
    const Stmt& st = r->stmts[i];
    return fmt::format("routine {}, nest {} '{}'{}", rname, i, st.what, st.line ? fmt::format(" (spec line {})", st.line) : "");
  }

  void nest(size_t i, const Stmt& st) {
    s = &st;
    nest_at = static_cast<long>(i);
    for (const Iter& it : st.iters) {
      if (it.size < 1) fail(fmt::format("loop {} has size {}", it.name, it.size));
      if (it.batch && it.size != p.max_batch) fail(fmt::format("batch loop {} runs to {}, not max_batch", it.name, it.size));
      if (it.at_pos && (it.size != 1 || it.batch || !decode())) fail(fmt::format("loop {} at pos outside decode, or not of size 1", it.name));
    }
    if (st.call) {
      if (!st.iters.empty() || !st.assigns.empty() || st.zero_first || st.product || st.scaled_sum)
        fail("a call with loops, assignments or marks");
      call(*st.call);
      for (int b : call_reads(*st.call)) read(b, "its call reads");
      for (int b : call_writes(*st.call)) wrote(b);
    } else {
      if (st.assigns.empty()) fail("a nest without assignments");
      for (const Assign& a : st.assigns) {
        if (!a.body) fail("an assignment without a body");
        else expr(*a.body);  // its reads, at the point before this assignment
        const bool ok = access(a.out, "the out");
        if (ok && a.accum != Accum::Set && !st.zero_first) read(a.out.buf, "accumulates into");
        if (ok) wrote(a.out.buf);
        if (ok && st.assigns.size() > 1 && !st.zero_first) {  // (zero_first: sibling sums, marks())
          std::vector<bool> named(st.iters.size(), false);
          for (const Affine& f : a.out.index)
            for (const auto& t : f.terms)
              if (t.iter >= 0 && static_cast<size_t>(t.iter) < named.size()) named[static_cast<size_t>(t.iter)] = true;
          if (std::find(named.begin(), named.end(), false) != named.end())
            fail(fmt::format("a fused assignment to '{}' that does not name every loop", buf(a.out.buf).name));
        }
      }
      if (!st.assigns.empty() && st.assigns[0].body) marks();
    }
    if (st.parallel < -1 || st.parallel >= static_cast<int>(st.iters.size())) fail(fmt::format("parallel loop {}", st.parallel));
    if (st.update_of != -1 && st.update_of != kUpdateNorm && (st.update_of < 0 || static_cast<size_t>(st.update_of) >= p.params.size()))
      fail(fmt::format("update_of {}", st.update_of));
    if (st.update_count < 1 || (st.update_count > 1 && (st.update_of < 0 || static_cast<size_t>(st.update_of + st.update_count) > p.params.size())))
      fail(fmt::format("update_count {} from param {}", st.update_count, st.update_of));
    const std::vector<int> w = written_buffers(st);
    for (int g : st.grads_final)
      if (std::find(w.begin(), w.end(), g) == w.end() && (!valid(g) || std::find(w.begin(), w.end(), ir::storage(p, g)) == w.end()))
        fail(fmt::format("grads_final lists {}, which it does not write", name(g)));
    for (int b : w) {
      if (!valid(b)) continue;
      const Role role = buf(b).role;
      if (role == Role::Input || (role == Role::Cache && !decode()) ||
          (inference() && (role == Role::Param || role == Role::OptState)) ||
          (role == Role::Constant && r->kind != RoutineKind::Constants))
        fail(fmt::format("writes the {} '{}'", role_name(role), buf(b).name));
    }
  }

  // A routine touches a stacked buffer's views only before any nest touches the stacked
  // buffer itself (the optimiser's nests after the backward ones): the passes compare buffers,
  // not bytes, so this order is what keeps them from moving a nest across its alias.
  void views_then_stacks() {
    about("routine " + rname);
    std::vector<long> first(p.buffers.size(), -1), last(p.buffers.size(), -1);
    std::vector<const Expr*> loads;
    for (size_t k = 0; k < r->stmts.size(); ++k) {
      const Stmt& st = r->stmts[k];
      std::vector<int> bufs = written_buffers(st);
      if (st.call)
        for (int b : call_reads(*st.call)) bufs.push_back(b);
      loads.clear();
      collect_loads(st, loads);
      for (const Expr* l : loads) bufs.push_back(l->access.buf);
      for (int b : bufs) {
        if (!valid(b)) continue;
        if (first[static_cast<size_t>(b)] < 0) first[static_cast<size_t>(b)] = static_cast<long>(k);
        last[static_cast<size_t>(b)] = static_cast<long>(k);
      }
    }
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const int s = p.buffers[b].view_of;
      if (!valid(s) || last[b] < 0 || first[static_cast<size_t>(s)] < 0) continue;
      if (last[b] >= first[static_cast<size_t>(s)])
        fail(fmt::format("nest {} uses the view '{}' after nest {} used its stacked buffer '{}'", last[b], p.buffers[b].name,
                         first[static_cast<size_t>(s)], buf(s).name));
    }
  }

  // Every buffer the routine hands out is written by its end (or held on entry).
  void handed_out() {
    about("routine " + rname);
    for (const std::vector<int>* l : {&r->io.outputs, &r->io.values, &r->io.kept})
      for (int b : *l) {
        if (!valid(b)) fail(fmt::format("its interface lists {}", name(b)));
        else if (!def[static_cast<size_t>(b)] && !(valid(buf(b).view_of) && def[static_cast<size_t>(buf(b).view_of)]))
          fail(fmt::format("hands out {}, which it never writes", name(b)));
      }
  }

  // What routine r has on entry: the state, caches, its inputs, and what its caller provides.
  std::vector<bool> entry() const {
    std::vector<bool> e(p.buffers.size(), false);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const Role role = p.buffers[b].role;
      e[b] = role == Role::Param || (role == Role::OptState && !inference()) || (role == Role::Cache && decode()) ||
             (role == Role::Constant && r->kind != RoutineKind::Constants);
    }
    if (r->io.batch || r->io.position)
      for (int b : p.inputs)
        if (valid(b)) e[static_cast<size_t>(b)] = true;
    if (block_ >= 0) {  // a body: what its calls bind but the values it carries out
      const Block& bl = p.blocks[static_cast<size_t>(block_)];
      for (int f : bl.formals) e[static_cast<size_t>(f)] = true;
      for (const auto& [in, out] : bl.carried) e[static_cast<size_t>(out)] = false;
    }
    if (r->kind == RoutineKind::TrainUpdate)  // the gradients train_grads keeps (all-reduced by the caller)
      if (const Routine* g = p.routine(RoutineKind::TrainGrads))
        for (int b : g->io.kept)
          if (valid(b)) {
            e[static_cast<size_t>(b)] = true;
            if (valid(buf(b).view_of)) e[static_cast<size_t>(buf(b).view_of)] = true;
          }
    return e;
  }

  void routine(const Routine& rt, const std::string& label) {
    r = &rt;
    rname = label;
    def = entry();
    scalars.clear();
    for (const ScalarDef& d : rt.scalars) {
      about(fmt::format("routine {}, scalar {}", rname, d.name));
      std::vector<const Expr*> loads;
      if (d.value) collect_loads(d.value, loads);
      if (!d.value || !loads.empty()) fail("a scalar definition without a value, or reading a buffer");
      else {
        const Stmt none;  // no loops
        s = &none;
        expr(*d.value);
        s = nullptr;
      }
      scalars.push_back(d.name);
    }
    if (!rt.lr_scalar.empty() && !is_builtin_scalar(rt.lr_scalar) &&
        std::find(scalars.begin(), scalars.end(), rt.lr_scalar) == scalars.end())
      fail(fmt::format("its lr scalar '{}' is not defined", rt.lr_scalar));
    for (size_t i = 0; i < rt.stmts.size(); ++i) nest(i, rt.stmts[i]);
    views_then_stacks();
    handed_out();
    plan();
  }

  // -- memory ------------------------------------------------------------------------------
  // The buffers routine rt reads, writes or hands out (valid ones), each once, in order.
  std::map<const Routine*, std::vector<int>> used_by = {};
  const std::vector<int>& used(const Routine& rt) {
    auto [it, fresh] = used_by.try_emplace(&rt);
    if (!fresh) return it->second;
    std::vector<bool> u(p.buffers.size(), false);
    auto use = [&](int b) {
      if (valid(b)) u[static_cast<size_t>(b)] = true;
    };
    std::vector<const Expr*> loads;
    for (const Stmt& st : rt.stmts) {
      for (int b : written_buffers(st)) use(b);
      if (st.call)
        for (int b : call_reads(*st.call)) use(b);
      loads.clear();
      collect_loads(st, loads);
      for (const Expr* l : loads) use(l->access.buf);
    }
    for (const std::vector<int>* l : {&rt.io.outputs, &rt.io.values, &rt.io.kept})
      for (int b : *l) use(b);
    for (size_t b = 0; b < u.size(); ++b)
      if (u[b]) it->second.push_back(static_cast<int>(b));
    return it->second;
  }

  long bytes(int b) const { return align_up(buf(b).elements() * p.layout.elem_bytes, p.layout.align); }
  bool view(size_t b) const { return p.buffers[b].view_of >= 0; }

  void plan() {
    about("routine " + rname);
    hosted();
    if (r->offsets.empty()) {
      if (r->arena_bytes != 0) fail(fmt::format("an arena of {} bytes without offsets", r->arena_bytes));
      return;
    }
    // (a block body's plan, made by plan_blocks, may predate buffers added since: none of them its)
    if (r->offsets.size() != p.buffers.size() && (r->offsets.size() > p.buffers.size() || block_of(p, *r) < 0)) {
      fail(fmt::format("{} offsets for {} buffers", r->offsets.size(), p.buffers.size()));
      return;
    }
    std::vector<bool> u(p.buffers.size(), false);
    for (int b : used(*r)) u[static_cast<size_t>(b)] = true;
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const long off = b < r->offsets.size() ? r->offsets[b] : -1;
      if (off == -1) continue;
      const Role role = p.buffers[b].role;
      if (off < 0 || !u[b] || role == Role::Input || role == Role::Param ||
          role == Role::OptState || role == Role::Cache || role == Role::Constant)
        fail(fmt::format("an offset {} for the {} '{}' (used: {})", off, role_name(role), p.buffers[b].name,
                         u[b] ? "yes" : "no"));
      else if (p.layout.align > 0 && (off % p.layout.align || off + bytes(static_cast<int>(b)) > r->arena_bytes))
        fail(fmt::format("'{}' at offset {} is unaligned or past the arena's {} bytes", p.buffers[b].name, off, r->arena_bytes));
    }
    shared_bytes();
  }

  // A block body's locals in a formal's bytes (Routine::hosted, passes/plan_blocks.cpp): each a
  // local of the body without an offset, not handed out, living in one half of the body, in a
  // formal its calls bind (a training body's saved activation included), no larger (per example
  // when batched, as both must then be); its lifetime there apart from the span in which the
  // formal's bytes are needed (ir::formal_live), or meeting it only at one end, in place (the
  // same dims); apart from the other locals in the same formal.
  void hosted() {
    if (r->hosted.empty()) return;
    const int k = block_of(p, *r);
    if (k < 0) {
      fail("locals in formals' bytes outside a block body");
      return;
    }
    const Block& bl = p.blocks[static_cast<size_t>(k)];
    const bool train = r == &bl.train;
    const size_t n = r->stmts.size(), bar = train ? barrier_at(*r) : n;
    const std::set<int> saved(bl.saved.begin(), bl.saved.end());
    std::set<int> bound(bl.formals.begin(), bl.formals.end());
    if (train) bound.insert(bl.saved.begin(), bl.saved.end());
    const std::set<int> live = live_out(p, *r);
    std::map<int, std::pair<long, long>> life;
    std::vector<const Expr*> loads;
    for (size_t i = 0; i < n; ++i) {
      const Stmt& st = r->stmts[i];
      std::set<int> u;
      for (int b : st.call ? call_writes(*st.call) : written_buffers(st)) u.insert(b);
      if (st.call)
        for (int b : call_reads(*st.call)) u.insert(b);
      loads.clear();
      collect_loads(st, loads);
      for (const Expr* l : loads) u.insert(l->access.buf);
      for (int b : u) {
        auto [it, fresh] = life.try_emplace(b, static_cast<long>(i), static_cast<long>(i));
        if (!fresh) it->second.second = static_cast<long>(i);
      }
    }
    std::set<int> seen;
    std::map<int, std::vector<std::pair<long, long>>> in;
    for (const auto& [l, f] : r->hosted) {
      if (!valid(l) || !valid(f) || !life.count(l)) {
        fail(fmt::format("{} in the bytes of {}", name(l), name(f)));
        continue;
      }
      const Buffer &lb = buf(l), &fb = buf(f);
      if (!seen.insert(l).second || lb.block != k || lb.formal || bound.count(l) || r->planned(l) || live.count(l) ||
          !bound.count(f) || lb.batched() != fb.batched() ||
          (lb.batched() ? lb.example_elements() > fb.example_elements() : lb.elements() > fb.elements())) {
        fail(fmt::format("{} in the bytes of {}: not a local of the body (once, no offset, not handed out) in a "
                         "formal its calls bind, as large or larger", name(l), name(f)));
        continue;
      }
      const auto [fl, ll] = life.at(l);
      const bool fwd = static_cast<size_t>(ll) < bar;
      if (!fwd && static_cast<size_t>(fl) <= bar) {
        fail(fmt::format("{} in the bytes of {} lives across the barrier", name(l), name(f)));
        continue;
      }
      const size_t lo = fwd ? 0 : bar + 1, hi = fwd ? bar : n;
      const auto [a, z] = formal_live(p, *r, lo, hi, f, !fwd && saved.count(f));
      const bool ends = (ll == a || fl == z) && lb.dims == fb.dims;
      bool ok = ll < a || fl > z || ends;
      for (const auto& [x, y] : in[f]) ok = ok && (ll < x || fl > y);
      in[f].push_back({fl, ll});
      if (!ok)
        fail(fmt::format("{} (nests {}..{}) in the bytes of {}, needed over nests {}..{}, or of another local there",
                         name(l), fl, ll, name(f), a, z));
    }
  }

  // Buffers that share bytes do not live at once (plan_memory.cpp): each lives from the first
  // nest that touches it to the last (to the end when handed out); one's last nest may be the
  // other's first only in place, at the same offset. Sizes before the layout are a lower bound
  // (4-byte elements).
  void shared_bytes() {
    const size_t nb = p.buffers.size();
    const long n = static_cast<long>(r->stmts.size());
    std::vector<long> first(nb, -1), last(nb, -1);
    std::vector<const Expr*> loads;
    for (long k = 0; k < n; ++k) {
      const Stmt& st = r->stmts[static_cast<size_t>(k)];
      auto touch = [&](int b) {
        if (!valid(b)) return;
        if (first[static_cast<size_t>(b)] < 0) first[static_cast<size_t>(b)] = k;
        last[static_cast<size_t>(b)] = k;
      };
      for (int b : written_buffers(st)) touch(b);
      if (st.call)
        for (int b : call_reads(*st.call)) touch(b);
      loads.clear();
      collect_loads(st, loads);
      for (const Expr* l : loads) touch(l->access.buf);
    }
    for (int b : live_out(p, *r))
      if (valid(b) && first[static_cast<size_t>(b)] >= 0) last[static_cast<size_t>(b)] = n;
    const long elem = p.layout.align > 0 ? p.layout.elem_bytes : 4;
    struct Span {
      long lo, hi;
      size_t b;
    };
    // At max_batch, and at a cap of 1 (run-time-sized states): a batched buffer lies in the
    // plan's scaled part, at fixed_bytes + a per-example offset times the cap.
    for (const long cap : {p.max_batch, 1L}) {
      std::vector<Span> spans;
      for (size_t b = 0; b < nb; ++b) {
        if (b >= r->offsets.size() || r->offsets[b] < 0 || first[b] < 0) continue;
        const int bi = static_cast<int>(b);
        const Buffer& x = p.buffers[b];
        if (x.batched() && (!r->scaled(bi) || (r->offsets[b] - r->fixed_bytes) % p.max_batch)) {
          fail(fmt::format("the batched '{}' at {} is not in the plan's scaled part (from {})", x.name, r->offsets[b],
                           r->fixed_bytes));
          return;
        }
        const long lo = r->scaled(bi) ? r->fixed_bytes + r->example_offset(bi, p.max_batch) * cap : r->offsets[b];
        spans.push_back({lo, lo + (x.batched() ? x.example_elements() * cap : x.elements()) * elem, b});
      }
      std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.lo < y.lo; });
      for (size_t i = 0; i < spans.size(); ++i)
        for (size_t j = i + 1; j < spans.size() && spans[j].lo < spans[i].hi; ++j) {
          const size_t a = spans[i].b, c = spans[j].b;
          const bool apart = last[a] < first[c] || last[c] < first[a];
          const bool in_place = spans[i].lo == spans[j].lo && (last[a] == first[c] || last[c] == first[a]);
          if (!apart && !in_place)
            fail(fmt::format("'{}' (nests {}..{}) and '{}' (nests {}..{}) share bytes (batch {})", p.buffers[a].name,
                             first[a], last[a], p.buffers[c].name, first[c], last[c], cap));
        }
    }
  }

  // Fields [field, + bytes) of the buffers `own` marks: aligned, inside [0, size), disjoint (the
  // region `reserved` included).
  void disjoint(const std::vector<long>& field, const std::vector<bool>* own, long size, std::pair<long, long> reserved) {
    std::vector<std::pair<long, long>> spans;  // start, end
    if (reserved.second > reserved.first) spans.push_back(reserved);
    for (size_t b = 0; b < field.size(); ++b) {
      if (own ? !(*own)[b] : field[b] < 0) continue;
      if (view(b)) {  // inside its stacked buffer, at its slice
        const int s = p.buffers[b].view_of;
        if (field[static_cast<size_t>(s)] < 0 || field[b] != field[static_cast<size_t>(s)] + p.buffers[b].view_offset * p.layout.elem_bytes)
          fail(fmt::format("the view '{}' is at {}, not at its slice of '{}'", p.buffers[b].name, field[b], buf(s).name));
        continue;
      }
      const long at = field[b], end = at + bytes(static_cast<int>(b));
      if (at < 0 || at % p.layout.align || end > size) fail(fmt::format("'{}' at {} is unaligned or outside its {} bytes", p.buffers[b].name, at, size));
      spans.emplace_back(at, end);
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second)
        fail(fmt::format("the fields at {} and {} overlap", spans[i - 1].first, spans[i].first));
  }

  void arena(const char* what, const Arena& a, bool training) {
    about(fmt::format("layout, the {} arena", what));
    const size_t n = p.buffers.size();
    if (a.field.size() != n || a.own.size() != n) {
      fail(fmt::format("{} fields and {} own flags for {} buffers", a.field.size(), a.own.size(), n));
      return;
    }
    const long work_end = a.work >= 0 ? a.work + align_up(a.work_bytes, p.layout.align) : 0;
    if (a.bytes < p.layout.align || a.bytes % p.layout.align || (a.work >= 0 && (a.work % p.layout.align || work_end > a.bytes)))
      fail(fmt::format("{} bytes with a work region at {} of {} bytes", a.bytes, a.work, a.work_bytes));
    disjoint(a.field, &a.own, a.bytes, {a.work, work_end});
    for (size_t b = 0; b < n; ++b) {
      const int bi = static_cast<int>(b);
      const bool state = p.buffers[b].role == Role::Param || p.buffers[b].role == Role::OptState;
      if (view(b)) continue;  // (checked against its stacked buffer)
      if (a.own[b] && (state ? a.field[b] + bytes(bi) > a.state : a.field[b] < a.state))
        fail(fmt::format("'{}' is {} the state prefix", p.buffers[b].name, state ? "outside" : "inside"));
      if (!a.own[b] && a.field[b] >= 0 && (a.work < 0 || a.field[b] < a.work || a.field[b] + bytes(bi) > work_end))
        fail(fmt::format("'{}' points outside the work region", p.buffers[b].name));
    }
    if (a.grads >= 0)
      for (int param : p.params) {
        const int g = p.grad(param);
        const long span = g >= 0 && view(static_cast<size_t>(g)) ? buf(g).elements() * p.layout.elem_bytes : g >= 0 ? bytes(g) : 0;
        if (g >= 0 && (!a.own[static_cast<size_t>(g)] || a.field[static_cast<size_t>(g)] < a.grads ||
                       a.field[static_cast<size_t>(g)] + span > a.grads + a.grads_bytes))
          fail(fmt::format("the gradient '{}' is outside the grad block", buf(g).name));
      }
    for (const Routine& rt : p.routines) {
      const bool in = rt.kind == RoutineKind::Decode ? !training
                      : training || rt.kind == RoutineKind::Forward || rt.kind == RoutineKind::Eval ||
                            rt.kind == RoutineKind::Constants;
      if (!in) continue;
      for (int b : used(rt)) {
        const Buffer& x = buf(b);
        const bool in_block = x.role == Role::OptState && static_cast<size_t>(b) < p.layout.opt_state.field.size() &&
                              p.layout.opt_state.field[static_cast<size_t>(b)] >= 0;
        if (x.role != Role::Input && !in_block && a.address(rt, b) < 0)
          fail(fmt::format("routine {} uses '{}', which has no address here", rt.name(), x.name));
      }
    }
  }

  void layout() {
    if (p.layout.align <= 0) return;  // not laid out yet
    arena("training", p.layout.training, true);
    arena("inference", p.layout.inference, false);
    const OptBlock& ob = p.layout.opt_state;
    if (ob.field.empty()) return;
    about("layout, the optimiser-state block");
    if (ob.field.size() != p.buffers.size() || ob.param_start.size() != p.params.size() + 1 ||
        !std::is_sorted(ob.param_start.begin(), ob.param_start.end()) || ob.param_start.back() != ob.bytes) {
      fail("its fields or param starts do not match the buffers and params");
      return;
    }
    disjoint(ob.field, nullptr, ob.bytes, {0, 0});
  }

  // Blocks (issue 34, step 5: ir.h has no Block yet) get their checks here, called from run():
  // API routines reference only program buffers (block -1, not views), a body routine only its
  // block's; each call's bindings cover the formals, an actual has its formal's dims, the
  // [first, last] instances stay in range, written formals' actuals do not overlap per
  // instance; a view lies inside its storage.

  // Each block's bodies (its nests as lowering made them before routine assembly), as routines
  // of its own buffers.
  void bodies() {
    for (size_t k = 0; k < p.blocks.size(); ++k) {
      const Block& bl = p.blocks[k];
      block_ = static_cast<int>(k);
      bool any = false;
      for (const Routine* b : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode})
        if (!b->stmts.empty()) {
          any = true;
          routine(*b, fmt::format("block {} {}", bl.name, b->name()));
        }
      if (!any) {
        Routine body{RoutineKind::BlockInfer};
        body.io.batch = true;
        body.stmts = bl.forward;
        routine(body, "block " + bl.name + " body");
      }
      block_ = -1;
    }
  }

  void run() {
    program();
    if (!problems.empty()) return;  // later checks index buffers through these
    for (const Routine& rt : p.routines) routine(rt, rt.name());
    bodies();
    layout();
  }
};

void raise(const std::vector<std::string>& problems, const std::string& stage) {
  if (problems.empty()) return;
  std::string msg = fmt::format("after {}: the IR verifier found {} problem{}", stage, problems.size(),
                                problems.size() == 1 ? "" : "s");
  for (size_t i = 0; i < problems.size() && i < kMaxProblems; ++i) msg += "\n  " + problems[i];
  if (problems.size() > kMaxProblems) msg += fmt::format("\n  ... and {} more", problems.size() - kMaxProblems);
  CANNL_BUG(msg);
}

}  // namespace

std::vector<std::string> verify_problems(const Program& p) {
  Verifier v{p};
  v.run();
  return v.problems;
}

std::vector<std::string> lowered_problems(const Program& p, const std::vector<Stmt>& forward,
                                          const std::vector<Stmt>& train_updates) {
  Routine all{RoutineKind::TrainStep};
  all.io.batch = true;
  all.stmts = forward;
  all.stmts.insert(all.stmts.end(), train_updates.begin(), train_updates.end());
  Verifier v{p};
  v.program();
  if (v.problems.empty()) {
    v.routine(all, "lowering's nests");
    v.bodies();
  }
  return v.problems;
}

void verify(const Program& p, const std::string& stage) { raise(verify_problems(p), stage); }

void verify_lowered(const Program& p, const std::vector<Stmt>& forward, const std::vector<Stmt>& train_updates,
                    const std::string& stage) {
  raise(lowered_problems(p, forward, train_updates), stage);
}

}  // namespace cannl::ir
