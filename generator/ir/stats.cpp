// stats.cpp — counts of a routine (see stats.h).
#include "ir/stats.h"

#include <set>

namespace cannl::ir {
namespace {

bool in_arena(Role r) { return r == Role::Computed || r == Role::Temp || r == Role::Grad; }

// Arithmetic operations of one evaluation of `e`.
double ops_of(const Expr& e) {
  double n = 0;
  switch (e.op) {
    case Op::Const: case Op::Scalar: case Op::Index: case Op::Load: break;
    default: n = 1;
  }
  for (const ExprP& a : e.args) n += ops_of(*a);
  return n;
}

// Distinct cells an access touches over the nest: the product of the bounds of the loops it
// uses (each loop counted once), capped by the buffer's size at this batch.
double footprint(const Stmt& s, const Access& a, const Buffer& b, long batch) {
  std::set<int> used;
  for (const Affine& ix : a.index)
    for (const Affine::Term& t : ix.terms) used.insert(t.iter);
  double cells = 1;
  for (int i : used) cells *= s.iters[i].batch ? batch : s.iters[i].size;
  double whole = 1;
  for (const Dim& d : b.dims) whole *= d.batch ? batch : d.size;
  return cells < whole ? cells : whole;
}

}  // namespace

RoutineStats routine_stats(const Program& p, const Routine& r, long batch, int elem_bytes) {
  RoutineStats st;
  std::set<int> touched;
  for (const Stmt& s : r.stmts) {
    ++st.loop_nests;
    if (s.call) {  // a kernel call: its buffers, and the products of its score tiles
      const Call& c = *s.call;
      for (int b : call_reads(c)) touched.insert(b);
      for (int b : call_writes(c)) touched.insert(b);
      if (is_block_call(c.kind)) {  // a block's instances: the half of its body they run, count times
        const Block& bl = p.blocks[static_cast<size_t>(c.block)];
        const auto [lo, hi] = body_span(bl, c.kind);
        Routine half;
        half.stmts.assign(body_of(bl, c.kind).stmts.begin() + static_cast<long>(lo),
                          body_of(bl, c.kind).stmts.begin() + static_cast<long>(hi));
        const RoutineStats one = routine_stats(p, half, batch, elem_bytes);
        st.loop_nests += static_cast<int>(c.count) * one.loop_nests - 1;
        st.flops += static_cast<double>(c.count) * one.flops;
        st.bytes_moved += static_cast<double>(c.count) * one.bytes_moved;
        continue;
      }
      if (c.kind == Call::Kind::EmbeddingForward || c.kind == Call::Kind::EmbeddingBackward) {
        st.flops += (c.batch ? static_cast<double>(batch) : 1.0) * static_cast<double>(c.seqs * c.width);
        continue;
      }
      const double pairs = (c.batch ? static_cast<double>(batch) : 1.0) * static_cast<double>(c.seqs * c.heads);
      double scores = pairs * static_cast<double>(c.tq * c.tk) * (c.causal ? 0.5 : 1.0);
      if (c.window > 0 && c.window < c.tk) scores = pairs * static_cast<double>(c.tq * c.window);  // about
      st.flops += scores * static_cast<double>(2 * c.e + 2 * c.f) * (c.kind == Call::Kind::AttentionForward ? 1 : 2);
      continue;
    }
    double trips = 1;
    for (const Iter& it : s.iters) trips *= it.batch ? batch : it.size;
    for (const Assign& a : s.assigns) st.flops += trips * (ops_of(*a.body) + (a.accum == Accum::Set ? 0 : 1));
    if (s.scaled_sum) {
      // out = 0 += x * c (passes/mark_contractions.cpp): the emitters multiply each finished sum by c once
      double cells = 1;
      for (const Affine& ix : s.only().out.index)
        for (const Affine::Term& t : ix.terms) cells *= s.iters[t.iter].batch ? batch : s.iters[t.iter].size;
      st.flops -= trips - cells;
    }
    std::vector<const Expr*> loads;
    collect_loads(s, loads);
    std::set<std::pair<int, std::string>> seen;  // one footprint per distinct access
    auto count = [&](const Access& a, double times) {
      touched.insert(a.buf);
      std::string key;
      for (const Affine& ix : a.index) {
        for (const Affine::Term& t : ix.terms) key += std::to_string(t.iter) + "*" + std::to_string(t.coef) + "+";
        key += std::to_string(ix.offset) + ",";
      }
      if (!seen.insert({a.buf, key}).second) return;
      st.bytes_moved += times * footprint(s, a, p.buffers[a.buf], batch) * elem_bytes;
    };
    for (const Expr* l : loads) count(l->access, 1);
    for (const Assign& a : s.assigns) count(a.out, a.accum == Accum::Set || s.zero_first ? 1 : 2);  // += reads and writes
  }
  long batch_cap = batch;
  for (int b : touched) {
    const Buffer& buf = p.buffers[b];
    long bytes = elem_bytes;
    for (const Dim& d : buf.dims) bytes *= d.batch ? batch_cap : d.size;
    if (in_arena(buf.role)) {
      ++st.buffers;
      st.arena_bytes += bytes;
    } else {
      st.persistent_bytes += bytes;
    }
  }
  if (r.arena_bytes > 0) st.arena_bytes = r.arena_bytes;
  return st;
}

}  // namespace cannl::ir
