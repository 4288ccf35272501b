// c_emit.cpp — the C back end (see c_emit.h).
#include "emit/c_emit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <set>

#include "driver/version.h"
#include "support/diagnostic.h"

namespace cannl {

namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

const std::set<std::string>& reserved() {
  static const std::set<std::string> r = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
      "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
      "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
      "volatile", "while", "m", "n", "real", "inputs", "outputs", "step", "lr", "loss", "metrics", "acc",
      "v", "base", "seed", "rng", "count", "name", "out", "cap", "all", "NAN", "INFINITY", "main"};
  return r;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class CEmitter {
public:
  CEmitter(const ir::Program& p, const COptions& o) : p_(p), o_(o) {
    for (const auto& b : p.buffers) {
      std::string n = b.name;
      while (reserved().count(n)) n += "_";
      cname_.push_back(n);
    }
  }

  std::vector<OutputFile> run() {
    std::string routines;
    for (const auto& r : p_.routines) routines += routine(r) + "\n";
    data d = common();
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
    files.push_back({p_.model + ".h", render("c/model.h.mustache", d)});
    files.push_back({p_.model + ".c", render("c/model.c.mustache", d)});
    files.push_back({p_.model + "_train.c", render("c/train.c.mustache", d)});
    files.push_back({"CMakeLists.txt", render("c/CMakeLists.txt.mustache", d)});
    return files;
  }

private:
  const ir::Program& p_;
  COptions o_;
  std::vector<std::string> cname_;
  std::vector<long> offsets_;
  long arena_bytes_ = 0;
  std::set<std::string> helpers_;
  std::vector<std::string> vars_;  // loop variable names of the nest being printed
  const ir::Stmt* stmt_ = nullptr;

  std::string real() const { return o_.f64 ? "double" : "float"; }
  std::string dtype() const { return o_.f64 ? "CANNL_F64" : "CANNL_F32"; }
  std::string fn(const char* base) const { return o_.f64 ? base : std::string(base) + "f"; }

  static std::string render(const std::string& name, const data& d) {
    mustache t{template_text(name)};
    if (!t.is_valid()) CANNL_BUG("template " + name + ": " + t.error_message());
    t.set_custom_escape([](const std::string& s) { return s; });  // C, not HTML
    return t.render(d);
  }

  std::string num(double v) const {
    if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
    std::string s = o_.f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return o_.f64 ? s : s + "f";
  }

  static std::string dims_list(const ir::Buffer& b, bool skip_batch) {
    std::string s;
    for (const auto& d : b.dims) {
      if (skip_batch && d.batch) continue;
      if (!s.empty()) s += ", ";
      s += std::to_string(d.size);
    }
    return s.empty() ? "0" : s;
  }
  static int ndims(const ir::Buffer& b, bool skip_batch) {
    int k = 0;
    for (const auto& d : b.dims) k += !(skip_batch && d.batch);
    return k;
  }
  static long size(const ir::Buffer& b, bool skip_batch) {
    long k = 1;
    for (const auto& d : b.dims)
      if (!(skip_batch && d.batch)) k *= d.size;
    return k;
  }

  std::string spec_shape(const ir::Buffer& b) const {
    auto colon = b.shape.find(" : ");
    return colon == std::string::npos ? b.shape : b.shape.substr(colon + 3);
  }

  data common() {
    data d;
    d.set("model", p_.model);
    d.set("MODEL", upper(p_.model));
    d.set("version", CANNL_VERSION);
    d.set("spec", o_.spec);
    d.set("real", real());
    d.set("dtype", dtype());
    d.set("max_batch", std::to_string(p_.max_batch));
    d.set("optimizer", p_.optimizer);
    d.set("optimizer_name", p_.optimizer.substr(0, p_.optimizer.find('(')));
    d.set("lr", num_double(p_.lr));
    if (p_.schedule.empty()) d.set("schedule", false);
    else d.set("schedule", p_.schedule);
    d.set("loss", p_.buffers[static_cast<size_t>(p_.loss)].name);
    d.set("pad", std::string(p_.model.size() + 6, ' '));
    auto list = [&](const std::vector<int>& bufs, bool per_example) {
      data l{data::type::list};
      for (size_t i = 0; i < bufs.size(); ++i) {
        const auto& b = p_.buffers[static_cast<size_t>(bufs[i])];
        data e;
        e.set("index", std::to_string(i));
        e.set("name", b.name);
        e.set("NAME", upper(b.name));
        e.set("field", cname_[static_cast<size_t>(bufs[i])]);
        e.set("shape", spec_shape(b));
        e.set("ndims", std::to_string(ndims(b, per_example)));
        e.set("dims", dims_list(b, per_example));
        e.set("size", std::to_string(size(b, per_example)));
        std::string grad = "NULL";
        for (size_t g = 0; g < p_.buffers.size(); ++g)
          if (p_.buffers[g].role == ir::Role::Grad && p_.buffers[g].grad_of == bufs[i]) grad = "m->" + cname_[g];
        e.set("grad", grad);
        l.push_back(e);
      }
      return l;
    };
    d.set("inputs", list(p_.inputs, true));
    d.set("outputs", list(p_.outputs, true));
    d.set("params", list(p_.params, false));
    d.set("metrics", list(p_.metrics, false));
    d.set("num_inputs", std::to_string(p_.inputs.size()));
    d.set("num_outputs", std::to_string(p_.outputs.size()));
    d.set("num_params", std::to_string(p_.params.size()));
    d.set("num_metrics", std::to_string(p_.metrics.size()));
    data state{data::type::list};
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const auto& b = p_.buffers[i];
      if (b.state_name.empty()) continue;
      data e;
      e.set("state_name", b.state_name);
      e.set("name", cname_[i]);
      e.set("dtype", dtype());
      e.set("ndims", std::to_string(b.dims.size()));
      e.set("dims", dims_list(b, false));
      state.push_back(e);
    }
    // params first, then optimiser state (buffers come in that order already for params;
    // optimiser state buffers are created after every param)
    d.set("state", state);
    return d;
  }

  static std::string num_double(double v) {
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }

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

  std::string helpers() {
    std::string r = real(), s;
    auto add = [&](const char* name, std::string body) {
      if (helpers_.count(name)) s += fmt::format("static inline {} cannl_{}({} x) {{ {} }}\n", r, name, r, body);
    };
    add("relu", "return x > 0 ? x : 0;");
    add("step", "return x > 0 ? 1 : 0;");
    add("sigmoid", fmt::format("return 1 / (1 + {}(-x));", fn("exp")));
    add("sign", "return (x > 0) - (x < 0);");
    add("gelu", fmt::format("return {} * x * (1 + {}(x * {}));", num(0.5), fn("erf"), num(M_SQRT1_2)));
    add("gelu_grad", fmt::format("return {} * (1 + {}(x * {})) + x * {}({} * x * x) * {};", num(0.5), fn("erf"),
                                 num(M_SQRT1_2), fn("exp"), num(-0.5), num(0.3989422804014327)));
    return s.empty() ? "" : "\n" + s;
  }

  // ---- nests -------------------------------------------------------------------------

  std::string affine(const ir::Affine& a) const {
    std::string s;
    for (const auto& t : a.terms) {
      long c = t.coef;
      if (!s.empty()) {
        s += c < 0 ? " - " : " + ";
        c = std::labs(c);
      } else if (c < 0) {
        s += "-";
        c = -c;
      }
      if (c != 1) s += fmt::format("{} * ", c);
      s += vars_[static_cast<size_t>(t.iter)];
    }
    if (s.empty()) return std::to_string(a.offset);
    if (a.offset > 0) s += fmt::format(" + {}", a.offset);
    if (a.offset < 0) s += fmt::format(" - {}", -a.offset);
    return s;
  }

  std::string flat_index(const ir::Access& a) const {
    const auto& dims = p_.buffers[static_cast<size_t>(a.buf)].dims;
    std::string s;
    long stride = 1;
    std::vector<std::string> parts;
    for (size_t d = dims.size(); d-- > 0;) {
      const ir::Affine& f = a.index[d];
      if (!(f.terms.empty() && f.offset == 0)) {
        std::string e = affine(f);
        bool compound = f.terms.size() + (f.offset != 0) > 1 || (f.terms.size() == 1 && f.terms[0].coef != 1);
        parts.push_back(stride == 1 ? e : (compound ? "(" + e + ")" : e) + fmt::format(" * {}", stride));
      }
      stride *= dims[d].size;
    }
    for (size_t i = parts.size(); i-- > 0;) s += (s.empty() ? "" : " + ") + parts[i];
    return s.empty() ? "0" : s;
  }

  // The condition under which an access is inside its buffer ("" when always).
  std::string in_range(const ir::Access& a) const {
    const auto& dims = p_.buffers[static_cast<size_t>(a.buf)].dims;
    std::vector<std::string> conds;
    for (size_t d = 0; d < dims.size(); ++d) {
      const ir::Affine& f = a.index[d];
      long lo = f.offset, hi = f.offset;
      for (const auto& t : f.terms) {
        long top = t.coef * (stmt_->iters[static_cast<size_t>(t.iter)].size - 1);
        lo += std::min(0L, top);
        hi += std::max(0L, top);
      }
      std::string e = affine(f);
      if (lo < 0) conds.push_back(fmt::format("{} >= 0", e));
      if (hi > dims[d].size - 1) conds.push_back(fmt::format("{} < {}", e, dims[d].size));
    }
    std::string s;
    for (const auto& c : conds) s += (s.empty() ? "" : " && ") + c;
    return s;
  }

  std::string access(const ir::Access& a) const {
    return cname_[static_cast<size_t>(a.buf)] + "[" + flat_index(a) + "]";
  }

  static int prec(ir::Op op) {
    switch (op) {
      case ir::Op::Select: return 1;
      case ir::Op::Eq: case ir::Op::Gt: return 2;
      case ir::Op::Add: case ir::Op::Sub: return 3;
      case ir::Op::Mul: case ir::Op::Div: return 4;
      case ir::Op::Neg: return 5;
      default: return 6;
    }
  }
  std::string sub(const ir::Expr& e, int min_prec) {
    std::string s = expr(e);
    return prec(e.op) < min_prec ? "(" + s + ")" : s;
  }
  static bool simple(const ir::Expr& e) {
    return e.op == ir::Op::Load || e.op == ir::Op::Scalar || e.op == ir::Op::Const;
  }
  std::string call(const std::string& f, const ir::Expr& a) { return f + "(" + expr(a) + ")"; }
  std::string helper(const char* name, const ir::Expr& a) {
    helpers_.insert(name);
    return call(std::string("cannl_") + name, a);
  }

  std::string expr(const ir::Expr& e) {
    using ir::Op;
    switch (e.op) {
      case Op::Const: return num(e.value);
      case Op::Scalar: return e.name == "n" ? "(real)n" : e.name;
      case Op::Index: return "(real)(" + affine(e.access.index[0]) + ")";
      case Op::Load: {
        std::string cond = in_range(e.access);
        return cond.empty() ? access(e.access) : "(" + cond + " ? " + access(e.access) + " : 0)";
      }
      case Op::Neg: return "-" + sub(*e.args[0], 6);
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: {
        int pr = prec(e.op);
        return sub(*e.args[0], pr) + " " + ir::op_name(e.op) + " " + sub(*e.args[1], pr + 1);
      }
      case Op::Eq: case Op::Gt:
        return "(real)(" + sub(*e.args[0], 3) + (e.op == Op::Eq ? " == " : " > ") + sub(*e.args[1], 3) + ")";
      case Op::Pow: {
        const ir::Expr& a = *e.args[0];
        if (e.value == 2 && simple(a)) return sub(a, 5) + " * " + sub(a, 5);
        if (e.value == 0.5) return call(fn("sqrt"), a);
        return fmt::format("{}({}, {})", fn("pow"), expr(a), num(e.value));
      }
      case Op::Relu: return helper("relu", *e.args[0]);
      case Op::Step: return helper("step", *e.args[0]);
      case Op::Sigmoid: return helper("sigmoid", *e.args[0]);
      case Op::Sign: return helper("sign", *e.args[0]);
      case Op::Gelu: return helper("gelu", *e.args[0]);
      case Op::GeluGrad: return helper("gelu_grad", *e.args[0]);
      case Op::Tanh: return call(fn("tanh"), *e.args[0]);
      case Op::Exp: return call(fn("exp"), *e.args[0]);
      case Op::Log: return call(fn("log"), *e.args[0]);
      case Op::Sqrt: return call(fn("sqrt"), *e.args[0]);
      case Op::Abs: return call(fn("fabs"), *e.args[0]);
      case Op::Select: {
        const ir::Expr& c = *e.args[0];
        std::string cond = c.op == Op::Eq || c.op == Op::Gt
                               ? sub(*c.args[0], 3) + (c.op == Op::Eq ? " == " : " > ") + sub(*c.args[1], 3)
                               : sub(c, 2) + " != 0";
        return cond + " ? " + sub(*e.args[1], 2) + " : " + sub(*e.args[2], 1);
      }
      case Op::Uniform: {
        double lo = e.args[0]->value, hi = e.args[1]->value;
        return fmt::format("(real)({} + {} * cannl_rng_uniform(&rng))", num_double(lo), num_double(hi - lo));
      }
      case Op::Normal:
        return fmt::format("(real)({} + {} * cannl_rng_normal(&rng))", num_double(e.args[0]->value),
                           num_double(e.args[1]->value));
    }
    CANNL_BUG("no C for this operation");
  }

  bool uses_var(const ir::Access& a, int it) const {
    for (const auto& f : a.index)
      for (const auto& t : f.terms)
        if (t.iter == it) return true;
    return false;
  }

  std::string nest(const ir::Stmt& s, const std::set<std::string>& taken) {
    stmt_ = &s;
    vars_.clear();
    for (const auto& it : s.iters) {
      std::string v = it.name;
      while (taken.count(v) || reserved().count(v) ||
             std::find(vars_.begin(), vars_.end(), v) != vars_.end())
        v += "_";
      vars_.push_back(v);
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
      return fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", vars_[static_cast<size_t>(k)],
                         it.batch ? std::string("n") : std::to_string(it.size));
    };
    const std::string target = access(s.out);
    const std::string guard = in_range(s.out);
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
    std::string body = expr(*s.body);
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
        long per = size(b, true);
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

  static std::string comment_safe(std::string s) {
    for (size_t i; (i = s.find("*/")) != std::string::npos;) s.replace(i, 2, "* /");
    for (size_t i; (i = s.find("/*")) != std::string::npos;) s.replace(i, 2, "/ *");
    return s;
  }
};

}  // namespace

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt) { return CEmitter(p, opt).run(); }

}  // namespace cannl
