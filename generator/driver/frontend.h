// frontend.h — the front end as one call: lex → parse → resolve → infer shapes.
//
// Each stage runs only if the previous one reported no error (so one mistake does not cause
// a cascade), except that lexing and parsing errors are reported together.
#pragma once

#include <memory>
#include <string>

#include "shapes/infer.h"
#include "spec/ast.h"
#include "spec/model.h"
#include "spec/token.h"
#include "support/diagnostic.h"

namespace cannl {

struct Frontend {
  Frontend(std::string path, std::string text) : file(std::move(path), std::move(text)), diags(file) {}
  Frontend(const Frontend&) = delete;
  Frontend& operator=(const Frontend&) = delete;

  SourceFile file;
  DiagEngine diags;
  std::vector<Token> tokens;
  Spec spec;
  Model model;
  ShapeInfo shapes;
  bool ok() const { return !diags.has_errors(); }
};

enum class Stage { Tokens, Ast, Model, Shapes };

std::unique_ptr<Frontend> run_frontend(std::string path, std::string text, Stage last = Stage::Shapes);

// The `shapes` dump: every tensor's shape, then its sub-expressions' (post-order).
std::string print_shapes(const Frontend& fe);

}  // namespace cannl
