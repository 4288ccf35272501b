// frontend.h — the front end as one call: lex → parse → resolve → infer shapes.
//
// Each stage runs only if the previous one reported no error (so one mistake does not cause
// a cascade), except that lexing and parsing errors are reported together.
#pragma once

#include <map>
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
  // A --dim NAME=VALUE whose NAME the spec has no dim of: a usage error (exit status 2),
  // reported instead of the spec's diagnostics.
  std::string usage_error;
  bool ok() const { return !diags.has_errors(); }
};

enum class Stage { Tokens, Ast, Model, Shapes };

std::unique_ptr<Frontend> run_frontend(std::string path, std::string text, Stage last = Stage::Shapes,
                                       const std::map<std::string, long>& dims = {});

}  // namespace cannl
