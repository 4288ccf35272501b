// The shape constraint solver, driven directly: row and dim unification, broadcasting,
// affine (convolution/pooling) indices, defaulting stages, errors and rollback.
#include <catch2/catch.hpp>

#include <chrono>

#include "shapes/solver.h"

using namespace cannl;

namespace {

struct Fx {
  std::vector<std::string> errors;
  Solver s{[this](const Origin& o, const std::string& detail) {
    errors.push_back((o.describe ? o.describe() + ": " : std::string()) + detail);
  }};
  Fx() = default;
  Fx(const Fx&) = delete;

  static Origin origin(std::string what = "joining") {
    return Origin{{0, 1}, [what] { return what; }};
  }
  static RowT closed(std::vector<long> sizes) {
    std::vector<DimT> d;
    for (long n : sizes) d.push_back(DimT::known(n));
    return RowT::closed(d);
  }
  static DimT k(long n) { return DimT::known(n); }
  RowT open(std::vector<DimT> left, std::vector<DimT> right) {
    RowT r = s.fresh_row();
    r.left = std::move(left);
    r.right = std::move(right);
    return r;
  }
  bool eq(const RowT& a, const RowT& b) { return s.equal_rows(a, b, origin(), "rows must agree"); }
  std::string p(const RowT& r) const { return s.print(r); }
  long size(DimT d) const {
    DimT r = s.resolve(d);
    return r.kind == DimT::Known ? r.size : -1;
  }
  bool free(DimT d) const { return s.resolve(d).is_var(); }
  void solve(std::vector<ShapeT> protect = {}) {
    s.solve([protect] { return protect; });
  }
  static ShapeT shape_with_output(const RowT& out) {
    ShapeT sh{{RowT::closed({}), RowT::closed({}), out}};
    return sh;
  }
};

}  // namespace

// ---- equality -----------------------------------------------------------------------------

TEST_CASE("solver: closed rows unify axis by axis", "[solver][unify]") {
  Fx f;
  DimT a = f.s.fresh_dim(), b = f.s.fresh_dim();
  CHECK(f.eq(RowT::closed({a, Fx::k(4)}), RowT::closed({Fx::k(3), b})));
  CHECK(f.size(a) == 3);
  CHECK(f.size(b) == 4);
  CHECK(f.eq(Fx::closed({}), Fx::closed({})));
  CHECK(f.errors.empty());
}

TEST_CASE("solver: closed rows of different lengths or sizes are errors", "[solver][unify]") {
  Fx f;
  CHECK_FALSE(f.eq(Fx::closed({3, 4}), Fx::closed({3})));
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0] == "joining: rows must agree ([3, 4] vs [3])");
  CHECK_FALSE(f.eq(Fx::closed({3, 4}), Fx::closed({3, 5})));
  REQUIRE(f.errors.size() == 2);
  CHECK(f.errors[1].find("[3, 4] vs [3, 5]") != std::string::npos);
  // The batch axis is only equal to itself.
  CHECK(f.eq(RowT::closed({DimT::batch()}), RowT::closed({DimT::batch()})));
  CHECK_FALSE(f.eq(RowT::closed({DimT::batch()}), Fx::closed({1})));
  CHECK(f.errors.back().find("[batch] vs [1]") != std::string::npos);
}

TEST_CASE("solver: unifying dims directly", "[solver][unify]") {
  Fx f;
  DimT a = f.s.fresh_dim(), b = f.s.fresh_dim();
  CHECK(f.s.equal_dims(a, b, Fx::origin(), "same"));
  CHECK(f.free(a));
  CHECK(f.s.equal_dims(b, Fx::k(6), Fx::origin(), "same"));
  CHECK(f.size(a) == 6);
  CHECK_FALSE(f.s.equal_dims(a, Fx::k(7), Fx::origin(), "sizes agree"));
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0] == "joining: sizes agree (6 vs 7)");
}

TEST_CASE("solver: a closed row binds an open row's variable to the middle", "[solver][unify]") {
  Fx f;
  RowT o = f.open({Fx::k(3)}, {Fx::k(4)});
  RowT middle{{}, o.var, {}};
  CHECK(f.eq(o, Fx::closed({3, 7, 8, 4})));
  CHECK(f.p(o) == "[3, 7, 8, 4]");
  CHECK(f.p(middle) == "[7, 8]");
  CHECK(f.s.resolve(o).is_closed());
  // Variables on the open side take the closed side's sizes.
  DimT d = f.s.fresh_dim();
  RowT q = f.open({d}, {});
  CHECK(f.eq(Fx::closed({5, 6}), q));
  CHECK(f.size(d) == 5);
  CHECK(f.p(q) == "[5, 6]");
  // The middle may be empty.
  RowT e = f.open({Fx::k(2)}, {});
  CHECK(f.eq(e, Fx::closed({2})));
  CHECK(f.p(RowT{{}, e.var, {}}) == "[]");
}

TEST_CASE("solver: a closed row too short for an open row is an error", "[solver][unify]") {
  Fx f;
  RowT o = f.open({Fx::k(3)}, {Fx::k(4)});
  CHECK_FALSE(f.eq(o, Fx::closed({3})));
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0].find("[3, .., 4] vs [3]") != std::string::npos);
  CHECK_FALSE(f.s.resolve(o).is_closed());
}

TEST_CASE("solver: two open rows with the same variable", "[solver][unify]") {
  Fx f;
  DimT d = f.s.fresh_dim();
  RowT a = f.open({d}, {});
  RowT b{{Fx::k(3)}, a.var, {}};
  CHECK(f.eq(a, b));
  CHECK(f.size(d) == 3);
  CHECK(f.p(a) == "[3, ..]");
  // Same variable, different numbers of known axes: no solution.
  RowT c{{Fx::k(3), Fx::k(3)}, a.var, {}};
  CHECK_FALSE(f.eq(a, c));
  CHECK(f.errors.size() == 1);
}

TEST_CASE("solver: two open rows with leftovers on the same side", "[solver][unify]") {
  Fx f;
  RowT a = f.open({Fx::k(2)}, {});
  RowT b = f.open({Fx::k(2), Fx::k(7)}, {});
  CHECK(f.eq(a, b));
  CHECK(f.p(a) == "[2, 7, ..]");
  CHECK(f.p(b) == "[2, 7, ..]");
  CHECK(f.eq(a, Fx::closed({2, 7, 1})));
  CHECK(f.p(b) == "[2, 7, 1]");
}

TEST_CASE("solver: open rows with leftovers on opposite sides wait until more is known",
          "[solver][unify][deferred]") {
  Fx f;
  RowT a = f.open({Fx::k(2)}, {});  // [2, ..r]
  RowT b = f.open({}, {Fx::k(5)});  // [..s, 5]
  CHECK(f.eq(a, b));
  CHECK(f.errors.empty());
  // Nothing is decided yet: the rows may overlap.
  CHECK(f.p(a) == "[2, ..]");
  CHECK(f.p(b) == "[.., 5]");
  CHECK(f.eq(a, Fx::closed({2, 9, 5})));
  f.solve();
  CHECK(f.errors.empty());
  CHECK(f.p(b) == "[2, 9, 5]");
}

TEST_CASE("solver: a deferred equality can be overlapping", "[solver][unify][deferred]") {
  Fx f;
  RowT a = f.open({Fx::k(5)}, {});  // [5, ..r]
  RowT b = f.open({}, {Fx::k(5)});  // [..s, 5]
  CHECK(f.eq(a, b));
  CHECK(f.eq(b, Fx::closed({5})));  // the single axis is both the 5 of a and of b
  f.solve();
  CHECK(f.errors.empty());
  CHECK(f.p(a) == "[5]");
}

TEST_CASE("solver: a deferred equality that turns out false is reported once",
          "[solver][unify][deferred]") {
  Fx f;
  RowT a = f.open({Fx::k(2)}, {});
  RowT b = f.open({}, {Fx::k(5)});
  CHECK(f.eq(a, b));
  CHECK(f.eq(a, Fx::closed({2, 4})));
  f.solve();
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0].find("rows must agree") != std::string::npos);
}

TEST_CASE("solver: an ambiguous equality nothing else fixes is resolved without overlap",
          "[solver][unify][deferred]") {
  Fx f;
  RowT a = f.open({Fx::k(2)}, {});
  RowT b = f.open({}, {Fx::k(5)});
  CHECK(f.eq(a, b));
  f.solve();
  INFO(f.p(a) << " / " << f.p(b));
  CHECK(f.errors.empty());
  CHECK(f.p(a) == "[2, 5]");
  CHECK(f.p(b) == "[2, 5]");
}

// ---- broadcasting -------------------------------------------------------------------------

TEST_CASE("solver: broadcast of known rows aligns from the right -- size 1 stretches",
          "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  f.s.broadcast(r, {Fx::closed({3, 1}), Fx::closed({4})}, Fx::origin(), "output");
  CHECK(f.p(r) == "[3, 4]");
  RowT q = f.s.fresh_row();
  f.s.broadcast(q, {Fx::closed({5}), Fx::closed({2, 1, 5})}, Fx::origin(), "input");
  CHECK(f.p(q) == "[2, 1, 5]");
  RowT e = f.s.fresh_row();
  f.s.broadcast(e, {Fx::closed({}), Fx::closed({})}, Fx::origin(), "batch");
  CHECK(f.p(e) == "[]");
  CHECK(f.errors.empty());
}

TEST_CASE("solver: the batch axis broadcasts against nothing", "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  f.s.broadcast(r, {RowT::closed({DimT::batch()}), Fx::closed({})}, Fx::origin(), "batch");
  CHECK(f.p(r) == "[batch]");
  CHECK(f.errors.empty());
}

// Contract v1 §2: the runner's batch axis meets only the runner's batch axis; the batch axes
// declared after it align from the right among themselves.
TEST_CASE("solver: the runner's batch axis leads, declared batch axes align after it",
          "[solver][broadcast]") {
  Fx f;
  auto batch_then = [](std::vector<long> sizes) {
    std::vector<DimT> d{DimT::batch()};
    for (long n : sizes) d.push_back(DimT::known(n));
    return RowT::closed(d);
  };
  RowT a = f.s.fresh_row();
  f.s.broadcast(a, {batch_then({5, 6}), batch_then({6})}, Fx::origin(), "batch");
  CHECK(f.p(a) == "[batch, 5, 6]");
  RowT b = f.s.fresh_row();
  f.s.broadcast(b, {batch_then({}), Fx::closed({7})}, Fx::origin(), "batch");  // per position, no runner axis
  CHECK(f.p(b) == "[batch, 7]");
  RowT c = f.s.fresh_row();
  f.s.broadcast(c, {batch_then({}), Fx::closed({1})}, Fx::origin(), "batch");
  CHECK(f.p(c) == "[batch, 1]");
  CHECK(f.errors.empty());
  // In other kinds a batch axis is an axis like any other, aligned from the right.
  RowT o = f.s.fresh_row();
  f.s.broadcast(o, {batch_then({6}), batch_then({})}, Fx::origin(), "output");
  CHECK_FALSE(f.errors.empty());
  // Declared axes that differ do not broadcast.
  Fx g;
  RowT d = g.s.fresh_row();
  g.s.broadcast(d, {batch_then({5}), batch_then({6})}, Fx::origin(), "batch");
  CHECK(g.errors.size() == 1);
  // The result's first axis meets the runner's batch axis as soon as it is known.
  Fx h;
  DimT first = h.s.fresh_dim();
  h.s.broadcast(RowT::closed({first, Fx::k(4)}), {batch_then({4}), h.s.fresh_row()}, Fx::origin(), "batch");
  CHECK(h.s.resolve(first).kind == DimT::Batch);
}

TEST_CASE("solver: sizes that do not broadcast are reported through the callback",
          "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  f.s.broadcast(r, {Fx::closed({3}), Fx::closed({4})}, Fx::origin("cannot add"), "output");
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0].find("cannot add: their output axes do not broadcast") != std::string::npos);
  f.solve();
  CHECK(f.errors.size() == 1);  // reported once, not again at solve()
}

TEST_CASE("solver: a closed result shorter than an operand is an error", "[solver][broadcast]") {
  Fx f;
  f.s.broadcast(Fx::closed({4}), {Fx::closed({2, 4})}, Fx::origin(), "output");
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0].find("do not broadcast") != std::string::npos);
}

TEST_CASE("solver: an operand axis > 1 fixes the result -- a result axis of 1 fixes the operand",
          "[solver][broadcast]") {
  Fx f;
  DimT d = f.s.fresh_dim(), e = f.s.fresh_dim();
  RowT r = RowT::closed({d});
  f.s.broadcast(r, {Fx::closed({6}), RowT::closed({e})}, Fx::origin(), "output");
  CHECK(f.size(d) == 6);
  CHECK(f.free(e));  // e may be 1 or 6
  DimT g = f.s.fresh_dim();
  f.s.broadcast(Fx::closed({1}), {RowT::closed({g})}, Fx::origin(), "output");
  CHECK(f.size(g) == 1);
}

TEST_CASE("solver: broadcast waits for an open operand -- computed free axes drop to 1",
          "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  RowT x = f.s.fresh_row();  // a computed tensor's row nothing constrains
  f.s.broadcast(r, {x, Fx::closed({3})}, Fx::origin(), "output");
  CHECK_FALSE(f.s.resolve(r).is_closed());
  f.solve();
  CHECK(f.errors.empty());
  CHECK(f.p(x) == "[]");
  CHECK(f.p(r) == "[3]");
}

TEST_CASE("solver: a param's free row takes the partner's axes (stage 1)", "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  RowT param = f.s.fresh_row();
  f.s.broadcast(r, {param, Fx::closed({5})}, Fx::origin(), "output");
  f.solve({Fx::shape_with_output(param)});
  CHECK(f.errors.empty());
  CHECK(f.p(param) == "[5]");
  CHECK(f.p(r) == "[5]");
}

TEST_CASE("solver: a param's free axis takes the partner's size, not 1", "[solver][broadcast]") {
  Fx f;
  DimT d = f.s.fresh_dim();
  RowT param = RowT::closed({Fx::k(2), d});
  RowT r = f.s.fresh_row();
  f.s.broadcast(r, {param, Fx::closed({2, 7})}, Fx::origin(), "output");
  f.solve({Fx::shape_with_output(param)});
  CHECK(f.errors.empty());
  CHECK(f.size(d) == 7);
  CHECK(f.p(r) == "[2, 7]");
}

TEST_CASE("solver: a param nothing constrains stays free for the caller to report",
          "[solver][broadcast]") {
  Fx f;
  RowT param = f.s.fresh_row();
  DimT d = f.s.fresh_dim();
  RowT other = f.s.fresh_row();
  f.solve({Fx::shape_with_output(param), Fx::shape_with_output(RowT::closed({d}))});
  CHECK(f.s.is_free(param));
  CHECK(f.free(d));
  CHECK_FALSE(f.s.is_free(other));  // not protected: dropped
  std::set<int> dims, rows;
  f.s.free_vars(RowT::closed({d, Fx::k(2)}), dims, rows);
  CHECK(dims.size() == 1);
  CHECK(rows.empty());
}

TEST_CASE("solver: a result that broadcasts with itself takes the others' axes (stage 2)",
          "[solver][broadcast]") {
  Fx f;
  RowT r = f.s.fresh_row();
  f.s.broadcast(r, {r, Fx::closed({4, 1}), Fx::closed({3})}, Fx::origin(), "output");
  f.solve();
  CHECK(f.errors.empty());
  CHECK(f.p(r) == "[4, 3]");
}

// Issue 13: `1 - y *. out` with out's axes those of an unshaped param. Stage 1 makes each
// result the param's row; stage 2 then pinned `1 - ...` to the number's [] and failed.
TEST_CASE("solver: a number leaves a self-broadcast result its own axes (stage 2)",
          "[solver][broadcast]") {
  Fx f;
  RowT param = f.s.fresh_row();  // out's output axes (w2's, no shape written)
  RowT prod = f.s.fresh_row(), diff = f.s.fresh_row();
  f.s.broadcast(prod, {Fx::closed({1}), param}, Fx::origin(), "output");  // y *. out
  f.s.broadcast(diff, {Fx::closed({}), prod}, Fx::origin(), "output");    // 1 - (y *. out)
  f.solve({Fx::shape_with_output(param)});
  INFO(f.p(param) << " " << f.p(prod) << " " << f.p(diff));
  CHECK(f.errors.empty());
  CHECK(f.p(param) == "[1]");
  CHECK(f.p(diff) == "[1]");
  // A param's free axes still take all of what they meet: [1, 4], not [4].
  Fx g;
  RowT b = g.s.fresh_row(), sum = g.s.fresh_row();
  g.s.broadcast(sum, {Fx::closed({1, 4}), b}, Fx::origin(), "output");
  g.solve({Fx::shape_with_output(b)});
  CHECK(g.errors.empty());
  CHECK(g.p(b) == "[1, 4]");
}

// ---- affine indices -----------------------------------------------------------------------

TEST_CASE("solver: affine forward: out = (in + 2p - k) / s + 1, rounded down", "[solver][affine]") {
  struct Case {
    long in, stride, kernel, padding, out;
  };
  const Case cases[] = {{28, 1, 3, 0, 26}, {28, 2, 3, 1, 14}, {28, 2, 3, 0, 13},
                        {7, 2, 2, 0, 3},   {10, 3, 4, 0, 3},  {5, 1, 5, 2, 5}};
  for (const Case& c : cases) {
    Fx f;
    DimT out = f.s.fresh_dim();
    f.s.affine(Fx::k(c.in), c.stride, out, Fx::k(c.kernel), c.padding, Fx::origin());
    INFO(c.in << " s" << c.stride << " k" << c.kernel << " p" << c.padding);
    CHECK(f.size(out) == c.out);
    CHECK(f.errors.empty());
  }
}

TEST_CASE("solver: affine forward fires once the input becomes known", "[solver][affine]") {
  Fx f;
  DimT in = f.s.fresh_dim(), out = f.s.fresh_dim();
  f.s.affine(in, 2, out, Fx::k(3), 0, Fx::origin());
  CHECK(f.free(out));
  CHECK(f.s.equal_dims(in, Fx::k(11), Fx::origin(), "in"));
  f.solve();
  CHECK(f.size(out) == 5);
}

TEST_CASE("solver: affine backward: the input size from the output and kernel", "[solver][affine]") {
  Fx f;
  DimT in = f.s.fresh_dim();
  f.s.affine(in, 2, Fx::k(13), Fx::k(3), 0, Fx::origin());
  CHECK(f.size(in) == 27);  // the smallest input giving 13 outputs
  Fx g;
  DimT in2 = g.s.fresh_dim();
  g.s.affine(in2, 2, Fx::k(14), Fx::k(3), 1, Fx::origin());
  CHECK(g.size(in2) == 27);  // (27 + 2 - 3) / 2 + 1 = 14
  Fx h;
  DimT in3 = h.s.fresh_dim();
  h.s.affine(in3, 1, Fx::k(24), Fx::k(5), 0, Fx::origin());
  CHECK(h.size(in3) == 28);
}

TEST_CASE("solver: an affine index with no kernel has a window of 1", "[solver][affine]") {
  Fx f;
  DimT out = f.s.fresh_dim();
  f.s.affine(Fx::k(9), 2, out, std::nullopt, 0, Fx::origin());
  CHECK(f.size(out) == 5);
}

TEST_CASE("solver: a free kernel of a computed index defaults to the stride (stage 3)",
          "[solver][affine]") {
  Fx f;
  DimT out = f.s.fresh_dim(), kern = f.s.fresh_dim();
  f.s.affine(Fx::k(9), 2, out, kern, 0, Fx::origin());
  CHECK(f.free(out));
  f.solve();
  CHECK(f.errors.empty());
  CHECK(f.size(kern) == 2);
  CHECK(f.size(out) == 4);
}

TEST_CASE("solver: a param's free kernel is not defaulted", "[solver][affine]") {
  Fx f;
  DimT out = f.s.fresh_dim(), kern = f.s.fresh_dim();
  f.s.affine(Fx::k(9), 2, out, kern, 0, Fx::origin());
  f.solve({Fx::shape_with_output(RowT::closed({kern}))});
  CHECK(f.free(kern));
}

TEST_CASE("solver: affine errors", "[solver][affine]") {
  Fx f;
  DimT out = f.s.fresh_dim();
  f.s.affine(Fx::k(3), 1, out, Fx::k(5), 0, Fx::origin("in conv2d"));
  REQUIRE(f.errors.size() == 1);
  CHECK(f.errors[0].find("in conv2d: the window (5) is larger than the padded input (3 + 2*0)") !=
        std::string::npos);
  Fx g;
  g.s.affine(Fx::k(28), 1, Fx::k(20), Fx::k(3), 0, Fx::origin());
  REQUIRE(g.errors.size() == 1);
  CHECK(g.errors[0].find("gives 26 outputs, not 20") != std::string::npos);
  Fx h;
  h.s.affine(DimT::batch(), 1, h.s.fresh_dim(), Fx::k(3), 0, Fx::origin());
  REQUIRE(h.errors.size() == 1);
  CHECK(h.errors[0].find("batch axis") != std::string::npos);
  Fx b;
  b.s.affine(b.s.fresh_dim(), 1, Fx::k(1), Fx::k(1), 1, Fx::origin());
  REQUIRE(b.errors.size() == 1);
  CHECK(b.errors[0].find("no input size gives 1 outputs") != std::string::npos);
}

// ---- errors and rollback ------------------------------------------------------------------

TEST_CASE("solver: a failed row unification leaves no partial bindings", "[solver][rollback]") {
  Fx f;
  DimT d1 = f.s.fresh_dim(), d2 = f.s.fresh_dim(), d0 = f.s.fresh_dim();
  CHECK(f.s.equal_dims(d0, Fx::k(9), Fx::origin(), "before"));
  CHECK_FALSE(f.eq(RowT::closed({d1, d2, Fx::k(5)}), Fx::closed({3, 4, 6})));
  REQUIRE(f.errors.size() == 1);
  CHECK(f.free(d1));
  CHECK(f.free(d2));
  CHECK(f.size(d0) == 9);  // the earlier state is intact
  // The same variables can still be bound afterwards.
  CHECK(f.eq(RowT::closed({d1, d2}), Fx::closed({7, 8})));
  CHECK(f.size(d1) == 7);
  CHECK(f.size(d2) == 8);
}

TEST_CASE("solver: a failed open-row unification leaves the row variable unbound",
          "[solver][rollback]") {
  Fx f;
  DimT d = f.s.fresh_dim();
  RowT a = f.open({d}, {Fx::k(6)});
  CHECK_FALSE(f.eq(a, Fx::closed({3, 4, 5})));
  CHECK(f.free(d));
  CHECK(f.p(a) == "[_, .., 6]");
  // Variable-to-variable links are rolled back too.
  DimT x = f.s.fresh_dim(), y = f.s.fresh_dim();
  CHECK_FALSE(f.eq(RowT::closed({x, Fx::k(1)}), RowT::closed({y, Fx::k(2)})));
  CHECK(f.s.equal_dims(x, Fx::k(4), Fx::origin(), "x"));
  CHECK(f.free(y));
}

TEST_CASE("solver: a failed broadcast leaves the dims it tried untouched", "[solver][rollback]") {
  Fx f;
  DimT d = f.s.fresh_dim();
  // The result's last axis is fixed to 3 by the first operand, then 4 clashes.
  f.s.broadcast(RowT::closed({d}), {Fx::closed({3}), Fx::closed({4})}, Fx::origin(), "output");
  CHECK(f.errors.size() == 1);
  CHECK(f.size(d) == 3);
}

// ---- termination --------------------------------------------------------------------------

TEST_CASE("solver: cyclic row equalities terminate with an error", "[solver][termination]") {
  Fx f;
  RowT r = f.s.fresh_row(), s = f.s.fresh_row();
  DimT d = f.s.fresh_dim(), e = f.s.fresh_dim();
  CHECK(f.eq(r, RowT{{d}, s.var, {}}));   // r = d ++ s
  CHECK_FALSE(f.eq(s, RowT{{e}, r.var, {}}));  // s = e ++ r = e ++ d ++ s: no finite solution
  CHECK(f.errors.size() == 1);
  auto t0 = std::chrono::steady_clock::now();
  f.solve();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
}

TEST_CASE("solver: mutually dependent broadcasts and deferred equalities terminate",
          "[solver][termination]") {
  Fx f;
  RowT a = f.s.fresh_row(), b = f.s.fresh_row(), c = f.s.fresh_row();
  f.s.broadcast(a, {b, c}, Fx::origin(), "output");
  f.s.broadcast(b, {a, c}, Fx::origin(), "output");
  f.s.broadcast(c, {a, b}, Fx::origin(), "output");
  RowT x = f.open({Fx::k(1)}, {});
  RowT y = f.open({}, {Fx::k(1)});
  CHECK(f.eq(x, y));
  CHECK(f.eq(RowT{{}, y.var, {}}, RowT{{Fx::k(1)}, x.var, {}}));
  auto t0 = std::chrono::steady_clock::now();
  f.solve();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  CHECK_FALSE(f.s.is_free(a));
  CHECK_FALSE(f.s.is_free(b));
}

// ---- printing -----------------------------------------------------------------------------

TEST_CASE("solver: printing rows and shapes with variables", "[solver][print]") {
  Fx f;
  DimT d = f.s.fresh_dim();
  RowT o = f.open({Fx::k(3)}, {d});
  CHECK(f.p(o) == "[3, .., _]");
  ShapeT sh{{RowT::closed({DimT::batch()}), Fx::closed({3}), Fx::closed({4})}};
  CHECK(f.s.print(sh) == "[batch | 3 -> 4]");
  ShapeT b{{RowT::closed({DimT::batch()}), Fx::closed({}), Fx::closed({})}};
  CHECK(f.s.print(b) == "[batch | ]");
  ShapeT i{{Fx::closed({}), Fx::closed({784}), Fx::closed({})}};
  CHECK(f.s.print(i) == "[784 -> ]");
  ShapeT s{{Fx::closed({}), Fx::closed({}), Fx::closed({})}};
  CHECK(f.s.print(s) == "[]");
}
