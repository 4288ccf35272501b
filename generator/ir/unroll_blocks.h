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
#pragma once

#include <vector>

#include "ir/ir.h"

namespace cannl::ir {

std::vector<size_t> unroll_calls(Program& p, std::vector<Stmt>& nests);
std::vector<int> drop_blocks(Program& p, const std::vector<std::vector<Stmt>*>& lists);

}  // namespace cannl::ir
