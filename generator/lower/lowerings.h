// lowerings.h — the lowering of each built-in that is not pointwise, named by its row of the
// op table (OpInfo::lower_call, ops/op_table.cpp).
//
// Each takes the Lowerer's public face (lower_context.h), the bound call and the buffer `r`
// that must hold the call's value (the spec tensor's, or a temporary <tensor>_<suffix>,
// OpInfo::temp_suffix), and appends the nests that store it there: nests of primitives, so
// that autodiff needs one rule per primitive only, or an opaque kernel call (ir::Call) whose
// backward call autodiff knows. A pointwise built-in needs none: its row's OpInfo::lower
// gives its value at a point.
#pragma once

#include "ops/op_table.h"

namespace cannl {

class LowerContext;

// reductions.cpp: sum, mean and max over all axes (a scalar) or as a one-operand einsum spec
// says; einsum with one or two operands (an operand read through a window, `2*h+i-1`, is
// gathered first, as conv2d's); log(sum(exp(x - m))) + m.
void lower_sum(LowerContext& c, const BoundCall& call, int r);
void lower_mean(LowerContext& c, const BoundCall& call, int r);
void lower_max(LowerContext& c, const BoundCall& call, int r);
void lower_einsum(LowerContext& c, const BoundCall& call, int r);
void lower_logsumexp(LowerContext& c, const BoundCall& call, int r);

// norms.cpp: softmax and log_softmax over the output axes (or a spec's); layer_norm and
// rms_norm; batch_norm with its training-step and running statistics.
void lower_softmax(LowerContext& c, const BoundCall& call, int r);
void lower_log_softmax(LowerContext& c, const BoundCall& call, int r);
void lower_layer_norm(LowerContext& c, const BoundCall& call, int r);
void lower_batch_norm(LowerContext& c, const BoundCall& call, int r);
void lower_rms_norm(LowerContext& c, const BoundCall& call, int r);

// rotary.cpp: rope, a rotation of pairs of the last output axis by angles of the position.
void lower_rope(LowerContext& c, const BoundCall& call, int r);

// losses.cpp: cross_entropy and nll_loss (per example, or reduced), accuracy.
void lower_cross_entropy(LowerContext& c, const BoundCall& call, int r);
void lower_nll_loss(LowerContext& c, const BoundCall& call, int r);
void lower_accuracy(LowerContext& c, const BoundCall& call, int r);

// kernel_calls.cpp: attention and embedding, calls of the runtime's kernels.
void lower_attention(LowerContext& c, const BoundCall& call, int r);
void lower_embedding(LowerContext& c, const BoundCall& call, int r);

// images.cpp: conv2d (an im2col gather and a matrix product), max and average pooling.
void lower_conv2d(LowerContext& c, const BoundCall& call, int r);
void lower_max_pool2d(LowerContext& c, const BoundCall& call, int r);
void lower_avg_pool2d(LowerContext& c, const BoundCall& call, int r);

// copies.cpp: concat (each operand written at its offset), dropout (masked in the training
// step, the identity elsewhere).
void lower_concat(LowerContext& c, const BoundCall& call, int r);
void lower_dropout(LowerContext& c, const BoundCall& call, int r);

}  // namespace cannl
