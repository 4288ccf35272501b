// pipeline.h — the optimisation passes over the loop IR, in their fixed order.
//
// Takes: a Program with its routines assembled, differentiated and optimised
// (driver/compile.cpp), no pass run yet. Guarantees: the passes of the chosen level that are
// not disabled run once each, in the order of pass_list(); every routine computes what it
// computed before (same values up to float rounding: reassociated constants, sums in another
// order), the buffers each routine hands out or keeps (ir.h live_out) included.
//   -O0  loop_order, plan_blocks, decode, mark_contractions, plan_layout;  -O1  also simplify,
//   fold_fills, dce, hoist_constants, plan_memory;  -O2  all of them.
// The passes run over every routine, each block's bodies included (ir.h all_routines), each
// body once for all its instances.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct PassOptions {
  int level = 2;                     // 0, 1 or 2
  std::set<std::string> disabled;    // pass names
  int elem_bytes = 4;                // bytes of an element (memory planning)
  int align = 64;                    // the target's alignment of every buffer (memory planning, layout)
  bool opt_block = false;            // the optimiser state in a block of its own (layout; the C target)
  bool decode_in_training = false;   // the decode routine runs on the training state (layout; the CUDA
                                     // target, which has no forward-only state)
  bool host_locals = true;           // a block body's locals may live in a formal's bytes (plan_blocks:
                                     // the C target; the CUDA emitter keeps every local in the scratch)
  bool fuse_sums = true;             // sibling column sums share a nest (fuse: the C target; the CUDA
                                     // emitter gives a nest's threads one written cell each)
};

struct PassInfo {
  const char* name;
  int level;            // the lowest -O level that runs it
  const char* summary;  // one line for `cannl gen --passes`
  void (*run)(ir::Program& p, const PassOptions& o);
};

// Every pass, in the order they run.
const std::vector<PassInfo>& pass_list();
const PassInfo* find_pass(const std::string& name);
// The pass runs at the options' level and is not disabled.
bool pass_runs(const PassInfo& pass, const PassOptions& o);

// Runs the passes; `after(name, program)` is called after each pass that ran.
void run_passes(ir::Program& p, const PassOptions& o,
                const std::function<void(const std::string&, const ir::Program&)>& after = {});

// The passes (one file each in generator/passes/; see their header comments).
void order_loops(ir::Program& p, const PassOptions& o);
void simplify(ir::Program& p, const PassOptions& o);
void fold_fills(ir::Program& p, const PassOptions& o);
void reuse_values(ir::Program& p, const PassOptions& o);
void inline_virtual(ir::Program& p, const PassOptions& o);
void order_sums(ir::Program& p, const PassOptions& o);
void fuse(ir::Program& p, const PassOptions& o);
void hoist_divisions(ir::Program& p, const PassOptions& o);
void dce(ir::Program& p, const PassOptions& o);
void hoist_constants(ir::Program& p, const PassOptions& o);
void make_decode(ir::Program& p, const PassOptions& o);
void plan_blocks(ir::Program& p, const PassOptions& o);
// plan_blocks' work for one body of block k made after it (decode's): its locals planned, and
// the calls running it given their scratch.
void plan_block_body(ir::Program& p, int k, ir::Routine& body, const PassOptions& o);
void plan_memory(ir::Program& p, const PassOptions& o);
// plan_memory's plan of one routine: the buffers `planned` accepts, each at an offset of the
// routine's arena (Routine::offsets, arena_bytes); sharing bytes where lifetimes allow when
// `share`, else each its own (in order of first use). Batch-independent buffers first, then the
// batched ones at offsets that scale with the state's cap (Routine::fixed_bytes); with
// `all_per_example` (a block body's locals, one batched scratch) every buffer in the scaled part.
void plan_routine(const ir::Program& p, ir::Routine& r, const PassOptions& o, const std::function<bool(int)>& planned,
                  bool share, bool all_per_example = false);
// Nest s may write buffer b in place over buffer a (plan_memory's rule for two buffers sharing an
// offset when s is a's last use and b's first): s writes b pointwise (Set), reads a only at the
// cells it writes b, before or with its first assignment writing b, and does not write a.
bool in_place(const ir::Program& p, const ir::Stmt& s, int a, int b);
// The bytes buffer b takes in a plan's unit: per example (aligned) when batched, else in all (aligned).
long plan_unit_bytes(const ir::Buffer& b, const PassOptions& o);
void mark_contractions(ir::Program& p, const PassOptions& o);
void plan_layout(ir::Program& p, const PassOptions& o);

}  // namespace cannl
