#include "shapes/size_limits.h"

#include <fmt/format.h>

#include <set>

namespace cannl {

namespace {

// Elements per example (the batch axis counts 1), or -1 past kMaxElements.
long elements(const Shape& s) {
  long n = 1;
  for (const auto& row : s.rows)
    for (const Axis& a : row) {
      if (a.is_batch) continue;
      if (__builtin_mul_overflow(n, a.size, &n) || n > kMaxElements) return -1;
    }
  return n;
}

}  // namespace

void check_size_limits(const Model& m, const ShapeInfo& shapes, DiagEngine& diags) {
  const std::string limit = fmt::format("more than 2^40 = {} elements per example", kMaxElements);
  std::set<const Expr*> reported;
  for (size_t i = 0; i < m.tensors.size() && i < shapes.tensors.size(); ++i) {
    const Tensor& t = m.tensors[i];
    if (elements(shapes.tensors[i]) >= 0) continue;
    diags.error(t.decl, fmt::format("'{}' : {} has {}: too large to generate code for", t.name,
                                    print_shape(shapes.tensors[i]), limit));
    if (t.expr) reported.insert(t.expr);
  }
  // Expressions other than names (their tensors were reported above): the first in the file
  // only, as the expressions enclosing it are as large.
  const Expr* first = nullptr;
  for (const auto& [e, s] : shapes.exprs)
    if (e->kind != ExprKind::Name && !reported.count(e) && elements(s) < 0 &&
        (!first || e->range.begin < first->range.begin))
      first = e;
  if (first)
    diags.error(first->range, fmt::format("this expression's shape {} has {}: too large to generate code for",
                                          print_shape(shapes.of(first)), limit));
  for (const auto& [e, c] : m.calls) {
    if (e->name != "conv2d" || c.tensors.size() < 2) continue;
    long out = elements(shapes.of(c.call)), kernel = 1;
    for (const Axis& a : shapes.of(c.tensors[1]).row(AxisKind::Input)) kernel *= a.size;
    long col;
    if (out < 0 || __builtin_mul_overflow(out, kernel, &col) || col > kMaxElements)
      diags.error(e->range, fmt::format("the convolution's column buffer (output positions x kernel window) "
                                        "has {}: too large to generate code for",
                                        limit));
  }
}

}  // namespace cannl
