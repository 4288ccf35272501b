// parser.h — recursive-descent parser for spec files (contract §2–§9).
//
// Takes: the token vector from lex(). Guarantees: a Spec holding every statement that parsed;
// each syntax error reported once with its location, after which the parser skips to the
// end of that statement and goes on, so independent errors on other lines are reported too.
// Einsum strings of einsum/sum/mean/max are parsed and validated here.
//
// Precedence, loosest first:  + -  (left)  <  * *. /  (left)  <  unary -  <  **  (right)
#pragma once

#include <vector>

#include "spec/ast.h"
#include "spec/token.h"
#include "support/diagnostic.h"

namespace cannl {

Spec parse(const std::vector<Token>& tokens, DiagEngine& diags);

}  // namespace cannl
