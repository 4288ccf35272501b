// plan_blocks.cpp — rolled repeat blocks: saved activations and the bodies' scratch.
//
// Takes: a Program after the passes that rewrite nests, its blocks' bodies (ir.h Block) run by
// calls of the routines (decode runs after it and plans the decode bodies it makes with
// plan_block_body). Guarantees, for each block:
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
//     is a batched buffer [batch, elements per example] that scales with the state's cap;
//   - when plan_memory runs (and PassOptions::host_locals: the C target), a local in the bytes
//     of a formal where they are free and two
//     locals of the expanded code could share them (Routine::hosted; host_locals below): a
//     product written in place into the saved activation or carried value it becomes (`qkv_mm`
//     that `qkv = qkv_mm + b` writes into the saved `qkv`: no copy out of the scratch), a
//     backward gradient in the slot of a saved activation after its last use (`x_v_grad` in
//     `x_v`).
// Formals are never planned here (their actuals are the caller's).
#include <algorithm>
#include <fmt/format.h>
#include <functional>
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

// The locals of `body` placed in the bytes of a formal its calls bind (Routine::hosted), as
// plan_memory would let two locals share bytes: in each half of the body (a call runs one:
// ir::body_span), a formal's bytes are free before the first nest touching it when that nest
// writes all of it (what the caller had there is never read: no copy out of the scratch for a
// product `qkv_mm` that `qkv = qkv_mm + b` writes into the saved `qkv`), and, for a saved
// activation in the backward half, after its last use (nothing reads an instance's slot after
// its backward: the backward's gradients in the bytes of the activations they replace, as in
// the expanded code); ir::formal_live. A local goes there when its lifetime does not overlap
// that span, or only in place at its end (in_place), nor the other locals there, and its bytes
// fit (per example, both batched: a slot scales with the state's cap as the scratch does).
// In-place partners are placed first, then the rest in order of first use; formals never share
// bytes with each other (each its own outer buffer, or its own slot of one).
void host_locals(const ir::Program& p, int k, ir::Routine& body, const std::function<bool(int)>& local) {
  body.hosted.clear();
  const ir::Block& bl = p.blocks[static_cast<size_t>(k)];
  const bool train = &body == &bl.train;
  const std::set<int> saved(bl.saved.begin(), bl.saved.end());
  std::set<int> bound(bl.formals.begin(), bl.formals.end());
  if (train) bound.insert(bl.saved.begin(), bl.saved.end());
  const std::set<int> live = ir::live_out(p, body);
  const size_t n = body.stmts.size(), bar = train ? ir::barrier_at(body) : n;
  std::map<int, long> first, last;
  for (size_t i = 0; i < n; ++i) {
    std::set<int> u;
    touched(body.stmts[i], u);
    for (int b : u) {
      first.emplace(b, static_cast<long>(i));
      last[b] = static_cast<long>(i);
    }
  }
  auto buf = [&](int b) -> const ir::Buffer& { return p.buffers[static_cast<size_t>(b)]; };
  std::vector<std::pair<size_t, size_t>> halves = {{0, bar}};
  if (train && bar < n) halves.push_back({bar + 1, n});
  for (const auto& [lo, hi] : halves) {
    const bool backward = train && lo > 0;
    std::map<int, std::pair<long, long>> busy;            // formal -> the span its own bytes are needed
    std::map<int, std::vector<std::pair<long, long>>> in;  // formal -> the lifetimes of the locals there
    for (int f : bound)
      if (first.count(f) && buf(f).ids == 0) busy[f] = ir::formal_live(p, body, lo, hi, f, backward && saved.count(f));
    std::vector<int> cands;  // this half's locals, in order of first use
    for (const auto& [b, at] : first)
      if (at >= static_cast<long>(lo) && last[b] < static_cast<long>(hi) && at < last[b] && local(b) &&
          !live.count(b) && buf(b).ids == 0)
        cands.push_back(b);
    std::stable_sort(cands.begin(), cands.end(), [&](int x, int y) { return first[x] < first[y]; });
    std::set<int> done;
    for (const bool only_in_place : {true, false})
      for (int l : cands) {
        if (done.count(l)) continue;
        const long fl = first[l], ll = last[l];
        int best = -1;
        long best_bytes = 0;
        for (const auto& [f, span] : busy) {
          const ir::Buffer &lb = buf(l), &fb = buf(f);
          if (lb.batched() != fb.batched() ||
              (lb.batched() ? lb.example_elements() > fb.example_elements() : lb.elements() > fb.elements()))
            continue;
          const auto [a, z] = span;
          const bool before_in_place = ll == a && in_place(p, body.stmts[static_cast<size_t>(a)], l, f);
          const bool after_in_place = fl == z && z < static_cast<long>(hi) &&
                                      in_place(p, body.stmts[static_cast<size_t>(z)], f, l);
          const bool apart = ll < a || fl > z;
          if (only_in_place ? !(before_in_place || after_in_place) : !(apart || before_in_place || after_in_place))
            continue;
          bool free = true;
          for (const auto& [x, y] : in[f]) free = free && (ll < x || fl > y);
          if (!free) continue;
          const long bytes = fb.batched() ? fb.example_elements() : fb.elements();
          if (best < 0 || bytes < best_bytes) best = f, best_bytes = bytes;  // the tightest fit
        }
        if (best < 0) continue;
        body.hosted.push_back({l, best});
        in[best].push_back({fl, ll});
        done.insert(l);
      }
  }
}

// Body `body` of block k planned: its locals at offsets of its own arena, or in a formal's bytes
// (host_locals) when plan_memory runs.
void plan_body(ir::Program& p, int k, ir::Routine& body, const PassOptions& o) {
  body.hosted.clear();
  if (body.stmts.empty()) return;
  const PassInfo* pm = find_pass("plan_memory");
  const bool share = pm && pass_runs(*pm, o);
  const ir::Block& bl = p.blocks[static_cast<size_t>(k)];
  const std::set<int> saved(bl.saved.begin(), bl.saved.end());
  const bool train = &body == &bl.train;
  auto local = [&](int b) {
    const ir::Buffer& x = p.buffers[static_cast<size_t>(b)];
    return x.block == k && !x.formal && x.role != ir::Role::Cache && !(train && saved.count(b));
  };
  if (share && o.host_locals) host_locals(p, k, body, local);
  plan_routine(p, body, o, [&](int b) { return local(b) && body.host(b) < 0; }, share, true);
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
