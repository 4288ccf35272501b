// ir_print.h — the loop IR as text (`cannl gen --dump=ir`).
//
//   routine train_step
//     # line 14: h1 = relu(w1 * x + b1)
//     for b < n, o < 512, i < 784:  h1_mm[b, o] += w1[o, i] * x[b, i]
#pragma once

#include <string>

#include "ir/ir.h"

namespace cannl::ir {

std::string print_affine(const Affine& a, const std::vector<Iter>& iters);
std::string print_expr(const Expr& e, const Program& p, const std::vector<Iter>& iters);
std::string print_stmt(const Stmt& s, const Program& p);
std::string print_buffers(const Program& p);
std::string print_program(const Program& p);

}  // namespace cannl::ir
