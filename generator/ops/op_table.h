// op_table.h — every built-in function of the spec language, one entry each.
//
// An entry gives the call signature (tensor operands, integer/number options, an einsum spec
// string) and the shape rule. Later stages add their per-op rules (gradient, lowering) next to
// the shape rule in the same entry, so adding an op touches one table.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spec/ast.h"

namespace cannl {

class ShapeContext;  // shapes/infer.cpp: the solver as seen by a shape rule

enum class ArgType { Tensor, Int, Number, Spec };

struct ArgSig {
  std::string name;
  ArgType type = ArgType::Tensor;
  bool required = true;
  double default_value = 0;
  double min_value = -1e300;  // Int/Number options below this are rejected
};

// A call after binding its arguments to the signature.
struct BoundCall {
  const Expr* call = nullptr;
  std::vector<const Expr*> tensors;      // tensor operands in signature order (present ones)
  std::map<std::string, double> values;  // Int/Number options (defaults filled in)
  const EinsumSpec* spec = nullptr;      // the Spec argument, if any
};

using ShapeRule = std::function<void(ShapeContext&, const BoundCall&)>;

struct OpInfo {
  std::string name;
  std::vector<ArgSig> args;
  ShapeRule shape;
  bool metric_only = false;  // accuracy: not differentiable, only in metrics
  std::string summary;       // one line for --help and error messages
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
