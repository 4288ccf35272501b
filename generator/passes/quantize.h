// quantize.h — int8 weights for the forward-only state (`cannl gen --quantize int8`).
//
// Takes: a Program after the passes (contractions marked: Stmt::product; the layout planned),
// float32, for the C target's generated kernel (not --blas). Guarantees: Buffer::int8_row > 0
// on exactly the params that every routine of the forward-only state (forward, eval_metrics,
// decode) reads, at least once, and only
//   - as one operand of a contraction the C emitter prints as a product call
//     (recognise_contraction, at least kGemmMinFlops), the param's rows of int8_row elements
//     being that operand's M (or N) axis and its K axis contiguous (stride 1, the whole row),
//     no other loop of the nest indexing the param; or
//   - as the table of an embedding lookup (its rows, `width` elements each);
// every use agreeing on the row length; or
//   - the instances of a rolled repeat block's param (views of its stacked storage, which the
//     block calls bind slice by slice to a formal): when every block call of those routines
//     (inference and decode bodies) binds the storage as whole instance slices, each read in
//     the block's body as one operand of a product as above (not by a lookup), and nothing else
//     reads the storage or an instance; then every instance is int8, and the storage carries
//     their int8_row too (its rows are the instances' rows one after another). A param every
//     instance shares (bound whole to a formal) stays float.
// Buffer::int8_at and Program::int8_bytes lay out the int8 block: per param in Program::params
// order (an instance a param of its own) its rows (elements bytes) then its scales (4 bytes a
// row), each 64-byte aligned. Nothing else changes: the training state's routines
// and every nest are as they were; the C emitter prints the int8 products (cannl_sgemm_q8)
// and lookups in the forward-only state over these params, and the model card their bytes.
// The decision is made here once; the emitters and the card only print it.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace cannl {

void quantize_weights(ir::Program& p);

// The scheme of runtime-lib/quant.c (cannl_quantize_rows_q8), with the same float operations,
// for an embedded checkpoint: per row scale = max |w| / 127 (0 for zeros), q = roundf(w / scale).
void quantize_rows_q8(const std::vector<float>& w, long rows, long cols, std::vector<int8_t>& q,
                      std::vector<float>& scale);

}  // namespace cannl
