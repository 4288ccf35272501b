// cuda_emit.cpp — the CUDA back end (see cuda_emit.h): the files, the state, the nests' kernels and the
// routines (part of CudaEmitter, emit/cuda_emitter.h; the rolled repeat blocks and the tables: cuda_blocks.cpp).
#include "emit/cuda_emit.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <functional>
#include <map>
#include <set>

#include "emit/c_common.h"
#include "emit/c_names.h"
#include "emit/cuda_emitter.h"
#include "emit/cublas_plan.h"
#include "support/diagnostic.h"

namespace cannl {

std::vector<OutputFile> CudaEmitter::run() {
  std::string routines;
  for (const auto& r : p_.routines) {
    if (r.kind == ir::RoutineKind::Init) routines += init_routine(r) + "\n";
    else routine(r, routines);
  }
  routines = blocks_ + routines;  // (the block functions the routines call, before them)
  data d = model_template_data(p_, names_, o_.f64, o_.spec, "");
  d.set("no_infer", data{data::type::bool_true});  // <model>.h without the C target's forward-only state
  std::string helpers = x_.helper_defs("static __host__ __device__ inline");
  for (const auto& h : device_helpers_) helpers += h;
  d.set("helpers", helpers.empty() ? "" : "\n" + helpers);
  d.set("fields", fields());
  d.set("has_constants", data{p_.routine(ir::RoutineKind::Constants) ? data::type::bool_true : data::type::bool_false});
  d.set("dropout", data{x_.helpers.count("keep") ? data::type::bool_true : data::type::bool_false});
  d.set("kernels", kernels_);
  d.set("routines", routines);
  arena_data(d, arena_, "");  // (at the state's cap: its create's max_batch)
  d.set("state_bytes", std::to_string(std::max(arena_.state, 64L)));
  d.set("uses_gemm", data{gemms_ > 0 ? data::type::bool_true : data::type::bool_false});
  d.set("attention_include", attention_ ? "#include \"cannl_attention.cuh\"\n" : "");
  d.set("cuda_type", o_.f64 ? "CUDA_R_64F" : "CUDA_R_32F");
  d.set("blas_compute", blas_compute());
  d.set("precision_note", precision_note());
  data bufs{data::type::list};
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    if (arena_.field[i] < 0 || p_.buffers[i].view_of >= 0) continue;  // (a view: its stacked buffer's field)
    data b;
    b.set("name", names_[i]);
    b.set("offset", field_offset(arena_, static_cast<int>(i), "m->max_batch"));
    bufs.push_back(b);
  }
  d.set("buffers", bufs);
  const ir::Routine* train = p_.routine(ir::RoutineKind::TrainStep);
  param_tables(d, *train);
  // Staging of the inputs: per slot, input k after inputs 0 .. k-1, of the state's max_batch
  // examples each.
  data ins{data::type::list};
  long in_off = 0;
  for (size_t k = 0; k < p_.inputs.size(); ++k) {
    const auto& b = p_.buffers[static_cast<size_t>(p_.inputs[k])];
    long per = 1;
    for (const auto& dm : b.dims) per *= dm.batch ? 1 : dm.size;
    data e;
    e.set("index", std::to_string(k));
    e.set("offset", scaled_offset(0, in_off));
    e.set("per", std::to_string(per));
    // ids are int32_t in the caller's array and on the device (a slot of `per` reals holds them)
    e.set("elem", buf(p_.inputs[k]).ids > 0 ? "int32_t" : "real");
    ins.push_back(e);
    in_off += per;
  }
  d.set("input_slots", ins);
  d.set("in_elems", fmt::format("(size_t){} * (size_t)max_batch", std::max(in_off, 1L)));
  d.set("forward_copy", forward_copy());
  d.set("eval_copy", eval_copy());
  d.set("loss_dev", device(*train, train->io.values[0]));
  // The halves of train_step (data-parallel training): train_grads' loss; the grad block, as
  // the C target's (the params' gradients, contiguous in param order, in the device arena).
  const ir::Routine* grads = p_.routine(ir::RoutineKind::TrainGrads);
  if (!grads) CANNL_BUG("a training program without train_grads (autodiff/optimizer.cpp makes it)");
  d.set("grads_loss_dev", device(*grads, grads->io.values[0]));
  d.set("grad_block_offset", std::to_string(std::max(arena_.grads, 0L)));
  d.set("grad_block_count", std::to_string(arena_.grads_bytes / elem()));
  decode_data(d);

  std::vector<OutputFile> files;
  files.push_back({p_.model + ".h", render_template("c/model.h.mustache", d)});
  std::string cu = render_template("cuda/model.cu.mustache", d);
  if (p_.model == "real") cu = rename_real(cu);
  files.push_back({p_.model + ".cu", cu});
  files.push_back({p_.model + "_train.cu", render_template("cuda/train.cu.mustache", d)});
  files.push_back({p_.model + "_infer.cu", render_template("cuda/infer.cu.mustache", d)});
  files.push_back({"CMakeLists.txt", render_template("cuda/CMakeLists.txt.mustache", d)});
  return files;
}

std::string CudaEmitter::rename_real(const std::string& text) {
  std::string out;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  bool in_string = false;
  std::string last_word;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      ++i;
    } else if (c == '"') {
      in_string = true;
      out += c;
      ++i;
    } else if (word(c)) {
      size_t j = i;
      while (j < text.size() && word(text[j])) ++j;
      const std::string w = text.substr(i, j - i);
      out += w == "real" && last_word != "struct" ? "cannl_real" : w;
      last_word = w;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

const char* CudaEmitter::blas_compute() const {
  if (o_.f64) return "CUBLAS_COMPUTE_64F";
  if (o_.precision == "tf32") return "CUBLAS_COMPUTE_32F_FAST_TF32";
  if (o_.precision == "bf16") return "CUBLAS_COMPUTE_32F_FAST_16BF";
  return "CUBLAS_COMPUTE_32F";
}

std::string CudaEmitter::precision_note() const {
  if (o_.f64) return "float64 (CUBLAS_COMPUTE_64F)";
  if (o_.precision == "tf32")
    return "TF32 tensor cores (--precision tf32): operands rounded to TF32, fp32 accumulation;\n"
           " * every buffer stays fp32";
  if (o_.precision == "bf16")
    return std::string("bf16 tensor cores (--precision bf16): operands rounded to bf16, fp32 accumulation") +
           (attention_tensor_cores() ? " (attention's too)" : "") + ";\n"
           " * every buffer (params, optimiser state, activations) stays fp32, checkpoints interchangeable with fp32 runs'";
  return "fp32 on the CUDA cores (--precision fp32)";
}

std::string CudaEmitter::fields() const {
  std::string mirrored, device;
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    if (arena_.field[i] < 0 || p_.buffers[i].view_of >= 0) continue;  // (a view: in its stacked buffer)
    const auto& b = p_.buffers[i];
    std::string dims;
    for (size_t k = 0; k < b.dims.size(); ++k)
      dims += (k ? ", " : "") + (b.dims[k].batch ? std::string("batch") : std::to_string(b.dims[k].size));
    const std::string decl = fmt::format("    {} *{}; /* [{}] {} */\n", ctype(static_cast<int>(i)), names_[i], dims, b.shape);
    (arena_.own[i] && arena_.field[i] < arena_.state ? mirrored : device) += decl;
  }
  return mirrored + "    /* ---- device only */\n" + device;
}

std::string CudaEmitter::device(const ir::Routine& r, int b) const {
  const long at = arena_.address(r, b);
  if (at < 0) CANNL_BUG("a buffer outside the device arena: " + buf(b).name);
  if (arena_.own[static_cast<size_t>(b)]) return field(b);
  // (in the work region's scaled part: at a per-example offset times the state's cap)
  const std::string off = r.scaled(b) ? scaled_offset(arena_.fixed_bytes, r.example_offset(b, p_.max_batch))
                                      : std::to_string(at);
  return fmt::format("((real *)(m->dev + {}))", off);
}

std::string CudaEmitter::field(int b) const {
  const ir::Buffer& x = buf(b);
  if (x.view_of < 0) return "m->" + name(b);
  return x.view_offset == 0 ? "m->" + name(x.view_of) : fmt::format("(m->{} + {})", name(x.view_of), x.view_offset);
}

void CudaEmitter::use_helper(const std::string& key, const std::string& text) {
  if (helper_names_.insert(key).second) device_helpers_.push_back(text);
}

std::string CudaEmitter::reducer(ir::Accum a, bool block) {
  const std::string r = x_.real();
  const std::string op = a == ir::Accum::Add ? "sum" : a == ir::Accum::Max ? "max" : "min";
  const std::string combine = a == ir::Accum::Add ? "v += o;"
                              : a == ir::Accum::Max ? "v = o > v ? o : v;" : "v = o < v ? o : v;";
  const std::string warp = "cannl_warp_" + op;
  use_helper(warp, fmt::format(
      "/* the {0} of v over the 32 lanes of a warp, in lane 0 */\n"
      "static __device__ __forceinline__ {1} {2}({1} v) {{\n"
      "    for (int d = 16; d > 0; d /= 2) {{\n"
      "        const {1} o = __shfl_down_sync(0xffffffffu, v, d);\n"
      "        {3}\n"
      "    }}\n"
      "    return v;\n"
      "}}\n",
      op, r, warp, combine));
  if (!block) return warp;
  const std::string name = "cannl_block_" + op;
  const std::string identity = a == ir::Accum::Add ? x_.num(0) : a == ir::Accum::Max ? "-INFINITY" : "INFINITY";
  use_helper(name, fmt::format(
      "/* the {0} of v over the {1} threads of a block, in thread 0 (every thread must call it) */\n"
      "static __device__ __forceinline__ {2} {3}({2} v) {{\n"
      "    __shared__ {2} part[{4}];\n"
      "    v = {5}(v);\n"
      "    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;\n"
      "    __syncthreads();\n"
      "    v = threadIdx.x < {4} ? part[threadIdx.x] : {6};\n"
      "    if (threadIdx.x < 32) v = {5}(v);\n"
      "    return v;\n"
      "}}\n",
      op, kBlock, r, name, kBlock / 32, warp, identity));
  return name;
}

std::string CudaEmitter::atomic_apply(ir::Accum a) {
  if (a == ir::Accum::Add) return "atomicAdd";
  const bool mx = a == ir::Accum::Max;
  const std::string name = mx ? "cannl_atomic_max" : "cannl_atomic_min";
  const bool f64 = o_.f64;
  const std::string bits = f64 ? "unsigned long long" : "unsigned int";
  const std::string to_real = f64 ? "__longlong_as_double((long long)old)" : "__uint_as_float(old)";
  const std::string to_bits = f64 ? "(unsigned long long)__double_as_longlong(v)" : "__float_as_uint(v)";
  use_helper(name, fmt::format(
      "/* *p = {0}(*p, v), atomically (writes of this nest may fall on the same element) */\n"
      "static __device__ void {1}({2} *p, {2} v) {{\n"
      "    {3} *a = ({3} *)p;\n"
      "    {3} old = *a;\n"
      "    while (v {4} {5}) {{\n"
      "        const {3} seen = atomicCAS(a, old, {6});\n"
      "        if (seen == old) break;\n"
      "        old = seen;\n"
      "    }}\n"
      "}}\n",
      mx ? "max" : "min", name, x_.real(), bits, mx ? ">" : "<", to_real, to_bits));
  return name;
}

void CudaEmitter::name_vars(const ir::Stmt& s, const std::set<std::string>& taken) {
  x_.begin_nest(s, taken, {"i_", "r_", "lane_"});  // the kernels' own index names
}

std::string CudaEmitter::fold_into_acc(ir::Accum a, const ir::Expr& term) {
  if (a == ir::Accum::Add) return "        acc += " + x_.expr(term) + ";\n";
  return "        const real v = " + x_.expr(term) + ";\n" +
         fmt::format("        acc = v {} acc ? v : acc;\n", a == ir::Accum::Max ? ">" : "<");
}

std::string CudaEmitter::store_to(const ir::Access& out, ir::Accum accum, const std::string& value, bool atomic,
                                  const std::string& also) {
  const std::string target = x_.access(out);
  std::string guard = x_.in_range(out);
  if (!also.empty()) guard = guard.empty() ? also : also + " && " + guard;
  std::string st;
  if (atomic && accum != ir::Accum::Set) {
    st = fmt::format("{}(&{}, {});", atomic_apply(accum), target, value);
  } else {
    switch (accum) {
      case ir::Accum::Set: st = fmt::format("{} = {};", target, value); break;
      case ir::Accum::Add: st = fmt::format("{} += {};", target, value); break;
      case ir::Accum::Max: case ir::Accum::Min: {
        const char* cmp = accum == ir::Accum::Max ? ">" : "<";
        st = value == "acc" ? fmt::format("if (acc {} {}) {} = acc;", cmp, target, target)
                            : fmt::format("{{ const real v = {}; if (v {} {}) {} = v; }}", value, cmp, target, target);
        break;
      }
    }
  }
  if (!guard.empty()) st = fmt::format("if ({}) {}", guard, st.front() == '{' || st.front() == 'i' ? "{ " + st + " }" : st);
  return st;
}

std::string CudaEmitter::store(const ir::Stmt& s, const std::string& value, bool atomic, const std::string& also,
                               bool assign, const std::string& indent) {
  const ir::Assign& a0 = s.assigns[0];
  std::string st = store_to(a0.out, assign ? ir::Accum::Set : a0.accum, value, atomic && !assign, also);
  for (size_t i = 1; i < s.assigns.size(); ++i) {
    const ir::Assign& a = s.assigns[i];
    st += "\n" + indent + store_to(a.out, a.accum, x_.expr(*a.body), false, also);
  }
  return st;
}

std::string CudaEmitter::identity(ir::Accum a) const {
  return a == ir::Accum::Add ? x_.num(0) : a == ir::Accum::Max ? "-INFINITY" : "INFINITY";
}

CudaEmitter::Extent CudaEmitter::elements(int b) const {
  Extent e;
  for (const auto& d : buf(b).dims) {
    if (d.batch) e.n = true;
    else e.c *= d.size;
  }
  return e;
}

std::string CudaEmitter::sequential_loops(const ir::Stmt& s, int indent) {
  std::string out;
  auto ind = [&](int k) { return std::string(static_cast<size_t>(4 * (indent + k)), ' '); };
  int depth = 0;
  for (size_t k = 0; k < s.iters.size(); ++k)
    if (!x_.dropped[k])  // (a loop of one iteration: none)
      out += ind(depth++) + fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})\n", x_.vars[k], bound(s.iters[k]));
  if (s.single()) {
    out += ind(depth) + store(s, x_.expr(*s.assigns[0].body), false) + "\n";
  } else {
    out += ind(depth) + "{\n" + ind(depth + 1) + store(s, x_.expr(*s.assigns[0].body), false, "", false, ind(depth + 1)) + "\n" +
           ind(depth) + "}\n";
  }
  return out;
}

bool CudaEmitter::uses_loop(const ir::Access& a, int it) {
  for (const auto& f : a.index)
    for (const auto& t : f.terms)
      if (t.iter == it) return true;
  return false;
}

bool CudaEmitter::injective(const ir::Stmt& s) const {
  std::vector<int> seen(s.iters.size(), 0);
  for (const auto& f : s.assigns[0].out.index) {
    std::vector<std::pair<long, long>> terms;  // |coef|, size
    for (const auto& t : f.terms) {
      seen[static_cast<size_t>(t.iter)]++;
      terms.push_back({std::labs(t.coef), s.iters[static_cast<size_t>(t.iter)].size});
    }
    std::sort(terms.begin(), terms.end(), [](auto a, auto b) { return a.first > b.first; });
    for (size_t i = 0; i < terms.size(); ++i) {
      long rest = 0;
      for (size_t j = i + 1; j < terms.size(); ++j) rest += terms[j].first * (terms[j].second - 1);
      if (terms[i].first == 0 || terms[i].first <= rest) return false;
    }
  }
  for (int c : seen)
    if (c > 1) return false;
  return true;
}

std::string CudaEmitter::decompose(const ir::Stmt& s, const std::vector<int>& loops, const std::string& flat,
                                   int indent) {
  std::string out, ind(static_cast<size_t>(4 * indent), ' ');
  for (size_t j = 0; j < loops.size(); ++j) {
    const std::vector<int> after(loops.begin() + static_cast<long>(j) + 1, loops.end());
    const Extent inner = extent(s, after);
    const bool divide = inner.n || inner.c != 1;
    std::string e = flat;
    if (divide) e += " / " + (inner.n && inner.c != 1 ? "(" + inner.str() + ")" : inner.str());
    if (j > 0) e = (divide ? "(" + e + ")" : e) + " % " + bound(s.iters[static_cast<size_t>(loops[j])]);
    out += ind + fmt::format("const int64_t {} = {};\n", x_.vars[static_cast<size_t>(loops[j])], e);
  }
  return out;
}

CudaEmitter::Extent CudaEmitter::extent(const ir::Stmt& s, const std::vector<int>& loops) {
  Extent e;
  for (int l : loops) {
    const ir::Iter& it = s.iters[static_cast<size_t>(l)];
    if (it.batch) e.n = true;
    else e.c *= it.size;
  }
  return e;
}

std::string CudaEmitter::prefill(const ir::Stmt& s) {
  const std::string r = x_.real();
  use_helper("cannl_fill", fmt::format(
      "/* p[0 .. count) = v (a zero_first nest's cells, before threads add into them) */\n"
      "static __global__ void __launch_bounds__({0}) cannl_fill({1} *__restrict__ p, int64_t count, {1} v) {{\n"
      "    const int64_t i_ = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i_ < count) p[i_] = v;\n"
      "}}\n",
      kBlock, r));
  const int out = s.assigns[0].out.buf;
  const Extent e = elements(out);
  if (at_pos(s)) {  // decode over rows: each row's cells, at its slot and position (as the C target's fill_first)
    use_helper("cannl_fill_rows", fmt::format(
        "/* over rows: row r's per cells at position pos[r] (of a ring: pos[r] % ring) of slot seq[r], = v */\n"
        "static __global__ void __launch_bounds__({0}) cannl_fill_rows({1} *__restrict__ p, int64_t n,\n"
        "    const int64_t *__restrict__ pos, const int64_t *__restrict__ seq, int64_t per, int64_t slot, "
        "int64_t ring,\n"
        "    {1} v) {{\n"
        "    const int64_t i_ = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i_ >= n * per) return;\n"
        "    const int64_t r = i_ / per, at = ring ? pos[r] % ring : pos[r];\n"
        "    p[seq[r] * slot + at * per + i_ % per] = v;\n"
        "}}\n",
        kBlock, r));
    const ir::Buffer& b = buf(out);
    const long slot = buffer_size(b, true) / b.dims[0].size, per = slot / b.dims[1].size;
    return fmt::format("cannl_fill_rows<<<(unsigned)((n * {} + {}) / {}), {}, 0, stream_>>>({}, n, pos, seq, {}, "
                       "{}, {}, {});\n    CUDA_CHECK(cudaGetLastError());\n    ",
                       per, kBlock - 1, kBlock, kBlock, name(out), per, slot, b.ring, identity(s.assigns[0].accum));
  }
  const std::string grid = e.n ? fmt::format("(unsigned)(({} + {}) / {})", e.str(), kBlock - 1, kBlock)
                               : std::to_string((e.c + kBlock - 1) / kBlock);
  return fmt::format("cannl_fill<<<{}, {}, 0, stream_>>>({}, {}, {});\n    CUDA_CHECK(cudaGetLastError());\n    ",
                     grid, kBlock, name(out), e.str(), identity(s.assigns[0].accum));
}

void CudaEmitter::split_scale(const ir::Stmt& s, bool assign, const ir::Expr*& summed, const ir::Expr*& scale) {
  summed = s.assigns[0].body.get();
  scale = nullptr;
  if (assign && s.scaled_sum) {
    summed = s.scaled_sum->summand.get();
    scale = s.scaled_sum->scale.get();
  }
}

bool CudaEmitter::shares_bytes(const ir::Routine& r, const std::vector<int>& bufs, int b) const {
  const long lo = arena_.address(r, b), hi = lo + buf(b).elements() * elem();
  for (int c : bufs) {
    if (c == b) continue;
    const long clo = arena_.address(r, c), chi = clo + buf(c).elements() * elem();
    if (lo >= 0 && clo >= 0 && clo < hi && lo < chi) return true;
  }
  return false;
}

void CudaEmitter::kernel_args(const ir::Routine& r, const ir::Stmt& s, bool uses_n, std::string& params, std::string& args) {
  std::vector<int> bufs;
  for (int w : ir::written_buffers(s))
    if (std::find(bufs.begin(), bufs.end(), w) == bufs.end()) bufs.push_back(w);
  const size_t written = bufs.size();
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const auto* l : loads)
    if (std::find(bufs.begin(), bufs.end(), l->access.buf) == bufs.end()) bufs.push_back(l->access.buf);
  for (size_t i = 0; i < bufs.size(); ++i) {
    params += fmt::format("{}{}{} *{}{}", params.empty() ? "" : ", ", i < written ? "" : "const ", ctype(bufs[i]),
                          shares_bytes(r, bufs, bufs[i]) ? "" : "__restrict__ ", name(bufs[i]));
    args += (args.empty() ? "" : ", ") + name(bufs[i]);
  }
  std::set<std::string> scalars;
  std::vector<const ir::Expr*> stack;
  for (const auto& a : s.assigns) stack.push_back(a.body.get());
  while (!stack.empty()) {
    const ir::Expr* e = stack.back();
    stack.pop_back();
    if (e->op == ir::Op::Scalar && e->name != "n") scalars.insert(e->name);
    if (e->op == ir::Op::Scalar && e->name == "n") uses_n = true;
    for (const auto& a : e->args) stack.push_back(a.get());
  }
  for (const auto& sc : scalars) {
    params += (sc == "rng_key" ? ", const uint64_t " : ", const real ") + sc;
    args += ", " + sc;
  }
  // train_grads' dropout: the slice's first example in the global batch (scalar_prologue); the
  // flag holds for this kernel's body, generated next
  x_.rng_first = r.kind == ir::RoutineKind::TrainGrads && scalars.count("rng_key") > 0;
  if (x_.rng_first) {
    params += ", const int64_t rng_first";
    args += ", rng_first";
  }
  if (uses_n) {
    params += ", const int64_t n";
    args += ", n";
  }
  // the decode routine's positions (its at_pos loop's variable: CExpr prints `pos[b]`)
  if (at_pos(s)) {
    params += ", const int64_t *__restrict__ pos";
    args += ", pos";
  }
  if (rows_ && touches_cache(s)) {  // over rows: a cache's first index is the row's slot (CExpr prints `seq[b]`)
    params += ", const int64_t *__restrict__ seq";
    args += ", seq";
  }
}

std::optional<GemmPlan> CudaEmitter::gemm_at_rows(const ir::Stmt& s) const {
  auto g = plan_cublas_gemm(p_, s);
  // (over rows a cache's rows are at each row's slot and position, and an operand at the
  // position has no one stride: a kernel)
  if (g && rows_ && (touches_cache(s) || g->pos_a || g->pos_b || g->pos_c)) return std::nullopt;
  return g;
}

bool CudaEmitter::touches_cache(const ir::Stmt& s) const {
  for (int b : ir::written_buffers(s))
    if (buf(b).role == ir::Role::Cache) return true;
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Expr* l : loads)
    if (buf(l->access.buf).role == ir::Role::Cache) return true;
  return false;
}

bool CudaEmitter::at_pos(const ir::Stmt& s) {
  for (const ir::Iter& it : s.iters)
    if (it.at_pos) return true;
  return false;
}

CudaEmitter::Kernel CudaEmitter::kernel(const ir::Routine& r, const ir::Stmt& s) {
  const std::string kname = kUnnamed;
  if (s.sequential) CANNL_BUG("a nest drawing random numbers outside init: " + s.what);
  const int depth = static_cast<int>(s.iters.size());
  bool uses_n = false;
  for (const auto& it : s.iters) uses_n |= it.batch;
  std::string params, args;
  kernel_args(r, s, uses_n, params, args);
  std::string body;
  std::string how;
  std::string launch;

  // Written loops by decreasing stride in the written buffer (consecutive threads write
  // consecutive elements), the summed loops in nest order.
  std::vector<int> outer, red;
  std::vector<long> stride(s.iters.size(), 0);
  {
    const auto& dims = buf(s.assigns[0].out.buf).dims;
    long st = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      for (const auto& t : s.assigns[0].out.index[d].terms) stride[static_cast<size_t>(t.iter)] += std::labs(t.coef) * st;
      st *= dims[d].size;
    }
  }
  for (int k = 0; k < depth; ++k)
    if (!x_.dropped[static_cast<size_t>(k)]) (uses_loop(s.assigns[0].out, k) ? outer : red).push_back(k);
  std::stable_sort(outer.begin(), outer.end(),
                   [&](int a, int b) { return stride[static_cast<size_t>(a)] > stride[static_cast<size_t>(b)]; });
  const bool inj = injective(s);
  const Extent total = extent(s, outer), rtotal = extent(s, red);
  const long rmax = rtotal.n ? rtotal.c * p_.max_batch : rtotal.c;
  const long omax = total.n ? total.c * p_.max_batch : total.c;

  auto blocks = [&](const Extent& threads, long per) {
    Extent t = threads;
    t.c *= per;
    if (!t.n) return std::to_string((t.c + kBlock - 1) / kBlock);
    return fmt::format("(unsigned)(({} + {}) / {})", t.str(), kBlock - 1, kBlock);
  };

  // zero_first: a thread (or lane 0) that writes an element's whole sum assigns it; colliding
  // writes add into cells filled with the identity first.
  const bool assign = s.zero_first && inj;
  std::string pre = s.zero_first && !assign ? prefill(s) : "";
  const ir::Expr *summed = nullptr, *scale = nullptr;
  split_scale(s, assign && !red.empty(), summed, scale);
  auto finished = [&](const std::string& acc) { return scale ? acc + " * " + x_.expr(*scale) : acc; };
  if (!inj && s.assigns[0].accum == ir::Accum::Set) {
    // Later iterations overwrite earlier ones: keep the order, one thread.
    how = "one thread, in order (writes overlap)";
    body = sequential_loops(s, 1);
    launch = fmt::format("{}<<<1, 1, 0, stream_>>>({});", kname, args);
  } else if (red.empty() || s.assigns[0].accum == ir::Accum::Set || rmax < (inj ? 32 : 256)) {
    // (Colliding writes come from loops over many positions, a convolution's window: a
    // thread each, with short sums.)
    how = red.empty() ? "one thread per element" : "one thread per element, summing in order";
    if (!inj) how += ", adding atomically (elements repeat)";
    body = "    const int64_t i_ = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n";
    body += fmt::format("    if (i_ >= {}) return;\n", total.str());
    body += decompose(s, outer, "i_", 1);
    if (red.empty() || s.assigns[0].accum == ir::Accum::Set) {
      std::string ind = "    ";
      for (int l : red) {
        body += ind + fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})\n", x_.vars[static_cast<size_t>(l)],
                                  bound(s.iters[static_cast<size_t>(l)]));
        ind += "    ";
      }
      body += ind + store(s, x_.expr(*s.assigns[0].body), !inj, "", assign, ind) + "\n";
    } else {
      const bool add = s.assigns[0].accum == ir::Accum::Add;
      body += fmt::format("    real acc = {};\n", identity(s.assigns[0].accum));
      std::string ind = "    ";
      for (size_t j = 0; j < red.size(); ++j) {
        const int l = red[j];
        body += ind + fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", x_.vars[static_cast<size_t>(l)],
                                  bound(s.iters[static_cast<size_t>(l)]));
        body += j + 1 == red.size() && !add ? " {\n" : "\n";
      }
      body += fold_into_acc(s.assigns[0].accum, *summed);
      if (!add) body += "    }\n";
      body += "    " + store(s, finished("acc"), !inj, "", assign) + "\n";
    }
    launch = fmt::format("{}<<<{}, {}, 0, stream_>>>({});", kname, blocks(total, 1), kBlock, args);
  } else {
    // A warp per element when there are many elements or short sums, else a block.
    const bool block = !(omax >= 8192 || rmax < 2048);
    const int t = block ? kBlock : 32;
    how = fmt::format("one {} per element, reducing its {} terms with shuffles{}", block ? "block" : "warp",
                      rtotal.str(), block ? " and shared memory" : "");
    if (!inj) how += ", adding atomically (elements repeat)";
    const std::string reduce = reducer(s.assigns[0].accum, block);
    // Consecutive lanes take consecutive terms: the summed loop with the smallest stride in
    // the buffers read varies fastest (coalesced reads).
    std::vector<long> rstride(s.iters.size(), LONG_MAX);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const auto* l : loads) {
      const auto& dims = buf(l->access.buf).dims;
      long st = 1;
      for (size_t d = dims.size(); d-- > 0;) {
        for (const auto& t : l->access.index[d].terms)
          rstride[static_cast<size_t>(t.iter)] = std::min(rstride[static_cast<size_t>(t.iter)], std::labs(t.coef) * st);
        st *= dims[d].size;
      }
    }
    std::stable_sort(red.begin(), red.end(),
                     [&](int a, int b) { return rstride[static_cast<size_t>(a)] > rstride[static_cast<size_t>(b)]; });
    if (block) {
      // (one block: no written loop to decompose, no element index)
      body = outer.empty() ? "" : "    const int64_t i_ = blockIdx.x;\n";
      body += "    const int lane_ = threadIdx.x;\n";
    } else {
      body = "    const int64_t i_ = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;\n";
      body += "    const int lane_ = threadIdx.x % 32;\n";
      body += fmt::format("    if (i_ >= {}) return; /* the whole warp */\n", total.str());
    }
    body += decompose(s, outer, "i_", 1);
    body += fmt::format("    real acc = {};\n", identity(s.assigns[0].accum));
    body += fmt::format("    for (int64_t r_ = lane_; r_ < {}; r_ += {}) {{\n", rtotal.str(), t);
    body += decompose(s, red, "r_", 2);
    body += fold_into_acc(s.assigns[0].accum, *summed);
    body += "    }\n";
    body += fmt::format("    acc = {}(acc);\n", reduce);
    body += "    " + store(s, finished("acc"), !inj, "lane_ == 0", assign) + "\n";
    launch = block ? fmt::format("{}<<<{}, {}, 0, stream_>>>({});", kname, total.n ? "(unsigned)(" + total.str() + ")"
                                                                                : std::to_string(total.c), kBlock, args)
                   : fmt::format("{}<<<{}, {}, 0, stream_>>>({});", kname, blocks(total, 32), kBlock, args);
  }
  if (assign) how += ", assigning the sums (zero_first)";
  else if (s.zero_first) how += ", into cells filled with the identity first";
  std::string def = fmt::format("/* {} ({}) */\n", comment_safe(what(s)), how);
  def += fmt::format("static __global__ void __launch_bounds__({}) {}({}) {{\n", kBlock, kname, params);
  def += body + "}\n";
  return {def, pre + launch, kname};
}

std::string CudaEmitter::gemm_call(const GemmPlan& g) const {
  auto op = [](bool t) { return t ? "CUBLAS_OP_T" : "CUBLAS_OP_N"; };
  std::string alpha = x_.num(g.alpha);
  if (!g.alpha_scalar.empty()) {
    const std::string sc = g.alpha_scalar == "n" ? "(real)n" : g.alpha_scalar;
    alpha = g.alpha == 1 ? sc : sc + " * " + alpha;
  }
  // (a plan with a position offset is a kernel: gemm_at_rows)
  if (g.pos_a || g.pos_b || g.pos_c) CANNL_BUG("a cuBLAS product at the decode position");
  return fmt::format("gemm(m, __FILE__, __LINE__, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                     op(g.trans_a), op(g.trans_b), g.m.str(), g.n.str(), g.k.str(), alpha, name(g.a), g.lda,
                     g.stride_a, name(g.b), g.ldb, g.stride_b, g.overwrite ? x_.num(0) : x_.num(1),
                     name(g.c), g.ldc, g.stride_c, g.count.str());
}

std::string CudaEmitter::init_routine(const ir::Routine& r) {
  std::set<int> bufs;
  bool rng = false;
  for (const auto& s : r.stmts) {
    rng |= s.sequential;
    if (s.call) {  // a block's init body (BlockInit): the stacked params it draws
      if (s.call->kind != ir::Call::Kind::BlockInit) CANNL_BUG("a call in init");
      rng = true;
      std::set<std::string> unused;
      block_call_uses(p_, *s.call, bufs, unused);
      continue;
    }
    for (int w : ir::written_buffers(s)) bufs.insert(w);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s, loads);
    for (const auto* l : loads) bufs.insert(l->access.buf);
  }
  std::string out = "/* routine init, on the host (the C target's random streams: a seed gives its params), into\n"
                    "   the pinned mirror; the next device routine uploads it */\n";
  out += fmt::format("static void init_params(struct {} *m, uint64_t seed) {{\n", p_.model);
  out += rng ? "    cannl_rng state_;\n    cannl_rng *const rng = &state_;\n    cannl_rng_seed(rng, seed);\n"
             : "    (void)seed;\n";
  std::set<std::string> taken;
  for (int b : bufs) {
    const auto i = static_cast<size_t>(b);
    if (!arena_.own[i] || arena_.field[i] >= arena_.state) CANNL_BUG("init writes outside the state: " + buf(b).name);
    out += fmt::format("    real *{} = (real *)(m->host + {});\n", name(b), arena_.field[i]);
    taken.insert(name(b));
  }
  std::string last;
  for (const auto& s : r.stmts) {
    if (what(s) != last) out += "\n    /* " + comment_safe(what(s)) + " */\n";
    last = what(s);
    if (s.call) {
      out += block_call(*s.call);
      continue;
    }
    name_vars(s, taken);
    if (s.zero_first)
      out += fmt::format("    for (int64_t i_ = 0; i_ < {}; ++i_) {}[i_] = {};\n", buf(s.assigns[0].out.buf).elements(),
                         name(s.assigns[0].out.buf), identity(s.assigns[0].accum));
    out += sequential_loops(s, 1);
  }
  return out + "}\n";
}

std::string CudaEmitter::named(std::string text, const std::string& name) {
  for (size_t i; (i = text.find(kUnnamed)) != std::string::npos;) text.replace(i, std::string(kUnnamed).size(), name);
  return text;
}

std::string CudaEmitter::launch(const ir::Routine& r, const ir::Stmt& s) {
  Kernel k = kernel(r, s);
  auto it = kernel_by_text_.find(k.def);
  if (it == kernel_by_text_.end()) {
    it = kernel_by_text_.emplace(k.def, cnames_.kernel(p_, s)).first;
    kernels_ += named(k.def, it->second) + "\n";
  }
  return named(k.launch, it->second);
}

void CudaEmitter::routine(const ir::Routine& r, std::string& routines) {
  std::set<int> bufs;
  std::set<std::string> scalars;
  bool n_used = false;
  for (const auto& s : r.stmts) {
    stmt_uses(s, bufs, scalars);
    for (const auto& it : s.iters) n_used |= it.batch;
    if (s.call && ir::is_block_call(s.call->kind)) block_call_uses(p_, *s.call, bufs, scalars);
  }
  n_used |= scalars.count("n") > 0;
  std::set<std::string> taken;
  for (int b : bufs) taken.insert(name(b));
  for (const auto& sc : r.scalars) taken.insert(sc.name);
  const bool decode = r.io.position;  // generation's step, over rows: n rows, pos[] and seq[]
  rows_ = x_.rows = decode;
  if (decode) taken.insert("pos"), taken.insert("seq");

  std::string body, last;
  int nk = 0, ng = 0;
  bool inputs_used = false;
  for (const ir::Stmt& s : r.stmts) {
    if (what(s) != last) body += "\n    /* " + comment_safe(what(s)) + " */\n";
    last = what(s);
    if (s.call && ir::is_block_call(s.call->kind)) {
      body += block_call(*s.call);
      n_used |= s.call->kind != ir::Call::Kind::BlockDecode;
      ++nk;
      continue;
    }
    if (s.call) {
      body += call_text(*s.call);
      n_used |= s.call->batch;
      ++nk;
      continue;
    }
    name_vars(s, taken);
    if (auto g = gemm_at_rows(s)) {
      body += "    " + gemm_call(*g) + "\n";
      n_used |= g->m.n || g->n.n || g->k.n || g->count.n;
      ++ng;
      ++gemms_;
      continue;
    }
    body += "    " + launch(r, s) + "\n    CUDA_CHECK(cudaGetLastError());\n";
    ++nk;
  }

  // The buffers, named once: the inputs' staging, the state's fields, the work region's (as
  // the C target's routines name theirs).
  std::string pro;
  std::vector<std::pair<long, int>> work;
  for (int b : bufs) {
    if (buf(b).role == ir::Role::Input) {
      inputs_used = true;
      auto it = std::find(p_.inputs.begin(), p_.inputs.end(), b);
      if (buf(b).ids > 0)  // ids: the staged int32_t array
        pro += fmt::format("    const int32_t *const {} = (const int32_t *)(const void *)in_[{}];\n", name(b),
                           it - p_.inputs.begin());
      else
        pro += fmt::format("    const real *const {} = in_[{}];\n", name(b), it - p_.inputs.begin());
    } else if (arena_.own[static_cast<size_t>(b)]) {
      pro += fmt::format("    {} *const {} = {};\n", ctype(b), name(b), field(b));
    } else {
      device(r, b);  // (a bug when it has no place)
      work.push_back({arena_.address(r, b) - arena_.work, b});
    }
  }
  if (!work.empty()) {
    std::sort(work.begin(), work.end());
    pro += fmt::format("    char *const work = m->dev + {}; /* the work region: {} */\n", arena_.work,
                       work_words(r, p_.max_batch));
    for (const auto& [offset, b] : work) {
      const std::string at = r.scaled(b) ? scaled_offset(arena_.fixed_bytes - arena_.work, r.example_offset(b, p_.max_batch))
                                         : std::to_string(offset);
      pro += fmt::format("    {0} *const {1} = ({0} *)(work + {2});\n", ctype(b), name(b), at);
    }
  }
  pro += scalar_prologue(r, scalars, x_);
  if (!inputs_used) pro += "    (void)in_;\n";
  if (!n_used && !decode) pro += "    (void)n;\n";
  if (rows_) pro = "    (void)n, (void)pos, (void)seq;\n" + pro;
  pro += "    const cudaStream_t stream_ = cannl_stream_cuda(m->compute);\n";
  if (nk == 0) pro += "    (void)stream_;\n";
  std::string head = fmt::format("/* routine {}: {} kernels, {} cuBLAS products, queued on the compute stream */\n",
                                 r.name(), nk, ng);
  head += fmt::format("static void {}(struct {} *m, const real *const in_[], {}) {{\n", r.name(), p_.model,
                      rows_ ? "int64_t n, const int64_t *pos, const int64_t *seq" : "int64_t n");
  routines += head + pro + body + "}\n\n";
  rows_ = x_.rows = false;
}

std::string CudaEmitter::call_text(const ir::Call& c) {
  if (c.kind == ir::Call::Kind::EmbeddingForward || c.kind == ir::Call::Kind::EmbeddingBackward)
    return embedding_text(c);
  attention_ = true;
  if (c.at_pos) return attention_rows(c);
  // a buffer [B.., T, H.., w] as a view over (sequence, head, position)
  // (q, k, v in place in a fused buffer: at `off`, rows of `row` elements; ir::Call's views)
  // (k, v and their gradients over the key/value heads: heads / group of them)
  auto view = [&](int b, long rows, long width, long off = 0, long row = 0, bool kv = false) {
    const long heads = kv ? c.heads / c.group : c.heads;
    if (off == 0 && row == 0)
      return fmt::format("{}, cannl_attn_view{{{}, {}, {}}}", name(b), rows * heads * width, width, heads * width);
    return fmt::format("{} + {}, cannl_attn_view{{{}, {}, {}}}", name(b), off, rows * row, width, row);
  };
  // grouped-query and the sliding window: the launchers' last arguments, when not 1 and 0
  const std::string tail = c.group > 1 || c.window > 0 ? fmt::format(", {}, {}", c.group, c.window) : "";
  const std::string seqs = c.batch ? (c.seqs == 1 ? std::string("(int)n") : fmt::format("(int)(n * {})", c.seqs))
                                   : std::to_string(c.seqs);
  const std::string head = fmt::format("<real, {}, {}{}>(stream_, {}, {}, {}, {}, 0, {}, (real){}, ", c.e, c.f,
                                       attention_tensor_cores() ? ", true" : "", seqs, c.heads, c.tq, c.tk,
                                       c.causal ? 1 : 0, num_double(c.scale));
  std::string out;
  if (c.kind == ir::Call::Kind::AttentionForward)
    out = fmt::format("    cannl_attention_forward{}{}, {}, {}, {}, {}{});\n", head,
                      view(c.q, c.tq, c.e, c.q_off, c.q_row), view(c.k, c.tk, c.e, c.k_off, c.k_row, true),
                      view(c.v, c.tk, c.f, c.v_off, c.v_row, true), view(c.o, c.tq, c.f), name(c.lse), tail);
  else
    out = fmt::format("    cannl_attention_backward{}{}, {}, {}, {},\n        {}, {}, {}, {}, {}, {}{});\n", head,
                      view(c.q, c.tq, c.e, c.q_off, c.q_row), view(c.k, c.tk, c.e, c.k_off, c.k_row, true),
                      view(c.v, c.tk, c.f, c.v_off, c.v_row, true), view(c.o, c.tq, c.f), view(c.dout, c.tq, c.f),
                      name(c.lse), name(c.delta), view(c.dq, c.tq, c.e, c.q_off, c.q_row),
                      view(c.dk, c.tk, c.e, c.k_off, c.k_row, true), view(c.dv, c.tk, c.f, c.v_off, c.v_row, true),
                      tail);
  return out + "    CUDA_CHECK(cudaGetLastError());\n";
}

// Over rows: for each row r < n its query at position pos[r] of sequence slot seq[r] against that
// slot's cached keys and values (a cache: [slots, T or ring, ...]; any other operand per row at
// position 0: [batch, T, ...], row r at r's example), as the C target's attention_rows.
std::string CudaEmitter::attention_rows(const ir::Call& c) {
  const long kvh = c.heads / c.group;
  // buffer b's head 0 of row 0 (of slot 0), its stride between rows (slots)
  auto row = [&](int b, long off) { return off == 0 ? name(b) : fmt::format("{} + {}", name(b), off); };
  auto row_stride = [&](int b) {
    const auto& bb = buf(b);
    return bb.role == ir::Role::Cache ? bb.elements() / bb.dims[0].size : buffer_size(bb, true);
  };
  const long k_st = c.k_off == 0 && c.k_row == 0 ? kvh * c.e : c.k_row;
  const long v_st = c.v_off == 0 && c.v_row == 0 ? kvh * c.f : c.v_row;
  if (buf(c.o).role == ir::Role::Cache) CANNL_BUG("a decode's attention output in a cache");
  // the query: row r's at its position 0, or in the cache (a fused projection's) at its slot and position
  const bool q_cache = buf(c.q).role == ir::Role::Cache;
  const long q_ps = !q_cache ? 0 : c.q_off == 0 && c.q_row == 0 ? c.heads * c.e : c.q_row;
  const std::string q_strides = q_cache ? fmt::format("0, {}, {}", row_stride(c.q), q_ps)
                                        : fmt::format("{}, 0, 0", row_stride(c.q));
  return fmt::format("    cannl_attention_decode_rows<real, {}, {}>(stream_, (int)n, {}, {}, pos, seq, {}, {}, "
                     "(real){}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});\n"
                     "    CUDA_CHECK(cudaGetLastError());\n",
                     c.e, c.f, c.heads, c.group, c.tk, c.window, num_double(c.scale), row(c.q, c.q_off),
                     q_strides, row(c.k, c.k_off), k_st, row_stride(c.k), row(c.v, c.v_off), v_st,
                     row_stride(c.v), name(c.o), row_stride(c.o), name(c.lse), buffer_size(buf(c.lse), true), c.tq);
}

std::string CudaEmitter::embedding_text(const ir::Call& c) {
  use_helper("embedding", R"(template <typename R>
static __global__ void __launch_bounds__(256) cannl_embedding_forward(int64_t positions, int64_t width, int64_t rows,
    const int32_t *__restrict__ ids, const R *__restrict__ table, R *__restrict__ out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= positions * width) return;
    const int64_t p = i / width, j = i % width;
    const int32_t id = ids[p];
    out[i] = id >= 0 && id < rows ? table[(int64_t)id * width + j] : R(0);
}
template <typename R>
static __global__ void __launch_bounds__(256) cannl_embedding_backward(int64_t positions, int64_t width, int64_t rows,
    const int32_t *__restrict__ ids, const R *__restrict__ dout, R *__restrict__ dtable) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= width) return;
    for (int64_t p = 0; p < positions; ++p) {
        const int32_t id = ids[p];
        if (id >= 0 && id < rows) dtable[(int64_t)id * width + j] += dout[p * width + j];
    }
}
)");
  const std::string count = c.batch ? (c.seqs == 1 ? std::string("n") : fmt::format("(n * {})", c.seqs)) : std::to_string(c.seqs);
  std::string out;
  if (c.at_pos) {  // decode over rows: row r's id at its position 0 (ids [batch, T], o [batch, T, width])
    use_helper("embedding_rows", R"(/* over rows: row r's id at ids[r * ids_rs], its table row into out + r * out_rs */
template <typename R>
static __global__ void __launch_bounds__(256) cannl_embedding_rows(int64_t n, int64_t width, int64_t rows,
    const int32_t *__restrict__ ids, int64_t ids_rs, const R *__restrict__ table, R *__restrict__ out, int64_t out_rs) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * width) return;
    const int64_t r = i / width, j = i % width;
    const int32_t id = ids[r * ids_rs];
    out[r * out_rs + j] = id >= 0 && id < rows ? table[(int64_t)id * width + j] : R(0);
}
)");
    out = fmt::format("    cannl_embedding_rows<real><<<(unsigned)((n * {} + 255) / 256), 256, 0, stream_>>>(n, {}, "
                      "{}, {}, {}, {}, {}, {});\n",
                      c.width, c.width, c.rows, name(c.ids), buffer_size(buf(c.ids), true), name(c.table), name(c.o),
                      buffer_size(buf(c.o), true));
  } else if (c.kind == ir::Call::Kind::EmbeddingForward)
    out = fmt::format("    cannl_embedding_forward<real><<<(unsigned)(({} * {} + 255) / 256), 256, 0, stream_>>>({}, {}, {}, {}, {}, {});\n",
                      count, c.width, count, c.width, c.rows, name(c.ids), name(c.table), name(c.o));
  else
    out = fmt::format("    cannl_embedding_backward<real><<<{}, 256, 0, stream_>>>({}, {}, {}, {}, {}, {});\n",
                      (c.width + 255) / 256, count, c.width, c.rows, name(c.ids), name(c.dout), name(c.dtable));
  return out + "    CUDA_CHECK(cudaGetLastError());\n";
}

std::string CudaEmitter::forward_copy() const {
  const ir::Routine& r = *p_.routine(ir::RoutineKind::Forward);
  std::string s;
  for (size_t k = 0; k < r.io.outputs.size(); ++k) {
    const auto& b = buf(r.io.outputs[k]);
    bool batched = !b.dims.empty() && b.dims[0].batch;
    long per = 1;
    for (const auto& d : b.dims) per *= d.batch ? 1 : d.size;
    s += fmt::format("    CANNL_TRY(cannl_stream_copy(m->compute, outputs[{}], {}, (size_t){}{} * sizeof(real), &e));\n",
                     k, device(r, r.io.outputs[k]), batched ? "n * " : "", per);
  }
  return s;
}

void CudaEmitter::decode_data(data& d) const {
  const ir::Routine* dec = p_.routine(ir::RoutineKind::Decode);
  d.set("cuda_decode", data{dec ? data::type::bool_true : data::type::bool_false});
  d.set("decode_arg", dec ? "&" + p_.model + "_decode_api" : std::string("NULL"));
  if (!dec) return;
  const int out = dec->io.outputs[0];
  const long per = buffer_size(buf(out), true) / dec->io.seq_len;  // [batch, T, ...]: one position's
  const long tokens = std::find(p_.inputs.begin(), p_.inputs.end(), dec->io.ids) - p_.inputs.begin();
  d.set("decode_ctx", std::to_string(dec->io.seq_len));
  d.set("decode_vocab", std::to_string(per));
  d.set("decode_input", std::to_string(tokens));
  d.set("decode_ids", std::to_string(buf(dec->io.ids).ids));
  d.set("decode_output", name(out));
  d.set("decode_state", p_.model);  // templates/common/decode_*.c.mustache
  d.set("decode_wrap", false);
  d.set("decode_ring", ir::has_ring_cache(p_));  // (a prefill step then holds one position of a prompt)
  // row r's output: at its position 0 (passes/decode.cpp over rows: [batch, T, ...])
  d.set("decode_row_dev", fmt::format("({} + r * {})", device(*dec, out), buffer_size(buf(out), true)));
}

std::string CudaEmitter::eval_copy() const {
  const ir::Routine& r = *p_.routine(ir::RoutineKind::Eval);
  std::string s;
  for (size_t k = 0; k < r.io.values.size(); ++k)
    s += fmt::format("    CANNL_TRY(cannl_stream_copy(m->compute, &m->scalars[{}], {}, sizeof(real), &e));\n", k,
                     device(r, r.io.values[k]));
  return s;
}

std::vector<OutputFile> emit_cuda(const ir::Program& p, const CudaOptions& opt) { return CudaEmitter(p, opt).run(); }

}  // namespace cannl
