// routines.cpp — routine assembly (see routines.h).
#include "lower/routines.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>

#include "support/diagnostic.h"

namespace cannl {

namespace {

// The nests of `fwd` that the `targets` buffers depend on, in order.
std::vector<ir::Stmt> needed(const std::vector<ir::Stmt>& fwd, std::set<int> targets) {
  std::vector<bool> keep(fwd.size(), false);
  for (size_t i = fwd.size(); i-- > 0;) {
    bool wanted = false;
    for (int w : ir::written_buffers(fwd[i])) wanted = wanted || targets.count(w) > 0;
    if (!wanted) continue;
    keep[i] = true;
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(fwd[i], loads);
    for (const ir::Expr* l : loads) targets.insert(l->access.buf);
    if (fwd[i].call)
      for (int b : ir::call_reads(*fwd[i].call)) targets.insert(b);
  }
  std::vector<ir::Stmt> out;
  for (size_t i = 0; i < fwd.size(); ++i)
    if (keep[i]) out.push_back(fwd[i]);
  return out;
}

// One param's initialisation (contract §8; PyTorch's formulas for kaiming and xavier).
ir::Stmt init_param(const ir::Program& p, int buf) {
  const ir::Buffer& b = p.buffers[static_cast<size_t>(buf)];
  const ir::Init& init = *b.init;
  const double fan_in = static_cast<double>(init.fan_in);
  const double fan_out = static_cast<double>(init.fan_out);
  auto arg = [&](const char* k, double d) {
    auto it = init.args.find(k);
    return it == init.args.end() ? d : it->second;
  };
  const std::string& name = init.name;
  ir::ExprP body;
  auto uniform = [](double lo, double hi) { return ir::binary(ir::Op::Uniform, ir::cnst(lo), ir::cnst(hi)); };
  auto normal = [](double mean, double std) { return ir::binary(ir::Op::Normal, ir::cnst(mean), ir::cnst(std)); };
  auto gain = [&] { double a = arg("a", 0); return std::sqrt(2.0 / (1 + a * a)); };
  if (name == "default") body = uniform(-1 / std::sqrt(fan_in), 1 / std::sqrt(fan_in));
  else if (name == "uniform") body = uniform(arg("lo", 0), arg("hi", 1));
  else if (name == "normal") body = normal(arg("mean", 0), arg("std", 1));
  else if (name == "zeros") body = ir::cnst(0);
  else if (name == "ones") body = ir::cnst(1);
  else if (name == "constant") body = ir::cnst(arg("v", 0));
  else if (name == "kaiming_uniform") { double bound = gain() * std::sqrt(3 / fan_in); body = uniform(-bound, bound); }
  else if (name == "kaiming_normal") body = normal(0, gain() / std::sqrt(fan_in));
  else if (name == "xavier_uniform") { double bound = arg("gain", 1) * std::sqrt(6 / (fan_in + fan_out)); body = uniform(-bound, bound); }
  else if (name == "xavier_normal") body = normal(0, arg("gain", 1) * std::sqrt(2 / (fan_in + fan_out)));
  else CANNL_BUG("unknown initialiser " + name);
  ir::Stmt s = ir::elementwise(p, buf, name == "default" ? b.name + " = uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))"
                                                          : fmt::format("{} = {}", b.name, name));
  s.only().body = body;
  s.sequential = body->op == ir::Op::Uniform || body->op == ir::Op::Normal;
  s.line = init.line;
  return s;
}

// The forward nests of the routines that run in `phase` (Train: the training step; Infer:
// forward and eval_metrics).
std::vector<ir::Stmt> in_phase(const Lowered& low, Phase phase) {
  if (low.phase.size() != low.forward.size()) CANNL_BUG("a forward nest without its phase");
  std::vector<ir::Stmt> out;
  for (size_t i = 0; i < low.forward.size(); ++i)
    if (low.phase[i] == Phase::Both || low.phase[i] == phase) out.push_back(low.forward[i]);
  return out;
}

// A program buffer of `slots` slots, each of formal f's dims: the values a block's call keeps
// between instances.
int slots_of(ir::Program& p, int f, long slots, const std::string& name, const std::string& shape) {
  ir::Buffer b = p.buffers[static_cast<size_t>(f)];
  b.name = p.unique_name(name);
  b.dims.insert(b.dims.begin(), ir::Dim{slots, false});
  b.role = ir::Role::Computed;
  b.tensor = -1;
  b.state_name.clear();
  b.init.reset();
  b.block = -1;
  b.formal = false;
  b.shape = shape;
  p.buffers.push_back(std::move(b));
  return static_cast<int>(p.buffers.size()) - 1;
}

// A routine's block calls with their carried values placed: in train_step a stack of the
// values of every instance but the last, in the inference routines a ping-pong pair.
void place_carried(ir::Program& p, std::vector<ir::Stmt>& stmts, bool train, std::map<int, int>& made) {
  for (ir::Stmt& s : stmts) {
    if (!s.call || s.call->kind != ir::Call::Kind::BlockForward) continue;
    ir::Call& c = *s.call;
    const ir::Block& bl = p.blocks[static_cast<size_t>(c.block)];
    if (!train) c.kind = ir::Call::Kind::BlockInfer;
    for (const auto& [in, out] : bl.carried) {
      auto it = made.find(out);
      if (it == made.end()) {
        const std::string& x = p.buffers[static_cast<size_t>(out)].name;
        const int b = train ? slots_of(p, out, bl.count - 1, bl.name + "_" + x,
                                       fmt::format("{} of instances 0 .. {} of block {} (slot l)", x, bl.count - 2, bl.name))
                            : slots_of(p, out, std::min(2L, bl.count - 1), bl.name + "_" + x + "_pp",
                                       fmt::format("{} between two instances of block {} (slot l mod 2)", x, bl.name));
        it = made.emplace(out, b).first;
      }
      const long slots = p.buffers[static_cast<size_t>(it->second)].dims[0].size;
      const long size = p.buffers[static_cast<size_t>(out)].elements();
      for (ir::Binding& bd : c.binds) {
        if (bd.formal != in && bd.formal != out) continue;
        bd.buf = it->second;
        bd.stride = size;
        bd.modulo = train ? 0 : static_cast<int>(slots);
        bd.shift = bd.formal == in ? -1 : 0;
      }
      c.writes.push_back(it->second);  // (the inference's pair too: its bytes are the call's while it runs)
    }
  }
}

// The init body of block k (its params' initialisers over the param formals) and the call
// drawing the params of each instance in turn.
ir::Stmt block_init(ir::Program& p, const ir::Call& fwd) {
  ir::Block& bl = p.blocks[static_cast<size_t>(fwd.block)];
  ir::Call c;
  c.kind = ir::Call::Kind::BlockInit;
  c.block = fwd.block;
  c.count = fwd.count;
  for (const ir::Binding& bd : fwd.binds) {
    const ir::Buffer& f = p.buffers[static_cast<size_t>(bd.formal)];
    if (f.role != ir::Role::Param || bd.buf < 0 || p.buffers[static_cast<size_t>(bd.buf)].stack <= 0) continue;
    int view = -1;  // the first instance's param: its initialiser
    for (int v : p.params)
      if (p.buffers[static_cast<size_t>(v)].view_of == bd.buf && p.buffers[static_cast<size_t>(v)].view_offset == bd.offset)
        view = v;
    if (view < 0 || !p.buffers[static_cast<size_t>(view)].init) CANNL_BUG("a stacked param without its first instance");
    p.buffers[static_cast<size_t>(bd.formal)].init = p.buffers[static_cast<size_t>(view)].init;
    bl.init.stmts.push_back(init_param(p, bd.formal));
    c.binds.push_back(bd);
    c.writes.push_back(bd.buf);
  }
  ir::Stmt s;
  s.call = c;
  s.line = bl.line;
  s.what = fmt::format("the params of block {} (instances {}..{}), instance after instance", bl.name, bl.first,
                       bl.first + bl.count - 1);
  return s;
}

}  // namespace

void assemble_routines(ir::Program& p, const Lowered& low) {
  ir::Routine init{ir::RoutineKind::Init};
  // The spec params in declaration order (their spec tensors' order: a rolled block's params
  // are listed group-major in Program::params, lower/roll.h, but drawn instance by instance,
  // as without rolling), one random stream.
  std::vector<int> declared;
  for (int b : p.params)
    if (p.buffers[static_cast<size_t>(b)].init) declared.push_back(b);
  std::stable_sort(declared.begin(), declared.end(), [&](int a, int b) {
    return p.buffers[static_cast<size_t>(a)].tensor < p.buffers[static_cast<size_t>(b)].tensor;
  });
  // A rolled block's params: its init body, called where its first instance's first param was.
  std::map<int, const ir::Call*> call_of_stack;  // stacked param -> its block's call
  for (const ir::Stmt& s : low.forward)
    if (s.call && s.call->kind == ir::Call::Kind::BlockForward)
      for (const ir::Binding& bd : s.call->binds)
        if (bd.buf >= 0 && p.buffers[static_cast<size_t>(bd.buf)].stack > 0) call_of_stack[bd.buf] = &*s.call;
  std::set<int> drawn;  // blocks whose init call is placed
  for (int b : declared) {
    const int s = p.buffers[static_cast<size_t>(b)].view_of;
    auto it = s >= 0 ? call_of_stack.find(s) : call_of_stack.end();
    if (it == call_of_stack.end()) {
      init.stmts.push_back(init_param(p, b));
      continue;
    }
    if (drawn.insert(it->second->block).second) init.stmts.push_back(block_init(p, *it->second));
  }
  for (const auto& [buf, v] : low.state_init) {  // batch_norm's running statistics
    const ir::Buffer& b = p.buffers[static_cast<size_t>(buf)];
    ir::Stmt s = ir::elementwise(p, buf, fmt::format("{} = {}", b.name, v));
    s.only().body = ir::cnst(v);
    init.stmts.push_back(std::move(s));
  }
  const std::vector<ir::Stmt> train_fwd = in_phase(low, Phase::Train), infer_fwd = in_phase(low, Phase::Infer);

  ir::Routine train{ir::RoutineKind::TrainStep};
  train.io.batch = true;
  train.io.values = {p.loss};
  std::set<int> train_targets = {p.loss};  // and the batch statistics the running ones blend in
  for (const ir::Stmt& s : low.train_updates) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const ir::Expr* l : loads) train_targets.insert(l->access.buf);
  }
  train.stmts = needed(train_fwd, train_targets);
  train.stmts.insert(train.stmts.end(), low.train_updates.begin(), low.train_updates.end());
  std::map<int, int> stacks, pairs;  // carried formal -> its stack (train_step), its pair (inference)
  place_carried(p, train.stmts, true, stacks);

  ir::Routine forward{ir::RoutineKind::Forward};
  forward.io.batch = true;
  forward.io.outputs = p.outputs;
  forward.stmts = needed(infer_fwd, std::set<int>(p.outputs.begin(), p.outputs.end()));

  ir::Routine eval{ir::RoutineKind::Eval};
  eval.io.batch = true;
  eval.io.values = {p.loss};
  eval.io.values.insert(eval.io.values.end(), p.metrics.begin(), p.metrics.end());
  eval.stmts = needed(infer_fwd, std::set<int>(eval.io.values.begin(), eval.io.values.end()));
  place_carried(p, forward.stmts, false, pairs);
  place_carried(p, eval.stmts, false, pairs);
  // Each block's inference body: its nests (a rolled instance's run in every routine).
  for (ir::Block& bl : p.blocks) {
    bl.infer.stmts = bl.forward;
    bl.infer.io.batch = true;
    bl.infer.io.kept.clear();
    for (const auto& [in, out] : bl.carried) bl.infer.io.kept.push_back(out);
  }

  p.routines = {std::move(init), std::move(train), std::move(forward), std::move(eval)};
}

}  // namespace cannl
