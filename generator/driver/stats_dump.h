// stats_dump.h — `cannl gen --stats [--json]` and `--dump=dot`: views of a program before
// and after the passes.
//
// Takes: the program as lowered (`before`) and as the passes left it (`after`), same
// buffers. Nothing here changes either.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

struct StatsOptions {
  int level = 2;
  std::vector<std::string> passes;  // the passes that ran, in order
  int elem_bytes = 4;
  std::string dtype = "f32";
  std::string target = "c";  // the back end whose layout and nests the last line describes
};

// Per routine: buffers, arena bytes, loop nests, FLOPs and bytes moved per call at the
// max batch, before and after the passes (routine_stats of ir/stats.h); then the target's
// view (`--target`): how train_step's nests run there (generated loop nests or kernels,
// matrix products of the GEMM kernel or cuBLAS, runtime calls) and the memory layout its
// states are allocated by (the model card's arena bytes: the training state, on CUDA one
// device arena; the C target's optimiser-state block and forward-only state).
std::string stats_text(const ir::Program& before, const ir::Program& after, const StatsOptions& o);
// The same as JSON; its top-level "train_step" object holds the training step at the chosen
// level: arena_bytes, loop_nests, flops, bytes_moved, buffers.
std::string stats_json(const ir::Program& before, const ir::Program& after, const StatsOptions& o);

// The tensor graph of the training step as Graphviz: one node per buffer, an edge from each
// buffer a nest reads to the one it writes; virtual nodes (stored before the passes, computed
// inline after them) are dashed. Three clusters keep the forward pass, the backward pass and
// the optimiser update apart (a buffer sits where the nest that first writes it runs).
std::string dump_dot(const ir::Program& before, const ir::Program& after);

// `--dump=dot:ROUTINE`: one routine of the program as the passes left it (init, train_step,
// forward, eval_metrics): a box per loop nest, named as the generated code names its kernel
// (set_h1, sum_loss_ce, ...; "matmul" when it runs as a matrix product) with its spec line,
// an ellipse per buffer with its shape, edges from what a nest reads to what it writes; the
// training step's nests in forward, backward and update clusters. "" and `error` set when the
// program has no such routine.
std::string dump_dot_routine(const ir::Program& after, const std::string& routine, std::string& error);

}  // namespace cannl
