// c_emit.h — the C back end: a Program as plain C11 source.
//
// Takes: a Program from build_program. Guarantees: the files of generated/<model>/ —
// <model>.h (the C API), <model>.c (routines + API), <model>_train.c (the training program)
// and CMakeLists.txt — rendered from templates/c/*.mustache, the loop nests printed with
// constant bounds and strides, one comment per nest naming its spec line, OpenMP pragmas on
// parallel loops (through CANNL_PRAGMA, so the code compiles without OpenMP too), and
// vectorisable accumulations in a local variable. Warning-free at -std=c11 -Wall -Wextra
// -Wpedantic with gcc and clang.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct COptions {
  bool f64 = false;       // element type double instead of float
  std::string spec;       // the spec's path as shown in comments
  bool blas = false;      // contractions call cblas_?gemm instead of the generated kernel
};

struct OutputFile {
  std::string name;
  std::string text;
};

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt);

// The templates of templates/, compiled into the generator (templates.cpp is generated).
const std::string& template_text(const std::string& name);

}  // namespace cannl
