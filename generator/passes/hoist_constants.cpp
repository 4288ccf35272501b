// hoist_constants.cpp — constant tables computed once, when a state is created.
//
// Takes: a Program after dce (before plan_blocks, decode and memory planning). Guarantees: a
// buffer is a *constant table* when it is a computed tensor or temporary of no batch axis that
// nothing hands out, no call writes, no init, norm or update routine writes, and every nest
// writing it, in every routine, is a constant nest: an ordinary nest (not sequential, not an
// update) with no batch loop and no loop at a run-time position, whose assignments write
// constant tables only and read nothing but constant tables, constants and loop indices (no
// run-time scalar: n, lr, step, the RNG's key; no random draw, no dropout). Rope's cos and sin
// tables are such (lower/rotary.cpp); so is a chain of such nests. Each constant table becomes
// a buffer of role Constant with storage of its own in every state (passes/plan_layout.cpp),
// written by one new routine of kind Constants (`init_constants`, which the emitters call
// when they create a state) in the order its nests first appear (the bodies of rolled blocks
// first, then the API routines, as ir::all_routines lists them), and its nests are removed from
// every other routine: the train step, forward, eval and (the decode pass, which runs later,
// makes it from forward) the decode step read the table and never compute it.
// A table of a rolled repeat block's body (a local, the same for every instance: roll.cpp rolls
// only instances whose nests are equal but for their buffers) becomes a program buffer once,
// not per instance: the local turns into a formal that every call of the block running nests
// that read it binds to that buffer, whole, for every instance. What depends on the instance
// index (contract v2 §4: `x[t]`) reads a per-instance binding or stays in expanded instances, so
// it is either not constant here (a formal) or hoisted per expanded instance, each its own table.
// The values are the same: the same nests, the same expressions, only run earlier. A nest
// writing tables that an earlier routine defines and tables this one defines first would be
// run twice; its tables are left where they are (none is known to arise).
#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

bool runtime_free(const ir::Expr& e) {
  switch (e.op) {
    case ir::Op::Scalar: case ir::Op::Uniform: case ir::Op::Normal: case ir::Op::Keep: return false;
    default: break;
  }
  for (const ir::ExprP& a : e.args)
    if (!runtime_free(*a)) return false;
  return true;
}

// Routines whose nests are never moved: their writes keep a buffer out of the tables.
bool kept_routine(ir::RoutineKind k) {
  return k == ir::RoutineKind::Init || k == ir::RoutineKind::BlockInit || k == ir::RoutineKind::BlockNorm ||
         k == ir::RoutineKind::TrainUpdate || k == ir::RoutineKind::Constants;
}

class Hoister {
public:
  explicit Hoister(ir::Program& p) : p_(p) {}

  void run() {
    for (;;) {
      candidates();
      fixpoint();
      if (!split_conflicts()) break;
    }
    move();
  }

private:
  ir::Program& p_;
  std::vector<bool> cand_;
  std::set<int> excluded_;  // tables a mixed nest would run twice (split_conflicts)

  bool is_cand(int b) const { return b >= 0 && cand_[static_cast<size_t>(b)]; }

  void candidates() {
    const size_t n = p_.buffers.size();
    cand_.assign(n, false);
    for (size_t b = 0; b < n; ++b) {
      const ir::Buffer& x = p_.buffers[b];
      bool batched = false;
      for (const ir::Dim& d : x.dims) batched = batched || d.batch;
      cand_[b] = (x.role == ir::Role::Temp || x.role == ir::Role::Computed) && !batched && x.stack == 0 &&
                 x.view_of < 0 && !x.formal && x.ids == 0 && x.ring == 0 && !excluded_.count(static_cast<int>(b));
    }
    auto out = [&](int b) {
      if (b >= 0 && static_cast<size_t>(b) < n) cand_[static_cast<size_t>(b)] = false;
    };
    for (int b : p_.inputs) out(b);
    for (int b : p_.outputs) out(b);
    for (int b : p_.metrics) out(b);
    out(p_.loss);
    for (const auto& [b, g] : p_.grads) out(b), out(g);
    for (const ir::Routine* r : ir::all_routines(p_)) {
      for (const std::vector<int>* l : {&r->io.outputs, &r->io.values, &r->io.kept})
        for (int b : *l) out(b);
      for (const ir::Stmt& s : r->stmts)
        if (s.call || kept_routine(r->kind))
          for (int w : s.call ? ir::call_writes(*s.call) : ir::written_buffers(s)) out(w);
    }
  }

  bool constant_nest(const ir::Stmt& s) const {
    if (s.call || s.sequential || s.update_of != -1 || s.assigns.empty()) return false;
    for (const ir::Iter& it : s.iters)
      if (it.batch || it.at_pos) return false;
    for (const ir::Assign& a : s.assigns)
      if (!is_cand(a.out.buf) || !runtime_free(*a.body)) return false;
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads)
      if (!is_cand(l->access.buf) && p_.buffers[static_cast<size_t>(l->access.buf)].role != ir::Role::Constant)
        return false;
    return true;
  }

  // The greatest set of candidates that only constant nests write.
  void fixpoint() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const ir::Routine* r : ir::all_routines(p_))
        for (const ir::Stmt& s : r->stmts) {
          if (s.call) continue;
          bool touches = false;
          for (int w : ir::written_buffers(s)) touches = touches || is_cand(w);
          if (!touches || constant_nest(s)) continue;
          for (int w : ir::written_buffers(s))
            if (is_cand(w)) cand_[static_cast<size_t>(w)] = false, changed = true;
        }
    }
  }

  // The routine defining each table: the first (ir::all_routines order) that writes it.
  std::map<int, const ir::Routine*> definers() const {
    std::map<int, const ir::Routine*> def;
    for (const ir::Routine* r : ir::all_routines(p_))
      for (const ir::Stmt& s : r->stmts)
        if (!s.call)
          for (int w : ir::written_buffers(s))
            if (is_cand(w)) def.try_emplace(w, r);
    return def;
  }

  // Excludes the tables of a nest that defines some of them and recomputes others (run twice
  // in init_constants otherwise); true when it did.
  bool split_conflicts() {
    const auto def = definers();
    bool any = false;
    for (const ir::Routine* r : ir::all_routines(p_))
      for (const ir::Stmt& s : r->stmts) {
        if (s.call || !constant_nest(s)) continue;
        size_t mine = 0;
        const std::vector<int> w = ir::written_buffers(s);
        for (int b : w) mine += def.at(b) == r;
        if (mine == 0 || mine == w.size()) continue;
        for (int b : w) excluded_.insert(b);
        any = true;
      }
    return any;
  }

  // A body local's table: a program buffer of its own (made on first use).
  int table_of(int b, std::map<int, int>& outer, int line) {
    if (auto it = outer.find(b); it != outer.end()) return it->second;
    ir::Buffer t = p_.buffers[static_cast<size_t>(b)];
    const int block = t.block;
    t.block = -1;
    t.formal = false;
    t.role = ir::Role::Constant;
    t.name = p_.unique_name(t.name);
    t.shape = fmt::format("{}a constant table (line {}), one for every instance of block {}", spec_part(t.shape), line,
                          p_.blocks[static_cast<size_t>(block)].name);
    p_.buffers.push_back(std::move(t));
    const int id = static_cast<int>(p_.buffers.size()) - 1;
    cand_.push_back(false);
    outer[b] = id;
    return id;
  }

  void move() {
    const auto def = definers();
    if (def.empty()) return;
    ir::Routine consts{ir::RoutineKind::Constants};
    std::map<int, int> outer;  // body local -> its program table
    std::map<int, std::set<int>> hoisted_locals;  // block -> its locals turned formals
    auto target = [&](int b) { return outer.count(b) ? outer.at(b) : b; };
    for (ir::Routine* r : ir::all_routines(p_)) {
      std::vector<ir::Stmt> kept;
      for (ir::Stmt& s : r->stmts) {
        if (s.call || !constant_nest(s)) {
          kept.push_back(std::move(s));
          continue;
        }
        const std::vector<int> w = ir::written_buffers(s);
        if (def.at(w[0]) != r) continue;  // (defined by an earlier routine: the same nests)
        const int block = p_.buffers[static_cast<size_t>(w[0])].block;
        ir::Stmt c = s;
        std::vector<const ir::Expr*> loads;
        ir::collect_loads(s, loads);
        for (const ir::Expr* l : loads)
          if (p_.buffers[static_cast<size_t>(l->access.buf)].block >= 0) table_of(l->access.buf, outer, s.line);
        for (ir::Assign& a : c.assigns) {
          if (block >= 0) {
            hoisted_locals[block].insert(a.out.buf);
            a.out.buf = table_of(a.out.buf, outer, s.line);
          }
          a.body = passes::rewrite(a.body, [&](const ir::Expr& e) -> ir::ExprP {
            if (e.op != ir::Op::Load || !outer.count(e.access.buf)) return nullptr;
            ir::Access acc = e.access;
            acc.buf = target(acc.buf);
            return ir::load(acc, e.nograd);
          });
        }
        consts.stmts.push_back(std::move(c));
      }
      r->stmts = std::move(kept);
    }
    for (const auto& [b, r] : def) {
      ir::Buffer& x = p_.buffers[static_cast<size_t>(b)];
      if (x.block >= 0) continue;
      x.role = ir::Role::Constant;
      x.shape = fmt::format("{}a constant table (line {})", spec_part(x.shape), line_of(consts, b));
    }
    for (const auto& [k, locals] : hoisted_locals) bind(k, locals, outer);
    p_.routines.push_back(std::move(consts));
  }

  // A buffer's spec text before the table's note: none for a temporary's (its dims, "[128, 16]").
  static std::string spec_part(const std::string& shape) {
    return shape.empty() || shape[0] == '[' ? std::string() : shape + "; ";
  }

  static int line_of(const ir::Routine& consts, int b) {
    for (const ir::Stmt& s : consts.stmts)
      for (int w : ir::written_buffers(s))
        if (w == b) return s.line;
    return 0;
  }

  // Block k's hoisted locals become formals, bound whole to their tables by every call whose
  // nests read them; the lowering's copy of the body drops their nests.
  void bind(int k, const std::set<int>& locals, const std::map<int, int>& outer) {
    ir::Block& bl = p_.blocks[static_cast<size_t>(k)];
    for (int b : locals) {
      bl.locals.erase(std::remove(bl.locals.begin(), bl.locals.end(), b), bl.locals.end());
      bl.formals.push_back(b);
      p_.buffers[static_cast<size_t>(b)].formal = true;
    }
    std::vector<ir::Stmt> fwd;
    for (ir::Stmt& s : bl.forward) {
      bool hoisted = false;
      for (int w : ir::written_buffers(s)) hoisted = hoisted || locals.count(w);
      if (!hoisted || s.call) fwd.push_back(std::move(s));
    }
    bl.forward = std::move(fwd);
    for (ir::Routine* r : ir::all_routines(p_))
      for (ir::Stmt& s : r->stmts) {
        if (!s.call || !ir::is_block_call(s.call->kind) || s.call->block != k) continue;
        ir::Call& c = *s.call;
        const ir::Routine& body = ir::body_of(bl, c.kind);
        const auto [lo, hi] = ir::body_span(bl, c.kind);
        std::set<int> read;
        for (size_t i = lo; i < hi && i < body.stmts.size(); ++i)
          for (int b : passes::reads(body.stmts[i])) read.insert(b);
        for (int b : locals) {
          if (!read.count(b)) continue;
          ir::Binding bd;
          bd.formal = b;
          bd.buf = outer.at(b);
          c.binds.push_back(bd);
          if (std::find(c.reads.begin(), c.reads.end(), bd.buf) == c.reads.end()) c.reads.push_back(bd.buf);
        }
      }
  }
};

}  // namespace

void hoist_constants(ir::Program& p, const PassOptions&) { Hoister(p).run(); }

}  // namespace cannl
