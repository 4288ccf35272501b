// optimizer.h — the optimiser update as loop nests appended to the training step.
//
// Takes: a Program after autodiff (Program::grads) with the minimize statement's optimiser
// (Program::opt, set by lowering). Guarantees: the optimiser as the program records it for the
// emitters (Program::lr, optimizer, schedule);
// appended to train_step, PyTorch's update rules (torch.optim.SGD with momentum, dampening, nesterov and
// weight_decay; Adam with L2 weight_decay; AdamW with decoupled weight decay), one group of
// elementwise nests per param that has a gradient, optimiser state buffers named
// `<param>_<state>` and saved as `<param>.<state>` (momentum_buffer, exp_avg, exp_avg_sq),
// zeroed at the end of init, and the run-time scalars they use (lr, step, bias corrections)
// declared on `train_step`. The same split in two routines for data-parallel training:
// `train_grads` (train_step's forward and backward: the loss, the param gradients kept) and
// `train_update` (the update nests and their scalars), appended to the program's routines.
// Training options: with a `schedule`, the updates use the scalar `lr_t`, the schedule's
// learning rate of the current step computed from the model's base lr and the step count (and
// switchable off at run time, `<model>_set_schedule`); with `clip_grad_norm`, nests first sum
// the squares of every gradient into `grad_norm` and set `clip_coef` = min(1, max_norm /
// (sqrt(grad_norm) + 1e-6)), and every update reads the gradient times `clip_coef`
// (torch.nn.utils.clip_grad_norm_).
#pragma once

#include "ir/ir.h"

namespace cannl {

void add_optimizer(ir::Program& p);

// The learning rate of this step (Scalar `step`, 1-based) under a schedule, from the base
// learning rate `base` (evaluated in double precision as a ScalarDef, ir.h).
ir::ExprP schedule_lr(const ir::Schedule& schedule, const ir::ExprP& base);

}  // namespace cannl
