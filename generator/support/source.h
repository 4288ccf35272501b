// source.h — a spec file held in memory, and locations inside it.
//
// Every AST node, token and diagnostic refers to its text by a SourceRange: a half-open
// byte range [begin, end) into one SourceFile. Line and column are computed on demand; a
// column counts characters (support/utf8.h: a UTF-8 sequence, or one byte that is not UTF-8).
// A leading UTF-8 byte order mark is dropped when the file is made: text() never holds it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cannl {

struct SourceRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  static SourceRange join(SourceRange a, SourceRange b) {
    return {a.begin < b.begin ? a.begin : b.begin, a.end > b.end ? a.end : b.end};
  }
};

struct LineCol {
  int line = 1;  // 1-based
  int col = 1;   // 1-based, in characters (UTF-8 code points; a bad byte is one)
};

class SourceFile {
public:
  SourceFile(std::string path, std::string text);

  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  std::string_view slice(SourceRange r) const;
  LineCol line_col(uint32_t offset) const;
  std::string_view line_text(int line) const;  // without the newline
  int line_count() const { return static_cast<int>(line_starts_.size()); }

private:
  std::string path_;
  std::string text_;
  std::vector<uint32_t> line_starts_;
};

}  // namespace cannl
