// unroll_blocks.h — block calls expanded back into their instances' nests.
//
// Takes: a Program with blocks (lower/roll.h) and a list of nests calling them
// (Call::Kind::BlockForward). Guarantees: unroll_calls replaces each call by count copies of
// its block's body, instance after instance, each over the instance's actual buffers: a
// param formal its view of the stacked param (the view of Binding::buf at offset + l *
// stride), a shared formal the same buffer, the values carried in and out the call's first
// and last buffers and, between two instances, a buffer of the instance's own; every local a
// buffer of the instance's own, named as lowering names an instance's (qkv_mm of instance 3:
// qkv_3_mm; Block::name_at), appended to Program::buffers. It returns, for each nest of the
// new list, the index of the nest of the old list it comes from. drop_blocks then removes the
// blocks and their body buffers (the instances' buffers take the body's place among the
// buffers: ir/remap.h, which renumbers the Program and the lists given) and returns the map
// from old buffer indices to new ones (-1: a body buffer). The stacked params and their views
// stay: the result is the program lowering makes without rolling, its params stacked.
//
// unroll_routines does the same after autodiff, on routines (the reference the rolled routines
// are compared with: tests/unit/test_roll.cpp): it takes a Program whose API
// routines call blocks (BlockForward and BlockBackward in train_step, the halves of the
// block's training body before and after its barrier; BlockInfer in forward and eval_metrics;
// BlockInit in init) and replaces each call by its body's nests for each instance (the
// backward in reverse instance order), over the instance's actuals: a whole buffer, a view of
// a stacked param or gradient, or, for a slot of a buffer of carried values (routine
// assembly's stack and pairs, autodiff's pairs of gradients), a buffer of the producing
// instance's own (named as lowering names it: x_3); every local a buffer of the instance's
// own, the same in every routine (an instance's forward values are one buffer in train_step
// and forward, as without rolling; a saved activation, which the training body's calls bind
// to a slot of a stack, too: passes/plan_blocks.cpp). Then the blocks, their body buffers, the
// buffers of carried values, the stacks of saved activations and the calls' scratch buffers
// are dropped (ir/remap.h). Guarantees: every routine's nests are those of the
// program autodiff makes without rolling, up to buffer names and the place of zero fills
// (each instance's gradients zeroed at the start of its backward: the same values), its
// params and param gradients stacked.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace cannl::ir {

std::vector<size_t> unroll_calls(Program& p, std::vector<Stmt>& nests);
std::vector<int> drop_blocks(Program& p, const std::vector<std::vector<Stmt>*>& lists);
void unroll_routines(Program& p);

}  // namespace cannl::ir
