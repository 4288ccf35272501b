// reverse.h — the reverse walk of autodiff: one forward nest's contributions to gradients.
//
// Takes: a forward nest of a Program (a loop nest, or an attention or embedding call), which
// buffers need gradients, the gradients made so far, and how to make a gradient or a scratch
// buffer (differentiate makes program buffers, a block body's differentiation body buffers:
// autodiff/block_grad.h). Guarantees: for each buffer the nest reads that needs a gradient, a
// nest (or a backward call) adding the nest's contribution to its gradient, appended to
// `contributions`:
//     for <the nest's loops>:  x_grad[read index] += out_grad[write index] * d body / d x[read index]
// (max= and min= masked to the first extremum, whose position buffer and two nests go to
// `fills`; attention: its backward call from the saved log-sum-exp and a delta scratch;
// embedding: the scatter-add). Nothing for a nest whose output has no gradient.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct Reverse {
  ir::Program& p;
  const std::vector<bool>& needs;         // per buffer
  const std::map<int, int>& grads;        // buffer -> its gradient, so far
  std::function<int(int)> gradient;       // the gradient of a buffer, made (with its zero fill) on first use
  std::function<int(ir::Buffer)> scratch; // a new buffer of the walk's own (added where the walk's buffers go)
  std::vector<ir::Stmt>& fills;           // zero fills (and first-extremum searches), in order
  std::vector<ir::Stmt>& contributions;   // in order

  // The contributions of forward nest `s` (called for the nests in reverse order).
  void nest(const ir::Stmt& s);
};

// Which buffers of `nests` need a gradient, from `seeds` (params, ...) forward through loads
// (not nograd ones) and calls' reads.
void propagate_needs(const std::vector<ir::Stmt>& nests, std::vector<bool>& needs);

}  // namespace cannl
