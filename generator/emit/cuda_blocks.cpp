// cuda_blocks.cpp — the CUDA target's rolled repeat blocks (ir.h Block): their host functions and
// the loops calling them (part of CudaEmitter, emit/cuda_emitter.h).
//
// Takes: a block call of a routine (ir::Call BlockForward, BlockBackward, BlockInfer, BlockInit
// or BlockDecode, its bindings completed by routine assembly, its body planned by
// passes/plan_blocks.cpp or passes/decode.cpp). Guarantees: the block's host function for the
// call's half of the body (<block>_forward, _backward, _infer, _init or _decode), defined once:
// `static void`, taking the state, n (init: init_params' random stream; decode: the position
// pos), the call's scratch, the run-time scalars its nests read and each bound formal (and
// saved activation) as a pointer; its locals at the body's plan offsets in the scratch; its
// nests launched as a routine's (kernels defined once for every instance, over the formals'
// names) or cuBLAS products; init's on the host, into the pinned mirror. The call prints as a
// `for` over the instances (the backward in reverse instance order), passing each instance's
// slices of the stacked buffers (params, gradients, saved activations, carried values).
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "emit/c_common.h"
#include "emit/c_tables.h"
#include "emit/cuda_emitter.h"
#include "support/diagnostic.h"

namespace cannl {

const std::string& CudaEmitter::block_function(const ir::Call& c) {
  using K = ir::Call::Kind;
  const int half = c.kind == K::BlockForward ? 0 : c.kind == K::BlockBackward ? 1 : c.kind == K::BlockInfer ? 2
                   : c.kind == K::BlockInit ? 3 : c.kind == K::BlockDecode ? 4 : -1;
  if (half < 0) CANNL_BUG(std::string("the CUDA target does not emit a block's ") + ir::call_name(c.kind));
  const std::string& fname = cnames_.block[static_cast<size_t>(5 * c.block + half)];
  if (!block_defined_.insert(fname).second) return fname;
  const bool init = half == 3, decode = half == 4;
  const ir::Block& bl = p_.blocks[static_cast<size_t>(c.block)];
  const ir::Routine& body = ir::body_of(bl, c.kind);
  const bool caller_rows = rows_;  // (the calling routine's; a decode body: n rows, pos[], seq[])
  rows_ = x_.rows = decode;
  const BlockSig sig = block_sig(p_, c);
  const std::vector<const ir::Stmt*> nests = block_span(p_, c);
  std::set<std::string> scalars;
  std::set<int> bufs;
  for (const ir::Stmt* t : nests) stmt_uses(*t, bufs, scalars);
  std::string params = init ? fmt::format("struct {} *m, cannl_rng *const rng", p_.model)
                   : decode ? fmt::format("struct {} *m, int64_t n, const int64_t *pos, const int64_t *seq, "
                                          "char *cannl_scratch", p_.model)
                            : fmt::format("struct {} *m, int64_t n, char *cannl_scratch", p_.model);
  for (const std::string& x : sig.scalars) params += fmt::format(", const {} {}", scalar_type(x), x);
  for (int b : sig.written) params += fmt::format(", {} *{}", ctype(b), name(b));
  for (int b : sig.read) params += fmt::format(", const {} *{}", ctype(b), name(b));
  // The body's locals: at the body's plan offsets in the scratch (at the state's cap).
  std::string pro;
  std::vector<std::pair<long, int>> locals;
  for (int b : bufs)
    if (body.planned(b) || body.scaled(b)) {
      locals.push_back({body.scaled(b) ? body.fixed_bytes + body.example_offset(b, p_.max_batch) * p_.max_batch
                                       : body.offsets[static_cast<size_t>(b)], b});
    } else if (std::find(sig.written.begin(), sig.written.end(), b) == sig.written.end() &&
               std::find(sig.read.begin(), sig.read.end(), b) == sig.read.end()) {
      CANNL_BUG(fmt::format("block {}: '{}' neither bound nor planned", bl.name, buf(b).name));
    }
  if (init && !locals.empty()) CANNL_BUG("block " + bl.name + ": an init body with locals");
  std::sort(locals.begin(), locals.end());
  for (const auto& [offset, b] : locals)  // (a body's locals scale with the state's cap: plan_blocks.cpp)
    pro += fmt::format("    {0} *const {1} = ({0} *)(cannl_scratch + {2});\n", ctype(b), name(b),
                       body.scaled(b) ? scaled_offset(body.fixed_bytes, body.example_offset(b, p_.max_batch))
                                      : std::to_string(offset));
  if (!init && locals.empty()) pro += "    (void)cannl_scratch;\n";
  std::set<std::string> taken = {"m", "n", "cannl_scratch", "stream_", "rng"};
  if (decode) taken.insert("pos"), taken.insert("seq");
  for (int b : bufs) taken.insert(name(b));
  taken.insert(sig.scalars.begin(), sig.scalars.end());
  std::string text, last;
  bool n_used = false;
  int launches = 0;
  for (const ir::Stmt* t : nests) {
    const ir::Stmt& st = *t;
    if (what(st) != last) text += "\n    /* " + comment_safe(what(st)) + " */\n";
    last = what(st);
    for (const ir::Iter& it : st.iters) n_used |= it.batch;
    if (init) {  // on the host, into the pinned mirror, as init_params
      name_vars(st, taken);
      if (st.zero_first)
        text += fmt::format("    for (int64_t i_ = 0; i_ < {}; ++i_) {}[i_] = {};\n", buf(st.assigns[0].out.buf).elements(),
                            name(st.assigns[0].out.buf), identity(st.assigns[0].accum));
      text += sequential_loops(st, 1);
      continue;
    }
    ++launches;
    if (st.call) {
      text += call_text(*st.call);
      n_used |= st.call->batch;
      continue;
    }
    name_vars(st, taken);
    if (auto g = gemm_at_rows(st)) {
      text += "    " + gemm_call(*g) + "\n";
      n_used |= g->m.n || g->n.n || g->k.n || g->count.n;
      ++gemms_;
      continue;
    }
    text += "    " + launch(body, st) + "\n    CUDA_CHECK(cudaGetLastError());\n";
  }
  for (const std::string& x : scalars) n_used |= x == "n";
  if (decode) pro = "    (void)n, (void)pos, (void)seq;\n" + pro;
  if (!init && !decode && !n_used) pro = "    (void)n;\n" + pro;
  if (!init) pro += launches ? "    const cudaStream_t stream_ = cannl_stream_cuda(m->compute);\n" : "    (void)m;\n";
  else if (text.find("m->") == std::string::npos) pro = "    (void)m;\n" + pro;
  const std::string what = half == 2 ? "instance l's inference body, for each l in order"
                           : decode  ? "instance l's decode body, row r at position pos[r] of sequence seq[r], "
                                       "for each l in order"
                           : init    ? "instance l's params drawn from their initialisers (on the host), for each l in order"
                                     : fmt::format("the {} half of instance l's training body, for each l {}",
                                                   half == 0 ? "forward" : "backward", half == 0 ? "in order" : "in reverse order");
  std::string plist;  // (the parameters a line each: a block binds dozens)
  size_t start = 0;
  for (size_t i = 0; i <= params.size(); ++i)
    if (i == params.size() || params.compare(i, 2, ", ") == 0) {
      plist += (start ? ",\n    " : "") + params.substr(start, i - start);
      start = i + 2;
    }
  blocks_ += fmt::format("/* block {} (line {}): {}{} */\nstatic void {}(\n    {}) {{\n{}{}}}\n\n", bl.name, bl.line, what,
                         init ? "" : fmt::format(": {} launches", launches), fname, plist, pro, text);
  rows_ = x_.rows = caller_rows;
  return fname;
}

std::string CudaEmitter::block_call(const ir::Call& c, const std::function<std::string(int)>& at) {
  const std::string& fname = block_function(c);
  const BlockSig sig = block_sig(p_, c);
  std::map<int, const ir::Binding*> bind;
  for (const ir::Binding& bd : c.binds) bind[bd.formal] = &bd;
  const std::function<std::string(int)> named = at ? at : [this](int b) { return name(b); };
  const bool init = c.kind == ir::Call::Kind::BlockInit;
  std::string args = init ? std::string("m, rng")
                          : fmt::format("m, {}, (char *){}",
                                        c.kind != ir::Call::Kind::BlockDecode ? "n" : "n, pos, seq",
                                        c.scratch >= 0 ? name(c.scratch) : "NULL");
  for (const std::string& x : sig.scalars) args += ", " + x;
  for (const std::vector<int>* l : {&sig.written, &sig.read})
    for (int f : *l) {
      auto it = bind.find(f);
      if (it == bind.end()) CANNL_BUG("an unbound formal: " + buf(f).name);
      args += ",\n            " + block_actual(p_, *it->second, c.count, named);
    }
  const std::string loop = c.kind == ir::Call::Kind::BlockBackward
                               ? fmt::format("for (int64_t cannl_l = {}; cannl_l >= 0; --cannl_l)", c.count - 1)
                               : fmt::format("for (int64_t cannl_l = 0; cannl_l < {}; ++cannl_l)", c.count);
  return fmt::format("    {}\n        {}({});\n", loop, fname, args);
}

void CudaEmitter::param_tables(data& d, const ir::Routine& train) const {
  // Host pointers of the params and the state tensors (the pinned mirror of the arena's
  // state prefix), and of the params' gradients: train_step leaves them in the grad block,
  // downloaded into a pinned array of their own (packed, in param order) with the mirror.
  std::map<int, long> grad_at;  // gradient buffer -> its element offset in m->grads_host
  long grad_elems = 0;
  std::string grads_down;
  // (one copy per run of gradients adjacent on the device: a stacked gradient's instances)
  long run_dev = -1, run_host = 0, run_elems = 0;
  auto flush = [&] {
    if (run_elems > 0)
      grads_down += fmt::format("        CANNL_TRY(cannl_stream_copy(m->compute, m->grads_host + {}, m->dev + {}, {} * sizeof(real), &e));\n",
                                run_host, run_dev, run_elems);
  };
  for (int g : train.io.kept) {
    grad_at[g] = grad_elems;
    const long dev = arena_.address(train, g);
    if (run_elems == 0 || dev != run_dev + run_elems * elem()) {
      flush();
      run_dev = dev;
      run_host = grad_elems;
      run_elems = 0;
    }
    run_elems += buf(g).elements();
    grad_elems += buf(g).elements();
  }
  flush();
  d.set("grads_elems", std::to_string(std::max(grad_elems, 1L)));
  d.set("grads_down", grads_down);
  // The params' rows (name, elements, byte offset in the mirror, element offset in grads_host
  // or -1) and the state tensors' (name, shape, byte offset in the mirror): the params first, in
  // Program::params order (model_io.c reads them so), then the optimiser state in buffer order.
  // A stacked group's instances (`w_qkv.0` ... `w_qkv.47`, views) fold into one macro and
  // cannl_rt.h's CANNL_REP_* (emit/c_tables.h), so the tables do not grow with the depth.
  std::vector<CRow> param_rows, state_rows;
  for (int b : p_.params) {
    const ir::Buffer& x = buf(b);
    const int g = p_.grad(b);
    CRow r;
    r.group = x.view_of;
    r.add("{\"");
    add_instance_name(r, p_, b, x.state_name);
    r.add(fmt::format("\", {}, ", x.elements())).add(arena_.field[static_cast<size_t>(b)]).add(", ");
    if (grad_at.count(g)) r.add(grad_at[g]);
    else r.add("-1");
    param_rows.push_back(r.add("},"));
  }
  std::vector<size_t> order;
  std::vector<bool> listed(p_.buffers.size(), false);
  for (int b : p_.params) order.push_back(static_cast<size_t>(b)), listed[static_cast<size_t>(b)] = true;
  for (size_t i = 0; i < p_.buffers.size(); ++i)
    if (!listed[i]) order.push_back(i);
  for (size_t i : order) {
    const auto& x = p_.buffers[i];
    if (x.state_name.empty()) continue;
    std::string dims;
    for (const auto& dm : x.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(dm.size);
    CRow r;
    r.group = x.view_of;
    r.add("{\"");
    add_instance_name(r, p_, static_cast<int>(i), x.state_name);
    r.add(fmt::format("\", {}, {{ {} }}, ", x.dims.size(), dims.empty() ? "0" : dims)).add(arena_.field[i]);
    state_rows.push_back(r.add("},"));
  }
  std::vector<CRow> info;  // param_info's rows (the runtime's), folded the same way
  for (int b : p_.params) {
    const ir::Buffer& x = buf(b);
    CRow r;
    r.group = x.view_of;
    r.add("{\"");
    add_instance_name(r, p_, b, x.state_name.empty() ? x.name : x.state_name);
    std::string dims;
    for (const auto& dm : x.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(dm.size);
    info.push_back(r.add(fmt::format("\", {}, {{ {} }}, {}, {}}},", x.dims.size(), dims.empty() ? "0" : dims,
                                     x.elements(), x.ids)));
  }
  d.set("param_info", fold_rows(info, "    ", "CANNL_PARAM_INFO", false));
  d.set("param_rows", fold_rows(param_rows, "    ", "CANNL_PARAM_ROW", false));
  d.set("state_rows", fold_rows(state_rows, "    ", "CANNL_STATE_ROW", false));
  d.set("state_dtype", o_.f64 ? "CANNL_F64" : "CANNL_F32");
}

}  // namespace cannl
