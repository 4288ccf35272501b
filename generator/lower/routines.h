// routines.h — routine assembly: the lowered forward nests grouped into the model's routines.
//
// Takes: the Program and forward nests of lower_forward (no routines yet; the params'
// initialisers on their buffers, ir::Init). Guarantees: the routines, each with its kind and
// interface (ir.h):
//   init          params from their initialisers (in declaration order, one random stream);
//   train_step    the forward nests the loss needs (autodiff and the optimiser append theirs);
//                 hands out the loss;
//   forward       the nests the outputs need (inference); hands out the outputs;
//   eval_metrics  the nests the loss and the metrics need; hands out the loss, then the metrics.
// Loops are in the order lowering wrote them (passes/loop_order orders them later).
// A rolled repeat block (lower/roll.h) is called where its instances' nests were, its calls'
// values carried between instances placed per routine: in train_step a stack
// `<block>_<x>` [count - 1, ...] keeps each instance's value but the last (slot l; the backward
// reads them), in forward and eval_metrics a ping-pong pair `<block>_<x>_pp` (slot l mod 2);
// the block's inference body (Block::infer) is its nests; init draws a block's params with
// its init body (Block::init: each param formal's initialiser, in declaration order) called for
// instance after instance where the first instance's params were, the same random draws as
// without rolling.
#pragma once

#include "ir/ir.h"
#include "lower/lowered.h"

namespace cannl {

void assemble_routines(ir::Program& p, const Lowered& low);

}  // namespace cannl
