// cuda_emitter.h — the CUDA back end's emitter, shared by the files that print its parts (internal).
//
// CudaEmitter prints one Program as the files of emit/cuda_emit.h: cuda_emit.cpp the files, the
// state, the nests' kernels and the routines; cuda_blocks.cpp the rolled repeat blocks' functions
// and the loops calling them, and the tables of the params and state tensors (a stacked group's
// instances folded). Not part of the generator's API: included by those files only.
#pragma once

#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emit/c_common.h"
#include "emit/c_names.h"
#include "emit/cublas_plan.h"
#include "emit/cuda_emit.h"

namespace cannl {

class CudaEmitter {
public:
  using data = kainjow::mustache::data;

  static constexpr int kBlock = 256;  // threads per block of every generated kernel

  // A size that may be a multiple of the run-time batch count n.
  struct Extent {
    long c = 1;
    bool n = false;
    std::string str() const { return n ? (c == 1 ? "n" : fmt::format("n * {}", c)) : std::to_string(c); }
  };

  CudaEmitter(const ir::Program& p, const CudaOptions& o) : p_(p), o_(o), cnames_(c_names(p)), names_(cnames_.buffer) {
    x_.p = &p;
    x_.names = names_;
    x_.f64 = o.f64;
    x_.cuda = true;
    x_.example_offset = true;
  }

  bool attention_ = false;  // some routine calls cannl_attention.cuh
  // The routine or block body emitted is a decode (over rows, ir::Interface::slots): row b of n at
  // position pos[b] of sequence slot seq[b], pos and seq device arrays (CExpr::rows as well)
  bool rows_ = false;

  std::vector<OutputFile> run();

private:
  const ir::Program& p_;
  CudaOptions o_;
  CNames cnames_;  // the C identifiers (emit/c_names.h)
  std::vector<std::string> names_;
  CExpr x_;
  const ir::Arena& arena_ = p_.layout.training;  // the device arena (passes/plan_layout.cpp)
  std::vector<std::string> device_helpers_;  // in order of first use
  std::set<std::string> helper_names_;
  int gemms_ = 0;  // cuBLAS products in all routines
  // Kernels already defined, by their text with the name left out: a nest that forward,
  // eval_metrics and train_step all run (same loops, same expression) is one kernel.
  std::map<std::string, std::string> kernel_by_text_;
  std::string kernels_;  // their definitions, in order

  long elem() const { return o_.f64 ? 8 : 4; }

  // C++ has no separate namespace for struct tags: a model called `real` (the state `struct
  // real`) cannot also have the element type's typedef `real` here, so that one is called
  // cannl_real in this file (every `real` not after `struct`, outside string literals).
  static std::string rename_real(const std::string& text);
  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }
  const std::string& name(int b) const { return names_[static_cast<size_t>(b)]; }
  // The element type of buffer b: real, or int32_t for ids.
  const char* ctype(int b) const { return buf(b).ids > 0 ? "int32_t" : "real"; }

  // The cuBLAS compute type of the products (CudaOptions::precision): fp32 on the CUDA cores;
  // tf32 and bf16 on the tensor cores, operands rounded to TF32 or bf16 inside cuBLAS,
  // accumulated and stored in fp32.
  const char* blas_compute() const;
  // The header comment's line on the products' arithmetic.
  std::string precision_note() const;

  // ---- memory ----------------------------------------------------------------------------

  // The state's fields: the mirrored state prefix (params, optimiser state), then the rest
  // that has a field (buffers used outside a memory plan; train_step's param gradients, which
  // point into its work region).
  std::string fields() const;

  // Buffer b while routine r runs, as a device pointer expression.
  std::string device(const ir::Routine& r, int b) const;

  // The state's pointer to an own buffer b: its field, or a view's stacked buffer's (lower/roll.h:
  // a repeat block's instance of a stacked param, gradient or optimiser state) plus its offset.
  std::string field(int b) const;

  // ---- helpers ---------------------------------------------------------------------------

  void use_helper(const std::string& key, const std::string& text);

  // Reduction of `v` over a warp (lane 0 gets it) or a block of kBlock threads (thread 0).
  std::string reducer(ir::Accum a, bool block);

  std::string atomic_apply(ir::Accum a);

  // ---- nests -----------------------------------------------------------------------------

  void name_vars(const ir::Stmt& s, const std::set<std::string>& taken);

  // One term of a reduction folded into the local `acc` (+, max or min).
  std::string fold_into_acc(ir::Accum a, const ir::Expr& term);

  std::string bound(const ir::Iter& it) const { return it.batch ? std::string("n") : std::to_string(it.size); }

  // The statement writing `value` into the nest's element (guarded when it may fall outside
  // the buffer). `atomic`: the writes of different threads may collide.
  std::string store_to(const ir::Access& out, ir::Accum accum, const std::string& value, bool atomic,
                       const std::string& also = "");

  // The statement writing `value` into the nest's element, then its further assignments (in
  // order, at the same point). `assign`: the element gets the value (a zero_first nest whose
  // sum for the element is complete in `value`), not added to it.
  std::string store(const ir::Stmt& s, const std::string& value, bool atomic, const std::string& also = "",
                    bool assign = false, const std::string& indent = "");

  // The identity of a nest's accumulation (what zero_first cells start from).
  std::string identity(ir::Accum a) const;

  // The number of elements of a buffer at run time (a batch axis counts n).
  Extent elements(int b) const;

  // The whole nest as sequential loops (the host init routine; single-thread kernels).
  std::string sequential_loops(const ir::Stmt& s, int indent);

  static bool uses_loop(const ir::Access& a, int it);

  // Different values of the written loops write different elements: every written loop in
  // one index, and within an index the terms a mixed-radix number (each coefficient larger
  // than the largest sum of the smaller terms).
  bool injective(const ir::Stmt& s) const;

  // Decomposes the flat index `flat` into the loops `loops` (the last varies fastest).
  std::string decompose(const ir::Stmt& s, const std::vector<int>& loops, const std::string& flat, int indent);

  static Extent extent(const ir::Stmt& s, const std::vector<int>& loops);

  struct Kernel {
    std::string def, launch, name;
  };

  // A zero_first nest whose threads do not each write whole elements: its out buffer is
  // filled with the identity first (a kernel launch on the compute stream).
  std::string prefill(const ir::Stmt& s);

  // A zero_first sum times a constant (out = 0 += x * c) whose sums are complete in one
  // thread: the constant multiplies the finished sum once, as the C target does.
  static void split_scale(const ir::Stmt& s, bool assign, const ir::Expr*& summed, const ir::Expr*& scale);

  // The arguments of a nest's kernel: the buffers it touches (the written one not const)
  // and the run-time scalars it reads.
  // A buffer whose bytes overlap another one's that the nest touches, in routine r (an in-place
  // pair of the memory plan, passes/plan_memory.cpp): no __restrict__ for either.
  bool shares_bytes(const ir::Routine& r, const std::vector<int>& bufs, int b) const;

  void kernel_args(const ir::Routine& r, const ir::Stmt& s, bool uses_n, std::string& params, std::string& args);

  static bool at_pos(const ir::Stmt& s);
  bool touches_cache(const ir::Stmt& s) const;  // nest s reads or writes a decode cache
  // Nest s's cuBLAS product (plan_cublas_gemm), none over rows for a nest touching a cache or at
  // a position offset (a kernel: each row at its own slot and position)
  std::optional<GemmPlan> gemm_at_rows(const ir::Stmt& s) const;

  // The nest's kernel, named kUnnamed (routine() names it: emit/c_names.h), and its launch.
  static constexpr const char* kUnnamed = "KERNEL_NAME_";
  Kernel kernel(const ir::Routine& r, const ir::Stmt& s);

  std::string what(const ir::Stmt& s) const { return s.line ? fmt::format("line {}: {}", s.line, s.what) : s.what; }

  std::string gemm_call(const GemmPlan& g) const;

  // ---- routines --------------------------------------------------------------------------

  std::string init_routine(const ir::Routine& r);

  static std::string named(std::string text, const std::string& name);

  // Nest s's kernel launch, its kernel defined the first time its text is seen (kernels_).
  std::string launch(const ir::Routine& r, const ir::Stmt& s);

  void routine(const ir::Routine& r, std::string& routines);

  // ---- rolled repeat blocks (ir.h Block) -------------------------------------------------
  //
  // A block call (BlockForward, BlockBackward, BlockInfer, BlockDecode; BlockInit in the host
  // init) prints as a `for` over the instances (the backward in reverse instance order) calling
  // the block's host function for the call's half of the body, as the C target's c_blocks.cpp
  // does: `static void <block>_forward(m, n, scratch, formals...)`, defined once, launching the
  // body's kernels (one definition each, over the formals' names: every instance launches the
  // same kernels) and cuBLAS products on the instance's pointers. The call passes each
  // instance's slices of the stacked buffers (params, gradients, saved activations, carried
  // values) and the body's scratch (its locals at the body's plan offsets).

  std::string blocks_;  // the block functions, defined once each, before the routines
  std::set<std::string> block_defined_;

  static const char* scalar_type(const std::string& x) { return x == "rng_key" ? "uint64_t" : "real"; }

  // The block function a block call runs, defined the first time.
  const std::string& block_function(const ir::Call& c);

  // The tables of <model>_param, _grad, state_tensors and param_info (d's param_rows, state_rows,
  // param_info: name, size, place in the pinned mirror; a stacked group's instances folded into
  // a macro, emit/c_tables.h fold_rows) and the gradients' download after train_step (d's
  // grads_down: one copy per run of gradients adjacent on the device, a stacked gradient's
  // instances).
  void param_tables(data& d, const ir::Routine& train) const;

  // A block call: its block's function for each instance, each instance's slices.
  std::string block_call(const ir::Call& c, const std::function<std::string(int)>& at = nullptr);

  // Whether attention takes cannl_attention.cuh's tensor-core kernels (bf16 operands, fp32
  // accumulation and softmax: the launchers' TensorCores argument) as the products of
  // --precision bf16 do; fp32, tf32 and f64 keep the tiled fp32 (f64) kernels. The one switch,
  // off until a GPU has run them (runtime.attention_cuda, the gpu-check's attention timing):
  // they are checked on the CPU stand-in only.
  static constexpr bool kAttentionTensorCores = false;
  bool attention_tensor_cores() const { return kAttentionTensorCores && !o_.f64 && o_.precision == "bf16"; }

  // A kernel call (ir::Call): attention through runtime-lib/cuda/cannl_attention.cuh, tiles of
  // query (forward, dq) or key (dk, dv) rows, every sequence and head at once.
  std::string call_text(const ir::Call& c);

  // The decode routine's attention (ir::Call::at_pos), as the C target's attention_rows: each
  // row's query, of each head, at its position pos[r] against the cached keys and values of its
  // slot seq[r] (cannl_attention.cuh's cannl_attention_decode_rows), key/value head h / group; a
  // window's caches are rings of c.tk rows (the key of position s in row s % tk), the others hold
  // every position (tk = T, s % T = s).
  std::string attention_rows(const ir::Call& c);

  // Embedding: the gather, a thread per element; the scatter-add, a thread per feature adding
  // its positions in order (no atomics: the same bits on every run).
  std::string embedding_text(const ir::Call& c);

  // forward: the outputs back to the caller's memory.
  std::string forward_copy() const;
  // Generation (passes/decode.cpp): the C API's decode functions over the routine decode, as
  // the C target's forward-only state has them (templates/c/inference.c.mustache), on the
  // device state: its output at position pos copied back after each step.
  void decode_data(data& d) const;

  // eval: the loss and the metrics into the pinned scalars m->scalars[0..].
  std::string eval_copy() const;
};

}  // namespace cannl
