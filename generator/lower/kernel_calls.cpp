// kernel_calls.cpp — attention and embedding as calls of the runtime's kernels (ir::Call;
// see lowerings.h).
#include "lower/lowerings.h"

#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "lower/lower_context.h"

namespace cannl {

namespace {

// An operand x[i] of a stored tensor x : [B.. | m, H.., w] (no input axes) is read in place:
// the buffer of x at offset i * (H.. w) with rows of m * H.. * w (ir::Call's views).
struct View {
  int buf = -1;
  long off = 0, row = 0;
};
std::optional<View> in_place(const LowerContext& c, const Expr* e) {
  if (e->kind != ExprKind::Index || e->slice_end > 0) return std::nullopt;
  const Expr* x = e->operands[0].get();
  const int xb = c.tensor_buffer(x);
  if (xb < 0) return std::nullopt;
  const Shape &xs = c.shape(x), &es = c.shape(e);
  const auto& xo = xs.row(AxisKind::Output);
  if (!xs.row(AxisKind::Input).empty() || xo.size() < 2 || !(xs.row(AxisKind::Batch) == es.row(AxisKind::Batch)))
    return std::nullopt;
  long inner = 1;
  for (size_t i = 1; i < xo.size(); ++i) inner *= xo[i].size;
  return View{xb, static_cast<long>(e->number) * inner, xo[0].size * inner};
}

}  // namespace

// attention(q : [B.., t | H.., e], k : [B.., s | G.., e], v : [B.., s | G.., f]): an opaque
// call of the runtime's flash-style kernel (runtime-lib/cannl_attention.h) per sequence and
// query head, which saves the log-sum-exp of each query's scores for the backward call; no
// T x S buffer exists. Grouped-query (G.. a prefix of H..): query head h reads key/value head
// h / group, group = H.. / G.. query heads per key/value head.
void lower_attention(LowerContext& c, const BoundCall& bc, int r) {
  const Expr *qe = bc.tensors[0], *ke = bc.tensors[1], *ve = bc.tensors[2];
  ir::Call call;
  // q, k and v in place when they are parts of one stored tensor (a fused qkv projection);
  // otherwise each its own buffer (a copy when one would be another's).
  auto qv = in_place(c, qe), kv = in_place(c, ke), vv = in_place(c, ve);
  if (qv && kv && vv && qv->buf == kv->buf && kv->buf == vv->buf) {
    call.q = call.k = call.v = qv->buf;
    std::tie(call.q_off, call.q_row) = std::pair(qv->off, qv->row);
    std::tie(call.k_off, call.k_row) = std::pair(kv->off, kv->row);
    std::tie(call.v_off, call.v_row) = std::pair(vv->off, vv->row);
  } else {
    call.q = c.stored(qe, "q", {});
    call.k = c.stored(ke, "k", {call.q});
    call.v = c.stored(ve, "v", {call.q, call.k});
  }
  call.o = r;
  const Shape &qs = c.shape(qe), &ks = c.shape(ke), &vs = c.shape(ve);
  const auto& qb = qs.row(AxisKind::Batch);
  call.batch = qb.front().is_batch;
  for (size_t i = call.batch ? 1 : 0; i + 1 < qb.size(); ++i) call.seqs *= qb[i].size;
  call.tq = qb.back().size;
  call.tk = ks.row(AxisKind::Batch).back().size;
  const auto& qo = qs.row(AxisKind::Output);
  for (size_t i = 0; i + 1 < qo.size(); ++i) call.heads *= qo[i].size;
  const auto& ko = ks.row(AxisKind::Output);
  long kv_heads = 1;
  for (size_t i = 0; i + 1 < ko.size(); ++i) kv_heads *= ko[i].size;
  call.group = call.heads / kv_heads;
  call.e = qo.back().size;
  call.f = vs.row(AxisKind::Output).back().size;
  auto option = [&](const char* k) { auto it = bc.values.find(k); return it == bc.values.end() ? 0.0 : it->second; };
  call.causal = option("causal") != 0;
  call.window = static_cast<long>(option("window"));
  const double scale = option("scale");  // absent (its default): 1 / sqrt(e)
  call.scale = scale != 0 ? scale : 1 / std::sqrt(static_cast<double>(call.e));
  // lse [B.., H.., t]: the sequences, the heads, the queries
  std::vector<ir::Dim> dims;
  for (size_t i = 0; i + 1 < qb.size(); ++i) dims.push_back({qb[i].is_batch ? c.max_batch() : qb[i].size, qb[i].is_batch});
  for (size_t i = 0; i + 1 < qo.size(); ++i) dims.push_back({qo[i].size, false});
  dims.push_back({call.tq, false});
  call.lse = c.temp_dims("lse", dims, "log-sum-exp of each query's scores");
  c.emit_call(call);
}

// embedding(table : [d.. -> n], ids : [B.. | ] int) -> [B.. | d..]: a gather, an opaque
// call (ir::Call) whose gradient is a scatter-add into the table's gradient, each feature's
// positions added in order (the same bits for any thread count). An id outside [0, n)
// selects a zero row (the programs check ids against cannl_tensor_info.ids first).
void lower_embedding(LowerContext& c, const BoundCall& bc, int r) {
  const Expr *table = bc.tensors[0], *ids = bc.tensors[1];
  const Shape &rs = c.shape(bc.call), &ts = c.shape(table);
  ir::Call call;
  call.kind = ir::Call::Kind::EmbeddingForward;
  call.table = c.stored(table, "table", {});
  call.ids = c.stored(ids, "ids", {});
  call.o = r;
  const auto& rb = rs.row(AxisKind::Batch);
  call.batch = !rb.empty() && rb.front().is_batch;
  for (size_t i = call.batch ? 1 : 0; i < rb.size(); ++i) call.seqs *= rb[i].size;
  call.rows = ts.row(AxisKind::Output).at(0).size;
  for (const Axis& a : ts.row(AxisKind::Input)) call.width *= a.size;
  c.emit_call(call);
}

}  // namespace cannl
