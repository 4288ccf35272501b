// autodiff.h — reverse-mode differentiation of forward loop nests.
//
// Takes: the forward nests of a routine (as lower_forward makes them: each buffer's nests
// contiguous, pointwise nests with identity output index) and the scalar loss buffer.
// Guarantees: a gradient buffer `<name>_grad` for every buffer on a path from a param to the
// loss; nests that set the loss gradient to 1, zero the others, then for each forward nest in
// reverse order and each buffer it reads, a nest
//     for <the same loops>:  x_grad[read index] += out_grad[write index] * d body / d x[read index]
// (for max= and min= nests the derivative is masked to the first element of the reduction,
// in row-major order of the reduced loops, equal to the result: ties go to the first, as in
// PyTorch; a `<name>_arg` buffer and two nests before the contributions find that element). One rule per primitive
// operation of the loop IR (`derivative`), so every built-in gets its gradient from the nests
// lower_forward wrote for it. Loads marked nograd are constants.
#pragma once

#include <map>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct Gradients {
  std::vector<ir::Stmt> stmts;
  std::map<int, int> grad;  // buffer -> its gradient buffer
};

Gradients differentiate(ir::Program& p, const std::vector<ir::Stmt>& forward, int loss);

// d e / d x[wrt], x[wrt] one particular read (all loads of exactly that access).
ir::ExprP derivative(const ir::ExprP& e, const ir::Access& wrt);

}  // namespace cannl
