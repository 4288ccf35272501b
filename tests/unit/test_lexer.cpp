// Lexer: token kinds, numbers, strings, comments, statement ends, line continuation,
// recovery and error locations (contract §2).
#include <catch2/catch.hpp>

#include <algorithm>

#include "spec/lexer.h"

using namespace cannl;

static std::vector<Tok> kinds(const std::string& text) {
  SourceFile f("t.cannl", text);
  DiagEngine d(f);
  std::vector<Tok> out;
  for (const Token& t : lex(f, d)) out.push_back(t.kind);
  return out;
}

// Lexes `text` and keeps the file, the diagnostics and the tokens together.
struct Lexed {
  SourceFile file;
  DiagEngine diags;
  std::vector<Token> toks;
  explicit Lexed(const std::string& text) : file("t.cannl", text), diags(file) {
    toks = lex(file, diags);
  }
  std::vector<Tok> kinds() const {
    std::vector<Tok> out;
    for (const Token& t : toks) out.push_back(t.kind);
    return out;
  }
  LineCol at(const Token& t) const { return file.line_col(t.range.begin); }
  LineCol err_at(size_t i) const { return file.line_col(diags.all().at(i).range.begin); }
  std::string err(size_t i) const { return diags.all().at(i).message; }
  std::string spelled(const Token& t) const { return std::string(file.slice(t.range)); }
};

TEST_CASE("lexer: operators and continuation", "[lexer]") {
  CHECK(kinds("a = b *. c ** 2") ==
        std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::StarDot, Tok::Ident,
                         Tok::StarStar, Tok::Number, Tok::Newline, Tok::Eof});
  // A trailing operator continues the statement on the next line.
  CHECK(kinds("a = b +\n c") == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::Plus,
                                                  Tok::Ident, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: every punctuation token", "[lexer]") {
  Lexed l("( ) [ ] , : = + - * *. / ** | -> ..");
  CHECK(l.kinds() == std::vector<Tok>{Tok::LParen, Tok::RParen, Tok::LBracket, Tok::RBracket,
                                      Tok::Comma, Tok::Colon, Tok::Assign, Tok::Plus, Tok::Minus,
                                      Tok::Star, Tok::StarDot, Tok::Slash, Tok::StarStar, Tok::Pipe,
                                      Tok::Arrow, Tok::DotDot, Tok::Newline, Tok::Eof});
  CHECK_FALSE(l.diags.has_errors());
  // Each token's range covers exactly its spelling.
  CHECK(l.spelled(l.toks[10]) == "*.");
  CHECK(l.spelled(l.toks[12]) == "**");
  CHECK(l.spelled(l.toks[14]) == "->");
  CHECK(l.spelled(l.toks[15]) == "..");
}

TEST_CASE("lexer: glued operators split greedily", "[lexer]") {
  // Longest match first: '***' is '**' '*', '-->' is '-' '->'.
  CHECK(kinds("a***b") == std::vector<Tok>{Tok::Ident, Tok::StarStar, Tok::Star, Tok::Ident,
                                           Tok::Newline, Tok::Eof});
  CHECK(kinds("a-->b") == std::vector<Tok>{Tok::Ident, Tok::Minus, Tok::Arrow, Tok::Ident,
                                           Tok::Newline, Tok::Eof});
  CHECK(kinds("a*.b") == std::vector<Tok>{Tok::Ident, Tok::StarDot, Tok::Ident, Tok::Newline,
                                          Tok::Eof});
}

TEST_CASE("lexer: every keyword, and words that only look like keywords", "[lexer]") {
  Lexed l("model dim input param output metric minimize with");
  CHECK(l.kinds() == std::vector<Tok>{Tok::KwModel, Tok::KwDim, Tok::KwInput, Tok::KwParam,
                                      Tok::KwOutput, Tok::KwMetric, Tok::KwMinimize, Tok::KwWith,
                                      Tok::Newline, Tok::Eof});
  // Keywords are case-sensitive and whole words.
  Lexed w("Model models dims _input param2 with_ _ x1_y");
  for (size_t i = 0; i < 8; ++i) {
    INFO(i);
    CHECK(w.toks[i].kind == Tok::Ident);
  }
  CHECK(w.toks[0].text == "Model");
  CHECK(w.toks[6].text == "_");
  CHECK(w.toks[7].text == "x1_y");
  CHECK_FALSE(w.diags.has_errors());
}

TEST_CASE("lexer: well-formed numbers", "[lexer][numbers]") {
  Lexed l("12 0.5 1e-3 2.5e+4 7E2 0");
  REQUIRE(l.toks.size() == 8);
  CHECK_FALSE(l.diags.has_errors());
  CHECK(l.toks[0].number == 12);
  CHECK(l.toks[0].is_integer);
  CHECK(l.toks[0].text == "12");
  CHECK(l.toks[1].number == 0.5);
  CHECK_FALSE(l.toks[1].is_integer);
  CHECK(l.toks[2].number == Approx(1e-3));
  CHECK_FALSE(l.toks[2].is_integer);
  CHECK(l.toks[2].text == "1e-3");
  CHECK(l.toks[3].number == Approx(25000));
  CHECK_FALSE(l.toks[3].is_integer);
  CHECK(l.toks[4].number == Approx(700));
  CHECK(l.toks[5].number == 0);
  CHECK(l.toks[5].is_integer);
}

TEST_CASE("lexer: a number followed by '..' keeps the dots", "[lexer][numbers]") {
  CHECK(kinds("[3, ..]") == std::vector<Tok>{Tok::LBracket, Tok::Number, Tok::Comma, Tok::DotDot,
                                             Tok::RBracket, Tok::Newline, Tok::Eof});
  CHECK(kinds("3..") == std::vector<Tok>{Tok::Number, Tok::DotDot, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: malformed numbers are one error each, at the number", "[lexer][numbers]") {
  const char* cases[] = {"1e", "1.2.3", "3x", "12abc", "1e5e", "2.5e+"};
  for (const char* bad : cases) {
    std::string text = std::string("a = ") + bad + " + b";
    Lexed l(text);
    INFO(text);
    REQUIRE(l.diags.error_count() == 1);
    CHECK(l.err(0).find("malformed number") != std::string::npos);
    CHECK(l.err(0).find(bad) != std::string::npos);
    CHECK(l.err_at(0).line == 1);
    CHECK(l.err_at(0).col == 5);
    // The range covers the whole malformed spelling.
    CHECK(l.file.slice(l.diags.all()[0].range) == bad);
    // One Error token (no number, so no second report); lexing goes on.
    CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Error, Tok::Plus,
                                        Tok::Ident, Tok::Newline, Tok::Eof});
  }
}

TEST_CASE("lexer: malformed number on a later line has its line and column", "[lexer][numbers]") {
  Lexed l("model m\nx = 1 +\n    1e\n");
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.err_at(0).line == 3);
  CHECK(l.err_at(0).col == 5);
}

TEST_CASE("lexer: integers that are too large are reported", "[lexer][numbers]") {
  Lexed l("dim d = 12345678901234567890");
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.err(0).find("too large") != std::string::npos);
  CHECK(l.err_at(0).col == 9);
  Lexed r("x = 1e999");
  REQUIRE(r.diags.error_count() == 1);
  CHECK(r.err(0).find("out of range") != std::string::npos);
  CHECK(l.toks[3].kind == Tok::Error);
  CHECK(r.toks[2].kind == Tok::Error);
}

TEST_CASE("lexer: strings keep their contents and cover the quotes", "[lexer][strings]") {
  Lexed l("y = einsum(\"b|i->o => b|o\", x)");
  REQUIRE(l.toks.size() >= 5);
  const Token& s = l.toks[4];
  CHECK(s.kind == Tok::String);
  CHECK(s.text == "b|i->o => b|o");
  CHECK(l.spelled(s) == "\"b|i->o => b|o\"");
  CHECK(l.at(s).col == 12);
  CHECK_FALSE(l.diags.has_errors());
  Lexed e("x = \"\"");
  CHECK(e.toks[2].kind == Tok::String);
  CHECK(e.toks[2].text.empty());
  // '#' inside a string is not a comment.
  Lexed h("x = \"a # b\" + 1");
  CHECK(h.toks[2].text == "a # b");
  CHECK(h.toks[3].kind == Tok::Plus);
}

TEST_CASE("lexer: an unterminated string is reported at its quote -- the next line lexes",
          "[lexer][strings]") {
  Lexed l("y = sum(x, \"b|o => \nz = 1\n");
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.err(0).find("unterminated string") != std::string::npos);
  CHECK(l.err_at(0).line == 1);
  CHECK(l.err_at(0).col == 12);
  // The bad string is an Error token; z = 1 on line 2 is lexed as usual.
  bool saw_error = false, saw_z = false;
  for (const Token& t : l.toks) {
    if (t.kind == Tok::Error) saw_error = true;
    if (t.kind == Tok::Ident && t.text == "z") {
      saw_z = true;
      CHECK(l.at(t).line == 2);
    }
  }
  CHECK(saw_error);
  CHECK(saw_z);
}

TEST_CASE("lexer: comments run to the end of the line", "[lexer][comments]") {
  CHECK(kinds("# only a comment") == std::vector<Tok>{Tok::Eof});
  CHECK(kinds("a = b # c = d\ne = f") ==
        std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::Newline, Tok::Ident, Tok::Assign,
                         Tok::Ident, Tok::Newline, Tok::Eof});
  // A comment after a trailing operator does not end the statement.
  CHECK(kinds("a = b + # more\n c") == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident,
                                                        Tok::Plus, Tok::Ident, Tok::Newline,
                                                        Tok::Eof});
}

TEST_CASE("lexer: a semicolon ends a statement and is marked as a semicolon", "[lexer][newline]") {
  Lexed l("a = 1; b = 2");
  REQUIRE(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline,
                                        Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline,
                                        Tok::Eof});
  CHECK(l.toks[3].is_semicolon);
  CHECK_FALSE(l.toks[7].is_semicolon);
  CHECK(describe(l.toks[3]) == "';'");
  CHECK(describe(l.toks[7]) == "end of line");
  // Never two statement ends in a row, and none at the start.
  CHECK(kinds(";;a;;\n\n;b") == std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident,
                                                 Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: blank lines and CRLF produce one statement end", "[lexer][newline]") {
  CHECK(kinds("a\n\n\n   \n\tb\n") ==
        std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident, Tok::Newline, Tok::Eof});
  Lexed l("a = 1\r\nb = 2\r\n");
  CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline,
                                      Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline,
                                      Tok::Eof});
  CHECK_FALSE(l.diags.has_errors());
  CHECK(l.at(l.toks[4]).line == 2);
  CHECK(l.at(l.toks[4]).col == 1);
}

TEST_CASE("lexer: no statement end inside parentheses or brackets", "[lexer][newline]") {
  CHECK(kinds("y = f(a\n, b\n)") ==
        std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen, Tok::Ident, Tok::Comma,
                         Tok::Ident, Tok::RParen, Tok::Newline, Tok::Eof});
  CHECK(kinds("input x : [3\n, 4\n]") ==
        std::vector<Tok>{Tok::KwInput, Tok::Ident, Tok::Colon, Tok::LBracket, Tok::Number,
                         Tok::Comma, Tok::Number, Tok::RBracket, Tok::Newline, Tok::Eof});
  // Nested brackets: only the outermost close re-enables statement ends.
  CHECK(kinds("y = f(g(a\n)\n)\nz") ==
        std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen, Tok::Ident,
                         Tok::LParen, Tok::Ident, Tok::RParen, Tok::RParen, Tok::Newline,
                         Tok::Ident, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: a trailing binary operator, ',', '=', '->' or '|' continues the line",
          "[lexer][newline]") {
  const char* ops[] = {"+", "-", "*", "*.", "/", "**", ",", "=", "->", "|"};
  for (const char* op : ops) {
    std::string text = std::string("a ") + op + "\n b";
    INFO(text);
    std::vector<Tok> k = kinds(text);
    REQUIRE(k.size() == 5);
    CHECK(k[0] == Tok::Ident);
    CHECK(k[2] == Tok::Ident);
    CHECK(k[3] == Tok::Newline);
    CHECK(k[4] == Tok::Eof);
  }
  // Other tokens at the end of a line do end the statement.
  for (const char* end : {")", "]", ":", ".."}) {
    std::string text = std::string("a ") + end + "\n b";
    INFO(text);
    std::vector<Tok> k = kinds(text);
    REQUIRE(k.size() == 6);
    CHECK(k[2] == Tok::Newline);
  }
  // A leading operator on the next line does not join the lines.
  CHECK(kinds("a = b\n+ c")[3] == Tok::Newline);
}

TEST_CASE("lexer: an unclosed bracket ends at a line that starts with a keyword",
          "[lexer][newline][recovery]") {
  Lexed l("y = relu(x\noutput y\n");
  CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen,
                                      Tok::Ident, Tok::Newline, Tok::KwOutput, Tok::Ident,
                                      Tok::Newline, Tok::Eof});
  // The statement end is at the first line's newline.
  CHECK(l.at(l.toks[5]).line == 1);
  CHECK(l.at(l.toks[5]).col == 11);
  // Depth is reset: the next statement's newline is not swallowed.
  Lexed b("input x : [3\nparam w\nz = 1");
  std::vector<Tok> k = b.kinds();
  CHECK(std::count(k.begin(), k.end(), Tok::Newline) == 3);
  // Indented keyword lines count too, but 'with' does not start a statement.
  Lexed w("minimize loss with sgd(lr = 0.1,\n    with)");
  std::vector<Tok> kw = w.kinds();
  CHECK(std::count(kw.begin(), kw.end(), Tok::Newline) == 1);
}

// Regression: the trailing ',' used to swallow the statement end before a keyword line.
TEST_CASE("lexer: an unclosed call with a trailing ',' still ends before a keyword line",
          "[lexer][newline][recovery]") {
  Lexed i("y = f(a,\n   dim d = 3");
  std::vector<Tok> ki = i.kinds();
  REQUIRE(ki.size() > 7);
  CHECK(ki[5] == Tok::Comma);
  CHECK(ki[6] == Tok::Newline);
  CHECK(ki[7] == Tok::KwDim);
}

TEST_CASE("lexer: a trailing operator before a keyword line ends the statement",
          "[lexer][newline][recovery]") {
  Lexed l("y = a +\noutput y");
  CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::Plus,
                                      Tok::Newline, Tok::KwOutput, Tok::Ident, Tok::Newline,
                                      Tok::Eof});
  CHECK(l.at(l.toks[4]).line == 1);
}

TEST_CASE("lexer: an unclosed bracket before a non-keyword line keeps going", "[lexer][newline]") {
  // Not a keyword: the bracket is still open and the lines join.
  std::vector<Tok> k = kinds("y = f(a\nb = 2");
  CHECK(k == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen, Tok::Ident,
                              Tok::Ident, Tok::Assign, Tok::Number, Tok::Eof});
}

TEST_CASE("lexer: a semicolon closes any open bracket", "[lexer][newline]") {
  std::vector<Tok> k = kinds("y = f(a; z = 1\nw = 2");
  CHECK(k == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen, Tok::Ident,
                              Tok::Newline, Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline,
                              Tok::Ident, Tok::Assign, Tok::Number, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: PyTorch's attributes and methods are one error each, with cannl's spelling", "[lexer][errors]") {
  Lexed l("y = w.T * x\nz = x.mean(dim = 1) + 1\nq = h.size + 0.5");
  REQUIRE(l.diags.error_count() == 3);
  CHECK(l.err(0).find("'.T' is not cannl: there is no transpose") == 0);
  CHECK(l.err(0).find("einsum(\"i -> o => o -> i\", w)") != std::string::npos);
  CHECK(l.err_at(0).col == 6);
  CHECK(l.err(1) == "'.mean()' is not cannl: there are no methods; call the built-in on the tensor, e.g. mean(x)");
  CHECK(l.err(2) == "'.size' is not cannl: tensors have no attributes");
}

TEST_CASE("lexer: a bad character is reported at itself and lexing goes on", "[lexer][errors]") {
  Lexed l("x = a $ b\ny = c @ d");
  REQUIRE(l.diags.error_count() == 2);
  CHECK(l.err(0) == "unexpected character '$'");
  CHECK(l.err_at(0).line == 1);
  CHECK(l.err_at(0).col == 7);
  CHECK(l.err(1).rfind("unexpected character '@': the matrix product is '*' in cannl", 0) == 0);
  CHECK(l.err_at(1).line == 2);
  CHECK(l.err_at(1).col == 7);
  CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::Error, Tok::Ident,
                                      Tok::Newline, Tok::Ident, Tok::Assign, Tok::Ident,
                                      Tok::Error, Tok::Ident, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: control bytes are shown escaped", "[lexer][errors]") {
  Lexed l(std::string("x = \x01"));
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.err(0) == "unexpected character '\\x01'");
  CHECK(l.err_at(0).col == 5);
}

TEST_CASE("lexer: bytes that are not UTF-8 and NUL are one error each, shown escaped",
          "[lexer][errors][utf8]") {
  Lexed l(std::string("x = \xff $ \0 y", 11));
  REQUIRE(l.diags.error_count() == 3);
  CHECK(l.err(0) == "unexpected character '\\xff'");
  CHECK(l.err_at(0).col == 5);
  CHECK(l.err(1) == "unexpected character '$'");
  CHECK(l.err_at(1).col == 7);
  CHECK(l.err(2) == "unexpected character '\\x00'");
  CHECK(l.err_at(2).col == 9);
  CHECK(l.kinds() == std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Error, Tok::Error, Tok::Error,
                                      Tok::Ident, Tok::Newline, Tok::Eof});
  // A stray continuation byte, a truncated sequence, an overlong form and a surrogate are no
  // characters: every byte is its own error and its own column.
  Lexed m("a \x80\x80 \xc3 \xc0\xaf \xed\xa0\x80 $");
  REQUIRE(m.diags.error_count() == 9);
  CHECK(m.err(0) == "unexpected character '\\x80'");
  CHECK(m.err_at(1).col == 4);
  CHECK(m.err(2) == "unexpected character '\\xc3'");
  CHECK(m.err_at(2).col == 6);
  CHECK(m.err(3) == "unexpected character '\\xc0'");
  CHECK(m.err(4) == "unexpected character '\\xaf'");
  CHECK(m.err(5) == "unexpected character '\\xed'");
  CHECK(m.err(8) == "unexpected character '$'");
  CHECK(m.err_at(8).col == 15);
  // A C1 control character is one (well-formed) character, shown as its code point.
  Lexed c("x = \xc2\x85");
  REQUIRE(c.diags.error_count() == 1);
  CHECK(c.err(0) == "unexpected character '\\u0085'");
}

TEST_CASE("lexer: a leading byte order mark is skipped", "[lexer][utf8]") {
  Lexed l("\xef\xbb\xbfmodel m\nx = $");
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.toks[0].kind == Tok::KwModel);
  CHECK(l.at(l.toks[0]).line == 1);
  CHECK(l.at(l.toks[0]).col == 1);
  CHECK(l.spelled(l.toks[1]) == "m");
  CHECK(l.at(l.toks[1]).col == 7);
  CHECK(l.err(0) == "unexpected character '$'");
  CHECK(l.err_at(0).col == 5);
  // Only at the very start: elsewhere U+FEFF is an error, shown escaped (it is invisible).
  Lexed m("x = \xef\xbb\xbf");
  REQUIRE(m.diags.error_count() == 1);
  CHECK(m.err(0) == "unexpected character '\\ufeff'");
  CHECK(m.err_at(0).col == 5);
  Lexed b("\xef\xbb\xbf");
  CHECK(b.diags.error_count() == 0);
  CHECK(b.kinds() == std::vector<Tok>{Tok::Eof});
}

TEST_CASE("lexer: a lone '.' and '...' outside einsum are errors", "[lexer][errors]") {
  Lexed l("x = a . b");
  REQUIRE(l.diags.error_count() == 1);
  CHECK(l.err(0) == "unexpected character '.'");
  CHECK(l.err_at(0).col == 7);
  Lexed d("input x : [...]");
  REQUIRE(d.diags.error_count() == 1);
  CHECK(d.err(0).find("'...'") != std::string::npos);
  CHECK(d.err_at(0).col == 12);
  CHECK(d.file.slice(d.diags.all()[0].range) == "...");
}

TEST_CASE("lexer: columns count UTF-8 code points, not bytes", "[lexer][utf8]") {
  // 'é' is two bytes and 'λ' two bytes; each is one column and one error.
  Lexed l("x = \xc3\xa9 + \xce\xbb $");
  REQUIRE(l.diags.error_count() == 3);
  CHECK(l.err(0) == "unexpected character '\xc3\xa9'");
  CHECK(l.err_at(0).col == 5);
  CHECK(l.err(1) == "unexpected character '\xce\xbb'");
  CHECK(l.err_at(1).col == 9);
  CHECK(l.err(2) == "unexpected character '$'");
  CHECK(l.err_at(2).col == 11);
  // A multi-byte character in a comment or string shifts later columns by one each.
  Lexed c("y = \"\xc3\xa9\xc3\xa9\" $");
  REQUIRE(c.diags.error_count() == 1);
  CHECK(c.err_at(0).col == 10);
}

TEST_CASE("lexer: token positions on several lines", "[lexer]") {
  Lexed l("model m\n  dim hidden = 512\nparam w : [hidden]");
  CHECK(l.at(l.toks[0]).line == 1);
  CHECK(l.at(l.toks[3]).line == 2);
  CHECK(l.at(l.toks[3]).col == 3);
  CHECK(l.at(l.toks[4]).col == 7);
  CHECK(l.toks[4].text == "hidden");
  CHECK(l.toks[6].number == 512);
  CHECK(l.at(l.toks[8]).line == 3);
}

TEST_CASE("lexer: the token stream always ends in a statement end and Eof", "[lexer]") {
  CHECK(kinds("") == std::vector<Tok>{Tok::Eof});
  CHECK(kinds("\n\n") == std::vector<Tok>{Tok::Eof});
  CHECK(kinds("a") == std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Eof});
  CHECK(kinds("a\n") == std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Eof});
}

TEST_CASE("lexer: describe and tok_name for messages", "[lexer]") {
  Lexed l("w1 12 \"s\"");
  CHECK(describe(l.toks[0]) == "identifier 'w1'");
  CHECK(describe(l.toks[1]) == "number 12");
  CHECK(describe(l.toks[2]) == "a string");
  CHECK(std::string(tok_name(Tok::Arrow)) == "'->'");
  CHECK(std::string(tok_name(Tok::KwMinimize)) == "'minimize'");
  CHECK(std::string(tok_name(Tok::Eof)) == "end of file");
}
