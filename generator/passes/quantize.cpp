// quantize.cpp — which params the forward-only state keeps as int8 rows (see quantize.h).
#include "passes/quantize.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "emit/c_gemm.h"
#include "emit/contraction.h"

namespace cannl {

namespace {

constexpr long kAlign = 64;
long aligned(long bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The row length a contraction reads param `w` with, or 0 when it does not read it as int8
// rows can be read (quantize.h).
long product_row(const ir::Program& p, const ir::Stmt& s, int w) {
  const std::optional<Gemm> g = recognise_contraction(p, s);
  if (!g || g->flops() < kGemmMinFlops) return 0;
  const bool is_a = g->a.buf == w, is_b = g->b.buf == w;
  if (is_a == is_b) return 0;  // not an operand, or both
  const ir::Access& acc = is_a ? g->a : g->b;
  const Gemm::Axis& rows = is_a ? g->m : g->n;
  const long k_stride = is_a ? g->k.stride_a : g->k.stride_b;
  const long r_stride = is_a ? g->m.stride_a : g->n.stride_b;
  if (k_stride != 1 || access_base(p, acc) != 0) return 0;
  for (int it : g->outer)
    if (iter_stride(p, acc, it) != 0) return 0;
  const long row = g->k.max_size;
  const long elements = p.buffers[static_cast<size_t>(w)].elements();
  if (row <= 0 || elements % row != 0) return 0;
  // every row of the param, one after the other (a single row: any row stride)
  if (rows.max_size * row != elements || (rows.max_size > 1 && r_stride != row)) return 0;
  return row;
}

}  // namespace

void quantize_weights(ir::Program& p) {
  std::vector<const ir::Routine*> infer;
  for (ir::RoutineKind k : {ir::RoutineKind::Forward, ir::RoutineKind::Eval, ir::RoutineKind::Decode})
    if (const ir::Routine* r = p.routine(k)) infer.push_back(r);
  long at = 0;
  for (int w : p.params) {
    ir::Buffer& b = p.buffers[static_cast<size_t>(w)];
    if (b.ids > 0 || b.stack > 0) continue;
    long row = 0;
    bool ok = true;
    auto agree = [&](long r) {
      if (r <= 0 || (row > 0 && r != row)) ok = false;
      row = r;
    };
    for (const ir::Routine* r : infer)
      for (const ir::Stmt& s : r->stmts) {
        if (!ok) break;
        if (s.call) {
          const ir::Call& c = *s.call;
          const std::vector<int> reads = ir::call_reads(c);
          if (std::find(reads.begin(), reads.end(), w) == reads.end()) continue;
          if (c.kind == ir::Call::Kind::EmbeddingForward && c.table == w &&
              std::count(reads.begin(), reads.end(), w) == 1 && c.rows * c.width == b.elements())
            agree(c.width);
          else
            ok = false;
          continue;
        }
        std::vector<const ir::Expr*> loads;
        ir::collect_loads(s, loads);
        const auto n = std::count_if(loads.begin(), loads.end(), [&](const ir::Expr* e) { return e->access.buf == w; });
        if (n == 0) continue;
        if (!s.product || n != 1) {
          ok = false;
          continue;
        }
        agree(product_row(p, s, w));
      }
    if (!ok || row == 0) continue;
    b.int8_row = row;
    b.int8_at = at;
    at += aligned(b.elements()) + aligned(b.elements() / row * 4);
  }
  p.int8_bytes = at;
}

void quantize_rows_q8(const std::vector<float>& w, long rows, long cols, std::vector<int8_t>& q,
                      std::vector<float>& scale) {
  q.assign(static_cast<size_t>(rows * cols), 0);
  scale.assign(static_cast<size_t>(rows), 0.0f);
  for (long r = 0; r < rows; ++r) {
    const float* x = w.data() + r * cols;
    float m = 0.0f;
    for (long k = 0; k < cols; ++k) m = std::fabs(x[k]) > m ? std::fabs(x[k]) : m;
    const float s = m / 127.0f;
    scale[static_cast<size_t>(r)] = s;
    for (long k = 0; k < cols; ++k) {
      float v = s > 0.0f ? std::round(x[k] / s) : 0.0f;
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      q[static_cast<size_t>(r * cols + k)] = static_cast<int8_t>(v);
    }
  }
}

}  // namespace cannl
