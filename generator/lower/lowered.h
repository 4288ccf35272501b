// lowered.h — what lowering hands to routine assembly: the Program and its forward nests.
//
// The Program carries everything later stages read of the spec (buffers with their
// initialisers, the interface, the optimiser configuration: ir.h), so routine assembly, autodiff
// and the optimiser see the IR only; Lowered adds the nests not yet grouped into routines.
#pragma once

#include <utility>
#include <vector>

#include "ir/ir.h"

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
  // The spec tensor each buffer, each nest of `forward` and each nest of `train_updates` was
  // made for (lowering it; -1: none): rolling (lower/roll.h) finds a repeat block's instances
  // by them. Kept current by rolling and unrolling (-1 for the buffers and nests they make).
  std::vector<int> buffer_tensor, nest_tensor, update_tensor;
};

}  // namespace cannl
