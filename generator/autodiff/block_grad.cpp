// block_grad.cpp — autodiff of a rolled repeat block (see block_grad.h).
#include "autodiff/block_grad.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "autodiff/reverse.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

// A gradient buffer like `of` (dims, batch), named and placed by the caller.
ir::Buffer gradient_like(const ir::Buffer& of) {
  ir::Buffer g = of;
  g.name = of.name + "_grad";
  g.role = ir::Role::Grad;
  g.tensor = -1;
  g.state_name.clear();
  g.init.reset();
  g.matrix = false;
  g.frozen = false;
  g.view_of = -1;
  g.view_offset = 0;
  g.stack = 0;
  g.block = -1;
  g.formal = false;
  g.shape = "gradient of " + of.name;
  return g;
}

class BlockGrad {
public:
  BlockGrad(ir::Program& p, const ir::Stmt& fs, BlockOuter& o) : p_(p), fs_(fs), fc_(*fs.call), o_(o), k_(fc_.block) {
    for (const ir::Binding& bd : fc_.binds) bind_[bd.formal] = bd;
  }

  std::vector<ir::Stmt> run() {
    ir::Block& bl = block();
    bool any = false;
    for (const auto& [in, out] : bl.carried) any = any || o_.grads.count(bind_.at(out).last) > 0;
    if (!bl.train.stmts.empty()) CANNL_BUG("block " + bl.name + " is called twice in train_step");
    if (!any) {  // no gradient flows through the block: a training body of its forward half only
      forward_only();
      return {};
    }
    body_needs();
    // The gradients arriving for the values carried out (the loss depends on the last one).
    for (const auto& [in, out] : bl.carried)
      if (needs_[static_cast<size_t>(out)]) arriving(out);
    std::vector<ir::Stmt> fills, contributions;
    Reverse rv{p_, needs_, grads_, [&](int b) { return gradient(b, fills); },
               [&](ir::Buffer b) { return add(std::move(b), false); }, fills, contributions};
    const std::vector<ir::Stmt> forward = bl.forward;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) rv.nest(*it);
    // The body: forward, the barrier, the backward half.
    ir::Routine& train = block().train;
    train.io.batch = true;
    train.stmts = forward;
    ir::Stmt rest;
    ir::Call rc;
    rc.kind = ir::Call::Kind::BlockRest;
    rc.block = k_;
    for (const auto& [in, out] : block().carried) rc.reads.push_back(out);
    rc.writes = rest_writes_;
    rest.call = rc;
    rest.line = fs_.line;
    rest.what = "the rest of the model, between this instance's forward and its backward";
    train.stmts.push_back(std::move(rest));
    for (ir::Stmt& f : fills) train.stmts.push_back(std::move(f));
    for (ir::Stmt& c : contributions) train.stmts.push_back(std::move(c));
    // What the body hands its calls: the values carried out, the gradients it writes.
    std::set<int> written;
    for (const ir::Stmt& s : train.stmts)
      if (!s.call || s.call->kind != ir::Call::Kind::BlockRest)
        for (int w : ir::written_buffers(s)) written.insert(w);
    train.io.kept.clear();
    for (int f : block().formals)
      if (written.count(f)) train.io.kept.push_back(f);
    std::vector<ir::Stmt> out = {call(written)};
    if (add_after_.first >= 0) {
      const auto [from, to] = add_after_;
      ir::Stmt add = ir::elementwise(p_, to, "backward: " + fs_.what + " (instance 0's gradient of what it reads)");
      add.only().accum = ir::Accum::Add;
      add.only().body = ir::load_all(add, from);
      add.line = fs_.line;
      out.push_back(std::move(add));
    }
    return out;
  }

private:
  ir::Program& p_;
  const ir::Stmt& fs_;
  const ir::Call& fc_;
  BlockOuter& o_;
  const int k_;
  std::map<int, ir::Binding> bind_;        // the forward call's, by formal
  std::vector<bool> needs_;                // per buffer, the body's
  std::map<int, int> grads_;               // body buffer -> its gradient (a body buffer)
  std::vector<ir::Binding> grad_binds_;    // the gradient formals' bindings
  std::vector<int> rest_writes_;           // what the barrier writes
  std::vector<int> call_reads_, call_writes_;  // the backward call's program buffers, besides the forward's
  std::pair<int, int> add_after_ = {-1, -1};   // the gradient carried out of instance 0, to add into the program's

  ir::Block& block() { return p_.blocks[static_cast<size_t>(k_)]; }
  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }

  // The training body of a block nothing differentiates (its params frozen, nothing before it
  // trained): its nests, no barrier and no backward half (the forward call runs them all), so
  // that the passes run over what its forward call runs.
  void forward_only() {
    ir::Routine& train = block().train;
    train.io.batch = true;
    train.stmts = block().forward;
    std::set<int> written;
    for (const ir::Stmt& s : train.stmts)
      for (int w : ir::written_buffers(s)) written.insert(w);
    train.io.kept.clear();
    for (int f : block().formals)
      if (written.count(f)) train.io.kept.push_back(f);
  }

  // A body buffer of the block's, named after the body buffer its name starts with (`att_grad`
  // after `att`): its instances are named as that one's (`att_3_grad`, Block::name_at), as
  // autodiff names them without rolling.
  int add(ir::Buffer b, bool formal) {
    b.block = k_;
    b.formal = formal;
    int at = -1;
    size_t longest = 0;
    for (const auto& [src, pos] : block().name_at) {
      const std::string& n = buf(src).name;
      if (n.size() > longest && b.name.size() > n.size() && b.name.compare(0, n.size(), n) == 0 && b.name[n.size()] == '_')
        longest = n.size(), at = pos;
    }
    b.name = p_.unique_name(b.name, k_);
    p_.buffers.push_back(std::move(b));
    const int i = static_cast<int>(p_.buffers.size()) - 1;
    (formal ? block().formals : block().locals).push_back(i);
    if (at >= 0) block().name_at[i] = at;
    return i;
  }

  bool is_param(int f) const { return buf(f).role == ir::Role::Param && buf(f).block == k_ && buf(f).formal; }
  const ir::Binding* binding(int f) const {
    auto it = bind_.find(f);
    return it == bind_.end() ? nullptr : &it->second;
  }
  bool carried_in(int f) {
    for (const auto& [in, out] : block().carried)
      if (in == f) return true;
    return false;
  }
  bool carried_out(int f) {
    for (const auto& [in, out] : block().carried)
      if (out == f) return true;
    return false;
  }
  // A formal read from before the block, the same buffer for every instance.
  int shared_actual(int f) const {
    const ir::Binding* bd = binding(f);
    if (!bd || buf(f).role == ir::Role::Param || bd->first >= 0 || bd->last >= 0 || bd->stride != 0) return -1;
    return bd->buf;
  }

  // Which body buffers need gradients: trainable params, shared formals whose program buffer
  // does, the value carried in when what it is before the block does or what the instance
  // carries out does (the next instance reads it).
  void body_needs() {
    needs_.assign(p_.buffers.size(), false);
    for (int f : block().formals) {
      if (is_param(f)) needs_[static_cast<size_t>(f)] = !buf(f).frozen;
      const int s = shared_actual(f);
      if (s >= 0 && static_cast<size_t>(s) < o_.needs.size()) needs_[static_cast<size_t>(f)] = o_.needs[static_cast<size_t>(s)];
    }
    for (const auto& [in, out] : block().carried) {
      const int first = bind_.at(in).first;
      needs_[static_cast<size_t>(in)] = first >= 0 && static_cast<size_t>(first) < o_.needs.size() && o_.needs[static_cast<size_t>(first)];
    }
    for (bool changed = true; changed;) {
      std::vector<bool> n = needs_;
      propagate_needs(block().forward, n);
      changed = false;
      for (const auto& [in, out] : block().carried)
        if (n[static_cast<size_t>(out)] && !n[static_cast<size_t>(in)]) {
          needs_[static_cast<size_t>(in)] = true;
          changed = true;
        }
      if (!changed) needs_ = std::move(n);
    }
  }

  // The ping-pong pair of gradients between instances for carried value `out`.
  int pair_of(int out) {
    auto it = pairs_.find(out);
    if (it != pairs_.end()) return it->second;
    ir::Buffer g = gradient_like(buf(out));
    g.name = p_.unique_name(block().name + "_" + buf(out).name + "_grad");
    g.dims.insert(g.dims.begin(), ir::Dim{2, false});
    g.role = ir::Role::Grad;
    g.shape = fmt::format("the gradient of {} between two instances of block {} (slot l mod 2)", buf(out).name,
                          block().name);
    p_.buffers.push_back(std::move(g));
    const int i = static_cast<int>(p_.buffers.size()) - 1;
    pairs_[out] = i;
    call_writes_.push_back(i);  // (each slot written by one instance before the next reads it: not read on entry)
    return i;
  }
  std::map<int, int> pairs_;

  // The gradient arriving for the value carried out by formal `out`.
  int arriving(int out) {
    const int g = add(gradient_like(buf(out)), true);
    grads_[out] = g;
    const int last = bind_.at(out).last;
    ir::Binding bd;
    bd.formal = g;
    bd.last = o_.gradient(last);  // the program's (the model after the block adds into it)
    bd.buf = pair_of(out);
    bd.stride = buf(out).elements();
    bd.modulo = 2;
    grad_binds_.push_back(bd);
    rest_writes_.push_back(g);
    call_reads_.push_back(bd.last);
    return g;
  }

  // The gradient of body buffer b (made on first use, with its zero fill when it is the
  // instance's own).
  int gradient(int b, std::vector<ir::Stmt>& fills) {
    auto it = grads_.find(b);
    if (it != grads_.end()) return it->second;
    const bool formal = buf(b).formal;
    if (formal && carried_out(b)) CANNL_BUG("block " + block().name + ": a carried-out value without its arriving gradient");
    const int g = add(gradient_like(buf(b)), formal);
    grads_[b] = g;
    bool fill = true;
    if (formal) {
      ir::Binding bd;
      bd.formal = g;
      const ir::Binding& of = bind_.at(b);
      if (is_param(b)) {  // its slice of the stacked gradient
        bd.buf = stacked_gradient(of.buf);
        bd.offset = of.offset;
        bd.stride = of.stride;
        call_writes_.push_back(bd.buf);
      } else if (carried_in(b)) {  // the program's gradient of the value before the block, or the pair
        int out = -1;
        for (const auto& [in, o] : block().carried)
          if (in == b) out = o;
        const int first = of.first;
        if (first >= 0 && static_cast<size_t>(first) < o_.needs.size() && o_.needs[static_cast<size_t>(first)]) {
          if (o_.grads.count(first)) {  // the model after the block reads it too: a buffer of the call's, added after
            ir::Buffer gin = gradient_like(buf(first));
            gin.name = p_.unique_name(buf(first).name + "_grad_in");
            gin.shape = fmt::format("the gradient of {} from block {}", buf(first).name, block().name);
            p_.buffers.push_back(std::move(gin));
            bd.first = static_cast<int>(p_.buffers.size()) - 1;
            add_after_ = {bd.first, o_.gradient(first)};
          } else {
            bd.first = o_.gradient_fresh(first);
          }
          call_writes_.push_back(bd.first);
        }
        bd.buf = pair_of(out);
        bd.stride = buf(b).elements();
        bd.modulo = 2;
        bd.shift = -1;
        rest_writes_.push_back(g);
      } else if (const int s = shared_actual(b); s >= 0) {  // the program's, added into by every instance
        bd.buf = o_.gradient(s);
        call_reads_.push_back(bd.buf);
        call_writes_.push_back(bd.buf);
        rest_writes_.push_back(g);
        fill = false;
      } else {
        CANNL_BUG("block " + block().name + ": a gradient of the formal '" + buf(b).name + "', which nothing binds");
      }
      grad_binds_.push_back(bd);
    }
    if (fill) {
      ir::Stmt f = ir::elementwise(p_, g, "zero the gradient of " + buf(b).name);
      f.only().body = ir::cnst(0);
      fills.push_back(std::move(f));
    }
    return g;
  }

  // The stacked gradient of stacked param `s`, each instance's gradient a view of it.
  int stacked_gradient(int s) {
    if (auto it = o_.grads.find(s); it != o_.grads.end()) return it->second;
    ir::Buffer g = gradient_like(buf(s));
    g.name = p_.unique_name(buf(s).name + "_grad");
    g.stack = buf(s).stack;
    p_.buffers.push_back(std::move(g));
    const int gi = static_cast<int>(p_.buffers.size()) - 1;
    o_.grads[s] = gi;
    for (int v : p_.params)
      if (buf(v).view_of == s) {
        ir::Buffer vg = gradient_like(buf(v));
        vg.name = p_.unique_name(buf(v).name + "_grad");
        vg.view_of = gi;
        vg.view_offset = buf(v).view_offset;
        p_.buffers.push_back(std::move(vg));
        o_.grads[v] = static_cast<int>(p_.buffers.size()) - 1;
      }
    return gi;
  }

  // The call of the backward half.
  ir::Stmt call(const std::set<int>& written) {
    ir::Call c = fc_;
    c.kind = ir::Call::Kind::BlockBackward;
    for (const ir::Binding& bd : grad_binds_) c.binds.push_back(bd);
    std::vector<int> reads = fc_.reads;
    reads.insert(reads.end(), fc_.writes.begin(), fc_.writes.end());
    reads.insert(reads.end(), call_reads_.begin(), call_reads_.end());
    std::vector<int> writes = call_writes_;
    // The program's gradient arriving for the last value, when the body adds into it too.
    for (const ir::Binding& bd : grad_binds_)
      if (bd.last >= 0 && written.count(bd.formal)) writes.push_back(bd.last);
    auto unique = [](std::vector<int> v) {
      std::vector<int> out;
      for (int b : v)
        if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
      return out;
    };
    c.reads = unique(reads);
    c.writes = unique(writes);
    ir::Stmt s;
    s.call = c;
    s.line = fs_.line;
    s.what = "backward: " + fs_.what;
    return s;
  }
};

}  // namespace

std::vector<ir::Stmt> block_backward(ir::Program& p, const ir::Stmt& forward_call, BlockOuter& outer) {
  return BlockGrad(p, forward_call, outer).run();
}

}  // namespace cannl
