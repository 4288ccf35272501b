// Diagnostic rendering (contract §11): `file:L:C: error: msg`, the source line in a gutter,
// the caret under the exact columns, notes, the error limit, and ordering.
#include <catch2/catch.hpp>

#include <sstream>

#include "driver/frontend.h"
#include "support/diagnostic.h"
#include "support/utf8.h"

using namespace cannl;

namespace {

// The byte range of the n-th occurrence (0-based) of `what` in the file.
SourceRange find(const SourceFile& f, const std::string& what, int n = 0) {
  size_t p = f.text().find(what);
  while (n-- > 0 && p != std::string::npos) p = f.text().find(what, p + 1);
  REQUIRE(p != std::string::npos);
  return {static_cast<uint32_t>(p), static_cast<uint32_t>(p + what.size())};
}

std::string render_all(const DiagEngine& d) {
  std::ostringstream os;
  d.render(os);
  return os.str();
}

}  // namespace

TEST_CASE("diagnostic: file:line:col, the source line in a gutter, and a caret", "[diag]") {
  SourceFile f("specs/m.cannl", "model m\nh = W * x\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "W"), "unknown tensor 'W'");
  CHECK(d.render_one(e) ==
        "specs/m.cannl:2:5: error: unknown tensor 'W'\n"
        "    2 | h = W * x\n"
        "      |     ^\n");
}

TEST_CASE("diagnostic: '~' covers the rest of the range", "[diag]") {
  SourceFile f("m.cannl", "model m\ny = relu(x) + bias_term\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "bias_term"), "unknown tensor 'bias_term'");
  CHECK(d.render_one(e) ==
        "m.cannl:2:15: error: unknown tensor 'bias_term'\n"
        "    2 | y = relu(x) + bias_term\n"
        "      |               ^~~~~~~~~\n");
  // An empty range still gets one caret.
  const Diagnostic& z = d.error({8, 8}, "here");
  CHECK(d.render_one(z) ==
        "m.cannl:2:1: error: here\n"
        "    2 | y = relu(x) + bias_term\n"
        "      | ^\n");
}

TEST_CASE("diagnostic: a range running past its line is underlined to the line's end", "[diag]") {
  SourceFile f("m.cannl", "y = f(a,\n  b)\n");
  DiagEngine d(f);
  SourceRange r{static_cast<uint32_t>(f.text().find("f(")), static_cast<uint32_t>(f.text().find(")") + 1)};
  const Diagnostic& e = d.error(r, "bad call");
  std::string out = d.render_one(e);
  CHECK(out.find("m.cannl:1:5: error: bad call\n    1 | y = f(a,\n      |     ^~~~") == 0);
  // Nothing from the second line is shown.
  CHECK(out.find("  b)") == std::string::npos);
}

TEST_CASE("diagnostic: tabs before the caret are kept so it lines up", "[diag]") {
  SourceFile f("m.cannl", "model m\n\th =\tx $ 1\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "$"), "unexpected character '$'");
  CHECK(d.render_one(e) ==
        "m.cannl:2:8: error: unexpected character '$'\n"
        "    2 | \th =\tx $ 1\n"
        "      | \t   \t  ^\n");
}

TEST_CASE("diagnostic: columns and carets count UTF-8 characters", "[diag]") {
  SourceFile f("m.cannl", "# caf\xc3\xa9\n\xc3\xa9\xc3\xa9 = $\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "$"), "unexpected character '$'");
  CHECK(d.render_one(e) ==
        "m.cannl:2:6: error: unexpected character '$'\n"
        "    2 | \xc3\xa9\xc3\xa9 = $\n"
        "      |      ^\n");
  // A range over a multi-byte character is one column wide.
  const Diagnostic& u = d.error({8, 10}, "unexpected character");
  CHECK(d.render_one(u).find("      | ^\n") != std::string::npos);
}

// Valid UTF-8 with no control character but newline and tab.
static bool printable_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    auto c = static_cast<unsigned char>(s[i]);
    if (n == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)) return false;
    if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return false;
    i += n;
  }
  return true;
}

TEST_CASE("diagnostic: bad bytes and control characters are shown escaped, carets under them",
          "[diag][utf8]") {
  SourceFile f("m.cannl", std::string("model m\ny = \xff + \x01\x1b \0 $\n", 23));
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "$"), "unexpected character '$'");
  CHECK(d.render_one(e) ==
        "m.cannl:2:14: error: unexpected character '$'\n"
        "    2 | y = \\xff + \\x01\\x1b \\x00 $\n"
        "      |                          ^\n");
  // A range starting on an escape underlines all of it; the raw byte in the message is escaped.
  const Diagnostic& b = d.error(find(f, "\xff"), "unexpected character '\xff'");
  CHECK(d.render_one(b) ==
        "m.cannl:2:5: error: unexpected character '\\xff'\n"
        "    2 | y = \\xff + \\x01\\x1b \\x00 $\n"
        "      |     ^~~~\n");
  // A range over two escapes covers both.
  SourceRange two = find(f, "\x01\x1b");
  const Diagnostic& c = d.error(two, "two control characters");
  CHECK(d.render_one(c).find("\n      |            ^~~~~~~~\n") != std::string::npos);
  CHECK(printable_utf8(render_all(d)));
}

TEST_CASE("diagnostic: a spec of bad bytes renders as printable UTF-8", "[diag][utf8][frontend]") {
  std::string text = "model t\ninput x : [3]\ny = x \xfe\xff\x80\x07\x7f\xc2\x85\xef\xbb\xbf\xed\xa0\x80 ";
  text += std::string("\0\r\x01", 3) + " + x\n";
  auto fe = run_frontend("t\xff.cannl", text);
  REQUIRE_FALSE(fe->ok());
  std::string out = render_all(fe->diags);
  CHECK(printable_utf8(out));
  CHECK(out.find("t\\xff.cannl:3:7: error: unexpected character '\\xfe'") == 0);
  CHECK(out.find("    3 | y = x \\xfe\\xff\\x80\\x07\\x7f\\u0085\\ufeff\\xed\\xa0\\x80 \\x00\\x0d\\x01 + x\n")
        != std::string::npos);
}

TEST_CASE("diagnostic: a leading byte order mark is not shown and shifts no column", "[diag][utf8]") {
  SourceFile f("m.cannl", "\xef\xbb\xbfy = q\n");
  CHECK(f.text() == "y = q\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "q"), "unknown tensor 'q'");
  CHECK(d.render_one(e) ==
        "m.cannl:1:5: error: unknown tensor 'q'\n"
        "    1 | y = q\n"
        "      |     ^\n");
}

TEST_CASE("diagnostic: escapes in a very long line keep the caret under its character",
          "[diag][utf8]") {
  std::string line = "y = " + std::string(300, '\x01') + " q " + std::string(300, '\xff');
  SourceFile f("m.cannl", line + "\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "q"), "unknown tensor 'q'");
  std::string out = d.render_one(e);
  CHECK(printable_utf8(out));
  std::istringstream in(out);
  std::string head, src, caret;
  std::getline(in, head);
  std::getline(in, src);
  std::getline(in, caret);
  CHECK(head == "m.cannl:1:306: error: unknown tensor 'q'");
  CHECK(src.find("...") == 8);
  CHECK(src.substr(src.size() - 3) == "...");
  size_t at = caret.find('^');
  REQUIRE(at != std::string::npos);
  CHECK(src[at] == 'q');
  CHECK(src.substr(at - 5, 4) == "\\x01");
  CHECK(src.substr(at + 2, 4) == "\\xff");
}

TEST_CASE("diagnostic: line numbers of any width keep the gutter aligned", "[diag]") {
  std::string text;
  for (int i = 1; i < 1234; ++i) text += "\n";
  text += "z = q\n";
  SourceFile f("m.cannl", text);
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "q"), "unknown tensor 'q'");
  CHECK(d.render_one(e) ==
        "m.cannl:1234:5: error: unknown tensor 'q'\n"
        " 1234 | z = q\n"
        "      |     ^\n");
}

TEST_CASE("diagnostic: CRLF line ends are not shown", "[diag]") {
  SourceFile f("m.cannl", "model m\r\ny = a\r\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "a"), "unknown tensor 'a'");
  CHECK(d.render_one(e) ==
        "m.cannl:2:5: error: unknown tensor 'a'\n"
        "    2 | y = a\n"
        "      |     ^\n");
}

TEST_CASE("diagnostic: notes are rendered after their error", "[diag][notes]") {
  SourceFile f("m.cannl", "model m\ninput x : [3]\nx = 1\n");
  DiagEngine d(f);
  Diagnostic& e = d.error(find(f, "x", 1), "'x' is already defined (as an input)");
  DiagEngine::note(e, find(f, "x"), "'x' was first defined here");
  DiagEngine::note(e, "names are defined once");
  CHECK(d.render_one(e) ==
        "m.cannl:3:1: error: 'x' is already defined (as an input)\n"
        "    3 | x = 1\n"
        "      | ^\n"
        "m.cannl:2:7: note: 'x' was first defined here\n"
        "    2 | input x : [3]\n"
        "      |       ^\n"
        "m.cannl: note: names are defined once\n");
}

TEST_CASE("diagnostic: notes stay with their error when errors are sorted", "[diag][notes]") {
  SourceFile f("m.cannl", "a\nb\nc\n");
  DiagEngine d(f);
  Diagnostic& late = d.error(find(f, "c"), "late");
  DiagEngine::note(late, find(f, "a"), "note of late");
  d.error(find(f, "b"), "early");
  std::string out = render_all(d);
  size_t early = out.find("m.cannl:2:1: error: early");
  size_t late_at = out.find("m.cannl:3:1: error: late");
  size_t note = out.find("m.cannl:1:1: note: note of late");
  REQUIRE(early != std::string::npos);
  REQUIRE(late_at != std::string::npos);
  REQUIRE(note != std::string::npos);
  CHECK(early < late_at);
  CHECK(late_at < note);
}

TEST_CASE("diagnostic: render sorts by location, stably", "[diag]") {
  SourceFile f("m.cannl", "aaa\nbbb\nccc\n");
  DiagEngine d(f);
  d.error(find(f, "ccc"), "third");
  d.error(find(f, "aaa"), "first");
  d.error(find(f, "bbb"), "second (a)");
  d.error(find(f, "bbb"), "second (b)");
  std::string out = render_all(d);
  size_t a = out.find("first"), b1 = out.find("second (a)"), b2 = out.find("second (b)"),
         c = out.find("third");
  CHECK(a < b1);
  CHECK(b1 < b2);
  CHECK(b2 < c);
  // all() keeps the order the errors were reported in.
  CHECK(d.all()[0].message == "third");
}

TEST_CASE("diagnostic: past the limit errors are counted, not kept, and summarised", "[diag]") {
  SourceFile f("m.cannl", "a b c d e\n");
  DiagEngine d(f, 2);
  CHECK_FALSE(d.too_many());
  for (int i = 0; i < 5; ++i) {
    Diagnostic& e = d.error({static_cast<uint32_t>(2 * i), static_cast<uint32_t>(2 * i + 1)},
                            "error " + std::to_string(i));
    DiagEngine::note(e, "a note");  // notes on dropped errors go nowhere
  }
  CHECK(d.too_many());
  CHECK(d.error_count() == 5);
  CHECK(d.all().size() == 2);
  std::string out = render_all(d);
  CHECK(out.find("error 1") != std::string::npos);
  CHECK(out.find("error 2") == std::string::npos);
  const std::string tail = "\nm.cannl: 3 more errors not shown (limit 2)\n";
  REQUIRE(out.size() >= tail.size());
  CHECK(out.substr(out.size() - tail.size()) == tail);
}

TEST_CASE("diagnostic: warnings do not count as errors", "[diag]") {
  SourceFile f("m.cannl", "x\n");
  DiagEngine d(f, 1);
  d.warning({0, 1}, "unused");
  d.warning({0, 1}, "unused again");
  CHECK_FALSE(d.has_errors());
  CHECK_FALSE(d.too_many());
  CHECK(d.all().size() == 2);
  CHECK(d.render_one(d.all()[0]).find("m.cannl:1:1: warning: unused\n") == 0);
}

TEST_CASE("diagnostic: unsupported and internal errors say so", "[diag]") {
  SourceFile f("m.cannl", "x\n");
  DiagEngine d(f);
  const Diagnostic& u = d.unsupported({0, 1}, "complex numbers");
  CHECK(u.kind == DiagKind::Unsupported);
  CHECK(u.message == "not supported yet: complex numbers");
  const Diagnostic& i = CANNL_INTERNAL(d, (SourceRange{0, 1}), "oops");
  CHECK(i.kind == DiagKind::Internal);
  CHECK(i.message.find("internal compiler error (") == 0);
  CHECK(i.message.find("test_diagnostic.cpp:") != std::string::npos);
  CHECK(i.message.find("): oops") != std::string::npos);
  CHECK(d.error_count() == 2);
}

TEST_CASE("diagnostic: colour only when asked", "[diag]") {
  SourceFile f("m.cannl", "y = q\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error({4, 5}, "unknown tensor 'q'");
  std::string plain = d.render_one(e), colored = d.render_one(e, true);
  CHECK(plain.find('\033') == std::string::npos);
  CHECK(colored.find("\033[1;31merror") != std::string::npos);
  CHECK(colored.find("\033[1;32m") != std::string::npos);
  CHECK(colored.find("y = q") != std::string::npos);
}

TEST_CASE("diagnostic: a very long line is shown as a window around the caret", "[diag]") {
  std::string line = "y = " + std::string(300, 'a') + " + q + " + std::string(300, 'b');
  SourceFile f("m.cannl", line + "\n");
  DiagEngine d(f);
  const Diagnostic& e = d.error(find(f, "q"), "unknown tensor 'q'");
  std::string out = d.render_one(e);
  std::istringstream in(out);
  std::string head, src, caret;
  std::getline(in, head);
  std::getline(in, src);
  std::getline(in, caret);
  CHECK(head == "m.cannl:1:308: error: unknown tensor 'q'");
  CHECK(src.size() < 130);
  CHECK(src.find("...") == 8);
  CHECK(src.substr(src.size() - 3) == "...");
  // The caret is under the 'q' in the window.
  size_t at = caret.find('^');
  REQUIRE(at != std::string::npos);
  CHECK(src[at] == 'q');
}

TEST_CASE("diagnostic: a long range in a long line is cut at the window", "[diag]") {
  std::string line = "y = " + std::string(250, 'a') + " " + std::string(250, 'b');
  SourceFile f("m.cannl", line + "\n");
  DiagEngine d(f);
  uint32_t b = static_cast<uint32_t>(line.find('b'));
  const Diagnostic& e = d.error({b, b + 250}, "unknown tensor");
  std::string out = d.render_one(e);
  std::istringstream in(out);
  std::string head, src, caret;
  std::getline(in, head);
  std::getline(in, src);
  std::getline(in, caret);
  size_t at = caret.find('^');
  REQUIRE(at != std::string::npos);
  CHECK(src[at] == 'b');
  CHECK(caret.size() <= src.size());
}

TEST_CASE("diagnostic: a front-end error renders with its statement line", "[diag][frontend]") {
  auto fe = run_frontend("t.cannl", "model t\ninput alpha : [3]\ninput beta : [4]\ny = alpha + beta\n");
  REQUIRE_FALSE(fe->ok());
  std::string out = render_all(fe->diags);
  CHECK(out.find("t.cannl:4:11: error: cannot add 'alpha' : [batch | 3] and 'beta' : [batch | 4]") == 0);
  CHECK(out.find("\n    4 | y = alpha + beta\n      |           ^\n") != std::string::npos);
}

TEST_CASE("diagnostic: errors on several lines come out in file order", "[diag][frontend]") {
  auto fe = run_frontend("t.cannl",
                         "model t\n"
                         "input x : [3]\n"
                         "y = relu(x) ]\n"
                         "z = x + 1\n"
                         "dim size 4\n"
                         "w = nope + x\n");
  std::string out = render_all(fe->diags);
  size_t l3 = out.find("t.cannl:3:"), l5 = out.find("t.cannl:5:"), l6 = out.find("t.cannl:6:");
  REQUIRE(l3 != std::string::npos);
  REQUIRE(l5 != std::string::npos);
  REQUIRE(l6 != std::string::npos);
  CHECK(l3 < l5);
  CHECK(l5 < l6);
  CHECK(fe->diags.error_count() == 3);
}
