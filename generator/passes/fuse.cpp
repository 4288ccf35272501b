// fuse.cpp — loop fusion of pointwise nests over the same loops.
//
// Takes: any Program. Two nests A (earlier) and B of a routine fuse when
//   - both are pointwise (each point writes its own cell of each buffer it writes: no
//     reduction), neither is sequential nor starts from zero, and their loops have the same
//     bounds in the same order (A's loop k stands for B's loop k);
//   - at each point B reads what A writes only at the cell A writes there, and A reads what
//     B writes only at the cell B writes there (so running B's assignment right after A's,
//     point by point, reads the same values as running the nests one after the other);
//   - the nests between them can all move below B's new place or above A's (independent);
//   - B is among the next 128 nests after A, and the two make at most 32 assignments (bounds
//     that keep the pass linear and a fused nest's kernel small).
//   - no block body's barrier (Call::Kind::BlockRest) lies between them;
//   - they update the same param or none (Stmt::update_of: train_update's nests of different
//     params stay apart, so that it can run for a range of params, ZeRO-1's shard).
// Guarantees: one nest in A's loops doing A's assignments then B's (B's `+=` into the cell A
// has just assigned is merged:  c = x; c += y  ->  c = x + y). Optimiser updates of one param
// (moment, then param), the two contributions to a gradient, bias + activation chains of
// pointwise tensors become single nests. Contractions are never fused (they stay GEMM-shaped);
// nests storing only constants fuse only with each other, a few at most.
// Sibling sums (PassOptions::fuse_sums: the C target): two zero_first `+=` sums over the same
// loops, in the same order, whose innermost loop indexes every cell they write (column sums
// over batch x positions: the gradients of a batch_norm's gain and bias, its backward's two
// sums over one gradient), that read a buffer in common and nothing the other writes, fuse as
// above (at most kMaxSums assignments): one pass over the values they both read, each cell
// still summed over the points in the same order. Contractions and sums whose innermost loop
// is reduced (a register `acc` in the C emitter) stay apart.
#include <map>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

using ir::Access;

// A nest fuses with one of the next kWindow nests of its routine at most: partners in practice
// are a few nests apart, and the bound keeps the pass linear in the routine's length.
constexpr size_t kWindow = 128;
// A fused nest makes at most kMaxAssigns assignments at each point (a kernel of its own in
// the generated code, its buffers its parameters: a bounded list).
constexpr size_t kMaxAssigns = 32;

bool fusible(const ir::Stmt& s) { return !s.sequential && !s.zero_first && passes::pointwise(s); }

// Sibling sums: at most kMaxSums of them in one nest (each keeps its row of cells in registers).
constexpr size_t kMaxSums = 4;
bool names_iter(const ir::Access& a, int iter) {
  for (const ir::Affine& f : a.index)
    for (const auto& t : f.terms)
      if (t.iter == iter) return true;
  return false;
}
bool column_sum(const ir::Stmt& s) {
  if (s.call || s.sequential || !s.zero_first || s.iters.empty() || s.assigns.empty() || passes::is_contraction(s))
    return false;
  const int inner = static_cast<int>(s.iters.size()) - 1;
  for (const ir::Assign& a : s.assigns)
    if (a.accum != ir::Accum::Add || !names_iter(a.out, inner)) return false;
  return true;
}

// A nest that only stores constants (the zeroing of gradients): it gains nothing from sharing
// a loop with a computing nest (nothing to reuse) and costs it its vectorisation (a store
// stream per buffer: spilled pointers, scalar code), so it fuses only with other fills, at
// most kMaxFills of them.
constexpr size_t kMaxFills = 4;
bool fill_only(const ir::Stmt& s) {
  for (const ir::Assign& a : s.assigns)
    if (a.accum != ir::Accum::Set || a.body->op != ir::Op::Const) return false;
  return true;
}
bool fill_fits(const ir::Stmt& a, const ir::Stmt& b) {
  const bool fa = fill_only(a), fb = fill_only(b);
  return fa == fb && (!fa || a.assigns.size() + b.assigns.size() <= kMaxFills);
}

bool same_loops(const ir::Stmt& a, const ir::Stmt& b) {
  if (a.iters.size() != b.iters.size()) return false;
  for (size_t k = 0; k < a.iters.size(); ++k)
    if (a.iters[k].size != b.iters[k].size || a.iters[k].batch != b.iters[k].batch) return false;
  return true;
}

// What a nest reads and writes, kept with it while the pass runs: the buffers, and each
// access by buffer (the writes; the reads and writes together: a non-Set accumulation reads
// the cells it writes).
struct Accesses {
  std::set<int> reads, writes;
  std::multimap<int, Access> written, all;
  explicit Accesses(const ir::Stmt& s) : reads(passes::reads(s)), writes(passes::writes(s)) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads) all.insert({l->access.buf, l->access});
    for (const ir::Assign& a : s.assigns) {
      written.insert({a.out.buf, a.out});
      all.insert({a.out.buf, a.out});
      if (a.accum != ir::Accum::Set) all.insert({a.out.buf, a.out});
    }
  }
  // The accesses of a nest and of another appended to it (each point runs both).
  void add(const Accesses& o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
    written.insert(o.written.begin(), o.written.end());
    all.insert(o.all.begin(), o.all.end());
  }
};

// Every access in `others` to a buffer `writer` writes is exactly the access writing it.
bool same_cells(const std::multimap<int, Access>& written, const std::multimap<int, Access>& others) {
  for (const auto& [buf, o] : others) {
    auto [lo, hi] = written.equal_range(buf);
    for (auto it = lo; it != hi; ++it)
      if (!(it->second == o)) return false;
  }
  return true;
}

bool can_fuse(const ir::Stmt& a, const Accesses& xa, const ir::Stmt& b, const Accesses& xb) {
  return a.update_of == b.update_of && same_loops(a, b) && same_cells(xa.written, xb.all) && same_cells(xb.written, xa.all);
}

bool meets(const std::set<int>& u, const std::set<int>& v) {
  for (int b : u)
    if (v.count(b)) return true;
  return false;
}

// Two sibling sums: they read a buffer in common (the pass over it that fusing saves),
// neither touches what the other writes (a sum's cells are final only at its end), the same
// loops and the same parallel loop (one that indexes every cell of both).
bool can_fuse_sums(const ir::Stmt& a, const Accesses& xa, const ir::Stmt& b, const Accesses& xb) {
  return column_sum(a) && column_sum(b) && a.assigns.size() + b.assigns.size() <= kMaxSums && meets(xa.reads, xb.reads) &&
         a.update_of == b.update_of && a.parallel == b.parallel && same_loops(a, b) && !meets(xa.writes, xb.reads) &&
         !meets(xb.writes, xa.reads) && !meets(xa.writes, xb.writes);
}

// B's assignments after A's; true when they were appended (not merged into A's last one).
bool merge(ir::Stmt& a, ir::Stmt&& b) {
  ir::Assign& last = a.assigns.back();
  bool appended = false;
  if (b.single() && b.only().accum == ir::Accum::Add && last.accum == ir::Accum::Set && b.only().out == last.out &&
      passes::count_loads(b, b.only().out.buf) == 0) {
    last.body = ir::binary(ir::Op::Add, last.body, b.only().body);
  } else {
    for (ir::Assign& f : b.assigns) a.assigns.push_back(std::move(f));
    appended = true;
  }
  // The comment lists the statements a nest comes from (a long list ends in "...").
  if (a.what.size() > 400) {
    if (a.what.compare(a.what.size() - 5, 5, "; ...") != 0) a.what += "; ...";
  } else if (a.what != b.what && a.what.find("; " + b.what) == std::string::npos) {
    a.what += "; " + b.what;
  }
  return appended;
}

}  // namespace

void fuse(ir::Program& p, const PassOptions& o) {
  for (ir::Routine* rp : ir::all_routines(p)) {
    ir::Routine& r = *rp;
    auto& st = r.stmts;
    const size_t n = st.size();
    // Each nest's accesses, kept current as nests merge; merged-away nests are marked gone
    // and dropped at the end, so nothing shifts while scanning.
    std::vector<Accesses> x;
    for (const ir::Stmt& s : st) x.emplace_back(s);
    std::vector<bool> gone(n, false);
    for (size_t i = 0; i < n; ++i) {
      if (gone[i]) continue;
      const bool sums = o.fuse_sums && column_sum(st[i]);
      if (!sums && !fusible(st[i])) continue;
      // The nests between A and the candidate B, as the union of what they read and write:
      // B moves up past them when it is independent of all of them, A down likewise.
      std::set<int> between_r, between_w;
      bool down = true;
      size_t scanned = 0;
      for (size_t j = i + 1; j < n && scanned < kWindow; ++j) {
        if (gone[j]) continue;
        if (st[j].call && st[j].call->kind == ir::Call::Kind::BlockRest) break;  // nothing crosses a body's barrier
        ++scanned;
        ir::Stmt& a = st[i];
        ir::Stmt& b = st[j];
        if (sums ? can_fuse_sums(a, x[i], b, x[j])
                 : fusible(b) && a.assigns.size() + b.assigns.size() <= kMaxAssigns && fill_fits(a, b) &&
                       can_fuse(a, x[i], b, x[j])) {
          const bool up = !meets(x[j].writes, between_r) && !meets(x[j].writes, between_w) && !meets(x[j].reads, between_w);
          if (up || down) {
            if (merge(a, std::move(b))) x[i].add(x[j]);
            else x[i] = Accesses(a);
            gone[j] = true;
            if (!up) {  // the fused nest goes where B was
              st[j] = std::move(st[i]);
              std::swap(x[i], x[j]);
              gone[j] = false;
              gone[i] = true;
              break;
            }
            between_r.clear(), between_w.clear(), down = true, scanned = 0;
            j = i;  // look again from A's next nest
            continue;
          }
        }
        between_r.insert(x[j].reads.begin(), x[j].reads.end());
        between_w.insert(x[j].writes.begin(), x[j].writes.end());
        down = down && !meets(x[i].writes, x[j].reads) && !meets(x[i].writes, x[j].writes) && !meets(x[i].reads, x[j].writes);
      }
    }
    std::vector<ir::Stmt> kept;
    for (size_t k = 0; k < n; ++k)
      if (!gone[k]) kept.push_back(std::move(st[k]));
    st = std::move(kept);
  }
}

}  // namespace cannl
