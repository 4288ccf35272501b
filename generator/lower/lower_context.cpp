// lower_context.cpp — index maps, nests under construction and the helpers every lowering
// shares (see lower_context.h).
#include "lower/lower_context.h"

#include <fmt/format.h>
#include <map>

#include "support/diagnostic.h"

namespace cannl {

using ir::Affine;

int Nest::add(const std::string& base, long size, bool batch) {
  static const std::set<std::string> reserved = {"n", "m", "in", "out", "lr", "step", "acc", "bc1",
                                                  "bc2", "rng", "real", "int", "for", "do", "if"};
  std::string name = base;
  auto taken = [&](const std::string& s) {
    if (reserved.count(s)) return true;
    for (const auto& it : iters)
      if (it.name == s) return true;
    return false;
  };
  for (int i = 1; taken(name); ++i) name = fmt::format("{}{}", base, i);
  iters.push_back({name, size, batch});
  return static_cast<int>(iters.size()) - 1;
}

ir::ExprP count_of(const Nest& n, const std::vector<int>& which) {
  long k = 1;
  int batches = 0;
  for (int i : which) {
    if (n.iters[static_cast<size_t>(i)].batch) ++batches;
    else k *= n.iters[static_cast<size_t>(i)].size;
  }
  ir::ExprP c = ir::cnst(static_cast<double>(k));
  for (int i = 0; i < batches; ++i) c = ir::binary(ir::Op::Mul, c, ir::scalar("n"));
  return c;
}

std::vector<FlatAxis> flat(const Shape& s) {
  std::vector<FlatAxis> out;
  for (AxisKind k : kStorageOrder) {
    const auto& row = s.row(k);
    for (size_t i = 0; i < row.size(); ++i) out.push_back({k, static_cast<int>(i), row[i]});
  }
  return out;
}

int flat_index(const Shape& s, AxisKind kind, int pos) {
  int base = 0;
  for (AxisKind k : kStorageOrder) {
    if (k == kind) return base + pos;
    base += static_cast<int>(s.row(k).size());
  }
  return -1;
}

const char* kind_letter(AxisKind k) { return k == AxisKind::Batch ? "b" : k == AxisKind::Output ? "o" : "i"; }

IndexMap align(const Shape& parent, const IndexMap& pmap, const Shape& child) {
  IndexMap out;
  for (const FlatAxis& a : flat(child)) out.push_back(aligned(parent, pmap, child, a));
  return out;
}

int parent_pos(const Shape& parent, const Shape& child, AxisKind kind, int pos) {
  const auto &pr = parent.row(kind), &cr = child.row(kind);
  if (kind == AxisKind::Batch && pos == 0 && cr.front().is_batch) {
    if (pr.empty() || !pr.front().is_batch) CANNL_BUG("the runner's batch axis broadcast into a row without it");
    return 0;
  }
  int pp = pos + static_cast<int>(pr.size()) - static_cast<int>(cr.size());
  if (pp < 0) CANNL_BUG("broadcast of a longer row into a shorter one");
  return pp;
}

Affine aligned(const Shape& parent, const IndexMap& pmap, const Shape& child, const FlatAxis& a) {
  int pp = parent_pos(parent, child, a.kind, a.pos);
  const Axis& pa = parent.row(a.kind)[static_cast<size_t>(pp)];
  if (!a.axis.is_batch && a.axis.size == 1 && (pa.is_batch || pa.size != 1)) return Affine::constant(0);
  return pmap[static_cast<size_t>(flat_index(parent, a.kind, pp))];
}

std::vector<Slot> expand(const EinOperand& o, const Shape& s) {
  std::vector<Slot> slots;
  for (AxisKind k : kStorageOrder) {
    const auto& axes = o.part(k);
    const auto& row = s.row(k);
    bool has_ell = false;
    for (const auto& a : axes) has_ell |= a.kind == EinAxis::Ellipsis;
    long ell = static_cast<long>(row.size()) - static_cast<long>(axes.size()) + (has_ell ? 1 : 0);
    size_t ri = 0;
    for (const auto& a : axes) {
      if (a.kind == EinAxis::Ellipsis) {
        for (long j = 0; j < ell; ++j, ++ri)
          slots.push_back({nullptr, fmt::format("...{}#{}", kind_letter(k), ell - j), row[ri]});
      } else {
        slots.push_back({&a, a.name, row[ri++]});
      }
    }
  }
  return slots;
}

IndexMap LowerContext::loops_for(const Shape& s, Nest& n, const std::vector<std::string>& names) {
  IndexMap map;
  std::map<AxisKind, int> seen;
  for (const FlatAxis& a : flat(s)) {
    int k = seen[a.kind]++;
    std::string base = static_cast<size_t>(map.size()) < names.size()
                           ? names[map.size()]
                           : (s.row(a.kind).size() > 1 ? fmt::format("{}{}", kind_letter(a.kind), k)
                                                       : kind_letter(a.kind));
    map.push_back(Affine::of(n.add(base, a.axis.is_batch ? max_batch() : a.axis.size, a.axis.is_batch)));
  }
  return map;
}

IndexMap LowerContext::loops_for_buffer(int b, Nest& n, const std::vector<std::string>& names) {
  IndexMap map;
  const auto& dims = buffer(b).dims;
  for (size_t i = 0; i < dims.size(); ++i)
    map.push_back(Affine::of(n.add(i < names.size() ? names[i] : fmt::format("j{}", i), dims[i].size, dims[i].batch)));
  return map;
}

void LowerContext::fill_buffer(int b, double v, const std::vector<std::string>& names) {
  Nest n;
  IndexMap id = loops_for_buffer(b, n, names);
  emit(n, b, id, ir::Accum::Set, ir::cnst(v));
}

}  // namespace cannl
