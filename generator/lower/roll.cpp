// roll.cpp — repeat blocks as loops (see roll.h).
#include "lower/roll.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "ir/remap.h"
#include "ir/unroll_blocks.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

// One instance of a repeat block as lowering made it.
struct Instance {
  int index = 0;                      // its number in the repeat (NAME.INDEX)
  size_t nest_begin = 0, nest_end = 0;  // its nests in Lowered::forward
  std::vector<int> bufs;              // the buffers lowering made for it, in order
  std::set<int> local;                // the same, as a set
  std::vector<int> params;            // its params, in declaration order
  std::vector<int> carried_in, carried_out;  // per carried name
  int first_tensor = -1, tensors = 0;  // its spec tensors: [first_tensor, + tensors)
  bool rollable = true;                // contiguous nests, every one in both phases, no state updates
};

// The instances of one repeat statement.
struct Repeat {
  const Stmt* stmt = nullptr;
  std::vector<std::string> carried;
  std::vector<Instance> instances;
};

bool same_iters(const std::vector<ir::Iter>& a, const std::vector<ir::Iter>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].name != b[k].name || a[k].size != b[k].size || a[k].batch != b[k].batch || a[k].at_pos != b[k].at_pos)
      return false;
  return true;
}

bool same_init(const std::optional<ir::Init>& a, const std::optional<ir::Init>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->name == b->name && a->args == b->args && a->fan_in == b->fan_in && a->fan_out == b->fan_out &&
         a->line == b->line;
}

// Compares instance i's nests with the representative r's under a buffer bijection M.
class Matcher {
public:
  Matcher(const Lowered& low, const Repeat& rep, const std::set<int>& block_local, const Instance& r,
          const Instance& i)
      : low_(low), p_(low.prog), rep_(rep), block_local_(block_local), r_(r), i_(i) {}

  bool run() {
    if (r_.nest_end - r_.nest_begin != i_.nest_end - i_.nest_begin || r_.bufs.size() != i_.bufs.size() ||
        r_.params.size() != i_.params.size())
      return false;
    for (size_t j = 0; j < r_.params.size(); ++j)
      if (!map(r_.params[j], i_.params[j])) return false;
    for (size_t c = 0; c < rep_.carried.size(); ++c)
      if (!map(r_.carried_out[c], i_.carried_out[c])) return false;
    for (size_t k = 0; k < r_.nest_end - r_.nest_begin; ++k) {
      const size_t a = r_.nest_begin + k, b = i_.nest_begin + k;
      if (low_.phase[a] != Phase::Both || low_.phase[b] != Phase::Both) return false;
      if (!stmt(low_.forward[a], low_.forward[b])) return false;
    }
    for (int b : r_.bufs)  // every local of r has its counterpart
      if (!fwd_.count(b)) return false;
    return true;
  }

private:
  const Lowered& low_;
  const ir::Program& p_;
  const Repeat& rep_;
  const std::set<int>& block_local_;  // buffers local to some instance of the repeat
  const Instance &r_, &i_;
  std::map<int, int> fwd_, back_;

  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }

  bool map(int a, int b) {
    if (a < 0 || b < 0) return a == b;
    if (auto it = fwd_.find(a); it != fwd_.end()) return it->second == b;
    if (back_.count(b)) return false;
    const bool la = r_.local.count(a) > 0, lb = i_.local.count(b) > 0;
    if (la != lb) return false;
    if (la) {
      const ir::Buffer &x = buf(a), &y = buf(b);
      if (x.dims != y.dims || x.role != y.role || x.ids != y.ids || x.frozen != y.frozen || x.matrix != y.matrix ||
          !same_init(x.init, y.init))
        return false;
    } else {
      // Read from outside: the value carried in, or a buffer before the block (the same one).
      size_t c = 0;
      while (c < rep_.carried.size() && r_.carried_in[c] != a) ++c;
      if (c < rep_.carried.size()) {
        if (i_.carried_in[c] != b) return false;
      } else {
        if (a != b || block_local_.count(a)) return false;
        for (int in : i_.carried_in)
          if (in == b) return false;
      }
    }
    fwd_[a] = b;
    back_[b] = a;
    return true;
  }

  bool access(const ir::Access& a, const ir::Access& b) { return a.index == b.index && map(a.buf, b.buf); }

  bool expr(const ir::Expr& a, const ir::Expr& b) {
    if (a.op != b.op || a.value != b.value || a.prim != b.prim || a.name != b.name || a.nograd != b.nograd ||
        a.wide != b.wide || a.args.size() != b.args.size())
      return false;
    if (a.op == ir::Op::Load && !access(a.access, b.access)) return false;
    if ((a.op == ir::Op::Index || a.op == ir::Op::Keep) && !(a.access.index == b.access.index)) return false;
    for (size_t k = 0; k < a.args.size(); ++k)
      if (!expr(*a.args[k], *b.args[k])) return false;
    return true;
  }

  bool call(const ir::Call& a, const ir::Call& b) {
    if (a.kind != b.kind || a.kind == ir::Call::Kind::BlockForward || a.batch != b.batch || a.seqs != b.seqs ||
        a.heads != b.heads || a.tq != b.tq || a.tk != b.tk || a.e != b.e || a.f != b.f || a.causal != b.causal ||
        a.scale != b.scale || a.q_off != b.q_off || a.k_off != b.k_off || a.v_off != b.v_off || a.q_row != b.q_row ||
        a.k_row != b.k_row || a.v_row != b.v_row || a.rows != b.rows || a.width != b.width || a.at_pos != b.at_pos)
      return false;
    const int fa[] = {a.q, a.k, a.v, a.o, a.lse, a.dout, a.delta, a.dq, a.dk, a.dv, a.table, a.ids, a.dtable};
    const int fb[] = {b.q, b.k, b.v, b.o, b.lse, b.dout, b.delta, b.dq, b.dk, b.dv, b.table, b.ids, b.dtable};
    for (size_t k = 0; k < std::size(fa); ++k)
      if (!map(fa[k], fb[k])) return false;
    return true;
  }

  bool stmt(const ir::Stmt& a, const ir::Stmt& b) {
    if (a.call.has_value() != b.call.has_value() || !same_iters(a.iters, b.iters) ||
        a.assigns.size() != b.assigns.size() || a.zero_first != b.zero_first || a.line != b.line || a.what != b.what ||
        a.sequential != b.sequential || a.update_of != b.update_of || a.parallel != b.parallel ||
        a.product.has_value() || b.product.has_value() || a.scaled_sum.has_value() || b.scaled_sum.has_value())
      return false;
    for (int w : ir::written_buffers(a))  // an instance writes its own buffers only
      if (!r_.local.count(w)) return false;
    if (a.call) return call(*a.call, *b.call);
    for (size_t k = 0; k < a.assigns.size(); ++k) {
      const ir::Assign &x = a.assigns[k], &y = b.assigns[k];
      if (x.accum != y.accum || !access(x.out, y.out) || !expr(*x.body, *y.body)) return false;
    }
    return true;
  }
};

// The repeat blocks of the model, their instances as lowering made them.
std::vector<Repeat> find_repeats(const Lowered& low, const Model& m) {
  std::vector<Repeat> reps;
  std::map<const Stmt*, size_t> which;
  std::map<int, std::pair<size_t, size_t>> inst_of;  // spec tensor -> (repeat, instance)
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const Tensor& x = m.tensors[t];
    if (!x.block || x.instance < 0) continue;
    auto [it, fresh] = which.try_emplace(x.block, reps.size());
    if (fresh) {
      reps.push_back({x.block, {}, {}});
      for (const NameRef& n : x.block->names) reps.back().carried.push_back(n.name);
    }
    Repeat& r = reps[it->second];
    if (r.instances.empty() || r.instances.back().index != x.instance) {
      Instance in;
      in.index = x.instance;
      in.first_tensor = static_cast<int>(t);
      r.instances.push_back(in);
    }
    Instance& in = r.instances.back();
    if (in.first_tensor + in.tensors != static_cast<int>(t)) in.rollable = false;  // (tensors interleaved: never)
    ++in.tensors;
    if (x.kind == TensorKind::Param) in.params.push_back(low.tensor_buf[t]);
    inst_of[static_cast<int>(t)] = {it->second, r.instances.size() - 1};
  }
  for (size_t b = 0; b < low.buffer_tensor.size(); ++b)
    if (auto it = inst_of.find(low.buffer_tensor[b]); it != inst_of.end()) {
      Instance& in = reps[it->second.first].instances[it->second.second];
      in.bufs.push_back(static_cast<int>(b));
      in.local.insert(static_cast<int>(b));
    }
  for (Repeat& r : reps)
    for (Instance& in : r.instances) in.nest_begin = in.nest_end = low.forward.size();
  for (size_t k = 0; k < low.nest_tensor.size(); ++k) {
    auto it = inst_of.find(low.nest_tensor[k]);
    if (it == inst_of.end()) continue;
    Instance& in = reps[it->second.first].instances[it->second.second];
    if (in.nest_begin == low.forward.size()) in.nest_begin = k;
    else if (in.nest_end != k) in.rollable = false;  // not contiguous
    in.nest_end = k + 1;
    if (low.phase[k] != Phase::Both) in.rollable = false;
  }
  for (int t : low.update_tensor)
    if (auto it = inst_of.find(t); it != inst_of.end()) reps[it->second.first].instances[it->second.second].rollable = false;
  for (const auto& [b, v] : low.state_init)
    for (Repeat& r : reps)
      for (Instance& in : r.instances)
        if (in.local.count(b)) in.rollable = false;
  for (Repeat& r : reps)
    for (size_t i = 0; i < r.instances.size(); ++i) {
      Instance& in = r.instances[i];
      if (in.nest_begin == low.forward.size()) in.nest_begin = in.nest_end = 0, in.rollable = false;  // (no nests)
      if (in.index != static_cast<int>(i)) in.rollable = false;
      for (const std::string& c : r.carried) {
        auto out = m.index.find(fmt::format("{}.{}", c, in.index));
        in.carried_out.push_back(out == m.index.end() ? -1 : low.tensor_buf[static_cast<size_t>(out->second)]);
        if (in.carried_out.back() < 0) in.rollable = false;
      }
    }
  // Carried in: the value before the block for instance 0, the previous instance's after.
  for (Repeat& r : reps)
    for (size_t i = 0; i < r.instances.size(); ++i)
      for (size_t c = 0; c < r.carried.size(); ++c) {
        int cin = -1;
        if (i > 0) {
          cin = c < r.instances[i - 1].carried_out.size() ? r.instances[i - 1].carried_out[c] : -1;
        } else if (auto it = m.index.find(r.carried[c]); it != m.index.end()) {
          cin = low.tensor_buf[static_cast<size_t>(it->second)];
        }
        r.instances[i].carried_in.push_back(cin);
        if (cin < 0) r.instances[i].rollable = false;
      }
  return reps;
}

// Every buffer some nest, or the interface, uses outside the nests [begin, end) of `forward`.
std::set<int> used_outside(const Lowered& low, size_t begin, size_t end) {
  std::set<int> used;
  auto stmt = [&](const ir::Stmt& s) {
    for (int w : ir::written_buffers(s)) used.insert(w);
    if (s.call)
      for (int b : ir::call_reads(*s.call)) used.insert(b);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads) used.insert(l->access.buf);
  };
  for (size_t k = 0; k < low.forward.size(); ++k)
    if (k < begin || k >= end) stmt(low.forward[k]);
  for (const ir::Stmt& s : low.train_updates) stmt(s);
  const ir::Program& p = low.prog;
  for (const std::vector<int>* l : {&p.inputs, &p.outputs, &p.metrics}) used.insert(l->begin(), l->end());
  used.insert(p.loss);
  for (const auto& [b, v] : low.state_init) used.insert(b);
  return used;
}

// Where "_<index>" sits in the name of a buffer lowering made for instance `index` of spec
// tensor `tensor` (NAME.INDEX: its buffer NAME_INDEX, its temporaries NAME_INDEX_suffix);
// -1 when the name does not have it there.
int index_at(const std::string& name, const std::string& tensor, int index) {
  const size_t dot = tensor.rfind('.');
  if (dot == std::string::npos) return -1;
  std::string stem = tensor.substr(0, dot);
  std::replace(stem.begin(), stem.end(), '.', '_');
  const std::string mark = fmt::format("_{}", index);
  if (name.compare(0, stem.size(), stem) != 0 || name.compare(stem.size(), mark.size(), mark) != 0) return -1;
  return static_cast<int>(stem.size());
}

// The name without the instance (qkv_0_mm -> qkv_mm), and likewise the spec shape's ".0".
std::string without_index(const std::string& s, int at, int index, char sep) {
  if (at < 0) return s;
  const std::string mark = fmt::format("{}{}", sep, index);
  if (s.compare(static_cast<size_t>(at), mark.size(), mark) != 0) return s;
  return s.substr(0, static_cast<size_t>(at)) + s.substr(static_cast<size_t>(at) + mark.size());
}

class Roller {
public:
  Roller(Lowered& low, const Model& m, const SourceFile& file) : low_(low), p_(low.prog), m_(m), file_(file) {}

  void run() {
    std::vector<Repeat> reps = find_repeats(low_, m_);
    drop_.assign(p_.buffers.size(), false);
    for (const Repeat& rep : reps) {
      std::set<int> block_local;
      for (const Instance& in : rep.instances) block_local.insert(in.bufs.begin(), in.bufs.end());
      const size_t n = rep.instances.size();
      for (size_t r = 0; r < n;) {
        size_t e = r + 1;
        if (rep.instances[r].rollable)
          while (e < n && rep.instances[e].rollable &&
                 Matcher(low_, rep, block_local, rep.instances[r], rep.instances[e]).run())
            ++e;
        if (e - r >= 2 && fits(rep, r, e)) groups_.push_back({&rep, r, e});
        r = e;
      }
    }
    if (groups_.empty()) return;
    for (size_t g = 0; g < groups_.size(); ++g) build(g);
    replace_nests();
    compact();
  }

private:
  struct Group {
    const Repeat* rep;
    size_t first, end;  // instances [first, end)
  };
  Lowered& low_;
  ir::Program& p_;
  const Model& m_;
  const SourceFile& file_;
  std::vector<Group> groups_;
  std::vector<bool> drop_;        // old buffers dropped (the group's instances' but views and last values)
  std::vector<ir::Stmt> calls_;   // per group, its call
  std::map<int, double> order_;   // new buffers: where they go among the old ones (a sort key)

  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }

  // The group's instances' buffers are used outside its nests only as their last values, its
  // params are one contiguous run of Program::params, instance after instance.
  bool fits(const Repeat& rep, size_t r, size_t e) const {
    const Instance &a = rep.instances[r], &z = rep.instances[e - 1];
    const std::set<int> used = used_outside(low_, a.nest_begin, z.nest_end);
    for (size_t i = r; i < e; ++i) {
      if (i > r && rep.instances[i].nest_begin != rep.instances[i - 1].nest_end) return false;
      for (int b : rep.instances[i].bufs) {
        if (!used.count(b) || buf(b).role == ir::Role::Param) continue;
        if (i + 1 < e || std::find(z.carried_out.begin(), z.carried_out.end(), b) == z.carried_out.end()) return false;
      }
    }
    std::vector<int> params;
    for (size_t i = r; i < e; ++i) params.insert(params.end(), rep.instances[i].params.begin(), rep.instances[i].params.end());
    if (params.empty()) return true;
    auto at = std::find(p_.params.begin(), p_.params.end(), params[0]);
    return static_cast<size_t>(p_.params.end() - at) >= params.size() && std::equal(params.begin(), params.end(), at);
  }

  int add_buffer(ir::Buffer b, double key) {
    p_.buffers.push_back(std::move(b));
    low_.buffer_tensor.push_back(-1);
    const int i = static_cast<int>(p_.buffers.size()) - 1;
    order_[i] = key;
    return i;
  }

  std::string block_name(const Stmt* st, int line) const {
    std::string base = st->count.name.empty() ? fmt::format("block{}", line) : st->count.name;
    std::string name = base;
    for (int k = 2;; ++k) {
      bool taken = false;
      for (const ir::Block& bl : p_.blocks) taken = taken || bl.name == name;
      if (!taken) return name;
      name = fmt::format("{}_{}", base, k);
    }
  }

  void build(size_t g) {
    const Repeat& rep = *groups_[g].rep;
    const size_t first = groups_[g].first, end = groups_[g].end;
    const Instance& r = rep.instances[first];
    const long count = static_cast<long>(end - first);
    const int k = static_cast<int>(p_.blocks.size());
    ir::Block bl;
    bl.line = static_cast<int>(file_.line_col(rep.stmt->range.begin).line);
    bl.name = block_name(rep.stmt, bl.line);
    bl.first = r.index;
    bl.count = count;
    bl.tensor_step = r.tensors;
    // Where the body's buffers go among the program's: at the representative's first local.
    double key = static_cast<double>(r.bufs.empty() ? p_.buffers.size() : r.bufs.front()) - 0.5;
    auto next_key = [&] { return key += 1e-6; };
    std::map<int, int> body;  // the representative's buffers -> body buffers
    std::set<std::string> body_names;
    auto body_buffer = [&](int b, std::string name, bool formal) {
      ir::Buffer x = buf(b);
      const int t = low_.buffer_tensor[static_cast<size_t>(b)];
      const int at = t >= 0 && r.local.count(b) ? index_at(x.name, m_.tensors[static_cast<size_t>(t)].name, r.index) : -1;
      if (name.empty()) {
        name = without_index(x.name, at, r.index, '_');
        x.shape = without_index(x.shape, at, r.index, '.');
      }
      std::string unique = name;
      for (int j = 2; body_names.count(unique); ++j) unique = fmt::format("{}{}", name, j);
      body_names.insert(unique);
      x.name = unique;
      x.block = k;
      x.formal = formal;
      x.state_name.clear();
      x.init.reset();
      x.view_of = -1;
      x.view_offset = 0;
      x.stack = 0;
      const int nb = add_buffer(std::move(x), next_key());
      body[b] = nb;
      (formal ? bl.formals : bl.locals).push_back(nb);
      if (at >= 0 || !formal) bl.name_at[nb] = at;
      return nb;
    };
    ir::Stmt call_stmt;
    ir::Call call;
    call.kind = ir::Call::Kind::BlockForward;
    call.block = k;
    call.count = count;
    // The values carried in and out.
    for (size_t c = 0; c < rep.carried.size(); ++c) {
      const int in = body_buffer(r.carried_in[c], rep.carried[c] + "_in", true);
      const int out = body_buffer(r.carried_out[c], "", true);
      bl.carried.push_back({in, out});
      ir::Binding bi{in, -1, 0, 0, r.carried_in[c], -1};
      ir::Binding bo{out, -1, 0, 0, -1, rep.instances[end - 1].carried_out[c]};
      call.binds.push_back(bi);
      call.binds.push_back(bo);
      call.reads.push_back(r.carried_in[c]);
      call.writes.push_back(rep.instances[end - 1].carried_out[c]);
    }
    // The params: stacked, each instance's a view.
    std::vector<int> stacks;
    for (size_t j = 0; j < r.params.size(); ++j) {
      const int pr = r.params[j];
      const int formal = body_buffer(pr, "", true);
      ir::Buffer s = buf(pr);
      const std::string stem = buf(formal).name;
      s.name = p_.unique_name(stem);
      s.dims.insert(s.dims.begin(), ir::Dim{count, false});
      s.stack = count;
      s.state_name.clear();
      s.init.reset();
      s.tensor = -1;
      s.shape = fmt::format("{} instances of {}", count, buf(formal).shape);
      const int si = add_buffer(std::move(s), static_cast<double>(r.params[0]) - 0.75 + 1e-6 * static_cast<double>(j));
      stacks.push_back(si);
      const long slice = buf(pr).elements();
      for (size_t i = first; i < end; ++i) {
        ir::Buffer& v = p_.buffers[static_cast<size_t>(rep.instances[i].params[j])];
        v.view_of = si;
        v.view_offset = static_cast<long>(i - first) * slice;
      }
      call.binds.push_back({formal, si, 0, slice, -1, -1});
      call.reads.push_back(si);
    }
    // The representative's other buffers: the body's locals (its carried-out values are formals).
    for (int b : r.bufs)
      if (!body.count(b)) body_buffer(b, "", false);
    // What the nests read from before the block (the same buffer in every instance): shared formals.
    auto share = [&](int b) {
      if (b < 0 || body.count(b)) return;
      const int f = body_buffer(b, buf(b).name, true);
      call.binds.push_back({f, b, 0, 0, -1, -1});
      call.reads.push_back(b);
    };
    for (size_t n = r.nest_begin; n < r.nest_end; ++n) {
      const ir::Stmt& s = low_.forward[n];
      std::vector<const ir::Expr*> loads;
      ir::collect_loads(s, loads);
      for (const ir::Expr* l : loads) share(l->access.buf);
      if (s.call)
        for (int b : ir::call_reads(*s.call)) share(b);
    }
    for (size_t n = r.nest_begin; n < r.nest_end; ++n)
      bl.forward.push_back(ir::remap_stmt(low_.forward[n], [&](int b) { return body.at(b); }));
    // Group-major params: w_qkv.0 .. w_qkv.L-1, then b_qkv.0 ...
    auto at = std::find(p_.params.begin(), p_.params.end(), r.params.empty() ? -1 : r.params[0]);
    for (size_t j = 0; j < r.params.size(); ++j)
      for (size_t i = first; i < end; ++i) *at++ = rep.instances[i].params[j];
    // Dropped: the instances' buffers but the views and the last carried values.
    for (size_t i = first; i < end; ++i)
      for (int b : rep.instances[i].bufs)
        if (buf(b).role != ir::Role::Param &&
            (i + 1 < end || std::find(rep.instances[i].carried_out.begin(), rep.instances[i].carried_out.end(), b) ==
                                rep.instances[i].carried_out.end()))
          drop_[static_cast<size_t>(b)] = true;
    call_stmt.call = std::move(call);
    call_stmt.line = bl.line;
    call_stmt.what = fmt::format("repeat {} (instances {}..{})", rep.stmt->count.name.empty() ? std::to_string(bl.count) : rep.stmt->count.name,
                                 bl.first, bl.first + bl.count - 1);
    calls_.push_back(std::move(call_stmt));
    p_.blocks.push_back(std::move(bl));
  }

  // Each group's nests replaced by its call.
  void replace_nests() {
    std::vector<std::pair<size_t, size_t>> spans;  // per group, its nests
    for (const Group& g : groups_)
      spans.push_back({g.rep->instances[g.first].nest_begin, g.rep->instances[g.end - 1].nest_end});
    std::vector<ir::Stmt> fwd;
    std::vector<Phase> phase;
    std::vector<int> tags;
    for (size_t k = 0; k < low_.forward.size(); ++k) {
      size_t g = 0;
      while (g < spans.size() && !(spans[g].first <= k && k < spans[g].second)) ++g;
      if (g < spans.size()) {
        if (k == spans[g].first) {
          fwd.push_back(calls_[g]);
          phase.push_back(Phase::Both);
          tags.push_back(-1);
        }
        continue;
      }
      fwd.push_back(std::move(low_.forward[k]));
      phase.push_back(low_.phase[k]);
      tags.push_back(low_.nest_tensor[k]);
    }
    low_.forward = std::move(fwd);
    low_.phase = std::move(phase);
    low_.nest_tensor = std::move(tags);
  }

  // The dropped buffers gone; the stacked params right before their first view, the body
  // buffers where the representative's locals were.
  void compact() {
    const size_t n = p_.buffers.size();
    drop_.resize(n, false);
    std::vector<std::pair<double, int>> keys;
    for (size_t b = 0; b < n; ++b) {
      if (drop_[b]) continue;
      auto it = order_.find(static_cast<int>(b));
      keys.push_back({it == order_.end() ? static_cast<double>(b) : it->second, static_cast<int>(b)});
    }
    std::stable_sort(keys.begin(), keys.end());
    std::vector<int> map(n, -1);
    for (size_t k = 0; k < keys.size(); ++k) map[static_cast<size_t>(keys[k].second)] = static_cast<int>(k);
    std::vector<int> tags(keys.size(), -1);
    for (size_t b = 0; b < n; ++b)
      if (map[b] >= 0) tags[static_cast<size_t>(map[b])] = low_.buffer_tensor[b];
    for (int& t : low_.tensor_buf)
      if (t >= 0) t = map[static_cast<size_t>(t)];
    for (auto& [b, v] : low_.state_init) b = map[static_cast<size_t>(b)];
    ir::remap_buffers(p_, map, {&low_.forward, &low_.train_updates});
    low_.buffer_tensor = std::move(tags);
  }
};

}  // namespace

void roll_blocks(Lowered& low, const Model& m, const SourceFile& file) { Roller(low, m, file).run(); }

void unroll_blocks(Lowered& low) {
  if (low.prog.blocks.empty()) return;
  const size_t before = low.prog.buffers.size();
  const std::vector<size_t> from = ir::unroll_calls(low.prog, low.forward);
  std::vector<Phase> phase;
  std::vector<int> tags;  // (a call's copies: -1, the call's)
  for (size_t k = 0; k < from.size(); ++k) {
    phase.push_back(low.phase[from[k]]);
    tags.push_back(low.nest_tensor[from[k]]);
  }
  low.phase = std::move(phase);
  low.nest_tensor = std::move(tags);
  for (size_t b = before; b < low.prog.buffers.size(); ++b) {
    const int t = low.prog.buffers[b].tensor;
    low.buffer_tensor.push_back(t);
    if (t >= 0 && static_cast<size_t>(t) < low.tensor_buf.size()) low.tensor_buf[static_cast<size_t>(t)] = static_cast<int>(b);
  }
  const std::vector<int> map = ir::drop_blocks(low.prog, {&low.forward, &low.train_updates});
  std::vector<int> tags2(low.prog.buffers.size(), -1);
  for (size_t b = 0; b < map.size(); ++b)
    if (map[b] >= 0) tags2[static_cast<size_t>(map[b])] = low.buffer_tensor[b];
  low.buffer_tensor = std::move(tags2);
  for (int& t : low.tensor_buf)
    if (t >= 0) t = map[static_cast<size_t>(t)];
  for (auto& [b, v] : low.state_init) b = map[static_cast<size_t>(b)];
}

}  // namespace cannl
