// `cannl gen SPEC -o DIR`: front end, lowering, autodiff, passes and the C or CUDA emitter.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <set>
#include <ostream>
#include <unistd.h>

#include "driver/commands.h"
#include "driver/frontend.h"
#include "driver/stats_dump.h"
#include "driver/weights.h"
#include "emit/c_emit.h"
#include "emit/model_card.h"
#include "emit/cuda_emit.h"
#include "ir/ir_print.h"
#include "lower/routines.h"
#include "passes/pipeline.h"
#include "spec/ast_print.h"

namespace cannl {

namespace fs = std::filesystem;

namespace {

// The graph view: every buffer, and per routine the nests by the statement they come from.
std::string dump_graph(const ir::Program& p) {
  std::string s = "model " + p.model + "\n\n" + ir::print_buffers(p);
  for (const auto& r : p.routines) {
    s += "\nroutine " + r.name + "\n";
    std::string last;
    for (const auto& st : r.stmts) {
      std::string what = (st.line ? "line " + std::to_string(st.line) + ": " : "") + st.what;
      std::string line = "  " + what + "\n";
      if (line != last) s += line;
      last = line;
      s += "    -> " + p.buffers[static_cast<size_t>(st.out.buf)].name + " " + ir::accum_symbol(st.accum) + "\n";
    }
  }
  return s;
}

// Writes `text` to `path`; an error names `shown` (the file the user asked for, not its
// temporary) and the reason.
bool write_text(const fs::path& path, const std::string& text, const fs::path& shown, std::string& error) {
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) {
    error = "cannot write " + shown.string() + (errno ? std::string(": ") + std::strerror(errno) : std::string());
    return false;
  }
  return true;
}

// Writes the files: into a fresh sibling directory renamed into place when `dir` does not
// exist, otherwise each file through a temporary renamed over the old one.
bool write_files(const fs::path& dir, const std::string& model, const std::vector<OutputFile>& files,
                 std::string& error) {
  std::error_code ec;
  const std::string tag = ".cannl-tmp-" + std::to_string(getpid());
  if (!fs::exists(dir, ec)) {
    // Missing parents are created as `mkdir -p` would, and removed again if anything fails.
    fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    fs::path created;  // the outermost parent this call creates
    for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) created = p;
    if (!created.empty() && !fs::create_directories(parent, ec)) {
      error = "cannot create " + parent.string() + ": " + ec.message();
      fs::remove_all(created, ec);
      return false;
    }
    if (!fs::is_directory(parent, ec)) {
      error = "cannot write into " + parent.string() + ": not a directory";
      return false;
    }
    auto undo = [&](const fs::path& tmp) {
      fs::remove_all(tmp, ec);
      if (!created.empty()) fs::remove_all(created, ec);
    };
    fs::path tmp = dir.string() + tag;
    fs::remove_all(tmp, ec);
    if (!fs::create_directory(tmp, ec)) {
      error = "cannot create " + tmp.string() + ": " + ec.message();
      undo(tmp);
      return false;
    }
    for (const auto& f : files)
      if (!write_text(tmp / f.name, f.text, dir / f.name, error)) {
        undo(tmp);
        return false;
      }
    fs::rename(tmp, dir, ec);
    if (ec) {
      error = "cannot rename " + tmp.string() + " to " + dir.string() + ": " + ec.message();
      undo(tmp);
      return false;
    }
    return true;
  }
  if (!fs::is_directory(dir, ec)) {
    error = dir.string() + " exists and is not a directory";
    return false;
  }
  std::vector<fs::path> written;
  auto cleanup = [&] {
    for (const auto& w : written) fs::remove(w, ec);
  };
  for (const auto& f : files) {
    fs::path tmp = dir / (f.name + tag);
    if (!write_text(tmp, f.text, dir / f.name, error)) {
      cleanup();
      fs::remove(tmp, ec);
      return false;
    }
    written.push_back(tmp);
  }
  for (const auto& f : files) {
    fs::rename(dir / (f.name + tag), dir / f.name, ec);
    if (ec) {
      error = "cannot replace " + (dir / f.name).string() + ": " + ec.message();
      cleanup();
      return false;
    }
  }
  // Files an earlier `cannl gen` of this model wrote that this one does not (another target,
  // no --embed now): left behind, they would describe another build.
  for (const char* suffix : {".h", ".c", "_inference.c", "_train.c", "_infer.c", ".json", "_weights.c", ".cu",
                             "_train.cu"}) {
    const std::string name = model + suffix;
    bool ours = false;
    for (const auto& f : files) ours = ours || f.name == name;
    if (!ours) fs::remove(dir / name, ec);
  }
  return true;
}

// Every loop nest's iteration count (at the batch bound) must stay far from 64-bit overflow:
// tensors are bounded by the front end, but a contraction multiplies the sizes of all its axes.
bool check_nest_sizes(const ir::Program& p, const std::string& path, std::ostream& err) {
  constexpr long kMaxIterations = 1L << 56;
  for (const auto& r : p.routines)
    for (const auto& st : r.stmts) {
      long n = 1;
      bool over = false;
      for (const auto& it : st.iters) over = over || __builtin_mul_overflow(n, it.size, &n) || n > kMaxIterations;
      if (!over) continue;
      err << fmt::format("{}:{}: error: a loop nest of this statement runs more than 2^56 times at the batch "
                         "bound: too large to generate code for\n", path, st.line);
      return false;
    }
  return true;
}

// What `cannl gen` needs beyond a spec `cannl check` accepts: a training objective, and outputs
// with a batch axis (the inference program and forward() return one row per example).
void check_generatable(Frontend& fe) {
  if (!fe.model.optimizer)
    fe.diags.error(fe.model.name_range,
                   fmt::format("model '{}' has no 'minimize' statement: cannl gen writes a training step and "
                               "needs an objective, e.g. 'minimize loss with sgd(lr = 0.1)'",
                               fe.model.name));
  for (size_t i = 0; i < fe.model.outputs.size(); ++i) {
    const Shape& sh = fe.shapes.tensors[static_cast<size_t>(fe.model.outputs[i])];
    std::string name(fe.file.slice(fe.model.output_ranges[i]));
    if (sh.row(AxisKind::Batch).empty())
      fe.diags.error(fe.model.output_ranges[i],
                     fmt::format("output '{}' : {} has no batch axis: outputs are per-example results (one row per "
                                 "example); a param is in the checkpoint, a scalar of the test set is a 'metric'",
                                 name, print_shape(sh)));
  }
}

// NOT SUPPORTED YET — the one place that keeps what the front end accepts (contract v1:
// language models) from the back end, which does not lower it yet. Each construct is
// reported where it is written, as `not supported yet: ...`; remove a line here when its
// lowering lands (and this function with the last one).
void report_not_lowered(Frontend& fe) {
  const Model& m = fe.model;
  DiagEngine& d = fe.diags;
  auto once = [&, seen = std::set<uint32_t>()](SourceRange r, const std::string& what) mutable {
    if (seen.insert(r.begin).second) d.unsupported(r, what + " (cannl check accepts it; the C and CUDA back ends "
                                                         "do not lower it yet)");
  };
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const Tensor& t = m.tensors[i];
    if (t.block) once(t.block->range, "repeat blocks");
    if (t.kind != TensorKind::Input) continue;
    if (t.dtype == DType::Int32) once(t.stmt->int_range, "integer inputs");
    if (!t.shape->parts[0].empty()) once(t.shape->parts[0].front().range, "inputs with batch axes of their own");
  }
  // The emitters align batch rows from the right; the runner's batch axis leads its row (v1).
  auto pads_after_batch = [&](const Expr* result, const Expr* operand) {
    const auto& r = fe.shapes.of(result).row(AxisKind::Batch);
    const auto& o = fe.shapes.of(operand).row(AxisKind::Batch);
    return !o.empty() && o.front().is_batch && o.size() < r.size();
  };
  for (const auto& [e, shape] : fe.shapes.exprs) {
    bool broadcasts = e->kind == ExprKind::Add || e->kind == ExprKind::Sub || e->kind == ExprKind::Mul ||
                      e->kind == ExprKind::Div || e->kind == ExprKind::MatMul;
    std::vector<const Expr*> ops;
    for (const auto& o : e->operands) ops.push_back(o.get());
    if (auto c = m.calls.find(e); c != m.calls.end() && (e->name == "cross_entropy" || e->name == "accuracy")) {
      broadcasts = true;
      ops = c->second.tensors;
    }
    for (const Expr* o : ops)
      if (broadcasts && pads_after_batch(e, o))
        once(e->op_range, "broadcasting the runner's batch axis against more batch axes");
  }
  for (const auto& [e, call] : m.calls) {
    const std::string& f = e->name;
    if (f == "embedding" || f == "position" || f == "attention") once(e->op_range, f);
    if ((f == "cross_entropy" || f == "accuracy") && m.is_int(call.tensors[1]))
      once(e->op_range, f + " with integer targets");
    if ((f == "softmax" || f == "log_softmax" || f == "layer_norm") && call.spec)
      once(e->op_range, f + " over the axes of a spec");
    if (f == "gelu" && call.strings.at("approximate") != "none") once(e->op_range, "gelu(x, approximate = \"tanh\")");
  }
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (e.kind == ExprKind::Index) once(e.op_range, "indexing x[i]");
    for (const auto& o : e.operands) walk(*o);
    for (const Arg& a : e.args) walk(*a.value);
  };
  for (const Tensor& t : m.tensors)
    if (t.expr) walk(*t.expr);
  if (m.optimizer && m.optimizer->strings.count("decay") && m.optimizer->strings.at("decay") != "all")
    once(m.optimizer->range, "adamw(decay = \"matrices\")");
}

}  // namespace

std::string pass_listing() {
  std::string s = "passes, in the order they run (-O0: none; -O1: those marked 1; -O2, the default: all):\n";
  for (const PassInfo& p : pass_list()) s += fmt::format("  {:<16} -O{}  {}\n", p.name, p.level, p.summary);
  return s;
}

int gen_file(const std::string& path, const GenOptions& opt, std::ostream& out, std::ostream& err) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  if (opt.dump == "tokens" || opt.dump == "ast" || opt.dump == "shapes") {
    CheckOptions c;
    c.dump = opt.dump;
    c.color = opt.color;
    c.dims = opt.dims;
    return check_text(path, text, c, out, err);
  }
  PassOptions pass_opt;
  pass_opt.level = opt.opt_level;
  pass_opt.elem_bytes = opt.dtype == "f64" ? 8 : 4;
  for (const auto& name : opt.disabled_passes) {
    if (!find_pass(name)) {
      err << "cannl: error: --disable-pass: no pass called '" << name << "' (cannl gen --passes lists them)\n";
      return 2;
    }
    pass_opt.disabled.insert(name);
  }
  std::string dump_after;  // --dump=ir:PASS
  if (opt.dump.rfind("ir:", 0) == 0) {
    dump_after = opt.dump.substr(3);
    const PassInfo* pi = find_pass(dump_after);
    if (!pi) {
      err << "cannl: error: --dump=ir:" << dump_after << ": no such pass (cannl gen --passes lists them)\n";
      return 2;
    }
    if (pi->level > opt.opt_level || pass_opt.disabled.count(dump_after)) {
      err << "cannl: error: --dump=ir:" << dump_after << ": the pass does not run at -O" << opt.opt_level
          << (pass_opt.disabled.count(dump_after) ? " with --disable-pass=" + dump_after : "") << "\n";
      return 2;
    }
  }
  auto fe = run_frontend(path, text, Stage::Shapes, opt.dims);
  if (!fe->usage_error.empty()) {
    err << "cannl: error: " << fe->usage_error << "\n";
    return 2;
  }
  if (fe->ok()) check_generatable(*fe);
  if (fe->ok()) report_not_lowered(*fe);
  fe->diags.render(err, opt.color);
  if (!fe->ok()) return 1;
  ProgramOptions po;
  po.max_batch = opt.max_batch;
  ir::Program prog, before;
  std::vector<OutputFile> files;
  EmbeddedWeights weights;
  std::vector<std::string> ran;
  std::string dumped;
  try {
    prog = build_program(fe->model, fe->shapes, fe->file, po);
    if (!check_nest_sizes(prog, path, err)) return 1;
    if (opt.stats || opt.dump == "dot") before = prog;
    run_passes(prog, pass_opt, [&](const std::string& name, const ir::Program& p) {
      ran.push_back(name);
      if (name == dump_after) dumped = ir::print_program(p);
    });
    if (opt.dump.empty() && !opt.stats && opt.target == "cuda") {
      CudaOptions co;
      co.f64 = opt.dtype == "f64";
      co.spec = fs::path(path).filename().string();
      files = emit_cuda(prog, co);
    } else if (opt.dump.empty() && !opt.stats) {
      if (opt.embed && !read_weights(prog, opt.weights, weights, error)) {
        err << "cannl: error: " << error << "\n";
        return 1;
      }
      COptions co;
      co.f64 = opt.dtype == "f64";
      co.spec = fs::path(path).filename().string();
      co.weights = opt.embed ? &weights : nullptr;
      co.blas = opt.blas;
      CardInfo card;
      files = emit_c(prog, co, &card.layout);
      card.spec_file = co.spec;
      card.spec_text = text;
      card.f64 = co.f64;
      card.weights = co.weights;
      files.push_back({prog.model + ".json", model_card(prog, card)});
    }
  } catch (const InternalError& e) {
    err << path << ": internal error: " << e.what() << "\n"
        << "  this is a bug in cannl, not in the spec; please report it with the spec\n";
    return 3;
  }
  // A dump says which stage it shows.
  auto passes_run = [&](size_t upto) {
    std::string s;
    for (size_t i = 0; i < upto && i < ran.size(); ++i) s += (i ? ", " : "") + ran[i];
    return s.empty() ? std::string("none") : s;
  };
  if (opt.dump == "ir") {
    out << fmt::format("# {}: the loop IR after the passes of -O{} ({})\n", prog.model, opt.opt_level,
                       passes_run(ran.size()))
        << ir::print_program(prog);
    return 0;
  }
  if (!dump_after.empty()) {
    size_t k = std::find(ran.begin(), ran.end(), dump_after) - ran.begin();
    out << fmt::format("# {}: the loop IR after pass {} (-O{}; passes run: {})\n", prog.model, dump_after,
                       opt.opt_level, passes_run(k + 1))
        << dumped;
    return 0;
  }
  if (opt.dump == "dot") {
    out << dump_dot(before, prog);
    return 0;
  }
  if (opt.stats) {
    StatsOptions so;
    so.level = opt.opt_level;
    so.passes = ran;
    so.elem_bytes = pass_opt.elem_bytes;
    so.dtype = opt.dtype;
    out << (opt.json ? stats_json(before, prog, so) : stats_text(before, prog, so));
    return 0;
  }
  if (opt.dump == "graph") {
    out << dump_graph(prog);
    return 0;
  }
  if (!write_files(opt.out_dir, prog.model, files, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  return 0;
}

}  // namespace cannl
