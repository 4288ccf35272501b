// remap.h — renumbering buffers: nests rewritten through a buffer map, and the buffers of a
// Program dropped or reordered.
//
// Takes: a map from old buffer indices to new ones. Guarantees: remap_stmt and remap_expr
// return copies whose every buffer reference (loads, outs, a call's operands, bindings and
// reads/writes lists) went through the map; remap_buffers rewrites a whole Program in place
// (its buffers moved to their new indices, every index it holds renumbered: the interface,
// gradients, optimiser state, views, routines, memory plans, layout and blocks) and the extra
// nest lists given. A buffer mapped to -1 is dropped; referring to one afterwards is a bug.
#pragma once

#include <functional>
#include <vector>

#include "ir/ir.h"

namespace cannl::ir {

using BufferMap = std::function<int(int)>;

ExprP remap_expr(const ExprP& e, const BufferMap& f);
Stmt remap_stmt(const Stmt& s, const BufferMap& f);

// map[old] = new index in [0, kept count) or -1; the new indices are a permutation of the kept.
void remap_buffers(Program& p, const std::vector<int>& map, const std::vector<std::vector<Stmt>*>& lists = {});

}  // namespace cannl::ir
