// decode.cpp — the decode routine of generation (contract v1 §6): one new position per call.
//
// Takes: a Program after fusion, dce and plan_blocks (before memory planning), whose forward
// routine reads exactly one input, integer ids [batch, T], and has causal attention over it.
// Guarantees: when every nest of forward that the first output needs is per position — it
// computes each position of the sequence from that position's values only, but for causal
// attention, which reads the keys and values of the positions up to its query's — a routine
// of kind Decode is added that steps n sequences at once (Interface::slots = max_batch):
// forward's nests for the first output with
//   - the batch loops kept (row b < n);
//   - the sequence loop (the loop over the T positions) at the row's position pos[b]
//     (Iter::at_pos), and the embedding and attention calls likewise (Call::at_pos);
//   - the keys and values of each attention written to and read from a cache buffer
//     `<k>_cache` (Role::Cache, [batch, T, ...]: its first axis a batch axis of sequence slots,
//     one per example of the state's cap, run-time-sized with the state, in its arena's scaled
//     part; indexed by the row's batch loop, which the emitter prints as the row's slot seq[b];
//     q, k and v read in place from one fused buffer share its cache, queries included) that
//     the routine keeps across calls; a windowed attention's (window W < T) is a ring of the
//     last W positions (Buffer::ring: [batch, W, ...], position s in row s % W; Call::ring),
//     grouped-query's holds the key/value heads only (the buffers' own layout);
//   - every per-position buffer with a batch axis read and written at position 0 of row b
//     ([b, 0, ...]), so a product's rows are one strided n-row matrix; a nest at pos without a
//     batch loop (a table over positions) given one, each row computing its own position's
//     cells; a sequence loop no index reads any more dropped;
// after calls at positions 0 .. p of a sequence, the output at p equals forward's at p (the
// same nests, the same order of sums: within float rounding, the matrix products' blocking
// aside).
// A zero_first sum writing a cache (a projection straight into the fused qkv buffer) becomes a
// fill of the position's cells and the accumulation.
// A rolled repeat block that forward calls (its inference body, Call::Kind::BlockInfer) is
// analysed once, on its body: each formal per position at its actual's axis, the values it
// carries out at the axis of those it carries in. Its decode body (Block::decode, kind
// BlockDecode) is the inference body's nests over rows as above, its attention's keys and
// values in cache formals `<k>_cache` [batch, T, ...] that the decode routine's call of the
// block (Call::Kind::BlockDecode, the inference call's bindings) binds to one stack of every
// instance's cache, `<block>_<k>_cache` [count, batch, T, ...] (Role::Cache), instance l's at
// slot l. The decode bodies are planned as plan_blocks plans the others (plan_block_body).
// A model that is not a causal language model of this form gets no decode routine (nothing
// changes); so does one where a nest mixes positions otherwise (a sum over positions, a shift)
// or reads the batch count.
#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <map>

#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace cannl {

namespace {

struct Plan {
  long T = 0;
  long slots = 0;                // the caches' sequence slots: max_batch
  std::vector<int> seqdim;       // per buffer: the axis holding the position, or -1
  std::map<int, int> cache_of;   // attention k/v buffer -> its cache (a body's: a formal of the body)
  std::map<int, int> stack_of;   // a body's cache formal -> the stack of every instance's cache
  // A rolled block's inference body called by forward: the nests decode runs, each one's
  // sequence loop (by body nest).
  struct Body {
    std::vector<size_t> keep;
    std::vector<int> seq_iter;
  };
  std::map<int, Body> bodies;    // by block
};

bool single(const ir::Affine& a, int it) { return a.is_single_iter() && a.terms[0].iter == it; }

bool uses(const ir::Affine& a, int it) {
  for (const auto& t : a.terms)
    if (t.iter == it) return true;
  return false;
}

// Whether e reads the batch count n (a mean over examples): not one sequence's value.
bool reads_n(const ir::Expr& e) {
  if (e.op == ir::Op::Scalar && e.name == "n") return true;
  for (const auto& a : e.args)
    if (reads_n(*a)) return true;
  return false;
}

void index_iters(const ir::Expr& e, std::set<int>& out) {
  if (e.op == ir::Op::Index)
    for (const auto& t : e.access.index[0].terms) out.insert(t.iter);
  for (const auto& a : e.args) index_iters(*a, out);
}

// Zeros in the cells a zero_first sum `s` writes: a nest over the loops its written cell
// names (the position's among them), of one assignment `= 0`.
ir::Stmt fill_at_pos(const ir::Stmt& s) {
  const ir::Access& out = s.assigns[0].out;
  std::vector<int> new_pos(s.iters.size(), -1);
  ir::Stmt f;
  for (size_t k = 0; k < s.iters.size(); ++k)
    for (const ir::Affine& a : out.index)
      if (uses(a, static_cast<int>(k)) && new_pos[k] < 0) {
        new_pos[k] = static_cast<int>(f.iters.size());
        f.iters.push_back(s.iters[k]);
      }
  ir::Access at = out;
  for (ir::Affine& a : at.index)
    for (auto& t : a.terms) t.iter = new_pos[static_cast<size_t>(t.iter)];
  f.assigns.push_back({at, ir::Accum::Set, ir::cnst(0)});
  f.line = s.line;
  f.what = s.what;
  return f;
}

// The sequence loop of nest s (-1: none), or false when s mixes positions.
bool nest_seq_iter(const ir::Program& p, const ir::Stmt& s, Plan& pl, int& seq) {
  std::vector<const ir::Access*> acc;
  for (const ir::Assign& a : s.assigns) {
    if (reads_n(*a.body)) return false;
    acc.push_back(&a.out);
  }
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Expr* l : loads) acc.push_back(&l->access);
  seq = -1;
  for (const ir::Access* a : acc) {
    const int d = pl.seqdim[static_cast<size_t>(a->buf)];
    if (d < 0) continue;
    const ir::Affine& f = a->index[static_cast<size_t>(d)];
    if (!f.is_single_iter()) return false;  // a position read at a shift or a constant
    if (seq >= 0 && seq != f.terms[0].iter) return false;
    seq = f.terms[0].iter;
  }
  if (seq < 0) {
    // position(x): a loop whose index is a value, writing a per-position buffer [batch, T, ..].
    std::set<int> idx;
    for (const ir::Assign& a : s.assigns) index_iters(*a.body, idx);
    const ir::Access& out = s.assigns[0].out;
    const auto& dims = p.buffers[static_cast<size_t>(out.buf)].dims;
    if (dims.size() >= 2 && dims[0].batch && dims[1].size == pl.T && out.index[1].is_single_iter() &&
        idx.count(out.index[1].terms[0].iter))
      seq = out.index[1].terms[0].iter;
  }
  if (seq < 0) {
    // Position-independent (params only): it must not write a per-position buffer.
    for (const ir::Assign& a : s.assigns)
      if (pl.seqdim[static_cast<size_t>(a.out.buf)] >= 0) return false;
    return true;
  }
  for (const ir::Assign& a : s.assigns) {
    int d = -1;
    for (size_t k = 0; k < a.out.index.size(); ++k)
      if (uses(a.out.index[k], seq)) {
        if (d >= 0 || !single(a.out.index[k], seq)) return false;
        d = static_cast<int>(k);
      }
    if (d < 0) return false;  // a sum over positions
    int& known = pl.seqdim[static_cast<size_t>(a.out.buf)];
    if (known >= 0 && known != d) return false;
    const auto& dims = p.buffers[static_cast<size_t>(a.out.buf)].dims;
    // The emitters fill a zero_first nest's out at one position: [batch, T, ...] only.
    if (s.zero_first && (d != 1 || !dims[0].batch)) return false;
    known = d;
  }
  for (const ir::Expr* l : loads)
    for (const ir::Affine& f : l->access.index)
      if (uses(f, seq) && !single(f, seq)) return false;
  return true;
}

// The nests of `fwd` that the `targets` buffers depend on, in order.
std::vector<size_t> needed(const std::vector<ir::Stmt>& fwd, std::set<int> targets) {
  std::vector<size_t> keep;
  for (size_t i = fwd.size(); i-- > 0;) {
    bool wanted = false;
    for (int w : passes::writes(fwd[i])) wanted = wanted || targets.count(w) > 0;
    if (!wanted) continue;
    keep.insert(keep.begin(), i);
    for (int b : passes::reads(fwd[i])) targets.insert(b);
  }
  return keep;
}

void rename(ir::Access& a, const std::map<int, int>& to) {
  auto it = to.find(a.buf);
  if (it != to.end()) a.buf = it->second;
}

ir::ExprP rename(const ir::ExprP& e, const std::map<int, int>& to) {
  bool changed = false;
  ir::Expr c = *e;
  if (c.op == ir::Op::Load && to.count(c.access.buf)) {
    rename(c.access, to);
    changed = true;
  }
  for (auto& a : c.args) {
    ir::ExprP n = rename(a, to);
    changed = changed || n != a;
    a = n;
  }
  return changed ? std::make_shared<const ir::Expr>(std::move(c)) : e;
}

// A cache for attention operand b (k or v): `<b>_cache`, [batch, T, ...] (a ring of the last
// `ring` positions when > 0). In a block's body (block >= 0), a formal of the body, and the
// stack of every instance's `<block>_<b>_cache` [count, batch, T, ...] (Plan::stack_of) that
// the decode call binds it to.
int make_cache(ir::Program& p, Plan& pl, int b, long ring, int block) {
  ir::Buffer cb = p.buffers[static_cast<size_t>(b)];
  cb.name = p.unique_name(cb.name + "_cache", block);
  cb.role = ir::Role::Cache;
  cb.dims[0] = ir::Dim{pl.slots, true};  // one slot per example of the cap
  if (ring) cb.dims[1] = ir::Dim{ring, false}, cb.ring = ring;
  cb.state_name.clear();
  cb.tensor = -1;
  cb.formal = block >= 0;
  const int c = static_cast<int>(p.buffers.size());
  pl.cache_of[b] = c;
  if (block >= 0) {
    ir::Block& bl = p.blocks[static_cast<size_t>(block)];
    ir::Buffer st = cb;
    st.name = p.unique_name(bl.name + "_" + cb.name);
    st.dims.insert(st.dims.begin(), ir::Dim{bl.count, false});
    st.block = -1;
    st.formal = false;
    st.ring = 0;
    st.shape = fmt::format("{} of each instance of block {}", cb.name, bl.name);
    bl.formals.push_back(c);
    p.buffers.push_back(std::move(cb));
    pl.seqdim.push_back(1);
    pl.stack_of[c] = static_cast<int>(p.buffers.size());
    p.buffers.push_back(std::move(st));
    pl.seqdim.push_back(2);
  } else {
    p.buffers.push_back(std::move(cb));
    pl.seqdim.push_back(1);
  }
  return c;
}

// Whether the nests `keep` of `nests` (forward's, or block `block`'s inference body's) are
// per position, each nest's sequence loop in seq_iter; their attention's keys and values
// given caches (Plan::cache_of); a block call's body analysed likewise (Plan::bodies).
bool analyse(ir::Program& p, Plan& pl, const std::vector<ir::Stmt>& nests, const std::vector<size_t>& keep,
             std::vector<int>& seq_iter, bool& causal, int block);

// A rolled block's inference call (ir::Call::Kind::BlockInfer) per position: each formal's
// sequence axis that of its actual (the carried-in value's, a shared buffer's), the body's
// nests that the values it carries out need analysed, then the values carried out (the next
// instance's carried in, the block's last) per position at the same axis.
bool analyse_block(ir::Program& p, Plan& pl, const ir::Call& c, bool& causal) {
  if (c.kind != ir::Call::Kind::BlockInfer || pl.bodies.count(c.block)) return false;
  const ir::Routine& body = p.blocks[static_cast<size_t>(c.block)].infer;
  if (body.stmts.empty()) return false;
  for (const ir::Binding& bd : c.binds) {
    const int a = bd.first >= 0 ? bd.first : bd.stride == 0 && bd.modulo == 0 && bd.shift == 0 ? bd.buf : -1;
    if (a >= 0) pl.seqdim[static_cast<size_t>(bd.formal)] = pl.seqdim[static_cast<size_t>(a)];
  }
  std::set<int> targets;
  for (const ir::Stmt& s : body.stmts)
    for (int w : passes::writes(s))
      if (p.buffers[static_cast<size_t>(w)].formal) targets.insert(w);
  Plan::Body& bp = pl.bodies[c.block];
  bp.keep = needed(body.stmts, targets);
  bp.seq_iter.assign(body.stmts.size(), -1);
  if (!analyse(p, pl, body.stmts, bp.keep, bp.seq_iter, causal, c.block)) return false;
  for (const auto& [in, out] : p.blocks[static_cast<size_t>(c.block)].carried)
    if (pl.seqdim[static_cast<size_t>(in)] != pl.seqdim[static_cast<size_t>(out)]) return false;
  for (const ir::Binding& bd : c.binds) {
    if (!targets.count(bd.formal)) continue;
    const int a = bd.last >= 0 ? bd.last : bd.stride == 0 && bd.modulo == 0 && bd.shift == 0 ? bd.buf : -1;
    if (a < 0) continue;
    int& known = pl.seqdim[static_cast<size_t>(a)];
    if (known >= 0 && known != pl.seqdim[static_cast<size_t>(bd.formal)]) return false;
    known = pl.seqdim[static_cast<size_t>(bd.formal)];
  }
  return true;
}

bool analyse(ir::Program& p, Plan& pl, const std::vector<ir::Stmt>& nests, const std::vector<size_t>& keep,
             std::vector<int>& seq_iter, bool& causal, int block) {
  for (size_t i : keep) {
    const ir::Stmt& s = nests[i];
    if (s.call) {
      const ir::Call& c = *s.call;
      if (ir::is_block_call(c.kind)) {
        if (block >= 0 || !analyse_block(p, pl, c, causal)) return false;
        continue;
      }
      auto per_pos = [&](int b, long width_dims) {
        const auto& d = p.buffers[static_cast<size_t>(b)].dims;
        return pl.seqdim[static_cast<size_t>(b)] == 1 && d.size() == static_cast<size_t>(2 + width_dims);
      };
      if (!c.batch || c.seqs * (c.kind == ir::Call::Kind::EmbeddingForward ? 1 : pl.T) != pl.T) return false;
      if (c.kind == ir::Call::Kind::EmbeddingForward) {
        if (pl.seqdim[static_cast<size_t>(c.ids)] != 1 || p.buffers[static_cast<size_t>(c.ids)].dims.size() != 2) return false;
        pl.seqdim[static_cast<size_t>(c.o)] = 1;
      } else if (c.kind == ir::Call::Kind::AttentionForward) {
        // [batch, T, heads.., e]: the key/value heads fewer than q's when grouped-query
        auto heads_dims = [&](int b) { return static_cast<long>(p.buffers[static_cast<size_t>(b)].dims.size()) - 2; };
        if (!c.causal || c.tq != pl.T || c.tk != pl.T || !per_pos(c.q, heads_dims(c.q)) ||
            !per_pos(c.k, heads_dims(c.k)) || !per_pos(c.v, heads_dims(c.v)) || heads_dims(c.k) < 1)
          return false;
        pl.seqdim[static_cast<size_t>(c.o)] = 1;
        pl.seqdim[static_cast<size_t>(c.lse)] = static_cast<int>(p.buffers[static_cast<size_t>(c.lse)].dims.size()) - 1;
        causal = true;
        const long ring = c.window > 0 && c.window < pl.T ? c.window : 0;
        for (int b : {c.k, c.v}) {
          if (pl.cache_of.count(b)) {
            if (p.buffers[static_cast<size_t>(pl.cache_of[b])].ring != ring) return false;  // two windows: not yet
            continue;
          }
          // (a formal of the body: its actual's values are not the instance's alone)
          if (p.buffers[static_cast<size_t>(b)].formal) return false;
          make_cache(p, pl, b, ring, block);
        }
      } else {
        return false;
      }
      continue;
    }
    int seq = -1;
    if (!nest_seq_iter(p, s, pl, seq)) return false;
    seq_iter[i] = seq;
  }
  // A cache written by a zero_first nest would be filled whole, not at one position: a sum
  // (a projection straight into a fused qkv buffer) becomes a fill at the position and the
  // accumulation (at_position); another reduction gets no decode routine.
  for (size_t i : keep) {
    const ir::Stmt& s = nests[i];
    if (s.call || !s.zero_first) continue;
    for (int w : passes::writes(s))
      if (pl.cache_of.count(w) && !(s.single() && s.assigns[0].accum == ir::Accum::Add)) return false;
  }
  return true;
}

// Position 0 in place of the position in access a of a per-position buffer with a batch axis
// (a decode over rows: row b's values at [b, 0, ...]); a cache keeps its position.
void row_access(const ir::Program& p, const Plan& pl, ir::Access& a) {
  const auto b = static_cast<size_t>(a.buf);
  if (b >= pl.seqdim.size() || pl.seqdim[b] < 0 || p.buffers[b].role == ir::Role::Cache) return;
  if (p.buffers[b].dims.empty() || !p.buffers[b].dims[0].batch) return;
  a.index[static_cast<size_t>(pl.seqdim[b])] = ir::Affine::constant(0);
}

ir::ExprP row_loads(const ir::Program& p, const Plan& pl, const ir::ExprP& e) {
  ir::Expr c = *e;
  if (c.op == ir::Op::Load) row_access(p, pl, c.access);
  for (auto& a : c.args) a = row_loads(p, pl, a);
  return std::make_shared<const ir::Expr>(std::move(c));
}

void shift_iters(ir::Access& a) {
  for (ir::Affine& f : a.index)
    for (auto& t : f.terms) ++t.iter;
}

ir::ExprP shift_iters(const ir::ExprP& e) {
  ir::Expr c = *e;
  if (c.op == ir::Op::Load || c.op == ir::Op::Index) shift_iters(c.access);
  for (auto& a : c.args) a = shift_iters(a);
  return std::make_shared<const ir::Expr>(std::move(c));
}

// Loop k of s (one pass, in no index) taken out: the later loops' terms renumbered.
void drop_iter(ir::Stmt& s, int k) {
  auto fix = [k](ir::Access& a) {
    for (ir::Affine& f : a.index)
      for (auto& t : f.terms) t.iter -= t.iter > k ? 1 : 0;
  };
  std::function<ir::ExprP(const ir::ExprP&)> fix_e = [&](const ir::ExprP& e) {
    ir::Expr c = *e;
    if (c.op == ir::Op::Load || c.op == ir::Op::Index) fix(c.access);
    for (auto& a : c.args) a = fix_e(a);
    return std::make_shared<const ir::Expr>(std::move(c));
  };
  s.iters.erase(s.iters.begin() + k);
  if (s.parallel == k) s.parallel = -1;
  if (s.parallel > k) --s.parallel;
  for (ir::Assign& a : s.assigns) {
    fix(a.out);
    a.body = fix_e(a.body);
  }
  if (s.product) fix(s.product->a), fix(s.product->b);
  if (s.scaled_sum) s.scaled_sum->summand = fix_e(s.scaled_sum->summand);
}

// Nest s of a decode over rows: per-position buffers at position 0 of each row (row_access);
// a nest at pos without a batch loop (a table over positions, [T, ...]) given one, first, so
// that each row computes its own position's cells (rows at one position write the same values).
void over_rows(const ir::Program& p, const Plan& pl, ir::Stmt& s) {
  bool batch = false, at_pos = false;
  for (const ir::Iter& it : s.iters) batch = batch || it.batch, at_pos = at_pos || it.at_pos;
  for (ir::Assign& a : s.assigns) {
    row_access(p, pl, a.out);
    a.body = row_loads(p, pl, a.body);
  }
  if (s.product) row_access(p, pl, s.product->a), row_access(p, pl, s.product->b);
  if (s.scaled_sum) s.scaled_sum->summand = row_loads(p, pl, s.scaled_sum->summand);
  // the position read nowhere now (no cache, no table, no position value): a loop of one pass
  std::set<int> used;
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Assign& a : s.assigns) {
    index_iters(*a.body, used);
    for (const ir::Affine& f : a.out.index)
      for (const auto& t : f.terms) used.insert(t.iter);
  }
  for (const ir::Expr* l : loads)
    for (const ir::Affine& f : l->access.index)
      for (const auto& t : f.terms) used.insert(t.iter);
  for (size_t k = 0; k < s.iters.size(); ++k)
    if (s.iters[k].at_pos && !used.count(static_cast<int>(k))) {
      drop_iter(s, static_cast<int>(k));
      at_pos = false;
      break;
    }
  if (batch || !at_pos) return;
  s.iters.insert(s.iters.begin(), ir::Iter{"r", p.max_batch, true, false});
  if (s.parallel >= 0) ++s.parallel;
  for (ir::Assign& a : s.assigns) {
    shift_iters(a.out);
    a.body = shift_iters(a.body);
  }
  if (s.product) shift_iters(s.product->a), shift_iters(s.product->b);
  if (s.scaled_sum) s.scaled_sum->summand = shift_iters(s.scaled_sum->summand);
}

// Nest s (of forward, or of a block's inference body) over rows, each row at its own position
// and slot, the batch loops kept, its keys and values in their caches, appended to `out`.
void at_position(const ir::Program& p, const Plan& pl, ir::Stmt s, int seq, std::vector<ir::Stmt>& out) {
  if (s.call) {
    ir::Call& c = *s.call;
    c.batch = false;
    c.at_pos = true;
    for (int* b : {&c.q, &c.k, &c.v}) {  // q too when it is k (attention(x, x, x))
      auto it = pl.cache_of.find(*b);
      if (it != pl.cache_of.end()) *b = it->second;
    }
    if (c.kind == ir::Call::Kind::AttentionForward && p.buffers[static_cast<size_t>(c.k)].ring)
      c.ring = true, c.tk = p.buffers[static_cast<size_t>(c.k)].ring;
  } else {
    for (size_t k = 0; k < s.iters.size(); ++k) {
      ir::Iter& it = s.iters[k];
      if (static_cast<int>(k) == seq) it = ir::Iter{it.name, 1, false, true};
    }
    for (ir::Assign& a : s.assigns) {
      rename(a.out, pl.cache_of);
      a.body = rename(a.body, pl.cache_of);
    }
    if (s.product) {
      rename(s.product->a, pl.cache_of);
      rename(s.product->b, pl.cache_of);
    }
    if (s.scaled_sum) s.scaled_sum->summand = rename(s.scaled_sum->summand, pl.cache_of);
    over_rows(p, pl, s);
    if (s.zero_first && p.buffers[static_cast<size_t>(s.assigns[0].out.buf)].role == ir::Role::Cache) {
      out.push_back(fill_at_pos(s));
      s.zero_first = false;
    }
  }
  out.push_back(std::move(s));
}

// A block's decode call: its decode body (Block::decode) made from its inference body's nests
// at one position, the call binding each cache formal to its stack.
ir::Stmt block_decode(ir::Program& p, const Plan& pl, const ir::Stmt& s) {
  ir::Stmt d = s;
  ir::Call& c = *d.call;
  ir::Block& bl = p.blocks[static_cast<size_t>(c.block)];
  const Plan::Body& bp = pl.bodies.at(c.block);
  bl.decode = ir::Routine{ir::RoutineKind::BlockDecode};
  bl.decode.io.position = true;
  bl.decode.io.seq_len = pl.T;
  bl.decode.io.slots = pl.slots;
  bl.decode.io.kept = bl.infer.io.kept;
  for (size_t i : bp.keep) at_position(p, pl, bl.infer.stmts[i], bp.seq_iter[i], bl.decode.stmts);
  c.kind = ir::Call::Kind::BlockDecode;
  if (c.scratch >= 0) {  // (the inference body's: plan_block_body gives the decode body its own)
    c.writes.erase(std::remove(c.writes.begin(), c.writes.end(), c.scratch), c.writes.end());
    c.scratch = -1;
  }
  for (const auto& [formal, stack] : pl.stack_of) {
    if (p.buffers[static_cast<size_t>(formal)].block != c.block) continue;
    ir::Binding bd;
    bd.formal = formal;
    bd.buf = stack;
    bd.stride = p.buffers[static_cast<size_t>(formal)].elements();
    c.binds.push_back(bd);
    c.reads.push_back(stack);  // (the positions before: what the earlier calls wrote)
    c.writes.push_back(stack);
  }
  d.what = fmt::format("block {} (instances {}..{}) at position pos, keys and values cached", bl.name, bl.first,
                       bl.first + bl.count - 1);
  return d;
}

// The decode routine of p, its caches added to p.buffers (and its blocks' decode bodies);
// false (p.buffers as they were but for caches to drop, the blocks' formals for cache formals
// to drop) when the model has none.
bool build(ir::Program& p, ir::Routine& dec) {
  const ir::Routine* fwd = p.routine(ir::RoutineKind::Forward);
  if (!fwd || fwd->io.outputs.empty()) return false;
  // The one input forward reads: ids [batch, T].
  std::set<int> read;
  for (const ir::Stmt& s : fwd->stmts)
    for (int b : passes::reads(s))
      if (p.buffers[static_cast<size_t>(b)].role == ir::Role::Input) read.insert(b);
  if (read.size() != 1) return false;
  const int tokens = *read.begin();
  const ir::Buffer& tb = p.buffers[static_cast<size_t>(tokens)];
  if (tb.ids <= 0 || tb.dims.size() != 2 || !tb.dims[0].batch) return false;
  Plan pl;
  pl.T = tb.dims[1].size;
  pl.slots = p.max_batch;
  pl.seqdim.assign(p.buffers.size(), -1);
  pl.seqdim[static_cast<size_t>(tokens)] = 1;
  const std::vector<size_t> keep = needed(fwd->stmts, {fwd->io.outputs[0]});
  bool causal = false;
  std::vector<int> seq_iter(fwd->stmts.size(), -1);
  if (!analyse(p, pl, fwd->stmts, keep, seq_iter, causal, -1)) return false;
  if (!causal || pl.seqdim[static_cast<size_t>(fwd->io.outputs[0])] != 1) return false;

  dec.kind = ir::RoutineKind::Decode;
  dec.io.position = true;
  dec.io.seq_len = pl.T;
  dec.io.slots = pl.slots;
  dec.io.ids = tokens;
  dec.io.outputs = {fwd->io.outputs[0]};
  for (size_t i : keep) {
    const ir::Stmt& s = fwd->stmts[i];
    if (s.call && ir::is_block_call(s.call->kind))
      dec.stmts.push_back(block_decode(p, pl, s));
    else
      at_position(p, pl, s, seq_iter[i], dec.stmts);
  }
  return true;
}

}  // namespace

void make_decode(ir::Program& p, const PassOptions& o) {
  if (p.routine(ir::RoutineKind::Decode)) return;
  const size_t buffers = p.buffers.size();
  std::vector<size_t> formals;
  for (const ir::Block& bl : p.blocks) formals.push_back(bl.formals.size());
  ir::Routine dec;
  if (!build(p, dec)) {
    p.buffers.resize(buffers);
    for (size_t k = 0; k < p.blocks.size(); ++k) {
      p.blocks[k].formals.resize(formals[k]);
      p.blocks[k].decode = ir::Routine{ir::RoutineKind::BlockDecode};
    }
    return;
  }
  p.routines.push_back(std::move(dec));
  // The decode bodies planned as plan_blocks plans the others (it ran before), their calls
  // given their scratch.
  for (size_t k = 0; k < p.blocks.size(); ++k)
    if (!p.blocks[k].decode.stmts.empty()) plan_block_body(p, static_cast<int>(k), p.blocks[k].decode, o);
}

}  // namespace cannl
