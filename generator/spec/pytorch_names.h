// pytorch_names.h — PyTorch's spellings of what cannl writes otherwise, for the hints of two
// errors: a call of an unknown function (`cat(a, b)`, `rsqrt(x)`: spec/model.cpp) and a call
// through a PyTorch module (`torch.cat(a, b)`, `F.silu(x)`, `torch.nn.functional.gelu(x)`:
// spec/lexer.cpp), which is no cannl at all.
//
// One table: PyTorch's function name, the cannl spelling of the call (with the call's own
// arguments) when there is one, and a few words on it (a v2 built-in that is not there yet
// and what to write today, a composition of the built-ins, the operator that replaces it).
#pragma once

#include <string>

namespace cannl {

// `torch`, `F`, `nn`, `functional`, `init`, `np`, `numpy`: a module a PyTorch model calls
// functions through.
bool is_pytorch_module(const std::string& word);

// The hint for PyTorch's function `name` called with the argument text `args` (the text between
// the parentheses, "a, b"), as the clause after "unknown function 'NAME'" ("joining along the
// last output axis is concat(a, b)"); "" when the table does not know the name.
std::string pytorch_function_hint(const std::string& name, const std::string& args);

// The error for `MODULE.NAME(ARGS)` (`path` "torch.cat", `name` "cat", args "a, b"): the cannl
// spelling ("'torch.cat(a, b)' is PyTorch; cannl writes concat(a, b) ...").
std::string pytorch_call_message(const std::string& path, const std::string& name, const std::string& args);

}  // namespace cannl
