// utf8.h — reading spec text as UTF-8 characters, and showing any text printably.
//
// A spec is UTF-8 but may hold anything: stray bytes, NUL, control characters. Columns and
// diagnostics work in "characters": a well-formed UTF-8 sequence is one character, and so is
// each byte that starts none (an invalid or truncated sequence, a stray continuation byte).
// Guarantees: utf8_char_length never returns 0 inside the text, so every byte belongs to
// exactly one character; printable() returns valid UTF-8 with no control character but tab,
// each bad byte, control character or U+FEFF written as an escape (`\xff`, `\x00`, `\u0085`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cannl {

// The length of the well-formed UTF-8 sequence starting at s[i] (no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when s[i] starts none (or i is past the end).
size_t utf8_sequence_length(std::string_view s, size_t i);

// The bytes of the character at s[i]: the sequence there, or the one byte when it is not
// well formed. 0 only past the end.
inline size_t utf8_char_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t n = utf8_sequence_length(s, i);
  return n == 0 ? 1 : n;
}

// One character (as cut by utf8_char_length) as it is shown: itself, or an escape for an
// invalid byte, a control character (C0 but tab, DEL, C1) or an invisible U+FEFF.
std::string printable_char(std::string_view ch);

// The whole text shown printably, character by character.
std::string printable(std::string_view s);

}  // namespace cannl
