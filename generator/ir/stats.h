// stats.h — what a routine costs: buffers, bytes of storage, loop nests, arithmetic and traffic.
//
// Takes a Program and one of its routines; gives counts that `cannl gen --stats` prints and the
// model card records. Nothing here changes the program. The arena of a routine is the storage of
// the buffers it uses that live only for the model's computations (computed tensors,
// temporaries, gradients); inputs, params and optimiser state persist across calls and are
// counted apart. Without memory planning the arena is the sum of those buffers; a planner that
// overlaps buffers records its size in `Routine::arena_bytes` (when > 0 it is used here).
#pragma once

#include "ir/ir.h"

namespace cannl::ir {

struct RoutineStats {
  int buffers = 0;          // arena buffers the routine touches
  long arena_bytes = 0;     // bytes of the routine's arena
  long persistent_bytes = 0;  // inputs, params and optimiser state it touches
  int loop_nests = 0;
  double flops = 0;         // arithmetic operations per call (one per +, *, exp, ...; += counts)
  double bytes_moved = 0;   // per call: each access's footprint (distinct cells), read or written
};

// Costs of one call of `r` on a batch of `batch` examples, elements of `elem_bytes` bytes.
RoutineStats routine_stats(const Program& p, const Routine& r, long batch, int elem_bytes);

}  // namespace cannl::ir
