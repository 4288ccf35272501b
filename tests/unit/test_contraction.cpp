// Contractions as cuBLAS calls (emit/contraction.h), checked without a GPU: for every nest of
// the gradcheck specs and two examples that match_contraction turns into a GEMM, the column-major
// strided batched GEMM it describes (cuBLAS's definition, evaluated here) must compute what
// the nest computes, on random buffers and a run-time batch smaller than the maximum. Also
// the CUDA emitter's choices on fashion_mlp and fashion_cnn.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "driver/commands.h"
#include "driver/frontend.h"
#include "emit/contraction.h"
#include "emit/cuda_emit.h"
#include "lower/routines.h"

using namespace cannl;

namespace {

ir::Program program(const std::string& path, long max_batch) {
  std::string text, error;
  REQUIRE(read_file(path, text, error));
  auto fe = run_frontend(path, text);
  REQUIRE(fe->ok());
  ProgramOptions o;
  o.max_batch = max_batch;
  return build_program(fe->model, fe->shapes, fe->file, o);
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

// The nest, run as written.
void run_nest(const ir::Program& p, const ir::Stmt& s, long n, std::vector<std::vector<double>>& bufs) {
  const ir::Expr& a = *s.body->args[0];
  const ir::Expr& b = *s.body->args[1];
  std::vector<long> iv(s.iters.size(), 0);
  auto bound = [&](size_t k) { return s.iters[k].batch ? n : s.iters[k].size; };
  for (size_t k = 0; k < iv.size(); ++k)
    if (bound(k) == 0) return;
  while (true) {
    bufs[static_cast<size_t>(s.out.buf)][static_cast<size_t>(flat(p, s.out, iv))] +=
        bufs[static_cast<size_t>(a.access.buf)][static_cast<size_t>(flat(p, a.access, iv))] *
        bufs[static_cast<size_t>(b.access.buf)][static_cast<size_t>(flat(p, b.access, iv))];
    size_t k = iv.size();
    while (k-- > 0) {
      if (++iv[k] < bound(k)) break;
      iv[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

// cublasGemmStridedBatchedEx with alpha = beta = 1, as cuBLAS defines it (column-major).
void run_gemm(const GemmPlan& g, long n, std::vector<std::vector<double>>& bufs) {
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
        C[static_cast<size_t>(i * g.stride_c + r + c * g.ldc)] += sum;
      }
}

int check_spec(const std::string& path) {
  const long max_batch = 5, n = 3;
  ir::Program p = program(path, max_batch);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  int matched = 0;
  for (const auto& r : p.routines)
    for (const auto& s : r.stmts) {
      auto g = match_contraction(p, s);
      if (!g) continue;
      ++matched;
      std::vector<std::vector<double>> a(p.buffers.size());  // only the three it touches
      for (int i : {s.out.buf, s.body->args[0]->access.buf, s.body->args[1]->access.buf}) {
        auto& v = a[static_cast<size_t>(i)];
        if (!v.empty()) continue;
        v.resize(static_cast<size_t>(p.buffers[static_cast<size_t>(i)].elements()));
        for (auto& x : v) x = u(rng);
      }
      auto b = a;
      run_nest(p, s, n, a);
      run_gemm(*g, n, b);
      INFO(path << ": " << s.what << " -> " << p.buffers[static_cast<size_t>(s.out.buf)].name);
      const auto& x = a[static_cast<size_t>(s.out.buf)];
      const auto& y = b[static_cast<size_t>(s.out.buf)];
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1.0, std::abs(x[i])));
      REQUIRE(worst < 1e-12);
    }
  return matched;
}

}  // namespace

TEST_CASE("every contraction's GEMM computes its nest", "[contraction]") {
  namespace fs = std::filesystem;
  const fs::path root = CANNL_SOURCE_DIR;
  int specs = 0, total = 0;
  // The gradcheck specs (every operator, small) and two examples (the big ones take long
  // in a debug build).
  std::vector<fs::path> paths = {root / "specs/fashion_mlp.cannl", root / "specs/fashion_einsum.cannl"};
  for (const auto& f : fs::directory_iterator(root / "tests/gradcheck/specs"))
    if (f.path().extension() == ".cannl") paths.push_back(f.path());
  for (const auto& path : paths) {
    total += check_spec(path.string());
    ++specs;
  }
  CHECK(specs > 40);
  CHECK(total > 100);  // products, their gradients, einsums
}

TEST_CASE("fashion_mlp: every matrix product is a GEMM", "[contraction]") {
  ir::Program p = program(std::string(CANNL_SOURCE_DIR) + "/specs/fashion_mlp.cannl", 256);
  int gemms = 0;
  for (const auto& s : p.routine("train_step")->stmts) gemms += match_contraction(p, s).has_value();
  CHECK(gemms == 8);  // 3 forward, 2 x 2 + 1 backward (the input's gradient is not needed)
}

TEST_CASE("the CUDA emitter: kernels, reductions, atomics, cuBLAS", "[cuda]") {
  auto cu = [](const std::string& spec) {
    ir::Program p = program(std::string(CANNL_SOURCE_DIR) + "/specs/" + spec + ".cannl", 256);
    CudaOptions o;
    o.spec = spec + ".cannl";
    for (const auto& f : emit_cuda(p, o))
      if (f.name == p.model + ".cu") return f.text;
    FAIL("no .cu");
    return std::string();
  };
  auto has = [](const std::string& t, const std::string& part) { return t.find(part) != std::string::npos; };
  const std::string mlp = cu("fashion_mlp");
  CHECK(has(mlp, "gemm(m, __FILE__, __LINE__, CUBLAS_OP_T, CUBLAS_OP_N, 512, n, 784, w1, 784, 0, x, 784, 0, h1_mm, 512, 0, 1);"));
  CHECK(has(mlp, "CUBLAS_COMPUTE_32F"));
  CHECK(has(mlp, "acc = cannl_warp_sum(acc);"));   // bias gradients: a warp per element
  CHECK(has(mlp, "if (i_ >= n * 512) return;"));   // the run-time batch bounds the grid
  CHECK_FALSE(has(mlp, "atomicAdd"));
  const std::string cnn = cu("fashion_cnn");
  CHECK(has(cnn, "atomicAdd(&"));                   // the input gradient of a convolution
  CHECK(has(cnn, "cannl_block_sum"));               // a kernel gradient: a block per element
}
