// fuzz_plot.cpp - libFuzzer harness of `cannl plot`'s metrics reader and drawing
// (generator/driver/plot.cpp, linking the generator's cannl_core): the input is one metrics
// log (JSONL), drawn as plot_file draws it (cannl::plot_svg), without files. A drawn log must
// give one SVG document whose coordinates are finite numbers and whose text is XML that a
// browser reads (every '<' a tag, every '&' an entity, UTF-8 without a control character or
// U+FFFE, U+FFFF); a refused one
// says why in one line beginning with the log's name. No exception may escape.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "driver/commands.h"
#include "support/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

[[noreturn]] void fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "fuzz_plot: %s\n%.2000s\n", what, text.c_str());
  std::abort();
}

// An attribute's value of numbers ("12.5", "1.00,2.00 3.00,4.00"): each finite.
void check_numbers(const std::string& value) {
  const char* p = value.c_str();
  while (*p) {
    char* stop = nullptr;
    const double v = std::strtod(p, &stop);
    if (stop == p || !std::isfinite(v)) fail("a coordinate that is not a finite number", value);
    p = stop;
    while (*p == ',' || *p == ' ') ++p;
  }
}

// The SVG's markup: balanced brackets outside the tags' quoted values, known entities, no
// control characters, and each coordinate attribute a finite number (or a list of them).
void check_svg(const std::string& svg) {
  if (svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) != 0) fail("no SVG header", svg);
  if (svg.size() < 7 || svg.compare(svg.size() - 7, 7, "</svg>\n") != 0) fail("no </svg> at the end", svg);
  static const std::set<std::string> coordinates = {"x",  "y",  "x1", "y1",     "x2",
                                                     "y2", "cx", "cy", "points", "height"};
  bool in_tag = false, in_quote = false;
  std::string attr, value;  // in a tag: the attribute being read, and its value
  for (size_t i = 0; i < svg.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(svg[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) fail("a control character in the SVG", svg);
    if (c == '&') {
      static const char* const entities[] = {"&lt;", "&gt;", "&amp;", "&quot;"};
      bool known = false;
      for (const char* e : entities) known = known || svg.compare(i, std::strlen(e), e) == 0;
      if (!known) fail("a bare '&'", svg);
    }
    if (in_quote) {
      if (c == '<') fail("'<' in an attribute value", svg);
      if (c != '"') {
        value += static_cast<char>(c);
        continue;
      }
      in_quote = false;
      if (coordinates.count(attr)) check_numbers(value);
      attr.clear();
      continue;
    }
    if (c == '<') {
      if (in_tag) fail("'<' inside a tag", svg);
      in_tag = true;
      attr.clear();
    } else if (c == '>') {
      if (!in_tag) fail("'>' outside a tag", svg);
      in_tag = false;
    } else if (in_tag && c == '"') {
      in_quote = true;
      value.clear();
    } else if (in_tag && c == ' ') {
      attr.clear();
    } else if (in_tag && c != '=') {
      attr += static_cast<char>(c);
    }
  }
  if (in_tag || in_quote) fail("an unfinished tag", svg);
  for (size_t i = 0; i < svg.size();) {  // UTF-8 of characters XML allows (not U+FFFE, U+FFFF)
    const size_t n = cannl::utf8_sequence_length(svg, i);
    if (n == 0) fail("a byte that is not UTF-8 in the SVG", svg);
    if (n == 3 && svg.compare(i, 2, "\xEF\xBF") == 0 && (static_cast<unsigned char>(svg[i + 2]) & 0xFE) == 0xBE)
      fail("U+FFFE or U+FFFF in the SVG", svg);
    i += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string svg, error;
  int rc = 0;
  try {
    rc = cannl::plot_svg("fuzz.jsonl", text, "", svg, error);
  } catch (const std::exception& e) {
    fail("an exception escaped", e.what());
  }
  if (rc == 0) {
    check_svg(svg);
  } else {
    if (rc != 1) fail("a status other than 0 and 1", error);
    if (error.rfind("fuzz.jsonl:", 0) != 0 || error.find('\n') != std::string::npos)
      fail("a message that is not one line naming the log", error);
  }
  return 0;
}
