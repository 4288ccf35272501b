// shape.h — shapes during inference (with variables) and after it (concrete).
//
// A shape has three rows of axes, one per kind: batch, input, output (contract §4).
// During inference a row is  left ++ ρ ++ right  where ρ is an optional row variable standing
// for any number of axes; a closed row has no ρ (and keeps all its axes in `right`).
// An axis is a known size, the runner's batch axis, or a size variable.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "spec/einsum.h"

namespace cannl {

struct DimT {
  enum Kind { Known, Batch, Var } kind = Known;
  long size = 1;  // Known
  int var = -1;   // Var
  static DimT known(long n) { return {Known, n, -1}; }
  static DimT batch() { return {Batch, 0, -1}; }
  static DimT variable(int v) { return {Var, 0, v}; }
  bool is_var() const { return kind == Var; }
};

struct RowT {
  std::vector<DimT> left;   // only when var >= 0
  int var = -1;             // row variable, or -1 for a closed row
  std::vector<DimT> right;
  static RowT closed(std::vector<DimT> dims) { return {{}, -1, std::move(dims)}; }
  bool is_closed() const { return var < 0; }
  size_t known_len() const { return left.size() + right.size(); }
};

struct ShapeT {
  std::array<RowT, 3> rows;  // indexed by AxisKind
  RowT& row(AxisKind k) { return rows[static_cast<int>(k)]; }
  const RowT& row(AxisKind k) const { return rows[static_cast<int>(k)]; }
};

// ---- after inference ----------------------------------------------------------------
struct Axis {
  long size = 1;
  bool is_batch = false;  // the runner's batch axis (size given at run time)
  bool operator==(const Axis&) const = default;
};

struct Shape {
  std::array<std::vector<Axis>, 3> rows;  // batch, input, output
  const std::vector<Axis>& row(AxisKind k) const { return rows[static_cast<int>(k)]; }
  std::vector<Axis>& row(AxisKind k) { return rows[static_cast<int>(k)]; }
  bool is_scalar() const { return rows[0].empty() && rows[1].empty() && rows[2].empty(); }
  bool operator==(const Shape&) const = default;
};

// Contract §4 notation: [784 -> 512], [batch | 10], [batch | ], [].
std::string print_shape(const Shape& s);
// The same notation from the three parts' axis lists ("784", "28, 28"; empty for none).
std::string format_shape(const std::string& batch, const std::string& input, const std::string& output);
std::string print_row(const std::vector<Axis>& row);  // [784, 512]

}  // namespace cannl
