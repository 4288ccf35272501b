// commands.h — the `cannl` subcommands, callable in-process (the tests do).
//
// Each returns the process exit status: 0 success, 1 the spec has errors, 2 bad usage
// (unreadable file, bad option). Output goes to `out`, diagnostics to `err`.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace cannl {

struct CheckOptions {
  bool json = false;
  std::string dump;  // "", "tokens", "ast", "shapes"
  bool color = false;
  std::map<std::string, long> dims;  // --dim NAME=VALUE: overrides of the spec's dims
};

// One `--dim NAME=VALUE` into `dims`; false with a message naming it when NAME is no
// identifier, VALUE no positive integer, or NAME given twice.
bool parse_dim_override(const std::string& arg, std::map<std::string, long>& dims, std::string& error);

int check_text(const std::string& path, const std::string& text, const CheckOptions& opt,
               std::ostream& out, std::ostream& err);
int check_file(const std::string& path, const CheckOptions& opt, std::ostream& out, std::ostream& err);

bool read_file(const std::string& path, std::string& text, std::string& error);

}  // namespace cannl

namespace cannl {

struct GenOptions {
  std::string out_dir;     // where the files go (may be empty with `dump`)
  std::string dtype = "f32";
  std::string target = "c";  // back end: c or cuda
  std::string precision;   // --precision (f32): fp32, tf32 (cuda) or bf16 products; "" = not given (fp32)
  long max_batch = 256;
  std::string dump;        // "", or a stage to print: tokens, ast, shapes, graph, ir, ir:STAGE, dot
  std::string weights;     // with embed: a safetensors checkpoint to compile in
  std::string name_map;    // with weights: the params' names in it (`cannl_name = file.key` lines)
  bool embed = false;
  // Params compiled in, the model and the weights written by two runs (cmake/Cannl.cmake's
  // WEIGHTS), so that a new checkpoint recompiles one file: weights_apart writes every file
  // but <model>_weights.c (no checkpoint read), weights_only (with weights and embed) that one.
  bool weights_apart = false;
  bool weights_only = false;
  // How --embed compiles the values in: "c" printed arrays, "incbin" <model>_weights.bin (the
  // assembler's .incbin), "auto" incbin above kIncbinBytes of params.
  std::string embed_format = "auto";
  bool color = false;
  int opt_level = 2;       // -O0, -O1, -O2 (passes/pipeline.h)
  std::vector<std::string> disabled_passes;  // --disable-pass=NAME
  bool stats = false;      // --stats: print the routines' costs before and after the passes
  bool json = false;       // with stats: as JSON
  bool blas = false;       // contractions call cblas (link a CBLAS, e.g. OpenBLAS)
  std::map<std::string, long> dims;  // --dim NAME=VALUE: overrides of the spec's dims
  bool time_stages = false;  // --time: each stage's wall time on stderr
  bool verify_ir = false;    // --verify-ir: the IR verifier after every stage (also CANNL_VERIFY_IR=1)
  bool no_roll = false;      // --no-roll: every repeat block expanded instance by instance (lower/roll.h)
  std::string quantize;      // --quantize int8: the forward-only state's weights as int8 rows ("" none)
};

// `cannl gen --passes`: the passes in their order, with the level that runs each.
std::string pass_listing();

// `cannl gen SPEC -o DIR`: writes DIR/<model>.h, <model>.c, <model>_inference.c,
// <model>_train.c, <model>_infer.c, <model>.json (the model card), CMakeLists.txt and, with
// --weights CKPT --embed, <model>_weights.c (--target cuda: <model>.h, <model>.cu, <model>_train.cu,
// <model>_infer.cu, CMakeLists.txt). --weights-apart writes all of the embedded model's files
// but <model>_weights.c, which --weights CKPT --embed --weights-only writes alone; neither
// removes the other's. Nothing is written when the spec has errors or the checkpoint does not
// fit it (exit status 1); files are replaced atomically (a new directory appears whole).
int gen_file(const std::string& path, const GenOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace cannl

namespace cannl {

struct PlotOptions {
  std::string log;    // a metrics JSONL (the training program's --metrics)
  std::string out;    // the SVG to write
  std::string title;  // default: the log's file name
};

// `cannl plot METRICS.jsonl -o curve.svg`: loss, metric and learning-rate curves over the steps of
// a training run, as one SVG. 0 ok, 1 a malformed log (the line named), 2 unreadable or unwritable.
int plot_file(const PlotOptions& opt, std::ostream& err);
// What plot_file draws, from the log's text: 0 with the SVG, or 1 with `error` (one line
// naming `path`: a line that is not a JSON object, or nothing to draw). `title` heads the
// page (empty: the log's file name). No file is read or written (the fuzzing harness's entry).
int plot_svg(const std::string& path, const std::string& text, const std::string& title, std::string& svg,
             std::string& error);

}  // namespace cannl
