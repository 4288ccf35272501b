// c_common.h — what the C and CUDA back ends print alike.
//
// Takes: a Program. Gives: the template data shared by <model>.h and the model's
// API table (inputs, outputs, params, metrics), template rendering, and
// CExpr, the printer of the IR's scalar expressions and buffer accesses as C (valid CUDA C++
// too): flat indices with the strides baked in, the in-range condition of padded reads,
// the helper functions (relu, gelu, ...) an expression used (a random initialiser draws from
// the cannl_rng that `rng` points to). Both back ends print a nest's
// body through CExpr, so C and CUDA compute the same expression with the same literals.
#pragma once

#include <functional>
#include <kainjow/mustache.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

std::string upper(std::string s);
std::string comment_safe(std::string s);  // no "*/" or "/*" inside a comment
std::string num_double(double v);         // a double literal: 0.1, 1.0, 1e-08
// templates/NAME rendered with d; a partial {{> common/NAME}} is that template, less its last newline.
std::string render_template(const std::string& name, const kainjow::mustache::data& d);

// A buffer's dims as "784, 512" ("0" for none), and its element count; skip_batch leaves the
// batch axis out (per example).
std::string dims_list(const ir::Buffer& b, bool skip_batch);
long buffer_size(const ir::Buffer& b, bool skip_batch);

// The buffers a nest reads or writes (every assignment's) and the run-time scalars
// its expressions use, added to the two sets.
void stmt_uses(const ir::Stmt& s, std::set<int>& bufs, std::set<std::string>& scalars);

// Rolled repeat blocks (ir.h Block), for both emitters' block functions:
// the nests of its block's body a block call runs;
std::vector<const ir::Stmt*> block_span(const ir::Program& p, const ir::Call& c);
// what a block function takes besides the state and n: the buffers its call binds that the half
// uses (formals, and saved activations: a slot of their stack), written ones first (with the
// formals a written local lives in: Routine::hosted), each in buffer order; and the run-time
// scalars its nests read;
struct BlockSig {
  std::vector<int> written, read;
  std::vector<std::string> scalars;
};
BlockSig block_sig(const ir::Program& p, const ir::Call& c);
// the buffers the routine calling it names for it (what its bindings slice, its scratch), and
// the run-time scalars of the body's nests, added to the two sets.
void block_call_uses(const ir::Program& p, const ir::Call& c, std::set<int>& bufs, std::set<std::string>& scalars);
// the argument a block call passes for binding bd in the loop over its `count` instances
// (cannl_l): a slice of the bound buffer (a batched stack's slots scaled by the state's cap),
// or the first or last instance's own buffer, each buffer written as name(b).
std::string block_actual(const ir::Program& p, const ir::Binding& bd, long count,
                         const std::function<std::string(int)>& name);

// Run-time-sized states (ir.h Arena), for both emitters: a byte offset in a state's arena,
// `fixed + per * m->max_batch` (the cap the state was created for) when it scales with it;
std::string scaled_offset(long fixed, long per, const std::string& cap = "m->max_batch");
// arena a's field of buffer b in the state's create (`cap`: its cap's expression);
std::string field_offset(const ir::Arena& a, int b, const std::string& cap);
// routine r's work region in words, for the comment at its top;
std::string work_words(const ir::Routine& r, long max_batch);
// a state's arena size (prefix "" the training state's, "infer_" the forward-only state's) at
// the cap `max_batch` its create takes (prefix + "arena_bytes"), and in words for the comments
// (prefix + "arena_words").
void arena_data(kainjow::mustache::data& d, const ir::Arena& a, const std::string& prefix);

// The data every template of a model sees (model, MODEL, version, spec, real, dtype,
// max_batch, optimizer, lr, loss, pad, inputs, outputs, params, metrics and their counts).
// `grad_prefix` is put before a gradient buffer's name in params[].grad (C: "m->").
kainjow::mustache::data model_template_data(const ir::Program& p, const std::vector<std::string>& names, bool f64,
                                            const std::string& spec, const std::string& grad_prefix);

struct CExpr;
// The top of a routine that uses the run-time scalars `used` (nests' Scalar names): train_step
// counts the step up; the learning rate as set, rounded; each definition used (ir.h ScalarDef),
// computed in double and rounded to the element type.
std::string scalar_prologue(const ir::Routine& r, const std::set<std::string>& used, CExpr& x);

// Whether loop `iter` indexes the access.
bool uses_iter(const ir::Access& a, int iter);

// Prints expressions of one nest at a time: set `stmt` and `vars` (the C names of its loop
// variables) first.
struct CExpr {
  const ir::Program* p = nullptr;
  std::vector<std::string> names;  // C name per buffer
  bool f64 = false;
  bool cuda = false;               // helpers as the CUDA target spells them (prims.h cuda_helper)
  std::vector<std::string> vars;
  std::vector<bool> dropped;  // per loop: one iteration (not the batch loop), so no loop and no index term
                              // (an at_pos loop's term is the row's position, row_pos)
  const ir::Stmt* stmt = nullptr;
  // Loads printed as a local that holds them (access text -> local name): the C emitter's
  // row values, read once before an innermost loop they do not change in.
  std::map<std::string, std::string> locals;
  std::set<std::string> helpers;  // helper functions used so far
  // The C target: train_grads' dropout numbers its examples from the state's example_offset
  // (a data-parallel rank's slice starts there in the global batch), as the run-time scalar
  // `rng_first`; rng_first: the nest being printed is one of train_grads'.
  bool example_offset = false;
  bool rng_first = false;
  // The decode routine, over rows (ir::Interface::slots): an at_pos loop's term is `pos[r]` and a
  // cache's first index (its sequence slot) `seq[r]`, r the nest's batch loop variable (the row).
  bool rows = false;

  std::string real() const { return f64 ? "double" : "float"; }
  std::string fn(const char* base) const { return f64 ? base : std::string(base) + "f"; }
  std::string num(double v) const;  // an element-type literal: 0.5f, INFINITY
  // (`pos`: the decode position's text, row_pos, "(pos[r] % W)" in a ring cache's index: ir::Buffer::ring)
  std::string affine(const ir::Affine& a, const std::string& pos = "pos") const;
  bool is_zero(const ir::Affine& a) const;  // 0 at every point (its loops all dropped, no offset)
  std::string flat_index(const ir::Access& a) const;
  std::string row_pos() const;  // the decode position's text in the nest, `pos[r]` (`pos` outside decode: unused)
  std::string in_range(const ir::Access& a) const;  // "" when always inside
  bool in_range_uses(const ir::Access& a, int iter) const;  // whether in_range(a) tests loop `iter`
  std::string access(const ir::Access& a) const;    // name[flat index]
  std::string expr(const ir::Expr& e);
  // A run-time scalar's formula (ir.h ScalarDef) in double precision, over the state's
  // built-in scalars (m->lr, m->schedule, the local step).
  std::string formula(const ir::Expr& e);
  // Starts nest `s`: its loop variables named after its iterators, clear of `taken`, of the
  // names the generated code reserves (emit/c_names.h), of `reserved` (names the back end's
  // code uses) and of each other; loops of one iteration (not the batch loop) are dropped.
  void begin_nest(const ir::Stmt& s, const std::set<std::string>& taken, const std::set<std::string>& reserved = {});
  // Definitions of the helpers used, each `qualifier real cannl_NAME(real x[, real y])`, in
  // the order of the table of primitive functions (ir/prims.cpp); "" when none.
  std::string helper_defs(const std::string& qualifier) const;

private:
  bool in_formula_ = false;
  std::string sub(const ir::Expr& e, int min_prec);
  std::string call(const std::string& f, const ir::Expr& a);
};

}  // namespace cannl
