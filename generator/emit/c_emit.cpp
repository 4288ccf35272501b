// c_emit.cpp — the C back end (see c_emit.h).
#include "emit/c_emit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <set>

#include "driver/version.h"
#include "emit/c_common.h"
#include "emit/c_gemm.h"
#include "emit/contraction.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

class CEmitter {
public:
  CEmitter(const ir::Program& p, const COptions& o) : p_(p), o_(o), cname_(c_buffer_names(p)) {
    x_.p = &p;
    x_.names = cname_;
    x_.f64 = o.f64;
  }

  std::vector<OutputFile> run() {
    const std::string field_text = fields();
    std::string routines;
    for (const auto& r : p_.routines) routines += routine(r, r.arena_bytes > 0 ? work_ : -1) + "\n";
    data d = common();
    d.set("helpers", helpers());
    d.set("f64", o_.f64);
    d.set("has_gemm", gemm_kernel_);
    d.set("blas", gemm_blas_);
    d.set("fields", field_text);
    d.set("routines", routines);
    d.set("arena_bytes", std::to_string(arena_bytes_));
    data bufs{data::type::list};
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      if (p_.buffers[i].role == ir::Role::Input || offsets_[i] < 0) continue;
      data b;
      b.set("name", cname_[i]);
      b.set("offset", std::to_string(offsets_[i]));
      bufs.push_back(b);
    }
    d.set("buffers", bufs);
    inference(d);
    std::vector<OutputFile> files;
    files.push_back({p_.model + ".h", render("c/model.h.mustache", d)});
    files.push_back({p_.model + ".c", render("c/model.c.mustache", d)});
    files.push_back({p_.model + "_train.c", render("c/train.c.mustache", d)});
    files.push_back({p_.model + "_inference.c", render("c/inference.c.mustache", d)});
    files.push_back({p_.model + "_infer.c", render("c/infer.c.mustache", d)});
    if (o_.weights) files.push_back({p_.model + "_weights.c", weights(d)});
    files.push_back({"CMakeLists.txt", render("c/CMakeLists.txt.mustache", d)});
    return files;
  }

  CLayout layout() const { return {arena_bytes_, infer_arena_bytes_}; }

private:
  const ir::Program& p_;
  COptions o_;
  std::string state_type_ = p_.model;  // the struct the routines being printed take
  std::vector<std::string> cname_;
  std::vector<long> offsets_;  // byte offset of a buffer with a field of its own (-1: none)
  long work_ = -1;             // byte offset of the work region the planned routines share
  long arena_bytes_ = 0;
  long infer_arena_bytes_ = 0;
  CExpr x_;  // prints the expressions of the nest being printed (its loop variables, helpers used)
  bool gemm_kernel_ = false;  // some contraction calls the runtime's kernel (cannl_sgemm, cannl_dgemm)
  bool gemm_blas_ = false;    // some contraction calls cblas

  static std::string render(const std::string& name, const data& d) { return render_template(name, d); }

  std::string num(double v) const { return x_.num(v); }

  // The data of every template (emit/c_common.h), and what only the C target's use.
  data common() {
    data d = model_template_data(p_, cname_, o_.f64, o_.spec, "m->");
    d.set("embedded", o_.weights != nullptr);
    d.set("has_embedded", std::string(o_.weights ? "1" : "0"));
    d.set("embedded_decls",
          o_.weights ? fmt::format("/* A forward-only state holding the compiled-in params; NULL when out of memory. */\n"
                                   "{0}_infer *{0}_infer_create_embedded(void);\n"
                                   "/* The compiled-in params, one array per param in the order listed above "
                                   "(read-only). */\n"
                                   "const {0}_real *const *{0}_embedded_params(void);\n",
                                   p_.model)
                     : std::string());
    d.set("embedded_arg", o_.weights ? "(const void *const *)" + p_.model + "_embedded_params()" : std::string("NULL"));
    return d;
  }

  // A state struct's field for buffer b: `    real *name; /* [batch, 512] [batch | 512] */`.
  std::string field_decl(int b) const {
    const auto& buf = p_.buffers[static_cast<size_t>(b)];
    std::string dims;
    for (size_t k = 0; k < buf.dims.size(); ++k)
      dims += (k ? ", " : "") + (buf.dims[k].batch ? std::string("batch") : std::to_string(buf.dims[k].size));
    return fmt::format("    real *{}; /* [{}] {} */\n", cname_[static_cast<size_t>(b)], dims, buf.shape);
  }

  // The struct fields, and the arena layout (64-byte aligned offsets): first the buffers that
  // keep their own storage (params, optimiser state, and without memory planning every
  // buffer), then one work region that every planned routine (Routine::offsets) lays its work
  // buffers out in; a param's gradient has a field pointing into train_step's layout.
  std::string fields() {
    std::string s;
    offsets_.assign(p_.buffers.size(), -1);
    long off = 0;
    const long elem = o_.f64 ? 8 : 4;
    std::vector<bool> planned(p_.buffers.size(), false), used(p_.buffers.size(), false);
    for (const auto& r : p_.routines) {
      for (size_t i = 0; i < r.offsets.size(); ++i) planned[i] = planned[i] || r.offsets[i] >= 0;
      std::set<std::string> scalars;
      std::set<int> bufs;
      for (const auto& st : r.stmts) stmt_uses(st, bufs, scalars);
      for (int b : bufs) used[static_cast<size_t>(b)] = true;
    }
    for (int b : p_.outputs) used[static_cast<size_t>(b)] = true;
    for (int b : p_.metrics) used[static_cast<size_t>(b)] = true;
    used[static_cast<size_t>(p_.loss)] = true;
    auto exposed_grad = [&](const ir::Buffer& b) {
      return b.role == ir::Role::Grad && b.grad_of >= 0 && p_.buffers[static_cast<size_t>(b.grad_of)].role == ir::Role::Param;
    };
    ir::Role last = ir::Role::Input;
    std::vector<size_t> grad_fields;
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const auto& b = p_.buffers[i];
      if (b.role == ir::Role::Input) continue;
      const bool field = b.role == ir::Role::Param || b.role == ir::Role::OptState ||
                         (used[i] && !planned[i]) || (planned[i] && exposed_grad(b));
      if (!field) continue;
      if (b.role != last) s += fmt::format("    /* {} */\n", b.role == ir::Role::Temp ? "temporaries" : plural(b.role));
      last = b.role;
      if (planned[i]) {
        grad_fields.push_back(i);  // placed below, inside train_step's region
      } else {
        offsets_[i] = off;
        off += (b.elements() * elem + 63) / 64 * 64;
      }
      s += field_decl(static_cast<int>(i));
    }
    // One work region for all routines: a state runs one routine at a time, and none leaves
    // anything in it for another — except the gradients of train_step, which <model>_grad reads
    // until the next call on the state (documented in <model>.h).
    work_ = off;
    long work = 0;
    for (const auto& r : p_.routines) work = std::max(work, r.arena_bytes);
    if (const ir::Routine* t = p_.routine("train_step"); t && t->arena_bytes > 0)
      for (size_t i : grad_fields)
        if (t->offsets[i] >= 0) offsets_[i] = work_ + t->offsets[i];
    off += (work + 63) / 64 * 64;
    arena_bytes_ = off > 0 ? off : 64;
    return s;
  }
  static std::string plural(ir::Role r) {
    switch (r) {
      case ir::Role::Param: return "params";
      case ir::Role::Computed: return "tensors of the spec";
      case ir::Role::Grad: return "gradients";
      case ir::Role::OptState: return "optimiser state";
      default: return ir::role_name(r);
    }
  }

  // The forward-only unit: the routines forward and eval_metrics over a state of their own, in
  // one 64-byte aligned arena: the params, the buffers the two routines use that memory
  // planning left out of their work regions, then one work region the two routines share
  // (they never run at once), as large as the larger of their planned regions.
  void inference(data& d) {
    std::vector<const ir::Routine*> rs = {p_.routine("forward"), p_.routine("eval_metrics")};
    std::set<int> used(p_.params.begin(), p_.params.end());
    for (const ir::Routine* r : rs)
      for (int b : routine_buffers(*r)) {
        const bool planned = static_cast<size_t>(b) < r->offsets.size() && r->offsets[static_cast<size_t>(b)] >= 0;
        if (!planned) used.insert(b);
      }
    std::vector<int> order(p_.params.begin(), p_.params.end());
    for (int b : used)
      if (p_.buffers[static_cast<size_t>(b)].role != ir::Role::Param && p_.buffers[static_cast<size_t>(b)].role != ir::Role::Input)
        order.push_back(b);
    std::string fields;
    data bufs{data::type::list};
    long off = 0;
    const long elem = o_.f64 ? 8 : 4;
    for (int b : order) {
      const auto& buf = p_.buffers[static_cast<size_t>(b)];
      fields += field_decl(b);
      data e;
      e.set("name", cname_[static_cast<size_t>(b)]);
      e.set("offset", std::to_string(off));
      bufs.push_back(e);
      off += (buf.elements() * elem + 63) / 64 * 64;
    }
    long work = 0;
    for (const ir::Routine* r : rs) work = std::max(work, r->arena_bytes);
    const long region = work > 0 ? off : -1;
    off += (work + 63) / 64 * 64;
    infer_arena_bytes_ = off > 0 ? off : 64;
    x_.helpers.clear();
    state_type_ = p_.model + "_infer";
    std::string routines;
    for (const ir::Routine* r : rs) routines += routine(*r, r->arena_bytes > 0 ? region : -1) + "\n";
    state_type_ = p_.model;
    d.set("infer_helpers", helpers());
    d.set("infer_fields", fields);
    d.set("infer_buffers", bufs);
    d.set("infer_routines", routines);
    d.set("infer_arena_bytes", std::to_string(infer_arena_bytes_));
  }

  // <model>_weights.c: each param's trained values as a static const array.
  std::string weights(data d) {
    std::string arrays;
    data list{data::type::list};
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const auto& b = p_.buffers[static_cast<size_t>(p_.params[i])];
      const auto& v = o_.weights->values[i];
      std::string name = cname_[static_cast<size_t>(p_.params[i])] + "_values";
      arrays += fmt::format("\n/* {} stored [{}] */\nstatic const real {}[{}] = {{", b.shape, dims_list(b, false), name,
                            v.size());
      for (size_t k = 0; k < v.size(); ++k) arrays += (k % 8 ? " " : "\n    ") + num(v[k]) + ",";
      arrays += "\n};\n";
      data e;
      e.set("name", name);
      list.push_back(e);
    }
    d.set("arrays", arrays);
    d.set("embedded_list", list);
    d.set("checkpoint", o_.weights->source);
    d.set("checkpoint_step", o_.weights->step.empty() ? std::string("unknown") : o_.weights->step);
    return render("c/weights.c.mustache", d);
  }

  std::string helpers() {
    const std::string s = x_.helper_defs("static inline");
    return s.empty() ? "" : "\n" + s;
  }

  // ---- nests -------------------------------------------------------------------------

  // The nest's expressions and accesses, as emit/c_common.h prints them.
  std::string in_range(const ir::Access& a) const { return x_.in_range(a); }
  std::string access(const ir::Access& a) const { return x_.access(a); }
  std::string expr(const ir::Expr& e) { return x_.expr(e); }

  // A contraction as a matrix-product call (emit/c_gemm.h) ("" when it is not one or is too small). A
  // zero_first product (passes/fold_fills) overwrites its output, unless a K loop runs around
  // the call: then the output is zeroed first and each call accumulates.
  std::string gemm_nest(const ir::Stmt& s, const std::optional<Gemm>& g, const std::set<std::string>& taken) {
    if (!g || g->flops() < kGemmMinFlops) return "";
    const bool overwrite = s.zero_first && !g->outer_k;
    std::string pre;
    if (s.zero_first && g->outer_k) {
      const std::string v = fresh_name("i", taken);
      pre = fill_first(s, v, "= " + num(0));
    }
    GemmSite site{&cname_, x_.vars, g->alpha ? expr(*g->alpha) : num(1), o_.f64, o_.blas};
    std::string text = pre + emit_gemm(p_, s, *g, site, overwrite);
    (text.find("gemm(m->gemm,") != std::string::npos ? gemm_kernel_ : gemm_blas_) = true;
    return text;
  }

  std::string nest(const ir::Stmt& s, const std::set<std::string>& taken) {
    x_.begin_nest(s, taken);
    const int depth = static_cast<int>(s.iters.size());
    // The innermost loops that do not index the written element accumulate into a local
    // `acc` (kept in a register; vectorised by the compiler when reassociation is allowed,
    // as the generated CMakeLists.txt does).
    int red = 0;
    if (!s.sequential && s.accum != ir::Accum::Set && s.fused.empty())
      while (red < depth && depth - 1 - red > s.parallel && !uses_iter(s.out, depth - 1 - red)) ++red;
    const bool reduce_inner = red > 0;
    // zero_first: when every reduction loop is an inner `acc` loop, the cell is assigned
    // (`=` instead of `+=`); otherwise the cells are filled with the identity first.
    int reductions = 0;
    for (int k = 0; k < depth; ++k) reductions += !uses_iter(s.out, k);
    const bool assign_acc = s.zero_first && reduce_inner && red == reductions;
    // `acc` at routine level (every loop reduces): give the nest a block of its own.
    const bool own_block = reduce_inner && red == depth;
    std::string out = own_block ? "    {\n" : "";
    if (s.zero_first && !assign_acc) {
      const std::string v = fresh_name("i", taken);
      out += fill_first(s, v, "= " + std::string(s.accum == ir::Accum::Add ? num(0) : s.accum == ir::Accum::Max ? "-INFINITY" : "INFINITY"));
    }
    auto ind = [&](int k) { return std::string(static_cast<size_t>(4 * (k + 1 + own_block)), ' '); };
    auto loop = [&](int k) {
      const ir::Iter& it = s.iters[static_cast<size_t>(k)];
      return fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", x_.vars[static_cast<size_t>(k)],
                         it.batch ? std::string("n") : std::to_string(it.size));
    };
    const std::string target = access(s.out);
    const std::string guard = in_range(s.out);
    auto store_to = [&](const std::string& target, const std::string& guard, ir::Accum accum,
                        const std::string& value, int level) {
      std::string st;
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
      if (!guard.empty()) st = fmt::format("if ({}) {}", guard, accum == ir::Accum::Set || accum == ir::Accum::Add ? st : "{ " + st + " }");
      return ind(level) + st + "\n";
    };
    auto store = [&](const std::string& value, int level) {
      if (assign_acc) return store_to(target, guard, ir::Accum::Set, value, level);
      std::string st = store_to(target, guard, s.accum, value, level);
      for (const ir::Assign& a : s.fused) st += store_to(access(a.out), in_range(a.out), a.accum, expr(*a.body), level);
      return st;
    };
    const int outer_loops = depth - red;
    const bool braced = !s.fused.empty();  // several assignments in the innermost loop
    for (int k = 0; k < outer_loops; ++k) {
      if (k == s.parallel) out += ind(k) + parallel_for(s, k);
      out += ind(k) + loop(k) + (k + 1 < outer_loops || reduce_inner || braced ? " {\n" : "\n");
    }
    // A zero_first sum times a constant,  out = 0 += x * c : the constant multiplies the
    // finished sums once (sum(x) * c), not every term.
    const ir::Expr* summed = s.body.get();
    std::string scale;
    if (s.zero_first && s.accum == ir::Accum::Add && s.body->op == ir::Op::Mul &&
        s.body->args[1]->op == ir::Op::Const) {
      scale = num(s.body->args[1]->value);
      summed = s.body->args[0].get();
    }
    std::string body = expr(*summed);
    if (reduce_inner) {
      const int k = outer_loops;
      const bool add = s.accum == ir::Accum::Add;
      std::string init = add ? num(0) : s.accum == ir::Accum::Max ? "-INFINITY" : "INFINITY";
      out += ind(k) + fmt::format("real acc = {};\n", init);
      for (int j = k; j < depth; ++j) out += ind(k) + loop(j) + (j + 1 == depth && !add ? " {\n" : "\n");
      if (add) {
        out += ind(k + 1) + "acc += " + body + ";\n";
      } else {
        out += ind(k + 1) + "const real v = " + body + ";\n";
        out += ind(k + 1) + fmt::format("acc = v {} acc ? v : acc;\n", s.accum == ir::Accum::Max ? ">" : "<");
        out += ind(k) + "}\n";
      }
      out += store(scale.empty() || !assign_acc ? "acc" : "acc * " + scale, k);
    } else {
      out += store(body, depth);
    }
    for (int k = outer_loops - (reduce_inner || braced ? 0 : 1); k-- > 0;) out += ind(k) + "}\n";
    if (own_block) out += "    }\n";
    if (!scale.empty() && !assign_acc) {
      const std::string v = fresh_name("i", taken);
      out += fill_first(s, v, "*= " + scale);
    }
    return out;
  }

  // `omp parallel for` over loops doing `count` iterations: threads only when that pays for
  // waking them (CANNL_PARALLEL_MIN, cannl_rt.h).
  static std::string parallel_for(const std::string& count) {
    return "CANNL_PRAGMA(\"omp parallel for if(" + count + " >= CANNL_PARALLEL_MIN)\")\n";
  }
  static std::string parallel_for(const ir::Stmt& s, int from) {
    long per = 1;
    bool batch = false;
    for (size_t k = static_cast<size_t>(from); k < s.iters.size(); ++k) {
      batch = batch || s.iters[k].batch;
      if (!s.iters[k].batch) per *= s.iters[k].size;
    }
    return parallel_for(batch ? (per == 1 ? std::string("n") : fmt::format("n * {}", per)) : std::to_string(per));
  }

  // A loop over every cell of a zero_first nest's out buffer (the out access covers the
  // buffer; a batch axis is the first, run to n): `= identity` before it, `*= c` after it.
  std::string fill_first(const ir::Stmt& s, const std::string& v, const std::string& op) {
    const auto& b = p_.buffers[static_cast<size_t>(s.out.buf)];
    const bool batched = !b.dims.empty() && b.dims[0].batch;
    const long per = buffer_size(b, true);
    const std::string count = batched ? (per == 1 ? "n" : fmt::format("n * {}", per)) : std::to_string(per);
    return (s.parallel >= 0 ? "    " + parallel_for(count) : std::string()) +
           fmt::format("    for (int64_t {0} = 0; {0} < {1}; ++{0}) {2}[{0}] {3};\n", v, count,
                       cname_[static_cast<size_t>(s.out.buf)], op);
  }

  // The buffers a routine reads or writes, the interface buffers it fills included.
  std::set<int> routine_buffers(const ir::Routine& r, std::set<std::string>* scalars_out = nullptr) {
    std::set<int> bufs;
    std::set<std::string> scalars;
    for (const auto& s : r.stmts) stmt_uses(s, bufs, scalars);
    if (scalars_out) *scalars_out = std::move(scalars);
    if (r.name == "forward") bufs.insert(p_.outputs.begin(), p_.outputs.end());
    if (r.name == "eval_metrics") {
      bufs.insert(p_.loss);
      bufs.insert(p_.metrics.begin(), p_.metrics.end());
    }
    if (r.name == "train_step") bufs.insert(p_.loss);
    return bufs;
  }

  std::string routine(const ir::Routine& r, long region) {
    std::set<std::string> scalars;
    const std::set<int> bufs = routine_buffers(r, &scalars);
    const std::string model = p_.model;
    std::string sig, pro, epi;
    const bool is_init = r.name == "init";
    if (is_init) {
      sig = fmt::format("static void init_params({} *m, uint64_t seed)", state_type_);
      bool rng = false;
      for (const auto& s : r.stmts) rng |= s.sequential;
      pro += rng ? "    cannl_rng rng;\n    cannl_rng_seed(&rng, seed);\n" : "    (void)seed;\n";
    } else {
      std::string extra = r.name == "forward" ? ", real *const outputs[]"
                          : r.name == "eval_metrics" ? ", double *loss, double metrics[]" : "";
      // Compiled once per instruction set, the loader picking one for the CPU (cannl_rt.h).
      sig = fmt::format("CANNL_MULTIVERSION\nstatic {} {}({} *m, const real *const inputs[], int64_t n{})",
                        r.name == "train_step" ? "double" : "void", r.name, state_type_, extra);
    }
    bool inputs_used = false, n_used = false;
    auto planned = [&](int b) { return region >= 0 && r.offsets[static_cast<size_t>(b)] >= 0; };
    // Work buffers of a planned routine point into its region of the arena. One whose bytes
    // another buffer of the routine reuses is declared in each nest that uses it, in a block
    // of its own, restrict there unless the nest also touches a buffer sharing its bytes (in
    // place): restrict holds per block, and the routine's other names for those bytes are
    // not used in it.
    const long elem = o_.f64 ? 8 : 4;
    auto overlap = [&](int b, int c) {
      const long lo = r.offsets[static_cast<size_t>(b)], hi = lo + p_.buffers[static_cast<size_t>(b)].elements() * elem;
      const long clo = r.offsets[static_cast<size_t>(c)], chi = clo + p_.buffers[static_cast<size_t>(c)].elements() * elem;
      return b != c && planned(b) && planned(c) && clo < hi && lo < chi;
    };
    auto shares = [&](int b) {
      for (int c : bufs)
        if (overlap(b, c)) return true;
      return false;
    };
    auto pointer = [&](int b, bool restrict_) {
      return fmt::format("real *{}{} = (real *)(work + {});", restrict_ ? "restrict " : "", cname_[static_cast<size_t>(b)],
                         r.offsets[static_cast<size_t>(b)]);
    };
    // How the epilogue names a buffer (one declared per nest has no routine-level name).
    auto ref = [&](int b) {
      return planned(b) && shares(b) ? fmt::format("((real *)(work + {}))", r.offsets[static_cast<size_t>(b)])
                                     : cname_[static_cast<size_t>(b)];
    };
    bool any_planned = false;
    for (int b : bufs) any_planned = any_planned || planned(b);
    if (any_planned)
      pro += fmt::format("    char *const work = (char *)m->arena + {}; /* this routine's {} bytes */\n", region, r.arena_bytes);
    for (int b : bufs) {
      const auto& buf = p_.buffers[static_cast<size_t>(b)];
      if (planned(b)) {
        if (!shares(b)) pro += "    " + pointer(b, true) + "\n";
      } else if (buf.role == ir::Role::Input) {
        inputs_used = true;
        auto it = std::find(p_.inputs.begin(), p_.inputs.end(), b);
        pro += fmt::format("    const real *restrict {} = inputs[{}];\n", cname_[static_cast<size_t>(b)], it - p_.inputs.begin());
      } else {
        pro += fmt::format("    real *restrict {} = m->{};\n", cname_[static_cast<size_t>(b)], cname_[static_cast<size_t>(b)]);
      }
    }
    for (const auto& s : r.stmts)
      for (const auto& it : s.iters) n_used |= it.batch;
    n_used |= scalars.count("n") > 0;
    if (r.name == "train_step") {
      bool step_used = scalars.count("step") > 0 || !r.scalars.empty();
      pro += step_used ? "    const int64_t step = ++m->step;\n" : "    ++m->step;\n";
      if (scalars.count("lr")) pro += "    const real lr = (real)m->lr;\n";
      for (const auto& [name, formula] : r.scalars)
        if (scalars.count(name)) pro += fmt::format("    const real {} = (real)({});\n", name, formula);
    }
    if (r.name == "forward") {
      for (size_t k = 0; k < p_.outputs.size(); ++k) {
        const auto& b = p_.buffers[static_cast<size_t>(p_.outputs[k])];
        bool batched = !b.dims.empty() && b.dims[0].batch;
        long per = buffer_size(b, true);
        n_used |= batched;
        epi += fmt::format("    memcpy(outputs[{}], {}, (size_t){}{} * sizeof(real));\n", k,
                           ref(p_.outputs[k]), batched ? "n * " : "", per);
      }
      if (p_.outputs.empty()) epi += "    (void)outputs;\n";
    }
    if (r.name == "eval_metrics") {
      epi += fmt::format("    *loss = (double){}[0];\n", ref(p_.loss));
      for (size_t k = 0; k < p_.metrics.size(); ++k)
        epi += fmt::format("    metrics[{}] = (double){}[0];\n", k, ref(p_.metrics[k]));
      if (p_.metrics.empty()) epi += "    (void)metrics;\n";
    }
    if (r.name == "train_step") epi += fmt::format("    return (double){}[0];\n", ref(p_.loss));
    if (!is_init) {
      if (!inputs_used) pro += "    (void)inputs;\n";
      if (!n_used) pro += "    (void)n;\n";
    }

    std::set<std::string> taken;
    for (int b : bufs) taken.insert(cname_[static_cast<size_t>(b)]);
    for (const auto& s : r.scalars) taken.insert(s.first);
    std::string body;
    std::string last;
    for (const ir::Stmt& s : r.stmts) {
      x_.begin_nest(s, taken);
      std::string text = gemm_nest(s, recognise_contraction(p_, s), taken);
      if (text.empty()) text = nest(s, taken);
      std::string what = s.line ? fmt::format("line {}: {}", s.line, s.what) : s.what;
      if (what != last) body += "\n    /* " + comment_safe(what) + " */\n";
      last = what;
      std::set<int> nb;
      std::set<std::string> unused;
      stmt_uses(s, nb, unused);
      std::string decls;
      for (int b : nb) {
        if (!planned(b) || !shares(b)) continue;
        bool alone = true;
        for (int c : nb) alone = alone && !overlap(b, c);
        decls += "        " + pointer(b, alone) + (alone ? "" : " /* in place */") + "\n";
      }
      if (decls.empty()) {
        body += text;
      } else {  // the nest, one level deeper, in a block with its pointers
        std::string indented;
        for (size_t i = 0; i < text.size();) {
          size_t e = text.find('\n', i);
          indented += "    " + text.substr(i, e - i + 1);
          i = e + 1;
        }
        body += "    {\n" + decls + indented + "    }\n";
      }
    }
    std::string head = fmt::format("/* routine {} */\n", r.name);
    // A routine that touches no state (forward of a spec without outputs) still takes it.
    if (!is_init && (pro + body + epi).find("m->") == std::string::npos) pro = "    (void)m;\n" + pro;
    return head + sig + " {\n" + pro + body + (epi.empty() ? "" : "\n" + epi) + "}\n";
  }

  static std::string comment_safe(std::string s) {
    for (size_t i; (i = s.find("*/")) != std::string::npos;) s.replace(i, 2, "* /");
    for (size_t i; (i = s.find("/*")) != std::string::npos;) s.replace(i, 2, "/ *");
    return s;
  }
};

}  // namespace

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt, CLayout* layout) {
  CEmitter e(p, opt);
  std::vector<OutputFile> files = e.run();
  if (layout) *layout = e.layout();
  return files;
}

}  // namespace cannl
