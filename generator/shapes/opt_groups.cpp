// opt_groups.cpp — the params of each optimiser group (see opt_groups.h).
#include "shapes/opt_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace cannl {

namespace {

// The param a tensor is an instance of, as the spec names it: "w_q" for w_q.3.
std::string spec_name(const Tensor& t) {
  if (!t.block) return t.name;
  const size_t dot = t.name.rfind('.');
  return dot == std::string::npos ? t.name : t.name.substr(0, dot);
}

}  // namespace

void resolve_opt_groups(Model& m, const ShapeInfo& shapes, DiagEngine& diags) {
  if (m.opt_groups.empty()) return;
  std::vector<int> trainable;
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].kind == TensorKind::Param && !m.tensors[i].frozen) trainable.push_back(static_cast<int>(i));
  std::set<int> tables;
  for (const auto& [e, c] : m.calls)
    if (e->name == "embedding" && !c.tensors.empty() && c.tensors[0]->kind == ExprKind::Name)
      if (auto it = m.index.find(c.tensors[0]->name); it != m.index.end()) tables.insert(it->second);
  auto has_inputs = [&](int i) { return !shapes.tensors[static_cast<size_t>(i)].row(AxisKind::Input).empty(); };

  std::map<int, size_t> group_of;  // param -> the group that took it
  const int before = diags.error_count();
  for (size_t g = 0; g < m.opt_groups.size(); ++g) {
    OptGroupConfig& grp = m.opt_groups[g];
    std::vector<int> params;
    if (grp.word.empty()) {  // a list
      for (const NameRef& n : grp.names) {
        const size_t at = params.size();
        for (int i : trainable)
          if (spec_name(m.tensors[static_cast<size_t>(i)]) == n.name) params.push_back(i);
        if (params.size() > at) continue;
        const Tensor* t = m.find(n.name);
        if (!t)
          for (const Tensor& x : m.tensors)
            if (x.kind == TensorKind::Param && spec_name(x) == n.name) t = &x;
        diags.error(n.range, t && t->kind == TensorKind::Param
                                 ? fmt::format("'{}' is frozen: no optimiser updates it", n.name)
                                 : fmt::format("'{}' is not a param: a group lists params", n.name));
      }
      std::sort(params.begin(), params.end());  // declaration order
      params.erase(std::unique(params.begin(), params.end()), params.end());
    } else {
      for (int i : trainable) {
        const bool table = tables.count(i) > 0, inputs = has_inputs(i);
        if (grp.word == "all" || (grp.word == "matrices" && inputs && !table) || (grp.word == "embeddings" && table) ||
            (grp.word == "vectors" && !inputs) || (grp.word == "others" && !group_of.count(i)))
          params.push_back(i);
      }
    }
    // A param an earlier group took: one error per earlier group, naming the first such param.
    std::set<size_t> reported;
    std::vector<int> own;
    for (int i : params) {
      auto it = group_of.find(i);
      if (it == group_of.end()) {
        group_of[i] = g;
        own.push_back(i);
        continue;
      }
      if (it->second == g || !reported.insert(it->second).second) continue;
      auto& d = diags.error(grp.range, fmt::format("the param '{}' is in two optimiser groups (each param "
                                                   "belongs to exactly one)",
                                                   spec_name(m.tensors[static_cast<size_t>(i)])));
      DiagEngine::note(d, m.opt_groups[it->second].range, "it is already in this group");
    }
    if (grp.optimizer.name == "muon")
      for (int i : own)
        if (!has_inputs(i)) {
          diags.error(grp.range, fmt::format("muon updates matrices only, but the param '{}' has no input axes "
                                             "(give it another optimiser: adamw(...) on vectors)",
                                             spec_name(m.tensors[static_cast<size_t>(i)])));
          break;
        }
    grp.params = std::move(own);
  }
  for (int i : trainable)
    if (!group_of.count(i)) {
      const Tensor& t = m.tensors[static_cast<size_t>(i)];
      auto& d = diags.error(m.opt_groups.back().range,
                            fmt::format("the param '{}' is in no optimiser group (add it to one, or a group "
                                        "'others')",
                                        spec_name(t)));
      DiagEngine::note(d, t.decl, "declared here");
      break;
    }
  if (diags.error_count() > before)
    for (OptGroupConfig& grp : m.opt_groups) grp.params.clear();
}

}  // namespace cannl
