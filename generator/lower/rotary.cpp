// rotary.cpp — rope, the rotary position embedding of contract v2 §2 (see lowerings.h).
#include "lower/lowerings.h"

#include <fmt/format.h>

#include "ir/prims.h"
#include "lower/lower_context.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;

// rope(x, theta, interleaved): x : [B.., t | H.., e] with each pair (a, b) of its last output
// axis rotated by the angle t / theta^(2i / e) of the pair's index i < e/2 and the position t
// (the index along the last batch axis):
//   r[a] = x[a] cos - x[b] sin,   r[b] = x[b] cos + x[a] sin,
// the pairs (i, i + e/2) (Hugging Face's rotate_half), or (2i, 2i + 1) when interleaved.
// The cosines and sines are a table [t, e/2] (<tensor>_cos, <tensor>_sin: each angle in
// double, rounded once), computed by a nest of its own, which reads nothing: autodiff
// differentiates the two rotation nests only, so the gradient is the rotation by the negative
// angle, and the decode routine reads the table at its run-time position.
void lower_rope(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  const Shape& xs = c.shape(x);
  const double theta = call.values.at("theta");
  const bool interleaved = call.values.at("interleaved") != 0;
  const int nb = static_cast<int>(xs.row(AxisKind::Batch).size());
  const int no = static_cast<int>(xs.row(AxisKind::Output).size());
  const long T = xs.row(AxisKind::Batch).back().size;
  const long e = xs.row(AxisKind::Output).back().size;
  const long half = e / 2;

  // the tables: cos and sin of the angle at (position t, pair i)
  const std::string what = fmt::format("[{}, {}]", T, half);
  const int cos_b = c.temp_dims("cos", {ir::Dim{T, false}, ir::Dim{half, false}}, what);
  const int sin_b = c.temp_dims("sin", {ir::Dim{T, false}, ir::Dim{half, false}}, what);
  {
    Nest n;
    const Affine t = Affine::of(n.add("t", T, false)), i = Affine::of(n.add("i", half, false));
    std::vector<ExprP> args = {ir::index_value(t), ir::index_value(i), ir::cnst(theta),
                               ir::cnst(static_cast<double>(e))};
    c.emit(n, cos_b, {t, i}, ir::Accum::Set, ir::call("rope_cos", args));
    c.emit(n, sin_b, {t, i}, ir::Accum::Set, ir::call("rope_sin", args));
  }

  // the rotation: a nest over x's axes with the last output axis halved, writing both of each pair
  Shape hs = xs;
  hs.row(AxisKind::Output).back().size = half;
  Nest n;
  const IndexMap id = c.loops_for(hs, n);
  const size_t pos = static_cast<size_t>(flat_index(xs, AxisKind::Batch, nb - 1));
  const size_t last = static_cast<size_t>(flat_index(xs, AxisKind::Output, no - 1));
  IndexMap a = id, b = id;
  if (interleaved) {
    a[last].terms[0].coef = 2;
    b[last].terms[0].coef = 2;
    b[last].offset = 1;
  } else {
    b[last].offset = half;
  }
  const ExprP xa = c.value(x, a), xb = c.value(x, b);
  const ExprP cs = ir::load({cos_b, {id[pos], id[last]}}), sn = ir::load({sin_b, {id[pos], id[last]}});
  c.emit(n, r, a, ir::Accum::Set, ir::binary(Op::Sub, ir::binary(Op::Mul, xa, cs), ir::binary(Op::Mul, xb, sn)));
  c.emit(n, r, b, ir::Accum::Set, ir::binary(Op::Add, ir::binary(Op::Mul, xb, cs), ir::binary(Op::Mul, xa, sn)));
}

}  // namespace cannl
