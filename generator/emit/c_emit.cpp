// c_emit.cpp — the C back end (see c_emit.h).
#include "emit/c_emit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <set>

#include "emit/c_common.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

using kainjow::mustache::data;

class CEmitter {
public:
  CEmitter(const ir::Program& p, const COptions& o) : p_(p), o_(o), cname_(c_buffer_names(p)) {
    x_.p = &p;
    x_.names = cname_;
    x_.f64 = o.f64;
  }

  std::vector<OutputFile> run() {
    std::string routines;
    for (const auto& r : p_.routines) routines += routine(r) + "\n";
    data d = model_template_data(p_, cname_, o_.f64, o_.spec, "m->");
    d.set("helpers", helpers());
    d.set("fields", fields());
    d.set("routines", routines);
    d.set("arena_bytes", std::to_string(arena_bytes_));
    data bufs{data::type::list};
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      if (p_.buffers[i].role == ir::Role::Input) continue;
      data b;
      b.set("name", cname_[i]);
      b.set("offset", std::to_string(offsets_[i]));
      bufs.push_back(b);
    }
    d.set("buffers", bufs);
    std::vector<OutputFile> files;
    files.push_back({p_.model + ".h", render_template("c/model.h.mustache", d)});
    files.push_back({p_.model + ".c", render_template("c/model.c.mustache", d)});
    files.push_back({p_.model + "_train.c", render_template("c/train.c.mustache", d)});
    files.push_back({"CMakeLists.txt", render_template("c/CMakeLists.txt.mustache", d)});
    return files;
  }

private:
  const ir::Program& p_;
  COptions o_;
  std::vector<std::string> cname_;
  std::vector<long> offsets_;
  long arena_bytes_ = 0;
  CExpr x_;  // expressions of the nest being printed

  // The struct fields, and the arena layout (64-byte aligned offsets).
  std::string fields() {
    std::string s;
    offsets_.assign(p_.buffers.size(), -1);
    long off = 0;
    const long elem = o_.f64 ? 8 : 4;
    ir::Role last = ir::Role::Input;
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const auto& b = p_.buffers[i];
      if (b.role == ir::Role::Input) continue;
      if (b.role != last) s += fmt::format("    /* {} */\n", b.role == ir::Role::Temp ? "temporaries" : plural(b.role));
      last = b.role;
      offsets_[i] = off;
      off += (b.elements() * elem + 63) / 64 * 64;
      std::string dims = "[";
      for (size_t k = 0; k < b.dims.size(); ++k)
        dims += (k ? ", " : "") + (b.dims[k].batch ? std::string("batch") : std::to_string(b.dims[k].size));
      dims += "]";
      s += fmt::format("    real *{}; /* {} {} */\n", cname_[i], dims, b.shape);
    }
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

  std::string helpers() const {
    std::string s = x_.helper_defs("static inline");
    return s.empty() ? "" : "\n" + s;
  }

  // ---- nests -------------------------------------------------------------------------

  bool uses_var(const ir::Access& a, int it) const {
    for (const auto& f : a.index)
      for (const auto& t : f.terms)
        if (t.iter == it) return true;
    return false;
  }

  std::string nest(const ir::Stmt& s, const std::set<std::string>& taken) {
    x_.stmt = &s;
    x_.vars.clear();
    for (const auto& it : s.iters) {
      std::string v = it.name;
      while (taken.count(v) || c_reserved().count(v) ||
             std::find(x_.vars.begin(), x_.vars.end(), v) != x_.vars.end())
        v += "_";
      x_.vars.push_back(v);
    }
    const int depth = static_cast<int>(s.iters.size());
    // The innermost loops that do not index the written element accumulate into a local
    // `acc` (kept in a register; vectorised by the compiler when reassociation is allowed,
    // as the generated CMakeLists.txt does).
    int red = 0;
    if (!s.sequential && s.accum != ir::Accum::Set)
      while (red < depth && depth - 1 - red > s.parallel && !uses_var(s.out, depth - 1 - red)) ++red;
    const bool reduce_inner = red > 0;
    // `acc` at routine level (every loop reduces): give the nest a block of its own.
    const bool own_block = reduce_inner && red == depth;
    std::string out = own_block ? "    {\n" : "";
    auto ind = [&](int k) { return std::string(static_cast<size_t>(4 * (k + 1 + own_block)), ' '); };
    auto loop = [&](int k) {
      const ir::Iter& it = s.iters[static_cast<size_t>(k)];
      return fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", x_.vars[static_cast<size_t>(k)],
                         it.batch ? std::string("n") : std::to_string(it.size));
    };
    const std::string target = x_.access(s.out);
    const std::string guard = x_.in_range(s.out);
    auto store = [&](const std::string& value, int level) {
      std::string st;
      switch (s.accum) {
        case ir::Accum::Set: st = fmt::format("{} = {};", target, value); break;
        case ir::Accum::Add: st = fmt::format("{} += {};", target, value); break;
        case ir::Accum::Max: case ir::Accum::Min: {
          const char* cmp = s.accum == ir::Accum::Max ? ">" : "<";
          st = value == "acc" ? fmt::format("if (acc {} {}) {} = acc;", cmp, target, target)
                              : fmt::format("{{ const real v = {}; if (v {} {}) {} = v; }}", value, cmp, target, target);
          break;
        }
      }
      if (!guard.empty()) st = fmt::format("if ({}) {}", guard, s.accum == ir::Accum::Set || s.accum == ir::Accum::Add ? st : "{ " + st + " }");
      return ind(level) + st + "\n";
    };
    const int outer_loops = depth - red;
    for (int k = 0; k < outer_loops; ++k) {
      if (k == s.parallel) out += ind(k) + "CANNL_PRAGMA(\"omp parallel for\")\n";
      out += ind(k) + loop(k) + (k + 1 < outer_loops || reduce_inner ? " {\n" : "\n");
    }
    std::string body = x_.expr(*s.body);
    if (reduce_inner) {
      const int k = outer_loops;
      const bool add = s.accum == ir::Accum::Add;
      std::string init = add ? x_.num(0) : s.accum == ir::Accum::Max ? "-INFINITY" : "INFINITY";
      out += ind(k) + fmt::format("real acc = {};\n", init);
      for (int j = k; j < depth; ++j) out += ind(k) + loop(j) + (j + 1 == depth && !add ? " {\n" : "\n");
      if (add) {
        out += ind(k + 1) + "acc += " + body + ";\n";
      } else {
        out += ind(k + 1) + "const real v = " + body + ";\n";
        out += ind(k + 1) + fmt::format("acc = v {} acc ? v : acc;\n", s.accum == ir::Accum::Max ? ">" : "<");
        out += ind(k) + "}\n";
      }
      out += store("acc", k);
    } else {
      out += store(body, depth);
    }
    for (int k = outer_loops - (reduce_inner ? 0 : 1); k-- > 0;) out += ind(k) + "}\n";
    if (own_block) out += "    }\n";
    return out;
  }

  void used_buffers(const ir::Stmt& s, std::set<int>& bufs, std::set<std::string>& scalars) {
    bufs.insert(s.out.buf);
    std::vector<const ir::Expr*> loads;
    ir::collect_loads(s.body, loads);
    for (const auto* l : loads) bufs.insert(l->access.buf);
    std::vector<const ir::Expr*> stack = {s.body.get()};
    while (!stack.empty()) {
      const ir::Expr* e = stack.back();
      stack.pop_back();
      if (e->op == ir::Op::Scalar) scalars.insert(e->name);
      for (const auto& a : e->args) stack.push_back(a.get());
    }
  }

  std::string routine(const ir::Routine& r) {
    std::set<int> bufs;
    std::set<std::string> scalars;
    for (const auto& s : r.stmts) used_buffers(s, bufs, scalars);
    const std::string model = p_.model;
    std::string sig, pro, epi;
    const bool is_init = r.name == "init";
    if (is_init) {
      sig = fmt::format("static void init_params({} *m, uint64_t seed)", model);
      bool rng = false;
      for (const auto& s : r.stmts) rng |= s.sequential;
      pro += rng ? "    cannl_rng rng;\n    cannl_rng_seed(&rng, seed);\n" : "    (void)seed;\n";
    } else {
      std::string extra = r.name == "forward" ? ", real *const outputs[]"
                          : r.name == "eval_metrics" ? ", double *loss, double metrics[]" : "";
      sig = fmt::format("static {} {}({} *m, const real *const inputs[], int64_t n{})",
                        r.name == "train_step" ? "double" : "void", r.name, model, extra);
      if (r.name == "forward") for (int o : p_.outputs) bufs.insert(o);
      if (r.name == "eval_metrics") { bufs.insert(p_.loss); for (int mt : p_.metrics) bufs.insert(mt); }
      if (r.name == "train_step") bufs.insert(p_.loss);
    }
    bool inputs_used = false, n_used = false;
    for (int b : bufs) {
      const auto& buf = p_.buffers[static_cast<size_t>(b)];
      if (buf.role == ir::Role::Input) {
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
        long per = 1;
        for (const auto& d : b.dims) per *= d.batch ? 1 : d.size;
        n_used |= batched;
        epi += fmt::format("    memcpy(outputs[{}], {}, (size_t){}{} * sizeof(real));\n", k,
                           cname_[static_cast<size_t>(p_.outputs[k])], batched ? "n * " : "", per);
      }
      if (p_.outputs.empty()) epi += "    (void)outputs;\n";
    }
    if (r.name == "eval_metrics") {
      epi += fmt::format("    *loss = (double){}[0];\n", cname_[static_cast<size_t>(p_.loss)]);
      for (size_t k = 0; k < p_.metrics.size(); ++k)
        epi += fmt::format("    metrics[{}] = (double){}[0];\n", k, cname_[static_cast<size_t>(p_.metrics[k])]);
      if (p_.metrics.empty()) epi += "    (void)metrics;\n";
    }
    if (r.name == "train_step") epi += fmt::format("    return (double){}[0];\n", cname_[static_cast<size_t>(p_.loss)]);
    if (!is_init) {
      if (!inputs_used) pro += "    (void)inputs;\n";
      if (!n_used) pro += "    (void)n;\n";
    }

    std::set<std::string> taken;
    for (int b : bufs) taken.insert(cname_[static_cast<size_t>(b)]);
    for (const auto& s : r.scalars) taken.insert(s.first);
    std::string body;
    std::string last;
    for (const auto& s : r.stmts) {
      std::string what = s.line ? fmt::format("line {}: {}", s.line, s.what) : s.what;
      if (what != last) body += "\n    /* " + comment_safe(what) + " */\n";
      last = what;
      body += nest(s, taken);
    }
    std::string head = fmt::format("/* routine {} */\n", r.name);
    return head + sig + " {\n" + pro + body + (epi.empty() ? "" : "\n" + epi) + "}\n";
  }

};

}  // namespace

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt) { return CEmitter(p, opt).run(); }

}  // namespace cannl
