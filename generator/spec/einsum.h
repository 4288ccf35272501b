// einsum.h — parsed einsum specifications (contract §6).
//
//   SPEC    := OPERAND [";" OPERAND] "=>" OPERAND
//   OPERAND := [BATCH "|"] [INPUT "->"] OUTPUT
//
// Axis names are single letters ("b|i->o"), or comma-separated identifiers when the spec
// has a comma anywhere ("batch, t|d => batch|d"). A comma-free spec whose one-letter reading
// would repeat a letter inside one operand is read as whole-word names ("batch|inp->out").
// A comma-free spec that is valid both ways with a name of two or more letters ("b|inp =>
// b|inp") keeps its letter reading and carries the word reading in `words`; shape inference
// (shapes/infer.cpp) takes the word reading when the operands' shapes rule out the letters.
// "..." is a row variable of its axis kind; "s*v+k-p" is an affine index (first operand's
// output part only); "v+c" and "v-c" (no stride, no kernel axis) an offset, in any part of any
// operand or of the result (contract v2 §3: reads outside an operand are 0, writes outside the
// result skipped). parse_einsum validates all of it and reports errors at the exact
// character inside the string.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/diagnostic.h"

namespace cannl {

enum class AxisKind { Batch = 0, Input = 1, Output = 2 };
const char* axis_kind_name(AxisKind k);  // "batch", "input", "output"

struct EinAxis {
  enum Kind { Name, Ellipsis, Affine, Offset } kind = Name;
  std::string name;        // Name: the index; Affine: the output index v; Offset: the index v
  long stride = 1;         // Affine: s
  std::string kernel;      // Affine: k (empty when there is no "+k")
  long padding = 0;        // Affine: p
  long offset = 0;         // Offset: c of v+c (negative for v-c)
  SourceRange range;       // in the spec file
};

struct EinOperand {
  std::array<std::vector<EinAxis>, 3> parts;  // indexed by AxisKind
  SourceRange range;
  const std::vector<EinAxis>& part(AxisKind k) const { return parts[static_cast<int>(k)]; }
};

struct EinsumSpec {
  std::vector<EinOperand> operands;
  EinOperand result;
  SourceRange range;  // the string's contents
  std::string text;   // the spec as written
  // The other reading of a comma-free spec: each part one whole identifier ("b|inp->out" as
  // axes b / inp / out). Set only when both readings are valid and differ; null otherwise.
  std::shared_ptr<const EinsumSpec> words;
};

// `contents` is the string's text; `begin` is the file offset of its first character.
std::optional<EinsumSpec> parse_einsum(const std::string& contents, uint32_t begin,
                                       DiagEngine& diags);

std::string print_einsum(const EinsumSpec& spec);

}  // namespace cannl
