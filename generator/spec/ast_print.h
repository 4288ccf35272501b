// ast_print.h — text dumps of the front end: `cannl check --dump=tokens` and `--dump=ast`.
// The AST dump is an indented S-expression per statement, with each node's line:col.
#pragma once

#include <string>
#include <vector>

#include "spec/ast.h"
#include "spec/token.h"

namespace cannl {

std::string dump_tokens(const std::vector<Token>& tokens, const SourceFile& file);
std::string dump_ast(const Spec& spec, const SourceFile& file);
std::string print_shape_spec(const ShapeSpec& s);
std::string print_expr(const Expr& e);  // back to spec syntax, fully parenthesised

}  // namespace cannl
