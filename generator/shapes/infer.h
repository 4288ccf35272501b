// infer.h — global shape inference over a Model (contract §10).
//
// Takes: a Model without errors. Guarantees: every tensor and every expression node gets a
// concrete Shape, or errors were reported: shape mismatches (naming both operands, both
// shapes and the statement that joined them), params/inputs whose axes nothing constrains,
// non-scalar losses and metrics. Constraints from all statements are solved together, so a
// param's shape may come from any later statement.
#pragma once

#include <map>
#include <vector>

#include "shapes/shape.h"
#include "spec/model.h"

namespace cannl {

struct ShapeInfo {
  std::vector<Shape> tensors;             // by tensor index
  std::map<const Expr*, Shape> exprs;     // every expression node
  const Shape& of(const Expr* e) const { return exprs.at(e); }
};

// Also picks the reading of each comma-free einsum spec that has two (EinsumSpec::words) and
// records it in m.calls (the only change to the Model): later stages read BoundCall::spec.
ShapeInfo infer_shapes(Model& m, const SourceFile& file, DiagEngine& diags);

}  // namespace cannl
