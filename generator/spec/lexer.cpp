#include "spec/lexer.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "spec/pytorch_names.h"
#include "support/utf8.h"

namespace cannl {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Eof: return "end of file";
    case Tok::Newline: return "end of statement";
    case Tok::Ident: return "identifier";
    case Tok::Number: return "number";
    case Tok::String: return "string";
    case Tok::Error: return "invalid token";
    case Tok::KwModel: return "'model'";
    case Tok::KwDim: return "'dim'";
    case Tok::KwInput: return "'input'";
    case Tok::KwParam: return "'param'";
    case Tok::KwOutput: return "'output'";
    case Tok::KwMetric: return "'metric'";
    case Tok::KwMinimize: return "'minimize'";
    case Tok::KwWith: return "'with'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Assign: return "'='";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::StarDot: return "'*.'";
    case Tok::Slash: return "'/'";
    case Tok::StarStar: return "'**'";
    case Tok::Pipe: return "'|'";
    case Tok::Arrow: return "'->'";
    case Tok::DotDot: return "'..'";
  }
  return "token";
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Ident: return fmt::format("identifier '{}'", t.text);
    case Tok::Number: return fmt::format("number {}", t.text);
    case Tok::String: return "a string";
    case Tok::Newline: return t.is_semicolon ? "';'" : "end of line";
    default: return tok_name(t.kind);
  }
}

// After these tokens a newline does not end the statement (contract §2).
bool continues_line(Tok t) {
  switch (t) {
    case Tok::Plus: case Tok::Minus: case Tok::Star: case Tok::StarDot: case Tok::Slash:
    case Tok::StarStar: case Tok::Comma: case Tok::Assign: case Tok::Arrow: case Tok::Pipe:
      return true;
    default:
      return false;
  }
}

namespace {

const std::unordered_map<std::string_view, Tok> kKeywords = {
    {"model", Tok::KwModel},   {"dim", Tok::KwDim},       {"input", Tok::KwInput},
    {"param", Tok::KwParam},   {"output", Tok::KwOutput}, {"metric", Tok::KwMetric},
    {"minimize", Tok::KwMinimize}, {"with", Tok::KwWith},
};


class Lexer {
public:
  Lexer(const SourceFile& f, DiagEngine& d) : src_(f.text()), diags_(d) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else if (c == '\n') {
        newline(pos_, false);
        ++pos_;
      } else if (c == ';') {
        newline(pos_, true);
        ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        ident();
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '"') {
        string();
      } else {
        punct();
      }
    }
    // The end of the file is reported right after the last token, not on a blank line below.
    size_t end = toks_.empty() ? 0 : toks_.back().range.end;
    newline(end, false);
    push(Tok::Eof, end, end);
    return std::move(toks_);
  }

private:
  void push(Tok k, size_t b, size_t e, std::string text = {}) {
    Token t;
    t.kind = k;
    t.range = {static_cast<uint32_t>(b), static_cast<uint32_t>(e)};
    t.text = std::move(text);
    if (k == Tok::LParen || k == Tok::LBracket) ++depth_;
    if ((k == Tok::RParen || k == Tok::RBracket) && depth_ > 0) --depth_;
    toks_.push_back(std::move(t));
  }

  void newline(size_t at, bool semicolon) {
    if (semicolon) {
      // ';' always ends a statement, even inside brackets (recovery is easier that way).
    } else {
      // Inside ( ) or [ ] a newline continues the statement, unless the next line starts a
      // new statement with a keyword: then the bracket was never closed, and ending here
      // lets the parser report it and go on.
      bool continues = depth_ > 0 || (!toks_.empty() && continues_line(toks_.back().kind));
      if (continues && !next_line_starts_statement(at)) return;
      depth_ = 0;
    }
    if (toks_.empty() || toks_.back().kind == Tok::Newline) return;
    push(Tok::Newline, at, at + (at < src_.size() ? 1 : 0));
    toks_.back().is_semicolon = semicolon;
    if (semicolon) depth_ = 0;
  }

  bool next_line_starts_statement(size_t at) const {
    size_t p = at + 1;
    if (p >= src_.size()) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\r')) ++p;
    size_t b = p;
    while (p < src_.size() && std::isalpha(static_cast<unsigned char>(src_[p]))) ++p;
    auto it = kKeywords.find(std::string_view(src_).substr(b, p - b));
    return it != kKeywords.end() && it->second != Tok::KwWith;
  }

  void ident() {
    size_t b = pos_;
    while (pos_ < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
      ++pos_;
    std::string_view word = std::string_view(src_).substr(b, pos_ - b);
    auto it = kKeywords.find(word);
    push(it != kKeywords.end() ? it->second : Tok::Ident, b, pos_, std::string(word));
  }

  // 12, 0.5, 1e-3, 2.5e+4. A malformed number (1e, 1.2.3, 12abc) is one error token.
  void number() {
    size_t b = pos_;
    bool is_int = true, bad = false;
    auto digits = [&] {
      size_t s = pos_;
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      return pos_ > s;
    };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && src_[pos_ + 1] != '.') {
      ++pos_;
      is_int = false;
      if (!digits()) bad = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      ++pos_;
      is_int = false;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (!digits()) bad = true;
    }
    // Glued trailing characters make the whole thing malformed: 1.2.3, 3x, 1e5e.
    while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) ||
                                  src_[pos_] == '_' ||
                                  (src_[pos_] == '.' && pos_ + 1 < src_.size() &&
                                   std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))))) {
      ++pos_;
      bad = true;
    }
    std::string text = src_.substr(b, pos_ - b);
    if (bad) {
      diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(pos_)},
                   fmt::format("malformed number '{}' (expected a number like 12, 0.5, 1e-3 "
                               "or 2.5e+4)", text));
    }
    if (bad) {
      push(Tok::Error, b, pos_, text);  // (its spelling: a repeat count, parser.cpp)
      return;
    }
    double value = std::strtod(text.c_str(), nullptr);
    SourceRange r{static_cast<uint32_t>(b), static_cast<uint32_t>(pos_)};
    if (is_int && (text.size() > 15 || !std::isfinite(value))) {
      diags_.error(r, fmt::format("integer '{}' is too large", text));
      push(Tok::Error, b, pos_, text);
      return;
    }
    if (!std::isfinite(value)) {
      diags_.error(r, fmt::format("number '{}' is out of range", text));
      push(Tok::Error, b, pos_, text);
      return;
    }
    push(Tok::Number, b, pos_, text);
    toks_.back().number = value;
    toks_.back().is_integer = is_int;
  }

  void string() {
    size_t b = pos_++;
    size_t s = pos_;
    while (pos_ < src_.size() && src_[pos_] != '"' && src_[pos_] != '\n') ++pos_;
    if (pos_ >= src_.size() || src_[pos_] != '"') {
      diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(b + 1)},
                   "unterminated string (expected a closing '\"' on the same line)");
      push(Tok::Error, b, pos_);
      return;
    }
    std::string text = src_.substr(s, pos_ - s);
    ++pos_;
    push(Tok::String, b, pos_, std::move(text));
  }

  // `x.T`, `x.mean()`: PyTorch's attributes and methods, which cannl spells otherwise. One
  // error token for the dot, the word and an argument list `(...)` on the same line. After a
  // PyTorch module (`torch.cat(a, b)`, `F.silu(x)`, `torch.nn.functional.gelu(x)`) the token
  // takes the module names too, and the message the cannl spelling (spec/pytorch_names.h).
  void attribute() {
    size_t b = pos_++;
    size_t w = pos_;
    while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    const bool module = !toks_.empty() && toks_.back().kind == Tok::Ident && toks_.back().range.end == b &&
                        is_pytorch_module(toks_.back().text);
    if (module) {  // the rest of a dotted path: torch.nn.functional.gelu
      auto word_char = [&](size_t i) { return std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_'; };
      while (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
             (std::isalpha(static_cast<unsigned char>(src_[pos_ + 1])) || src_[pos_ + 1] == '_')) {
        w = ++pos_;
        while (pos_ < src_.size() && word_char(pos_)) ++pos_;
      }
    }
    const std::string word = src_.substr(w, pos_ - w);
    bool method = pos_ < src_.size() && src_[pos_] == '(';
    if (method) {
      size_t e = pos_, depth = 0;
      for (; e < src_.size() && src_[e] != '\n'; ++e) {
        if (src_[e] == '(') ++depth;
        if (src_[e] == ')' && --depth == 0) break;
      }
      if (e < src_.size() && src_[e] == ')') pos_ = e + 1;
      else method = false;
    }
    const std::string x = !toks_.empty() && toks_.back().kind == Tok::Ident ? toks_.back().text : "x";
    std::string msg;
    if (module) {  // one token from the module's name on
      b = toks_.back().range.begin;
      toks_.pop_back();
      const size_t open = method ? src_.find('(', w) : pos_;
      msg = method ? pytorch_call_message(src_.substr(b, open - b), word, src_.substr(open + 1, pos_ - open - 2))
                   : fmt::format("'{}' is PyTorch, not cannl: cannl has no modules", src_.substr(b, pos_ - b));
    } else if (word == "T" || word == "mT" || word == "t" || word == "transpose" || word == "permute")
      msg = fmt::format("'.{}' is not cannl: there is no transpose; '*' contracts the left operand's input axes "
                        "with the right operand's output axes (w * x applies w : [i -> o]), so write the product "
                        "the other way round, or transpose with einsum(\"i -> o => o -> i\", {})", word, x);
    else if (method)
      msg = fmt::format("'.{}()' is not cannl: there are no methods; call the built-in on the tensor, e.g. {}({})",
                        word, word, x);
    else
      msg = fmt::format("'.{}' is not cannl: tensors have no attributes", word);
    diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(pos_)}, msg);
    push(Tok::Error, b, pos_);
  }

  void punct() {
    size_t b = pos_;
    char c = src_[pos_];
    char n = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
    auto two = [&](Tok k) { pos_ += 2; push(k, b, pos_); };
    auto one = [&](Tok k) { pos_ += 1; push(k, b, pos_); };
    switch (c) {
      case '(': return one(Tok::LParen);
      case ')': return one(Tok::RParen);
      case '[': return one(Tok::LBracket);
      case ']': return one(Tok::RBracket);
      case ',': return one(Tok::Comma);
      case ':': return one(Tok::Colon);
      case '=': return one(Tok::Assign);
      case '+': return one(Tok::Plus);
      case '/': return one(Tok::Slash);
      case '|': return one(Tok::Pipe);
      case '-': return n == '>' ? two(Tok::Arrow) : one(Tok::Minus);
      case '*':
        if (n == '*') return two(Tok::StarStar);
        if (n == '.') return two(Tok::StarDot);
        return one(Tok::Star);
      case '.':
        if (n == '.') {
          if (pos_ + 2 < src_.size() && src_[pos_ + 2] == '.') {
            diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(b + 3)},
                         "'...' is only valid inside an einsum string; in a shape write '..'");
            pos_ += 3;
            push(Tok::DotDot, b, pos_);
            return;
          }
          return two(Tok::DotDot);
        }
        if (std::isalpha(static_cast<unsigned char>(n)) || n == '_') return attribute();
        break;
      case '@':
        diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(b + 1)},
                     "unexpected character '@': the matrix product is '*' in cannl (w * x applies w : [i -> o] "
                     "to x; '*.' is the pointwise product)");
        pos_ += 1;
        push(Tok::Error, b, pos_);
        return;
      default: break;
    }
    // An unexpected character: report it (a whole UTF-8 sequence at once, or one byte that is
    // not UTF-8, shown escaped like a control character) and skip it.
    size_t e = b + utf8_char_length(src_, b);
    diags_.error({static_cast<uint32_t>(b), static_cast<uint32_t>(e)},
                 fmt::format("unexpected character '{}'",
                             printable_char(std::string_view(src_).substr(b, e - b))));
    pos_ = e;
    push(Tok::Error, b, e);
  }

  const std::string& src_;
  DiagEngine& diags_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> lex(const SourceFile& file, DiagEngine& diags) {
  return Lexer(file, diags).run();
}

}  // namespace cannl
