#include "shapes/shape.h"

namespace cannl {

static std::string axes_text(const std::vector<Axis>& row) {
  std::string s;
  for (size_t i = 0; i < row.size(); ++i) {
    if (i) s += ", ";
    s += row[i].is_batch ? "batch" : std::to_string(row[i].size);
  }
  return s;
}

std::string print_row(const std::vector<Axis>& row) { return "[" + axes_text(row) + "]"; }

std::string print_shape(const Shape& s) {
  const auto& b = s.row(AxisKind::Batch);
  const auto& i = s.row(AxisKind::Input);
  const auto& o = s.row(AxisKind::Output);
  std::string r = "[";
  if (!b.empty()) r += axes_text(b) + " | ";
  if (!i.empty()) r += axes_text(i) + " -> ";
  r += axes_text(o);
  if (!r.empty() && r.back() == ' ' && o.empty()) r.pop_back();  // "[batch | ]" keeps one space
  if (o.empty() && (!b.empty() || !i.empty())) r += " ";
  return r + "]";
}

}  // namespace cannl
