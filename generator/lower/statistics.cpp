// statistics.cpp — reductions into statistics and their nests (see statistics.h).
#include "lower/statistics.h"

#include <cmath>
#include <set>

#include "ir/prims.h"

namespace cannl {

namespace {

// Which storage axes of xs a statistic reduces over: the output axes, or (with a spec, a
// one-operand reduction) the axes the spec sums away.
std::vector<bool> reduced_axes(const Shape& xs, const EinsumSpec* spec) {
  std::vector<bool> red;
  if (!spec) {
    for (const FlatAxis& a : flat(xs)) red.push_back(a.kind == AxisKind::Output);
    return red;
  }
  std::set<std::string> kept;
  for (const Slot& sl : expand(spec->result, xs)) kept.insert(sl.key);
  for (const Slot& sl : expand(spec->operands[0], xs)) red.push_back(!kept.count(sl.key));
  return red;
}

}  // namespace

StatNest stat_nest(LowerContext& c, const Shape& xs, const EinsumSpec* spec) {
  StatNest sn;
  sn.x = c.loops_for(xs, sn.n);
  const std::vector<bool> red = reduced_axes(xs, spec);
  auto fl = flat(xs);
  for (AxisKind k : kStorageOrder) sn.stat_shape.row(k).clear();
  for (size_t i = 0; i < fl.size(); ++i) {
    if (red[i]) {
      sn.out_loops.push_back(sn.x[i].terms[0].iter);
    } else {
      sn.stat.push_back(sn.x[i]);
      sn.stat_shape.row(fl[i].kind).push_back(fl[i].axis);
    }
  }
  return sn;
}

std::vector<std::string> stat_names(const StatNest& sn) {
  std::vector<std::string> out;
  for (const auto& a : sn.stat) out.push_back(sn.n.iters[static_cast<size_t>(a.terms[0].iter)].name);
  return out;
}

std::pair<int, int> softmax_stats(LowerContext& c, StatNest& sn, const ir::ExprP& xv) {
  const Shape& ss = sn.stat_shape;
  int mx = c.temp("max", ss), sum = c.temp("sumexp", ss);
  c.fill_buffer(mx, -INFINITY, stat_names(sn));
  c.emit(sn.n, mx, sn.stat, ir::Accum::Max, xv);
  c.fill_buffer(sum, 0, stat_names(sn));
  c.emit(sn.n, sum, sn.stat, ir::Accum::Add,
         ir::call("exp", {ir::binary(ir::Op::Sub, xv, ir::load({mx, sn.stat}, true))}));
  return {mx, sum};
}

Shape joint(const Shape& logits, const Shape& target) {
  Shape j = logits;
  for (AxisKind k : {AxisKind::Batch, AxisKind::Input}) {
    const auto &a = logits.row(k), &b = target.row(k);
    const bool a_longer = a.size() >= b.size();
    Shape longer = a_longer ? logits : target, shorter = a_longer ? target : logits;
    std::vector<Axis> row = longer.row(k);
    for (size_t i = 0; i < shorter.row(k).size(); ++i) {
      Axis& x = row[static_cast<size_t>(parent_pos(longer, shorter, k, static_cast<int>(i)))];
      if (!x.is_batch && x.size == 1) x = shorter.row(k)[i];
    }
    j.row(k) = row;
  }
  return j;
}

}  // namespace cannl
