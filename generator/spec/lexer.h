// lexer.h — turns a spec file into tokens.
//
// Takes: a SourceFile. Guarantees: a token vector ending in Eof; Newline tokens only where a
// statement may end (none inside ( ) or [ ], none after a trailing binary operator, ',', '=',
// '->' or '|', and never two in a row); every lexical error reported with its location, the
// bad character skipped so lexing goes on.
#pragma once

#include <vector>

#include "spec/token.h"
#include "support/diagnostic.h"

namespace cannl {

std::vector<Token> lex(const SourceFile& file, DiagEngine& diags);

// After a token of this kind a newline does not end the statement (contract §2: a trailing
// binary operator or ','; also '=', '->' and '|').
bool continues_line(Tok t);

}  // namespace cannl
