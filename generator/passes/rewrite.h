// rewrite.h — queries and rewriting helpers shared by the passes (not a pass).
//
// Takes nests and expressions of the loop IR; nothing here changes a Program in place.
#pragma once

#include <functional>
#include <set>

#include "ir/ir.h"

namespace cannl::passes {

// `e` with `args` as its operands, built with the simplifying constructors of ir.h.
ir::ExprP rebuild(const ir::Expr& e, std::vector<ir::ExprP> args);
// Bottom-up rewrite: `leaf` is asked for every Load and Index (a replacement, or null to keep
// it); every other node is rebuilt from its rewritten operands (sharing unchanged ones).
ir::ExprP rewrite(const ir::ExprP& e, const std::function<ir::ExprP(const ir::Expr&)>& leaf);

// Constant folding and algebraic simplification (passes/simplify.cpp lists the rules).
ir::ExprP simplify_expr(const ir::ExprP& e);

// a with each loop variable i replaced by sigma[i] (affine in another nest's loops).
ir::Affine compose(const ir::Affine& a, const std::vector<ir::Affine>& sigma);
// The values `a` takes over the nest's loops: [lo, hi].
void affine_range(const ir::Affine& a, const std::vector<ir::Iter>& iters, long& lo, long& hi);
// Every index of `a` stays inside its buffer over the loops of `s`.
bool always_in_range(const ir::Program& p, const ir::Stmt& s, const ir::Access& a);

// Each axis indexed by one loop variable (coefficient 1, no offset), all different.
bool injective(const ir::Access& a);
// The nest writes each of its points to its own cell: each assignment's out is injective and
// names every loop.
bool pointwise(const ir::Stmt& s);
// Like pointwise, and the loops run over the whole buffer (bounds equal to the axis sizes).
bool covers_buffer(const ir::Program& p, const ir::Stmt& s, const ir::Access& a);
// A contraction nest (the fast GEMM emitter's pattern): += of a product of two loads, possibly
// times a constant, every index a single loop variable.
bool is_contraction(const ir::Stmt& s);

// Buffers a nest reads (loads; a non-Set accumulation also reads its out) and writes.
std::set<int> reads(const ir::Stmt& s);
std::set<int> writes(const ir::Stmt& s);
// Nests a and b may run in either order: neither writes what the other reads or writes.
bool independent(const ir::Stmt& a, const ir::Stmt& b);

// The buffer holds run-time values only for the routine's computation (no API promise):
// computed tensors, temporaries and gradients; not stacked storage (a stacked param's
// gradient, in the grad block) nor a view into it, nor a block body's formal (bound to a
// buffer of the caller's by each call).
bool in_arena(const ir::Buffer& b);

// Arithmetic cost of one evaluation (transcendental functions and divisions count 4; an
// expression without loads, the same at every point, counts 0).
double cost(const ir::Expr& e);
// Every point of the nest, and the count of its loads of `buf`.
int count_loads(const ir::Stmt& s, int buf);

}  // namespace cannl::passes
