// `cannl gen SPEC -o DIR`: checks the options, runs the pipeline (driver/compile.cpp) and prints
// the dump or the stats asked for, or writes the files (driver/output_dir.cpp).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <ostream>
#include <set>

#include "driver/commands.h"
#include "driver/compile.h"
#include "driver/output_dir.h"
#include "driver/stats_dump.h"
#include "ir/ir_print.h"
#include "passes/pipeline.h"

namespace cannl {

namespace {

// The graph view: every buffer, and per routine the nests by the statement they come from.
std::string dump_graph(const ir::Program& p) {
  std::string s = "model " + p.model + "\n\n" + ir::print_buffers(p);
  for (const auto& r : p.routines) {
    s += "\nroutine " + std::string(r.name()) + "\n";
    std::string last;
    for (const auto& st : r.stmts) {
      std::string what = (st.line ? "line " + std::to_string(st.line) + ": " : "") + st.what;
      std::string line = "  " + what + "\n";
      if (line != last) s += line;
      last = line;
      for (const auto& a : st.assigns)
        s += "    -> " + p.buffers[static_cast<size_t>(a.out.buf)].name + " " + ir::accum_symbol(a.accum) + "\n";
      for (int w : st.call ? ir::call_writes(*st.call) : std::vector<int>())
        s += "    -> " + p.buffers[static_cast<size_t>(w)].name + " (" + ir::call_name(st.call->kind) + ")\n";
    }
  }
  return s;
}

// The passes run so far, for a dump's first line.
std::string passes_text(const std::vector<std::string>& ran) {
  std::string s;
  for (const auto& r : ran) s += (s.empty() ? "" : ", ") + r;
  return s.empty() ? std::string("none") : s;
}

}  // namespace

std::string pass_listing() {
  std::string s = "passes, in the order they run (-O0: those marked 0; -O1: those marked 0 or 1; -O2, the default: all):\n";
  for (const PassInfo& p : pass_list()) s += fmt::format("  {:<16} -O{}  {}\n", p.name, p.level, p.summary);
  return s;
}

int gen_file(const std::string& path, const GenOptions& opt, std::ostream& out, std::ostream& err) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  CompileOptions co;
  co.target = opt.target;
  co.f64 = opt.dtype == "f64";
  if (!opt.precision.empty()) co.precision = opt.precision;
  co.max_batch = opt.max_batch;
  co.opt_level = opt.opt_level;
  co.blas = opt.blas;
  if (opt.embed) co.weights = opt.weights;
  if (opt.embed) co.name_map = opt.name_map;
  co.embed = opt.embed || opt.weights_apart;
  co.embed_format = opt.embed_format;
  co.dims = opt.dims;
  co.roll = !opt.no_roll;
  co.quantize = opt.quantize;
  // The IR verifier: on in debug builds; CANNL_VERIFY_IR=1 (or 0) sets it, --verify-ir turns it on.
  if (const char* v = std::getenv("CANNL_VERIFY_IR"); v && *v) co.verify_ir = std::string(v) != "0";
  if (opt.verify_ir) co.verify_ir = true;
  for (const auto& name : opt.disabled_passes) {
    if (!find_pass(name)) {
      err << "cannl: error: --disable-pass: no pass called '" << name << "' (cannl gen --passes lists them)\n";
      return 2;
    }
    co.disabled.insert(name);
  }
  // --dump=STAGE (a front-end stage) and --dump=ir:STAGE stop the pipeline after the stage.
  std::string ir_stage;
  if (opt.dump == "tokens" || opt.dump == "ast" || opt.dump == "shapes") co.stop_after = opt.dump;
  if (opt.dump.rfind("ir:", 0) == 0) {
    ir_stage = opt.dump.substr(3);
    const auto stages = stage_names();
    if (std::find(stages.begin() + 3, stages.end(), ir_stage) == stages.end()) {
      err << "cannl: error: --dump=ir:" << ir_stage
          << ": no such stage (lower, routines, autodiff, optimizer, or a pass: cannl gen --passes lists them)\n";
      return 2;
    }
    if (const PassInfo* pi = find_pass(ir_stage); pi && (pi->level > opt.opt_level || co.disabled.count(ir_stage))) {
      err << "cannl: error: --dump=ir:" << ir_stage << ": the pass does not run at -O" << opt.opt_level
          << (co.disabled.count(ir_stage) ? " with --disable-pass=" + ir_stage : "") << "\n";
      return 2;
    }
    co.stop_after = ir_stage;
  }
  co.emit = opt.dump.empty() && !opt.stats;
  co.keep_before = opt.stats || opt.dump == "dot";

  Compiled c;
  std::string dumped;
  auto since = std::chrono::steady_clock::now();
  auto hook = [&](const std::string& stage, const std::function<std::string()>& print) {
    if (opt.time_stages) {
      const auto now = std::chrono::steady_clock::now();
      err << fmt::format("cannl: {:<18} {:9.3f} ms\n", stage, std::chrono::duration<double, std::milli>(now - since).count());
      since = now;
    }
    if (stage == co.stop_after) dumped = print();
  };
  const int rc = compile(path, text, co, c, err, opt.color, hook);
  if (rc != 0) return rc;
  const std::string& model = c.prog.model;
  if (opt.dump == "tokens" || opt.dump == "ast" || opt.dump == "shapes") {
    out << dumped;
    return 0;
  }
  if (!ir_stage.empty()) {
    if (find_pass(ir_stage))
      out << fmt::format("# {}: the loop IR after pass {} (-O{}; passes run: {})\n", model, ir_stage,
                         opt.opt_level, passes_text(c.passes));
    else
      out << fmt::format("# {}: the loop IR after stage {} (no pass run yet)\n", model, ir_stage);
    out << dumped;
    return 0;
  }
  if (opt.dump == "ir") {
    out << fmt::format("# {}: the loop IR after the passes of -O{} ({})\n", model, opt.opt_level,
                       passes_text(c.passes))
        << ir::print_program(c.prog);
    return 0;
  }
  if (opt.dump == "dot") {
    out << dump_dot(c.before, c.prog);
    return 0;
  }
  if (opt.dump.rfind("dot:", 0) == 0) {
    std::string dot = dump_dot_routine(c.prog, opt.dump.substr(4), error);
    if (dot.empty()) {
      err << "cannl: error: " << error << "\n";
      return 2;
    }
    out << dot;
    return 0;
  }
  if (opt.dump == "graph") {
    out << dump_graph(c.prog);
    return 0;
  }
  if (opt.stats) {
    StatsOptions so;
    so.level = opt.opt_level;
    so.passes = c.passes;
    so.elem_bytes = co.f64 ? 8 : 4;
    so.dtype = opt.dtype;
    so.target = opt.target;
    out << (opt.json ? stats_json(c.before, c.prog, so) : stats_text(c.before, c.prog, so));
    return 0;
  }
  // The two halves of an embedded model (--weights-apart, --weights-only) share a directory:
  // neither run removes the files the other writes.
  std::set<std::string> others;
  std::vector<OutputFile> files;
  for (OutputFile& f : c.files) {
    const bool weights = f.name == model + "_weights.c" || f.name == model + "_weights.bin";
    if (opt.weights_only && !weights) others.insert(f.name);
    else files.push_back(std::move(f));
  }
  if (opt.weights_apart) others.insert({model + "_weights.c", model + "_weights.bin"});
  if (!write_files(opt.out_dir, model, files, error, others)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  return 0;
}

}  // namespace cannl
