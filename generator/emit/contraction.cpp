// contraction.cpp — recognise contraction nests (see contraction.h).
#include "emit/contraction.h"

#include <algorithm>
#include <array>

namespace cannl {

long access_base(const ir::Program& p, const ir::Access& a) {
  const auto strides = buffer_strides(p, a.buf);
  long off = 0;
  for (size_t d = 0; d < a.index.size(); ++d)
    if (a.index[d].terms.empty()) off += a.index[d].offset * strides[d];
  return off;
}

namespace {

// Merges the loops of one role into one strided axis: the longest chain, from the loop of
// smallest stride outwards, in which each loop's stride is the next inner loop's size times
// its stride in every operand of the role. Loops left out are appended to `outer`.
Gemm::Axis merge(const ir::Program& p, const ir::Stmt& s, std::vector<int> group, const ir::Access& c,
                 const ir::Access& a, const ir::Access& b, std::vector<int>& outer) {
  Gemm::Axis ax;
  if (group.empty()) {
    ax.size = "1";
    return ax;
  }
  // A loop of one iteration (not the batch loop: a channel axis of size 1) adds nothing to
  // the axis and its stride would break the chain (conv2d over one channel: K = ky kx c with
  // c of size 1 is 25, not 5 products of K = 5): it goes out as an outer loop of one pass.
  for (size_t i = group.size(); i-- > 0 && group.size() > 1;) {
    const ir::Iter& it = s.iters[static_cast<size_t>(group[i])];
    if (it.size == 1 && !it.batch) {
      outer.push_back(group[i]);
      group.erase(group.begin() + static_cast<long>(i));
    }
  }
  auto st = [&](int it) {
    return std::array<long, 3>{iter_stride(p, a, it), iter_stride(p, b, it), iter_stride(p, c, it)};
  };
  // Order by stride, largest first, in the first operand that holds the role's loops.
  std::stable_sort(group.begin(), group.end(), [&](int x, int y) {
    auto sx = st(x), sy = st(y);
    for (int o = 0; o < 3; ++o)
      if (sx[static_cast<size_t>(o)] != 0) return sx[static_cast<size_t>(o)] > sy[static_cast<size_t>(o)];
    return false;
  });
  size_t first = group.size() - 1;  // the chain is group[first..]
  while (first > 0) {
    const int outer_it = group[first - 1], inner_it = group[first];
    const ir::Iter& inner = s.iters[static_cast<size_t>(inner_it)];
    if (inner.batch) break;  // a run-time count can only be the outermost of a chain
    auto so = st(outer_it), si = st(inner_it);
    bool ok = true;
    for (size_t o = 0; o < 3; ++o) ok = ok && so[o] == inner.size * si[o];
    if (!ok) break;
    --first;
  }
  for (size_t i = 0; i < first; ++i) outer.push_back(group[i]);
  const int innermost = group.back();
  auto si = st(innermost);
  ax.stride_a = si[0];
  ax.stride_b = si[1];
  ax.stride_c = si[2];
  long fixed = 1;
  bool runtime = false;
  for (size_t i = first; i < group.size(); ++i) {
    const ir::Iter& it = s.iters[static_cast<size_t>(group[i])];
    ax.iters.push_back(group[i]);
    ax.max_size *= it.size;
    if (it.batch) runtime = true;
    else fixed *= it.size;
  }
  ax.size = runtime ? (fixed == 1 ? "n" : "n * " + std::to_string(fixed)) : std::to_string(fixed);
  return ax;
}

}  // namespace

std::vector<long> buffer_strides(const ir::Program& p, int buf) {
  const auto& dims = p.buffers[static_cast<size_t>(buf)].dims;
  std::vector<long> st(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) st[d - 1] = st[d] * dims[d].size;
  return st;
}

long iter_stride(const ir::Program& p, const ir::Access& a, int iter) {
  const auto st = buffer_strides(p, a.buf);
  for (size_t d = 0; d < a.index.size(); ++d)
    if (!a.index[d].terms.empty() && a.index[d].terms[0].iter == iter) return st[d];
  return 0;
}

std::optional<Gemm> recognise_contraction(const ir::Program& p, const ir::Stmt& s, Products which) {
  if (!s.product) return std::nullopt;  // marked by passes/mark_contractions.cpp
  const ir::Access& out = s.only().out;
  const ir::Access& l0 = s.product->a;
  const ir::Access& l1 = s.product->b;

  std::optional<Gemm> best;
  for (int swap = 0; swap < (which == Products::Tiled ? 2 : 1); ++swap) {
    const ir::Access& a = swap ? l1 : l0;
    const ir::Access& b = swap ? l0 : l1;
    std::vector<int> m, n, k, batch;
    for (int it = 0; it < static_cast<int>(s.iters.size()); ++it) {
      const ir::Iter& loop = s.iters[static_cast<size_t>(it)];
      if (which == Products::Any && loop.size == 1 && !loop.batch) {
        batch.push_back(it);  // one pass: an outer loop, whatever it indexes
        continue;
      }
      const bool in_c = iter_stride(p, out, it) != 0, in_a = iter_stride(p, a, it) != 0,
                 in_b = iter_stride(p, b, it) != 0;
      if (loop.at_pos && !in_c && !in_a && !in_b) batch.push_back(it);  // (a decode over rows: rows at position 0)
      else if (in_c && in_a && in_b) batch.push_back(it);
      else if (in_c && in_a) m.push_back(it);
      else if (in_c && in_b) n.push_back(it);
      else if (in_a && in_b) k.push_back(it);
      else return std::nullopt;  // in one access only, or in none
    }
    if (which == Products::Tiled && (k.empty() || (m.empty() && n.empty()))) return std::nullopt;
    Gemm g;
    g.a = a;
    g.b = b;
    g.alpha = s.product->alpha;
    g.outer = batch;
    g.m = merge(p, s, m, out, a, b, g.outer);
    g.n = merge(p, s, n, out, a, b, g.outer);
    const size_t before_k = g.outer.size();
    g.k = merge(p, s, k, out, a, b, g.outer);
    for (const ir::Iter& loop : s.iters) g.one_pass.push_back(!loop.batch && loop.size == 1);
    for (const ir::Iter& loop : s.iters) g.at_pos.push_back(loop.at_pos);
    for (size_t i = before_k; i < g.outer.size(); ++i)
      if (!g.one_pass[static_cast<size_t>(g.outer[i])]) g.outer_k = true;
    // Outer loops in nest order.
    std::sort(g.outer.begin(), g.outer.end());
    // Prefer B carrying C's unit stride (vector stores of the tile), unless that leaves a
    // narrow N (< 16, under half the 32-column register tile) against a wider M: then the
    // transposed product (C^T = B^T A^T) fills the tile better and the tile is stored
    // element by element.
    auto score = [](const Gemm& x) {
      const bool narrow = x.n.max_size < 16 && x.m.max_size > x.n.max_size;
      if (x.n.iters.empty()) return 4;
      return (narrow ? 2 : 0) + (x.n.stride_c == 1 ? 0 : 1);
    };
    if (!best || score(g) < score(*best)) best = g;
  }
  if (best && which == Products::Tiled) {
    // Both operands contiguous along K (`w3 . h2`: weights [out, in] against activations [b, in])
    // and one side a constant of 2 to 16 (10 classes), K of 64 or more: dot products
    // (runtime-lib/gemm_dot.h), where the tiles would transpose both operands into their packed
    // slivers. Their order of sums is not the tiles', so the choice must not depend on the run
    // (the batch): it is made here, once, on the constant side; one row (a decoded position,
    // M = 1) keeps the tiles and with them the forward pass's bits.
    auto small = [&](const Gemm::Axis& ax) {
      const bool constant =
          std::none_of(ax.iters.begin(), ax.iters.end(), [&](int it) { return s.iters[static_cast<size_t>(it)].batch; });
      return constant && ax.max_size >= 2 && ax.max_size <= 16;
    };
    const Gemm& g = *best;
    best->dot = g.k.stride_a == 1 && g.k.stride_b == 1 && g.k.max_size >= 64 && (small(g.m) || small(g.n));
    // A A^T (Muon's X X^T): A's rows are B's columns, element for element.
    best->symmetric = !best->dot && g.a.buf == g.b.buf && g.m.size == g.n.size && g.m.stride_a == g.n.stride_b &&
                      g.k.stride_a == g.k.stride_b && access_base(p, g.a) == access_base(p, g.b) &&
                      std::all_of(g.outer.begin(), g.outer.end(),
                                  [&](int it) { return iter_stride(p, g.a, it) == iter_stride(p, g.b, it); });
  }
  return best;
}

}  // namespace cannl
