// plan_blocks.cpp — rolled repeat blocks: saved activations and the bodies' scratch.
//
// Takes: a Program after the passes that rewrite nests, its blocks' bodies (ir.h Block) run by
// calls of the routines (decode runs after it and plans the decode bodies it makes with
// plan_block_body; the unroll bridge of --quantize int8 after it,
// driver/compile.cpp, expands every block call, each saved activation and local an instance's
// own buffer). Guarantees, for each block:
//   - saved activations: the locals of its training body used on both sides of the barrier
//     (what an instance's backward half reads of its forward half) are listed in
//     Block::saved, and each gets a stack `<block>_<name>` [count, dims...] (a computed buffer
//     of the program, planned in the routines' arenas as any), which the calls of the training
//     body (BlockForward, BlockBackward) bind slot l to for instance l: the forward call writes
//     it, the backward call reads it. The passes decided which values these are, on the body as
//     on the unrolled program (the barrier stands for everything between the halves);
//   - each body (training, inference, init, norm, decode) planned once, for all instances:
//     its other locals at offsets of its own arena (Routine::offsets, arena_bytes; sharing bytes
//     as plan_memory does when that pass runs, else each its own), and each call given a
//     scratch buffer `<block>_<half>_scratch` (a temporary of the program, among what it
//     writes, Call::scratch) as large as the locals the half it runs uses: the training body's
//     halves each their own (the forward's scratch is free during the rest of the model). A
//     body's locals are all planned per example (plan_routine's all_per_example), so a scratch
//     is a batched buffer [batch, elements per example] that scales with the state's cap.
// Formals are never planned here (their actuals are the caller's).
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

// Every buffer a nest touches.
void touched(const ir::Stmt& s, std::set<int>& out) {
  const std::set<int> r = passes::reads(s), w = passes::writes(s);
  out.insert(r.begin(), r.end());
  out.insert(w.begin(), w.end());
}

void saved_activations(ir::Program& p, int k) {
  ir::Block& bl = p.blocks[static_cast<size_t>(k)];
  bl.saved.clear();
  const ir::Routine& train = bl.train;
  if (train.stmts.empty()) return;
  const size_t bar = ir::barrier_at(train);
  std::set<int> before, after;
  for (size_t i = 0; i < train.stmts.size(); ++i)
    if (i != bar) touched(train.stmts[i], i < bar ? before : after);
  for (int b : before)
    if (after.count(b) && p.buffers[static_cast<size_t>(b)].block == k && !p.buffers[static_cast<size_t>(b)].formal)
      bl.saved.push_back(b);
  for (int s : bl.saved) {
    ir::Buffer st = p.buffers[static_cast<size_t>(s)];
    const long size = st.elements();
    st.name = p.unique_name(bl.name + "_" + st.name);
    st.dims.insert(st.dims.begin(), ir::Dim{bl.count, false});
    st.role = ir::Role::Computed;
    st.block = -1;
    st.formal = false;
    st.tensor = -1;
    st.shape = fmt::format("{} of each instance of block {}, kept from its forward to its backward",
                           p.buffers[static_cast<size_t>(s)].name, bl.name);
    p.buffers.push_back(std::move(st));
    const int stack = static_cast<int>(p.buffers.size()) - 1;
    for (ir::Routine& r : p.routines)
      for (ir::Stmt& x : r.stmts) {
        if (!x.call || x.call->block != k) continue;
        ir::Call& c = *x.call;
        if (c.kind != ir::Call::Kind::BlockForward && c.kind != ir::Call::Kind::BlockBackward) continue;
        ir::Binding bd;
        bd.formal = s;
        bd.buf = stack;
        bd.stride = size;
        c.binds.push_back(bd);
        (c.kind == ir::Call::Kind::BlockForward ? c.writes : c.reads).push_back(stack);
      }
  }
}

// Body `body` of block k planned: its locals at offsets of its own arena.
void plan_body(ir::Program& p, int k, ir::Routine& body, const PassOptions& o) {
  if (body.stmts.empty()) return;
  const PassInfo* pm = find_pass("plan_memory");
  const bool share = pm && pass_runs(*pm, o);
  const ir::Block& bl = p.blocks[static_cast<size_t>(k)];
  const std::set<int> saved(bl.saved.begin(), bl.saved.end());
  const bool train = &body == &bl.train;
  plan_routine(p, body, o, [&](int b) {
    const ir::Buffer& x = p.buffers[static_cast<size_t>(b)];
    return x.block == k && !x.formal && x.role != ir::Role::Cache && !(train && saved.count(b));
  }, share, true);
}

// The scratch of each call of block k (of body `only`'s calls when not null): the extent of
// the locals of the half it runs.
void block_scratch(ir::Program& p, int k, const PassOptions& o, const ir::Routine* only) {
  std::map<ir::Call::Kind, int> scratch;
  for (ir::Routine& r : p.routines)
    for (ir::Stmt& x : r.stmts) {
      if (!x.call || !ir::is_block_call(x.call->kind) || x.call->block != k) continue;
      ir::Call& c = *x.call;
      const ir::Block& b = p.blocks[static_cast<size_t>(k)];
      const ir::Routine& body = ir::body_of(b, c.kind);
      if (only && &body != only) continue;
      const auto [lo, hi] = ir::body_span(b, c.kind);
      std::set<int> used;
      for (size_t i = lo; i < hi; ++i) touched(body.stmts[i], used);
      long extent = 0;  // per example: the body's locals all scale with the state's cap
      for (int u : used)
        if (body.planned(u))
          extent = std::max(extent, body.example_offset(u, p.max_batch) +
                                        plan_unit_bytes(p.buffers[static_cast<size_t>(u)], o));
      if (extent == 0) continue;
      auto it = scratch.find(c.kind);
      if (it == scratch.end()) {
        ir::Buffer s;
        // "block_forward" -> "forward"
        const std::string half = std::string(ir::call_name(c.kind)).substr(6);
        s.name = p.unique_name(b.name + "_" + half + "_scratch");
        s.role = ir::Role::Temp;
        s.dims = {ir::Dim{p.max_batch, true}, ir::Dim{(extent + o.elem_bytes - 1) / o.elem_bytes, false}};
        s.shape = fmt::format("the locals of block {}'s {} body, one instance at a time", b.name, half);
        p.buffers.push_back(std::move(s));
        it = scratch.emplace(c.kind, static_cast<int>(p.buffers.size()) - 1).first;
      } else {
        ir::Buffer& s = p.buffers[static_cast<size_t>(it->second)];
        s.dims[1].size = std::max(s.dims[1].size, (extent + o.elem_bytes - 1) / o.elem_bytes);
      }
      c.scratch = it->second;
      c.writes.push_back(it->second);  // (each instance writes its locals before it reads them)
    }
}

// The bodies' plans cover every buffer (new ones included).
void cover_buffers(ir::Program& p) {
  for (ir::Block& bl : p.blocks)
    for (ir::Routine* r : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode})
      if (!r->offsets.empty()) r->offsets.resize(p.buffers.size(), -1);
}

}  // namespace

void plan_block_body(ir::Program& p, int k, ir::Routine& body, const PassOptions& o) {
  plan_body(p, k, body, o);
  block_scratch(p, k, o, &body);
  cover_buffers(p);
}

void plan_blocks(ir::Program& p, const PassOptions& o) {
  for (size_t k = 0; k < p.blocks.size(); ++k) {
    const int bk = static_cast<int>(k);
    saved_activations(p, bk);
    ir::Block& bl = p.blocks[k];
    for (ir::Routine* r : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode}) plan_body(p, bk, *r, o);
    block_scratch(p, bk, o, nullptr);
  }
  cover_buffers(p);
}

}  // namespace cannl
