// block_grad.h — autodiff of a rolled repeat block: its training body, differentiated once.
//
// Takes: train_step's call of a block's forward (Call::Kind::BlockForward, bound as routine
// assembly binds it: lower/routines.h), met by differentiate's reverse walk, and what that walk
// offers (which program buffers need gradients, their gradients so far, how to make one).
// Guarantees, when the loss depends on what the block carries out:
//   - the block's training body (Block::train): its forward nests, the barrier
//     (Call::Kind::BlockRest: the rest of the model between this instance's forward and its
//     backward), then the body's backward half, made by the same reverse walk as the program's
//     (autodiff/reverse.h) over one instance, with gradients as body buffers:
//       the gradient of a value carried out arrives (the next instance, or the model after the
//         block, has added into it): a formal, not zeroed;
//       the gradient of the value carried in, of each param and of each local is the
//         instance's own from zero: zero fills at the start of the backward half (then folded
//         into the first sums by passes/fold_fills);
//       the gradient of a buffer read from before the block (shared by every instance) is the
//         program's, which each instance adds into: a formal, zeroed once by the program;
//     the barrier reads the values carried out and writes the gradients arriving for them, the
//     gradient carried in and the shared gradients (what other instances and the rest of the
//     model write there), so that the passes move nothing across it;
//   - the call of the backward half (Call::Kind::BlockBackward, instances count-1 .. 0), binding
//     the forward's actuals and each gradient formal: a param's to its slice of the stacked
//     gradient `<param>_grad` [count, ...] (the instances' gradients views of it, in
//     Program::grads, so <model>_grad and the grad block see them as before); the gradient
//     arriving for the value carried out to the program's gradient of the last instance's value
//     (l = count-1) or a ping-pong pair `<block>_<x>_grad` [2, ...] (slot l mod 2); the gradient
//     carried in to the program's gradient of the value before the block (l = 0; made here,
//     not zeroed: this call writes it first) or the pair (slot (l - 1) mod 2); a shared
//     gradient to the program's. When the model after the block reads the value before it too
//     (its gradient exists already), instance 0 writes a buffer `<x>_grad_in` of its own
//     instead, and a nest after the call adds it into the program's gradient.
// The nests returned: the call (and that nest), none when the loss does not depend on the block.
// Every gradient gets the contributions the unrolled program gives it, in the same order (its
// instances' in reverse instance order): the numbers are the expanded program's.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "ir/ir.h"

namespace cannl {

// What differentiate's walk offers a block's.
struct BlockOuter {
  const std::vector<bool>& needs;   // per program buffer (before the block's)
  std::map<int, int>& grads;        // the program's gradients so far (the stacked ones added)
  std::function<int(int)> gradient;        // a program buffer's gradient, zeroed first
  std::function<int(int)> gradient_fresh;  // one the block's call writes first (not zeroed)
};

std::vector<ir::Stmt> block_backward(ir::Program& p, const ir::Stmt& forward_call, BlockOuter& outer);

}  // namespace cannl
