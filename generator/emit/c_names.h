// c_names.h — the C identifiers of the generated code, decided in one place.
//
// The generated files' public names are the model's (`<model>`, `<model>_create`, ...,
// `<MODEL>_MAX_BATCH`, `<MODEL>_INPUT_<NAME>`); checkpoint, model-card and API strings are
// the spec's names as written. Everything else is internal and chosen here, clear of C and C++
// keywords, of what the C library, the CUDA headers, the runtime (`cannl_`) and the generated
// code itself declare, and of the model's public names:
//   - each buffer's identifier (a struct field, a routine's local, a kernel's parameter): its
//     spec name (leading underscores dropped, a reserved prefix such as `cannl_` put behind
//     `t_`), with `_` appended while that is taken;
//   - kernel names (one function per loop nest), from what the nest computes;
// and a spec is refused (c_model_name_problem) only where a public name itself cannot be
// valid C (or C++, for the CUDA target): a model name that is a keyword or that the public
// header's own includes declare.
// The generated .c and .cu files name the state by its struct tag (`struct <model>`): the
// typedef of the public header is left out there, so internal names may equal the model's.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

// Names the generated code must not use for buffers, loop variables or kernels (the fixed
// part: keywords, library and runtime names, the generated code's own).
bool c_reserved(const std::string& name);

// Every identifier the model's public API declares (functions, types, objects, macros).
std::set<std::string> c_public_names(const ir::Program& p);

struct CNames {
  std::vector<std::string> buffer;  // per buffer
  // per block of Program::blocks: its forward's, backward's, inference's, init's and decode's functions
  std::vector<std::string> block;
  std::set<std::string> used;       // everything an internal name must differ from
  // A fresh kernel name for nest `s` (marked used): what it computes and the buffer it writes,
  // `set_h1`, `sum_loss_ce`, `add_w1_grad`, `max_p1`.
  std::string kernel(const ir::Program& p, const ir::Stmt& s);
};

CNames c_names(const ir::Program& p);

// `v`, or `v_`, `v__`, ...: the first not in `taken` and not reserved.
std::string fresh_name(std::string v, const std::set<std::string>& taken);
std::string fresh_name(std::string v, const std::function<bool(const std::string&)>& taken);

// Why `model` cannot name the C API (a keyword of C, or of C++ for the CUDA target (`cxx`); a
// name the public header's includes declare; the runtime's prefix), or "" when it can.
std::string c_model_name_problem(const std::string& model, bool cxx);

}  // namespace cannl
