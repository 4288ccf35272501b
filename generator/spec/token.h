// token.h — the tokens of the spec language (contract §2).
#pragma once

#include <string>
#include <string_view>

#include "support/source.h"

namespace cannl {

enum class Tok {
  Eof,
  Newline,    // a statement end (also produced for ';')
  Ident,
  Number,
  String,     // text holds the contents without quotes; range covers the quotes
  Error,      // a lexical error, already reported; the parser fails its statement silently
  // keywords
  KwModel, KwDim, KwInput, KwParam, KwOutput, KwMetric, KwMinimize, KwWith,
  // punctuation
  LParen, RParen, LBracket, RBracket, Comma, Colon, Assign,
  Plus, Minus, Star, StarDot, Slash, StarStar, Pipe, Arrow, DotDot,
};

struct Token {
  Tok kind = Tok::Eof;
  SourceRange range;
  std::string text;       // identifier name, number spelling, or string contents
  double number = 0;
  bool is_integer = false;
  bool is_semicolon = false;  // a Newline token that came from ';'
};

const char* tok_name(Tok t);  // for messages: "identifier", "'('", ...
std::string describe(const Token& t);  // "identifier 'w1'", "number 12", "end of line"

}  // namespace cannl
