// model.h — a spec after name resolution: the tensors, dims, outputs, metrics and objective.
//
// Takes: a parsed Spec. Guarantees (when no error was reported): `model` comes first and
// once; every name is defined once and before use; every call names a known built-in with a
// valid argument list; initialisers and optimisers are known and well-formed; dims are
// substituted by value; `**` has a number exponent. The Model points into the Spec, which
// must outlive it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_table.h"
#include "spec/ast.h"
#include "support/diagnostic.h"

namespace cannl {

enum class TensorKind { Input, Param, Computed };
const char* tensor_kind_name(TensorKind k);  // "input", "param", "computed"

struct Tensor {
  std::string name;
  TensorKind kind = TensorKind::Computed;
  SourceRange decl;                  // the name where it is declared/defined
  const Stmt* stmt = nullptr;        // declaring statement
  const ShapeSpec* shape = nullptr;  // written shape (input, param), if any
  const Expr* expr = nullptr;        // definition (computed)
  bool is_metric = false;
};

struct CallConfig {  // an initialiser or optimiser with its arguments resolved
  std::string name;
  std::map<std::string, double> args;
  SourceRange range;
};

struct Model {
  std::string name;
  SourceRange name_range;
  std::map<std::string, long> dims;
  std::vector<Tensor> tensors;  // declaration order
  std::map<std::string, int> index;
  std::map<int, CallConfig> inits;  // param index -> initialiser (absent: the default)
  std::vector<int> outputs;
  std::vector<int> metrics;
  int loss = -1;  // minimize target
  SourceRange loss_range;  // the name after 'minimize'
  std::optional<CallConfig> optimizer;
  // Training options of the minimize statement (docs/language.md §10).
  std::optional<CallConfig> schedule;  // absent: the learning rate stays constant
  double clip_grad_norm = 0;           // > 0: clip the global L2 norm of the gradients
  std::map<const Expr*, BoundCall> calls;  // every built-in call, bound to its signature

  const Tensor* find(const std::string& n) const {
    auto it = index.find(n);
    return it == index.end() ? nullptr : &tensors[it->second];
  }
};

Model build_model(const Spec& spec, DiagEngine& diags);

// The value of a number written in the spec: a number literal or a dim name, possibly negated
// once; nullopt for anything else.
std::optional<double> constant_value(const Expr& e, const std::map<std::string, long>& dims);

// Binds a call's arguments to a signature; reports and returns false on a mismatch.
bool bind_args(const Expr& call, const std::vector<ArgSig>& sig, const Model& m,
               DiagEngine& diags, BoundCall& out);

}  // namespace cannl
