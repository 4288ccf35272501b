#include "spec/einsum.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "support/utf8.h"

namespace cannl {

const char* axis_kind_name(AxisKind k) {
  switch (k) {
    case AxisKind::Batch: return "batch";
    case AxisKind::Input: return "input";
    case AxisKind::Output: return "output";
  }
  return "?";
}

namespace {

struct ParseError {
  uint32_t at, len;
  std::string msg;
};

class EinsumParser {
public:
  EinsumParser(const std::string& s, uint32_t begin, bool words)
      : s_(s), begin_(begin), words_(words) {}

  EinsumSpec run() {
    EinsumSpec spec;
    spec.text = s_;
    spec.range = {begin_, begin_ + static_cast<uint32_t>(s_.size())};
    size_t arrow = s_.find("=>");
    if (arrow == std::string::npos)
      fail(s_.size(), 0, "einsum spec has no '=>' (expected \"OPERAND[; OPERAND] => RESULT\")");
    if (s_.find("=>", arrow + 2) != std::string::npos)
      fail(s_.find("=>", arrow + 2), 2, "einsum spec has a second '=>'");
    size_t start = 0;
    while (true) {
      size_t semi = s_.find(';', start);
      size_t end = (semi == std::string::npos || semi > arrow) ? arrow : semi;
      spec.operands.push_back(operand(start, end));
      if (end == arrow) break;
      start = end + 1;
    }
    if (s_.find(';', arrow) != std::string::npos)
      fail(s_.find(';', arrow), 1, "the result of an einsum is one operand (no ';' after '=>')");
    spec.result = operand(arrow + 2, s_.size());
    return spec;
  }

private:
  [[noreturn]] void fail(size_t at, size_t len, std::string msg) {
    throw ParseError{static_cast<uint32_t>(at), static_cast<uint32_t>(len), std::move(msg)};
  }

  SourceRange range(size_t b, size_t e) const {
    return {begin_ + static_cast<uint32_t>(b), begin_ + static_cast<uint32_t>(e)};
  }

  EinOperand operand(size_t b, size_t e) {
    EinOperand op;
    op.range = range(b, e);
    size_t pipe = find_in(b, e, "|");
    size_t arrow = find_in(b, e, "->");
    if (pipe != std::string::npos && find_in(pipe + 1, e, "|") != std::string::npos)
      fail(find_in(pipe + 1, e, "|"), 1, "an einsum operand has at most one '|'");
    if (arrow != std::string::npos && find_in(arrow + 2, e, "->") != std::string::npos)
      fail(find_in(arrow + 2, e, "->"), 2, "an einsum operand has at most one '->'");
    if (pipe != std::string::npos && arrow != std::string::npos && arrow < pipe)
      fail(pipe, 1, "'|' must come before '->' (expected \"BATCH | INPUT -> OUTPUT\")");
    size_t in_b = pipe == std::string::npos ? b : pipe + 1;
    size_t out_b = arrow == std::string::npos ? in_b : arrow + 2;
    if (pipe != std::string::npos) part(b, pipe, op.parts[0]);
    if (arrow != std::string::npos) part(in_b, arrow, op.parts[1]);
    part(out_b, e, op.parts[2]);
    return op;
  }

  size_t find_in(size_t b, size_t e, const char* what) const {
    size_t p = s_.find(what, b);
    return (p == std::string::npos || p >= e) ? std::string::npos : p;
  }

  void skip_spaces(size_t& p, size_t e) const {
    while (p < e && (s_[p] == ' ' || s_[p] == '\t')) ++p;
  }

  bool is_name_start(char c) const { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

  std::string name(size_t& p, size_t e) {
    size_t b = p;
    if (p >= e || !is_name_start(s_[p])) {
      if (p >= e) fail(p, 0, "expected an axis name");
      size_t n = utf8_char_length(s_, p);  // a whole character, shown printably
      fail(p, n, fmt::format("unexpected '{}' in einsum spec (expected an axis name, '...', "
                             "or an index expression like 2*h+i)", printable_char(std::string_view(s_).substr(p, n))));
    }
    if (!words_) {
      ++p;
      return s_.substr(b, 1);
    }
    while (p < e && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) ++p;
    return s_.substr(b, p - b);
  }

  long integer(size_t& p, size_t e) {
    size_t b = p;
    while (p < e && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
    if (p == b) fail(p, 1, "expected a number");
    if (p - b > 6) fail(b, p - b, "number too large in einsum index expression");
    return std::stol(s_.substr(b, p - b));
  }

  // One axis: "...", NAME, an affine index [INT "*"] NAME ["+" NAME] ["-" INT], or an offset
  // NAME ("+" | "-") INT.
  EinAxis axis(size_t& p, size_t e) {
    EinAxis a;
    size_t b = p;
    if (s_.compare(p, 3, "...") == 0) {
      p += 3;
      a.kind = EinAxis::Ellipsis;
      a.range = range(b, p);
      return a;
    }
    if (p < e && s_[p] == '.') fail(p, 1, "expected '...' (a row variable)");
    bool affine = false, strided = false;
    if (p < e && std::isdigit(static_cast<unsigned char>(s_[p]))) {
      a.stride = integer(p, e);
      skip_spaces(p, e);
      if (p >= e || s_[p] != '*') fail(p, 1, "expected '*' after the stride of an index expression");
      ++p;
      skip_spaces(p, e);
      affine = strided = true;
      if (a.stride <= 0) fail(b, p - b, "the stride of an index expression must be positive");
    }
    a.name = name(p, e);
    size_t q = p;
    skip_spaces(q, e);
    if (q < e && s_[q] == '+') {
      p = q + 1;
      skip_spaces(p, e);
      if (!strided && p < e && std::isdigit(static_cast<unsigned char>(s_[p]))) {
        a.offset = integer(p, e);  // v+c
        a.kind = EinAxis::Offset;
        a.range = range(b, p);
        return a;
      }
      a.kernel = name(p, e);
      affine = true;
      q = p;
      skip_spaces(q, e);
    }
    if (q < e && s_[q] == '-' && !(q + 1 < e && s_[q + 1] == '>')) {
      p = q + 1;
      skip_spaces(p, e);
      a.padding = integer(p, e);
      affine = true;
    }
    if (affine) a.kind = EinAxis::Affine;
    if (!strided && a.kernel.empty() && a.padding) {  // v-c
      a.kind = EinAxis::Offset;
      a.offset = -a.padding;
      a.padding = 0;
    }
    a.range = range(b, p);
    return a;
  }

  void part(size_t b, size_t e, std::vector<EinAxis>& out) {
    size_t p = b;
    bool commas = words_ && s_.find(',') != std::string::npos;
    bool first = true;
    while (true) {
      skip_spaces(p, e);
      if (p >= e) break;
      if (!first && commas) {
        if (s_[p] != ',') fail(p, 1, fmt::format("expected ',' between axis names, found '{}'", s_[p]));
        ++p;
        skip_spaces(p, e);
        if (p >= e) fail(p, 0, "expected an axis after ','");
      }
      if (s_[p] == ',') fail(p, 1, commas ? "empty axis name between commas" : "unexpected ','");
      out.push_back(axis(p, e));
      first = false;
      if (words_ && !commas) {
        skip_spaces(p, e);
        if (p < e) fail(p, 1, "several axis names in one part need commas between them");
      }
    }
    int ellipses = 0;
    for (const EinAxis& a : out)
      if (a.kind == EinAxis::Ellipsis && ++ellipses > 1)
        fail(a.range.begin - begin_, 3, "'...' may appear only once in each part of an operand");
  }

  const std::string& s_;
  uint32_t begin_;
  bool words_;
};

bool has_long_word(const std::string& s) {
  size_t run = 0;
  for (char c : s) {
    run = std::isalpha(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run >= 3) return true;
  }
  return false;
}

bool repeats_within_an_operand(const EinsumSpec& spec) {
  auto check = [](const EinOperand& op) {
    std::set<std::string> seen;
    for (const auto& part : op.parts)
      for (const EinAxis& a : part)
        if (a.kind != EinAxis::Ellipsis && !seen.insert(a.name).second) return true;
    return false;
  };
  for (const EinOperand& op : spec.operands)
    if (check(op)) return true;
  return check(spec.result);
}

void validate(const EinsumSpec& spec, uint32_t begin) {
  auto fail = [&](SourceRange r, std::string msg) {
    throw ParseError{r.begin - begin, r.end - r.begin, std::move(msg)};
  };
  std::set<std::string> defined;
  std::array<bool, 3> operand_ellipsis{};
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    const EinOperand& op = spec.operands[i];
    std::set<std::string> seen;
    for (int k = 0; k < 3; ++k) {
      for (const EinAxis& a : op.parts[k]) {
        if (a.kind == EinAxis::Ellipsis) {
          operand_ellipsis[k] = true;
          continue;
        }
        if (a.kind == EinAxis::Affine && (i != 0 || k != 2))
          fail(a.range, "an index expression like 's*v+k' is only allowed in the first "
                        "operand's output axes");
        if (!seen.insert(a.name).second)
          fail(a.range, fmt::format("axis '{}' appears twice in one operand (diagonals are not "
                                    "supported)", a.name));
        defined.insert(a.name);
        if (!a.kernel.empty()) {
          if (a.kernel == a.name) fail(a.range, "an index expression needs two different axes");
          if (!seen.insert(a.kernel).second)
            fail(a.range, fmt::format("axis '{}' appears twice in one operand", a.kernel));
          defined.insert(a.kernel);
        }
      }
    }
  }
  std::set<std::string> seen;
  for (int k = 0; k < 3; ++k) {
    for (const EinAxis& a : spec.result.parts[k]) {
      if (a.kind == EinAxis::Ellipsis) {
        if (!operand_ellipsis[k])
          fail(a.range, fmt::format("'...' in the result's {} axes stands for nothing: no operand "
                                    "has '...'", axis_kind_name(static_cast<AxisKind>(k))));
        continue;
      }
      if (a.kind == EinAxis::Affine)
        fail(a.range, "index expressions are not allowed in the result of an einsum (but offsets like t+1)");
      if (!defined.count(a.name))
        fail(a.range, fmt::format("result axis '{}' does not appear in any operand", a.name));
      if (!seen.insert(a.name).second)
        fail(a.range, fmt::format("axis '{}' appears twice in the result", a.name));
    }
  }
}

// The whole-word reading of a comma-free spec whose letter reading is valid, when it is valid
// too and names some axis with two or more letters (else it is the letter reading again).
std::shared_ptr<const EinsumSpec> word_reading(const std::string& contents, uint32_t begin) {
  try {
    EinsumSpec words = EinsumParser(contents, begin, true).run();
    validate(words, begin);
    auto long_name = [](const EinOperand& op) {
      for (const auto& part : op.parts)
        for (const EinAxis& a : part)
          if (a.name.size() > 1 || a.kernel.size() > 1) return true;
      return false;
    };
    bool differs = long_name(words.result);
    for (const EinOperand& op : words.operands) differs = differs || long_name(op);
    if (differs) return std::make_shared<const EinsumSpec>(std::move(words));
  } catch (const ParseError&) {
  }
  return nullptr;
}

}  // namespace

std::optional<EinsumSpec> parse_einsum(const std::string& contents, uint32_t begin,
                                       DiagEngine& diags) {
  bool has_comma = contents.find(',') != std::string::npos;
  try {
    EinsumSpec spec = EinsumParser(contents, begin, has_comma).run();
    if (!has_comma && repeats_within_an_operand(spec)) {
      // "batch|inp->out": the letter reading repeats a letter, so read whole words. If that
      // fails too, report the word reading's error when the spec has a name of three or more
      // letters (it was meant as words), else the letter reading's ("ii => i").
      try {
        EinsumSpec words = EinsumParser(contents, begin, true).run();
        validate(words, begin);
        return words;
      } catch (const ParseError&) {
        if (has_long_word(contents)) throw;
      }
    }
    validate(spec, begin);
    if (!has_comma) spec.words = word_reading(contents, begin);
    return spec;
  } catch (const ParseError& e) {
    uint32_t b = begin + e.at;
    diags.error({b, b + (e.len ? e.len : 1)}, e.msg);
    return std::nullopt;
  }
}

std::string print_einsum(const EinsumSpec& spec) {
  auto part = [](const std::vector<EinAxis>& axes, bool words) {
    std::string s;
    for (size_t i = 0; i < axes.size(); ++i) {
      const EinAxis& a = axes[i];
      if (i && words) s += ", ";
      else if (i && (a.kind >= EinAxis::Affine || axes[i - 1].kind >= EinAxis::Affine)) s += " ";
      if (a.kind == EinAxis::Ellipsis) { s += "..."; continue; }
      if (a.kind == EinAxis::Affine && (a.stride != 1 || a.kernel.empty())) s += fmt::format("{}*", a.stride);
      s += a.name;
      if (a.kind == EinAxis::Offset) s += fmt::format("{:+}", a.offset);
      if (!a.kernel.empty()) s += "+" + a.kernel;
      if (a.padding) s += fmt::format("-{}", a.padding);
    }
    return s;
  };
  bool words = spec.text.find(',') != std::string::npos;
  auto operand = [&](const EinOperand& op) {
    std::string s;
    if (!op.parts[0].empty()) s += part(op.parts[0], words) + "|";
    if (!op.parts[1].empty()) s += part(op.parts[1], words) + "->";
    return s + part(op.parts[2], words);
  };
  std::string s;
  for (size_t i = 0; i < spec.operands.size(); ++i) s += (i ? "; " : "") + operand(spec.operands[i]);
  return s + " => " + operand(spec.result);
}

}  // namespace cannl
