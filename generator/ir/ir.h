// ir.h — the loop IR: buffers, and loop nests that assign scalar expressions to them.
//
// A Program is the whole model after lowering: its buffers (inputs, params, computed tensors,
// temporaries, gradients, optimiser state) and its routines. A routine is a list of loop
// nests (Stmt). Each nest has named loops with constant bounds (or the run-time batch count
// for a batch loop), and one assignment  out[index] (=|+=|max=|min=) expr  where every index
// is affine in the loop variables. Reads out of a buffer's range are zero (convolution
// padding); writes out of range are skipped. Gradients and optimiser updates are ordinary
// nests over ordinary buffers, so passes see forward and backward as one program.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cannl::ir {

// One axis of a buffer. A batch axis has `size` = the generation-time maximum batch; loops
// over it run to the run-time count n.
struct Dim {
  long size = 1;
  bool batch = false;
  bool operator==(const Dim&) const = default;
};

// Cache: a buffer the decode routine keeps across its calls (the keys and values of the
// positions before, contract v1 §6): in no routine's plan, with storage of its own in the
// inference state.
// Constant: a table that depends on no input, param or run-time value (rope's cos and sin):
// computed once by the routine of kind Constants when a state is created
// (passes/hoist_constants.cpp), with storage of its own in every state, read by the others; not
// in checkpoints.
enum class Role { Input, Param, Computed, Temp, Grad, OptState, Cache, Constant };
const char* role_name(Role r);

// A spec param's initialiser (contract §8), set by lowering: its name as routine assembly
// (lower/routines.cpp) reads it (the spec's, else "default" for a param with input axes,
// "zeros" for one without), its arguments with their defaults, and the fans of its formulas
// (kaiming, xavier, default): the products of the sizes of the param's input and of its
// output axes.
struct Init {
  std::string name;                     // uniform, normal, zeros, ones, constant, kaiming_uniform, ...
  std::map<std::string, double> args;   // lo, hi, mean, std, v, a, gain
  long fan_in = 1, fan_out = 1;
  int line = 0;                         // the param's spec line (0: none)
};

struct Buffer {
  std::string name;      // C identifier: w1, h1, h1_mm, w1_grad, w1_exp_avg
  std::vector<Dim> dims; // storage order (row-major): batch, output, input axes
  Role role = Role::Temp;
  int tensor = -1;       // spec tensor index, if any
  std::string shape;     // the spec shape, as written in §4 notation, for comments
  std::string state_name;  // in checkpoints: the param name, or "w1.exp_avg" (PyTorch's names)
  bool frozen = false;     // a param the spec freezes (`frozen`, or a `buffer`): no gradient
  int state_of = -1;       // optimiser state: the param (buffer index) it belongs to
  // 0: values of the element type. > 0: integer ids (an `int` input, position(...)), stored
  // as int32_t, that must lie in [0, ids): the row count of the embedding table they index or
  // the class count of the cross_entropy they are the target of, the smallest such bound
  // (INT32_MAX when nothing bounds them); cannl_tensor_info.ids. Loads read ids as numbers,
  // and nothing differentiates them.
  long ids = 0;
  // A spec param's initialiser (none for every other buffer: batch_norm's running statistics
  // are set by init from Lowered::state_init).
  std::optional<Init> init = std::nullopt;
  // A spec param with input axes (a weight, an embedding table, a kernel; not a bias): the
  // params adamw(decay = "matrices") decays.
  bool matrix = false;
  // Stacked storage (a rolled repeat block, lower/roll.h): `stack` > 0 marks a buffer of dims
  // [stack, instance dims...] holding one tensor per instance (llm.c's layout: w_qkv
  // [layers, 3 * C, C]); `view_of` >= 0 marks an instance's tensor (w_qkv_3, checkpoint name
  // w_qkv.3) as a view with no storage of its own: elements [view_offset, + elements()) of
  // buffer view_of. Params, their gradients and their optimiser state are stacked this way;
  // nests read and write either the views or the stacked buffer, never both in one routine
  // but the optimiser's.
  long stack = 0;
  int view_of = -1;
  long view_offset = 0;
  // A body buffer of Program::blocks[block] (-1: the program's): a formal, bound to an
  // actual buffer per instance by the block's calls, or a local, the body's own.
  int block = -1;
  bool formal = false;
  // A decode cache of a windowed attention (passes/decode.cpp) that keeps only the last `ring`
  // positions: dims [batch, ring, ...], position s in row s % ring (0: not a ring).
  long ring = 0;
  // int8 weights (`cannl gen --quantize int8`, passes/quantize.h): > 0 on a param the
  // forward-only state also keeps as int8 rows of `int8_row` elements with one float scale per
  // row (runtime-lib/quant.c's scheme), which its routines read instead of the floats; the
  // rows at byte `int8_at` of the state's int8 block (Program::int8_bytes), the scales right
  // after them (each part 64-byte aligned).
  long int8_row = 0;
  long int8_at = 0;
  long elements() const;  // with batch axes at their maximum
  // Run-time-sized states: a buffer with a batch dim holds `example_elements()` per example,
  // the cap the state was created for times that many in all (the batch axis outermost, or
  // next to a stack's instance axis, so that the per-example bytes scale by the cap).
  bool batched() const;
  long example_elements() const;  // with batch axes at 1
};

// A loop variable of a nest.
struct Iter {
  std::string name;
  long size = 1;       // constant bound (for batch: the maximum)
  bool batch = false;  // bound is the run-time n
  // The decode routine's sequence loop: one iteration, at row r's run-time position `pos[r]`
  // (the loop variable is pos[r] of the nest's batch loop r, not 0; size is 1).
  bool at_pos = false;
};

// sum(coef * iter) + offset, iters by position in the nest's `iters`.
struct Affine {
  struct Term {
    int iter;
    long coef;
  };
  std::vector<Term> terms;
  long offset = 0;
  static Affine of(int iter) { return {{{iter, 1}}, 0}; }
  static Affine constant(long c) { return {{}, c}; }
  bool is_single_iter() const { return offset == 0 && terms.size() == 1 && terms[0].coef == 1; }
  bool operator==(const Affine& o) const;
};

struct Access {
  int buf = -1;
  std::vector<Affine> index;  // one per buffer dim
  bool operator==(const Access& o) const { return buf == o.buf && index == o.index; }
};

enum class Op {
  Const,     // value
  Scalar,    // a named run-time scalar of the routine: n, lr, step, bias corrections
  Index,     // the integer value of `index[0]` (an Affine in loop variables), as a number
  Load,      // access
  Neg, Add, Sub, Mul, Div,
  Pow,       // args[0] ** value
  Eq, Gt,    // 1 or 0
  Select,    // args[0] != 0 ? args[1] : args[2]
  Prim,      // a primitive pointwise function of the table (prims.h) applied to args: relu, exp, ...
  Uniform,   // lo = args[0].value, hi = args[1].value (init only; sequential)
  Normal,    // mean, std
  Keep,      // dropout's draw: 1 or 0, 0 with probability `value` (p), from a counter-based hash of
             // the routine's key (args[0], Scalar `rng_key`: the seed and the step) and the counter
             // `index[0]` (an Affine: the element's flat index plus the dropout's stream); the same
             // at a point wherever it is computed (train_step only)
};
const char* op_name(Op op);  // "+", "select"; for Prim "prim" (the row has the function's name)

struct Expr;
struct Prim;
using ExprP = std::shared_ptr<const Expr>;

struct Expr {
  Op op = Op::Const;
  double value = 0;         // Const, Pow exponent
  const Prim* prim = nullptr;  // Prim: the function (a row of prims.h)
  std::string name;         // Scalar
  Access access;            // Load; Index uses access.index[0]
  bool nograd = false;      // Load: treated as a constant by autodiff (softmax's shift)
  bool wide = false;        // Const: a rounded reciprocal 1/c; `x * it` is computed in double, so
                            // it rounds as x / c does (simplify's `image / 255`)
  std::vector<ExprP> args;
};

// Constructors with light simplification (0 + x = x, 1 * x = x, constants folded).
ExprP cnst(double v);
ExprP scalar(const std::string& name);
ExprP load(const Access& a, bool nograd = false);
ExprP index_value(const Affine& a);
ExprP keep(const Affine& counter, double p);  // Op::Keep
ExprP unary(Op op, ExprP a);  // Neg (functions: prims.h call)
ExprP binary(Op op, ExprP a, ExprP b);
ExprP pow(ExprP a, double exponent);
ExprP select(ExprP c, ExprP a, ExprP b);
bool is_const(const ExprP& e, double v);
bool same_expr(const Expr& a, const Expr& b);

enum class Accum { Set, Add, Max, Min };
const char* accum_symbol(Accum a);  // "=", "+=", "max=", "min="

// One assignment of a nest:  out[index] (=|+=|max=|min=) body.
struct Assign {
  Access out;
  Accum accum = Accum::Set;
  ExprP body;
};

// A contraction: a nest whose one assignment is  out[...] += alpha * a[...] * b[...]  (alpha a
// product of constants and run-time scalars, possibly negated or divided by them; every index
// of out, a and b a single loop variable, each at most once, or a constant inside the axis; no
// loop longer than the axis it indexes; out neither a nor b). emit/contraction.h maps it to a
// strided matrix product.
struct Product {
  Access a, b;  // the two factors, in the order they appear in the body
  ExprP alpha;  // the scalar factor; null for 1
};

// A sum of a product by a constant from zero,  out = 0 += summand * scale : the scale may
// multiply each finished sum once instead of every term.
struct ScaledSum {
  ExprP summand;
  ExprP scale;  // a Const
};

// How a block call binds one formal of the body (Block, Buffer::formal) for instance l of
// count: the whole buffer `first` when l == 0 and `first` >= 0, the whole buffer `last` when
// l == count - 1 and `last` >= 0; else elements [offset + slot * stride, + the formal's
// elements) of `buf`, slot = l + shift, or (l + shift) mod `modulo` (0 .. modulo - 1) when
// modulo > 0: a ping-pong pair of slots (stride 0: the same buffer for every instance; a
// stacked param: its slice l; a stack of values kept per instance: its slot l, or l - 1 for
// the value carried in). With buf -1 (lowering's calls only), a carried value between two
// instances, which routine assembly places (Block::carried: the next instance's carried-in
// formal reads it).
struct Binding {
  int formal = -1;
  int buf = -1;
  long offset = 0, stride = 0;
  int first = -1, last = -1;
  int modulo = 0;
  long shift = 0;
  // The slot instance l uses (meaningful when neither first nor last applies).
  long slot(long l) const {
    const long s = l + shift;
    return modulo > 0 ? ((s % modulo) + modulo) % modulo : s;
  }
  // The actual of instance l of count: a whole buffer (first, last, or buf with no stride), or
  // -1 for a slice of buf at element offset `at`.
  int whole(long l, long count) const {
    if (l == 0 && first >= 0) return first;
    if (l == count - 1 && last >= 0) return last;
    return stride == 0 && offset == 0 ? buf : -1;
  }
  long at(long l) const { return offset + slot(l) * stride; }
};

// An opaque step: a kernel of the runtime called on whole buffers (Stmt::call), whose loops
// are the runtime's own. Passes see the buffers it reads and writes (ir::call_reads,
// call_writes, passes::reads and writes) and never move, fuse or inline into it.
struct Call {
  enum class Kind {
    AttentionForward,   // o, lse = attention(q, k, v)            (runtime-lib/cannl_attention.h)
    AttentionBackward,  // dq, dk, dv += from dout, o, lse; delta a scratch
    EmbeddingForward,   // o[p, j] = table[ids[p], j]  (0 for an id outside [0, rows))
    EmbeddingBackward,  // dtable[ids[p], j] += dout[p, j], each j's positions in order
    // A rolled repeat block's instances (Block), each its body's nests for the instance's
    // actuals (`binds`): the forward half of the training body (the nests before its barrier,
    // which is not run), instances 0 .. count-1; the backward half (after the barrier),
    // instances count-1 .. 0; the inference body; the initialiser body (params drawn instance
    // after instance); clip_grad_norm's squared norm of the gradients, instance after instance;
    // the decode body.
    BlockForward,
    BlockBackward,
    BlockInfer,
    BlockInit,
    BlockNorm,
    BlockDecode,
    // Inside a training body only, between its halves: the barrier, standing for the rest of
    // the model between an instance's forward and its backward (what the other instances and
    // the model around the block do meanwhile): it reads the values the instance carries out and
    // writes what others write into its formals (the gradients arriving for the carried values,
    // the gradient carried in, shared gradients), so that no pass moves a nest across it.
    BlockRest,
  };
  Kind kind = Kind::AttentionForward;
  // Attention, per (sequence, head) pair. Storage: q [B.., tq, H.., e], k [B.., tk, G.., e],
  // v [B.., tk, G.., f], o and dout [B.., tq, H.., f], lse and delta [B.., H.., tq] (B.. the
  // sequences: the runner's batch axis when `batch`, then `seqs` more per example; H.. the
  // `heads` query heads, G.. the heads / group key/value heads: query head h reads key/value
  // head h / group, grouped-query attention when group > 1).
  int q = -1, k = -1, v = -1, o = -1, lse = -1;
  int dout = -1, delta = -1, dq = -1, dk = -1, dv = -1;  // backward only
  bool batch = false;
  long seqs = 1, heads = 1, tq = 1, tk = 1, e = 1, f = 1;
  long group = 1;
  bool causal = false;
  long window = 0;  // causal: > 0 sees only the last `window` keys (the query's own included)
  double scale = 1;
  // Views: q, k and v may be parts of one buffer, as attention(qkv[0], qkv[1], qkv[2]) reads
  // a fused projection [B.., T | 3, H.., e] in place: operand X's row t of pair (s, h) starts
  // at element X_off + (s * T + t) * X_row + h * width (X_row 0: heads * width, the whole
  // buffer). dq, dk and dv (gradients of the same buffers, the same layout) share q's, k's and
  // v's views; o, lse and dout are whole buffers.
  long q_off = 0, k_off = 0, v_off = 0;
  long q_row = 0, k_row = 0, v_row = 0;
  // Embedding: ids [B..] (int32), table [rows, width], o and dout [B.., width], dtable like
  // table; the positions are the sequences above (`batch`, `seqs`).
  int table = -1, ids = -1, dtable = -1;
  long rows = 1, width = 1;
  // The decode routine's step: each of its n rows at its own position `pos[r]` of its sequence
  // slot `seq[r]` (batch false, seqs a sequence's length). Embedding: the row's id at that
  // position and its row of the table. Attention: the row's query at pos[r] against the keys
  // and values of positions 0 .. pos[r] of its slot (k and v the routine's caches); with `ring`,
  // k and v are rings of tk rows (Buffer::ring: a window's last positions).
  bool at_pos = false;
  bool ring = false;
  // A block call (BlockForward): block `block`'s body run for instances l = 0 .. count-1 in
  // order, each formal bound to its actual by `binds` (one per formal); `reads` and `writes`
  // the outer buffers the instances read and write (what call_reads and call_writes return:
  // the bindings are per-instance pointer arithmetic, so the lists are kept, not derived).
  // The body's scratch (its locals at the body's memory plan: Block's Routine::offsets),
  // an outer buffer among its writes (-1: none), set by passes/plan_blocks.cpp.
  int block = -1;
  long count = 0;
  std::vector<Binding> binds = {};
  std::vector<int> reads = {}, writes = {};
  int scratch = -1;
};
bool is_block_call(Call::Kind k);  // BlockForward .. BlockDecode (not BlockRest)
std::vector<int> call_reads(const Call& c);   // dq, dk, dv among them: the backward adds to them
std::vector<int> call_writes(const Call& c);
const char* call_name(Call::Kind k);          // "attention_forward"

struct Stmt {
  std::optional<Call> call = {};  // an opaque kernel call: no loops and no assignments then
  std::vector<Iter> iters;  // loop order, outermost first
  // The assignments made at each point of the nest, in order: one, or several when fusion
  // (passes/fuse.cpp) merged pointwise nests (then each writes a buffer at an index that
  // names every loop) or zero_first sibling sums; each point runs them one after the other.
  std::vector<Assign> assigns;
  // The out cells of the nest's assignments are first set to the identity of their accum
  // (0 for +=, -inf for max=, inf for min=), i.e. the nest assigns the reduction instead of
  // adding to what the buffer held (set by passes/fold_fills.cpp on a single assignment with
  // accum != Set; passes/fuse.cpp's sibling sums keep it, several += sums). Every out cell is
  // written: each out access covers its buffer.
  bool zero_first = false;
  int line = 0;             // spec line it comes from (0: none)
  std::string what;         // "h1 = relu(w1 * x + b1)", "d loss / d w1", "sgd update of w1"
  bool sequential = false;  // must run in order (random initialisation)
  // Set by passes/plan_layout.cpp in train_grads: the param gradients this nest finishes (no
  // later nest writes them), in the grad block's order; the emitter hands each to the
  // caller's gradient hook right after the nest, so their all-reduce overlaps the rest of
  // the backward pass.
  std::vector<int> grads_final = {};
  // Set by autodiff/optimizer.cpp in train_update and init only: the param (its place in
  // Program::params) whose update this nest is (in init: whose optimiser state it zeroes),
  // kUpdateNorm for a part of clip_grad_norm's squared norm, -1 otherwise. Nests of different
  // params are not fused, so that the emitted update can run for a range of params alone
  // (ZeRO-1: each rank updates its shard) and init zero only the optimiser state a rank holds.
  int update_of = -1;
  // A nest over a stacked param's instances (its update, its optimiser state's zeroing)
  // updates the params [update_of, update_of + update_count) at once: its outermost index of
  // the stacked buffers is the instance (emit/c_emit.cpp runs it for a shard's instances).
  int update_count = 1;
  int parallel = -1;        // set by loop ordering: the loop run in parallel, or -1
  // Set by passes/mark_contractions.cpp, read by the C emitter's matrix-product calls, cuBLAS
  // and the cost model alike (none before that pass).
  std::optional<Product> product = {};
  std::optional<ScaledSum> scaled_sum = {};

  bool single() const { return assigns.size() == 1; }
  // The nest's assignment, for a nest that has one (a bug otherwise).
  const Assign& only() const;
  Assign& only();
};

// Stmt::update_of of the nests that sum clip_grad_norm's squared norm.
constexpr int kUpdateNorm = -2;

// A nest of one assignment.
Stmt nest(std::vector<Iter> iters, Access out, Accum accum, ExprP body);

// What a routine is for. Its C name (routine_name), its signature and what it hands out
// follow from its kind; no stage tells routines apart by name.
enum class RoutineKind {
  Init,       // params from their initialisers, optimiser state zeroed (takes a seed)
  TrainStep,  // forward, backward and the optimiser update on a batch (OCANNL's monolithic step)
  Forward,    // the outputs of a batch (inference)
  Eval,       // the loss and the metrics of a batch
  Decode,     // generation's step (passes/decode.cpp): the first output at one new position
              // `pos[r]` of each of n sequences, keys and values of earlier positions kept in caches
  // The two halves of train_step, for data-parallel training (a caller all-reduces the
  // gradients in between): TrainGrads is its forward and backward (hands out the loss, keeps
  // the param gradients, in the grad block of the layout), TrainUpdate its optimiser update
  // (no batch; counts the step up first, as train_step does).
  TrainGrads,
  TrainUpdate,
  // A rolled repeat block's bodies (Block): one instance's nests over the block's buffers,
  // run by the block calls of the routines above (Call::Kind::BlockForward ...).
  BlockTrain,   // forward half, the barrier (Call::Kind::BlockRest), backward half
  BlockInfer,   // forward (forward, eval_metrics)
  BlockInit,    // the params' initialisers (init)
  BlockNorm,    // clip_grad_norm's part of the squared norm (train_step, train_update)
  BlockDecode,  // decode's step
  // The constant tables (Role::Constant, passes/hoist_constants.cpp): their nests, run once when
  // a state is created (no batch, no seed), before any other routine.
  Constants,
};
// The one place that names routines: "init", "train_step", "forward", "eval_metrics", "decode",
// "train_grads", "train_update", "init_constants".
const char* routine_name(RoutineKind k);

// What a routine exchanges with its caller, besides the state (params and optimiser state,
// which every routine may read and init and train_step write). Buffer indices, in order.
struct Interface {
  bool batch = false;        // called on a batch: the model's inputs (all of them, in Program::inputs
                             // order) and the count n; otherwise (init) a seed
  std::vector<int> outputs;  // copied into the caller's arrays after the call (forward: the outputs)
  std::vector<int> values;   // scalars returned to the caller (train_step: the loss; eval: the loss,
                             // then the metrics)
  std::vector<int> kept;     // left valid in the state for the caller to read until the next call
                             // (train_step: the gradients of the params, `<model>_grad`)
  // Decode (passes/decode.cpp): the routine steps n sequences at once, row b (< n) at its own
  // position pos[b] of sequence slot seq[b] (< the state's cap: the caches' first axis, a batch
  // axis of `slots` = max_batch); the per-position buffers at position 0 of row b; its ids one
  // per row, of which the routine reads only the row's position; each output is copied at that
  // position only. `seq_len` is a sequence's length (the caches' rows).
  bool position = false;
  long seq_len = 0;
  int ids = -1;             // decode: the input buffer of the sequences' ids
  long slots = 0;           // decode: the caches' sequence slots, max_batch (0: not a decode)
};

// A run-time scalar of a routine, defined once at its top: `name = value`, computed in double
// precision and then rounded to the element type. The value reads the routine's built-in
// scalars (Scalar `step`: the optimiser's step count, train_step counting it up first, so 1
// at the first step; `lr`: the learning rate as set; `schedule`: 1 when the spec's learning
// rate schedule applies, 0 when switched off at run time) and the definitions before it.
// In a nest, Scalar `n` is the batch count, `lr` and `step` the built-ins (lr rounded to the
// element type), and any other name one of these definitions.
struct ScalarDef {
  std::string name;  // bc1, sqrt_bc2, lr_t
  ExprP value;
};

struct Routine {
  RoutineKind kind = RoutineKind::Init;
  Interface io = {};
  std::vector<ScalarDef> scalars = {};  // in order
  // The scalar holding the learning rate this routine's updates use (`lr`, or the schedule's
  // `lr_t` among `scalars`), recorded as the model's last lr (`<model>_get_last_lr`); empty:
  // the routine updates no param.
  std::string lr_scalar = {};
  std::vector<Stmt> stmts = {};
  long arena_bytes = 0;     // set by memory planning: the routine's arena at max_batch (0: none)
  // Set with arena_bytes: the byte offset of each buffer (by index) in the routine's arena,
  // aligned to the target's alignment, or -1 for a buffer outside it (inputs, params,
  // optimiser state, buffers the routine does not use). Buffers whose lifetimes in the
  // routine do not overlap may share bytes.
  std::vector<long> offsets = {};
  // The plan's two regions (passes/plan_memory.cpp): the batch-independent buffers in
  // [0, fixed_bytes), the batched ones (Buffer::batched) from fixed_bytes on, each at
  // fixed_bytes + u * max_batch for a per-example offset u: at a run-time cap c (<= max_batch)
  // the same plan holds with offsets fixed_bytes + u * c (sizes per example times c).
  long fixed_bytes = 0;
  // A block body's locals placed in a formal's bytes instead of its scratch (passes/plan_blocks.cpp),
  // as (local, formal) pairs: the local lives in one half of the body while the formal's bytes
  // hold nothing that half's call needs (ir::formal_live: before a nest writing all of the
  // formal, after a saved activation's last use in the backward half), meeting that span only
  // in place, and apart from the other locals there; the emitter points the local at the
  // instance's actual. Not in Routine::offsets.
  std::vector<std::pair<int, int>> hosted = {};
  const char* name() const { return routine_name(kind); }
  int host(int b) const {  // the formal whose bytes local b lives in, or -1
    for (const auto& [l, f] : hosted)
      if (l == b) return f;
    return -1;
  }
  bool planned(int b) const { return static_cast<size_t>(b) < offsets.size() && offsets[static_cast<size_t>(b)] >= 0; }
  // A planned buffer in the batched region: its per-example offset there (offsets are at max_batch).
  bool scaled(int b) const { return planned(b) && offsets[static_cast<size_t>(b)] >= fixed_bytes && fixed_bytes >= 0; }
  long example_offset(int b, long max_batch) const {
    return (offsets[static_cast<size_t>(b)] - fixed_bytes) / max_batch;
  }
};

// One allocation holding a state's buffers (a training or forward-only state), as the layout
// pass (passes/plan_layout.cpp) decided it: the model's state proper first (params, then
// optimiser state), then the other buffers that have storage of their own, then one work
// region that the state's routines lay their work buffers out in (each at Routine::offsets;
// a state runs one routine at a time).
//
// Run-time-sized states: the arena is `fixed_bytes + example_bytes * cap` bytes for the cap (the
// largest batch) the state is created for, 1 <= cap <= max_batch: the batch-independent part
// first (the state prefix, the grad block, the other own buffers without a batch dim, then the
// work region's batch-independent part, `work_fixed` bytes), then the part that scales: the work
// region's batched part (its buffers at fixed_bytes + u * cap) and the batched own buffers (at
// fixed_bytes + field_example * cap). `bytes`, `field` and `address` give the layout at max_batch.
struct Arena {
  long bytes = 0;              // the allocation at max_batch (at least one alignment unit)
  std::vector<long> field;     // per buffer: the byte offset of the state's pointer to it, or -1
                               // (none: an input, a buffer only in the work region, unused)
  std::vector<bool> own;       // the field's bytes are its own (else it points into the work
                               // region: a buffer its routine keeps for the caller, a gradient)
  long state = 0;              // bytes of the prefix holding the params and the optimiser state
  long work = -1;              // byte offset of the work region (-1: none)
  long work_bytes = 0;
  // The grad block: the params' gradients (those the loss depends on), contiguous, in param
  // order, each aligned, right after the state prefix (own storage, which every training
  // routine writes or reads there), so that a data-parallel trainer reduces them as one
  // array. -1 and 0 in an arena without gradients (the inference state).
  long grads = -1;
  long grads_bytes = 0;
  long max_batch = 1;
  long fixed_bytes = 0;        // the batch-independent part (the scaled part starts here)
  long example_bytes = 0;      // the scaled part's bytes per example of the cap
  long work_fixed = 0;         // the work region's batch-independent bytes (its batched part: at fixed_bytes)
  std::vector<long> field_example;  // per buffer with an own field in the scaled part: its per-example offset, or -1
  // Where buffer b is while routine r runs (-1: nowhere in this arena), at max_batch or at a cap.
  long address(const struct Routine& r, int b) const { return address_at(r, b, max_batch); }
  long address_at(const struct Routine& r, int b, long cap) const;
  // Buffer b's field at a cap (an own buffer, or one a routine keeps: field >= 0).
  long field_at(int b, long cap) const;
};

// The optimiser-state block (the C target's, PassOptions::opt_block): every optimiser-state
// buffer in an allocation of its own, outside the training arena, in param order, each param's
// state contiguous, so that a ZeRO-1 rank keeps only the part of the params it updates
// (`<model>_shard_opt_state`). bytes 0: none (no optimiser state, or the CUDA target's, which
// keeps it in the arena's state prefix).
struct OptBlock {
  long bytes = 0;
  std::vector<long> field;        // per buffer: its byte offset in the block, or -1
  std::vector<long> param_start;  // per param (Program::params order), then the end: the byte
                                  // offset of its first state buffer (its state: up to the next)
};

// x rounded up to a multiple of a (a buffer's bytes at the layout's alignment).
inline long align_up(long x, long a) { return (x + a - 1) / a * a; }

// The memory layout of the program's states (passes/plan_layout.cpp); emitters and the model
// card only print it.
struct Layout {
  int align = 0;        // byte alignment of every buffer (0: not laid out yet)
  int elem_bytes = 4;
  Arena training;       // the training state: every routine
  Arena inference;      // the forward-only state (the C target's <model>_infer): forward, eval_metrics,
                        // decode (its caches with storage of their own)
  OptBlock opt_state;   // the optimiser state outside the training arena (the C target)
};

// A learning-rate schedule of the minimize statement (docs/language.md §10), its arguments
// with their defaults.
struct Schedule {
  std::string name;                     // constant, step, cosine, exponential, linear, onecycle
  std::map<std::string, double> args;   // steps, warmup, gamma, ...
};

// One optimiser of the minimize statement and the params it updates (contract v2 §5).
struct OptimizerGroup {
  std::string name;                             // sgd, adam, adamw, muon
  std::map<std::string, double> args;           // with their defaults: lr, momentum, beta1, ...
  std::map<std::string, std::string> strings;   // choices: adamw's decay, muon's adjust_lr
  std::string text;                             // the optimiser call as written: "sgd(lr = 0.1)"
  std::string on;                               // its group as written ("matrices", "[w1, b1]"); "": every param
  std::set<int> params;                         // the buffers of its params (Program::params' entries)
};

// The minimize statement's optimisers and training options, set by lowering and read by the
// optimiser (autodiff/optimizer.cpp), which derives Program::lr, optimizer and schedule.
struct OptimizerConfig {
  std::vector<OptimizerGroup> groups;           // in the spec's order (none: no optimiser)
  std::optional<Schedule> schedule;             // absent: a constant learning rate
  double clip_grad_norm = 0;                    // > 0: clip the gradients' global L2 norm
  int line = 0;                                 // the minimize statement's line (of its loss)
  std::string schedule_text;                    // the schedule as written, on one line
};

// A rolled repeat block (lower/roll.h): `count` consecutive instances of a repeat statement
// whose nests are equal but for their buffers, lowered once. Its body is the first instance's
// nests over body buffers (Buffer::block): formals, bound per instance by each call of the
// block (Call::Kind::BlockForward ..., Binding), and locals, the body's own.
struct Block {
  std::string name;           // the count's dim ("layers"), else "block<line>" (unique in the program)
  int line = 0;               // the repeat statement's spec line
  long first = 0, count = 0;  // the instances [first, first + count) of the repeat statement
  std::vector<int> formals;   // body buffers bound by the calls
  std::vector<int> locals;    // body buffers of the body's own
  // Per carried name: the formal reading the value carried in and the formal defining the
  // value carried out (instance l > 0 reads what instance l - 1 defined).
  std::vector<std::pair<int, int>> carried;
  std::vector<Stmt> forward;  // the body's nests as lowering made them (of every routine)
  // The bodies, routines of kinds BlockTrain (autodiff makes it; only the forward nests, no
  // barrier, when nothing differentiates the block), BlockInfer and BlockInit
  // (routine assembly) and BlockDecode (the decode pass: the inference body over rows,
  // its keys and values in cache formals), empty when none; BlockNorm is for the optimiser,
  // which does not make it yet. The passes run over each once (ir.h all_routines). Their
  // interface's `kept` lists the values they carry out.
  Routine train = {RoutineKind::BlockTrain}, infer = {RoutineKind::BlockInfer}, init = {RoutineKind::BlockInit},
          norm = {RoutineKind::BlockNorm}, decode = {RoutineKind::BlockDecode};
  // The training body's locals used on both sides of its barrier (the saved activations),
  // which its calls bind to a stack of one slot per instance; in the other bodies they are
  // locals as any. Set by passes/plan_blocks.cpp.
  std::vector<int> saved;
  // Naming instance l's copies (ir/unroll_blocks.h): a local's (or carried-out formal's) name
  // with "_<l>" inserted at name_at (-1: appended), its spec shape with ".<l>" at the same
  // place when it names the tensor; its spec tensor tensor + l * tensor_step (-1: none).
  std::map<int, int> name_at;
  long tensor_step = 0;
};

// The body a block call runs (its routine), and the nests of it that the call runs: the
// training body's halves before and after its barrier for BlockForward and BlockBackward.
const Routine& body_of(const Block& bl, Call::Kind k);
Routine& body_of(Block& bl, Call::Kind k);
std::pair<size_t, size_t> body_span(const Block& bl, Call::Kind k);
// The index of a training body's barrier (its stmts' size when it has none).
size_t barrier_at(const Routine& body);

struct Program {
  std::string model;
  long max_batch = 256;
  std::vector<Buffer> buffers;
  std::vector<Routine> routines;
  // The model's interface, as buffer indices in spec order.
  std::vector<int> inputs, outputs, params;
  std::vector<int> metrics;  // each a scalar buffer named after the metric
  int loss = -1;
  // Set by autodiff: the gradient buffer of each buffer on a path from a param to the loss
  // (the params' among them).
  std::map<int, int> grads;
  OptimizerConfig opt;       // set by lowering
  // Set by the optimiser from `opt`, as the emitters print them:
  double lr = 0;             // the optimiser's learning rate in the spec
  std::string optimizer;     // "sgd(lr = 0.1, momentum = 0.9)", with its training options
  std::string schedule;      // the lr schedule as written, "cosine(steps = 4690)"; "" for none
  Layout layout;             // set by passes/plan_layout.cpp
  long int8_bytes = 0;       // the forward-only state's int8 block (passes/quantize.h; 0: none)
  // Rolled repeat blocks (lower/roll.h), with their bodies.
  std::vector<Block> blocks;
  int find(const std::string& name) const;  // buffer index or -1
  // `base`, or base2, base3 ...: a name no buffer of the program (block -1) or of block `block`'s
  // body has (the bodies' names are their own).
  std::string unique_name(const std::string& base, int block = -1) const;
  Routine* routine(RoutineKind k);          // null when the program has none of that kind
  const Routine* routine(RoutineKind k) const;
  int grad(int buf) const;                  // the gradient buffer of `buf`, or -1
};

// The buffer holding `buf`'s elements: its stacked buffer when it is a view, else itself.
int storage(const Program& p, int buf);

// Whether a decode cache is a ring (Buffer::ring): a prefill step then holds one position of
// each prompt, since a later position would overwrite keys an earlier one still reads.
bool has_ring_cache(const Program& p);

// Every routine the passes run over: each block's bodies that have nests (train, infer, init,
// norm, decode), then the API routines (Program::routines).
std::vector<Routine*> all_routines(Program& p);
std::vector<const Routine*> all_routines(const Program& p);
// The block whose body `r` is (-1: an API routine).
int block_of(const Program& p, const Routine& r);
// Where formal f's bytes hold something a call running nests [lo, hi) of `body` needs
// (Routine::hosted): the nests (first, last), first = lo - 1 (from the call's start) unless the
// first nest of the span touching f writes all of it (Set, each cell, without reading f: what f
// held before is never read), then that nest; last = hi (to the call's end) unless `dead_after`
// (a training body's saved activation in its backward half: nothing reads an instance's slot
// after the instance's backward), then the last nest of the span touching f.
std::pair<long, long> formal_live(const Program& p, const Routine& body, size_t lo, size_t hi, int f, bool dead_after);

// The buffers a routine hands out or keeps past its end: the state (params, optimiser state,
// constant tables) and its interface's outputs, values and kept buffers.
std::set<int> live_out(const Program& p, const Routine& r);

// A nest over every element of buffer `buf` (loops j, or j0, j1, ...) assigning `body`,
// whose loads index the buffer's own positions with the identity map.
Stmt elementwise(const Program& p, int buf, std::string what);
ExprP load_all(const Stmt& elementwise_stmt, int buf);  // buf[j0, j1, ...] in that nest

// Every buffer read by an expression (in order of appearance).
void collect_loads(const ExprP& e, std::vector<const Expr*>& out);
// Every load of a nest's assignments (a += also reads its out cells; that read is not listed).
void collect_loads(const Stmt& s, std::vector<const Expr*>& out);
// The buffers a nest writes, one per assignment in order.
std::vector<int> written_buffers(const Stmt& s);

}  // namespace cannl::ir
