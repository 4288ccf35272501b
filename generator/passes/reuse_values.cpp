// reuse_values.cpp — loads of a stored tensor instead of recomputing its value.
//
// Takes: any Program. For a nest P that stores `B[i...] = e` over the whole of B (pointwise,
// one assignment), a later nest R of the same routine, before anything writes B or a
// buffer e reads, that computes
//   e itself at some cells (up to renaming P's loops into R's indices)  ->  B at those cells;
//   step(x) where e = relu(x)                                           ->  step(B at the cells)
// (relu(x) > 0 exactly when x > 0: the backward mask of  h = relu(h_mm + b)  reads h, and
// h_mm + b is not recomputed; h_mm may then die right after h is stored).
// Guarantees: the same values (the stored cell holds exactly what e computes there).
#include <optional>

#include "ir/prims.h"
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

using ir::Expr;
using ir::ExprP;
using ir::Op;
using Sigma = std::vector<std::optional<ir::Affine>>;

bool unify_affine(const ir::Affine& in_p, const ir::Affine& in_r, Sigma& sigma) {
  if (in_p.is_single_iter()) {
    auto& s = sigma[static_cast<size_t>(in_p.terms[0].iter)];
    if (!s) {
      s = in_r;
      return true;
    }
    return *s == in_r;
  }
  std::vector<ir::Affine> full;
  for (const auto& s : sigma) full.push_back(s ? *s : ir::Affine::constant(0));
  for (const auto& t : in_p.terms)
    if (!sigma[static_cast<size_t>(t.iter)]) return false;
  return passes::compose(in_p, full) == in_r;
}

// x (in R's loops) is e (in P's loops) under the renaming sigma (extended as needed).
bool unify(const Expr& x, const Expr& e, Sigma& sigma) {
  if (x.op != e.op || x.value != e.value || x.prim != e.prim || x.name != e.name || x.args.size() != e.args.size())
    return false;
  if (x.op == Op::Load || x.op == Op::Index || x.op == Op::Keep) {
    if (x.access.buf != e.access.buf || x.access.index.size() != e.access.index.size()) return false;
    for (size_t d = 0; d < x.access.index.size(); ++d)
      if (!unify_affine(e.access.index[d], x.access.index[d], sigma)) return false;
  }
  for (size_t i = 0; i < x.args.size(); ++i)
    if (!unify(*x.args[i], *e.args[i], sigma)) return false;
  return true;
}

struct Reuser {
  const ir::Program& p;
  const ir::Stmt& producer;
  const ir::Stmt& reader;
  bool changed = false;

  // B at the cells sigma names, when every loop of P is named and they are inside B.
  ExprP stored(const Sigma& sigma) const {
    ir::Access a{producer.only().out.buf, {}};
    for (const auto& ix : producer.only().out.index) {
      const auto& s = sigma[static_cast<size_t>(ix.terms[0].iter)];
      if (!s) return nullptr;
      a.index.push_back(*s);
    }
    if (!passes::always_in_range(p, reader, a)) return nullptr;
    return ir::load(a);
  }

  ExprP match(const Expr& x) const {
    Sigma sigma(producer.iters.size());
    const Expr& e = *producer.only().body;
    if (unify(x, e, sigma)) return stored(sigma);
    if (ir::is_call(x, "step") && ir::is_call(e, "relu")) {
      Sigma s2(producer.iters.size());
      if (unify(*x.args[0], *e.args[0], s2))
        if (ExprP l = stored(s2)) return ir::call("step", {l});
    }
    return nullptr;
  }

  ExprP run(const ExprP& x) {
    if (ExprP r = match(*x)) {
      changed = true;
      return r;
    }
    if (x->args.empty()) return x;
    std::vector<ExprP> args;
    bool any = false;
    for (const ExprP& a : x->args) {
      args.push_back(run(a));
      any |= args.back() != a;
    }
    return any ? passes::rebuild(*x, std::move(args)) : x;
  }
};

bool candidate(const ir::Program& p, const ir::Stmt& s) {
  if (!s.single()) return false;
  const ir::Assign& a = s.only();
  return a.accum == ir::Accum::Set && !s.sequential && passes::covers_buffer(p, s, a.out) && a.body->op != Op::Load &&
         a.body->op != Op::Const && a.body->op != Op::Scalar && passes::in_arena(p.buffers[static_cast<size_t>(a.out.buf)]);
}

}  // namespace

void reuse_values(ir::Program& p, const PassOptions&) {
  for (ir::Routine* rp : ir::all_routines(p)) {
    ir::Routine& r = *rp;
    const size_t n = r.stmts.size();
    // The nests that load and that write each buffer, by position. A match of e loads what e
    // loads, so only those nests can hold one; `loaders` grows as matches become loads of B.
    std::vector<std::set<size_t>> loaders(p.buffers.size()), writers(p.buffers.size());
    for (size_t j = 0; j < n; ++j) {
      std::vector<const Expr*> ls;
      ir::collect_loads(r.stmts[j], ls);
      for (const Expr* l : ls) loaders[static_cast<size_t>(l->access.buf)].insert(j);
      for (int w : passes::writes(r.stmts[j])) writers[static_cast<size_t>(w)].insert(j);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!candidate(p, r.stmts[i])) continue;
      const ir::Stmt producer = r.stmts[i];
      const int b = producer.only().out.buf;
      std::set<int> inputs = passes::reads(producer);
      inputs.insert(b);
      // Up to the first nest that writes what e reads, or B.
      size_t end = n;
      for (int in : inputs) {
        const auto& w = writers[static_cast<size_t>(in)];
        if (auto it = w.upper_bound(i); it != w.end()) end = std::min(end, *it);
      }
      std::vector<const Expr*> ls;
      ir::collect_loads(producer.only().body, ls);
      std::set<size_t> readers;
      if (ls.empty()) {  // nothing to look for by buffer: every nest
        for (size_t j = i + 1; j < end; ++j) readers.insert(j);
      } else {  // a match loads every buffer e loads: the nests loading the rarest of them
        const std::set<size_t>* rarest = nullptr;
        for (const Expr* l : ls) {
          const auto& ld = loaders[static_cast<size_t>(l->access.buf)];
          if (!rarest || ld.size() < rarest->size()) rarest = &ld;
        }
        readers.insert(rarest->upper_bound(i), rarest->lower_bound(end));
      }
      for (size_t j : readers) {
        ir::Stmt& s = r.stmts[j];
        Reuser u{p, producer, s};
        for (ir::Assign& a : s.assigns) a.body = u.run(a.body);
        if (u.changed) loaders[static_cast<size_t>(b)].insert(j);
      }
    }
  }
}

}  // namespace cannl
