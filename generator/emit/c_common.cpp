// c_common.cpp — what the C and CUDA back ends print alike (see c_common.h).
#include "emit/c_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <fmt/format.h>

#include "driver/version.h"
#include "emit/c_emit.h"
#include "emit/c_names.h"
#include "ir/prims.h"
#include "support/diagnostic.h"

namespace cannl {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string comment_safe(std::string s) {
  for (size_t i; (i = s.find("*/")) != std::string::npos;) s.replace(i, 2, "* /");
  for (size_t i; (i = s.find("/*")) != std::string::npos;) s.replace(i, 2, "/ *");
  return s;
}

std::string num_double(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// The data of a render, and a partial ({{> common/decode_api.c.mustache}}) looked up as the
// template of that name, less its file's last newline, so that a partial's tag on a line of
// its own stands for its lines; a template that is not there is a bug, not an empty string.
class TemplateContext : public kainjow::mustache::context<std::string> {
 public:
  explicit TemplateContext(const data* d) : context(d) {}
  const data* get_partial(const std::string& name) const override {
    auto [it, added] = partials_.try_emplace(name);
    if (added) {
      std::string text = template_text(name);
      if (!text.empty() && text.back() == '\n') text.pop_back();
      it->second = data{text};
    }
    return &it->second;
  }

 private:
  mutable std::map<std::string, data> partials_;
};

}  // namespace

std::string render_template(const std::string& name, const data& d) {
  mustache t{template_text(name)};
  if (!t.is_valid()) CANNL_BUG("template " + name + ": " + t.error_message());
  t.set_custom_escape([](const std::string& s) { return s; });  // C, not HTML
  TemplateContext ctx{&d};
  std::string text = t.render(ctx);
  if (!t.is_valid()) CANNL_BUG("template " + name + ": " + t.error_message());
  return text;
}

std::string dims_list(const ir::Buffer& b, bool skip_batch) {
  std::string s;
  for (const auto& d : b.dims) {
    if (skip_batch && d.batch) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(d.size);
  }
  return s.empty() ? "0" : s;
}
long buffer_size(const ir::Buffer& b, bool skip_batch) {
  long k = 1;
  for (const auto& d : b.dims)
    if (!(skip_batch && d.batch)) k *= d.size;
  return k;
}
void stmt_uses(const ir::Stmt& s, std::set<int>& bufs, std::set<std::string>& scalars) {
  for (int w : ir::written_buffers(s)) bufs.insert(w);
  if (s.call)
    for (int b : ir::call_reads(*s.call)) bufs.insert(b);
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const auto* l : loads) bufs.insert(l->access.buf);
  std::vector<const ir::Expr*> stack;
  for (const auto& a : s.assigns) stack.push_back(a.body.get());
  while (!stack.empty()) {
    const ir::Expr* e = stack.back();
    stack.pop_back();
    if (e->op == ir::Op::Scalar) scalars.insert(e->name);
    for (const auto& a : e->args) stack.push_back(a.get());
  }
}

std::vector<const ir::Stmt*> block_span(const ir::Program& p, const ir::Call& c) {
  const ir::Block& bl = p.blocks[static_cast<size_t>(c.block)];
  const ir::Routine& body = ir::body_of(bl, c.kind);
  const auto [lo, hi] = ir::body_span(bl, c.kind);
  std::vector<const ir::Stmt*> out;
  for (size_t i = lo; i < hi; ++i) out.push_back(&body.stmts[i]);
  return out;
}

BlockSig block_sig(const ir::Program& p, const ir::Call& c) {
  std::set<int> bound;
  for (const ir::Binding& bd : c.binds) bound.insert(bd.formal);
  std::set<int> w, used;
  std::set<std::string> sc;
  for (const ir::Stmt* t : block_span(p, c)) {
    stmt_uses(*t, used, sc);
    for (int b : t->call ? ir::call_writes(*t->call) : ir::written_buffers(*t)) w.insert(b);
  }
  // (a formal a local written here lives in: written, so not `const`)
  const ir::Routine& body = ir::body_of(p.blocks[static_cast<size_t>(c.block)], c.kind);
  for (const auto& [l, f] : body.hosted)
    if (w.count(l)) w.insert(f);
  BlockSig sig;
  for (int b : used)
    if (bound.count(b)) (w.count(b) ? sig.written : sig.read).push_back(b);
  for (const std::string& x : sc)
    if (x != "n") sig.scalars.push_back(x);
  return sig;
}

void block_call_uses(const ir::Program& p, const ir::Call& c, std::set<int>& bufs, std::set<std::string>& scalars) {
  for (const ir::Binding& bd : c.binds)
    for (int b : {bd.buf, bd.first, bd.last})
      if (b >= 0) bufs.insert(b);
  if (c.scratch >= 0) bufs.insert(c.scratch);
  std::set<int> unused;
  for (const ir::Stmt* t : block_span(p, c)) stmt_uses(*t, unused, scalars);
}

std::string block_actual(const ir::Program& p, const ir::Binding& bd, long count,
                         const std::function<std::string(int)>& name) {
  std::string slice;
  if (bd.buf >= 0) {
    // A batched stack's slots (saved activations [count, batch, ...]) scale with the state's cap.
    const bool scaled = p.buffers[static_cast<size_t>(bd.buf)].batched();
    if (scaled && (bd.offset % p.max_batch || bd.stride % p.max_batch))
      CANNL_BUG("a binding into a batched buffer off its slots: " + p.buffers[static_cast<size_t>(bd.buf)].name);
    auto elems = [&](long x) {
      return scaled && x ? fmt::format("{} * m->max_batch", x / p.max_batch) : std::to_string(x);
    };
    if (bd.stride == 0) {
      slice = bd.offset == 0 ? name(bd.buf) : fmt::format("{} + {}", name(bd.buf), elems(bd.offset));
    } else {
      std::string slot = "cannl_l";
      if (bd.shift != 0) slot = fmt::format("(cannl_l {} {})", bd.shift < 0 ? '-' : '+', std::labs(bd.shift));
      if (bd.modulo > 0)
        slot = bd.shift < 0 ? fmt::format("(({} % {} + {}) % {})", slot, bd.modulo, bd.modulo, bd.modulo)
                            : fmt::format("({} % {})", slot, bd.modulo);
      slice = fmt::format("{} + {}{} * {}", name(bd.buf), bd.offset ? elems(bd.offset) + " + " : "", slot,
                          elems(bd.stride));
    }
  }
  std::string out = slice;
  if (bd.last >= 0)
    out = out.empty() ? name(bd.last) : fmt::format("cannl_l == {} ? {} : {}", count - 1, name(bd.last), out);
  if (bd.first >= 0) out = out.empty() ? name(bd.first) : fmt::format("cannl_l == 0 ? {} : {}", name(bd.first), out);
  if (out.empty()) CANNL_BUG("a binding to nothing");
  return bd.first >= 0 || bd.last >= 0 ? "(" + out + ")" : out;
}

void arena_data(kainjow::mustache::data& d, const ir::Arena& a, const std::string& prefix) {
  d.set(prefix + "arena_bytes", a.example_bytes == 0 ? std::to_string(a.bytes)
                                                     : fmt::format("(size_t){} + (size_t){} * (size_t)max_batch",
                                                                   a.fixed_bytes, a.example_bytes));
  d.set(prefix + "arena_words", a.example_bytes == 0 ? fmt::format("{} bytes", a.bytes)
                                                     : fmt::format("{} bytes, then {} per example of max_batch "
                                                                   "({} at {})", a.fixed_bytes, a.example_bytes,
                                                                   a.bytes, a.max_batch));
}

std::string work_words(const ir::Routine& r, long max_batch) {
  const long fixed = r.fixed_bytes, per = (r.arena_bytes - r.fixed_bytes) / max_batch;
  if (per == 0) return fmt::format("this routine's {} bytes", fixed);
  if (fixed == 0) return fmt::format("this routine's {} bytes per example of the state's max_batch", per);
  return fmt::format("this routine's {} bytes, then {} per example of the state's max_batch", fixed, per);
}

std::string scaled_offset(long fixed, long per, const std::string& cap) {
  const std::string scaled = fmt::format("{} * {}", per, cap);
  return per == 0 ? std::to_string(fixed) : fixed == 0 ? scaled : fmt::format("{} + {}", fixed, scaled);
}

std::string field_offset(const ir::Arena& a, int b, const std::string& cap) {
  const auto i = static_cast<size_t>(b);
  if (i < a.field_example.size() && a.field_example[i] >= 0)
    return scaled_offset(a.fixed_bytes, a.field_example[i], cap);
  return std::to_string(a.field[i]);
}

namespace {

int ndims(const ir::Buffer& b, bool skip_batch) {
  int k = 0;
  for (const auto& d : b.dims) k += !(skip_batch && d.batch);
  return k;
}
std::string spec_shape(const ir::Buffer& b) {
  auto colon = b.shape.find(" : ");
  return colon == std::string::npos ? b.shape : b.shape.substr(colon + 3);
}

}  // namespace

data model_template_data(const ir::Program& p, const std::vector<std::string>& names, bool f64,
                         const std::string& spec, const std::string& grad_prefix) {
  const std::string dtype = f64 ? "CANNL_F64" : "CANNL_F32";
  data d;
  d.set("model", p.model);
  d.set("MODEL", upper(p.model));
  d.set("version", CANNL_VERSION);
  d.set("spec", spec);
  d.set("real", f64 ? "double" : "float");
  d.set("dtype", dtype);
  d.set("max_batch", std::to_string(p.max_batch));
  d.set("optimizer", p.optimizer);
  std::string optimizer_name;  // "adam"; with groups each optimiser once: "muon and adamw"
  std::vector<std::string> seen;
  for (const ir::OptimizerGroup& g : p.opt.groups)
    if (std::find(seen.begin(), seen.end(), g.name) == seen.end()) {
      optimizer_name += (seen.empty() ? "" : " and ") + g.name;
      seen.push_back(g.name);
    }
  d.set("optimizer_name", p.opt.groups.empty() ? p.optimizer.substr(0, p.optimizer.find('(')) : optimizer_name);
  d.set("lr", num_double(p.lr));
  if (p.schedule.empty()) d.set("schedule", false);
  else d.set("schedule", p.schedule);
  d.set("loss", p.buffers[static_cast<size_t>(p.loss)].name);
  d.set("pad", std::string(p.model.size() + 6, ' '));
  {  // per input, whether forward reads it (the others are targets, only for loss and metrics)
    std::set<int> fwd(p.outputs.begin(), p.outputs.end());
    std::set<std::string> scalars;
    for (const auto& st : p.routine(ir::RoutineKind::Forward)->stmts) stmt_uses(st, fwd, scalars);
    data reads{data::type::list};
    for (int b : p.inputs) {
      data e;
      e.set("read", fwd.count(b) ? std::string("1") : std::string("0"));
      reads.push_back(e);
    }
    d.set("forward_reads", reads);
  }
  auto list = [&](const std::vector<int>& bufs, bool per_example) {
    data l{data::type::list};
    for (size_t i = 0; i < bufs.size(); ++i) {
      const auto& b = p.buffers[static_cast<size_t>(bufs[i])];
      data e;
      e.set("index", std::to_string(i));
      e.set("name", b.state_name.empty() ? b.name : b.state_name);  // a param: its checkpoint name
      e.set("NAME", upper(b.name));
      e.set("field", names[static_cast<size_t>(bufs[i])]);
      e.set("shape", spec_shape(b));
      e.set("ndims", std::to_string(ndims(b, per_example)));
      e.set("dims", dims_list(b, per_example));
      e.set("size", std::to_string(buffer_size(b, per_example)));
      e.set("ids", std::to_string(b.ids));
      const int g = p.grad(bufs[i]);
      e.set("grad", g >= 0 && b.role == ir::Role::Param ? grad_prefix + names[static_cast<size_t>(g)] : std::string("NULL"));
      l.push_back(e);
    }
    return l;
  };
  d.set("inputs", list(p.inputs, true));
  d.set("outputs", list(p.outputs, true));
  d.set("params", list(p.params, false));
  // The header's list of params: a repeat block's instances of a stacked param (consecutive,
  // `w_qkv.0` ... `w_qkv.47`, one shape) on one line.
  data header{data::type::list};
  for (size_t k = 0; k < p.params.size();) {
    const auto& b = p.buffers[static_cast<size_t>(p.params[k])];
    const std::string& first = b.state_name;
    const std::string stem = first.ends_with(".0") ? first.substr(0, first.size() - 2) : "";
    size_t c = 1;
    while (b.view_of >= 0 && !stem.empty() && k + c < p.params.size()) {
      const auto& x = p.buffers[static_cast<size_t>(p.params[k + c])];
      if (x.view_of != b.view_of || x.state_name != stem + "." + std::to_string(c) || spec_shape(x) != spec_shape(b) ||
          x.dims.size() != b.dims.size())
        break;
      ++c;
    }
    data e;
    e.set("name", c >= 2 ? fmt::format("{}.0 ... {}.{}", stem, stem, c - 1) : first.empty() ? b.name : first);
    e.set("shape", spec_shape(b));
    e.set("dims", dims_list(b, false));
    header.push_back(e);
    k += c;
  }
  d.set("header_params", header);
  d.set("metrics", list(p.metrics, false));
  d.set("num_inputs", std::to_string(p.inputs.size()));
  d.set("num_outputs", std::to_string(p.outputs.size()));
  d.set("num_params", std::to_string(p.params.size()));
  d.set("num_metrics", std::to_string(p.metrics.size()));
  return d;
}

std::string scalar_prologue(const ir::Routine& r, const std::set<std::string>& used, CExpr& x) {
  // train_grads runs before train_update counts the step up: its step is the one to come.
  // Its dropout numbers the examples from example_offset (x.example_offset): the masks of a
  // data-parallel rank's slice are those one process draws for the same examples.
  if (r.kind == ir::RoutineKind::TrainGrads)
    return used.count("rng_key") ? std::string("    const uint64_t rng_key = cannl_dropout_key(m->seed, m->step + 1);\n") +
                                       (x.example_offset ? "    const int64_t rng_first = m->example_offset;\n" : "")
                                 : "";
  if (r.kind != ir::RoutineKind::TrainStep && r.kind != ir::RoutineKind::TrainUpdate) return "";
  std::string pro;
  const bool step_used = used.count("step") > 0 || used.count("rng_key") > 0 || !r.scalars.empty();
  pro += step_used ? "    const int64_t step = ++m->step;\n" : "    ++m->step;\n";
  // dropout's key (Op::Keep): from the seed the state was initialised with and the step
  if (used.count("rng_key")) pro += "    const uint64_t rng_key = cannl_dropout_key(m->seed, step);\n";
  if (used.count("lr")) pro += "    const real lr = (real)m->lr;\n";
  for (const auto& d : r.scalars)
    if (used.count(d.name)) pro += fmt::format("    const real {} = (real)({});\n", d.name, x.formula(*d.value));
  // the learning rate this step's updates use, as <model>_get_last_lr reports it
  if (!r.lr_scalar.empty())
    pro += used.count(r.lr_scalar) ? fmt::format("    m->last_lr = (double){};\n", r.lr_scalar)
                                   : std::string("    m->last_lr = m->lr;\n");
  return pro;
}

// ---- expressions -------------------------------------------------------------------------

bool uses_iter(const ir::Access& a, int iter) {
  for (const auto& f : a.index)
    for (const auto& t : f.terms)
      if (t.iter == iter) return true;
  return false;
}

void CExpr::begin_nest(const ir::Stmt& s, const std::set<std::string>& taken, const std::set<std::string>& reserved) {
  stmt = &s;
  locals.clear();
  vars.clear();
  dropped.clear();
  for (const auto& it : s.iters) {
    vars.push_back(fresh_name(it.name, [&](const std::string& v) {
      return taken.count(v) || reserved.count(v) || std::find(vars.begin(), vars.end(), v) != vars.end();
    }));
    dropped.push_back(!it.batch && it.size == 1);
  }
}

bool CExpr::is_zero(const ir::Affine& a) const {
  if (a.offset != 0) return false;
  for (const auto& t : a.terms)
    if (!dropped[static_cast<size_t>(t.iter)] || stmt->iters[static_cast<size_t>(t.iter)].at_pos) return false;
  return true;
}

std::string CExpr::num(double v) const { return ir::CSpell{f64}.num(v); }

std::string CExpr::helper_defs(const std::string& qualifier) const {
  std::string r = real(), s;
  for (const ir::Prim& f : ir::prims()) {
    if (!helpers.count(f.name)) continue;
    const auto body = cuda && f.cuda_helper ? f.cuda_helper : f.helper;
    const std::string arg = f.wide ? "double" : r;
    std::string params;
    for (int k = 0; k < f.arity; ++k) params += fmt::format("{}{} {}", k ? ", " : "", arg, "xyzw"[k]);
    s += fmt::format("{} {} cannl_{}({}) {{ {} }}\n", qualifier, r, f.name, params, body(ir::CSpell{f64}));
  }
  // Op::Keep's hash: splitmix64's finaliser of the key and the counter (a counter-based
  // generator: each element's draw depends on (seed, step, counter) only, in C and CUDA alike).
  if (helpers.count("keep"))
    s += fmt::format("{} {} cannl_keep(uint64_t key, uint64_t i, uint32_t t) {{ uint64_t z = key ^ (i * "
                     "0x9E3779B97F4A7C15u); z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u; z = (z ^ (z >> 27)) * "
                     "0x94D049BB133111EBu; z ^= z >> 31; return (uint32_t)(z >> 32) >= t ? ({})1 : ({})0; }}\n",
                     qualifier, r, r, r);
  return s;
}

std::string CExpr::affine(const ir::Affine& a, const std::string& pos_text) const {
  const std::string pos = pos_text == "pos" ? row_pos() : pos_text;
  std::string s;
  for (const auto& t : a.terms) {
    const bool at_pos = stmt->iters[static_cast<size_t>(t.iter)].at_pos;  // the variable is `pos`
    if (dropped[static_cast<size_t>(t.iter)] && !at_pos) continue;  // a loop of one iteration: its variable is 0
    long c = t.coef;
    if (!s.empty()) {
      s += c < 0 ? " - " : " + ";
      c = std::labs(c);
    } else if (c < 0) {
      s += "-";
      c = -c;
    }
    if (c != 1) s += fmt::format("{} * ", c);
    s += at_pos ? pos : vars[static_cast<size_t>(t.iter)];
  }
  if (s.empty()) return std::to_string(a.offset);
  if (a.offset > 0) s += fmt::format(" + {}", a.offset);
  if (a.offset < 0) s += fmt::format(" - {}", -a.offset);
  return s;
}

std::string CExpr::row_pos() const {
  if (!rows) return "pos";
  for (size_t k = 0; k < stmt->iters.size(); ++k)
    if (stmt->iters[k].batch) return "pos[" + vars[k] + "]";
  return "pos";
}

std::string CExpr::flat_index(const ir::Access& a) const {
  const ir::Buffer& buf = p->buffers[static_cast<size_t>(a.buf)];
  const auto& dims = buf.dims;
  const long ring = buf.ring;  // a window's decode cache
  const std::string pos = ring ? fmt::format("({} % {})", row_pos(), ring) : row_pos();
  std::string s;
  long stride = 1;
  std::vector<std::string> parts;
  for (size_t d = dims.size(); d-- > 0;) {
    const ir::Affine& f = a.index[d];
    if (!is_zero(f)) {
      std::string e = affine(f, pos);
      if (rows && d == 0 && buf.role == ir::Role::Cache) e = "seq[" + e + "]";  // the row's sequence slot
      size_t terms = 0;
      long coef = 1;
      for (const auto& t : f.terms)
        if (!dropped[static_cast<size_t>(t.iter)] || stmt->iters[static_cast<size_t>(t.iter)].at_pos)
          ++terms, coef = t.coef;
      bool compound = terms + (f.offset != 0) > 1 || (terms == 1 && coef != 1);
      parts.push_back(stride == 1 ? e : (compound ? "(" + e + ")" : e) + fmt::format(" * {}", stride));
    }
    stride *= dims[d].size;
  }
  for (size_t i = parts.size(); i-- > 0;) s += (s.empty() ? "" : " + ") + parts[i];
  return s.empty() ? "0" : s;
}

// Whether index f of a dim of `size` cells can fall outside it: below 0 (lo), past the end (hi).
// The least and the greatest value of `f` over the nest's loops (batch loops at their maximum).
static std::pair<long, long> value_range(const ir::Affine& f, const ir::Stmt& stmt) {
  long lo = f.offset, hi = f.offset;
  for (const auto& t : f.terms) {
    long top = t.coef * (stmt.iters[static_cast<size_t>(t.iter)].size - 1);
    lo += std::min(0L, top);
    hi += std::max(0L, top);
  }
  return {lo, hi};
}

static std::pair<bool, bool> may_leave(const ir::Affine& f, long size, const ir::Stmt& stmt) {
  const auto [lo, hi] = value_range(f, stmt);
  return {lo < 0, hi > size - 1};
}

std::string CExpr::in_range(const ir::Access& a) const {
  const auto& dims = p->buffers[static_cast<size_t>(a.buf)].dims;
  std::vector<std::string> conds;
  const bool slot = rows && p->buffers[static_cast<size_t>(a.buf)].role == ir::Role::Cache;  // (seq[r] < slots)
  for (size_t d = slot ? 1 : 0; d < dims.size(); ++d) {
    const ir::Affine& f = a.index[d];
    const auto [below, past] = may_leave(f, dims[d].size, *stmt);
    std::string e = affine(f);
    if (below) conds.push_back(fmt::format("{} >= 0", e));
    if (past) conds.push_back(fmt::format("{} < {}", e, dims[d].size));
  }
  std::string s;
  for (const auto& c : conds) s += (s.empty() ? "" : " && ") + c;
  return s;
}

bool CExpr::in_range_uses(const ir::Access& a, int iter) const {
  const auto& dims = p->buffers[static_cast<size_t>(a.buf)].dims;
  const bool slot = rows && p->buffers[static_cast<size_t>(a.buf)].role == ir::Role::Cache;
  for (size_t d = slot ? 1 : 0; d < dims.size(); ++d) {
    const auto [below, past] = may_leave(a.index[d], dims[d].size, *stmt);
    if (below || past)
      for (const auto& t : a.index[d].terms)
        if (t.iter == iter) return true;
  }
  return false;
}

std::string CExpr::access(const ir::Access& a) const {
  return names[static_cast<size_t>(a.buf)] + "[" + flat_index(a) + "]";
}

namespace {

int prec(ir::Op op) {
  switch (op) {
    case ir::Op::Select: return 1;
    case ir::Op::Eq: case ir::Op::Gt: return 2;
    case ir::Op::Add: case ir::Op::Sub: return 3;
    case ir::Op::Mul: case ir::Op::Div: return 4;
    case ir::Op::Neg: return 5;
    default: return 6;
  }
}
bool simple(const ir::Expr& e) { return e.op == ir::Op::Load || e.op == ir::Op::Scalar || e.op == ir::Op::Const; }

}  // namespace

std::string CExpr::formula(const ir::Expr& e) {
  const bool was_f64 = f64;
  const auto helpers_before = helpers;
  f64 = true;
  in_formula_ = true;
  std::string s = expr(e);
  f64 = was_f64;
  in_formula_ = false;
  if (helpers != helpers_before) CANNL_BUG("a helper function in a run-time scalar's formula");
  return s;
}

std::string CExpr::sub(const ir::Expr& e, int min_prec) {
  std::string s = expr(e);
  return prec(e.op) < min_prec ? "(" + s + ")" : s;
}
std::string CExpr::call(const std::string& f, const ir::Expr& a) { return f + "(" + expr(a) + ")"; }

std::string CExpr::expr(const ir::Expr& e) {
  using ir::Op;
  switch (e.op) {
    case Op::Const: return num(e.value);
    case Op::Scalar:
      if (in_formula_) {
        if (e.name == "lr" || e.name == "schedule") return "m->" + e.name;
        return e.name == "n" ? "(double)n" : e.name;
      }
      return e.name == "n" ? "(real)n" : e.name;
    case Op::Index: {  // through int32_t when it fits: x86 vectorises int32 -> float, int64 -> float only with AVX-512
      const auto [lo, hi] = stmt ? value_range(e.access.index[0], *stmt) : std::pair<long, long>{-1L << 40, 0};
      const bool narrow = lo >= std::numeric_limits<int32_t>::min() && hi <= std::numeric_limits<int32_t>::max();
      return (narrow ? "(real)(int32_t)(" : "(real)(") + affine(e.access.index[0]) + ")";
    }
    case Op::Keep: {  // dropout's draw: kept when the hash's high 32 bits reach p 2^32
      helpers.insert("keep");
      const double t = std::min(std::round(e.value * 4294967296.0), 4294967295.0);
      std::string counter = affine(e.access.index[0]);
      if (rng_first)  // the example's index in the global batch: the batch loop's variable + rng_first
        for (const auto& term : e.access.index[0].terms)
          if (stmt->iters[static_cast<size_t>(term.iter)].batch) counter += fmt::format(" + rng_first * {}", term.coef);
      return fmt::format("cannl_keep({}, (uint64_t)({}), {}u)", expr(*e.args[0]), counter, static_cast<unsigned long>(t));
    }
    case Op::Load: {
      std::string cond = in_range(e.access);
      if (cond.empty())
        if (auto l = locals.find(access(e.access)); l != locals.end()) return l->second;
      return cond.empty() ? access(e.access) : "(" + cond + " ? " + access(e.access) + " : 0)";
    }
    case Op::Neg: return "-" + sub(*e.args[0], 6);
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: {
      if (e.op == Op::Mul && e.args[1]->op == Op::Const && e.args[1]->wide && !f64)  // see ir::Expr::wide
        return fmt::format("(real)((double){} * {:.17g})", sub(*e.args[0], 6), e.args[1]->value);
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
    case Op::Prim: {  // a math-library function or a helper (ir/prims.cpp)
      std::string args;
      for (const ir::ExprP& a : e.args)  // a wide helper's constants in double (ir::Prim::wide)
        args += (args.empty() ? "" : ", ") + (e.prim->wide && a->op == Op::Const ? num_double(a->value) : expr(*a));
      if (e.prim->libm) return fn(e.prim->libm) + "(" + args + ")";
      helpers.insert(e.prim->name);
      return "cannl_" + std::string(e.prim->name) + "(" + args + ")";
    }
    case Op::Select: {
      const ir::Expr& c = *e.args[0];
      std::string cond = c.op == Op::Eq || c.op == Op::Gt
                             ? sub(*c.args[0], 3) + (c.op == Op::Eq ? " == " : " > ") + sub(*c.args[1], 3)
                             : sub(c, 2) + " != 0";
      return cond + " ? " + sub(*e.args[1], 2) + " : " + sub(*e.args[2], 1);
    }
    case Op::Uniform: {
      double lo = e.args[0]->value, hi = e.args[1]->value;
      return fmt::format("(real)({} + {} * cannl_rng_uniform(rng))", num_double(lo), num_double(hi - lo));
    }
    case Op::Normal:
      return fmt::format("(real)({} + {} * cannl_rng_normal(rng))", num_double(e.args[0]->value),
                         num_double(e.args[1]->value));
  }
  CANNL_BUG("no C for this operation");
}

}  // namespace cannl
