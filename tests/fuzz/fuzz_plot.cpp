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
#include <string>

#include "driver/commands.h"
#include "support/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

[[noreturn]] void fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "fuzz_plot: %s\n%.2000s\n", what, text.c_str());
  std::abort();
}

// The SVG's markup: balanced brackets outside the tags' quoted values, known entities, no
// control characters, and each coordinate attribute a finite number (or a list of them).
void check_svg(const std::string& svg) {
  if (svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) != 0) fail("no SVG header", svg);
  if (svg.size() < 7 || svg.compare(svg.size() - 7, 7, "</svg>\n") != 0) fail("no </svg> at the end", svg);
  bool in_tag = false, in_quote = false;
  for (size_t i = 0; i < svg.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(svg[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) fail("a control character in the SVG", svg);
    if (in_quote) {
      if (c == '"') in_quote = false;
      else if (c == '<') fail("'<' in an attribute value", svg);
      continue;
    }
    if (c == '<') {
      if (in_tag) fail("'<' inside a tag", svg);
      in_tag = true;
    } else if (c == '>') {
      if (!in_tag) fail("'>' outside a tag", svg);
      in_tag = false;
    } else if (c == '"' && in_tag) {
      in_quote = true;
    }
    if (c == '&') {
      static const char* const entities[] = {"&lt;", "&gt;", "&amp;", "&quot;"};
      bool known = false;
      for (const char* e : entities) known = known || svg.compare(i, std::strlen(e), e) == 0;
      if (!known) fail("a bare '&'", svg);
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
  for (const char* attr : {" x=\"", " y=\"", " x1=\"", " y1=\"", " x2=\"", " y2=\"", " cx=\"", " cy=\"", " points=\"",
                           " height=\""}) {
    for (size_t at = svg.find(attr); at != std::string::npos; at = svg.find(attr, at + 1)) {
      const size_t begin = at + std::strlen(attr), end = svg.find('"', begin);
      const std::string value = svg.substr(begin, end - begin);
      const char* p = value.c_str();
      while (*p) {
        char* stop = nullptr;
        const double v = std::strtod(p, &stop);
        if (stop == p || !std::isfinite(v)) fail("a coordinate that is not a finite number", value);
        p = stop;
        while (*p == ',' || *p == ' ') ++p;
      }
    }
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
