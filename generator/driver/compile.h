// compile.h — the whole pipeline of `cannl gen`, in one function (compile.cpp reads top to
// bottom: front end, lowering, routine assembly, autodiff, the optimiser, every pass, emission
// and the model card).
//
// Takes a spec's text and the generation options (already checked: driver/gen.cpp).
// Guarantees: the files of the chosen target, or diagnostics and a non-zero status; after each
// stage the hook sees the stage's name and a printer of its result (tokens, ast, shapes, then
// the loop IR), so any stage can be dumped; with `verify_ir`, the IR verifier (ir/verify.h)
// checks the program after every IR stage (lower, routines, autodiff, optimizer, each pass)
// and a failure is an internal error naming the stage. Nothing is written to disk here.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emit/c_emit.h"
#include "ir/ir.h"

namespace cannl {

// The IR verifier's default: on in debug builds, off in release ones (where `cannl gen
// --verify-ir` or CANNL_VERIFY_IR=1 turns it on: driver/gen.cpp).
#ifdef NDEBUG
constexpr bool kVerifyIrByDefault = false;
#else
constexpr bool kVerifyIrByDefault = true;
#endif

// `--embed-format auto`: params of more bytes than this go to <model>_weights.bin (.incbin).
constexpr size_t kIncbinBytes = size_t{16} << 20;

struct CompileOptions {
  std::string target = "c";          // back end: "c" or "cuda"
  bool f64 = false;                  // element type double
  std::string precision = "fp32";    // f32: the products' arithmetic: fp32, tf32 (CUDA) or bf16
  long max_batch = 256;
  int opt_level = 2;                 // -O0, -O1, -O2 (passes/pipeline.h)
  std::set<std::string> disabled;    // passes not to run
  bool blas = false;                 // C: contractions call cblas
  std::string weights;               // C: a checkpoint to compile in (--embed), "" for none
  bool embed = false;                // C: the params compiled in (--embed): from `weights`, else
                                     // from another run's <model>_weights.c (--weights-only)
  std::string name_map;              // the params' names in weights (--name-map), "" for their own
  std::string embed_format = "auto"; // C, with weights: "c", "incbin" or "auto" (GenOptions::embed_format)
  std::string stop_after;            // "" or a stage: stop once it has run (a dump needs no more)
  bool emit = true;                  // false: stop after the passes (--stats, --dump=graph/dot)
  bool keep_before = false;          // keep the program as it was before the passes
  std::map<std::string, long> dims;  // --dim NAME=VALUE: overrides of the spec's dims
  bool verify_ir = kVerifyIrByDefault;  // run the IR verifier after every IR stage
  bool roll = true;                  // repeat blocks rolled (lower/roll.h; the C target only for now)
  std::string quantize;              // C, f32: "int8" keeps the forward-only state's weights as int8 rows
};

struct Compiled {
  ir::Program before;                // before the passes (with keep_before)
  ir::Program prog;                  // after the last stage run
  std::vector<std::string> passes;   // the passes that ran, in order
  std::vector<OutputFile> files;     // the target's files and the model card (with emit)
};

// After each stage: its name and the printer of its result.
using StageHook = std::function<void(const std::string& stage, const std::function<std::string()>& print)>;

// The stages whose result `--dump` can print, in order: tokens, ast, shapes, lower, routines,
// autodiff, optimizer, then the passes (passes/pipeline.h).
std::vector<std::string> stage_names();

// Exit status: 0 ok, 1 the spec (or the checkpoint to embed) has errors, 3 an internal error.
int compile(const std::string& path, const std::string& text, const CompileOptions& o, Compiled& out,
            std::ostream& err, bool color, const StageHook& hook = {});

}  // namespace cannl
