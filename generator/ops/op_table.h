// op_table.h — every built-in function of the spec language, one entry each.
//
// An entry gives the call signature (tensor operands, integer/number options, an einsum spec
// string), the shape rule and its lowering. A pointwise built-in's is the loop IR expression
// of its value at one point, built from primitive functions (ir/prims.h), whose rows hold the
// derivative, the C and CUDA spellings, the cost and the constant folding: so a pointwise
// built-in is an entry here (and a row there when it needs a new primitive). Any other's names
// a function of lower/lowerings.h that writes its nests.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "spec/ast.h"

namespace cannl {

class ShapeContext;  // shapes/infer.cpp: the solver as seen by a shape rule
class LowerContext;  // lower/lower_context.h: the Lowerer as seen by a built-in's lowering

// Bool: true or false (a number also works: 0 is false); Choice: one of a few strings.
enum class ArgType { Tensor, Int, Number, Spec, Bool, Choice };

// The element type a tensor argument accepts: float values, integer ids (an `int` input,
// position(...)), or either (a target: class indices or a distribution; position's shape).
enum class Elem { Float, Int, Either };

struct ArgSig {
  std::string name;
  ArgType type = ArgType::Tensor;
  bool required = true;
  double default_value = 0;   // Int/Number/Bool (0 or 1)
  double min_value = -1e300;  // Int/Number options below this are rejected
  Elem elem = Elem::Float;    // Tensor
  std::vector<std::string> choices = {};  // Choice: the accepted strings, the first is the default
  // An optional Number with no fixed default: shown like this in signatures and left out of
  // BoundCall::values when not given (attention's scale = 1/sqrt(e)).
  std::string default_text = {};
  bool positive = false;  // Number: min_value is 0 and 0 itself is rejected too (huber_loss's delta)
};

// A call after binding its arguments to the signature.
struct BoundCall {
  const Expr* call = nullptr;
  std::vector<const Expr*> tensors;      // tensor operands in signature order (present ones)
  std::vector<const ArgSig*> tensor_args;  // the signature entry of each of `tensors`
  std::map<std::string, double> values;  // Int/Number/Bool options (defaults filled in)
  std::map<std::string, std::string> strings;  // Choice options (defaults filled in)
  const EinsumSpec* spec = nullptr;      // the Spec argument, if any
};

using ShapeRule = std::function<void(ShapeContext&, const BoundCall&)>;

// A pointwise built-in's value at one point, from its tensor operands' values there (in
// signature order) and its options (call.values).
using PointwiseLowering = std::function<ir::ExprP(const std::vector<ir::ExprP>& x, const BoundCall& call)>;

// Any other built-in's lowering (lower/lowerings.h): the nests that store the call's value in
// buffer `r`.
using CallLowering = std::function<void(LowerContext&, const BoundCall& call, int r)>;

struct OpInfo {
  std::string name;
  std::vector<ArgSig> args;
  ShapeRule shape;
  bool metric_only = false;  // accuracy: not differentiable, only in metrics
  std::string summary;       // one line for --help and error messages
  // Pointwise built-ins: the lowering (computed inline in the nest that reads the value).
  // A pointwise loss reduced to a scalar (reduction = "mean" or "sum") is summed by lower/.
  PointwiseLowering lower = {};
  // The others: loop nests of their own (reductions, softmax, cross_entropy, layer_norm,
  // accuracy, conv2d, pooling, einsum, ...) or a kernel call (attention, embedding), into the
  // call's spec tensor or a temporary <tensor>_<temp_suffix> (empty: the built-in's name).
  CallLowering lower_call = {};
  std::string temp_suffix = {};
};

const OpInfo* find_op(const std::string& name);
const std::vector<OpInfo>& all_ops();

// Initialisers and optimisers: signatures only (their semantics live in the emitters).
struct CallSig {
  std::string name;
  std::vector<ArgSig> args;
};
const CallSig* find_initializer(const std::string& name);
const CallSig* find_optimizer(const std::string& name);
const CallSig* find_schedule(const std::string& name);  // learning-rate schedules
std::vector<std::string> schedule_names();
std::string known_names(const std::vector<std::string>& names);  // "a, b or c"
std::vector<std::string> initializer_names();
std::vector<std::string> optimizer_names();

}  // namespace cannl
