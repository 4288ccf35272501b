// images.cpp — conv2d and the pools over the two leading output axes of an image (see
// lowerings.h).
#include "lower/lowerings.h"

#include <cmath>

#include <fmt/format.h>

#include "lower/lower_context.h"

namespace cannl {

using ir::Affine;
using ir::Op;

namespace {

// Loop names of an image-shaped result [b.. | y, x, ...]: b (or b0, b1, ...), `outputs`
// for the leading output axes, then c, c1, ... for any further ones.
std::vector<std::string> image_loop_names(const Shape& rs, std::vector<std::string> outputs) {
  size_t nb = rs.row(AxisKind::Batch).size();
  std::vector<std::string> names;
  for (size_t i = 0; i < nb; ++i) names.push_back(nb > 1 ? fmt::format("b{}", i) : "b");
  const size_t lead = outputs.size();
  names.insert(names.end(), outputs.begin(), outputs.end());
  for (size_t i = lead; i < rs.row(AxisKind::Output).size(); ++i)
    names.push_back(i == lead ? "c" : fmt::format("c{}", i - lead));
  return names;
}

void pool(LowerContext& c, const BoundCall& call, bool is_max, int r) {
  const Expr* x = call.tensors[0];
  long size = static_cast<long>(call.values.at("size"));
  long stride = static_cast<long>(call.values.at("stride"));
  if (stride == 0) stride = size;
  const Shape& rs = c.shape(call.call);
  size_t nb = rs.row(AxisKind::Batch).size();
  std::vector<std::string> names = image_loop_names(rs, {"y", "x"});
  c.fill_buffer(r, is_max ? -INFINITY : 0.0, names);
  Nest n;
  IndexMap rmap = c.loops_for(rs, n, names);
  int ky = n.add("ky", size, false), kx = n.add("kx", size, false);
  IndexMap xmap = rmap;
  xmap[nb] = Affine{{{rmap[nb].terms[0].iter, stride}, {ky, 1}}, 0};
  xmap[nb + 1] = Affine{{{rmap[nb + 1].terms[0].iter, stride}, {kx, 1}}, 0};
  ir::ExprP v = c.value(x, xmap);
  if (!is_max) v = ir::binary(Op::Div, v, ir::cnst(static_cast<double>(size * size)));
  c.emit(n, r, rmap, is_max ? ir::Accum::Max : ir::Accum::Add, v);
}

}  // namespace

// x : [b | h, w, c], k : [kh, kw, c -> d] (stored [d, kh, kw, c]); r : [b | h', w', d].
// Lowered as an im2col gather and a plain contraction (docs/design.md, "Convolution"):
//   col[b, y, x, ky, kx, c] = x[b, s*y + ky - p, s*x + kx - p, c]     (zero outside x)
//   r[b, y, x, d]          += col[b, y, x, ky, kx, c] * k[d, ky, kx, c]
// The contraction is a matrix product (rows b*y*x, columns d, depth ky*kx*c) whose indices
// are all single loop variables, so it runs as fast as the other matrix products; autodiff
// turns it into two more such products and the gather into a scatter-add over b.
// A 1x1 kernel at stride 1 without padding gathers nothing (col would be a copy of x): the
// product reads x itself, and its input gradient is a product into x's gradient.
void lower_conv2d(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  const Expr* k = call.tensors[1];
  long s = static_cast<long>(call.values.at("stride")), p = static_cast<long>(call.values.at("padding"));
  const Shape &rs = c.shape(call.call), &ks = c.shape(k);
  size_t nb = rs.row(AxisKind::Batch).size();
  const auto& kin = ks.row(AxisKind::Input);
  const bool pointwise = s == 1 && p == 0 && kin[0].size == 1 && kin[1].size == 1;

  // The gather: one column of depth kh*kw*c per output position.
  int col = -1;
  if (!pointwise) {
    Shape cs = rs;
    cs.row(AxisKind::Output) = {rs.row(AxisKind::Output)[0], rs.row(AxisKind::Output)[1], kin[0], kin[1], kin[2]};
    col = c.temp("col", cs);
    std::vector<std::string> cnames = image_loop_names(rs, {"y", "x"});
    cnames.resize(nb + 2);
    for (const char* nm : {"ky", "kx", "c"}) cnames.push_back(nm);
    Nest g;
    IndexMap cmap = c.loops_for(cs, g, cnames);
    IndexMap xmap(cmap.begin(), cmap.begin() + static_cast<long>(nb));
    auto window = [&](const Affine& o, const Affine& kk) {
      return Affine{{{o.terms[0].iter, s}, {kk.terms[0].iter, 1}}, -p};
    };
    xmap.push_back(window(cmap[nb], cmap[nb + 2]));
    xmap.push_back(window(cmap[nb + 1], cmap[nb + 3]));
    xmap.push_back(cmap[nb + 4]);
    c.emit(g, col, cmap, ir::Accum::Set, c.operand(x, xmap));
  }

  // The contraction.
  std::vector<std::string> names = image_loop_names(rs, {"y", "x", "d"});
  c.fill_buffer(r, 0, names);
  Nest n;
  IndexMap rmap = c.loops_for(rs, n, names);
  IndexMap amap(rmap.begin(), rmap.begin() + static_cast<long>(nb + 2)), kmap = {rmap[nb + 2]};
  if (pointwise) {  // r[b, y, x, d] += x[b, y, x, c] * k[d, 0, 0, c]
    const int ci = n.add("c", kin[2].size, false);
    amap.push_back(Affine::of(ci));
    kmap.insert(kmap.end(), {Affine::constant(0), Affine::constant(0), Affine::of(ci)});
  } else {
    const int ky = n.add("ky", kin[0].size, false), kx = n.add("kx", kin[1].size, false);
    const int ci = n.add("c", kin[2].size, false);
    for (int it : {ky, kx, ci}) amap.push_back(Affine::of(it)), kmap.push_back(Affine::of(it));
  }
  ir::ExprP a = pointwise ? c.operand(x, amap) : ir::load({col, amap});
  c.emit(n, r, rmap, ir::Accum::Add, ir::binary(Op::Mul, a, c.operand(k, kmap)));
}

void lower_max_pool2d(LowerContext& c, const BoundCall& call, int r) { pool(c, call, true, r); }
void lower_avg_pool2d(LowerContext& c, const BoundCall& call, int r) { pool(c, call, false, r); }

}  // namespace cannl
