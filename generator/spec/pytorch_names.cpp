// pytorch_names.cpp — PyTorch's spellings and cannl's (see pytorch_names.h).
#include "spec/pytorch_names.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

#include "ops/op_table.h"

namespace cannl {

namespace {

// A PyTorch function: the hint after "unknown function 'NAME'", and the cannl spelling of a
// call ("" where there is none), both with {0} for the call's arguments (the text between its
// parentheses, a leading list `[a, b]` unpacked), {1} for its first argument as an operand (in
// parentheses unless a name or a number) and {2} for the first argument as written.
struct TorchName {
  const char* hint;
  const char* spelling;
};

const std::map<std::string, TorchName>& table() {
  static const char* const rms =
      "rms_norm is a built-in of contract v2, not there yet: today write {1} / sqrt(mean({1} ** 2, "
      "\"b, t | d => b, t |\") + 1e-6) for {2} : [batch, ctx | d] (the spec keeps the batch axes), then *. a gain "
      "param = ones";
  static const std::map<std::string, TorchName> t = {
      {"matmul", {"the matrix product is the operator '*': w * x", ""}},
      {"mm", {"the matrix product is the operator '*': w * x", ""}},
      {"bmm", {"the matrix product is the operator '*': w * x", ""}},
      {"linear", {"a linear layer is w * x + b with param w : [in -> out] and b : [out]", ""}},
      {"mul", {"the pointwise product is the operator '*.': x *. y", ""}},
      {"cat", {"joining along the last output axis is concat(a, b)", "concat({0})"}},
      {"concatenate", {"joining along the last output axis is concat(a, b)", "concat({0})"}},
      {"transpose",
       {"there is no transpose: write the product the other way round, or einsum(\"i -> o => o -> i\", w)", ""}},
      {"pow", {"the power is the operator '**': x ** 2", ""}},
      {"argmax", {"argmax is not differentiable; accuracy(logits, target) is a metric", ""}},
      {"binary_cross_entropy_with_logits",
       {"PyTorch's binary_cross_entropy_with_logits is bce_with_logits(x, y)", "bce_with_logits({0})"}},
      {"smooth_l1_loss", {"smooth_l1_loss(x, y, beta) is huber_loss(x, y, delta = beta) / beta", ""}},
      {"BatchNorm1d", {"batch norm is batch_norm(x) (no affine part: multiply and add params)", ""}},
      {"BatchNorm2d",
       {"batch norm is batch_norm(x) over channels-last maps (no affine part: multiply and add params)", ""}},
      {"rms_norm", {rms, ""}},
      {"RMSNorm", {rms, ""}},
      {"rsqrt", {"the reciprocal square root is 1 / sqrt({2}), or {1} ** -0.5", "1 / sqrt({2})"}},
      {"arange",
       {"PyTorch's arange(T) along a sequence is position(x): the index along the last batch axis of x, as ids "
        "(embedding(wpe, position(tokens)) adds learned positions)",
        ""}},
      {"repeat_interleave",
       {"repeating key/value heads for grouped-query attention is contract v2's attention(q, k, v), whose k and v "
        "may have fewer heads than q; it is not there yet: today give k and v as many heads as q",
        ""}},
      {"cumsum",
       {"there is no running sum yet: contract v2's recurrence will write one (repeat t in T carry s, with "
        "s = s + x[t] in the block)",
        ""}},
  };
  return t;
}

// The argument text as a call's arguments: a leading list `[a, b], dim = 1` gives `a, b`.
std::string arguments(const std::string& args) {
  if (args.empty() || (args[0] != '[' && args[0] != '(')) return args;
  const char close = args[0] == '[' ? ']' : ')';
  int depth = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == '[' || args[i] == '(') ++depth;
    if ((args[i] == ']' || args[i] == ')') && --depth == 0) return args[i] == close ? args.substr(1, i - 1) : args;
  }
  return args;
}

// The first argument as written ("x" when there is none).
std::string first_argument(const std::string& args) {
  int depth = 0;
  size_t end = 0;
  for (; end < args.size(); ++end) {
    const char c = args[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) break;
  }
  std::string a = args.substr(0, end);
  while (!a.empty() && a.back() == ' ') a.pop_back();
  return a.empty() ? "x" : a;
}

// An expression as an operand: in parentheses unless it is a name or a number.
std::string operand(const std::string& e) {
  bool simple = true;
  for (char c : e) simple = simple && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  return simple ? e : "(" + e + ")";
}

std::string filled(const char* text, const std::string& args) {
  const std::string first = first_argument(args);
  return fmt::format(fmt::runtime(text), args, operand(first), first);
}

// A long argument text cut short (the hint is one line).
std::string shown(const std::string& args) { return args.size() <= 60 ? args : args.substr(0, 57) + "..."; }

}  // namespace

bool is_pytorch_module(const std::string& word) {
  return word == "torch" || word == "F" || word == "nn" || word == "functional" || word == "init" || word == "np" ||
         word == "numpy";
}

std::string pytorch_function_hint(const std::string& name, const std::string& args) {
  const auto it = table().find(name);
  if (it == table().end()) return "";
  const std::string a = shown(arguments(args));
  return filled(it->second.hint, a);
}

std::string pytorch_call_message(const std::string& path, const std::string& name, const std::string& args) {
  const std::string a = shown(arguments(args)), call = fmt::format("'{}({})'", path, shown(args));
  const auto it = table().find(name);
  if (it != table().end() && *it->second.spelling)
    return fmt::format("{} is PyTorch; cannl writes {}", call,
                       filled(it->second.spelling, a));
  if (it != table().end()) return fmt::format("{} is PyTorch; in cannl, {}", call, pytorch_function_hint(name, args));
  if (find_op(name))
    return fmt::format("{} is PyTorch; cannl calls its built-ins without a module: {}({})", call, name, a);
  return fmt::format("{} is PyTorch, not cannl: cannl has no modules, and calls its built-ins by name (listed in "
                     "docs/language.md, section 8)",
                     call);
}

}  // namespace cannl
