// prims.cpp — the primitive pointwise functions of the loop IR (see prims.h): one row each.
#include "ir/prims.h"

#include <cmath>
#include <fmt/format.h>

#include "support/diagnostic.h"

namespace cannl::ir {

std::string CSpell::fn(const char* base) const { return f64 ? base : std::string(base) + "f"; }

std::string CSpell::num(double v) const {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  std::string s = f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return f64 ? s : s + "f";
}

namespace {

using Args = std::vector<ExprP>;

ExprP mul(ExprP a, ExprP b) { return binary(Op::Mul, std::move(a), std::move(b)); }
ExprP sub(ExprP a, ExprP b) { return binary(Op::Sub, std::move(a), std::move(b)); }
ExprP div(ExprP a, ExprP b) { return binary(Op::Div, std::move(a), std::move(b)); }
ExprP zero(const Args&, const ExprP&, const Args&) { return cnst(0); }

std::vector<Prim> make_prims() {
  // The rows. A derivative rule receives the arguments x, the call itself (self) and the
  // arguments' derivatives dx, and multiplies as the chain rule does.
  return {
      {.name = "relu",
       .helper = [](const CSpell&) -> std::string { return "return x > 0 ? x : 0;"; },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("step", {x[0]}), dx[0]); },
       .fold = [](const double* x) { return x[0] > 0 ? x[0] : 0; }},
      {.name = "step",  // x > 0 ? 1 : 0, relu's derivative
       .helper = [](const CSpell&) -> std::string { return "return x > 0 ? 1 : 0;"; },
       .derivative = zero,
       .fold = [](const double* x) { return x[0] > 0 ? 1.0 : 0.0; }},
      {.name = "sigmoid",
       .helper = [](const CSpell& c) { return fmt::format("return 1 / (1 + {}(-x));", c.fn("exp")); },
       .derivative = [](const Args&, const ExprP& self, const Args& dx) {
         return mul(mul(self, sub(cnst(1), self)), dx[0]);
       },
       .cost = 4,
       .fold = [](const double* x) { return 1 / (1 + std::exp(-x[0])); }},
      {.name = "tanh",
       .libm = "tanh",
       .derivative = [](const Args&, const ExprP& self, const Args& dx) { return mul(sub(cnst(1), mul(self, self)), dx[0]); },
       .cost = 4,
       .fold = [](const double* x) { return std::tanh(x[0]); }},
      {.name = "exp",
       .libm = "exp",
       .derivative = [](const Args&, const ExprP& self, const Args& dx) { return mul(self, dx[0]); },
       .cost = 4,
       .fold = [](const double* x) { return std::exp(x[0]); }},
      {.name = "log",
       .libm = "log",
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return div(dx[0], x[0]); },
       .cost = 4,
       .fold = [](const double* x) { return std::log(x[0]); }},
      {.name = "sqrt",
       .libm = "sqrt",
       .derivative = [](const Args&, const ExprP& self, const Args& dx) { return div(dx[0], mul(cnst(2), self)); },
       .cost = 4,
       .fold = [](const double* x) { return std::sqrt(x[0]); }},
      {.name = "abs",
       .libm = "fabs",
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("sign", {x[0]}), dx[0]); },
       .fold = [](const double* x) { return std::fabs(x[0]); }},
      {.name = "sign",
       .helper = [](const CSpell&) -> std::string { return "return (x > 0) - (x < 0);"; },
       .derivative = zero,
       .fold = [](const double* x) { return static_cast<double>((x[0] > 0) - (x[0] < 0)); }},
      {.name = "gelu",  // the exact form, x * Φ(x) (PyTorch's default)
       .helper = [](const CSpell& c) {
         return fmt::format("return {} * x * (1 + {}(x * {}));", c.num(0.5), c.fn("erf"), c.num(M_SQRT1_2));
       },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("gelu_grad", {x[0]}), dx[0]); },
       .cost = 4},
      {.name = "gelu_grad",  // d gelu(x) / dx = Φ(x) + x φ(x)
       .helper = [](const CSpell& c) {
         return fmt::format("return {} * (1 + {}(x * {})) + x * {}({} * x * x) * {};", c.num(0.5), c.fn("erf"),
                            c.num(M_SQRT1_2), c.fn("exp"), c.num(-0.5), c.num(0.3989422804014327));
       },
       .cost = 4},
      // PyTorch's gelu(x, approximate="tanh"): x (1 + tanh(u)) / 2, u = √(2/π) (x + 0.044715 x³). On the
      // C target as x σ(2u) = x / (1 + exp(-2u)), the same function: libmvec's vector exp costs
      // less than its tanh (gpt_char's step: ~2 ms of 70 at one thread), and it loses nothing to
      // cancellation where tanh(u) nears -1. The CUDA target keeps tanh.
      {.name = "gelu_tanh",
       .helper = [](const CSpell& c) {
         return fmt::format("return x / (1 + {}({} * (x + {} * x * x * x)));", c.fn("exp"),
                            c.num(-2 * 0.7978845608028654), c.num(0.044715));
       },
       .cuda_helper = [](const CSpell& c) {
         return fmt::format("return {} * x * (1 + {}({} * (x + {} * x * x * x)));", c.num(0.5), c.fn("tanh"),
                            c.num(0.7978845608028654), c.num(0.044715));
       },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("gelu_tanh_grad", {x[0]}), dx[0]); },
       .cost = 4},
      // d gelu_tanh(x) / dx = (1 + t) / 2 + x (1 - t²) u' / 2, t = tanh(u), u' = √(2/π) (1 + 3 · 0.044715 x²);
      // with s = σ(2u) = (1 + t) / 2: s + x s (1 - s) 2u' (C target; CUDA: the tanh form).
      {.name = "gelu_tanh_grad",
       .helper = [](const CSpell& c) {
         return fmt::format("const {0} s = 1 / (1 + {1}({2} * (x + {3} * x * x * x))); return s + x * s * (1 - s) * {4} * (1 + {5} * x * x);",
                            c.f64 ? "double" : "float", c.fn("exp"), c.num(-2 * 0.7978845608028654), c.num(0.044715),
                            c.num(2 * 0.7978845608028654), c.num(3 * 0.044715));
       },
       .cuda_helper = [](const CSpell& c) {
         return fmt::format("const {0} t = {1}({2} * (x + {3} * x * x * x)); return {4} * (1 + t) + {4} * x * (1 - t * t) * {2} * (1 + {5} * x * x);",
                            c.f64 ? "double" : "float", c.fn("tanh"), c.num(0.7978845608028654), c.num(0.044715),
                            c.num(0.5), c.num(3 * 0.044715));
       },
       .cost = 4},
      {.name = "sin",
       .libm = "sin",
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("cos", {x[0]}), dx[0]); },
       .cost = 4,
       .fold = [](const double* x) { return std::sin(x[0]); }},
      {.name = "cos",
       .libm = "cos",
       .derivative = [](const Args& x, const ExprP&, const Args& dx) {
         return mul(unary(Op::Neg, call("sin", {x[0]})), dx[0]);
       },
       .cost = 4,
       .fold = [](const double* x) { return std::cos(x[0]); }},
      {.name = "pow",  // x ** y, both expressions (** by a constant is the IR's own Pow)
       .arity = 2,
       .libm = "pow",
       .derivative = [](const Args& x, const ExprP& self, const Args& dx) {
         return binary(Op::Add, mul(mul(x[1], call("pow", {x[0], sub(x[1], cnst(1))})), dx[0]),
                       mul(mul(self, call("log", {x[0]})), dx[1]));
       },
       .cost = 4,
       .fold = [](const double* x) { return std::pow(x[0], x[1]); }},
      {.name = "floor",
       .libm = "floor",
       .derivative = zero,
       .fold = [](const double* x) { return std::floor(x[0]); }},
      {.name = "log1p",  // log(1 + x), accurate near 0
       .libm = "log1p",
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return div(dx[0], binary(Op::Add, cnst(1), x[0])); },
       .cost = 4,
       .fold = [](const double* x) { return std::log1p(x[0]); }},
      {.name = "silu",  // x * sigmoid(x)
       .helper = [](const CSpell& c) { return fmt::format("return x / (1 + {}(-x));", c.fn("exp")); },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) {  // sigmoid(x) (1 + x (1 - sigmoid(x)))
         const ExprP s = call("sigmoid", {x[0]});
         return mul(mul(s, binary(Op::Add, cnst(1), mul(x[0], sub(cnst(1), s)))), dx[0]);
       },
       .cost = 4,
       .fold = [](const double* x) { return x[0] / (1 + std::exp(-x[0])); }},
      {.name = "minimum",  // the smaller; NaN when either is (torch.minimum)
       .arity = 2,
       .helper = [](const CSpell&) -> std::string { return "return x != x || x < y ? x : y;"; },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) {  // a tie shares the gradient (PyTorch)
         const ExprP tie = binary(Op::Eq, x[0], x[1]);
         auto part = [&](const ExprP& a, const ExprP& b) {  // d/da: 1 where a wins, 0 where it loses
           return select(tie, cnst(0.5), select(binary(Op::Gt, a, b), cnst(0), cnst(1)));
         };
         return binary(Op::Add, mul(part(x[0], x[1]), dx[0]), mul(part(x[1], x[0]), dx[1]));
       },
       .fold = [](const double* x) { return x[0] != x[0] || x[0] < x[1] ? x[0] : x[1]; }},
      {.name = "maximum",  // the larger; NaN when either is (torch.maximum)
       .arity = 2,
       .helper = [](const CSpell&) -> std::string { return "return x != x || x > y ? x : y;"; },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) {  // a tie shares the gradient (PyTorch)
         const ExprP tie = binary(Op::Eq, x[0], x[1]);
         auto part = [&](const ExprP& a, const ExprP& b) {  // d/da: 1 where a wins, 0 where it loses
           return select(tie, cnst(0.5), select(binary(Op::Gt, b, a), cnst(0), cnst(1)));
         };
         return binary(Op::Add, mul(part(x[0], x[1]), dx[0]), mul(part(x[1], x[0]), dx[1]));
       },
       .fold = [](const double* x) { return x[0] != x[0] || x[0] > x[1] ? x[0] : x[1]; }},
      {.name = "log1pexp",  // log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow; d = sigmoid(x)
       .helper = [](const CSpell& c) {
         return fmt::format("return (x > 0 ? x : 0) + {}({}(-{}(x)));", c.fn("log1p"), c.fn("exp"), c.fn("fabs"));
       },
       .derivative = [](const Args& x, const ExprP&, const Args& dx) { return mul(call("sigmoid", {x[0]}), dx[0]); },
       .cost = 8,
       .fold = [](const double* x) { return (x[0] > 0 ? x[0] : 0) + std::log1p(std::exp(-std::fabs(x[0]))); }},
      // rope's rotation (contract v2 §2): the cosine and sine of the angle of position x and pair
      // y of a head of size w, x / z^(2y / w) (theta z), computed in double and rounded once; the
      // angles do not depend on what is differentiated.
      {.name = "rope_cos",
       .arity = 4,
       .helper = [](const CSpell& c) {
         return fmt::format("return ({})cos(x / pow(z, 2 * y / w));", c.f64 ? "double" : "float");
       },
       .derivative = zero,
       .cost = 8,
       .wide = true},
      {.name = "rope_sin",
       .arity = 4,
       .helper = [](const CSpell& c) {
         return fmt::format("return ({})sin(x / pow(z, 2 * y / w));", c.f64 ? "double" : "float");
       },
       .derivative = zero,
       .cost = 8,
       .wide = true},
  };
}

}  // namespace

const std::vector<Prim>& prims() {
  static const std::vector<Prim> table = make_prims();
  return table;
}

const Prim* find_prim(const std::string& name) {
  for (const Prim& p : prims())
    if (name == p.name) return &p;
  return nullptr;
}

const Prim& prim(const std::string& name) {
  const Prim* p = find_prim(name);
  if (!p) CANNL_BUG("no primitive function called " + name);
  return *p;
}

ExprP call(const Prim& f, std::vector<ExprP> args) {
  if (static_cast<int>(args.size()) != f.arity) CANNL_BUG(std::string("wrong number of arguments to ") + f.name);
  if (f.fold) {
    std::vector<double> v;
    for (const ExprP& a : args)
      if (a->op == Op::Const) v.push_back(a->value);
    if (v.size() == args.size()) {
      const double r = f.fold(v.data());
      if (std::isfinite(r)) return cnst(r);
    }
  }
  auto e = std::make_shared<Expr>();
  e->op = Op::Prim;
  e->prim = &f;
  e->args = std::move(args);
  return e;
}

ExprP call(const std::string& name, std::vector<ExprP> args) { return call(prim(name), std::move(args)); }

bool is_call(const Expr& e, const char* name) { return e.op == Op::Prim && std::string(e.prim->name) == name; }

}  // namespace cannl::ir
