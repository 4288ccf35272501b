// roll.h — repeat blocks as loops: instances that lower alike become one block body.
//
// Takes: lowering's result before anything else touched it (every instance of every repeat
// block lowered as its own tensors, Lowered::buffer_tensor and nest_tensor tagging them) and
// the Model (which tensors are which block's instances, the carried names).
// Guarantees: for each repeat block, its instances are compared in order with the first of
// their group (the representative) under a buffer bijection: equal loops, expressions node for
// node, calls field for field, where the representative's locals map to the instance's (of the
// same dims, role, ids and initialiser), its value carried in to the instance's, and every
// other buffer to itself. Consecutive matching instances make a group; a group of two or more
// becomes a Block (ir.h), called where its instances' nests were (Call::Kind::BlockForward;
// Binding per formal), its body the representative's nests over body buffers:
//   - each param of the block becomes one stacked buffer [count, dims...] (Buffer::stack),
//     and each instance's param a view of it (Buffer::view_of, view_offset: slice l at
//     l * size), keeping its name and checkpoint name (w_qkv_3, w_qkv.3); Program::params lists
//     the group's views group-major (w_qkv.0 .. w_qkv.11, then b_qkv.0 ...);
//   - the value carried in by the first instance and carried out by the last are bound whole
//     (Binding::first, last); the values carried between instances are the call's own;
//   - the buffers of the group's instances other than the views and the last carried values
//     are dropped (the body has one copy of each, named without the instance: qkv_mm).
// An instance keeps today's expansion when it differs from its group's first (its shapes, a
// dropout's random stream), or has nests that run only in training or only in inference, or
// updates state (batch_norm), and when a group would be of one instance. Nothing else changes:
// the unrolled program (lower/roll.h unroll_blocks) computes the same values as lowering without
// rolling, with the same nests.
#pragma once

#include "lower/lowered.h"
#include "spec/model.h"
#include "support/source.h"

namespace cannl {

void roll_blocks(Lowered& low, const Model& m, const SourceFile& file);

// Every block call expanded back into its instances' nests (ir/unroll_blocks.h), the phases,
// tags and Lowered::tensor_buf kept; the stacked params and their views stay: the reference
// the rolled program is compared with (tests/unit/test_roll.cpp).
void unroll_blocks(Lowered& low);

}  // namespace cannl
