// rewrite.cpp — helpers shared by the passes (see rewrite.h).
#include "passes/rewrite.h"

#include <cmath>

#include <algorithm>

#include "ir/prims.h"

namespace cannl::passes {

using ir::Expr;
using ir::ExprP;
using ir::Op;

ExprP rebuild(const Expr& e, std::vector<ExprP> args) {
  switch (e.op) {
    case Op::Const: case Op::Scalar: case Op::Index: case Op::Load: case Op::Keep: {
      return std::make_shared<Expr>(e);
    }
    case Op::Pow: return ir::pow(args[0], e.value);
    case Op::Select: return ir::select(args[0], args[1], args[2]);
    case Op::Prim: return ir::call(*e.prim, std::move(args));
    case Op::Uniform: case Op::Normal: {
      auto c = std::make_shared<Expr>(e);
      c->args = std::move(args);
      return c;
    }
    default: break;
  }
  if (args.size() == 2) return ir::binary(e.op, args[0], args[1]);
  return ir::unary(e.op, args[0]);
}

ExprP rewrite(const ExprP& e, const std::function<ExprP(const Expr&)>& leaf) {
  if (e->op == Op::Load || e->op == Op::Index || e->op == Op::Keep) {
    ExprP r = leaf(*e);
    return r ? r : e;
  }
  if (e->args.empty()) return e;
  std::vector<ExprP> args;
  bool changed = false;
  for (const ExprP& a : e->args) {
    args.push_back(rewrite(a, leaf));
    changed |= args.back() != a;
  }
  return changed ? rebuild(*e, std::move(args)) : e;
}

namespace {

bool is_num(const ExprP& e) { return e->op == Op::Const; }
bool is_wide(const ExprP& e) { return e->op == Op::Const && e->wide; }

// a * b with a constant factor of either operand moved to the right of the product.
ExprP mul(ExprP a, ExprP b) {
  if (is_num(a) && !is_num(b)) std::swap(a, b);
  if (is_wide(b) || (a->op == Op::Mul && is_wide(a->args[1])))  // x * (1/c) stays as it is
    return ir::binary(Op::Mul, a, b);
  if (is_num(b)) {
    if (a->op == Op::Mul && is_num(a->args[1]))  // (x * c1) * c2
      return mul(a->args[0], ir::cnst(a->args[1]->value * b->value));
    return ir::binary(Op::Mul, a, b);
  }
  if (b->op == Op::Mul && is_num(b->args[1]))  // x * (y * c)
    return mul(mul(a, b->args[0]), b->args[1]);
  if (a->op == Op::Mul && is_num(a->args[1]))  // (x * c) * y
    return mul(mul(a->args[0], b), a->args[1]);
  return ir::binary(Op::Mul, a, b);
}

}  // namespace

namespace {

ExprP simplified(const ExprP& e, std::vector<ExprP> args);

}  // namespace

// (An expression that is already simple comes back as the same node: its nodes stay shared.)
ExprP simplify_expr(const ExprP& e) {
  if (e->args.empty()) return e;
  std::vector<ExprP> args;
  bool same = true;
  for (const ExprP& a : e->args) {
    args.push_back(simplify_expr(a));
    same = same && args.back() == a;
  }
  ExprP r = simplified(e, std::move(args));
  return same && ir::same_expr(*r, *e) ? e : r;
}

namespace {

ExprP simplified(const ExprP& e, std::vector<ExprP> args) {
  if (e->op == Op::Mul) return mul(args[0], args[1]);
  // x / c -> x * (1/c). When 1/c is inexact (c not a power of two) the constant is `wide`:
  // the product is taken in double, which rounds as the division does (a float32 multiply by
  // 1/255 differs from / 255 for half of the pixel values, and from -O0 and PyTorch).
  if (e->op == Op::Div && is_num(args[1]) && args[1]->value != 0 && !is_num(args[0])) {
    int exp = 0;
    auto r = std::make_shared<ir::Expr>(*ir::cnst(1 / args[1]->value));
    r->wide = std::frexp(std::fabs(args[1]->value), &exp) != 0.5;
    return mul(args[0], r);
  }
  return rebuild(*e, std::move(args));
}

}  // namespace

ir::Affine compose(const ir::Affine& a, const std::vector<ir::Affine>& sigma) {
  ir::Affine r = ir::Affine::constant(a.offset);
  for (const auto& t : a.terms) {
    const ir::Affine& s = sigma[static_cast<size_t>(t.iter)];
    r.offset += t.coef * s.offset;
    for (const auto& u : s.terms) {
      auto it = std::find_if(r.terms.begin(), r.terms.end(), [&](const auto& v) { return v.iter == u.iter; });
      if (it == r.terms.end()) r.terms.push_back({u.iter, t.coef * u.coef});
      else it->coef += t.coef * u.coef;
    }
  }
  r.terms.erase(std::remove_if(r.terms.begin(), r.terms.end(), [](const auto& v) { return v.coef == 0; }),
                r.terms.end());
  return r;
}

void affine_range(const ir::Affine& a, const std::vector<ir::Iter>& iters, long& lo, long& hi) {
  lo = hi = a.offset;
  for (const auto& t : a.terms) {
    long top = t.coef * (iters[static_cast<size_t>(t.iter)].size - 1);
    lo += std::min(0L, top);
    hi += std::max(0L, top);
  }
}

bool always_in_range(const ir::Program& p, const ir::Stmt& s, const ir::Access& a) {
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    long lo, hi;
    affine_range(a.index[d], s.iters, lo, hi);
    if (lo < 0 || hi > dims[d].size - 1) return false;
    // A batch axis indexed by a loop that is not the batch loop could pass n.
    for (const auto& t : a.index[d].terms)
      if (dims[d].batch && !s.iters[static_cast<size_t>(t.iter)].batch) return false;
  }
  return true;
}

bool injective(const ir::Access& a) {
  std::set<int> seen;
  for (const auto& ix : a.index)
    if (!ix.is_single_iter() || !seen.insert(ix.terms[0].iter).second) return false;
  return true;
}

bool pointwise(const ir::Stmt& s) {
  if (s.call) return false;
  for (const ir::Assign& a : s.assigns)
    if (!injective(a.out) || a.out.index.size() != s.iters.size()) return false;
  return true;
}

bool covers_buffer(const ir::Program& p, const ir::Stmt& s, const ir::Access& a) {
  if (!injective(a) || a.index.size() != s.iters.size()) return false;
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    const ir::Iter& it = s.iters[static_cast<size_t>(a.index[d].terms[0].iter)];
    if (it.size != dims[d].size || it.batch != dims[d].batch) return false;
  }
  return true;
}

static bool single_load(const Expr& e) {
  if (e.op != Op::Load) return false;
  for (const auto& ix : e.access.index)
    if (!ix.is_single_iter()) return false;
  return true;
}

bool is_contraction(const ir::Stmt& s) {
  if (!s.single() || s.only().accum != ir::Accum::Add || !injective(s.only().out)) return false;
  const Expr* e = s.only().body.get();
  if (e->op == Op::Mul && (e->args[1]->op == Op::Const || e->args[1]->op == Op::Scalar) && e->args[0]->op == Op::Mul)
    e = e->args[0].get();
  return e->op == Op::Mul && single_load(*e->args[0]) && single_load(*e->args[1]);
}

std::set<int> reads(const ir::Stmt& s) {
  std::vector<const Expr*> loads;
  ir::collect_loads(s, loads);
  std::set<int> r;
  if (s.call) {
    const auto c = ir::call_reads(*s.call);
    r.insert(c.begin(), c.end());
  }
  for (const Expr* l : loads) r.insert(l->access.buf);
  for (const auto& a : s.assigns)
    if (a.accum != ir::Accum::Set && !s.zero_first) r.insert(a.out.buf);
  return r;
}

std::set<int> writes(const ir::Stmt& s) {
  auto w = ir::written_buffers(s);
  return {w.begin(), w.end()};
}

bool independent(const ir::Stmt& a, const ir::Stmt& b) {
  auto ra = reads(a), wa = writes(a), rb = reads(b), wb = writes(b);
  for (int x : wa)
    if (rb.count(x) || wb.count(x)) return false;
  for (int x : wb)
    if (ra.count(x)) return false;
  return true;
}

bool in_arena(const ir::Buffer& b) {
  return (b.role == ir::Role::Computed || b.role == ir::Role::Temp || b.role == ir::Role::Grad) && b.stack == 0 &&
         b.view_of < 0 && !b.formal;
}

static bool invariant(const Expr& e) {
  if (e.op == Op::Load || e.op == Op::Index || e.op == Op::Keep) return false;
  for (const ExprP& a : e.args)
    if (!invariant(*a)) return false;
  return true;
}

double cost(const Expr& e) {
  if (invariant(e)) return 0;  // hoisted out of the loops by the C compiler
  double c = 0;
  switch (e.op) {
    case Op::Const: case Op::Scalar: case Op::Index: case Op::Load: break;
    case Op::Prim: c = e.prim->cost; break;
    case Op::Pow: case Op::Div: c = 4; break;
    default: c = 1;
  }
  for (const ExprP& a : e.args) c += cost(*a);
  return c;
}

int count_loads(const ir::Stmt& s, int buf) {
  std::vector<const Expr*> loads;
  ir::collect_loads(s, loads);
  int n = 0;
  for (const Expr* l : loads) n += l->access.buf == buf;
  return n;
}

}  // namespace cannl::passes
