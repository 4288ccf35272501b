// copies.cpp — concat and dropout, whose nests copy their operands' elements (see
// lowerings.h).
#include "lower/lowerings.h"

#include "ir/prims.h"
#include "lower/lower_context.h"

namespace cannl {

using ir::Affine;
using ir::ExprP;
using ir::Op;

// r = a and b joined along the last output axis: two nests, b's written at an offset.
void lower_concat(LowerContext& c, const BoundCall& call, int r) {
  const Shape& rs = c.shape(call.call);
  const int last = flat_index(rs, AxisKind::Output, static_cast<int>(rs.row(AxisKind::Output).size()) - 1);
  long offset = 0;
  for (const Expr* part : {call.tensors[0], call.tensors[1]}) {
    Shape ps = rs;
    const long size = c.shape(part).row(AxisKind::Output).back().size;
    ps.row(AxisKind::Output).back().size = size;
    Nest n;
    IndexMap id = c.loops_for(ps, n);
    IndexMap at = id;
    at[static_cast<size_t>(last)].offset += offset;
    c.emit(n, r, at, ir::Accum::Set, c.value(part, align(ps, id, c.shape(part))));
    offset += size;
  }
}

// dropout(x, p): in the training step x * keep / (1 - p), keep 0 with probability p drawn
// per element from (seed, step, stream, flat index) (ir::Op::Keep); x elsewhere.
void lower_dropout(LowerContext& c, const BoundCall& call, int r) {
  const Expr* x = call.tensors[0];
  const double p = call.values.at("p");
  const long stream = c.next_stream();
  Nest n;
  IndexMap id = c.loops_for(c.shape(x), n);
  const auto& dims = c.buffer(r).dims;
  Affine counter = Affine::constant(stream << 40);  // 2^40 elements per stream
  long stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    counter.terms.insert(counter.terms.begin(), {id[i].terms[0].iter, stride});
    stride *= dims[i].size;
  }
  ExprP xv = c.value(x, id);  // (nests it needs are in every routine)
  if (p == 0) {               // the identity everywhere (PyTorch's Dropout(p = 0))
    c.emit(n, r, id, ir::Accum::Set, xv);
    return;
  }
  c.set_phase(Phase::Train);
  ExprP kept = ir::binary(Op::Mul, xv, ir::keep(counter, p));
  c.emit(n, r, id, ir::Accum::Set, ir::binary(Op::Mul, kept, ir::cnst(1 / (1 - p))));
  c.set_phase(Phase::Infer);
  c.emit(n, r, id, ir::Accum::Set, xv);
  c.set_phase(Phase::Both);
}

}  // namespace cannl
