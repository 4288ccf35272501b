// c_emitter.h — the C back end's emitter, shared by the files that print its parts (internal).
//
// CEmitter prints one Program as the files of emit/c_emit.h: c_emit.cpp the files, the state,
// the nests' kernels and the routines; c_blocks.cpp the rolled repeat blocks' functions and the
// loops calling them; emit/c_tables.h the runtime's tables. Not part of the generator's API:
// included by those files only.
#pragma once

#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emit/c_common.h"
#include "emit/c_emit.h"
#include "emit/c_names.h"
#include "emit/contraction.h"

namespace cannl {

// One C file's routines over one state (the training state, or the forward-only state): its
// kernels (a static function per loop nest, defined once however many routines run it) and
// its routines (which name their buffers once at their top and call the kernels and the
// matrix products in order).
struct Unit {
  const ir::Arena* arena = nullptr;
  std::string state;  // the state's struct: "struct fashion_mlp"
  std::string kernels, routines;
  std::set<std::string> defined;  // kernels defined in this file
};

class CEmitter {
public:
  using data = kainjow::mustache::data;

  CEmitter(const ir::Program& p, const COptions& o) : p_(p), o_(o), names_(c_names(p)) {
    x_.p = &p;
    x_.names = names_.buffer;
    x_.f64 = o.f64;
    x_.example_offset = true;
  }

  std::vector<OutputFile> run();

private:
  const ir::Program& p_;
  COptions o_;
  CNames names_;
  CExpr x_;  // prints the expressions of the nest being printed (its loop variables, helpers used)
  bool gemm_kernel_ = false;  // some contraction calls the runtime's kernel (cannl_sgemm, cannl_dgemm)
  bool gemm_blas_ = false;    // some contraction calls cblas
  bool attention_ = false;    // some routine calls the runtime's attention (cannl_attention.h)
  bool rows_ = false;         // printing the decode routine, over rows (ir::Interface::slots): pos[r], seq[r]
  bool int8_unit_ = false;    // printing the forward-only state's routines: int8 params read as such
  // While a rolled block's function is printed in that unit: its formals bound to the slices of
  // an int8 param, each with the C names of the instance's rows and scales it takes instead.
  std::map<int, std::pair<std::string, std::string>> int8_formals_;
  // Kernels by their text (the name left out): a nest that forward, eval_metrics and
  // train_step all run is one function, with one name in both files.
  std::map<std::string, std::string> kernel_by_text_;
  // The buffers with a field in the training state: every one with a place there, but the
  // views of stacked storage (lower/roll.h) no training routine names (fielded(p_.layout.training)).
  std::set<int> fielded_;

  static std::string render(const std::string& name, const data& d) { return render_template(name, d); }

  std::string num(double v) const { return x_.num(v); }
  const std::string& name(int b) const { return names_.buffer[static_cast<size_t>(b)]; }
  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }
  long elem() const { return o_.f64 ? 8 : 4; }
  // A stacked buffer's instances among the params (lower/roll.h): the first's index in
  // Program::params and their count (the views of `stack`, consecutive there).
  std::pair<int, int> instances_of(int stack) const;

  // <model>_param and <model>_grad's params: `api_params`, each param looked up by its own
  // name, and `param_groups`, a repeat block's stacked param whose instances (`w_qkv.0` to
  // `w_qkv.47`, consecutive in Program::params) are found by one loop: instance l is elements
  // off + l * per of the stacked buffer (and of the stacked gradient). A group whose instances
  // do not follow that pattern is listed param by param.
  void api_params(data& d) const;

  // The C element type of buffer b: real, or int32_t for ids.
  const char* ctype(int b) const { return buf(b).ids > 0 ? "int32_t" : "real"; }

  // The data of every template (emit/c_common.h), and what only the C target's use.
  data common();

  // `[batch, 512] h1 : [batch | 512]`: a buffer's storage dims and its spec shape, for comments.
  std::string shape_comment(int b) const;

  // A state struct's field for buffer b: `    real *name; /* [batch, 512] [batch | 512] */`.
  std::string field_decl(int b) const;

  // Buffer b lives in the optimiser-state block (a field of the training state).
  bool in_opt_block(int b) const;

  // The buffers with a field in the state of arena a (the training state, or the forward-only
  // state): those with a place in its arena (or the training state's optimiser-state block),
  // less the views of stacked storage that no routine of the state names (a routine's prologue
  // names a view only when a nest of its own reads or writes it, or when it does not name the
  // view's stacked buffer): those the tables, <model>_param and <model>_infer_param address from
  // their stacked buffer (emit/c_tables.h), so that the state's fields do not grow with the depth.
  std::set<int> fielded(const ir::Arena& a) const;

  // The training state's pointer to a param or gradient b: its field, or its stacked buffer's
  // plus its offset.
  std::string state_pointer(int b) const;

  // The training state's fields (the layout's, passes/plan_layout.cpp), by role.
  std::string fields();
  static std::string plural(ir::Role r);

  // The forward-only unit: the routines forward and eval_metrics over a state of their own, laid
  // out by passes/plan_layout.cpp (the params, the buffers the two routines use outside their
  // plans, one work region they share).
  void inference(data& d);

  // int8 weights (passes/quantize.h): the forward-only state's int8 block, its rows and scales
  // per param as the pass laid them out, and the data of the templates' int8 parts.
  void int8_data(data& d, std::string& fields);
  // An int8 param's field of the state's int8 and int8_scale structs: its name, or, for an
  // instance of a rolled block's param, `<stacked>[l]` (the block's function is given instance
  // l's rows and scales through these); and the C expression of its float values.
  std::string int8_field(int b) const;
  std::string float_values(int b) const;
  // The param buffers (param_storage()) that hold int8 weights, in order: <model>_weights.c's
  // tables of int8 rows and scales, one per buffer (a stacked one: its instances' one after another).
  std::vector<int> int8_tables() const;

  // The forward-only state's param buffers (c_weights.cpp), in the order of their places in its
  // arena's param prefix (Arena::state): each param's storage (its own buffer, or the stacked
  // buffer of a repeat block's instances), once. <model>_weights.c holds one read-only array
  // per buffer, in this order, and a state of _infer_create_in_place reads them in place.
  std::vector<int> param_storage() const;

  // <model>_weights.c (c_weights.cpp): the trained values of each param buffer of the
  // forward-only state as a static const array (an int8 weight's: its rows and scales).
  std::string weights(data d, std::string* bin);  // <model>_weights.c; with bin: its bytes go there

  std::string helpers();

  // ---- nests -------------------------------------------------------------------------

  // The nest's expressions and accesses, as emit/c_common.h prints them.
  std::string in_range(const ir::Access& a) const { return x_.in_range(a); }
  std::string access(const ir::Access& a) const { return x_.access(a); }
  std::string expr(const ir::Expr& e) { return x_.expr(e); }

  // A contraction as a matrix-product call (emit/c_gemm.h) ("" when it is not one or is too small). A
  // zero_first product (passes/fold_fills) overwrites its output, unless a K loop runs around
  // the call: then the output is zeroed first and each call accumulates.
  std::string gemm_nest(const ir::Stmt& s, const std::optional<Gemm>& g, const std::set<std::string>& taken);

  // The body of a nest's kernel: its loops (the ones of one iteration left out) and its
  // assignments, indented for a function body.
  std::string nest(const ir::Stmt& s, const std::set<std::string>& taken);

  // The values an `omp simd` innermost loop reads but does not change along it (a row's mean
  // and variance: var[b, t] in layer_norm's (x - mean) * (1 / sqrt(var + eps))), each read
  // once into a local before the loop: the outlined function of `omp parallel` loses
  // `restrict`, and GCC then reloads them after every store of the unrolled loop and
  // recomputes what depends on them (a square root and a division per vector). Sets
  // x_.locals; returns the declarations, indented by `indent`.
  std::string row_locals(const ir::Stmt& s, int inner, const std::set<std::string>& taken, const std::string& indent);

  // The innermost loop of a parallel nest is marked `omp simd` (CANNL_SIMD: GCC only) when
  // its iterations are independent: every assignment writes a cell that the loop indexes (no
  // two iterations write the same cell), assignments to one buffer write the same cell or
  // cells apart by a constant index (a stacked optimiser state's kinds, st[l, 0, j] and
  // st[l, 1, j]), and the nest reads what it writes only at a cell it writes at that point
  // (buffers sharing bytes do so in place: plan_memory.cpp). The outlined function of `omp parallel` loses the kernel's
  // `restrict`, and GCC 12 then leaves a loop storing two buffers (layer_norm's x_ln and its
  // affine image) scalar.
  static bool independent_inner(const ir::Stmt& s, const std::vector<int>& loops);

  // `omp parallel for` over loops doing `count` iterations: threads only when that pays for
  // waking them (CANNL_PARALLEL_MIN, cannl_rt.h).
  static std::string parallel_for(const std::string& count);
  static std::string parallel_for(const ir::Stmt& s, int from);

  // A loop over every cell of a zero_first nest's out buffer (the out access covers the
  // buffer; a batch axis is the first, run to n): `= identity` before it, `*= c` after it.
  std::string fill_first(const ir::Stmt& s, const std::string& v, const std::string& op);

  // The buffers a routine reads or writes, the interface buffers it hands out included (a
  // block call's: the buffers its bindings slice, and the run-time scalars of its body's nests).
  std::set<int> routine_buffers(const ir::Routine& r, std::set<std::string>& scalars) const;

  // Whether buffer b shares bytes with another of `bufs` while routine r runs in arena a (an
  // in-place pair of the memory plan): then neither is restrict.
  bool shares_bytes(const ir::Routine& r, const ir::Arena& a, const std::set<int>& bufs, int b) const;

  // A nest as a call of its kernel, the kernel defined in the unit when it is new there.
  std::string kernel_call(const ir::Routine& r, const ir::Stmt& s, Unit& u, bool& n_used,
                          const std::map<int, std::string>& arg_of = {});

  // A kernel call of the runtime (ir::Call): attention per (sequence, head) pair, the pairs in
  // parallel (each writes its own rows: the same bits for any thread count). Grouped-query
  // (group > 1): query head cannl_h reads key/value head cannl_g = cannl_h / group; the
  // backward pass runs per (sequence, key/value head), its query heads one after the other
  // (they add into the same dk, dv rows).
  std::string call_text(const ir::Call& c, bool& n_used);

  // The decode routine's attention: for each row r < n, every head's query at position pos[r]
  // against the cached keys and values of positions 0 .. pos[r] of its slot seq[r]
  // (cannl_attention.h's q_offset); with a window whose caches are rings (ir::Call::ring), the
  // last positions' keys from their rows pos[r] % ring. One cannl_attention_decode_* call per
  // (row, part of its key/value heads), the pairs in one parallel loop (the parts:
  // cannl_attention_decode_parts, several only when the rows are fewer than the threads).
  // Grouped-query: key/value head h / group.
  std::string attention_rows(const ir::Call& c);

  // Embedding: the gather, a row per position in parallel; the scatter-add, blocks of 64
  // features in parallel, each block's positions in order (the same bits for any thread count).
  std::string embedding_text(const ir::Call& c);

  // The gradient hook's calls after a nest of train_grads that finishes param gradients: each
  // one's place in the grad block, in elements.
  std::string grads_final(const ir::Stmt& s) const;

  // A nest of train_update for a shard of the params (set_update_shard): a param's update runs
  // when the param is in [update_first, update_last); the squared norm of clip_grad_norm is
  // summed here unless the caller gave it (update_norm_sq >= 0: the sum over every rank's shard).
  std::string update_shard(const ir::Routine& r, const ir::Stmt& s, const std::string& text) const;

  // A nest over a stacked param's instances (Stmt::update_count > 1) for the instances in the
  // params [lo_expr, hi_expr) only: the instance loop runs to n = hi - lo, each stacked buffer
  // from instance lo (an optimiser-state one from its first held instance: bind_opt_state).
  std::string stacked_range(const ir::Routine& r, const ir::Stmt& s, Unit& u, const std::string& first,
                            const std::string& last);

  // A nest of init zeroing a param's optimiser state: it runs when the state holds the
  // param's (shard_opt_state).
  static std::string held_state(const ir::Stmt& s, const std::string& text);

  static std::string what(const ir::Stmt& s) { return s.line ? fmt::format("line {}: {}", s.line, s.what) : s.what; }

  // ---- rolled repeat blocks (ir.h Block) ------------------------------------------------

  // The block function a block call runs (<block>_forward, <block>_backward, <block>_infer,
  // <block>_init, <block>_decode), defined in the unit the first time: one instance's half of the
  // training body (its inference body, its init body, its decode body) over its parameters, its
  // locals at their offsets of the body's plan in the scratch the caller gives, each nest a
  // kernel call (kernels shared by every instance) or a matrix product. The init body draws from
  // the caller's random stream; the decode body runs at the caller's position pos.
  const std::string& block_function(const ir::Call& c, Unit& u);

  // The work region's pointers at a routine's top: its batch-independent buffers at byte offsets,
  // its batched ones at a per-example offset times the state's cap, after the region's
  // batch-independent part.
  std::string work_prologue(const ir::Routine& r, const ir::Arena& a,
                            const std::vector<std::pair<long, int>>& work) const;

  // A block call: its block's function for each instance (the backward in reverse instance
  // order), each instance's slices of the stacked buffers; in train_grads, after each
  // instance's backward, the gradient hook of the param gradients it finished (a stacked
  // gradient's slice), after the loop those finished by the last instance (a shared one's).
  std::string block_call(const ir::Stmt& s, Unit& u);

  // A routine: its buffers named once at its top (the inputs, the state's fields, the work
  // region's buffers at their offsets), its run-time scalars, then each nest a kernel call or
  // a matrix product, then what it hands out.
  std::string routine(const ir::Routine& r, Unit& u);
  std::string routine_text(const ir::Routine& r, Unit& u);
};

}  // namespace cannl
