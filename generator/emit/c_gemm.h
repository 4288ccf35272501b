// c_gemm.h — C for contraction nests: calls of the blocked matrix product.
//
// Takes: a nest recognised by recognise_contraction, the C names of the buffers and of the
// nest's loop variables, and alpha printed as C. Guarantees: C that performs the nest (one
// call with constant strides, inside loops over the Gemm's outer loops), either with the
// runtime's kernel (`cannl_sgemm`/`cannl_dgemm` on the state's `m->gemm`, runtime-lib/gemm.c;
// `cannl_sgemm_dot`/`cannl_dgemm_dot` for a Gemm marked `dot`, `cannl_sgemm_sym`/`cannl_dgemm_sym`
// for an overwriting one marked `symmetric`) or, with `blas`, with
// cblas_sgemm/cblas_dgemm (row-major, lda/ldb/ldc and transposes derived from the strides;
// a product whose operands have no unit stride falls back to the generated kernel).
// `overwrite` makes the product assign instead of accumulate (its zero-fill was dropped).
// With GemmSite::int8, a call of cannl_sgemm_q8 (runtime-lib/quant.c) instead.
#pragma once

#include <string>
#include <vector>

#include "emit/contraction.h"
#include "ir/ir.h"

namespace cannl {

struct GemmSite {
  const std::vector<std::string>* buffer_names = nullptr;  // C name of each buffer
  std::vector<std::string> vars;                           // C name of each loop variable
  std::string alpha;                                       // alpha as C ("1.0f")
  bool f64 = false;
  bool blas = false;
  // The operand read as int8 rows (passes/quantize.h; -1: none): then the product is a call
  // of cannl_sgemm_q8 on int8_rows and int8_scales (`m->int8.<name>` and `m->int8_scale.<name>`,
  // or in a rolled block's body the instance's rows and scales its function takes), the other
  // operand's rows against the weight rows.
  int int8 = -1;
  std::string int8_rows, int8_scales;
};

std::string emit_gemm(const ir::Program& p, const ir::Stmt& s, const Gemm& g, const GemmSite& site, bool overwrite);

// Products smaller than this (multiply-adds, batch loops at their maximum) stay plain loops:
// packing and tiling cost more than they save there.
constexpr long kGemmMinFlops = 2 * 16 * 16 * 16;

}  // namespace cannl
