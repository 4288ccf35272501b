// verify.h — the IR verifier: the invariants of ir.h that every stage must leave true.
//
// Takes: a Program after any IR stage (lowering's nests, before routines exist, through
// verify_lowered). Checks, reporting each failure as one line that names the routine, the nest
// (its place, `what` and spec line) and the problem:
//   - the program: its interface (inputs, params, outputs, metrics, loss) names buffers of the
//     right role; every dim is at least 1, a batch dim at max_batch; optimiser state names a
//     param; Program::grads maps buffers to gradient buffers of the same dims.
//   - every nest: buffer, loop and access indices in range, one index per buffer dim; each
//     expression has its op's arity (a Prim its row's), a Scalar names a built-in (n in a
//     routine on a batch; lr, step, schedule, rng_key) or one of the routine's definitions
//     (ScalarDef, each reading only those before it); loop sizes at least 1, a batch loop at max_batch, an at_pos loop of size 1 and
//     only in decode; random draws only in sequential nests; a call has no loops or
//     assignments, its buffers exist and hold its sizes (views included), gradients have the
//     dims of what they differentiate; several assignments only pointwise (fusion) or zero_first
//     sums (fused sibling sums); zero_first only on accumulations whose out accesses cover their buffers; Stmt::product and
//     scaled_sum consistent with the nest (mark_contractions.cpp); parallel, update_of and
//     grads_final in range. No routine writes an input; only decode writes a cache; forward,
//     eval_metrics and decode write no param or optimiser state.
//   - definedness: a nest reads (its loads, a call's operands, an accumulation without
//     zero_first its own cells) only buffers that an earlier nest of the routine (or an earlier
//     assignment of the nest) wrote, or that the routine has on entry: params, optimiser state
//     (not in forward, eval_metrics or decode), caches (in decode), the inputs (a routine on a
//     batch or at a position), and in train_update the gradients train_grads keeps for it; every buffer the routine hands out (Interface outputs,
//     values, kept) is written by its end. A nest that writes part of a buffer counts as
//     defining all of it: only whole buffers are tracked.
//   - memory, once planned: Routine::offsets has one entry per buffer, offsets only for buffers
//     the routine uses and that live in an arena; buffers sharing bytes never live at once
//     (from the first nest touching them to the last, to the end when handed out) but in place
//     (one's last nest the other's first, at the same offset), at max_batch and at a cap of 1 (a
//     batched buffer in the plan's scaled part, Routine::fixed_bytes); after plan_layout (Layout::align set) each
//     offset is aligned and its buffer inside arena_bytes; in each arena (and the optimiser-state
//     block) the own fields are aligned, inside the allocation and disjoint from each other and
//     from the work region, the params in the state prefix, their gradients in the grad block,
//     fields into the work region inside it; every buffer a routine uses but an input has an
//     address in its state's arena.
// Not checked: index ranges. Reads out of a buffer's range are zeros and writes out of it are
// skipped (convolution padding, ir.h), so an index past a dim is not an error; what ranges
// fusion, inlining or zero_first rely on, their passes check where they rely on them.
// Guarantees: nothing is changed. verify* raise an internal error (CANNL_BUG) "after STAGE:"
// with the problems found (the first 20); *_problems return them, one string each.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl::ir {

std::vector<std::string> verify_problems(const Program& p);
// Lowering's result: the forward nests, then the training step's updates, as one routine on a
// batch (no routine exists yet).
std::vector<std::string> lowered_problems(const Program& p, const std::vector<Stmt>& forward,
                                          const std::vector<Stmt>& train_updates);

void verify(const Program& p, const std::string& stage);
void verify_lowered(const Program& p, const std::vector<Stmt>& forward, const std::vector<Stmt>& train_updates,
                    const std::string& stage);

}  // namespace cannl::ir
