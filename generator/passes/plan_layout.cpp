// plan_layout.cpp — the memory layout: where every buffer lives in each state's arena.
//
// Takes: a Program after the other passes (Routine::offsets and arena_bytes where
// plan_memory ran), the element size and the target's alignment. Guarantees:
// Program::layout, decided once here and only printed by the emitters and the model card:
//   training   (the state every routine but decode runs on; decode too with
//              PassOptions::decode_in_training, the CUDA target's) the params, then the optimiser
//              state (the model's state proper, a prefix: Arena::state; with
//              PassOptions::opt_block, the C target's, the params only), then the grad block (the
//              params' gradients, contiguous, in param order, Arena::grads: train_step and
//              train_grads write them there, train_update reads them, a data-parallel trainer
//              all-reduces the block in between), then every other buffer a routine uses outside
//              its memory plan (all of them at -O0), in buffer order, each with bytes of its own;
//              then one work region as large as the largest routine's plan, which every planned
//              routine lays its buffers out in (a state runs one routine at a time). A buffer a
//              routine keeps for the caller in its plan has a field pointing at its place there:
//              valid until the next call.
//   opt_state  (PassOptions::opt_block) the optimiser state in a block of its own, in param
//              order (each param's state buffers together, in buffer order), for ZeRO-1's
//              shards (Layout::opt_state).
// Stacked storage (lower/roll.h): a view's field is its stacked buffer's plus its offset, the
// stacked buffer placed where its first view would be (the state prefix, the grad block, the
// optimiser-state block: the instances are consecutive params, so memory order stays param
// order); the instances' slices are contiguous, with no alignment between them (llm.c's
// layout). A stacked param's instance l has its state at slice l of the stacked state.
//   inference  (the C target's forward-only state: forward, eval_metrics and decode) the params,
//              then the buffers those routines use outside their plans (decode's caches among
//              them: they outlive its calls; the constant tables, which init_constants writes
//              when the state is created, Role::Constant), then their work region.
// Every offset and size is a multiple of the alignment; an arena is at least one alignment
// unit. Run-time-sized states (ir.h Arena): everything above without a batch dim comes first, at
// fixed offsets (the work region's batch-independent part last); then the part that scales
// with the state's cap: the work region's batched part, then the own buffers with a batch dim
// (at -O0), each at a per-example offset times the cap. Inputs are never in an arena (the
// caller's arrays). In train_grads, each param gradient is listed on the nest after which no
// nest writes it (Stmt::grads_final; a rolled block's instances' on its backward call, which
// hands each instance's over as it finishes).
// Block bodies' locals live in their calls' scratch buffers (passes/plan_blocks.cpp).
#include <algorithm>
#include <functional>
#include <map>

#include "passes/pipeline.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

std::set<int> used_by(const ir::Routine& r) {
  std::set<int> bufs;
  for (const ir::Stmt& s : r.stmts) {
    for (int w : ir::written_buffers(s)) bufs.insert(w);
    if (s.call)
      for (int b : ir::call_reads(*s.call)) bufs.insert(b);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads) bufs.insert(l->access.buf);
  }
  for (const std::vector<int>* l : {&r.io.outputs, &r.io.values, &r.io.kept}) bufs.insert(l->begin(), l->end());
  return bufs;
}

// An arena for the routines `rs`: `first` (in order) own storage first, then `grads` (in
// order, the grad block), then what the routines use unplanned (optimiser state only
// without `opt_block`), then the work region.
ir::Arena arena(const ir::Program& p, const std::vector<const ir::Routine*>& rs, const std::vector<int>& first,
                const std::vector<int>& grads, long align, long elem, bool opt_block) {
  const size_t n = p.buffers.size();
  ir::Arena a;
  a.field.assign(n, -1);
  a.field_example.assign(n, -1);
  a.own.assign(n, false);
  a.max_batch = p.max_batch;
  long off = 0;
  std::vector<int> batched;  // own buffers with a batch dim: in the scaled part, after the work region's
  std::function<void(int)> place = [&](int b) {
    const auto i = static_cast<size_t>(b);
    if (a.own[i] || p.buffers[i].role == ir::Role::Input || (opt_block && p.buffers[i].role == ir::Role::OptState)) return;
    if (const int s = p.buffers[i].view_of; s >= 0) {  // inside its stacked buffer, placed with the first
      place(s);
      if (p.buffers[static_cast<size_t>(s)].batched())
        CANNL_BUG("a view of a batched stacked buffer: " + p.buffers[i].name);
      a.field[i] = a.field[static_cast<size_t>(s)] + p.buffers[i].view_offset * elem;
      a.own[i] = true;
      return;
    }
    a.own[i] = true;
    if (p.buffers[i].batched()) {
      batched.push_back(b);
      return;
    }
    a.field[i] = off;
    off += ir::align_up(p.buffers[i].elements() * elem, align);
  };
  for (int b : first) place(b);
  a.state = off;
  if (!grads.empty()) {
    a.grads = off;
    for (int b : grads) place(b);
    a.grads_bytes = off - a.grads;
  }
  std::set<int> unplanned;
  for (const ir::Routine* r : rs)
    for (int b : used_by(*r))
      if (!r->planned(b)) unplanned.insert(b);
  for (int b : unplanned) place(b);
  // The work region: the largest batch-independent part of the routines' plans, then (at the
  // start of the scaled part) the largest batched part, per example.
  long work_example = 0;
  for (const ir::Routine* r : rs)
    if (r->arena_bytes > 0) {
      a.work_fixed = std::max(a.work_fixed, r->fixed_bytes);
      work_example = std::max(work_example, (r->arena_bytes - r->fixed_bytes) / p.max_batch);
    }
  if (a.work_fixed > 0 || work_example > 0) {
    a.work = off;
    off += a.work_fixed;
    a.work_bytes = a.work_fixed + work_example * p.max_batch;
  }
  a.fixed_bytes = off;
  a.example_bytes = work_example;
  for (int b : batched) {
    const auto i = static_cast<size_t>(b);
    a.field_example[i] = a.example_bytes;
    a.field[i] = a.fixed_bytes + a.example_bytes * p.max_batch;
    a.example_bytes += ir::align_up(p.buffers[i].example_elements() * elem, align);
  }
  // Buffers handed to the caller from a routine's plan get a field pointing there.
  if (a.work >= 0)
    for (const ir::Routine* r : rs)
      for (int b : r->io.kept) {
        const auto i = static_cast<size_t>(b);
        if (a.own[i] || !r->planned(b)) continue;
        if (r->scaled(b)) a.field_example[i] = r->example_offset(b, p.max_batch);
        a.field[i] = a.address(*r, b);
      }
  a.bytes = std::max(a.fixed_bytes + a.example_bytes * p.max_batch, align);
  return a;
}

}  // namespace

void plan_layout(ir::Program& p, const PassOptions& o) {
  ir::Layout& l = p.layout;
  l.align = o.align;
  l.elem_bytes = o.elem_bytes;
  std::vector<int> state = p.params;  // the model's state proper: params, then optimiser state
  std::vector<int> opt;                // the optimiser state in param order
  for (int param : p.params)
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].role == ir::Role::OptState && p.buffers[b].state_of == param) opt.push_back(static_cast<int>(b));
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role == ir::Role::OptState && std::find(opt.begin(), opt.end(), static_cast<int>(b)) == opt.end())
      opt.push_back(static_cast<int>(b));  // (none: every optimiser-state buffer belongs to a param)
  ir::OptBlock& ob = l.opt_state;
  ob = {};
  if (o.opt_block) {
    ob.field.assign(p.buffers.size(), -1);
    std::map<int, int> stacked_state;  // a stacked param -> its stacked optimiser state
    for (size_t b = 0; b < p.buffers.size(); ++b)
      if (p.buffers[b].role == ir::Role::OptState && p.buffers[b].stack > 0)
        stacked_state[p.buffers[b].state_of] = static_cast<int>(b);
    for (int param : p.params) {
      const ir::Buffer& pb = p.buffers[static_cast<size_t>(param)];
      if (auto it = stacked_state.find(pb.view_of); pb.view_of >= 0 && it != stacked_state.end()) {
        // An instance of a stacked param: its state, [kinds, ...], is slice l of the stacked state.
        const auto st = static_cast<size_t>(it->second);
        if (ob.field[st] < 0) {
          ob.field[st] = ob.bytes;
          ob.bytes += ir::align_up(p.buffers[st].elements() * o.elem_bytes, o.align);
        }
        const long per = p.buffers[st].elements() / p.buffers[st].stack;
        ob.param_start.push_back(ob.field[st] + pb.view_offset / pb.elements() * per * o.elem_bytes);
        for (int b : opt)
          if (p.buffers[static_cast<size_t>(b)].state_of == param)
            ob.field[static_cast<size_t>(b)] = ob.field[st] + p.buffers[static_cast<size_t>(b)].view_offset * o.elem_bytes;
        continue;
      }
      ob.param_start.push_back(ob.bytes);
      for (int b : opt)
        if (p.buffers[static_cast<size_t>(b)].state_of == param) {
          ob.field[static_cast<size_t>(b)] = ob.bytes;
          ob.bytes += ir::align_up(p.buffers[static_cast<size_t>(b)].elements() * o.elem_bytes, o.align);
        }
    }
    ob.param_start.push_back(ob.bytes);
  } else {
    state.insert(state.end(), opt.begin(), opt.end());
  }
  std::vector<const ir::Routine*> all;
  for (const ir::Routine& r : p.routines)
    if (r.kind != ir::RoutineKind::Decode || o.decode_in_training) all.push_back(&r);
  std::vector<int> grads;  // the grad block: each param's gradient the loss depends on
  for (int b : p.params)
    if (p.grad(b) >= 0) grads.push_back(p.grad(b));
  l.training = arena(p, all, state, grads, o.align, o.elem_bytes, o.opt_block);
  std::vector<const ir::Routine*> inference;
  for (const ir::Routine& r : p.routines)
    if (r.kind == ir::RoutineKind::Forward || r.kind == ir::RoutineKind::Eval || r.kind == ir::RoutineKind::Decode ||
        r.kind == ir::RoutineKind::Constants)
      inference.push_back(&r);
  l.inference = arena(p, inference, p.params, {}, o.align, o.elem_bytes, o.opt_block);
  if (ir::Routine* r = p.routine(ir::RoutineKind::TrainGrads)) {
    for (ir::Stmt& s : r->stmts) s.grads_final.clear();
    for (int g : grads) {
      for (size_t i = r->stmts.size(); i-- > 0;) {
        const ir::Stmt& s = r->stmts[i];
        std::vector<int> w = s.call ? ir::call_writes(*s.call) : ir::written_buffers(s);
        // (a view's storage: a block's backward call writes a stacked gradient's instances)
        if (std::find(w.begin(), w.end(), g) == w.end() && std::find(w.begin(), w.end(), ir::storage(p, g)) == w.end())
          continue;
        r->stmts[i].grads_final.push_back(g);
        break;
      }
    }
  }
}

}  // namespace cannl
