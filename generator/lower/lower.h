// lower.h — from the spec (Model + inferred shapes) to forward loop nests.
//
// Takes: a Model and ShapeInfo without errors. Guarantees: a Program with the model's
// interface (inputs, outputs, params, metrics, loss: buffer indices in spec order; a param's
// checkpoint name is its spec name) and no routines yet; one buffer per spec tensor (named
// after it, in storage order batch, output, input — contract §9), temporaries for values that
// must be stored (matrix products, reductions, the statistics of softmax and layer_norm);
// pointwise sub-expressions are computed inline inside the nest that uses them. `forward`
// lists every nest in spec order (metrics included); each buffer's nests are contiguous, a
// fill (= 0 or = -inf) first when the others accumulate. Each spec param's buffer carries its
// initialiser (Buffer::init, and Buffer::matrix), and the Program the minimize statement's
// optimiser and training options (Program::opt). Composite built-ins (softmax,
// cross_entropy, layer_norm, mean, accuracy, conv2d, pools) become nests of primitives here,
// so autodiff needs one rule per primitive only.
#pragma once

#include <vector>

#include "ir/ir.h"
#include "lower/lowered.h"
#include "shapes/infer.h"
#include "spec/model.h"

namespace cannl {

// With `roll`, repeat blocks whose instances lower alike are rolled (lower/roll.h): the
// Program then has blocks, called from `forward`, and stacked params.
Lowered lower_forward(const Model& m, const ShapeInfo& shapes, const SourceFile& file, long max_batch,
                      bool roll = false);

// Storage dims of a shape: batch row, then output row, then input row.
std::vector<ir::Dim> storage_dims(const Shape& s, long max_batch);

}  // namespace cannl
