#include "shapes/solver.h"

#include <fmt/format.h>

#include <algorithm>

namespace cannl {

namespace {
std::string dim_text(const DimT& d) {
  switch (d.kind) {
    case DimT::Known: return std::to_string(d.size);
    case DimT::Batch: return "batch";
    case DimT::Var: return "_";
  }
  return "?";
}
bool same_dim(const DimT& a, const DimT& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == DimT::Known) return a.size == b.size;
  if (a.kind == DimT::Var) return a.var == b.var;
  return true;
}
bool same_row(const RowT& a, const RowT& b) {
  auto same = [](const std::vector<DimT>& x, const std::vector<DimT>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_dim(x[i], y[i])) return false;
    return true;
  };
  return a.var == b.var && same(a.left, b.left) && same(a.right, b.right);
}
bool all_known(const RowT& r) {
  if (!r.is_closed()) return false;
  for (const DimT& d : r.right)
    if (d.is_var()) return false;
  return true;
}
}  // namespace

DimT Solver::fresh_dim() {
  int v = static_cast<int>(dim_parent_.size());
  dim_parent_.push_back(v);
  dim_value_.push_back(std::nullopt);
  return DimT::variable(v);
}

RowT Solver::fresh_row() {
  int v = static_cast<int>(row_binding_.size());
  row_binding_.push_back(std::nullopt);
  return RowT{{}, v, {}};
}

int Solver::find(int v) const {
  while (dim_parent_[v] != v) v = dim_parent_[v];
  return v;
}

DimT Solver::resolve(DimT d) const {
  if (!d.is_var()) return d;
  int r = find(d.var);
  if (dim_value_[r]) return *dim_value_[r];
  return DimT::variable(r);
}

RowT Solver::resolve(const RowT& r) const {
  std::vector<DimT> left, right;
  for (const DimT& d : r.left) left.push_back(resolve(d));
  for (const DimT& d : r.right) right.push_back(resolve(d));
  int v = r.var;
  for (int guard = 0; v >= 0 && row_binding_[v] && guard < 100000; ++guard) {
    const RowT& b = *row_binding_[v];
    for (const DimT& d : b.left) left.push_back(resolve(d));
    std::vector<DimT> br;
    for (const DimT& d : b.right) br.push_back(resolve(d));
    right.insert(right.begin(), br.begin(), br.end());
    v = b.var;
  }
  if (v < 0) {
    left.insert(left.end(), right.begin(), right.end());
    return RowT::closed(std::move(left));
  }
  return RowT{std::move(left), v, std::move(right)};
}

std::string Solver::print(const RowT& row) const {
  RowT r = resolve(row);
  std::vector<std::string> items;
  for (const DimT& d : r.left) items.push_back(dim_text(d));
  if (!r.is_closed()) items.push_back("..");
  for (const DimT& d : r.right) items.push_back(dim_text(d));
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return "[" + s + "]";
}

std::string Solver::print(const ShapeT& sh) const {
  auto inner = [&](const RowT& r) {
    std::string s = print(r);
    return s.substr(1, s.size() - 2);
  };
  return format_shape(inner(sh.rows[0]), inner(sh.rows[1]), inner(sh.rows[2]));
}

void Solver::bind_row(int var, RowT value) {
  row_binding_[var] = std::move(value);
  trail_.push_back({Trail::RowBind, var});
}

void Solver::rollback(size_t mark) {
  while (trail_.size() > mark) {
    Trail t = trail_.back();
    trail_.pop_back();
    switch (t.kind) {
      case Trail::DimParent: dim_parent_[t.var] = t.var; break;
      case Trail::DimValue: dim_value_[t.var].reset(); break;
      case Trail::RowBind: row_binding_[t.var].reset(); break;
      case Trail::Defer: deferred_.pop_back(); break;
    }
  }
}

std::optional<std::string> Solver::unify_dims_inner(DimT a, DimT b) {
  a = resolve(a);
  b = resolve(b);
  if (a.is_var() && b.is_var()) {
    if (a.var != b.var) {
      dim_parent_[a.var] = b.var;
      trail_.push_back({Trail::DimParent, a.var});
    }
    return std::nullopt;
  }
  if (a.is_var() || b.is_var()) {
    DimT v = a.is_var() ? a : b, val = a.is_var() ? b : a;
    dim_value_[v.var] = val;
    trail_.push_back({Trail::DimValue, v.var});
    return std::nullopt;
  }
  if (same_dim(a, b)) return std::nullopt;
  return fmt::format("{} vs {}", dim_text(a), dim_text(b));
}

std::optional<std::string> Solver::unify_dims(DimT a, DimT b) {
  size_t mark = trail_.size();
  auto r = unify_dims_inner(a, b);
  if (r) rollback(mark);
  return r;
}

std::optional<std::string> Solver::unify_rows(const RowT& a, const RowT& b) {
  size_t mark = trail_.size();
  auto r = unify_rows_inner(a, b);
  if (r) rollback(mark);
  return r;
}

std::optional<std::string> Solver::unify_rows_inner(const RowT& a0, const RowT& b0) {
  RowT a = resolve(a0), b = resolve(b0);
  auto pairwise = [&](const std::vector<DimT>& x, size_t xb, const std::vector<DimT>& y, size_t yb,
                      size_t n) -> std::optional<std::string> {
    for (size_t i = 0; i < n; ++i)
      if (auto r = unify_dims_inner(x[xb + i], y[yb + i])) return r;
    return std::nullopt;
  };
  auto mismatch = [&]() { return fmt::format("{} vs {}", print(a), print(b)); };
  if (a.is_closed() && b.is_closed()) {
    if (a.right.size() != b.right.size()) return mismatch();
    if (pairwise(a.right, 0, b.right, 0, a.right.size())) return mismatch();
    return std::nullopt;
  }
  if (a.is_closed() || b.is_closed()) {
    const RowT& open = a.is_closed() ? b : a;
    const RowT& closed = a.is_closed() ? a : b;
    const auto& d = closed.right;
    size_t L = open.left.size(), R = open.right.size();
    if (d.size() < L + R) return mismatch();
    if (pairwise(open.left, 0, d, 0, L) || pairwise(open.right, 0, d, d.size() - R, R))
      return mismatch();
    bind_row(open.var, RowT::closed(std::vector<DimT>(d.begin() + L, d.end() - R)));
    return std::nullopt;
  }
  if (a.var == b.var) {
    if (a.left.size() != b.left.size() || a.right.size() != b.right.size()) return mismatch();
    if (pairwise(a.left, 0, b.left, 0, a.left.size()) ||
        pairwise(a.right, 0, b.right, 0, a.right.size()))
      return mismatch();
    return std::nullopt;
  }
  size_t k = std::min(a.left.size(), b.left.size());
  size_t m = std::min(a.right.size(), b.right.size());
  if (pairwise(a.left, 0, b.left, 0, k) ||
      pairwise(a.right, a.right.size() - m, b.right, b.right.size() - m, m))
    return mismatch();
  std::vector<DimT> la(a.left.begin() + k, a.left.end()), lb(b.left.begin() + k, b.left.end());
  std::vector<DimT> ra(a.right.begin(), a.right.end() - m), rb(b.right.begin(), b.right.end() - m);
  bool ambiguous = !(la.empty() && ra.empty()) && !(lb.empty() && rb.empty());
  if (ambiguous && !force_) {
    deferred_.push_back(Deferred{RowT{la, a.var, ra}, RowT{lb, b.var, rb}, cur_origin_, cur_what_});
    trail_.push_back({Trail::Defer, 0});
    return std::nullopt;
  }
  if (la.empty() && ra.empty()) {
    bind_row(a.var, RowT{lb, b.var, rb});
  } else if (lb.empty() && rb.empty()) {
    bind_row(b.var, RowT{la, a.var, ra});
  } else if (!la.empty()) {  // a = la v, b = w rb
    RowT u = fresh_row();
    bind_row(a.var, RowT{{}, u.var, rb});
    bind_row(b.var, RowT{la, u.var, {}});
  } else {  // a = v ra, b = lb w
    RowT u = fresh_row();
    bind_row(b.var, RowT{{}, u.var, ra});
    bind_row(a.var, RowT{lb, u.var, {}});
  }
  return std::nullopt;
}

bool Solver::equal_rows(const RowT& a, const RowT& b, const Origin& o, const std::string& what) {
  cur_origin_ = o;
  cur_what_ = what;
  if (auto r = unify_rows(a, b)) {
    on_error_(o, fmt::format("{} ({})", what, *r));
    return false;
  }
  return true;
}

bool Solver::equal_dims(DimT a, DimT b, const Origin& o, const std::string& what) {
  if (auto r = unify_dims(a, b)) {
    on_error_(o, fmt::format("{} ({})", what, *r));
    return false;
  }
  return true;
}

void Solver::broadcast(RowT result, std::vector<RowT> operands, Origin o, std::string kind_name) {
  bool runner_first = kind_name == axis_kind_name(AxisKind::Batch);
  bcasts_.push_back(Bcast{std::move(result), std::move(operands), std::move(o), std::move(kind_name), runner_first});
  step_broadcast(bcasts_.back());
}

void Solver::affine(DimT in, long stride, DimT out, std::optional<DimT> kernel, long padding,
                    Origin o) {
  affines_.push_back(Affine{in, out, kernel, stride, padding, std::move(o)});
  step_affine(affines_.back());
}

void Solver::sum(DimT a, DimT b, DimT sum, Origin o) {
  affines_.push_back(Affine{a, sum, b, 1, 0, std::move(o), false, true});
  step_affine(affines_.back());
}

// out = in + kernel: two known sizes give the third.
bool Solver::step_sum(Affine& c) {
  DimT a = resolve(c.in), b = resolve(*c.kernel), s = resolve(c.out);
  auto report = [&](const std::string& detail) {
    c.done = true;
    on_error_(c.origin, detail);
    return true;
  };
  if (a.kind == DimT::Batch || b.kind == DimT::Batch || s.kind == DimT::Batch)
    return report("the batch axis cannot be joined");
  auto known = [](DimT d) { return d.kind == DimT::Known; };
  if (known(a) && known(b)) {
    if (unify_dims(s, DimT::known(a.size + b.size)))
      return report(fmt::format("{} + {} is {}, not {}", a.size, b.size, a.size + b.size, dim_text(s)));
  } else if (known(s) && (known(a) || known(b))) {
    const DimT have = known(a) ? a : b, other = known(a) ? b : a;
    if (s.size - have.size < 1) return report(fmt::format("{} is not larger than {}", s.size, have.size));
    unify_dims(other, DimT::known(s.size - have.size));
  } else {
    return false;
  }
  c.done = true;
  return true;
}

void Solver::fail(Bcast& c, const std::string& detail) {
  c.done = true;
  on_error_(c.origin, detail);
  // Recovery: a result row still open takes the longest operand's axes, so that the
  // constraints after this one see a plausible shape instead of one whose free axes are later
  // dropped (which would report a second, bogus error: "[5, 3, 2] vs []" for a scalar).
  RowT R = resolve(c.result);
  if (R.is_closed()) return;
  const RowT* longest = nullptr;
  std::vector<RowT> ops;
  for (const RowT& op : c.operands) ops.push_back(resolve(op));
  for (const RowT& op : ops)
    if (op.is_closed() && (!longest || op.right.size() > longest->right.size())) longest = &op;
  if (longest) (void)unify_rows(R, *longest);
}

bool Solver::step_broadcast(Bcast& c) {
  if (c.done) return false;
  cur_origin_ = c.origin;
  cur_what_ = "the " + c.kind_name + " axes must agree";
  bool progress = false;
  RowT R = resolve(c.result);
  std::vector<RowT> ops;
  for (const RowT& op : c.operands) ops.push_back(resolve(op));
  auto not_broadcastable = [&] {
    std::string rows;
    for (const RowT& op : c.operands) rows += (rows.empty() ? "" : " vs ") + print(op);
    return fmt::format("their {} axes do not broadcast: {} (sizes must be equal, or 1)",
                       c.kind_name, rows);
  };
  // (a) the result has at least as many axes as each closed operand
  for (const RowT& op : ops) {
    if (!op.is_closed()) continue;
    size_t L = op.right.size();
    if (R.is_closed()) {
      if (R.right.size() < L) {
        fail(c, not_broadcastable());
        return true;
      }
    } else if (R.known_len() < L) {
      RowT u = fresh_row();
      std::vector<DimT> extra;
      for (size_t i = R.known_len(); i < L; ++i) extra.push_back(fresh_dim());
      bind_row(R.var, RowT{{}, u.var, extra});
      R = resolve(c.result);
      progress = true;
    }
  }
  // (b) per axis, from the right: an operand axis > 1 fixes the result's; a result axis of 1
  // forces the operand's to 1. In batch rows the runner's batch axis, first in its row, meets
  // the result's first axis (when that one is known); the other axes align from the right.
  for (RowT& op : ops) {
    op = resolve(op);
    R = resolve(c.result);
    std::vector<DimT> opr = op.right, rr = R.right;
    if (leads_with_batch(c, op)) {
      opr.erase(opr.begin());
      const DimT* first = R.is_closed() ? (rr.empty() ? nullptr : &rr.front()) : (R.left.empty() ? nullptr : &R.left.front());
      if (first) {
        if (first->is_var()) progress = true;
        if (unify_dims(*first, DimT::batch())) {
          fail(c, not_broadcastable());
          return true;
        }
        if (R.is_closed()) rr.erase(rr.begin());
      }
    }
    size_t n = std::min(opr.size(), rr.size());
    for (size_t i = 0; i < n; ++i) {
      DimT s = opr[opr.size() - 1 - i], r = rr[rr.size() - 1 - i];
      bool fixes = s.kind == DimT::Batch || (s.kind == DimT::Known && s.size != 1);
      if (fixes) {
        if (r.is_var()) progress = true;
        if (unify_dims(r, s)) {
          fail(c, not_broadcastable());
          return true;
        }
      } else if (s.is_var() && r.kind == DimT::Known && r.size == 1) {
        unify_dims(s, r);
        progress = true;
      }
    }
  }
  // (c) when every operand is fully known, the result is their broadcast
  ops.clear();
  for (const RowT& op : c.operands) ops.push_back(resolve(op));
  if (std::all_of(ops.begin(), ops.end(), all_known)) {
    bool lead = false;  // batch rows: [batch] ++ the broadcast of the rest
    for (RowT& op : ops)
      if (leads_with_batch(c, op)) {
        op.right.erase(op.right.begin());
        lead = true;
      }
    size_t L = 0;
    for (const RowT& op : ops) L = std::max(L, op.right.size());
    std::vector<DimT> lub(L, DimT::known(1));
    for (const RowT& op : ops)
      for (size_t i = 0; i < op.right.size(); ++i) {
        DimT s = op.right[op.right.size() - 1 - i];
        DimT& t = lub[L - 1 - i];
        if (s.kind == DimT::Known && s.size == 1) continue;
        if (t.kind == DimT::Known && t.size == 1) {
          t = s;
        } else if (!same_dim(s, t)) {
          fail(c, fmt::format("their {} axes do not broadcast: {} vs {} (sizes must be equal, or 1)",
                              c.kind_name, print(RowT::closed({s})), print(RowT::closed({t}))));
          return true;
        }
      }
    if (lead) lub.insert(lub.begin(), DimT::batch());
    if (auto r = unify_rows(c.result, RowT::closed(lub))) {
      fail(c, fmt::format("the {} axes of the result must be {} ({})", c.kind_name,
                          print(RowT::closed(lub)), *r));
      return true;
    }
    c.done = true;
    progress = true;
  }
  return progress;
}

// A closed batch row that starts with the runner's batch axis (contract v1 §2: that axis meets
// only the runner's batch axis; the axes an input declares after it align from the right).
bool Solver::leads_with_batch(const Bcast& c, const RowT& op) const {
  return c.runner_first && op.is_closed() && !op.right.empty() && resolve(op.right.front()).kind == DimT::Batch;
}

bool Solver::step_affine(Affine& c) {
  if (c.done) return false;
  if (c.is_sum) return step_sum(c);
  DimT in = resolve(c.in), out = resolve(c.out);
  DimT k = c.kernel ? resolve(*c.kernel) : DimT::known(1);
  auto report = [&](const std::string& detail) {
    c.done = true;
    on_error_(c.origin, detail);
    return true;
  };
  if (in.kind == DimT::Batch || out.kind == DimT::Batch || k.kind == DimT::Batch)
    return report("the batch axis cannot be used in an index expression");
  if (in.kind == DimT::Known && k.kind == DimT::Known) {
    long span = in.size + 2 * c.padding - k.size;
    if (span < 0)
      return report(fmt::format("the window ({}) is larger than the padded input ({} + 2*{})",
                                k.size, in.size, c.padding));
    long o = span / c.stride + 1;
    if (auto r = unify_dims(out, DimT::known(o)))
      return report(fmt::format("an input axis of {} with window {}, stride {} and padding {} gives "
                                "{} outputs, not {}", in.size, k.size, c.stride, c.padding, o,
                                dim_text(out)));
    c.done = true;
    return true;
  }
  if (out.kind == DimT::Known && k.kind == DimT::Known && in.is_var()) {
    long h = c.stride * (out.size - 1) + k.size - 2 * c.padding;
    if (h < 1) return report(fmt::format("no input size gives {} outputs", out.size));
    unify_dims(in, DimT::known(h));
    c.done = true;
    return true;
  }
  return false;
}

bool Solver::retry_deferred(bool force) {
  bool progress = false;
  std::vector<Deferred> pending;
  pending.swap(deferred_);
  force_ = force;
  for (Deferred& d : pending) {
    RowT a = resolve(d.a), b = resolve(d.b);
    size_t before = deferred_.size();
    cur_origin_ = d.origin;
    cur_what_ = d.what;
    if (auto r = unify_rows(a, b)) {
      on_error_(d.origin, fmt::format("{} ({})", d.what, *r));
      progress = true;
      continue;
    }
    bool same = deferred_.size() == before + 1 && same_row(resolve(deferred_.back().a), a) &&
                same_row(resolve(deferred_.back().b), b);
    if (!same) progress = true;
  }
  force_ = false;
  return progress;
}

bool Solver::propagate() {
  bool any = false;
  for (int round = 0; round < 10000; ++round) {
    bool progress = retry_deferred(false);
    for (size_t i = 0; i < bcasts_.size(); ++i) progress |= step_broadcast(bcasts_[i]);
    for (size_t i = 0; i < affines_.size(); ++i) progress |= step_affine(affines_[i]);
    if (!progress) break;
    any = true;
  }
  return any;
}

void Solver::free_vars(const RowT& row, std::set<int>& dims, std::set<int>& rows) const {
  RowT r = resolve(row);
  if (r.var >= 0) rows.insert(r.var);
  for (const DimT& d : r.left)
    if (d.is_var()) dims.insert(d.var);
  for (const DimT& d : r.right)
    if (d.is_var()) dims.insert(d.var);
}

bool Solver::is_free(const RowT& row) const {
  std::set<int> d, r;
  free_vars(row, d, r);
  return !d.empty() || !r.empty();
}

bool Solver::default_params(const std::set<int>& pdims, const std::set<int>& prows) {
  bool progress = false;
  for (size_t ci = 0; ci < bcasts_.size(); ++ci) {
    Bcast& c = bcasts_[ci];
    if (c.done) continue;
    for (const RowT& op0 : c.operands) {
      RowT op = resolve(op0), R = resolve(c.result);
      if (same_row(op, R)) continue;
      if (!op.is_closed() && prows.count(op.var)) {
        size_t mark = trail_.size(), deferred_before = deferred_.size();
        if (auto r = unify_rows(op, R)) {
          fail(c, fmt::format("a parameter's {} axes cannot take the shape {} ({})", c.kind_name,
                              print(R), *r));
          break;
        }
        if (trail_.size() == mark + 1 && trail_.back().kind == Trail::Defer &&
            duplicates_deferred(deferred_before)) {
          rollback(mark);  // already waiting on exactly this equality
          continue;
        }
        progress = true;
        continue;
      }
      size_t n = std::min(op.right.size(), R.right.size());
      for (size_t i = 0; i < n; ++i) {
        DimT s = op.right[op.right.size() - 1 - i], r = R.right[R.right.size() - 1 - i];
        if (s.is_var() && pdims.count(s.var)) {
          unify_dims(s, r);
          progress = true;
        }
      }
    }
  }
  return progress;
}

// Is the last deferred equality the same as one already pending?
bool Solver::duplicates_deferred(size_t count_before) const {
  const Deferred& d = deferred_.back();
  RowT a = resolve(d.a), b = resolve(d.b);
  for (size_t i = 0; i < count_before && i < deferred_.size() - 1; ++i) {
    RowT x = resolve(deferred_[i].a), y = resolve(deferred_[i].b);
    if ((same_row(a, x) && same_row(b, y)) || (same_row(a, y) && same_row(b, x))) return true;
  }
  return false;
}

bool Solver::default_self_broadcasts() {
  bool progress = false;
  for (Bcast& c : bcasts_) {
    if (c.done) continue;
    RowT R = resolve(c.result);
    std::vector<RowT> others;
    bool has_self = false;
    for (const RowT& op0 : c.operands) {
      RowT op = resolve(op0);
      if (same_row(op, R)) has_self = true;
      else others.push_back(op);
    }
    if (!has_self) continue;
    if (others.empty()) {
      c.done = true;
      continue;
    }
    if (!std::all_of(others.begin(), others.end(), all_known)) continue;
    // R = broadcast(R, others): R keeps the axes it has (a number, [], leaves it as it is),
    // has at least as many as each other operand, and its free axes aligned with theirs take
    // their sizes. Its free axes beyond the others' stay free for the later stages.
    size_t lub_len = 0;
    for (const RowT& op : others) lub_len = std::max(lub_len, op.right.size());
    if (R.is_closed() && R.right.size() < lub_len) continue;  // step (a) reports it
    std::vector<DimT> target = R.left;
    size_t own = R.is_closed() ? R.right.size() : R.known_len();
    for (size_t i = own; i < lub_len; ++i) target.push_back(fresh_dim());
    target.insert(target.end(), R.right.begin(), R.right.end());
    for (size_t i = 0; i < lub_len; ++i) {
      DimT& t = target[target.size() - 1 - i];
      if (!resolve(t).is_var()) continue;
      for (const RowT& op : others) {
        if (i >= op.right.size()) continue;
        DimT s = op.right[op.right.size() - 1 - i];
        if (resolve(t).is_var() || (s.kind != DimT::Known || s.size != 1)) t = s;
      }
    }
    size_t mark = trail_.size();
    if (auto r = unify_rows(c.result, RowT::closed(target))) {
      fail(c, fmt::format("the {} axes of the result must be {} ({})", c.kind_name,
                          print(RowT::closed(target)), *r));
      progress = true;
      continue;
    }
    progress |= step_broadcast(c) || trail_.size() != mark;
  }
  return progress;
}

bool Solver::default_kernels(const std::set<int>& pdims) {
  bool progress = false;
  for (Affine& c : affines_) {
    if (c.done || !c.kernel || c.is_sum) continue;
    DimT k = resolve(*c.kernel);
    if (k.is_var() && !pdims.count(k.var)) {
      unify_dims(k, DimT::known(c.stride));
      progress = true;
    }
  }
  return progress;
}

bool Solver::survives_drop(const Deferred& d) {
  const size_t mark = trail_.size();
  std::set<int> dims, rows;
  free_vars(d.a, dims, rows);
  free_vars(d.b, dims, rows);
  for (int v : rows) bind_row(v, RowT::closed({}));
  const bool ok = !unify_rows(d.a, d.b);
  rollback(mark);
  return ok;
}

bool Solver::default_drop_free(const std::set<int>& pdims, const std::set<int>& prows) {
  bool progress = false;
  for (int v = 0; v < static_cast<int>(row_binding_.size()); ++v) {
    if (row_binding_[v] || prows.count(v)) continue;
    bind_row(v, RowT::closed({}));
    progress = true;
  }
  for (int v = 0; v < static_cast<int>(dim_parent_.size()); ++v) {
    if (find(v) != v || dim_value_[v] || pdims.count(v)) continue;
    dim_value_[v] = DimT::known(1);
    trail_.push_back({Trail::DimValue, v});
    progress = true;
  }
  return progress;
}

void Solver::solve(const std::function<std::vector<ShapeT>()>& protected_shapes) {
  for (int stage = 0; stage < 1000; ++stage) {
    propagate();
    std::set<int> pdims, prows;
    for (const ShapeT& s : protected_shapes())
      for (const RowT& r : s.rows) free_vars(r, pdims, prows);
    if (default_params(pdims, prows)) continue;
    if (default_self_broadcasts()) continue;
    if (default_kernels(pdims)) continue;
    // Free rows become [] and free dims 1, except the variables of a deferred equality that
    // would then fail ([2, ..r] = [..s, 5] as [2] = [5]): forced below, it gives [2, 5].
    std::set<int> ddims = pdims, drows = prows;
    for (const Deferred& d : deferred_)
      if (!survives_drop(d)) {
        free_vars(d.a, ddims, drows);
        free_vars(d.b, ddims, drows);
      }
    if (default_drop_free(ddims, drows)) continue;
    if (!deferred_.empty() && retry_deferred(true)) continue;
    break;
  }
  propagate();
}

}  // namespace cannl
