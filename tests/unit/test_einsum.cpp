// Einsum specs (contract §6): letter, comma and whole-word names, '...', affine index
// expressions, validation errors at exact offsets, and print_einsum.
#include <catch2/catch.hpp>

#include "spec/einsum.h"

using namespace cannl;

namespace {

// The spec sits inside quotes in a file, as in einsum("SPEC", ...); offsets below are relative
// to the spec's first character.
struct Ein {
  SourceFile file;
  DiagEngine diags;
  std::optional<EinsumSpec> spec;
  explicit Ein(const std::string& s) : file("e.cannl", "\"" + s + "\""), diags(file) {
    spec = parse_einsum(s, 1, diags);
  }
  bool ok() const { return spec.has_value() && !diags.has_errors(); }
  std::string message() const { return diags.all().empty() ? "" : diags.all()[0].message; }
  // Offset of the (first) error inside the spec string, and its length.
  long offset() const { return diags.all().empty() ? -1 : long(diags.all()[0].range.begin) - 1; }
  long length() const {
    return diags.all().empty() ? -1 : long(diags.all()[0].range.end - diags.all()[0].range.begin);
  }
  const EinOperand& op(size_t i) const { return spec->operands.at(i); }
};

std::vector<std::string> names(const std::vector<EinAxis>& part) {
  std::vector<std::string> out;
  for (const EinAxis& a : part) out.push_back(a.kind == EinAxis::Ellipsis ? "..." : a.name);
  return out;
}

using V = std::vector<std::string>;

}  // namespace

// ---- names --------------------------------------------------------------------------------

TEST_CASE("einsum: letter mode reads one axis per letter", "[einsum]") {
  Ein e("b|i->o => b|o");
  REQUIRE(e.ok());
  REQUIRE(e.spec->operands.size() == 1);
  CHECK(names(e.op(0).part(AxisKind::Batch)) == V{"b"});
  CHECK(names(e.op(0).part(AxisKind::Input)) == V{"i"});
  CHECK(names(e.op(0).part(AxisKind::Output)) == V{"o"});
  CHECK(names(e.spec->result.part(AxisKind::Batch)) == V{"b"});
  CHECK(e.spec->result.part(AxisKind::Input).empty());
  Ein t("b|ij => b|ji");
  REQUIRE(t.ok());
  CHECK(names(t.op(0).part(AxisKind::Output)) == V{"i", "j"});
  CHECK(names(t.spec->result.part(AxisKind::Output)) == V{"j", "i"});
  // Spaces between letters are ignored.
  Ein s(" b | i j -> o  =>  b | o ");
  REQUIRE(s.ok());
  CHECK(names(s.op(0).part(AxisKind::Input)) == V{"i", "j"});
}

TEST_CASE("einsum: two operands and an empty (scalar) result", "[einsum]") {
  Ein e("i->o; b|i => b|o");
  REQUIRE(e.ok());
  REQUIRE(e.spec->operands.size() == 2);
  CHECK(names(e.op(0).part(AxisKind::Input)) == V{"i"});
  CHECK(names(e.op(1).part(AxisKind::Batch)) == V{"b"});
  Ein s("b|o => ");
  REQUIRE(s.ok());
  for (const auto& part : s.spec->result.parts) CHECK(part.empty());
}

TEST_CASE("einsum: comma mode reads identifiers", "[einsum]") {
  Ein e("batch, t|d => batch|d");
  REQUIRE(e.ok());
  CHECK(names(e.op(0).part(AxisKind::Batch)) == V{"batch", "t"});
  CHECK(names(e.op(0).part(AxisKind::Output)) == V{"d"});
  // Axis ranges point at the words in the file.
  const EinAxis& t = e.op(0).part(AxisKind::Batch)[1];
  CHECK(e.file.slice(t.range) == "t");
  CHECK(t.range.begin == 1 + 7);
}

TEST_CASE("einsum: comma-free words when letters would repeat in an operand", "[einsum]") {
  Ein e("batch|inp->out => batch|out");
  REQUIRE(e.ok());
  CHECK(names(e.op(0).part(AxisKind::Batch)) == V{"batch"});
  CHECK(names(e.op(0).part(AxisKind::Input)) == V{"inp"});
  CHECK(names(e.op(0).part(AxisKind::Output)) == V{"out"});
  CHECK(names(e.spec->result.part(AxisKind::Output)) == V{"out"});
  CHECK(e.file.slice(e.op(0).part(AxisKind::Input)[0].range) == "inp");
}

TEST_CASE("einsum: a comma-free spec valid both ways keeps the word reading aside", "[einsum]") {
  // Letters first ("inp" is i, n, p); shape inference may take `words` instead.
  Ein e("b|inp->out => b|out");
  REQUIRE(e.ok());
  CHECK(names(e.op(0).part(AxisKind::Input)) == V{"i", "n", "p"});
  CHECK(names(e.spec->result.part(AxisKind::Output)) == V{"o", "u", "t"});
  REQUIRE(e.spec->words);
  const EinsumSpec& w = *e.spec->words;
  CHECK(names(w.operands.at(0).part(AxisKind::Batch)) == V{"b"});
  CHECK(names(w.operands.at(0).part(AxisKind::Input)) == V{"inp"});
  CHECK(names(w.operands.at(0).part(AxisKind::Output)) == V{"out"});
  CHECK(names(w.result.part(AxisKind::Output)) == V{"out"});
  CHECK(e.file.slice(w.operands.at(0).part(AxisKind::Input)[0].range) == "inp");
  CHECK(print_einsum(w) == "b|inp->out => b|out");
  Ein two("inp->out; b|inp => b|out");
  REQUIRE(two.ok());
  REQUIRE(two.spec->words);
  CHECK(names(two.spec->words->operands.at(1).part(AxisKind::Output)) == V{"inp"});
  Ein sum("b|feat => feat");
  REQUIRE(sum.ok());
  REQUIRE(sum.spec->words);
  CHECK(names(sum.spec->words->result.part(AxisKind::Output)) == V{"feat"});
}

TEST_CASE("einsum: no word reading when it is invalid, the same, or the only one", "[einsum]") {
  Ein t("b|ij => b|ji");  // words: result axis 'ji' is in no operand
  REQUIRE(t.ok());
  CHECK_FALSE(t.spec->words);
  Ein s("b|i->o => b|o");  // one letter per part: both readings are the same
  REQUIRE(s.ok());
  CHECK_FALSE(s.spec->words);
  Ein r("batch|inp->out => batch|out");  // letters repeat: words are the reading
  REQUIRE(r.ok());
  CHECK(names(r.op(0).part(AxisKind::Input)) == V{"inp"});
  CHECK_FALSE(r.spec->words);
  Ein c("b|in, p => b|p");  // a comma: identifiers only
  REQUIRE(c.ok());
  CHECK_FALSE(c.spec->words);
}

TEST_CASE("einsum: an index expression in both readings", "[einsum][affine]") {
  // Letters: 2*h and w+k; words: one axis 2*hw+k.
  Ein a("b|2*hw+k => b|hw");
  REQUIRE(a.ok());
  CHECK(names(a.op(0).part(AxisKind::Output)) == V{"h", "w"});
  CHECK(a.op(0).part(AxisKind::Output)[1].kernel == "k");
  REQUIRE(a.spec->words);
  const std::vector<EinAxis>& w = a.spec->words->operands.at(0).part(AxisKind::Output);
  REQUIRE(w.size() == 1);
  CHECK(w[0].kind == EinAxis::Affine);
  CHECK(w[0].name == "hw");
  CHECK(w[0].stride == 2);
  CHECK(w[0].kernel == "k");
}

TEST_CASE("einsum: '...' is a row variable in any part", "[einsum]") {
  Ein e("...|i; b|...i => ...|");
  REQUIRE(e.ok());
  CHECK(e.op(0).part(AxisKind::Batch).at(0).kind == EinAxis::Ellipsis);
  CHECK(names(e.op(1).part(AxisKind::Output)) == V{"...", "i"});
  CHECK(names(e.spec->result.part(AxisKind::Batch)) == V{"..."});
  const EinAxis& dots = e.op(1).part(AxisKind::Output)[0];
  CHECK(e.file.slice(dots.range) == "...");
  Ein w("batch|..., feat => batch|...");
  REQUIRE(w.ok());
  CHECK(names(w.op(0).part(AxisKind::Output)) == V{"...", "feat"});
}

// ---- affine index expressions -------------------------------------------------------------

TEST_CASE("einsum: affine index fields (stride, kernel, padding)", "[einsum][affine]") {
  Ein e("b|2*h+i-1, 2*w+j-1, c; i, j, c -> d => b|h, w, d");
  REQUIRE(e.ok());
  const auto& out = e.op(0).part(AxisKind::Output);
  REQUIRE(out.size() == 3);
  CHECK(out[0].kind == EinAxis::Affine);
  CHECK(out[0].stride == 2);
  CHECK(out[0].name == "h");
  CHECK(out[0].kernel == "i");
  CHECK(out[0].padding == 1);
  CHECK(e.file.slice(out[0].range) == "2*h+i-1");
  CHECK(out[1].name == "w");
  CHECK(out[1].kernel == "j");
  CHECK(out[2].kind == EinAxis::Name);
}

TEST_CASE("einsum: partial affine forms", "[einsum][affine]") {
  Ein k("b|h+i => b|h");
  REQUIRE(k.ok());
  const EinAxis& a = k.op(0).part(AxisKind::Output)[0];
  CHECK(a.kind == EinAxis::Affine);
  CHECK(a.stride == 1);
  CHECK(a.kernel == "i");
  CHECK(a.padding == 0);
  Ein s("b|2*h => b|h");
  REQUIRE(s.ok());
  const EinAxis& b = s.op(0).part(AxisKind::Output)[0];
  CHECK(b.kind == EinAxis::Affine);
  CHECK(b.stride == 2);
  CHECK(b.kernel.empty());
  // Without a stride or a kernel axis, v-c and v+c are offsets (contract v2 §3): a shift.
  Ein p("b|h-2 => b|h");
  REQUIRE(p.ok());
  const EinAxis& c = p.op(0).part(AxisKind::Output)[0];
  CHECK(c.kind == EinAxis::Offset);
  CHECK(c.offset == -2);
  CHECK(c.padding == 0);
  Ein pw("b|1*h-2 => b|h");  // a written stride keeps the window's padding
  REQUIRE(pw.ok());
  CHECK(pw.op(0).part(AxisKind::Output)[0].kind == EinAxis::Affine);
  CHECK(pw.op(0).part(AxisKind::Output)[0].padding == 2);
  Ein sh("b, t+1|f => b, t|f");
  REQUIRE(sh.ok());
  CHECK(sh.op(0).part(AxisKind::Batch)[1].kind == EinAxis::Offset);
  CHECK(sh.op(0).part(AxisKind::Batch)[1].offset == 1);
  CHECK(print_einsum(*sh.spec) == "b, t+1|f => b, t|f");
  Ein rs("b, t|f => b, t-1|f");  // an offset in the result: writes outside it are skipped
  REQUIRE(rs.ok());
  CHECK(rs.spec->result.part(AxisKind::Batch)[1].offset == -1);
  Ein two("b|t, f; t+2, f => b|t, f");  // and in any operand
  REQUIRE(two.ok());
  CHECK(two.op(1).part(AxisKind::Output)[0].offset == 2);
  // Spaces inside an index expression are allowed.
  Ein sp("b|3 * h + i - 1, c => b|h, c");
  REQUIRE(sp.ok());
  CHECK(sp.op(0).part(AxisKind::Output)[0].stride == 3);
  CHECK(sp.op(0).part(AxisKind::Output)[0].padding == 1);
}

TEST_CASE("einsum: affine axes in letter mode", "[einsum][affine]") {
  Ein e("b|2*h+i c; i c->d => b|h d");
  REQUIRE(e.ok());
  const auto& out = e.op(0).part(AxisKind::Output);
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == EinAxis::Affine);
  CHECK(out[0].kernel == "i");
  CHECK(out[1].name == "c");
  // '->' after a name is the arrow, not a padding.
  Ein a("h->o => o");
  REQUIRE(a.ok());
  CHECK(a.op(0).part(AxisKind::Input)[0].kind == EinAxis::Name);
}

// ---- errors at exact offsets ----------------------------------------------------------------

TEST_CASE("einsum: errors point at the exact character inside the string", "[einsum][errors]") {
  struct Case {
    const char* spec;
    long offset;
    const char* message;
  };
  const Case cases[] = {
      {"b|i -> o", 8, "no '=>'"},
      {"a => b => c", 7, "second '=>'"},
      {"a|b|c => c", 3, "at most one '|'"},
      {"i->o|b => o", 4, "'|' must come before '->'"},
      {"a->b->c => c", 4, "at most one '->'"},
      {"a; b => c; d", 9, "no ';' after '=>'"},
      {"i; 2*h+k => h", 3, "only allowed in the first operand's output axes"},
      {"2*h+k->o => o", 0, "only allowed in the first operand's output axes"},
      {"b|h+k->o => o", 2, "only allowed in the first operand's output axes"},
      {"b|2*h => b|2*h", 11, "not allowed in the result"},
      {"b|i => b|o", 9, "result axis 'o' does not appear in any operand"},
      {"b|i => b|...", 9, "'...' in the result's output axes"},
      {"b|...i => ...|i", 10, "'...' in the result's batch axes"},
      {"ii => i", 1, "axis 'i' appears twice in one operand"},
      {"b|ij => b|ii", 11, "axis 'i' appears twice in the result"},
      {"a, a => a", 3, "axis 'a' appears twice in one operand"},
      {"b|...i... => b|i", 6, "'...' may appear only once"},
      {"b|i$ => b|i", 3, "unexpected '$'"},
      {"a,,b => a", 2, "empty axis name between commas"},
      {"0*h => h", 0, "stride of an index expression must be positive"},
      {"2h => h", 1, "expected '*' after the stride"},
      {"h+h => h", 0, "two different axes"},
      {"h-1234567 => h", 2, "number too large"},
      {"b|.i => b|i", 2, "expected '...'"},
  };
  for (const Case& c : cases) {
    Ein e(c.spec);
    INFO("spec \"" << c.spec << "\": " << e.message() << " @" << e.offset());
    CHECK_FALSE(e.spec.has_value());
    REQUIRE(e.diags.error_count() == 1);
    CHECK(e.message().find(c.message) != std::string::npos);
    CHECK(e.offset() == c.offset);
    CHECK(e.length() >= 1);
  }
}

TEST_CASE("einsum: error ranges cover the offending text", "[einsum][errors]") {
  Ein a("i; 2*h+k => h");
  CHECK(a.length() == 5);
  Ein d("b|i => b|...");
  CHECK(a.diags.all().size() == 1);
  CHECK(d.length() == 3);
  Ein w("batch|inp->out => batch|out => x");
  CHECK(w.offset() == 28);
  CHECK(w.length() == 2);
}

TEST_CASE("einsum: an error at a later position in the file keeps its offset", "[einsum][errors]") {
  SourceFile f("e.cannl", "model m\ny = einsum(\"b|i => b|o\", x)\n");
  DiagEngine d(f);
  uint32_t begin = static_cast<uint32_t>(f.text().find("b|i"));
  auto spec = parse_einsum("b|i => b|o", begin, d);
  CHECK_FALSE(spec);
  REQUIRE(d.error_count() == 1);
  LineCol lc = f.line_col(d.all()[0].range.begin);
  CHECK(lc.line == 2);
  CHECK(lc.col == 22);
}

// Regression: the letter-reading fallback used to report a typo in a word-form spec as a
// repeated *letter* ('t' of "batch"/"out").
TEST_CASE("einsum: a word-form spec with an unknown result axis reports that axis",
          "[einsum][errors]") {
  Ein e("batch|inp->out => batch|xyz");
  INFO(e.message() << " @" << e.offset());
  REQUIRE(e.diags.error_count() == 1);
  CHECK(e.message().find("result axis 'xyz' does not appear in any operand") != std::string::npos);
  CHECK(e.offset() == 24);
  // The same fallback turns a missing comma between words into a "repeated letter" error.
  Ein c("batch t|d => batch|d");
  INFO(c.message() << " @" << c.offset());
  CHECK(c.message().find("need commas") != std::string::npos);
}

// ---- print_einsum -------------------------------------------------------------------------

TEST_CASE("einsum: print_einsum round trip", "[einsum][print]") {
  const char* specs[] = {
      "b|i->o => b|o",
      "i->o; b|i => b|o",
      "b|ij => b|ji",
      "b|o => ",
      "...|i; ...|i => ...|",
      "b|...i; b|i => b|...",
      "batch, t|d => batch|d",
      "batch|inp->out => batch|out",
      "b|2*h+i-1, 2*w+j-1, ch; i, j, ch -> d => b|h, w, d",
      "b|h+i j => b|h j",
      "b|2*h, 2*w, ch => b|h, w, ch",
  };
  for (const char* s : specs) {
    Ein a(s);
    INFO(s);
    REQUIRE(a.ok());
    std::string once = print_einsum(*a.spec);
    Ein b(once);
    INFO("printed: " << once << " -> " << b.message());
    REQUIRE(b.ok());
    CHECK(print_einsum(*b.spec) == once);
    REQUIRE(b.spec->operands.size() == a.spec->operands.size());
    for (size_t i = 0; i < a.spec->operands.size(); ++i)
      for (int k = 0; k < 3; ++k)
        CHECK(names(b.spec->operands[i].parts[k]) == names(a.spec->operands[i].parts[k]));
  }
}

TEST_CASE("einsum: print_einsum text", "[einsum][print]") {
  CHECK(print_einsum(*Ein("b|i->o=>b|o").spec) == "b|i->o => b|o");
  CHECK(print_einsum(*Ein("i->o;b|i=>b|o").spec) == "i->o; b|i => b|o");
  CHECK(print_einsum(*Ein("batch,t|d=>batch|d").spec) == "batch, t|d => batch|d");
  CHECK(print_einsum(*Ein("b|1*h+i, c => b|h, c").spec) == "b|h+i, c => b|h, c");
  CHECK(print_einsum(*Ein("b|o => ").spec) == "b|o => ");
}

// Regression (fixed): print_einsum wrote letter-mode axes with no separator, so an index expression with a
// padding followed by one with a stride merges into one number ("h+i-1" "2*w" -> "h+i-12*w"),
// and the printed spec (used by --dump=ast) no longer parses.
TEST_CASE("einsum: print_einsum keeps letter-mode affine axes apart",
          "[einsum][print]") {
  Ein a("b|2*h+i-1 2*w+j-1 c => b|h w c");
  REQUIRE(a.ok());
  std::string once = print_einsum(*a.spec);
  Ein b(once);
  INFO("printed: " << once << " -> " << b.message());
  REQUIRE(b.ok());
  CHECK(names(b.op(0).part(AxisKind::Output)) == V{"h", "w", "c"});
  CHECK(b.op(0).part(AxisKind::Output)[0].padding == 1);
}
