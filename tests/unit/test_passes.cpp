// The optimisation passes (generator/passes/), each on a small hand-written IR fragment:
// the fragment's nests as text before and after the one pass.
#include <catch2/catch.hpp>

#include <functional>

#include "ir/ir_print.h"
#include "ir/stats.h"
#include "emit/c_emit.h"
#include "ir/prims.h"
#include "passes/pipeline.h"
#include "program.h"

using namespace cannl;
using ir::Op;

namespace {

// A program with one routine, a training step, built nest by nest.
struct Frag {
  ir::Program p;
  Frag() {
    p.model = "t";
    p.max_batch = 4;
    p.routines.push_back({ir::RoutineKind::TrainStep});
    p.routines[0].io.batch = true;
  }
  // A buffer; a gradient of a param (grad_of) is one the training step keeps for the caller.
  int buf(const std::string& name, std::vector<ir::Dim> dims, ir::Role role = ir::Role::Computed, int grad_of = -1) {
    ir::Buffer b;
    b.name = name;
    b.dims = std::move(dims);
    b.role = role;
    p.buffers.push_back(b);
    int i = static_cast<int>(p.buffers.size()) - 1;
    if (role == ir::Role::Param) p.params.push_back(i);
    if (grad_of >= 0) {
      p.grads[grad_of] = i;
      if (p.buffers[static_cast<size_t>(grad_of)].role == ir::Role::Param) p.routines[0].io.kept.push_back(i);
    }
    return i;
  }
  // The loss, which the training step returns.
  void set_loss(int b) {
    p.loss = b;
    p.routines[0].io.values = {b};
  }
  // Loops by name and size ("b" is the batch loop).
  std::vector<ir::Iter> iters;
  void loops(std::vector<std::pair<std::string, long>> l) {
    iters.clear();
    for (auto& [n, s] : l) iters.push_back({n, s, n == "b"});
  }
  static ir::Access at(int buf, std::vector<int> its) {
    ir::Access a{buf, {}};
    for (int i : its) a.index.push_back(ir::Affine::of(i));
    return a;
  }
  static ir::ExprP ld(int buf, std::vector<int> its) { return ir::load(at(buf, std::move(its))); }
  ir::Stmt& nest(int buf, std::vector<int> its, ir::Accum accum, ir::ExprP body) {
    p.routines[0].stmts.push_back(ir::nest(iters, at(buf, std::move(its)), accum, std::move(body)));
    return p.routines[0].stmts.back();
  }
  std::string text() const {
    std::string s;
    for (const auto& st : p.routines[0].stmts) s += ir::print_stmt(st, p) + "\n";
    return s;
  }
  std::string run(void (*pass)(ir::Program&, const PassOptions&)) {
    pass(p, PassOptions{});
    return text();
  }
};

ir::ExprP mul(ir::ExprP a, ir::ExprP b) { return ir::binary(Op::Mul, std::move(a), std::move(b)); }
ir::ExprP add(ir::ExprP a, ir::ExprP b) { return ir::binary(Op::Add, std::move(a), std::move(b)); }
ir::ExprP div(ir::ExprP a, ir::ExprP b) { return ir::binary(Op::Div, std::move(a), std::move(b)); }
ir::ExprP c(double v) { return ir::cnst(v); }

}  // namespace

TEST_CASE("pass list and levels", "[passes]") {
  std::vector<std::string> names;
  for (const auto& p : pass_list()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"loop_order", "simplify", "fold_fills", "reuse_values", "inline_virtual",
                                          "order_sums", "fuse", "hoist_divisions", "dce", "hoist_constants",
                                          "plan_blocks", "decode", "plan_memory", "mark_contractions", "plan_layout"});
  Frag f;
  int x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input), y = f.buf("y", {{4, true}, {3, false}});
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(y, {0, 1}, ir::Accum::Set, div(Frag::ld(x, {0, 1}), c(4)));
  const std::string before = f.text();
  std::vector<std::string> ran;
  PassOptions o;
  o.level = 0;
  run_passes(f.p, o, [&](const std::string& n, const ir::Program&) { ran.push_back(n); });
  CHECK(ran == std::vector<std::string>{"loop_order", "plan_blocks", "decode", "mark_contractions", "plan_layout"});  // -O0
  CHECK(f.text() == before);
  ran.clear();
  o.level = 1;
  o.disabled = {"dce"};
  run_passes(f.p, o, [&](const std::string& n, const ir::Program&) { ran.push_back(n); });
  CHECK(ran == std::vector<std::string>{"loop_order", "simplify", "fold_fills", "hoist_divisions", "hoist_constants",
                                        "plan_blocks", "decode", "plan_memory", "mark_contractions", "plan_layout"});
}

TEST_CASE("simplify: division by a constant, constant factors, identities", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input), w = f.buf("w", {{2, false}, {3, false}}, ir::Role::Param);
  int y = f.buf("y", {{4, true}, {3, false}}), z = f.buf("z", {{4, true}, {2, false}});
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(y, {0, 1}, ir::Accum::Set, div(Frag::ld(x, {0, 1}), c(4)));
  // (2 * x) * 3 + 0: built without the constructors' folding of the + 0
  auto sum = std::make_shared<ir::Expr>();
  sum->op = Op::Add;
  sum->args = {mul(mul(c(2), Frag::ld(x, {0, 1})), c(3)), c(0)};
  f.nest(y, {0, 1}, ir::Accum::Set, sum);
  f.loops({{"b", 4}, {"o", 2}, {"k", 3}});
  f.nest(z, {0, 1}, ir::Accum::Add, mul(Frag::ld(w, {1, 2}), mul(Frag::ld(x, {0, 2}), c(0.5))));
  CHECK(f.run(simplify) ==
        "for b < n, o < 3:  y[b, o] = x[b, o] * 0.25\n"
        "for b < n, o < 3:  y[b, o] = x[b, o] * 6\n"
        "for b < n, o < 2, k < 3:  z[b, o] += w[o, k] * x[b, k] * 0.5\n");
}

TEST_CASE("simplify: an inexact reciprocal multiplies in double and is not reassociated", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input);
  int y = f.buf("y", {{4, true}, {3, false}});
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(y, {0, 1}, ir::Accum::Set, mul(div(Frag::ld(x, {0, 1}), c(255)), c(2)));
  CHECK(f.run(simplify) == "for b < n, o < 3:  y[b, o] = x[b, o] * (1/255) * 2\n");
  const ir::Expr& body = *f.p.routines[0].stmts[0].only().body;
  REQUIRE(body.args[0]->args[1]->op == Op::Const);
  CHECK(body.args[0]->args[1]->wide);  // emitted as (real)((double)x * 0.00392156862745098...)
  // Every float32 pixel value divided by 255 equals the double product rounded to float.
  for (int v = 0; v < 256; ++v)
    CHECK(static_cast<float>(static_cast<double>(v) * (1.0 / 255)) == static_cast<float>(v) / 255.0f);
}

TEST_CASE("fold_fills: fills become zero_first -- a pointwise += becomes =", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input);
  int s = f.buf("s", {{4, true}}), m = f.buf("m", {{4, true}}), g = f.buf("g", {{4, true}, {3, false}});
  int r = f.buf("r", {{4, true}});
  f.loops({{"j", 4}});
  f.iters[0].batch = true;
  f.nest(s, {0}, ir::Accum::Set, c(0));
  f.nest(m, {0}, ir::Accum::Set, c(-INFINITY));
  f.nest(r, {0}, ir::Accum::Set, c(0));
  f.loops({{"j0", 4}, {"j1", 3}});
  f.iters[0].batch = true;
  f.nest(g, {0, 1}, ir::Accum::Set, c(0));
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(s, {0}, ir::Accum::Add, Frag::ld(x, {0, 1}));
  f.nest(m, {0}, ir::Accum::Max, Frag::ld(x, {0, 1}));
  f.nest(g, {0, 1}, ir::Accum::Add, mul(Frag::ld(x, {0, 1}), c(2)));
  f.nest(r, {0}, ir::Accum::Add, Frag::ld(r, {0}));  // reads r: the fill stays
  CHECK(f.run(fold_fills) ==
        "for j < n:  r[j] = 0\n"
        "for b < n, o < 3:  s[b] = 0 += x[b, o]\n"
        "for b < n, o < 3:  m[b] = -inf max= x[b, o]\n"
        "for b < n, o < 3:  g[b, o] = x[b, o] * 2\n"
        "for b < n, o < 3:  r[b] += r[b]\n");
}

TEST_CASE("reuse_values: a relu mask reads the stored relu -- a recomputed value is loaded", "[passes]") {
  Frag f;
  int a = f.buf("a", {{4, true}, {3, false}}), bias = f.buf("bias", {{3, false}}, ir::Role::Param);
  int h = f.buf("h", {{4, true}, {3, false}}), hg = f.buf("hg", {{4, true}, {3, false}});
  int ag = f.buf("ag", {{4, true}, {3, false}}), bg = f.buf("bias_grad", {{3, false}}, ir::Role::Grad, bias);
  f.loops({{"b", 4}, {"o", 3}});
  auto z = [&] { return add(Frag::ld(a, {0, 1}), Frag::ld(bias, {1})); };
  f.nest(h, {0, 1}, ir::Accum::Set, ir::call("relu", {z()}));
  f.nest(ag, {0, 1}, ir::Accum::Set, mul(Frag::ld(hg, {0, 1}), ir::call("step", {z()})));
  f.loops({{"o", 3}, {"b", 4}});
  f.nest(bg, {0}, ir::Accum::Add, mul(Frag::ld(hg, {1, 0}), ir::call("step", {add(Frag::ld(a, {1, 0}), Frag::ld(bias, {0}))})));
  CHECK(f.run(reuse_values) ==
        "for b < n, o < 3:  h[b, o] = relu(a[b, o] + bias[o])\n"
        "for b < n, o < 3:  ag[b, o] = hg[b, o] * step(h[b, o])\n"
        "for o < 3, b < n:  bias_grad[o] += ag[b, o]\n");
}

TEST_CASE("inline_virtual: cheap and read-once tensors inlined, escaping ones stored", "[passes]") {
  Frag f;
  int img = f.buf("img", {{4, true}, {3, false}}, ir::Role::Input), w = f.buf("w", {{2, false}, {3, false}}, ir::Role::Param);
  int x = f.buf("x", {{4, true}, {3, false}}), mm = f.buf("mm", {{4, true}, {2, false}});
  int e = f.buf("e", {{4, true}, {2, false}}), tw = f.buf("tw", {{4, true}, {2, false}});
  int loss = f.buf("loss", {});
  f.set_loss(loss);
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(x, {0, 1}, ir::Accum::Set, mul(Frag::ld(img, {0, 1}), c(0.5)));  // cheap: into the contraction
  f.loops({{"b", 4}, {"o", 2}, {"k", 3}});
  f.nest(mm, {0, 1}, ir::Accum::Add, mul(Frag::ld(w, {1, 2}), Frag::ld(x, {0, 2})));
  f.loops({{"b", 4}, {"o", 2}});
  f.nest(e, {0, 1}, ir::Accum::Set, ir::call("exp", {Frag::ld(mm, {0, 1})}));   // expensive, read twice: stored
  f.nest(tw, {0, 1}, ir::Accum::Set, ir::call("tanh", {Frag::ld(mm, {0, 1})}));  // expensive, read once: inlined
  f.nest(loss, {}, ir::Accum::Add, add(mul(Frag::ld(e, {0, 1}), Frag::ld(e, {0, 1})), Frag::ld(tw, {0, 1})));
  f.p.routines[0].stmts.back().only().out.index.clear();
  CHECK(f.run(inline_virtual) ==
        "for b < n, o < 2, k < 3:  mm[b, o] += w[o, k] * img[b, k] * 0.5\n"
        "for b < n, o < 2:  e[b, o] = exp(mm[b, o])\n"
        "for b < n, o < 2:  loss[] += e[b, o] * e[b, o] + tanh(mm[b, o])\n");
}

TEST_CASE("inline_virtual: a contraction keeps its form", "[passes]") {
  Frag f;
  int a = f.buf("a", {{4, true}, {3, false}}, ir::Role::Input), w = f.buf("w", {{2, false}, {3, false}}, ir::Role::Param);
  int h = f.buf("h", {{4, true}, {3, false}}), mm = f.buf("mm", {{4, true}, {2, false}});
  f.p.loss = mm;
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(h, {0, 1}, ir::Accum::Set, ir::call("relu", {Frag::ld(a, {0, 1})}));
  f.loops({{"b", 4}, {"o", 2}, {"k", 3}});
  f.nest(mm, {0, 1}, ir::Accum::Add, mul(Frag::ld(w, {1, 2}), Frag::ld(h, {0, 2})));
  const std::string before = f.text();
  CHECK(f.run(inline_virtual) == before);
}

TEST_CASE("fuse: pointwise nests over the same loops become one", "[passes]") {
  Frag f;
  int w = f.buf("w", {{2, false}, {3, false}}, ir::Role::Param), g = f.buf("w_grad", {{2, false}, {3, false}}, ir::Role::Grad, w);
  int mb = f.buf("w_mb", {{2, false}, {3, false}}, ir::Role::OptState);
  int lg = f.buf("lg", {{4, true}, {2, false}}), s = f.buf("s", {{4, true}}), x = f.buf("x", {{4, true}, {2, false}}, ir::Role::Input);
  f.loops({{"j0", 2}, {"j1", 3}});
  f.nest(mb, {0, 1}, ir::Accum::Set, add(mul(Frag::ld(mb, {0, 1}), c(0.9)), Frag::ld(g, {0, 1})));
  f.nest(w, {0, 1}, ir::Accum::Set, ir::binary(Op::Sub, Frag::ld(w, {0, 1}), Frag::ld(mb, {0, 1})));
  f.loops({{"b", 4}, {"o", 2}});
  f.nest(lg, {0, 1}, ir::Accum::Set, Frag::ld(x, {0, 1}));
  f.nest(s, {0}, ir::Accum::Add, Frag::ld(x, {0, 1}));  // a reduction: not fused, moved past
  f.nest(lg, {0, 1}, ir::Accum::Add, mul(Frag::ld(s, {0}), Frag::ld(x, {0, 1})));
  CHECK(f.run(fuse) ==
        "for j0 < 2, j1 < 3:  w_mb[j0, j1] = w_mb[j0, j1] * 0.9 + w_grad[j0, j1];  w[j0, j1] = w[j0, j1] - w_mb[j0, j1]\n"
        "for b < n, o < 2:  s[b] += x[b, o]\n"
        "for b < n, o < 2:  lg[b, o] = x[b, o] + s[b] * x[b, o]\n");
}

TEST_CASE("fuse: sibling column sums over the same loops share one nest", "[passes]") {
  Frag f;
  int d = f.buf("d", {{4, true}, {3, false}}, ir::Role::Input), h = f.buf("h", {{4, true}, {3, false}}, ir::Role::Input);
  int e = f.buf("e", {{4, true}, {3, false}});
  int g = f.buf("g", {{3, false}}), bb = f.buf("bb", {{3, false}}), m = f.buf("m", {{3, false}});
  int r = f.buf("r", {{4, true}}), g2 = f.buf("g2", {{3, false}}), m2 = f.buf("m2", {{3, false}});
  f.loops({{"b", 4}, {"c", 3}});
  f.nest(g, {1}, ir::Accum::Add, mul(Frag::ld(d, {0, 1}), ir::call("relu", {Frag::ld(h, {0, 1})}))).zero_first = true;
  f.nest(e, {0, 1}, ir::Accum::Set, mul(Frag::ld(d, {0, 1}), c(2)));  // independent: moved past
  f.nest(bb, {1}, ir::Accum::Add, Frag::ld(d, {0, 1})).zero_first = true;
  f.nest(m, {1}, ir::Accum::Add, mul(Frag::ld(g, {1}), Frag::ld(e, {0, 1}))).zero_first = true;  // reads g: apart
  f.nest(r, {0}, ir::Accum::Add, Frag::ld(h, {0, 1})).zero_first = true;  // a row sum: apart
  f.nest(g2, {1}, ir::Accum::Add, mul(Frag::ld(d, {0, 1}), Frag::ld(h, {0, 1}))).zero_first = true;  // a contraction
  f.nest(m2, {1}, ir::Accum::Add, ir::call("relu", {Frag::ld(e, {0, 1})})).zero_first = true;  // reads nothing of bb's
  const std::string before = f.text();
  PassOptions off;
  off.fuse_sums = false;  // (the CUDA target)
  ir::Program kept = f.p;
  fuse(kept, off);
  Frag k;
  k.p = kept;
  CHECK(k.text() == before);
  CHECK(f.run(fuse) ==
        "for b < n, c < 3:  g[c] = 0 += d[b, c] * relu(h[b, c]);  bb[c] = 0 += d[b, c]\n"
        "for b < n, c < 3:  e[b, c] = d[b, c] * 2\n"
        "for b < n, c < 3:  m[c] = 0 += g[c] * e[b, c]\n"
        "for b < n, c < 3:  r[b] = 0 += h[b, c]\n"
        "for b < n, c < 3:  g2[c] = 0 += d[b, c] * h[b, c]\n"
        "for b < n, c < 3:  m2[c] = 0 += relu(e[b, c])\n");
}

TEST_CASE("fuse: not the updates of different params in train_update (update_of)", "[passes]") {
  Frag f;
  int u = f.buf("u", {{3, false}}, ir::Role::Param), v = f.buf("v", {{3, false}}, ir::Role::Param);
  f.loops({{"j", 3}});
  f.nest(u, {0}, ir::Accum::Set, mul(Frag::ld(u, {0}), c(0.5)));
  f.nest(v, {0}, ir::Accum::Set, mul(Frag::ld(v, {0}), c(0.5)));
  auto& st = f.p.routines[0].stmts;
  st[0].update_of = 0;
  st[1].update_of = 1;
  const std::string apart = f.text();
  CHECK(f.run(fuse) == apart);
  st[1].update_of = 0;  // the same param's nests still fuse
  CHECK(f.run(fuse) == "for j < 3:  u[j] = u[j] * 0.5;  v[j] = v[j] * 0.5\n");
}

TEST_CASE("fuse: not when a nest reads another cell of what the other writes", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {2, false}}, ir::Role::Input), a = f.buf("a", {{4, true}, {2, false}});
  int b = f.buf("b", {{4, true}, {2, false}});
  f.loops({{"b", 4}, {"o", 2}});
  f.nest(a, {0, 1}, ir::Accum::Set, Frag::ld(x, {0, 1}));
  f.nest(b, {0, 1}, ir::Accum::Set, Frag::ld(a, {0, 1}));
  f.p.routines[0].stmts.back().only().body = ir::load({a, {ir::Affine::of(0), {{{1, -1}}, 1}}});  // a[b, 1 - o]
  const std::string before = f.text();
  CHECK(f.run(fuse) == before);
}

TEST_CASE("order_sums: a reduction reads its rows along the summed loop, not columns at the row stride", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {8, false}, {16, false}}, ir::Role::Input);
  int g = f.buf("g", {{16, false}}, ir::Role::Param);
  int m = f.buf("m", {{4, true}, {8, false}}, ir::Role::Input);
  int dv = f.buf("dv", {{4, true}, {8, false}}), mx = f.buf("mx", {{4, true}, {8, false}});
  int gg = f.buf("gg", {{16, false}});
  f.loops({{"b", 4}, {"t", 8}, {"o", 16}});
  // layer_norm's variance gradient once inlining put x and the gain in: t walks x's columns
  // at stride 16, o reads x and g contiguously and m, dv stay put: o innermost, a dot.
  f.nest(dv, {0, 1}, ir::Accum::Add,
         mul(mul(Frag::ld(g, {2}), ir::binary(Op::Sub, Frag::ld(x, {0, 1, 2}), Frag::ld(m, {0, 1}))), Frag::ld(m, {0, 1})));
  f.nest(mx, {0, 1}, ir::Accum::Max, ir::binary(Op::Sub, Frag::ld(x, {0, 1, 2}), Frag::ld(m, {0, 1})));  // a row max
  f.nest(gg, {2}, ir::Accum::Add, mul(Frag::ld(x, {0, 1, 2}), Frag::ld(m, {0, 1})));  // a gain gradient: rows added
  auto& st = f.p.routines[0].stmts;
  for (ir::Stmt& s : st) {  // as loop_order left them before inlining: the written t innermost
    s.iters = {s.iters[0], s.iters[2], s.iters[1]};
    for (ir::Assign& a : s.assigns) {
      auto swap = [](ir::Access& acc) {
        for (auto& ix : acc.index)
          for (auto& t : ix.terms) t.iter = t.iter == 1 ? 2 : t.iter == 2 ? 1 : t.iter;
      };
      swap(a.out);
      std::function<ir::ExprP(const ir::ExprP&)> re = [&](const ir::ExprP& e) {
        auto c = std::make_shared<ir::Expr>(*e);
        if (c->op == Op::Load) swap(c->access);
        for (auto& arg : c->args) arg = re(arg);
        return ir::ExprP(c);
      };
      a.body = re(a.body);
    }
  }
  CHECK(f.run(order_sums) ==
        "for b < n, t < 8, o < 16:  dv[b, t] += g[o] * (x[b, t, o] - m[b, t]) * m[b, t]\n"
        "for b < n, t < 8, o < 16:  mx[b, t] max= x[b, t, o] - m[b, t]\n"
        "for b < n, t < 8, o < 16:  gg[o] += x[b, t, o] * m[b, t]\n");
}

TEST_CASE("hoist_divisions: a division by a value the innermost loop does not change", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {8, false}}, ir::Role::Input), v = f.buf("v", {{4, true}}, ir::Role::Input);
  int y = f.buf("y", {{4, true}, {8, false}}), z = f.buf("z", {{4, true}, {8, false}}), w = f.buf("w", {{4, true}, {8, false}});
  f.loops({{"b", 4}, {"o", 8}});
  f.nest(y, {0, 1}, ir::Accum::Set, div(Frag::ld(x, {0, 1}), add(Frag::ld(v, {0}), c(1))));  // per row: hoisted
  f.nest(z, {0, 1}, ir::Accum::Set, div(Frag::ld(v, {0}), Frag::ld(x, {0, 1})));              // divisor along o: kept
  f.nest(w, {0, 1}, ir::Accum::Set, div(Frag::ld(x, {0, 1}), c(3)));                          // a constant: kept
  CHECK(f.run(hoist_divisions) ==
        "for b < n, o < 8:  y[b, o] = x[b, o] * (1 / (v[b] + 1))\n"
        "for b < n, o < 8:  z[b, o] = v[b] / x[b, o]\n"
        "for b < n, o < 8:  w[b, o] = x[b, o] / 3\n");
}

TEST_CASE("dce: unread gradients go, param gradients and the loss stay", "[passes]") {
  Frag f;
  int w = f.buf("w", {{3, false}}, ir::Role::Param), x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input);
  int loss = f.buf("loss", {}), xg = f.buf("x_grad", {{4, true}, {3, false}}, ir::Role::Grad);
  int wg = f.buf("w_grad", {{3, false}}, ir::Role::Grad, w), unused = f.buf("t", {{3, false}});
  f.set_loss(loss);
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(loss, {}, ir::Accum::Add, mul(Frag::ld(w, {1}), Frag::ld(x, {0, 1})));
  f.p.routines[0].stmts.back().only().out.index.clear();
  f.nest(xg, {0, 1}, ir::Accum::Set, Frag::ld(w, {1}));
  f.loops({{"o", 3}, {"b", 4}});
  f.nest(wg, {0}, ir::Accum::Add, Frag::ld(x, {1, 0}));
  f.loops({{"o", 3}});
  f.nest(unused, {0}, ir::Accum::Set, Frag::ld(w, {0}));
  CHECK(f.run(dce) ==
        "for b < n, o < 3:  loss[] += w[o] * x[b, o]\n"
        "for o < 3, b < n:  w_grad[o] += x[b, o]\n");
}

TEST_CASE("plan_memory: dead buffers' bytes reused, in place, param gradients left to the grad block", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {16, false}}, ir::Role::Input), w = f.buf("w", {{16, false}}, ir::Role::Param);
  int a = f.buf("a", {{4, true}, {16, false}}), b = f.buf("b", {{4, true}, {16, false}});
  int c2 = f.buf("c", {{4, true}, {16, false}}), wg = f.buf("w_grad", {{16, false}}, ir::Role::Grad, w);
  int loss = f.buf("loss", {});
  f.set_loss(loss);
  f.loops({{"b", 4}, {"o", 16}});
  f.nest(a, {0, 1}, ir::Accum::Set, Frag::ld(x, {0, 1}));                                  // 0
  f.nest(b, {0, 1}, ir::Accum::Set, ir::call("exp", {Frag::ld(a, {0, 1})}));             // 1: a dies
  f.nest(c2, {0, 1}, ir::Accum::Set, ir::call("exp", {Frag::ld(b, {0, 1})}));            // 2: in place over b
  f.loops({{"o", 16}, {"b", 4}});
  f.nest(wg, {0}, ir::Accum::Add, Frag::ld(c2, {1, 0}));                                    // 3
  f.loops({{"b", 4}, {"o", 16}});
  f.nest(loss, {}, ir::Accum::Add, Frag::ld(c2, {0, 1}));                                   // 4
  f.p.routines[0].stmts.back().only().out.index.clear();
  PassOptions o;
  o.elem_bytes = 4;
  plan_memory(f.p, o);
  const auto& r = f.p.routines[0];
  // b in place over a (nest 1 reads a only at the cells it writes b), c in place over b;
  // w_grad, a param's gradient, is not planned: it lives in the layout's grad block.
  CHECK(r.offsets[static_cast<size_t>(c2)] == r.offsets[static_cast<size_t>(b)]);
  CHECK(r.offsets[static_cast<size_t>(x)] == -1);
  CHECK(r.offsets[static_cast<size_t>(w)] == -1);
  CHECK(r.offsets[static_cast<size_t>(wg)] == -1);
  // 4 x 16 floats = 256 bytes per tensor; a, b, c share 256 bytes; loss 64 (it is live while
  // c is read by nest 4, and to the end).
  CHECK(r.arena_bytes == 256 + 64);
  CHECK(ir::routine_stats(f.p, r, 4, 4).arena_bytes == 320);
  // The layout puts w_grad in the grad block, right after the state (w).
  o.align = 64;
  plan_layout(f.p, o);
  const ir::Arena& t = f.p.layout.training;
  CHECK(t.grads == t.state);
  CHECK(t.grads_bytes == 64);
  CHECK(t.own[static_cast<size_t>(wg)]);
  CHECK(t.field[static_cast<size_t>(wg)] == t.grads);
  // In train_grads the nest that last writes w_grad (nest 3) hands it to the gradient hook.
  CHECK(f.p.routines[0].stmts[3].grads_final.empty());
  f.p.routines[0].kind = ir::RoutineKind::TrainGrads;
  plan_layout(f.p, o);
  for (size_t i = 0; i < f.p.routines[0].stmts.size(); ++i)
    CHECK(f.p.routines[0].stmts[i].grads_final == (i == 3 ? std::vector<int>{wg} : std::vector<int>{}));
}

TEST_CASE("plan_layout: the optimiser state in a block of its own, in param order (opt_block)", "[passes]") {
  Frag f;
  int u = f.buf("u", {{3, false}}, ir::Role::Param), v = f.buf("v", {{20, false}}, ir::Role::Param);
  // Buffer order v's state first: the block follows the params' order.
  int vm = f.buf("v_m", {{20, false}}, ir::Role::OptState), um = f.buf("u_m", {{3, false}}, ir::Role::OptState);
  int uv = f.buf("u_v", {{3, false}}, ir::Role::OptState);
  f.p.buffers[static_cast<size_t>(vm)].state_of = v;
  f.p.buffers[static_cast<size_t>(um)].state_of = u;
  f.p.buffers[static_cast<size_t>(uv)].state_of = u;
  f.loops({{"j", 3}});
  f.nest(um, {0}, ir::Accum::Set, Frag::ld(u, {0}));
  PassOptions o;
  o.elem_bytes = 4;
  o.align = 64;
  o.opt_block = true;
  plan_layout(f.p, o);
  const ir::OptBlock& ob = f.p.layout.opt_state;
  const ir::Arena& t = f.p.layout.training;
  // u's state (12 bytes each, 64 aligned), then v's (80 bytes: 128).
  CHECK(ob.param_start == std::vector<long>{0, 128, 256});
  CHECK(ob.bytes == 256);
  CHECK(ob.field[static_cast<size_t>(um)] == 0);
  CHECK(ob.field[static_cast<size_t>(uv)] == 64);
  CHECK(ob.field[static_cast<size_t>(vm)] == 128);
  CHECK(ob.field[static_cast<size_t>(u)] == -1);
  for (int b : {vm, um, uv}) CHECK(t.field[static_cast<size_t>(b)] == -1);  // not in the arena
  CHECK(t.state == 64 + 128);  // the params only
  // Without (the CUDA target): the state prefix holds it, after the params, in param order.
  o.opt_block = false;
  plan_layout(f.p, o);
  CHECK(f.p.layout.opt_state.bytes == 0);
  CHECK(f.p.layout.training.field[static_cast<size_t>(um)] == 192);
  CHECK(f.p.layout.training.field[static_cast<size_t>(uv)] == 256);
  CHECK(f.p.layout.training.field[static_cast<size_t>(vm)] == 320);
  CHECK(f.p.layout.training.state == 448);
}

TEST_CASE("plan_memory: batched buffers at per-example offsets that scale with the state's cap",
          "[passes]") {
  // Run-time-sized states (issue 36): x -> a -> c, with b (batch-independent, 20 floats: 128
  // bytes aligned) live with both a and c; a and c (each 4 x 10 floats: 40 bytes, 64 a
  // example aligned) do not live at once. The fixed region holds b; a and c share one
  // per-example offset; at a cap of 1 the layout is the same plan with the batch at 1.
  Frag f;
  int x = f.buf("x", {{4, true}, {10, false}}, ir::Role::Input);
  int a = f.buf("a", {{4, true}, {10, false}}), c = f.buf("c", {{4, true}, {10, false}});
  int b = f.buf("b", {{20, false}});
  int loss = f.buf("loss", {});
  f.set_loss(loss);
  f.loops({{"j", 20}});
  f.nest(b, {0}, ir::Accum::Set, ir::cnst(1.0));                                  // 0
  f.loops({{"b", 4}, {"o", 10}});
  f.nest(a, {0, 1}, ir::Accum::Set, Frag::ld(x, {0, 1}));                         // 1
  f.nest(c, {0, 1}, ir::Accum::Set, ir::call("exp", {Frag::ld(a, {0, 1})}));     // 2
  f.loops({{"j", 20}});
  f.nest(loss, {}, ir::Accum::Add, Frag::ld(b, {0}));                             // 3
  f.p.routines[0].stmts.back().only().out.index.clear();
  f.loops({{"b", 4}, {"o", 10}});
  f.nest(loss, {}, ir::Accum::Add, Frag::ld(c, {0, 1}));                          // 4
  f.p.routines[0].stmts.back().only().out.index.clear();
  PassOptions o;
  o.elem_bytes = 4;
  plan_memory(f.p, o);
  const auto& r = f.p.routines[0];
  REQUIRE(r.fixed_bytes == 192);  // b (128) and loss (64)
  for (int k : {a, c}) {
    CHECK(r.scaled(k));
    CHECK((r.offsets[static_cast<size_t>(k)] - r.fixed_bytes) % f.p.max_batch == 0);
  }
  CHECK(!r.scaled(b));
  CHECK(!r.scaled(loss));
  CHECK(r.offsets[static_cast<size_t>(a)] == r.offsets[static_cast<size_t>(c)]);  // in place
  CHECK(r.arena_bytes == 192 + 64 * f.p.max_batch);
}

TEST_CASE("plan_memory: the printed IR shows the work region and the buffers at each offset",
          "[passes][print]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {16, false}}, ir::Role::Input);
  int a = f.buf("a", {{4, true}, {16, false}}), b = f.buf("b", {{4, true}, {16, false}});
  int loss = f.buf("loss", {});
  f.set_loss(loss);
  f.loops({{"b", 4}, {"o", 16}});
  f.nest(a, {0, 1}, ir::Accum::Set, Frag::ld(x, {0, 1}));                       // 0
  f.nest(b, {0, 1}, ir::Accum::Set, ir::call("exp", {Frag::ld(a, {0, 1})}));  // 1: b in place over a
  f.nest(loss, {}, ir::Accum::Add, Frag::ld(b, {0, 1}));                        // 2
  f.p.routines[0].stmts.back().only().out.index.clear();
  // No plan yet: nothing is printed, and the routine starts with its first nest.
  const std::string before = ir::print_program(f.p);
  CHECK(ir::print_plan(f.p.routines[0], f.p).empty());
  CHECK(before.find("work region") == std::string::npos);
  PassOptions o;
  o.elem_bytes = 4;
  plan_memory(f.p, o);
  const auto& r = f.p.routines[0];
  // a and b (4 x 16 floats = 256 bytes) share one offset; loss is live with b: its own 64.
  // The batch-independent loss comes first; a and b after it, at a per-example offset (0) times
  // the batch (run-time-sized states: the same plan at any cap c, a and b at 64 + 0 * c).
  REQUIRE(r.offsets[static_cast<size_t>(a)] == r.offsets[static_cast<size_t>(b)]);
  REQUIRE(r.offsets[static_cast<size_t>(loss)] == 0);
  REQUIRE(r.fixed_bytes == 64);
  REQUIRE(r.offsets[static_cast<size_t>(a)] == 64);
  CHECK(r.scaled(a));
  CHECK(!r.scaled(loss));
  CHECK(r.example_offset(a, f.p.max_batch) == 0);
  const std::string plan = ir::print_plan(r, f.p);
  CHECK(plan ==
        "  work region: 320 bytes (batch <= 4)\n"
        "    @ +0          loss\n"
        "    @ +64         a, b\n");
  // The input has no offset and is not listed.
  CHECK(plan.find(" x") == std::string::npos);
  // In the whole program the plan comes right under its routine's name, and the rest is as
  // before.
  const std::string after = ir::print_program(f.p);
  CHECK(after.find("\nroutine train_step\n" + plan) != std::string::npos);
  std::string without = after;
  without.erase(without.find(plan), plan.size());
  CHECK(without == before);
}

TEST_CASE("plan_memory: no sharing in place when a fused assignment reads after the write", "[passes]") {
  Frag f;
  int x = f.buf("x", {{4, false}}, ir::Role::Input), a = f.buf("a", {{4, false}}), b = f.buf("b", {{4, false}});
  int d = f.buf("d", {{4, false}}), loss = f.buf("loss", {});
  f.set_loss(loss);
  f.loops({{"j", 4}});
  f.nest(a, {0}, ir::Accum::Set, Frag::ld(x, {0}));
  ir::Stmt& s = f.nest(b, {0}, ir::Accum::Set, Frag::ld(x, {0}));  // b written first ...
  s.assigns.push_back({Frag::at(d, {0}), ir::Accum::Set, Frag::ld(a, {0})});  // ... then a read
  f.nest(loss, {}, ir::Accum::Add, add(Frag::ld(b, {0}), Frag::ld(d, {0})));
  f.p.routines[0].stmts.back().only().out.index.clear();
  plan_memory(f.p, PassOptions{});
  const auto& r = f.p.routines[0];
  CHECK(r.offsets[static_cast<size_t>(a)] != r.offsets[static_cast<size_t>(b)]);
}

namespace {

// A one-block GPT (contract v1): ids [ctx |], learned positions, attention (causal or not).
std::string tiny_gpt(bool causal) {
  return std::string(R"(model g
dim ctx = 8
input tokens : [ctx |] int
input next : [ctx |] int
param wte : [16 -> 32]
param wpe : [16 -> ctx]
param w_qkv : [16 -> 3, 2, 8]
param w_o : [2, 8 -> 16]
x0 = embedding(wte, tokens) + embedding(wpe, position(tokens))
qkv = w_qkv * layer_norm(x0)
y = attention(qkv[0], qkv[1], qkv[2], causal = )") +
         (causal ? "true" : "false") + R"()
x1 = x0 + w_o * y
logits = wte * x1
loss = mean(cross_entropy(logits, next))
output logits
)" "minimize loss with sgd(lr = 0.1)\n";
}

}  // namespace

TEST_CASE("decode: a causal language model's routine at one position", "[passes][decode]") {
  for (int level : {0, 2}) {
    const ir::Program p = test::program(tiny_gpt(true), 16, level);
    const ir::Routine* d = p.routine(ir::RoutineKind::Decode);
    REQUIRE(d != nullptr);
    CHECK(d->io.position);
    CHECK(d->io.seq_len == 8);
    CHECK(d->io.outputs == std::vector<int>{p.outputs[0]});
    CHECK(d->io.ids == p.inputs[0]);
    int caches = 0;
    for (const ir::Buffer& b : p.buffers)
      if (b.role == ir::Role::Cache) {
        ++caches;
        CHECK(b.name.size() > 6);
        CHECK(b.name.substr(b.name.size() - 6) == "_cache");
        REQUIRE(b.dims.size() == 5);  // qkv's: q, k and v are read in place from it
        CHECK(b.dims[0] == ir::Dim{16, true});  // a slot per example of the state's cap (max_batch 16)
        CHECK(b.dims[1].size == 8);
      }
    CHECK(caches == 1);
    CHECK(d->io.slots == 16);
    int calls = 0, at_pos = 0, rows = 0;
    for (const ir::Stmt& s : d->stmts) {
      if (s.call) {
        ++calls;
        CHECK(s.call->at_pos);
        CHECK_FALSE(s.call->batch);
        if (s.call->kind == ir::Call::Kind::AttentionForward) {
          CHECK(p.buffers[static_cast<size_t>(s.call->k)].role == ir::Role::Cache);
          CHECK(s.call->q == s.call->k);
          CHECK(s.call->v == s.call->k);
          CHECK((s.call->k_off == 16 && s.call->v_off == 32 && s.call->k_row == 48));
        }
        continue;
      }
      for (const ir::Iter& it : s.iters) {
        CHECK((!it.batch || it.size == 16));  // the rows: a batch loop over the step's sequences
        rows += it.batch;
        at_pos += it.at_pos;
      }
    }
    CHECK(calls >= 2);  // the token embedding, the attention
    CHECK(at_pos > 0);
    CHECK(rows > 0);
    // The caches live in the inference state, not in a plan nor in the training state.
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].role == ir::Role::Cache) {
        CHECK(p.layout.inference.own[b]);
        CHECK(p.layout.training.field[b] < 0);
        CHECK_FALSE(d->planned(static_cast<int>(b)));
      }
  }
}

TEST_CASE("decode: none without causal attention", "[passes][decode]") {
  const ir::Program p = test::program(tiny_gpt(false), 16, 2);
  CHECK(p.routine(ir::RoutineKind::Decode) == nullptr);
  for (const ir::Buffer& b : p.buffers) CHECK(b.role != ir::Role::Cache);
  const ir::Program q = test::program("model m\ninput x : [4]\nparam w : [4 -> 2]\ny = w * x\nloss = sum(y)\n"
                                      "output y\nminimize loss with sgd(lr = 0.1)\n", 16, 2);
  CHECK(q.routine(ir::RoutineKind::Decode) == nullptr);
}

namespace {

// A byte model with rope in a rolled repeat block of two layers (its decode routine included).
const char* tiny_rope = R"(model r
dim ctx = 6
input tokens : [ctx |] int
input next : [ctx |] int
param wte : [16 -> 32]
x = embedding(wte, tokens)
repeat 2 carry x
  param w_q : [16 -> 2, 8]
  param w_k, w_v : [16 -> 2, 8]
  param w_o : [2, 8 -> 16]
  x = x + w_o * attention(rope(w_q * x), rope(w_k * x, theta = 100), w_v * x, causal = true)
end
logits = wte * x
loss = mean(cross_entropy(logits, next))
output logits
minimize loss with sgd(lr = 0.1)
)";

bool calls_prim(const ir::Expr& e, const std::string& prim) {
  if (e.op == Op::Prim && e.prim && e.prim->name == prim) return true;
  for (const auto& a : e.args)
    if (calls_prim(*a, prim)) return true;
  return false;
}

int rope_nests(const ir::Routine& r) {
  int n = 0;
  for (const ir::Stmt& s : r.stmts)
    for (const ir::Assign& a : s.assigns) n += calls_prim(*a.body, "rope_cos") || calls_prim(*a.body, "rope_sin");
  return n;
}

}  // namespace

TEST_CASE("hoist_constants: rope's tables computed once at create, not in the steps nor the block bodies",
          "[passes][hoist_constants]") {
  const ir::Program p = test::program(tiny_rope, 4, 2);
  REQUIRE(p.blocks.size() == 1);  // rolled: the layer loop
  const ir::Routine* k = p.routine(ir::RoutineKind::Constants);
  REQUIRE(k != nullptr);
  CHECK(rope_nests(*k) == 4);  // cos and sin of the queries' and of the keys' tables (two thetas)
  std::set<int> tables;
  for (const ir::Stmt& s : k->stmts)
    for (int w : ir::written_buffers(s)) {
      CHECK(p.buffers[static_cast<size_t>(w)].role == ir::Role::Constant);
      CHECK(p.buffers[static_cast<size_t>(w)].block == -1);
      tables.insert(w);
    }
  CHECK(tables.size() == 4);
  for (const ir::Routine* r : ir::all_routines(p)) {
    if (r == k) continue;
    INFO(r->name());
    CHECK(rope_nests(*r) == 0);  // train step, forward, eval, decode and every block body only read them
  }
  const ir::Routine* d = p.routine(ir::RoutineKind::Decode);
  REQUIRE(d != nullptr);
  CHECK_FALSE(p.blocks[0].decode.stmts.empty());
  // Every call of the block that reads the tables binds them whole, for every instance.
  int bound = 0;
  for (const ir::Routine* r : ir::all_routines(p))
    for (const ir::Stmt& s : r->stmts)
      if (s.call && ir::is_block_call(s.call->kind))
        for (const ir::Binding& bd : s.call->binds)
          if (tables.count(bd.buf)) {
            ++bound;
            CHECK(bd.stride == 0);
            CHECK(bd.offset == 0);
          }
  CHECK(bound >= 4 * 3);  // the forward, backward, inference and decode calls
  // Storage of their own in both states, in no routine's plan; not in the checkpoints.
  for (int t : tables) {
    CHECK(p.layout.training.own[static_cast<size_t>(t)]);
    CHECK(p.layout.inference.own[static_cast<size_t>(t)]);
    CHECK(p.layout.training.field[static_cast<size_t>(t)] >= p.layout.training.state);
    for (const ir::Routine* r : ir::all_routines(p)) CHECK_FALSE(r->planned(t));
  }
  // The C target computes them in init_constants, which both creates call.
  const std::vector<OutputFile> files = emit_c(p, COptions{});
  const std::string& c = files[1].text, &infer = files[3].text;
  CHECK(c.find("static void init_constants(struct r *m) {") != std::string::npos);
  CHECK(c.find("    init_constants(m);") != std::string::npos);
  CHECK(infer.find("static void init_constants(struct r_infer *m) {") != std::string::npos);
  CHECK(infer.find("    init_constants(m);") != std::string::npos);
  for (const std::string* t : {&c, &infer}) {
    // The kernels computing the tables (those calling cannl_rope_cos): called by init_constants only.
    const size_t consts = t->find("static void init_constants(");
    const size_t consts_end = t->find("\n}\n", consts);
    int kernels = 0;
    for (size_t at = t->find("cannl_rope_cos("); at != std::string::npos; at = t->find("cannl_rope_cos(", at + 1)) {
      if (t->compare(t->rfind('\n', at) + 1, 14, "static inline ") == 0) continue;  // (the helper's definition)
      const size_t fn = t->rfind("static void ", at);
      REQUIRE(fn != std::string::npos);
      const std::string name = t->substr(fn + 12, t->find('(', fn) - fn - 12);
      ++kernels;
      INFO(name);
      const std::string called = " " + name + "(";
      for (size_t call = t->find(called); call != std::string::npos; call = t->find(called, call + 1))
        if (call != fn + 11) CHECK((call > consts && call < consts_end));
    }
    CHECK(kernels >= 1);
  }
}

TEST_CASE("hoist_constants: nests reading an input, a param or the batch count stay where they are",
          "[passes][hoist_constants]") {
  Frag f;
  int x = f.buf("x", {{4, true}, {3, false}}, ir::Role::Input), w = f.buf("w", {{3, false}}, ir::Role::Param);
  int t = f.buf("t", {{3, false}}, ir::Role::Temp), u = f.buf("u", {{3, false}}, ir::Role::Temp);
  int v = f.buf("v", {{3, false}}, ir::Role::Temp), z = f.buf("z", {{3, false}}, ir::Role::Temp);
  int y = f.buf("y", {{4, true}, {3, false}});
  f.set_loss(y);
  f.loops({{"o", 3}});
  f.nest(t, {0}, ir::Accum::Set, mul(ir::index_value(ir::Affine::of(0)), c(0.5)));  // a table: iota
  f.nest(u, {0}, ir::Accum::Set, add(Frag::ld(t, {0}), Frag::ld(w, {0})));          // reads a param
  f.nest(v, {0}, ir::Accum::Set, mul(Frag::ld(t, {0}), ir::scalar("n")));            // reads n
  f.nest(z, {0}, ir::Accum::Set, Frag::ld(t, {0}));                                  // a table read from a table,
  f.loops({{"b", 4}, {"o", 3}});
  f.nest(z, {1}, ir::Accum::Add, Frag::ld(x, {0, 1}));                               // then summed with the input
  f.nest(y, {0, 1}, ir::Accum::Set,
         add(add(Frag::ld(x, {0, 1}), Frag::ld(u, {1})), add(Frag::ld(v, {1}), Frag::ld(z, {1}))));
  const size_t before = f.p.routines[0].stmts.size();
  hoist_constants(f.p, PassOptions{});
  const ir::Routine* k = f.p.routine(ir::RoutineKind::Constants);
  REQUIRE(k != nullptr);
  REQUIRE(k->stmts.size() == 1);
  CHECK(ir::written_buffers(k->stmts[0]) == std::vector<int>{t});
  CHECK(f.p.buffers[static_cast<size_t>(t)].role == ir::Role::Constant);
  for (int b : {u, v, z}) CHECK(f.p.buffers[static_cast<size_t>(b)].role == ir::Role::Temp);
  CHECK(f.p.routines[0].stmts.size() == before - 1);
  // Nothing constant: no routine added.
  Frag g;
  int gx = g.buf("x", {{4, true}, {3, false}}, ir::Role::Input), gy = g.buf("y", {{4, true}, {3, false}});
  g.set_loss(gy);
  g.loops({{"b", 4}, {"o", 3}});
  g.nest(gy, {0, 1}, ir::Accum::Set, Frag::ld(gx, {0, 1}));
  hoist_constants(g.p, PassOptions{});
  CHECK(g.p.routine(ir::RoutineKind::Constants) == nullptr);
}
