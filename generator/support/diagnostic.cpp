#include "support/diagnostic.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "support/utf8.h"

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
void DiagEngine::note_since(size_t first, SourceRange r, const std::string& msg) {
  for (size_t i = first; i < diags_.size(); ++i) note(diags_[i], r, msg);
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
    out += fmt::format("{}{}: {}{}{}\n", bold, printable(file_.path()), severity_name(d.severity),
                       reset, ": " + printable(d.message));
  } else {
    LineCol lc = file_.line_col(d.range.begin);
    out += fmt::format("{}{}:{}:{}: {}{}:{} {}\n", bold, printable(file_.path()), lc.line, lc.col,
                       d.severity == Severity::Note ? "" : red, severity_name(d.severity),
                       reset, printable(d.message));
    std::string_view line = file_.line_text(lc.line);
    LineCol end_lc = file_.line_col(d.range.end > d.range.begin ? d.range.end : d.range.begin + 1);
    // The line cut into characters (one per column, support/utf8.h), each as it is shown: a
    // byte that is not UTF-8 or a control character is an escape several columns wide.
    std::vector<std::string> shown;
    for (size_t i = 0; i < line.size();) {
      size_t n = utf8_char_length(line, i);
      shown.push_back(printable_char(line.substr(i, n)));
      i += n;
    }
    const int ncols = static_cast<int>(shown.size());
    // How many columns of the caret line a character takes: an escape its length, a tab one
    // (the tab itself is copied), any other character one; past the line's end one.
    auto width = [&](int col) -> int {
      if (col > ncols) return 1;
      const std::string& c = shown[col - 1];
      if (c.size() > 1 && c[0] == '\\') return static_cast<int>(c.size());
      return 1;
    };
    int first_col = std::min(lc.col, ncols + 1);
    int last_col = end_lc.line == lc.line ? end_lc.col : ncols + 2;
    // A very long line is shown as a window of about 100 characters around the caret.
    constexpr int kWindow = 100;
    int from = 1, to = ncols + 1;  // the columns shown, [from, to)
    if (ncols > 2 * kWindow) {
      from = std::max(1, first_col - kWindow / 2);
      to = std::min(ncols + 1, from + kWindow);
    }
    std::string prefix = from > 1 ? "..." : "", suffix = to <= ncols ? "..." : "";
    std::string display = prefix;
    for (int c = from; c < to; ++c) display += shown[c - 1];
    display += suffix;
    std::string gutter = fmt::format("{:>5} | ", lc.line);
    out += gutter + display + "\n";
    // Caret line: keep tabs so the caret lines up, '^' at the start, '~' over the rest (and
    // over the rest of an escape the range starts on); cut where the window ends.
    std::string caret(gutter.size() - 2, ' ');
    caret += "| ";
    caret += green;
    caret += std::string(prefix.size(), ' ');
    for (int c = from; c < first_col; ++c) {
      if (shown[c - 1] == "\t") caret += '\t';
      else caret += std::string(static_cast<size_t>(width(c)), ' ');
    }
    caret += '^';
    caret += std::string(static_cast<size_t>(width(first_col) - 1), '~');
    for (int c = first_col + 1; c < last_col; ++c) {
      if (c >= to && !suffix.empty()) break;
      caret += std::string(static_cast<size_t>(width(c)), '~');
    }
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
    os << fmt::format("{}: {} more errors not shown (limit {})\n", printable(file_.path()),
                      error_count_ - max_errors_, max_errors_);
}

}  // namespace cannl
