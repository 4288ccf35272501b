// training_config.h — the spec's initialisers and optimiser as IR facts (ir::Init,
// ir::OptimizerConfig), so that the stages after lowering read the IR only.
//
// Takes: a Model and ShapeInfo without errors. Guarantees: a param's initialiser named as
// routine assembly reads it (the spec's, else "default" or "zeros"), its arguments with their
// defaults, its fans and spec line; the minimize statement's optimiser, schedule and clipping
// with the texts the generated code prints (an empty config for a model without one).
#pragma once

#include "ir/ir.h"
#include "shapes/infer.h"
#include "spec/model.h"

namespace cannl {

// The initialiser of the spec param `tensor` (an index of Model::tensors).
ir::Init param_init(const Model& m, const ShapeInfo& shapes, const SourceFile& file, int tensor);

// The minimize statement's optimiser and training options.
ir::OptimizerConfig optimizer_config(const Model& m, const SourceFile& file, const std::vector<int>& tensor_buf);

}  // namespace cannl
