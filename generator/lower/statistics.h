// statistics.h — values reduced over some axes and read back at every point: the maximum and
// sum of exponentials of softmax and cross_entropy, the mean and variance of the norms, the
// per-example sums of the losses (lower/norms.cpp, lower/losses.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"

namespace cannl {

// A nest over every axis of a value, and the index of its statistic (the axes not reduced).
struct StatNest {
  Nest n;
  IndexMap x;                  // identity over the value's shape
  IndexMap stat;               // the kept axes only
  std::vector<int> out_loops;  // the reduced axes' loops
  Shape stat_shape;            // the value's shape without the reduced axes
};

// Over the output axes of `xs`, or (with a spec, a one-operand reduction) the axes the spec
// sums away.
StatNest stat_nest(LowerContext& c, const Shape& xs, const EinsumSpec* spec = nullptr);
std::vector<std::string> stat_names(const StatNest& sn);  // the kept axes' loop names

// The maximum of `xv` over the reduced axes (a constant shift for autodiff), then the sum of
// exp(x - max): the buffers <tensor>_max and <tensor>_sumexp.
std::pair<int, int> softmax_stats(LowerContext& c, StatNest& sn, const ir::ExprP& xv);

// The index space of a two-operand statistic (cross_entropy, nll_loss, accuracy): logits'
// output axes, and the batch and input axes of both operands broadcast (logits may be a param,
// the same for every example, against a batch of targets).
Shape joint(const Shape& logits, const Shape& target);

}  // namespace cannl
