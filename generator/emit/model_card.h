// model_card.h — <model>.json, the facts a user needs to wire a generated model into a product.
//
// Takes a Program laid out for its target (passes/plan_layout.cpp) and the spec's text.
// Guarantees: one JSON
// object (keys in a fixed order, so the file diffs well) with the spec's name and SHA-256, the
// generator's version, the element type and maximum batch, every input, output and param with
// its shape (storage order, per example for inputs/outputs), every tensor's shape and role,
// the parameter counts (trainable, frozen, buffers), the arena sizes of the training and inference states (the target's
// layout; null for a state the target does not have), per-routine costs
// (ir/stats.h) with flops per example, and the embedded checkpoint if any. docs/model-card.md
// describes each field.
#pragma once

#include <set>
#include <string>

#include "emit/c_emit.h"
#include "ir/ir.h"

namespace cannl {

struct CardInfo {
  std::string spec_file;   // the spec's file name
  std::string spec_text;   // its bytes (hashed)
  bool f64 = false;
  std::string precision;        // the CUDA target's products (fp32, tf32, bf16); "" for none
  bool inference_state = true;  // the target has the forward-only state (the C target)
  const EmbeddedWeights* weights = nullptr;
  bool embedded = false;  // params compiled in, from `weights` or from a file of another run's
  // The spec tensors declared `buffer` (Buffer::tensor): counted with batch_norm's running
  // statistics as buffers, apart from the params (frozen or not).
  std::set<int> buffers;
};

std::string model_card(const ir::Program& p, const CardInfo& info);

}  // namespace cannl
