// c_emit.h — the C back end: a Program as plain C11 source.
//
// Takes: a Program after the passes (driver/compile.cpp), its memory laid out
// (passes/plan_layout.cpp: the emitter only prints the layout). Guarantees: the files of generated/<model>/ —
// <model>.h (the C API), <model>.c (routines + API), <model>_inference.c (the forward-only
// state: forward and eval_metrics over the params and the buffers they use, no gradients or
// optimiser state), <model>_train.c and <model>_infer.c (the training and inference
// programs), with embedded weights <model>_weights.c, and CMakeLists.txt — rendered from templates/c/*.mustache, the loop nests printed with
// constant bounds and strides, one comment per nest naming its spec line, OpenMP pragmas on
// parallel loops (through CANNL_PRAGMA, so the code compiles without OpenMP too), and
// vectorisable accumulations in a local variable. Warning-free at -std=c11 -Wall -Wextra
// -Wpedantic with gcc and clang.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

// Trained values to compile into the generated code (`cannl gen --embed`).
struct EmbeddedWeights {
  std::string source;                      // the checkpoint's file name, for comments
  std::string step;                        // its "step" metadata ("" when none)
  std::vector<std::vector<double>> values; // per param (Program::params order), storage order
};

struct COptions {
  bool f64 = false;       // element type double instead of float
  std::string spec;       // the spec's path as shown in comments
  const EmbeddedWeights* weights = nullptr;  // non-null: write <model>_weights.c
  // The params' bytes in <model>_weights.bin, which <model>_weights.c includes with the
  // assembler's .incbin (GCC or Clang, ELF), instead of printed in <model>_weights.c: a
  // compiler parses a printed array at tens of bytes of memory per element (`--embed-format`).
  bool weights_bin = false;
  // The params compiled in (`--embed`; implied by weights): <model>.h declares
  // <model>_infer_create_embedded and <model>_embedded_params, <model>_infer.c runs on them.
  // Without weights their <model>_weights.c is another run's (`cannl gen --weights-only`).
  bool embed = false;
  bool blas = false;      // contractions call cblas_?gemm instead of the generated kernel
  // The products' arithmetic (`--precision`, f32): "fp32", or "bf16": the runtime's bf16 kernel
  // where the CPU has AVX512_BF16 (cannl_gemm_set_precision), fp32 elsewhere, said on stderr.
  std::string precision = "fp32";
};

struct OutputFile {
  std::string name;
  std::string text;
};

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt);

// The templates of templates/, compiled into the generator (templates.cpp is generated).
const std::string& template_text(const std::string& name);

}  // namespace cannl
