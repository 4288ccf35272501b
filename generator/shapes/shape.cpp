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

std::string format_shape(const std::string& b, const std::string& i, const std::string& o) {
  std::string r = "[";
  if (!b.empty()) r += b + " | ";
  if (!i.empty()) r += i + " -> ";
  r += o;
  if (o.empty() && (!b.empty() || !i.empty())) r.pop_back(), r += " ";  // "[batch | ]"
  return r + "]";
}

std::string print_shape(const Shape& s) {
  return format_shape(axes_text(s.row(AxisKind::Batch)), axes_text(s.row(AxisKind::Input)),
                      axes_text(s.row(AxisKind::Output)));
}

}  // namespace cannl
