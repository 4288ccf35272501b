// ast.h — the syntax tree of a spec file.
//
// Plain structs: a Spec is a list of statements; expressions are a tagged tree. Every node
// carries the SourceRange it was parsed from, so later stages (shape inference, autodiff,
// the emitters) can point back at the spec.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spec/einsum.h"
#include "support/source.h"

namespace cannl {

// ---- shapes as written: [BATCH | INPUT -> OUTPUT] ----------------------------------------
struct AxisSpec {
  // 12, hidden, _, .., 4 * hidden
  enum Kind { Size, DimName, Wildcard, RowVar, Product } kind = Size;
  long size = 0;
  std::string name;
  SourceRange range;
  std::vector<AxisSpec> factors;  // Product: sizes and dim names, multiplied at resolution
};

struct ShapeSpec {
  std::array<std::vector<AxisSpec>, 3> parts;  // indexed by AxisKind
  SourceRange range;
};

// ---- expressions ------------------------------------------------------------------------
enum class ExprKind {
  Number,   // 0.5
  Name,     // a tensor or dim
  String,   // "..." (only as a call argument)
  Neg,      // -a
  Add, Sub, MatMul, Mul, Div, Pow,  // a + b, a - b, a * b, a *. b, a / b, a ** b
  Call,     // f(args, key = value)
  Index,    // a[i]: `number` is i, `op_range` the index; one operand. a[a:b] (a slice, contract
            // v2 §3): `slice_end` is b. a[t] (t the instance index of a repeat block, v2 §4): `name`
            // is t, and `number` its value in the instance (set by name resolution, is_integer)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string keyword;  // empty for a positional argument
  SourceRange keyword_range;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::Number;
  SourceRange range;     // the whole expression
  SourceRange op_range;  // the operator token (binary/unary), or the callee name (Call)
  double number = 0;
  bool is_integer = false;
  std::string name;      // Name, Call (callee), String (contents), Index (an instance index)
  long slice_end = 0;    // Index: b of a slice a[a:b] (> number); 0 for a[i]
  std::vector<ExprPtr> operands;  // Neg: 1, binary: 2
  std::vector<Arg> args;          // Call
  std::optional<EinsumSpec> einsum;  // String arguments of einsum/sum/mean/max
  int height = 1;  // nodes on the longest path down to a leaf; the parser bounds it (kMaxExprOps)
};

// The most operations an expression may nest (every later stage walks trees recursively): a
// tree of height kMaxExprOps + 1, counting the leaf.
inline constexpr int kMaxExprOps = 256;

const char* expr_op_spelling(ExprKind k);  // "+", "*.", ...

// ---- statements -------------------------------------------------------------------------
enum class StmtKind { Model, Dim, Input, Param, Define, Output, Metric, Minimize, Repeat };

struct NameRef {
  std::string name;
  SourceRange range;
};

// minimize: one optimiser and the params it updates (contract v2 §5): `OPT on GROUP`, GROUP a
// word (matrices, embeddings, vectors, others) or a bracketed list of param names; without
// `on`, every param (v0).
struct OptGroup {
  ExprPtr optimizer;
  bool has_on = false;
  NameRef word;                // the group's word ("" for a list or without `on`)
  std::vector<NameRef> names;  // the list's names
  SourceRange range;           // the group after `on` (empty without `on`)
};

struct Stmt {
  StmtKind kind = StmtKind::Model;
  SourceRange range;             // the whole statement (repeat: its first line)
  // model/dim/input/define/metric/minimize: 1; param/output: 1+; repeat: the carried names
  std::vector<NameRef> names;
  std::optional<ShapeSpec> shape;  // input (required), param (optional)
  bool is_int = false;           // input: `int` after the shape (integer values, int32)
  SourceRange int_range;
  // param: `frozen` after the initialiser (no gradient, no optimiser state); `buffer NAME ...`
  // is a param statement with is_buffer (a non-trainable constant: frozen too). Both words
  // are contextual: `buffer = x`, `param frozen : [3]` keep their v0 meaning.
  bool frozen = false;
  bool is_buffer = false;
  long dim_value = 0;            // dim
  SourceRange dim_value_range;
  ExprPtr expr;                  // define/metric: the value; param: the initialiser
  // minimize: every optimiser with its group, in order (one without `on`: v0's form);
  // `optimizer` is the first's call (or bare name).
  std::vector<OptGroup> groups;
  const Expr* optimizer = nullptr;
  // minimize: training options after the optimiser, `, NAME = EXPR` each
  // (schedule = cosine(...), clip_grad_norm = 1.0)
  std::vector<std::pair<NameRef, ExprPtr>> options;
  // repeat [INDEX in] COUNT [carry NAME, ...] ... end: COUNT is a dim name (count.name) or a
  // positive integer (dim_value); INDEX (empty name when absent) the instance index; the
  // block's statements, in order.
  NameRef count;
  NameRef index;
  std::vector<Stmt> body;
  SourceRange end_range;  // the closing `end` (empty when it is missing)
  bool broken = false;    // repeat: its first line did not parse (the block only pairs `end`)
};

struct Spec {
  std::vector<Stmt> stmts;
  // Names a statement with a syntax error would have defined: later uses of them are not
  // reported again as unknown.
  std::set<std::string> broken_names;
};

}  // namespace cannl
