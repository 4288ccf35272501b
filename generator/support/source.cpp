#include "support/source.h"

#include <algorithm>

#include "support/utf8.h"

namespace cannl {

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  // A UTF-8 byte order mark is no part of the spec: dropped, so line 1 starts at column 1.
  if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) text_.erase(0, 3);
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

std::string_view SourceFile::slice(SourceRange r) const {
  uint32_t b = std::min<uint32_t>(r.begin, text_.size());
  uint32_t e = std::min<uint32_t>(std::max(r.end, b), text_.size());
  return std::string_view(text_).substr(b, e - b);
}

LineCol SourceFile::line_col(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  int line = static_cast<int>(it - line_starts_.begin());
  uint32_t start = line_starts_[line - 1];
  // One column per character: a well-formed UTF-8 sequence, or one byte that starts none.
  std::string_view t(text_);
  int col = 1;
  for (uint32_t i = start; i < offset; i += static_cast<uint32_t>(utf8_char_length(t, i))) ++col;
  return {line, col};
}

std::string_view SourceFile::line_text(int line) const {
  if (line < 1 || line > line_count()) return {};
  uint32_t b = line_starts_[line - 1];
  uint32_t e = line < line_count() ? line_starts_[line] : text_.size();
  std::string_view s = std::string_view(text_).substr(b, e - b);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace cannl
