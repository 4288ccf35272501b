// shape_context.h — what a built-in's shape rule (ops/op_table.cpp) sees of the solver.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "shapes/solver.h"
#include "spec/ast.h"

namespace cannl {

class ShapeContext {
public:
  virtual ~ShapeContext() = default;
  virtual Solver& solver() = 0;
  virtual ShapeT& shape(const Expr* e) = 0;  // an operand's shape
  virtual ShapeT& result() = 0;              // the call's shape
  // An Origin at the call, describing the given operands with their current shapes.
  virtual Origin origin(const std::string& verb, const std::vector<const Expr*>& operands) = 0;
  virtual std::string name_of(const Expr* e) = 0;  // 'w1' or 'w1 * x'
  // The call's einsum spec is read as `chosen`, the word reading of its spec (einsum.h);
  // recorded so that later stages see it (BoundCall::spec after infer_shapes).
  virtual void use_reading(const EinsumSpec& chosen) = 0;
  // Whether the operand holds integers (an `int` input, position(...)): model.h's Elem.
  virtual bool is_int(const Expr* e) = 0;
  // A check of what the solver found: run after solving, when shapes are final; a message it
  // returns is reported at `o` (prefixed with its description).
  virtual void check_after_solving(Origin o, std::function<std::string()> check) = 0;
  // If `e` is a param whose `kind` axes stay free, `why` replaces the generic advice.
  virtual void explain_free(const Expr* e, AxisKind kind, std::string why) = 0;

  // Helpers shared by many rules.
  void same_shape(const Expr* x, const std::string& verb);  // result = shape of x
  void scalar_result();
  // The einsum rule. A spec with two readings (EinsumSpec::words) is read by the letters,
  // unless the operands' closed rows rule the letters out and fit the words.
  void einsum(const EinsumSpec& spec, const std::vector<const Expr*>& operands,
              const std::string& verb);
  // The einsum rule's constraints on the operands; returns the shape SPEC gives the result
  // (einsum() makes it the call's).
  ShapeT einsum_result(const EinsumSpec& spec, const std::vector<const Expr*>& operands,
                       const std::string& verb);

private:
  bool fits(const EinsumSpec& spec, const std::vector<const Expr*>& operands);
};

}  // namespace cannl
