// stats_dump.cpp — `--stats` and `--dump=dot` (see stats_dump.h).
#include "driver/stats_dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "emit/c_names.h"
#include "emit/contraction.h"
#include "emit/cublas_plan.h"

#include "ir/stats.h"

namespace cannl {

namespace {

nlohmann::json to_json(const ir::RoutineStats& s) {
  return {{"buffers", s.buffers},   {"arena_bytes", s.arena_bytes}, {"loop_nests", s.loop_nests},
          {"flops", static_cast<long long>(s.flops)}, {"bytes_moved", static_cast<long long>(s.bytes_moved)}, {"persistent_bytes", s.persistent_bytes}};
}

std::set<int> stored(const ir::Routine& r) {
  std::set<int> b;
  for (const auto& s : r.stmts) {
    for (int w : ir::written_buffers(s)) b.insert(w);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const auto* l : loads) b.insert(l->access.buf);
  }
  return b;
}

// The part of the training step a nest belongs to: the update writes params or optimiser
// state; the backward pass writes or reads gradients; the rest is the forward pass.
enum class Phase { Forward, Backward, Update };
constexpr const char* kPhaseName[3] = {"forward", "backward", "update"};
constexpr const char* kPhaseColour[3] = {"#f7fbff", "#fff5f0", "#f7fcf5"};

Phase phase_of(const ir::Program& p, const ir::Stmt& s) {
  auto role = [&](int b) { return p.buffers[static_cast<size_t>(b)].role; };
  bool grads = false;
  for (int w : ir::written_buffers(s)) {
    if (role(w) == ir::Role::Param || role(w) == ir::Role::OptState) return Phase::Update;
    grads = grads || role(w) == ir::Role::Grad;
  }
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const auto* l : loads) grads = grads || role(l->access.buf) == ir::Role::Grad;
  return grads ? Phase::Backward : Phase::Forward;
}

// The phase of each buffer of a routine: that of the first nest writing it (inputs and
// params: forward; optimiser state: update).
std::map<int, Phase> buffer_phases(const ir::Program& p, const ir::Routine& r) {
  std::map<int, Phase> out;
  for (const auto& st : r.stmts)
    for (int w : ir::written_buffers(st)) out.emplace(w, phase_of(p, st));
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const ir::Role role = p.buffers[b].role;
    if (role == ir::Role::Input || role == ir::Role::Param) out[static_cast<int>(b)] = Phase::Forward;
    if (role == ir::Role::OptState) out[static_cast<int>(b)] = Phase::Update;
  }
  return out;
}

std::string cluster_open(Phase ph) {
  return fmt::format("  subgraph cluster_{0} {{\n    label=\"{0}\";\n    style=filled;\n    fillcolor=\"{1}\";\n",
                     kPhaseName[static_cast<int>(ph)], kPhaseColour[static_cast<int>(ph)]);
}

// A Graphviz string's contents: quotes and backslashes escaped, newlines as \n.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string list(const std::vector<std::string>& passes) {
  std::string s;
  for (const auto& p : passes) s += (s.empty() ? "" : ", ") + p;
  return s.empty() ? "no passes" : s;
}

// How a routine's nests run on the target: matrix products (the C target's GEMM kernel, or one
// cuBLAS call each), runtime calls (attention), and the rest (C loop nests, CUDA kernels).
struct TargetCounts {
  int nests = 0, products = 0, calls = 0;
};
TargetCounts target_counts(const ir::Program& p, const ir::Routine& r, const std::string& target) {
  TargetCounts c;
  for (const auto& s : r.stmts) {
    if (s.call)
      ++c.calls;
    else if (target == "cuda" ? plan_cublas_gemm(p, s).has_value() : recognise_contraction(p, s).has_value())
      ++c.products;
    else
      ++c.nests;
  }
  return c;
}

}  // namespace

std::string stats_text(const ir::Program& before, const ir::Program& after, const StatsOptions& o) {
  std::string s = fmt::format("{}: -O{} ({}), batch {} (the max batch), {}\n", after.model, o.level,
                              list(o.passes),
                              after.max_batch, o.dtype);
  s += fmt::format("  {:<14}{:<8}{:>9}{:>14}{:>12}{:>16}{:>16}\n", "routine", "", "buffers", "arena bytes",
                   "loop nests", "flops", "bytes moved");
  for (size_t k = 0; k < after.routines.size(); ++k) {
    const auto& r = after.routines[k];
    const auto* rb = before.routine(r.kind);
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 0 && !rb) continue;
      auto st = ir::routine_stats(pass ? after : before, pass ? r : *rb, after.max_batch, o.elem_bytes);
      s += fmt::format("  {:<14}{:<8}{:>9}{:>14}{:>12}{:>16.0f}{:>16.0f}\n", pass ? "" : r.name(),
                       pass ? "after" : "before", st.buffers, st.arena_bytes, st.loop_nests, st.flops, st.bytes_moved);
    }
  }
  const ir::RoutineKind train = ir::RoutineKind::TrainStep;
  if (const auto* tb = before.routine(train); tb && after.routine(train)) {
    auto b = ir::routine_stats(before, *tb, after.max_batch, o.elem_bytes);
    auto a = ir::routine_stats(after, *after.routine(train), after.max_batch, o.elem_bytes);
    auto ratio = [](double x, double y) { return y > 0 ? x / y : 1.0; };
    s += fmt::format("  {} after/before: arena {:.3f}, loop nests {:.3f}, flops {:.3f}, bytes moved {:.3f}\n", tb->name(),
                     ratio(static_cast<double>(a.arena_bytes), static_cast<double>(b.arena_bytes)),
                     ratio(a.loop_nests, b.loop_nests), ratio(a.flops, b.flops), ratio(a.bytes_moved, b.bytes_moved));
  }
  const ir::Layout& l = after.layout;
  if (const auto* t = after.routine(train); t && l.align > 0) {
    const TargetCounts c = target_counts(after, *t, o.target);
    const bool cuda = o.target == "cuda";
    s += fmt::format("  --target {}: {} runs {} {}, {} {} products, {} runtime calls\n", o.target, t->name(), c.nests,
                     cuda ? "kernels" : "loop nests", c.products, cuda ? "cuBLAS" : "GEMM-kernel", c.calls);
    // The training state as the model card counts it: the arena, and the C target's
    // optimiser-state block (an allocation of its own; in the arena with --target cuda).
    if (cuda)
      s += fmt::format("  --target cuda: training state {} bytes, one device arena (params and optimiser state {}, "
                       "grad block {}, work region {})\n",
                       l.training.bytes, l.training.state, l.training.grads_bytes, l.training.work_bytes);
    else
      s += fmt::format("  --target c: training state {} bytes (arena {}: params {}, grad block {}, work region {}; "
                       "optimiser-state block {}), forward-only state {} bytes\n",
                       l.training.bytes + l.opt_state.bytes, l.training.bytes, l.training.state, l.training.grads_bytes,
                       l.training.work_bytes, l.opt_state.bytes, l.inference.bytes);
  }
  return s;
}

std::string stats_json(const ir::Program& before, const ir::Program& after, const StatsOptions& o) {
  nlohmann::json j;
  j["model"] = after.model;
  j["level"] = o.level;
  j["passes"] = o.passes;
  j["batch"] = after.max_batch;
  j["dtype"] = o.dtype;
  nlohmann::json routines = nlohmann::json::object();
  for (const auto& r : after.routines) {
    nlohmann::json e;
    if (const auto* rb = before.routine(r.kind)) e["before"] = to_json(ir::routine_stats(before, *rb, after.max_batch, o.elem_bytes));
    e["after"] = to_json(ir::routine_stats(after, r, after.max_batch, o.elem_bytes));
    routines[r.name()] = e;
  }
  j["routines"] = routines;
  if (const auto* t = after.routine(ir::RoutineKind::TrainStep)) {
    // The training step at the chosen level, also at the top level (the keys a script reads).
    j[t->name()] = to_json(ir::routine_stats(after, *t, after.max_batch, o.elem_bytes));
    for (const char* k : {"arena_bytes", "loop_nests", "flops", "bytes_moved"}) j[k] = j[t->name()][k];
  }
  if (const auto* t = after.routine(ir::RoutineKind::TrainStep); t && after.layout.align > 0) {
    const ir::Layout& l = after.layout;
    const TargetCounts c = target_counts(after, *t, o.target);
    nlohmann::json tj = {{"name", o.target},
                         {"train_step", {{"nests", c.nests}, {"products", c.products}, {"calls", c.calls}}},
                         {"training_state_bytes", l.training.bytes + l.opt_state.bytes},  // as the card
                         {"arena_bytes", l.training.bytes},
                         {"state_prefix_bytes", l.training.state},
                         {"grad_block_bytes", l.training.grads_bytes},
                         {"work_region_bytes", l.training.work_bytes}};
    tj["opt_state_block_bytes"] = o.target == "cuda" ? nlohmann::json(nullptr) : nlohmann::json(l.opt_state.bytes);
    tj["inference_state_bytes"] = o.target == "cuda" ? nlohmann::json(nullptr) : nlohmann::json(l.inference.bytes);
    j["target"] = tj;
  }
  return j.dump(2) + "\n";
}

std::string dump_dot(const ir::Program& before, const ir::Program& after) {
  const ir::Routine* tb = before.routine(ir::RoutineKind::TrainStep);
  const ir::Routine* ta = after.routine(ir::RoutineKind::TrainStep);
  std::string s = fmt::format("digraph \"{}\" {{\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n", before.model);
  s += "  // train_step: forward, backward and update (clusters); dashed nodes are virtual (inlined, never stored)\n";
  if (!tb || !ta) return s + "}\n";
  const std::set<int> used = stored(*tb), kept = stored(*ta);
  auto node = [&](int b) {
    const ir::Buffer& buf = before.buffers[static_cast<size_t>(b)];
    std::string attrs;
    switch (buf.role) {
      case ir::Role::Input: attrs = "shape=box, style=filled, fillcolor=\"#e0e0e0\""; break;
      case ir::Role::Param: attrs = "shape=box, style=filled, fillcolor=\"#c6dbef\""; break;
      case ir::Role::OptState: attrs = "shape=box, style=filled, fillcolor=\"#f0f0f0\""; break;
      case ir::Role::Grad: attrs = "shape=ellipse, color=\"#cb181d\""; break;
      default: attrs = "shape=ellipse"; break;
    }
    if (!kept.count(b)) attrs += ", style=dashed, fontcolor=\"#808080\", xlabel=\"virtual\"";
    return fmt::format("    \"{}\" [{}];\n", buf.name, attrs);
  };
  const std::map<int, Phase> phase = buffer_phases(before, *tb);
  for (Phase ph : {Phase::Forward, Phase::Backward, Phase::Update}) {
    s += cluster_open(ph);
    for (int b : used)
      if (auto it = phase.find(b); (it == phase.end() ? Phase::Forward : it->second) == ph) s += node(b);
    s += "  }\n";
  }
  std::set<std::pair<int, int>> edges;
  for (const auto& st : tb->stmts) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(st, loads);
    for (int w : ir::written_buffers(st))
      for (const auto* l : loads)
        if (l->access.buf != w && edges.insert({l->access.buf, w}).second)
          s += fmt::format("  \"{}\" -> \"{}\";\n", before.buffers[static_cast<size_t>(l->access.buf)].name,
                           before.buffers[static_cast<size_t>(w)].name);
  }
  return s + "}\n";
}

std::string dump_dot_routine(const ir::Program& p, const std::string& routine, std::string& error) {
  const ir::Routine* r = nullptr;
  std::string names;
  for (const auto& x : p.routines) {
    names += (names.empty() ? "" : ", ") + std::string(x.name());
    if (routine == x.name()) r = &x;
  }
  if (!r) {
    error = fmt::format("--dump=dot:{}: the program has no routine '{}' (it has {})", routine, routine, names);
    return "";
  }
  CNames cn = c_names(p);
  auto buf_id = [&](int b) { return fmt::format("b{}", b); };
  auto buf_node = [&](int b) {
    const ir::Buffer& buf = p.buffers[static_cast<size_t>(b)];
    // The spec shape: a tensor's as declared or inferred, a gradient's that of its tensor
    // (buffers without one show what they hold and their storage dims).
    auto spec_shape = [&](const ir::Buffer& x) -> std::string {
      const std::string& t = x.shape;
      if (auto colon = t.find(" : "); colon != std::string::npos && t.compare(0, colon, x.name) == 0) return t.substr(colon + 3);
      return t.empty() || t[0] == '[' ? (t.empty() ? "[]" : t) : "";
    };
    std::string shape = spec_shape(buf);
    for (const auto& [of, g] : p.grads)
      if (g == b && shape.empty()) shape = spec_shape(p.buffers[static_cast<size_t>(of)]);
    if (shape.empty()) {
      std::string dims;
      for (const ir::Dim& d : buf.dims) dims += (dims.empty() ? "" : ", ") + (d.batch ? std::string("batch") : std::to_string(d.size));
      shape = fmt::format("{}\n[{}]", buf.shape, dims);
    }
    std::string attrs = buf.role == ir::Role::Input || buf.role == ir::Role::Param || buf.role == ir::Role::OptState
                            ? "shape=box, style=\"rounded,filled\", fillcolor=\"#c6dbef\""
                            : buf.role == ir::Role::Grad ? "shape=ellipse, color=\"#cb181d\"" : "shape=ellipse";
    return fmt::format("    {} [label=\"{}\\n{}\", {}];\n", buf_id(b), dot_escape(buf.name), dot_escape(shape), attrs);
  };
  auto op_node = [&](size_t i, const ir::Stmt& st) {
    std::string op = st.product ? "matmul: " + cn.kernel(p, st) : cn.kernel(p, st);
    std::string what = st.what.size() > 60 ? st.what.substr(0, 57) + "..." : st.what;
    std::string label = dot_escape(op);
    if (st.line > 0) label += fmt::format("\\nline {}: {}", st.line, dot_escape(what));
    else if (!what.empty()) label += "\\n" + dot_escape(what);
    return fmt::format("    n{} [label=\"{}\", shape=box, style=filled, fillcolor=\"#fdd0a2\"];\n", i, label);
  };
  std::string s = fmt::format("digraph \"{}_{}\" {{\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n"
                              "  // routine {} of {}: boxes are loop nests (their kernels), ellipses buffers\n",
                              dot_escape(p.model), routine, routine, dot_escape(p.model));
  const bool phases = r->kind == ir::RoutineKind::TrainStep;
  const std::map<int, Phase> bphase = buffer_phases(p, *r);
  std::set<int> bufs = stored(*r);
  for (Phase ph : {Phase::Forward, Phase::Backward, Phase::Update}) {
    std::string body;
    for (size_t i = 0; i < r->stmts.size(); ++i)
      if (!phases || phase_of(p, r->stmts[i]) == ph) body += op_node(i, r->stmts[i]);
    for (int b : bufs) {
      auto it = bphase.find(b);
      if (!phases || (it == bphase.end() ? Phase::Forward : it->second) == ph) body += buf_node(b);
    }
    if (!phases) {
      s += body;
      break;
    }
    if (!body.empty()) s += cluster_open(ph) + body + "  }\n";
  }
  for (size_t i = 0; i < r->stmts.size(); ++i) {
    const ir::Stmt& st = r->stmts[i];
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(st, loads);
    std::set<int> read;
    for (const auto* l : loads) read.insert(l->access.buf);
    for (int b : read) s += fmt::format("  {} -> n{};\n", buf_id(b), i);
    std::set<int> wrote;
    for (int w : ir::written_buffers(st)) wrote.insert(w);
    for (int w : wrote) s += fmt::format("  n{} -> {};\n", i, buf_id(w));
  }
  return s + "}\n";
}

}  // namespace cannl
