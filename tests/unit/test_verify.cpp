// The IR verifier (ir/verify.h): each planted fault is caught and named; every spec of the
// repository passes it after every stage, at -O0 and -O2, for both targets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "driver/compile.h"
#include "ir/verify.h"
#include "program.h"
#include "support/diagnostic.h"

using namespace cannl;
namespace fs = std::filesystem;

namespace {

const char* kMlp = R"(model t
input x : [4]
input y : [3]
param w : [4 -> 3]
param b : [3]
h = relu(w * x + b)
loss = mean(cross_entropy(h, y))
output h
metric acc = accuracy(h, y)
minimize loss with adam(lr = 0.01)
)";

// The problems, one per line (for INFO), and whether one contains `part`.
bool found(const std::vector<std::string>& problems, const std::string& part) {
  const bool any = std::any_of(problems.begin(), problems.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
  if (!any) {
    std::string all;
    for (const auto& s : problems) all += "\n  " + s;
    WARN("no problem contains '" << part << "'; found " << problems.size() << ":" << all);
  }
  return any;
}

// The first nest of routine `k` that the predicate accepts.
ir::Stmt& nest(ir::Program& p, ir::RoutineKind k, const std::function<bool(const ir::Stmt&)>& pred) {
  for (ir::Stmt& s : p.routine(k)->stmts)
    if (pred(s)) return s;
  FAIL("no such nest");
  throw 0;
}

// A nest `out = body` reading a buffer (not a contraction: a changed body leaves no stale mark).
bool has_load(const ir::Stmt& s) {
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  return !s.call && s.single() && !loads.empty() && s.only().accum == ir::Accum::Set && !s.product;
}

int temp(ir::Program& p, const std::string& name) {
  ir::Buffer b;
  b.name = name;
  b.dims = {{3, false}};
  p.buffers.push_back(b);
  return static_cast<int>(p.buffers.size()) - 1;
}

}  // namespace

TEST_CASE("the verifier accepts what the pipeline makes", "[verify]") {
  for (int level : {0, 1, 2}) {
    ir::Program p = test::program(kMlp, 64, level);
    CHECK(ir::verify_problems(p).empty());
  }
}

TEST_CASE("planted faults in nests are caught", "[verify]") {
  const ir::Program good = test::program(kMlp, 64, 0);
  using K = ir::RoutineKind;

  SECTION("a load of a buffer that does not exist") {
    ir::Program p = good;
    nest(p, K::Forward, has_load).only().body = ir::load({static_cast<int>(p.buffers.size()) + 5, {}});
    CHECK(found(ir::verify_problems(p), fmt::format("a load of buffer #{}", p.buffers.size() + 5)));
  }
  SECTION("an access with one index too few") {
    ir::Program p = good;
    ir::Stmt& s = nest(p, K::TrainStep, [&](const ir::Stmt& s) { return has_load(s) && s.only().out.index.size() == 2; });
    s.only().out.index.pop_back();
    CHECK(found(ir::verify_problems(p), "has 1 indices for 2 dims"));
  }
  SECTION("an index naming a loop the nest does not have") {
    ir::Program p = good;
    ir::Stmt& s = nest(p, K::Forward, has_load);
    ir::Access a = s.only().out;
    a.index[0] = ir::Affine::of(7);
    s.only().body = ir::binary(ir::Op::Add, s.only().body, ir::load(a));
    CHECK(found(ir::verify_problems(p), "names loop 7"));
  }
  SECTION("a read of a temporary nothing wrote") {
    ir::Program p = good;
    const int ghost = temp(p, "ghost");
    ir::Stmt& s = nest(p, K::Eval, has_load);
    s.only().body = ir::binary(ir::Op::Add, s.only().body, ir::load({ghost, {ir::Affine::constant(0)}}));
    CHECK(found(ir::verify_problems(p), "routine eval_metrics, nest "));
    CHECK(found(ir::verify_problems(p), "reads 'ghost', which nothing wrote before"));
  }
  SECTION("an accumulation into a buffer nothing set") {
    ir::Program p = good;
    const int ghost = temp(p, "ghost");
    ir::Stmt& s = nest(p, K::Forward, has_load);
    s.only().out = {ghost, {ir::Affine::constant(1)}};
    s.only().accum = ir::Accum::Add;
    s.zero_first = false;
    CHECK(found(ir::verify_problems(p), "accumulates into 'ghost'"));
  }
  SECTION("a routine handing out what it never writes") {
    ir::Program p = good;
    p.routine(K::Eval)->io.values.push_back(temp(p, "ghost"));
    CHECK(found(ir::verify_problems(p), "routine eval_metrics: hands out 'ghost'"));
  }
  SECTION("zero_first on an assignment") {
    ir::Program p = good;
    nest(p, K::Forward, [](const ir::Stmt& s) { return !s.call && s.single() && s.only().accum == ir::Accum::Set; }).zero_first = true;
    CHECK(found(ir::verify_problems(p), "zero_first on a nest that is not all accumulations"));
  }
  SECTION("a product mark on a nest that is not a contraction") {
    ir::Program p = good;
    ir::Stmt& s = nest(p, K::TrainStep, [](const ir::Stmt& s) { return s.product.has_value(); });
    s.only().accum = ir::Accum::Set;
    s.zero_first = false;
    CHECK(found(ir::verify_problems(p), "a product mark on a nest that is not out += alpha * a * b"));
  }
  SECTION("a scalar the routine does not define") {
    ir::Program p = good;
    ir::Stmt& s = nest(p, K::Forward, has_load);
    s.only().body = ir::binary(ir::Op::Mul, s.only().body, ir::scalar("bc1"));  // train_step's, not forward's
    CHECK(found(ir::verify_problems(p), "reads the scalar 'bc1'"));
  }
  SECTION("a loop at pos outside decode, a write of an input, a wrong arity") {
    ir::Program p = good;
    ir::Stmt& s = nest(p, K::TrainStep, has_load);
    s.iters[0].at_pos = true;
    ir::Expr neg = *ir::unary(ir::Op::Neg, ir::load(s.only().out));
    neg.args.push_back(ir::cnst(1));
    s.only().body = std::make_shared<const ir::Expr>(neg);
    nest(p, K::Forward, has_load).only().out = {p.inputs[0], {ir::Affine::constant(0), ir::Affine::constant(0)}};
    const auto problems = ir::verify_problems(p);
    CHECK(found(problems, "at pos outside decode"));
    CHECK(found(problems, "writes the input 'x'"));
    CHECK(found(problems, "'neg' has 2 operands, not 1"));
  }
}

TEST_CASE("planted faults in the program, the plan and the layout are caught", "[verify]") {
  SECTION("a gradient of other dims") {
    ir::Program p = test::program(kMlp, 64, 0);
    p.buffers[static_cast<size_t>(p.grad(p.find("w")))].dims[0].size = 5;
    CHECK(found(ir::verify_problems(p), "the gradient 'w_grad' has other dims than 'w'"));
  }
  SECTION("offsets not one per buffer") {
    ir::Program p = test::program(kMlp, 64, 1);
    ir::Routine& r = *p.routine(ir::RoutineKind::TrainStep);
    REQUIRE(!r.offsets.empty());
    r.offsets.pop_back();
    CHECK(found(ir::verify_problems(p), "routine train_step: " + std::to_string(p.buffers.size() - 1) + " offsets for"));
  }
  SECTION("buffers that live at once sharing bytes") {
    ir::Program p = test::program(kMlp, 64, 1);
    ir::Routine& r = *p.routine(ir::RoutineKind::TrainStep);
    for (long& off : r.offsets)  // (the batched ones at the start of the plan's scaled part)
      if (off > r.fixed_bytes) off = r.fixed_bytes;
    CHECK(found(ir::verify_problems(p), "share bytes"));
  }
  SECTION("a batched buffer in the plan's batch-independent part") {
    ir::Program p = test::program(kMlp, 64, 1);
    ir::Routine& r = *p.routine(ir::RoutineKind::TrainStep);
    REQUIRE(r.fixed_bytes > 0);
    const int h = p.find("h");
    REQUIRE(r.scaled(h));
    r.offsets[static_cast<size_t>(h)] = 0;
    CHECK(found(ir::verify_problems(p), "the batched 'h' at 0 is not in the plan's scaled part"));
  }
  SECTION("a batched buffer off the per-example grid (it would not scale with the cap)") {
    ir::Program p = test::program(kMlp, 48, 1);  // (64 bytes further: off the grid of 48)
    ir::Routine& r = *p.routine(ir::RoutineKind::TrainStep);
    const int h = p.find("h");
    r.offsets[static_cast<size_t>(h)] += 64;
    CHECK(found(ir::verify_problems(p), "is not in the plan's scaled part"));
  }
  SECTION("overlapping fields") {
    ir::Program p = test::program(kMlp, 64, 0);
    ir::Arena& a = p.layout.training;
    a.field[static_cast<size_t>(p.find("b"))] = a.field[static_cast<size_t>(p.find("w"))];
    CHECK(found(ir::verify_problems(p), "layout, the training arena: the fields at 0 and 0 overlap"));
  }
  SECTION("a buffer without an address") {
    ir::Program p = test::program(kMlp, 64, 0);
    const auto h = static_cast<size_t>(p.find("h"));
    p.layout.training.field[h] = -1;
    p.layout.training.own[h] = false;
    CHECK(found(ir::verify_problems(p), "routine forward uses 'h', which has no address here"));
  }
}

TEST_CASE("planted faults in kernel calls are caught", "[verify]") {
  const fs::path spec = fs::path(CANNL_SOURCE_DIR) / "tests/gradcheck/specs/attention.cannl";
  ir::Program p = test::program(test::slurp(spec), 8, 2);
  REQUIRE(ir::verify_problems(p).empty());
  auto is_call = [](const ir::Stmt& s) { return s.call.has_value(); };
  SECTION("a field out of range") {
    nest(p, ir::RoutineKind::TrainStep, is_call).call->o = 9999;
    CHECK(found(ir::verify_problems(p), "attention_forward: its o is buffer #9999"));
  }
  SECTION("sizes the buffers do not hold") {
    nest(p, ir::RoutineKind::TrainStep, is_call).call->tq *= 2;
    CHECK(found(ir::verify_problems(p), "fewer than the"));
  }
}

TEST_CASE("a failure is an internal error naming the stage, the routine, the nest and its line", "[verify]") {
  ir::Program p = test::program(kMlp, 64, 0);
  ir::Stmt& s = nest(p, ir::RoutineKind::Forward, has_load);
  s.zero_first = true;
  const auto i = &s - p.routine(ir::RoutineKind::Forward)->stmts.data();
  try {
    ir::verify(p, "pass fuse");
    FAIL("no error");
  } catch (const InternalError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("after pass fuse: the IR verifier found 1 problem") != std::string::npos);
    CHECK(what.find(fmt::format("routine forward, nest {} '{}' (spec line {})", i, s.what, s.line)) != std::string::npos);
  }
}

// Every spec of the repository, every stage (compile() verifies after each one here).
TEST_CASE("every spec passes the verifier after every stage", "[verify][specs]") {
  std::vector<fs::path> specs;
  for (const char* dir : {"specs", "tests/gradcheck/specs", "tests/e2e/specs", "tests/mpi/specs"})
    for (const auto& e : fs::directory_iterator(fs::path(CANNL_SOURCE_DIR) / dir))
      if (e.path().extension() == ".cannl") specs.push_back(e.path());
  std::sort(specs.begin(), specs.end());
  REQUIRE(specs.size() > 50);
  for (const fs::path& f : specs)
    for (const auto& [level, target] : {std::pair{2, "c"}, std::pair{0, "cuda"}}) {
      DYNAMIC_SECTION(f.filename().string() << " -O" << level << " " << target) {
        CompileOptions o;
        o.target = target;
        o.opt_level = level;
        o.emit = false;
        o.verify_ir = true;
        Compiled c;
        std::ostringstream err;
        const int rc = compile(f.string(), test::slurp(f), o, c, err, false);
        INFO(err.str());
        CHECK(rc == 0);
      }
    }
}
