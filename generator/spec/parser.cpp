#include "spec/parser.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "ops/op_table.h"
#include "spec/lexer.h"

namespace cannl {

const char* expr_op_spelling(ExprKind k) {
  switch (k) {
    case ExprKind::Add: return "+";
    case ExprKind::Sub: return "-";
    case ExprKind::MatMul: return "*";
    case ExprKind::Mul: return "*.";
    case ExprKind::Div: return "/";
    case ExprKind::Pow: return "**";
    case ExprKind::Neg: return "-";
    default: return "";
  }
}

namespace {

struct SyntaxError {};  // thrown after the diagnostic is reported; caught per statement

class Parser {
public:
  Parser(const std::vector<Token>& t, DiagEngine& d) : toks_(t), diags_(d) {}

  Spec run() {
    Spec spec;
    // The repeat blocks open at this point, innermost last: statements go into its body. (A
    // block's Stmt does not move while it is open: only its own body grows.)
    std::vector<Stmt*> blocks;
    auto target = [&]() -> std::vector<Stmt>& { return blocks.empty() ? spec.stmts : blocks.back()->body; };
    auto open_block = [&](Stmt s) {
      target().push_back(std::move(s));
      blocks.push_back(&target().back());
    };
    while (peek().kind != Tok::Eof) {
      if (peek().kind == Tok::Newline) {
        ++pos_;
        continue;
      }
      if (diags_.too_many()) break;
      size_t start = pos_;
      stmt_start_ = pos_;
      depth_ = 0;  // a statement abandoned deep inside an expression must not count against the next
      if (is_end()) {
        const Token& t = next();
        if (blocks.empty()) {
          diags_.error(t.range, "'end' without a 'repeat' block to close");
        } else {
          blocks.back()->end_range = t.range;
          blocks.pop_back();
        }
        continue;
      }
      try {
        Stmt s = statement();
        s.range = SourceRange::join(toks_[start].range, toks_[pos_ > start ? pos_ - 1 : start].range);
        if (peek().kind != Tok::Newline && peek().kind != Tok::Eof)
          fail(peek(), fmt::format("expected the end of the statement, found {}", describe(peek())));
        if (s.kind == StmtKind::Repeat) {
          if (!blocks.empty())
            diags_.error(toks_[start].range, "nested repeat blocks are not supported: a repeat block cannot "
                                             "contain another one");
          open_block(std::move(s));
        } else {
          target().push_back(std::move(s));
        }
      } catch (const SyntaxError&) {
        remember_broken_names(spec, start);
        if (starts_repeat(start)) {  // still a block: its statements and its `end` belong to it
          Stmt b;
          b.kind = StmtKind::Repeat;
          b.range = toks_[start].range;
          b.broken = true;
          open_block(std::move(b));
        }
        while (peek().kind != Tok::Newline && peek().kind != Tok::Eof) ++pos_;
      }
    }
    for (const Stmt* b : blocks)
      if (!b->broken)
        diags_.error(b->range, "this repeat block has no 'end': write 'end' on a line of its own after its "
                               "last statement");
    return spec;
  }

private:
  void remember_broken_names(Spec& spec, size_t start) const {
    size_t i = start;
    Tok first = toks_[i].kind;
    // `buffer NAME, ...` (a contextual word: `buffer = ...` defines a tensor called buffer)
    bool buffer = first == Tok::Ident && toks_[i].text == "buffer" && i + 1 < toks_.size() &&
                  toks_[i + 1].kind == Tok::Ident;
    if (first == Tok::Ident && !buffer) {
      spec.broken_names.insert(toks_[i].text);
      return;
    }
    if (!buffer && first != Tok::KwParam && first != Tok::KwInput && first != Tok::KwDim && first != Tok::KwMetric)
      return;
    for (++i; i < toks_.size() && toks_[i].kind == Tok::Ident; i += 2) {
      spec.broken_names.insert(toks_[i].text);
      if (i + 1 >= toks_.size() || toks_[i + 1].kind != Tok::Comma) break;
    }
  }

  // An optimiser of `minimize` and its group: `OPT [on WORD | on [NAME, ...]]` (`on` contextual).
  OptGroup opt_group() {
    OptGroup g;
    g.optimizer = expr();
    if (g.optimizer->kind != ExprKind::Call && g.optimizer->kind != ExprKind::Name) {
      diags_.error(g.optimizer->range, "expected an optimiser such as sgd(lr = 0.1) or "
                                       "adam(lr = 1e-3) after 'with'");
      throw SyntaxError{};
    }
    if (!(peek().kind == Tok::Ident && peek().text == "on")) return g;
    next();
    g.has_on = true;
    const uint32_t begin = peek().range.begin;
    if (accept(Tok::LBracket)) {
      g.names.push_back(name("a param name in the group's list ([w1, w2])"));
      while (accept(Tok::Comma)) g.names.push_back(name("a param name after ','"));
      g.range = {begin, peek().range.end};
      expect(Tok::RBracket, "']' closing the group's list of params");
    } else {
      g.word = name("a group after 'on': matrices, embeddings, vectors, others or [NAME, ...]");
      g.range = g.word.range;
    }
    return g;
  }

  // `repeat COUNT ...` (contextual: `repeat = ...` defines a tensor called repeat). A count the
  // lexer refused (an integer too large) still starts the block, so that its body and `end` do
  // not each report an error of their own.
  bool starts_repeat(size_t i) const {
    return toks_[i].kind == Tok::Ident && toks_[i].text == "repeat" && i + 1 < toks_.size() &&
           (toks_[i + 1].kind == Tok::Ident || toks_[i + 1].kind == Tok::Number ||
            (toks_[i + 1].kind == Tok::Error && !toks_[i + 1].text.empty() &&
             std::isdigit(static_cast<unsigned char>(toks_[i + 1].text[0]))));
  }
  // `end` alone on its line closes a repeat block (contextual too).
  bool is_end() const {
    return peek().kind == Tok::Ident && peek().text == "end" &&
           (peek(1).kind == Tok::Newline || peek(1).kind == Tok::Eof);
  }

  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  // Reports a syntax error, unless the statement holds a lexical error (already reported).
  [[noreturn]] void fail(const Token& at, std::string msg) {
    if (!statement_has_lexical_error()) {
      Diagnostic& d = diags_.error(at.range, std::move(msg));
      note_continuation(d, at);
    }
    throw SyntaxError{};
  }
  // An error on a line that the statement reached because the line before ended in '=', an
  // operator or ',' (param w : [3 -> 2] = <newline> y = w * x): a note at that token.
  void note_continuation(Diagnostic& d, const Token& at) const {
    if (&at < toks_.data() + stmt_start_ || &at >= toks_.data() + toks_.size()) return;
    auto line = [&](const Token& t) { return diags_.file().line_col(t.range.begin).line; };
    size_t i = static_cast<size_t>(&at - toks_.data());
    while (i > stmt_start_ && line(toks_[i - 1]) == line(at)) --i;  // the first token of at's line
    if (i == stmt_start_ || !continues_line(toks_[i - 1].kind)) return;
    const Token& prev = toks_[i - 1];
    DiagEngine::note(d, prev.range, fmt::format("the statement goes on to the next line after this trailing {}",
                                                tok_name(prev.kind)));
  }
  // A bracket left open: the error is at the token found instead of the closing one, with a
  // note at the bracket (clang's "to match this '('").
  [[noreturn]] void fail_unclosed(const Token& open, std::string msg) {
    if (!statement_has_lexical_error()) {
      Diagnostic& d = diags_.error(peek().range, std::move(msg));
      DiagEngine::note(d, open.range, fmt::format("to match this {}", tok_name(open.kind)));
    }
    throw SyntaxError{};
  }
  bool statement_has_lexical_error() const {
    for (size_t i = stmt_start_; i < toks_.size() && toks_[i].kind != Tok::Newline; ++i)
      if (toks_[i].kind == Tok::Error) return true;
    return false;
  }
  const Token& expect(Tok k, const char* what) {
    if (peek().kind != k) fail(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  NameRef name(const char* what) {
    const Token& t = peek();
    if (t.kind != Tok::Ident) {
      if (t.kind >= Tok::KwModel && t.kind <= Tok::KwWith)
        fail(t, fmt::format("expected {}, found the keyword {} (keywords cannot be names)", what,
                            tok_name(t.kind)));
      fail(t, fmt::format("expected {}, found {}", what, describe(t)));
    }
    next();
    return {t.text, t.range};
  }

  Stmt statement() {
    Stmt s;
    const Token& t = peek();
    switch (t.kind) {
      case Tok::KwModel:
        next();
        s.kind = StmtKind::Model;
        s.names.push_back(name("a model name after 'model'"));
        return s;
      case Tok::KwDim: {
        next();
        s.kind = StmtKind::Dim;
        s.names.push_back(name("a dim name after 'dim'"));
        expect(Tok::Assign, "'=' after the dim name (dim NAME = INT)");
        const Token& v = peek();
        if (v.kind != Tok::Number) fail(v, fmt::format("expected a positive integer size for dim '{}', found {}",
                                                       s.names[0].name, describe(v)));
        s.dim_value = static_cast<long>(v.number);
        if (!v.is_integer || v.number < 1) {  // reported; the dim stays defined (as 1) so uses do not cascade
          diags_.error(v.range, fmt::format("expected a positive integer size for dim '{}', found {}",
                                            s.names[0].name, describe(v)));
          s.dim_value = 1;
        }
        next();
        s.dim_value_range = v.range;
        return s;
      }
      case Tok::KwInput:
        next();
        s.kind = StmtKind::Input;
        s.names.push_back(name("an input name after 'input'"));
        expect(Tok::Colon, "':' and a shape after the input name (input NAME : [784])");
        s.shape = shape();
        if (peek().kind == Tok::Ident && peek().text == "int") {  // contextual: integer ids
          s.is_int = true;
          s.int_range = next().range;
        } else if (peek().kind == Tok::Ident) {
          fail(peek(), fmt::format("expected 'int' (integer values) or the end of the statement after the "
                                   "input's shape, found {}", describe(peek())));
        }
        return s;
      case Tok::KwParam:
        next();
        s.kind = StmtKind::Param;
        s.names.push_back(name("a parameter name after 'param'"));
        while (accept(Tok::Comma)) s.names.push_back(name("a parameter name after ','"));
        if (accept(Tok::Colon)) s.shape = shape();
        if (accept(Tok::Assign)) s.expr = expr();
        frozen_word(s);
        return s;
      case Tok::KwOutput:
        next();
        s.kind = StmtKind::Output;
        s.names.push_back(name("a tensor name after 'output'"));
        while (accept(Tok::Comma)) s.names.push_back(name("a tensor name after ','"));
        return s;
      case Tok::KwMetric:
        next();
        s.kind = StmtKind::Metric;
        s.names.push_back(name("a metric name after 'metric'"));
        expect(Tok::Assign, "'=' after the metric name (metric NAME = EXPR)");
        s.expr = expr();
        return s;
      case Tok::KwMinimize:
        next();
        s.kind = StmtKind::Minimize;
        s.names.push_back(name("the name of the loss after 'minimize'"));
        expect(Tok::KwWith, "'with' and an optimiser (minimize loss with sgd(lr = 0.1))");
        s.groups.push_back(opt_group());
        s.optimizer = s.groups.front().optimizer.get();
        while (accept(Tok::Comma)) {
          // `, OPT on GROUP` (v2 §5) until the first `, NAME = VALUE` option
          if (s.options.empty() && !(peek().kind == Tok::Ident && peek(1).kind == Tok::Assign)) {
            s.groups.push_back(opt_group());
            continue;
          }
          NameRef opt = name("a training option after ',' (schedule = ..., clip_grad_norm = ...)");
          expect(Tok::Assign, fmt::format("'=' after '{}' ({} = VALUE)", opt.name, opt.name).c_str());
          s.options.emplace_back(opt, expr());
        }
        return s;
      case Tok::Ident:
        if (starts_repeat(pos_)) return repeat_header();
        if (t.text == "buffer" && peek(1).kind == Tok::Ident) {  // contextual: buffer NAME : SHAPE = INIT
          next();
          s.kind = StmtKind::Param;
          s.is_buffer = true;
          s.names.push_back(name("a buffer name after 'buffer'"));
          while (accept(Tok::Comma)) s.names.push_back(name("a buffer name after ','"));
          expect(Tok::Colon, "':' and a shape after the buffer name (buffer NAME : [4] = zeros)");
          s.shape = shape();
          expect(Tok::Assign, "'=' and an initialiser after the buffer's shape (buffer NAME : [4] = zeros)");
          s.expr = expr();
          if (peek().kind == Tok::Ident)
            fail(peek(), fmt::format("expected the end of the statement after the buffer's initialiser, found {} "
                                     "(a buffer is never trained: no 'frozen' needed)", describe(peek())));
          return s;
        }
        s.kind = StmtKind::Define;
        s.names.push_back(name("a name"));
        if (peek().kind != Tok::Assign)
          fail(peek(), fmt::format("expected '=' after '{}' (a statement is NAME = EXPR or starts "
                                   "with model, dim, input, param, output, metric or minimize), "
                                   "found {}", s.names[0].name, describe(peek())));
        next();
        s.expr = expr();
        return s;
      case Tok::KwWith:
        fail(t, "'with' must follow 'minimize NAME'");
      default:
        fail(t, fmt::format("expected a statement (NAME = EXPR, or one starting with model, dim, "
                            "input, param, output, metric or minimize), found {}", describe(t)));
    }
  }

  // `frozen` closing a param statement (contextual).
  void frozen_word(Stmt& s) {
    if (peek().kind != Tok::Ident) return;
    if (peek().text != "frozen")
      fail(peek(), fmt::format("expected 'frozen' or the end of the statement after the param's initialiser, "
                               "found {}", describe(peek())));
    next();
    s.frozen = true;
  }

  // repeat [INDEX in] COUNT [carry NAME, ...]   (COUNT: a dim name or a positive integer)
  Stmt repeat_header() {
    Stmt s;
    s.kind = StmtKind::Repeat;
    next();  // 'repeat'
    if (peek().kind == Tok::Ident && peek(1).kind == Tok::Ident && peek(1).text == "in") {
      s.index = {peek().text, peek().range};  // repeat t in T: the instance index
      next();
      next();
    }
    const Token& c = next();
    if (c.kind == Tok::Number) {
      if (!c.is_integer || c.number < 1)
        fail(c, fmt::format("the count of a repeat block must be a positive integer or a dim name, found {}",
                            describe(c)));
      s.dim_value = static_cast<long>(c.number);
      s.count.range = c.range;
    } else if (c.kind == Tok::Error) {  // reported by the lexer: one instance, so nothing else is
      s.dim_value = 1;
      s.count.range = c.range;
    } else {
      s.count = {c.text, c.range};
    }
    if (peek().kind == Tok::Ident && peek().text == "carry") {
      next();
      s.names.push_back(name("a tensor name after 'carry'"));
      while (accept(Tok::Comma)) s.names.push_back(name("a tensor name after ','"));
    } else if (peek().kind != Tok::Newline && peek().kind != Tok::Eof) {
      fail(peek(), fmt::format("expected 'carry NAME' or the end of the line after 'repeat {}', found {}", c.text,
                               describe(peek())));
    }
    return s;
  }

  // [ BATCH | INPUT -> OUTPUT ], each part a comma-separated list of axes.
  ShapeSpec shape() {
    ShapeSpec sh;
    const Token& open = expect(Tok::LBracket, "a shape in brackets, like [784] or [784 -> 512]");
    std::vector<AxisSpec> cur;
    bool seen_pipe = false, seen_arrow = false;
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::RBracket) break;
      if (t.kind == Tok::Pipe) {
        if (seen_pipe || seen_arrow)
          fail(t, seen_pipe ? "a shape has at most one '|'" : "'|' must come before '->' in a shape");
        seen_pipe = true;
        next();
        sh.parts[0] = std::move(cur);
        cur.clear();
        continue;
      }
      if (t.kind == Tok::Arrow) {
        if (seen_arrow) fail(t, "a shape has at most one '->'");
        seen_arrow = true;
        next();
        sh.parts[1] = std::move(cur);
        cur.clear();
        continue;
      }
      if (!cur.empty()) {
        if (peek().kind != Tok::Comma)
          fail_unclosed(open, fmt::format("expected ',' between axes, or one of '|', '->', ']', found {}",
                                          describe(peek())));
        next();
      }
      cur.push_back(axis());
    }
    const Token& close = next();
    sh.parts[2] = std::move(cur);
    sh.range = SourceRange::join(open.range, close.range);
    for (const auto& part : sh.parts) {
      int rows = 0;
      for (const AxisSpec& a : part)
        if (a.kind == AxisSpec::RowVar && ++rows > 1)
          diags_.error(a.range, "'..' may appear only once in each part of a shape");
    }
    return sh;
  }

  // An axis, or a product of sizes and dim names (4 * d), evaluated at resolution.
  AxisSpec axis() {
    AxisSpec a = axis_factor();
    if (peek().kind != Tok::Star) return a;
    AxisSpec p;
    p.kind = AxisSpec::Product;
    p.range = a.range;
    p.factors.push_back(std::move(a));
    while (accept(Tok::Star)) {
      AxisSpec f = axis_factor();
      p.range = SourceRange::join(p.range, f.range);
      p.factors.push_back(std::move(f));
    }
    for (const AxisSpec& f : p.factors)
      if (f.kind != AxisSpec::Size && f.kind != AxisSpec::DimName)
        diags_.error(f.range, fmt::format("a product in a shape multiplies sizes and dim names, not '{}'",
                                          f.kind == AxisSpec::RowVar ? ".." : "_"));
    return p;
  }

  AxisSpec axis_factor() {
    const Token& t = peek();
    AxisSpec a;
    a.range = t.range;
    if (t.kind == Tok::Number) {
      if (!t.is_integer || t.number < 1)
        fail(t, fmt::format("an axis size must be a positive integer, found {}", t.text));
      a.kind = AxisSpec::Size;
      a.size = static_cast<long>(t.number);
    } else if (t.kind == Tok::Ident) {
      a.kind = t.text == "_" ? AxisSpec::Wildcard : AxisSpec::DimName;
      a.name = t.text;
    } else if (t.kind == Tok::DotDot) {
      a.kind = AxisSpec::RowVar;
    } else {
      fail(t, fmt::format("expected an axis (a size like 784, a dim name, '_' or '..'), found {}",
                          describe(t)));
    }
    next();
    return a;
  }

  ExprPtr make(ExprKind k, SourceRange r) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->range = r;
    return e;
  }

  // One level deeper into an expression (the parser recurses; so do the later stages).
  void deeper(const Token& at) {
    if (++depth_ > kMaxNesting)
      fail(at, fmt::format("expression too deep: more than {} levels of parentheses, calls or signs", kMaxNesting));
  }

  // Gives `e` the height of its children plus one, and refuses trees too deep for the later
  // stages: a chain `x + x + ... + x` is built iteratively here but walked recursively after.
  void set_height(Expr& e, const Token& at, int children) {
    e.height = children + 1;
    if (e.height - 1 > kMaxExprOps)  // the operations above the leaf
      fail(at, fmt::format("expression too deep: more than {} operations nested (a chain of operators counts "
                           "one per operator); split it into several statements",
                           kMaxExprOps));
  }

  ExprPtr binary(ExprKind k, const Token& op, ExprPtr a, ExprPtr b) {
    auto e = make(k, SourceRange::join(a->range, b->range));
    set_height(*e, op, std::max(a->height, b->height));
    e->op_range = op.range;
    e->operands.push_back(std::move(a));
    e->operands.push_back(std::move(b));
    return e;
  }

  ExprPtr expr() { return additive(); }

  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token& op = next();
      e = binary(op.kind == Tok::Plus ? ExprKind::Add : ExprKind::Sub, op, std::move(e),
                 multiplicative());
    }
    return e;
  }

  ExprPtr multiplicative() {
    ExprPtr e = unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::StarDot || peek().kind == Tok::Slash) {
      const Token& op = next();
      ExprKind k = op.kind == Tok::Star ? ExprKind::MatMul
                   : op.kind == Tok::StarDot ? ExprKind::Mul : ExprKind::Div;
      e = binary(k, op, std::move(e), unary());
    }
    return e;
  }

  ExprPtr unary() {
    if (peek().kind == Tok::Minus) {
      const Token& op = next();
      deeper(op);
      ExprPtr a = unary();
      --depth_;
      // A negative literal stays a literal: -1 is the number -1.
      if (a->kind == ExprKind::Number) {
        a->number = -a->number;
        a->range = SourceRange::join(op.range, a->range);
        return a;
      }
      auto e = make(ExprKind::Neg, SourceRange::join(op.range, a->range));
      set_height(*e, op, a->height);
      e->op_range = op.range;
      e->operands.push_back(std::move(a));
      return e;
    }
    return power();
  }

  ExprPtr power() {
    ExprPtr base = primary();
    if (peek().kind == Tok::StarStar) {
      const Token& op = next();
      deeper(op);
      ExprPtr ex = unary();
      --depth_;
      return binary(ExprKind::Pow, op, std::move(base), std::move(ex));
    }
    return base;
  }

  ExprPtr primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Number: {
        next();
        auto e = make(ExprKind::Number, t.range);
        e->number = t.number;
        e->is_integer = t.is_integer;
        return e;
      }
      case Tok::String: {
        next();
        auto e = make(ExprKind::String, t.range);
        e->name = t.text;
        return e;
      }
      case Tok::LParen: {
        next();
        deeper(t);
        ExprPtr e = expr();
        --depth_;
        if (peek().kind != Tok::RParen)
          fail_unclosed(t, fmt::format("expected ')' to close the parenthesis, found {}", describe(peek())));
        const Token& close = next();
        e->range = SourceRange::join(t.range, close.range);
        return indexed(std::move(e));
      }
      case Tok::Ident: {
        next();
        if (peek().kind != Tok::LParen) {
          auto e = make(ExprKind::Name, t.range);
          e->name = t.text;
          return indexed(std::move(e));
        }
        return indexed(call(t));
      }
      default:
        if (t.kind >= Tok::KwModel && t.kind <= Tok::KwWith)
          fail(t, fmt::format("expected an expression, found the keyword {}", tok_name(t.kind)));
        fail(t, fmt::format("expected an expression (a name, a number, a call or '('), found {}",
                            describe(t)));
    }
  }

  // a[i], a[i][j]: a whole-number index of the first output axis; a[a:b] a slice of it
  // (whole numbers, a < b); a[t] the instance index t of the enclosing repeat block.
  ExprPtr indexed(ExprPtr base) {
    while (peek().kind == Tok::LBracket) {
      const Token& open = next();
      const Token& i = peek();
      const bool named = i.kind == Tok::Ident;
      if (!named && (i.kind != Tok::Number || !i.is_integer))
        fail(i, fmt::format("expected an index (a whole number like 0) in '[ ]', found {}", describe(i)));
      next();
      long end = 0;
      SourceRange index_range = i.range;
      if (peek().kind == Tok::Colon) {
        next();
        if (named) fail(i, "a slice takes whole numbers only (x[2:5]), not a name");
        const Token& b = peek();
        if (b.kind != Tok::Number || !b.is_integer)
          fail(b, fmt::format("a slice takes whole numbers only (x[2:5]): expected a whole number after ':', "
                              "found {}", describe(b)));
        next();
        if (b.number <= i.number)
          fail(b, fmt::format("a slice x[a:b] needs a < b, not {}:{}", static_cast<long>(i.number),
                              static_cast<long>(b.number)));
        end = static_cast<long>(b.number);
        index_range = SourceRange::join(i.range, b.range);
      }
      if (peek().kind != Tok::RBracket)
        fail_unclosed(open, fmt::format("expected ']' after the index, found {}", describe(peek())));
      const Token& close = next();
      auto e = make(ExprKind::Index, SourceRange::join(base->range, close.range));
      e->op_range = index_range;
      if (named) {
        e->name = i.text;  // resolved per instance (Model)
      } else {
        e->number = i.number;
        e->is_integer = true;
      }
      e->slice_end = end;
      set_height(*e, open, base->height);
      e->operands.push_back(std::move(base));
      base = std::move(e);
    }
    return base;
  }

  ExprPtr call(const Token& callee) {
    const Token& open = next();  // '('
    auto e = make(ExprKind::Call, callee.range);
    e->name = callee.text;
    e->op_range = callee.range;
    bool keyword_seen = false;
    if (peek().kind != Tok::RParen) {
      while (true) {
        Arg a;
        if (peek().kind == Tok::Ident && peek(1).kind == Tok::Assign) {
          a.keyword = peek().text;
          a.keyword_range = peek().range;
          next();
          next();
          keyword_seen = true;
        } else if (keyword_seen) {
          fail(peek(), fmt::format("positional argument after a keyword argument in the call "
                                   "of '{}'", callee.text));
        }
        deeper(peek());
        a.value = expr();
        --depth_;
        if (a.value->kind == ExprKind::String) einsum_arg(*a.value, callee, a.keyword);
        set_height(*e, callee, std::max(e->height - 1, a.value->height));
        e->args.push_back(std::move(a));
        if (!accept(Tok::Comma)) break;
      }
    }
    const Token& close = peek();
    if (close.kind != Tok::RParen)
      fail_unclosed(open, fmt::format("expected ',' or ')' in the call of '{}', found {}", callee.text,
                                      describe(close)));
    next();
    e->range = SourceRange::join(callee.range, close.range);
    return e;
  }

  // A string where the built-in takes an einsum spec (einsum, sum, mean, max, softmax, ...).
  // Other strings (gelu's approximate = "tanh") are option values, checked at resolution.
  void einsum_arg(Expr& str, const Token& callee, const std::string& keyword) {
    const OpInfo* op = find_op(callee.text);
    if (!op) return;
    bool takes_spec = false;
    for (const ArgSig& a : op->args)
      takes_spec = takes_spec || (a.type == ArgType::Spec && (keyword.empty() || keyword == a.name));
    if (!takes_spec) return;
    // The string token's range includes the quotes; contents start one past the quote.
    auto spec = parse_einsum(str.name, str.range.begin + 1, diags_);
    if (!spec) throw SyntaxError{};
    str.einsum = std::move(spec);
  }

  const std::vector<Token>& toks_;
  DiagEngine& diags_;
  size_t pos_ = 0;
  size_t stmt_start_ = 0;
  int depth_ = 0;  // recursion depth of the expression being parsed
  static constexpr int kMaxNesting = 200;
};

}  // namespace

Spec parse(const std::vector<Token>& tokens, DiagEngine& diags) {
  return Parser(tokens, diags).run();
}

}  // namespace cannl
