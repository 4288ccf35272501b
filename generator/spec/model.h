// model.h — a spec after name resolution: the tensors, dims, outputs, metrics and objective.
//
// Takes: a parsed Spec. Guarantees (when no error was reported): `model` comes first and
// once; every name is defined once and before use; every call names a known built-in with a
// valid argument list; initialisers and optimisers are known and well-formed; dims are
// substituted by value; `**` has a number exponent; integer tensors (ids) are used only where
// a built-in takes ids. Repeat blocks are expanded: one tensor per name and instance
// (`w_qkv.0`, `w_qkv.1`, ...), each instance's statements copied with its names, so later
// stages see an ordinary model. The Model points into the Spec, which must outlive it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/op_table.h"
#include "spec/ast.h"
#include "support/diagnostic.h"

namespace cannl {

enum class TensorKind { Input, Param, Computed };
const char* tensor_kind_name(TensorKind k);  // "input", "param", "computed"

// Float tensors take the generation's element type (cannl gen --dtype); Int32 holds ids: an
// `int` input and what is computed from ids without arithmetic (position(...), x[i], a copy).
enum class DType { Float, Int32 };
const char* dtype_name(DType d);  // "float", "int32"

struct Tensor {
  std::string name;                  // an instance of a repeat block: NAME.INDEX
  TensorKind kind = TensorKind::Computed;
  SourceRange decl;                  // the name where it is declared/defined
  const Stmt* stmt = nullptr;        // declaring statement
  const ShapeSpec* shape = nullptr;  // written shape (input, param), if any
  const Expr* expr = nullptr;        // definition (computed)
  bool is_metric = false;
  bool frozen = false;               // a frozen param or a buffer: no gradient, no optimiser state
  DType dtype = DType::Float;
  const Stmt* block = nullptr;       // the repeat block this is an instance of, if any
  int instance = -1;                 // and the instance's index
};

struct CallConfig {  // an initialiser or optimiser with its arguments resolved
  std::string name;
  std::map<std::string, double> args;          // numbers and booleans (0/1)
  std::map<std::string, std::string> strings;  // choices (adamw's decay = "matrices")
  SourceRange range;
};

// An optimiser of the minimize statement and the params it updates (contract v2 §5).
struct OptGroupConfig {
  CallConfig optimizer;
  std::string word;                    // matrices, embeddings, vectors, others; "" for a list;
                                       // "all" without `on` (v0: every param)
  std::vector<NameRef> names;          // a list's param names
  SourceRange range;                   // the group after `on` (the optimiser's without `on`)
  std::vector<int> params;             // its trainable params (tensor indices), set by
                                       // resolve_opt_groups (shapes/opt_groups.h)
};

struct Model {
  std::string name;
  SourceRange name_range;
  std::map<std::string, long> dims;
  std::vector<Tensor> tensors;  // declaration order
  std::map<std::string, int> index;
  std::map<int, CallConfig> inits;  // param index -> initialiser (absent: the default)
  std::vector<int> outputs;
  std::vector<SourceRange> output_ranges;  // where each output is named (its `output` statement)
  std::vector<int> metrics;
  int loss = -1;  // minimize target
  SourceRange loss_range;  // the name after 'minimize'
  std::optional<CallConfig> optimizer;  // the first optimiser of `minimize`
  std::vector<OptGroupConfig> opt_groups;  // every optimiser with its group (all resolved or none)
  // Training options of the minimize statement (docs/language.md §10).
  std::optional<CallConfig> schedule;  // absent: the learning rate stays constant
  double clip_grad_norm = 0;           // > 0: clip the global L2 norm of the gradients
  std::map<const Expr*, BoundCall> calls;  // every built-in call, bound to its signature
  std::set<const Expr*> int_exprs;         // expressions whose values are integers (ids)
  // The statements of repeat-block instances (names renamed to NAME.INDEX): the Tensor::stmt
  // and Tensor::expr of instance tensors, and of statements after a block that read a name it
  // carries, point here.
  std::vector<std::unique_ptr<Stmt>> expanded;

  const Tensor* find(const std::string& n) const {
    auto it = index.find(n);
    return it == index.end() ? nullptr : &tensors[it->second];
  }
  bool is_int(const Expr* e) const { return int_exprs.count(e) > 0; }
};

// `dim_overrides` replace the values of the spec's dims of those names (cannl gen --dim); a
// name the spec has no dim of is the caller's to report (spec_dim_names).
Model build_model(const Spec& spec, DiagEngine& diags, const std::map<std::string, long>& dim_overrides = {});
std::vector<std::string> spec_dim_names(const Spec& spec);

// The size a written axis stands for: a size, a dim, or a product of them (after resolution,
// which checks that every dim exists and the product is in range).
long written_size(const AxisSpec& a, const std::map<std::string, long>& dims);

// The value of a number written in the spec: a number literal or a dim name, possibly negated
// once; nullopt for anything else.
std::optional<double> constant_value(const Expr& e, const std::map<std::string, long>& dims);

// Binds a call's arguments to a signature; reports and returns false on a mismatch.
bool bind_args(const Expr& call, const std::vector<ArgSig>& sig, const Model& m,
               DiagEngine& diags, BoundCall& out);

}  // namespace cannl
