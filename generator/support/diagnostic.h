// diagnostic.h — the one type for every message cannl prints about a spec.
//
// A Diagnostic has a severity, a kind (the user's mistake, a feature not supported yet, or
// a bug in cannl itself), a range in the spec, a message, and attached notes. The engine
// collects them (up to a limit), and renders each as
//
//   specs/m.cannl:3:7: error: unknown tensor 'W'
//       3 | h = W * x
//         |     ^
//
// Library code never exits: stages report here and return; the driver decides the exit code.
#pragma once

#include <stdexcept>

#include <iosfwd>
#include <string>
#include <vector>

#include "support/source.h"

namespace cannl {

enum class Severity { Error, Warning, Note };
enum class DiagKind { User, Unsupported, Internal };

struct Diagnostic {
  Severity severity = Severity::Error;
  DiagKind kind = DiagKind::User;
  SourceRange range;
  bool has_range = true;
  std::string message;
  std::vector<Diagnostic> notes;
};

class DiagEngine {
public:
  explicit DiagEngine(const SourceFile& file, int max_errors = 20)
      : file_(file), max_errors_(max_errors) {}

  Diagnostic& error(SourceRange r, std::string msg);
  Diagnostic& unsupported(SourceRange r, std::string msg);
  Diagnostic& warning(SourceRange r, std::string msg);
  // A bug in cannl: carries the generator's own file:line.
  Diagnostic& internal(SourceRange r, std::string msg, const char* file, int line);
  static void note(Diagnostic& d, SourceRange r, std::string msg);
  static void note(Diagnostic& d, std::string msg);  // a note without a location
  // The same note on every diagnostic reported since all().size() was `first`.
  void note_since(size_t first, SourceRange r, const std::string& msg);

  bool has_errors() const { return error_count_ > 0; }
  int error_count() const { return error_count_; }
  // Past the limit further errors are counted but not kept; stages may stop early.
  bool too_many() const { return error_count_ >= max_errors_; }
  const std::vector<Diagnostic>& all() const { return diags_; }
  const SourceFile& file() const { return file_; }

  void render(std::ostream& os, bool color = false) const;
  std::string render_one(const Diagnostic& d, bool color = false) const;

private:
  Diagnostic& add(Severity s, DiagKind k, SourceRange r, std::string msg);
  const SourceFile& file_;
  int max_errors_;
  int error_count_ = 0;
  std::vector<Diagnostic> diags_;
  Diagnostic overflow_;  // sink for errors past the limit
};

#define CANNL_INTERNAL(engine, range, msg) (engine).internal((range), (msg), __FILE__, __LINE__)

// A bug in the generator found after the front end (no source location to point at): thrown
// by CANNL_BUG, caught once in the driver, reported as an internal error with the
// generator's file:line.
struct InternalError : std::logic_error {
  InternalError(const std::string& msg, const char* file, int line)
      : std::logic_error(msg + " (at " + file + ":" + std::to_string(line) + ")") {}
};
#define CANNL_BUG(msg) throw ::cannl::InternalError((msg), __FILE__, __LINE__)

}  // namespace cannl
