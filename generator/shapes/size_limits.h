// size_limits.h — the largest tensors cannl generates code for.
//
// Takes: a model whose shapes were inferred without errors.
// Guarantees: on return without new errors, every tensor, every expression and every
// convolution's column buffer (im2col) has at most kMaxElements elements per example, so the
// later stages' 64-bit size arithmetic (times the batch bound) cannot overflow. Otherwise each
// offender is reported once, at its definition or expression, with its shape.
#pragma once

#include "shapes/infer.h"
#include "spec/model.h"
#include "support/diagnostic.h"

namespace cannl {

inline constexpr long kMaxElements = 1L << 40;

void check_size_limits(const Model& m, const ShapeInfo& shapes, DiagEngine& diags);

}  // namespace cannl
