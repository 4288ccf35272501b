// c_emit.cpp — the C back end (see c_emit.h): the files, the state, the nests' kernels and the
// routines (emit/c_emitter.h; the blocks' functions: c_blocks.cpp).
#include "emit/c_emit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <kainjow/mustache.hpp>
#include <map>
#include <set>

#include "emit/c_common.h"
#include "emit/c_emitter.h"
#include "emit/c_gemm.h"
#include "emit/c_names.h"
#include "emit/c_tables.h"
#include "emit/contraction.h"
#include "passes/quantize.h"
#include "support/diagnostic.h"

namespace cannl {

std::vector<OutputFile> CEmitter::run() {
  Unit train{&p_.layout.training, "struct " + p_.model, {}, {}, {}};
  fielded_ = fielded(p_.layout.training);
  for (const auto& r : p_.routines)
    if (r.kind != ir::RoutineKind::Decode) train.routines += routine(r, train) + "\n";  // decode: inference only
  data d = common();
  d.set("helpers", helpers());
  d.set("f64", o_.f64);
  d.set("has_gemm", gemm_kernel_);
  d.set("bf16", gemm_kernel_ && o_.precision == "bf16");
  d.set("dropout", x_.helpers.count("keep") > 0);  // the state keeps its seed (Op::Keep's key)
  d.set("has_constants", p_.routine(ir::RoutineKind::Constants) != nullptr);  // create calls init_constants
  d.set("attention_include", attention_ ? "#include \"cannl_attention.h\"\n" : "");
  d.set("blas", gemm_blas_);
  d.set("fields", fields());
  d.set("kernels", train.kernels);
  d.set("routines", train.routines);
  arena_data(d, *train.arena, "");
  d.set("grad_block_offset", std::to_string(std::max(train.arena->grads, 0L)));
  d.set("grad_block_count", std::to_string(train.arena->grads_bytes / elem()));
  // The runtime's tables, a repeat block's instances folded (emit/c_tables.h).
  const CTables tables = c_tables(p_, names_.buffer, fielded_, o_.f64, upper(p_.model) + "_ROW");
  d.set("grad_offsets", tables.grad_offsets);
  d.set("param_info_rows", tables.param_info);
  d.set("state_rows", tables.state);
  d.set("state_bufs", tables.state_bufs);
  // The optimiser-state block (ZeRO-1's shards): each param's start, each buffer's place.
  const ir::OptBlock& ob = p_.layout.opt_state;
  d.set("opt_state_start", tables.opt_state_start);
  d.set("opt_state_bytes", std::to_string(ob.bytes));
  d.set("has_opt_state", ob.bytes > 0);
  data opt{data::type::list}, stacks{data::type::list};
  for (size_t i = 0; i < ob.field.size(); ++i) {
    if (ob.field[i] < 0 || !fielded_.count(static_cast<int>(i))) continue;
    if (p_.buffers[i].stack > 0) {  // a stacked param's state: bound at its first instance held
      const auto [first, count] = instances_of(p_.buffers[i].state_of);
      data b;
      b.set("name", names_.buffer[i]);
      b.set("offset", std::to_string(ob.field[i]));
      b.set("first", std::to_string(first));
      b.set("end", std::to_string(first + count));
      b.set("last", std::to_string(first + count - 1));
      b.set("per", std::to_string(p_.buffers[i].elements() / p_.buffers[i].stack * elem()));
      stacks.push_back(b);
      continue;
    }
    data b;
    b.set("name", names_.buffer[i]);
    b.set("offset", std::to_string(ob.field[i]));
    b.set("param", std::to_string(std::find(p_.params.begin(), p_.params.end(), p_.buffers[i].state_of) - p_.params.begin()));
    opt.push_back(b);
  }
  d.set("opt_buffers", opt);
  d.set("opt_stacks", stacks);
  data bufs{data::type::list};
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    if (train.arena->field[i] < 0 || !fielded_.count(static_cast<int>(i))) continue;
    data b;
    b.set("name", names_.buffer[i]);
    b.set("offset", field_offset(*train.arena, static_cast<int>(i), "m->max_batch"));
    bufs.push_back(b);
  }
  d.set("buffers", bufs);
  api_params(d);
  inference(d);
  std::vector<OutputFile> files;
  files.push_back({p_.model + ".h", render("c/model.h.mustache", d)});
  files.push_back({p_.model + ".c", render("c/model.c.mustache", d)});
  files.push_back({p_.model + "_train.c", render("c/train.c.mustache", d)});
  files.push_back({p_.model + "_inference.c", render("c/inference.c.mustache", d)});
  files.push_back({p_.model + "_infer.c", render("c/infer.c.mustache", d)});
  if (o_.weights) {
    std::string bin;
    files.push_back({p_.model + "_weights.c", weights(d, o_.weights_bin ? &bin : nullptr)});
    if (o_.weights_bin) files.push_back({p_.model + "_weights.bin", std::move(bin)});
  }
  files.push_back({"CMakeLists.txt", render("c/CMakeLists.txt.mustache", d)});
  return files;
}

std::pair<int, int> CEmitter::instances_of(int stack) const {
  for (size_t k = 0; k < p_.params.size(); ++k)
    if (buf(p_.params[k]).view_of == stack) return {static_cast<int>(k), static_cast<int>(buf(stack).stack)};
  CANNL_BUG("a stacked buffer without instances among the params: " + buf(stack).name);
}

void CEmitter::api_params(data& d) const {
  data singles{data::type::list}, groups{data::type::list};
  auto single = [&](int b) {
    data e;
    e.set("name", buf(b).state_name.empty() ? buf(b).name : buf(b).state_name);
    e.set("size", std::to_string(buf(b).elements()));
    e.set("field", state_pointer(b));
    const int g = p_.grad(b);
    e.set("grad", g >= 0 ? state_pointer(g) : std::string("NULL"));
    singles.push_back(e);
  };
  const auto& ps = p_.params;
  for (size_t k = 0; k < ps.size();) {
    const int s = buf(ps[k]).view_of;
    size_t end = k + 1;
    while (s >= 0 && end < ps.size() && buf(ps[end]).view_of == s) ++end;
    const size_t count = end - k;
    bool regular = s >= 0 && count >= 2;
    const std::string& first = buf(ps[k]).state_name;
    const std::string stem = first.size() > 2 && first.ends_with(".0") ? first.substr(0, first.size() - 2) : "";
    regular = regular && !stem.empty();
    const long off = buf(ps[k]).view_offset, per = regular ? buf(ps[k + 1]).view_offset - off : 0;
    const int g0 = p_.grad(ps[k]);
    const int gs = g0 >= 0 ? buf(g0).view_of : -1;
    const long goff = g0 >= 0 ? buf(g0).view_offset : 0;
    const long gper = regular && g0 >= 0 && p_.grad(ps[k + 1]) >= 0 ? buf(p_.grad(ps[k + 1])).view_offset - goff : 0;
    regular = regular && (g0 < 0 || gs >= 0);
    for (size_t l = 0; regular && l < count; ++l) {
      const int b = ps[k + l], g = p_.grad(b);
      const long ll = static_cast<long>(l);
      regular = buf(b).state_name == stem + "." + std::to_string(l) && buf(b).view_offset == off + ll * per &&
                buf(b).elements() == buf(ps[k]).elements() && (g < 0) == (g0 < 0) &&
                (g < 0 || (buf(g).view_of == gs && buf(g).view_offset == goff + ll * gper));
    }
    if (!regular) {
      for (size_t l = k; l < end; ++l) single(ps[l]);
      k = end;
      continue;
    }
    auto at = [](const std::string& field, long o, long step) {
      return "m->" + field + " + " + (o ? "(" + std::to_string(o) + " + l * " : "l * ") + std::to_string(step) +
             (o ? ")" : "");
    };
    data e;
    e.set("stem", stem);
    e.set("count", std::to_string(count));
    e.set("last", std::to_string(count - 1));
    e.set("size", std::to_string(buf(ps[k]).elements()));
    e.set("param", at(name(s), off, per));
    e.set("has_grad", g0 >= 0);
    e.set("grad", g0 >= 0 ? at(name(gs), goff, gper) : std::string());
    groups.push_back(e);
    k = end;
  }
  d.set("api_params", singles);
  d.set("param_groups", groups);
  d.set("has_param_groups", !groups.is_empty_list());
}

CEmitter::data CEmitter::common() {
  data d = model_template_data(p_, names_.buffer, o_.f64, o_.spec, "m->");
  const bool embedded = o_.embed || o_.weights;
  d.set("embedded", embedded);
  d.set("has_embedded", std::string(embedded ? "1" : "0"));
  d.set("embedded_decls",
        embedded ? fmt::format("/* A forward-only state holding the compiled-in params, for batches of up to max_batch\n"
                                 "   examples (decode: sequences) as _infer_create_batch's; NULL for a max_batch out of\n"
                                 "   range or when out of memory. _create_embedded() is _create_embedded_batch(\n"
                                 "   {1}_MAX_BATCH). It reads the params in place, read-only, with no copy: its arena\n"
                                 "   leaves out their {2} bytes ({3}_weights.c holds them). _infer_param gives\n"
                                 "   pointers into them{4}; _set_params and _load work as on any state, giving it\n"
                                 "   storage of its own for the params first (the compiled-in arrays never change). */\n"
                                 "struct {0}_infer *{0}_infer_create_embedded_batch(int64_t max_batch);\n"
                                 "struct {0}_infer *{0}_infer_create_embedded(void);\n"
                                 "/* The compiled-in params, one array per param in the order listed above "
                                 "(read-only). */\n"
                                 "const {0}_real *const *{0}_embedded_params(void);\n"
                                 "/* (For {3}_weights.c.) A state that reads its params in place from buffers[], one\n"
                                 "   read-only array per param buffer of the state (a repeat block's instances stacked),\n"
                                 "   {5}; they must outlive the state. */\n"
                                 "struct {0}_infer *{0}_infer_create_in_place(int64_t max_batch, "
                                 "const {0}_real *const buffers[],\n"
                                 "    const int8_t *const int8_rows[], const float *const int8_scales[]);\n",
                                 p_.model, upper(p_.model), p_.layout.inference.state, p_.model,
                                 p_.int8_bytes > 0 ? " (an int8 weight's floats: made from its rows, into storage "
                                                     "of the state's own)" : "",
                                 p_.int8_bytes > 0 ? "and the int8 weights' rows and scales, one array each per int8 "
                                                     "param buffer (a repeat block's instances stacked, in its order)"
                                                   : "int8_rows and int8_scales NULL")
                   : std::string());
  // The inference program makes its state with _infer_create_embedded (cannl_infer_model's
  // create_embedded), which reads the params in place: no copy of `embedded`.
  d.set("embedded_arg", std::string("NULL"));
  return d;
}

std::string CEmitter::shape_comment(int b) const {
  std::string dims;
  for (size_t k = 0; k < buf(b).dims.size(); ++k)
    dims += (k ? ", " : "") + (buf(b).dims[k].batch ? std::string("batch") : std::to_string(buf(b).dims[k].size));
  return fmt::format("[{}] {}", dims, buf(b).shape);
}

std::string CEmitter::field_decl(int b) const {
  return fmt::format("    {} *{}; /* {} */\n", ctype(b), name(b), shape_comment(b));
}

bool CEmitter::in_opt_block(int b) const {
  const auto& f = p_.layout.opt_state.field;
  return static_cast<size_t>(b) < f.size() && f[static_cast<size_t>(b)] >= 0;
}

std::set<int> CEmitter::fielded(const ir::Arena& a) const {
  const bool training = &a == &p_.layout.training;
  std::set<int> out;
  for (size_t i = 0; i < p_.buffers.size(); ++i)
    if ((a.field[i] >= 0 || (training && in_opt_block(static_cast<int>(i)))) && buf(static_cast<int>(i)).view_of < 0)
      out.insert(static_cast<int>(i));
  for (const ir::Routine& r : p_.routines) {
    // The forward-only state's routines: forward, eval_metrics and decode (inference()).
    const bool inference = r.kind == ir::RoutineKind::Forward || r.kind == ir::RoutineKind::Eval ||
                           r.kind == ir::RoutineKind::Decode;
    if (training ? r.kind == ir::RoutineKind::Decode : !inference) continue;
    std::set<std::string> scalars, unused;
    const std::set<int> bufs = routine_buffers(r, scalars);
    std::set<int> touched;
    for (const auto& s : r.stmts) stmt_uses(s, touched, unused);
    for (int b : bufs)
      if (buf(b).view_of >= 0 && (touched.count(b) || !bufs.count(buf(b).view_of))) out.insert(b);
  }
  return out;
}

std::string CEmitter::state_pointer(int b) const {
  if (fielded_.count(b) || buf(b).view_of < 0) return "m->" + name(b);
  return fmt::format("m->{} + {}", name(buf(b).view_of), buf(b).view_offset);
}

std::string CEmitter::fields() {
  std::string s;
  ir::Role last = ir::Role::Input;
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    if (p_.layout.training.field[i] < 0 && !in_opt_block(static_cast<int>(i))) continue;
    if (!fielded_.count(static_cast<int>(i))) continue;  // (a view addressed from its stacked buffer)
    const auto& b = p_.buffers[i];
    if (b.role != last) s += fmt::format("    /* {} */\n", b.role == ir::Role::Temp ? "temporaries" : plural(b.role));
    last = b.role;
    s += field_decl(static_cast<int>(i));
  }
  return s;
}

std::string CEmitter::plural(ir::Role r) {
  switch (r) {
    case ir::Role::Param: return "params";
    case ir::Role::Computed: return "tensors of the spec";
    case ir::Role::Grad: return "gradients";
    case ir::Role::OptState: return "optimiser state";
    case ir::Role::Constant: return "constant tables (init_constants computes them when the state is created)";
    default: return ir::role_name(r);
  }
}

void CEmitter::inference(data& d) {
  Unit u{&p_.layout.inference, "struct " + p_.model + "_infer", {}, {}, {}};
  // The fields: as the training state's, a view of stacked storage that no routine here names
  // has none (the tables address it from its stacked buffer), so they do not grow with the depth.
  const std::set<int> own = fielded(*u.arena);
  std::vector<std::pair<long, int>> order;  // fields by offset
  for (size_t b = 0; b < p_.buffers.size(); ++b)
    if (u.arena->field[b] >= 0 && own.count(static_cast<int>(b)))
      order.push_back({u.arena->field[b], static_cast<int>(b)});
  std::sort(order.begin(), order.end());
  // The params first (the arena's prefix, Arena::state; bind_params, and bind_in_place from the
  // read-only buffers of param_storage()), then the others, addressed from the end of the params
  // (bind_buffers: m->after_params), so that a state without the params' bytes has the same code.
  const ir::Arena& a = *u.arena;
  const std::vector<int> storage = param_storage();
  std::string fields;
  data bufs{data::type::list}, params{data::type::list}, in_place{data::type::list}, copy{data::type::list};
  for (const auto& [offset, b] : order) {
    fields += field_decl(b);
    data e;
    e.set("name", name(b));
    if (offset < a.state) {
      e.set("offset", std::to_string(offset));
      params.push_back(e);
      const int s = buf(b).view_of >= 0 ? buf(b).view_of : b;
      const long k = std::find(storage.begin(), storage.end(), s) - storage.begin();
      if (k == static_cast<long>(storage.size())) CANNL_BUG("a field among the params of no param: " + buf(b).name);
      data f;
      f.set("name", name(b));
      f.set("index", std::to_string(k));
      f.set("at", buf(b).view_of >= 0 && buf(b).view_offset ? " + " + std::to_string(buf(b).view_offset) : "");
      in_place.push_back(f);
      continue;
    }
    const auto i = static_cast<size_t>(b);
    e.set("offset", a.field_example[i] >= 0 ? scaled_offset(a.fixed_bytes - a.state, a.field_example[i])
                                            : std::to_string(a.field[i] - a.state));
    bufs.push_back(e);
  }
  for (size_t k = 0; k < storage.size(); ++k) {
    const int b = storage[k];
    if (buf(b).int8_row > 0) continue;  // (its floats made from its rows: int8_own_copy)
    data e;
    e.set("name", name(b));
    e.set("index", std::to_string(k));
    e.set("bytes", std::to_string(buf(b).elements() * elem()));
    copy.push_back(e);
  }
  d.set("infer_param_fields", params);
  d.set("infer_in_place", in_place);
  d.set("infer_own_copy", copy);
  d.set("infer_param_bytes", std::to_string(a.state));
  d.set("infer_rest_bytes", a.example_bytes == 0
                                ? std::to_string(std::max(a.bytes - a.state, 64L))
                                : fmt::format("(size_t){} + (size_t){} * (size_t)max_batch", a.fixed_bytes - a.state,
                                              a.example_bytes));
  x_.helpers.clear();
  int8_unit_ = p_.int8_bytes > 0;
  // (the constant tables' routine first: create calls it; hoist_constants.cpp)
  for (ir::RoutineKind k : {ir::RoutineKind::Constants, ir::RoutineKind::Forward, ir::RoutineKind::Eval,
                            ir::RoutineKind::Decode})
    if (const ir::Routine* r = p_.routine(k)) u.routines += routine(*r, u) + "\n";
  int8_unit_ = false;
  int8_data(d, fields);
  // Generation (passes/decode.cpp): the C API's decode functions over the routine.
  const ir::Routine* dec = p_.routine(ir::RoutineKind::Decode);
  d.set("has_decode", dec != nullptr);
  d.set("decode_arg", dec ? "&" + p_.model + "_decode_api" : std::string("NULL"));
  if (dec) {
    const auto& out = buf(dec->io.outputs[0]);
    const long tokens = std::find(p_.inputs.begin(), p_.inputs.end(), dec->io.ids) - p_.inputs.begin();
    d.set("decode_ctx", std::to_string(dec->io.seq_len));
    d.set("decode_vocab", std::to_string(buffer_size(out, true) / dec->io.seq_len));
    d.set("decode_input", std::to_string(tokens));
    d.set("decode_ids", std::to_string(buf(p_.inputs[static_cast<size_t>(tokens)]).ids));
    d.set("decode_output", name(dec->io.outputs[0]));
    d.set("decode_state", p_.model + "_infer");  // templates/common/decode_*.c.mustache
    d.set("decode_wrap", true);
    d.set("decode_ring", ir::has_ring_cache(p_));  // (a prefill step then holds one position of a prompt)
  }
  // The params' rows (set_params, _infer_param, state_tensors), a repeat block's folded.
  const CTables tables = c_tables(p_, names_.buffer, own, o_.f64, upper(p_.model) + "_ROW", true);
  d.set("infer_state_rows", tables.state);
  d.set("infer_state_bufs", tables.state_bufs);
  d.set("infer_helpers", helpers());
  d.set("infer_fields", fields);
  d.set("infer_buffers", bufs);
  d.set("infer_kernels", u.kernels);
  d.set("infer_routines", u.routines);
  arena_data(d, *u.arena, "infer_");
}

std::string CEmitter::work_prologue(const ir::Routine& r, const ir::Arena& a,
                                    const std::vector<std::pair<long, int>>& work) const {
  // (the forward-only state's from the end of its params: m->after_params, CEmitter::inference)
  const bool infer = &a == &p_.layout.inference;
  std::string pro = fmt::format("    char *const work = {}; /* the work region: {} */\n",
                                !infer ? fmt::format("(char *)m->arena + {}", a.work)
                                : a.work == a.state ? std::string("m->after_params")
                                                    : fmt::format("m->after_params + {}", a.work - a.state),
                                work_words(r, p_.max_batch));
  for (const auto& [offset, b] : work) {
    const std::string at = r.scaled(b) ? scaled_offset(a.fixed_bytes - a.work, r.example_offset(b, p_.max_batch))
                                       : std::to_string(offset);
    pro += fmt::format("    {0} *const {1} = ({0} *)(work + {2}); /* {3} */\n", ctype(b), name(b), at,
                       shape_comment(b));
  }
  return pro;
}

std::string CEmitter::int8_field(int b) const {
  const ir::Buffer& v = buf(b);
  return v.view_of < 0 ? name(b) : fmt::format("{}[{}]", name(v.view_of), v.view_offset / v.elements());
}

std::vector<int> CEmitter::int8_tables() const {
  std::vector<int> t;
  for (int s : param_storage())
    if (buf(s).int8_row > 0) t.push_back(s);
  return t;
}

std::string CEmitter::float_values(int b) const {
  const ir::Buffer& v = buf(b);
  return v.view_of < 0 ? "m->" + name(b) : fmt::format("(m->{} + {})", name(v.view_of), v.view_offset);
}

void CEmitter::int8_data(data& d, std::string& fields) {
  d.set("has_int8", p_.int8_bytes > 0);
  d.set("int8_bytes", std::to_string(p_.int8_bytes));
  for (const char* k : {"int8_quantize", "int8_bind", "int8_create", "int8_free", "int8_set", "int8_check", "int8_stale",
                        "int8_in_place", "int8_own_copy"})
    d.set(k, std::string());
  if (p_.int8_bytes == 0) return;
  std::string quantize, bind, in_place, own_copy;
  std::string rows, scales;
  const std::vector<int> tables = int8_tables();
  for (const int b : p_.params) {
    if (buf(b).int8_row == 0) continue;
    const long n = buf(b).elements(), r = n / buf(b).int8_row;
    // its rows in <model>_weights.c: table j, from row `row` on (an instance: after the others')
    const int st = buf(b).view_of >= 0 ? buf(b).view_of : b;
    const auto j = std::find(tables.begin(), tables.end(), st) - tables.begin();
    const long at = buf(b).view_of >= 0 ? buf(b).view_offset : 0, row = at / buf(b).int8_row;
    const std::string rows_at = at ? fmt::format("m->in_place_int8[{}] + {}", j, at)
                                   : fmt::format("m->in_place_int8[{}]", j),
                      scales_at = row ? fmt::format("m->in_place_scale[{}] + {}", j, row)
                                      : fmt::format("m->in_place_scale[{}]", j);
    const std::string f = int8_field(b), v = float_values(b);
    if (st == b) {
      rows += fmt::format("        int8_t *{}; /* [{}, {}] */\n", f, r, buf(b).int8_row);
      scales += fmt::format("        float *{}; /* [{}] */\n", f, r);
    } else if (at == 0) {  // (quantize_weights: every instance, or none)
      const long count = buf(st).elements() / n;
      rows += fmt::format("        int8_t *{}[{}]; /* each instance's [{}, {}] */\n", name(st), count, r,
                          buf(b).int8_row);
      scales += fmt::format("        float *{}[{}]; /* each instance's [{}] */\n", name(st), count, r);
    }
    quantize += fmt::format("    cannl_quantize_rows_q8({0}, {1}, {2}, m->int8.{3}, m->int8_scale.{3});\n", v, r,
                            buf(b).int8_row, f);
    bind += fmt::format("    m->int8.{0} = (int8_t *)((char *)m->int8_block + {1});\n"
                        "    m->int8_scale.{0} = (float *)(void *)((char *)m->int8_block + {2});\n",
                        f, buf(b).int8_at, buf(b).int8_at + (n + 63) / 64 * 64);
    in_place += fmt::format("    m->int8.{0} = (int8_t *){1};\n"
                            "    m->int8_scale.{0} = (float *){2};\n",
                            f, rows_at, scales_at);
    own_copy += fmt::format("\n    memcpy(m->int8.{0}, {1}, {2});\n"
                            "    memcpy(m->int8_scale.{0}, {3}, {4} * sizeof(float));\n"
                            "    cannl_dequantize_rows_q8(m->int8.{0}, m->int8_scale.{0}, {4}, {5}, {6});",
                            f, rows_at, n, scales_at, r, buf(b).int8_row, v);
  }
  fields += fmt::format("    struct {{\n{}    }} int8; /* int8 rows of the weights (cannl gen --quantize int8) */\n"
                        "    struct {{\n{}    }} int8_scale; /* their scales, one per row */\n"
                        "    void *int8_block; /* the rows and scales above: {} bytes (NULL: read in place) */\n"
                        "    int int8_stale; /* the float params changed since they were quantised */\n",
                        rows, scales, p_.int8_bytes);
  d.set("int8_quantize",
        fmt::format("\n/* int8 weights (cannl gen --quantize int8; cannl_quantize_rows_q8): each weight the\n"
                    "   routines read as int8 rows, quantised again from its float param whenever the params\n"
                    "   may have changed (set_params, a checkpoint loaded, the tensors state_tensors hands out). */\n"
                    "static void quantize_int8(struct {}_infer *m) {{\n{}    m->int8_stale = 0;\n}}\n",
                    p_.model, quantize));
  d.set("int8_bind", fmt::format("\n\n/* The int8 weights' rows and scales in the int8 block. */\n"
                                 "static void bind_int8(struct {}_infer *m) {{\n{}}}",
                                 p_.model, bind));
  d.set("int8_create", fmt::format("\n    if (with_params) {{\n        m->int8_block = cannl_alloc({});\n"
                                   "        if (!m->int8_block) {{\n            {}_infer_destroy(m);\n"
                                   "            return NULL;\n        }}\n        bind_int8(m);\n"
                                   "        m->int8_stale = 1;\n    }}",
                                   p_.int8_bytes, p_.model));
  d.set("int8_in_place", in_place);
  d.set("int8_own_copy", own_copy);
  d.set("int8_free", std::string("\n    cannl_free(m->int8_block);"));
  d.set("int8_set", std::string("\n    quantize_int8(m);"));
  d.set("int8_check", std::string("\n    if (m->int8_stale) quantize_int8(m);"));
  d.set("int8_stale", fmt::format("\n    if (cap > 0{}) s->int8_stale = 1; /* the caller may write the params "
                                  "through these pointers */", o_.embed || o_.weights ? " && held" : ""));
  std::string per;
  for (int b : p_.params) per += (per.empty() ? "" : ", ") + std::to_string(buf(b).int8_row);
  d.set("int8_rows", per);
}

std::string CEmitter::helpers() {
  const std::string s = x_.helper_defs("static inline");
  return s.empty() ? "" : "\n" + s;
}

// Whether nest s reads or writes a decode cache (ir::Role::Cache).
static bool touches_cache(const ir::Program& p, const ir::Stmt& s) {
  for (int b : ir::written_buffers(s))
    if (p.buffers[static_cast<size_t>(b)].role == ir::Role::Cache) return true;
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Expr* l : loads)
    if (p.buffers[static_cast<size_t>(l->access.buf)].role == ir::Role::Cache) return true;
  return false;
}

std::string CEmitter::gemm_nest(const ir::Stmt& s, const std::optional<Gemm>& g, const std::set<std::string>& taken) {
  if (!g || g->flops() < kGemmMinFlops) return "";
  // (over rows a cache's rows are at each row's slot and position, no one stride: the loops)
  if (rows_ && touches_cache(p_, s)) return "";
  // (nor has an operand at the position one offset, pos[r] of each row: the loops)
  for (size_t it = 0; it < g->at_pos.size(); ++it) {
    const int i = static_cast<int>(it);
    if (g->at_pos[it] && (iter_stride(p_, g->a, i) || iter_stride(p_, g->b, i) || iter_stride(p_, s.only().out, i)))
      return "";
  }
  const bool overwrite = s.zero_first && !g->outer_k;
  std::string pre;
  if (s.zero_first && g->outer_k) {
    const std::string v = fresh_name("i", taken);
    pre = fill_first(s, v, "= " + num(0));
  }
  GemmSite site{&names_.buffer, x_.vars, g->alpha ? expr(*g->alpha) : num(1), o_.f64, o_.blas, -1, "", ""};
  for (int w : {g->a.buf, g->b.buf}) {
    if (int8_unit_ && buf(w).int8_row > 0)
      site.int8 = w, site.int8_rows = "m->int8." + int8_field(w), site.int8_scales = "m->int8_scale." + int8_field(w);
    if (const auto f = int8_formals_.find(w); f != int8_formals_.end())
      site.int8 = w, site.int8_rows = f->second.first, site.int8_scales = f->second.second;
  }
  std::string text = pre + emit_gemm(p_, s, *g, site, overwrite);
  (text.find("(m->gemm,") != std::string::npos ? gemm_kernel_ : gemm_blas_) = true;
  return text;
}

std::string CEmitter::nest(const ir::Stmt& s, const std::set<std::string>& taken) {
  x_.begin_nest(s, taken);
  const ir::Assign& a0 = s.assigns[0];  // the nest's assignment (the first, when fused)
  std::vector<int> loops;                // the loops printed, outermost first
  for (int k = 0; k < static_cast<int>(s.iters.size()); ++k)
    if (!x_.dropped[static_cast<size_t>(k)]) loops.push_back(k);
  const int depth = static_cast<int>(loops.size());
  // The innermost loops that do not index the written element accumulate into a local
  // `acc` (kept in a register; vectorised by the compiler when reassociation is allowed,
  // as the generated CMakeLists.txt does).
  int red = 0;
  if (!s.sequential && a0.accum != ir::Accum::Set && s.single())
    while (red < depth && loops[static_cast<size_t>(depth - 1 - red)] > s.parallel &&
           !uses_iter(a0.out, loops[static_cast<size_t>(depth - 1 - red)]))
      ++red;
  const bool reduce_inner = red > 0;
  // zero_first: when every reduction loop is an inner `acc` loop, the cell is assigned
  // (`=` instead of `+=`); otherwise the cells are filled with the identity first.
  int reductions = 0;
  for (int k : loops) reductions += !uses_iter(a0.out, k);
  const bool assign_acc = s.zero_first && reduce_inner && red == reductions;
  std::string out;
  if (s.zero_first && !assign_acc) {
    const std::string v = fresh_name("i", taken);
    out += fill_first(s, v, "= " + std::string(a0.accum == ir::Accum::Add ? num(0) : a0.accum == ir::Accum::Max ? "-INFINITY" : "INFINITY"));
  }
  auto ind = [&](int k) { return std::string(static_cast<size_t>(4 * (k + 1)), ' '); };
  auto loop = [&](int j) {
    const int k = loops[static_cast<size_t>(j)];
    const ir::Iter& it = s.iters[static_cast<size_t>(k)];
    return fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", x_.vars[static_cast<size_t>(k)],
                       it.batch ? std::string("n") : std::to_string(it.size));
  };
  const std::string target = access(a0.out);
  const int outer_loops = depth - red;
  // The bounds check of the cells written (a padded convolution's input gradient) goes
  // around the innermost loop when that loop's index is not in it: one test per row of
  // channels, and a branch-free loop the compiler vectorises.
  bool hoist = !reduce_inner && outer_loops > 0 && loops.back() != s.parallel && !in_range(a0.out).empty();
  for (const ir::Assign& a : s.assigns)
    hoist = hoist && in_range(a.out) == in_range(a0.out) && !x_.in_range_uses(a.out, loops.back());
  const std::string guard = hoist ? std::string() : in_range(a0.out);
  const int shift = hoist ? 1 : 0;  // the innermost loop and its body one level in
  // A running extremum is a select (`t = v > t ? v : t`, the same value as `if (v > t) t = v`):
  // no conditional store, so a loop of them vectorises.
  auto store_to = [&](const std::string& target, const std::string& guard, ir::Accum accum,
                      const std::string& value, int level) {
    std::string st;
    switch (accum) {
      case ir::Accum::Set: st = fmt::format("{} = {};", target, value); break;
      case ir::Accum::Add: st = fmt::format("{} += {};", target, value); break;
      case ir::Accum::Max: case ir::Accum::Min: {
        const char* cmp = accum == ir::Accum::Max ? ">" : "<";
        st = value == "acc" ? fmt::format("{0} = acc {1} {0} ? acc : {0};", target, cmp)
                            : fmt::format("{{ const real v = {1}; {0} = v {2} {0} ? v : {0}; }}", target, value, cmp);
        break;
      }
    }
    if (!guard.empty()) st = fmt::format("if ({}) {}", guard, accum == ir::Accum::Set || accum == ir::Accum::Add ? st : "{ " + st + " }");
    return ind(level) + st + "\n";
  };
  auto store = [&](const std::string& value, int level) {
    if (assign_acc) return store_to(target, guard, ir::Accum::Set, value, level);
    std::string st = store_to(target, guard, a0.accum, value, level);
    for (size_t i = 1; i < s.assigns.size(); ++i) {
      const ir::Assign& a = s.assigns[i];
      st += store_to(access(a.out), hoist ? std::string() : in_range(a.out), a.accum, expr(*a.body), level);
    }
    return st;
  };
  const bool braced = !s.single();  // several assignments in the innermost loop
  const bool simd = !reduce_inner && independent_inner(s, loops);
  const std::string row_values = simd && !hoist ? row_locals(s, loops.back(), taken, ind(outer_loops - 1)) : "";
  for (int j = 0; j < outer_loops; ++j) {
    const bool inner = j + 1 == outer_loops;
    if (loops[static_cast<size_t>(j)] == s.parallel) out += ind(j) + parallel_for(s, loops[static_cast<size_t>(j)]);
    if (inner) out += row_values;
    if (hoist && inner) out += ind(j) + fmt::format("if ({}) {{\n", in_range(a0.out));
    if (simd && inner) out += ind(j + shift) + "CANNL_SIMD\n";
    const bool brace = j + 1 < outer_loops || reduce_inner || braced;
    out += ind(j + (inner ? shift : 0)) + loop(j) + (brace ? " {\n" : "\n");
    if (rows_ && brace && s.iters[static_cast<size_t>(loops[static_cast<size_t>(j)])].batch)
      out += ind(j + 1) + "CANNL_ROW_FENCE;\n";  // (a decode over rows: no vectors across rows)
  }
  // A zero_first sum times a constant,  out = 0 += x * c : the constant multiplies the
  // finished sums once (sum(x) * c), not every term.
  const ir::Expr* summed = a0.body.get();
  std::string scale;
  if (s.scaled_sum) {
    scale = expr(*s.scaled_sum->scale);
    summed = s.scaled_sum->summand.get();
  }
  std::string body = expr(*summed);
  if (reduce_inner) {
    const int k = outer_loops;
    const bool add = a0.accum == ir::Accum::Add;
    std::string init = add ? num(0) : a0.accum == ir::Accum::Max ? "-INFINITY" : "INFINITY";
    out += ind(k) + fmt::format("real acc = {};\n", init);
    for (int j = k; j < depth; ++j) out += ind(k) + loop(j) + (j + 1 == depth && !add ? " {\n" : "\n");
    if (add) {
      out += ind(k + 1) + "acc += " + body + ";\n";
    } else {
      out += ind(k + 1) + "const real v = " + body + ";\n";
      out += ind(k + 1) + fmt::format("acc = v {} acc ? v : acc;\n", a0.accum == ir::Accum::Max ? ">" : "<");
      out += ind(k) + "}\n";
    }
    out += store(scale.empty() || !assign_acc ? "acc" : "acc * " + scale, k);
  } else {
    out += store(body, depth + shift);
  }
  if (hoist) {
    if (braced) out += ind(outer_loops) + "}\n";
    out += ind(outer_loops - 1) + "}\n";  // the bounds check
  }
  for (int k = outer_loops - (reduce_inner || braced || hoist ? 0 : 1) - (hoist ? 1 : 0); k-- > 0;) out += ind(k) + "}\n";
  if (!scale.empty() && !assign_acc) {
    const std::string v = fresh_name("i", taken);
    out += fill_first(s, v, "*= " + scale);
  }
  return out;
}

std::string CEmitter::row_locals(const ir::Stmt& s, int inner, const std::set<std::string>& taken,
                                 const std::string& indent) {
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  std::set<std::string> used = taken;
  used.insert(x_.vars.begin(), x_.vars.end());
  std::string out;
  for (const ir::Expr* l : loads) {
    const ir::Buffer& b = buf(l->access.buf);
    bool written = false;
    for (const ir::Assign& a : s.assigns) written = written || a.out.buf == l->access.buf;
    if (written || b.ids > 0 || uses_iter(l->access, inner) || !x_.in_range(l->access).empty()) continue;
    const std::string text = x_.access(l->access);
    if (x_.locals.count(text)) continue;
    const std::string v = fresh_name(b.name + "_row", used);
    used.insert(v);
    x_.locals[text] = v;
    out += indent + fmt::format("const real {} = {};\n", v, text);
  }
  return out;
}

bool CEmitter::independent_inner(const ir::Stmt& s, const std::vector<int>& loops) {
  if (s.parallel < 0 || s.sequential || loops.empty() || loops.back() == s.parallel ||
      std::find(loops.begin(), loops.end(), s.parallel) == loops.end())  // (decode: run once)
    return false;
  const int inner = loops.back();
  // Two accesses of one buffer that a constant index keeps apart at every point.
  auto apart = [](const ir::Access& a, const ir::Access& b) {
    for (size_t d = 0; d < a.index.size() && d < b.index.size(); ++d)
      if (a.index[d].terms.empty() && b.index[d].terms.empty() && a.index[d].offset != b.index[d].offset) return true;
    return false;
  };
  for (const ir::Assign& a : s.assigns) {
    if (!uses_iter(a.out, inner)) return false;  // (an extremum is a select: store_to)
    for (const ir::Assign& b : s.assigns)
      if (b.out.buf == a.out.buf && !(b.out == a.out) && !apart(a.out, b.out)) return false;
  }
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Expr* l : loads) {
    bool written = false, at_a_written_cell = false;
    for (const ir::Assign& a : s.assigns)
      if (l->access.buf == a.out.buf) {
        written = true;
        at_a_written_cell = at_a_written_cell || l->access == a.out;
      }
    if (written && !at_a_written_cell) return false;
  }
  return true;
}

std::string CEmitter::parallel_for(const std::string& count) {
  return "CANNL_PRAGMA(\"omp parallel for if(" + count + " >= CANNL_PARALLEL_MIN)\")\n";
}

std::string CEmitter::parallel_for(const ir::Stmt& s, int from) {
  long per = 1;
  bool batch = false;
  for (size_t k = static_cast<size_t>(from); k < s.iters.size(); ++k) {
    batch = batch || s.iters[k].batch;
    if (!s.iters[k].batch) per *= s.iters[k].size;
  }
  return parallel_for(batch ? (per == 1 ? std::string("n") : fmt::format("n * {}", per)) : std::to_string(per));
}

std::string CEmitter::fill_first(const ir::Stmt& s, const std::string& v, const std::string& op) {
  if (!s.single()) {  // sibling sums (passes/fuse.cpp): each out in turn
    std::string all;
    std::set<int> seen;
    for (const ir::Assign& a : s.assigns) {
      if (!seen.insert(a.out.buf).second) continue;
      ir::Stmt one;
      one.iters = s.iters;
      one.parallel = s.parallel;
      one.assigns.push_back(a);
      all += fill_first(one, v, op);
    }
    return all;
  }
  const int out = s.only().out.buf;
  const auto& b = buf(out);
  for (const ir::Iter& it : s.iters)
    if (it.at_pos) {  // decode over rows: each row's cells, at its slot and position
      const long slot = buffer_size(b, true) / b.dims[0].size, per = slot / b.dims[1].size;
      const std::string at = b.ring ? fmt::format("(pos[cannl_r] % {})", b.ring) : std::string("pos[cannl_r]");
      return fmt::format("    for (int64_t cannl_r = 0; cannl_r < n; ++cannl_r)\n"
                         "        for (int64_t {0} = 0; {0} < {1}; ++{0}) {2}[seq[cannl_r] * {5} + {4} * {1} + {0}] {3};\n",
                         v, per, name(out), op, at, slot);
    }
  const bool batched = !b.dims.empty() && b.dims[0].batch;
  const long per = buffer_size(b, true);
  const std::string count = batched ? (per == 1 ? "n" : fmt::format("n * {}", per)) : std::to_string(per);
  return (s.parallel >= 0 ? "    " + parallel_for(count) : std::string()) +
         fmt::format("    for (int64_t {0} = 0; {0} < {1}; ++{0}) {2}[{0}] {3};\n", v, count, name(out), op);
}

std::set<int> CEmitter::routine_buffers(const ir::Routine& r, std::set<std::string>& scalars) const {
  std::set<int> bufs;
  for (const auto& s : r.stmts) {
    stmt_uses(s, bufs, scalars);
    if (s.call && ir::is_block_call(s.call->kind)) block_call_uses(p_, *s.call, bufs, scalars);
  }
  for (const std::vector<int>* l : {&r.io.outputs, &r.io.values, &r.io.kept}) bufs.insert(l->begin(), l->end());
  return bufs;
}

bool CEmitter::shares_bytes(const ir::Routine& r, const ir::Arena& a, const std::set<int>& bufs, int b) const {
  const long lo = a.address(r, b), hi = lo + buf(b).elements() * elem();
  const int hb = r.host(b);  // (a block body's local in a formal's bytes: plan_blocks.cpp)
  for (int c : bufs) {
    if (c == b) continue;
    if ((hb >= 0 && (hb == c || hb == r.host(c))) || r.host(c) == b) return true;
    const long clo = a.address(r, c), chi = clo + buf(c).elements() * elem();
    if (lo >= 0 && clo >= 0 && clo < hi && lo < chi) return true;
  }
  return false;
}

std::string CEmitter::kernel_call(const ir::Routine& r, const ir::Stmt& s, Unit& u, bool& n_used, const std::map<int,
                                  std::string>& arg_of) {
  std::vector<int> written, read;
  for (int w : ir::written_buffers(s))
    if (std::find(written.begin(), written.end(), w) == written.end()) written.push_back(w);
  std::vector<const ir::Expr*> loads;
  ir::collect_loads(s, loads);
  for (const ir::Expr* l : loads)
    if (std::find(written.begin(), written.end(), l->access.buf) == written.end() &&
        std::find(read.begin(), read.end(), l->access.buf) == read.end())
      read.push_back(l->access.buf);
  std::set<int> bufs(written.begin(), written.end());
  bufs.insert(read.begin(), read.end());
  std::set<std::string> scalars;
  std::set<int> unused;
  stmt_uses(s, unused, scalars);
  bool uses_n = scalars.erase("n") > 0;
  for (const ir::Iter& it : s.iters) uses_n = uses_n || it.batch;
  bool rng = false;
  std::vector<const ir::Expr*> stack;
  for (const ir::Assign& a : s.assigns) stack.push_back(a.body.get());
  while (!stack.empty()) {
    const ir::Expr* e = stack.back();
    stack.pop_back();
    rng = rng || e->op == ir::Op::Uniform || e->op == ir::Op::Normal;
    for (const auto& a : e->args) stack.push_back(a.get());
  }
  std::vector<std::string> params, args;
  std::set<std::string> taken;
  if (uses_n) params.push_back("int64_t n"), args.push_back("n"), taken.insert("n");
  bool at_pos = false;
  for (const ir::Iter& it : s.iters) at_pos = at_pos || it.at_pos;
  if (at_pos) params.push_back("const int64_t *pos"), args.push_back("pos"), taken.insert("pos");
  if (rows_ && touches_cache(p_, s)) params.push_back("const int64_t *seq"), args.push_back("seq"), taken.insert("seq");
  if (rng) params.push_back("cannl_rng *rng"), args.push_back("&rng"), taken.insert("rng");
  for (int b : written)
    params.push_back(fmt::format("{} *{}{}", ctype(b), shares_bytes(r, *u.arena, bufs, b) ? "" : "restrict ", name(b)));
  for (int b : read)
    params.push_back(fmt::format("const {} *{}{}", ctype(b), shares_bytes(r, *u.arena, bufs, b) ? "" : "restrict ", name(b)));
  auto arg = [&](int b) {
    auto it = arg_of.find(b);
    return it == arg_of.end() ? name(b) : it->second;
  };
  for (int b : written) args.push_back(arg(b)), taken.insert(name(b));
  for (int b : read) args.push_back(arg(b)), taken.insert(name(b));
  for (const std::string& sc : scalars) {
    params.push_back((sc == "rng_key" ? "const uint64_t " : "const real ") + sc);
    args.push_back(sc);
    taken.insert(sc);
  }
  // train_grads' dropout: the slice's first example in the global batch (scalar_prologue)
  x_.rng_first = r.kind == ir::RoutineKind::TrainGrads && scalars.count("rng_key") > 0;
  if (x_.rng_first) params.push_back("const int64_t rng_first"), args.push_back("rng_first"), taken.insert("rng_first");
  std::string plist, alist;
  for (const auto& x : params) plist += (plist.empty() ? "" : ", ") + x;
  for (const auto& x : args) alist += (alist.empty() ? "" : ", ") + x;
  const std::string text = fmt::format("({}) {{\n{}}}\n", plist.empty() ? "void" : plist, nest(s, taken));
  x_.rng_first = false;
  auto it = kernel_by_text_.find(text);
  if (it == kernel_by_text_.end()) it = kernel_by_text_.emplace(text, names_.kernel(p_, s)).first;
  const std::string& kname = it->second;
  // A kernel of a step is compiled once per instruction set, the loader picking one for the
  // CPU (CANNL_MULTIVERSION, cannl_rt.h); init_params's and init_constants' run once and are not; the routines
  // only call kernels and the runtime.
  if (u.defined.insert(kname).second)
    u.kernels += fmt::format("/* {} */\n{}static void {}{}\n", comment_safe(what(s)),
                             r.kind == ir::RoutineKind::Init || r.kind == ir::RoutineKind::BlockInit ||
                                     r.kind == ir::RoutineKind::Constants
                                 ? "" : "CANNL_MULTIVERSION\n", kname, text);
  n_used = n_used || uses_n;
  return fmt::format("    {}({});\n", kname, alist);
}

std::string CEmitter::call_text(const ir::Call& c, bool& n_used) {
  n_used = n_used || c.batch;
  if (c.kind == ir::Call::Kind::EmbeddingForward || c.kind == ir::Call::Kind::EmbeddingBackward)
    return embedding_text(c);
  attention_ = true;
  if (c.at_pos) return attention_rows(c);
  const bool grouped = c.group > 1, backward = c.kind == ir::Call::Kind::AttentionBackward;
  const long kvh = c.heads / c.group;
  const long pairs = c.seqs * (grouped && backward ? kvh : c.heads);
  const std::string count = c.batch ? (pairs == 1 ? std::string("n") : fmt::format("n * {}", pairs)) : std::to_string(pairs);
  const std::string t = o_.f64 ? "f64" : "f32";
  // row 0 of pair (s, h) in a buffer [B.., T, H.., w] and its row stride; a view (q, k, v
  // in place in a fused buffer, ir::Call): at `off`, rows of `row` elements; the key/value
  // operands at head cannl_g of kvh when grouped
  auto at = [&](int b, long rows, long width, long off = 0, long row = 0, bool kv = false) {
    const long heads = kv ? kvh : c.heads;
    const char* h = kv && grouped ? "cannl_g" : "cannl_h";
    if (off == 0 && row == 0)
      return fmt::format("{} + (cannl_s * {} + {}) * {}, {}", name(b), rows * heads, h, width, heads * width);
    return fmt::format("{} + {} + cannl_s * {} + {} * {}, {}", name(b), off, rows * row, h, width, row);
  };
  std::string out = "    {\n";
  out += fmt::format("        const cannl_attn_dims cannl_d = {{{}, {}, {}, {}, 0, {}, {}, {}}};\n", c.tq, c.tk, c.e,
                     c.f, c.causal ? 1 : 0, num_double(c.scale), c.window);
  // threads when the pairs' multiply-adds (half the scores when causal) are worth waking them
  const long per_pair = std::max(1L, c.tq * std::min(c.tk, c.window > 0 ? c.window : c.tk) * (c.e + c.f) /
                                         (c.causal && c.window == 0 ? 2 : 1) * (grouped && backward ? c.group : 1));
  out += "        " + parallel_for(per_pair == 1 ? count : fmt::format("{} * {}", count, per_pair));
  out += fmt::format("        for (int64_t cannl_p = 0; cannl_p < {}; ++cannl_p) {{\n", count);
  std::string ind = "            ", lse = fmt::format("{} + cannl_p * {}", name(c.lse), c.tq),
              delta = backward ? fmt::format("{} + cannl_p * {}", name(c.delta), c.tq) : "";
  if (!grouped) {
    out += fmt::format("{}const int64_t cannl_s = cannl_p / {}, cannl_h = cannl_p % {};\n", ind, c.heads, c.heads);
  } else if (!backward) {
    out += fmt::format("{}const int64_t cannl_s = cannl_p / {}, cannl_h = cannl_p % {}, cannl_g = cannl_h / {};\n",
                       ind, c.heads, c.heads, c.group);
  } else {
    out += fmt::format("{}const int64_t cannl_s = cannl_p / {}, cannl_g = cannl_p % {};\n", ind, kvh, kvh);
    out += fmt::format("{}for (int64_t cannl_h = cannl_g * {}; cannl_h < (cannl_g + 1) * {}; ++cannl_h) {{\n", ind,
                       c.group, c.group);
    ind += "    ";
    lse = fmt::format("{} + (cannl_s * {} + cannl_h) * {}", name(c.lse), c.heads, c.tq);
    delta = fmt::format("{} + (cannl_s * {} + cannl_h) * {}", name(c.delta), c.heads, c.tq);
  }
  if (!backward)
    out += fmt::format("{}cannl_attention_forward_{}(&cannl_d, {}, {}, {}, {}, {});\n", ind, t,
                       at(c.q, c.tq, c.e, c.q_off, c.q_row), at(c.k, c.tk, c.e, c.k_off, c.k_row, true),
                       at(c.v, c.tk, c.f, c.v_off, c.v_row, true), at(c.o, c.tq, c.f), lse);
  else
    out += fmt::format("{}cannl_attention_backward_{}(&cannl_d, {}, {}, {}, {}, {},\n"
                       "{}    {}, {}, {}, {}, {});\n",
                       ind, t, at(c.q, c.tq, c.e, c.q_off, c.q_row), at(c.k, c.tk, c.e, c.k_off, c.k_row, true),
                       at(c.v, c.tk, c.f, c.v_off, c.v_row, true), at(c.o, c.tq, c.f), at(c.dout, c.tq, c.f), ind,
                       lse, delta, at(c.dq, c.tq, c.e, c.q_off, c.q_row),
                       at(c.dk, c.tk, c.e, c.k_off, c.k_row, true), at(c.dv, c.tk, c.f, c.v_off, c.v_row, true));
  if (grouped && backward) out += "            }\n";
  return out + "        }\n    }\n";
}

// Over rows: for each row r < n, its query at position pos[r] of sequence slot seq[r] against
// that slot's cached keys and values (a cache: [slots, T or ring, ...]; any other operand per
// row at position 0: [batch, T, ...], row r at r's example). One call per (row, part of its
// key/value heads), every head of the part at once (cannl_attention_decode_*), the (row, part)
// pairs in one parallel loop; the parts (cannl_attention_decode_parts) keep every thread busy
// when the rows are fewer than the threads.
std::string CEmitter::attention_rows(const ir::Call& c) {
  const std::string t = o_.f64 ? "f64" : "f32";
  const long kvh = c.heads / c.group;
  // head 0 of row r's operand (at its position's row when `at`, a cache from its first row), and
  // with `stride` the stride of its positions
  auto row = [&](int b, bool at, long width, long off, long row, bool kv, bool stride = true) {
    const long heads = kv ? kvh : c.heads;
    const auto& bb = buf(b);
    const bool cache = bb.role == ir::Role::Cache;
    const std::string base = cache ? fmt::format("{} + seq[cannl_r] * {}", name(b), bb.elements() / bb.dims[0].size)
                                   : fmt::format("{} + cannl_r * {}", name(b), buffer_size(bb, true));
    const std::string r = !at || !cache ? "" : bb.ring ? fmt::format("(pos[cannl_r] % {})", bb.ring) : "pos[cannl_r]";
    const long st = off == 0 && row == 0 ? heads * width : row;
    return base + (off ? fmt::format(" + {}", off) : "") + (r.empty() ? "" : fmt::format(" + {} * {}", r, st)) +
           (stride ? fmt::format(", {}", st) : "");
  };
  // the keys the rows see (their sum: whether the loop is worth waking threads for)
  const long most = c.window > 0 ? std::min(c.window, c.tk) : c.tk;
  const std::string seen =
      c.causal ? fmt::format("pos[cannl_r] + 1 < {0} ? pos[cannl_r] + 1 : {0}", most) : std::to_string(most);
  std::string out = "    {\n        int64_t cannl_keys = 0;\n";
  out += fmt::format("        for (int64_t cannl_r = 0; cannl_r < n; ++cannl_r) cannl_keys += {};\n", seen);
  out += fmt::format("        const int cannl_par = cannl_keys * {} >= CANNL_PARALLEL_MIN;\n", c.heads * (c.e + c.f));
  out += fmt::format("        const int64_t cannl_parts = cannl_attention_decode_parts(n, {}, cannl_par);\n", kvh);
  out += "        CANNL_PRAGMA(\"omp parallel for if(cannl_par)\")\n";
  out += "        for (int64_t cannl_w = 0; cannl_w < n * cannl_parts; ++cannl_w) {\n";
  out += "            const int64_t cannl_r = cannl_w / cannl_parts, cannl_c = cannl_w % cannl_parts;\n";
  // part c's query heads: those of its key/value heads [c kvh / parts, (c + 1) kvh / parts)
  const std::string times = c.group > 1 ? fmt::format(" * {}", c.group) : "";
  out += fmt::format("            const int64_t cannl_h0 = cannl_c * {0} / cannl_parts{1}, "
                     "cannl_h1 = (cannl_c + 1) * {0} / cannl_parts{1};\n",
                     kvh, times);
  out += fmt::format("            const cannl_attn_dims cannl_d = {{1, {}, {}, {}, pos[cannl_r], {}, {}, {}}};\n", c.tk,
                     c.e, c.f, c.causal ? 1 : 0, num_double(c.scale), c.window);
  out += fmt::format("            cannl_attention_decode_{}(&cannl_d, cannl_h0, cannl_h1, {},\n", t, c.group);
  out += fmt::format("                {},\n                {},\n                {},\n",
                     row(c.q, true, c.e, c.q_off, c.q_row, false, false), row(c.k, false, c.e, c.k_off, c.k_row, true),
                     row(c.v, false, c.f, c.v_off, c.v_row, true));
  out += fmt::format("                {}, {} + cannl_r * {}, {});\n", row(c.o, true, c.f, 0, 0, false, false),
                     name(c.lse), buffer_size(buf(c.lse), true), c.tq);
  return out + "        }\n    }\n";
}

std::string CEmitter::embedding_text(const ir::Call& c) {
  const std::string count = c.batch ? (c.seqs == 1 ? std::string("n") : fmt::format("n * {}", c.seqs)) : std::to_string(c.seqs);
  std::string out = "    {\n";
  // the table's element of row cannl_id, column cannl_j (int8 rows times their scale: passes/quantize.h)
  const bool int8 = int8_unit_ && buf(c.table).int8_row > 0;
  const std::string elem =
      int8 ? fmt::format("(real)m->int8.{0}[(int64_t)cannl_id * {1} + cannl_j] * m->int8_scale.{0}[cannl_id]",
                         int8_field(c.table), c.width)
           : fmt::format("{}[(int64_t)cannl_id * {} + cannl_j]", name(c.table), c.width);
  if (c.at_pos) {  // decode over rows: row r's id at its position 0 (ids [batch, T], o [batch, T, width])
    out += "        for (int64_t cannl_r = 0; cannl_r < n; ++cannl_r) {\n";
    out += fmt::format("            const int32_t cannl_id = {}[cannl_r * {}];\n", name(c.ids),
                       buffer_size(buf(c.ids), true));
    out += fmt::format("            const int cannl_in = cannl_id >= 0 && cannl_id < {};\n", c.rows);
    out += fmt::format("            for (int64_t cannl_j = 0; cannl_j < {}; ++cannl_j)\n", c.width);
    out += fmt::format("                {}[cannl_r * {} + cannl_j] = cannl_in ? {} : 0;\n", name(c.o),
                       buffer_size(buf(c.o), true), elem);
    return out + "        }\n    }\n";
  }
  out += fmt::format("        const int64_t cannl_n = {}; /* positions */\n", count);
  if (c.kind == ir::Call::Kind::EmbeddingForward) {
    out += "        " + parallel_for(fmt::format("cannl_n * {}", c.width));
    out += "        for (int64_t cannl_p = 0; cannl_p < cannl_n; ++cannl_p) {\n";
    out += fmt::format("            const int32_t cannl_id = {}[cannl_p];\n", name(c.ids));
    out += fmt::format("            const int cannl_in = cannl_id >= 0 && cannl_id < {};\n", c.rows);
    out += fmt::format("            for (int64_t cannl_j = 0; cannl_j < {}; ++cannl_j)\n", c.width);
    out += fmt::format("                {}[cannl_p * {} + cannl_j] = cannl_in ? {} : 0;\n", name(c.o), c.width, elem);
    out += "        }\n";
  } else {
    out += "        " + parallel_for(fmt::format("cannl_n * {}", c.width));
    out += fmt::format("        for (int64_t cannl_b = 0; cannl_b < {}; cannl_b += 64)\n", c.width);
    out += "            for (int64_t cannl_p = 0; cannl_p < cannl_n; ++cannl_p) {\n";
    out += fmt::format("                const int32_t cannl_id = {}[cannl_p];\n", name(c.ids));
    out += fmt::format("                if (cannl_id < 0 || cannl_id >= {}) continue;\n", c.rows);
    out += fmt::format("                for (int64_t cannl_j = cannl_b; cannl_j < cannl_b + 64 && cannl_j < {}; ++cannl_j)\n",
                       c.width);
    out += fmt::format("                    {}[(int64_t)cannl_id * {} + cannl_j] += {}[cannl_p * {} + cannl_j];\n",
                       name(c.dtable), c.width, name(c.dout), c.width);
    out += "            }\n";
  }
  return out + "    }\n";
}

std::string CEmitter::grads_final(const ir::Stmt& s) const {
  std::string out;
  const ir::Arena& t = p_.layout.training;
  for (int g : s.grads_final)
    out += fmt::format("    if (m->grad_hook) m->grad_hook(m->grad_hook_ctx, {}, {}); /* {} final */\n",
                       (t.field[static_cast<size_t>(g)] - t.grads) / elem(), buf(g).elements(), name(g));
  return out;
}

std::string CEmitter::update_shard(const ir::Routine& r, const ir::Stmt& s, const std::string& text) const {
  if (s.update_of == -1) return text;
  std::string inner;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0 || text[i - 1] == '\n') inner += "    ";
    inner += text[i];
  }
  if (s.update_of >= 0)
    return fmt::format("    if (m->update_first <= {0} && {0} < m->update_last) {{\n{1}    }}\n", s.update_of, inner);
  // The norm's nests (one run of them): under one condition, then the caller's sum, when given.
  const auto it = std::find_if(r.stmts.begin(), r.stmts.end(), [&](const ir::Stmt& t) { return &t == &s; });
  const bool first = it == r.stmts.begin() || (it - 1)->update_of != ir::kUpdateNorm;
  const bool last = it + 1 == r.stmts.end() || (it + 1)->update_of != ir::kUpdateNorm;
  std::string out = (first ? "    if (m->update_norm_sq < 0) {\n" : "") + inner;
  if (last)
    out += fmt::format("    }} else {{\n        {}[0] = (real)m->update_norm_sq;\n    }}\n", name(s.assigns.back().out.buf));
  return out;
}

std::string CEmitter::stacked_range(const ir::Routine& r, const ir::Stmt& s, Unit& u, const std::string& first,
                                    const std::string& last) {
  const int k = s.update_of, count = s.update_count;
  ir::Stmt t = s;
  const ir::Affine& at = t.assigns[0].out.index.at(0);
  if (!at.is_single_iter()) CANNL_BUG("a stacked update whose instance index is not a loop");
  t.iters[static_cast<size_t>(at.terms[0].iter)].batch = true;  // run to n, the instances in range
  std::map<int, std::string> arg_of;
  std::set<int> bufs;
  std::set<std::string> unused;
  stmt_uses(s, bufs, unused);
  for (int b : bufs) {
    if (buf(b).stack <= 0) continue;
    const long slice = buf(b).elements() / buf(b).stack;
    const std::string from = in_opt_block(b) ? fmt::format("(m->opt_first > {0} ? m->opt_first : {0})", k)
                                             : std::to_string(k);
    arg_of[b] = fmt::format("{} + (int64_t)(cannl_lo - {}) * {}", name(b), from, slice);
  }
  bool n_used = false;
  std::string call = kernel_call(r, t, u, n_used, arg_of);
  std::string inner;
  for (size_t i = 0; i < call.size(); ++i) {
    if (i == 0 || call[i - 1] == '\n') inner += "        ";
    inner += call[i];
  }
  return fmt::format("    {{\n"
                     "        const int32_t cannl_lo = {0} > {2} ? {0} : {2}, cannl_hi = {1} < {3} ? {1} : {3};\n"
                     "        const int64_t n = cannl_hi - cannl_lo; /* the instances in range */\n"
                     "        if (n > 0) {{\n{4}        }}\n"
                     "    }}\n",
                     first, last, k, k + count, inner);
}

std::string CEmitter::held_state(const ir::Stmt& s, const std::string& text) {
  std::string inner;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0 || text[i - 1] == '\n') inner += "    ";
    inner += text[i];
  }
  return fmt::format("    if (m->opt_first <= {0} && {0} < m->opt_last) {{\n{1}    }}\n", s.update_of, inner);
}

std::string CEmitter::routine(const ir::Routine& r, Unit& u) {
  rows_ = x_.rows = r.io.slots > 0;
  std::string text = routine_text(r, u);
  rows_ = x_.rows = false;
  return text;
}

std::string CEmitter::routine_text(const ir::Routine& r, Unit& u) {
  std::set<std::string> scalars;
  const std::set<int> bufs = routine_buffers(r, scalars);
  const ir::Arena& a = *u.arena;
  const bool is_init = r.kind == ir::RoutineKind::Init;
  const bool no_batch = is_init || r.kind == ir::RoutineKind::TrainUpdate ||  // no inputs, no n
                        r.kind == ir::RoutineKind::Constants;
  std::string sig, pro, epi;
  if (r.kind == ir::RoutineKind::TrainUpdate || r.kind == ir::RoutineKind::Constants) {
    sig = fmt::format("static void {}({} *m)", r.name(), u.state);
  } else if (is_init) {
    sig = fmt::format("static void init_params({} *m, uint64_t seed)", u.state);
    bool rng = false;
    for (const auto& s : r.stmts) rng |= s.sequential || (s.call && s.call->kind == ir::Call::Kind::BlockInit);
    pro += rng ? "    cannl_rng rng;\n    cannl_rng_seed(&rng, seed);\n" : "    (void)seed;\n";
  } else {
    std::string extra = r.kind == ir::RoutineKind::Forward || r.io.position ? ", real *const outputs[]"
                        : r.kind == ir::RoutineKind::Eval ? ", double *loss, double metrics[]" : "";
    const bool loss = r.kind == ir::RoutineKind::TrainStep || r.kind == ir::RoutineKind::TrainGrads;
    sig = fmt::format("static {} {}({} *m, const real *const inputs[], int64_t {}{})", loss ? "double" : "void",
                      r.name(), u.state, rows_ ? "n, const int64_t *pos, const int64_t *seq" : "n", extra);
  }
  bool inputs_used = false, n_used = scalars.count("n") > 0;
  // The buffers: the caller's inputs, the state's own fields, the work region's.
  std::vector<std::pair<long, int>> work;
  std::set<int> touched;  // (a view only kept, a param gradient whose block call writes its stack: not named)
  {
    std::set<std::string> unused;
    for (const auto& s : r.stmts) stmt_uses(s, touched, unused);
  }
  for (int b : bufs) {
    // read as m->int8.<name>, or as m->int8.<name>[l] by the block calls (passes/quantize.h)
    if (int8_unit_ && buf(b).int8_row > 0) continue;
    if (buf(b).view_of >= 0 && !touched.count(b) && bufs.count(buf(b).view_of)) continue;
    if (buf(b).role == ir::Role::Input) {
      inputs_used = true;
      const auto k = std::find(p_.inputs.begin(), p_.inputs.end(), b) - p_.inputs.begin();
      if (buf(b).ids > 0)  // ids: the caller's pointer is to int32_t (cannl_tensor_info.ids)
        pro += fmt::format("    const int32_t *const {} = (const int32_t *)(const void *)inputs[{}]; /* {} */\n",
                           name(b), k, shape_comment(b));
      else
        pro += fmt::format("    const real *const {} = inputs[{}]; /* {} */\n", name(b), k, shape_comment(b));
    } else if (a.own[static_cast<size_t>(b)] || (&a == &p_.layout.training && in_opt_block(b))) {
      pro += fmt::format("    {} *const {} = m->{}; /* {} */\n", ctype(b), name(b), name(b), shape_comment(b));
    } else {
      if (a.address(r, b) < 0) CANNL_BUG("a buffer outside the state: " + buf(b).name);
      work.push_back({a.address(r, b) - a.work, b});
    }
  }
  if (!work.empty()) {
    std::sort(work.begin(), work.end());
    pro += work_prologue(r, a, work);
  }
  pro += scalar_prologue(r, scalars, x_);
  if (rows_) {  // each row's output at its position 0 (passes/decode.cpp: [batch, T, ...]), rows in order
    for (size_t k = 0; k < r.io.outputs.size(); ++k) {
      const auto& b = buf(r.io.outputs[k]);
      const long per = buffer_size(b, true) / b.dims[1].size;
      epi += fmt::format("    for (int64_t cannl_r = 0; outputs[{0}] && cannl_r < n; ++cannl_r)\n"
                         "        memcpy(outputs[{0}] + cannl_r * {2}, {1} + cannl_r * {3}, (size_t){2} * sizeof(real));\n",
                         k, name(r.io.outputs[k]), per, buffer_size(b, true));
    }
  } else if (r.io.position) {  // decode: each output at position pos (passes/decode.cpp: [batch, T, ...])
    for (size_t k = 0; k < r.io.outputs.size(); ++k) {
      const auto& b = buf(r.io.outputs[k]);
      const long per = buffer_size(b, true) / b.dims[1].size;
      epi += fmt::format("    if (outputs[{0}]) memcpy(outputs[{0}], {1} + pos * {2}, (size_t){2} * sizeof(real));\n", k,
                         name(r.io.outputs[k]), per);
    }
  }
  if (r.kind == ir::RoutineKind::Forward) {
    for (size_t k = 0; k < r.io.outputs.size(); ++k) {
      const auto& b = buf(r.io.outputs[k]);
      bool batched = !b.dims.empty() && b.dims[0].batch;
      long per = buffer_size(b, true);
      n_used |= batched;
      epi += fmt::format("    memcpy(outputs[{}], {}, (size_t){}{} * sizeof(real));\n", k, name(r.io.outputs[k]),
                         batched ? "n * " : "", per);
    }
    if (r.io.outputs.empty()) epi += "    (void)outputs;\n";
  }
  if (r.kind == ir::RoutineKind::Eval) {
    epi += fmt::format("    *loss = (double){}[0];\n", name(r.io.values[0]));
    for (size_t k = 1; k < r.io.values.size(); ++k)
      epi += fmt::format("    metrics[{}] = (double){}[0];\n", k - 1, name(r.io.values[k]));
    if (r.io.values.size() == 1) epi += "    (void)metrics;\n";
  }
  if (r.kind == ir::RoutineKind::TrainStep || r.kind == ir::RoutineKind::TrainGrads) epi += fmt::format("    return (double){}[0];\n", name(r.io.values[0]));

  // Names a matrix product's loops must not take: the routine's locals.
  std::set<std::string> taken = {"m", "n", "pos", "seq", "inputs", "outputs", "loss", "metrics", "work", "seed", "rng"};
  for (int b : bufs) taken.insert(name(b));
  for (const auto& s : r.scalars) taken.insert(s.name);
  std::string body;
  std::string last;
  for (const ir::Stmt& s : r.stmts) {
    std::string text;
    if (s.call && ir::is_block_call(s.call->kind)) {
      text = block_call(s, u);
      n_used = n_used || s.call->kind != ir::Call::Kind::BlockDecode;
      if (what(s) != last) body += "\n    /* " + comment_safe(what(s)) + " */\n";
      last = what(s);
      body += text;
      continue;
    }
    if (s.call) {
      text = call_text(*s.call, n_used);
      if (what(s) != last) body += "\n    /* " + comment_safe(what(s)) + " */\n";
      last = what(s);
      body += text + grads_final(s);
      continue;
    }
    if (s.update_count > 1 && (r.kind == ir::RoutineKind::TrainUpdate || is_init)) {
      // A stacked param's update (its state's zeroing): for the instances of the shard.
      text = r.kind == ir::RoutineKind::TrainUpdate ? stacked_range(r, s, u, "m->update_first", "m->update_last")
                                                    : stacked_range(r, s, u, "m->opt_first", "m->opt_last");
      if (what(s) != last) body += "\n    /* " + comment_safe(what(s)) + " */\n";
      last = what(s);
      body += text;
      continue;
    }
    x_.begin_nest(s, taken);
    text = gemm_nest(s, recognise_contraction(p_, s), taken);
    if (!text.empty()) {
      for (const ir::Iter& it : s.iters) n_used = n_used || it.batch;
    } else {
      text = kernel_call(r, s, u, n_used);
    }
    if (what(s) != last) body += "\n    /* " + comment_safe(what(s)) + " */\n";
    last = what(s);
    if (r.kind == ir::RoutineKind::TrainUpdate) text = update_shard(r, s, text);
    if (is_init && s.update_of >= 0 && !p_.layout.opt_state.param_start.empty()) text = held_state(s, text);
    body += text + grads_final(s);
  }
  if (!no_batch) {
    if (!inputs_used) pro += "    (void)inputs;\n";
    if (!n_used && !r.io.position) pro += "    (void)n;\n";
    if (rows_) pro = "    (void)n, (void)pos, (void)seq;\n" + pro;
  }
  std::string head = fmt::format("/* routine {} */\n", r.name());
  // A routine that touches no state (forward of a spec without outputs) still takes it.
  if (!is_init && (pro + body + epi).find("m->") == std::string::npos) pro = "    (void)m;\n" + pro;
  return head + sig + " {\n" + pro + body + (epi.empty() ? "" : "\n" + epi) + "}\n";
}

std::vector<OutputFile> emit_c(const ir::Program& p, const COptions& opt) { return CEmitter(p, opt).run(); }

}  // namespace cannl
