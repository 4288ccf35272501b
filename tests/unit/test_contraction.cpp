// emit/contraction: which nests are matrix products, and the strides, roles and batch loops
// of the product each maps to (and which are summed as dot products); and the cannl_sgemm
// calls the C emitter prints for them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <utility>

#include "driver/frontend.h"
#include "emit/c_emit.h"
#include "emit/contraction.h"
#include "passes/pipeline.h"
#include "program.h"

using namespace cannl;

namespace {

struct Prog {
  ir::Program p;
  explicit Prog(const std::string& body) : p(test::program("model t\n" + body)) {}
  // The train_step nest writing `out` with +=, the first one (or the only one).
  const ir::Stmt& accumulating(const std::string& out) const {
    for (const auto& s : p.routine(ir::RoutineKind::TrainStep)->stmts)
      if (p.buffers[static_cast<size_t>(s.only().out.buf)].name == out && s.only().accum == ir::Accum::Add) return s;
    FAIL("no nest accumulating into " << out);
    throw;
  }
  std::string name(int buf) const { return p.buffers[static_cast<size_t>(buf)].name; }
  // The C source `cannl gen` writes: after the default passes (fold_fills makes the zero
  // fill part of the product).
  std::string c_source() const {
    ir::Program q = p;
    run_passes(q, PassOptions{});
    for (const auto& f : emit_c(q, COptions{}))
      if (f.name == "t.c") return f.text;
    return "";
  }
};

const char* kLayer = R"(input x : [64]
input y : [32]
param w : [64 -> 32] = uniform(-1, 1)
h = w * x
loss = mean((h - y) ** 2)
minimize loss with sgd(lr = 0.1)
)";

}  // namespace

TEST_CASE("a layer's forward product: the weights transposed as B") {
  Prog g(kLayer);
  auto m = recognise_contraction(g.p, g.accumulating("h"));
  REQUIRE(m);
  CHECK(g.name(m->a.buf) == "x");
  CHECK(g.name(m->b.buf) == "w");
  CHECK(m->m.size == "n");
  CHECK(m->n.size == "32");
  CHECK(m->k.size == "64");
  CHECK((m->m.stride_a == 64 && m->k.stride_a == 1));   // x [n, 64]
  CHECK((m->k.stride_b == 1 && m->n.stride_b == 64));   // w [32, 64] read as [64, 32]^T
  CHECK((m->m.stride_c == 32 && m->n.stride_c == 1));
  CHECK(m->outer.empty());
  CHECK(!m->alpha);
}

TEST_CASE("the backward's transposed products") {
  Prog g(kLayer);
  auto wg = recognise_contraction(g.p, g.accumulating("w_grad"));  // w_grad[o, k] += g[b, o] * x[b, k]
  REQUIRE(wg);
  CHECK(wg->m.size == "32");
  CHECK(wg->n.size == "64");
  CHECK(wg->k.size == "n");
  CHECK((wg->m.stride_a == 1 && wg->k.stride_a == 32));  // the gradient [n, 32] read transposed
  CHECK((wg->k.stride_b == 64 && wg->n.stride_b == 1));
}

TEST_CASE("batched products: the shared batch axis becomes a loop around the product") {
  Prog g(R"(input a : [8 -> 12]
input b : [6 -> 8]
param c : [6 -> 12] = uniform(-1, 1)
p = a * b
loss = sum(p *. c)
minimize loss with sgd(lr = 0.1)
)");
  auto m = recognise_contraction(g.p, g.accumulating("p"));
  REQUIRE(m);
  REQUIRE(m->outer.size() == 1);
  // p[b, o, i] += a[b, o, k] * b[b, k, i]: N = i (6) is narrow against M = o (12), so the
  // roles swap: M = i, N = o.
  CHECK(m->m.size == "6");
  CHECK(m->n.size == "12");
  CHECK(m->k.size == "8");
  CHECK(!m->outer_k);
}

TEST_CASE("axes that merge: a weight contracting two input axes is one K of their product") {
  Prog g(R"(input x : [4, 16]
param w : [4, 16 -> 32] = uniform(-1, 1)
h = w * x
loss = sum(h)
minimize loss with sgd(lr = 0.1)
)");
  auto m = recognise_contraction(g.p, g.accumulating("h"));
  REQUIRE(m);
  CHECK(m->k.size == "64");
  CHECK(m->k.iters.size() == 2);
  CHECK(m->outer.empty());
}

TEST_CASE("not contractions: pointwise products, sums of one operand, assignments") {
  Prog g(R"(input x : [16]
param w : [16] = uniform(-1, 1)
h = x *. w
loss = sum(h)
minimize loss with sgd(lr = 0.1)
)");
  // w_grad[i] += g[b, i] * x[b, i] sums two operands, but i is in all three accesses and b
  // in both operands: no M or N axis, a batch of dot products of length n, left as loops.
  for (const auto& s : g.p.routine(ir::RoutineKind::TrainStep)->stmts) CHECK(!recognise_contraction(g.p, s));
}

TEST_CASE("the emitter prints cannl_sgemm with the strides, and folds the zero-fill in") {
  Prog g(kLayer);
  std::string c = g.c_source();
  CHECK(c.find("cannl_sgemm(m->gemm, n, 32, 64, 1.0f, x, 64, 1, w, 1, 64, h, 32, 1, 1);") != std::string::npos);
  CHECK(c.find("cannl_gemm *gemm;") != std::string::npos);
  // The loop-nest kernels are compiled once per instruction set (cannl_rt.h); the routines,
  // which only call kernels and the runtime, are not.
  CHECK(c.find("CANNL_MULTIVERSION\nstatic void set_h_grad(") != std::string::npos);
  CHECK(c.find("CANNL_MULTIVERSION\nstatic void set_w(") == std::string::npos);
  CHECK(c.find("CANNL_MULTIVERSION\nstatic double train_step(") == std::string::npos);
  CHECK(c.find("CANNL_MULTIVERSION\nstatic void init_params(") == std::string::npos);
}

TEST_CASE("a narrow output (N < 16 against a wider M) swaps the roles: C^T = B^T A^T") {
  Prog g(R"(input x : [64]
input y : [4]
param w : [64 -> 4] = uniform(-1, 1)
h = w * x
loss = mean((h - y) ** 2)
minimize loss with sgd(lr = 0.1)
)");
  auto m = recognise_contraction(g.p, g.accumulating("h"));
  REQUIRE(m);
  CHECK(g.name(m->a.buf) == "w");
  CHECK(g.name(m->b.buf) == "x");
  CHECK(m->m.size == "4");
  CHECK(m->n.size == "n");
  CHECK((m->m.stride_c == 1 && m->n.stride_c == 4));  // the tile is stored element by element
}

TEST_CASE("few outputs (2 to 16, a constant) over a K of 64 or more, both operands along K: dot products") {
  auto layer = [](int in, int out) {
    return fmt::format(R"(input x : [{0}]
input y : [{1}]
param w : [{0} -> {1}] = uniform(-1, 1)
h = w * x
loss = mean((h - y) ** 2)
minimize loss with sgd(lr = 0.1)
)", in, out);
  };
  Prog g(layer(256, 10));
  auto m = recognise_contraction(g.p, g.accumulating("h"));
  REQUIRE(m);
  CHECK(m->dot);
  CHECK(g.c_source().find("cannl_sgemm_dot(m->gemm, 10, n, 256, 1.0f, w, 256, x, 256, h, 1, 10, 1);") !=
        std::string::npos);
  // The backward's products read an operand along another axis: the tiles.
  for (const auto& s : g.p.routine(ir::RoutineKind::TrainStep)->stmts)
    if (auto b = recognise_contraction(g.p, s); b && g.name(s.only().out.buf) != "h") CHECK(!b->dot);
  // The side of 10 is the choice's (a side of n, the batch, never is): not 32 or 17 outputs,
  // not a K under 64.
  Prog wide(kLayer);
  auto w = recognise_contraction(wide.p, wide.accumulating("h"));
  REQUIRE(w);
  CHECK(!w->dot);
  for (auto [in, out] : {std::pair{32, 10}, std::pair{256, 17}}) {
    Prog q(layer(in, out));
    auto r = recognise_contraction(q.p, q.accumulating("h"));
    REQUIRE(r);
    CHECK(!r->dot);
  }
}

TEST_CASE("a convolution over one channel is one product: K = kh kw (the channel loop of one pass)") {
  Prog g(R"(input image : [12, 12, 1]
input y : [12, 12, 8]
param k : [5, 5, 1 -> 8] = uniform(-1, 1)
a = conv2d(image, k, padding = 2)
loss = mean((a - y) ** 2)
minimize loss with sgd(lr = 0.1)
)");
  ir::Program q = g.p;
  run_passes(q, PassOptions{});
  int forward = 0, weight = 0;
  for (const auto& s : q.routine(ir::RoutineKind::TrainStep)->stmts) {
    if (!s.product) continue;
    auto m = recognise_contraction(q, s);
    REQUIRE(m);
    const std::string out = q.buffers[static_cast<size_t>(s.only().out.buf)].name;
    if (out == "a") {  // a[b, y, x, d] = a_col[b, y, x, ky, kx, c] k[d, ky, kx, c]
      ++forward;
      CHECK(((m->m.size == "n * 144" && m->n.size == "8") || (m->m.size == "8" && m->n.size == "n * 144")));
      CHECK(m->k.size == "25");
      CHECK(!m->outer_k);
    }
    if (out == "k_grad") {
      ++weight;
      CHECK(m->k.size == "n * 144");
      CHECK(!m->outer_k);
      CHECK(((m->m.size == "8" && m->n.size == "25") || (m->m.size == "25" && m->n.size == "8")));
    }
  }
  CHECK(forward == 1);
  CHECK(weight == 1);
}

TEST_CASE("an einsum reading a sliding window is a gather and one product with K = window x channels") {
  Prog g(R"(input image : [14, 14, 16]
input y : [7, 7, 32]
param k : [3, 3, 16 -> 32] = uniform(-1, 1)
a = einsum("b|2*h+i-1, 2*w+j-1, c; i, j, c -> d => b|h, w, d", image, k)
loss = mean((a - y) ** 2)
minimize loss with sgd(lr = 0.1)
)");
  auto m = recognise_contraction(g.p, g.accumulating("a"));
  REQUIRE(m);
  CHECK(g.name(m->a.buf) == "a_col");
  CHECK(g.name(m->b.buf) == "k");
  CHECK(m->m.size == "n * 49");
  CHECK(m->n.size == "32");
  CHECK(m->k.size == "144");
  CHECK(m->outer.empty());
}
