// lower_context.h — what a built-in's lowering (lower/lowerings.h) sees of the Lowerer.
//
// The Lowerer (lower.cpp) implements LowerContext: the values of sub-expressions at an index,
// new buffers named after the spec tensor being lowered, and the nests it appends to the
// forward nests (in the current phase) or to the training step's updates. Index maps, nests
// under construction and the broadcast rule are plain functions of shapes here, shared by
// every lowering.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "lower/lowered.h"
#include "shapes/shape.h"
#include "spec/ast.h"

namespace cannl {

// An index of a value: one affine index per storage dim of its shape (batch, output, input
// axes, lower.h), in the loop variables of a nest.
using IndexMap = std::vector<ir::Affine>;

// The loops of one nest under construction.
struct Nest {
  std::vector<ir::Iter> iters;
  // Adds a loop named `base` (base1, base2, ... when taken or a C word the kernels use);
  // returns its position.
  int add(const std::string& base, long size, bool batch);
};

// The count of the iterations of the loops `which` of a nest, as an expression (n for a batch
// loop).
ir::ExprP count_of(const Nest& n, const std::vector<int>& which);

// ---- storage order and broadcasting --------------------------------------------------------

// One storage axis of a shape: its kind, its position in its row, the axis.
struct FlatAxis {
  AxisKind kind;
  int pos;
  Axis axis;
};
inline constexpr AxisKind kStorageOrder[3] = {AxisKind::Batch, AxisKind::Output, AxisKind::Input};
std::vector<FlatAxis> flat(const Shape& s);               // in storage order
int flat_index(const Shape& s, AxisKind kind, int pos);   // (kind, pos)'s place in storage order
const char* kind_letter(AxisKind k);                      // loop names: b, o, i

// Broadcast (contract §5): each kind of axes aligned from the right, except that the runner's
// batch axis meets the runner's batch axis (contract v1 §2: it leads its row, and the declared
// batch axes after it align from the right); a size-1 axis of the child against a larger one
// of the parent reads index 0.
IndexMap align(const Shape& parent, const IndexMap& pmap, const Shape& child);
// Where axis `pos` of child's row `kind` lies in parent's row.
int parent_pos(const Shape& parent, const Shape& child, AxisKind kind, int pos);
// The index of one axis of `child` broadcast into `parent`.
ir::Affine aligned(const Shape& parent, const IndexMap& pmap, const Shape& child, const FlatAxis& a);

// One axis of an einsum operand against its concrete shape.
struct Slot {
  const EinAxis* axis;  // null for an axis of '...'
  std::string key;      // its name, or "...K#j" for the j-th from the right of '...' in row K
  Axis concrete;
};
// Expands one operand against its concrete shape: a key per storage axis.
std::vector<Slot> expand(const EinOperand& o, const Shape& s);

// ---- the Lowerer's public face -------------------------------------------------------------

class LowerContext {
public:
  virtual ~LowerContext() = default;

  // What the spec says.
  virtual const Shape& shape(const Expr* e) const = 0;
  virtual bool is_int(const Expr* e) const = 0;  // integer ids (Model::is_int)
  virtual long max_batch() const = 0;
  virtual const ir::Buffer& buffer(int b) const = 0;
  // The buffer of a spec tensor that `e` names, or -1 (not a name, or a dim's).
  virtual int tensor_buffer(const Expr* e) const = 0;

  // The value of `e` at index `map`: pointwise sub-expressions inline, anything else stored
  // in a buffer first.
  virtual ir::ExprP value(const Expr* e, const IndexMap& map) = 0;
  // An operand of a product: names and numbers inline, anything else stored first (it would
  // otherwise be recomputed for every term of the sum).
  virtual ir::ExprP operand(const Expr* e, const IndexMap& map) = 0;
  // A buffer holding the value of `e`: its tensor's, or a new one named `what`; a copy when
  // `avoid` holds that buffer already (a kernel call takes distinct buffers).
  virtual int stored(const Expr* e, const char* what, const std::set<int>& avoid) = 0;

  // A temporary named after the spec tensor being lowered: <tensor>_<suffix>.
  virtual int temp(const std::string& suffix, const Shape& s) = 0;
  virtual int temp_dims(const std::string& suffix, std::vector<ir::Dim> dims, std::string what) = 0;
  // The name the state of `call` is saved under: the spec tensor's (NAME.INDEX in a repeat
  // block), NAME.K when its statement has several calls of the built-in (K from 1, in source
  // order).
  virtual std::string state_prefix(const Expr* call) const = 0;
  // A checkpointed, frozen param that is not in the spec (batch_norm's running statistics):
  // saved as `state_name` (its C name with '.' as '_'), initialised to `init` by init.
  virtual int state_param(const std::string& state_name, const Shape& s, double init) = 0;

  // Appends the nest  buf[index] acc body  over the loops of `n`, with the statement's spec
  // line and text.
  virtual void emit(const Nest& n, int buf, IndexMap index, ir::Accum acc, ir::ExprP body) = 0;
  virtual void emit_call(ir::Call call) = 0;  // an opaque kernel call (ir::Call), likewise
  // The routines the nests emitted from now on belong to (Phase::Both until changed back).
  virtual void set_phase(Phase phase) = 0;
  // From now on (until switched off) nests go to the training step's updates
  // (Lowered::train_updates), not the forward nests.
  virtual void to_updates(bool on) = 0;
  virtual long next_stream() = 0;  // a random stream of its own for each call that draws (0, 1, ...)

  // Helpers built on the above.
  // A nest with one loop per storage axis of `s` (named `names`, else b, o, i or b0, o1, ...);
  // returns the identity map.
  IndexMap loops_for(const Shape& s, Nest& n, const std::vector<std::string>& names = {});
  // A nest over the storage dims of buffer `b` (named `names`, else j0, j1, ...).
  IndexMap loops_for_buffer(int b, Nest& n, const std::vector<std::string>& names);
  // Buffer `b` set to `v` everywhere (the fill before a reduction into it).
  void fill_buffer(int b, double v, const std::vector<std::string>& names = {});
};

}  // namespace cannl
