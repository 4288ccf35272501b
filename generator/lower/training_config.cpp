// training_config.cpp — initialisers and the optimiser as IR facts (see training_config.h).
#include "lower/training_config.h"

#include <string_view>

namespace cannl {

namespace {

long product(const std::vector<Axis>& row) {
  long n = 1;
  for (const Axis& a : row) n *= a.size;
  return n;
}

// Whitespace runs as one space, none leading.
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

}  // namespace

ir::Init param_init(const Model& m, const ShapeInfo& shapes, const SourceFile& file, int tensor) {
  const size_t t = static_cast<size_t>(tensor);
  const Shape& shape = shapes.tensors[t];
  ir::Init init;
  if (auto it = m.inits.find(tensor); it != m.inits.end()) {
    init.name = it->second.name;
    init.args = it->second.args;
  } else {
    init.name = shape.row(AxisKind::Input).empty() ? "zeros" : "default";
  }
  init.fan_in = product(shape.row(AxisKind::Input));
  init.fan_out = product(shape.row(AxisKind::Output));
  const Stmt* st = m.tensors[t].stmt;
  init.line = st ? static_cast<int>(file.line_col(st->range.begin).line) : 0;
  return init;
}

ir::OptimizerConfig optimizer_config(const Model& m, const SourceFile& file, const std::vector<int>& tensor_buf) {
  ir::OptimizerConfig c;
  for (const OptGroupConfig& g : m.opt_groups) {
    ir::OptimizerGroup o;
    o.name = g.optimizer.name;
    o.args = g.optimizer.args;
    o.strings = g.optimizer.strings;
    o.text = std::string(file.slice(g.optimizer.range));
    if (g.word != "all") o.on = one_line(file.slice(g.range));
    for (int t : g.params) o.params.insert(tensor_buf[static_cast<size_t>(t)]);
    c.groups.push_back(std::move(o));
  }
  if (m.schedule) {
    c.schedule = ir::Schedule{m.schedule->name, m.schedule->args};
    c.schedule_text = one_line(file.slice(m.schedule->range));
  }
  c.clip_grad_norm = m.clip_grad_norm;
  c.line = static_cast<int>(file.line_col(m.loss_range.begin).line);
  return c;
}

}  // namespace cannl
