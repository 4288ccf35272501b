// optimizer.h — the optimiser update as loop nests appended to the training step.
//
// Takes: the program, the `minimize` optimiser call and the params' gradient buffers.
// Guarantees: PyTorch's update rules (torch.optim.SGD with momentum, dampening, nesterov and
// weight_decay; Adam with L2 weight_decay; AdamW with decoupled weight decay), one group of
// elementwise nests per param that has a gradient, optimiser state buffers named
// `<param>_<state>` and saved as `<param>.<state>` (momentum_buffer, exp_avg, exp_avg_sq),
// and the run-time scalars they use (lr, step, bias corrections) declared on `train_step`.
#pragma once

#include <map>
#include <vector>

#include "ir/ir.h"
#include "spec/model.h"

namespace cannl {

std::vector<ir::Stmt> lower_optimizer(ir::Program& p, ir::Routine& train_step, const CallConfig& opt,
                                      const std::map<int, int>& grads, int line);

}  // namespace cannl
