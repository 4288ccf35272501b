// solver.h — the shape constraint solver: unification of axis sizes and row variables.
//
// Takes: constraints added by shape rules —
//   * equality of two rows (unified at once, transactionally: a failed unification leaves no
//     partial bindings behind),
//   * broadcast: a result row is the broadcast of some operand rows (aligned from the right,
//     size-1 axes stretch; deferred until enough is known; in batch rows the runner's batch
//     axis, first in its row, meets only the result's first axis),
//   * affine: an axis indexed by s*v+k-p (out = (in + 2p - k)/s + 1, rounded down),
//   * sum: one axis as long as two others together (concat).
// Guarantees: solve() terminates; every constraint is satisfied or reported once through the
// error callback with its Origin; afterwards free variables are defaulted by the contract's
// §10 rules, in stages: (1) params never broadcast — their free axes take the sizes they are
// combined with; (2) a result that broadcasts with itself keeps its own axes, gets at least as
// many as its other operands, and its free axes aligned with theirs take their sizes (a number
// leaves it unchanged);
// (3) a free kernel axis of an affine index takes the stride; (4) free axes of computed tensors
// are dropped (row variables become empty, sizes become 1). What is still free belongs to a
// param or an input and is reported by the caller.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shapes/shape.h"
#include "support/source.h"

namespace cannl {

// Where a constraint came from; describe() renders the operands and their current shapes.
struct Origin {
  SourceRange at;
  std::function<std::string()> describe;
  int tensor = -1;  // the spec tensor whose definition it is in (for notes; not the solver's)
  // A note for the user when a constraint of this origin fails ("" for none), decided then.
  std::function<std::string()> hint = {};
};

class Solver {
public:
  using ErrorFn = std::function<void(const Origin&, const std::string& detail)>;
  explicit Solver(ErrorFn on_error) : on_error_(std::move(on_error)) {}

  DimT fresh_dim();
  RowT fresh_row();  // a row that is only a row variable

  DimT resolve(DimT d) const;
  RowT resolve(const RowT& r) const;
  std::string print(const RowT& r) const;    // "[3, _, ..]" with variables as _ and ..
  std::string print(const ShapeT& s) const;  // contract notation with _ and ..

  // Each returns false (after reporting) when the constraint cannot hold.
  bool equal_rows(const RowT& a, const RowT& b, const Origin& o, const std::string& what);
  bool equal_dims(DimT a, DimT b, const Origin& o, const std::string& what);
  void broadcast(RowT result, std::vector<RowT> operands, Origin o, std::string kind_name);
  void affine(DimT in, long stride, DimT out, std::optional<DimT> kernel, long padding, Origin o);
  // sum = a + b (concat's joined axis); any one of the three follows from the other two.
  void sum(DimT a, DimT b, DimT sum, Origin o);

  // `param_shapes` are resolved at each default stage to decide which variables are a
  // param's (stages 1 and 4 treat those differently).
  void solve(const std::function<std::vector<ShapeT>()>& param_shapes);

  // Free variables left in a row/dim (after resolve).
  bool is_free(const RowT& r) const;
  void free_vars(const RowT& r, std::set<int>& dims, std::set<int>& rows) const;

private:
  struct Bcast {
    RowT result;
    std::vector<RowT> operands;
    Origin origin;
    std::string kind_name;
    bool runner_first = false;  // batch rows: the runner's batch axis leads and meets only itself
    bool done = false;
  };
  struct Affine {
    DimT in, out;
    std::optional<DimT> kernel;
    long stride, padding;
    Origin origin;
    bool done = false;
    bool is_sum = false;  // out = in + kernel (sum()), not a window
  };
  struct Trail {
    enum Kind { DimParent, DimValue, RowBind, Defer } kind;
    int var;
  };
  // `..a x = y ..b` with axes left over on opposite sides has no single most general
  // solution (the rows may overlap); it waits until more is known.
  struct Deferred {
    RowT a, b;
    Origin origin;
    std::string what;
  };

  int find(int v) const;
  // Unification without reporting; on failure returns a reason and rolls back.
  std::optional<std::string> unify_dims(DimT a, DimT b);
  std::optional<std::string> unify_rows(const RowT& a, const RowT& b);
  std::optional<std::string> unify_rows_inner(const RowT& a, const RowT& b);
  std::optional<std::string> unify_dims_inner(DimT a, DimT b);
  void bind_row(int var, RowT value);
  void rollback(size_t mark);

  bool step_broadcast(Bcast& c);
  bool leads_with_batch(const Bcast& c, const RowT& op) const;
  bool step_affine(Affine& c);
  bool step_sum(Affine& c);
  bool propagate();
  bool default_params(const std::set<int>& pdims, const std::set<int>& prows);
  bool default_self_broadcasts();
  bool default_kernels(const std::set<int>& pdims);
  bool default_drop_free(const std::set<int>& pdims, const std::set<int>& prows);
  // Whether deferred equality d still holds with its free rows dropped to [] (a dry run).
  bool survives_drop(const Deferred& d);
  void fail(Bcast& c, const std::string& detail);
  bool retry_deferred(bool force);
  bool duplicates_deferred(size_t count_before) const;

  ErrorFn on_error_;
  std::vector<int> dim_parent_;
  std::vector<std::optional<DimT>> dim_value_;  // at roots: a Known or Batch value
  std::vector<std::optional<RowT>> row_binding_;
  std::vector<Trail> trail_;
  std::vector<Bcast> bcasts_;
  std::vector<Affine> affines_;
  std::vector<Deferred> deferred_;
  Origin cur_origin_;        // the constraint being unified, for deferred equalities
  std::string cur_what_;
  bool force_ = false;       // resolve ambiguous row equalities without overlap (last resort)
};

}  // namespace cannl
