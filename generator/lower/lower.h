// lower.h — from the spec (Model + inferred shapes) to forward loop nests.
//
// Takes: a Model and ShapeInfo without errors. Guarantees: a Program with the model's
// interface (inputs, outputs, params, metrics, loss: buffer indices in spec order; a param's
// checkpoint name is its spec name) and no routines yet; one buffer per spec tensor (named
// after it, in storage order batch, output, input — contract §9), temporaries for values that
// must be stored (matrix products, reductions, the statistics of softmax and layer_norm);
// pointwise sub-expressions are computed inline inside the nest that uses them. `forward`
// lists every nest in spec order (metrics included); each buffer's nests are contiguous, a
// fill (= 0 or = -inf) first when the others accumulate. Composite built-ins (softmax,
// cross_entropy, layer_norm, mean, accuracy, conv2d, pools) become nests of primitives here,
// so autodiff needs one rule per primitive only.
#pragma once

#include <vector>

#include "ir/ir.h"
#include "shapes/infer.h"
#include "spec/model.h"

namespace cannl {

// Which routines a forward nest belongs to: dropout and batch_norm compute their value one way
// in the training step and another in forward, eval_metrics and inference.
enum class Phase { Both, Train, Infer };

struct Lowered {
  ir::Program prog;
  std::vector<ir::Stmt> forward;
  std::vector<Phase> phase;     // per nest of `forward`
  std::vector<int> tensor_buf;  // spec tensor index -> buffer
  // Training-step nests that the loss does not read: batch_norm's running statistics, updated
  // from the batch's (after the forward nests, in spec order).
  std::vector<ir::Stmt> train_updates;
  // State that is not a spec param but lives in the checkpoint beside them (batch_norm's
  // running statistics, frozen params of p.params): each buffer and its initial value.
  std::vector<std::pair<int, double>> state_init;
};

Lowered lower_forward(const Model& m, const ShapeInfo& shapes, const SourceFile& file, long max_batch);

// Storage dims of a shape: batch row, then output row, then input row.
std::vector<ir::Dim> storage_dims(const Shape& s, long max_batch);

}  // namespace cannl
