// Contractions as cuBLAS calls (emit/cublas_plan.h), checked without a GPU: for every nest of
// the gradcheck specs and two examples that plan_cublas_gemm turns into a GEMM, unoptimised
// (-O0) and after the passes (-O2: zero_first nests, scaled products), the column-major
// strided batched GEMM it describes (cuBLAS's definition with alpha and beta, evaluated here)
// must compute what the nest computes, on random buffers (the out buffer too: zero_first
// must ignore what it held) and a run-time batch smaller than the maximum. Also the CUDA
// emitter's choices on fashion_mlp and fashion_cnn.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include "driver/commands.h"
#include "driver/frontend.h"
#include "emit/cublas_plan.h"
#include "emit/cuda_emit.h"
#include "passes/pipeline.h"
#include "program.h"

using namespace cannl;

namespace {

ir::Program program(const std::string& path, long max_batch, int level = 2, const std::string& target = "c") {
  std::string text, error;
  REQUIRE(read_file(path, text, error));
  return test::program(text, max_batch, level, path, target);
}

long flat(const ir::Program& p, const ir::Access& a, const std::vector<long>& iv) {
  const auto& dims = p.buffers[static_cast<size_t>(a.buf)].dims;
  long off = 0, stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    long v = a.index[d].offset;
    for (const auto& t : a.index[d].terms) v += t.coef * iv[static_cast<size_t>(t.iter)];
    off += v * stride;
    stride *= dims[d].size;
  }
  return off;
}

// The value of a contraction's body at loop variables iv: its loads, constants, run-time
// scalars (0.75 each), products, negations and divisions (what recognise_contraction takes).
double eval(const ir::Program& p, const ir::Expr& e, const std::vector<long>& iv,
            const std::vector<std::vector<double>>& bufs) {
  switch (e.op) {
    case ir::Op::Load:
      return bufs[static_cast<size_t>(e.access.buf)][static_cast<size_t>(flat(p, e.access, iv))];
    case ir::Op::Const: return e.value;
    case ir::Op::Scalar: return 0.75;
    case ir::Op::Neg: return -eval(p, *e.args[0], iv, bufs);
    case ir::Op::Mul: return eval(p, *e.args[0], iv, bufs) * eval(p, *e.args[1], iv, bufs);
    case ir::Op::Div: return eval(p, *e.args[0], iv, bufs) / eval(p, *e.args[1], iv, bufs);
    default: FAIL("not a contraction's body"); return 0;
  }
}

// The nest, run as written (zero_first: the cells it writes are zeroed first; with a run-time
// batch n below the maximum those are the first n examples' cells of the buffer).
void run_nest(const ir::Program& p, const ir::Stmt& s, long n, std::vector<std::vector<double>>& bufs) {
  auto bound = [&](size_t k) { return s.iters[k].batch ? n : s.iters[k].size; };
  for (size_t k = 0; k < s.iters.size(); ++k)
    if (bound(k) == 0) return;
  for (int pass = s.zero_first ? 0 : 1; pass < 2; ++pass) {
    std::vector<long> iv(s.iters.size(), 0);
    while (true) {
      const double v = pass == 0 ? 0 : eval(p, *s.only().body, iv, bufs);
      double& out = bufs[static_cast<size_t>(s.only().out.buf)][static_cast<size_t>(flat(p, s.only().out, iv))];
      out = pass == 0 ? 0 : out + v;
      size_t k = iv.size();
      while (k-- > 0) {
        if (++iv[k] < bound(k)) break;
        iv[k] = 0;
      }
      if (k == static_cast<size_t>(-1)) break;
    }
  }
}

// cublasGemmStridedBatchedEx as cuBLAS defines it (column-major), with the plan's alpha
// (a scalar counts 0.75, as in eval()) and beta (0: C's old values are not read).
void run_gemm(const GemmPlan& g, long n, std::vector<std::vector<double>>& bufs) {
  const double alpha = g.alpha * (g.alpha_scalar.empty() ? 1.0 : 0.75);
  auto v = [n](const GemmSize& s) { return s.n ? s.c * n : s.c; };
  const long M = v(g.m), N = v(g.n), K = v(g.k), count = v(g.count);
  const auto& A = bufs[static_cast<size_t>(g.a)];
  const auto& B = bufs[static_cast<size_t>(g.b)];
  auto& C = bufs[static_cast<size_t>(g.c)];
  for (long i = 0; i < count; ++i)
    for (long r = 0; r < M; ++r)
      for (long c = 0; c < N; ++c) {
        double sum = 0;
        for (long k = 0; k < K; ++k) {
          double x = g.trans_a ? A[static_cast<size_t>(i * g.stride_a + k + r * g.lda)]
                               : A[static_cast<size_t>(i * g.stride_a + r + k * g.lda)];
          double y = g.trans_b ? B[static_cast<size_t>(i * g.stride_b + c + k * g.ldb)]
                               : B[static_cast<size_t>(i * g.stride_b + k + c * g.ldb)];
          sum += x * y;
        }
        double& out = C[static_cast<size_t>(i * g.stride_c + r + c * g.ldc)];
        out = alpha * sum + (g.overwrite ? 0.0 : out);
      }
}

struct Counts {
  int matched = 0, zero_first = 0, scaled = 0;
};

Counts check_spec(const std::string& path, int level) {
  const long max_batch = 5, n = 3;
  ir::Program p = program(path, max_batch, level);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  Counts counts;
  for (const auto& r : p.routines)
    for (const auto& s : r.stmts) {
      auto g = plan_cublas_gemm(p, s);
      if (!g) continue;
      ++counts.matched;
      counts.zero_first += s.zero_first;
      counts.scaled += g->alpha != 1 || !g->alpha_scalar.empty();
      CHECK(g->overwrite == s.zero_first);
      std::vector<const ir::Expr*> loads;
      ir::collect_loads(s, loads);
      std::vector<std::vector<double>> a(p.buffers.size());  // only the three it touches
      std::vector<int> touched = {s.only().out.buf};
      for (const auto* l : loads) touched.push_back(l->access.buf);
      for (int i : touched) {
        auto& v = a[static_cast<size_t>(i)];
        if (!v.empty()) continue;
        v.resize(static_cast<size_t>(p.buffers[static_cast<size_t>(i)].elements()));
        for (auto& x : v) x = u(rng);
      }
      auto b = a;
      run_nest(p, s, n, a);
      run_gemm(*g, n, b);
      INFO(path << " -O" << level << ": " << s.what << " -> " << p.buffers[static_cast<size_t>(s.only().out.buf)].name);
      const auto& x = a[static_cast<size_t>(s.only().out.buf)];
      const auto& y = b[static_cast<size_t>(s.only().out.buf)];
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1.0, std::abs(x[i])));
      REQUIRE(worst < 1e-12);
    }
  return counts;
}

}  // namespace

TEST_CASE("every contraction's GEMM computes its nest", "[contraction][numeric]") {
  namespace fs = std::filesystem;
  const fs::path root = CANNL_SOURCE_DIR;
  int specs = 0;
  Counts o0, o2;
  // The gradcheck specs (every operator, small) and two examples (the big ones take long
  // in a debug build).
  std::vector<fs::path> paths = {root / "specs/fashion_mlp.cannl", root / "specs/fashion_einsum.cannl"};
  for (const auto& f : fs::directory_iterator(root / "tests/gradcheck/specs"))
    if (f.path().extension() == ".cannl") paths.push_back(f.path());
  for (const auto& path : paths) {
    const Counts a = check_spec(path.string(), 0), b = check_spec(path.string(), 2);
    o0.matched += a.matched;
    o0.zero_first += a.zero_first;
    o2.matched += b.matched;
    o2.zero_first += b.zero_first;
    o2.scaled += b.scaled;
    ++specs;
  }
  CHECK(specs > 40);
  CHECK(o0.matched > 100);  // products, their gradients, einsums
  CHECK(o0.zero_first == 0);
  CHECK(o2.matched > 100);
  CHECK(o2.zero_first > 50);  // the passes fold the zero fills into the products (beta = 0)
  CHECK(o2.scaled > 0);       // and scales into them (alpha)
}

// The decode routine's nests (passes/decode.cpp) at position `pos`: an at_pos loop's variable
// is pos, and an index of a window's ring cache (ir::Buffer::ring) by it is pos % ring.
long flat_at(const ir::Program& p, const ir::Stmt& s, const ir::Access& a, const std::vector<long>& iv, long pos) {
  const ir::Buffer& b = p.buffers[static_cast<size_t>(a.buf)];
  long off = 0, stride = 1;
  for (size_t d = b.dims.size(); d-- > 0;) {
    long v = a.index[d].offset;
    bool at_pos = false;
    for (const auto& t : a.index[d].terms) {
      at_pos = at_pos || s.iters[static_cast<size_t>(t.iter)].at_pos;
      v += t.coef * (s.iters[static_cast<size_t>(t.iter)].at_pos ? pos : iv[static_cast<size_t>(t.iter)]);
    }
    if (at_pos && b.ring) v %= b.ring;
    off += v * stride;
    stride *= b.dims[d].size;
  }
  return off;
}

TEST_CASE("decode over rows: every contraction's GEMM computes its nest's rows", "[contraction][numeric][decode]") {
  // The decode routine is over rows (passes/decode.cpp): a nest that reads or writes
  // a cache (each row at its own slot and position) or whose plan has a position offset is a
  // kernel (CudaEmitter::gemm_at_rows); every other contraction is one GEMM over the n rows,
  // each at its position 0: the windowed and grouped-query caches and a fused qkv's ring
  // (decode_gqa), RoPE's model (rope_tiny: its rolled repeat block's decode body, which the
  // decode routine calls per instance), gpt_tiny's. The nest is evaluated with its sequence
  // loop at pos for every row.
  const std::string root = CANNL_SOURCE_DIR;
  int matched = 0, at_pos = 0, ring = 0;
  auto touches_cache = [](const ir::Program& p, const ir::Stmt& s) {
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    bool c = p.buffers[static_cast<size_t>(s.only().out.buf)].role == ir::Role::Cache;
    for (const auto* l : loads) c = c || p.buffers[static_cast<size_t>(l->access.buf)].role == ir::Role::Cache;
    return c;
  };
  for (const std::string& spec : {root + "/tests/e2e/specs/decode_gqa.cannl", root + "/tests/e2e/specs/rope_tiny.cannl",
                                  root + "/specs/gpt_tiny.cannl"}) {
    const ir::Program p = program(spec, 2, 2, "cuda");
    const ir::Routine* d = p.routine(ir::RoutineKind::Decode);
    REQUIRE(d != nullptr);
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<const ir::Stmt*> nests;
    for (const ir::Stmt& s : d->stmts) nests.push_back(&s);
    for (const ir::Block& bl : p.blocks)
      for (const ir::Stmt& s : bl.decode.stmts) nests.push_back(&s);
    for (const ir::Stmt* sp : nests) {
      const ir::Stmt& s = *sp;
      if (s.call || s.assigns.size() != 1) continue;
      const auto g = plan_cublas_gemm(p, s);
      if (!g) continue;
      const bool offset = g->pos_a != 0 || g->pos_b != 0 || g->pos_c != 0;
      if (touches_cache(p, s)) {
        for (int b : {g->a, g->b, g->c}) ring += p.buffers[static_cast<size_t>(b)].ring > 0;
        continue;  // (a kernel)
      }
      at_pos += offset;
      if (offset) continue;  // (a kernel)
      ++matched;
      for (long pos : {0L, 4L, 7L, d->io.seq_len - 1}) {
        std::vector<std::vector<double>> a(p.buffers.size());
        std::vector<const ir::Expr*> loads;
        ir::collect_loads(s, loads);
        std::vector<int> touched = {s.only().out.buf};
        for (const auto* l : loads) touched.push_back(l->access.buf);
        for (int i : touched) {
          auto& v = a[static_cast<size_t>(i)];
          v.resize(static_cast<size_t>(p.buffers[static_cast<size_t>(i)].elements()));
          for (auto& x : v) x = u(rng);
        }
        auto b = a;
        // the nest at pos (its loops of one iteration at 0, the position's at pos)
        for (int pass = s.zero_first ? 0 : 1; pass < 2; ++pass) {
          std::vector<long> iv(s.iters.size(), 0);
          while (true) {
            std::function<double(const ir::Expr&)> ev = [&](const ir::Expr& e) -> double {
              switch (e.op) {
                case ir::Op::Load: return a[static_cast<size_t>(e.access.buf)][static_cast<size_t>(flat_at(p, s, e.access, iv, pos))];
                case ir::Op::Const: return e.value;
                case ir::Op::Scalar: return 0.75;
                case ir::Op::Neg: return -ev(*e.args[0]);
                case ir::Op::Mul: return ev(*e.args[0]) * ev(*e.args[1]);
                case ir::Op::Div: return ev(*e.args[0]) / ev(*e.args[1]);
                default: FAIL("not a contraction's body"); return 0;
              }
            };
            const double v = pass == 0 ? 0 : ev(*s.only().body);
            double& out = a[static_cast<size_t>(s.only().out.buf)][static_cast<size_t>(flat_at(p, s, s.only().out, iv, pos))];
            out = pass == 0 ? 0 : out + v;
            size_t k = iv.size();
            while (k-- > 0) {
              if (++iv[k] < s.iters[k].size) break;
              iv[k] = 0;
            }
            if (k == static_cast<size_t>(-1)) break;
          }
        }
        // the GEMM over the rows (n: the program's max batch, every row), each from element 0
        GemmPlan h = *g;
        REQUIRE((h.a != h.c && h.b != h.c));
        run_gemm(h, p.max_batch, b);
        const auto& c = b[static_cast<size_t>(h.c)];
        INFO(spec << ": " << s.what << " -> " << p.buffers[static_cast<size_t>(h.c)].name << " at pos " << pos);
        const auto& x = a[static_cast<size_t>(h.c)];
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - c[i]) / std::max(1.0, std::abs(x[i])));
        REQUIRE(worst < 1e-12);
      }
    }
  }
  CHECK(matched >= 10);
  CHECK(at_pos == 0);  // no product of decode over rows at one position offset
  CHECK(ring > 0);     // some nest into a window's ring cache (a kernel)
}

TEST_CASE("fashion_mlp: every matrix product is a GEMM", "[contraction]") {
  ir::Program p = program(std::string(CANNL_SOURCE_DIR) + "/specs/fashion_mlp.cannl", 256);
  int gemms = 0;
  for (const auto& s : p.routine(ir::RoutineKind::TrainStep)->stmts) gemms += plan_cublas_gemm(p, s).has_value();
  CHECK(gemms == 8);  // 3 forward, 2 x 2 + 1 backward (the input's gradient is not needed)
}

TEST_CASE("the CUDA emitter: kernels, reductions, atomics, cuBLAS", "[cuda]") {
  // `edit` changes the program before it is emitted (-O2's).
  auto cu = [](const std::string& spec, const std::function<void(ir::Program&)>& edit = {}) {
    ir::Program p = program(std::string(CANNL_SOURCE_DIR) + "/specs/" + spec + ".cannl", 256, 2, "cuda");
    if (edit) edit(p);
    CudaOptions o;
    o.spec = spec + ".cannl";
    for (const auto& f : emit_cuda(p, o))
      if (f.name == p.model + ".cu") return f.text;
    FAIL("no .cu");
    return std::string();
  };
  auto has = [](const std::string& t, const std::string& part) { return t.find(part) != std::string::npos; };
  const std::string mlp = cu("fashion_mlp");
  // x = image / 255 stays a division (its reciprocal is inexact), stored; zero_first: beta 0
  CHECK(has(mlp, "gemm(m, __FILE__, __LINE__, CUBLAS_OP_T, CUBLAS_OP_N, 512, n, 784, 1.0f, w1, 784, 0, x, 784, 0, 0.0f, h1_mm, 512, 0, 1);"));
  CHECK(has(mlp, "CUBLAS_COMPUTE_32F"));
  CHECK(has(mlp, "acc = cannl_warp_sum(acc);"));   // bias gradients: a warp per element
  CHECK(has(mlp, "if (i_ >= n * 512) return;"));   // the run-time batch bounds the grid
  CHECK_FALSE(has(mlp, "atomicAdd"));
  const std::string cnn = cu("fashion_cnn");
  CHECK(has(cnn, "atomicAdd(&"));                   // the input gradient of a convolution
  CHECK(has(cnn, "cannl_block_sum"));               // a kernel gradient: a block per element
  CHECK_FALSE(has(cnn, "cannl_fill"));

  // zero_first: sums complete in one thread (or lane 0) are assigned, not added.
  CHECK(has(mlp, "if (lane_ == 0) b3_grad[o] = acc;"));
  CHECK(has(mlp, "    loss_max[b] = acc;"));
  // Fused nests: every assignment at each point, in order (adam: moments, then the param).
  const std::string adam = cu("fashion_mlp_adam");
  const size_t m1 = adam.find("    w1_exp_avg[j0 * 784 + j1] = "), m2 = adam.find("    w1_exp_avg_sq[j0 * 784 + j1] = "),
               w = adam.find("    w1[j0 * 784 + j1] = w1[j0 * 784 + j1] - lr");
  REQUIRE(m1 != std::string::npos);
  REQUIRE(m2 != std::string::npos);
  REQUIRE(w != std::string::npos);
  CHECK((m1 < m2 && m2 < w));
  CHECK(has(adam, "real *__restrict__ w1_exp_avg, real *__restrict__ w1_exp_avg_sq, real *__restrict__ w1, "
                  "const real *__restrict__ w1_grad"));  // every written buffer writable
  // A zero_first nest whose writes collide (the convolution's input gradient, marked so
  // here): its cells are filled with 0 by a kernel first, then added into atomically.
  std::string conv;
  const std::string cnn0 = cu("fashion_cnn", [&](ir::Program& p) {
    for (auto& s : p.routine(ir::RoutineKind::TrainStep)->stmts)
      if (p.buffers[static_cast<size_t>(s.assigns[0].out.buf)].name == "p1_grad" && s.assigns[0].accum == ir::Accum::Add &&
          !s.zero_first) {
        s.zero_first = true;
        conv = "cannl_fill<<<(unsigned)((n * 6272 + 255) / 256), 256, 0, stream_>>>(p1_grad, n * 6272, 0.0f);";
        return;
      }
  });
  REQUIRE(!conv.empty());
  CHECK(has(cnn0, conv));
  CHECK(has(cnn0, "into cells filled with the identity first"));
  CHECK(has(cnn0, "atomicAdd(&p1_grad["));
}
