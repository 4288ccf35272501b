// remap.cpp — renumbering buffers (see remap.h).
#include "ir/remap.h"

#include <fmt/format.h>

#include "support/diagnostic.h"

namespace cannl::ir {

ExprP remap_expr(const ExprP& e, const BufferMap& f) {
  auto c = std::make_shared<Expr>(*e);
  if (c->op == Op::Load) c->access.buf = f(c->access.buf);
  for (auto& a : c->args) a = remap_expr(a, f);
  return c;
}

Stmt remap_stmt(const Stmt& s, const BufferMap& f) {
  Stmt t = s;
  auto m = [&](int& b) {
    if (b >= 0) b = f(b);
  };
  for (Assign& a : t.assigns) {
    m(a.out.buf);
    a.body = remap_expr(a.body, f);
  }
  if (t.call) {
    Call& c = *t.call;
    for (int* b : {&c.q, &c.k, &c.v, &c.o, &c.lse, &c.dout, &c.delta, &c.dq, &c.dk, &c.dv, &c.table, &c.ids, &c.dtable}) m(*b);
    for (Binding& bd : c.binds) {
      m(bd.formal);
      m(bd.buf);
      m(bd.first);
      m(bd.last);
    }
    for (int& b : c.reads) m(b);
    for (int& b : c.writes) m(b);
    m(c.scratch);
  }
  if (t.product) {
    m(t.product->a.buf);
    m(t.product->b.buf);
    if (t.product->alpha) t.product->alpha = remap_expr(t.product->alpha, f);
  }
  if (t.scaled_sum) {
    t.scaled_sum->summand = remap_expr(t.scaled_sum->summand, f);
    t.scaled_sum->scale = remap_expr(t.scaled_sum->scale, f);
  }
  for (int& g : t.grads_final) m(g);
  return t;
}

void remap_buffers(Program& p, const std::vector<int>& map, const std::vector<std::vector<Stmt>*>& lists) {
  const size_t n = p.buffers.size();
  if (map.size() != n) CANNL_BUG("remap_buffers: a map of another size than the buffers");
  size_t kept = 0;
  for (int to : map) kept += to >= 0;
  std::vector<bool> taken(kept, false);
  for (int to : map) {
    if (to < -1 || to >= static_cast<int>(kept) || (to >= 0 && taken[static_cast<size_t>(to)]))
      CANNL_BUG("remap_buffers: not a permutation of the kept buffers");
    if (to >= 0) taken[static_cast<size_t>(to)] = true;
  }
  const BufferMap f = [&](int b) {
    if (b < 0 || static_cast<size_t>(b) >= n || map[static_cast<size_t>(b)] < 0)
      CANNL_BUG(fmt::format("remap_buffers: buffer #{} ({}) is dropped but still used", b,
                            b >= 0 && static_cast<size_t>(b) < n ? p.buffers[static_cast<size_t>(b)].name : "?"));
    return map[static_cast<size_t>(b)];
  };
  auto opt = [&](int& b) {
    if (b >= 0) b = f(b);
  };
  auto list = [&](std::vector<int>& l) {
    for (int& b : l) b = f(b);
  };
  // A vector indexed by buffer, moved to the new indices.
  auto permute = [&](auto& v, auto none) {
    if (v.empty()) return;
    if (v.size() != n) CANNL_BUG("remap_buffers: a per-buffer vector of another size");
    std::remove_reference_t<decltype(v)> w(kept, none);
    for (size_t b = 0; b < n; ++b)
      if (map[b] >= 0) w[static_cast<size_t>(map[b])] = v[b];
    v = std::move(w);
  };
  std::vector<Buffer> bufs(kept);
  for (size_t b = 0; b < n; ++b)
    if (map[b] >= 0) bufs[static_cast<size_t>(map[b])] = std::move(p.buffers[b]);
  for (Buffer& b : bufs) {
    opt(b.state_of);
    opt(b.view_of);
  }
  list(p.inputs);
  list(p.outputs);
  list(p.params);
  list(p.metrics);
  for (OptimizerGroup& g : p.opt.groups) {
    std::set<int> params;
    for (int b : g.params) params.insert(f(b));
    g.params = std::move(params);
  }
  opt(p.loss);
  std::map<int, int> grads;
  for (const auto& [b, g] : p.grads) grads[f(b)] = f(g);
  p.grads = std::move(grads);
  std::vector<Routine*> routines;
  for (Block& bl : p.blocks)
    for (Routine* r : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode}) routines.push_back(r);
  for (Routine& r : p.routines) routines.push_back(&r);
  for (Routine* r : routines) {
    for (Stmt& s : r->stmts) s = remap_stmt(s, f);
    list(r->io.outputs);
    list(r->io.values);
    list(r->io.kept);
    opt(r->io.ids);
    permute(r->offsets, -1L);
    for (auto& [l, host] : r->hosted) l = f(l), host = f(host);
  }
  for (Arena* a : {&p.layout.training, &p.layout.inference}) {
    permute(a->field, -1L);
    permute(a->own, false);
  }
  permute(p.layout.opt_state.field, -1L);
  for (Block& bl : p.blocks) {
    list(bl.formals);
    list(bl.locals);
    for (auto& [in, out] : bl.carried) in = f(in), out = f(out);
    list(bl.saved);
    for (Stmt& s : bl.forward) s = remap_stmt(s, f);
    std::map<int, int> at;
    for (const auto& [b, pos] : bl.name_at) at[f(b)] = pos;
    bl.name_at = std::move(at);
  }
  for (std::vector<Stmt>* l : lists)
    for (Stmt& s : *l) s = remap_stmt(s, f);
  p.buffers = std::move(bufs);
}

}  // namespace cannl::ir
