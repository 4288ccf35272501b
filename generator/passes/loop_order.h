// loop_order.h — choose the loop order of a nest and the loop run in parallel.
//
// Takes: any nest. Guarantees: the same nest with its loops permuted (indices rewritten):
//   outermost, a loop whose variable alone indexes some axis of the written buffer, so
//     that different iterations of it write different elements: it is marked parallel
//     when the nest is large enough and not sequential (results do not depend on the
//     thread count: each element is accumulated by one thread, in loop order);
//   innermost, the loop with the most unit-stride accesses (the write counting double; on
//     a tie the reduction loop, which the C emitter turns into a vectorised dot product);
//   in between, the other written-index loops, then the remaining reduction loops.
#pragma once

#include "ir/ir.h"

namespace cannl {

void order_loops(const ir::Program& p, ir::Stmt& s);

}  // namespace cannl
