// c_names.cpp — the C identifiers of the generated code (see c_names.h).
#include "emit/c_names.h"

#include <cctype>
#include <fmt/format.h>

#include "emit/c_common.h"
#include "ir/prims.h"

namespace cannl {

namespace {

const std::set<std::string>& c_keywords() {
  static const std::set<std::string> k = {
      // C11 and C23
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Alignas",
      "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert",
      "_Thread_local", "alignas", "alignof", "bool", "constexpr", "false", "nullptr", "static_assert", "thread_local",
      "true", "typeof", "typeof_unqual", "_BitInt", "_Decimal32", "_Decimal64", "_Decimal128"};
  return k;
}

const std::set<std::string>& cxx_keywords() {  // beyond C's: the CUDA target is C++
  static const std::set<std::string> k = {
      "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t", "class", "compl",
      "concept", "consteval", "constinit", "const_cast", "co_await", "co_return", "co_yield", "decltype", "delete",
      "dynamic_cast", "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "operator", "or", "or_eq", "private", "protected", "public", "reinterpret_cast", "requires", "static_cast",
      "template", "this", "throw", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq"};
  return k;
}

bool keyword(const std::string& s) { return c_keywords().count(s) || cxx_keywords().count(s); }

// What the headers the public header includes (stddef.h, stdint.h, stdio.h) declare: a model
// named so cannot be a type in that header.
const std::set<std::string>& header_names() {
  static const std::set<std::string> h = {
      "size_t", "ptrdiff_t", "NULL", "offsetof", "max_align_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
      "uint16_t", "uint32_t", "uint64_t", "int_least8_t", "int_least16_t", "int_least32_t", "int_least64_t",
      "uint_least8_t", "uint_least16_t", "uint_least32_t", "uint_least64_t", "int_fast8_t", "int_fast16_t",
      "int_fast32_t", "int_fast64_t", "uint_fast8_t", "uint_fast16_t", "uint_fast32_t", "uint_fast64_t", "intptr_t",
      "uintptr_t", "intmax_t", "uintmax_t", "INT8_MIN", "INT8_MAX", "UINT8_MAX", "INT16_MIN", "INT16_MAX",
      "UINT16_MAX", "INT32_MIN", "INT32_MAX", "UINT32_MAX", "INT64_MIN", "INT64_MAX", "UINT64_MAX", "SIZE_MAX",
      "PTRDIFF_MIN", "PTRDIFF_MAX", "INTPTR_MIN", "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX",
      "UINTMAX_MAX", "FILE", "fpos_t", "va_list", "ssize_t", "off_t", "EOF", "BUFSIZ", "FOPEN_MAX", "FILENAME_MAX",
      "L_tmpnam", "TMP_MAX", "SEEK_SET", "SEEK_CUR", "SEEK_END", "_IOFBF", "_IOLBF", "_IONBF", "stdin", "stdout",
      "stderr", "remove", "rename", "renameat", "tmpfile", "tmpnam", "tempnam", "fclose", "fflush", "fopen",
      "freopen", "fdopen", "fmemopen", "open_memstream", "setbuf", "setvbuf", "setbuffer", "setlinebuf", "fprintf",
      "printf", "sprintf", "snprintf", "vfprintf", "vprintf", "vsprintf", "vsnprintf", "dprintf", "vdprintf",
      "asprintf", "vasprintf", "fscanf", "scanf", "sscanf", "vfscanf", "vscanf", "vsscanf", "fgetc", "getc",
      "getchar", "fputc", "putc", "putchar", "fgets", "gets", "fputs", "puts", "ungetc", "fread", "fwrite", "fseek",
      "fseeko", "ftell", "ftello", "rewind", "fgetpos", "fsetpos", "clearerr", "feof", "ferror", "perror", "fileno",
      "popen", "pclose", "ctermid", "flockfile", "ftrylockfile", "funlockfile", "getline", "getdelim", "getw", "putw",
      "getc_unlocked", "getchar_unlocked", "putc_unlocked", "putchar_unlocked", "fgetc_unlocked", "fputc_unlocked",
      "clearerr_unlocked", "feof_unlocked", "ferror_unlocked", "fileno_unlocked", "fflush_unlocked", "fread_unlocked",
      "fwrite_unlocked", "sys_errlist", "sys_nerr", "P_tmpdir"};
  return h;
}

// The rest of the C library the generated files include (math.h, stdlib.h, string.h, omp.h,
// cblas.h) and the CUDA runtime's and device code's names. (math.h's functions also with the
// f and l suffixes.)
const std::set<std::string>& library_names() {
  static const std::set<std::string> l = [] {
    std::set<std::string> s = {
        "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "INFINITY", "NAN", "FP_INFINITE", "FP_NAN", "FP_NORMAL",
        "FP_SUBNORMAL", "FP_ZERO", "FP_FAST_FMA", "FP_ILOGB0", "FP_ILOGBNAN", "MATH_ERRNO", "MATH_ERREXCEPT",
        "math_errhandling", "float_t", "double_t", "isfinite", "isinf", "isnan", "isnormal", "signbit", "fpclassify",
        "isgreater", "isgreaterequal", "isless", "islessequal", "islessgreater", "isunordered", "M_E", "M_LOG2E",
        "M_LOG10E", "M_LN2", "M_LN10", "M_PI", "M_PI_2", "M_PI_4", "M_1_PI", "M_2_PI", "M_2_SQRTPI", "M_SQRT2",
        "M_SQRT1_2", "errno", "assert", "EDOM", "ERANGE", "EILSEQ",
        // stdlib.h
        "div_t", "ldiv_t", "lldiv_t", "EXIT_SUCCESS", "EXIT_FAILURE", "RAND_MAX", "MB_CUR_MAX", "atof", "atoi",
        "atol", "atoll", "strtod", "strtof", "strtold", "strtol", "strtoll", "strtoul", "strtoull", "rand", "srand",
        "random", "srandom", "drand48", "lrand48", "srand48", "aligned_alloc", "calloc", "free", "malloc", "realloc",
        "reallocarray", "posix_memalign", "abort", "atexit", "at_quick_exit", "exit", "_Exit", "quick_exit",
        "getenv", "setenv", "unsetenv", "putenv", "system", "bsearch", "qsort", "abs", "labs", "llabs", "div", "ldiv",
        "lldiv", "mblen", "mbtowc", "wctomb", "mbstowcs", "wcstombs", "mkstemp", "mkdtemp", "realpath", "alloca",
        // string.h
        "memcpy", "memmove", "memset", "memcmp", "memchr", "memccpy", "strcpy", "strncpy", "strcat", "strncat",
        "strcmp", "strncmp", "strcoll", "strxfrm", "strchr", "strrchr", "strspn", "strcspn", "strpbrk", "strstr",
        "strtok", "strtok_r", "strerror", "strerror_r", "strlen", "strnlen", "strdup", "strndup", "stpcpy",
        "stpncpy", "strsignal", "strcasecmp", "strncasecmp", "bzero", "bcopy", "bcmp", "index", "rindex", "ffs",
        // the CUDA runtime and device code
        "dim3", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "atomicAdd", "atomicSub", "atomicExch",
        "atomicMin", "atomicMax", "atomicCAS", "atomicAnd", "atomicOr", "atomicXor", "atomicInc", "atomicDec",
        "printf", "clock", "clock64", "min", "max", "stream", "half", "nv_bfloat16"};
    for (const char* f :
         {"acos", "asin", "atan", "atan2", "cos", "sin", "tan", "acosh", "asinh", "atanh", "cosh", "sinh", "tanh",
          "exp", "exp2", "exp10", "expm1", "frexp", "ilogb", "ldexp", "log", "log10", "log1p", "log2", "logb", "modf",
          "scalbn", "scalbln", "cbrt", "fabs", "hypot", "pow", "pow10", "sqrt", "rsqrt", "erf", "erfc", "erfinv",
          "lgamma", "tgamma", "gamma", "ceil", "floor", "nearbyint", "rint", "lrint", "llrint", "round", "lround",
          "llround", "trunc", "fmod", "remainder", "drem", "remquo", "copysign", "nan", "nextafter", "nexttoward",
          "fdim", "fmax", "fmin", "fma", "j0", "j1", "jn", "y0", "y1", "yn", "sincos", "significand", "finite"}) {
      s.insert(f);
      s.insert(std::string(f) + "f");
      s.insert(std::string(f) + "l");
    }
    // CUDA's vector types: char1 .. double4.
    for (const char* t : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong",
                          "ulonglong", "float", "double"})
      for (int n = 1; n <= 4; ++n) s.insert(t + std::to_string(n));
    return s;
  }();
  return l;
}

// What the generated files themselves name: the typedef `real`, the routines, the templates'
// locals and parameters, the state structs' members, the kernels' own index names.
const std::set<std::string>& own_names() {
  static const std::set<std::string> o = {
      "real", "m", "n", "e_", "i_", "r_", "lane_", "stream_", "state_", "in_", "inputs", "outputs", "out",
      "loss", "metrics", "seed", "rng", "count", "name", "cap", "all", "path", "err", "what", "on", "lr", "step",
      "schedule", "acc", "v", "base", "work", "argc", "argv", "params", "ok", "slot", "part", "main", "init_params",
      "train_step", "forward", "eval_metrics", "fail", "gemm", "to_device", "to_host", "finish", "host_view",
      "free_slot", "stage", "inputs_on_device", "release", "state_tensors", "forward_reads", "state_rows",
      "state_row", "bufs",
      // members of the state structs
      "arena", "gemm_ws", "gemm_slots", "dev", "host", "grads_host", "host_newer", "device_newer", "compute", "copy",
      "blas", "in_host", "in_dev", "staged", "consumed", "staged_ptr", "staged_n", "ready", "next_slot", "scalars",
      "failed", "error",
      // generation: the decode routine, its position, the inference state's sequence
      "decode", "pos", "decode_len", "decode_ids",
      // int8 weights (passes/quantize.h): the inference state's int8 rows and scales
      "int8", "int8_scale", "int8_block", "int8_stale", "quantize_int8"};
  return o;
}

bool has_prefix(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// What a local of the generated code (a loop variable; a buffer's pointer in a routine or a
// kernel) must not be besides keywords and the generated code's own names: a macro or a type
// of the headers, a function the kernels call (the primitives' math-library functions, in
// both precisions), a CUDA built-in. (Other library functions it may shadow: a local `j0`
// hides the Bessel function only where nothing calls it.)
bool local_clash(const std::string& name) {
  static const std::set<std::string> names = [] {
    std::set<std::string> s = {"stdin", "stdout", "stderr", "errno", "assert", "FILE", "memcpy", "memset", "dim3",
                               "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "atomicAdd", "atomicCAS",
                               "min", "max"};
    for (const std::set<std::string>* l : {&header_names(), &library_names()})
      for (const std::string& n : *l) {
        bool upper_case = false;
        for (char c : n) upper_case = upper_case || std::isupper(static_cast<unsigned char>(c));
        if (upper_case || (n.size() > 2 && n.compare(n.size() - 2, 2, "_t") == 0)) s.insert(n);  // macros, types
      }
    for (const ir::Prim& p : ir::prims())
      if (p.libm) {
        s.insert(p.libm);
        s.insert(std::string(p.libm) + "f");
      }
    return s;
  }();
  return names.count(name) > 0;
}

// Reserved by the C standard (a leading underscore and a capital, or two underscores), or a
// prefix of the runtime, the CUDA and BLAS libraries or OpenMP.
bool reserved_prefix(const std::string& s) {
  if (s.size() >= 2 && s[0] == '_' && (s[1] == '_' || std::isupper(static_cast<unsigned char>(s[1])))) return true;
  for (const char* p : {"cannl_", "CANNL_", "cuda", "CUDA_", "cublas", "CUBLAS_", "omp_", "cblas_", "Cblas", "__"})
    if (has_prefix(s, p)) return true;
  return false;
}

// `name` made free: leading underscores dropped and a reserved prefix (the runtime's, CUDA's)
// put behind `t_`, then `_` appended while `taken` (or reserved) says so.
template <typename Taken>
std::string free_name(std::string name, const Taken& taken) {
  while (name.size() > 1 && name[0] == '_') name.erase(0, 1);
  if (name.empty() || name == "_") name = "t";
  if (reserved_prefix(name)) name = "t_" + name;
  while (taken(name)) name += "_";
  return name;
}

}  // namespace

bool c_reserved(const std::string& name) {
  return keyword(name) || header_names().count(name) || library_names().count(name) ||
         own_names().count(name) || reserved_prefix(name);
}

std::set<std::string> c_public_names(const ir::Program& p) {
  const std::string& x = p.model;
  const std::string X = upper(x);
  std::set<std::string> s = {x};
  for (const char* suffix :
       {"real", "create", "create_batch", "destroy", "init", "train_step", "forward", "eval", "param", "grad",
        "get_step", "set_step", "get_lr", "get_last_lr", "set_lr", "set_schedule", "state_tensors", "save", "load",
        "api", "infer", "infer_api", "infer_create", "infer_create_batch", "infer_create_embedded",
        "infer_create_embedded_batch", "infer_create_in_place", "infer_destroy", "infer_eval", "infer_forward",
        "infer_load", "infer_param", "infer_set_params", "embedded_params", "prefetch", "cuda_ext", "decode_api", "decode_prefill", "decode_step",
        "decode_length", "decode_prefill_batch", "decode_step_batch", "decode_reset", "decode_length_seq"})
    s.insert(x + "_" + suffix);
  for (const char* suffix :
       {"H", "MAX_BATCH", "NUM_INPUTS", "NUM_OUTPUTS", "NUM_PARAMS", "NUM_METRICS", "EMBEDDED_WEIGHTS", "NO_TYPEDEFS"})
    s.insert(X + "_" + suffix);
  for (int b : p.inputs) s.insert(X + "_INPUT_" + upper(p.buffers[static_cast<size_t>(b)].name));
  for (int b : p.outputs) s.insert(X + "_OUTPUT_" + upper(p.buffers[static_cast<size_t>(b)].name));
  for (int b : p.metrics) s.insert(X + "_METRIC_" + upper(p.buffers[static_cast<size_t>(b)].name));
  return s;
}

CNames c_names(const ir::Program& p) {
  CNames n;
  n.used = c_public_names(p);
  for (const ir::Routine& r : p.routines)
    for (const ir::ScalarDef& d : r.scalars) n.used.insert(d.name);
  // A rolled block's functions (emit/c_blocks.cpp): <block>_forward, _backward, _infer, _init,
  // _decode.
  for (const ir::Block& bl : p.blocks)
    for (const char* half : {"forward", "backward", "infer", "init", "decode"}) {
      const std::string id =
          free_name(bl.name + "_" + half, [&](const std::string& x) { return c_reserved(x) || n.used.count(x) > 0; });
      n.used.insert(id);
      n.block.push_back(id);
    }
  // The program's buffers first, then the bodies' (named inside their block's functions only:
  // unique among all the same, so that the program's keep the names they have unrolled).
  n.buffer.assign(p.buffers.size(), "");
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const ir::Buffer& b = p.buffers[i];
      if ((b.block >= 0) != (pass == 1)) continue;
      const std::string id =
          free_name(b.name, [&](const std::string& x) { return c_reserved(x) || n.used.count(x) > 0; });
      n.used.insert(id);
      n.buffer[i] = id;
    }
  return n;
}

std::string CNames::kernel(const ir::Program& p, const ir::Stmt& s) {
  // The verb: what the nest does to the buffer it writes (its first, when fused).
  const ir::Assign& a = s.assigns[0];
  std::vector<bool> written(s.iters.size(), false);
  for (const ir::Affine& ix : a.out.index)
    for (const auto& t : ix.terms) written[static_cast<size_t>(t.iter)] = true;
  bool reduces = false;
  for (size_t k = 0; k < s.iters.size(); ++k) reduces = reduces || (!written[k] && s.iters[k].size > 1);
  const char* verb = "set";
  switch (a.accum) {
    case ir::Accum::Set: verb = s.single() && a.body->op == ir::Op::Const ? "fill" : "set"; break;
    case ir::Accum::Add: verb = reduces || s.zero_first ? "sum" : "add"; break;
    case ir::Accum::Max: verb = "max"; break;
    case ir::Accum::Min: verb = "min"; break;
  }
  std::string base = fmt::format("{}_{}", verb, buffer[static_cast<size_t>(a.out.buf)]);
  std::string name = base;
  for (int k = 2; c_reserved(name) || used.count(name); ++k) name = fmt::format("{}_{}", base, k);
  used.insert(name);
  (void)p;
  return name;
}

std::string fresh_name(std::string v, const std::function<bool(const std::string&)>& taken) {
  return free_name(std::move(v), [&](const std::string& x) {
    return taken(x) || keyword(x) || own_names().count(x) || local_clash(x);
  });
}

std::string fresh_name(std::string v, const std::set<std::string>& taken) {
  return fresh_name(std::move(v), [&](const std::string& x) { return taken.count(x) > 0; });
}

std::string c_model_name_problem(const std::string& model, bool cxx) {
  if (c_keywords().count(model)) return fmt::format("'{}' is a keyword of C", model);
  if (cxx && cxx_keywords().count(model)) return fmt::format("'{}' is a keyword of C++, the CUDA target's language", model);
  if (header_names().count(model))
    return fmt::format("'{}' is declared by the C library headers the model's header includes (stddef.h, "
                       "stdint.h, stdio.h)", model);
  // A macro of the library headers the generated sources include (math.h's M_PI, INFINITY,
  // ...; nvcc includes them before the model's header) would expand in the header.
  bool macro = model == "errno" || model == "math_errhandling";
  if (library_names().count(model))
    for (char c : model) macro = macro || std::isupper(static_cast<unsigned char>(c));
  if (macro) return fmt::format("'{}' is a macro of the C library headers the generated sources include", model);
  std::string lower = model;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (has_prefix(lower, "cannl")) return "names beginning with 'cannl' are the runtime's";
  // The model's header <model>.h is on the include path of everything that links the model:
  // named after a header that the generated sources or the runtime's headers they include take
  // from the system, it would hide that one (a model math: <math.h>).
  static const std::set<std::string> system_headers = {
      "math", "stdarg", "stddef", "stdint", "stdio", "stdlib", "string", "unistd", "omp", "cblas", "zlib",
      "cublas_v2", "cuda_runtime", "cuda_runtime_api"};
  if (system_headers.count(model))
    return fmt::format("its header {0}.h would hide the system header <{0}.h> that the generated sources include",
                       model);
  // The state is `struct <model>` in the generated sources: a struct the headers they include
  // already define cannot be defined again (the C library's, the CUDA runtime's).
  static const std::set<std::string> tags = {"tm", "timespec", "timeval", "itimerspec", "sigevent", "sched_param",
                                             "lconv", "random_data", "drand48_data", "stat", "dim3", "half",
                                             "nv_bfloat16"};
  bool vector_type = false;  // CUDA's char1 .. double4
  for (const char* t : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong",
                        "float", "double"})
    for (int n = 1; n <= 4; ++n) vector_type = vector_type || model == t + std::to_string(n);
  if (tags.count(model) || vector_type)
    return fmt::format("'struct {}' is defined by the headers the generated sources include", model);
  for (const char* p : {"cuda", "cublas", "CU"})
    if (has_prefix(model, p)) return fmt::format("names beginning with '{}' are CUDA's", p);
  return "";
}

}  // namespace cannl
