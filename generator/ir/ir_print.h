// ir_print.h — the loop IR as text (`cannl gen --dump=ir`).
//
//   routine train_step
//     work region: 3203200 bytes (batch <= 256)
//       @ +0          h1_mm, h1_mm_grad
//       @ +524288     h1
//     # line 14: h1 = relu(w1 * x + b1)
//     for b < n, o < 512, i < 784:  h1_mm[b, o] += w1[o, i] * x[b, i]
//
// The work region and its byte offsets are printed only for a routine that memory planning
// (passes/plan_memory.cpp) gave one: the buffers at one offset share its bytes.
#pragma once

#include <string>

#include "ir/ir.h"

namespace cannl::ir {

std::string print_affine(const Affine& a, const std::vector<Iter>& iters);
std::string print_expr(const Expr& e, const Program& p, const std::vector<Iter>& iters);
std::string print_stmt(const Stmt& s, const Program& p);
std::string print_buffers(const Program& p);
// A routine's memory plan ("" when it has none): its size and the buffers at each offset.
std::string print_plan(const Routine& r, const Program& p);
std::string print_nests(const Program& p, const std::vector<Stmt>& stmts);  // "# line" comments, nests
// The memory layout ("" before passes/plan_layout.cpp): each state's size and fields.
std::string print_layout(const Program& p);
std::string print_program(const Program& p);
// Each rolled block (lower/roll.h): its formals with their bindings in the first call among
// `calls` that calls it, its locals and its body's nests ("" when the program has none).
std::string print_blocks(const Program& p, const std::vector<Stmt>& calls);
// After lowering: the buffers and the forward nests of every spec tensor (no routines yet),
// then the blocks.
std::string print_lowered(const Program& p, const std::vector<Stmt>& forward);

}  // namespace cannl::ir
