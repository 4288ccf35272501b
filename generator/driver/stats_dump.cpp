// stats_dump.cpp — `--stats` and `--dump=dot` (see stats_dump.h).
#include "driver/stats_dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

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

std::string list(const std::vector<std::string>& passes) {
  std::string s;
  for (const auto& p : passes) s += (s.empty() ? "" : ", ") + p;
  return s.empty() ? "no passes" : s;
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
  return j.dump(2) + "\n";
}

std::string dump_dot(const ir::Program& before, const ir::Program& after) {
  const ir::Routine* tb = before.routine(ir::RoutineKind::TrainStep);
  const ir::Routine* ta = after.routine(ir::RoutineKind::TrainStep);
  std::string s = fmt::format("digraph \"{}\" {{\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n", before.model);
  s += "  // train_step: forward, backward and update; dashed nodes are virtual (inlined, never stored)\n";
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
  s += "  subgraph cluster_forward {\n    label=\"forward\";\n";
  for (int b : used)
    if (before.buffers[static_cast<size_t>(b)].role != ir::Role::Grad &&
        before.buffers[static_cast<size_t>(b)].role != ir::Role::OptState)
      s += node(b);
  s += "  }\n  subgraph cluster_backward {\n    label=\"backward and update\";\n";
  for (int b : used)
    if (before.buffers[static_cast<size_t>(b)].role == ir::Role::Grad ||
        before.buffers[static_cast<size_t>(b)].role == ir::Role::OptState)
      s += node(b);
  s += "  }\n";
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

}  // namespace cannl
