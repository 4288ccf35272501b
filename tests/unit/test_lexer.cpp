#include <catch2/catch.hpp>

#include "spec/lexer.h"

using namespace cannl;

static std::vector<Tok> kinds(const std::string& text) {
  SourceFile f("t.cannl", text);
  DiagEngine d(f);
  std::vector<Tok> out;
  for (const Token& t : lex(f, d)) out.push_back(t.kind);
  return out;
}

TEST_CASE("lexer: operators and continuation", "[lexer]") {
  CHECK(kinds("a = b *. c ** 2") ==
        std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::StarDot, Tok::Ident,
                         Tok::StarStar, Tok::Number, Tok::Newline, Tok::Eof});
  // A trailing operator continues the statement on the next line.
  CHECK(kinds("a = b +\n c") == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::Plus,
                                                  Tok::Ident, Tok::Newline, Tok::Eof});
}
