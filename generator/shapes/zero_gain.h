// zero_gain.h — the zero-gain trap: a gain that starts at zero in front of a normalisation or
// an activation.
//
// `param g : [d]` has no input axes and no initialiser, so it starts at zero (docs/language.md
// §9), like `= zeros`; `layer_norm(x) *. g` is then zero, and so is every gradient behind it:
// a ReLU after it is dead, and what feeds the normalisation never learns (an outside ResNet
// sat at loss ln 10 that way). PyTorch's LayerNorm and BatchNorm start their weight at one.
//
// Takes: a model whose shapes were inferred without errors. Guarantees: a warning (not an
// error: a zero start can be meant, as in ReZero) at every pointwise product `*.` of a
// trainable param that starts at zero with a normalisation (layer_norm, batch_norm, rms_norm)
// or an activation (relu, gelu, silu, ...), called there or the definition of a tensor named
// there; each with a note at the param's statement giving the fix (`= ones`). Nothing else
// changes.
#pragma once

#include "shapes/infer.h"
#include "spec/model.h"
#include "support/diagnostic.h"

namespace cannl {

void warn_zero_gains(const Model& m, const ShapeInfo& shapes, DiagEngine& diags);

}  // namespace cannl
