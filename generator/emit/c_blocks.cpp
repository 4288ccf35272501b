// c_blocks.cpp — the C target's rolled repeat blocks (ir.h Block): their functions and the loops
// calling them (part of CEmitter, emit/c_emitter.h).
//
// Takes: a block call of a routine (ir::Call BlockForward, BlockBackward, BlockInfer, BlockInit
// or BlockDecode, its bindings completed by routine assembly, its body planned by
// passes/plan_blocks.cpp or passes/decode.cpp) and the unit being printed. Guarantees: the
// block's function for the call's half of the body (<block>_forward, _backward, _infer, _init
// or _decode), defined once per unit: `static void`, taking the state, n (init: the caller's
// random stream; decode: the position pos, or over rows n, pos[] and seq[]), the call's scratch, the run-time scalars its nests
// read and each bound formal (and saved activation) as a `restrict` pointer; its locals at the
// body's plan offsets in the scratch, or at a formal (Routine::hosted; its kernels then take the
// two without `restrict`); its nests through the same kernel calls and matrix
// products as a routine's (every instance shares the kernels).
// The call prints as a `for` over the instances (the backward in reverse instance order),
// passing each instance's slices of the stacked buffers (params, gradients, saved
// activations, carried values); in train_grads, the gradient hook of a stacked gradient's
// slice after each instance's backward, the others after the loop.
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <set>

#include "emit/c_common.h"
#include "emit/c_emitter.h"
#include "emit/c_gemm.h"
#include "emit/c_names.h"
#include "emit/contraction.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

// The stacked storage of an int8 param (passes/quantize.h: its instances are) whose instance
// slices call c binds to formal f in the forward-only state's unit, or -1: the block's function
// then takes instance l's int8 rows and scales for f (quantize_weights allows only whole slices,
// read as product operands).
int int8_param(const ir::Program& p, const ir::Call& c, int f, bool int8_unit) {
  if (!int8_unit || (c.kind != ir::Call::Kind::BlockInfer && c.kind != ir::Call::Kind::BlockDecode)) return -1;
  for (const ir::Binding& bd : c.binds)
    if (bd.formal == f && bd.buf >= 0 && p.buffers[static_cast<size_t>(bd.buf)].int8_row > 0) return bd.buf;
  return -1;
}

}  // namespace

const std::string& CEmitter::block_function(const ir::Call& c, Unit& u) {
  const bool fwd = c.kind == ir::Call::Kind::BlockForward, infer = c.kind == ir::Call::Kind::BlockInfer,
             init = c.kind == ir::Call::Kind::BlockInit, decode = c.kind == ir::Call::Kind::BlockDecode;
  if (!fwd && !infer && !init && !decode && c.kind != ir::Call::Kind::BlockBackward)
    CANNL_BUG(std::string("the C target does not emit a block's ") + ir::call_name(c.kind));
  const std::string& fname =
      names_.block[static_cast<size_t>(5 * c.block + (fwd ? 0 : infer ? 2 : init ? 3 : decode ? 4 : 1))];
  if (!u.defined.insert(fname).second) return fname;
  const ir::Block& bl = p_.blocks[static_cast<size_t>(c.block)];
  const ir::Routine& body = ir::body_of(bl, c.kind);
  const BlockSig sig = block_sig(p_, c);
  const std::vector<const ir::Stmt*> nests = block_span(p_, c);
  std::set<std::string> scalars;
  std::set<int> bufs;
  for (const ir::Stmt* t : nests) stmt_uses(*t, bufs, scalars);
  std::string params = init ? fmt::format("{} *m, cannl_rng *cannl_rng_in, char *cannl_scratch", u.state)
                     : decode ? fmt::format("{} *m, int64_t n, const int64_t *pos, const int64_t *seq, "
                                            "char *cannl_scratch", u.state)
                              : fmt::format("{} *m, int64_t n, char *cannl_scratch", u.state);
  for (const std::string& x : sig.scalars) params += fmt::format(", const real {}", x);
  for (int b : sig.written) params += fmt::format(", {} *restrict {}", ctype(b), name(b));
  std::set<std::string> names(names_.buffer.begin(), names_.buffer.end());
  auto unique = [&](std::string n) {
    while (!names.insert(n).second) n += "_";
    return n;
  };
  int8_formals_.clear();
  for (int b : sig.read)
    if (int8_param(p_, c, b, int8_unit_) >= 0) {
      const auto& [rows, scales] = int8_formals_[b] = {unique(name(b) + "int8"), unique(name(b) + "int8_scale")};
      params += fmt::format(", const int8_t *restrict {}, const float *restrict {}", rows, scales);
    } else {
      params += fmt::format(", const {} *restrict {}", ctype(b), name(b));
    }
  std::string pro;
  std::vector<std::pair<long, int>> locals;
  std::string hosted;  // locals in a formal's bytes (passes/plan_blocks.cpp: host_locals)
  for (int b : bufs)
    if (body.planned(b)) locals.push_back({body.offsets[static_cast<size_t>(b)], b});
    else if (const int f = body.host(b); f >= 0 && bufs.count(f))
      hosted += fmt::format("    {} *const {} = {}; /* {}; in the bytes of {} */\n", ctype(b), name(b), name(f),
                            shape_comment(b), name(f));
    else if (std::find(sig.written.begin(), sig.written.end(), b) == sig.written.end() &&
             std::find(sig.read.begin(), sig.read.end(), b) == sig.read.end())
      CANNL_BUG(fmt::format("block {}: '{}' neither bound nor planned", bl.name, buf(b).name));
  std::sort(locals.begin(), locals.end());
  for (const auto& [offset, b] : locals)  // (a body's locals scale with the state's cap: plan_blocks.cpp)
    pro += fmt::format("    {0} *const {1} = ({0} *)(cannl_scratch + {2}); /* {3} */\n", ctype(b), name(b),
                       body.scaled(b) ? scaled_offset(body.fixed_bytes, body.example_offset(b, p_.max_batch))
                                      : std::to_string(offset),
                       shape_comment(b));
  if (locals.empty()) pro += "    (void)cannl_scratch;\n";
  pro += hosted;
  std::set<std::string> taken = {"m", "n", "cannl_scratch"};
  if (decode) taken.insert("pos"), taken.insert("seq");
  for (int b : bufs) taken.insert(name(b));
  for (const auto& [f, q] : int8_formals_) taken.insert(q.first), taken.insert(q.second);
  taken.insert(sig.scalars.begin(), sig.scalars.end());
  bool n_used = false;
  std::string text, last;
  for (const ir::Stmt* t : nests) {
    const ir::Stmt& st = *t;
    std::string one;
    if (st.call) {
      one = call_text(*st.call, n_used);
    } else {
      x_.begin_nest(st, taken);
      one = gemm_nest(st, recognise_contraction(p_, st), taken);
      if (!one.empty()) {
        for (const ir::Iter& it : st.iters) n_used = n_used || it.batch;
      } else {
        one = kernel_call(body, st, u, n_used);
      }
    }
    if (what(st) != last) text += "\n    /* " + comment_safe(what(st)) + " */\n";
    last = what(st);
    text += one;
  }
  int8_formals_.clear();
  if (decode) pro = "    (void)n, (void)pos, (void)seq;\n" + pro;
  if (!decode && !n_used && !init) pro = "    (void)n;\n" + pro;
  if ((pro + text).find("m->") == std::string::npos) pro = "    (void)m;\n" + pro;
  if (init) {  // the stream in a local, as init_params keeps it (its kernels take &rng)
    pro += "    cannl_rng rng = *cannl_rng_in;\n";
    text += "    *cannl_rng_in = rng;\n";
  }
  const std::string what = infer ? "instance l's inference body, for each l in order"
                           : decode ? "instance l's decode body, row r at position pos[r] of sequence seq[r], "
                                      "for each l in order"
                           : init ? "instance l's params drawn from their initialisers, for each l in order"
                           : fmt::format("the {} half of instance l's training body, for each l {}",
                                         fwd ? "forward" : "backward", fwd ? "in order" : "in reverse order");
  // (the parameters a line each: a block binds dozens)
  std::string plist;
  size_t start = 0;
  for (size_t i = 0; i <= params.size(); ++i)
    if (i == params.size() || params.compare(i, 2, ", ") == 0) {
      plist += (start ? ",\n    " : "") + params.substr(start, i - start);
      start = i + 2;
    }
  u.kernels += fmt::format("/* block {} (line {}): {} */\nstatic void {}(\n    {}) {{\n{}{}}}\n\n", bl.name, bl.line,
                           what, fname, plist, pro, text);
  return fname;
}

std::string CEmitter::block_call(const ir::Stmt& s, Unit& u) {
  const ir::Call& c = *s.call;
  const std::string& fname = block_function(c, u);
  const BlockSig sig = block_sig(p_, c);
  std::map<int, const ir::Binding*> bind;
  for (const ir::Binding& bd : c.binds) bind[bd.formal] = &bd;
  std::string args = fmt::format("m, {}, (char *){}", c.kind == ir::Call::Kind::BlockInit ? "&rng"
                                                    : c.kind == ir::Call::Kind::BlockDecode ? "n, pos, seq"
                                                    : "n",
                                 c.scratch >= 0 ? name(c.scratch) : "NULL");
  for (const std::string& x : sig.scalars) args += ", " + x;
  for (const std::vector<int>* l : {&sig.written, &sig.read})
    for (int f : *l) {
      args += ",\n            ";
      if (const int st = int8_param(p_, c, f, int8_unit_); st >= 0) {  // instance l's rows and scales
        args += fmt::format("m->int8.{0}[cannl_l], m->int8_scale.{0}[cannl_l]", name(st));
      } else {
        args += block_actual(p_, *bind.at(f), c.count, [this](int b) { return name(b); });
      }
    }
  const bool back = c.kind == ir::Call::Kind::BlockBackward;
  // The gradient hook: a view (an instance's param gradient) of a stacked gradient this call
  // slices per instance is final after that instance; anything else after the loop.
  const ir::Arena& t = p_.layout.training;
  std::string each, after;
  std::set<int> hooked_stacks;
  for (int g : s.grads_final) {
    const int st = ir::storage(p_, g);
    const ir::Binding* per = nullptr;
    for (const ir::Binding& bd : c.binds)
      if (st != g && bd.buf == st && bd.stride > 0 && bd.first < 0 && bd.last < 0 && bd.modulo == 0) per = &bd;
    if (per) {
      if (!hooked_stacks.insert(st).second) continue;
      const long base =
          (t.field[static_cast<size_t>(st)] - t.grads) / elem() + per->offset + per->shift * per->stride;
      each += fmt::format("        if (m->grad_hook) m->grad_hook(m->grad_hook_ctx, {} + cannl_l * {}, {});"
                          " /* {} final */\n", base, per->stride, buf(per->formal).elements(), name(st));
      continue;
    }
    after += fmt::format("    if (m->grad_hook) m->grad_hook(m->grad_hook_ctx, {}, {}); /* {} final */\n",
                         (t.field[static_cast<size_t>(g)] - t.grads) / elem(), buf(g).elements(), name(g));
  }
  const std::string loop = back ? fmt::format("for (int64_t cannl_l = {}; cannl_l >= 0; --cannl_l)", c.count - 1)
                                : fmt::format("for (int64_t cannl_l = 0; cannl_l < {}; ++cannl_l)", c.count);
  std::string out = "    " + loop + (each.empty() ? "\n" : " {\n");
  out += fmt::format("        {}({});\n", fname, args);
  if (!each.empty()) out += each + "    }\n";
  return out + after;
}

}  // namespace cannl
