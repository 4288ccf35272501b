// c_gemm.cpp — C for contraction nests (see c_gemm.h).
#include "emit/c_gemm.h"

#include <fmt/format.h>

namespace cannl {

namespace {

struct Operand {
  std::string ptr;  // C pointer expression
  long s0, s1;      // strides of its two matrix axes (row, column)
};

// An outer loop of one iteration (not the batch loop): no loop printed, its variable is 0.
bool one_pass(const Gemm& g, int it) { return it < static_cast<int>(g.one_pass.size()) && g.one_pass[static_cast<size_t>(it)]; }

// The pointer of an operand at the current outer loop variables.
std::string pointer(const ir::Program& p, const ir::Access& a, const Gemm& g, const GemmSite& site) {
  std::string s = (*site.buffer_names)[static_cast<size_t>(a.buf)];
  long base = access_base(p, a);
  std::string off;
  for (int it : g.outer) {
    long st = iter_stride(p, a, it);
    if (st == 0 || one_pass(g, it)) continue;
    std::string v = site.vars[static_cast<size_t>(it)];
    off += " + " + (st == 1 ? v : fmt::format("{} * {}", v, st));
  }
  if (base) off += fmt::format(" + {}", base);
  return off.empty() ? s : s + off;
}

// cblas arguments for a row-major operand with row stride s0 and column stride s1 over a
// rows x cols matrix: {transposed, leading dimension}; none when neither stride is 1.
bool blas_layout(long s0, long s1, long rows, long cols, bool& trans, long& ld) {
  // A stride of 0 is an axis of length 1: any value works there.
  if ((s1 == 1 || (s1 == 0 && cols == 1)) && (s0 == 0 ? true : s0 >= cols)) {
    trans = false;
    ld = s0 == 0 ? std::max(cols, 1L) : s0;
    return true;
  }
  if ((s0 == 1 || (s0 == 0 && rows == 1)) && (s1 == 0 ? true : s1 >= rows)) {
    trans = true;
    ld = s1 == 0 ? std::max(rows, 1L) : s1;
    return true;
  }
  return false;
}

std::string blas_call(const Gemm& g, const std::string& a, const std::string& b, const std::string& c,
                      const GemmSite& site, bool overwrite) {
  // Row-major C (column stride 1), or its transpose: C^T = B^T A^T.
  struct View {
    const Gemm::Axis *rows, *cols;
    std::string a, b;
    long a0, a1, b0, b1, c0, c1;
  };
  View v1{&g.m, &g.n, a, b, g.m.stride_a, g.k.stride_a, g.k.stride_b, g.n.stride_b, g.m.stride_c, g.n.stride_c};
  View v2{&g.n, &g.m, b, a, g.n.stride_b, g.k.stride_b, g.k.stride_a, g.m.stride_a, g.n.stride_c, g.m.stride_c};
  for (const View* v : {&v1, &v2}) {
    bool tc, ta, tb;
    long ldc, lda, ldb;
    const long R = v->rows->max_size, C = v->cols->max_size, K = g.k.max_size;
    if (!blas_layout(v->c0, v->c1, R, C, tc, ldc) || tc) continue;
    if (!blas_layout(v->a0, v->a1, R, K, ta, lda) || !blas_layout(v->b0, v->b1, K, C, tb, ldb)) continue;
    return fmt::format("cblas_{}gemm(CblasRowMajor, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                       site.f64 ? "d" : "s", ta ? "CblasTrans" : "CblasNoTrans", tb ? "CblasTrans" : "CblasNoTrans",
                       v->rows->size, v->cols->size, g.k.size, site.alpha, v->a, lda, v->b, ldb,
                       overwrite ? "0" : "1", c, ldc);
  }
  return "";
}

}  // namespace

std::string emit_gemm(const ir::Program& p, const ir::Stmt& s, const Gemm& g, const GemmSite& site, bool overwrite) {
  auto role = [&](const Gemm::Axis& ax) {
    std::string names;
    for (int it : ax.iters) names += (names.empty() ? "" : ", ") + site.vars[static_cast<size_t>(it)];
    return names.empty() ? ax.size : fmt::format("{} ({})", ax.size, names);
  };
  const auto& bn = *site.buffer_names;
  const std::string a = pointer(p, g.a, g, site), b = pointer(p, g.b, g, site), c = pointer(p, s.only().out, g, site);
  const std::string blas = site.blas ? blas_call(g, a, b, c, site, overwrite) : "";
  std::string loops;
  for (int it : g.outer)
    if (!one_pass(g, it)) loops += (loops.empty() ? ", for each " : ", ") + site.vars[static_cast<size_t>(it)];
  const bool sym = g.symmetric && overwrite && blas.empty() && site.int8 < 0;
  std::string out = fmt::format("    /* matrix product {} {} {} . {}: M = {}, N = {}, K = {}{}{}{}{} */\n",
                                bn[static_cast<size_t>(s.only().out.buf)], overwrite ? "=" : "+=", bn[static_cast<size_t>(g.a.buf)],
                                bn[static_cast<size_t>(g.b.buf)], role(g.m), role(g.n), role(g.k), loops,
                                g.dot && blas.empty() && site.int8 < 0 ? ", as dot products" : "",
                                sym ? ", symmetric: the upper triangle, mirrored" : "",
                                site.int8 >= 0 ? fmt::format(", {} as int8 rows", bn[static_cast<size_t>(site.int8)])
                                               : "");
  int depth = 0;
  for (int it : g.outer) {
    if (one_pass(g, it)) continue;
    const ir::Iter& iter = s.iters[static_cast<size_t>(it)];
    const std::string& v = site.vars[static_cast<size_t>(it)];
    out += std::string(static_cast<size_t>(4 * (depth + 1)), ' ') +
           fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})\n", v, iter.batch ? "n" : std::to_string(iter.size));
    ++depth;
  }
  const std::string ind(static_cast<size_t>(4 * (depth + 1)), ' ');
  if (site.int8 >= 0) {  // the weights as int8 rows (passes/quantize.h): X's rows against them
    const bool w_is_a = g.a.buf == site.int8;
    const std::string &rows = site.int8_rows, &scales = site.int8_scales;
    const Gemm::Axis &xr = w_is_a ? g.n : g.m, &wr = w_is_a ? g.m : g.n;
    return out + ind +
           fmt::format("cannl_sgemm_q8(m->gemm, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});\n",
                       xr.size, wr.size, g.k.size, site.alpha, w_is_a ? b : a, w_is_a ? g.n.stride_b : g.m.stride_a,
                       w_is_a ? g.k.stride_b : g.k.stride_a, rows, g.k.max_size, scales, c, xr.stride_c,
                       wr.stride_c, overwrite ? 1 : 0);
  }
  if (!blas.empty()) return out + ind + blas + "\n";
  if (sym)
    return out + ind +
           fmt::format("cannl_{}gemm_sym(m->gemm, {}, {}, {}, {}, {}, {}, {}, {}, {});\n", site.f64 ? "d" : "s",
                       g.m.size, g.k.size, site.alpha, a, g.m.stride_a, g.k.stride_a, c, g.m.stride_c, g.n.stride_c);
  if (g.dot)
    return out + ind +
           fmt::format("cannl_{}gemm_dot(m->gemm, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});\n",
                       site.f64 ? "d" : "s", g.m.size, g.n.size, g.k.size, site.alpha, a, g.m.stride_a, b,
                       g.n.stride_b, c, g.m.stride_c, g.n.stride_c, overwrite ? 1 : 0);
  out += ind + fmt::format("cannl_{}gemm(m->gemm, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});\n",
                           site.f64 ? "d" : "s", g.m.size, g.n.size, g.k.size, site.alpha, a, g.m.stride_a, g.k.stride_a,
                           b, g.k.stride_b, g.n.stride_b, c, g.m.stride_c, g.n.stride_c, overwrite ? 1 : 0);
  return out;
}

}  // namespace cannl
