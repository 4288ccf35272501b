// autodiff.h — reverse-mode differentiation of forward loop nests.
//
// Takes: a Program whose train_step routine holds forward nests only (as lower_forward makes
// them: each buffer's nests contiguous, pointwise nests with identity output index) and a
// scalar loss. Guarantees: a gradient buffer `<name>_grad` for every buffer on a path from a
// param to the loss, recorded in Program::grads (the param → gradient map later stages read),
// the params' gradients in train_step's kept interface (param order); appended to train_step,
// nests that set the loss gradient to 1, zero the others, then for each forward nest in
// reverse order and each buffer it reads, a nest
//     for <the same loops>:  x_grad[read index] += out_grad[write index] * d body / d x[read index]
// (for max= and min= nests the derivative is masked to the first element of the reduction,
// in row-major order of the reduced loops, equal to the result: ties go to the first, as in
// PyTorch; a `<name>_arg` buffer and two nests before the contributions find that element).
// One rule per operation of the loop IR (`derivative`; a primitive function's is its row in
// ir/prims.cpp), so every built-in gets its gradient from the nests lower_forward wrote for
// it. Loads marked nograd are constants.
// A stacked param's (lower/roll.h: Buffer::stack, its instances' params views of it) gradient
// is stacked too: when the loss depends on every instance, one gradient buffer of the stacked
// param's dims (Program::grads maps the stacked param to it), each instance's gradient a view of
// it at the instance's slice; when it depends on some instances only, the views become params of
// their own again (stack_gradients, at the end of differentiate).
#pragma once

#include "ir/ir.h"

namespace cannl {

void differentiate(ir::Program& p);
void stack_gradients(ir::Program& p);  // (part of differentiate; see above)

// d e / d x[wrt], x[wrt] one particular read (all loads of exactly that access).
ir::ExprP derivative(const ir::ExprP& e, const ir::Access& wrt);

}  // namespace cannl
