// inline_virtual.cpp — virtual nodes: tensors computed where they are read, never stored.
//
// Takes: any Program. A tensor B of a routine is virtual (OCANNL's term) when one nest P
// stores it pointwise over the whole buffer (`B[i...] = e`, no reduction) and either
//   - e is cheap (cost <= 2: a copy, a scaled load, a bias add), or
//   - B is read once: one load in one reader whose every loop indexes it (each cell read once),
// and it does not escape (OCANNL's rules, read for a whole routine):
//   - the host never sees it: not a param, input, optimiser state, param gradient, output,
//     loss or metric of that routine (those are the API's, see ir.h live_out);
//   - it is not a reduction (never duplicate a reduction: P must be a plain `=`), and P is
//     the only nest writing it;
//   - a backward (or any) reader in the same routine gets it only under the rules above:
//     an expensive tensor that the backward pass needs is stored, not recomputed;
//   - a contraction reader (the GEMM pattern, rewrite.h) keeps its form: only a load or a
//     load times a constant is inlined into one, and only when every index stays a single
//     loop variable (an im2col gather is not inlined into its product);
//   - every read is inside B (a padded read outside would be 0, not e), comes after P, and
//     nothing between P and the reader writes what e reads;
//   - e has at most 64 nodes (a longer expression is stored).
// Guarantees: each load of B is replaced by e with P's loops renamed into the reader's
// indices (the readers then simplified: a contraction regains its  (a * b) * c  form), and P
// is removed;
// the values are the same up to float rounding (recomputed by the same expression).
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

using ir::Expr;
using ir::ExprP;
using ir::Op;

// (Not a load times a wide constant: folded into a matrix product as its alpha, 1/255 rounds
// differently from the division, and Adam amplifies that past 1e-6 in ten steps.)
bool scaled_load(const Expr& e) {
  return e.op == Op::Load ||
         (e.op == Op::Mul && e.args[0]->op == Op::Load && e.args[1]->op == Op::Const && !e.args[1]->wide);
}

// Expressions larger than this are stored, not inlined: a value computed in one place is
// cheaper than a long expression carried into every reader (and each inlining copies no more
// than this, which keeps the pass linear in the routine's length).
constexpr int kMaxInlined = 64;

// The number of nodes of `e`, counting up to `limit` at most.
int size_up_to(const Expr& e, int limit) {
  int n = 1;
  for (const ExprP& a : e.args) {
    if (n >= limit) break;
    n += size_up_to(*a, limit - n);
  }
  return n;
}

// Every loop of s indexes the access (each cell of the buffer read once by the nest).
bool reads_each_cell_once(const ir::Stmt& s, const ir::Access& a) {
  std::set<int> used;
  for (const auto& ix : a.index)
    for (const auto& t : ix.terms) used.insert(t.iter);
  return used.size() == s.iters.size() && passes::injective(a);
}

// e (in P's loops) read at `at` (in the reader's loops).
ExprP instantiate(const ir::Stmt& producer, const ir::Access& at) {
  const ir::Assign& def = producer.only();
  std::vector<ir::Affine> sigma(producer.iters.size(), ir::Affine::constant(0));
  for (size_t d = 0; d < def.out.index.size(); ++d)
    sigma[static_cast<size_t>(def.out.index[d].terms[0].iter)] = at.index[d];
  return passes::rewrite(def.body, [&](const Expr& l) -> ExprP {
    auto c = std::make_shared<Expr>(l);
    for (auto& ix : c->access.index) ix = passes::compose(ix, sigma);
    return c->access == l.access ? nullptr : c;  // (the same read: e's nodes shared, not copied)
  });
}

// The nests of a routine that load and that write each buffer, by position (positions stay:
// an inlined producer is marked gone, and the routine compacted at the end). `loaders` may
// hold nests that no longer load a buffer (after a substitution simplified a load away).
struct Index {
  std::vector<std::set<size_t>> loaders, writers;
  std::vector<bool> gone;
  Index(const ir::Program& p, const ir::Routine& r) : loaders(p.buffers.size()), writers(p.buffers.size()), gone(r.stmts.size()) {
    for (size_t j = 0; j < r.stmts.size(); ++j) {
      std::vector<const Expr*> ls;
      ir::collect_loads(r.stmts[j], ls);
      for (const Expr* l : ls) loaders[static_cast<size_t>(l->access.buf)].insert(j);
      if (r.stmts[j].call)
        for (int b : ir::call_reads(*r.stmts[j].call)) loaders[static_cast<size_t>(b)].insert(j);
      for (int w : passes::writes(r.stmts[j])) writers[static_cast<size_t>(w)].insert(j);
    }
  }
};

bool try_inline(ir::Program& p, ir::Routine& r, size_t i, const std::set<int>& live, Index& x) {
  const ir::Stmt& pr = r.stmts[i];
  if (!pr.single()) return false;
  const ir::Assign& def = pr.only();
  const int b = def.out.buf;
  if (def.accum != ir::Accum::Set || pr.sequential || !passes::covers_buffer(p, pr, def.out) ||
      !passes::in_arena(p.buffers[static_cast<size_t>(b)]) || live.count(b) ||
      size_up_to(*def.body, kMaxInlined + 1) > kMaxInlined)
    return false;
  const std::set<int> inputs = passes::reads(pr);
  if (inputs.count(b)) return false;
  if (x.writers[static_cast<size_t>(b)].size() != 1) return false;  // another writer
  for (size_t j : x.loaders[static_cast<size_t>(b)])
    if (!x.gone[j] && r.stmts[j].call) return false;  // a kernel call reads the stored buffer
  // The readers: all after P, none after something that writes what e reads (or writing it).
  std::vector<size_t> readers;
  for (size_t j : x.loaders[static_cast<size_t>(b)])
    if (!x.gone[j] && j != i && passes::count_loads(r.stmts[j], b) > 0) readers.push_back(j);
  if (readers.empty() || readers.front() < i) return false;
  for (int in : inputs) {
    const auto& w = x.writers[static_cast<size_t>(in)];
    if (auto it = w.upper_bound(i); it != w.end() && *it <= readers.back()) return false;
  }
  const bool cheap = passes::cost(*def.body) <= 2;
  int loads = 0;
  for (size_t j : readers) {
    const ir::Stmt& s = r.stmts[j];
    if (passes::is_contraction(s)) {
      // Only a scaled load goes into a product, and only when the product keeps its form:
      // an im2col gather (shifted, padded reads) stays stored, so the product stays a GEMM.
      if (!scaled_load(*def.body)) return false;
      ir::Stmt trial = s;
      trial.only().body = passes::simplify_expr(passes::rewrite(s.only().body, [&](const Expr& l) -> ExprP {
        return l.op == Op::Load && l.access.buf == b ? instantiate(pr, l.access) : nullptr;
      }));
      if (!passes::is_contraction(trial)) return false;
    }
    std::vector<const Expr*> ls;
    ir::collect_loads(s, ls);
    for (const Expr* l : ls) {
      if (l->access.buf != b) continue;
      if (!passes::always_in_range(p, s, l->access)) return false;
      if (!cheap && !reads_each_cell_once(s, l->access)) return false;
    }
    loads += passes::count_loads(s, b);
  }
  if (!cheap && loads != 1) return false;
  const ir::Stmt producer = pr;
  for (size_t j : readers) {
    ir::Stmt& s = r.stmts[j];
    auto sub = [&](const ExprP& e) {
      return passes::rewrite(e, [&](const Expr& l) -> ExprP {
        return l.op == Op::Load && l.access.buf == b ? instantiate(producer, l.access) : nullptr;
      });
    };
    for (ir::Assign& a : s.assigns) a.body = passes::simplify_expr(sub(a.body));
    x.loaders[static_cast<size_t>(b)].erase(j);
    for (int in : inputs) x.loaders[static_cast<size_t>(in)].insert(j);
  }
  x.gone[i] = true;
  x.writers[static_cast<size_t>(b)].erase(i);
  return true;
}

}  // namespace

void inline_virtual(ir::Program& p, const PassOptions&) {
  for (ir::Routine* rp : ir::all_routines(p)) {
    ir::Routine& r = *rp;
    const std::set<int> live = ir::live_out(p, r);
    Index x(p, r);
    for (size_t i = 0; i < r.stmts.size(); ++i)
      if (!x.gone[i]) try_inline(p, r, i, live, x);
    std::vector<ir::Stmt> kept;
    for (size_t i = 0; i < r.stmts.size(); ++i)
      if (!x.gone[i]) kept.push_back(std::move(r.stmts[i]));
    r.stmts = std::move(kept);
  }
}

}  // namespace cannl
