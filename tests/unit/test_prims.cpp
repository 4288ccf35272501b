// The table of primitive pointwise functions (generator/ir/prims.cpp): every row's derivative
// rule against central differences of its constant folding, at points away from its kinks;
// calls fold on constants; the C spelling of each row compiles into the expression printer.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "emit/c_common.h"
#include "ir/prims.h"

using namespace cannl;
using ir::Op;

namespace {

// The value of an expression whose loads are the variables x0, x1 (buffers 0 and 1).
double eval(const ir::Expr& e, const std::vector<double>& x) {
  auto a = [&](size_t i) { return eval(*e.args[i], x); };
  switch (e.op) {
    case Op::Const: return e.value;
    case Op::Load: return x[static_cast<size_t>(e.access.buf)];
    case Op::Neg: return -a(0);
    case Op::Add: return a(0) + a(1);
    case Op::Sub: return a(0) - a(1);
    case Op::Mul: return a(0) * a(1);
    case Op::Div: return a(0) / a(1);
    case Op::Pow: return std::pow(a(0), e.value);
    case Op::Eq: return a(0) == a(1);
    case Op::Gt: return a(0) > a(1);
    case Op::Select: return a(0) != 0 ? a(1) : a(2);
    case Op::Prim: {
      std::vector<double> v;
      for (size_t i = 0; i < e.args.size(); ++i) v.push_back(a(i));
      REQUIRE(e.prim->fold);
      return e.prim->fold(v.data());
    }
    default: FAIL("unexpected op in a derivative");
  }
  return 0;
}

ir::ExprP var(int i) { return ir::load({i, {}}); }

}  // namespace

TEST_CASE("prims: every derivative rule agrees with central differences", "[prims]") {
  // Points away from kinks (relu and abs at 0, minimum and maximum at ties, floor at integers).
  const std::vector<std::vector<double>> points = {{0.7, -0.4}, {-1.3, 0.9}, {2.2, 1.6}, {0.35, 2.5}};
  int checked = 0;
  for (const ir::Prim& f : ir::prims()) {
    if (!f.derivative || !f.fold) continue;
    for (const auto& pt : points) {
      if (!std::isfinite(f.fold(pt.data()))) continue;  // outside the function's domain (log of -1.3)
      std::vector<ir::ExprP> args;
      for (int i = 0; i < f.arity; ++i) args.push_back(var(i));
      const ir::ExprP call = ir::call(f, args);
      for (int wrt = 0; wrt < f.arity; ++wrt) {
        std::vector<ir::ExprP> dx;
        for (int i = 0; i < f.arity; ++i) dx.push_back(ir::cnst(i == wrt ? 1 : 0));
        const double analytic = eval(*f.derivative(args, call, dx), pt);
        const double h = 1e-6;
        std::vector<double> up = pt, down = pt;
        up[static_cast<size_t>(wrt)] += h;
        down[static_cast<size_t>(wrt)] -= h;
        const double numeric = (f.fold(up.data()) - f.fold(down.data())) / (2 * h);
        INFO(f.name << " d/dx" << wrt << " at (" << pt[0] << ", " << pt[1] << ")");
        CHECK(std::abs(analytic - numeric) <= 1e-6 * std::max(1.0, std::abs(numeric)));
        ++checked;
      }
    }
  }
  CHECK(checked > 40);
}

TEST_CASE("prims: calls of constants fold, C spells each row", "[prims]") {
  CHECK(ir::is_const(ir::call("relu", {ir::cnst(-2)}), 0));
  CHECK(ir::is_const(ir::call("sigmoid", {ir::cnst(0)}), 0.5));
  CHECK(ir::call("gelu", {ir::cnst(1)})->op == Op::Prim);  // not folded: no fold in its row
  CHECK(ir::find_prim("no_such_function") == nullptr);
  for (const ir::Prim& f : ir::prims()) {
    INFO(f.name);
    CHECK(((f.libm != nullptr) != (f.helper != nullptr)));  // one C spelling
    std::vector<ir::ExprP> args;
    for (int i = 0; i < f.arity; ++i) args.push_back(var(i));
    ir::Program p;
    p.buffers.resize(4);
    CExpr c;
    c.p = &p;
    c.names = {"x", "y", "z", "w"};
    ir::Stmt s;
    c.begin_nest(s, {});
    const std::string text = c.expr(*ir::call(f, args));
    CHECK(text.find(f.libm ? std::string(f.libm) + "f(" : "cannl_" + std::string(f.name) + "(") == 0);
    if (f.helper) CHECK(c.helper_defs("static inline").find("cannl_" + std::string(f.name) + "(") != std::string::npos);
  }
}

TEST_CASE("prims: a wide row's helper computes in double", "[prims]") {
  // rope's angles (contract v2 §2): in double, rounded to the element type once.
  const ir::Prim& f = ir::prim("rope_cos");
  CHECK(f.wide);
  ir::Program p;
  p.buffers.resize(2);
  CExpr c;
  c.p = &p;
  c.names = {"x", "y"};
  ir::Stmt s;
  c.begin_nest(s, {});
  const std::string text = c.expr(*ir::call(f, {var(0), var(1), ir::cnst(0.1), ir::cnst(8)}));
  CHECK(text.find("0.1,") != std::string::npos);  // a double literal, not 0.1f
  CHECK(text.find("0.1f") == std::string::npos);
  const std::string defs = c.helper_defs("static inline");
  CHECK(defs.find("float cannl_rope_cos(double x, double y, double z, double w)") != std::string::npos);
  CHECK(defs.find("(float)cos(") != std::string::npos);
}
