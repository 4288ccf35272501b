// c_weights.cpp — the C back end's embedded weights (see c_emitter.h): <model>_weights.c (and
// <model>_weights.bin), the trained params laid out as the forward-only state's param buffers,
// which a state of <model>_infer_create_embedded reads in place (templates/c/weights*.mustache;
// the state's side: CEmitter::inference, templates/c/inference.c.mustache).
#include <algorithm>
#include <fmt/format.h>

#include "emit/c_common.h"
#include "emit/c_emitter.h"
#include "passes/quantize.h"
#include "support/diagnostic.h"

namespace cannl {

std::vector<int> CEmitter::param_storage() const {
  const ir::Arena& a = p_.layout.inference;
  std::vector<int> out;
  for (int b : p_.params) {
    const int s = buf(b).view_of >= 0 ? buf(b).view_of : b;
    if (a.field[static_cast<size_t>(s)] < 0 || a.field[static_cast<size_t>(s)] >= a.state)
      CANNL_BUG("a param outside the forward-only state's params: " + buf(s).name);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [&](int x, int y) {
    return a.field[static_cast<size_t>(x)] < a.field[static_cast<size_t>(y)];
  });
  return out;
}

// <model>_weights.bin: its first line the marker of the files cannl gen writes
// (driver/output_dir.h), padded to 64 bytes; then each array (a param buffer of the state, an
// int8 weight's rows, their scales) at a multiple of 64 bytes, in the machine's byte order (the
// .c refuses a big-endian target).
namespace {
constexpr size_t kBinHeader = 64;
std::string bin_header(const std::string& model) {
  std::string h = "// Written by cannl gen.\n// " + model + "_weights.bin";
  h.resize(kBinHeader - 1, ' ');
  return h + "\n";
}
template <typename T>
size_t bin_append(std::string& bin, const T* v, size_t n) {
  bin.resize((bin.size() + 63) / 64 * 64, '\0');
  const size_t at = bin.size() - kBinHeader;
  bin.append(reinterpret_cast<const char*>(v), n * sizeof(T));
  return at;
}
}  // namespace

std::string CEmitter::weights(data d, std::string* bin) {
  std::string arrays;
  if (bin) {
    *bin = bin_header(p_.model);
    const std::string uc = upper(p_.model);
    arrays += fmt::format(
        "\n/* The values are the bytes of {0}_weights.bin (little-endian, each array 64-byte aligned after\n"
        "   the file's first {2} bytes), compiled in by the assembler's .incbin, which looks in the -I\n"
        "   folders (where {0}.h is); or define {1}_WEIGHTS_BIN as the file's path. */\n"
        "#if !defined(__GNUC__) || !defined(__ELF__)\n"
        "#error \"{0}_weights.c includes {0}_weights.bin with the assembler's .incbin: GCC or Clang, ELF\"\n"
        "#endif\n"
        "#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__\n"
        "#error \"{0}_weights.bin holds little-endian values\"\n"
        "#endif\n"
        "#ifndef {1}_WEIGHTS_BIN\n#define {1}_WEIGHTS_BIN \"{0}_weights.bin\"\n#endif\n"
        "__asm__(\".section .rodata\\n.balign 64\\n{0}_weights_bin:\\n.incbin \\\"\" {1}_WEIGHTS_BIN "
        "\"\\\", {2}\\n.previous\\n\");\n"
        "extern const unsigned char {0}_weights_bin[] __asm__(\"{0}_weights_bin\");\n",
        p_.model, uc, kBinHeader);
  }
  auto at = [&](const std::string& type, size_t offset) {
    return fmt::format("(({} *)(const void *)({}_weights_bin + {}))", type, p_.model, offset);
  };
  // Each param buffer's values: a param's own, or a repeat block's instances at their offsets.
  const std::vector<int> storage = param_storage();
  std::vector<std::vector<double>> values(storage.size());
  std::vector<size_t> where(p_.params.size());  // param i's buffer: storage[where[i]]
  for (size_t i = 0; i < p_.params.size(); ++i) {
    const int b = p_.params[i];
    const int s = buf(b).view_of >= 0 ? buf(b).view_of : b;
    where[i] = static_cast<size_t>(std::find(storage.begin(), storage.end(), s) - storage.begin());
    std::vector<double>& v = values[where[i]];
    v.resize(static_cast<size_t>(buf(s).elements()), 0.0);
    const auto& w = o_.weights->values[i];
    const size_t off = buf(b).view_of >= 0 ? static_cast<size_t>(buf(b).view_offset) : 0;
    if (off + w.size() > v.size()) CANNL_BUG("a param's values past its buffer: " + buf(b).name);
    std::copy(w.begin(), w.end(), v.begin() + static_cast<long>(off));
  }
  data buffers{data::type::list}, int8_rows{data::type::list};
  data int8_list{data::type::list};
  for (size_t k = 0; k < storage.size(); ++k) {
    const int b = storage[k];
    const auto& v = values[k];
    const std::string nm = name(b);
    data e;
    if (buf(b).int8_row > 0) {  // int8 rows and their scales (passes/quantize.h), quantised here as the runtime does
      const long cols = buf(b).int8_row, rows = static_cast<long>(v.size()) / cols;
      std::vector<float> w(v.begin(), v.end());
      std::vector<int8_t> q;
      std::vector<float> sc;
      quantize_rows_q8(w, rows, cols, q, sc);
      const std::string head = fmt::format("\n/* {} stored [{}] as int8 rows [{}, {}] (cannl gen --quantize int8) */\n",
                                           buf(b).shape, dims_list(buf(b), false), rows, cols);
      if (bin) {
        const size_t qa = bin_append(*bin, q.data(), q.size()), sa = bin_append(*bin, sc.data(), sc.size());
        arrays += head + fmt::format("#define {}_int8 {}\n#define {}_int8_scale {}\n", nm, at("const int8_t", qa), nm,
                                     at("const float", sa));
      } else {
        arrays += head + fmt::format("static _Alignas(64) const int8_t {}_int8[{}] = {{", nm, q.size());
        for (size_t j = 0; j < q.size(); ++j) arrays += (j % 16 ? " " : "\n    ") + std::to_string(q[j]) + ",";
        arrays += fmt::format("\n}};\nstatic _Alignas(64) const float {}_int8_scale[{}] = {{", nm, sc.size());
        for (size_t j = 0; j < sc.size(); ++j) arrays += (j % 8 ? " " : "\n    ") + num(sc[j]) + ",";
        arrays += "\n};\n";
      }
      e.set("name", std::string("NULL"));
      e.set("what", nm + ": int8, its rows in int8_rows");
      buffers.push_back(e);
      data r;
      r.set("name", nm);
      int8_rows.push_back(r);
      for (size_t i = 0; i < p_.params.size(); ++i) {  // the params it holds (a stacked buffer: its instances)
        const int pb = p_.params[i];
        if (pb != b && buf(pb).view_of != b) continue;
        const long at = pb == b ? 0 : buf(pb).view_offset;
        data q8;
        q8.set("rows_at", at ? fmt::format("{}_int8 + {}", nm, at) : nm + "_int8");
        q8.set("scales_at", at ? fmt::format("{}_int8_scale + {}", nm, at / cols) : nm + "_int8_scale");
        q8.set("index", std::to_string(i));
        q8.set("rows", std::to_string(buf(pb).elements() / cols));
        q8.set("cols", std::to_string(cols));
        int8_list.push_back(q8);
      }
      continue;
    }
    const std::string array = nm + "_values";
    const std::string head = fmt::format("\n/* {} {} */\n", nm, shape_comment(b));
    if (bin) {
      size_t a;
      if (o_.f64) {
        a = bin_append(*bin, v.data(), v.size());
      } else {
        const std::vector<float> f(v.begin(), v.end());
        a = bin_append(*bin, f.data(), f.size());
      }
      arrays += head + fmt::format("#define {} {}\n", array, at("const real", a));
    } else {
      arrays += head + fmt::format("static _Alignas(64) const real {}[{}] = {{", array, v.size());
      for (size_t j = 0; j < v.size(); ++j) arrays += (j % 8 ? " " : "\n    ") + num(v[j]) + ",";
      arrays += "\n};\n";
    }
    e.set("name", array);
    e.set("what", nm);
    buffers.push_back(e);
  }
  // Per param (<model>_embedded_params): its place in its buffer's array; an int8 weight's NULL
  // (its floats made from its rows at the first call).
  data list{data::type::list};
  for (size_t i = 0; i < p_.params.size(); ++i) {
    const int b = p_.params[i];
    const int s = storage[where[i]];
    data e;
    if (buf(s).int8_row > 0)
      e.set("name", std::string("NULL"));
    else if (buf(b).view_of >= 0 && buf(b).view_offset > 0)
      e.set("name", fmt::format("{}_values + {}", name(s), buf(b).view_offset));
    else
      e.set("name", name(s) + "_values");
    list.push_back(e);
  }
  d.set("arrays", arrays);
  d.set("how", std::string(bin ? "its values the bytes of " + p_.model + "_weights.bin"
                               : "its values printed so that they read back exactly"));
  d.set("embedded_buffers", buffers);
  d.set("int8_tables", int8_rows);
  d.set("embedded_list", list);
  d.set("int8_embedded", int8_list);
  d.set("checkpoint", o_.weights->source);
  d.set("checkpoint_step", o_.weights->step.empty() ? std::string("unknown") : o_.weights->step);
  return render(p_.int8_bytes > 0 ? "c/weights_int8.c.mustache" : "c/weights.c.mustache", d);
}

}  // namespace cannl
