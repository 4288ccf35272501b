// pipeline.cpp — the pass order and the -O levels (see pipeline.h).
#include "passes/pipeline.h"

namespace cannl {

const std::vector<PassInfo>& pass_list() {
  static const std::vector<PassInfo> list = {
      {"loop_order", 0, "each nest's loop order and its parallel loop (written axes outside, unit stride inside)",
       order_loops},
      {"simplify", 1, "constant folding and algebraic simplification (x*1, x+0, x/255 -> x*(1/255))", simplify},
      {"fold_fills", 1, "a fill followed by an accumulation becomes one nest that starts from zero", fold_fills},
      {"reuse_values", 2, "values a stored tensor already holds are loaded, not recomputed (relu masks)", reuse_values},
      {"inline_virtual", 2, "virtual nodes: cheap or read-once tensors inlined into their readers", inline_virtual},
      {"order_sums", 2, "the loop order of reductions again, on what inlining put in them (loop_order's rules)", order_sums},
      {"fuse", 2, "producer/consumer pointwise nests over the same loops become one nest", fuse},
      {"hoist_divisions", 1, "a division by what the innermost loop does not change: a product with its reciprocal",
       hoist_divisions},
      {"dce", 1, "nests whose results nobody reads (gradients included) are removed", dce},
      {"hoist_constants", 1, "constant tables (rope's cos and sin): computed once when a state is created",
       hoist_constants},
      {"plan_blocks", 0,
       "repeat blocks: activations kept from forward to backward stacked per instance, bodies' scratch planned",
       plan_blocks},
      {"decode", 0, "generation's decode routine: forward at one position, keys and values kept in caches (causal LMs)",
       make_decode},
      {"plan_memory", 1, "liveness; one arena per routine, buffers share bytes when lifetimes do not overlap",
       plan_memory},
      {"mark_contractions", 0, "contractions (matrix products) and scaled sums marked for the emitters and the cost model",
       mark_contractions},
      {"plan_layout", 0, "the memory layout: each state's arena, its fields and its work region (the emitters print it)",
       plan_layout},
  };
  return list;
}

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : pass_list())
    if (name == p.name) return &p;
  return nullptr;
}

bool pass_runs(const PassInfo& pass, const PassOptions& o) {
  return pass.level <= o.level && !o.disabled.count(pass.name);
}

void run_passes(ir::Program& p, const PassOptions& o,
                const std::function<void(const std::string&, const ir::Program&)>& after) {
  for (const PassInfo& pass : pass_list()) {
    if (!pass_runs(pass, o)) continue;
    pass.run(p, o);
    if (after) after(pass.name, p);
  }
}

}  // namespace cannl
