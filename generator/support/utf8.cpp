#include "support/utf8.h"

#include <fmt/format.h>

namespace cannl {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = at(i);
  if (b < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;  // a continuation byte, C0, C1 or F5..FF
  }
  if (i + n > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

std::string printable_char(std::string_view ch) {
  if (ch.empty()) return {};
  auto b0 = static_cast<unsigned char>(ch[0]);
  if (ch.size() == 1) {
    if (b0 == '\t' || (b0 >= 0x20 && b0 < 0x7F)) return std::string(ch);
    return fmt::format("\\x{:02x}", b0);  // a control character or a byte that is no UTF-8
  }
  if (utf8_sequence_length(ch, 0) != ch.size()) {  // not one character: escape every byte
    std::string out;
    for (char c : ch) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    return out;
  }
  // C1 control characters U+0080..U+009F are encoded C2 80..C2 9F.
  auto b1 = static_cast<unsigned char>(ch[1]);
  if (b0 == 0xC2 && b1 <= 0x9F) return fmt::format("\\u{:04x}", b1);
  // A byte order mark inside the text (U+FEFF, EF BB BF) would be invisible.
  if (ch == "\xEF\xBB\xBF") return "\\ufeff";
  return std::string(ch);
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_char_length(s, i);
    out += printable_char(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace cannl
