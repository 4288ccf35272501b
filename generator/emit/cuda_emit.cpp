// cuda_emit.cpp — the CUDA back end (see cuda_emit.h).
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
#include "emit/c_tables.h"
#include "emit/cublas_plan.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

using kainjow::mustache::data;

constexpr int kBlock = 256;  // threads per block of every generated kernel

// A size that may be a multiple of the run-time batch count n.
struct Extent {
  long c = 1;
  bool n = false;
  std::string str() const { return n ? (c == 1 ? "n" : fmt::format("n * {}", c)) : std::to_string(c); }
};

class CudaEmitter {
public:
  CudaEmitter(const ir::Program& p, const CudaOptions& o) : p_(p), o_(o), cnames_(c_names(p)), names_(cnames_.buffer) {
    x_.p = &p;
    x_.names = names_;
    x_.f64 = o.f64;
    x_.cuda = true;
    x_.example_offset = true;
  }

  bool attention_ = false;  // some routine calls cannl_attention.cuh

  std::vector<OutputFile> run() {
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
    d.set("dropout", data{x_.helpers.count("keep") ? data::type::bool_true : data::type::bool_false});
    d.set("kernels", kernels_);
    d.set("routines", routines);
    d.set("arena_bytes", std::to_string(arena_.bytes));
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
      b.set("offset", std::to_string(arena_.field[i]));
      bufs.push_back(b);
    }
    d.set("buffers", bufs);
    // Host pointers of the params and the state tensors (the pinned mirror of the arena's
    // state prefix), and of the params' gradients: train_step leaves them in the grad block,
    // downloaded into a pinned array of their own (packed, in param order) with the mirror.
    const ir::Routine* train = p_.routine(ir::RoutineKind::TrainStep);
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
    for (int g : train->io.kept) {
      grad_at[g] = grad_elems;
      const long dev = arena_.address(*train, g);
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
    // Staging of the inputs: per slot, input k at offset k of max_batch examples each.
    data ins{data::type::list};
    long in_off = 0;
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      const auto& b = p_.buffers[static_cast<size_t>(p_.inputs[k])];
      long per = 1;
      for (const auto& dm : b.dims) per *= dm.batch ? 1 : dm.size;
      data e;
      e.set("index", std::to_string(k));
      e.set("offset", std::to_string(in_off));
      e.set("per", std::to_string(per));
      // ids are int32_t in the caller's array and on the device (a slot of `per` reals holds them)
      e.set("elem", buf(p_.inputs[k]).ids > 0 ? "int32_t" : "real");
      ins.push_back(e);
      in_off += per * p_.max_batch;
    }
    d.set("input_slots", ins);
    d.set("in_elems", std::to_string(std::max(in_off, 1L)));
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

private:
  const ir::Program& p_;
  CudaOptions o_;
  CNames cnames_;  // the C identifiers (emit/c_names.h)
  std::vector<std::string> names_;
  CExpr x_;
  const ir::Arena& arena_ = p_.layout.training;  // the device arena (passes/plan_layout.cpp)
  std::vector<std::string> device_helpers_;  // in order of first use
  std::set<std::string> helper_names_;
  int gemms_ = 0;  // cuBLAS products in all routines
  // Kernels already defined, by their text with the name left out: a nest that forward,
  // eval_metrics and train_step all run (same loops, same expression) is one kernel.
  std::map<std::string, std::string> kernel_by_text_;
  std::string kernels_;  // their definitions, in order

  long elem() const { return o_.f64 ? 8 : 4; }

  // C++ has no separate namespace for struct tags: a model called `real` (the state `struct
  // real`) cannot also have the element type's typedef `real` here, so that one is called
  // cannl_real in this file (every `real` not after `struct`, outside string literals).
  static std::string rename_real(const std::string& text) {
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
  const ir::Buffer& buf(int b) const { return p_.buffers[static_cast<size_t>(b)]; }
  const std::string& name(int b) const { return names_[static_cast<size_t>(b)]; }
  // The element type of buffer b: real, or int32_t for ids.
  const char* ctype(int b) const { return buf(b).ids > 0 ? "int32_t" : "real"; }

  // The cuBLAS compute type of the products (CudaOptions::precision): fp32 on the CUDA cores;
  // tf32 and bf16 on the tensor cores, operands rounded to TF32 or bf16 inside cuBLAS,
  // accumulated and stored in fp32.
  const char* blas_compute() const {
    if (o_.f64) return "CUBLAS_COMPUTE_64F";
    if (o_.precision == "tf32") return "CUBLAS_COMPUTE_32F_FAST_TF32";
    if (o_.precision == "bf16") return "CUBLAS_COMPUTE_32F_FAST_16BF";
    return "CUBLAS_COMPUTE_32F";
  }
  // The header comment's line on the products' arithmetic.
  std::string precision_note() const {
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

  // ---- memory ----------------------------------------------------------------------------

  // The state's fields: the mirrored state prefix (params, optimiser state), then the rest
  // that has a field (buffers used outside a memory plan; train_step's param gradients, which
  // point into its work region).
  std::string fields() const {
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

  // Buffer b while routine r runs, as a device pointer expression.
  std::string device(const ir::Routine& r, int b) const {
    const long at = arena_.address(r, b);
    if (at < 0) CANNL_BUG("a buffer outside the device arena: " + buf(b).name);
    return arena_.own[static_cast<size_t>(b)] ? field(b) : fmt::format("((real *)(m->dev + {}))", at);
  }

  // The state's pointer to an own buffer b: its field, or a view's stacked buffer's (lower/roll.h:
  // a repeat block's instance of a stacked param, gradient or optimiser state) plus its offset.
  std::string field(int b) const {
    const ir::Buffer& x = buf(b);
    if (x.view_of < 0) return "m->" + name(b);
    return x.view_offset == 0 ? "m->" + name(x.view_of) : fmt::format("(m->{} + {})", name(x.view_of), x.view_offset);
  }

  // ---- helpers ---------------------------------------------------------------------------

  void use_helper(const std::string& key, const std::string& text) {
    if (helper_names_.insert(key).second) device_helpers_.push_back(text);
  }

  // Reduction of `v` over a warp (lane 0 gets it) or a block of kBlock threads (thread 0).
  std::string reducer(ir::Accum a, bool block) {
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

  std::string atomic_apply(ir::Accum a) {
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

  // ---- nests -----------------------------------------------------------------------------

  void name_vars(const ir::Stmt& s, const std::set<std::string>& taken) {
    x_.begin_nest(s, taken, {"i_", "r_", "lane_"});  // the kernels' own index names
  }

  // One term of a reduction folded into the local `acc` (+, max or min).
  std::string fold_into_acc(ir::Accum a, const ir::Expr& term) {
    if (a == ir::Accum::Add) return "        acc += " + x_.expr(term) + ";\n";
    return "        const real v = " + x_.expr(term) + ";\n" +
           fmt::format("        acc = v {} acc ? v : acc;\n", a == ir::Accum::Max ? ">" : "<");
  }

  std::string bound(const ir::Iter& it) const { return it.batch ? std::string("n") : std::to_string(it.size); }

  // The statement writing `value` into the nest's element (guarded when it may fall outside
  // the buffer). `atomic`: the writes of different threads may collide.
  std::string store_to(const ir::Access& out, ir::Accum accum, const std::string& value, bool atomic,
                       const std::string& also = "") {
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

  // The statement writing `value` into the nest's element, then its further assignments (in
  // order, at the same point). `assign`: the element gets the value (a zero_first nest whose
  // sum for the element is complete in `value`), not added to it.
  std::string store(const ir::Stmt& s, const std::string& value, bool atomic, const std::string& also = "",
                    bool assign = false, const std::string& indent = "") {
    const ir::Assign& a0 = s.assigns[0];
    std::string st = store_to(a0.out, assign ? ir::Accum::Set : a0.accum, value, atomic && !assign, also);
    for (size_t i = 1; i < s.assigns.size(); ++i) {
      const ir::Assign& a = s.assigns[i];
      st += "\n" + indent + store_to(a.out, a.accum, x_.expr(*a.body), false, also);
    }
    return st;
  }

  // The identity of a nest's accumulation (what zero_first cells start from).
  std::string identity(ir::Accum a) const {
    return a == ir::Accum::Add ? x_.num(0) : a == ir::Accum::Max ? "-INFINITY" : "INFINITY";
  }

  // The number of elements of a buffer at run time (a batch axis counts n).
  Extent elements(int b) const {
    Extent e;
    for (const auto& d : buf(b).dims) {
      if (d.batch) e.n = true;
      else e.c *= d.size;
    }
    return e;
  }

  // The whole nest as sequential loops (the host init routine; single-thread kernels).
  std::string sequential_loops(const ir::Stmt& s, int indent) {
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

  static bool uses_loop(const ir::Access& a, int it) {
    for (const auto& f : a.index)
      for (const auto& t : f.terms)
        if (t.iter == it) return true;
    return false;
  }

  // Different values of the written loops write different elements: every written loop in
  // one index, and within an index the terms a mixed-radix number (each coefficient larger
  // than the largest sum of the smaller terms).
  bool injective(const ir::Stmt& s) const {
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

  // Decomposes the flat index `flat` into the loops `loops` (the last varies fastest).
  std::string decompose(const ir::Stmt& s, const std::vector<int>& loops, const std::string& flat, int indent) {
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

  static Extent extent(const ir::Stmt& s, const std::vector<int>& loops) {
    Extent e;
    for (int l : loops) {
      const ir::Iter& it = s.iters[static_cast<size_t>(l)];
      if (it.batch) e.n = true;
      else e.c *= it.size;
    }
    return e;
  }

  struct Kernel {
    std::string def, launch, name;
  };

  // A zero_first nest whose threads do not each write whole elements: its out buffer is
  // filled with the identity first (a kernel launch on the compute stream).
  std::string prefill(const ir::Stmt& s) {
    const std::string r = x_.real();
    use_helper("cannl_fill", fmt::format(
        "/* p[0 .. count) = v (a zero_first nest's cells, before threads add into them) */\n"
        "static __global__ void __launch_bounds__({0}) cannl_fill({1} *__restrict__ p, int64_t count, {1} v) {{\n"
        "    const int64_t i_ = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i_ < count) p[i_] = v;\n"
        "}}\n",
        kBlock, r));
    const int out = s.assigns[0].out.buf;
    Extent e = elements(out);
    std::string at = name(out);
    if (at_pos(s)) {  // decode: the cells of position pos only, the out [batch, T, ...] (as the C target's fill_first)
      const ir::Buffer& b = buf(out);
      e = Extent{buffer_size(b, true) / b.dims[1].size, false};
      at = fmt::format("{} + {} * {}", name(out), b.ring ? fmt::format("(pos % {})", b.ring) : std::string("pos"), e.c);
    }
    const std::string grid = e.n ? fmt::format("(unsigned)(({} + {}) / {})", e.str(), kBlock - 1, kBlock)
                                 : std::to_string((e.c + kBlock - 1) / kBlock);
    return fmt::format("cannl_fill<<<{}, {}, 0, stream_>>>({}, {}, {});\n    CUDA_CHECK(cudaGetLastError());\n    ",
                       grid, kBlock, at, e.str(), identity(s.assigns[0].accum));
  }

  // A zero_first sum times a constant (out = 0 += x * c) whose sums are complete in one
  // thread: the constant multiplies the finished sum once, as the C target does.
  static void split_scale(const ir::Stmt& s, bool assign, const ir::Expr*& summed, const ir::Expr*& scale) {
    summed = s.assigns[0].body.get();
    scale = nullptr;
    if (assign && s.scaled_sum) {
      summed = s.scaled_sum->summand.get();
      scale = s.scaled_sum->scale.get();
    }
  }

  // The arguments of a nest's kernel: the buffers it touches (the written one not const)
  // and the run-time scalars it reads.
  // A buffer whose bytes overlap another one's that the nest touches, in routine r (an in-place
  // pair of the memory plan, passes/plan_memory.cpp): no __restrict__ for either.
  bool shares_bytes(const ir::Routine& r, const std::vector<int>& bufs, int b) const {
    const long lo = arena_.address(r, b), hi = lo + buf(b).elements() * elem();
    for (int c : bufs) {
      if (c == b) continue;
      const long clo = arena_.address(r, c), chi = clo + buf(c).elements() * elem();
      if (lo >= 0 && clo >= 0 && clo < hi && lo < chi) return true;
    }
    return false;
  }

  void kernel_args(const ir::Routine& r, const ir::Stmt& s, bool uses_n, std::string& params, std::string& args) {
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
    if (at_pos(s)) {  // the decode routine's position (its at_pos loop's variable: CExpr prints `pos`)
      params += ", const int64_t pos";
      args += ", pos";
    }
  }

  static bool at_pos(const ir::Stmt& s) {
    for (const ir::Iter& it : s.iters)
      if (it.at_pos) return true;
    return false;
  }

  // The nest's kernel, named kUnnamed (routine() names it: emit/c_names.h), and its launch.
  static constexpr const char* kUnnamed = "KERNEL_NAME_";
  Kernel kernel(const ir::Routine& r, const ir::Stmt& s) {
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

  std::string what(const ir::Stmt& s) const { return s.line ? fmt::format("line {}: {}", s.line, s.what) : s.what; }

  std::string gemm_call(const GemmPlan& g) const {
    auto op = [](bool t) { return t ? "CUBLAS_OP_T" : "CUBLAS_OP_N"; };
    std::string alpha = x_.num(g.alpha);
    if (!g.alpha_scalar.empty()) {
      const std::string sc = g.alpha_scalar == "n" ? "(real)n" : g.alpha_scalar;
      alpha = g.alpha == 1 ? sc : sc + " * " + alpha;
    }
    // decode: each operand from its row at the position (a window's ring cache: pos % ring)
    auto at = [&](int b, long pos_stride) {
      if (pos_stride == 0) return name(b);
      const std::string pos = buf(b).ring ? fmt::format("(pos % {})", buf(b).ring) : std::string("pos");
      return pos_stride == 1 ? fmt::format("{} + {}", name(b), pos)
                             : fmt::format("{} + {} * {}", name(b), pos, pos_stride);
    };
    return fmt::format("gemm(m, __FILE__, __LINE__, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                       op(g.trans_a), op(g.trans_b), g.m.str(), g.n.str(), g.k.str(), alpha, at(g.a, g.pos_a), g.lda,
                       g.stride_a, at(g.b, g.pos_b), g.ldb, g.stride_b, g.overwrite ? x_.num(0) : x_.num(1),
                       at(g.c, g.pos_c), g.ldc, g.stride_c, g.count.str());
  }

  // ---- routines --------------------------------------------------------------------------

  std::string init_routine(const ir::Routine& r) {
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

  static std::string named(std::string text, const std::string& name) {
    for (size_t i; (i = text.find(kUnnamed)) != std::string::npos;) text.replace(i, std::string(kUnnamed).size(), name);
    return text;
  }

  // Nest s's kernel launch, its kernel defined the first time its text is seen (kernels_).
  std::string launch(const ir::Routine& r, const ir::Stmt& s) {
    Kernel k = kernel(r, s);
    auto it = kernel_by_text_.find(k.def);
    if (it == kernel_by_text_.end()) {
      it = kernel_by_text_.emplace(k.def, cnames_.kernel(p_, s)).first;
      kernels_ += named(k.def, it->second) + "\n";
    }
    return named(k.launch, it->second);
  }

  void routine(const ir::Routine& r, std::string& routines) {
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
    const bool decode = r.io.position;  // generation's step: at position pos of one sequence, no n
    if (decode) taken.insert("pos");

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
      if (auto g = plan_cublas_gemm(p_, s)) {
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
      pro += fmt::format("    char *const work = m->dev + {}; /* the work region: this routine's {} bytes */\n", arena_.work,
                         r.arena_bytes);
      for (const auto& [offset, b] : work)
        pro += fmt::format("    {0} *const {1} = ({0} *)(work + {2});\n", ctype(b), name(b), offset);
    }
    pro += scalar_prologue(r, scalars, x_);
    if (!inputs_used) pro += "    (void)in_;\n";
    if (decode && n_used) CANNL_BUG("the decode routine uses the batch count");
    if (!n_used && !decode) pro += "    (void)n;\n";
    pro += "    const cudaStream_t stream_ = cannl_stream_cuda(m->compute);\n";
    if (nk == 0) pro += "    (void)stream_;\n";
    std::string head = fmt::format("/* routine {}: {} kernels, {} cuBLAS products, queued on the compute stream */\n",
                                   r.name(), nk, ng);
    head += fmt::format("static void {}(struct {} *m, const real *const in_[], int64_t {}) {{\n", r.name(), p_.model,
                        decode ? "pos" : "n");
    routines += head + pro + body + "}\n\n";
  }

  // ---- rolled repeat blocks (ir.h Block) -------------------------------------------------
  //
  // A block call (BlockForward, BlockBackward, BlockInfer, BlockDecode; BlockInit in the host
  // init) prints as a `for` over the instances (the backward in reverse instance order) calling
  // the block's host function for the call's half of the body, as the C target's c_blocks.cpp
  // does: `static void <block>_forward(m, n, scratch, formals...)`, defined once, launching the
  // body's kernels (one definition each, over the formals' names: every instance launches the
  // same kernels) and cuBLAS products on the instance's pointers. The call passes each
  // instance's slices of the stacked buffers (params, gradients, saved activations, carried
  // values) and the body's scratch (its locals at the body's plan offsets).

  std::string blocks_;  // the block functions, defined once each, before the routines
  std::set<std::string> block_defined_;

  static const char* scalar_type(const std::string& x) { return x == "rng_key" ? "uint64_t" : "real"; }

  // The block function a block call runs, defined the first time.
  const std::string& block_function(const ir::Call& c) {
    using K = ir::Call::Kind;
    const int half = c.kind == K::BlockForward ? 0 : c.kind == K::BlockBackward ? 1 : c.kind == K::BlockInfer ? 2
                     : c.kind == K::BlockInit ? 3 : c.kind == K::BlockDecode ? 4 : -1;
    if (half < 0) CANNL_BUG(std::string("the CUDA target does not emit a block's ") + ir::call_name(c.kind));
    const std::string& fname = cnames_.block[static_cast<size_t>(5 * c.block + half)];
    if (!block_defined_.insert(fname).second) return fname;
    const bool init = half == 3, decode = half == 4;
    const ir::Block& bl = p_.blocks[static_cast<size_t>(c.block)];
    const ir::Routine& body = ir::body_of(bl, c.kind);
    const BlockSig sig = block_sig(p_, c);
    const std::vector<const ir::Stmt*> nests = block_span(p_, c);
    std::set<std::string> scalars;
    std::set<int> bufs;
    for (const ir::Stmt* t : nests) stmt_uses(*t, bufs, scalars);
    std::string params = init ? fmt::format("struct {} *m, cannl_rng *const rng", p_.model)
                              : fmt::format("struct {} *m, int64_t {}, char *cannl_scratch", p_.model, decode ? "pos" : "n");
    for (const std::string& x : sig.scalars) params += fmt::format(", const {} {}", scalar_type(x), x);
    for (int b : sig.written) params += fmt::format(", {} *{}", ctype(b), name(b));
    for (int b : sig.read) params += fmt::format(", const {} *{}", ctype(b), name(b));
    // The body's locals: at the body's plan offsets in the scratch (the device arena's cap).
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
    for (const auto& [offset, b] : locals)
      pro += fmt::format("    {0} *const {1} = ({0} *)(cannl_scratch + {2});\n", ctype(b), name(b), offset);
    if (!init && locals.empty()) pro += "    (void)cannl_scratch;\n";
    std::set<std::string> taken = {"m", "n", "cannl_scratch", "stream_", "rng"};
    if (decode) taken.insert("pos");
    for (int b : bufs) taken.insert(name(b));
    taken.insert(sig.scalars.begin(), sig.scalars.end());
    std::string text, last;
    bool n_used = false, pos_used = false;
    int launches = 0;
    for (const ir::Stmt* t : nests) {
      const ir::Stmt& st = *t;
      if (what(st) != last) text += "\n    /* " + comment_safe(what(st)) + " */\n";
      last = what(st);
      for (const ir::Iter& it : st.iters) n_used |= it.batch, pos_used |= it.at_pos;
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
        pos_used |= st.call->at_pos;
        continue;
      }
      name_vars(st, taken);
      if (auto g = plan_cublas_gemm(p_, st)) {
        text += "    " + gemm_call(*g) + "\n";
        n_used |= g->m.n || g->n.n || g->k.n || g->count.n;
        ++gemms_;
        continue;
      }
      text += "    " + launch(body, st) + "\n    CUDA_CHECK(cudaGetLastError());\n";
    }
    for (const std::string& x : scalars) n_used |= x == "n";
    if (decode && n_used) CANNL_BUG("a decode body uses the batch count");
    if (decode && !pos_used) pro = "    (void)pos;\n" + pro;
    if (!init && !decode && !n_used) pro = "    (void)n;\n" + pro;
    if (!init) pro += launches ? "    const cudaStream_t stream_ = cannl_stream_cuda(m->compute);\n" : "    (void)m;\n";
    else if (text.find("m->") == std::string::npos) pro = "    (void)m;\n" + pro;
    const std::string what = half == 2 ? "instance l's inference body, for each l in order"
                             : decode  ? "instance l's decode body at position pos, for each l in order"
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
    return fname;
  }

  // Binding bd's actual for instance cannl_l of count (ir.h Binding), over the names `at`
  // gives the routine's buffers.
  std::string actual(const ir::Binding& bd, long count, const std::function<std::string(int)>& at) const {
    std::string slice;
    if (bd.buf >= 0) {
      if (bd.stride == 0) {
        slice = bd.offset == 0 ? at(bd.buf) : fmt::format("{} + {}", at(bd.buf), bd.offset);
      } else {
        std::string slot = "cannl_l";
        if (bd.shift != 0) slot = fmt::format("(cannl_l {} {})", bd.shift < 0 ? '-' : '+', std::labs(bd.shift));
        if (bd.modulo > 0)
          slot = bd.shift < 0 ? fmt::format("(({} % {} + {}) % {})", slot, bd.modulo, bd.modulo, bd.modulo)
                              : fmt::format("({} % {})", slot, bd.modulo);
        slice = fmt::format("{} + {}{} * {}", at(bd.buf), bd.offset ? std::to_string(bd.offset) + " + " : "", slot, bd.stride);
      }
    }
    std::string out = slice;
    if (bd.last >= 0) out = out.empty() ? at(bd.last) : fmt::format("cannl_l == {} ? {} : {}", count - 1, at(bd.last), out);
    if (bd.first >= 0) out = out.empty() ? at(bd.first) : fmt::format("cannl_l == 0 ? {} : {}", at(bd.first), out);
    if (out.empty()) CANNL_BUG("a binding to nothing");
    return bd.first >= 0 || bd.last >= 0 ? "(" + out + ")" : out;
  }

  // A block call: its block's function for each instance, each instance's slices.
  std::string block_call(const ir::Call& c, const std::function<std::string(int)>& at = nullptr) {
    const std::string& fname = block_function(c);
    const BlockSig sig = block_sig(p_, c);
    std::map<int, const ir::Binding*> bind;
    for (const ir::Binding& bd : c.binds) bind[bd.formal] = &bd;
    const std::function<std::string(int)> named = at ? at : [this](int b) { return name(b); };
    const bool init = c.kind == ir::Call::Kind::BlockInit;
    std::string args = init ? std::string("m, rng")
                            : fmt::format("m, {}, (char *){}", c.kind == ir::Call::Kind::BlockDecode ? "pos" : "n",
                                          c.scratch >= 0 ? name(c.scratch) : "NULL");
    for (const std::string& x : sig.scalars) args += ", " + x;
    for (const std::vector<int>* l : {&sig.written, &sig.read})
      for (int f : *l) {
        auto it = bind.find(f);
        if (it == bind.end()) CANNL_BUG("an unbound formal: " + buf(f).name);
        args += ",\n            " + actual(*it->second, c.count, named);
      }
    const std::string loop = c.kind == ir::Call::Kind::BlockBackward
                                 ? fmt::format("for (int64_t cannl_l = {}; cannl_l >= 0; --cannl_l)", c.count - 1)
                                 : fmt::format("for (int64_t cannl_l = 0; cannl_l < {}; ++cannl_l)", c.count);
    return fmt::format("    {}\n        {}({});\n", loop, fname, args);
  }

  // Whether attention takes cannl_attention.cuh's tensor-core kernels (bf16 operands, fp32
  // accumulation and softmax: the launchers' TensorCores argument) as the products of
  // --precision bf16 do; fp32, tf32 and f64 keep the tiled fp32 (f64) kernels. The one switch,
  // off until a GPU has run them (runtime.attention_cuda, the gpu-check's attention timing):
  // they are checked on the CPU stand-in only.
  static constexpr bool kAttentionTensorCores = false;
  bool attention_tensor_cores() const { return kAttentionTensorCores && !o_.f64 && o_.precision == "bf16"; }

  // A kernel call (ir::Call): attention through runtime-lib/cuda/cannl_attention.cuh, tiles of
  // query (forward, dq) or key (dk, dv) rows, every sequence and head at once.
  std::string call_text(const ir::Call& c) {
    if (c.kind == ir::Call::Kind::EmbeddingForward || c.kind == ir::Call::Kind::EmbeddingBackward)
      return embedding_text(c);
    attention_ = true;
    if (c.at_pos) return attention_at_pos(c);
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

  // The decode routine's attention (ir::Call::at_pos), as the C target's attention_at_pos: the
  // query of each head at position pos against the cached keys and values (cannl_attention.cuh's
  // cannl_attention_decode, a warp per head), key/value head h / group; a window's caches are
  // rings of c.tk rows (the key of position s in row s % tk), the others hold every position
  // (tk = T, s % T = s).
  std::string attention_at_pos(const ir::Call& c) {
    const long kvh = c.heads / c.group;
    // row `at` of buffer b, head 0 (a view of a fused buffer: at `off`, rows of `row` elements;
    // else rows of heads * width); a ring's position at its row pos % ring
    auto row = [&](int b, const std::string& at, long heads, long width, long off, long row) {
      if (at == "0") return off == 0 ? name(b) : fmt::format("{} + {}", name(b), off);
      const std::string r = buf(b).ring ? fmt::format("(pos % {})", buf(b).ring) : at;
      if (off == 0 && row == 0) return fmt::format("{} + {} * {}", name(b), r, heads * width);
      return fmt::format("{} + {} + {} * {}", name(b), off, r, row);
    };
    const long k_st = c.k_off == 0 && c.k_row == 0 ? kvh * c.e : c.k_row;
    const long v_st = c.v_off == 0 && c.v_row == 0 ? kvh * c.f : c.v_row;
    return fmt::format("    cannl_attention_decode<real, {}, {}>(stream_, {}, {}, (int)pos, {}, {}, (real){}, "
                       "{}, {}, {}, {}, {}, {}, {} + pos, {});\n    CUDA_CHECK(cudaGetLastError());\n",
                       c.e, c.f, c.heads, c.group, c.tk, c.window, num_double(c.scale),
                       row(c.q, "pos", c.heads, c.e, c.q_off, c.q_row), row(c.k, "0", kvh, c.e, c.k_off, c.k_row), k_st,
                       row(c.v, "0", kvh, c.f, c.v_off, c.v_row), v_st, row(c.o, "pos", c.heads, c.f, 0, 0),
                       name(c.lse), c.tq);
  }

  // Embedding: the gather, a thread per element; the scatter-add, a thread per feature adding
  // its positions in order (no atomics: the same bits on every run).
  std::string embedding_text(const ir::Call& c) {
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
    if (c.at_pos)  // decode: the row of the id at position pos
      out = fmt::format("    cannl_embedding_forward<real><<<{}, 256, 0, stream_>>>(1, {}, {}, {} + pos, {}, "
                        "{} + pos * {});\n",
                        (c.width + 255) / 256, c.width, c.rows, name(c.ids), name(c.table), name(c.o), c.width);
    else if (c.kind == ir::Call::Kind::EmbeddingForward)
      out = fmt::format("    cannl_embedding_forward<real><<<(unsigned)(({} * {} + 255) / 256), 256, 0, stream_>>>({}, {}, {}, {}, {}, {});\n",
                        count, c.width, count, c.width, c.rows, name(c.ids), name(c.table), name(c.o));
    else
      out = fmt::format("    cannl_embedding_backward<real><<<{}, 256, 0, stream_>>>({}, {}, {}, {}, {}, {});\n",
                        (c.width + 255) / 256, count, c.width, c.rows, name(c.ids), name(c.dout), name(c.dtable));
    return out + "    CUDA_CHECK(cudaGetLastError());\n";
  }

  // forward: the outputs back to the caller's memory.
  std::string forward_copy() const {
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
  // Generation (passes/decode.cpp): the C API's decode functions over the routine decode, as
  // the C target's forward-only state has them (templates/c/inference.c.mustache), on the
  // device state: its output at position pos copied back after each step.
  void decode_data(data& d) const {
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
    d.set("decode_output_dev", fmt::format("({} + pos * {})", device(*dec, out), per));
  }

  // eval: the loss and the metrics into the pinned scalars m->scalars[0..].
  std::string eval_copy() const {
    const ir::Routine& r = *p_.routine(ir::RoutineKind::Eval);
    std::string s;
    for (size_t k = 0; k < r.io.values.size(); ++k)
      s += fmt::format("    CANNL_TRY(cannl_stream_copy(m->compute, &m->scalars[{}], {}, sizeof(real), &e));\n", k,
                       device(r, r.io.values[k]));
    return s;
  }
};

}  // namespace

std::vector<OutputFile> emit_cuda(const ir::Program& p, const CudaOptions& opt) { return CudaEmitter(p, opt).run(); }

}  // namespace cannl
