// prims.h — the primitive pointwise functions of the loop IR, one row each.
//
// An expression of op Prim applies one row (Expr::prim) to its arguments. The row is all the
// generator knows about the function: its name (in dumps, and for the built-ins that lower to
// it), its arity, how the C and CUDA targets spell it, its derivative, its cost and its value
// on constants. Adding a function is adding a row to prims.cpp, and a built-in of the spec
// language that computes it is an entry in ops/op_table.cpp naming the row.
//
// The arithmetic operators (+, -, *, /, unary -, ** by a constant, ==, >, select) are the
// IR's own ops (ir.h): the simplifier, the contraction recogniser and the printers treat them
// specially.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl::ir {

// What a C spelling may ask of the target's printer: the element type's names.
struct CSpell {
  bool f64 = false;
  std::string fn(const char* base) const;  // a math-library function: "exp" -> expf, or exp in double
  std::string num(double v) const;         // a literal of the element type: 0.5f, or 0.5 in double
};

// d f(x...) from the arguments x, the call itself (`self`) and the derivatives dx of the
// arguments (each 0 when the argument does not depend on what is differentiated).
using DerivativeRule = ExprP (*)(const std::vector<ExprP>& x, const ExprP& self, const std::vector<ExprP>& dx);

struct Prim {
  const char* name = nullptr;  // "relu"
  int arity = 1;
  // How C (and CUDA C++) spell it: a math-library function (`libm` "sin": sinf in float, sin
  // in double), or a helper whose body `helper` gives, defined once per file as
  //   static inline real cannl_<name>(real x[, real y]) { <body> }
  const char* libm = nullptr;
  std::string (*helper)(const CSpell&) = nullptr;
  // The CUDA target's helper body when it differs from the C target's (null: the same).
  std::string (*cuda_helper)(const CSpell&) = nullptr;
  DerivativeRule derivative = nullptr;  // null: not differentiable (a bug if asked)
  double cost = 1;                      // per evaluation (passes' cost model): transcendentals 4
  double (*fold)(const double* x) = nullptr;  // the value on constant arguments; null: not folded
  // The helper takes its arguments (x, y, z, w: up to four) in double, and constant arguments
  // are printed as double literals: what it computes is rounded to the element type once, at
  // the end (rope's angles, contract v2 §2).
  bool wide = false;
};

// Every row, in a fixed order (the order helpers are defined in generated files).
const std::vector<Prim>& prims();
const Prim* find_prim(const std::string& name);  // null when there is none
const Prim& prim(const std::string& name);       // a bug when there is none

// f(args...) (folded when every argument is a constant and the row folds to a finite value).
ExprP call(const Prim& f, std::vector<ExprP> args);
ExprP call(const std::string& name, std::vector<ExprP> args);
// `e` is a call of the row called `name`.
bool is_call(const Expr& e, const char* name);

}  // namespace cannl::ir
