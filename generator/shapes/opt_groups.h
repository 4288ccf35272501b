// opt_groups.h — the params of each optimiser of `minimize` (contract v2 §5).
//
// A group is `matrices` (params with input axes that are not the table of an `embedding`),
// `embeddings` (tables of `embedding`), `vectors` (params without input axes), `others` (the
// params the earlier groups did not take), a bracketed list of param names (a repeat block's
// param names all its instances), or, for the one optimiser without `on`, every param (v0).
//
// Takes: a model whose shapes were inferred without errors. Guarantees: each entry of
// Model::opt_groups holds its trainable params (OptGroupConfig::params, tensor indices in
// declaration order), every trainable param in exactly one group; otherwise errors with a
// caret: a param in two groups (at the later group, a note at the earlier), a param in none
// (at the last group, a note at its declaration), a listed name that is no trainable param,
// muon given a param without input axes. Nothing else changes.
#pragma once

#include "shapes/infer.h"
#include "spec/model.h"
#include "support/diagnostic.h"

namespace cannl {

void resolve_opt_groups(Model& m, const ShapeInfo& shapes, DiagEngine& diags);

}  // namespace cannl
