// quantize.cpp — which params the forward-only state keeps as int8 rows (see quantize.h).
#include "passes/quantize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

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

// The row length param `w` is read with by `stmts` (a routine's, or a block body's where `w` is
// the formal a stacked param is bound to): agree() for each use the scheme allows, fail() for
// any other (quantize.h). `views` are w's views: reading one is a use the scheme does not allow;
// so is an embedding lookup unless `lookups` (a block body's: its function takes rows and scales
// for products only) and any read of a stacked storage outside the block calls (`stacked`).
void scan_uses(const ir::Program& p, const std::vector<const ir::Stmt*>& stmts, int w, const std::set<int>& views,
               bool lookups, bool stacked, const std::function<void(long)>& agree,
               const std::function<void()>& fail) {
  const long elements = p.buffers[static_cast<size_t>(w)].elements();
  for (const ir::Stmt* t : stmts) {
    const ir::Stmt& s = *t;
    if (s.call) {
      const ir::Call& c = *s.call;
      const std::vector<int> reads = ir::call_reads(c);
      if (std::any_of(reads.begin(), reads.end(), [&](int b) { return views.count(b) > 0; })) fail();
      if (std::find(reads.begin(), reads.end(), w) == reads.end()) continue;
      if (c.kind == ir::Call::Kind::EmbeddingForward && c.table == w && lookups && !stacked &&
          std::count(reads.begin(), reads.end(), w) == 1 && c.rows * c.width == elements)
        agree(c.width);
      else if (!ir::is_block_call(c.kind))
        fail();
      continue;  // (a block call: its body, in quantize_weights)
    }
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    if (std::any_of(loads.begin(), loads.end(), [&](const ir::Expr* e) { return views.count(e->access.buf) > 0; }))
      fail();
    const auto n = std::count_if(loads.begin(), loads.end(), [&](const ir::Expr* e) { return e->access.buf == w; });
    if (n == 0) continue;
    if (!s.product || n != 1 || stacked)
      fail();
    else
      agree(product_row(p, s, w));
  }
}

}  // namespace

void quantize_weights(ir::Program& p) {
  std::vector<const ir::Routine*> infer;
  for (ir::RoutineKind k : {ir::RoutineKind::Forward, ir::RoutineKind::Eval, ir::RoutineKind::Decode})
    if (const ir::Routine* r = p.routine(k)) infer.push_back(r);
  // The row length buffer w (a param, or the stacked storage of a rolled block's param) is read
  // with by the forward-only state, or 0 when it is not read as the scheme allows.
  auto row_of = [&](int w) {
    long row = 0;
    bool ok = true;
    auto agree = [&](long r) {
      if (r <= 0 || (row > 0 && r != row)) ok = false;
      row = r;
    };
    auto fail = [&] { ok = false; };
    std::set<int> views;  // (read alone, a view is not read as the scheme allows)
    for (size_t v = 0; v < p.buffers.size(); ++v)
      if (p.buffers[v].view_of == w) views.insert(static_cast<int>(v));
    const long elements = p.buffers[static_cast<size_t>(w)].elements();
    const bool stacked = p.buffers[static_cast<size_t>(w)].stack > 0;  // (lower/roll.h)
    for (const ir::Routine* r : infer) {
      std::vector<const ir::Stmt*> stmts;
      for (const ir::Stmt& s : r->stmts) stmts.push_back(&s);
      scan_uses(p, stmts, w, views, true, stacked, agree, fail);
      // A rolled block reading a stacked param: each instance's slice, bound whole to a formal,
      // read as the scheme allows in the inference or decode body. (A param every instance
      // shares, bound whole: float, as any other read through a block call.)
      for (const ir::Stmt& s : r->stmts) {
        if (!s.call || !ir::is_block_call(s.call->kind)) continue;
        const ir::Call& c = *s.call;
        const ir::Block& bl = p.blocks[static_cast<size_t>(c.block)];
        const ir::Routine& body = ir::body_of(bl, c.kind);
        const auto [from, to] = ir::body_span(bl, c.kind);
        std::vector<const ir::Stmt*> span;
        for (size_t i = from; i < to; ++i) span.push_back(&body.stmts[i]);
        for (const ir::Binding& bd : c.binds) {
          const auto bound = [&](int b) { return b >= 0 && (b == w || views.count(b) > 0); };
          if (!bound(bd.buf) && !bound(bd.first) && !bound(bd.last)) continue;
          const long slice = p.buffers[static_cast<size_t>(bd.formal)].elements();
          if (!stacked || bd.buf != w || bd.offset != 0 || bd.stride != slice || bd.shift != 0 || bd.modulo != 0 ||
              bd.first >= 0 || bd.last >= 0 || slice * c.count != elements ||
              (c.kind != ir::Call::Kind::BlockInfer && c.kind != ir::Call::Kind::BlockDecode))
            fail();
          else
            scan_uses(p, span, bd.formal, {}, false, false, agree, fail);
        }
      }
    }
    return ok ? row : 0;
  };
  std::map<int, long> stacked;  // a stacked param's storage -> its instances' row length (0: not int8)
  long at = 0;
  for (int w : p.params) {
    ir::Buffer& b = p.buffers[static_cast<size_t>(w)];
    if (b.ids > 0) continue;
    // An instance of a rolled block's param (a view of the stacked storage, which the block calls
    // slice per instance): int8 when the storage's every read is; then all its instances are,
    // their rows and scales laid out one instance after the other (Program::params order).
    long row;
    if (b.view_of >= 0) {
      auto it = stacked.find(b.view_of);
      if (it == stacked.end()) it = stacked.emplace(b.view_of, row_of(b.view_of)).first;
      row = it->second;
    } else {
      row = row_of(w);
    }
    if (row <= 0 || b.elements() % row != 0) continue;
    b.int8_row = row;
    b.int8_at = at;
    at += aligned(b.elements()) + aligned(b.elements() / row * 4);
    if (b.view_of >= 0) p.buffers[static_cast<size_t>(b.view_of)].int8_row = row;  // (its storage: quantize.h)
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
