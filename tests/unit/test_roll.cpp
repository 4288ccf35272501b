// Rolling repeat blocks (lower/roll.h) and unrolling them back (ir/unroll_blocks.h): which
// instances make a block, what stays expanded, stacked params and their views, the block's
// bindings; rolling then unrolling gives lowering's program without rolling (up to buffer
// renaming: the same nests, the same buffers); the verifier's checks of blocks and views.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "driver/frontend.h"
#include "ir/ir_print.h"
#include "ir/unroll_blocks.h"
#include "ir/verify.h"
#include "lower/lower.h"
#include "lower/roll.h"
#include "passes/rewrite.h"
#include "program.h"

using namespace cannl;
namespace fs = std::filesystem;

namespace {

std::string source(const std::string& rel) { return test::slurp(fs::path(CANNL_SOURCE_DIR) / rel); }

// A spec lowered (rolled or not), its front end kept alive.
struct Lowering {
  std::unique_ptr<Frontend> fe;
  Lowered low;
  const ir::Program& p() const { return low.prog; }
  int find(const std::string& name) const { return low.prog.find(name); }
  const ir::Buffer& buf(const std::string& name) const {
    const int b = find(name);
    REQUIRE(b >= 0);
    return low.prog.buffers[static_cast<size_t>(b)];
  }
  size_t calls() const {
    size_t n = 0;
    for (const ir::Stmt& s : low.forward) n += s.call && s.call->kind == ir::Call::Kind::BlockForward;
    return n;
  }
};

Lowering lower(const std::string& text, bool roll, const std::map<std::string, long>& dims = {}) {
  Lowering l;
  l.fe = run_frontend("t.cannl", text, Stage::Shapes, dims);
  std::ostringstream err;
  l.fe->diags.render(err, false);
  INFO(err.str());
  REQUIRE(l.fe->ok());
  l.low = lower_forward(l.fe->model, l.fe->shapes, l.fe->file, 4, roll);
  const auto problems = ir::lowered_problems(l.low.prog, l.low.forward, l.low.train_updates);
  std::string all;
  for (const auto& s : problems) all += "\n  " + s;
  INFO(all);
  CHECK(problems.empty());
  return l;
}

std::vector<std::string> param_names(const ir::Program& p) {
  std::vector<std::string> n;
  for (int b : p.params) n.push_back(p.buffers[static_cast<size_t>(b)].state_name);
  return n;
}

// Two lowerings' forward nests are equal up to a bijection of their buffers (each pair of the
// same dims, role and checkpoint name), in the same phases; `names`: the buffers' names equal
// too. The stacked params, which only the rolled one has, are no nest's.
void isomorphic(const Lowered& a, const Lowered& b, bool names) {
  REQUIRE(a.forward.size() == b.forward.size());
  CHECK(a.phase == b.phase);
  std::map<int, int> fwd, back;
  auto map = [&](int x, int y) {
    if (x < 0 || y < 0) return x == y;
    auto it = fwd.find(x);
    if (it != fwd.end()) return it->second == y;
    if (back.count(y)) return false;
    const ir::Buffer &bx = a.prog.buffers[static_cast<size_t>(x)], &by = b.prog.buffers[static_cast<size_t>(y)];
    if (bx.dims != by.dims || bx.role != by.role || bx.state_name != by.state_name || bx.ids != by.ids) return false;
    if (names && (bx.name != by.name || bx.shape != by.shape)) return false;
    fwd[x] = y;
    back[y] = x;
    return true;
  };
  // The nests print alike once each buffer is named by its partner.
  for (size_t k = 0; k < a.forward.size(); ++k) {
    const ir::Stmt &x = a.forward[k], &y = b.forward[k];
    std::vector<int> wx = ir::written_buffers(x), wy = ir::written_buffers(y);
    std::vector<const ir::Expr*> lx, ly;
    ir::collect_loads(x, lx);
    ir::collect_loads(y, ly);
    REQUIRE(wx.size() == wy.size());
    REQUIRE(lx.size() == ly.size());
    for (size_t i = 0; i < wx.size(); ++i) CHECK(map(wx[i], wy[i]));
    for (size_t i = 0; i < lx.size(); ++i) CHECK(map(lx[i]->access.buf, ly[i]->access.buf));
    if (x.call) {
      const auto rx = ir::call_reads(*x.call), ry = ir::call_reads(*y.call);
      REQUIRE(rx.size() == ry.size());
      for (size_t i = 0; i < rx.size(); ++i) CHECK(map(rx[i], ry[i]));
    }
    // Printed with the partner's names, the nests are the same text.
    const ir::Stmt renamed = [&] {
      ir::Stmt s = x;
      auto ren = [&](int bf) { return fwd.count(bf) ? fwd.at(bf) : bf; };
      for (ir::Assign& as : s.assigns) {
        as.out.buf = ren(as.out.buf);
        std::function<ir::ExprP(const ir::ExprP&)> go = [&](const ir::ExprP& e) {
          auto c = std::make_shared<ir::Expr>(*e);
          if (c->op == ir::Op::Load) c->access.buf = ren(c->access.buf);
          for (auto& arg : c->args) arg = go(arg);
          return ir::ExprP(c);
        };
        as.body = go(as.body);
      }
      if (s.call) {
        ir::Call& c = *s.call;
        for (int* f : {&c.q, &c.k, &c.v, &c.o, &c.lse, &c.table, &c.ids})
          if (*f >= 0) *f = ren(*f);
      }
      return s;
    }();
    CHECK(ir::print_stmt(renamed, b.prog) == ir::print_stmt(y, b.prog));
  }
  // Every buffer but the stacked params has its partner: the same buffers.
  size_t stacked = 0;
  for (const ir::Buffer& x : a.prog.buffers) stacked += x.stack > 0;
  CHECK(a.prog.buffers.size() - stacked == b.prog.buffers.size());
  std::vector<std::string> pa = param_names(a.prog), pb = param_names(b.prog);
  std::sort(pa.begin(), pa.end());
  std::sort(pb.begin(), pb.end());
  CHECK(pa == pb);
}

const std::map<std::string, long> kCharDims = {{"ctx", 16}, {"d", 32}, {"hd", 8}, {"heads", 4}, {"layers", 3}};

// A residual MLP stack: the simplest rolled block (a carried x, params of its own).
const char* kResidual = R"(model residual_stack
dim d = 8
dim layers = 4
input x0 : [d]
input y : [d]
x = x0
repeat layers carry x
  param w : [d -> d] = normal(0, 0.1)
  param b : [d] = zeros
  x = x + relu(w * x + b)
end
loss = mean((x - y) ** 2)
output x
minimize loss with adamw(lr = 0.01), clip_grad_norm = 1.0
)";

}  // namespace

TEST_CASE("gc_gpt's two blocks roll into one block of two instances", "[roll]") {
  Lowering l = lower(source("tests/gradcheck/specs/gpt.cannl"), true);
  REQUIRE(l.p().blocks.size() == 1);
  const ir::Block& bl = l.p().blocks[0];
  CHECK(bl.name == "layers");
  CHECK(bl.first == 0);
  CHECK(bl.count == 2);
  CHECK(l.calls() == 1);
  CHECK(bl.carried.size() == 1);
  // Stacked params [2, ...], each instance's param a view at its slice, named as before.
  const ir::Buffer& w = l.buf("w_qkv");
  CHECK(w.stack == 2);
  CHECK(w.dims.size() == 5);
  CHECK(w.dims[0].size == 2);
  CHECK(w.state_name.empty());
  CHECK(l.buf("w_qkv_1").view_of == l.find("w_qkv"));
  CHECK(l.buf("w_qkv_1").view_offset == l.buf("w_qkv_1").elements());
  CHECK(l.buf("w_qkv_1").state_name == "w_qkv.1");
  // The API lists the block's params group-major.
  const std::vector<std::string> want = {"wte", "wpe", "lnf_g", "lnf_b", "ln1_g.0", "ln1_g.1", "ln2_g.0", "ln2_g.1",
                                         "ln1_b.0", "ln1_b.1", "ln2_b.0", "ln2_b.1", "w_qkv.0", "w_qkv.1",
                                         "b_qkv.0", "b_qkv.1", "w_o.0", "w_o.1", "b_o.0", "b_o.1",
                                         "w_fc.0", "w_fc.1", "b_fc.0", "b_fc.1", "w_pr.0", "w_pr.1", "b_pr.0", "b_pr.1"};
  CHECK(param_names(l.p()) == want);
  // The body: instance 0's nests over formals and locals named without the instance.
  CHECK(l.find("qkv_0_mm") < 0);
  CHECK(l.find("qkv_1_mm") < 0);
  CHECK(l.buf("qkv_mm").block == 0);
  CHECK(!l.buf("qkv_mm").formal);
  CHECK(l.buf("x_1").block == -1);  // the last value carried out: the head reads it
  const std::string dump = ir::print_lowered(l.p(), l.low.forward);
  CHECK(dump.find("layers forward x2") != std::string::npos);
  CHECK(dump.find("formal w_qkv") != std::string::npos);
}

TEST_CASE("roll then unroll is lowering without rolling, but for the stacked params", "[roll]") {
  struct Case {
    std::string name, text;
    std::map<std::string, long> dims;
  };
  const std::vector<Case> cases = {{"gc_gpt", source("tests/gradcheck/specs/gpt.cannl"), {}},
                                   {"gpt_char", source("specs/gpt_char.cannl"), kCharDims},
                                   {"residual_stack", kResidual, {}}};
  for (const Case& c : cases) {
    INFO(c.name);
    Lowering rolled = lower(c.text, true, c.dims);
    CHECK(!rolled.p().blocks.empty());
    unroll_blocks(rolled.low);
    CHECK(rolled.p().blocks.empty());
    CHECK(rolled.calls() == 0);
    const auto problems = ir::lowered_problems(rolled.p(), rolled.low.forward, rolled.low.train_updates);
    CHECK(problems.empty());
    Lowering plain = lower(c.text, false, c.dims);
    CHECK(plain.p().blocks.empty());
    isomorphic(rolled.low, plain.low, true);
    // Every spec tensor's buffer again (the unrolled instances' locals made anew).
    REQUIRE(rolled.low.tensor_buf.size() == plain.low.tensor_buf.size());
    for (size_t t = 0; t < plain.low.tensor_buf.size(); ++t)
      CHECK(rolled.p().buffers[static_cast<size_t>(rolled.low.tensor_buf[t])].name ==
            plain.p().buffers[static_cast<size_t>(plain.low.tensor_buf[t])].name);
  }
}

TEST_CASE("instances that lower differently keep today's expansion", "[roll]") {
  SECTION("a carried tensor that changes shape: no two instances alike") {
    Lowering l = lower(source("tests/specs/shapes/134_repeat_changing_shapes.cannl"), true);
    CHECK(l.p().blocks.empty());
    CHECK(l.find("h_0") >= 0);
    CHECK(l.find("h_1") >= 0);
  }
  SECTION("the first instance reads a broadcast value: the others make a group of their own") {
    Lowering l = lower(R"(model split
input x : [1]
h = x
repeat 4 carry h
  param b : [4] = ones
  h = relu(h + b)
end
output h
)", true);
    REQUIRE(l.p().blocks.size() == 1);
    CHECK(l.p().blocks[0].first == 1);
    CHECK(l.p().blocks[0].count == 3);
    CHECK(l.buf("b_0").view_of == -1);  // instance 0: expanded, its own param
    CHECK(l.buf("b_1").view_of == l.find("b"));
    CHECK(param_names(l.p()) == std::vector<std::string>{"b.0", "b.1", "b.2", "b.3"});
  }
  SECTION("dropout: each instance draws its own stream") {
    Lowering l = lower(R"(model drop
input x : [8]
h = x
repeat 3 carry h
  param w : [8 -> 8]
  h = dropout(relu(w * h), p = 0.1)
end
output h
)", true);
    CHECK(l.p().blocks.empty());
  }
  SECTION("batch_norm: running statistics updated in training") {
    Lowering l = lower(R"(model bn
input x : [8]
h = x
repeat 3 carry h
  param w : [8 -> 8]
  h = batch_norm(w * h)
end
output h
)", true);
    CHECK(l.p().blocks.empty());
  }
  SECTION("the instance index: each instance reads its own row x[t], none alike (contract v2 §4)") {
    Lowering l = lower(R"(model rnn
input x : [3, 4]
param w : [4 -> 4]
h = w * x[0]
repeat t in 3 carry h
  param g : [4] = ones
  h = tanh(w * h + w * x[t]) *. g
end
output h
)", true);
    CHECK(l.p().blocks.empty());
    CHECK(l.buf("g_1").view_of == -1);
    CHECK(param_names(l.p()) == std::vector<std::string>{"w", "g.0", "g.1", "g.2"});
  }
  SECTION("without the index the same block rolls") {
    Lowering l = lower(R"(model rnn_same
input x : [3, 4]
param w : [4 -> 4]
h = w * x[0]
repeat t in 3 carry h
  param g : [4] = ones
  h = tanh(w * h + w * x[1]) *. g
end
output h
)", true);
    REQUIRE(l.p().blocks.size() == 1);
    CHECK(l.p().blocks[0].count == 3);
  }
  SECTION("a block of one instance") {
    Lowering l = lower(R"(model one
input x : [8]
h = x
repeat 1 carry h
  param w : [8 -> 8]
  h = relu(w * h)
end
output h
)", true);
    CHECK(l.p().blocks.empty());
    CHECK(l.buf("w_0").view_of == -1);
  }
}

TEST_CASE("what a block reads from outside: shared params, two carried names, a carried value reread", "[roll]") {
  const char* spec = R"(model shared
dim d = 6
input x : [d]
param w0 : [d -> d]
h = x
g = relu(x)
repeat 3 carry h, g
  param w : [d -> d]
  h = relu(w * h + w0 * g)
  g = g + h
  y = h *. g
end
output h
)";
  Lowering l = lower(spec, true);
  REQUIRE(l.p().blocks.size() == 1);
  const ir::Block& bl = l.p().blocks[0];
  CHECK(bl.count == 3);
  CHECK(bl.carried.size() == 2);
  REQUIRE(l.calls() == 1);
  // w0 is a shared formal bound to the same buffer for every instance.
  const ir::Call* call = nullptr;
  for (const ir::Stmt& s : l.low.forward)
    if (s.call && s.call->kind == ir::Call::Kind::BlockForward) call = &*s.call;
  REQUIRE(call);
  bool shared = false;
  for (const ir::Binding& b : call->binds)
    shared = shared || (b.buf == l.find("w0") && b.stride == 0);
  CHECK(shared);
  Lowering rolled = lower(spec, true), plain = lower(spec, false);
  unroll_blocks(rolled.low);
  isomorphic(rolled.low, plain.low, true);
}

TEST_CASE("the verifier checks blocks, bindings and views", "[roll][verify]") {
  auto problems = [](const Lowering& l) { return ir::lowered_problems(l.p(), l.low.forward, l.low.train_updates); };
  auto has = [](const std::vector<std::string>& ps, const std::string& part) {
    for (const auto& s : ps)
      if (s.find(part) != std::string::npos) return true;
    std::string all;
    for (const auto& s : ps) all += "\n  " + s;
    WARN("no problem contains '" << part << "':" << all);
    return false;
  };
  auto call_of = [](Lowering& l) -> ir::Call& {
    for (ir::Stmt& s : l.low.forward)
      if (s.call && s.call->kind == ir::Call::Kind::BlockForward) return *s.call;
    FAIL("no block call");
    throw 0;
  };
  SECTION("a binding's slices outside its stacked buffer") {
    Lowering l = lower(kResidual, true);
    for (ir::Binding& b : call_of(l).binds)
      if (b.stride > 0) b.stride *= 2;
    CHECK(has(problems(l), "outside it or of other dims"));
  }
  SECTION("an unbound formal") {
    Lowering l = lower(kResidual, true);
    call_of(l).binds.pop_back();
    CHECK(has(problems(l), "unbound"));
  }
  SECTION("a view outside its stacked buffer") {
    Lowering l = lower(kResidual, true);
    ir::Program& p = l.low.prog;
    p.buffers[static_cast<size_t>(p.find("w_3"))].view_offset += 1000;
    CHECK(has(problems(l), "is not in a slice"));
  }
  SECTION("a program nest reading a body buffer") {
    Lowering l = lower(kResidual, true);
    ir::Program& p = l.low.prog;
    const int local = p.blocks[0].locals.at(0);
    l.low.forward.back().assigns[0].body = ir::load({local, std::vector<ir::Affine>(p.buffers[static_cast<size_t>(local)].dims.size(), ir::Affine::constant(0))});
    CHECK(has(problems(l), "of block #0"));
  }
  SECTION("a body writing through one formal in every instance") {
    Lowering l = lower(kResidual, true);
    ir::Program& p = l.low.prog;
    const auto [in, out] = p.blocks[0].carried.at(0);
    for (ir::Binding& b : call_of(l).binds)
      if (b.formal == out) b = {out, p.find("x0"), 0, 0, -1, -1};
    CHECK(has(problems(l), "which its body writes"));
  }
  SECTION("a nest using a view after one used its stacked buffer") {
    // (through the passes up to plan_blocks, then unroll_routines: both targets keep their
    // block calls, and only unrolled nests use the views)
    CompileOptions o;
    o.max_batch = 4;
    o.emit = false;
    o.stop_after = "plan_blocks";
    Compiled c;
    std::ostringstream err;
    REQUIRE(compile("t.cannl", kResidual, o, c, err, false) == 0);
    ir::Program p = std::move(c.prog);
    ir::unroll_routines(p);
    ir::Routine& step = *p.routine(ir::RoutineKind::TrainStep);
    const int view = p.find("w_0");
    REQUIRE(view >= 0);
    REQUIRE(p.buffers[static_cast<size_t>(view)].view_of == p.find("w"));
    const ir::Stmt* reader = nullptr;  // a forward nest reading w_0
    for (const ir::Stmt& s : step.stmts) {
      std::vector<const ir::Expr*> loads;
      ir::collect_loads(s, loads);
      for (const ir::Expr* l : loads) reader = reader ? reader : l->access.buf == view ? &s : nullptr;
    }
    REQUIRE(reader);
    step.stmts.push_back(*reader);  // again after the optimiser's update of w
    CHECK(has(ir::verify_problems(p), "after nest"));
  }
}

namespace {

// A spec compiled through pass `stop` at -O`level` (the blocks' bodies as the passes leave them,
// before unroll_routines), the IR verifier on.
ir::Program compiled_until(const std::string& text, const std::string& stop, int level,
                           const std::map<std::string, long>& dims = {}) {
  CompileOptions o;
  o.max_batch = 4;
  o.opt_level = level;
  o.emit = false;
  o.stop_after = stop;
  o.dims = dims;
  o.verify_ir = true;
  Compiled c;
  std::ostringstream err;
  const int rc = compile("t.cannl", text, o, c, err, false);
  INFO(err.str());
  REQUIRE(rc == 0);
  return std::move(c.prog);
}

std::set<int> touched(const ir::Stmt& s) {
  std::set<int> t = passes::reads(s);
  for (int w : passes::writes(s)) t.insert(w);
  return t;
}

}  // namespace

TEST_CASE("passes over block bodies: nothing crosses the barrier, saved = live across it", "[roll][passes]") {
  struct Case {
    std::string name, text;
    std::map<std::string, long> dims;
  };
  const std::vector<Case> cases = {{"gc_gpt", source("tests/gradcheck/specs/gpt.cannl"), {}},
                                   {"gpt_char", source("specs/gpt_char.cannl"), kCharDims},
                                   {"residual_stack", kResidual, {}}};
  for (const Case& c : cases)
    for (int level : {0, 1, 2}) {
      INFO(c.name << " -O" << level);
      const ir::Program p = compiled_until(c.text, "plan_blocks", level, c.dims);
      REQUIRE(p.blocks.size() == 1);
      const ir::Block& bl = p.blocks[0];
      const ir::Routine& train = bl.train;
      const size_t bar = ir::barrier_at(train);
      REQUIRE(bar < train.stmts.size());
      const ir::Call& rest = *train.stmts[bar].call;
      const std::vector<int> rw = ir::call_writes(rest), rr = ir::call_reads(rest);
      const std::set<int> rest_writes(rw.begin(), rw.end()), rest_reads(rr.begin(), rr.end());
      CHECK(!rest_writes.empty());  // the gradients arriving, the one carried in (dx_in)
      std::set<int> before, after;
      for (size_t i = 0; i < train.stmts.size(); ++i) {
        if (i == bar) continue;
        const ir::Stmt& s = train.stmts[i];
        INFO("nest " << i << ": " << ir::print_stmt(s, p));
        if (i < bar) {
          // Nothing before the barrier reads or writes what the rest of the model writes: no
          // gradient (no fill of dx_in either) hoisted above it.
          for (int b : touched(s)) CHECK(!rest_writes.count(b));
        } else {
          // Nothing after it writes what the rest of the model reads (the values carried out).
          for (int w : passes::writes(s)) CHECK(!rest_reads.count(w));
        }
        const std::set<int> t = touched(s);
        (i < bar ? before : after).insert(t.begin(), t.end());
      }
      // The saved activations: the body's locals used on both sides, each bound to a stack
      // [count, dims...] (slot l for instance l) that the forward call writes and the backward reads.
      std::set<int> want;
      for (int b : before)
        if (after.count(b) && p.buffers[static_cast<size_t>(b)].block == 0 && !p.buffers[static_cast<size_t>(b)].formal)
          want.insert(b);
      CHECK(std::set<int>(bl.saved.begin(), bl.saved.end()) == want);
      CHECK(!want.empty());
      // Attention's backward reads its forward's output and log-sum-exp: both saved.
      for (const ir::Stmt& s : train.stmts)
        if (s.call && s.call->kind == ir::Call::Kind::AttentionForward) {
          CHECK(want.count(s.call->o));
          CHECK(want.count(s.call->lse));
        }
      const ir::Routine& step = *p.routine(ir::RoutineKind::TrainStep);
      int calls = 0;
      for (const ir::Stmt& s : step.stmts) {
        if (!s.call || (s.call->kind != ir::Call::Kind::BlockForward && s.call->kind != ir::Call::Kind::BlockBackward))
          continue;
        ++calls;
        const ir::Call& call = *s.call;
        const bool fwd = call.kind == ir::Call::Kind::BlockForward;
        for (int sv : bl.saved) {
          const ir::Buffer& local = p.buffers[static_cast<size_t>(sv)];
          const ir::Binding* bd = nullptr;
          for (const ir::Binding& x : call.binds) bd = x.formal == sv ? &x : bd;
          REQUIRE(bd);
          const ir::Buffer& stack = p.buffers[static_cast<size_t>(bd->buf)];
          CHECK(stack.block == -1);
          REQUIRE(stack.dims.size() == local.dims.size() + 1);
          CHECK(stack.dims[0] == ir::Dim{bl.count, false});
          CHECK(std::vector<ir::Dim>(stack.dims.begin() + 1, stack.dims.end()) == local.dims);
          CHECK(bd->stride == local.elements());
          const std::vector<int>& list = fwd ? call.writes : call.reads;
          CHECK(std::find(list.begin(), list.end(), bd->buf) != list.end());
        }
        // The body's other locals: planned once in the body's arena, a scratch buffer of the
        // call's (but those in a formal's bytes: Routine::hosted).
        bool locals = false;
        for (int b : fwd ? before : after)
          locals = locals || (p.buffers[static_cast<size_t>(b)].block == 0 && !p.buffers[static_cast<size_t>(b)].formal &&
                              !want.count(b) && train.host(b) < 0);
        CHECK((call.scratch >= 0) == locals);
      }
      CHECK(calls == 2);
      for (int b : bl.locals) {
        const bool used = before.count(b) || after.count(b);
        if (!used) continue;
        CHECK(train.planned(b) == (!want.count(b) && train.host(b) < 0));
      }
    }
}

TEST_CASE("a body's locals in the bytes of the formals they are written into or replace", "[roll][passes][verify]") {
  for (int level : {0, 2}) {
    INFO("-O" << level);
    ir::Program p = compiled_until(source("specs/gpt_char.cannl"), "plan_blocks", level, kCharDims);
    CHECK(ir::verify_problems(p).empty());
    REQUIRE(p.blocks.size() == 1);
    ir::Block& bl = p.blocks[0];
    ir::Routine& train = bl.train;
    if (level == 0) {  // (no memory planning: each local its own bytes)
      for (ir::Routine* r : {&bl.train, &bl.infer, &bl.init}) CHECK(r->hosted.empty());
      continue;
    }
    const size_t bar = ir::barrier_at(train);
    const std::set<int> saved(bl.saved.begin(), bl.saved.end());
    // The forward half: the product before the bias, `qkv_mm`, written in place into the saved
    // `qkv` (no copy out of the scratch); the backward half: gradients in the slots of saved
    // activations after their last use.
    bool fwd_in_saved = false, bwd_in_saved = false;
    for (const auto& [l, f] : train.hosted) {
      CHECK(!train.planned(l));
      if (!saved.count(f)) continue;
      for (size_t i = 0; i < train.stmts.size(); ++i)
        if (touched(train.stmts[i]).count(l)) (i < bar ? fwd_in_saved : bwd_in_saved) = true;
    }
    CHECK(fwd_in_saved);
    CHECK(bwd_in_saved);
    CHECK(!bl.infer.hosted.empty());  // (the inference body's product in the carried value)
    // Planted: a forward local in the bytes of the value carried in, which the half reads first.
    int x_in = -1;
    for (const auto& [in, out] : bl.carried) x_in = in;
    REQUIRE(x_in >= 0);
    bool planted = false;  // (x_mm, in the bytes of the value carried out, moved to those of the one carried in)
    for (auto& [l, f] : train.hosted)
      if (!planted && p.buffers[static_cast<size_t>(l)].dims == p.buffers[static_cast<size_t>(x_in)].dims)
        for (size_t i = 0; i < bar && !planted; ++i)
          if (touched(train.stmts[i]).count(l)) f = x_in, planted = true;
    REQUIRE(planted);
    const std::vector<std::string> problems = ir::verify_problems(p);
    INFO(problems.size() << " problems");
    const std::string want = "in the bytes of '" + p.buffers[static_cast<size_t>(x_in)].name + "'";
    bool caught = false;
    for (const std::string& x : problems) caught = caught || x.find(want) != std::string::npos;
    CHECK(caught);
  }
}

TEST_CASE("unroll_routines leaves no stack of saved activations and no scratch of a body", "[roll][passes]") {
  for (int level : {0, 2}) {
    INFO("-O" << level);
    ir::Program p = compiled_until(kResidual, "plan_blocks", level);
    ir::unroll_routines(p);  // every routine (the reference: both targets keep the calls)
    CHECK(ir::verify_problems(p).empty());
    CHECK(p.blocks.empty());
    std::set<int> used;
    for (const ir::Routine& r : p.routines)
      for (const ir::Stmt& s : r.stmts) {
        const std::set<int> t = touched(s);
        used.insert(t.begin(), t.end());
      }
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const ir::Buffer& x = p.buffers[b];
      INFO(x.name);
      CHECK(x.block == -1);
      if (x.role == ir::Role::Computed || x.role == ir::Role::Temp) CHECK(used.count(static_cast<int>(b)));
    }
  }
}

TEST_CASE("a block nothing differentiates still gets a training body for the passes", "[roll][passes]") {
  const std::string frozen = R"(model frozen_stack
dim d = 8
dim layers = 3
input x0 : [d]
input y : [d]
param w0 : [d -> d] = normal(0, 0.1)
x = x0
repeat layers carry x
  param w : [d -> d] = normal(0, 0.1) frozen
  param b : [d] = zeros frozen
  x = x + relu(w * x + b)
end
h = w0 * x
loss = mean((h - y) ** 2)
output h
minimize loss with adamw(lr = 0.01)
)";
  for (int level : {0, 2}) {
    INFO("-O" << level);
    const ir::Program p = compiled_until(frozen, "plan_blocks", level);
    REQUIRE(p.blocks.size() == 1);
    const ir::Routine& train = p.blocks[0].train;
    CHECK(!train.stmts.empty());
    CHECK(ir::barrier_at(train) == train.stmts.size());  // the forward half only, no barrier
    CHECK(p.blocks[0].saved.empty());
    int forward = 0, backward = 0;
    for (const ir::Stmt& s : p.routine(ir::RoutineKind::TrainStep)->stmts) {
      forward += s.call && s.call->kind == ir::Call::Kind::BlockForward;
      backward += s.call && s.call->kind == ir::Call::Kind::BlockBackward;
    }
    CHECK(forward == 1);
    CHECK(backward == 0);
    // Through the whole pipeline for the C target: the calls kept, the forward half run.
    const ir::Program q = test::program(frozen, 4, level);
    CHECK(q.blocks.size() == 1);
    forward = 0;
    for (const ir::Stmt& s : q.routine(ir::RoutineKind::TrainStep)->stmts)
      forward += s.call && s.call->kind == ir::Call::Kind::BlockForward;
    CHECK(forward == 1);
  }
}

TEST_CASE("the C target keeps the block calls of every routine, and they run their bodies", "[roll][passes]") {
  for (int level : {0, 2}) {
    INFO("-O" << level);
    const ir::Program p = test::program(kResidual, 4, level);
    CHECK(ir::verify_problems(p).empty());
    REQUIRE(p.blocks.size() == 1);
    const ir::Block& bl = p.blocks[0];
    std::map<ir::RoutineKind, std::multiset<ir::Call::Kind>> calls;
    for (const ir::Routine& r : p.routines)
      for (const ir::Stmt& s : r.stmts)
        if (s.call && ir::is_block_call(s.call->kind)) {
          calls[r.kind].insert(s.call->kind);
          CHECK(s.call->count == bl.count);
          // a body's locals live in the call's scratch, planned in the calling routine
          if (s.call->scratch >= 0) CHECK(r.planned(s.call->scratch) == (level > 0));
        }
    using K = ir::Call::Kind;
    CHECK(calls[ir::RoutineKind::TrainStep] == std::multiset<K>{K::BlockForward, K::BlockBackward});
    CHECK(calls[ir::RoutineKind::TrainGrads] == std::multiset<K>{K::BlockForward, K::BlockBackward});
    CHECK(calls[ir::RoutineKind::Forward] == std::multiset<K>{K::BlockInfer});
    CHECK(calls[ir::RoutineKind::Eval] == std::multiset<K>{K::BlockInfer});
    CHECK(calls[ir::RoutineKind::Init] == std::multiset<K>{K::BlockInit});
    CHECK(!bl.train.stmts.empty());
    CHECK(!bl.infer.stmts.empty());
    CHECK(!bl.init.stmts.empty());
    // Each saved activation has a stack the forward call writes and the backward call reads.
    for (const ir::Routine& r : p.routines)
      for (const ir::Stmt& s : r.stmts) {
        if (!s.call || (s.call->kind != K::BlockForward && s.call->kind != K::BlockBackward)) continue;
        for (int sv : bl.saved) {
          int stack = -1;
          for (const ir::Binding& bd : s.call->binds)
            if (bd.formal == sv) stack = bd.buf;
          REQUIRE(stack >= 0);
          const std::vector<int> l = s.call->kind == K::BlockForward ? s.call->writes : s.call->reads;
          CHECK(std::find(l.begin(), l.end(), stack) != l.end());
        }
      }
  }
}

TEST_CASE("the decode routine calls a block's decode body, each instance's keys and values a slot of one stack",
          "[roll][passes]") {
  for (int level : {0, 2}) {
    INFO("-O" << level);
    // (gc_gpt, its logits an output: a causal language model)
    const ir::Program p = test::program(source("tests/gradcheck/specs/gpt.cannl") + "output logits\n", 4, level);
    CHECK(ir::verify_problems(p).empty());
    REQUIRE(p.blocks.size() == 1);
    const ir::Block& bl = p.blocks[0];
    const ir::Routine* dec = p.routine(ir::RoutineKind::Decode);
    REQUIRE(dec);
    // One call of the block (its instances), no instance's nests of its own.
    const ir::Stmt* call = nullptr;
    int calls = 0;
    for (const ir::Stmt& s : dec->stmts)
      if (s.call && ir::is_block_call(s.call->kind)) call = &s, ++calls;
    REQUIRE(calls == 1);
    CHECK(call->call->kind == ir::Call::Kind::BlockDecode);
    CHECK(call->call->count == bl.count);
    CHECK(p.find("qkv_0_cache") < 0);
    CHECK(p.find("qkv_1_cache") < 0);
    // The body: over rows; its cache a formal bound to slot l of a stack [count, batch, T, ...].
    REQUIRE(!bl.decode.stmts.empty());
    CHECK(bl.decode.io.position);
    int caches = 0;
    for (const ir::Binding& bd : call->call->binds) {
      const ir::Buffer& f = p.buffers[static_cast<size_t>(bd.formal)];
      if (f.role != ir::Role::Cache) continue;
      ++caches;
      CHECK(f.formal);
      CHECK(f.block == 0);
      const ir::Buffer& st = p.buffers[static_cast<size_t>(bd.buf)];
      CHECK(st.role == ir::Role::Cache);
      CHECK(st.block == -1);
      REQUIRE(st.dims.size() == f.dims.size() + 1);
      CHECK(st.dims[0].size == bl.count);
      CHECK(std::vector<ir::Dim>(st.dims.begin() + 1, st.dims.end()) == f.dims);
      CHECK(bd.stride == f.elements());
      CHECK(std::find(call->call->writes.begin(), call->call->writes.end(), bd.buf) != call->call->writes.end());
      CHECK(p.layout.inference.own[static_cast<size_t>(bd.buf)]);  // storage of its own, kept across calls
    }
    CHECK(caches == 1);  // (q, k and v read in place from the fused qkv: one cache)
    // Its locals at the body's plan, in the call's scratch, planned in the decode routine.
    REQUIRE(call->call->scratch >= 0);
    CHECK(dec->planned(call->call->scratch) == (level > 0));
  }
}
