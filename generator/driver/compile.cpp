// compile.cpp — the whole pipeline of `cannl gen` (see compile.h).
#include "driver/compile.h"

#include <cctype>
#include <filesystem>
#include <functional>
#include <set>
#include <map>
#include <fmt/format.h>
#include <ostream>

#include "autodiff/autodiff.h"
#include "autodiff/optimizer.h"
#include "driver/frontend.h"
#include "driver/weights.h"
#include "emit/c_emit.h"
#include "emit/c_names.h"
#include "emit/cuda_emit.h"
#include "emit/model_card.h"
#include "ir/ir_print.h"
#include "ir/unroll_blocks.h"
#include "ir/verify.h"
#include "lower/lower.h"
#include "lower/roll.h"
#include "lower/routines.h"
#include "passes/pipeline.h"
#include "passes/quantize.h"
#include "spec/ast_print.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

// What `cannl gen` needs beyond a spec `cannl check` accepts: a training objective, and outputs
// with a batch axis (the inference program and forward() return one row per example).
void check_generatable(Frontend& fe, const CompileOptions& o) {
  if (!fe.model.optimizer)
    fe.diags.error(fe.model.name_range,
                   fmt::format("model '{}' has no 'minimize' statement: cannl gen writes a training step and "
                               "needs an objective, e.g. 'minimize loss with sgd(lr = 0.1)'",
                               fe.model.name));
  // Names the generated C cannot carry: a model name that cannot name the C API (the rest is
  // mangled, emit/c_names.h), a param that checkpoints cannot hold.
  if (std::string why = c_model_name_problem(fe.model.name, o.target == "cuda"); !why.empty())
    fe.diags.error(fe.model.name_range, fmt::format("model name '{}' cannot name the generated C API ({}_create, "
                                                    "struct {}, ...): {}",
                                                    fe.model.name, fe.model.name, fe.model.name, why));
  std::map<std::string, std::string> macro_of;  // the C API's macros of inputs, outputs and metrics
  for (const Stmt& st : fe.spec.stmts) {
    const char* kind = st.kind == StmtKind::Input ? "INPUT" : st.kind == StmtKind::Output ? "OUTPUT"
                       : st.kind == StmtKind::Metric ? "METRIC" : nullptr;
    for (const NameRef& n : st.names) {
      if (st.kind == StmtKind::Param && n.name == "__metadata__")
        fe.diags.error(n.range, "a param cannot be called '__metadata__': that is the key of a safetensors "
                                "file's header, where checkpoints name their tensors");
      if (!kind) continue;
      std::string macro = fmt::format("{}_{}_{}", fe.model.name, kind, n.name);
      for (char& c : macro) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      auto [it, fresh] = macro_of.emplace(macro, n.name);
      if (!fresh && it->second != n.name)
        fe.diags.error(n.range, fmt::format("'{}' and '{}' both name the C API's macro {}: names of inputs, outputs "
                                            "and metrics must differ in more than case",
                                            it->second, n.name, macro));
    }
  }
  for (size_t i = 0; i < fe.model.outputs.size(); ++i) {
    const Shape& sh = fe.shapes.tensors[static_cast<size_t>(fe.model.outputs[i])];
    std::string name(fe.file.slice(fe.model.output_ranges[i]));
    if (fe.model.tensors[static_cast<size_t>(fe.model.outputs[i])].dtype == DType::Int32)
      fe.diags.error(fe.model.output_ranges[i],
                     fmt::format("output '{}' holds integer ids: outputs are arrays of the model's element type; "
                                 "output what the ids select (an embedding, logits) instead",
                                 name));
    if (sh.row(AxisKind::Batch).empty())
      fe.diags.error(fe.model.output_ranges[i],
                     fmt::format("output '{}' : {} has no batch axis: outputs are per-example results (one row per "
                                 "example); a param is in the checkpoint, a scalar of the test set is a 'metric'",
                                 name, print_shape(sh)));
  }
}

// Every loop nest's iteration count (at the batch bound) must stay far from 64-bit overflow:
// tensors are bounded by the front end, but a contraction multiplies the sizes of all its axes.
bool check_nest_sizes(const ir::Program& p, const std::string& path, std::ostream& err) {
  constexpr long kMaxIterations = 1L << 56;
  for (const ir::Routine* r : ir::all_routines(p))
    for (const auto& st : r->stmts) {
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

// The target's alignment of every buffer: a 64-byte cache line on the CPU; on the GPU 64 bytes
// too (two 32-byte sectors, beyond cuBLAS's 16), so that its device arena is the C target's
// training state, byte for byte.
int target_align(const std::string&) { return 64; }

Stage frontend_stop(const std::string& stop) {
  return stop == "tokens" ? Stage::Tokens : stop == "ast" ? Stage::Ast : Stage::Shapes;
}

}  // namespace

std::vector<std::string> stage_names() {
  std::vector<std::string> s = {"tokens", "ast", "shapes", "lower", "routines", "autodiff", "optimizer"};
  for (const PassInfo& p : pass_list()) s.push_back(p.name);
  return s;
}

int compile(const std::string& path, const std::string& text, const CompileOptions& o, Compiled& out,
            std::ostream& err, bool color, const StageHook& hook) {
  // After each stage: show it to the hook; true when the pipeline stops there.
  auto stage = [&](const std::string& name, const std::function<std::string()>& print) {
    if (hook) hook(name, print);
    return o.stop_after == name;
  };
  ir::Program& p = out.prog;
  // After each IR stage: the verifier (an internal error naming the stage when it fails).
  auto verify = [&](const std::string& name) {
    if (o.verify_ir) ir::verify(p, name);
  };
  try {
    // Front end: text -> tokens -> AST -> Model (names resolved) -> a shape for every tensor.
    auto fe = run_frontend(path, text, frontend_stop(o.stop_after), o.dims);
    if (!fe->usage_error.empty()) {
      err << "cannl: error: " << fe->usage_error << "\n";
      return 2;
    }
    const bool generating = frontend_stop(o.stop_after) == Stage::Shapes && o.stop_after != "shapes";
    if (fe->ok() && generating) check_generatable(*fe, o);
    fe->diags.render(err, color);
    if (!fe->ok()) return 1;
    if (stage("tokens", [&] { return dump_tokens(fe->tokens, fe->file); })) return 0;
    if (stage("ast", [&] { return dump_ast(fe->spec, fe->file); })) return 0;
    if (stage("shapes", [&] { return print_shapes(*fe); })) return 0;
    const Model& m = fe->model;

    // Lowering: every spec tensor as forward loop nests over buffers; repeat blocks whose
    // instances lower alike rolled into block bodies, their params stacked.
    Lowered low = lower_forward(m, fe->shapes, fe->file, o.max_batch, o.roll);
    if (o.verify_ir) ir::verify_lowered(low.prog, low.forward, low.train_updates, "lower");
    if (stage("lower", [&] { return ir::print_lowered(low.prog, low.forward); })) {
      p = std::move(low.prog);
      return 0;
    }
    p = std::move(low.prog);

    // Routine assembly: init, train_step (forward so far), forward, eval_metrics.
    assemble_routines(p, low);
    verify("routines");
    if (stage("routines", [&] { return ir::print_program(p); })) return 0;

    // Autodiff: the backward nests of train_step, and the param -> gradient map.
    differentiate(p);
    verify("autodiff");
    if (stage("autodiff", [&] { return ir::print_program(p); })) return 0;
    // The optimiser: its updates at the end of train_step, its state zeroed by init.
    add_optimizer(p);
    verify("optimizer");
    if (stage("optimizer", [&] { return ir::print_program(p); })) return 0;
    if (!check_nest_sizes(p, path, err)) return 1;

    // The passes of the level, in their fixed order (loop ordering first).
    if (o.keep_before) out.before = p;
    PassOptions po;
    po.level = o.opt_level;
    po.disabled = o.disabled;
    po.elem_bytes = o.f64 ? 8 : 4;
    po.align = target_align(o.target);
    po.opt_block = o.target != "cuda";
    po.decode_in_training = o.target == "cuda";  // (its one device state runs generation too)
    po.host_locals = o.target != "cuda";
    po.fuse_sums = o.target != "cuda";
    for (const PassInfo& pass : pass_list()) {
      if (!pass_runs(pass, po)) continue;
      pass.run(p, po);
      verify(std::string("pass ") + pass.name);
      out.passes.push_back(pass.name);
      if (stage(pass.name, [&] { return ir::print_program(p); })) return 0;
    }
    // int8 weights (--quantize int8): the params the forward-only state reads as int8 rows.
    if (o.quantize == "int8") quantize_weights(p);
    if (!o.emit) return 0;

    // Emission: the target's files, then the model card.
    CardInfo card;
    card.spec_file = std::filesystem::path(path).filename().string();
    card.spec_text = text;
    card.f64 = o.f64;
    for (size_t i = 0; i < m.tensors.size(); ++i)
      if (m.tensors[i].stmt && m.tensors[i].stmt->is_buffer) card.buffers.insert(static_cast<int>(i));
    EmbeddedWeights weights;
    if (o.target == "cuda") {
      CudaOptions co;
      co.f64 = o.f64;
      co.precision = o.precision;
      co.spec = card.spec_file;
      card.precision = o.f64 ? "" : o.precision;
      out.files = emit_cuda(p, co);
      card.inference_state = false;
    } else {
      std::string error;
      if (!o.weights.empty() && !read_weights(p, o.weights, o.name_map, weights, error)) {
        err << "cannl: error: " << error << "\n";
        return 1;
      }
      COptions co;
      co.f64 = o.f64;
      co.spec = card.spec_file;
      co.weights = o.weights.empty() ? nullptr : &weights;
      co.embed = o.embed;
      if (co.weights) {
        size_t bytes = 0;
        for (const auto& v : weights.values) bytes += v.size() * (o.f64 ? 8 : 4);
        co.weights_bin = o.embed_format == "incbin" || (o.embed_format == "auto" && bytes > kIncbinBytes);
      }
      co.blas = o.blas;
      co.precision = o.f64 ? "fp32" : o.precision;
      card.precision = o.f64 || o.precision == "fp32" ? "" : o.precision;
      out.files = emit_c(p, co);
      card.weights = co.weights;
      card.embedded = o.embed || co.weights;
    }
    stage("emit", [] { return std::string(); });
    out.files.push_back({p.model + ".json", model_card(p, card)});
    stage("model card", [] { return std::string(); });
    return 0;
  } catch (const InternalError& e) {
    err << path << ": internal error: " << e.what() << "\n"
        << "  this is a bug in cannl, not in the spec; please report it with the spec\n";
    return 3;
  }
}

}  // namespace cannl
