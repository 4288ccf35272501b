#include "support/diagnostic.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

namespace cannl {

Diagnostic& DiagEngine::add(Severity s, DiagKind k, SourceRange r, std::string msg) {
  if (s == Severity::Error) {
    ++error_count_;
    if (error_count_ > max_errors_) {
      overflow_ = Diagnostic{};
      return overflow_;
    }
  }
  diags_.push_back(Diagnostic{s, k, r, true, std::move(msg), {}});
  return diags_.back();
}

Diagnostic& DiagEngine::error(SourceRange r, std::string msg) {
  return add(Severity::Error, DiagKind::User, r, std::move(msg));
}
Diagnostic& DiagEngine::unsupported(SourceRange r, std::string msg) {
  return add(Severity::Error, DiagKind::Unsupported, r, "not supported yet: " + msg);
}
Diagnostic& DiagEngine::warning(SourceRange r, std::string msg) {
  return add(Severity::Warning, DiagKind::User, r, std::move(msg));
}
Diagnostic& DiagEngine::internal(SourceRange r, std::string msg, const char* file, int line) {
  return add(Severity::Error, DiagKind::Internal, r,
             fmt::format("internal compiler error ({}:{}): {}", file, line, msg));
}
void DiagEngine::note(Diagnostic& d, SourceRange r, std::string msg) {
  d.notes.push_back(Diagnostic{Severity::Note, DiagKind::User, r, true, std::move(msg), {}});
}
void DiagEngine::note(Diagnostic& d, std::string msg) {
  d.notes.push_back(Diagnostic{Severity::Note, DiagKind::User, {}, false, std::move(msg), {}});
}

static const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

std::string DiagEngine::render_one(const Diagnostic& d, bool color) const {
  const char* bold = color ? "\033[1m" : "";
  const char* red = color ? "\033[1;31m" : "";
  const char* green = color ? "\033[1;32m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string out;
  if (!d.has_range) {
    out += fmt::format("{}{}: {}{}{}\n", bold, file_.path(), severity_name(d.severity), reset,
                       ": " + d.message);
  } else {
    LineCol lc = file_.line_col(d.range.begin);
    out += fmt::format("{}{}:{}:{}: {}{}:{} {}\n", bold, file_.path(), lc.line, lc.col,
                       d.severity == Severity::Note ? "" : red, severity_name(d.severity),
                       reset, d.message);
    std::string_view line = file_.line_text(lc.line);
    LineCol end_lc = file_.line_col(d.range.end > d.range.begin ? d.range.end : d.range.begin + 1);
    int first_col = lc.col;
    int last_col = end_lc.line == lc.line ? end_lc.col : static_cast<int>(line.size()) + 2;
    // A very long line is shown as a window of about 100 characters around the caret.
    std::string display(line);
    constexpr int kWindow = 100;
    auto is_cont = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
    if (line.size() > 2 * kWindow) {
      int from_col = std::max(1, first_col - kWindow / 2);
      size_t from = 0, to = 0;
      int c = 1;
      for (size_t i = 0; i <= line.size(); ++i) {
        if (i < line.size() && is_cont(line[i])) continue;
        if (c == from_col) from = i;
        if (c == from_col + kWindow || i == line.size()) {
          to = i;
          break;
        }
        ++c;
      }
      std::string prefix = from > 0 ? "..." : "", suffix = to < line.size() ? "..." : "";
      display = prefix + std::string(line.substr(from, to - from)) + suffix;
      int shift = from_col - 1 - static_cast<int>(prefix.size());
      first_col -= shift;
      last_col = std::min(last_col - shift, kWindow + 4);
    }
    std::string gutter = fmt::format("{:>5} | ", lc.line);
    out += gutter + display + "\n";
    // Caret line: keep tabs so the caret lines up, '^' at the start, '~' over the rest.
    std::string caret(gutter.size() - 2, ' ');
    caret += "| ";
    caret += green;
    int col = 1;
    for (size_t i = 0; i < display.size() && col < first_col; ++i) {
      if (is_cont(display[i])) continue;
      caret += display[i] == '\t' ? '\t' : ' ';
      ++col;
    }
    caret += '^';
    for (int k = first_col + 1; k < last_col; ++k) caret += '~';
    caret += reset;
    out += caret + "\n";
  }
  for (const Diagnostic& n : d.notes) out += render_one(n, color);
  return out;
}

void DiagEngine::render(std::ostream& os, bool color) const {
  std::vector<const Diagnostic*> sorted;
  for (const Diagnostic& d : diags_) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic* a, const Diagnostic* b) {
    return a->range.begin < b->range.begin;
  });
  for (const Diagnostic* d : sorted) os << render_one(*d, color);
  if (error_count_ > max_errors_)
    os << fmt::format("{}: {} more errors not shown (limit {})\n", file_.path(),
                      error_count_ - max_errors_, max_errors_);
}

}  // namespace cannl
